//! API calls from extensions that act on the session, carried out on the session runtime
//! (moved from `extensions/api.rs`, issue 23: the extensions floor holds only the
//! [`HostApi`] trait, which [`SessionHost`] implements here) (upstream docs/extensions.md
//! "ExtensionAPI", "ExtensionContext", "ExtensionCommandContext"): `pi.sendUserMessage`,
//! `pi.setSessionName`, `pi.appendEntry`, `pi.setLabel`, `pi.setActiveTools`, `pi.setModel`,
//! `pi.setThinkingLevel`, `ctx.abort`, `ctx.shutdown`, `ctx.compact`, `ctx.modelRegistry.complete`,
//! and the command context's
//! `waitForIdle`, `newSession` (and its `setup`), `fork`, `switchSession`, `reload`.
//!
//! Session replacements go through [`AgentSessionRuntime`], the same path as the RPC commands
//! `new_session`, `fork` and `switch_session` (any run is settled first). Calls that answer
//! (`callApi` in host.mjs) get `{value}` or `{error}`; the session mirror the host reads its
//! synchronous accessors from ([`state`]) is pushed just before each answer.

use super::runtime::AgentSessionRuntime;
use super::{Admission, Admitting, AgentSession, InputSource, PromptInput, Responder};
use crate::extensions::api::{HostApi, RuntimeSlot};
use crate::extensions::host::CallReply;
use crate::extensions::wire::{
    AppendEntryParams, CallAnswer, CallParams, CallResult, Cancelled, CompactParams,
    CompleteParams, ForkParams, NavigateTreeParams, NewSessionParams, SendMessageParams,
    SendUserMessageParams, SessionMirror, SessionSetupParams, SessionToolInfo,
    SetActiveToolsParams, SetLabelParams, SetModelParams, SetSessionNameParams,
    SetThinkingLevelParams, SourceInfo, SwitchSessionParams,
};
use crate::extensions::Extensions;
use futures::FutureExt;
use pi_ai::{Model, ThinkingLevel};
use serde::Serialize;
use serde_json::Value;
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

    fn state(&self, entries_from: Option<&str>) -> SessionMirror {
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

/// The session mirror for the host (`ToHost::State`, wire.rs): `entries` are those after
/// `entries_from` when given (the host appends them), else all of them.
///
/// Shape: `{cwd, sessionFile, sessionId, sessionName, sessionDir, header, leafId, entries,
/// entriesFrom, model, thinkingLevel, activeTools, allTools, isIdle, hasPendingMessages,
/// contextUsage, systemPrompt, commands, availableModels}` (`availableModels`: the models with
/// credentials, as `get_available_models` lists them, for `ctx.modelRegistry`); `model` is the model object as `get_state` shows it (absent
/// without a model); `allTools` = `[{name, description, parameters, sourceInfo}]`.
fn state(runtime: &AgentSessionRuntime, entries_from: Option<&str>) -> SessionMirror {
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
            Ok(e) => (e, Some(id.to_string())),
            Err(_) => (all(), None),
        },
        None => (all(), None),
    };
    let stats = session.session_stats();
    // `pi.getCommands()`: the `get_commands` list (extension commands, built-in ones,
    // templates, skills).
    let commands = session.commands();
    SessionMirror {
        cwd: session.cwd().to_string_lossy().into_owned(),
        session_file: st.session_file,
        session_id: st.session_id,
        session_name: st.session_name,
        session_dir: session.session_dir(),
        header: session.header_json(),
        leaf_id: entries.leaf_id,
        entries: entries.entries,
        entries_from: from,
        model: session.model(),
        available_models: session.available_models(),
        thinking_level: st.thinking_level,
        active_tools: session.active_tool_names(),
        all_tools: all_tools(runtime),
        is_idle: !st.is_streaming && !st.is_compacting,
        has_pending_messages: st.pending_message_count > 0,
        context_usage: stats.context_usage,
        system_prompt: session.system_prompt(),
        commands,
    }
}

