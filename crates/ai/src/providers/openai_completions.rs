//! `openai-completions`: streaming `POST {baseUrl}/chat/completions` (OpenAI Chat Completions
//! and compatible servers).
//!
//! Source: upstream `packages/ai/src/providers/openai-completions.ts`, checked against the
//! upstream 1.6 recordings (`golden/{simple_text,thinking_openai,tool_bash_echo,
//! parallel_tool_calls,stop_length,thinking_levels_max,auto_retry_exhausted,
//! stream_disconnect_retry,abort_mid_stream}`).
//!
//! Event order (as upstream 1.6): `start` once the response headers arrived, then
//! `*_start`/`*_delta` as deltas arrive (blocks are never closed early), and after the stream
//! ended every block's `*_end` in content order, then `done`. HTTP errors yield only `error`;
//! a broken body yields `error` without `*_end`; an abort emits the `*_end`s, then `error`.

use super::common::{
    apply_headers, compact, compat_bool, compat_str, effective_max_tokens, end_event, event_stream,
    extra_headers, finish_usage, joined_text, json_u64, mapped_level, next_sse_event,
    openai_http_error, parse_streaming_json, push_block, requested_reasoning, resolve_api_key,
    Emitter, StreamEnd,
};
use super::{common, HttpOptions};
use crate::error::ProviderError;
use crate::json::SurrogateJoiner;
use crate::stream::{
    AssistantMessageEvent, AssistantStream, CacheRetention, Provider, RequestTuning, StreamOptions,
};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Cost, Message, Model, StopReason, ThinkingContent,
    ToolCall, Usage, UserContent,
};
use eventsource_stream::Eventsource;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::Instant;

/// The `api` value of this adapter.
pub const API: &str = "openai-completions";

/// The `openai-completions` adapter: one HTTP request per [`Provider::stream`], over the HTTP
/// client it was built with (`Default`: the process-wide client with the default
/// [`HttpOptions`]).
#[derive(Debug, Clone)]
pub struct OpenAiCompletions {
    client: common::LazyClient,
}

impl Default for OpenAiCompletions {
    fn default() -> Self {
        OpenAiCompletions {
            client: common::LazyClient::Default,
        }
    }
}

impl OpenAiCompletions {
    /// The adapter over a new HTTP client with `http`'s connect and idle timeouts.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        OpenAiCompletions { client }
    }

    /// The adapter over `client` (shares its connection pool and timeouts).
    pub fn with_client(client: reqwest::Client) -> Self {
        OpenAiCompletions {
            client: common::LazyClient::Ready(client),
        }
    }
}

impl Provider for OpenAiCompletions {
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
        let body = build_request_body(&model, context, &options, &tuning);
        let client = self.client.clone();
        let hooks = tuning.hooks;
        event_stream(move |em| run(em, client, model, body, options, hooks))
    }
}

/// Compatibility switches resolved from `model.compat` over provider/baseUrl detection
/// (spec messages-and-models.md §7.4).
#[derive(Debug, Clone)]
struct Compat {
    supports_store: bool,
    supports_developer_role: bool,
    supports_reasoning_effort: bool,
    supports_usage_in_streaming: bool,
    use_max_tokens_field: bool,
    requires_tool_result_name: bool,
    requires_assistant_after_tool_result: bool,
    requires_thinking_as_text: bool,
    requires_reasoning_content_on_assistant: bool,
    thinking_format: String,
    strict_tools: bool,
    supports_long_cache_retention: bool,
}

