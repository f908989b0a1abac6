//! The ConverseStream request body: model-family checks, thinking and token planning, message
//! and tool conversion ([`build_request_body`]), and the strict-tool-limit fallback's session
//! memory.

use super::env::AwsEnv;
use super::send::ErrorAnswer;
use super::{BLOCK_BINDING_BETA, EMPTY_TEXT, ERROR_TOOL_IMAGE_TEXT, INTERLEAVED_BETA};
use crate::error::ProviderError;
use crate::providers::common;
use crate::providers::strict_schema::{prefers_strict_sampling, strict_schema};
use crate::stream::{CacheRetention, RequestTuning, StreamOptions, ThinkingBudgets};
use crate::transform::transform_messages;
use crate::types::{
    Content, Context, Message, Model, TextContent, ThinkingLevel, ToolResultMessage, UserContent,
};
use serde_json::{json, Map, Value};

// ---------------------------------------------------------------------------------------------
// Model families
// ---------------------------------------------------------------------------------------------

/// Lower-cased id and name, each also with runs of space, `_`, `.`, `:` turned into `-`.
pub(super) fn match_candidates(model: &Model) -> Vec<String> {
    let mut values = vec![model.id.as_str()];
    if !model.name.is_empty() {
        values.push(model.name.as_str());
    }
    let mut out = Vec::new();
    for v in values {
        let lower = v.to_lowercase();
        let mut dashed = String::with_capacity(lower.len());
        let mut in_run = false;
        for c in lower.chars() {
            if matches!(c, ' ' | '\t' | '\n' | '_' | '.' | ':') {
                if !in_run {
                    dashed.push('-');
                }
                in_run = true;
            } else {
                dashed.push(c);
                in_run = false;
            }
        }
        out.push(lower);
        out.push(dashed);
    }
    out
}

pub(super) fn any_candidate(model: &Model, needles: &[&str]) -> bool {
    match_candidates(model)
        .iter()
        .any(|c| needles.iter().any(|n| c.contains(n)))
}

/// An Anthropic Claude model on Bedrock (by id, or by a name mentioning Claude).
pub(super) fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude")
        || id.contains("anthropic/claude")
        || name.contains("anthropic.claude")
        || name.contains("anthropic/claude")
        || name.contains("claude")
}

pub(super) const ADAPTIVE: &[&str] = &[
    "opus-4-6",
    "opus-4-7",
    "opus-4-8",
    "opus-5",
    "sonnet-4-6",
    "sonnet-5",
    "haiku-5",
    "fable-5",
];

pub(super) const NATIVE_XHIGH: &[&str] = &[
    "opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5",
];

pub(super) fn supports_adaptive(model: &Model) -> bool {
    any_candidate(model, ADAPTIVE)
}

/// Prompt caching: Claude 3.5 Haiku, 3.7 Sonnet, 4.x and 5 (or `AWS_BEDROCK_FORCE_CACHE=1`
/// for models whose id and name do not say Claude).
pub(super) fn supports_caching(model: &Model, env: &AwsEnv) -> bool {
    if !any_candidate(model, &["claude"]) {
        return env.get("AWS_BEDROCK_FORCE_CACHE") == Some("1");
    }
    any_candidate(
        model,
        &[
            "fable-5",
            "opus-5",
            "sonnet-5",
            "haiku-5",
            "-4-",
            "claude-3-7-sonnet",
            "claude-3-5-haiku",
        ],
    )
}

pub(super) fn is_gov_cloud(model: &Model, env: &AwsEnv) -> bool {
    if env
        .configured_region()
        .is_some_and(|r| r.to_lowercase().starts_with("us-gov-"))
    {
        return true;
    }
    let id = model.id.to_lowercase();
    id.starts_with("us-gov.") || id.starts_with("arn:aws-us-gov:")
}

// ---------------------------------------------------------------------------------------------
// Request body
// ---------------------------------------------------------------------------------------------

/// Budget thinking's default budget per level, in tokens.
pub(super) fn default_budget(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        _ => 16384,
    }
}

pub(super) fn configured_budget(level: ThinkingLevel, budgets: Option<&ThinkingBudgets>) -> u64 {
    let b = budgets.copied().unwrap_or_default();
    let custom = match level {
        ThinkingLevel::Minimal => b.minimal,
        ThinkingLevel::Low => b.low,
        ThinkingLevel::Medium => b.medium,
        _ => b.high,
    };
    custom.unwrap_or_else(|| default_budget(level))
}

