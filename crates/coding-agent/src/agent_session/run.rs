//! One session-level run: prompt admission, the run task, its settle guard and the
//! translation of loop events into protocol events (spec agent-loop.md §2, rpc-protocol.md
//! §4.1, §5; upstream-1.6-notes.md §1, §5).

use super::convert::convert_to_llm;
use super::queues::{message_text, QueueKind};
use super::AgentSession;
use crate::rpc::protocol::RpcEvent;
use futures::FutureExt;
use pi_agent::{run_agent_loop, AgentEvent, EmitFn, RunHooks, TurnConfig};
use pi_ai::{now_ms, AssistantMessage, ImageContent, Message, Model, Provider, StopReason};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How a `prompt` was taken (`data.disposition`).
pub enum PromptOutcome {
    /// A run must be started: write the response first, then spawn the future. The future
    /// settles the run (emits `agent_settled`) on every path, also when it panics or is
    /// dropped.
    Started(Pin<Box<dyn Future<Output = ()> + Send>>),
    /// The agent was busy, so the message went into the steering or follow-up queue
    /// (rpc-protocol.md §4.1).
    Queued,
}

/// Error text while a run is active and no `streamingBehavior` was given (§4.1 step 5).
pub const ALREADY_PROCESSING: &str = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.";

/// Settles the run when dropped without [`SettleGuard::settle`]: a panic unwinding through the
/// run future, or the future being dropped, still emits `agent_settled` and returns the phase
/// to idle, so the next prompt works.
struct SettleGuard {
    session: Option<AgentSession>,
}

impl SettleGuard {
    fn settle(mut self) {
        if let Some(s) = self.session.take() {
            s.settle();
        }
    }
}

impl Drop for SettleGuard {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            s.settle();
        }
    }
}

impl AgentSession {
    /// Handles `prompt` (spec rpc-protocol.md §4.1): queues it while a run is active (with a
    /// `streamingBehavior`), else checks model and credentials and returns the run to spawn.
    /// `Err` is the failure response text; nothing reached the network then.
    pub fn prompt(
        &self,
        text: String,
        images: Vec<ImageContent>,
        streaming_behavior: Option<&str>,
    ) -> Result<PromptOutcome, String> {
        let user = super::user_message(text, images);
        if self.inner.compaction.manual_running() {
            return Err(super::compaction::PROMPT_DURING_COMPACTION.into());
        }
        if self.is_streaming() {
            return self.queue_while_streaming(user, streaming_behavior);
        }
        let model = self
            .model()
            .ok_or_else(|| crate::config::no_api_key_message(None))?;
        if (self.inner.services.provider)(&model).is_none() {
            return Err(format!("No API provider registered for api: {}", model.api));
        }
        match (self.inner.services.api_key)(&model) {
            Ok(c) if c.keyless || c.api_key.is_some() || !c.headers.is_empty() => {}
            _ => return Err(crate::config::no_api_key_message(Some(&model.provider))),
        }
        let Some(cancel) = self.inner.run.begin() else {
            return self.queue_while_streaming(user, streaming_behavior);
        };
        let mut prompts = Vec::new();
        if !self.inner.system_recorded.swap(true, Ordering::SeqCst) {
            let mut sys = self.inner.loadout.lock().system_message.clone();
            sys.timestamp = now_ms();
            prompts.push(Message::System(sys));
        }
        prompts.push(user);
        let this = self.clone();
        Ok(PromptOutcome::Started(Box::pin(async move {
            let guard = SettleGuard {
                session: Some(this.clone()),
            };
            this.run_prompts(prompts, cancel).await;
            guard.settle();
        })))
    }

    fn queue_while_streaming(
        &self,
        user: Message,
        streaming_behavior: Option<&str>,
    ) -> Result<PromptOutcome, String> {
        // Upstream queues any other given value as steering (observed on 1.6).
        let kind = match streaming_behavior {
            Some("followUp") => QueueKind::FollowUp,
            Some(_) => QueueKind::Steering,
            None => return Err(ALREADY_PROCESSING.into()),
        };
        self.enqueue(kind, user);
        Ok(PromptOutcome::Queued)
    }

    /// Runs the loop; a panic inside it becomes a synthetic error message (`agent_end` with
    /// that message, no `message_start`/`message_end`, as upstream does for an exception that
    /// escapes the loop; rpc-protocol.md §5.1). Compaction is checked before the prompt and
    /// after every low-level run; overflow recovery runs the loop once more (agent-loop.md
    /// §8.2).
    async fn run_prompts(&self, prompts: Vec<Message>, cancel: CancellationToken) {
        if let Some(last) = self.last_context_assistant() {
            self.check_compaction(&last, false, &cancel).await;
        }
        let mut prompts = prompts;
        loop {
            let Some(created) = self
                .run_loop_once(std::mem::take(&mut prompts), &cancel)
                .await
            else {
                return;
            };
            let Some(Message::Assistant(last)) = created
                .iter()
                .rev()
                .find(|m| matches!(m, Message::Assistant(_)))
            else {
                return;
            };
            if !self.check_compaction(last, true, &cancel).await || cancel.is_cancelled() {
                return;
            }
        }
    }