impl Compat {
    fn resolve(model: &Model) -> Self {
        let provider = model.provider.as_str();
        let url = model.base_url.as_str();
        let is_zai = provider == "zai" || url.contains("api.z.ai");
        let is_together = provider == "together"
            || url.contains("api.together.ai")
            || url.contains("api.together.xyz");
        let is_moonshot = provider == "moonshotai"
            || provider == "moonshotai-cn"
            || url.contains("api.moonshot.");
        let is_cf_workers =
            provider == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
        let is_cf_gateway =
            provider == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
        let is_grok = provider == "xai" || url.contains("api.x.ai");
        let is_deepseek = provider == "deepseek" || url.contains("deepseek.com");
        let non_standard = provider == "cerebras"
            || url.contains("cerebras.ai")
            || is_grok
            || is_together
            || url.contains("chutes.ai")
            || is_deepseek
            || is_zai
            || is_moonshot
            || provider == "opencode"
            || url.contains("opencode.ai")
            || is_cf_workers
            || is_cf_gateway;
        let is_openai = provider == "openai" || url.contains("api.openai.com");
        let thinking_format = if is_deepseek {
            "deepseek"
        } else if is_zai {
            "zai"
        } else if is_together {
            "together"
        } else if provider == "openrouter" || url.contains("openrouter.ai") {
            "openrouter"
        } else {
            "openai"
        };
        let b = |key: &str, default: bool| compat_bool(model, key).unwrap_or(default);
        Compat {
            supports_store: b("supportsStore", !non_standard),
            // Upstream 1.6 sends role "system" to OpenAI-compatible servers even for reasoning
            // models (1.6 notes §13); "developer" only for OpenAI itself.
            supports_developer_role: b("supportsDeveloperRole", is_openai && !non_standard),
            supports_reasoning_effort: b(
                "supportsReasoningEffort",
                !is_grok && !is_zai && !is_moonshot && !is_together && !is_cf_gateway,
            ),
            supports_usage_in_streaming: b("supportsUsageInStreaming", true),
            use_max_tokens_field: match compat_str(model, "maxTokensField") {
                Some(f) => f == "max_tokens",
                None => url.contains("chutes.ai") || is_moonshot || is_cf_gateway || is_together,
            },
            requires_tool_result_name: b("requiresToolResultName", false),
            requires_assistant_after_tool_result: b("requiresAssistantAfterToolResult", false),
            requires_thinking_as_text: b("requiresThinkingAsText", false),
            requires_reasoning_content_on_assistant: b(
                "requiresReasoningContentOnAssistantMessages",
                is_deepseek,
            ),
            thinking_format: compat_str(model, "thinkingFormat")
                .unwrap_or(thinking_format)
                .to_owned(),
            // 1.6 sends no `strict` key unless a model opts in explicitly.
            strict_tools: b("supportsStrictMode", false),
            supports_long_cache_retention: b(
                "supportsLongCacheRetention",
                !(is_together || is_cf_workers || is_cf_gateway),
            ),
        }
    }
}

/// Tool-call id rewrite for ids produced by other APIs: `call|item` ids (OpenAI Responses)
/// keep the sanitized call part (≤ 40 chars); the `openai` provider caps ids at 40 chars.
fn normalize_tool_call_id(model: &Model, id: &str) -> String {
    if let Some((call, _)) = id.split_once('|') {
        return call
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
    }
    if model.provider == "openai" && id.chars().count() > 40 {
        return id.chars().take(40).collect();
    }
    id.to_owned()
}

/// The JSON request body upstream 1.6 sends for `context` (key order as upstream):
/// `model, messages, stream, [prompt_cache_key, prompt_cache_retention], stream_options,
/// store, max_completion_tokens|max_tokens, tools, <reasoning parameters>`.
pub fn build_request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
) -> Value {
    let compat = Compat::resolve(model);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(model, context, &compat)),
    );
    body.insert("stream".into(), json!(true));

    let retention = tuning.cache_retention;
    let long = retention == CacheRetention::Long && compat.supports_long_cache_retention;
    let cache_key =
        (model.base_url.contains("api.openai.com") && retention != CacheRetention::None) || long;
    if cache_key {
        if let Some(session) = &options.session_id {
            let key: String = session.chars().take(64).collect();
            body.insert("prompt_cache_key".into(), json!(key));
        }
    }
    if long {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if compat.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        body.insert("store".into(), json!(false));
    }
    let max_tokens = effective_max_tokens(model, options);
    let field = if compat.use_max_tokens_field {
        "max_tokens"
    } else {
        "max_completion_tokens"
    };
    body.insert(field.into(), json!(max_tokens));

    if !context.tools.is_empty() {
        let tools = context
            .tools
            .iter()
            .map(|t| {
                let mut function = Map::new();
                function.insert("name".into(), json!(t.name));
                function.insert("description".into(), json!(t.description));
                function.insert("parameters".into(), t.parameters.clone());
                if compat.strict_tools {
                    function.insert("strict".into(), json!(false));
                }
                json!({"type": "function", "function": Value::Object(function)})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if compat_bool(model, "zaiToolStream") == Some(true) {
            body.insert("tool_stream".into(), json!(true));
        }
    } else if has_tool_history(&context.messages) {
        body.insert("tools".into(), json!([]));
    }

    insert_reasoning_params(&mut body, model, options, &compat);
    insert_thinking_budget(&mut body, model, options, tuning, max_tokens);
    Value::Object(body)
}

/// The top-level reasoning budget field of servers that take one (upstream 1.6: compat
/// `thinkingTokenBudgetField`, or `supportsThinkingTokenBudget` for `thinking_token_budget`):
/// the level's budget (settings `thinkingBudgets` over the defaults), capped so that 1024 of
/// the `max_tokens` ceiling stay for the answer; left out when that is 0 or no reasoning was
/// asked for.
fn insert_thinking_budget(
    body: &mut Map<String, Value>,
    model: &Model,
    options: &StreamOptions,
    tuning: &RequestTuning,
    ceiling: u64,
) {
    let field = match compat_str(model, "thinkingTokenBudgetField") {
        Some(f) => f.to_owned(),
        None if compat_bool(model, "supportsThinkingTokenBudget") == Some(true) => {
            "thinking_token_budget".to_owned()
        }
        None => return,
    };
    let Some(level) = requested_reasoning(model, options).filter(|_| model.reasoning) else {
        return;
    };
    let budget = crate::stream::ThinkingBudgets::for_level(tuning.thinking_budgets.as_ref(), level)
        .min(ceiling.saturating_sub(1024));
    if budget > 0 {
        body.insert(field, json!(budget));
    }
}

fn has_tool_history(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::ToolResult(_) => true,
        Message::Assistant(a) => a.tool_calls().next().is_some(),
        _ => false,
    })
}