/// `v` as JSON (`null` should it not serialize, which these shapes always do).
fn to_json(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `pi.getAllTools()`: every tool a session of this process can offer, built-in first, with
/// upstream's `sourceInfo` (`builtin:<name>` for ours, the extension's path for theirs).
fn all_tools(runtime: &AgentSessionRuntime) -> Vec<SessionToolInfo> {
    let factory = runtime.factory();
    let session = runtime.session();
    let tools = factory.all_tools(session.cwd());
    let ext_paths = session
        .extensions()
        .map(|e| e.tool_paths())
        .unwrap_or_default();
    tools
        .iter()
        .map(|t| {
            let d = t.definition();
            let source = match ext_paths.iter().find(|(n, _)| *n == d.name) {
                Some((_, path)) => SourceInfo::extension(path),
                None => SourceInfo::builtin(&d.name),
            };
            SessionToolInfo::direct(d.name, d.description, d.parameters, source)
        })
        .collect()
}

/// A call answered with `{value}` after the mirror has been pushed.
fn answer(runtime: &AgentSessionRuntime, value: impl Serialize) -> CallResult {
    push(runtime);
    CallResult::Answer(CallAnswer::Value {
        value: to_json(&value),
    })
}

/// A failed call: `{error}` (the host throws it in the extension).
fn failure(runtime: &AgentSessionRuntime, error: String) -> CallResult {
    push(runtime);
    CallResult::Answer(CallAnswer::Error { error })
}

fn push(runtime: &AgentSessionRuntime) {
    if let Some(ext) = runtime.session().extensions() {
        ext.push_state();
    }
}

fn later(work: impl std::future::Future<Output = CallResult> + Send + 'static) -> CallReply {
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
    match method {
        "setSessionName" => {
            let p = SetSessionNameParams::read(params);
            if let Err(e) = session.set_session_name(&p.name) {
                tracing::warn!("extension setSessionName: {e}");
            }
        }
        "sendUserMessage" => send_user_message(&session, SendUserMessageParams::read(params)),
        "sendMessage" => {
            let p = SendMessageParams::read(params);
            let message = super::custom_message(&p.message);
            let deliver = p.options.deliver_as.as_deref();
            let trigger = p.options.trigger_turn;
            if let Some(work) = session.send_custom_message(message, deliver, trigger) {
                tokio::spawn(work);
            }
        }
        "appendEntry" => {
            let p = AppendEntryParams::read(params);
            if let Err(e) = session.append_custom_entry(&p.custom_type, p.data) {
                tracing::warn!("extension appendEntry: {e}");
            }
        }
        "setLabel" => {
            let p = SetLabelParams::read(params);
            if let Err(e) = session.set_label(&p.entry_id, p.label.as_deref()) {
                tracing::warn!("extension setLabel: {e}");
            }
        }
        "setActiveTools" => {
            let names = SetActiveToolsParams::read(params).names;
            let loadout = runtime.factory().loadout_with(session.cwd(), &names);
            session.set_loadout(loadout);
            push(&runtime);
        }
        "setThinkingLevel" => {
            if let Some(level) = SetThinkingLevelParams::read(params)
                .level
                .as_deref()
                .and_then(ThinkingLevel::parse)
            {
                session.set_thinking_level(level);
            }
            push(&runtime);
        }
        "setModel" => {
            // Upstream: `false` when the provider has no credentials (the model is then not
            // among the available ones).
            let p = SetModelParams::read(params);
            let ok = session.set_model(&p.provider, &p.id).is_ok();
            return CallReply::Now(answer(&runtime, ok));
        }
        "abort" => {
            tokio::spawn(async move { session.abort().await });
        }
        "shutdown" => runtime.request_shutdown(),
        "compact" => {
            let custom = CompactParams::read(params).custom_instructions;
            return later(async move {
                match session.compact(custom).await {
                    Ok(r) => answer(&runtime, r),
                    Err(e) => failure(&runtime, e),
                }
            });
        }
        "complete" => {
            let p = CompleteParams::read(params);
            return later(async move {
                match session
                    .complete_for_extension(&p.provider, &p.id, &p.context, &p.options)
                    .await
                {
                    Ok(m) => answer(&runtime, m),
                    Err(e) => failure(&runtime, e),
                }
            });
        }
        other => {
            tracing::debug!("extension call {other} is not supported yet");
            return CallReply::Now(CallAnswer::unsupported(other).into());
        }
    }
    CallReply::Now(CallAnswer::done().into())
}

/// The command context's calls that wait for the session or replace it (`waitForIdle`,
/// `newSession`, `fork`, `switchSession`, `navigateTree`, `reload`); `None` for any other
/// method.
fn command_context_call(
    runtime: &AgentSessionRuntime,
    method: &str,
    params: &Value,
) -> Option<CallReply> {
    let runtime = runtime.clone();
    let reply = match method {
        "waitForIdle" => later(async move {
            runtime.session().wait_idle().await;
            answer(&runtime, Value::Null)
        }),
        "newSession" => {
            let parent = NewSessionParams::read(params).parent_session;
            later(async move {
                match runtime.new_session(parent).await {
                    Ok(cancelled) => answer(&runtime, Cancelled { cancelled }),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        // After `newSession`: what its `setup(sessionManager)` appended (upstream runs `setup`
        // on the new session's manager, then `refreshContext`, before `withSession`).
        "sessionSetup" => {
            let entries = SessionSetupParams::read(params).entries;
            later(async move {
                match runtime.session().apply_setup_entries(&entries) {
                    Ok(()) => answer(&runtime, Value::Null),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        "fork" => {
            let p = ForkParams::read(params);
            let (at, entry_id) = (p.at(), p.entry_id);
            later(async move {
                let r = if at {
                    runtime.clone_through(&entry_id).await
                } else {
                    runtime.fork(&entry_id).await.map(|t| t.is_none())
                };
                match r {
                    Ok(cancelled) => answer(&runtime, Cancelled { cancelled }),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        "switchSession" => {
            let path = SwitchSessionParams::read(params).session_path;
            later(async move {
                match runtime.switch_session(&path).await {
                    Ok(cancelled) => answer(&runtime, Cancelled { cancelled }),
                    Err(e) => failure(&runtime, e),
                }
            })
        }
        "navigateTree" => {
            let p = NavigateTreeParams::read(params);
            let options = super::tree::NavigateOptions {
                summarize: p.summarize,
                custom_instructions: p.custom_instructions,
                replace_instructions: p.replace_instructions,
                label: p.label,
            };
            later(async move {
                let session = runtime.session();
                match session.navigate_tree(&p.target_id, options).await {
                    // Upstream's RPC mode answers `{cancelled}` only.
                    Ok(n) => answer(
                        &runtime,
                        Cancelled {
                            cancelled: n.cancelled,
                        },
                    ),
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
fn send_user_message(session: &AgentSession, params: SendUserMessageParams) {
    let text = params.text();
    let deliver = params
        .options
        .deliver_as
        .unwrap_or_else(|| "followUp".to_string());
    let input = PromptInput {
        text,
        images: vec![],
        streaming_behavior: Some(deliver),
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
