//! Run phase, abort and settling (spec agent-loop.md §5, §13; upstream-1.6-notes.md §1).
//!
//! The session-level run is one value, [`RunPhase`], read by `get_state` (`isStreaming`,
//! `isCompacting`), by prompt admission and by EOF handling. A run begins with
//! [`RunControl::begin`] (Idle → Streaming, atomically, so two prompts can never both start)
//! and ends with [`RunControl::finish`] plus [`RunControl::mark_settled`], which the session's
//! settle guard calls on every exit path, unwinding from a panic included.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// What [`RunControl::finish`] returns: whether the run was aborted, and which run it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// Whether the run was aborted (`agent_settled.aborted`).
    pub aborted: bool,
    run: u64,
}

/// Phase, cancel token and the settled signal of one session.
#[derive(Debug)]
pub struct RunControl {
    phase: watch::Sender<RunPhase>,
    /// Number of the last run started (1 for the first; 0 = none yet).
    started: AtomicU64,
    /// Number of the last run whose `agent_settled` has been queued (what `abort` waits for).
    /// A number rather than a flag: the settling task of run N can be preempted between its
    /// `agent_settled` and [`RunControl::mark_settled`] for so long that run N+1 has begun
    /// (a client reacts to the event at once); a flag set then would claim run N+1 settled,
    /// and a `fork` sent during run N+1 was answered before its `agent_settled` (seen in CI).
    settled: watch::Sender<u64>,
    cancel: Mutex<Option<CancellationToken>>,
    aborted: AtomicBool,
    /// True from [`RunControl::finish`] until [`RunControl::mark_settled`] while the
    /// `agent_settled` handlers of extensions run (upstream `_isEmittingAgentSettled`).
    settling: AtomicBool,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl {
            phase: watch::channel(RunPhase::Idle).0,
            started: AtomicU64::new(0),
            settled: watch::channel(0).0,
            cancel: Mutex::new(None),
            aborted: AtomicBool::new(false),
            settling: AtomicBool::new(false),
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
        self.started.fetch_add(1, Ordering::SeqCst);
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
    /// session idle) and says whether it was aborted. Call before emitting `agent_settled`,
    /// and pass the result to [`RunControl::mark_settled`] after.
    pub fn finish(&self) -> Finished {
        let token = self.cancel.lock().take();
        let aborted = self.was_aborted() || token.is_some_and(|t| t.is_cancelled());
        // Read before the phase is Idle: no later run can have begun yet.
        let run = self.started.load(Ordering::SeqCst);
        self.settling.store(true, Ordering::SeqCst);
        self.phase.send_replace(RunPhase::Idle);
        Finished { aborted, run }
    }

    /// Whether a finished run's `agent_settled` has not been queued yet (its extension
    /// handlers may still be running): what they start or send waits for it
    /// ([`RunControl::wait_run_settled`]), as upstream defers it past the event.
    pub fn is_settling(&self) -> bool {
        self.settling.load(Ordering::SeqCst)
    }

    /// The number of the last run started (1 for the first; 0 = none yet).
    pub fn last_started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Resolves once run number `run` has settled (at once for 0 or a run settled already).
    pub async fn wait_run_settled(&self, run: u64) {
        let mut rx = self.settled.subscribe();
        while *rx.borrow_and_update() < run {
            if rx.changed().await.is_err() {
                break;
            }
        }
    }

    /// Signals waiters that the `agent_settled` of the run `finished` ended has been queued.
    /// Call after emitting it.
    pub fn mark_settled(&self, finished: Finished) {
        self.settling.store(false, Ordering::SeqCst);
        self.settled.send_if_modified(|s| {
            let newer = finished.run > *s;
            if newer {
                *s = finished.run;
            }
            newer
        });
    }

    /// Resolves once the last run started has settled (its `agent_settled` has been queued);
    /// at once when no run was ever started.
    pub async fn wait_settled(&self) {
        let want = self.started.load(Ordering::SeqCst);
        let mut rx = self.settled.subscribe();
        while *rx.borrow_and_update() < want {
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
        assert!(!rc.finish().aborted);
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
        let finished = rc.finish();
        assert!(finished.aborted);
        rc.mark_settled(finished);
        rc.wait_settled().await;
    }

    /// Run 1's settling task marks it settled only after run 2 has begun (it was preempted
    /// between its `agent_settled` and the mark): waiters still wait for run 2.
    #[tokio::test]
    async fn a_late_mark_of_the_last_run_does_not_settle_the_next() {
        let rc = std::sync::Arc::new(RunControl::default());
        rc.begin().unwrap();
        let first = rc.finish();
        rc.begin().unwrap();
        rc.mark_settled(first);
        let waiter = {
            let rc = rc.clone();
            tokio::spawn(async move { rc.wait_settled().await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "run 2 counted as settled by run 1's mark"
        );
        let second = rc.finish();
        rc.mark_settled(second);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("wait_settled resolves once run 2 settled")
            .unwrap();
    }
}
