//! What the extension API reads and changes on a session beyond the RPC commands
//! (upstream docs/extensions.md "ExtensionAPI Methods"; extensions/api.rs calls these).

use super::factory::SessionFactory;
use super::queues::QueueKind;
use super::{AgentSession, Loadout, PromptOutcome};
use crate::extensions::wire::{CompleteContext, CompleteOptions, CustomMessageDraft, MessageRole};
use crate::protocol::rpc::RpcEvent;
use crate::session::{CustomMessageEntry, EntryKind, SessionEntry};
use pi_agent::AgentTool;
use pi_ai::{Message, UserContent};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// The `custom_message` entry of a custom message (`role: "custom"`, as `pi.sendMessage`
/// makes them; sessions.md §3.7); `None` for any other message.
pub(super) fn custom_message_entry(message: &Message) -> Option<EntryKind> {
    let Message::Other(m) = message else {
        return None;
    };
    if !MessageRole::is_custom(m) {
        return None;
    }
    let draft = CustomMessageDraft::deserialize(m).unwrap_or_default();
    let display = draft.shown();
    Some(EntryKind::CustomMessage(CustomMessageEntry {
        custom_type: draft
            .custom_type
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        content: draft
            .content
            .and_then(|c| serde_json::from_value::<UserContent>(c).ok())
            .unwrap_or_else(|| UserContent::Text(String::new())),
        display,
        details: draft.details,
    }))
}

/// The custom message of `pi.sendMessage({customType, content, display, details})`
/// ([`CustomMessageDraft::into_message`], stamped now).
pub fn custom_message(message: &Value) -> Message {
    CustomMessageDraft::from_value(message)
        .unwrap_or_default()
        .into_message(pi_ai::now_ms())
}

impl AgentSession {
    /// `pi.getActiveTools()`: the names of the tools offered to the model, in order.
    pub fn active_tool_names(&self) -> Vec<String> {
        self.inner
            .setup
            .lock()
            .loadout
            .tools
            .iter()
            .map(|t| t.definition().name)
            .collect()
    }

    /// `ctx.getSystemPrompt()`: the system prompt text sent to the model.
    pub fn system_prompt(&self) -> String {
        self.inner.setup.lock().loadout.system_prompt.clone()
    }

    /// `ctx.sessionManager.getSessionDir()`: where the session file lives (`None` in memory).
    pub fn session_dir(&self) -> Option<String> {
        self.inner
            .store
            .lock()
            .session_dir()
            .map(|d| d.to_string_lossy().into_owned())
    }

    /// `pi.setLabel(entryId, label)`: appends a `label` entry (`None` clears the label) and
    /// emits `entry_appended`. `Err`: no such entry, or the write failed.
    pub fn set_label(&self, entry_id: &str, label: Option<&str>) -> Result<(), String> {
        let entry = {
            let mut store = self.inner.store.lock();
            store
                .append_label_change(entry_id, label)
                .map_err(|e| e.to_string())?
                .clone()
        };
        self.emit(RpcEvent::EntryAppended { entry });
        Ok(())
    }

    /// `ctx.newSession({setup})` (upstream `AgentSessionRuntime.newSession`): the entries the
    /// extension's `setup(sessionManager)` appended to the new session, in order, as session
    /// entry JSON (`{type, id, …}` as upstream's `SessionManager.append*` build them). Each is
    /// appended as a child of the leaf, keeping the id the extension was given; then the
    /// context is rebuilt from the session (upstream `refreshContext`). Like upstream's direct
    /// `SessionManager` writes, nothing is emitted. Entries of an unknown type are skipped.
    /// `Err`: a write failed (the entries before it stay).
    pub fn apply_setup_entries(&self, entries: &[Value]) -> Result<(), String> {
        let mut store = self.inner.store.lock();
        let mut result = Ok(());
        for value in entries {
            let Some(entry) = SessionEntry::from_value(value.clone()) else {
                tracing::warn!("newSession setup: an entry that does not parse was skipped");
                continue;
            };
            if matches!(entry.kind, EntryKind::Unknown { .. } | EntryKind::Stored(_)) {
                tracing::warn!("newSession setup: an entry of an unknown type was skipped");
                continue;
            }
            if let Err(e) = store.append_entry_as(&entry.id, entry.kind) {
                result = Err(e.to_string());
                break;
            }
        }
        let context = store.build_context();
        drop(store);
        *self.transcript() = context;
        result
    }
}

