//! Typed provider failures and the retry / context-overflow classification.
//!
//! A failed request still ends as an [`AssistantMessage`] with `stopReason: "error"` (or
//! `"aborted"`) and an `errorMessage` (spec agent-loop.md §2.3 point 6). The built-in adapters
//! additionally attach a [`ProviderError`] in [`AssistantMessage::error`], which is never
//! serialized: it exists only in memory, for the layer that decides about retries (§6) and
//! overflow recovery (§7).
//!
//! Messages read back from a session file carry no typed error, so [`classify`] prefers the
//! typed error and otherwise falls back to upstream's text patterns over `errorMessage`
//! (upstream `packages/ai/src/utils/retry.ts` `isRetryableAssistantError`,
//! `packages/ai/src/utils/overflow.ts` `isContextOverflow`).

use crate::types::{AssistantMessage, StopReason};
use regex::Regex;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// Why a provider request failed. `Display` is exactly the message's `errorMessage` text.
///
/// The variant is the kind of failure; only [`ProviderError::Http`] has an HTTP status, a
/// response body and a server-requested delay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The server answered with a non-2xx status before any content was streamed.
    #[error("{message}")]
    Http {
        /// HTTP status code, e.g. `429`, `529`.
        status: u16,
        /// Delay the server asked for, in ms: the `retry-after-ms` header (milliseconds), else
        /// `retry-after` (seconds, or an HTTP date relative to when the response arrived);
        /// `None` when neither header is present or parseable.
        retry_after_ms: Option<u64>,
        /// The raw response body text (empty when there was none or it could not be read).
        body: String,
        /// `errorMessage` as the adapter words it, e.g. `429 {"type":"error",…}`.
        message: String,
    },
    /// No response at all: connection refused, DNS failure, TLS failure, … (e.g.
    /// `Connection error.`).
    #[error("{message}")]
    Transport {
        /// `errorMessage`.
        message: String,
    },
    /// The connect timeout or the idle timeout (settings `httpIdleTimeoutMs`) ran out, while
    /// connecting, waiting for the response headers, or between two body chunks.
    #[error("{message}")]
    Timeout {
        /// `errorMessage`, e.g. `Request timed out.`.
        message: String,
    },
    /// The connection broke while the response body was streaming (e.g. `terminated: other
    /// side closed (UND_ERR_SOCKET)`).
    #[error("{message}")]
    Disconnected {
        /// `errorMessage`.
        message: String,
    },
    /// The body ended cleanly but without the stream's terminal event (e.g. `Anthropic stream
    /// ended before message_stop`, `Stream ended without finish_reason`).
    #[error("{message}")]
    StreamEndedEarly {
        /// `errorMessage`.
        message: String,
    },
    /// The request was cancelled through its cancel token (`stopReason: "aborted"`).
    #[error("{message}")]
    Aborted {
        /// `errorMessage`, e.g. `Request was aborted`.
        message: String,
    },
    /// The provider reported an error inside a successful (2xx) stream: an Anthropic
    /// `event: error`, an OpenAI chunk with `error`, an error `finish_reason`, a refusal.
    #[error("{message}")]
    Stream {
        /// `errorMessage`: the provider's text (for Anthropic the raw event data).
        message: String,
    },
    /// The response could not be understood: malformed UTF-8 or SSE, an unparseable event, an
    /// unknown stop reason.
    #[error("{message}")]
    Protocol {
        /// `errorMessage`.
        message: String,
    },
}

impl ProviderError {
    /// The `errorMessage` text (same as `Display`).
    pub fn message(&self) -> &str {
        match self {
            ProviderError::Http { message, .. }
            | ProviderError::Transport { message }
            | ProviderError::Timeout { message }
            | ProviderError::Disconnected { message }
            | ProviderError::StreamEndedEarly { message }
            | ProviderError::Aborted { message }
            | ProviderError::Stream { message }
            | ProviderError::Protocol { message } => message,
        }
    }

