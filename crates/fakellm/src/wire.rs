//! SSE event generation for both wire formats, byte-compatible with `fakellm.py`.

use crate::script::{Api, Block, Turn, Usage};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The fixed `created` timestamp of every OpenAI chunk.
pub const FIXED_CREATED: u64 = 1_700_000_000;

/// Splits `text` into pieces of `size` characters (Unicode scalar values, like Python's string
/// slicing). A text no longer than `size` (including the empty text) is one piece.
pub fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if size == 0 || chars.len() <= size {
        return vec![text.to_string()];
    }
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Serializes like Python's `json.dumps(v, ensure_ascii=False)`: `", "` and `": "` separators,
/// non-ASCII written raw. This is how fakellm.py renders tool-call arguments.
pub fn python_json(value: &Value) -> String {
    struct PyFormatter;
    impl serde_json::ser::Formatter for PyFormatter {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    match value.serialize(&mut ser) {
        // serde_json writes UTF-8; the lossy conversion only guards the type system.
        Ok(()) => String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        // Writing a Value into a Vec cannot fail; compact JSON is the nearest rendering if it did.
        Err(_) => value.to_string(),
    }
}

fn sse_data(v: &Value) -> String {
    // `Value`'s Display is `serde_json::to_string` without the (unreachable) error.
    format!("data: {v}\n\n")
}

fn sse_event(name: &str, v: &Value) -> String {
    format!("event: {name}\n{}", sse_data(v))
}

fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        other => python_json(other),
    }
}

/// The provider's usual error JSON for an HTTP status (used when a scripted error has no body).
pub fn default_error_body(api: Api, status: u16) -> Value {
    match api {
        Api::Anthropic => {
            let (t, m) = match status {
                400 => ("invalid_request_error", "Invalid request".to_string()),
                401 => ("authentication_error", "invalid x-api-key".to_string()),
                429 => ("rate_limit_error", "Rate limited".to_string()),
                500 => ("api_error", "Internal server error".to_string()),
                529 => ("overloaded_error", "Overloaded".to_string()),
                s => ("api_error", format!("HTTP {s}")),
            };
            json!({"type": "error", "error": {"type": t, "message": m}})
        }
        Api::Openai | Api::Responses => {
            let (t, m, c) = match status {
                400 => (
                    "invalid_request_error",
                    "Invalid request".to_string(),
                    Value::Null,
                ),
                401 => (
                    "invalid_request_error",
                    "Incorrect API key provided".to_string(),
                    json!("invalid_api_key"),
                ),
                429 => (
                    "rate_limit_error",
                    "Rate limit exceeded".to_string(),
                    json!("rate_limit_exceeded"),
                ),
                500 => (
                    "server_error",
                    "The server had an error while processing your request".to_string(),
                    Value::Null,
                ),
                529 => ("overloaded_error", "Overloaded".to_string(), Value::Null),
                s => ("server_error", format!("HTTP {s}"), Value::Null),
            };
            json!({"error": {"message": m, "type": t, "param": null, "code": c}})
        }
        Api::Google => crate::wire_gemini::gemini_error_body(status),
        Api::Mistral => crate::wire_mistral::mistral_error_body(status),
        Api::Bedrock => crate::wire_bedrock::bedrock_error_body(status),
    }
}