impl AgentSession {
    /// `pi.sendMessage(message, {deliverAs, triggerTurn})` (upstream docs/extensions.md):
    /// idle, the message is entered at once (`custom_message` entry, `message_start` /
    /// `message_end`) and, with `triggerTurn` (not for `nextTurn`), a run starts that answers
    /// it — returned to be spawned. While streaming, `steer` (default) and `followUp` queue it
    /// (without `queue_update`), `triggerTurn: false` enters it once the run has settled.
    /// `nextTurn` (idle or not) holds it until the next run, which enters it right after its
    /// prompt (upstream `sendCustomMessage`).
    pub fn send_custom_message(
        &self,
        message: Message,
        deliver_as: Option<&str>,
        trigger_turn: bool,
    ) -> Option<futures::future::BoxFuture<'static, ()>> {
        use futures::FutureExt;
        let deliver = deliver_as.unwrap_or("steer");
        if deliver == "nextTurn" {
            self.inner.pending.lock().next_turn.push(message);
            return None;
        }
        if self.is_streaming() {
            match deliver {
                "steer" | "followUp" if trigger_turn || deliver_as.is_some() => {
                    let kind = if deliver == "followUp" {
                        QueueKind::FollowUp
                    } else {
                        QueueKind::Steering
                    };
                    // Upstream queues it on the agent directly: no `queue_update` (the
                    // client's queue lists only its own prompts).
                    self.inner.pending.lock().queues.push(kind, message);
                    return None;
                }
                _ => {
                    let this = self.clone();
                    return Some(
                        async move {
                            this.wait_settled().await;
                            this.enter_custom_message(message);
                        }
                        .boxed(),
                    );
                }
            }
        }
        if trigger_turn && self.inner.run.is_settling() {
            // From an `agent_settled` handler: entered and answered after that event, as
            // upstream defers it (`_deferredSettledActions`).
            let this = self.clone();
            let deliver_as = deliver_as.map(str::to_string);
            return Some(
                async move {
                    this.wait_settled().await;
                    if let Some(run) =
                        this.send_custom_message(message, deliver_as.as_deref(), trigger_turn)
                    {
                        run.await;
                    }
                }
                .boxed(),
            );
        }
        if trigger_turn && deliver != "nextTurn" {
            // The run starts with it, after its system message (upstream `_startRun` with a
            // custom trigger: `agent_start`, `turn_start`, then the message).
            match self.start_run(Some(message.clone()), None, None) {
                Ok(PromptOutcome::Started(run)) => return Some(run),
                Ok(PromptOutcome::Queued) => return None,
                Err(e) => tracing::warn!("extension sendMessage: {e}"),
            }
        }
        self.enter_custom_message(message);
        None
    }

    /// Enters a custom message while idle: entry, context, `message_start` / `message_end`.
    fn enter_custom_message(&self, message: Message) {
        self.emit(RpcEvent::MessageStart {
            message: message.clone(),
        });
        self.persist_message(&message);
        self.transcript().push(message.clone());
        self.emit(RpcEvent::MessageEnd { message });
    }
}

impl SessionFactory {
    /// Every tool a session in `cwd` can offer (`pi.getAllTools()`): all built-in tools, then
    /// the extensions' tools.
    pub fn all_tools(&self, cwd: &Path) -> Vec<Arc<dyn AgentTool>> {
        let mut tools =
            crate::tools::create_tools_with(cwd, &crate::tools::ALL_TOOLS, &self.tool_options);
        if let Some(ext) = &self.services.extensions {
            tools.extend(ext.tools());
        }
        tools
    }

