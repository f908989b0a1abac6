//! Prompt admission: what a session does with a prompt's text before any run, the same in
//! every mode (spec rpc-protocol.md §4.1 `prompt` "Processing order" and "Response timing",
//! `steer`/`follow_up`; agent-loop.md §2.1; upstream `AgentSession.prompt`, `_preparePrompt`,
//! `_queueUserInput`). The transports only translate: RPC writes the response when
//! [`Responder`] is called and spawns the run; print and JSON mode await the run.
//!
//! The order for a `prompt`:
//! 1. `/name args` naming an extension command: its handler runs at once (even while a run
//!    is streaming) → handled. Then the built-in `/mcp` and `/llama` commands → handled.
//! 2. A manual compaction in progress → failure.
//! 3. `input` handlers may handle the text (→ handled) or transform text and images.
//! 4. `/skill:name` and `/template` expansion.
//! 5. While streaming: queued by `streamingBehavior` (→ queued), without one → failure.
//! 6. Else model and credentials are checked and the run starts (→ started); the response is
//!    due once the `before_agent_start` handlers are done, before the run's first event.

use super::queues::QueueKind;
use super::run::PromptOutcome;
use super::AgentSession;
use crate::protocol::rpc::Disposition;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use pi_ai::ImageContent;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

/// Where a prompt's text comes from: the `source` its `input` event carries (upstream
/// `InputSource`; docs/extensions.md "input").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputSource {
    /// A client's `prompt`/`steer`/`follow_up` in RPC mode (`"rpc"`).
    Rpc,
    /// A message of print (`-p`) or JSON mode (`"interactive"`: upstream's print mode passes
    /// no source, which defaults to this).
    Interactive,
    /// `pi.sendUserMessage` (`"extension"`).
    Extension,
}

impl InputSource {
    /// The wire value of `input.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            InputSource::Rpc => "rpc",
            InputSource::Interactive => "interactive",
            InputSource::Extension => "extension",
        }
    }
}

/// One prompt to admit.
pub struct PromptInput {
    /// The text as typed or sent.
    pub text: String,
    /// Its images (base64 image blocks).
    pub images: Vec<ImageContent>,
    /// `streamingBehavior` (`"steer"` | `"followUp"`; any other value steers), used only
    /// while a run is active.
    pub streaming_behavior: Option<String>,
    /// Where it came from.
    pub source: InputSource,
    /// Whether extension commands, built-in commands, skills and templates apply (upstream
    /// `expandPromptTemplates`: true for clients and print mode, false by default for
    /// `sendUserMessage`).
    pub commands: bool,
    /// The agent directory, for the built-in `/mcp` and `/llama` commands; `None` = no
    /// built-in commands.
    pub agent_dir: Option<PathBuf>,
}

/// A run to spawn (or await); it settles the session on every path.
pub type RunFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What admission did with a prompt.
pub enum Admission {
    /// No run: an extension or built-in command ran, or an `input` handler handled it.
    Handled,
    /// The message went into the steering or follow-up queue.
    Queued,
    /// A run was started: spawn or await it.
    Started(RunFuture),
    /// Refused before anything was sent; the failure text (rpc-protocol.md §4.1 "Errors").
    Failed(String),
}

/// Admission that finished at once, or the work that finishes it (a command, `input`
/// handlers). The pending future must be driven to completion by a task of its own (a command
/// can wait on a dialog the same client answers).
pub enum Admitting {
    /// Decided without waiting.
    Done(Admission),
    /// Decided once this future is done.
    Pending(BoxFuture<'static, Admission>),
}

type AnswerFn = Box<dyn FnOnce(Result<Disposition, String>) + Send>;

/// Receives a prompt's response exactly once, at the point where it may be written: after a
/// command's handler returned (in line with what the handler caused), after `input` handlers
/// handled it, when it was queued, when it failed, or for a started run once the
/// `before_agent_start` handlers are done and before the run's first event. Dropped without an
/// answer (a panic in admission), it answers a failure. Cheap to clone; only the first answer
/// counts.
#[derive(Clone)]
pub struct Responder(Arc<Mutex<Option<AnswerFn>>>);

/// What a [`Responder`] dropped unanswered answers.
pub const UNANSWERED: &str = "Internal error: the prompt ended without an answer";

impl Responder {
    /// A responder that calls `f` with the response.
    pub fn new(f: impl FnOnce(Result<Disposition, String>) + Send + 'static) -> Self {
        Responder(Arc::new(Mutex::new(Some(Box::new(f)))))
    }

    /// A responder nobody listens to (print and JSON mode decide on the [`Admission`]).
    pub fn ignore() -> Self {
        Self::new(|_| {})
    }

    /// Answers (the first call only).
    pub fn answer(&self, r: Result<Disposition, String>) {
        let f = self.0.lock().take();
        if let Some(f) = f {
            f(r);
        }
    }

