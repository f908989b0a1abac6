//! `anthropic-messages`: streaming `POST {baseUrl}/v1/messages?beta=true` (Anthropic Messages
//! API and compatible servers).
//!
//! Source: upstream `packages/ai/src/providers/anthropic.ts` and `simple-options.ts`, checked
//! against the upstream 1.6 recordings (`golden/{simple_text_anthropic,thinking_anthropic,
//! tool_read,prompt_with_image,auto_retry_529,overflow_compaction}`).
//!
//! Events follow the wire: each `content_block_start`/`_delta`/`_stop` maps to the block's
//! `*_start`/`*_delta`/`*_end`. `start` is pushed once the response headers arrived; HTTP
//! errors yield only `error`; aborts and broken streams end with `error` without closing the
//! open block.

use super::common::{
    anthropic_http_error, apply_headers, compat_bool, effective_max_tokens, end_event,
    event_stream, extra_headers, finish_usage, joined_text, json_u64, mapped_level, next_sse_event,
    parse_streaming_json, push_block, requested_reasoning, resolve_api_key, Emitter, StreamEnd,
};
use super::{common, HttpOptions};
use crate::error::ProviderError;
use crate::json::SurrogateJoiner;
use crate::stream::{
    AssistantMessageEvent, AssistantStream, CacheRetention, Provider, RequestTuning, StreamOptions,
    ThinkingBudgets,
};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Cost, Message, Model, StopReason, ThinkingContent,
    ThinkingLevel, ToolCall, ToolDefinition, UserContent,
};
use eventsource_stream::Eventsource;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::time::Instant;

/// The `api` value of this adapter.
pub const API: &str = "anthropic-messages";

/// `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Beta enabling thinking between tool calls; sent only when budget thinking is on.
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
/// Beta for streamed tool input on servers without `eager_input_streaming`.
pub const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";

/// Claude Code tool names (OAuth tokens must use this casing).
const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];
const CLAUDE_CODE_VERSION: &str = "2.1.75";
const CLAUDE_CODE_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";

/// The `anthropic-messages` adapter: one HTTP request per [`Provider::stream`], over the HTTP
/// client it was built with (`Default`: the process-wide client with the default
/// [`HttpOptions`]).
#[derive(Debug, Clone)]
pub struct AnthropicMessages {
    client: common::LazyClient,
}

impl Default for AnthropicMessages {
    fn default() -> Self {
        AnthropicMessages {
            client: common::LazyClient::Default,
        }
    }
}

impl AnthropicMessages {
    /// The adapter over a new HTTP client with `http`'s connect and idle timeouts.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        AnthropicMessages { client }
    }

    /// The adapter over `client` (shares its connection pool and timeouts).
    pub fn with_client(client: reqwest::Client) -> Self {
        AnthropicMessages {
            client: common::LazyClient::Ready(client),
        }
    }
}

impl Provider for AnthropicMessages {
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
        // A caller's `Authorization` header (`ANTHROPIC_AUTH_TOKEN`) is the credential: no key
        // is taken from the environment then, so only the bearer token goes out (upstream's
        // anthropic auth resolves to that header alone).
        let bearer = options
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        let api_key = if bearer {
            options.api_key.clone().filter(|k| !k.is_empty())
        } else {
            resolve_api_key(&model, &options)
        };
        let oauth = api_key.as_deref().is_some_and(is_oauth_token);
        let body = build_body(&model, context, &options, &tuning, oauth);
        let tools = context.tools.clone();
        let client = self.client.clone();
        let hooks = tuning.hooks;
        event_stream(move |em| run(em, client, model, body, options, api_key, tools, hooks))
    }
}

/// Claude OAuth tokens (`sk-ant-oat…`) authenticate with `Authorization: Bearer` and the
/// Claude Code identity.
pub fn is_oauth_token(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

fn to_claude_code_name(name: &str) -> String {
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|t| t.eq_ignore_ascii_case(name))
        .map(|t| (*t).to_owned())
        .unwrap_or_else(|| name.to_owned())
}

