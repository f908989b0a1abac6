//! API calls from extensions that act on the session, carried out on the session runtime
//! (moved from `extensions/api.rs`, issue 23: the extensions floor holds only the
//! [`HostApi`] trait, which [`SessionHost`] implements here) (upstream docs/extensions.md
//! "ExtensionAPI", "ExtensionContext", "ExtensionCommandContext"): `pi.sendUserMessage`,
//! `pi.setSessionName`, `pi.appendEntry`, `pi.setLabel`, `pi.setActiveTools`, `pi.setModel`,
//! `pi.setThinkingLevel`, `ctx.abort`, `ctx.shutdown`, `ctx.compact`, `ctx.modelRegistry.complete`,
//! and the command context's
//! `waitForIdle`, `newSession`, `fork`, `switchSession`, `reload`.
//!
//! Session replacements go through [`AgentSessionRuntime`], the same path as the RPC commands
//! `new_session`, `fork` and `switch_session` (any run is settled first). Calls that answer
//! (`callApi` in host.mjs) get `{value}` or `{error}`; the session mirror the host reads its
//! synchronous accessors from ([`state`]) is pushed just before each answer.

use super::runtime::AgentSessionRuntime;
use super::{Admission, Admitting, AgentSession, InputSource, PromptInput, Responder};
use crate::extensions::api::{HostApi, RuntimeSlot};
use crate::extensions::host::CallReply;
use crate::extensions::Extensions;
use futures::FutureExt;
use pi_ai::{Model, ThinkingLevel};
use serde_json::{json, Value};
use std::sync::Arc;

/// The session runtime as the extensions see it ([`HostApi`]).
pub struct SessionHost(pub AgentSessionRuntime);

/// Binds `runtime` to `slot`: from now on the extensions' API calls, state mirror and tool
/// rebuilds act on it. A slot already bound keeps its runtime.
pub fn bind(slot: &RuntimeSlot, runtime: AgentSessionRuntime) {
    let _ = slot.set(Arc::new(SessionHost(runtime)));
}

impl HostApi for SessionHost {
    fn handle(&self, method: &str, params: &Value) -> CallReply {
        handle(&self.0, method, params)
    }

    fn state(&self, entries_from: Option<&str>) -> Value {
        state(&self.0, entries_from)
    }

    fn session_id(&self) -> String {
        self.0.session().state().session_id
    }

    fn on_default_tools(&self) -> bool {
        let session = self.0.session();
        let default: Vec<String> = self
            .0
            .factory()
            .loadout(session.cwd())
            .tools
            .iter()
            .map(|t| t.definition().name)
            .collect();
        default == session.active_tool_names()
    }

    fn rebuild_tools(&self, default: bool, added: Vec<String>) {
        let session = self.0.session();
        let loadout = if default {
            self.0.factory().loadout(session.cwd())
        } else {
            let mut active = session.active_tool_names();
            active.extend(added);
            self.0.factory().loadout_with(session.cwd(), &active)
        };
        session.set_loadout(loadout);
    }

    fn model(&self) -> Option<Model> {
        self.0.session().model()
    }

    fn refresh_model(&self, fresh: Model) {
        self.0.session().refresh_model(fresh);
    }

    fn extensions(&self) -> Option<Arc<Extensions>> {
        self.0.session().extensions().cloned()
    }
}

/// The text of a `sendUserMessage` content: a string, or the text blocks of a block array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The session mirror for the host (`ToHost::State`, wire.rs): `entries` are those after
/// `entries_from` when given (the host appends them), else all of them.
///
/// Shape: `{cwd, sessionFile, sessionId, sessionName, sessionDir, header, leafId, entries,
/// entriesFrom, model, thinkingLevel, activeTools, allTools, isIdle, hasPendingMessages,
/// contextUsage, systemPrompt, commands, availableModels}` (`availableModels`: the models with
/// credentials, as `get_available_models` lists them, for `ctx.modelRegistry`); `model` is the model object as `get_state` shows it (absent
/// without a model); `allTools` = `[{name, description, parameters, sourceInfo}]`.
fn state(runtime: &AgentSessionRuntime, entries_from: Option<&str>) -> Value {
    let session = runtime.session();
    let st = session.state();
    let all = || {
        session
            .entries(None)
            .unwrap_or_else(|_| crate::protocol::rpc::EntriesData {
                entries: vec![],
                leaf_id: None,
            })
    };
    let (entries, from) = match entries_from {
        Some(id) => match session.entries(Some(&Value::String(id.into()))) {
            Ok(e) => (e, Value::String(id.into())),
            Err(_) => (all(), Value::Null),
        },
        None => (all(), Value::Null),
    };
    let stats = session.session_stats();
    // `pi.getCommands()`: the `get_commands` list (extension commands, built-in ones,
    // templates, skills).
    let res = session.command_resources();
    let mut commands = session
        .extensions()
        .map(|e| e.commands())
        .unwrap_or_default();
    let shadowed: Vec<String> = commands.iter().map(|c| c.name.clone()).collect();
    commands.extend(crate::resources::commands::list(
        &res.prompt_templates,
        &res.skills,
        res.skill_commands,
        &shadowed,
    ));
    json!({
        "cwd": session.cwd().to_string_lossy(),
        "sessionFile": st.session_file,
        "sessionId": st.session_id,
        "sessionName": st.session_name,
        "sessionDir": session.session_dir(),
        "header": session.header_json(),
        "leafId": entries.leaf_id,
        "entries": entries.entries,
        "entriesFrom": from,
        "model": session.model(),
        "availableModels": session.available_models(),
        "thinkingLevel": st.thinking_level,
        "activeTools": session.active_tool_names(),
        "allTools": all_tools(runtime),
        "isIdle": !st.is_streaming && !st.is_compacting,
        "hasPendingMessages": st.pending_message_count > 0,
        "contextUsage": stats.context_usage,
        "systemPrompt": session.system_prompt(),
        "commands": commands,
    })
}

