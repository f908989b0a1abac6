//! Extension providers (upstream docs/custom-provider.md, docs/extensions.md
//! "pi.registerProvider"): the registration calls from the host, and the adapter that streams a
//! response from an extension's `streamSimple`.
//!
//! * `pi.registerProvider(name, config)` / `pi.unregisterProvider(name)` reach pi as
//!   [`ProviderCall`]s; [`handle_call`] applies them to the shared [`ModelRegistry`]
//!   ([`ModelRegistry::register_extension_provider`]), so they count for startup model
//!   selection (calls made during the factory arrive before the load reply), `--list-models`,
//!   `get_available_models`, `set_model`, `cycle_model` and compaction, at once.
//! * A model of a provider registered with `streamSimple` whose `api` is the provider's `api`
//!   streams through [`ExtensionStreamProvider`] ([`resolver`]): the request goes to the host
//!   as [`ToHost::Stream`], the events the extension yields come back as
//!   [`ProviderStreamEvent`]s and become pi's [`AssistantMessageEvent`]s. Abort fires the
//!   extension's `signal`; a `streamSimple` that throws or ends without `done`/`error` gives an
//!   error message (classified for retry and overflow by its text, as every message without a
//!   typed error).

use super::host::{CallReply, ExtensionHost, HostError};
use super::wire::{
    AuthNotifyParams, AuthPromptAnswer, AuthPromptParams, CallResult, LoginEvent, LoginPrompt,
    ProviderAuthReply, ProviderCall, ProviderCallResult, ProviderStreamEvent, PublishModelsParams,
    RefreshCredential, RefreshModelsReply, RoutePrevious, RouteRequest, StreamRequestOptions,
    ToHost, TranscriptContext,
};
use crate::config::models::ProviderResolver;
use crate::config::ModelRegistry;
use futures::StreamExt;
use pi_ai::{
    AssistantMessage, AssistantMessageEvent, AssistantStream, Content, Context, Model, Provider,
    StopReason, StreamOptions,
};
use serde::Deserialize;
use serde_json::Value;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;

/// The registry the session and the extension calls share.
pub type SharedRegistry = Arc<RwLock<ModelRegistry>>;

/// How long an aborted stream waits for the extension's own `error` event before pi ends it
/// as aborted itself (an extension that ignores its `signal`).
pub const ABORT_GRACE: Duration = Duration::from_secs(2);

/// The API call handler of one extension host: provider calls ([`handle_call`]) go to
/// `registry`, every other call to the session bound to `runtime` ([`super::api::handle`]).
pub fn call_handler(
    registry: SharedRegistry,
    runtime: super::api::RuntimeSlot,
) -> super::host::CallHandler {
    Arc::new(move |method: String, params| {
        handle_call(&registry, &runtime, &method, &params)
            .unwrap_or_else(|| super::api::handle(&runtime, &method, &params))
    })
}

