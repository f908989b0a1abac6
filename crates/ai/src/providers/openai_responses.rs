//! `openai-responses`: streaming `POST {baseUrl}/responses` (the OpenAI Responses API; the
//! built-in `openai` provider), plus the request conversion and stream reading that the
//! Azure ([`super::azure_openai_responses`]) and ChatGPT/Codex
//! ([`super::openai_codex_responses`]) variants share.
//!
//! Source: upstream 1.6 `@earendil-works/pi-ai` `dist/api/openai-responses.js` and
//! `openai-responses-shared.js`, checked against what upstream 1.6 sent to the project's fake
//! server (recordings in `crates/coding-agent/tests/data/responses/`).
//!
//! Wire facts kept here:
//! * Input items: the system prompt as a `developer` (reasoning model, unless compat
//!   `supportsDeveloperRole: false`) or `system` message; user text/images as `input_text` /
//!   `input_image` (`detail: "auto"`, a `data:` URL); assistant thinking replayed as the stored
//!   reasoning item (the block's `thinkingSignature` is the item's JSON, including
//!   `encrypted_content`); assistant text as a `message` item whose id comes from the text
//!   signature `{"v":1,"id":…}` (else `msg_pi_<n>`); tool calls as `function_call` items with
//!   the call id and item id taken from the pi tool-call id `"<call_id>|<item_id>"`; tool
//!   results as `function_call_output` (text, or `input_text`/`input_image` parts for models
//!   that take images).
//! * Request fields: `store: false`, `max_output_tokens` (at least 16), `prompt_cache_key` = the
//!   session id (≤ 64 chars) unless cache retention is `none`, `prompt_cache_retention: "24h"`
//!   for long retention, `reasoning: {effort, summary: "auto"}` with
//!   `include: ["reasoning.encrypted_content"]` when thinking, `reasoning: {effort: "none"}`
//!   (or the model's `thinkingLevelMap.off`) for a reasoning model with thinking off.
//! * Stream: blocks open on `response.output_item.added` and close (their `*_end` event) on
//!   `response.output_item.done`; `response.completed`/`response.incomplete` carry usage and
//!   status (`incomplete` + `max_output_tokens` = `length`); `error` and `response.failed`
//!   events end the stream with an error.

use super::common::{
    apply_headers, compact, compat_bool, compat_str, effective_max_tokens, event_stream,
    extra_headers, json_u64, mapped_level, next_sse_event, parse_streaming_json, push_block,
    requested_reasoning, resolve_api_key, Emitter, StreamEnd,
};
use super::{common, HttpOptions};
use crate::error::ProviderError;
use crate::stream::{
    AssistantMessageEvent, AssistantStream, CacheRetention, Provider, RequestTuning, StreamOptions,
};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Message, Model, StopReason, TextContent, ThinkingContent,
    ToolCall, UserContent,
};
use eventsource_stream::Eventsource;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::Instant;

/// The `api` value of this adapter.
pub const API: &str = "openai-responses";

/// The smallest `max_output_tokens` the Responses API accepts (upstream sends at least 16).
const MIN_OUTPUT_TOKENS: u64 = 16;

/// Longest `prompt_cache_key` OpenAI accepts, in characters.
const PROMPT_CACHE_KEY_MAX_CHARS: usize = 64;

/// The `openai-responses` adapter: one HTTP request per [`Provider::stream`] over the HTTP
/// client it was built with (`Default`: the process-wide client with the default
/// [`HttpOptions`]).
#[derive(Debug, Clone)]
pub struct OpenAiResponses {
    client: common::LazyClient,
}

impl Default for OpenAiResponses {
    fn default() -> Self {
        OpenAiResponses {
            client: common::LazyClient::Default,
        }
    }
}

impl OpenAiResponses {
    /// The adapter over a new HTTP client with `http`'s timeouts and retries.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        OpenAiResponses { client }
    }
}

impl Provider for OpenAiResponses {
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
        let url = format!("{}/responses", model.base_url.trim_end_matches('/'));
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = resolve_api_key(&model, &options) {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {key}")) {
                headers.insert(AUTHORIZATION, v);
            }
        }
        let mut extra = Vec::new();
        if let Some(session) = cache_session(&options, &tuning) {
            if compat_str(&model, "sessionAffinityFormat").unwrap_or_else(|| {
                if model.provider == "openrouter" || model.base_url.contains("openrouter.ai") {
                    "openrouter"
                } else {
                    "openai"
                }
            }) == "openrouter"
            {
                extra.push(("x-session-id".to_owned(), session.to_owned()));
            } else {
                extra.push(("session-id".to_owned(), session.to_owned()));
                extra.push(("x-client-request-id".to_owned(), session.to_owned()));
            }
        }
        extra.extend(extra_headers(&model, &options));
        apply_headers(&mut headers, extra);
        let prefix = if model.provider == "openai" {
            "OpenAI API error".to_owned()
        } else {
            format!("{} API error", model.provider)
        };
        let request = ResponsesRequest {
            url,
            headers,
            body,
            flavor: Flavor::OpenAi { prefix },
            zstd: false,
            hooks: tuning.hooks,
        };
        let client = self.client.clone();
        event_stream(move |em| run(em, client, model, request, options))
    }
}

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

/// Why a JSON schema has no strict form (upstream `UnsupportedStrictJsonSchemaError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnsupportedStrictSchema(&'static str);

