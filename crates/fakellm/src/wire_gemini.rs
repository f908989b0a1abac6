//! Gemini `streamGenerateContent?alt=sse` events (Google Generative AI and Vertex AI), and the
//! OAuth token endpoint that Vertex application-default credentials exchange a signed JWT or a
//! refresh token at.
//!
//! Shapes follow Google's public `GenerateContentResponse` reference: each SSE event is one
//! `data: {"candidates":[{"content":{"role":"model","parts":[…]},"index":0}], …}` line; thinking
//! arrives as parts with `"thought": true`, a function call as one whole `functionCall` part
//! (no streamed arguments), and the last event carries `finishReason` and `usageMetadata`.

use crate::script::{Block, Turn, Usage};
use crate::wire::chunks;
use serde_json::{json, Map, Value};

/// The Gemini SSE events (`data: …\r\n\r\n` strings) for a turn. `model` goes into
/// `modelVersion`, `seq` into `responseId` (`resp_fake_<seq>`).
///
/// * Text and thinking are split into `chunk_size`-character parts, one event each; a
///   thinking block's `signature` rides on its first part as `thoughtSignature`.
/// * A tool call is one `functionCall` part with `args`; its scripted `id` is sent as
///   `functionCall.id` (Gemini 3 style), none otherwise (Gemini 2.x style).
/// * Stop reasons: `stop` → `STOP`, `length` → `MAX_TOKENS`, `tool_use` → `STOP` (Gemini has no
///   tool-use reason), anything else verbatim (e.g. `SAFETY`).
/// * Usage: `promptTokenCount` = input + cache read, `cachedContentTokenCount` = cache read
///   (only when non-zero), `candidatesTokenCount` = output, `totalTokenCount` = their sum.
pub fn gemini_events(turn: &Turn, model: &str, seq: u64, chunk_size: usize) -> Vec<String> {
    let rid = format!("resp_fake_{seq}");
    let event = |parts: Vec<Value>, finish: Option<&str>, usage: Option<&Value>| {
        let mut candidate = Map::new();
        candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
        if let Some(reason) = finish {
            candidate.insert("finishReason".into(), json!(reason));
        }
        candidate.insert("index".into(), json!(0));
        let mut chunk = Map::new();
        chunk.insert("candidates".into(), json!([Value::Object(candidate)]));
        if let Some(u) = usage {
            chunk.insert("usageMetadata".into(), u.clone());
        }
        chunk.insert("modelVersion".into(), json!(model));
        chunk.insert("responseId".into(), json!(rid));
        format!("data: {}\r\n\r\n", Value::Object(chunk))
    };
    let mut out = Vec::new();
    for block in &turn.blocks {
        match block {
            Block::Text { text } => {
                for piece in chunks(text, chunk_size) {
                    out.push(event(vec![json!({"text": piece})], None, None));
                }
            }
            Block::Thinking {
                text, signature, ..
            } => {
                for (i, piece) in chunks(text, chunk_size).into_iter().enumerate() {
                    let mut part = json!({"text": piece, "thought": true});
                    if let (0, Some(sig)) = (i, signature) {
                        part["thoughtSignature"] = json!(sig);
                    }
                    out.push(event(vec![part], None, None));
                }
            }
            Block::ToolCall {
                name,
                arguments,
                id,
            } => {
                let mut call = json!({"name": name, "args": arguments});
                if let Some(id) = id {
                    call["id"] = json!(id);
                }
                out.push(event(vec![json!({"functionCall": call})], None, None));
            }
            Block::RedactedThinking { .. } | Block::Unknown => {}
        }
    }
    let reason = match turn.effective_stop_reason().as_str() {
        "stop" | "end_turn" | "tool_use" | "tool_calls" => "STOP".to_string(),
        "length" | "max_tokens" => "MAX_TOKENS".to_string(),
        other => other.to_string(),
    };
    let Usage {
        input,
        output,
        cache_read,
        ..
    } = turn.usage.unwrap_or_default();
    let mut usage = json!({
        "promptTokenCount": input + cache_read,
        "candidatesTokenCount": output,
        "totalTokenCount": input + cache_read + output,
    });
    if cache_read > 0 {
        usage["cachedContentTokenCount"] = json!(cache_read);
    }
    out.push(event(Vec::new(), Some(&reason), Some(&usage)));
    out
}

/// Google's usual error JSON for an HTTP status
/// (`{"error":{"code":…,"message":…,"status":…}}`).
pub fn gemini_error_body(status: u16) -> Value {
    let (s, m) = match status {
        400 => ("INVALID_ARGUMENT", "Request contains an invalid argument."),
        401 => (
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials.",
        ),
        403 => ("PERMISSION_DENIED", "The caller does not have permission"),
        429 => (
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
        ),
        503 => (
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        ),
        _ => ("INTERNAL", "An internal error has occurred."),
    };
    json!({"error": {"code": status, "message": m, "status": s}})
}

/// The token endpoint's answer: `{"access_token":"fake-access-token-<seq>","expires_in":3599,
/// "token_type":"Bearer"}`.
pub fn token_response(seq: u64) -> Value {
    json!({"access_token": format!("fake-access-token-{seq}"), "expires_in": 3599, "token_type": "Bearer"})
}