/// Applies a `registerProvider` / `unregisterProvider` call to `registry`, then gives the
/// session (once `runtime` is bound) the registry's current definition of its model; `None`
/// for any other method. The answer is `{}` or `{error}` (upstream's message; the host reports
/// it as an `extension_error` of event `register_provider`).
pub fn handle_call(
    registry: &SharedRegistry,
    runtime: &super::api::RuntimeSlot,
    method: &str,
    params: &Value,
) -> Option<CallReply> {
    match method {
        "authNotify" => {
            let p = AuthNotifyParams::deserialize(params).unwrap_or_default();
            login_notify(&p.event);
            return Some(CallReply::Now(CallResult::Null));
        }
        "authPrompt" => {
            let p = AuthPromptParams::deserialize(params).unwrap_or_default();
            return Some(CallReply::Later(Box::pin(async move {
                let answer = tokio::task::spawn_blocking(move || login_prompt(&p.prompt))
                    .await
                    .ok()
                    .flatten();
                let answer = match answer {
                    Some(value) => AuthPromptAnswer::Value { value },
                    None => AuthPromptAnswer::Cancelled { cancelled: true },
                };
                CallResult::AuthPrompt(answer)
            })));
        }
        "publishModels" => {
            let p = PublishModelsParams::deserialize(params).unwrap_or_default();
            let agent_dir = registry
                .read()
                .ok()
                .and_then(|r| r.agent_dir().map(std::path::Path::to_path_buf));
            let error = match (agent_dir, p.provider.is_empty()) {
                (_, true) => Some("publish needs a provider".to_string()),
                (None, _) => None,
                (Some(dir), false) => publish_models(&dir, &p.provider, p.persist.as_ref()).err(),
            };
            return Some(CallReply::Now(CallResult::Provider(ProviderCallResult {
                error,
            })));
        }
        _ => {}
    }
    let call = ProviderCall::parse(method, params)?;
    // A provider with `refreshModels` registered once the session runs (a command, `/reload`)
    // is refreshed at once, as upstream refreshes after every registration.
    let mut refresh_later: Option<String> = None;
    let error = match (call, registry.write()) {
        (Err(e), _) => Some(format!("invalid {method} call: {e}")),
        (Ok(_), Err(_)) => Some("the model registry is unavailable".to_string()),
        (Ok(ProviderCall::Register(r)), Ok(mut reg)) => {
            let r = *r;
            if r.refreshes {
                refresh_later = Some(r.name.clone());
            }
            reg.register_extension_provider_full(
                &r.name,
                r.config,
                r.streams,
                r.oauth.map(|o| o.name),
                r.refreshes,
            )
            .err()
        }
        (Ok(ProviderCall::Unregister { name }), Ok(mut reg)) => {
            reg.unregister_extension_provider(&name);
            None
        }
        (Ok(ProviderCall::RegisterVirtual(d)), Ok(mut reg)) => reg
            .register_virtual_model(crate::config::models::virtual_model(
                &d.provider,
                &d.id,
                d.name.as_deref(),
                d.thinking_levels.as_deref(),
                d.context_window,
                d.max_tokens,
                d.input.as_deref(),
            ))
            .err(),
        (Ok(ProviderCall::UnregisterVirtual { provider, id }), Ok(mut reg)) => {
            reg.unregister_virtual_model(&provider, &id);
            None
        }
    };
    if let Some(rt) = runtime.get() {
        let fresh = rt.model().and_then(|m| {
            let reg = registry.read().ok()?;
            reg.find(&m.provider, &m.id).filter(|f| **f != m).cloned()
        });
        if let Some(fresh) = fresh {
            rt.refresh_model(fresh);
        }
        if let (Some(name), None, Some(ext)) = (refresh_later, &error, rt.extensions()) {
            let host = ext.host().clone();
            let registry = registry.clone();
            let offline = std::env::var_os("PI_OFFLINE").is_some_and(|v| !v.is_empty());
            tokio::spawn(async move {
                for (provider, error) in
                    refresh_models(&host, &registry, Some(&name), !offline).await
                {
                    tracing::warn!("Model refresh failed for {provider}: {error}");
                }
            });
        }
    }
    Some(CallReply::Now(CallResult::Provider(ProviderCallResult {
        error,
    })))
}

/// The file upstream keeps refreshed provider catalogs in (`core/models-store.js`
/// `FileModelsStore`): `<agent_dir>/models-store.json`, `{provider: snapshot}`.
pub const MODELS_STORE_FILE: &str = "models-store.json";

/// `context.publish({persist})` of a `refreshModels`: `persist` = the snapshot to keep for
/// `provider` (written under the file's lock, as upstream's `FileModelsStore.write`), `null` =
/// delete it; absent = nothing to store. `Err`: the file could not be updated (its text).
pub fn publish_models(
    agent_dir: &std::path::Path,
    provider: &str,
    persist: Option<&Value>,
) -> Result<(), String> {
    let Some(persist) = persist else {
        return Ok(());
    };
    let path = agent_dir.join(MODELS_STORE_FILE);
    crate::config::update_locked_json(&path, |entries| match persist {
        Value::Null => entries.remove(provider).is_some(),
        v => {
            entries.insert(provider.to_string(), v.clone());
            true
        }
    })
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// The stored snapshot of `provider` in `<agent_dir>/models-store.json` (`context.stored`).
pub fn stored_models(agent_dir: &std::path::Path, provider: &str) -> Value {
    match crate::config::read_json_file(&agent_dir.join(MODELS_STORE_FILE)) {
        crate::config::JsonFile::Parsed(Value::Object(m)) => {
            m.get(provider).cloned().unwrap_or(Value::Null)
        }
        _ => Value::Null,
    }
}

/// Prints one login event of an extension provider's OAuth `login` the way upstream's
/// `pi auth login` terminal does (`cli/auth-login.js`): `auth_url` → `Open this URL to sign
/// in:` and the indented URL (then its `instructions`), `device_code` → `Open <uri> and enter
/// code: <code>` and `Waiting for authentication...`, others → their `message`.
fn login_notify(event: &LoginEvent) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match event.kind.as_str() {
        "auth_url" => {
            let _ = writeln!(out, "Open this URL to sign in:\n  {}", event.url);
            if !event.instructions.is_empty() {
                let _ = writeln!(out, "{}", event.instructions);
            }
        }
        "device_code" => {
            let _ = writeln!(
                out,
                "Open {} and enter code: {}",
                event.verification_uri, event.user_code
            );
            let _ = writeln!(out, "Waiting for authentication...");
        }
        _ => {
            let _ = writeln!(out, "{}", event.message);
        }
    }
    let _ = out.flush();
}

