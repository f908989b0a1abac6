//! `mistral-conversations`: streaming `POST {baseUrl}/v1/chat/completions` on the native
//! Mistral API (`MISTRAL_API_KEY`), authenticated with `authorization: Bearer`.
//!
//! Source: upstream 1.6 `dist/api/mistral-conversations.js` (facts only), Mistral's public
//! chat-completions reference, and the recordings in
//! `crates/coding-agent/tests/fixtures/providers/upstream/mistral.json`.
//!
//! Request: snake_case keys in upstream's order (`model, stream, messages, tools, temperature,
//! max_tokens, tool_choice, reasoning_effort, prompt_mode, prompt_cache_key`); reasoning models
//! with a `thinkingLevelMap` get `reasoning_effort`, other reasoning models
//! `prompt_mode: "reasoning"`; the session id is the prompt cache key and the `x-affinity`
//! header. Tools are sent strict only with `compat.supportsStrictMode` (upstream's opt-in).
//! Tool-call ids are Mistral's 9 alphanumerics (foreign ids are hashed to that form).
//!
//! Stream: `delta.content` is text or a list of `thinking`/`text` chunks; tool calls arrive
//! whole or in pieces (keyed by `index`) and are closed (`toolcall_end`) when the stream ends.

use super::common::{
    self, apply_headers, end_event, event_stream, extra_headers, json_u64, next_sse_event,
    parse_streaming_json, push_block, resolve_api_key, Emitter, StreamEnd,
};
use super::strict_schema::{prefers_strict_sampling, strict_schema};
use super::HttpOptions;
use crate::error::ProviderError;
use crate::stream::{
    AssistantMessageEvent, AssistantStream, CacheRetention, Provider, RequestTuning, StreamOptions,
};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Cost, Message, Model, StopReason, TextContent,
    ThinkingContent, ThinkingLevel, ToolCall, UserContent,
};
use eventsource_stream::Eventsource;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

/// The `api` value of this adapter.
pub const API: &str = "mistral-conversations";

/// Length of a Mistral tool-call id.
const TOOL_CALL_ID_LEN: usize = 9;

/// Longest error body quoted in `errorMessage`, in characters.
const MAX_ERROR_BODY_CHARS: usize = 4000;

/// The `mistral-conversations` adapter over the HTTP client it was built with.
#[derive(Debug, Clone)]
pub struct MistralConversations {
    client: common::LazyClient,
}

impl Default for MistralConversations {
    fn default() -> Self {
        MistralConversations {
            client: common::LazyClient::Default,
        }
    }
}

impl MistralConversations {
    /// The adapter over a new HTTP client with `http`'s timeouts and retries.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        MistralConversations { client }
    }
}

impl Provider for MistralConversations {
    fn api(&self) -> &'static str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: StreamOptions) -> AssistantStream {
        self.stream_tuned(model, context, options, RequestTuning::default())
    }

    fn stream_tuned(
        &self,
        model: &Model,
        context: &Context,
        options: StreamOptions,
        tuning: RequestTuning,
    ) -> AssistantStream {
        let model = model.clone();
        let caching = tuning.cache_retention != CacheRetention::None;
        let body = build_request_body(&model, context, &options, caching);
        let client = self.client.clone();
        let hooks = tuning.hooks;
        event_stream(move |em| run(em, client, model, body, options, caching, hooks))
    }
}

