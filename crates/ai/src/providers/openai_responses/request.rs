//! The Responses request: prompt-cache keys, the variants' [`Flavor`] and prepared
//! [`ResponsesRequest`], zstd bodies ([`zstd_body`]), compat switches, token and reasoning
//! fields, the request body ([`build_request_body`]) and its tools.

use super::input::convert_input;
use super::strict::strict_schema;
use super::{MIN_OUTPUT_TOKENS, PROMPT_CACHE_KEY_MAX_CHARS};
use crate::providers::common::{
    compat_bool, compat_str, effective_max_tokens, mapped_level, requested_reasoning,
};
use crate::stream::{CacheRetention, RequestTuning, StreamOptions};
use crate::types::{Context, Model};
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};

/// The session id used for prompt caching: `None` when cache retention is `none`.
pub(crate) fn cache_session<'a>(
    options: &'a StreamOptions,
    tuning: &RequestTuning,
) -> Option<&'a str> {
    if tuning.cache_retention == CacheRetention::None {
        return None;
    }
    options.session_id.as_deref().filter(|s| !s.is_empty())
}

/// `key` cut to [`PROMPT_CACHE_KEY_MAX_CHARS`] characters.
pub(crate) fn clamp_cache_key(key: &str) -> String {
    key.chars().take(PROMPT_CACHE_KEY_MAX_CHARS).collect()
}

/// How the Responses variants differ while reading the stream and wording errors.
#[derive(Debug, Clone)]
pub(crate) enum Flavor {
    /// `openai-responses`: HTTP errors read `<prefix> (<status>): <JSON of body.error>`.
    OpenAi {
        /// `OpenAI API error` for the `openai` provider, else `<provider> API error`.
        prefix: String,
    },
    /// `azure-openai-responses`: HTTP errors read `Azure OpenAI API error (<status>): …`.
    Azure,
    /// `openai-codex-responses`: HTTP errors read the body's `error.message` (or upstream's
    /// usage-limit sentence for 429); `error`/`response.failed` events read
    /// `Codex error: <message>` / the failure message.
    Codex,
}

/// One prepared request of a Responses variant.
#[derive(Debug)]
pub(crate) struct ResponsesRequest {
    /// Full endpoint URL.
    pub(crate) url: String,
    /// Every request header.
    pub(crate) headers: HeaderMap,
    /// The JSON body.
    pub(crate) body: Value,
    /// Error wording and event mapping.
    pub(crate) flavor: Flavor,
    /// Send the body zstd-compressed with `content-encoding: zstd` (the Codex SSE path; see
    /// [`zstd_body`]).
    pub(crate) zstd: bool,
    /// Hooks around the request ([`RequestTuning::hooks`]).
    pub(crate) hooks: Option<crate::stream::RequestHooks>,
}

/// zstd level of compressed request bodies (upstream `REQUEST_COMPRESSION_ZSTD_LEVEL`).
pub const ZSTD_LEVEL: i32 = 3;

/// `json` compressed as upstream compresses Codex SSE request bodies (a zstd frame at level
/// [`ZSTD_LEVEL`], libzstd as in Node's zlib), or `None` if compression fails (upstream then
/// sends the plain JSON).
pub fn zstd_body(json: &[u8]) -> Option<Vec<u8>> {
    zstd::bulk::compress(json, ZSTD_LEVEL).ok()
}

/// Compat switches of the Responses APIs (upstream `getCompat`; defaults as upstream's
/// `openai-responses`, where `supportsStrictMode` defaults to `false`).
#[derive(Debug, Clone)]
pub(crate) struct Compat {
    pub(crate) supports_developer_role: bool,
    pub(crate) supports_strict_mode: bool,
    pub(crate) supports_long_cache_retention: bool,
    pub(crate) prompt_cache_key: bool,
    pub(crate) supports_max_output_tokens: bool,
}

impl Compat {
    /// Resolve from `model.compat`; `strict_default` is the `supportsStrictMode` default of
    /// the variant (`false` for OpenAI, `true` for Azure and Codex).
    pub(crate) fn resolve(model: &Model, strict_default: bool) -> Self {
        let b = |key: &str, default: bool| compat_bool(model, key).unwrap_or(default);
        Compat {
            supports_developer_role: b("supportsDeveloperRole", true),
            supports_strict_mode: b("supportsStrictMode", strict_default),
            supports_long_cache_retention: b("supportsLongCacheRetention", true),
            prompt_cache_key: compat_str(model, "promptCacheKeyMode") != Some("disabled"),
            supports_max_output_tokens: b("supportsMaxOutputTokens", true),
        }
    }
}