/// Asks one question of an extension provider's login on standard error (`<message> (<placeholder>): `;
/// a `select` lists its options numbered first) and reads the answer, one line of standard
/// input; `None` at end of input.
fn login_prompt(prompt: &LoginPrompt) -> Option<String> {
    use std::io::{BufRead, Write};
    let mut err = std::io::stderr().lock();
    if prompt.kind == "select" {
        let _ = writeln!(err, "{}", prompt.message);
        let options = &prompt.options;
        for (i, o) in options.iter().enumerate() {
            let label = &o.label;
            match &o.description {
                Some(d) => {
                    let _ = writeln!(err, "  {}. {label} - {d}", i + 1);
                }
                None => {
                    let _ = writeln!(err, "  {}. {label}", i + 1);
                }
            }
        }
        let _ = write!(err, "Select 1-{}: ", options.len());
    } else {
        let placeholder = match prompt.placeholder.as_str() {
            "" => String::new(),
            p => format!(" ({p})"),
        };
        let _ = write!(err, "{}{placeholder}: ", prompt.message);
    }
    let _ = err.flush();
    drop(err);
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
    }
}

/// How long one OAuth operation of an extension may take (`refreshToken`, `getApiKey`).
pub const OAUTH_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs extension provider `provider`'s OAuth `op` in the host (blocking the calling thread
/// while the runtime keeps going; see [`crate::auth::http::blocking`]).
fn oauth_call(
    host: &Arc<ExtensionHost>,
    handle: &tokio::runtime::Handle,
    provider: &str,
    op: &str,
    credentials: Value,
    timeout: Option<Duration>,
) -> Result<ProviderAuthReply, String> {
    let id = host.next_id();
    let msg = ToHost::ProviderAuth {
        id,
        provider: provider.to_string(),
        op: op.to_string(),
        credentials,
    };
    handle
        .block_on(host.request(id, &msg, timeout))
        .map_err(|e| match e {
            HostError::Handler(text) => text,
            e => e.to_string(),
        })
        .map(|v| ProviderAuthReply::deserialize(&v).unwrap_or_default())
}