fn from_claude_code_name(name: &str, tools: &[ToolDefinition]) -> String {
    tools
        .iter()
        .find(|t| t.name.eq_ignore_ascii_case(name))
        .map(|t| t.name.clone())
        .unwrap_or_else(|| name.to_owned())
}

/// Anthropic-specific compatibility switches (defaults as upstream: everything on except for
/// `fireworks`).
struct Compat {
    eager_tool_input_streaming: bool,
    long_cache_retention: bool,
    cache_control_on_tools: bool,
    allow_empty_signature: bool,
    adaptive_thinking: bool,
}

impl Compat {
    fn resolve(model: &Model) -> Self {
        let fireworks = model.provider == "fireworks";
        let b = |k: &str, d: bool| compat_bool(model, k).unwrap_or(d);
        Compat {
            eager_tool_input_streaming: b("supportsEagerToolInputStreaming", !fireworks),
            long_cache_retention: b("supportsLongCacheRetention", !fireworks),
            cache_control_on_tools: b("supportsCacheControlOnTools", !fireworks),
            allow_empty_signature: b("allowEmptySignature", false),
            adaptive_thinking: b("forceAdaptiveThinking", false),
        }
    }
}

/// How thinking is configured for one request.
enum Thinking {
    /// Non-reasoning model: no `thinking` key.
    Omitted,
    /// Reasoning model with thinking off: `{"type":"disabled"}`.
    Disabled,
    /// Budget thinking: `{"type":"enabled","budget_tokens":n,"display":"summarized"}`.
    Budget(u64),
    /// Adaptive thinking: `{"type":"adaptive","display":"summarized"}` + `output_config.effort`.
    Adaptive(String),
}

/// Default budgets per level (upstream `adjustMaxTokensForThinking`).
fn thinking_budget(level: ThinkingLevel, custom: Option<&ThinkingBudgets>) -> u64 {
    let pick = |c: Option<u64>, d: u64| c.unwrap_or(d);
    let c = custom.copied().unwrap_or_default();
    match level {
        ThinkingLevel::Minimal => pick(c.minimal, 1024),
        ThinkingLevel::Low => pick(c.low, 2048),
        ThinkingLevel::Medium => pick(c.medium, 8192),
        _ => pick(c.high, 16384),
    }
}

/// Adaptive-thinking effort: `thinkingLevelMap[level]` if a string, else minimal/low → low,
/// medium → medium, anything higher → high.
fn effort_for(model: &Model, level: ThinkingLevel) -> String {
    if let Some(m) = mapped_level(model, level) {
        return m;
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .to_owned()
}

/// Resolve the thinking mode and the final `max_tokens` (budget thinking raises the cap by the
/// budget, bounded by the model's `maxTokens`, and keeps ≥ 1024 tokens for the answer).
fn plan_thinking(
    model: &Model,
    options: &StreamOptions,
    tuning: &RequestTuning,
) -> (Thinking, u64) {
    let base = effective_max_tokens(model, options);
    if !model.reasoning {
        return (Thinking::Omitted, base);
    }
    let Some(level) = requested_reasoning(model, options) else {
        return (Thinking::Disabled, base);
    };
    if Compat::resolve(model).adaptive_thinking {
        return (Thinking::Adaptive(effort_for(model, level)), base);
    }
    let mut budget = thinking_budget(level, tuning.thinking_budgets.as_ref());
    let model_max = if model.max_tokens == 0 {
        u64::MAX
    } else {
        model.max_tokens
    };
    let max_tokens = base.saturating_add(budget).min(model_max);
    if max_tokens <= budget {
        budget = max_tokens.saturating_sub(1024);
    }
    (Thinking::Budget(budget), max_tokens)
}

fn cache_control(model: &Model, retention: CacheRetention) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Long if Compat::resolve(model).long_cache_retention => {
            Some(json!({"type": "ephemeral", "ttl": "1h"}))
        }
        _ => Some(json!({"type": "ephemeral"})),
    }
}

