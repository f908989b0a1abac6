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
    ProviderCall, ProviderCallResult, ProviderStreamEvent, StreamRequestOptions, ToHost,
    TranscriptContext,
};
use crate::config::models::ProviderResolver;
use crate::config::ModelRegistry;
use futures::StreamExt;
use pi_ai::{
    AssistantMessage, AssistantMessageEvent, AssistantStream, Content, Context, Model, Provider,
    StopReason, StreamOptions,
};
use serde_json::Value;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;

/// The registry the session and the extension calls share.
pub type SharedRegistry = Arc<RwLock<ModelRegistry>>;

/// How long an aborted stream waits for the extension's own `error` event before pi ends it
/// as aborted itself (an extension that ignores its `signal`).
pub const ABORT_GRACE: Duration = Duration::from_secs(2);

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
    let call = ProviderCall::parse(method, params)?;
    let error = match (call, registry.write()) {
        (Err(e), _) => Some(format!("invalid {method} call: {e}")),
        (Ok(_), Err(_)) => Some("the model registry is unavailable".to_string()),
        (Ok(ProviderCall::Register(r)), Ok(mut reg)) => reg
            .register_extension_provider(&r.name, r.config, r.streams)
            .err(),
        (Ok(ProviderCall::Unregister { name }), Ok(mut reg)) => {
            reg.unregister_extension_provider(&name);
            None
        }
    };
    if let Some(rt) = runtime.get() {
        let session = rt.session();
        let fresh = session.model().and_then(|m| {
            let reg = registry.read().ok()?;
            reg.find(&m.provider, &m.id).filter(|f| **f != m).cloned()
        });
        if let Some(fresh) = fresh {
            session.refresh_model(fresh);
        }
    }
    let answer = serde_json::to_value(ProviderCallResult { error }).unwrap_or(Value::Null);
    Some(CallReply::Now(answer))
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
    msg: ToHost,
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
            options.cancel.clone(),
            tx,
        ));
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .boxed()
    }
}
