//! The run-shaping extension events (upstream docs/extensions.md "Agent Events", "Model
//! Events", "User Bash Events"): `before_agent_start`, `context`, `model_select`, `user_bash`,
//! and the shape of the agent/turn/message/tool notifications extensions receive.
//!
//! Each asks the host only when some extension has a handler for the event; a host that cannot
//! answer (died, timed out) is reported as `extension_error` and the run goes on unchanged,
//! except `user_bash`, whose failure fails the `bash` command as upstream does.

use super::host::ExtensionHost;
use super::wire::{
    BeforeAgentStartReply, BoundaryReply, ContextReply, CustomMessageDraft, ExtensionEvent,
    HostEvent, MessageEndReply, Notification, SystemPromptOptions, ToHost, UserBashEvent,
    UserBashReply,
};
use super::Extensions;
use crate::protocol::rpc::{EventSink, RpcEvent};
use crate::tools::shell::BashResult;
use pi_ai::{ImageContent, Message, Model};
use serde::Deserialize;
use serde_json::Value;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the `before_agent_start` handlers decided for one run.
#[derive(Debug, Default)]
pub struct BeforeAgentStart {
    /// `custom` messages to add after the prompt (role `custom`, with `customType`, `content`,
    /// `display`, `details` and a timestamp), in handler order.
    pub messages: Vec<Message>,
    /// The system prompt for this run, when a handler replaced it (the last one wins; each
    /// handler saw the previous one's text).
    pub system_prompt: Option<String>,
    /// What the handlers changed in `systemPromptOptions` (a forced prompt wins over them).
    pub prompt_edits: Option<super::wire::SystemPromptEdits>,
}

/// What the handlers of an actionable boundary (`turn_end`, `agent_before_settle`) proposed,
/// after all of them ran (upstream docs/extensions.md "turn_start / turn_end"): the draft
/// entries to append in order (not yet validated) and whether one continuation is wanted.
#[derive(Debug, Default)]
pub struct BoundaryProposal {
    /// Draft entries (`custom`, `custom_message`, `context_edit`, `compaction` objects), as the
    /// last handler that returned `entries` left them.
    pub entries: Vec<Value>,
    /// `continue` as the last handler that returned it left it.
    pub continue_run: bool,
}

/// What the `user_bash` handlers decided for one RPC `bash` command.
#[derive(Debug)]
pub enum UserBash {
    /// No handler took it: run it locally.
    Local,
    /// A handler returned `{result}`: record it as the command's result without running
    /// anything.
    Result(BashResult),
    /// A handler returned `{operations}` and the command ran through them in the host: its
    /// raw output, exit code (`None` when unknown) and whether it was aborted.
    Executed {
        /// Everything the command wrote, as received.
        output: String,
        /// Exit code, when the operations reported one.
        exit_code: Option<i32>,
        /// `abort_bash` stopped it.
        cancelled: bool,
    },
}

/// The agent-loop notifications whose handlers are waited for before the client sees the
/// event ([`Extensions::notify_awaited`], awaited by the agent loop; `message_end` and
/// `turn_end` handlers run earlier, at their own hooks). They are only emitted by the run task
/// (or a codemode script's nested calls), never from the task that reads the host's replies
/// (`tool_execution_update` of an extension tool is, and `message_update` is too frequent: both
/// are sent without waiting).
pub const AWAITED: &[&str] = &[
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_end",
    "tool_execution_start",
    "tool_execution_end",
    "agent_settled",
];

/// The type of `ev` when it is one of [`AWAITED`] whose handlers run when the client is to see
/// it (not `message_end` and `turn_end`, whose handlers ran at their own hooks); `None`
/// otherwise. Decided without serializing the event (`message_update` deltas pass here).
pub(super) fn awaited_kind(ev: &RpcEvent) -> Option<&'static str> {
    let t = match ev {
        RpcEvent::AgentStart => "agent_start",
        RpcEvent::AgentEnd { .. } => "agent_end",
        RpcEvent::TurnStart => "turn_start",
        RpcEvent::MessageStart { .. } => "message_start",
        RpcEvent::ToolExecutionStart { .. } => "tool_execution_start",
        RpcEvent::ToolExecutionEnd { .. } => "tool_execution_end",
        RpcEvent::AgentSettled { .. } => "agent_settled",
        _ => return None,
    };
    AWAITED.contains(&t).then_some(t)
}