/// Tool-call ids must match `^[a-zA-Z0-9_-]{1,64}$`.
fn normalize_tool_call_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// The JSON request body upstream 1.6 sends (key order as upstream):
/// `model, messages, max_tokens, stream, system, tools, thinking, output_config`.
/// `oauth` selects the Claude Code identity and tool-name casing.
pub fn build_request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    oauth: bool,
) -> Value {
    build_body(model, context, options, tuning, oauth)
}

fn build_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    oauth: bool,
) -> Value {
    let compat = Compat::resolve(model);
    let cache = cache_control(model, tuning.cache_retention);
    let (thinking, max_tokens) = plan_thinking(model, options, tuning);

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(
            model,
            &context.messages,
            oauth,
            cache.as_ref(),
            &compat,
        )),
    );
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));

    let text_block = |text: &str| {
        let mut b = Map::new();
        b.insert("type".into(), json!("text"));
        b.insert("text".into(), json!(text));
        if let Some(c) = &cache {
            b.insert("cache_control".into(), c.clone());
        }
        Value::Object(b)
    };
    let mut system = Vec::new();
    if oauth {
        system.push(text_block(CLAUDE_CODE_IDENTITY));
    }
    if !context.system_prompt.is_empty() {
        system.push(text_block(&context.system_prompt));
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }

    if !context.tools.is_empty() {
        let last = context.tools.len() - 1;
        let tools = context
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut tool = Map::new();
                let name = if oauth {
                    to_claude_code_name(&t.name)
                } else {
                    t.name.clone()
                };
                tool.insert("name".into(), json!(name));
                tool.insert("description".into(), json!(t.description));
                if compat.eager_tool_input_streaming {
                    tool.insert("eager_input_streaming".into(), json!(true));
                }
                let properties = t
                    .parameters
                    .get("properties")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let required = t
                    .parameters
                    .get("required")
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                tool.insert(
                    "input_schema".into(),
                    json!({"type": "object", "properties": properties, "required": required}),
                );
                if i == last && compat.cache_control_on_tools {
                    if let Some(c) = &cache {
                        tool.insert("cache_control".into(), c.clone());
                    }
                }
                Value::Object(tool)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }

    match thinking {
        Thinking::Omitted => {}
        Thinking::Disabled => {
            body.insert("thinking".into(), json!({"type": "disabled"}));
        }
        Thinking::Budget(budget) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}),
            );
        }
        Thinking::Adaptive(effort) => {
            body.insert(
                "thinking".into(),
                json!({"type": "adaptive", "display": "summarized"}),
            );
            body.insert("output_config".into(), json!({"effort": effort}));
        }
    }
    Value::Object(body)
}

fn image_block(mime: &str, data: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

/// Tool-result content: a string when there are only text blocks (joined with "\n"), else
/// blocks with a placeholder text first when there is no text.
fn tool_result_content(content: &[Content]) -> Value {
    if !content.iter().any(|c| matches!(c, Content::Image(_))) {
        return json!(joined_text(content, "\n"));
    }
    let mut blocks: Vec<Value> = content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
            Content::Image(i) => Some(image_block(&i.mime_type, &i.data)),
            _ => None,
        })
        .collect();
    if !content.iter().any(|c| matches!(c, Content::Text(_))) {
        blocks.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(blocks)
}

