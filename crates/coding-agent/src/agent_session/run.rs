//! One session-level run: prompt admission, the run task, its settle guard and the
//! translation of loop events into protocol events (spec agent-loop.md §2, rpc-protocol.md
//! §4.1, §5; upstream-1.6-notes.md §1, §5).

use super::queues::{message_text, QueueKind};
use super::retry::{self, AfterRun, RetryPolicy, RETRY_CANCELLED};
use super::run_hooks::Hooks;
use super::{AgentSession, RunPhase};
use crate::protocol::rpc::RpcEvent;
use futures::future::BoxFuture;
use futures::FutureExt;
use pi_agent::{run_agent_loop, AgentEvent, EmitFn};
use pi_ai::{now_ms, AssistantMessage, ImageContent, Message, Model, StopReason};
use serde_json::Value;
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
    /// Settles the run, `agent_settled` reaching the client once the extensions' handlers of
    /// it are done ([`AgentSession::settle_awaited`]).
    async fn settle(mut self) {
        if let Some(s) = self.session.take() {
            s.settle_awaited().await;
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

/// Marks the run settled when dropped ([`AgentSession::settle_awaited`]), also when the
/// settling future is dropped while the `agent_settled` handlers run.
struct MarkSettled {
    session: AgentSession,
    finished: Option<super::run_control::Finished>,
}

impl Drop for MarkSettled {
    fn drop(&mut self) {
        if let Some(finished) = self.finished.take() {
            self.session.after_settled(finished);
        }
    }
}

/// Calls the `on_started` callback of [`AgentSession::prompt_then`] when dropped: after
/// `before_agent_start`, or when the run future is dropped or panics before, so that the
/// `prompt` is answered on every path.
struct OnStarted(Option<Box<dyn FnOnce() + Send>>);

impl Drop for OnStarted {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
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
        self.prompt_then(text, images, streaming_behavior, None)
    }

    /// [`AgentSession::prompt`]; when a run is started, `on_started` is called from the run
    /// future once the extensions' `before_agent_start` handlers are done and before the run's
    /// first event (upstream answers `prompt` only then).
    pub fn prompt_then(
        &self,
        text: String,
        images: Vec<ImageContent>,
        streaming_behavior: Option<&str>,
        on_started: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<PromptOutcome, String> {
        let (text, images) = self.prepare_images(text, images)?;
        let user = super::user_message(text, images);
        if self.inner.compaction.refuses_prompt() {
            return Err(super::compaction::PROMPT_DURING_COMPACTION.into());
        }
        if self.is_streaming() {
            return self.queue_while_streaming(user, streaming_behavior);
        }
        self.start_run(Some(user), streaming_behavior, on_started)
    }

    /// Starts a run after checking model and credentials: `user` (if any) is the prompt; with
    /// none the model answers the context as it stands (an extension's `sendMessage` with
    /// `triggerTurn`).
    pub(super) fn start_run(
        &self,
        user: Option<Message>,
        streaming_behavior: Option<&str>,
        on_started: Option<Box<dyn FnOnce() + Send>>,
    ) -> Result<PromptOutcome, String> {
        let model = self
            .model()
            .ok_or_else(|| crate::config::no_api_key_message(None))?;
        if (self.inner.services.provider)(&model).is_none() {
            return Err(format!("No API provider registered for api: {}", model.api));
        }
        match (self.inner.services.api_key)(&model, super::KeyUse::Check) {
            Ok(c)
                if c.keyless
                    || c.api_key.is_some()
                    || !c.headers.is_empty()
                    || c.error.is_some() => {}
            _ => return Err(crate::config::no_api_key_message(Some(&model.provider))),
        }
        let Some(cancel) = self.inner.run.begin() else {
            return match user {
                Some(user) => self.queue_while_streaming(user, streaming_behavior),
                None => Err(ALREADY_PROCESSING.into()),
            };
        };
        // A run started while the previous one's `agent_settled` handlers run (one of them
        // sent it) begins after that event, as upstream defers it (`_deferredSettledActions`).
        let previous = self.inner.run.last_started().saturating_sub(1);
        let mut prompts = Vec::new();
        if !self.inner.system_recorded.swap(true, Ordering::SeqCst) {
            let mut sys = self.inner.setup.lock().loadout.system_message.clone();
            sys.timestamp = now_ms();
            prompts.push(Message::System(sys));
        }
        // `before_agent_start` sees the prompt as it will be sent (after input handlers and
        // expansion); its copy is only taken when an extension listens.
        // (A custom message an extension's `sendMessage` starts the run with has none.)
        let before_start = user
            .as_ref()
            .filter(|u| matches!(u, Message::User(_)))
            .and_then(|user| {
                self.extensions()
                    .filter(|e| e.handles("before_agent_start"))
                    .map(|_| prompt_parts(user))
            });
        prompts.extend(user);
        prompts.append(&mut self.inner.pending.lock().next_turn);
        let this = self.clone();
        let started = OnStarted(on_started);
        Ok(PromptOutcome::Started(Box::pin(async move {
            let started = started;
            let guard = SettleGuard {
                session: Some(this.clone()),
            };
            this.inner.run.wait_run_settled(previous).await;
            if let Some((text, images)) = before_start {
                // An abort ends a round that has not answered; the run then ends aborted (a
                // provider asked with a fired token sends nothing).
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => {}
                    () = this.before_agent_start(&text, &images, &mut prompts) => {}
                }
            }
            drop(started);
            // Servers that may declare direct tools get up to 10 s to connect (docs/mcp.md).
            if let Some(m) = this.inner.services.mcp.clone() {
                tokio::select! {
                    _ = m.wait_for_direct(crate::mcp::DIRECT_WAIT) => {}
                    _ = cancel.cancelled() => {}
                }
            }
            this.refresh_system_sections(&mut prompts);
            this.run_prompts(prompts, cancel).await;
            guard.settle().await;
        })))
    }

    /// Runs the extensions' `before_agent_start` handlers for a run starting with `prompts`:
    /// their messages follow the prompt, and a replaced system prompt holds for this run
    /// (upstream `_prepareRun`).
    async fn before_agent_start(
        &self,
        text: &str,
        images: &[ImageContent],
        prompts: &mut Vec<Message>,
    ) {
        let Some(ext) = self.extensions().cloned() else {
            return;
        };
        let (system_prompt, options) = {
            let setup = self.inner.setup.lock();
            let l = &setup.loadout;
            let names: Vec<String> = l.tools.iter().map(|t| t.definition().name).collect();
            let options = super::prompt_options::options_of(&l.prompt_input, names);
            (l.system_prompt.clone(), options)
        };
        let r = ext
            .before_agent_start(text, images, &system_prompt, options)
            .await;
        prompts.extend(r.messages);
        // Edited options build this run's prompt, over the loadout as the handlers left it
        // (a `selectedTools` edit has replaced it); a forced prompt wins over them.
        let edited = match (&r.system_prompt, &r.prompt_edits) {
            (None, Some(edits)) => {
                let input = super::prompt_options::apply_edits(
                    &self.inner.setup.lock().loadout.prompt_input,
                    edits,
                );
                let sections = crate::system_prompt::build_sections(&input)
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect();
                Some(sections)
            }
            _ => None,
        };
        let mut run = self.inner.run_state.lock();
        run.prompt_sections = edited;
        run.system_prompt = r.system_prompt;
    }

    /// Brings the prompt sections the session records up to date as a prompt starts (upstream
    /// 1.6 `_preparePromptAndToolLoadout` / `diffSystemPromptSections`; session-format.md:
    /// "later changes persist as system messages that patch `sections` by name").
    ///
    /// The `mcp_servers` section is rendered again first (docs/mcp.md "Control tool exposure";
    /// recording `mcp_upstream_section_update.json`). In a session's first run the leading
    /// system message (`prompts[0]`) takes the sections as they are now. Later, the sections
    /// the transcript's system messages add up to are compared with the current ones (which
    /// change when a resumed session finds another `AGENTS.md`, other skills, another working
    /// directory, or a session written by another build): when any differ, a system message
    /// `{role: "system", content: "", sections: {<changed>: text, <gone>: null}, timestamp}`
    /// goes before the prompt and into the session, so the file records what the model is
    /// sent while earlier messages stay as they were. Tools whose declaration changed (an
    /// extension's `setActiveTools`, another build's definitions) are declared on the same
    /// message as `toolsAdded` / `toolsRemoved` ([`AgentSession::tool_changes`]).
    pub(super) fn refresh_system_sections(&self, prompts: &mut Vec<Message>) {
        const MCP: &str = "mcp_servers";
        let mcp_now = self
            .inner
            .setup
            .lock()
            .loadout
            .mcp_section
            .clone()
            .map(|section| section.text());
        let run_sections = {
            let mut state = self.inner.run_state.lock();
            let run = &mut state.prompt_sections;
            if let (Some(sections), Some(now)) = (run.as_mut(), &mcp_now) {
                set_section(sections, MCP, now.clone());
            }
            run.clone()
        };
        if let Some(Message::System(first)) = prompts.first_mut() {
            if let Some(now) = &mcp_now {
                let sections = first.sections.get_or_insert_with(Default::default);
                set_section(sections, MCP, now.clone());
            }
            if let Some(run) = &run_sections {
                first.sections = Some(run.clone());
            }
        }
        let current = {
            let mut setup = self.inner.setup.lock();
            let l = &mut setup.loadout;
            if let Some(now) = mcp_now {
                let sections = l
                    .system_message
                    .sections
                    .get_or_insert_with(Default::default);
                set_section(sections, MCP, now);
                l.system_prompt = crate::system_prompt::system_message_text(&l.system_message);
            }
            match &run_sections {
                Some(run) => run.clone(),
                None => l.system_message.sections.clone().unwrap_or_default(),
            }
        };
        if let Some(run) = &run_sections {
            // The request sends what the edited sections say (upstream renders the prompt
            // from the run's options).
            let text = run
                .values()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n\n");
            self.inner.run_state.lock().system_prompt = Some(text);
        }
        if matches!(prompts.first(), Some(Message::System(_))) {
            return;
        }
        let held_message = crate::session::current_system_message(&self.transcript());
        let held_tools = held_message
            .as_ref()
            .and_then(|s| s.tools_added.clone())
            .unwrap_or_default();
        let held = held_message.and_then(|s| s.sections).unwrap_or_default();
        let mut patch = serde_json::Map::new();
        for (name, text) in &current {
            if held.get(name) != Some(text) {
                patch.insert(name.clone(), text.clone());
            }
        }
        for name in held.keys() {
            if !current.contains_key(name) {
                patch.insert(name.clone(), Value::Null);
            }
        }
        let (added, removed) = self.tool_changes(&held_tools);
        if patch.is_empty() && added.is_empty() && removed.is_empty() {
            return;
        }
        prompts.insert(
            0,
            Message::System(pi_ai::SystemMessage {
                content: pi_ai::UserContent::Text(String::new()),
                sections: (!patch.is_empty()).then_some(patch),
                timestamp: now_ms(),
                tools_added: (!added.is_empty()).then_some(added),
                tools_removed: (!removed.is_empty()).then_some(removed),
                replace: None,
                extra: Default::default(),
            }),
        );
    }

    /// How the active tools differ from `held` (the `toolsAdded` entries the transcript's
    /// system messages add up to): the entries of tools that are new or whose definition
    /// changed, in the order offered to the model, and `{name}` of each held tool no longer
    /// active, in held order (upstream 1.6 records a tool loadout change such as an
    /// extension's `pi.setActiveTools` this way; observed with upstream's `preset.ts`).
    fn tool_changes(&self, held: &[Value]) -> (Vec<Value>, Vec<Value>) {
        let name_of = |t: &Value| t.get("name").and_then(Value::as_str).map(str::to_owned);
        let current: Vec<Value> = self
            .inner
            .setup
            .lock()
            .loadout
            .tools
            .iter()
            .map(|t| crate::system_prompt::tool_added_entry(&t.definition()))
            .collect();
        let added = current
            .iter()
            .filter(|t| !held.contains(t))
            .cloned()
            .collect();
        let removed = held
            .iter()
            .filter_map(name_of)
            .filter(|n| !current.iter().any(|t| name_of(t).as_deref() == Some(n)))
            .map(|n| serde_json::json!({ "name": n }))
            .collect();
        (added, removed)
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

    /// The session-level run (agent-loop.md §6.2, §8.2): a compaction check before the
    /// prompt, then the low-level run of `prompts`, and after every low-level run, in this
    /// order:
    ///
    /// 1. the retry decision taken at its `agent_end` ([`retry::decide`]): a transient error
    ///    is retried after a back-off (nothing else is checked then); a give-up ends the
    ///    chain;
    /// 2. overflow (a context-overflow error, a silent overflow, a truncated `length` reply):
    ///    compaction's recovery hides the failed attempt, compacts and runs once more
    ///    ([`AgentSession::check_compaction`]);
    /// 3. threshold compaction, running again only when messages are queued.
    ///
    /// Every exit path leaves the retry chain closed (`auto_retry_end` emitted when one was in
    /// progress).
    async fn run_prompts(&self, prompts: Vec<Message>, cancel: CancellationToken) {
        {
            let mut st = self.inner.retry();
            st.attempt = 0;
            st.decision = None;
        }
        if let Some(last) = self.last_context_assistant() {
            self.check_compaction(&last, false, &cancel).await;
        }
        let mut prompts = prompts;
        // After the chain, `agent_before_settle` may ask for one more low-level run
        // (context-only); an aborted run skips it.
        loop {
            self.run_chain(std::mem::take(&mut prompts), &cancel).await;
            if cancel.is_cancelled() || !self.before_settle(&cancel).await {
                break;
            }
        }
        if cancel.is_cancelled() {
            self.cancel_retry_chain();
        }
    }

    /// The low-level runs of [`AgentSession::run_prompts`] until nothing (retry, overflow
    /// recovery, queued messages after compaction) starts another one.
    async fn run_chain(&self, prompts: Vec<Message>, cancel: &CancellationToken) {
        let cancel = cancel.clone();
        let mut prompts = prompts;
        loop {
            let Some(created) = self.run_once(std::mem::take(&mut prompts), &cancel).await else {
                break;
            };
            let after = self
                .inner
                .retry()
                .decision
                .take()
                .unwrap_or(AfterRun::Settle);
            match after {
                AfterRun::Retry {
                    attempt,
                    max_attempts,
                    delay_ms,
                    error_message,
                } => {
                    if self
                        .back_off(attempt, max_attempts, delay_ms, error_message, &cancel)
                        .await
                    {
                        continue;
                    }
                    break;
                }
                AfterRun::GiveUp {
                    attempt,
                    final_error,
                } => self.end_retry_chain(attempt, final_error),
                AfterRun::ContextOverflow { ended_chain } => {
                    if let Some((attempt, final_error)) = ended_chain {
                        self.end_retry_chain(attempt, final_error);
                    }
                }
                AfterRun::Settle => {}
            }
            // Overflow recovery and threshold compaction (upstream `_checkCompaction` after a
            // run that is not retried).
            let Some(Message::Assistant(last)) = created
                .iter()
                .rev()
                .find(|m| matches!(m, Message::Assistant(_)))
            else {
                break;
            };
            let mut proceed =
                !cancel.is_cancelled() && self.check_compaction(last, true, &cancel).await;
            // Messages queued after the loop stopped looking (an `agent_end` handler's
            // `pi.sendMessage(…, {deliverAs: "followUp"})`): another low-level run delivers
            // them, steering first, as upstream's session continues while any are queued.
            if !proceed && !cancel.is_cancelled() {
                let next = {
                    let mut pending = self.inner.pending.lock();
                    let queues = &mut pending.queues;
                    let steering = queues.drain(QueueKind::Steering);
                    if steering.is_empty() {
                        queues.drain(QueueKind::FollowUp)
                    } else {
                        steering
                    }
                };
                if !next.is_empty() {
                    prompts = next;
                    // A tool loadout or prompt changed by the handler that queued them
                    // (plan-mode.ts restores its tools there) is recorded before them, as
                    // upstream records it when it delivers them.
                    self.refresh_system_sections(&mut prompts);
                    proceed = true;
                }
            }
            // A reply cut at the output limit that the check left in the context (not
            // recoverable, or auto-compaction off) is hidden all the same (1.6 notes §5).
            if let Some(Message::Assistant(cut)) = created.last() {
                if cut.stop_reason == StopReason::Length && self.in_context(cut) {
                    self.omit_attempt(cut);
                }
            }
            if !proceed || cancel.is_cancelled() {
                break;
            }
        }
    }

    /// Whether `assistant` is still part of the context.
    fn in_context(&self, assistant: &AssistantMessage) -> bool {
        self.transcript().iter().any(|m| {
            matches!(m, Message::Assistant(a) if a.timestamp == assistant.timestamp && a.stop_reason == assistant.stop_reason)
        })
    }

    /// The last assistant message of the context, aborted ones included.
    fn last_context_assistant(&self) -> Option<AssistantMessage> {
        self.transcript().iter().rev().find_map(|m| match m {
            Message::Assistant(a) => Some(a.clone()),
            _ => None,
        })
    }

    /// Carries out [`AfterRun::Retry`]: `auto_retry_start`, the `context_edit` hiding the
    /// failed attempt, then the back-off (phase [`RunPhase::RetryBackoff`]), which `abort_retry`
    /// and `abort` end at once. Returns whether the retry is to be run.
    async fn back_off(
        &self,
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
        cancel: &CancellationToken,
    ) -> bool {
        let backoff = CancellationToken::new();
        {
            // An `abort_retry` sent on `auto_retry_start` waits until the edit is out.
            let _announcing = self.inner.retry_announce.lock();
            {
                let mut st = self.inner.retry();
                st.attempt = attempt;
                st.backoff = Some(backoff.clone());
            }
            self.inner.run.set_phase(RunPhase::RetryBackoff);
            self.emit(RpcEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            });
            self.hide_last_assistant();
        }
        let slept = tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(delay_ms)) => true,
            _ = backoff.cancelled() => false,
            _ = cancel.cancelled() => false,
        };
        let mut st = self.inner.retry();
        // `abort_retry` takes the token and reports the cancel itself.
        let reported = st.backoff.take().is_none();
        if slept && !reported && !cancel.is_cancelled() {
            drop(st);
            self.inner.run.set_phase(RunPhase::Streaming);
            return true;
        }
        if !reported {
            let attempt = std::mem::take(&mut st.attempt);
            self.emit(retry_cancelled(attempt));
        }
        false
    }

    /// Ends the retry chain unsuccessfully: `auto_retry_end {success: false, attempt,
    /// finalError}`.
    fn end_retry_chain(&self, attempt: u32, final_error: String) {
        self.inner.retry().attempt = 0;
        self.emit(RpcEvent::AutoRetryEnd {
            success: false,
            attempt,
            final_error: Some(final_error),
        });
    }

    /// Closes a chain in progress as cancelled (`finalError: "Retry cancelled"`), if any.
    fn cancel_retry_chain(&self) {
        let mut st = self.inner.retry();
        if st.attempt > 0 {
            let attempt = std::mem::take(&mut st.attempt);
            self.emit(retry_cancelled(attempt));
        }
    }

    /// `abort_retry`: ends a back-off in progress at once, emitting `auto_retry_end {success:
    /// false, finalError: "Retry cancelled"}`; the run then settles without retrying. `respond`
    /// (which writes the command's response) runs before the run can go on, so clients see
    /// `auto_retry_end`, the response, then `agent_settled` (golden `abort_retry`). Without a
    /// back-off in progress only `respond` runs.
    pub fn abort_retry(&self, respond: impl FnOnce()) {
        let _announced = self.inner.retry_announce.lock();
        let mut st = self.inner.retry();
        if let Some(token) = st.backoff.take() {
            token.cancel();
            let attempt = std::mem::take(&mut st.attempt);
            self.emit(retry_cancelled(attempt));
        }
        respond();
    }

    /// The retry policy in force now (settings `retry.*`, toggle `set_auto_retry`).
    pub(super) fn retry_policy(&self) -> RetryPolicy {
        let settings = self.inner.services.settings.lock().retry();
        RetryPolicy::new(&settings, self.auto_retry())
    }

    /// One low-level run; returns the messages it created, or `None` when it panicked: the
    /// panic becomes a synthetic error message (`agent_end` with that message, no
    /// `message_start`/`message_end`, as upstream does for an exception that escapes the loop;
    /// rpc-protocol.md §5.1). A reply cut at the output limit is hidden from the context by
    /// the compaction check (1.6 notes §5).
    async fn run_once(
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
                let text = crate::tasks::panic_text(panic.as_ref());
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
                let end = RpcEvent::AgentEnd {
                    messages: vec![message],
                    will_retry: false,
                };
                if let Some(wait) = self.emit_awaited(end) {
                    wait.await;
                }
                None
            }
        }
    }

    /// Ends the run: deferred bash results are recorded, the phase returns to idle, then
    /// `agent_settled` is queued, waiters (`abort`, EOF) are woken and freed heap pages are
    /// returned to the system ([`crate::mem::release_free_memory`]).
    fn settle(&self) {
        self.flush_deferred_bash();
        {
            let mut run = self.inner.run_state.lock();
            run.system_prompt.take();
            run.prompt_sections.take();
        }
        let finished = self.inner.run.finish();
        self.emit(RpcEvent::AgentSettled {
            aborted: finished.aborted,
        });
        self.after_settled(finished);
    }

    /// [`AgentSession::settle`] on a run's normal end: the extensions' `agent_settled`
    /// handlers run first, so what they send (a `notify`, …) reaches the client before
    /// `agent_settled` (upstream `_emitAgentSettled` awaits the extension runner, then emits
    /// to its listeners). Dropped while the handlers run, the event is still sent and the run
    /// still marked settled.
    async fn settle_awaited(&self) {
        self.flush_deferred_bash();
        {
            let mut run = self.inner.run_state.lock();
            run.system_prompt.take();
            run.prompt_sections.take();
        }
        let finished = self.inner.run.finish();
        let mark = MarkSettled {
            session: self.clone(),
            finished: Some(finished),
        };
        let event = RpcEvent::AgentSettled {
            aborted: finished.aborted,
        };
        if let Some(wait) = self.emit_awaited(event) {
            wait.await;
        }
        drop(mark);
    }

    /// After `agent_settled` was queued: waiters are woken and the run's transient peak
    /// (requests built from the whole context) goes back to the system, so idle RSS follows
    /// what the session holds (issue 15).
    fn after_settled(&self, finished: super::run_control::Finished) {
        self.inner.run.mark_settled(finished);
        crate::mem::release_free_memory();
    }

    /// Appends a finished message to the session file. A failure that the store could not
    /// repair (it recreates a deleted file itself) is reported as `session_write_error` and
    /// remembered ([`AgentSession::write_failed`]).
    pub(super) fn persist_message(&self, message: &Message) {
        let failed = {
            let mut store = self.inner.store.lock();
            // An extension's custom message (`pi.sendMessage`) is a `custom_message` entry.
            let written = match super::extension_api::custom_message_entry(message) {
                Some(kind) => store.append_entry(kind).map(|_| ()),
                None => store.append_message(message).map(|_| ()),
            };
            match written {
                Ok(_) => None,
                Err(e) => Some((
                    store
                        .session_file()
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    e.to_string(),
                )),
            }
        };
        if let Some((session_file, error)) = failed {
            tracing::warn!("could not persist message to {session_file}: {error}");
            self.inner
                .write_failed
                .store(true, std::sync::atomic::Ordering::SeqCst);
            self.emit(RpcEvent::SessionWriteError {
                session_file,
                error,
            });
        }
    }

    /// Whether a session write failed and could not be repaired during this session.
    pub fn write_failed(&self) -> bool {
        self.inner
            .write_failed
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Appends a `context_edit` that hides the leaf (a failed attempt about to be retried) from
    /// the context, rebuilds the context and emits `entry_appended` (1.6 notes §5).
    fn hide_last_assistant(&self) {
        let appended = {
            let mut store = self.inner.store.lock();
            let Some(target) = store.leaf_id().map(str::to_string) else {
                return;
            };
            match store.append_context_edit(&target, None) {
                Ok(entry) => Some((entry.clone(), store.build_context())),
                Err(e) => {
                    tracing::warn!("could not record context edit: {e}");
                    None
                }
            }
        };
        if let Some((entry, context)) = appended {
            *self.transcript() = context;
            self.emit(RpcEvent::EntryAppended { entry });
        }
    }

    /// Converts a loop event to its protocol form; persists on `message_end`; emits
    /// `queue_update` right before a delivered queued message (§5.4). The loop's
    /// [`EmitFn`]: returns the future that holds the loop while extension handlers see the
    /// event first ([`AgentSession::emit_awaited`]); `None` when the event went out already.
    fn handle_event(&self, ev: AgentEvent) -> Option<BoxFuture<'static, ()>> {
        match &ev {
            AgentEvent::MessageStart {
                message: message @ Message::User(_),
            } => {
                self.inner.compaction.reset_overflow();
                let delivered = self
                    .inner
                    .pending
                    .lock()
                    .queues
                    .delivered(&message_text(message));
                if let Some(shown) = delivered {
                    self.emit(RpcEvent::queue_update(shown));
                }
            }
            AgentEvent::MessageEnd { message } => {
                self.persist_message(message);
                if let Message::Assistant(a) = message {
                    if a.stop_reason != StopReason::Error {
                        self.inner.compaction.reset_overflow();
                    }
                    self.note_image_rejection(a);
                }
            }
            _ => {}
        }
        let mut chain_succeeded = false;
        let mut will_retry = false;
        match &ev {
            AgentEvent::MessageEnd {
                message: Message::Assistant(a),
            } => chain_succeeded = a.stop_reason != StopReason::Error,
            AgentEvent::AgentEnd { messages } => {
                let policy = self.retry_policy();
                let window = self.model().map_or(0, |m| m.context_window);
                let aborted = self.inner.run.was_aborted();
                let mut st = self.inner.retry();
                let decision = retry::decide(messages, st.attempt, &policy, window, aborted);
                will_retry = decision.will_retry();
                st.decision = Some(decision);
            }
            _ => {}
        }
        let wait = match RpcEvent::from_agent(ev, will_retry) {
            Some(event) => self.emit_awaited(event),
            None => None,
        };
        match wait {
            None => {
                self.close_retry_chain(chain_succeeded);
                None
            }
            Some(wait) => {
                let this = self.clone();
                Some(
                    async move {
                        wait.await;
                        this.close_retry_chain(chain_succeeded);
                    }
                    .boxed(),
                )
            }
        }
    }

    /// After a good response (`chain_succeeded`): the first one of a retry chain ends it
    /// (agent-loop.md §6.2 step 7) with `auto_retry_end {success: true}`.
    fn close_retry_chain(&self, chain_succeeded: bool) {
        if !chain_succeeded {
            return;
        }
        let mut st = self.inner.retry();
        if st.attempt > 0 {
            let attempt = std::mem::take(&mut st.attempt);
            self.emit(RpcEvent::AutoRetryEnd {
                success: true,
                attempt,
                final_error: None,
            });
        }
    }

    /// Emits an event of the agent loop: one that extension handlers are to see first
    /// ([`crate::extensions::Extensions::notify_awaited`]) is sent to them now and reaches the
    /// sink when the returned future completes (or is dropped); any other goes to the sink now
    /// (`None`).
    fn emit_awaited(&self, event: RpcEvent) -> Option<BoxFuture<'static, ()>> {
        let Some(ext) = self.extensions() else {
            self.emit(event);
            return None;
        };
        ext.notify_awaited(event, self.inner.sink.clone())
    }
}

/// The text and images of a user prompt message (for `before_agent_start`).
fn prompt_parts(user: &Message) -> (String, Vec<ImageContent>) {
    let Message::User(u) = user else {
        return (String::new(), vec![]);
    };
    let blocks = u.content.to_blocks();
    let text = blocks
        .iter()
        .filter_map(|b| match b {
            pi_ai::Content::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let images = blocks
        .into_iter()
        .filter_map(|b| match b {
            pi_ai::Content::Image(i) => Some(i),
            _ => None,
        })
        .collect();
    (text, images)
}

/// `auto_retry_end` for a chain cancelled during its back-off or run.
fn retry_cancelled(attempt: u32) -> RpcEvent {
    RpcEvent::AutoRetryEnd {
        success: false,
        attempt,
        final_error: Some(RETRY_CANCELLED.to_string()),
    }
}

/// Sets (`Some`) or removes (`None`) section `key`; a section already there keeps its place.
fn set_section(sections: &mut serde_json::Map<String, Value>, key: &str, text: Option<String>) {
    match text {
        Some(t) => {
            sections.insert(key.into(), Value::String(t));
        }
        None => {
            sections.shift_remove(key);
        }
    }
}