    /// The HTTP status of an [`ProviderError::Http`] error, else `None`.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server-requested delay in ms of an [`ProviderError::Http`] error, if it sent one.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            ProviderError::Http { retry_after_ms, .. } => *retry_after_ms,
            _ => None,
        }
    }

    /// The response body of an [`ProviderError::Http`] error, else `None`.
    pub fn body(&self) -> Option<&str> {
        match self {
            ProviderError::Http { body, .. } => Some(body),
            _ => None,
        }
    }

    /// Whether this is an [`ProviderError::Aborted`].
    pub fn is_aborted(&self) -> bool {
        matches!(self, ProviderError::Aborted { .. })
    }

    /// The same error as an [`ProviderError::Aborted`] (keeping its text) when `aborted`,
    /// else unchanged. Used when a failure races the cancel token.
    pub fn aborted_if(self, aborted: bool) -> Self {
        if aborted && !self.is_aborted() {
            ProviderError::Aborted {
                message: self.message().to_owned(),
            }
        } else {
            self
        }
    }

    /// Whether the agent should retry after this error (agent-loop.md §6.1, upstream
    /// `isRetryableAssistantError`). Never for context overflows (they are compacted instead,
    /// §7), aborts, or quota/billing exhaustion (`insufficient_quota`, `quota exceeded`,
    /// `billing`, …).
    ///
    /// * HTTP 408, 429 and 5xx (incl. Anthropic's 529 `overloaded_error`) are retryable; other
    ///   statuses fall back to upstream's text patterns over the message (e.g. OpenRouter's
    ///   `Provider returned error`).
    /// * Transport failures, timeouts, disconnects and early stream ends are retryable.
    /// * Errors reported inside the stream and protocol errors use the text patterns
    ///   (`overloaded`, `rate limit`, …).
    pub fn is_retryable(&self) -> bool {
        if self.is_context_overflow() {
            return false;
        }
        match self {
            ProviderError::Http {
                status,
                body,
                message,
                ..
            } => {
                if is_quota_error_text(message) || is_quota_error_text(body) {
                    false
                } else if *status == 408 || *status == 429 || (500..=599).contains(status) {
                    true
                } else {
                    is_retryable_error_text(message)
                }
            }
            ProviderError::Transport { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::Disconnected { .. }
            | ProviderError::StreamEndedEarly { .. } => true,
            ProviderError::Aborted { .. } => false,
            ProviderError::Stream { message } | ProviderError::Protocol { message } => {
                is_retryable_error_text(message)
            }
        }
    }

    /// Whether this error says the request did not fit the model's context window
    /// (agent-loop.md §7 case 1): an HTTP 413, or an HTTP (other than 429, which is always
    /// throttling) or in-stream error whose text
    /// matches upstream's overflow patterns (`prompt is too long`, `context_length_exceeded`,
    /// `exceeds the context window`, …) and none of the exclusions (`rate limit`, `too many
    /// requests`, `Throttling error:` …). Transport-level failures and aborts never are.
    ///
    /// Takes no context window: the silent overflow cases need the message's usage, see
    /// [`is_context_overflow`].
    pub fn is_context_overflow(&self) -> bool {
        match self {
            ProviderError::Http {
                status,
                body,
                message,
                ..
            } => {
                *status != 429
                    && (*status == 413
                        || is_overflow_error_text(message)
                        || (!body.is_empty() && is_overflow_error_text(body)))
            }
            ProviderError::Stream { message } | ProviderError::Protocol { message } => {
                is_overflow_error_text(message)
            }
            ProviderError::Transport { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::Disconnected { .. }
            | ProviderError::StreamEndedEarly { .. }
            | ProviderError::Aborted { .. } => false,
        }
    }
}

/// What the retry / compaction layer should do with a finished assistant message
/// (agent-loop.md §6.1, §7, §8.2). See [`classify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// A normal response (`stop`, `length`, `toolUse`) that is not a silent overflow.
    Ok,
    /// `stopReason: "aborted"`: never retried, never compacted for.
    Aborted,
    /// The context did not fit (§7): an overflow error, or a successful response whose usage
    /// shows the input exceeded the window. Recover by compacting, not by plain retry.
    ContextOverflow,
    /// A transient error (§6.1): retry with backoff.
    Retryable,
    /// Any other error (bad request, auth, quota/billing exhaustion, …): give up.
    Fatal,
}

/// Classifies a finished assistant message. `context_window` is the model's window in tokens
/// (`0` = unknown, which disables the usage-based overflow checks).
///
/// Order: `aborted` → [`ErrorClass::Aborted`]; a context overflow (see
/// [`is_context_overflow`]) → [`ErrorClass::ContextOverflow`]; any other non-`error` stop →
/// [`ErrorClass::Ok`]; an `error` stop → [`ErrorClass::Retryable`] or [`ErrorClass::Fatal`],
/// decided by the typed [`AssistantMessage::error`] when present
/// ([`ProviderError::is_retryable`]), else by upstream's text patterns over `errorMessage`
/// ([`is_retryable_error_text`]; an empty or absent `errorMessage` is fatal).
pub fn classify(message: &AssistantMessage, context_window: u64) -> ErrorClass {
    match message.stop_reason {
        StopReason::Aborted => return ErrorClass::Aborted,
        StopReason::Stop
        | StopReason::Length
        | StopReason::ToolUse
        | StopReason::Pending
        | StopReason::Error => {}
    }
    if is_context_overflow(message, context_window) {
        return ErrorClass::ContextOverflow;
    }
    match message.stop_reason {
        StopReason::Error => {}
        StopReason::Stop
        | StopReason::Length
        | StopReason::ToolUse
        | StopReason::Pending
        | StopReason::Aborted => return ErrorClass::Ok,
    }
    let retryable = match &message.error {
        Some(error) => error.is_retryable(),
        None => message
            .error_message
            .as_deref()
            .is_some_and(|text| !text.is_empty() && is_retryable_error_text(text)),
    };
    if retryable {
        ErrorClass::Retryable
    } else {
        ErrorClass::Fatal
    }
}