fn convert_messages(
    model: &Model,
    messages: &[Message],
    oauth: bool,
    cache: Option<&Value>,
    compat: &Compat,
) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_call_id(id);
    let messages = transform_messages(messages, model, Some(&normalize));
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::User(u) => match &u.content {
                UserContent::Text(s) => {
                    if !s.trim().is_empty() {
                        out.push(json!({"role": "user", "content": s}));
                    }
                }
                UserContent::Blocks(blocks) => {
                    let parts: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) if !t.text.trim().is_empty() => {
                                Some(json!({"type": "text", "text": t.text}))
                            }
                            Content::Image(img) => Some(image_block(&img.mime_type, &img.data)),
                            _ => None,
                        })
                        .collect();
                    if !parts.is_empty() {
                        out.push(json!({"role": "user", "content": parts}));
                    }
                }
            },
            Message::Assistant(a) => {
                let blocks = convert_assistant_blocks(a, oauth, compat);
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::ToolResult(_) => {
                let mut results = Vec::new();
                while let Some(Message::ToolResult(tr)) = messages.get(i) {
                    results.push(json!({
                        "type": "tool_result",
                        "tool_use_id": tr.tool_call_id,
                        "content": tool_result_content(&tr.content),
                        "is_error": tr.is_error,
                    }));
                    i += 1;
                }
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }

    // Cache the conversation so far: mark the last block of the last (user) message.
    if let (Some(cache), Some(last)) = (cache, out.last_mut()) {
        if last.get("role").and_then(Value::as_str) == Some("user") {
            match last.get_mut("content") {
                Some(Value::Array(blocks)) => {
                    if let Some(Value::Object(b)) = blocks.last_mut() {
                        let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
                        if matches!(kind, "text" | "image" | "tool_result") {
                            b.insert("cache_control".into(), cache.clone());
                        }
                    }
                }
                Some(Value::String(s)) => {
                    let text = std::mem::take(s);
                    last["content"] =
                        json!([{"type": "text", "text": text, "cache_control": cache}]);
                }
                _ => {}
            }
        }
    }
    out
}

fn convert_assistant_blocks(a: &AssistantMessage, oauth: bool, compat: &Compat) -> Vec<Value> {
    let mut blocks = Vec::new();
    for block in &a.content {
        match block {
            Content::Text(t) => {
                if !t.text.trim().is_empty() {
                    blocks.push(json!({"type": "text", "text": t.text}));
                }
            }
            Content::Thinking(t) => {
                if t.redacted == Some(true) {
                    blocks.push(json!({
                        "type": "redacted_thinking",
                        "data": t.thinking_signature.clone().unwrap_or_default(),
                    }));
                    continue;
                }
                if t.thinking.trim().is_empty() {
                    continue;
                }
                match t.thinking_signature.as_deref().map(str::trim) {
                    Some(sig) if !sig.is_empty() => blocks.push(json!({
                        "type": "thinking",
                        "thinking": t.thinking,
                        "signature": t.thinking_signature,
                    })),
                    _ if compat.allow_empty_signature => blocks.push(json!({
                        "type": "thinking",
                        "thinking": t.thinking,
                        "signature": "",
                    })),
                    _ => blocks.push(json!({"type": "text", "text": t.thinking})),
                }
            }
            Content::ToolCall(tc) => {
                let name = if oauth {
                    to_claude_code_name(&tc.name)
                } else {
                    tc.name.clone()
                };
                let input = if tc.arguments.is_object() {
                    tc.arguments.clone()
                } else {
                    json!({})
                };
                blocks.push(json!({"type": "tool_use", "id": tc.id, "name": name, "input": input}));
            }
            Content::Image(_) => {}
        }
    }
    blocks
}

/// `stop_reason` → stopReason; unknown values are an error (`Unhandled stop reason: …`).
fn map_stop_reason(reason: &str) -> Result<StopReason, String> {
    match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => Ok(StopReason::Stop),
        "max_tokens" => Ok(StopReason::Length),
        "tool_use" => Ok(StopReason::ToolUse),
        "refusal" | "sensitive" => Ok(StopReason::Error),
        other => Err(format!("Unhandled stop reason: {other}")),
    }
}

/// Per-block streaming bookkeeping: Anthropic's block `index` → our content index.
struct Slot {
    wire_index: i64,
    content_index: usize,
    partial_json: String,
    open: bool,
    /// Surrogate halves split across deltas (`pi_ai::json::parse_stream_chunk`).
    join: SurrogateJoiner,
}

struct StreamState {
    slots: Vec<Slot>,
    saw_start: bool,
    saw_stop: bool,
}