    /// `handled` / `queued` / the failure of a decided admission (a started run answers from
    /// inside the run).
    fn answer_decided(&self, a: &Admission) {
        match a {
            Admission::Handled => self.answer(Ok(Disposition::Handled)),
            Admission::Queued => self.answer(Ok(Disposition::Queued)),
            Admission::Failed(e) => self.answer(Err(e.clone())),
            Admission::Started(_) => {}
        }
    }
}

/// Answers a failure if admission ends (or unwinds) unanswered.
struct AnswerGuard(Option<Responder>);

impl AnswerGuard {
    fn new(r: Responder) -> Self {
        AnswerGuard(Some(r))
    }

    /// The guarded responder.
    fn responder(&self) -> Responder {
        self.0.clone().unwrap_or_else(Responder::ignore)
    }

    /// Hands a decided admission back; a started run answers from inside the run (its
    /// `on_started` also answers when the run is dropped unpolled), so the guard lets go.
    fn finish(mut self, a: Admission) -> Admission {
        if let Some(r) = self.0.take() {
            r.answer_decided(&a);
        }
        a
    }
}

impl Drop for AnswerGuard {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.answer(Err(UNANSWERED.into()));
        }
    }
}

/// One admission's place in the order ([`AgentSession::take_turn`]).
struct Turn {
    before: Option<tokio::sync::oneshot::Receiver<()>>,
    done: tokio::sync::oneshot::Sender<()>,
}

impl Turn {
    /// Waits until the admission before has queued or started (or was dropped); the returned
    /// sender tells the next one, when dropped, that this one has.
    async fn wait(self) -> tokio::sync::oneshot::Sender<()> {
        if let Some(before) = self.before {
            let _ = before.await;
        }
        self.done
    }
}

impl AgentSession {
    /// Admits a `prompt` (module doc, steps 1–6) and calls `respond` at the point where its
    /// response may be written. Without a command or `input` handlers everything is decided
    /// at once ([`Admitting::Done`]); else the returned future finishes it.
    pub fn admit(&self, input: PromptInput, respond: Responder) -> Admitting {
        let ext = self.extensions().cloned();
        if input.commands {
            if let Some((name, args)) = ext.as_ref().and_then(|e| e.command_of(&input.text)) {
                let ext = ext;
                return Admitting::Pending(Box::pin(async move {
                    let guard = AnswerGuard::new(respond.clone());
                    if let Some(ext) = ext {
                        let r = respond.clone();
                        let on_done = Box::new(move || r.answer(Ok(Disposition::Handled)));
                        // A handler that threw or a host that failed is an `extension_error`,
                        // never a failed response (§4.1 step 1).
                        let _ = ext.run_command_then(&name, &args, on_done).await;
                    }
                    guard.finish(Admission::Handled)
                }));
            }
            if let Some(dir) = &input.agent_dir {
                if let Some(run) = self.builtin_command(&input.text, dir) {
                    return Admitting::Pending(Box::pin(async move {
                        let guard = AnswerGuard::new(respond);
                        run.await;
                        guard.finish(Admission::Handled)
                    }));
                }
            }
        }
        if self.inner.compaction.refuses_prompt() {
            let a = Admission::Failed(super::compaction::PROMPT_DURING_COMPACTION.into());
            respond.answer_decided(&a);
            return Admitting::Done(a);
        }
        match ext.filter(|e| e.handles("input")) {
            None => {
                let a = self.admit_expanded(input, &respond);
                respond.answer_decided(&a);
                Admitting::Done(a)
            }
            Some(ext) => {
                let this = self.clone();
                let turn = self.take_turn();
                self.pending(async move {
                    let guard = AnswerGuard::new(respond);
                    let behavior = this
                        .is_streaming()
                        .then_some(input.streaming_behavior.as_deref())
                        .flatten();
                    let Some((text, images)) = ext
                        .input(input.text, input.images, input.source.as_str(), behavior)
                        .await
                    else {
                        return guard.finish(Admission::Handled);
                    };
                    let input = PromptInput {
                        text,
                        images,
                        ..input
                    };
                    let _done = turn.wait().await;
                    let a = this.admit_expanded(input, &guard.responder());
                    guard.finish(a)
                })
            }
        }
    }

    /// A place in the order of admissions that run `input` handlers (taken when the prompt
    /// is read, so in arrival order): the handler rounds run side by side, but each queues
    /// or starts only after the one before it has.
    fn take_turn(&self) -> Turn {
        let (done, mine) = tokio::sync::oneshot::channel();
        let before = self.inner.run_state.lock().admit_turn.replace(mine);
        Turn { before, done }
    }