    /// The last assistant message of the context, aborted ones included.
    fn last_context_assistant(&self) -> Option<AssistantMessage> {
        self.transcript().iter().rev().find_map(|m| match m {
            Message::Assistant(a) => Some(a.clone()),
            _ => None,
        })
    }

    /// One low-level run; `None` when it panicked (already reported as an error message).
    async fn run_loop_once(
        &self,
        prompts: Vec<Message>,
        cancel: &CancellationToken,
    ) -> Option<Vec<Message>> {
        let this = self.clone();
        let emit: EmitFn = Arc::new(move |ev: AgentEvent| this.handle_event(ev));
        let hooks = Hooks {
            session: self.clone(),
            cancel: cancel.clone(),
        };
        let run = run_agent_loop(self.inner.messages.clone(), prompts, &hooks, cancel, &emit);
        match AssertUnwindSafe(run).catch_unwind().await {
            Ok(created) => Some(created),
            Err(panic) => {
                let text = crate::rpc::panic_text(panic.as_ref());
                tracing::error!("the agent loop panicked: {text}");
                let model = self.model().unwrap_or_else(Model::unknown);
                let mut m = AssistantMessage::empty(&model);
                m.content = vec![pi_ai::Content::text("")];
                m.stop_reason = if cancel.is_cancelled() {
                    StopReason::Aborted
                } else {
                    StopReason::Error
                };
                m.error_message = Some(format!("Internal error: {text}"));
                let message = Message::Assistant(m);
                self.transcript().push(message.clone());
                self.persist_message(&message);
                self.emit(RpcEvent::AgentEnd {
                    messages: vec![message],
                    will_retry: false,
                });
                None
            }
        }
    }

    /// Ends the run: deferred bash results are recorded, the phase returns to idle, then
    /// `agent_settled` is queued and waiters (`abort`, EOF) are woken.
    fn settle(&self) {
        self.flush_deferred_bash();
        let aborted = self.inner.run.finish();
        self.emit(RpcEvent::AgentSettled { aborted });
        self.inner.run.mark_settled();
    }

    pub(super) fn persist_message(&self, message: &Message) {
        if let Err(e) = self.inner.store.lock().append_message(message) {
            tracing::warn!("could not persist message: {e}");
        }
    }

    /// Converts a loop event to its protocol form; persists on `message_end`; emits
    /// `queue_update` right before a delivered queued message (§5.4).
    fn handle_event(&self, ev: AgentEvent) {
        match &ev {
            AgentEvent::MessageStart {
                message: message @ Message::User(_),
            } => {
                self.inner.compaction.reset_overflow();
                let delivered = self.inner.queues.lock().delivered(&message_text(message));
                if let Some(shown) = delivered {
                    self.emit(RpcEvent::queue_update(shown));
                }
            }
            AgentEvent::MessageEnd { message } => {
                if let Message::Assistant(a) = message {
                    if a.stop_reason != StopReason::Error {
                        self.inner.compaction.reset_overflow();
                    }
                }
                self.persist_message(message)
            }
            _ => {}
        }
        if let Some(event) = RpcEvent::from_agent(ev, false) {
            self.emit(event);
        }
    }
}

struct Hooks {
    session: AgentSession,
    cancel: CancellationToken,
}

impl RunHooks for Hooks {
    fn turn_config(&self) -> TurnConfig {
        let inner = &self.session.inner;
        let (model, thinking_level) = {
            let st = inner.model.lock();
            (
                st.model.clone().unwrap_or_else(Model::unknown),
                st.thinking_level,
            )
        };
        let creds = (inner.services.api_key)(&model).unwrap_or_default();
        let loadout = inner.loadout.lock().clone();
        TurnConfig {
            provider: (inner.services.provider)(&model).unwrap_or_else(|| Arc::new(NoProvider)),
            api_key: creds.api_key,
            headers: creds.headers,
            model,
            system_prompt: loadout.system_prompt,
            tools: loadout.tools,
            thinking_level,
            session_id: Some(inner.store.lock().session_id().to_string()),
        }
    }

    fn convert_to_llm(&self, messages: &[Message]) -> Vec<Message> {
        convert_to_llm(messages)
    }

    fn drain_steering(&self) -> Vec<Message> {
        self.session.inner.queues.lock().drain(QueueKind::Steering)
    }

    fn drain_follow_up(&self) -> Vec<Message> {
        self.session.inner.queues.lock().drain(QueueKind::FollowUp)
    }

    fn before_next_turn(&self) -> futures::future::BoxFuture<'_, bool> {
        Box::pin(self.session.compact_before_next_turn(&self.cancel))
    }
}

/// Stand-in adapter when a model's `api` has no implementation: every call fails cleanly.
struct NoProvider;

impl Provider for NoProvider {
    fn api(&self) -> &'static str {
        "unknown"
    }
    fn stream(
        &self,
        model: &Model,
        _context: &pi_ai::Context,
        _options: pi_ai::StreamOptions,
    ) -> pi_ai::AssistantStream {
        let mut m = AssistantMessage::empty(model);
        m.stop_reason = StopReason::Error;
        m.error_message = Some(format!("No API provider registered for api: {}", model.api));
        Box::pin(futures::stream::iter(vec![
            pi_ai::AssistantMessageEvent::Error {
                reason: StopReason::Error,
                message: Box::new(m),
            },
        ]))
    }
}