/// The request key of extension provider `provider`, whose `auth.json` entry is an OAuth
/// credential (upstream `composeOAuthAuth` / `resolveStoredOAuth`): when it has less than five
/// minutes left it is refreshed first through the extension's `refreshToken` — under the
/// `auth.json` lock, after re-reading the file (another process may have refreshed it), the
/// result stored as `{...credentials, type: "oauth"}` — then the extension's
/// `getApiKey(credentials)` gives the key. `Ok(None)`: no OAuth entry. Blocking; call it from
/// a runtime worker (it hands the worker over meanwhile).
///
/// # Errors
/// `OAuth refresh failed for <provider>: <cause>` (upstream's text) or the `getApiKey` /
/// store failure.
pub fn oauth_request_key(
    host: &Arc<ExtensionHost>,
    agent_dir: &std::path::Path,
    provider: &str,
) -> Result<Option<String>, String> {
    use crate::auth::refresh as r;
    let handle = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
    let host = host.clone();
    let agent_dir = agent_dir.to_path_buf();
    let provider = provider.to_string();
    crate::auth::http::blocking(move || {
        let mut outcome: Result<Option<Value>, String> = Ok(None);
        let written = crate::config::update_auth_file(&agent_dir, |entries| {
            let Some(current) = entries
                .get(&provider)
                .and_then(Value::as_object)
                .filter(|o| o.get("type").and_then(Value::as_str) == Some("oauth"))
                .cloned()
            else {
                return false;
            };
            if !r::needs_refresh(&current, r::threshold(None)) {
                outcome = Ok(Some(Value::Object(current)));
                return false;
            }
            let refreshed = oauth_call(
                &host,
                &handle,
                &provider,
                "refresh",
                Value::Object(current),
                Some(OAUTH_CALL_TIMEOUT),
            )
            .and_then(|v| {
                v.credentials
                    .ok_or_else(|| "refreshToken returned no credentials".to_string())
            });
            match refreshed {
                Ok(next) => {
                    entries.insert(provider.clone(), Value::Object(next.clone()));
                    outcome = Ok(Some(Value::Object(next)));
                    true
                }
                Err(cause) => {
                    outcome = Err(crate::config::RefreshError::Failed {
                        provider: provider.clone(),
                        cause,
                    }
                    .to_string());
                    false
                }
            }
        });
        let credentials = match (written, outcome) {
            (_, Err(e)) => return Err(e),
            (Err(e), Ok(_)) => {
                return Err(crate::config::RefreshError::Store {
                    provider,
                    cause: e.to_string(),
                }
                .to_string())
            }
            (Ok(_), Ok(None)) => return Ok(None),
            (Ok(_), Ok(Some(c))) => c,
        };
        let answer = oauth_call(
            &host,
            &handle,
            &provider,
            "apiKey",
            credentials,
            Some(OAUTH_CALL_TIMEOUT),
        )?;
        Ok(answer.api_key)
    })?
}

/// Runs extension provider `provider`'s OAuth `login` in the host: its callbacks print and
/// ask on this terminal ([`handle_call`] `authNotify` / `authPrompt`). Returns the credential
/// to store (`{...credentials, type: "oauth"}`).
///
/// # Errors
/// The login's error text (`Login cancelled` when an answer was not given).
pub async fn oauth_login(
    host: &Arc<ExtensionHost>,
    provider: &str,
) -> Result<serde_json::Map<String, Value>, String> {
    let id = host.next_id();
    let msg = ToHost::ProviderAuth {
        id,
        provider: provider.to_string(),
        op: "login".into(),
        credentials: Value::Null,
    };
    let answer = host.request(id, &msg, None).await.map_err(|e| match e {
        HostError::Handler(text) => text,
        e => e.to_string(),
    })?;
    ProviderAuthReply::deserialize(&answer)
        .unwrap_or_default()
        .credentials
        .ok_or_else(|| "the login returned no credentials".into())
}

/// How long one `refreshModels` may take (upstream bounds its refreshes by 15 s).
pub const REFRESH_MODELS_TIMEOUT: Duration = Duration::from_secs(15);

/// Calls the `refreshModels` of every extension provider that has one (upstream calls it on
/// each model refresh: after the extensions registered, at startup, and after a login) with
/// upstream's context (`credential`: the stored `auth.json` entry, else the resolved API key
/// as `{type: "api_key", key}`; `stored`: its `models-store.json` snapshot; `allowNetwork`),
/// and replaces each registration's models with the returned list. A failing refresh keeps
/// the models and is returned as `(provider, error)` (upstream records refresh errors and
/// keeps the previous catalog).
pub async fn refresh_models(
    host: &Arc<ExtensionHost>,
    registry: &SharedRegistry,
    only: Option<&str>,
    allow_network: bool,
) -> Vec<(String, String)> {
    let (names, agent_dir) = match registry.read() {
        Ok(r) => (
            r.extension_refreshes(),
            r.agent_dir().map(std::path::Path::to_path_buf),
        ),
        Err(_) => return Vec::new(),
    };
    let mut errors = Vec::new();
    for provider in names.into_iter().filter(|n| only.is_none_or(|o| o == n)) {
        let credential = match registry.read() {
            Ok(r) => match r.auth().get(&provider) {
                Some(crate::config::AuthCredential::OAuth { raw, .. }) => {
                    Some(RefreshCredential::Stored(raw))
                }
                _ => r.api_key(&provider).map(|key| RefreshCredential::ApiKey {
                    kind: "api_key",
                    key,
                }),
            },
            Err(_) => None,
        };
        let stored = agent_dir
            .as_deref()
            .map(|d| stored_models(d, &provider))
            .unwrap_or(Value::Null);
        let id = host.next_id();
        let msg = ToHost::RefreshModels {
            id,
            provider: provider.clone(),
            allow_network,
            credential,
            stored,
        };
        let answer = match host.request(id, &msg, Some(REFRESH_MODELS_TIMEOUT)).await {
            Ok(a) => a,
            Err(e) => {
                if matches!(e, HostError::Timeout(_)) {
                    host.abort(id);
                }
                errors.push((provider, e.to_string()));
                continue;
            }
        };
        let Some(parsed) = RefreshModelsReply::deserialize(&answer)
            .ok()
            .and_then(|r| r.models)
        else {
            continue;
        };
        let result = match (parsed, registry.write()) {
            (Err(e), _) => Err(format!("invalid refreshModels result: {e}")),
            (Ok(_), Err(_)) => Err("the model registry is unavailable".into()),
            (Ok(models), Ok(mut reg)) => reg.set_extension_models(&provider, models),
        };
        if let Err(e) = result {
            errors.push((provider, e));
        }
    }
    errors
}

