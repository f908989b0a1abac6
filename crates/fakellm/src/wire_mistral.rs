//! Mistral chat-completions SSE events (`POST …/v1/chat/completions` on the native Mistral API,
//! which upstream's `mistral-conversations` adapter speaks).
//!
//! Shapes follow Mistral's public API reference: OpenAI-like `chat.completion.chunk`s whose
//! `delta.content` is a string, or a list of chunks for reasoning
//! (`[{"type":"thinking","thinking":[{"type":"text","text":…}]}]`); tool calls come whole
//! (`{"id","function":{"name","arguments"},"index"}`); the last chunk carries `finish_reason`
//! and `usage`; then `data: [DONE]`.

use crate::script::{Block, Turn, Usage};
use crate::wire::{chunks, python_json, FIXED_CREATED};
use serde_json::{json, Value};

/// The Mistral SSE events for a turn. Ids: `cmpl-fake-<seq>` for the completion, the tool
/// call's scripted id or `fake<seq>c<i>` padded to Mistral's 9 characters.
pub fn mistral_events(turn: &Turn, model: &str, seq: u64, chunk_size: usize) -> Vec<String> {
    let cid = format!("cmpl-fake-{seq}");
    let chunk = |delta: Value, finish: Value, usage: Option<Value>| {
        let mut v = json!({
            "id": cid, "object": "chat.completion.chunk", "created": FIXED_CREATED, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(u) = usage {
            v["usage"] = u;
        }
        format!("data: {v}\n\n")
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
        None,
    )];
    let mut tool_idx = 0usize;
    for block in &turn.blocks {
        match block {
            Block::Text { text } => {
                for piece in chunks(text, chunk_size) {
                    out.push(chunk(json!({"content": piece}), Value::Null, None));
                }
            }
            Block::Thinking { text, .. } => {
                for piece in chunks(text, chunk_size) {
                    out.push(chunk(
                        json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": piece}]}]}),
                        Value::Null,
                        None,
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
                    .unwrap_or_else(|| format!("{:0<9}", format!("fake{seq}c{tool_idx}")));
                let args = match arguments {
                    Value::String(s) => s.clone(),
                    other => python_json(other),
                };
                out.push(chunk(
                    json!({"tool_calls": [{"id": tid, "function": {"name": name, "arguments": args}, "index": tool_idx}]}),
                    Value::Null,
                    None,
                ));
                tool_idx += 1;
            }
            Block::RedactedThinking { .. } | Block::Unknown => {}
        }
    }
    let finish = match turn.effective_stop_reason().as_str() {
        "stop" | "end_turn" => "stop".to_string(),
        "length" | "max_tokens" => "length".to_string(),
        "tool_use" | "tool_calls" => "tool_calls".to_string(),
        other => other.to_string(),
    };
    let Usage {
        input,
        output,
        cache_read,
        ..
    } = turn.usage.unwrap_or_default();
    let mut usage = json!({
        "prompt_tokens": input + cache_read, "completion_tokens": output,
        "total_tokens": input + cache_read + output,
    });
    if cache_read > 0 {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cache_read});
    }
    out.push(chunk(json!({"content": ""}), json!(finish), Some(usage)));
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// Mistral's usual error JSON for an HTTP status.
pub fn mistral_error_body(status: u16) -> Value {
    let (t, m) = match status {
        400 => ("invalid_request_error", "Invalid request"),
        401 => ("invalid_request_error", "Unauthorized"),
        429 => ("rate_limited", "Rate limit exceeded"),
        _ => ("internal_server_error", "Internal server error"),
    };
    json!({"object": "error", "message": m, "type": t, "param": null, "code": null})
}
