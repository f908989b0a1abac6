//! Amazon Bedrock ConverseStream answers (`POST …/model/<model id>/converse-stream`, which
//! upstream's `bedrock-converse-stream` adapter speaks through the AWS SDK).
//!
//! The body is AWS event-stream binary framing (`application/vnd.amazon.eventstream`): each
//! message is a 12-byte prelude (total length, headers length, both u32 big-endian, then the
//! CRC32 of those 8 bytes), the headers (name length u8, name, value type u8 — 7 = string —,
//! value length u16, value), the JSON payload and the CRC32 of everything before it.
//! Events carry `:message-type` `event`, `:event-type` (`messageStart`, `contentBlockStart`,
//! `contentBlockDelta`, `contentBlockStop`, `messageStop`, `metadata`) and `:content-type`
//! `application/json`; an exception carries `:message-type` `exception` and
//! `:exception-type` (e.g. `throttlingException`) with `{"message": …}`.
//!
//! Shapes follow the Bedrock Runtime API reference (ConverseStream). HTTP errors are JSON
//! `{"message": …}` with the exception name in `x-amzn-errortype`, as the service answers.

use crate::script::{Block, Turn, Usage};
use crate::wire::chunks;
use serde_json::{json, Value};

/// One event-stream message with string headers.
pub fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        let name = name.as_bytes();
        let value = value.as_bytes();
        head.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        head.extend_from_slice(&name[..name.len().min(255)]);
        head.push(7);
        let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
        head.extend_from_slice(&len.to_be_bytes());
        head.extend_from_slice(&value[..usize::from(len)]);
    }
    let total = 12 + head.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&u32::try_from(head.len()).unwrap_or(u32::MAX).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// An `event` message of type `event_type` with a JSON payload.
pub fn event_frame(event_type: &str, payload: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(payload).unwrap_or_default();
    frame(
        &[
            (":event-type", event_type),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        &body,
    )
}

/// An `exception` message (`exception_type` such as `throttlingException`,
/// `validationException`, `internalServerException`) with `{"message": message}`.
pub fn exception_frame(exception_type: &str, message: &str) -> Vec<u8> {
    let body = serde_json::to_vec(&json!({ "message": message })).unwrap_or_default();
    frame(
        &[
            (":exception-type", exception_type),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        &body,
    )
}

/// The ConverseStream messages for a turn. Tool-use ids: the scripted id or
/// `tooluse_fake_<seq>_<i>`; a thinking block's signature: the scripted one or
/// `sig_fake_<seq>_<index>`. A turn with an `exception` ends with that exception frame
/// instead of `messageStop`/`metadata`.
pub fn bedrock_events(turn: &Turn, seq: u64, chunk_size: usize) -> Vec<Vec<u8>> {
    let mut out = vec![event_frame("messageStart", &json!({"role": "assistant"}))];
    let mut tool_idx = 0usize;
    let mut index = 0usize;
    for block in &turn.blocks {
        match block {
            Block::Text { text } => {
                for piece in chunks(text, chunk_size) {
                    out.push(event_frame(
                        "contentBlockDelta",
                        &json!({"contentBlockIndex": index, "delta": {"text": piece}}),
                    ));
                }
            }
            Block::Thinking {
                text, signature, ..
            } => {
                for piece in chunks(text, chunk_size) {
                    out.push(event_frame(
                        "contentBlockDelta",
                        &json!({"contentBlockIndex": index,
                            "delta": {"reasoningContent": {"text": piece}}}),
                    ));
                }
                let sig = signature
                    .clone()
                    .unwrap_or_else(|| format!("sig_fake_{seq}_{index}"));
                if !sig.is_empty() {
                    out.push(event_frame(
                        "contentBlockDelta",
                        &json!({"contentBlockIndex": index,
                            "delta": {"reasoningContent": {"signature": sig}}}),
                    ));
                }
            }
            Block::ToolCall {
                name,
                arguments,
                id,
            } => {
                let tid = id
                    .clone()
                    .unwrap_or_else(|| format!("tooluse_fake_{seq}_{tool_idx}"));
                tool_idx += 1;
                out.push(event_frame(
                    "contentBlockStart",
                    &json!({"contentBlockIndex": index,
                        "start": {"toolUse": {"toolUseId": tid, "name": name}}}),
                ));
                let args = match arguments {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                };
                for piece in chunks(&args, chunk_size) {
                    out.push(event_frame(
                        "contentBlockDelta",
                        &json!({"contentBlockIndex": index,
                            "delta": {"toolUse": {"input": piece}}}),
                    ));
                }
            }
            Block::RedactedThinking { .. } | Block::Unknown => continue,
        }
        out.push(event_frame(
            "contentBlockStop",
            &json!({ "contentBlockIndex": index }),
        ));
        index += 1;
    }
    if let Some(ex) = &turn.exception {
        out.push(exception_frame(&ex.kind, &ex.message));
        return out;
    }
    let stop = match turn.effective_stop_reason().as_str() {
        "stop" | "end_turn" => "end_turn".to_string(),
        "length" | "max_tokens" => "max_tokens".to_string(),
        "tool_use" | "tool_calls" => "tool_use".to_string(),
        other => other.to_string(),
    };
    out.push(event_frame("messageStop", &json!({ "stopReason": stop })));
    let Usage {
        input,
        output,
        cache_read,
        cache_write,
    } = turn.usage.unwrap_or_default();
    let mut usage = json!({
        "inputTokens": input, "outputTokens": output,
        "totalTokens": input + output + cache_read + cache_write,
    });
    if cache_read > 0 {
        usage["cacheReadInputTokens"] = json!(cache_read);
    }
    if cache_write > 0 {
        usage["cacheWriteInputTokens"] = json!(cache_write);
    }
    out.push(event_frame(
        "metadata",
        &json!({"usage": usage, "metrics": {"latencyMs": 42}}),
    ));
    out
}

/// The exception name Bedrock answers an HTTP status with (`x-amzn-errortype`).
pub fn bedrock_error_type(status: u16) -> &'static str {
    match status {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        424 => "ModelErrorException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        _ => "InternalServerException",
    }
}

/// Bedrock's usual error JSON for an HTTP status.
pub fn bedrock_error_body(status: u16) -> Value {
    let m = match status {
        400 => "Invalid request",
        403 => "The security token included in the request is invalid.",
        429 => "Too many requests, please wait before trying again.",
        503 => "Service unavailable",
        _ => "Internal server error",
    };
    json!({ "message": m })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout_and_crcs() {
        let f = event_frame("messageStop", &json!({"stopReason": "end_turn"}));
        let total = u32::from_be_bytes([f[0], f[1], f[2], f[3]]) as usize;
        assert_eq!(total, f.len());
        assert_eq!(
            u32::from_be_bytes([f[8], f[9], f[10], f[11]]),
            crc32fast::hash(&f[..8])
        );
        let n = f.len();
        assert_eq!(
            u32::from_be_bytes([f[n - 4], f[n - 3], f[n - 2], f[n - 1]]),
            crc32fast::hash(&f[..n - 4])
        );
    }
}