/// Keywords OpenAI strict mode rejects.
const UNSUPPORTED_STRICT_KEYS: [&str; 16] = [
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
];

/// The strict form of a tool's JSON schema, as OpenAI strict mode wants it (upstream
/// `makeStrictJsonSchema`): every object lists all its properties in `required` and gets
/// `additionalProperties: false`, and a property that was optional becomes
/// `{anyOf: [<schema>, {type: "null"}]}` unless it already allows `null`. Errors for schemas
/// strict mode cannot express (the keywords of `UNSUPPORTED_STRICT_KEYS`, untyped nodes,
/// object/array unions, tuples, open `additionalProperties`, a root that is not an object).
pub fn strict_schema(schema: &Value) -> Result<Value, UnsupportedStrictSchema> {
    let mut s = schema.clone();
    if !s.is_object() || s.get("type").and_then(Value::as_str) != Some("object") {
        return Err(UnsupportedStrictSchema("root schema must have type object"));
    }
    make_strict(&mut s)?;
    Ok(s)
}

fn is_structured(v: &Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    types.contains(&"object")
        || types.contains(&"array")
        || m.contains_key("properties")
        || m.contains_key("items")
}

fn allows_null(v: &Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    match m.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(a)) if a.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    if m.get("const") == Some(&Value::Null)
        || m.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.contains(&Value::Null))
    {
        return true;
    }
    m.get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(allows_null))
}

fn make_strict(node: &mut Value) -> Result<(), UnsupportedStrictSchema> {
    let Some(m) = node.as_object_mut() else {
        return Err(UnsupportedStrictSchema("boolean schemas are unsupported"));
    };
    if UNSUPPORTED_STRICT_KEYS.iter().any(|k| m.contains_key(*k)) {
        return Err(UnsupportedStrictSchema("unsupported keyword"));
    }
    if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("enum") {
        return Err(UnsupportedStrictSchema(
            "schemas without a type are unsupported",
        ));
    }
    if let Some(any) = m.get_mut("anyOf") {
        let Some(variants) = any.as_array_mut().filter(|a| !a.is_empty()) else {
            return Err(UnsupportedStrictSchema(
                "anyOf must contain at least one schema",
            ));
        };
        for v in variants {
            if is_structured(v) {
                return Err(UnsupportedStrictSchema(
                    "object and array unions are unsupported",
                ));
            }
            make_strict(v)?;
        }
    }
    if let Some(items) = m.get_mut("items") {
        if items.is_array() {
            return Err(UnsupportedStrictSchema("tuple schemas are unsupported"));
        }
        make_strict(items)?;
    }
    let is_object = m.get("type").and_then(Value::as_str) == Some("object");
    if m.contains_key("properties") && !is_object {
        return Err(UnsupportedStrictSchema("properties require type object"));
    }
    if !is_object {
        return Ok(());
    }
    if m.get("additionalProperties")
        .is_some_and(|a| *a != Value::Bool(false))
    {
        return Err(UnsupportedStrictSchema(
            "schema-valued or true additionalProperties is unsupported",
        ));
    }
    let required: Vec<String> = match m.get("required") {
        None => Vec::new(),
        Some(Value::Array(r)) => r
            .iter()
            .map(|k| k.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(UnsupportedStrictSchema(
                "object required must be a string array",
            ))?,
        Some(_) => {
            return Err(UnsupportedStrictSchema(
                "object required must be a string array",
            ))
        }
    };
    let mut names = Vec::new();
    match m.get_mut("properties") {
        None => {}
        Some(Value::Object(props)) => {
            names = props.keys().cloned().collect();
            if required.iter().any(|k| !names.contains(k)) {
                return Err(UnsupportedStrictSchema(
                    "required contains an unknown property",
                ));
            }
            for (key, prop) in props.iter_mut() {
                make_strict(prop)?;
                if !required.contains(key) && !allows_null(prop) {
                    let inner = prop.take();
                    *prop = json!({"anyOf": [inner, {"type": "null"}]});
                }
            }
        }
        Some(_) => {
            return Err(UnsupportedStrictSchema(
                "object properties must be a schema map",
            ))
        }
    }
    m.insert("required".into(), json!(names));
    m.insert("additionalProperties".into(), json!(false));
    Ok(())
}

/// `part` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64 characters
/// and without trailing `_` (upstream `normalizeIdPart`).
fn normalize_id_part(part: &str) -> String {
    let s: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    s.trim_end_matches('_').to_owned()
}

/// Tool-call id rewrite for calls made by another model: providers outside `allowed` or ids
/// without `|` get [`normalize_id_part`]; `call|item` ids keep both parts normalized, the
/// item part starting with `fc_`.
fn normalize_tool_call_id(model: &Model, allowed: &[&str], id: &str) -> String {
    if !allowed.contains(&model.provider.as_str()) {
        return normalize_id_part(id);
    }
    let Some((call, item)) = id.split_once('|') else {
        return normalize_id_part(id);
    };
    let item = item.split('|').next().unwrap_or(item);
    let mut item_id = normalize_id_part(item);
    if !item_id.starts_with("fc_") {
        item_id = normalize_id_part(&format!("fc_{item_id}"));
    }
    format!("{}|{item_id}", normalize_id_part(call))
}

fn input_image(mime: &str, data: &str) -> Value {
    json!({"type": "input_image", "detail": "auto", "image_url": format!("data:{mime};base64,{data}")})
}

/// The message id of a replayed text block: the id in its signature (`{"v":1,"id":…,
/// "phase"?}` or a legacy plain id), else `fallback`; with the phase when one was stored.
fn text_item_id(t: &TextContent, fallback: String) -> (String, Option<String>) {
    let Some(sig) = t.text_signature.as_deref().filter(|s| !s.is_empty()) else {
        return (fallback, None);
    };
    let mut id = sig.to_owned();
    let mut phase = None;
    if sig.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(sig) {
            if v.get("v").and_then(Value::as_i64) == Some(1) {
                if let Some(i) = v.get("id").and_then(Value::as_str) {
                    id = i.to_owned();
                    phase = v
                        .get("phase")
                        .and_then(Value::as_str)
                        .filter(|p| *p == "commentary" || *p == "final_answer")
                        .map(str::to_owned);
                }
            }
        }
    }
    if id.is_empty() {
        return (fallback, None);
    }
    if id.chars().count() > 64 {
        // Upstream hashes over-long ids; a stable cut keeps them within the limit.
        id = format!("msg_{}", &id.chars().rev().take(59).collect::<String>());
    }
    (id, phase)
}