/// upstream `shortHash`: two 32-bit multiplicative hashes over the UTF-16 units, printed in
/// base 36 (`h2` then `h1`).
fn short_hash(s: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for ch in s.encode_utf16() {
        let ch = u32::from(ch);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", base36(h2), base36(h1))
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// A Mistral id for `id`: its alphanumerics when they are exactly 9, else 9 characters of a
/// hash (of `id:<attempt>` after a collision).
fn derive_tool_call_id(id: &str, attempt: u32) -> String {
    let normalized: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if attempt == 0 && normalized.chars().count() == TOOL_CALL_ID_LEN {
        return normalized;
    }
    let base = if normalized.is_empty() {
        id
    } else {
        &normalized
    };
    let seed = if attempt == 0 {
        base.to_owned()
    } else {
        format!("{base}:{attempt}")
    };
    short_hash(&seed)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(TOOL_CALL_ID_LEN)
        .collect()
}

/// The JSON request body upstream 1.6 sends for this conversation (see the module docs).
/// `caching` is false for cache retention `none` (no `prompt_cache_key`).
pub fn build_request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    caching: bool,
) -> Value {
    // One id map per request, collision-free (upstream `createMistralToolCallIdNormalizer`).
    let ids: RefCell<(HashMap<String, String>, HashMap<String, String>)> = RefCell::default();
    let normalize = |id: &str| -> String {
        let mut guard = ids.borrow_mut();
        let (forward, reverse) = &mut *guard;
        if let Some(known) = forward.get(id) {
            return known.clone();
        }
        let mut attempt = 0;
        loop {
            let candidate = derive_tool_call_id(id, attempt);
            match reverse.get(&candidate) {
                Some(owner) if owner != id => attempt += 1,
                _ => {
                    forward.insert(id.to_owned(), candidate.clone());
                    reverse.insert(candidate.clone(), id.to_owned());
                    return candidate;
                }
            }
        }
    };
    let messages = transform_messages(&context.messages, model, Some(&normalize));
    let images = model.input.iter().any(|i| i == "image");
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("stream".into(), json!(true));
    body.insert(
        "messages".into(),
        Value::Array(chat_messages(&context.system_prompt, &messages, images)),
    );
    if !context.tools.is_empty() {
        // Strict tools are opt-in (`compat.supportsStrictMode`), as upstream.
        let strict_ok = common::compat_bool(model, "supportsStrictMode").unwrap_or(false);
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|t| {
                let strict = (strict_ok && prefers_strict_sampling(t))
                    .then(|| strict_schema(&t.parameters))
                    .flatten();
                let is_strict = strict.is_some();
                let parameters = strict.unwrap_or_else(|| t.parameters.clone());
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description,
                    "parameters": parameters, "strict": is_strict}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert(
        "max_tokens".into(),
        json!(common::clamp_max_tokens_to_context(model, context, options)),
    );
    let (effort, prompt_mode) = reasoning_params(model, options);
    if let Some(e) = effort {
        body.insert("reasoning_effort".into(), json!(e));
    }
    if let Some(p) = prompt_mode {
        body.insert("prompt_mode".into(), json!(p));
    }
    if let Some(sid) = options.session_id.as_ref().filter(|_| caching) {
        body.insert("prompt_cache_key".into(), json!(sid));
    }
    Value::Object(body)
}

/// `(reasoning_effort, prompt_mode)`: models with a `thinkingLevelMap` send the mapped effort
/// (`high` when the level is not mapped, the `off` entry when thinking is off); other
/// reasoning models send `prompt_mode: "reasoning"` when thinking is on.
fn reasoning_params(
    model: &Model,
    options: &StreamOptions,
) -> (Option<String>, Option<&'static str>) {
    let level = match options.reasoning {
        Some(l) if l != ThinkingLevel::Off && model.reasoning => {
            Some(crate::models::clamp_thinking_level(model, l)).filter(|l| *l != ThinkingLevel::Off)
        }
        _ => None,
    };
    let map = if model.reasoning {
        model.thinking_level_map.as_ref()
    } else {
        None
    };
    match map {
        Some(map) => {
            let effort = match level {
                Some(l) => Some(
                    map.get(l.as_str())
                        .and_then(Value::as_str)
                        .unwrap_or("high")
                        .to_owned(),
                ),
                None => map.get("off").and_then(Value::as_str).map(str::to_owned),
            };
            (effort.filter(|e| !e.is_empty()), None)
        }
        None => (
            None,
            (model.reasoning && level.is_some()).then_some("reasoning"),
        ),
    }
}

fn image_chunk(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": format!("data:{mime};base64,{data}")})
}

fn chat_messages(system: &str, messages: &[Message], images: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system}));
    }
    for msg in messages {
        match msg {
            Message::User(u) => match &u.content {
                UserContent::Text(s) => out.push(json!({"role": "user", "content": s})),
                UserContent::Blocks(blocks) => {
                    let had_images = blocks.iter().any(|b| matches!(b, Content::Image(_)));
                    let content: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
                            Content::Image(i) if images => Some(image_chunk(&i.mime_type, &i.data)),
                            _ => None,
                        })
                        .collect();
                    if !content.is_empty() {
                        out.push(json!({"role": "user", "content": content}));
                    } else if had_images && !images {
                        out.push(json!({"role": "user",
                            "content": "(image omitted: model does not support images)"}));
                    }
                }
            },
            Message::Assistant(a) => {
                let mut parts = Vec::new();
                let mut calls = Vec::new();
                for block in &a.content {
                    match block {
                        Content::Text(t) if !t.text.trim().is_empty() => {
                            parts.push(json!({"type": "text", "text": t.text}));
                        }
                        Content::Thinking(t) if !t.thinking.trim().is_empty() => {
                            parts.push(json!({"type": "thinking",
                                "thinking": [{"type": "text", "text": t.thinking}]}));
                        }
                        Content::ToolCall(tc) => {
                            let args = if tc.arguments.is_null() {
                                "{}".to_owned()
                            } else {
                                common::compact(&tc.arguments)
                            };
                            calls.push(json!({"id": tc.id, "type": "function",
                                "function": {"name": tc.name, "arguments": args}, "index": 0}));
                        }
                        _ => {}
                    }
                }
                if parts.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                m.insert("prefix".into(), json!(false));
                if !parts.is_empty() {
                    m.insert("content".into(), Value::Array(parts));
                }
                if !calls.is_empty() {
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(m));
            }
            Message::ToolResult(tr) => {
                let text = tr
                    .content
                    .iter()
                    .filter_map(Content::as_text)
                    .collect::<Vec<_>>()
                    .join("\n");
                let has_images = tr.content.iter().any(|c| matches!(c, Content::Image(_)));
                let mut content = vec![json!({"type": "text",
                    "text": tool_result_text(&text, has_images, images, tr.is_error)})];
                if images {
                    for c in &tr.content {
                        if let Content::Image(i) = c {
                            content.push(image_chunk(&i.mime_type, &i.data));
                        }
                    }
                }
                out.push(
                    json!({"role": "tool", "name": tr.tool_name, "content": content,
                    "tool_call_id": tr.tool_call_id}),
                );
            }
            _ => {}
        }
    }
    out
}

