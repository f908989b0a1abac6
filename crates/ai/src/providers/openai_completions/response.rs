//! Reading a Chat Completions stream: usage and finish reasons, the stream state of one
//! response (text, thinking and tool-call blocks), and the request loop ([`run`]).

use crate::error::ProviderError;
use crate::json::SurrogateJoiner;
use crate::providers::common;
use crate::providers::common::{
    apply_headers, compact, end_event, extra_headers, finish_usage, json_u64, next_sse_event,
    openai_http_error, parse_streaming_json, push_block, resolve_api_key, Emitter, StreamEnd,
};
use crate::stream::{AssistantMessageEvent, StreamOptions};
use crate::types::{
    AssistantMessage, Content, Cost, Model, StopReason, ThinkingContent, ToolCall, Usage,
};
use eventsource_stream::Eventsource;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::time::Instant;

/// A number field as `u64` (absent, negative or non-numeric → 0).
pub(super) fn num(v: Option<&Value>) -> u64 {
    json_u64(v).unwrap_or(0)
}

/// Usage of a chunk (agent-loop.md §11): `cacheRead` = `cached_tokens`, `cacheWrite` =
/// `cache_write_tokens`, `input` = `prompt_tokens` minus both, `output` =
/// `completion_tokens`, `reasoning` = `completion_tokens_details.reasoning_tokens`.
pub(super) fn parse_usage(raw: &Value, model: &Model) -> Usage {
    let details = raw.get("prompt_tokens_details");
    let prompt = num(raw.get("prompt_tokens"));
    let cache_read = match details.and_then(|d| d.get("cached_tokens")) {
        Some(v) if !v.is_null() => num(Some(v)),
        _ => num(raw.get("prompt_cache_hit_tokens")),
    };
    let cache_write = num(details.and_then(|d| d.get("cache_write_tokens")));
    let input = prompt.saturating_sub(cache_read.saturating_add(cache_write));
    let output = num(raw.get("completion_tokens"));
    let reasoning = num(raw
        .get("completion_tokens_details")
        .and_then(|d| d.get("reasoning_tokens")));
    let mut usage = Usage {
        input,
        output,
        cache_read,
        cache_write,
        cache_write_1h: None,
        reasoning: Some(reasoning),
        total_tokens: 0,
        cost: Cost::default(),
    };
    finish_usage(&mut usage, model);
    usage
}

/// `finish_reason` → (stopReason, errorMessage).
pub(super) fn map_finish_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" | "end" => (StopReason::Stop, None),
        "length" => (StopReason::Length, None),
        "tool_calls" | "function_call" => (StopReason::ToolUse, None),
        other => (
            StopReason::Error,
            Some(format!("Provider finish_reason: {other}")),
        ),
    }
}

/// Streaming tool call bookkeeping: where it lives in `content` and its raw argument text.
pub(super) struct ToolSlot {
    content_index: usize,
    stream_index: Option<i64>,
    partial: String,
}

#[derive(Default)]
pub(super) struct StreamState {
    text_index: Option<usize>,
    thinking_index: Option<usize>,
    /// Surrogate halves split across chunks, per block (`pi_ai::json::parse_stream_chunk`).
    text_join: SurrogateJoiner,
    thinking_join: SurrogateJoiner,
    tools: Vec<ToolSlot>,
    unmatched_details: HashMap<String, Value>,
    has_finish_reason: bool,
}