/// `(maxTokens, budget)` for the request: the context-clamped cap, raised by the thinking
/// budget for budget-based Claude thinking (bounded by the model's `maxTokens`, clamped to
/// the context again, keeping 1024 tokens for the answer).
pub(super) fn plan_tokens(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    level: Option<ThinkingLevel>,
) -> (u64, Option<u64>) {
    let base = common::clamp_max_tokens_to_context(model, context, options);
    let Some(level) = level.filter(|_| is_claude(model) && !supports_adaptive(model)) else {
        return (base, None);
    };
    let mut budget = configured_budget(level, tuning.thinking_budgets.as_ref());
    let model_max = if model.max_tokens == 0 {
        u64::MAX
    } else {
        model.max_tokens
    };
    let adjusted = base.saturating_add(budget).min(model_max);
    if adjusted <= budget {
        budget = budget.min(adjusted.saturating_sub(1024));
    }
    let refit = StreamOptions {
        max_tokens: Some(adjusted),
        ..options.clone()
    };
    let max_tokens = common::clamp_max_tokens_to_context(model, context, &refit);
    (
        max_tokens,
        Some(budget.min(max_tokens.saturating_sub(1024))),
    )
}

pub(super) fn adaptive_effort(model: &Model, level: ThinkingLevel) -> String {
    if level == ThinkingLevel::Xhigh && any_candidate(model, NATIVE_XHIGH) {
        return "xhigh".into();
    }
    if let Some(m) = common::mapped_level(model, level) {
        return m;
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .into()
}

/// `additionalModelRequestFields` for thinking (see upstream's per-family rules): Claude
/// adaptive (`thinking.type: adaptive`, `output_config.effort`, block binding on the newest
/// models) or budget (`thinking.type: enabled`, `budget_tokens`, the interleaved-thinking
/// beta); OpenAI gpt-oss `reasoning_effort`; other GPT `reasoning.effort`; `None` otherwise.
pub(super) fn additional_fields(
    model: &Model,
    level: Option<ThinkingLevel>,
    budget: Option<u64>,
    env: &AwsEnv,
) -> Option<Value> {
    let level = level?;
    if is_claude(model) {
        let gov = is_gov_cloud(model, env);
        let mut thinking = Map::new();
        let mut out = Map::new();
        if supports_adaptive(model) {
            let binding = !gov && any_candidate(model, NATIVE_XHIGH);
            thinking.insert("type".into(), json!("adaptive"));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            if binding {
                thinking.insert(
                    "block_binding".into(),
                    json!({"prefix_mismatch_behavior": "drop_block"}),
                );
            }
            out.insert("thinking".into(), Value::Object(thinking));
            out.insert(
                "output_config".into(),
                json!({"effort": adaptive_effort(model, level)}),
            );
            if binding {
                out.insert("anthropic_beta".into(), json!([BLOCK_BINDING_BETA]));
            }
        } else {
            thinking.insert("type".into(), json!("enabled"));
            thinking.insert(
                "budget_tokens".into(),
                json!(budget.unwrap_or_else(|| default_budget(level))),
            );
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            out.insert("thinking".into(), Value::Object(thinking));
            out.insert("anthropic_beta".into(), json!([INTERLEAVED_BETA]));
        }
        return Some(Value::Object(out));
    }
    if any_candidate(model, &["gpt-oss"]) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return Some(json!({ "reasoning_effort": effort }));
    }
    if any_candidate(model, &["gpt-"]) {
        let effort = common::mapped_level(model, level).unwrap_or_else(|| {
            match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                ThinkingLevel::Xhigh => "xhigh",
                ThinkingLevel::Max => "max",
                _ => "high",
            }
            .to_owned()
        });
        return Some(json!({"reasoning": {"effort": effort}}));
    }
    None
}

/// A Bedrock tool-use id: characters outside `[A-Za-z0-9_-]` become `_`, at most 64.
pub(super) fn normalize_tool_id(id: &str) -> String {
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

pub(super) fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({ "text": text }))
}

pub(super) fn image_block(mime: &str, data: &str) -> Value {
    let format = match mime {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "png",
    };
    json!({"image": {"format": format, "source": {"bytes": data}}})
}