fn tool_result_text(text: &str, has_images: bool, images: bool, is_error: bool) -> String {
    let trimmed = text.trim();
    let prefix = if is_error { "[tool error] " } else { "" };
    if !trimmed.is_empty() {
        let suffix = if has_images && !images {
            "\n[tool image omitted: model does not support images]"
        } else {
            ""
        };
        return format!("{prefix}{trimmed}{suffix}");
    }
    let rest = if has_images && images {
        "(see attached image)"
    } else if has_images {
        "(image omitted: model does not support images)"
    } else {
        "(no tool output)"
    };
    format!("{prefix}{rest}")
}

/// `errorMessage` of a non-2xx Mistral response: `Mistral API error (<status>): <body>` (the
/// body trimmed and cut at 4000 characters), or the reason phrase when the body is empty.
pub(crate) fn mistral_http_error(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("Request failed with status {status}"));
        return format!("Mistral API error ({status}): {reason}");
    }
    let chars = body.chars().count();
    if chars <= MAX_ERROR_BODY_CHARS {
        return format!("Mistral API error ({status}): {body}");
    }
    let cut: String = body.chars().take(MAX_ERROR_BODY_CHARS).collect();
    format!(
        "Mistral API error ({status}): {cut}... [truncated {} chars]",
        chars - MAX_ERROR_BODY_CHARS
    )
}

/// `finish_reason` → (stopReason, errorMessage).
fn map_finish(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" => (StopReason::Stop, None),
        "length" | "model_length" => (StopReason::Length, None),
        "tool_calls" => (StopReason::ToolUse, None),
        // Mistral's transient server failures; the wording makes them retryable.
        "error" => (
            StopReason::Error,
            Some("Provider stopped with: error (server error)".to_owned()),
        ),
        other => (
            StopReason::Error,
            Some(format!("Provider stopped with: {other}")),
        ),
    }
}

/// An open tool call: where it is and its argument text so far.
struct OpenCall {
    key: String,
    content_index: usize,
    text: String,
}

#[derive(Default)]
struct State {
    open: Option<usize>,
    calls: Vec<OpenCall>,
    error_message: Option<String>,
}

impl State {
    fn close(&mut self, out: &AssistantMessage, em: &Emitter) {
        if let Some(ci) = self.open.take() {
            if let Some(e) = out.content.get(ci).and_then(|b| end_event(ci, b)) {
                em.emit(e);
            }
        }
    }

