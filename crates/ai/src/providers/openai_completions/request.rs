//! The Chat Completions request: compat switches resolved from `model.compat` and provider
//! detection, tool-call ids, the request body ([`build_request_body`]) and its thinking and
//! reasoning parameters.

use super::messages::convert_messages;
use crate::providers::common::{
    compat_bool, compat_str, effective_max_tokens, mapped_level, requested_reasoning,
};
use crate::stream::{CacheRetention, RequestTuning, StreamOptions};
use crate::types::{Context, Message, Model};
use serde_json::{json, Map, Value};

/// Compatibility switches resolved from `model.compat` over provider/baseUrl detection
/// (spec messages-and-models.md §7.4).
#[derive(Debug, Clone)]
pub(super) struct Compat {
    supports_store: bool,
    pub(super) supports_developer_role: bool,
    supports_reasoning_effort: bool,
    supports_usage_in_streaming: bool,
    use_max_tokens_field: bool,
    pub(super) requires_tool_result_name: bool,
    pub(super) requires_assistant_after_tool_result: bool,
    pub(super) requires_thinking_as_text: bool,
    pub(super) requires_reasoning_content_on_assistant: bool,
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
pub(super) fn normalize_tool_call_id(model: &Model, id: &str) -> String {
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
pub(super) fn insert_thinking_budget(
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

pub(super) fn has_tool_history(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::ToolResult(_) => true,
        Message::Assistant(a) => a.tool_calls().next().is_some(),
        _ => false,
    })
}

pub(super) fn insert_reasoning_params(
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