/// The OpenAI chat-completions SSE events (`data: …\n\n` strings, ending with `[DONE]`) for a
/// turn. `req` is the request body: the usage chunk is sent only when it asked for
/// `stream_options.include_usage` (or the turn sets `always_usage`).
pub fn openai_events(
    turn: &Turn,
    model: &str,
    seq: u64,
    chunk_size: usize,
    req: &Value,
) -> Vec<String> {
    let cid = format!("chatcmpl-fake-{seq}");
    let chunk = |delta: Value, finish: Value| {
        sse_data(&json!({
            "id": cid, "object": "chat.completion.chunk", "created": FIXED_CREATED, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut tool_idx = 0usize;
    for block in &turn.blocks {
        match block {
            Block::Text { text } => {
                for piece in chunks(text, chunk_size) {
                    out.push(chunk(json!({"content": piece}), Value::Null));
                }
            }
            Block::Thinking { text, field, .. } => {
                let field = field.as_deref().unwrap_or("reasoning_content");
                for piece in chunks(text, chunk_size) {
                    let mut delta = Map::new();
                    delta.insert(field.to_string(), Value::String(piece));
                    out.push(chunk(Value::Object(delta), Value::Null));
                }
            }
            Block::ToolCall {
                name,
                arguments,
                id,
            } => {
                let tid = id
                    .clone()
                    .unwrap_or_else(|| format!("call_fake_{seq}_{tool_idx}"));
                out.push(chunk(
                    json!({"tool_calls": [{"index": tool_idx, "id": tid, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for piece in chunks(&arguments_text(arguments), chunk_size) {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": tool_idx, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
                tool_idx += 1;
            }
            Block::RedactedThinking { .. } | Block::Unknown => {}
        }
    }
    let sr = turn.effective_stop_reason();
    let finish = match sr.as_str() {
        "stop" | "end_turn" => "stop",
        "length" | "max_tokens" => "length",
        "tool_use" | "tool_calls" => "tool_calls",
        other => other,
    };
    out.push(chunk(json!({}), json!(finish)));
    let Usage {
        input,
        output,
        cache_read: cr,
        cache_write: cw,
    } = turn.usage.unwrap_or_default();
    let details = if cw != 0 {
        json!({"cached_tokens": cr + cw, "cache_write_tokens": cw})
    } else {
        json!({"cached_tokens": cr})
    };
    let usage = json!({
        "prompt_tokens": input + cr + cw, "completion_tokens": output,
        "total_tokens": input + cr + cw + output, "prompt_tokens_details": details,
    });
    let include_usage = req
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if include_usage || turn.always_usage.unwrap_or(false) {
        out.push(sse_data(&json!({
            "id": cid, "object": "chat.completion.chunk", "created": FIXED_CREATED, "model": model,
            "choices": [], "usage": usage,
        })));
    }
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// The Anthropic Messages SSE events (`event: …\ndata: …\n\n` strings) for a turn.
pub fn anthropic_events(turn: &Turn, model: &str, seq: u64, chunk_size: usize) -> Vec<String> {
    let Usage {
        input,
        output,
        cache_read,
        cache_write,
    } = turn.usage.unwrap_or_default();
    let mut out = vec![sse_event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_fake_{seq}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1,
                      "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}}}),
    )];
    if turn.ping.unwrap_or(true) {
        out.push(sse_event("ping", &json!({"type": "ping"})));
    }
    let mut tool_idx = 0usize;
    for (idx, block) in turn.blocks.iter().enumerate() {
        let start = |content_block: Value| {
            sse_event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": idx, "content_block": content_block}),
            )
        };
        let delta = |delta: Value| {
            sse_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": idx, "delta": delta}),
            )
        };
        match block {
            Block::Text { text } => {
                out.push(start(json!({"type": "text", "text": ""})));
                for piece in chunks(text, chunk_size) {
                    out.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            Block::Thinking {
                text, signature, ..
            } => {
                out.push(start(
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                ));
                for piece in chunks(text, chunk_size) {
                    out.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                }
                let sig = signature
                    .clone()
                    .unwrap_or_else(|| format!("sig_fake_{seq}_{idx}"));
                out.push(delta(json!({"type": "signature_delta", "signature": sig})));
            }
            Block::RedactedThinking { data } => {
                out.push(start(json!({"type": "redacted_thinking", "data": data.as_deref().unwrap_or("redacted")})));
            }
            Block::ToolCall {
                name,
                arguments,
                id,
            } => {
                let tid = id
                    .clone()
                    .unwrap_or_else(|| format!("toolu_fake_{seq}_{tool_idx}"));
                out.push(start(
                    json!({"type": "tool_use", "id": tid, "name": name, "input": {}}),
                ));
                for piece in chunks(&arguments_text(arguments), chunk_size) {
                    out.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
                tool_idx += 1;
            }
            Block::Unknown => continue,
        }
        out.push(sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": idx}),
        ));
    }
    let sr = turn.effective_stop_reason();
    let sr = match sr.as_str() {
        "stop" => "end_turn".to_string(),
        "length" => "max_tokens".to_string(),
        "tool_calls" => "tool_use".to_string(),
        _ => sr,
    };
    out.push(sse_event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": sr, "stop_sequence": null},
                "usage": {"output_tokens": output}}),
    ));
    out.push(sse_event("message_stop", &json!({"type": "message_stop"})));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_counts_characters() {
        assert_eq!(chunks("", 4), vec![""]);
        assert_eq!(chunks("abcdefghi", 4), vec!["abcd", "efgh", "i"]);
        assert_eq!(chunks("ééééé", 2), vec!["éé", "éé", "é"]);
        assert_eq!(chunks("abc", 0), vec!["abc"]);
    }

    #[test]
    fn python_json_separators() {
        let v = json!({"command": "echo hi", "list": [1, 2], "nested": {"a": "ü"}});
        assert_eq!(
            python_json(&v),
            r#"{"command": "echo hi", "list": [1, 2], "nested": {"a": "ü"}}"#
        );
    }

    #[test]
    fn openai_tool_call_stream_matches_fakellm_py() {
        let turn = Turn::text("I'll run it.").with_tool_call("bash", json!({"command": "echo hi"}));
        let ev = openai_events(
            &turn,
            "m",
            1,
            8,
            &json!({"stream_options": {"include_usage": true}}),
        );
        assert_eq!(
            ev[0],
            "data: {\"id\":\"chatcmpl-fake-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\
             \"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\
             \"finish_reason\":null}]}\n\n"
        );
        assert!(ev[1].contains("\"delta\":{\"content\":\"I'll run\"}"));
        assert!(ev[3].contains("\"id\":\"call_fake_1_0\""));
        assert!(ev[4].contains("\"arguments\":\"{\\\"comman\""));
        let finish = ev
            .iter()
            .find(|e| e.contains("\"finish_reason\":\"tool_calls\""))
            .unwrap();
        assert!(finish.contains("\"delta\":{}"));
        assert!(
            ev[ev.len() - 2].contains("\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5")
        );
        assert_eq!(ev.last().unwrap(), "data: [DONE]\n\n");
        // No usage chunk unless asked for.
        let ev2 = openai_events(&turn, "m", 1, 8, &json!({}));
        assert_eq!(ev2.len(), ev.len() - 1);
    }

    #[test]
    fn anthropic_stream_shape() {
        let turn = Turn::blocks([Block::thinking("hmm", "sig-1"), Block::text("hi")])
            .usage(Usage::new(200, 15).cache(50, 10));
        let ev = anthropic_events(&turn, "claude", 3, 8);
        assert!(ev[0].starts_with("event: message_start\ndata: {\"type\":\"message_start\""));
        assert!(ev[0].contains("\"id\":\"msg_fake_3\""));
        assert!(ev[0].contains("\"cache_read_input_tokens\":50,\"cache_creation_input_tokens\":10"));
        assert_eq!(ev[1], "event: ping\ndata: {\"type\":\"ping\"}\n\n");
        assert!(ev[4].contains("\"signature_delta\",\"signature\":\"sig-1\""));
        assert!(ev[5].contains("content_block_stop"));
        assert!(ev[6].contains("\"index\":1"));
        let delta = &ev[ev.len() - 2];
        assert!(
            delta.contains("\"stop_reason\":\"end_turn\"")
                && delta.contains("\"output_tokens\":15")
        );
        assert_eq!(
            ev.last().unwrap(),
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
    }
}