    fn append(&mut self, out: &mut AssistantMessage, em: &Emitter, thinking: bool, d: &str) {
        if d.is_empty() {
            return;
        }
        let fits = match self.open.and_then(|ci| out.content.get(ci)) {
            Some(Content::Thinking(_)) => thinking,
            Some(Content::Text(_)) => !thinking,
            _ => false,
        };
        if !fits {
            self.close(out, em);
            let block = if thinking {
                Content::Thinking(ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: None,
                    extra: Default::default(),
                })
            } else {
                Content::Text(TextContent {
                    text: String::new(),
                    text_signature: None,
                    extra: Default::default(),
                })
            };
            self.open = Some(push_block(out, em, block));
        }
        let Some(ci) = self.open else { return };
        match out.content.get_mut(ci) {
            Some(Content::Thinking(t)) => {
                t.thinking.push_str(d);
                em.emit(AssistantMessageEvent::ThinkingDelta {
                    content_index: ci,
                    delta: d.to_owned(),
                });
            }
            Some(Content::Text(t)) => {
                t.text.push_str(d);
                em.emit(AssistantMessageEvent::TextDelta {
                    content_index: ci,
                    delta: d.to_owned(),
                });
            }
            _ => {}
        }
    }

    fn handle(&mut self, chunk: &Value, out: &mut AssistantMessage, em: &Emitter, model: &Model) {
        if out.response_id.is_none() {
            if let Some(id) = chunk
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.response_id = Some(id.to_owned());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let prompt = json_u64(u.get("prompt_tokens")).unwrap_or(0);
            let cached = [
                "/promptTokensDetails/cachedTokens",
                "/prompt_tokens_details/cached_tokens",
                "/promptTokenDetails/cachedTokens",
                "/prompt_token_details/cached_tokens",
                "/numCachedTokens",
                "/num_cached_tokens",
            ]
            .iter()
            .find_map(|p| json_u64(u.pointer(p)))
            .unwrap_or(0)
            .min(prompt);
            out.usage.input = prompt - cached;
            out.usage.output = json_u64(u.get("completion_tokens")).unwrap_or(0);
            out.usage.cache_read = cached;
            out.usage.cache_write = 0;
            out.usage.total_tokens = json_u64(u.get("total_tokens"))
                .filter(|t| *t > 0)
                .unwrap_or(out.usage.input + out.usage.output + out.usage.cache_read);
            out.usage.cost = Cost {
                total_from_provider: Some(false),
                ..Cost::default()
            };
            out.usage.compute_cost(&model.cost);
            em.usage(&out.usage);
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            out.raw_stop_reason = Some(reason.to_owned());
            let (stop, message) = map_finish(reason);
            out.stop_reason = stop;
            if message.is_some() {
                self.error_message = message;
            }
        }
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        match delta.get("content") {
            Some(Value::String(s)) => self.append(out, em, false, s),
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(s) => self.append(out, em, false, s),
                        _ => match item.get("type").and_then(Value::as_str) {
                            Some("thinking") => {
                                let text: String = item
                                    .get("thinking")
                                    .and_then(Value::as_array)
                                    .into_iter()
                                    .flatten()
                                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                                    .collect();
                                self.append(out, em, true, &text);
                            }
                            Some("text") => {
                                let text = item.get("text").and_then(Value::as_str).unwrap_or("");
                                self.append(out, em, false, text);
                            }
                            _ => {}
                        },
                    }
                }
            }
            _ => {}
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.close(out, em);
            let index = call.get("index").and_then(Value::as_u64);
            let id = match call.get("id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() && id != "null" => id.to_owned(),
                _ => derive_tool_call_id(&format!("toolcall:{}", index.unwrap_or(0)), 0),
            };
            let key = index.map_or_else(|| id.clone(), |i| format!("#{i}"));
            let function = call.get("function");
            let name = function
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let args = match function.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => common::compact(v),
                _ => "{}".to_owned(),
            };
            let slot = match self.calls.iter().position(|c| c.key == key) {
                Some(i) => i,
                None => {
                    let ci = push_block(
                        out,
                        em,
                        Content::ToolCall(ToolCall {
                            id,
                            name: name.to_owned(),
                            arguments: json!({}),
                            thought_signature: None,
                            extra: Default::default(),
                        }),
                    );
                    self.calls.push(OpenCall {
                        key,
                        content_index: ci,
                        text: String::new(),
                    });
                    self.calls.len() - 1
                }
            };
            let open = &mut self.calls[slot];
            open.text.push_str(&args);
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                tc.arguments = parse_streaming_json(&open.text);
            }
            em.emit(AssistantMessageEvent::ToolCallDelta {
                content_index: open.content_index,
                delta: args,
            });
        }
    }

    /// Close the open block and every tool call (their final arguments parsed).
    fn finish(&mut self, out: &mut AssistantMessage, em: &Emitter) {
        self.close(out, em);
        for call in &self.calls {
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(call.content_index) {
                tc.arguments = parse_streaming_json(&call.text);
            }
            if let Some(e) = out
                .content
                .get(call.content_index)
                .and_then(|b| end_event(call.content_index, b))
            {
                em.emit(e);
            }
        }
    }
}