impl StreamState {
    fn slot(&mut self, wire_index: Option<i64>) -> Option<&mut Slot> {
        let wi = wire_index?;
        self.slots.iter_mut().find(|s| s.wire_index == wi && s.open)
    }

    fn handle_event(
        &mut self,
        event: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
        oauth: bool,
        tools: &[ToolDefinition],
    ) -> Result<(), String> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let index = event.get("index").and_then(Value::as_i64);
        match kind {
            "message_start" => {
                self.saw_start = true;
                let message = event.get("message");
                if let Some(id) = message.and_then(|m| m.get("id")).and_then(Value::as_str) {
                    out.response_id = Some(id.to_owned());
                }
                let usage = message.and_then(|m| m.get("usage"));
                let get = |k: &str| json_u64(usage.and_then(|u| u.get(k))).unwrap_or(0);
                out.usage.input = get("input_tokens");
                out.usage.output = get("output_tokens");
                out.usage.cache_read = get("cache_read_input_tokens");
                out.usage.cache_write = get("cache_creation_input_tokens");
                out.usage.cache_write_1h = Some(
                    json_u64(
                        usage
                            .and_then(|u| u.get("cache_creation"))
                            .and_then(|c| c.get("ephemeral_1h_input_tokens")),
                    )
                    .unwrap_or(0),
                );
                out.usage.cost = Cost {
                    total_from_provider: Some(false),
                    ..Cost::default()
                };
                // Anthropic reports no total: `totalTokens` is the sum of the four counters.
                finish_usage(&mut out.usage, model);
                em.usage(&out.usage);
            }
            "content_block_start" => {
                let Some(wire_index) = index else {
                    return Ok(());
                };
                let block = event.get("content_block").cloned().unwrap_or(Value::Null);
                let block_type = block.get("type").and_then(Value::as_str).unwrap_or("");
                let new_block = match block_type {
                    "text" => Content::text(""),
                    "thinking" => Content::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: Some(String::new()),
                        redacted: None,
                        extra: Default::default(),
                    }),
                    "redacted_thinking" => {
                        let data = block.get("data").and_then(Value::as_str).unwrap_or("");
                        Content::Thinking(ThinkingContent {
                            thinking: "[Reasoning redacted]".into(),
                            thinking_signature: Some(data.to_owned()),
                            redacted: Some(true),
                            extra: Default::default(),
                        })
                    }
                    "tool_use" => {
                        let id = block.get("id").and_then(Value::as_str).unwrap_or("");
                        let raw_name = block.get("name").and_then(Value::as_str).unwrap_or("");
                        let name = if oauth {
                            from_claude_code_name(raw_name, tools)
                        } else {
                            raw_name.to_owned()
                        };
                        let arguments = match block.get("input") {
                            Some(v @ Value::Object(_)) => v.clone(),
                            _ => Value::Object(Map::new()),
                        };
                        Content::ToolCall(ToolCall {
                            id: id.to_owned(),
                            name,
                            arguments,
                            thought_signature: None,
                            extra: Default::default(),
                        })
                    }
                    _ => return Ok(()),
                };
                let content_index = push_block(out, em, new_block);
                self.slots.push(Slot {
                    wire_index,
                    content_index,
                    partial_json: String::new(),
                    open: true,
                    join: SurrogateJoiner::default(),
                });
            }
            "content_block_delta" => {
                let delta = event.get("delta").cloned().unwrap_or(Value::Null);
                let Some(slot) = self.slot(index) else {
                    return Ok(());
                };
                let ci = slot.content_index;
                let text_of = |k: &str| {
                    delta
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                match (
                    delta.get("type").and_then(Value::as_str),
                    out.content.get_mut(ci),
                ) {
                    (Some("text_delta"), Some(Content::Text(t))) => {
                        let raw = text_of("text");
                        let d = slot.join.push(&raw);
                        if d.is_empty() && !raw.is_empty() {
                            // Only a held-back surrogate half: nothing to show yet.
                            return Ok(());
                        }
                        t.text.push_str(&d);
                        em.emit(AssistantMessageEvent::TextDelta {
                            content_index: ci,
                            delta: d,
                        });
                    }
                    (Some("thinking_delta"), Some(Content::Thinking(t))) => {
                        let raw = text_of("thinking");
                        let d = slot.join.push(&raw);
                        if d.is_empty() && !raw.is_empty() {
                            // Only a held-back surrogate half: nothing to show yet.
                            return Ok(());
                        }
                        t.thinking.push_str(&d);
                        em.emit(AssistantMessageEvent::ThinkingDelta {
                            content_index: ci,
                            delta: d,
                        });
                    }
                    (Some("signature_delta"), Some(Content::Thinking(t))) => {
                        t.thinking_signature
                            .get_or_insert_with(String::new)
                            .push_str(&text_of("signature"));
                    }
                    (Some("input_json_delta"), Some(Content::ToolCall(_))) => {
                        let d = text_of("partial_json");
                        slot.partial_json.push_str(&d);
                        em.emit(AssistantMessageEvent::ToolCallDelta {
                            content_index: ci,
                            delta: d,
                        });
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let Some(slot) = self.slot(index) else {
                    return Ok(());
                };
                slot.open = false;
                let ci = slot.content_index;
                let rest = slot.join.finish();
                match out.content.get_mut(ci) {
                    Some(Content::ToolCall(tc)) => {
                        tc.arguments = parse_streaming_json(&slot.partial_json);
                    }
                    // A high surrogate whose low half never came ends the block as U+FFFD.
                    Some(Content::Text(t)) if !rest.is_empty() => {
                        t.text.push_str(rest);
                        em.emit(AssistantMessageEvent::TextDelta {
                            content_index: ci,
                            delta: rest.to_owned(),
                        });
                    }
                    Some(Content::Thinking(t)) if !rest.is_empty() => {
                        t.thinking.push_str(rest);
                        em.emit(AssistantMessageEvent::ThinkingDelta {
                            content_index: ci,
                            delta: rest.to_owned(),
                        });
                    }
                    _ => {}
                }
                let Some(end) = out.content.get(ci).and_then(|b| end_event(ci, b)) else {
                    return Ok(());
                };
                em.emit(end);
            }
            "message_delta" => {
                if let Some(reason) = event
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    out.stop_reason = map_stop_reason(reason)?;
                    out.raw_stop_reason = Some(reason.to_owned());
                }
                let usage = event.get("usage");
                let get = |k: &str| json_u64(usage.and_then(|u| u.get(k)));
                if let Some(v) = get("input_tokens") {
                    out.usage.input = v;
                }
                if let Some(v) = get("output_tokens") {
                    out.usage.output = v;
                }
                if let Some(v) = get("cache_read_input_tokens") {
                    out.usage.cache_read = v;
                }
                if let Some(v) = get("cache_creation_input_tokens") {
                    out.usage.cache_write = v;
                }
                // Anthropic reports no total: `totalTokens` is the sum of the four counters.
                finish_usage(&mut out.usage, model);
                em.usage(&out.usage);
            }
            "message_stop" => self.saw_stop = true,
            _ => {}
        }
        Ok(())
    }
}

