//! Plumbing shared by the wire adapters: the event channel behind an [`AssistantStream`],
//! the shared HTTP client, streaming-JSON repair, error texts and small model helpers.

use crate::stream::{AssistantMessageEvent, AssistantStream, StreamOptions};
use crate::types::{AssistantMessage, Content, Model, StopReason, ThinkingLevel};
use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::StreamExt;
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::OnceLock;
use std::time::Instant;

/// Text of a request that was cancelled through [`StreamOptions::cancel`]
/// (golden `abort_mid_stream`).
pub(crate) const ABORTED_MESSAGE: &str = "Request was aborted";

/// Text upstream (Node/undici) reports when the server drops the connection mid-body
/// (golden `stream_disconnect_retry`). Matches the retry classifier (`terminated`,
/// `other side closed`).
pub(crate) const BODY_TERMINATED_MESSAGE: &str = "terminated: other side closed (UND_ERR_SOCKET)";

/// Text of a request that never got a response (connection refused, DNS, TLS), as the
/// upstream SDKs word it.
pub(crate) const CONNECTION_ERROR_MESSAGE: &str = "Connection error.";

/// `user-agent` sent with every request.
pub(crate) const USER_AGENT: &str = concat!("pi/", env!("CARGO_PKG_VERSION"));

/// The process-wide HTTP client (connection pooling across requests).
pub(crate) fn http_client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new())
    })
}

/// Sends events into the stream returned by [`event_stream`]. Send failures (consumer gone)
/// are ignored.
pub(crate) struct Emitter {
    tx: UnboundedSender<AssistantMessageEvent>,
}

impl Emitter {
    /// Push one event.
    pub(crate) fn emit(&self, event: AssistantMessageEvent) {
        let _ = self.tx.unbounded_send(event);
    }

    /// Push `Start` with a snapshot of the (empty) partial message.
    pub(crate) fn start(&self, partial: &AssistantMessage) {
        self.emit(AssistantMessageEvent::Start {
            partial: Box::new(partial.clone()),
        });
    }

    /// Finish successfully: stamp `durationMs` and push `Done`.
    pub(crate) fn done(&self, mut message: AssistantMessage, started: Instant) {
        message.duration_ms = Some(elapsed_ms(started));
        self.emit(AssistantMessageEvent::Done {
            reason: message.stop_reason,
            message: Box::new(message),
        });
    }

    /// Finish with a failure: `stopReason` becomes `aborted` when `aborted` else `error`,
    /// `errorMessage` is `text`; content streamed so far is kept.
    pub(crate) fn fail(
        &self,
        mut message: AssistantMessage,
        aborted: bool,
        text: impl Into<String>,
        started: Instant,
    ) {
        message.stop_reason = if aborted {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        message.error_message = Some(text.into());
        message.duration_ms = Some(elapsed_ms(started));
        self.emit(AssistantMessageEvent::Error {
            reason: message.stop_reason,
            message: Box::new(message),
        });
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Build an [`AssistantStream`] driven by `producer`. The producer runs only while the stream
/// is polled (no task is spawned, so calling this never needs a runtime) and is dropped, which
/// cancels its HTTP request, when the consumer drops the stream.
pub(crate) fn event_stream<F, Fut>(producer: F) -> AssistantStream
where
    F: FnOnce(Emitter) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = unbounded();
    let driver = futures::stream::once(producer(Emitter { tx }))
        .filter_map(|()| futures::future::ready(None::<AssistantMessageEvent>));
    Box::pin(futures::stream::select(rx, driver))
}

/// Output-token cap for a request: the caller's value, else `min(model.maxTokens, 32000)`
/// (agent-loop.md §2.3 point 4). A model without `maxTokens` gets 32000.
pub(crate) fn effective_max_tokens(model: &Model, options: &StreamOptions) -> u64 {
    match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens == 0 => 32_000,
        _ => model.max_tokens.min(32_000),
    }
}

/// Requested reasoning level after clamping to the model; `None` when thinking is off or the
/// model does not reason.
pub(crate) fn requested_reasoning(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    let level = options.reasoning?;
    if level == ThinkingLevel::Off || !model.reasoning {
        return None;
    }
    match crate::models::clamp_thinking_level(model, level) {
        ThinkingLevel::Off => None,
        l => Some(l),
    }
}

/// A string entry of `model.thinkingLevelMap` (the provider-native value for `level`).
pub(crate) fn mapped_level(model: &Model, level: ThinkingLevel) -> Option<String> {
    model
        .thinking_level_map
        .as_ref()?
        .get(level.as_str())?
        .as_str()
        .map(str::to_owned)
}

/// A boolean `model.compat` flag, if set.
pub(crate) fn compat_bool(model: &Model, key: &str) -> Option<bool> {
    model.compat.as_ref()?.get(key)?.as_bool()
}

/// A string `model.compat` value, if set.
pub(crate) fn compat_str<'a>(model: &'a Model, key: &str) -> Option<&'a str> {
    model.compat.as_ref()?.get(key)?.as_str()
}