/// Tool-result output: the joined text (or a placeholder), or `input_text`/`input_image`
/// parts when the result has images and the model takes them.
fn tool_result_output(model: &Model, content: &[Content]) -> Value {
    let text = common::joined_text(content, "\n");
    let images: Vec<_> = content
        .iter()
        .filter_map(|c| match c {
            Content::Image(i) => Some(i),
            _ => None,
        })
        .collect();
    let has_text = !text.trim().is_empty();
    if images.is_empty() || !model.supports_images() {
        let s = if has_text {
            text
        } else if !images.is_empty() {
            "(see attached image)".to_owned()
        } else {
            "(no tool output)".to_owned()
        };
        return json!(s);
    }
    let mut parts = Vec::new();
    if has_text {
        parts.push(json!({"type": "input_text", "text": text}));
    }
    for img in images {
        parts.push(input_image(&img.mime_type, &img.data));
    }
    Value::Array(parts)
}

/// The `input` items for `context` (see the module docs). `allowed` lists the providers whose
/// `call|item` ids keep their item part when replayed from another model.
pub(crate) fn convert_input(
    model: &Model,
    context: &Context,
    compat: &Compat,
    allowed: &[&str],
) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_call_id(model, allowed, id);
    let messages = transform_messages(&context.messages, model, Some(&normalize));
    let mut out = Vec::new();
    let role = if model.reasoning && compat.supports_developer_role {
        "developer"
    } else {
        "system"
    };
    if !context.system_prompt.is_empty() {
        out.push(json!({"role": role, "content": context.system_prompt}));
    }
    let mut msg_index = 0usize;
    for msg in &messages {
        match msg {
            Message::System(_) => {}
            Message::User(u) => {
                let content: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"type": "input_text", "text": s})],
                    UserContent::Blocks(blocks) => blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
                            Content::Image(i) => Some(input_image(&i.mime_type, &i.data)),
                            _ => None,
                        })
                        .collect(),
                };
                if content.is_empty() {
                    continue;
                }
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                let items = convert_assistant(model, a, msg_index);
                if items.is_empty() {
                    continue;
                }
                out.extend(items);
            }
            Message::ToolResult(tr) => {
                let call_id = tr.tool_call_id.split('|').next().unwrap_or("");
                out.push(json!({"type": "function_call_output", "call_id": call_id,
                                "output": tool_result_output(model, &tr.content)}));
            }
            _ => {}
        }
        msg_index += 1;
    }
    out
}

fn convert_assistant(model: &Model, a: &AssistantMessage, msg_index: usize) -> Vec<Value> {
    let same_api = a.provider == model.provider && a.api == model.api;
    let different_model = same_api && a.model != model.id;
    let mut out = Vec::new();
    let mut text_index = 0usize;
    for block in &a.content {
        match block {
            Content::Thinking(t) => {
                if let Some(item) = t
                    .thinking_signature
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .filter(Value::is_object)
                {
                    out.push(item);
                }
            }
            Content::Text(t) => {
                let fallback = if text_index == 0 {
                    format!("msg_pi_{msg_index}")
                } else {
                    format!("msg_pi_{msg_index}_{text_index}")
                };
                text_index += 1;
                let (id, phase) = text_item_id(t, fallback);
                let mut item = Map::new();
                item.insert("type".into(), json!("message"));
                item.insert("role".into(), json!("assistant"));
                item.insert(
                    "content".into(),
                    json!([{"type": "output_text", "text": t.text, "annotations": []}]),
                );
                item.insert("status".into(), json!("completed"));
                item.insert("id".into(), json!(id));
                if let Some(p) = phase {
                    item.insert("phase".into(), json!(p));
                }
                out.push(Value::Object(item));
            }
            Content::ToolCall(tc) => {
                let mut parts = tc.id.split('|');
                let call_id = parts.next().unwrap_or("");
                let item_id = parts
                    .next()
                    .filter(|i| !different_model && i.starts_with("fc_"));
                let mut item = Map::new();
                item.insert("type".into(), json!("function_call"));
                if let Some(i) = item_id {
                    item.insert("id".into(), json!(i));
                }
                item.insert("call_id".into(), json!(call_id));
                item.insert("name".into(), json!(tc.name));
                item.insert("arguments".into(), json!(compact(&tc.arguments)));
                out.push(Value::Object(item));
            }
            Content::Image(_) => {}
        }
    }
    out
}

