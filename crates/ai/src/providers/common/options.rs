//! Request options and small model helpers: API keys, token limits and context estimates,
//! reasoning levels, compat switches, and request headers.

use super::partial_json::compact;
use crate::env_keys::env_api_key;
use crate::stream::StreamOptions;
use crate::types::{Content, Model, StopReason, ThinkingLevel};
use serde_json::Value;

/// A non-negative JSON number as `u64` (fractions truncated); `None` when absent, negative or
/// not a number.
pub(crate) fn json_u64(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        _ => None,
    }
}

/// API key for a request: the non-empty `options.apiKey`, else the provider's environment
/// variable (see [`env_api_key`]).
pub(crate) fn resolve_api_key(model: &Model, options: &StreamOptions) -> Option<String> {
    options
        .api_key
        .clone()
        .filter(|k| !k.is_empty())
        .or_else(|| env_api_key(&model.provider))
}

/// Output-token cap for a request: the caller's value, else `min(model.maxTokens, 32000)`
/// (agent-loop.md §2.3 point 4). A model without `maxTokens` gets 32000.
pub(crate) fn effective_max_tokens(model: &Model, options: &StreamOptions) -> u64 {
    match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens == 0 => 32_000,
        _ => model.max_tokens.min(32_000),
    }
}

/// Output-token cap as upstream 1.6's `clampMaxTokensToContext` computes it for the adapters
/// that follow it (Google, Mistral): the caller's value or the model's `maxTokens` (32000 when
/// unknown), fitted into the context window after an estimate of the input (the last
/// successful assistant message's `totalTokens` plus ≈3.5 characters per token for what
/// follows, images 4800 characters; without such a message, everything including the system
/// prompt) and a margin of max(4096, 15 % of the input), keeping the
/// 15 % margin only while at least 32768 tokens stay free. At least 1.
pub(crate) fn clamp_max_tokens_to_context(
    model: &Model,
    context: &crate::types::Context,
    options: &StreamOptions,
) -> u64 {
    let wanted = match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens == 0 => 32_000,
        _ => model.max_tokens,
    };
    if model.context_window == 0 {
        return wanted.max(1);
    }
    let input = estimate_context_tokens(context) as i64;
    let window = model.context_window as i64;
    let margin = 4096i64.max((input as f64 * 0.15).ceil() as i64);
    let mut room = window - input - margin;
    if room < 32_768 {
        room = 32_768i64.min(window - input - 4096);
    }
    wanted.min(room.max(1) as u64)
}

/// Upstream's `estimateContextTokens`: the last non-error assistant usage's total plus
/// character estimates (3.5 per token, UTF-16 units) of the messages after it.
pub(super) fn estimate_context_tokens(context: &crate::types::Context) -> u64 {
    use crate::types::Message;
    let chars = |c: &[Content]| -> usize {
        c.iter()
            .map(|b| match b {
                Content::Text(t) => t.text.encode_utf16().count(),
                Content::Thinking(t) => t.thinking.encode_utf16().count(),
                Content::ToolCall(tc) => {
                    tc.name.encode_utf16().count() + compact(&tc.arguments).encode_utf16().count()
                }
                Content::Image(_) => 4800,
            })
            .sum()
    };
    let tokens = |n: usize| (n as f64 / 3.5).ceil() as u64;
    let estimate = |m: &Message| -> u64 {
        match m {
            Message::User(u) => match &u.content {
                crate::types::UserContent::Text(s) => tokens(s.encode_utf16().count()),
                crate::types::UserContent::Blocks(b) => tokens(chars(b)),
            },
            Message::ToolResult(tr) => tokens(chars(&tr.content)),
            Message::Assistant(a) => tokens(chars(&a.content)),
            _ => 0,
        }
    };
    let last = context.messages.iter().rposition(|m| {
        matches!(m, Message::Assistant(a)
            if !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted)
                && (a.usage.total_tokens > 0
                    || a.usage.input + a.usage.output + a.usage.cache_read + a.usage.cache_write > 0))
    });
    match last {
        Some(i) => {
            let base = match &context.messages[i] {
                Message::Assistant(a) if a.usage.total_tokens > 0 => a.usage.total_tokens,
                Message::Assistant(a) => {
                    a.usage.input + a.usage.output + a.usage.cache_read + a.usage.cache_write
                }
                _ => 0,
            };
            base + context.messages[i + 1..].iter().map(estimate).sum::<u64>()
        }
        // The system prompt is upstream's first (system) message.
        None => {
            tokens(context.system_prompt.encode_utf16().count())
                + context.messages.iter().map(estimate).sum::<u64>()
        }
    }
}

/// Requested reasoning level after clamping to the model; `None` when thinking is off or the
/// model does not reason.
pub(crate) fn requested_reasoning(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    let level = options.reasoning?;
    if level == ThinkingLevel::Off || !model.reasoning {
        return None;
    }
    match crate::models::clamp_thinking_level(model, level) {
        ThinkingLevel::Off => None,
        l => Some(l),
    }
}

/// A string entry of `model.thinkingLevelMap` (the provider-native value for `level`).
pub(crate) fn mapped_level(model: &Model, level: ThinkingLevel) -> Option<String> {
    model
        .thinking_level_map
        .as_ref()?
        .get(level.as_str())?
        .as_str()
        .map(str::to_owned)
}

/// A boolean `model.compat` flag, if set.
pub(crate) fn compat_bool(model: &Model, key: &str) -> Option<bool> {
    model.compat.as_ref()?.get(key)?.as_bool()
}

/// A string `model.compat` value, if set.
pub(crate) fn compat_str<'a>(model: &'a Model, key: &str) -> Option<&'a str> {
    model.compat.as_ref()?.get(key)?.as_str()
}

/// Headers from `model.headers` (string values only) followed by the per-request headers, so
/// later entries override earlier ones when inserted in order.
pub(crate) fn extra_headers(model: &Model, options: &StreamOptions) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(h) = &model.headers {
        for (k, v) in h {
            if let Some(s) = v.as_str() {
                out.push((k.clone(), s.to_owned()));
            }
        }
    }
    out.extend(options.headers.iter().cloned());
    out
}

/// Insert headers into a request builder's header map, replacing same-named ones; invalid
/// names or values are skipped.
pub(crate) fn apply_headers(
    map: &mut reqwest::header::HeaderMap,
    headers: impl IntoIterator<Item = (String, String)>,
) {
    use reqwest::header::{HeaderName, HeaderValue};
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            map.insert(name, value);
        }
    }
}
