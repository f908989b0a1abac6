//! SSE events of the OpenAI Responses API (`POST …/responses`: `openai-responses`,
//! `azure-openai-responses`, `openai-codex-responses`), as the OpenAI API reference documents
//! them: `response.created`, per output item `response.output_item.added`, its deltas and
//! `response.output_item.done`, then `response.completed` (or `response.incomplete` with
//! `incomplete_details.reason: "max_output_tokens"` for a turn whose stop reason is
//! `length`). Every event is written as `event: <type>\ndata: <json>\n\n` with a
//! `sequence_number`; there is no `[DONE]` marker.
//!
//! Ids are deterministic: response `resp_fake_<seq>`, items `rs_fake_<seq>_<i>` (reasoning,
//! with `encrypted_content` `enc_fake_<seq>_<i>` unless the thinking block names a
//! `signature`), `msg_fake_<seq>_<i>` (message) and `fc_fake_<seq>_<i>` (function call, call id
//! `call_fake_<seq>_<i>` unless the block names one), `<i>` being the output index.

use crate::script::{Block, Turn, Usage};
use crate::wire::chunks;
use serde_json::{json, Value};

fn event(seq_no: &mut u64, kind: &str, mut body: Value) -> String {
    if let Value::Object(m) = &mut body {
        m.insert("type".into(), json!(kind));
        m.insert("sequence_number".into(), json!(*seq_no));
    }
    *seq_no += 1;
    format!("event: {kind}\ndata: {body}\n\n")
}

fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(s) => s.clone(),
        // Compact JSON, as the Responses API streams arguments.
        other => other.to_string(),
    }
}