/// Headers from `model.headers` (string values only) followed by the per-request headers, so
/// later entries override earlier ones when inserted in order.
pub(crate) fn extra_headers(model: &Model, options: &StreamOptions) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(h) = &model.headers {
        for (k, v) in h {
            if let Some(s) = v.as_str() {
                out.push((k.clone(), s.to_owned()));
            }
        }
    }
    out.extend(options.headers.iter().cloned());
    out
}

/// Insert headers into a request builder's header map, replacing same-named ones; invalid
/// names or values are skipped.
pub(crate) fn apply_headers(
    map: &mut reqwest::header::HeaderMap,
    headers: impl IntoIterator<Item = (String, String)>,
) {
    use reqwest::header::{HeaderName, HeaderValue};
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            map.insert(name, value);
        }
    }
}

/// Compact JSON text of a value (as JavaScript `JSON.stringify` writes it).
pub(crate) fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Best-effort parse of possibly truncated JSON tool arguments into an object (upstream
/// `parseStreamingJson`). Unterminated strings and containers are closed; a dangling key,
/// `:` or `,` is cut back to the previous complete member. Anything that does not yield an
/// object gives `{}`.
pub fn parse_streaming_json(text: &str) -> Value {
    let t = text.trim();
    if t.is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        return object_or_empty(v);
    }
    // Positions outside strings where the text may be cut: just after `{`/`[`, or at `,`.
    let mut cuts = Vec::new();
    let mut in_str = false;
    let mut esc = false;
    for (i, c) in t.char_indices() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => cuts.push(i + 1),
            ',' => cuts.push(i),
            _ => {}
        }
    }
    if let Some(v) = try_complete(t) {
        return v;
    }
    for &cut in cuts.iter().rev().take(16) {
        if let Some(v) = try_complete(&t[..cut]) {
            return v;
        }
    }
    Value::Object(Map::new())
}

fn object_or_empty(v: Value) -> Value {
    match v {
        Value::Object(_) => v,
        _ => Value::Object(Map::new()),
    }
}

/// Close open strings and containers of `prefix` and parse it.
fn try_complete(prefix: &str) -> Option<Value> {
    let mut stack = Vec::new();
    let mut in_str = false;
    let mut esc = false;
    for c in prefix.chars() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    let mut s = prefix.trim_end().to_owned();
    if in_str {
        if esc {
            s.pop();
        }
        s.push('"');
    }
    while let Some(c) = stack.pop() {
        s.push(c);
    }
    match serde_json::from_str::<Value>(&s) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streaming_json_repairs_truncation() {
        assert_eq!(parse_streaming_json(""), json!({}));
        assert_eq!(parse_streaming_json("{\"comman"), json!({}));
        assert_eq!(
            parse_streaming_json("{\"command\": \"ech"),
            json!({"command": "ech"})
        );
        assert_eq!(parse_streaming_json("{\"a\":1,\"b"), json!({"a": 1}));
        assert_eq!(parse_streaming_json("{\"a\":1,\"b\":"), json!({"a": 1}));
        assert_eq!(parse_streaming_json("{\"a\":[1,2"), json!({"a": [1, 2]}));
        assert_eq!(parse_streaming_json("{\"a\":\"x\\"), json!({"a": "x"}));
        assert_eq!(parse_streaming_json("{\"a\":tr"), json!({}));
        assert_eq!(parse_streaming_json("[1,2]"), json!({}));
        assert_eq!(
            parse_streaming_json("{\"a\":{\"b\":\"c\"}}"),
            json!({"a": {"b": "c"}})
        );
    }

    #[test]
    fn http_error_texts() {
        let body = r#"{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}"#;
        assert_eq!(
            openai_http_error(500, body),
            r#"500: {"message":"boom","type":"server_error","param":null,"code":null}"#
        );
        let body =
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#;
        assert_eq!(
            anthropic_http_error(529, body),
            r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        );
        assert_eq!(anthropic_http_error(400, ""), "400 status code (no body)");
    }
}