/// Drop empty-named keys from a tool call's arguments, at any depth (Bedrock rejects them).
pub(super) fn sanitize_document(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(sanitize_document).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.clone(), sanitize_document(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

pub(super) fn tool_result_content(content: &[Content]) -> Vec<Value> {
    let mut out: Vec<Value> = content
        .iter()
        .filter_map(|c| match c {
            Content::Image(i) => Some(image_block(&i.mime_type, &i.data)),
            Content::Text(t) => text_block(&t.text),
            _ => None,
        })
        .collect();
    if out.is_empty() {
        out.push(json!({ "text": EMPTY_TEXT }));
    }
    out
}

/// Claude: an error tool result's images replaced by one placeholder text per run, and the
/// caption + images to send after all tool results of the turn.
pub(super) fn split_error_images(tr: &ToolResultMessage) -> Option<(Vec<Content>, Vec<Value>)> {
    if !tr.is_error || !tr.content.iter().any(|c| matches!(c, Content::Image(_))) {
        return None;
    }
    let mut content = Vec::new();
    let mut after = vec![json!({"text": format!(
        "Images from the error result of tool call {} ({}):",
        tr.tool_call_id, tr.tool_name
    )})];
    let mut previous_placeholder = false;
    for c in &tr.content {
        if let Content::Image(i) = c {
            if !previous_placeholder {
                content.push(Content::Text(TextContent {
                    text: ERROR_TOOL_IMAGE_TEXT.to_owned(),
                    text_signature: None,
                    extra: Default::default(),
                }));
            }
            previous_placeholder = true;
            after.push(image_block(&i.mime_type, &i.data));
            continue;
        }
        previous_placeholder = matches!(c, Content::Text(t) if t.text == ERROR_TOOL_IMAGE_TEXT);
        content.push(c.clone());
    }
    Some((content, after))
}

pub(super) fn convert_messages(
    messages: &[Message],
    model: &Model,
    cache: Option<Value>,
) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_id(id);
    let messages = transform_messages(messages, model, Some(&normalize));
    let claude = is_claude(model);
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::User(u) => {
                let mut content = Vec::new();
                match &u.content {
                    UserContent::Text(s) => {
                        content.push(text_block(s).unwrap_or_else(|| json!({"text": EMPTY_TEXT})))
                    }
                    UserContent::Blocks(blocks) => {
                        for b in blocks {
                            match b {
                                Content::Text(t) => content.extend(text_block(&t.text)),
                                Content::Image(img) => {
                                    content.push(image_block(&img.mime_type, &img.data))
                                }
                                _ => {}
                            }
                        }
                        if content.is_empty() {
                            content.push(json!({ "text": EMPTY_TEXT }));
                        }
                    }
                }
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                let mut blocks = Vec::new();
                for c in &a.content {
                    match c {
                        Content::Text(t) => blocks.extend(text_block(&t.text)),
                        Content::ToolCall(tc) => blocks.push(json!({"toolUse": {
                            "toolUseId": tc.id, "name": tc.name,
                            "input": sanitize_document(&tc.arguments)}})),
                        Content::Thinking(t) => {
                            let signature = t.thinking_signature.as_deref().unwrap_or("");
                            if t.redacted == Some(true) {
                                if !signature.is_empty() && is_base64(signature) {
                                    blocks.push(json!({"reasoningContent": {
                                        "redactedContent": signature}}));
                                }
                                continue;
                            }
                            if t.thinking.trim().is_empty() {
                                continue;
                            }
                            if !claude {
                                blocks.push(json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking}}}));
                            } else if signature.trim().is_empty() {
                                blocks.push(json!({ "text": t.thinking }));
                            } else {
                                blocks.push(json!({"reasoningContent": {"reasoningText": {
                                    "text": t.thinking, "signature": signature}}}));
                            }
                        }
                        Content::Image(_) => {}
                    }
                }
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::ToolResult(_) => {
                let mut results = Vec::new();
                let mut after = Vec::new();
                while let Some(Message::ToolResult(tr)) = messages.get(i) {
                    let split = if claude { split_error_images(tr) } else { None };
                    let content = match &split {
                        Some((content, _)) => tool_result_content(content),
                        None => tool_result_content(&tr.content),
                    };
                    results.push(json!({"toolResult": {
                        "toolUseId": tr.tool_call_id,
                        "content": content,
                        "status": if tr.is_error { "error" } else { "success" }}}));
                    if let Some((_, images)) = split {
                        after.extend(images);
                    }
                    i += 1;
                }
                results.extend(after);
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(point) = cache {
        if let Some(last) = out.last_mut() {
            if last.get("role").and_then(Value::as_str) == Some("user") {
                if let Some(content) = last.get_mut("content").and_then(Value::as_array_mut) {
                    content.push(point);
                }
            }
        }
    }
    out
}

pub(super) fn is_base64(s: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}

/// The JSON body upstream 1.6 sends for this conversation (the model id goes in the path):
/// `messages`, `system` (with a `cachePoint` when caching), `inferenceConfig.maxTokens`,
/// `toolConfig.tools` (strict where the model's `compat.supportsStrictMode` and the tool allow)
/// and `additionalModelRequestFields` for thinking.
pub fn build_request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    env: &AwsEnv,
) -> Value {
    let retention = env.cache_retention(tuning.cache_retention);
    let cache_point = (retention != CacheRetention::None && supports_caching(model, env)).then(
        || match retention {
            CacheRetention::Long => json!({"cachePoint": {"type": "default", "ttl": "1h"}}),
            _ => json!({"cachePoint": {"type": "default"}}),
        },
    );
    let level = common::requested_reasoning(model, options);
    let (max_tokens, budget) = plan_tokens(model, context, options, tuning, level);
    let mut body = Map::new();
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(
            &context.messages,
            model,
            cache_point.clone(),
        )),
    );
    if !context.system_prompt.is_empty() {
        let mut system = vec![json!({"text": context.system_prompt})];
        system.extend(cache_point);
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("inferenceConfig".into(), json!({ "maxTokens": max_tokens }));
    if let Some((config, _)) = tool_config(model, context, strict_tools_disabled(options)) {
        body.insert("toolConfig".into(), config);
    }
    if let Some(fields) = additional_fields(model, level, budget, env) {
        body.insert("additionalModelRequestFields".into(), fields);
    }
    Value::Object(body)
}