/// Whether `message` is a transient error worth retrying (agent-loop.md §6.1): same as
/// `classify(message, 0) == ErrorClass::Retryable`.
pub fn is_retryable(message: &AssistantMessage) -> bool {
    classify(message, 0) == ErrorClass::Retryable
}

/// Whether `message` shows a context overflow (agent-loop.md §7, upstream
/// `isContextOverflow(message, contextWindow)`):
///
/// 1. `stopReason: "error"` and the typed error says so ([`ProviderError::is_context_overflow`]),
///    or, without a typed error, `errorMessage` matches the overflow patterns
///    ([`is_overflow_error_text`]);
/// 2. silent overflow: `stopReason: "stop"` and `usage.input + usage.cacheRead >
///    context_window`;
/// 3. length overflow: `stopReason: "length"`, `usage.output == 0` and `usage.input +
///    usage.cacheRead ≥ 0.99 × context_window`.
///
/// Cases 2 and 3 apply only when `context_window > 0` (tokens).
pub fn is_context_overflow(message: &AssistantMessage, context_window: u64) -> bool {
    let input = message.usage.input.saturating_add(message.usage.cache_read);
    match message.stop_reason {
        StopReason::Error => match &message.error {
            Some(error) => error.is_context_overflow(),
            None => message
                .error_message
                .as_deref()
                .is_some_and(is_overflow_error_text),
        },
        StopReason::Stop => context_window > 0 && input > context_window,
        StopReason::Length => {
            context_window > 0
                && message.usage.output == 0
                && input as f64 >= context_window as f64 * 0.99
        }
        StopReason::ToolUse | StopReason::Aborted | StopReason::Pending => false,
    }
}

/// Upstream's quota/billing-exhaustion patterns: these errors are never retried even when
/// they arrive as HTTP 429 (agent-loop.md §6.1, newer).
const QUOTA_PATTERNS: &[&str] = &[
    "GoUsageLimitError",
    "FreeUsageLimitError",
    "Monthly usage limit reached",
    "available balance",
    "insufficient_quota",
    "out of budget",
    "quota exceeded",
    "billing",
];

/// Upstream's transient-error patterns (agent-loop.md §6.1, newer list).
const RETRYABLE_PATTERNS: &[&str] = &[
    "overloaded",
    "rate.?limit",
    "too many requests",
    "429",
    "500",
    "502",
    "503",
    "504",
    "524",
    "service.?unavailable",
    "server.?error",
    "internal.?error",
    "provider.?returned.?error",
    "exceeded request buffer limit while retrying upstream",
    "network.?error",
    "connection.?error",
    "connection.?refused",
    "connection.?lost",
    "other side closed",
    "fetch failed",
    "getaddrinfo",
    "ENOTFOUND",
    "EAI_AGAIN",
    "upstream.?connect",
    "reset before headers",
    "socket hang up",
    "socket connection was closed",
    "timed? out",
    "timeout",
    "terminated",
    "websocket.?closed",
    "websocket.?error",
    "ended without",
    "stream ended before message_stop",
    "stream ended before a terminal response event",
    "http2 request did not get a response",
    "retry delay",
    "you can retry your request",
    "try your request again",
    "please retry your request",
    "ResourceExhausted",
];

/// Upstream's context-overflow patterns, one per provider wording (agent-loop.md §7).
const OVERFLOW_PATTERNS: &[&str] = &[
    r"prompt is too long",
    r"request_too_large",
    r"input is too long for requested model",
    r"exceeds the context window",
    r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
    r"input token count.*exceeds the maximum",
    r"maximum prompt length is \d+",
    r"reduce the length of the messages",
    r"maximum context length is \d+ tokens",
    r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",
    r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
    r"exceeds the limit of \d+",
    r"exceeds the available context size",
    r"greater than the context length",
    r"context window exceeds limit",
    r"exceeded model token limit",
    r"too large for model with \d+ maximum context length",
    r"model_context_window_exceeded",
    r"prompt too long; exceeded (?:max )?context length",
    r"this model.?s maximum context length is \d+",
    r"requested \d+ output tokens",
    r"prompt contains.*\d+ input tokens",
    r"for a total of.*\d+ tokens",
    r"context[_ ]length[_ ]exceeded",
    r"too many tokens",
    r"token limit exceeded",
    r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
];