/// `pi.getAllTools()`: every tool a session of this process can offer, built-in first, with
/// upstream's `sourceInfo` (`builtin:<name>` for ours, the extension's path for theirs).
fn all_tools(runtime: &AgentSessionRuntime) -> Value {
    let factory = runtime.factory();
    let session = runtime.session();
    let tools = factory.all_tools(session.cwd());
    let ext_paths = session
        .extensions()
        .map(|e| e.tool_paths())
        .unwrap_or_default();
    Value::Array(
        tools
            .iter()
            .map(|t| {
                let d = t.definition();
                let source = match ext_paths.iter().find(|(n, _)| *n == d.name) {
                    Some((_, path)) => json!({"path": path, "source": "local", "scope": "user", "origin": "top-level"}),
                    None => json!({"path": format!("builtin:{}", d.name), "source": "builtin", "scope": "temporary", "origin": "top-level"}),
                };
                json!({
                    "name": d.name,
                    "description": d.description,
                    "parameters": d.parameters,
                    "exposure": "direct",
                    "sourceInfo": source,
                })
            })
            .collect(),
    )
}

/// A call answered with `{value}` after the mirror has been pushed.
fn answer(runtime: &AgentSessionRuntime, value: Value) -> Value {
    push(runtime);
    json!({ "value": value })
}

/// A failed call: `{error}` (the host throws it in the extension).
fn failure(runtime: &AgentSessionRuntime, error: String) -> Value {
    push(runtime);
    json!({ "error": error })
}

fn push(runtime: &AgentSessionRuntime) {
    if let Some(ext) = runtime.session().extensions() {
        ext.push_state();
    }
}

fn later(work: impl std::future::Future<Output = Value> + Send + 'static) -> CallReply {
    CallReply::Later(work.boxed())
}

