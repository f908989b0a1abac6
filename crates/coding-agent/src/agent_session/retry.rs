//! Automatic retry of transient provider errors (spec agent-loop.md §6, upstream-1.6-notes.md
//! §5; golden `auto_retry_529`, `auto_retry_exhausted`, `abort_retry`,
//! `stream_disconnect_retry`).
//!
//! The decision taken when a low-level run ends ([`decide`]) is the one place that says
//! "retry this error", "context overflow: leave it to compaction" or "settle"; it is made at
//! the run's `agent_end` (so that `agent_end.willRetry` is known) and carried out by the
//! session's run loop (`run.rs`). [`RetryState`] is the per-session chain state: the attempt
//! counter, the decision waiting to be carried out and the back-off in progress.
//!
//! Beyond upstream: a server-requested delay (`retry-after-ms` / `Retry-After`, carried by
//! [`pi_ai::ProviderError::Http`]) is honoured — the back-off is at least that long — and a
//! delay above `retry.maxAgentDelayMs` ends the chain at once with a clear `finalError`.

use crate::config::RetrySettings;
use pi_ai::{classify, AssistantMessage, ErrorClass, Message};
use tokio_util::sync::CancellationToken;

/// `auto_retry_end.finalError` of a chain ended by `abort_retry`, `abort` or a new prompt
/// flow (agent-loop.md §6.2 step 5).
pub const RETRY_CANCELLED: &str = "Retry cancelled";

/// The agent-level retry policy of one decision: settings `retry.*` with the session's
/// `set_auto_retry` toggle applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retry at all (`retry.enabled` / `set_auto_retry`).
    pub enabled: bool,
    /// `retry.maxRetries`: attempts per chain (`auto_retry_start.maxAttempts`).
    pub max_retries: u32,
    /// `retry.baseDelayMs`: the first back-off in ms.
    pub base_delay_ms: u64,
    /// `retry.maxAgentDelayMs`: the longest back-off in ms, and the longest server-requested
    /// delay that is waited for.
    pub max_agent_delay_ms: u64,
}

impl RetryPolicy {
    /// The policy from settings, with `enabled` from the session toggle.
    pub fn new(settings: &RetrySettings, enabled: bool) -> Self {
        RetryPolicy {
            enabled,
            max_retries: u32::try_from(settings.max_retries).unwrap_or(u32::MAX),
            base_delay_ms: settings.base_delay_ms,
            max_agent_delay_ms: settings.max_agent_delay_ms,
        }
    }

    /// The back-off before attempt `attempt` (1-based) in ms: `baseDelayMs · 2^(attempt−1)`,
    /// capped by `maxAgentDelayMs` (upstream `retryDelayMs`).
    pub fn backoff_ms(&self, attempt: u32) -> u64 {
        let shift = attempt.saturating_sub(1).min(63);
        let delay = self.base_delay_ms.saturating_mul(1u64 << shift);
        delay.min(self.max_agent_delay_ms)
    }
}

/// What the session does once a low-level run has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterRun {
    /// Nothing more: settle (ending a retry chain that failed with a non-retryable error
    /// first, see [`AfterRun::GiveUp`]).
    Settle,
    /// Wait `delay_ms`, hide the failed attempt from the context and run again
    /// (`agent_end.willRetry: true`, then `auto_retry_start`).
    Retry {
        /// 1-based attempt about to be made.
        attempt: u32,
        /// `retry.maxRetries`.
        max_attempts: u32,
        /// The back-off in ms (the larger of the exponential back-off and the server's delay).
        delay_ms: u64,
        /// The failed message's `errorMessage`.
        error_message: String,
    },
    /// The retry chain ends unsuccessfully: `auto_retry_end {success: false, attempt,
    /// finalError}`, then settle.
    GiveUp {
        /// Attempts made in this chain.
        attempt: u32,
        /// The last error, or why it is not retried.
        final_error: String,
    },
    /// The last message is a context overflow (agent-loop.md §7): not retried here; the run
    /// loop hands it to compaction's overflow recovery (compact, then retry once;
    /// `agent_end.willRetry` stays false, rpc-protocol.md §5).
    ContextOverflow {
        /// A retry chain in progress ends here first: `(attempts made, the error text)` for
        /// its `auto_retry_end {success: false}`.
        ended_chain: Option<(u32, String)>,
    },
}

impl AfterRun {
    /// `agent_end.willRetry`.
    pub fn will_retry(&self) -> bool {
        matches!(self, AfterRun::Retry { .. })
    }
}