/// One request's route of a virtual model (upstream `ModelRuntime.resolveModel`): the router
/// in the host answers `{provider, id, thinkingLevel, state}`.
///
/// # Errors
/// The router's error text (it threw, or returned no model).
pub fn route_blocking(
    host: &Arc<ExtensionHost>,
    request: RouteRequest,
    models: Vec<Model>,
) -> Result<super::wire::RouteResult, String> {
    let handle = tokio::runtime::Handle::try_current().map_err(|e| e.to_string())?;
    let host = host.clone();
    crate::auth::http::blocking(move || {
        let id = host.next_id();
        let msg = ToHost::Route {
            id,
            request: Box::new(request),
            models,
        };
        let answer = handle
            .block_on(host.request(id, &msg, None))
            .map_err(|e| match e {
                HostError::Handler(text) => text,
                e => e.to_string(),
            })?;
        serde_json::from_value::<super::wire::RouteResult>(answer)
            .map_err(|e| format!("invalid route: {e}"))
    })?
}

/// `inner`, except that models an extension streams ([`ModelRegistry::extension_streams`])
/// get an [`ExtensionStreamProvider`] on `host`.
pub fn resolver(
    inner: ProviderResolver,
    registry: SharedRegistry,
    host: Arc<ExtensionHost>,
) -> ProviderResolver {
    Arc::new(move |m: &Model| {
        let streams = registry
            .read()
            .map(|r| r.extension_streams(m))
            .unwrap_or(false);
        if streams {
            Some(Arc::new(ExtensionStreamProvider {
                host: host.clone(),
                provider: m.provider.clone(),
            }) as Arc<dyn Provider>)
        } else if crate::config::models::is_virtual(m) {
            Some(Arc::new(Unrouted) as Arc<dyn Provider>)
        } else {
            inner(m)
        }
    })
}

/// Streams responses from the `streamSimple` of the extension provider `provider`.
pub struct ExtensionStreamProvider {
    host: Arc<ExtensionHost>,
    provider: String,
}

impl ExtensionStreamProvider {
    /// The adapter for `provider`'s stream on `host`.
    pub fn new(host: Arc<ExtensionHost>, provider: impl Into<String>) -> Self {
        ExtensionStreamProvider {
            host,
            provider: provider.into(),
        }
    }
}

/// The final message pi writes when the extension's stream gave none.
fn failed(model: &Model, reason: StopReason, text: String) -> AssistantMessageEvent {
    let mut m = AssistantMessage::empty(model);
    m.stop_reason = reason;
    m.error_message = Some(text);
    AssistantMessageEvent::Error {
        reason,
        message: Box::new(m),
    }
}