/// What an output item streams into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    Thinking,
    Text,
    ToolCall,
}

#[derive(Debug)]
struct Slot {
    kind: SlotKind,
    content_index: usize,
    /// Raw argument text of a function call.
    arguments: String,
}

#[derive(Default)]
struct StreamState {
    slots: HashMap<i64, Slot>,
    /// Content indices of tool calls whose `output_item.done` has not arrived.
    unfinished: Vec<usize>,
    /// Content index of each reasoning item id (for the encrypted-content backfill).
    reasoning_by_id: HashMap<String, usize>,
    terminal: bool,
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

impl StreamState {
    fn slot(&self, event: &Value, kind: SlotKind) -> Option<usize> {
        let oi = event.get("output_index").and_then(Value::as_i64)?;
        self.slots
            .get(&oi)
            .filter(|s| s.kind == kind)
            .map(|s| s.content_index)
    }

    fn create_slot(
        &mut self,
        oi: i64,
        item: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
    ) -> bool {
        let (kind, block) = match str_of(item, "type") {
            Some("reasoning") => (
                SlotKind::Thinking,
                Content::Thinking(ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: None,
                    extra: Default::default(),
                }),
            ),
            Some("message") => {
                if str_of(item, "phase") == Some("final_answer") {
                    out.stop_reason = StopReason::Stop;
                }
                (SlotKind::Text, Content::text(""))
            }
            Some("function_call") => {
                let id = format!(
                    "{}|{}",
                    str_of(item, "call_id").unwrap_or(""),
                    str_of(item, "id").unwrap_or("")
                );
                let args = str_of(item, "arguments").unwrap_or("");
                (
                    SlotKind::ToolCall,
                    Content::ToolCall(ToolCall {
                        id,
                        name: str_of(item, "name").unwrap_or("").to_owned(),
                        arguments: parse_streaming_json(args),
                        thought_signature: None,
                        extra: Default::default(),
                    }),
                )
            }
            _ => return false,
        };
        let content_index = push_block(out, em, block);
        if kind == SlotKind::ToolCall {
            self.unfinished.push(content_index);
        }
        let arguments = str_of(item, "arguments").unwrap_or("").to_owned();
        self.slots.insert(
            oi,
            Slot {
                kind,
                content_index,
                arguments,
            },
        );
        true
    }

    fn append_thinking(&self, out: &mut AssistantMessage, em: &Emitter, ci: usize, delta: &str) {
        if let Some(Content::Thinking(t)) = out.content.get_mut(ci) {
            t.thinking.push_str(delta);
            em.emit(AssistantMessageEvent::ThinkingDelta {
                content_index: ci,
                delta: delta.to_owned(),
            });
        }
    }

    fn append_text(&self, out: &mut AssistantMessage, em: &Emitter, ci: usize, delta: &str) {
        if let Some(Content::Text(t)) = out.content.get_mut(ci) {
            t.text.push_str(delta);
            em.emit(AssistantMessageEvent::TextDelta {
                content_index: ci,
                delta: delta.to_owned(),
            });
        }
    }

