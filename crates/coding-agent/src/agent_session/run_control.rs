//! Run phase, abort and settling (spec agent-loop.md §5, §13; upstream-1.6-notes.md §1).
//!
//! The session-level run is one value, [`RunPhase`], read by `get_state` (`isStreaming`,
//! `isCompacting`), by prompt admission and by EOF handling. A run begins with
//! [`RunControl::begin`] (Idle → Streaming, atomically, so two prompts can never both start)
//! and ends with [`RunControl::finish`] plus [`RunControl::mark_settled`], which the session's
//! settle guard calls on every exit path, unwinding from a panic included.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the session is doing (upstream: `isStreaming`, `isRetrying`, `isCompacting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPhase {
    /// No run: a prompt starts one.
    Idle,
    /// A run is in flight (LLM call, tools, queued continuations).
    Streaming,
    /// Waiting out an automatic-retry back-off inside a run (agent-loop.md §6).
    RetryBackoff,
    /// Compacting inside a run (threshold/overflow) or for a manual `compact`.
    Compacting,
}

impl RunPhase {
    /// `get_state.isStreaming`: true for the whole session-level run.
    pub fn is_streaming(self) -> bool {
        !matches!(self, RunPhase::Idle)
    }

    /// `get_state.isCompacting`.
    pub fn is_compacting(self) -> bool {
        matches!(self, RunPhase::Compacting)
    }
}

/// Phase, cancel token and the settled signal of one session.
#[derive(Debug)]
pub struct RunControl {
    phase: watch::Sender<RunPhase>,
    /// True once the last run's `agent_settled` has been queued (what `abort` waits for).
    settled: watch::Sender<bool>,
    cancel: Mutex<Option<CancellationToken>>,
    aborted: AtomicBool,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            phase: watch::channel(RunPhase::Idle).0,
            settled: watch::channel(true).0,
            cancel: Mutex::new(None),
            aborted: AtomicBool::new(false),
        }
    }
}

impl RunControl {
    /// The current phase.
    pub fn phase(&self) -> RunPhase {
        *self.phase.borrow()
    }

    /// Starts a run if idle: the phase becomes Streaming and a fresh cancel token is returned.
    /// `None` when a run is already in flight.
    pub fn begin(&self) -> Option<CancellationToken> {
        let started = self.phase.send_if_modified(|p| {
            if *p == RunPhase::Idle {
                *p = RunPhase::Streaming;
                true
            } else {
                false
            }
        });
        if !started {
            return None;
        }
        let token = CancellationToken::new();
        *self.cancel.lock() = Some(token.clone());
        self.aborted.store(false, Ordering::SeqCst);
        self.settled.send_replace(false);
        Some(token)
    }

    /// Moves between in-run phases (Streaming, RetryBackoff, Compacting); ignored when idle.
    pub fn set_phase(&self, phase: RunPhase) {
        self.phase.send_if_modified(|p| {
            if *p != RunPhase::Idle && *p != phase {
                *p = phase;
                true
            } else {
                false
            }
        });
    }

    /// Marks the run aborted and fires its cancel token (provider stream, tools, back-off).
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        if let Some(t) = self.cancel.lock().as_ref() {
            t.cancel();
        }
    }

    /// Whether the run in flight (or the last one) was aborted.
    pub fn was_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Ends the run: the phase becomes Idle (so a client reacting to `agent_settled` finds the
    /// session idle) and returns whether it was aborted. Call before emitting `agent_settled`.
    pub fn finish(&self) -> bool {
        let token = self.cancel.lock().take();
        let aborted = self.was_aborted() || token.is_some_and(|t| t.is_cancelled());
        self.phase.send_replace(RunPhase::Idle);
        aborted
    }

    /// Signals waiters that `agent_settled` has been queued. Call after emitting it.
    pub fn mark_settled(&self) {
        self.settled.send_replace(true);
    }

    /// Resolves once no run is in flight and its `agent_settled` has been queued.
    pub async fn wait_settled(&self) {
        let mut rx = self.settled.subscribe();
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_is_exclusive_until_finish() {
        let rc = RunControl::default();
        assert!(rc.begin().is_some());
        assert!(rc.begin().is_none());
        assert!(rc.phase().is_streaming());
        rc.set_phase(RunPhase::RetryBackoff);
        assert_eq!(rc.phase(), RunPhase::RetryBackoff);
        assert!(!rc.finish());
        assert_eq!(rc.phase(), RunPhase::Idle);
        rc.set_phase(RunPhase::Streaming);
        assert_eq!(rc.phase(), RunPhase::Idle, "set_phase never starts a run");
    }

    #[tokio::test]
    async fn abort_cancels_and_settles() {
        let rc = RunControl::default();
        let token = rc.begin().unwrap();
        rc.abort();
        assert!(token.is_cancelled());
        assert!(rc.finish());
        rc.mark_settled();
        rc.wait_settled().await;
    }
}