/// Texts that look like overflow but are throttling (e.g. Bedrock's `ThrottlingException: Too
/// many tokens, please wait`): they exclude a text from overflow detection.
const NON_OVERFLOW_PATTERNS: &[&str] = &[
    r"^(?:Throttling error|Service unavailable):",
    r"rate limit",
    r"too many requests",
];

/// One case-insensitive alternation of `patterns`, compiled on first use. `None` only if a
/// pattern failed to compile (a bug, covered by the unit tests); callers then treat the text
/// as not matching.
fn alternation(
    cell: &'static OnceLock<Option<Regex>>,
    patterns: &[&str],
) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(&format!("(?i){}", patterns.join("|"))).ok())
        .as_ref()
}

fn matches(cell: &'static OnceLock<Option<Regex>>, patterns: &[&str], text: &str) -> bool {
    alternation(cell, patterns).is_some_and(|re| re.is_match(text))
}

/// Whether `text` names quota or billing exhaustion (`insufficient_quota`, `quota exceeded`,
/// `billing`, …; case-insensitive substring match).
pub fn is_quota_error_text(text: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    matches(&RE, QUOTA_PATTERNS, text)
}

/// Upstream's text-only retry rule for an `errorMessage` (agent-loop.md §6.1): not a context
/// overflow ([`is_overflow_error_text`]), not quota/billing exhaustion
/// ([`is_quota_error_text`]), and matching one of the transient patterns (`overloaded`,
/// `rate.?limit`, `429`, `5xx`, `connection.?error`, `terminated`, `timed? out`, `ended
/// without`, …; case-insensitive).
pub fn is_retryable_error_text(text: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    !is_overflow_error_text(text)
        && !is_quota_error_text(text)
        && matches(&RE, RETRYABLE_PATTERNS, text)
}

/// Upstream's text-only overflow rule for an `errorMessage` (agent-loop.md §7 case 1): one of
/// the provider overflow patterns matches and none of the throttling exclusions does
/// (case-insensitive).
pub fn is_overflow_error_text(text: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    static NOT: OnceLock<Option<Regex>> = OnceLock::new();
    !matches(&NOT, NON_OVERFLOW_PATTERNS, text) && matches(&RE, OVERFLOW_PATTERNS, text)
}

/// The delay a server asked for, in ms, from the values of the `retry-after-ms` and
/// `retry-after` response headers (as the upstream SDKs read them): `retry-after-ms` is a
/// number of milliseconds; `retry-after` is a number of seconds or an HTTP date, taken
/// relative to `now` (a date in the past gives 0). Negative, non-finite or unparseable values
/// count as absent; `retry-after-ms` wins when both are valid. Fractions are rounded up.
pub fn parse_retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<u64> {
    let non_negative = |v: f64| (v.is_finite() && v >= 0.0).then_some(v);
    if let Some(ms) = retry_after_ms.and_then(|s| s.trim().parse::<f64>().ok()) {
        if let Some(ms) = non_negative(ms) {
            return Some(ms.ceil() as u64);
        }
    }
    let value = retry_after?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return non_negative(secs).map(|s| (s * 1000.0).ceil() as u64);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_pattern_lists_compile() {
        for list in [
            QUOTA_PATTERNS,
            RETRYABLE_PATTERNS,
            OVERFLOW_PATTERNS,
            NON_OVERFLOW_PATTERNS,
        ] {
            for p in list {
                assert!(Regex::new(&format!("(?i){p}")).is_ok(), "{p}");
            }
        }
    }

    #[test]
    fn retry_after_headers() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after(Some("1500"), Some("9"), now), Some(1500));
        assert_eq!(parse_retry_after(Some("0.2"), None, now), Some(1));
        assert_eq!(parse_retry_after(None, Some("2"), now), Some(2000));
        assert_eq!(parse_retry_after(None, Some("0.5"), now), Some(500));
        assert_eq!(parse_retry_after(Some("-1"), Some("3"), now), Some(3000));
        assert_eq!(parse_retry_after(Some("soon"), None, now), None);
        assert_eq!(parse_retry_after(None, Some("-4"), now), None);
        assert_eq!(parse_retry_after(None, None, now), None);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(None, Some(&later), now), Some(30_000));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(None, Some(&earlier), now), Some(0));
    }
}