/// Carries out one API call (`method` as upstream spells it, `params` as the host sends them).
/// Unknown methods are answered `{error}` (and ignored when nothing waits for them).
fn handle(runtime: &AgentSessionRuntime, method: &str, params: &Value) -> CallReply {
    let runtime = runtime.clone();
    if let Some(reply) = command_context_call(&runtime, method, params) {
        return reply;
    }
    let session = runtime.session();
    let str_param = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
    match method {
        "setSessionName" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if let Err(e) = session.set_session_name(name) {
                tracing::warn!("extension setSessionName: {e}");
            }
        }
        "sendUserMessage" => send_user_message(&session, params),
        "sendMessage" => {
            let message = super::custom_message(params.get("message").unwrap_or(&Value::Null));
            let deliver = params.pointer("/options/deliverAs").and_then(Value::as_str);
            let trigger = params
                .pointer("/options/triggerTurn")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if let Some(work) = session.send_custom_message(message, deliver, trigger) {
                tokio::spawn(work);
            }
        }
        "appendEntry" => {
            let custom_type = params
                .get("customType")
                .and_then(Value::as_str)
                .unwrap_or("");
            let data = params.get("data").cloned().filter(|d| !d.is_null());
            if let Err(e) = session.append_custom_entry(custom_type, data) {
                tracing::warn!("extension appendEntry: {e}");
            }
        }
        "setLabel" => {
            let id = str_param("entryId").unwrap_or_default();
            let label = str_param("label");
            if let Err(e) = session.set_label(&id, label.as_deref()) {
                tracing::warn!("extension setLabel: {e}");
            }
        }
        "setActiveTools" => {
            let names: Vec<String> = params
                .get("names")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let loadout = runtime.factory().loadout_with(session.cwd(), &names);
            session.set_loadout(loadout);
            push(&runtime);
        }
        "setThinkingLevel" => {
            if let Some(level) = params
                .get("level")
                .and_then(Value::as_str)
                .and_then(ThinkingLevel::parse)
            {
                session.set_thinking_level(level);
            }
            push(&runtime);
        }
        "setModel" => {
            // Upstream: `false` when the provider has no credentials (the model is then not
            // among the available ones).
            let provider = str_param("provider").unwrap_or_default();
            let id = str_param("id").unwrap_or_default();
            let ok = session.set_model(&provider, &id).is_ok();
            return CallReply::Now(answer(&runtime, Value::Bool(ok)));
        }
        "abort" => {
            tokio::spawn(async move { session.abort().await });
        }
        "shutdown" => runtime.request_shutdown(),
        "compact" => {
            let custom = str_param("customInstructions");
            return later(async move {
                match session.compact(custom).await {
                    Ok(r) => answer(&runtime, serde_json::to_value(r).unwrap_or(Value::Null)),
                    Err(e) => failure(&runtime, e),
                }
            });
        }
        "complete" => {
            let provider = str_param("provider").unwrap_or_default();
            let id = str_param("id").unwrap_or_default();
            let context = params.get("context").cloned().unwrap_or(Value::Null);
            let options = params.get("options").cloned().unwrap_or(Value::Null);
            return later(async move {
                match session
                    .complete_for_extension(&provider, &id, &context, &options)
                    .await
                {
                    Ok(m) => answer(&runtime, m),
                    Err(e) => failure(&runtime, e),
                }
            });
        }
        other => {
            tracing::debug!("extension call {other} is not supported yet");
            return CallReply::Now(
                json!({"error": format!("{other} is not supported by this pi build")}),
            );
        }
    }
    CallReply::Now(json!({ "value": null }))
}

/// The command context's calls that wait for the session or replace it (`waitForIdle`,
/// `newSession`, `fork`, `switchSession`, `reload`); `None` for any other method.
fn command_context_call(
    runtime: &AgentSessionRuntime,
    method: &str,
    params: &Value,
) -> Option<CallReply> {
    let runtime = runtime.clone();
    let str_param = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
    let reply = match method {
        "waitForIdle" => later(async move {
            runtime.session().wait_idle().await;
            answer(&runtime, Value::Null)
        }),
        "newSession" => {
            let parent = str_param("parentSession");
            later(async move {
                match runtime.new_session(parent).await {
                    Ok(cancelled) => answer(&runtime, json!({ "cancelled": cancelled })),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        "fork" => {
            let entry_id = str_param("entryId").unwrap_or_default();
            let at = params.get("position").and_then(Value::as_str) == Some("at");
            later(async move {
                let r = if at {
                    runtime.clone_through(&entry_id).await
                } else {
                    runtime.fork(&entry_id).await.map(|t| t.is_none())
                };
                match r {
                    Ok(cancelled) => answer(&runtime, json!({ "cancelled": cancelled })),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        "switchSession" => {
            let path = str_param("sessionPath").unwrap_or_default();
            later(async move {
                match runtime.switch_session(&path).await {
                    Ok(cancelled) => answer(&runtime, json!({ "cancelled": cancelled })),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        "reload" => later(async move {
            match runtime.reload_extensions().await {
                Ok(()) => answer(&runtime, Value::Null),
                Err(e) => failure(&runtime, e),
            }
        }),
        _ => return None,
    };
    Some(reply)
}

/// `pi.sendUserMessage(content, {deliverAs})`: admitted like a prompt with source
/// `extension` (its `input` handlers run; no commands or template expansion, upstream's
/// default): starts a run when idle; while streaming it is queued as `deliverAs` says
/// (`steer`, else `followUp`).
fn send_user_message(session: &AgentSession, params: &Value) {
    let text = text_of(params.get("content").unwrap_or(&Value::Null));
    let deliver = params
        .pointer("/options/deliverAs")
        .and_then(Value::as_str)
        .unwrap_or("followUp");
    let input = PromptInput {
        text,
        images: vec![],
        streaming_behavior: Some(deliver.to_string()),
        source: InputSource::Extension,
        commands: false,
        agent_dir: None,
    };
    let respond = Responder::new(|r| {
        if let Err(e) = r {
            tracing::warn!("extension sendUserMessage: {e}");
        }
    });
    match session.admit(input, respond) {
        Admitting::Done(Admission::Started(run)) => {
            tokio::spawn(run);
        }
        Admitting::Done(_) => {}
        Admitting::Pending(work) => {
            tokio::spawn(async move {
                if let Admission::Started(run) = work.await {
                    run.await
                }
            });
        }
    }
}