impl StreamState {
    /// Parse the collected arguments of tool calls whose block never closed (aborts, errors).
    fn finalize_open(&self, out: &mut AssistantMessage) {
        for slot in self.slots.iter().filter(|s| s.open) {
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(slot.content_index) {
                tc.arguments = parse_streaming_json(&slot.partial_json);
            }
        }
    }
}

const MESSAGE_EVENTS: [&str; 6] = [
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
];

// One request's parts as the stream entry point gathered them; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    body: Value,
    options: StreamOptions,
    api_key: Option<String>,
    tools: Vec<ToolDefinition>,
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
    let oauth = api_key.as_deref().is_some_and(is_oauth_token);
    let thinking_enabled = body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled");

    let mut betas: Vec<&str> = Vec::new();
    if oauth {
        betas.extend(["claude-code-20250219", "oauth-2025-04-20"]);
    }
    if body.get("tools").is_some() && !Compat::resolve(&model).eager_tool_input_streaming {
        betas.push(FINE_GRAINED_TOOL_STREAMING_BETA);
    }
    if thinking_enabled {
        betas.push(INTERLEAVED_THINKING_BETA);
    }

    let mut headers = HeaderMap::new();
    headers.insert(
        "anthropic-version",
        HeaderValue::from_static(ANTHROPIC_VERSION),
    );
    if let Some(key) = &api_key {
        if oauth {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {key}")) {
                headers.insert(AUTHORIZATION, v);
            }
        } else if let Ok(v) = HeaderValue::from_str(key) {
            headers.insert("x-api-key", v);
        }
    }
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(
        "anthropic-dangerous-direct-browser-access",
        HeaderValue::from_static("true"),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if !betas.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&betas.join(",")) {
            headers.insert("anthropic-beta", v);
        }
    }
    if oauth {
        let ua = format!("claude-cli/{CLAUDE_CODE_VERSION}");
        if let Ok(v) = HeaderValue::from_str(&ua) {
            headers.insert(reqwest::header::USER_AGENT, v);
        }
        headers.insert("x-app", HeaderValue::from_static("cli"));
    }
    apply_headers(&mut headers, extra_headers(&model, &options));

    let url = format!(
        "{}/v1/messages?beta=true",
        model.base_url.trim_end_matches('/')
    );
    common::hooked_headers(hooks.as_ref(), &options, &mut headers).await;
    let body = common::hooked_payload(hooks.as_ref(), body).await;
    let payload = serde_json::to_vec(&body).unwrap_or_default();
    let request = client.post(url).headers(headers).body(payload);
    let sent = common::send_hooked_request(
        request,
        &cancel,
        anthropic_http_error,
        &http,
        hooks.as_ref(),
    )
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
    let mut state = StreamState {
        slots: Vec::new(),
        saw_start: false,
        saw_stop: false,
    };
    let end = loop {
        let event = match next_sse_event(&mut events, &cancel, http.idle_timeout_ms).await {
            Ok(event) => event,
            Err(end) => break end,
        };
        if event.event == "error" {
            break StreamEnd::Failed(ProviderError::Stream {
                message: event.data,
            });
        }
        if !MESSAGE_EVENTS.contains(&event.event.as_str()) {
            continue;
        }
        let parsed = match crate::json::parse_stream_chunk(&event.data) {
            Ok(v) => v,
            Err(e) => {
                break StreamEnd::Failed(ProviderError::Protocol {
                    message: format!(
                        "Could not parse Anthropic SSE event {}: {e}; data={}",
                        event.event, event.data
                    ),
                })
            }
        };
        if let Err(text) = state.handle_event(&parsed, &mut output, &em, &model, oauth, &tools) {
            break StreamEnd::Failed(ProviderError::Protocol { message: text });
        }
    };

    state.finalize_open(&mut output);
    match end {
        StreamEnd::Aborted => em.fail(output, common::aborted(), started),
        StreamEnd::Failed(error) => {
            let error = error.aborted_if(cancel.is_cancelled());
            em.fail(output, error, started)
        }
        StreamEnd::Finished => {
            if output.stop_reason == StopReason::Pending {
                output.stop_reason = StopReason::Stop;
            }
            if cancel.is_cancelled() {
                em.fail(output, common::aborted(), started);
            } else if state.saw_start && !state.saw_stop {
                let error = ProviderError::StreamEndedEarly {
                    message: "Anthropic stream ended before message_stop".to_owned(),
                };
                em.fail(output, error, started);
            } else if matches!(output.stop_reason, StopReason::Error | StopReason::Aborted) {
                let error = ProviderError::Stream {
                    message: "An unknown error occurred".to_owned(),
                };
                em.fail(output, error, started);
            } else {
                em.done(output, started);
            }
        }
    }
}