    /// Apply one stream event. `Err` ends the stream with that error text.
    fn handle(
        &mut self,
        event: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
        flavor: &Flavor,
    ) -> Result<(), String> {
        let kind = str_of(event, "type").unwrap_or("");
        match kind {
            "response.created" => {
                if let Some(id) = event.pointer("/response/id").and_then(Value::as_str) {
                    out.response_id = Some(id.to_owned());
                }
            }
            "response.output_item.added" => {
                if let (Some(oi), Some(item)) = (
                    event.get("output_index").and_then(Value::as_i64),
                    event.get("item"),
                ) {
                    self.create_slot(oi, item, out, em);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let (Some(ci), Some(d)) =
                    (self.slot(event, SlotKind::Thinking), str_of(event, "delta"))
                {
                    self.append_thinking(out, em, ci, d);
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(ci) = self.slot(event, SlotKind::Thinking) {
                    self.append_thinking(out, em, ci, "\n\n");
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let (Some(ci), Some(d)) =
                    (self.slot(event, SlotKind::Text), str_of(event, "delta"))
                {
                    self.append_text(out, em, ci, d);
                }
            }
            "response.function_call_arguments.delta" => {
                let oi = event.get("output_index").and_then(Value::as_i64);
                let delta = str_of(event, "delta").unwrap_or("");
                if let Some(slot) = oi.and_then(|oi| self.slots.get_mut(&oi)) {
                    if slot.kind == SlotKind::ToolCall {
                        slot.arguments.push_str(delta);
                        if let Some(Content::ToolCall(tc)) = out.content.get_mut(slot.content_index)
                        {
                            tc.arguments = parse_streaming_json(&slot.arguments);
                        }
                        em.emit(AssistantMessageEvent::ToolCallDelta {
                            content_index: slot.content_index,
                            delta: delta.to_owned(),
                        });
                    }
                }
            }
            "response.function_call_arguments.done" => {
                let oi = event.get("output_index").and_then(Value::as_i64);
                if let (Some(slot), Some(full)) = (
                    oi.and_then(|oi| self.slots.get_mut(&oi)),
                    str_of(event, "arguments"),
                ) {
                    if slot.kind == SlotKind::ToolCall {
                        replace_arguments(slot, full, out, em);
                    }
                }
            }
            "response.output_item.done" => {
                let (Some(oi), Some(item)) = (
                    event.get("output_index").and_then(Value::as_i64),
                    event.get("item"),
                ) else {
                    return Ok(());
                };
                if str_of(item, "type") == Some("message")
                    && str_of(item, "phase") == Some("final_answer")
                {
                    out.stop_reason = StopReason::Stop;
                }
                if !self.slots.contains_key(&oi) && !self.create_slot(oi, item, out, em) {
                    return Ok(());
                }
                self.finish_item(oi, item, out, em);
            }
            "response.completed" | "response.incomplete" | "response.done" => {
                let response = event.get("response").cloned().unwrap_or(Value::Null);
                self.finalize(&response, out, model, flavor);
            }
            "error" => {
                return Err(match flavor {
                    Flavor::Codex => {
                        let nested = event.get("error");
                        let text = str_of(event, "message")
                            .or_else(|| nested.and_then(|n| str_of(n, "message")))
                            .or_else(|| str_of(event, "code"))
                            .or_else(|| nested.and_then(|n| str_of(n, "code")))
                            .map(str::to_owned)
                            .unwrap_or_else(|| compact(event));
                        format!("Codex error: {text}")
                    }
                    _ => format!(
                        "Error Code {}: {}",
                        js_text(event.get("code")),
                        js_text(event.get("message"))
                    ),
                });
            }
            "response.failed" => {
                self.terminal = true;
                out.raw_stop_reason = event
                    .pointer("/response/status")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let error = event.pointer("/response/error").filter(|e| !e.is_null());
                if let Flavor::Codex = flavor {
                    return Err(error
                        .and_then(|e| str_of(e, "message"))
                        .filter(|m| !m.is_empty())
                        .unwrap_or("Codex response failed")
                        .to_owned());
                }
                let reason = event
                    .pointer("/response/incomplete_details/reason")
                    .and_then(Value::as_str);
                return Err(match (error, reason) {
                    (Some(e), _) => format!(
                        "{}: {}",
                        str_of(e, "code")
                            .filter(|s| !s.is_empty())
                            .unwrap_or("unknown"),
                        str_of(e, "message")
                            .filter(|s| !s.is_empty())
                            .unwrap_or("no message")
                    ),
                    (None, Some(r)) => format!("incomplete: {r}"),
                    (None, None) => "Unknown error (no error details in response)".to_owned(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn finish_item(&mut self, oi: i64, item: &Value, out: &mut AssistantMessage, em: &Emitter) {
        let Some(slot) = self.slots.get_mut(&oi) else {
            return;
        };
        let ci = slot.content_index;
        match (slot.kind, str_of(item, "type")) {
            (SlotKind::Thinking, Some("reasoning")) => {
                let join = |key: &str| {
                    item.get(key)
                        .and_then(Value::as_array)
                        .map(|parts| {
                            parts
                                .iter()
                                .map(|p| str_of(p, "text").unwrap_or(""))
                                .collect::<Vec<_>>()
                                .join("\n\n")
                        })
                        .unwrap_or_default()
                };
                let summary = join("summary");
                let content = join("content");
                if let Some(Content::Thinking(t)) = out.content.get_mut(ci) {
                    if !summary.is_empty() {
                        t.thinking = summary;
                    } else if !content.is_empty() {
                        t.thinking = content;
                    }
                    t.thinking_signature = Some(compact(item));
                    em.emit(AssistantMessageEvent::ThinkingEnd {
                        content_index: ci,
                        content: t.thinking.clone(),
                    });
                }
                if let Some(id) = str_of(item, "id") {
                    self.reasoning_by_id.insert(id.to_owned(), ci);
                }
            }
            (SlotKind::Text, Some("message")) => {
                let text: String = item
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|parts| {
                        parts
                            .iter()
                            .map(|p| {
                                if str_of(p, "type") == Some("output_text") {
                                    str_of(p, "text").unwrap_or("")
                                } else {
                                    str_of(p, "refusal").unwrap_or("")
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let mut sig = Map::new();
                sig.insert("v".into(), json!(1));
                sig.insert("id".into(), json!(str_of(item, "id").unwrap_or("")));
                if let Some(p) = str_of(item, "phase") {
                    sig.insert("phase".into(), json!(p));
                }
                if let Some(Content::Text(t)) = out.content.get_mut(ci) {
                    t.text = text;
                    t.text_signature = Some(compact(&Value::Object(sig)));
                    em.emit(AssistantMessageEvent::TextEnd {
                        content_index: ci,
                        content: t.text.clone(),
                    });
                }
            }
            (SlotKind::ToolCall, Some("function_call")) => {
                if let Some(full) = str_of(item, "arguments").filter(|a| !a.is_empty()) {
                    let full = full.to_owned();
                    // The complete text replaces the streamed one without a new delta here.
                    slot.arguments = full;
                }
                if let Some(Content::ToolCall(tc)) = out.content.get_mut(ci) {
                    tc.arguments = parse_streaming_json(&slot.arguments);
                    em.emit(AssistantMessageEvent::ToolCallEnd {
                        content_index: ci,
                        tool_call: tc.clone(),
                    });
                }
                self.unfinished.retain(|&i| i != ci);
            }
            _ => return,
        }
        self.slots.remove(&oi);
    }

    fn finalize(
        &mut self,
        response: &Value,
        out: &mut AssistantMessage,
        model: &Model,
        flavor: &Flavor,
    ) {
        self.terminal = true;
        // Encrypted reasoning only in the terminal response (Azure): backfill the signatures.
        if let Some(items) = response.get("output").and_then(Value::as_array) {
            for item in items {
                let (Some("reasoning"), Some(id), Some(enc)) = (
                    str_of(item, "type"),
                    str_of(item, "id"),
                    item.get("encrypted_content").filter(|e| !e.is_null()),
                ) else {
                    continue;
                };
                let Some(&ci) = self.reasoning_by_id.get(id) else {
                    continue;
                };
                if let Some(Content::Thinking(t)) = out.content.get_mut(ci) {
                    if let Some(Value::Object(mut stored)) = t
                        .thinking_signature
                        .as_deref()
                        .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    {
                        if stored.get("encrypted_content").is_none_or(Value::is_null) {
                            stored.insert("encrypted_content".into(), enc.clone());
                            t.thinking_signature = Some(compact(&Value::Object(stored)));
                        }
                    }
                }
            }
        }
        if let Some(id) = str_of(response, "id") {
            out.response_id = Some(id.to_owned());
        }
        if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
            let details = u.get("input_tokens_details");
            let cached = json_u64(details.and_then(|d| d.get("cached_tokens"))).unwrap_or(0);
            let write = json_u64(details.and_then(|d| d.get("cache_write_tokens"))).unwrap_or(0);
            let input = json_u64(u.get("input_tokens")).unwrap_or(0);
            out.usage.input = input.saturating_sub(cached).saturating_sub(write);
            out.usage.output = json_u64(u.get("output_tokens")).unwrap_or(0);
            out.usage.cache_read = cached;
            out.usage.cache_write = write;
            out.usage.reasoning =
                Some(json_u64(u.pointer("/output_tokens_details/reasoning_tokens")).unwrap_or(0));
            out.usage.total_tokens = json_u64(u.get("total_tokens")).unwrap_or(0);
        }
        out.usage.cost.total_from_provider.get_or_insert(false);
        out.usage.compute_cost(&model.cost);
        let tier = str_of(response, "service_tier").unwrap_or("");
        let factor = service_tier_multiplier(flavor, &model.id, tier);
        if factor != 1.0 {
            let c = &mut out.usage.cost;
            c.input *= factor;
            c.output *= factor;
            c.cache_read *= factor;
            c.cache_write *= factor;
            c.total = c.input + c.output + c.cache_read + c.cache_write;
        }
        let status = str_of(response, "status");
        let reason = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str);
        out.raw_stop_reason = match (status, reason) {
            (Some(s), Some(r)) => Some(format!("{s}.{r}")),
            (Some(s), None) => Some(s.to_owned()),
            _ => None,
        };
        let (stop, error) = match status {
            None | Some("completed") | Some("in_progress") | Some("queued") => {
                (StopReason::Stop, None)
            }
            Some("incomplete") if reason == Some("max_output_tokens") => (StopReason::Length, None),
            Some("incomplete") => (
                StopReason::Error,
                Some(match reason {
                    Some(r) => format!("Response incomplete: {r}"),
                    None => "Response incomplete without a provider reason".to_owned(),
                }),
            ),
            Some(_) => (StopReason::Error, None),
        };
        out.stop_reason = stop;
        out.error_message = error;
        if stop == StopReason::Stop && out.tool_calls().next().is_some() {
            out.stop_reason = StopReason::ToolUse;
        }
    }
}

/// Cost factor of the service tier a response reports (upstream `applyServiceTierPricing`):
/// `flex` 0.5, `priority` (and for OpenAI `fast`) 2, or 2.5 for `gpt-5.5`; Azure prices every
/// tier alike.
fn service_tier_multiplier(flavor: &Flavor, model_id: &str, tier: &str) -> f64 {
    let priority = if model_id == "gpt-5.5" { 2.5 } else { 2.0 };
    match (flavor, tier) {
        (Flavor::Azure, _) => 1.0,
        (_, "flex") => 0.5,
        (_, "priority") | (Flavor::OpenAi { .. }, "fast") => priority,
        _ => 1.0,
    }
}

/// JavaScript's `${value}` of an event field (`undefined` when absent).
fn js_text(v: Option<&Value>) -> String {
    match v {
        None => "undefined".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "null".to_owned(),
        Some(other) => compact(other),
    }
}

/// `function_call_arguments.done`: the complete text replaces the streamed one; when it
/// extends what was streamed, the missing tail is emitted as a `toolcall_delta`.
fn replace_arguments(slot: &mut Slot, full: &str, out: &mut AssistantMessage, em: &Emitter) {
    if full == slot.arguments {
        return;
    }
    let tail = full
        .strip_prefix(slot.arguments.as_str())
        .map(str::to_owned);
    slot.arguments = full.to_owned();
    if let Some(Content::ToolCall(tc)) = out.content.get_mut(slot.content_index) {
        tc.arguments = parse_streaming_json(&slot.arguments);
    }
    if let Some(delta) = tail.filter(|t| !t.is_empty()) {
        em.emit(AssistantMessageEvent::ToolCallDelta {
            content_index: slot.content_index,
            delta,
        });
    }
}

/// `errorMessage` of a non-2xx response for `flavor` (see [`Flavor`]).
fn http_error_text(flavor: &Flavor, status: u16, body: &str) -> String {
    let trimmed = body.trim();
    let parsed = serde_json::from_str::<Value>(trimmed).ok();
    match flavor {
        Flavor::OpenAi { .. } | Flavor::Azure => {
            let prefix = match flavor {
                Flavor::OpenAi { prefix } => prefix.as_str(),
                _ => "Azure OpenAI API error",
            };
            // The OpenAI SDK reads `body.error` (else the body itself) and upstream prints it
            // as JSON; an unreadable or empty body leaves the SDK's status sentence.
            let detail = match &parsed {
                Some(v) => {
                    let inner = match v.get("error") {
                        Some(e) if !e.is_null() => e,
                        _ => v,
                    };
                    match inner {
                        Value::Object(m) if !m.is_empty() => compact(inner),
                        Value::String(s) => format!("{status} {s}"),
                        _ => format!("{status} status code (no body)"),
                    }
                }
                None if trimmed.is_empty() => format!("{status} status code (no body)"),
                None => format!("{status} {trimmed}"),
            };
            format!("{prefix} ({status}): {detail}")
        }
        Flavor::Codex => {
            let err = parsed
                .as_ref()
                .and_then(|v| v.get("error"))
                .filter(|e| e.is_object());
            let Some(err) = err else {
                return if trimmed.is_empty() {
                    "Request failed".to_owned()
                } else {
                    body.to_owned()
                };
            };
            let code = str_of(err, "code")
                .or_else(|| str_of(err, "type"))
                .unwrap_or("");
            let lower = code.to_ascii_lowercase();
            let friendly = (status == 429
                || [
                    "usage_limit_reached",
                    "usage_not_included",
                    "rate_limit_exceeded",
                ]
                .iter()
                .any(|c| lower.contains(c)))
            .then(|| {
                let plan = str_of(err, "plan_type")
                    .map(|p| format!(" ({} plan)", p.to_lowercase()))
                    .unwrap_or_default();
                format!("You have hit your ChatGPT usage limit{plan}.")
            });
            match friendly {
                Some(f) => f,
                None => str_of(err, "message")
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| body.to_owned()),
            }
        }
    }
}

/// Placeholder error text for [`send_streaming_request`]; [`run`] rewrites it per flavor.
fn raw_http_error(status: u16, _body: &str) -> String {
    format!("{status}")
}

/// Send `request` and read its Responses stream into `em` (shared by the three variants).
pub(crate) async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    request: ResponsesRequest,
    options: StreamOptions,
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
    let hooks = request.hooks;
    let mut headers = request.headers;
    common::hooked_headers(hooks.as_ref(), &options, &mut headers).await;
    let body = common::hooked_payload(hooks.as_ref(), request.body).await;
    let mut payload = serde_json::to_vec(&body).unwrap_or_default();
    if request.zstd {
        if let Some(compressed) = zstd_body(&payload) {
            payload = compressed;
            headers.insert(
                reqwest::header::CONTENT_ENCODING,
                reqwest::header::HeaderValue::from_static("zstd"),
            );
        }
    }
    let builder = client.post(&request.url).headers(headers).body(payload);
    let flavor = request.flavor;
    let sent =
        common::send_hooked_request(builder, &cancel, raw_http_error, &http, hooks.as_ref()).await;
    let response = match sent {
        Ok(r) => r,
        Err(mut error) => {
            if let ProviderError::Http {
                status,
                body,
                message,
                ..
            } = &mut error
            {
                let text = http_error_text(&flavor, *status, body);
                // Keep the provider-retry prefix (`Server requested …s retry delay …`).
                *message = match message.strip_suffix(&format!("{status}")) {
                    Some(lead) if !lead.is_empty() => format!("{lead}{text}"),
                    _ => text,
                };
            }
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
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let value = match crate::json::parse_stream_chunk(data) {
            Ok(v) => v,
            Err(e) => {
                break StreamEnd::Failed(ProviderError::Protocol {
                    message: format!("Could not parse Responses stream event: {e}; data={data}"),
                })
            }
        };
        if let Err(text) = state.handle(&value, &mut output, &em, &model, &flavor) {
            break StreamEnd::Failed(ProviderError::Stream { message: text });
        }
        if matches!(flavor, Flavor::Codex) && state.terminal {
            break StreamEnd::Finished;
        }
    };

    finish_stream(&em, output, &state, end, &flavor, &cancel, started);
}

/// Reads Responses events (as JSON values, from SSE or the Codex WebSocket) into an
/// [`AssistantMessage`], emitting the stream events.
pub(crate) struct EventReader {
    state: StreamState,
    /// The message built so far.
    pub(crate) output: AssistantMessage,
}

impl EventReader {
    /// A reader for `model` with an empty message.
    pub(crate) fn new(model: &Model) -> Self {
        EventReader {
            state: StreamState::default(),
            output: AssistantMessage::empty(model),
        }
    }

    /// Handle one event; `Ok(true)` once a terminal event arrived. `Err` is the stream error
    /// text (an `error` / `response.failed` event).
    pub(crate) fn feed(
        &mut self,
        event: &Value,
        em: &Emitter,
        model: &Model,
        flavor: &Flavor,
    ) -> Result<bool, String> {
        self.state
            .handle(event, &mut self.output, em, model, flavor)?;
        Ok(self.state.terminal)
    }

    /// Emit the final `done` / `error` for how the stream ended (see [`finish_stream`]).
    pub(crate) fn finish(
        self,
        em: &Emitter,
        end: StreamEnd,
        flavor: &Flavor,
        cancel: &tokio_util::sync::CancellationToken,
        started: Instant,
    ) {
        finish_stream(em, self.output, &self.state, end, flavor, cancel, started);
    }
}

/// Emit `done` or `error` for a Responses stream that ended with `end`: errors and aborts as
/// they are, a stream without a terminal event, an `error` stop reason, and a tool call left
/// unfinished become errors.
fn finish_stream(
    em: &Emitter,
    output: AssistantMessage,
    state: &StreamState,
    end: StreamEnd,
    flavor: &Flavor,
    cancel: &tokio_util::sync::CancellationToken,
    started: Instant,
) {
    match end {
        StreamEnd::Failed(error) => {
            em.fail(output, error.aborted_if(cancel.is_cancelled()), started)
        }
        StreamEnd::Aborted => em.fail(output, common::aborted(), started),
        StreamEnd::Finished => {
            if cancel.is_cancelled() {
                em.fail(output, common::aborted(), started);
            } else if !state.terminal {
                let message = match flavor {
                    Flavor::Codex => "Codex stream ended without a stop reason",
                    _ => "OpenAI Responses stream ended before a terminal response event",
                };
                let error = ProviderError::StreamEndedEarly {
                    message: message.to_owned(),
                };
                em.fail(output, error, started);
            } else if output.stop_reason == StopReason::Error {
                let message = output
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "An unknown error occurred".to_owned());
                em.fail(output, ProviderError::Stream { message }, started);
            } else if output.stop_reason == StopReason::ToolUse && !state.unfinished.is_empty() {
                let names: Vec<String> = state
                    .unfinished
                    .iter()
                    .filter_map(|&ci| match output.content.get(ci) {
                        Some(Content::ToolCall(tc)) => Some(format!("{} ({})", tc.name, tc.id)),
                        _ => None,
                    })
                    .collect();
                let error = ProviderError::Stream {
                    message: format!(
                        "OpenAI Responses stream completed with an unfinished tool call: {}",
                        names.first().cloned().unwrap_or_default()
                    ),
                };
                em.fail(output, error, started);
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
    fn http_errors_read_as_upstream() {
        let body = r#"{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}"#;
        let f = Flavor::OpenAi {
            prefix: "OpenAI API error".into(),
        };
        assert_eq!(
            http_error_text(&f, 500, body),
            r#"OpenAI API error (500): {"message":"boom","type":"server_error","param":null,"code":null}"#
        );
        assert_eq!(
            http_error_text(&Flavor::Azure, 502, ""),
            "Azure OpenAI API error (502): 502 status code (no body)"
        );
        assert_eq!(http_error_text(&Flavor::Codex, 500, body), "boom");
        assert_eq!(
            http_error_text(
                &Flavor::Codex,
                429,
                r#"{"error":{"type":"usage_limit_reached","plan_type":"PLUS"}}"#
            ),
            "You have hit your ChatGPT usage limit (plus plan)."
        );
    }

    #[test]
    fn service_tiers_scale_the_cost() {
        let f = Flavor::OpenAi {
            prefix: String::new(),
        };
        assert_eq!(service_tier_multiplier(&f, "gpt-5", "flex"), 0.5);
        assert_eq!(service_tier_multiplier(&f, "gpt-5", "fast"), 2.0);
        assert_eq!(service_tier_multiplier(&f, "gpt-5.5", "priority"), 2.5);
        assert_eq!(
            service_tier_multiplier(&Flavor::Codex, "gpt-5", "fast"),
            1.0
        );
        assert_eq!(
            service_tier_multiplier(&Flavor::Azure, "gpt-5", "flex"),
            1.0
        );
        assert_eq!(service_tier_multiplier(&f, "gpt-5", "default"), 1.0);
    }

    #[test]
    fn strict_schemas_as_upstream() {
        let s = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}, "limit": {"type": "number"}}});
        assert_eq!(
            strict_schema(&s).unwrap(),
            json!({"type": "object", "required": ["path", "limit"], "properties": {
                "path": {"type": "string"},
                "limit": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
                "additionalProperties": false})
        );
        assert!(strict_schema(&json!({"type": "object", "properties": {"a": {}}})).is_err());
        assert!(strict_schema(&json!({"type": "string"})).is_err());
    }

    #[test]
    fn tool_call_ids_normalize_as_upstream() {
        let mut m = Model::unknown();
        m.provider = "openai".into();
        assert_eq!(
            normalize_tool_call_id(&m, &OPENAI_TOOL_CALL_PROVIDERS, "call a|item.b"),
            "call_a|fc_item_b"
        );
        assert_eq!(
            normalize_tool_call_id(&m, &OPENAI_TOOL_CALL_PROVIDERS, "toolu_01:x"),
            "toolu_01_x"
        );
    }
}