async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    body: Value,
    options: StreamOptions,
    caching: bool,
    hooks: Option<crate::stream::RequestHooks>,
) {
    let http = client.options();
    let client = client.get();
    let started = Instant::now();
    let output = AssistantMessage::empty(&model);
    let cancel = options.cancel.clone();
    if cancel.is_cancelled() {
        em.fail(output, common::aborted(), started);
        return;
    }
    let Some(key) = resolve_api_key(&model, &options) else {
        let message = format!("No API key for provider: {}", model.provider);
        em.fail(output, ProviderError::Protocol { message }, started);
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {key}")) {
        headers.insert(AUTHORIZATION, v);
    }
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let extra = extra_headers(&model, &options);
    let explicit_affinity = extra
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("x-affinity"));
    apply_headers(&mut headers, extra);
    if let (true, false, Some(sid)) = (caching, explicit_affinity, options.session_id.as_ref()) {
        if let Ok(v) = HeaderValue::from_str(sid) {
            headers.insert("x-affinity", v);
        }
    }
    let url = format!(
        "{}/v1/chat/completions",
        model.base_url.trim().trim_end_matches('/')
    );
    common::hooked_headers(hooks.as_ref(), &options, &mut headers).await;
    let body = common::hooked_payload(hooks.as_ref(), body).await;
    let payload = serde_json::to_vec(&body).unwrap_or_default();
    let request = client.post(url).headers(headers).body(payload);
    let sent =
        common::send_hooked_request(request, &cancel, mistral_http_error, &http, hooks.as_ref())
            .await;
    let response = match sent {
        Ok(r) => r,
        Err(error) => {
            em.fail(output, error, started);
            return;
        }
    };
    em.start(&output);
    let mut output = output;
    let mut events = response.bytes_stream().eventsource();
    let mut state = State::default();
    let end = loop {
        let event = match next_sse_event(&mut events, &cancel, http.idle_timeout_ms).await {
            Ok(event) => event,
            Err(end) => break end,
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break StreamEnd::Finished;
        }
        let chunk = match crate::json::parse_stream_chunk(data) {
            Ok(v) if v.get("choices").is_some_and(Value::is_array) => v,
            _ => {
                break StreamEnd::Failed(ProviderError::Protocol {
                    message: "Invalid Mistral streaming event".to_owned(),
                })
            }
        };
        state.handle(&chunk, &mut output, &em, &model);
    };
    state.finish(&mut output, &em);
    match end {
        StreamEnd::Aborted => em.fail(output, common::aborted(), started),
        StreamEnd::Failed(error) => {
            let error = error.aborted_if(cancel.is_cancelled());
            em.fail(output, error, started)
        }
        StreamEnd::Finished => {
            if cancel.is_cancelled() {
                em.fail(output, common::aborted(), started);
            } else if output.stop_reason == StopReason::Pending {
                let error = ProviderError::StreamEndedEarly {
                    message: "Mistral stream ended without a finish reason".to_owned(),
                };
                em.fail(output, error, started);
            } else if matches!(output.stop_reason, StopReason::Error | StopReason::Aborted) {
                let message = state
                    .error_message
                    .take()
                    .unwrap_or_else(|| "An unknown error occurred".to_owned());
                em.fail(output, ProviderError::Stream { message }, started);
            } else {
                em.done(output, started);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_errors() {
        assert_eq!(derive_tool_call_id("abcDEF123", 0), "abcDEF123");
        let hashed = derive_tool_call_id("toolu_fake_1_0", 0);
        assert_eq!(hashed.len(), 9);
        assert!(hashed.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(derive_tool_call_id("toolu_fake_1_0", 1), hashed);
        assert_eq!(
            mistral_http_error(429, ""),
            "Mistral API error (429): Too Many Requests"
        );
        assert_eq!(
            mistral_http_error(400, " {\"a\":1} "),
            "Mistral API error (400): {\"a\":1}"
        );
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
    }
}