fn insert_reasoning_params(
    body: &mut Map<String, Value>,
    model: &Model,
    options: &StreamOptions,
    compat: &Compat,
) {
    if !model.reasoning {
        return;
    }
    let level = requested_reasoning(model, options);
    let effort = level.map(|l| mapped_level(model, l).unwrap_or_else(|| l.as_str().to_owned()));
    let off_entry = model
        .thinking_level_map
        .as_ref()
        .and_then(|m| m.get("off"))
        .cloned();
    match compat.thinking_format.as_str() {
        "zai" | "qwen" => {
            body.insert("enable_thinking".into(), json!(effort.is_some()));
        }
        "qwen-chat-template" => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
            );
        }
        "deepseek" => {
            let kind = if effort.is_some() {
                "enabled"
            } else {
                "disabled"
            };
            body.insert("thinking".into(), json!({"type": kind}));
            if let Some(e) = effort {
                body.insert("reasoning_effort".into(), json!(e));
            }
        }
        "openrouter" => match effort {
            Some(e) => {
                body.insert("reasoning".into(), json!({"effort": e}));
            }
            None => match off_entry {
                Some(Value::Null) => {}
                Some(Value::String(s)) => {
                    body.insert("reasoning".into(), json!({"effort": s}));
                }
                _ => {
                    body.insert("reasoning".into(), json!({"effort": "none"}));
                }
            },
        },
        "together" => {
            body.insert("reasoning".into(), json!({"enabled": effort.is_some()}));
            if let (Some(e), true) = (effort, compat.supports_reasoning_effort) {
                body.insert("reasoning_effort".into(), json!(e));
            }
        }
        _ => {
            if !compat.supports_reasoning_effort {
                return;
            }
            match effort {
                Some(e) => {
                    body.insert("reasoning_effort".into(), json!(e));
                }
                None => {
                    if let Some(Value::String(s)) = off_entry {
                        body.insert("reasoning_effort".into(), json!(s));
                    }
                }
            }
        }
    }
}

fn image_url(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
}

