//! Plumbing shared by the wire adapters: the event channel behind an [`AssistantStream`],
//! the shared HTTP client, request sending and SSE reading under cancellation, content-block
//! start/end events, usage totals, streaming-JSON repair, error texts and small model helpers.

mod client;
mod emit;
mod options;
mod partial_json;
mod send;
mod sse;

use crate::types::Content;
pub(crate) use client::{http1_client, LazyClient};
pub(crate) use emit::{aborted, end_event, event_stream, finish_usage, push_block, Emitter};
pub(crate) use options::{
    apply_headers, clamp_max_tokens_to_context, compat_bool, compat_str, effective_max_tokens,
    extra_headers, json_u64, mapped_level, requested_reasoning, resolve_api_key,
};
pub(crate) use partial_json::compact;
pub use partial_json::parse_streaming_json;
pub(crate) use send::{
    apply_header_changes, header_changes, hooked_headers, hooked_payload, response_headers,
    send_hooked_request, send_streaming_request,
};
use serde_json::Value;
pub(crate) use sse::{next_sse_event, StreamEnd};

/// Text of a request that was cancelled through [`StreamOptions::cancel`]
/// (golden `abort_mid_stream`).
pub(crate) const ABORTED_MESSAGE: &str = "Request was aborted";

/// Text upstream (Node/undici) reports when the server drops the connection mid-body
/// (golden `stream_disconnect_retry`). Matches the retry classifier (`terminated`,
/// `other side closed`).
pub(crate) const BODY_TERMINATED_MESSAGE: &str = "terminated: other side closed (UND_ERR_SOCKET)";

/// Text upstream (Node/undici) reports when the connection is reset mid-body (a TCP RST:
/// `terminated: read ECONNRESET`; conformance README, "Long error advice"). Matches the retry
/// classifier (`terminated`, `ECONNRESET`).
pub(crate) const BODY_RESET_MESSAGE: &str = "terminated: read ECONNRESET";

/// The text of a body that broke off, by its cause as upstream words each (issue 27): a
/// connection reset ([`std::io::ErrorKind::ConnectionReset`] anywhere in `error`'s source
/// chain) is [`BODY_RESET_MESSAGE`], anything else (a close before the body ended)
/// [`BODY_TERMINATED_MESSAGE`]. Timeouts are told apart before this.
pub(crate) fn body_broken_message(error: &(dyn std::error::Error + 'static)) -> &'static str {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionReset)
        {
            return BODY_RESET_MESSAGE;
        }
        cause = e.source();
    }
    BODY_TERMINATED_MESSAGE
}

/// Text for a body that stayed silent longer than the idle timeout, worded as undici's body
/// timeout would surface through upstream's error formatting (inferred from
/// [`BODY_TERMINATED_MESSAGE`]'s shape). Matches the retry classifier (`timeout`,
/// `terminated`).
pub(crate) const BODY_TIMEOUT_MESSAGE: &str =
    "terminated: Body Timeout Error (UND_ERR_BODY_TIMEOUT)";

/// Start of the text for a stream that sent bytes but no SSE event for longer than the idle
/// timeout (only keep-alive comments); the limit in ms follows. Matches the retry classifier
/// (`timeout`).
pub(crate) const STREAM_IDLE_MESSAGE: &str = "Stream idle timeout: no event in ";

/// Extra ms the event-level idle timer waits beyond `idle_timeout_ms` (at most the limit
/// itself), so that a fully silent connection is reported by the byte-level timeout.
const IDLE_EVENT_GRACE_MS: u64 = 50;

/// Text of a request that never got a response (connection refused, DNS, TLS), as the upstream
/// SDKs word it.
pub(crate) const CONNECTION_ERROR_MESSAGE: &str = "Connection error.";

/// Text of a request that timed out before response headers arrived (connect or idle timeout),
/// as the upstream SDKs word it.
pub(crate) const REQUEST_TIMEOUT_MESSAGE: &str = "Request timed out.";

/// `user-agent` sent with every request.
pub(crate) const USER_AGENT: &str = concat!("pi/", env!("CARGO_PKG_VERSION"));

/// `errorMessage` for a non-2xx response of an OpenAI-compatible endpoint (golden
/// `auto_retry_exhausted`, 1.6 notes §12): `"<status>: <JSON of body.error, or the body>"`.
pub(crate) fn openai_http_error(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return format!("{status} status code (no body)");
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => {
            let inner = match v.get("error") {
                Some(e) if !e.is_null() => e,
                _ => &v,
            };
            format!("{status}: {}", compact(inner))
        }
        Err(_) => format!("{status}: {body}"),
    }
}

/// `errorMessage` for a non-2xx response of the Anthropic Messages API, as the Anthropic SDK
/// words it (golden `auto_retry_529`, `overflow_compaction`): `"<status> <compact JSON body>"`,
/// or `"<status> <message>"` when the body has a top-level string `message`.
pub(crate) fn anthropic_http_error(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return format!("{status} status code (no body)");
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match v.get("message").and_then(Value::as_str) {
            Some(m) => format!("{status} {m}"),
            None => format!("{status} {}", compact(&v)),
        },
        Err(_) => format!("{status} {body}"),
    }
}

/// Text blocks of `content` joined with `sep`.
pub(crate) fn joined_text(content: &[Content], sep: &str) -> String {
    content
        .iter()
        .filter_map(Content::as_text)
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests;