thread_local! {
    /// Set while [`Delivery`] hands an event whose handlers were already notified to the sink,
    /// so that the tap ([`Extensions::tap`]) does not send it again. The sink is synchronous:
    /// the tap reads it on the same thread, before anything else can run there.
    static NOTIFIED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the event now passing the tap was already sent to the host by
/// [`Extensions::notify_awaited`] (clears the mark).
pub(super) fn take_notified() -> bool {
    NOTIFIED.with(|n| n.replace(false))
}

/// An awaited event on its way to the client ([`Extensions::notify_awaited`]): handed to the
/// sink by [`Delivery::deliver`] once the handlers answered, or when dropped before (the
/// notification then sent without waiting if it had not been sent yet), so that no event is
/// lost.
pub(super) struct Delivery {
    event: Option<RpcEvent>,
    sink: EventSink,
    host: Arc<ExtensionHost>,
    unsent: Option<ExtensionEvent>,
}

impl Delivery {
    /// `event` for `sink`, its extension shape `notification` not yet sent to `host`.
    pub(super) fn new(
        event: RpcEvent,
        sink: EventSink,
        host: Arc<ExtensionHost>,
        notification: ExtensionEvent,
    ) -> Self {
        Delivery {
            event: Some(event),
            sink,
            host,
            unsent: Some(notification),
        }
    }

    /// The notification to send now (`None` once taken): the caller sends it.
    pub(super) fn take_unsent(&mut self) -> Option<ExtensionEvent> {
        self.unsent.take()
    }

    /// Hands the event to the sink, marked as notified (once).
    pub(super) fn deliver(&mut self) {
        if let Some(ev) = self.event.take() {
            NOTIFIED.with(|n| n.set(true));
            (self.sink)(ev);
            NOTIFIED.with(|n| n.set(false));
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let Some(event) = self.unsent.take() {
            self.host.send(&ToHost::Event {
                id: None,
                event: Notification::Agent(Box::new(event)),
            });
        }
        self.deliver();
    }
}

impl Extensions {
    /// Runs the `before_agent_start` handlers for a run started by a user prompt
    /// (`messageType: "user"`, `prompt`, `images`); `system_prompt` is the prompt the run
    /// would use. Handlers that throw are reported (`extension_error`) and skipped.
    pub async fn before_agent_start(
        &self,
        prompt: &str,
        images: &[ImageContent],
        system_prompt: &str,
        options: SystemPromptOptions,
    ) -> BeforeAgentStart {
        if !self.handles("before_agent_start") {
            return BeforeAgentStart::default();
        }
        let id = self.host.next_id();
        let event = HostEvent::BeforeAgentStart {
            message_type: "user".into(),
            prompt: prompt.to_string(),
            system_prompt: system_prompt.to_string(),
            system_prompt_options: Box::new(options),
            // No images: upstream's `event.images` is undefined.
            images: (!images.is_empty()).then(|| images.to_vec()),
        };
        let msg = ToHost::HostEvent {
            id: Some(id),
            event,
        };
        let v = match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(v) => v,
            Err(e) => {
                for p in self.handlers_of("before_agent_start") {
                    self.error(&p, "before_agent_start", &e.to_string());
                }
                return BeforeAgentStart::default();
            }
        };
        let now = pi_ai::now_ms();
        let reply = BeforeAgentStartReply::deserialize(&v).unwrap_or_default();
        BeforeAgentStart {
            messages: reply
                .messages
                .iter()
                .filter_map(|m| custom_message(m, now))
                .collect(),
            system_prompt: reply.system_prompt,
            prompt_edits: reply.prompt_edits,
        }
    }

    /// Runs the handlers of an actionable boundary event (`turn_end` or
    /// `agent_before_settle`, built by the caller with empty `entries` and `continue: false`):
    /// each handler sees the proposal so far; a handler that throws is reported by the host
    /// and the others still run. A host that cannot answer is reported (`extension_error`)
    /// and proposes nothing.
    ///
    /// `cancel` is the run's token: after an abort the round gets [`super::host::ABORT_GRACE`].
    pub async fn boundary(
        &self,
        event: Notification<'_>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> BoundaryProposal {
        let kind = event.kind();
        if !self.handles(kind) || self.host.is_dead() {
            return BoundaryProposal::default();
        }
        let id = self.host.next_id();
        let msg = ToHost::Event {
            id: Some(id),
            event,
        };
        let reply = self
            .host
            .request_until(id, &msg, Some(self.hook_timeout), cancel)
            .await;
        match reply {
            Ok(v) => {
                let reply = BoundaryReply::deserialize(&v).unwrap_or_default();
                BoundaryProposal {
                    entries: reply.entries,
                    continue_run: reply.continue_run,
                }
            }
            Err(e) => {
                for p in self.handlers_of(kind) {
                    self.error(&p, kind, &e.to_string());
                }
                BoundaryProposal::default()
            }
        }
    }

    /// Runs the `message_end` handlers on a finalized message before pi persists it, sends it
    /// to the client or puts it in the context (upstream docs/extensions.md "message_start /
    /// message_update / message_end"): handlers chain (each sees the previous replacement) and
    /// the host rejects a replacement whose `role` differs (reported as `extension_error`, the
    /// message so far kept). Returns the message to use; a host that cannot answer, or a reply
    /// that does not decode as a message, keeps `message` (reported).
    ///
    /// `cancel` is the run's token: after an abort the round gets [`super::host::ABORT_GRACE`].
    pub async fn message_end(
        &self,
        message: Message,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Message {
        if !self.handles("message_end") || self.host.is_dead() {
            return message;
        }
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::HostEvent {
            id: Some(id),
            event: HostEvent::MessageEnd {
                message: Box::new(message.clone()),
            },
        };
        let reply = self
            .host
            .request_until(id, &msg, Some(self.hook_timeout), cancel)
            .await;
        match reply {
            Ok(Value::Null) => message,
            Ok(v) => match MessageEndReply::deserialize(&v) {
                Ok(MessageEndReply { message: Some(r) }) => r,
                Ok(MessageEndReply { message: None }) => message,
                Err(e) => {
                    for p in self.handlers_of("message_end") {
                        self.error(&p, "message_end", &format!("invalid message: {e}"));
                    }
                    message
                }
            },
            Err(e) => {
                for p in self.handlers_of("message_end") {
                    self.error(&p, "message_end", &e.to_string());
                }
                message
            }
        }
    }

    /// The `turnIndex` the next `turn_end` will carry (counted from 0 in each low-level run).
    pub fn turn_index(&self) -> u64 {
        self.shaper.turn_index.load(Ordering::SeqCst)
    }

    /// Reports a boundary failure (`extension_error` with path `<boundary>`, as upstream).
    pub fn boundary_error(&self, event: &str, error: &str) {
        self.error("<boundary>", event, error);
    }

    /// Whether `context` or `context_with_system` handlers are to see each LLM call's
    /// messages.
    pub fn transforms_context(&self) -> bool {
        (self.handles("context") || self.handles("context_with_system")) && !self.host.is_dead()
    }

    /// Runs the `context_with_system` handlers on the full transcript of one LLM call (after
    /// the `context` handlers; system messages included). Returns the list they left when it
    /// changed (sent as it is: it owns the request's prompt and tool declarations), `None`
    /// when nothing changed, no handler exists, or the reply failed or did not decode (each
    /// failure is an `extension_error`, and the request goes out as without the hook).
    pub async fn context_with_system(&self, messages: &[Message]) -> Option<Vec<Message>> {
        const EVENT: &str = "context_with_system";
        if !self.handles(EVENT) || self.host.is_dead() {
            return None;
        }
        let id = self.host.next_id();
        let msg = ToHost::HostEvent {
            id: Some(id),
            event: HostEvent::ContextWithSystem {
                messages: messages.to_vec(),
            },
        };
        let failed = |e: &str| {
            for p in self.handlers_of(EVENT) {
                self.error(&p, EVENT, e);
            }
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(Value::Null) => None,
            Ok(v) => match ContextReply::deserialize(&v) {
                Ok(reply) => Some(reply.messages),
                Err(e) => {
                    failed(&format!("invalid context_with_system messages: {e}"));
                    None
                }
            },
            Err(e) => {
                failed(&e.to_string());
                None
            }
        }
    }

    /// Runs the `context` handlers on the messages of one LLM call (system messages are not
    /// shown to them and are kept). Returns the list to send: the handlers' (chained) result,
    /// or `messages` unchanged when they changed nothing, failed or returned messages that do
    /// not decode. Nothing is persisted.
    pub async fn context(&self, messages: Vec<Message>) -> Vec<Message> {
        if !self.handles("context") {
            return messages;
        }
        let visible: Vec<Message> = messages
            .iter()
            .filter(|m| !matches!(m, Message::System(_)))
            .cloned()
            .collect();
        let id = self.host.next_id();
        let msg = ToHost::HostEvent {
            id: Some(id),
            event: HostEvent::Context { messages: visible },
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(Value::Null) => messages,
            Ok(v) => {
                match ContextReply::deserialize(&v) {
                    Ok(ContextReply {
                        messages: mut changed,
                    }) => {
                        // The prompt and tool state go back at the head, folded into one
                        // system message (upstream `restoreSystemMessages`: the current
                        // system message ahead of the returned list).
                        let mut out: Vec<Message> =
                            crate::session::current_system_message(&messages)
                                .map(Message::System)
                                .into_iter()
                                .collect();
                        out.append(&mut changed);
                        out
                    }
                    Err(e) => {
                        for p in self.handlers_of("context") {
                            self.error(&p, "context", &format!("invalid context messages: {e}"));
                        }
                        messages
                    }
                }
            }
            Err(e) => {
                for p in self.handlers_of("context") {
                    self.error(&p, "context", &e.to_string());
                }
                messages
            }
        }
    }

    /// Fires `model_select {model, previousModel, source}` (`source`: `set` or `cycle`) and
    /// waits for the handlers, so that what they do comes before the command's response.
    /// Nothing is sent when the model did not change (upstream `_emitModelSelect`).
    pub async fn model_select(&self, model: &Model, previous: Option<&Model>, source: &str) {
        if !self.handles("model_select") || self.host.is_dead() {
            return;
        }
        if previous.is_some_and(|p| p.provider == model.provider && p.id == model.id) {
            return;
        }
        let id = self.host.next_id();
        // Upstream's key order: type, model, previousModel (absent when none), source.
        let event = HostEvent::ModelSelect {
            model: Box::new(model.clone()),
            previous_model: previous.map(|p| Box::new(p.clone())),
            source: source.to_string(),
        };
        let msg = ToHost::HostEvent {
            id: Some(id),
            event,
        };
        if let Err(e) = self.host.request(id, &msg, Some(self.hook_timeout)).await {
            for p in self.handlers_of("model_select") {
                self.error(&p, "model_select", &e.to_string());
            }
        }
    }

    /// Runs the `user_bash` handlers for the RPC `bash` command (`exclude`:
    /// `excludeFromContext`; `resolved`: the command with `shellCommandPrefix`, for a handler's
    /// `operations`). `on_delta` receives the output of a run through `operations` as it
    /// comes; `cancel` (abort_bash) fires that run's signal. `Err` is the failure response text:
    /// a handler threw or returned an invalid result (reported as `extension_error` by the
    /// host), or the host could not answer.
    pub async fn user_bash(
        &self,
        command: &str,
        exclude: bool,
        cwd: &str,
        resolved: &str,
        on_delta: Arc<dyn Fn(String) + Send + Sync>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<UserBash, String> {
        if !self.handles("user_bash") {
            return Ok(UserBash::Local);
        }
        let id = self.host.next_id();
        let msg = ToHost::UserBash {
            id,
            event: UserBashEvent {
                command: command.to_string(),
                exclude_from_context: exclude,
                cwd: cwd.to_string(),
            },
            command: resolved.to_string(),
        };
        let updates: super::host::UpdateSink = Arc::new(move |v: Value| {
            if let Value::String(s) = v {
                on_delta(s);
            }
        });
        let host = self.host.clone();
        let aborted = cancel.clone();
        let watcher = tokio::spawn(async move {
            cancel.cancelled().await;
            host.abort(id);
        });
        // After `abort_bash` the handler gets [`super::host::EOF_GRACE`] to answer (a run
        // through `operations` answers `cancelled`); one that never settles is given up then,
        // so the `bash` command (and EOF) are not held.
        let reply = tokio::select! {
            r = self.host.request_with_updates(id, &msg, None, updates, true) => r,
            () = async {
                aborted.cancelled().await;
                tokio::time::sleep(super::host::EOF_GRACE).await;
            } => Err(super::host::HostError::Handler(
                "the user_bash handler did not answer after the command was aborted".into(),
            )),
        };
        watcher.abort();
        let v = match reply {
            Ok(v) => v,
            Err(super::host::HostError::Handler(text)) => return Err(text),
            Err(e) => {
                let text = e.to_string();
                for p in self.handlers_of("user_bash") {
                    self.error(&p, "user_bash", &text);
                }
                return Err(text);
            }
        };
        if v.is_null() {
            return Ok(UserBash::Local);
        }
        let reply = UserBashReply::deserialize(&v)
            .map_err(|e| format!("Invalid user_bash handler result: {e}"))?;
        if let Some(r) = reply.result {
            return serde_json::from_value::<BashResult>(strip_undefined(r))
                .map(UserBash::Result)
                .map_err(|e| format!("Invalid user_bash handler result: {e}"));
        }
        if let Some(x) = reply.executed {
            return Ok(UserBash::Executed {
                output: x.output,
                exit_code: x.exit_code.and_then(|c| i32::try_from(c).ok()),
                cancelled: x.cancelled,
            });
        }
        Ok(UserBash::Local)
    }
}

/// A `before_agent_start` `message` as a `custom` message
/// ([`CustomMessageDraft::into_message`]); `None` when it is not an object.
fn custom_message(m: &Value, now: i64) -> Option<Message> {
    Some(CustomMessageDraft::from_value(m)?.into_message(now))
}

/// Drops `null` members (JS `undefined` that JSON kept as nothing, or `null` sent for it).
fn strip_undefined(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        other => other,
    }
}

/// Turns the protocol events the client sees into the event objects extensions receive
/// (upstream `_emitExtensionEvent`, [`ExtensionEvent`]): `turnIndex` counts from 0 in each
/// low-level run (`turn_end` itself is sent by the session's turn boundary, here it only
/// advances the count). Other events pass as the client sees them.
#[derive(Default)]
pub struct EventShaper {
    turn_index: AtomicU64,
}

impl EventShaper {
    /// The extension event for `ev`, advancing the turn count (reset by `agent_start`,
    /// advanced by `turn_end`); `None` when `ev` passes as the client sees it.
    pub fn shape(&self, ev: &RpcEvent) -> Option<ExtensionEvent> {
        let turn_index = match ev {
            RpcEvent::AgentStart => {
                self.turn_index.store(0, Ordering::SeqCst);
                0
            }
            RpcEvent::TurnEnd { .. } => self.turn_index.fetch_add(1, Ordering::SeqCst),
            _ => self.turn_index.load(Ordering::SeqCst),
        };
        let timestamp = match ev {
            RpcEvent::TurnStart => pi_ai::now_ms(),
            _ => 0,
        };
        ExtensionEvent::of(ev, turn_index, timestamp)
    }
}