/// Decides what follows a run whose created messages are `messages` (agent-loop.md §6.1–6.2):
///
/// * an aborted run settles;
/// * a context overflow (per [`pi_ai::classify`] with `context_window` in tokens) is
///   [`AfterRun::ContextOverflow`];
/// * a retryable error is retried while `attempt < max_retries` and retry is enabled; a
///   server-requested delay above `max_agent_delay_ms` gives up at once instead;
/// * any other error ends a chain in progress ([`AfterRun::GiveUp`] with its text) and
///   otherwise settles; a success settles.
///
/// `attempt` is the number of retries already made in the current chain (0 = none).
pub fn decide(
    messages: &[Message],
    attempt: u32,
    policy: &RetryPolicy,
    context_window: u64,
    aborted: bool,
) -> AfterRun {
    if aborted {
        return AfterRun::Settle;
    }
    let Some(last) = last_assistant(messages) else {
        return AfterRun::Settle;
    };
    let error_text = || {
        last.error_message
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "Unknown error".to_string())
    };
    let give_up_or_settle = || {
        if attempt > 0 {
            AfterRun::GiveUp {
                attempt,
                final_error: error_text(),
            }
        } else {
            AfterRun::Settle
        }
    };
    match classify(last, context_window) {
        ErrorClass::ContextOverflow => AfterRun::ContextOverflow {
            ended_chain: (attempt > 0 && last.stop_reason == pi_ai::StopReason::Error)
                .then(|| (attempt, error_text())),
        },
        ErrorClass::Ok | ErrorClass::Aborted => AfterRun::Settle,
        ErrorClass::Fatal => give_up_or_settle(),
        ErrorClass::Retryable if !policy.enabled || attempt >= policy.max_retries => {
            give_up_or_settle()
        }
        ErrorClass::Retryable => {
            let requested = last.error.as_ref().and_then(|e| e.retry_after_ms());
            match requested {
                Some(ms) if ms > policy.max_agent_delay_ms => AfterRun::GiveUp {
                    attempt,
                    final_error: format!(
                        "Not retried: the server asked to wait {ms} ms before retrying, more than retry.maxAgentDelayMs ({} ms). {}",
                        policy.max_agent_delay_ms,
                        error_text()
                    ),
                },
                _ => {
                    let next = attempt + 1;
                    AfterRun::Retry {
                        attempt: next,
                        max_attempts: policy.max_retries,
                        delay_ms: policy.backoff_ms(next).max(requested.unwrap_or(0)),
                        error_message: error_text(),
                    }
                }
            }
        }
    }
}

fn last_assistant(messages: &[Message]) -> Option<&AssistantMessage> {
    messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a),
        _ => None,
    })
}

/// The retry chain of one session.
#[derive(Debug, Default)]
pub struct RetryState {
    /// Retries made in the current chain (upstream `_retryAttempt`); reset by a success, a
    /// give-up or a cancel.
    pub attempt: u32,
    /// The decision of the last `agent_end`, taken by the run loop.
    pub decision: Option<AfterRun>,
    /// The back-off in progress: cancelling it is `abort_retry`.
    pub backoff: Option<CancellationToken>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_ai::{Model, ProviderError, StopReason};

    fn policy() -> RetryPolicy {
        RetryPolicy {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
            max_agent_delay_ms: 60_000,
        }
    }

    fn failed(status: u16, retry_after_ms: Option<u64>) -> Vec<Message> {
        let mut m = AssistantMessage::empty(&Model::unknown());
        m.stop_reason = StopReason::Error;
        let error = ProviderError::Http {
            status,
            retry_after_ms,
            body: String::new(),
            message: format!("{status} boom"),
        };
        m.error_message = Some(error.to_string());
        m.error = Some(Box::new(error));
        vec![Message::Assistant(m)]
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = policy();
        assert_eq!(
            (1..=6).map(|a| p.backoff_ms(a)).collect::<Vec<_>>(),
            vec![2000, 4000, 8000, 16000, 32000, 60000]
        );
        assert_eq!(p.backoff_ms(200), 60_000);
    }

    #[test]
    fn retry_until_max_then_give_up() {
        let p = policy();
        let m = failed(529, None);
        assert!(matches!(
            decide(&m, 0, &p, 0, false),
            AfterRun::Retry {
                attempt: 1,
                delay_ms: 2000,
                ..
            }
        ));
        assert!(matches!(
            decide(&m, 3, &p, 0, false),
            AfterRun::GiveUp { attempt: 3, .. }
        ));
        assert_eq!(decide(&m, 0, &p, 0, true), AfterRun::Settle);
        let off = RetryPolicy {
            enabled: false,
            ..p
        };
        assert_eq!(decide(&m, 0, &off, 0, false), AfterRun::Settle);
        assert_eq!(
            decide(&failed(400, None), 0, &p, 0, false),
            AfterRun::Settle
        );
        assert!(matches!(
            decide(&failed(401, None), 2, &p, 0, false),
            AfterRun::GiveUp { attempt: 2, .. }
        ));
    }

    #[test]
    fn retry_after_is_a_floor_and_over_the_cap_gives_up() {
        let p = policy();
        assert!(matches!(
            decide(&failed(429, Some(5000)), 0, &p, 0, false),
            AfterRun::Retry { delay_ms: 5000, .. }
        ));
        assert!(matches!(
            decide(&failed(429, Some(10)), 0, &p, 0, false),
            AfterRun::Retry { delay_ms: 2000, .. }
        ));
        match decide(&failed(429, Some(120_000)), 0, &p, 0, false) {
            AfterRun::GiveUp {
                attempt,
                final_error,
            } => {
                assert_eq!(attempt, 0);
                assert!(final_error.contains("120000 ms"), "{final_error}");
            }
            other => panic!("{other:?}"),
        }
    }
}