impl StreamState {
    /// Apply one `chat.completion.chunk`. Returns an error text for an in-band `error`.
    fn handle_chunk(
        &mut self,
        chunk: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
    ) -> Result<(), String> {
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(match err.get("message").and_then(Value::as_str) {
                Some(m) => m.to_owned(),
                None => compact(err),
            });
        }
        if out.response_id.is_none() {
            if let Some(id) = chunk
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.response_id = Some(id.to_owned());
            }
        }
        let chunk_usage = chunk.get("usage").filter(|u| u.is_object());
        if let Some(u) = chunk_usage {
            out.usage = parse_usage(u, model);
            em.usage(&out.usage);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        if chunk_usage.is_none() {
            if let Some(u) = choice.get("usage").filter(|u| u.is_object()) {
                out.usage = parse_usage(u, model);
                em.usage(&out.usage);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            let (stop, err) = map_finish_reason(reason);
            out.stop_reason = stop;
            out.raw_stop_reason = Some(reason.to_owned());
            if err.is_some() {
                out.error_message = err;
            }
            self.has_finish_reason = true;
        }
        let Some(delta) = choice.get("delta").filter(|d| d.is_object()) else {
            return Ok(());
        };

        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            let text = self.text_join.push(text);
            if !text.is_empty() {
                append_to_block(&mut self.text_index, out, em, &text, || Content::text(""));
            }
        }

        let reasoning = ["reasoning_content", "reasoning", "reasoning_text"]
            .into_iter()
            .find_map(|f| {
                delta
                    .get(f)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(|s| (f, s))
            });
        if let Some((field, text)) = reasoning {
            let text = &self.thinking_join.push(text);
            let signature = if model.provider == "opencode-go" && field == "reasoning" {
                "reasoning_content"
            } else {
                field
            };
            if !text.is_empty() {
                append_to_block(&mut self.thinking_index, out, em, text, || {
                    Content::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: Some(signature.to_owned()),
                        redacted: None,
                        extra: Default::default(),
                    })
                });
            }
        }

        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.handle_tool_delta(call, out, em);
            }
        }

        if let Some(details) = delta.get("reasoning_details").and_then(Value::as_array) {
            for d in details {
                let encrypted =
                    d.get("type").and_then(Value::as_str) == Some("reasoning.encrypted");
                let id = d
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let has_data = d.get("data").is_some_and(|v| !v.is_null());
                if let (true, Some(id), true) = (encrypted, id, has_data) {
                    let target = out.content.iter_mut().find_map(|c| match c {
                        Content::ToolCall(tc) if tc.id == id => Some(tc),
                        _ => None,
                    });
                    match target {
                        Some(tc) => tc.thought_signature = Some(compact(d)),
                        None => {
                            self.unmatched_details.insert(id.to_owned(), d.clone());
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn handle_tool_delta(&mut self, call: &Value, out: &mut AssistantMessage, em: &Emitter) {
        let stream_index = call.get("index").and_then(Value::as_i64);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = call.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let args = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or("");

        let existing = stream_index
            .and_then(|si| self.tools.iter().position(|t| t.stream_index == Some(si)))
            .or_else(|| {
                id.and_then(|id| {
                    self.tools.iter().position(|t| {
                        matches!(out.content.get(t.content_index),
                            Some(Content::ToolCall(tc)) if tc.id == id)
                    })
                })
            });
        let slot = match existing {
            Some(s) => s,
            None => {
                let mut tc = ToolCall {
                    id: id.unwrap_or("").to_owned(),
                    name: name.unwrap_or("").to_owned(),
                    arguments: Value::Object(Map::new()),
                    thought_signature: None,
                    extra: Default::default(),
                };
                if let Some(d) = self.unmatched_details.remove(&tc.id) {
                    tc.thought_signature = Some(compact(&d));
                }
                let content_index = push_block(out, em, Content::ToolCall(tc));
                self.tools.push(ToolSlot {
                    content_index,
                    stream_index,
                    partial: String::new(),
                });
                self.tools.len() - 1
            }
        };
        let tool = &mut self.tools[slot];
        if tool.stream_index.is_none() {
            tool.stream_index = stream_index;
        }
        if let Some(Content::ToolCall(tc)) = out.content.get_mut(tool.content_index) {
            if tc.id.is_empty() {
                if let Some(id) = id {
                    tc.id = id.to_owned();
                }
            }
            if tc.name.is_empty() {
                if let Some(name) = name {
                    tc.name = name.to_owned();
                }
            }
        }
        tool.partial.push_str(args);
        em.emit(AssistantMessageEvent::ToolCallDelta {
            content_index: tool.content_index,
            delta: args.to_owned(),
        });
    }

    /// Parse every tool call's collected arguments into its content block and, when `emit`,
    /// push each block's `*_end` event in content order.
    fn finish_blocks(&mut self, out: &mut AssistantMessage, em: Option<&Emitter>) {
        // A high surrogate still waiting for its low half ends the block as U+FFFD.
        for (join, index) in [
            (&mut self.text_join, self.text_index),
            (&mut self.thinking_join, self.thinking_index),
        ] {
            let rest = join.finish();
            if let (false, Some(ci)) = (rest.is_empty(), index) {
                let event = match out.content.get_mut(ci) {
                    Some(Content::Text(t)) => {
                        t.text.push_str(rest);
                        AssistantMessageEvent::TextDelta {
                            content_index: ci,
                            delta: rest.to_owned(),
                        }
                    }
                    Some(Content::Thinking(t)) => {
                        t.thinking.push_str(rest);
                        AssistantMessageEvent::ThinkingDelta {
                            content_index: ci,
                            delta: rest.to_owned(),
                        }
                    }
                    _ => continue,
                };
                if let Some(em) = em {
                    em.emit(event);
                }
            }
        }
        for slot in &self.tools {
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(slot.content_index) {
                tc.arguments = parse_streaming_json(&slot.partial);
            }
        }
        let Some(em) = em else { return };
        for (i, block) in out.content.iter().enumerate() {
            if let Some(event) = end_event(i, block) {
                em.emit(event);
            }
        }
    }
}

/// Append streamed `text` to the text or thinking block at `*index` and emit its `*_delta`;
/// when `*index` is `None`, first open the block built by `new_block` (pushed last, with its
/// `*_start`) and remember its content index there.
pub(super) fn append_to_block(
    index: &mut Option<usize>,
    out: &mut AssistantMessage,
    em: &Emitter,
    text: &str,
    new_block: impl FnOnce() -> Content,
) {
    let content_index = *index.get_or_insert_with(|| push_block(out, em, new_block()));
    let delta = text.to_owned();
    let event = match out.content.get_mut(content_index) {
        Some(Content::Text(t)) => {
            t.text.push_str(text);
            AssistantMessageEvent::TextDelta {
                content_index,
                delta,
            }
        }
        Some(Content::Thinking(t)) => {
            t.thinking.push_str(text);
            AssistantMessageEvent::ThinkingDelta {
                content_index,
                delta,
            }
        }
        // Unreachable: indices are only ever set to the text/thinking block pushed above.
        _ => return,
    };
    em.emit(event);
}

pub(super) async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    body: Value,
    options: StreamOptions,
    hooks: Option<crate::stream::RequestHooks>,
) {
    let http = client.options();
    let client = client.get();
    let started = Instant::now();
    let mut output = AssistantMessage::empty(&model);
    let cancel = options.cancel.clone();
    if cancel.is_cancelled() {
        em.fail(output, common::aborted(), started);
        return;
    }

    let url = format!("{}/chat/completions", model.base_url.trim_end_matches('/'));
    let api_key = resolve_api_key(&model, &options);
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    if let Some(key) = api_key {
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {key}")) {
            headers.insert(AUTHORIZATION, v);
        }
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    apply_headers(&mut headers, extra_headers(&model, &options));
    common::hooked_headers(hooks.as_ref(), &options, &mut headers).await;
    let body = common::hooked_payload(hooks.as_ref(), body).await;
    let payload = serde_json::to_vec(&body).unwrap_or_default();
    let request = client.post(url).headers(headers).body(payload);

    let sent =
        common::send_hooked_request(request, &cancel, openai_http_error, &http, hooks.as_ref())
            .await;
    let response = match sent {
        Ok(r) => r,
        Err(error) => {
            em.fail(output, error, started);
            return;
        }
    };

    em.start(&output);
    let mut events = response.bytes_stream().eventsource();
    let mut state = StreamState::default();
    let end = loop {
        let event = match next_sse_event(&mut events, &cancel, http.idle_timeout_ms).await {
            Ok(event) => event,
            Err(end) => break end,
        };
        let data = event.data.trim();
        if data == "[DONE]" {
            break StreamEnd::Finished;
        }
        if data.is_empty() {
            continue;
        }
        // A chunk that is not JSON ends the stream with an error: skipping it would drop its
        // text without anyone knowing.
        let chunk = match crate::json::parse_stream_chunk(data) {
            Ok(chunk) => chunk,
            Err(e) => {
                break StreamEnd::Failed(ProviderError::Protocol {
                    message: format!("Could not parse OpenAI stream chunk: {e}; data={data}"),
                })
            }
        };
        if let Err(text) = state.handle_chunk(&chunk, &mut output, &em, &model) {
            break StreamEnd::Failed(ProviderError::Stream { message: text });
        }
    };

    match end {
        StreamEnd::Failed(error) => {
            state.finish_blocks(&mut output, None);
            em.fail(output, error.aborted_if(cancel.is_cancelled()), started);
        }
        StreamEnd::Aborted => {
            state.finish_blocks(&mut output, Some(&em));
            em.fail(output, common::aborted(), started);
        }
        StreamEnd::Finished => {
            state.finish_blocks(&mut output, Some(&em));
            if cancel.is_cancelled() {
                em.fail(output, common::aborted(), started);
            } else if output.stop_reason == StopReason::Error {
                let message = output
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "Provider returned an error stop reason".to_owned());
                em.fail(output, ProviderError::Stream { message }, started);
            } else if !state.has_finish_reason {
                let error = ProviderError::StreamEndedEarly {
                    message: "Stream ended without finish_reason".to_owned(),
                };
                em.fail(output, error, started);
            } else {
                em.done(output, started);
            }
        }
    }
}