/// The Responses SSE events for `turn` (`model` echoed, `seq` the request's arrival number,
/// `chunk_size` characters per delta).
pub fn responses_events(turn: &Turn, model: &str, seq: u64, chunk_size: usize) -> Vec<String> {
    let rid = format!("resp_fake_{seq}");
    let mut n = 0u64;
    let mut out = Vec::new();
    let created = json!({"id": rid, "object": "response", "created_at": crate::wire::FIXED_CREATED,
        "status": "in_progress", "model": model, "output": []});
    out.push(event(
        &mut n,
        "response.created",
        json!({"response": created}),
    ));
    out.push(event(
        &mut n,
        "response.in_progress",
        json!({"response": created}),
    ));
    let mut items = Vec::new();
    let mut index = 0usize;
    for block in &turn.blocks {
        let oi = index;
        let item = match block {
            Block::Thinking {
                text, signature, ..
            } => {
                let id = format!("rs_fake_{seq}_{oi}");
                out.push(event(
                    &mut n,
                    "response.output_item.added",
                    json!({"output_index": oi, "item": {"id": id, "type": "reasoning", "summary": []}}),
                ));
                out.push(event(
                    &mut n,
                    "response.reasoning_summary_part.added",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0,
                           "part": {"type": "summary_text", "text": ""}}),
                ));
                for piece in chunks(text, chunk_size) {
                    out.push(event(&mut n, "response.reasoning_summary_text.delta",
                        json!({"item_id": id, "output_index": oi, "summary_index": 0, "delta": piece})));
                }
                out.push(event(
                    &mut n,
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0, "text": text}),
                ));
                out.push(event(
                    &mut n,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0,
                           "part": {"type": "summary_text", "text": text}}),
                ));
                let enc = signature
                    .clone()
                    .unwrap_or_else(|| format!("enc_fake_{seq}_{oi}"));
                json!({"id": id, "type": "reasoning", "encrypted_content": enc,
                       "summary": [{"type": "summary_text", "text": text}]})
            }
            Block::Text { text } => {
                let id = format!("msg_fake_{seq}_{oi}");
                out.push(event(&mut n, "response.output_item.added",
                    json!({"output_index": oi, "item": {"id": id, "type": "message", "status": "in_progress",
                           "content": [], "role": "assistant"}})));
                out.push(event(
                    &mut n,
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                           "part": {"type": "output_text", "annotations": [], "text": ""}}),
                ));
                for piece in chunks(text, chunk_size) {
                    out.push(event(&mut n, "response.output_text.delta",
                        json!({"item_id": id, "output_index": oi, "content_index": 0, "delta": piece})));
                }
                out.push(event(
                    &mut n,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": oi, "content_index": 0, "text": text}),
                ));
                out.push(event(
                    &mut n,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                           "part": {"type": "output_text", "annotations": [], "text": text}}),
                ));
                json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "annotations": [], "text": text}]})
            }
            Block::ToolCall {
                name,
                arguments,
                id,
            } => {
                let item_id = format!("fc_fake_{seq}_{oi}");
                let call_id = id
                    .clone()
                    .unwrap_or_else(|| format!("call_fake_{seq}_{oi}"));
                let args = arguments_text(arguments);
                out.push(event(&mut n, "response.output_item.added",
                    json!({"output_index": oi, "item": {"id": item_id, "type": "function_call",
                           "status": "in_progress", "arguments": "", "call_id": call_id, "name": name}})));
                for piece in chunks(&args, chunk_size) {
                    out.push(event(
                        &mut n,
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": oi, "delta": piece}),
                    ));
                }
                out.push(event(
                    &mut n,
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": oi, "arguments": args}),
                ));
                json!({"id": item_id, "type": "function_call", "status": "completed",
                       "arguments": args, "call_id": call_id, "name": name})
            }
            Block::RedactedThinking { .. } | Block::Unknown => continue,
        };
        out.push(event(
            &mut n,
            "response.output_item.done",
            json!({"output_index": oi, "item": item.clone()}),
        ));
        items.push(item);
        index += 1;
    }
    let Usage {
        input,
        output,
        cache_read,
        cache_write,
    } = turn.usage.unwrap_or_default();
    let mut details = json!({"cached_tokens": cache_read + cache_write});
    if cache_write != 0 {
        details["cache_write_tokens"] = json!(cache_write);
    }
    let usage = json!({"input_tokens": input + cache_read + cache_write, "input_tokens_details": details,
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + cache_read + cache_write + output});
    let stop = turn.effective_stop_reason();
    let (kind, status, incomplete) = match stop.as_str() {
        "length" | "max_tokens" | "max_output_tokens" => (
            "response.incomplete",
            "incomplete",
            json!({"reason": "max_output_tokens"}),
        ),
        "content_filter" => (
            "response.incomplete",
            "incomplete",
            json!({"reason": "content_filter"}),
        ),
        _ => ("response.completed", "completed", Value::Null),
    };
    out.push(event(
        &mut n,
        kind,
        json!({"response": {"id": rid, "object": "response", "created_at": crate::wire::FIXED_CREATED,
               "status": status, "incomplete_details": incomplete, "model": model,
               "output": items, "usage": usage}}),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_stream_shape() {
        let turn = Turn::blocks([Block::thinking("hmm", "e1"), Block::text("hi")])
            .with_tool_call("bash", json!({"command": "ls"}))
            .usage(Usage::new(200, 15).cache(50, 0));
        let ev = responses_events(&turn, "gpt", 2, 8);
        assert!(ev[0].starts_with("event: response.created\ndata: {"));
        assert!(ev[0].contains("\"id\":\"resp_fake_2\""));
        assert!(ev
            .iter()
            .any(|e| e.contains("\"encrypted_content\":\"e1\"")));
        assert!(ev
            .iter()
            .any(|e| e.contains("\"call_id\":\"call_fake_2_2\"")
                && e.contains("\"id\":\"fc_fake_2_2\"")));
        let last = ev.last().unwrap();
        assert!(last.starts_with("event: response.completed\n"));
        assert!(last.contains("\"input_tokens\":250"));
        assert!(last.contains("\"cached_tokens\":50"));
        let cut = responses_events(&Turn::text("x").stop_reason("length"), "gpt", 1, 8);
        assert!(cut
            .last()
            .unwrap()
            .contains("\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"));
    }
}