    /// The loadout of `cwd` with exactly the tools named (`pi.setActiveTools(names)`; unknown
    /// names are ignored, as upstream). The system prompt is rebuilt for them.
    pub fn loadout_with(&self, cwd: &Path, names: &[String]) -> Loadout {
        let mut f = self.clone();
        f.tool_names = names
            .iter()
            .filter(|n| crate::tools::ALL_TOOLS.contains(&n.as_str()))
            .cloned()
            .collect();
        let mut loadout = f.loadout(cwd);
        loadout
            .tools
            .retain(|t| names.iter().any(|n| *n == t.definition().name));
        loadout
    }
}

impl AgentSession {
    /// `ctx.modelRegistry.complete(model, context, options)` (upstream ModelRegistry: one
    /// request to `model` with the session's credentials for it, the final assistant message
    /// returned). `provider`/`model_id` name a model with credentials (as `get_available_models`
    /// lists them); `context` is `{systemPrompt?, messages, tools?}` in pi's message shapes;
    /// `options` reads `maxTokens` (output cap; default the model's `maxTokens`) and
    /// `reasoning` (a thinking level). Returns the assistant message as JSON — with
    /// `stopReason: "error"` and `errorMessage` when the request failed, as upstream resolves
    /// (it does not throw) — or `Err` when the model is unknown, has no credentials, or the
    /// context cannot be read. Unlike an agent run it calls no extension hooks and records
    /// nothing in the session.
    pub async fn complete_for_extension(
        &self,
        provider: &str,
        model_id: &str,
        context: &Value,
        options: &Value,
    ) -> Result<Value, String> {
        let model = self
            .available_models()
            .into_iter()
            .find(|m| m.provider == provider && m.id == model_id)
            .ok_or_else(|| format!("Model not found: {provider}/{model_id}"))?;
        let adapter = (self.inner.services.provider)(&model)
            .ok_or_else(|| format!("No API provider for {}", model.api))?;
        let creds = self
            .request_credentials(&model)
            .await
            .map_err(|_| crate::config::no_api_key_message(Some(&model.provider)))?;
        if let Some(e) = creds.error {
            return Err(e);
        }
        let mut model = model;
        if let Some(base) = creds.base_url {
            model.base_url = base;
        }
        let context = CompleteContext::deserialize(context).unwrap_or_default();
        let options = CompleteOptions::deserialize(options).unwrap_or_default();
        let messages = context
            .messages
            .transpose()
            .map_err(|e| format!("complete: bad messages: {e}"))?
            .unwrap_or_default();
        let tools = context
            .tools
            .transpose()
            .map_err(|e| format!("complete: bad tools: {e}"))?
            .flatten()
            .unwrap_or_default();
        let request = pi_ai::Context {
            system_prompt: context.system_prompt.unwrap_or_default(),
            messages,
            tools,
        };
        let reasoning = options
            .reasoning
            .as_deref()
            .and_then(pi_ai::ThinkingLevel::parse)
            .filter(|l| *l != pi_ai::ThinkingLevel::Off && model.reasoning);
        let stream_options = pi_ai::StreamOptions {
            api_key: creds.api_key,
            reasoning,
            max_tokens: Some(options.max_tokens.unwrap_or(model.max_tokens).max(1)),
            session_id: options.session_id,
            headers: creds.headers,
            cancel: tokio_util::sync::CancellationToken::new(),
        };
        let tuning = pi_ai::RequestTuning {
            cache_retention: if options.cache_retention.as_deref() == Some("none") {
                pi_ai::CacheRetention::None
            } else {
                pi_ai::RequestTuning::default().cache_retention
            },
            ..Default::default()
        };
        let stream = adapter.stream_tuned(&model, &request, stream_options, tuning);
        let m = pi_ai::final_message(stream).await.unwrap_or_else(|| {
            let mut m = pi_ai::AssistantMessage::empty(&model);
            m.stop_reason = pi_ai::StopReason::Error;
            m.error_message = Some("Stream ended without a final message".into());
            m
        });
        serde_json::to_value(m).map_err(|e| e.to_string())
    }
}