/// pi's event for one of the extension's; `None` for one pi has no use for (a `toolcall_end`
/// whose block is not a tool call).
fn convert(model: &Model, ev: ProviderStreamEvent) -> Option<AssistantMessageEvent> {
    use AssistantMessageEvent as E;
    use ProviderStreamEvent as P;
    Some(match ev {
        P::Start { partial } => E::Start {
            partial: partial.unwrap_or_else(|| Box::new(AssistantMessage::empty(model))),
        },
        P::TextStart { content_index } => E::TextStart { content_index },
        P::TextDelta {
            content_index,
            delta,
        } => E::TextDelta {
            content_index,
            delta,
        },
        P::TextEnd {
            content_index,
            content,
        } => E::TextEnd {
            content_index,
            content,
        },
        P::ThinkingStart { content_index } => E::ThinkingStart { content_index },
        P::ThinkingDelta {
            content_index,
            delta,
        } => E::ThinkingDelta {
            content_index,
            delta,
        },
        P::ThinkingEnd {
            content_index,
            content,
        } => E::ThinkingEnd {
            content_index,
            content,
        },
        P::ToolCallStart {
            content_index,
            id,
            tool_name,
        } => E::ToolCallStart {
            content_index,
            id,
            tool_name,
        },
        P::ToolCallDelta {
            content_index,
            delta,
        } => E::ToolCallDelta {
            content_index,
            delta,
        },
        P::ToolCallEnd {
            content_index,
            tool_call: Content::ToolCall(tool_call),
        } => E::ToolCallEnd {
            content_index,
            tool_call,
        },
        P::ToolCallEnd { .. } => return None,
        P::Usage { usage } => E::Usage { usage },
        P::Done { reason, message } => E::Done { reason, message },
        P::Error { reason, error } => E::Error {
            reason,
            message: error,
        },
    })
}

/// Runs one stream request: forwards the converted events to `out` until the terminal one,
/// sending the host an abort when `cancel` fires.
async fn pump(
    host: Arc<ExtensionHost>,
    id: u64,
    msg: ToHost<'static>,
    model: Model,
    cancel: tokio_util::sync::CancellationToken,
    out: mpsc::UnboundedSender<AssistantMessageEvent>,
) {
    let mut events = host.open_stream(id);
    let reply = host.request(id, &msg, None);
    tokio::pin!(reply);
    let mut aborted = false;
    let grace = tokio::time::sleep(Duration::from_secs(86_400));
    tokio::pin!(grace);
    let forward = |ev: ProviderStreamEvent| -> bool {
        match convert(&model, ev) {
            Some(e) => {
                let terminal = matches!(
                    e,
                    AssistantMessageEvent::Done { .. } | AssistantMessageEvent::Error { .. }
                );
                let _ = out.send(e);
                terminal
            }
            None => false,
        }
    };
    let ended = loop {
        tokio::select! {
            biased;
            Some(ev) = events.recv() => {
                if forward(ev) {
                    break None;
                }
            }
            _ = cancel.cancelled(), if !aborted => {
                aborted = true;
                host.send(&ToHost::Abort { id });
                grace.as_mut().reset(tokio::time::Instant::now() + ABORT_GRACE);
            }
            _ = &mut grace, if aborted => {
                break Some(Ok(Value::Null));
            }
            r = &mut reply => break Some(r),
        }
    };
    host.close_stream(id);
    let Some(result) = ended else {
        return;
    };
    // Events routed before the reply are still queued.
    while let Ok(ev) = events.try_recv() {
        if forward(ev) {
            return;
        }
    }
    let last = match result {
        _ if aborted => failed(&model, StopReason::Aborted, "Request was aborted".into()),
        Err(HostError::Handler(text)) => failed(&model, StopReason::Error, text),
        Err(e) => failed(&model, StopReason::Error, e.to_string()),
        Ok(_) => failed(
            &model,
            StopReason::Error,
            "Stream ended without a final message".into(),
        ),
    };
    let _ = out.send(last);
}

impl Provider for ExtensionStreamProvider {
    fn api(&self) -> &'static str {
        "extension"
    }

    fn stream(&self, model: &Model, context: &Context, options: StreamOptions) -> AssistantStream {
        let id = self.host.next_id();
        let msg = ToHost::Stream {
            id,
            provider: self.provider.clone(),
            model: Box::new(model.clone()),
            context: TranscriptContext::from_context(context),
            options: StreamRequestOptions {
                api_key: options.api_key.clone().filter(|k| !k.is_empty()),
                reasoning: options.reasoning.map(|l| l.as_str().to_string()),
                max_tokens: options.max_tokens,
                session_id: options.session_id.clone(),
                headers: options
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            },
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(pump(
            self.host.clone(),
            id,
            msg,
            model.clone(),
            options.cancel,
            tx,
        ));
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .boxed()
    }
}