    /// Admission that waits on `input` handlers (so may still queue or start a run), counted
    /// by [`AgentSession::wait_idle`] from now until it is done or dropped. Commands are not
    /// counted: they start no run themselves, and one may wait for idle itself.
    fn pending(&self, work: impl Future<Output = Admission> + Send + 'static) -> Admitting {
        struct Counted(AgentSession);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0
                    .inner
                    .admitting
                    .send_modify(|n| *n = n.saturating_sub(1));
            }
        }
        self.inner.admitting.send_modify(|n| *n += 1);
        let counted = Counted(self.clone());
        Admitting::Pending(Box::pin(async move {
            let _counted = counted;
            work.await
        }))
    }

    /// Resolves once no prompt is being admitted through `input` handlers and no run is in
    /// flight (`ctx.waitForIdle()`: a `sendUserMessage` just made is admitted, and its run
    /// settled, before this resolves; upstream docs/extensions.md "ctx.waitForIdle()").
    pub async fn wait_idle(&self) {
        let mut admitting = self.inner.admitting.subscribe();
        loop {
            // The sender lives as long as the session, so this only ends at 0.
            let _ = admitting.wait_for(|n| *n == 0).await;
            if !self.phase().is_streaming() {
                return;
            }
            self.wait_settled().await;
        }
    }

    /// [`AgentSession::wait_idle`], after the extensions have sent everything they had
    /// scheduled (a `sendUserMessage` made just before a command returned), repeated until
    /// nothing new came. Print and JSON mode go on to the next message, and end, only then
    /// (upstream 1.6 exits while a run a command started is still streaming, and loses its
    /// output).
    pub async fn wait_quiet(&self) {
        loop {
            if let Some(ext) = self.extensions() {
                ext.quiesce().await;
            }
            if *self.inner.admitting.borrow() == 0 && !self.phase().is_streaming() {
                return;
            }
            self.wait_idle().await;
        }
    }

    /// Steps 4–6: expansion, then queue or start.
    fn admit_expanded(&self, input: PromptInput, respond: &Responder) -> Admission {
        let text = if input.commands {
            self.expand_input(&input.text)
        } else {
            input.text
        };
        let behavior = input.streaming_behavior.as_deref();
        // With `before_agent_start` handlers the run answers once they are done; else at once
        // (the run's first event comes later either way).
        let gated = self
            .extensions()
            .is_some_and(|e| e.handles("before_agent_start"));
        let on_started: Option<Box<dyn FnOnce() + Send>> = gated.then(|| {
            let r = respond.clone();
            Box::new(move || r.answer(Ok(Disposition::Started))) as Box<dyn FnOnce() + Send>
        });
        match self.prompt_then(text, input.images, behavior, on_started) {
            Ok(PromptOutcome::Started(run)) => {
                if !gated {
                    respond.answer(Ok(Disposition::Started));
                }
                Admission::Started(run)
            }
            Ok(PromptOutcome::Queued) => Admission::Queued,
            Err(e) => Admission::Failed(e),
        }
    }

    /// Admits a `steer` / `follow_up` (rpc-protocol.md §4.1; upstream `_queueUserInput`): an
    /// extension or built-in command is refused (`Extension command "/<name>" cannot be
    /// queued. …`), `input` handlers may handle (→ handled) or transform it, skills and
    /// templates expand, and the expanded text is queued (→ queued), streaming or not.
    /// `respond` is called before the future is done, or before this returns.
    pub fn admit_queued(
        &self,
        kind: QueueKind,
        text: String,
        images: Vec<ImageContent>,
        source: InputSource,
        respond: Responder,
    ) -> Admitting {
        let ext = self.extensions().cloned();
        let is_command = ext.as_ref().and_then(|e| e.command_of(&text)).is_some()
            || crate::resources::commands::builtin(&text).is_some();
        if is_command {
            let a = Admission::Failed(crate::resources::commands::cannot_queue(&text));
            respond.answer_decided(&a);
            return Admitting::Done(a);
        }
        match ext.filter(|e| e.handles("input")) {
            None => {
                let a = self.queue_expanded(kind, text, images);
                respond.answer_decided(&a);
                Admitting::Done(a)
            }
            Some(ext) => {
                let this = self.clone();
                let turn = self.take_turn();
                self.pending(async move {
                    let guard = AnswerGuard::new(respond);
                    let behavior = this.is_streaming().then_some(match kind {
                        QueueKind::Steering => "steer",
                        QueueKind::FollowUp => "followUp",
                    });
                    let a = match ext.input(text, images, source.as_str(), behavior).await {
                        None => Admission::Handled,
                        Some((text, images)) => {
                            let _done = turn.wait().await;
                            this.queue_expanded(kind, text, images)
                        }
                    };
                    guard.finish(a)
                })
            }
        }
    }

    fn queue_expanded(
        &self,
        kind: QueueKind,
        text: String,
        images: Vec<ImageContent>,
    ) -> Admission {
        let text = self.expand_input(&text);
        match self.prepare_images(text, images) {
            Ok((text, images)) => {
                self.enqueue(kind, super::user_message(text, images));
                Admission::Queued
            }
            Err(e) => Admission::Failed(e),
        }
    }
}