fn convert_messages(model: &Model, context: &Context, compat: &Compat) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_call_id(model, id);
    let messages = transform_messages(&context.messages, model, Some(&normalize));
    let mut out = Vec::new();

    if !context.system_prompt.is_empty() {
        let role = if model.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": context.system_prompt}));
    }

    let mut last_role: Option<&'static str> = None;
    let mut i = 0;
    while i < messages.len() {
        let msg = &messages[i];
        if compat.requires_assistant_after_tool_result
            && last_role == Some("toolResult")
            && matches!(msg, Message::User(_))
        {
            out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        match msg {
            Message::User(u) => {
                match &u.content {
                    UserContent::Text(s) => out.push(json!({"role": "user", "content": s})),
                    UserContent::Blocks(blocks) => {
                        let parts: Vec<Value> = blocks
                            .iter()
                            .filter_map(|b| match b {
                                Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
                                Content::Image(img) => Some(image_url(&img.mime_type, &img.data)),
                                _ => None,
                            })
                            .collect();
                        if parts.is_empty() {
                            i += 1;
                            continue;
                        }
                        out.push(json!({"role": "user", "content": parts}));
                    }
                }
                last_role = Some("user");
            }
            Message::Assistant(a) => {
                if let Some(v) = convert_assistant(model, a, compat) {
                    out.push(v);
                }
                last_role = Some("assistant");
            }
            Message::ToolResult(_) => {
                let mut images = Vec::new();
                let mut j = i;
                while let Some(Message::ToolResult(tr)) = messages.get(j) {
                    let text = joined_text(&tr.content, "\n");
                    let has_images = tr.content.iter().any(|c| matches!(c, Content::Image(_)));
                    let content = if text.is_empty() {
                        "(see attached image)".to_owned()
                    } else {
                        text
                    };
                    let mut m = Map::new();
                    m.insert("role".into(), json!("tool"));
                    m.insert("content".into(), json!(content));
                    m.insert("tool_call_id".into(), json!(tr.tool_call_id));
                    if compat.requires_tool_result_name && !tr.tool_name.is_empty() {
                        m.insert("name".into(), json!(tr.tool_name));
                    }
                    out.push(Value::Object(m));
                    if has_images && model.supports_images() {
                        for c in &tr.content {
                            if let Content::Image(img) = c {
                                images.push(image_url(&img.mime_type, &img.data));
                            }
                        }
                    }
                    j += 1;
                }
                i = j;
                if images.is_empty() {
                    last_role = Some("toolResult");
                } else {
                    if compat.requires_assistant_after_tool_result {
                        out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                    }
                    let mut parts = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    parts.extend(images);
                    out.push(json!({"role": "user", "content": parts}));
                    last_role = Some("user");
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn convert_assistant(model: &Model, a: &AssistantMessage, compat: &Compat) -> Option<Value> {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    let empty_content = if compat.requires_assistant_after_tool_result {
        json!("")
    } else {
        Value::Null
    };
    m.insert("content".into(), empty_content);

    let texts: Vec<&str> = a
        .content
        .iter()
        .filter_map(Content::as_text)
        .filter(|t| !t.trim().is_empty())
        .collect();
    let text: String = texts.concat();
    let thinking: Vec<&ThinkingContent> = a
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
            _ => None,
        })
        .collect();

    if !thinking.is_empty() && compat.requires_thinking_as_text {
        let joined = thinking
            .iter()
            .map(|t| t.thinking.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut parts = vec![json!({"type": "text", "text": joined})];
        parts.extend(texts.iter().map(|t| json!({"type": "text", "text": t})));
        m.insert("content".into(), Value::Array(parts));
    } else {
        if !text.is_empty() {
            m.insert("content".into(), json!(text));
        }
        if let Some(first) = thinking.first() {
            let mut field = first.thinking_signature.clone().unwrap_or_default();
            if model.provider == "opencode-go" && field == "reasoning" {
                field = "reasoning_content".into();
            }
            if !field.is_empty() {
                let joined = thinking
                    .iter()
                    .map(|t| t.thinking.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                m.insert(field, json!(joined));
            }
        }
    }

    let calls: Vec<&ToolCall> = a.tool_calls().collect();
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|tc| {
                json!({
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": compact(&tc.arguments)},
                })
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(tool_calls));
        let details: Vec<Value> = calls
            .iter()
            .filter_map(|tc| tc.thought_signature.as_deref())
            .filter_map(|s| serde_json::from_str::<Value>(s).ok())
            .filter(|v| !v.is_null())
            .collect();
        if !details.is_empty() {
            m.insert("reasoning_details".into(), Value::Array(details));
        }
    }
    if compat.requires_reasoning_content_on_assistant && !m.contains_key("reasoning_content") {
        m.insert("reasoning_content".into(), json!(""));
    }

    let has_content = match m.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    };
    if !has_content && !m.contains_key("tool_calls") {
        return None;
    }
    Some(Value::Object(m))
}

/// A number field as `u64` (absent, negative or non-numeric → 0).
fn num(v: Option<&Value>) -> u64 {
    json_u64(v).unwrap_or(0)
}

/// Usage of a chunk (agent-loop.md §11): `cacheRead` = `cached_tokens`, `cacheWrite` =
/// `cache_write_tokens`, `input` = `prompt_tokens` minus both, `output` =
/// `completion_tokens`, `reasoning` = `completion_tokens_details.reasoning_tokens`.
fn parse_usage(raw: &Value, model: &Model) -> Usage {
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
fn map_finish_reason(reason: &str) -> (StopReason, Option<String>) {
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
struct ToolSlot {
    content_index: usize,
    stream_index: Option<i64>,
    partial: String,
}

#[derive(Default)]
struct StreamState {
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
fn append_to_block(
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

async fn run(
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