/// The stream of a virtual model that was not routed (upstream `unroutedStream`): requests go
/// to the model its router picks, so reaching this is an error.
struct Unrouted;

impl Provider for Unrouted {
    fn api(&self) -> &'static str {
        crate::config::models::VIRTUAL_API
    }

    fn stream(
        &self,
        model: &Model,
        _context: &Context,
        _options: StreamOptions,
    ) -> AssistantStream {
        let last = failed(
            model,
            StopReason::Error,
            format!(
                "Virtual model {}/{} must be routed before streaming",
                model.provider, model.id
            ),
        );
        futures::stream::iter([last]).boxed()
    }
}

/// The custom entry type that keeps a virtual model's router state on the session branch
/// (upstream `VIRTUAL_MODEL_STATE_ENTRY`); its data is `{provider, modelId, state}`.
pub const VIRTUAL_STATE_ENTRY: &str = "pi.virtual-model-state";

/// Why a request of a virtual model is made (upstream docs/virtual-models.md "Route requests").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteReason {
    /// The first request after a message the user wrote.
    User,
    /// Any other request of the agent loop (after tool results, extension messages).
    Continuation,
    /// An automatic retry after a failed request.
    Retry,
    /// A request outside the agent loop (a compaction summary).
    Direct,
}

impl RouteReason {
    /// Upstream's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteReason::User => "user",
            RouteReason::Continuation => "continuation",
            RouteReason::Retry => "retry",
            RouteReason::Direct => "direct",
        }
    }
}

/// A virtual model's route for one request.
#[derive(Debug, Clone)]
pub struct Routed {
    /// The physical model the request goes to.
    pub model: Model,
    /// The thinking level, clamped to that model.
    pub thinking_level: pi_ai::ThinkingLevel,
    /// New router state to store on the branch (`None` = keep the current one).
    pub new_state: Option<Value>,
}

/// Routes one request of virtual model `model` (upstream `ModelRuntime.resolveModel`): the
/// router gets `{model, thinkingLevel, reason, state, previous, messages}` (`previous`: the
/// physical model of the latest successful response in `messages`), and must answer a
/// physical model among `available` (the models with credentials); the level is clamped to it.
///
/// # Errors
/// Upstream's texts: `Virtual model <p>/<id> routed to <p2>/<id2>, which is not a physical
/// model.` / `…, which has no credentials.`, or the router's own error.
pub fn route_virtual(
    host: &Arc<ExtensionHost>,
    model: &Model,
    level: pi_ai::ThinkingLevel,
    reason: RouteReason,
    state: Option<Value>,
    messages: &[pi_ai::Message],
    available: Vec<Model>,
) -> Result<Routed, String> {
    use crate::config::models::is_virtual;
    let name = format!("Virtual model {}/{}", model.provider, model.id);
    let previous = messages.iter().rev().find_map(|m| match m {
        pi_ai::Message::Assistant(a)
            if !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) =>
        {
            available
                .iter()
                .find(|x| x.provider == a.provider && x.id == a.model && !is_virtual(x))
                .cloned()
        }
        _ => None,
    });
    let request = RouteRequest {
        model: Box::new(model.clone()),
        thinking_level: level.as_str().to_string(),
        reason: reason.as_str().to_string(),
        messages: messages.to_vec(),
        state: state.filter(|_| reason != RouteReason::Direct),
        previous: previous.map(|p| RoutePrevious { model: Box::new(p) }),
    };
    let route = route_blocking(host, request, available.clone())?;
    let routed = format!("{name} routed to {}/{}", route.provider, route.id);
    let target = match available
        .iter()
        .find(|m| m.provider == route.provider && m.id == route.id)
    {
        Some(m) if is_virtual(m) => {
            return Err(format!("{routed}, which is not a physical model."))
        }
        Some(m) => m.clone(),
        None => return Err(format!("{routed}, which has no credentials.")),
    };
    let chosen = route
        .thinking_level
        .as_deref()
        .and_then(pi_ai::ThinkingLevel::parse)
        .unwrap_or(level);
    let thinking_level = pi_ai::models::clamp_thinking_level(&target, chosen);
    let new_state = (route.state_changed && reason != RouteReason::Direct).then_some(route.state);
    Ok(Routed {
        model: target,
        thinking_level,
        new_state,
    })
}