/// `toolConfig` for the context's tools (`None` without tools), and whether any tool was sent
/// strict because it prefers strict sampling (upstream's `hasPreferredStrictTools`). Tools are
/// strict where the model's `compat.supportsStrictMode` allows it and the tool prefers it,
/// unless `disable_strict`.
pub(super) fn tool_config(
    model: &Model,
    context: &Context,
    disable_strict: bool,
) -> Option<(Value, bool)> {
    if context.tools.is_empty() {
        return None;
    }
    let strict_ok =
        !disable_strict && common::compat_bool(model, "supportsStrictMode").unwrap_or(false);
    let mut any_strict = false;
    let tools: Vec<Value> = context
        .tools
        .iter()
        .map(|t| {
            let strict = (strict_ok && prefers_strict_sampling(t))
                .then(|| strict_schema(&t.parameters))
                .flatten();
            let mut spec = Map::new();
            spec.insert("name".into(), json!(t.name));
            spec.insert("description".into(), json!(t.description));
            let is_strict = strict.is_some();
            any_strict |= is_strict;
            let schema = strict.unwrap_or_else(|| t.parameters.clone());
            spec.insert("inputSchema".into(), json!({ "json": schema }));
            if is_strict {
                spec.insert("strict".into(), json!(true));
            }
            json!({ "toolSpec": spec })
        })
        .collect();
    Some((json!({ "tools": tools }), any_strict))
}

// ---------------------------------------------------------------------------------------------
// Strict-tool-limit fallback
// ---------------------------------------------------------------------------------------------

/// What Claude answers (on Bedrock as on the Anthropic API) when a request's strict tools
/// exceed its limits (upstream 1.6 `strict-tool-limits.js`: about 20 strict tools, 16 optional
/// or union-typed parameters across them).
pub(super) const STRICT_TOOL_LIMIT_MESSAGES: &[&str] = &[
    "The compiled grammar is too large",
    "Too many strict tools (",
    "Schemas contains too many parameters with union types (",
];

/// Sessions kept in [`sessions_over_strict_limits`] at most (the oldest is dropped).
pub(super) const MAX_SESSIONS_OVER_STRICT_LIMITS: usize = 10_000;

/// Session ids whose strict tools were rejected for exceeding the limits, oldest first: their
/// later requests send every tool non-strict from the start (the tool set rarely changes, and
/// switching back would only repeat the rejection and rewrite the cached prompt prefix).
pub(super) fn sessions_over_strict_limits(
) -> &'static std::sync::Mutex<std::collections::VecDeque<String>> {
    static SET: std::sync::OnceLock<std::sync::Mutex<std::collections::VecDeque<String>>> =
        std::sync::OnceLock::new();
    SET.get_or_init(Default::default)
}

pub(super) fn strict_tools_disabled(options: &StreamOptions) -> bool {
    let Some(id) = options.session_id.as_deref() else {
        return false;
    };
    sessions_over_strict_limits()
        .lock()
        .map(|set| set.iter().any(|s| s == id))
        .unwrap_or(false)
}

pub(super) fn mark_strict_limits_exceeded(options: &StreamOptions) {
    let Some(id) = options.session_id.as_deref() else {
        return;
    };
    if let Ok(mut set) = sessions_over_strict_limits().lock() {
        if !set.iter().any(|s| s == id) {
            set.push_back(id.to_owned());
            if set.len() > MAX_SESSIONS_OVER_STRICT_LIMITS {
                set.pop_front();
            }
        }
    }
}

/// Whether a failed request is Bedrock rejecting strict tools for their number or size: a
/// `ValidationException` whose message (else whole body) holds one of
/// [`STRICT_TOOL_LIMIT_MESSAGES`].
pub(super) fn is_strict_tool_limit_error(
    error: &ProviderError,
    answer: Option<&ErrorAnswer>,
) -> bool {
    let (ProviderError::Http { body, .. }, Some(answer)) = (error, answer) else {
        return false;
    };
    if answer.name.as_deref() != Some("ValidationException") {
        return false;
    }
    let message = answer.message.as_deref().unwrap_or(body);
    STRICT_TOOL_LIMIT_MESSAGES
        .iter()
        .any(|m| message.contains(m))
}