/// `max_output_tokens` of a request, at least 16: the caller's cap, else the model's
/// `maxTokens` (upstream 1.6 sends the model's whole `maxTokens` to the Responses APIs, not
/// the 32000 cap of the chat-completions adapter: recordings `tests/data/responses/*.json`),
/// else the default cap for a model without one.
pub(crate) fn max_output_tokens(model: &Model, options: &StreamOptions) -> u64 {
    let n = match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens > 0 => model.max_tokens,
        _ => effective_max_tokens(model, options),
    };
    n.max(MIN_OUTPUT_TOKENS)
}

/// The provider-native reasoning effort for the requested level (`thinkingLevelMap` entry,
/// else the level name); `None` when thinking is off.
pub(crate) fn reasoning_effort(model: &Model, options: &StreamOptions) -> Option<String> {
    requested_reasoning(model, options)
        .map(|l| mapped_level(model, l).unwrap_or_else(|| l.as_str().to_owned()))
}

/// The effort sent for a reasoning model with thinking off: `thinkingLevelMap.off` (a string),
/// `None` when that entry is `null` (send no reasoning field), else `"none"`.
pub(crate) fn off_effort(model: &Model) -> Option<String> {
    match model.thinking_level_map.as_ref().and_then(|m| m.get("off")) {
        Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        _ => Some("none".to_owned()),
    }
}

/// The JSON request body upstream 1.6 sends to `openai-responses` (key order as upstream):
/// `model, input, stream, [prompt_cache_key], [prompt_cache_retention], store,
/// max_output_tokens, [tools], [reasoning, include]`.
pub fn build_request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
) -> Value {
    let compat = Compat::resolve(model, false);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert(
        "input".into(),
        Value::Array(convert_input(
            model,
            context,
            &compat,
            &OPENAI_TOOL_CALL_PROVIDERS,
        )),
    );
    body.insert("stream".into(), json!(true));
    if tuning.cache_retention != CacheRetention::None && compat.prompt_cache_key {
        if let Some(session) = options.session_id.as_deref() {
            body.insert("prompt_cache_key".into(), json!(clamp_cache_key(session)));
        }
    }
    if tuning.cache_retention == CacheRetention::Long && compat.supports_long_cache_retention {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    body.insert("store".into(), json!(false));
    if compat.supports_max_output_tokens {
        body.insert(
            "max_output_tokens".into(),
            json!(max_output_tokens(model, options)),
        );
    }
    if !context.tools.is_empty() {
        body.insert(
            "tools".into(),
            convert_tools(context, compat.supports_strict_mode, json!(false)),
        );
    }
    if model.reasoning {
        match reasoning_effort(model, options) {
            Some(effort) => {
                body.insert(
                    "reasoning".into(),
                    json!({"effort": effort, "summary": "auto"}),
                );
                body.insert("include".into(), json!(["reasoning.encrypted_content"]));
            }
            None => {
                if model.provider != "github-copilot" {
                    if let Some(effort) = off_effort(model) {
                        body.insert("reasoning".into(), json!({"effort": effort}));
                    }
                }
            }
        }
        if model.provider == "xai" {
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
    }
    Value::Object(body)
}

/// Providers whose `call|item` tool-call ids keep their item part on replay to
/// `openai-responses` (upstream `OPENAI_TOOL_CALL_PROVIDERS`).
pub(crate) const OPENAI_TOOL_CALL_PROVIDERS: [&str; 3] = ["openai", "openai-codex", "opencode"];

/// Tool definitions: `{type: "function", name, description, parameters[, strict]}`. When
/// the model supports strict mode, a tool whose schema has a strict form (see
/// [`strict_schema`]) is sent with that schema and `strict: true` (pi's tools ask for strict
/// sampling where possible, upstream `constrainedSampling: {strict: "prefer"}`); otherwise its
/// schema is sent as is with `strict` = `default_strict` (`false`, or `null` for Codex). Without
/// strict support no `strict` key is sent.
pub(crate) fn convert_tools(
    context: &Context,
    supports_strict: bool,
    default_strict: Value,
) -> Value {
    Value::Array(
        context
            .tools
            .iter()
            .map(|t| {
                let strict = supports_strict
                    .then(|| strict_schema(&t.parameters).ok())
                    .flatten();
                let mut m = Map::new();
                m.insert("type".into(), json!("function"));
                m.insert("name".into(), json!(t.name));
                m.insert("description".into(), json!(t.description));
                match strict {
                    Some(schema) => {
                        m.insert("parameters".into(), schema);
                        m.insert("strict".into(), json!(true));
                    }
                    None => {
                        m.insert("parameters".into(), t.parameters.clone());
                        if supports_strict {
                            m.insert("strict".into(), default_strict.clone());
                        }
                    }
                }
                Value::Object(m)
            })
            .collect(),
    )
}
