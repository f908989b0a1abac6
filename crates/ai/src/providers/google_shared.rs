//! What `google-generative-ai` and `google-vertex` share: the Gemini `generateContent` request
//! body, thinking configuration, message conversion (thought signatures, function call ids),
//! and reading the `streamGenerateContent?alt=sse` stream.
//!
//! Source: upstream 1.6 `@earendil-works/pi-ai` `dist/api/google-shared.js`,
//! `google-generative-ai.js`, `google-vertex.js` (facts only), Google's public
//! `GenerateContentRequest`/`GenerateContentResponse` reference, and recordings of what
//! upstream 1.6 sends (`crates/coding-agent/tests/fixtures/providers/upstream/`).

use super::common::{
    self, apply_headers, compact, end_event, event_stream, extra_headers, json_u64, next_sse_event,
    push_block, send_streaming_request, Emitter, LazyClient, StreamEnd,
};
use super::strict_schema::{prefers_strict_sampling, strict_schema};
use crate::error::ProviderError;
use crate::stream::{AssistantMessageEvent, AssistantStream, RequestTuning, StreamOptions};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Cost, Message, Model, StopReason, TextContent,
    ThinkingContent, ThinkingLevel, ToolCall, UserContent,
};
use eventsource_stream::Eventsource;
use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

/// Which Gemini endpoint family a request goes to; only wording and budget tables differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `google-generative-ai` (the Gemini API).
    Gemini,
    /// `google-vertex` (Vertex AI).
    Vertex,
}

impl Flavor {
    fn api(self) -> &'static str {
        match self {
            Flavor::Gemini => super::google_generative_ai::API,
            Flavor::Vertex => super::google_vertex::API,
        }
    }

    fn no_finish_text(self) -> &'static str {
        match self {
            Flavor::Gemini => "Google stream ended without a finish reason",
            Flavor::Vertex => "Google Vertex stream ended without a finish reason",
        }
    }
}

/// Whether the model uses Gemini's discrete `thinkingLevel` (Gemini 3 Pro/Flash, Gemini 4 and
/// later, `gemini-flash(-lite)-latest`, Gemma 4) instead of a token `thinkingBudget`.
pub(crate) fn uses_thinking_level(model_id: &str) -> bool {
    let id = model_id.to_ascii_lowercase();
    // gemini-3-pro, gemini-3.1-flash, …
    let gemini3 = tails(&id, "gemini-3").any(|rest| {
        let rest = match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => {
                r.trim_start_matches(|c: char| c.is_ascii_digit())
            }
            _ => rest,
        };
        rest.starts_with("-pro") || rest.starts_with("-flash")
    });
    // gemini-4…gemini-9, gemini-10 and up.
    let later = tails(&id, "gemini-").any(|rest| {
        let mut digits = rest.chars();
        match (digits.next(), digits.next()) {
            (Some('4'..='9'), _) => true,
            (Some('1'..='9'), Some(b)) => b.is_ascii_digit(),
            _ => false,
        }
    });
    gemini3
        || later
        || id == "gemini-flash-latest"
        || id == "gemini-flash-lite-latest"
        || id.contains("gemma-4")
        || id.contains("gemma4")
}

/// The rest of `text` after each occurrence of `prefix`.
fn tails<'a>(text: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.match_indices(prefix)
        .map(move |(i, _)| &text[i + prefix.len()..])
}

/// The major version of a `gemini-<n>…` / `gemini-live-<n>…` model id.
fn gemini_major(model_id: &str) -> Option<u32> {
    let id = model_id.to_ascii_lowercase();
    let rest = id.strip_prefix("gemini-")?;
    let rest = rest.strip_prefix("live-").unwrap_or(rest);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Models that need explicit ids on `functionCall`/`functionResponse` parts (Claude and
/// gpt-oss behind Google APIs, Gemini 3 and later).
pub(crate) fn requires_tool_call_id(model_id: &str) -> bool {
    model_id.starts_with("claude-")
        || model_id.starts_with("gpt-oss-")
        || gemini_major(model_id).is_some_and(|v| v >= 3)
}

/// Whether images of a tool result may be nested in `functionResponse.parts` (Gemini 3+ and
/// non-Gemini models); older Gemini models get them in a separate user turn.
fn multimodal_function_response(model_id: &str) -> bool {
    gemini_major(model_id).is_none_or(|v| v >= 3)
}

/// A standard Google level (`minimal`/`low`/`medium`/`high`) for `level`: the model's
/// `thinkingLevelMap` string (lower-cased) or the level itself. Errors with upstream's text
/// for anything else (e.g. `xhigh` without a mapping).
fn resolve_google_level(model: &Model, level: ThinkingLevel) -> Result<String, String> {
    let mapped = model
        .thinking_level_map
        .as_ref()
        .and_then(|m| m.get(level.as_str()));
    let resolved = match mapped {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        _ => level.as_str().to_owned(),
    };
    match resolved.as_str() {
        "minimal" | "low" | "medium" | "high" => Ok(resolved),
        _ => {
            let shown = match mapped {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) => "null".to_owned(),
                Some(other) => other.to_string(),
                None => "undefined".to_owned(),
            };
            Err(format!(
                "Unsupported Google thinking level mapping for {}/{}: {} -> {shown}",
                model.provider,
                model.id,
                level.as_str()
            ))
        }
    }
}

/// The default thinking budget in tokens per level (upstream `getGoogleBudget`); `-1` (dynamic)
/// for models without a table. A configured `thinkingBudgets` entry wins.
fn google_budget(model: &Model, level: &str, tuning: &RequestTuning, flavor: Flavor) -> i64 {
    if let Some(b) = tuning.thinking_budgets.as_ref() {
        let custom = match level {
            "minimal" => b.minimal,
            "low" => b.low,
            "medium" => b.medium,
            _ => b.high,
        };
        if let Some(v) = custom {
            return i64::try_from(v).unwrap_or(i64::MAX);
        }
    }
    let table: [i64; 4] = if model.id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if flavor == Flavor::Gemini && model.id.contains("2.5-flash-lite") {
        [512, 2048, 8192, 24576]
    } else if model.id.contains("2.5-flash") {
        [128, 2048, 8192, 24576]
    } else {
        return -1;
    };
    match level {
        "minimal" => table[0],
        "low" => table[1],
        "medium" => table[2],
        _ => table[3],
    }
}

/// The `thinkingConfig` of a request, `None` for a model without reasoning.
fn thinking_config(
    model: &Model,
    options: &StreamOptions,
    tuning: &RequestTuning,
    flavor: Flavor,
) -> Result<Option<Value>, String> {
    if !model.reasoning {
        return Ok(None);
    }
    let level = match options.reasoning {
        Some(l) if l != ThinkingLevel::Off => crate::models::clamp_thinking_level(model, l),
        _ => ThinkingLevel::Off,
    };
    if level == ThinkingLevel::Off {
        // Disabled: budget 0, or the lowest level a level-only model supports.
        if !uses_thinking_level(&model.id) {
            return Ok(Some(json!({"thinkingBudget": 0})));
        }
        let fallback = crate::models::clamp_thinking_level(model, ThinkingLevel::Off);
        if fallback == ThinkingLevel::Off {
            return Ok(Some(json!({"thinkingBudget": 0})));
        }
        let resolved = resolve_google_level(model, fallback)?;
        return Ok(Some(
            json!({"thinkingLevel": resolved.to_ascii_uppercase()}),
        ));
    }
    let resolved = resolve_google_level(model, level)?;
    if uses_thinking_level(&model.id) {
        return Ok(Some(json!({
            "includeThoughts": true,
            "thinkingLevel": resolved.to_ascii_uppercase(),
        })));
    }
    Ok(Some(json!({
        "includeThoughts": true,
        "thinkingBudget": google_budget(model, &resolved, tuning, flavor),
    })))
}

/// Thought signatures are bytes on the wire: only well-formed base64 is replayed.
fn valid_signature(sig: Option<&str>) -> Option<&str> {
    let s = sig?;
    if s.is_empty() || s.len() % 4 != 0 {
        return None;
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2
        || !body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    {
        return None;
    }
    Some(s)
}

/// Gemini has no mid-conversation system role: tool ids are normalised for models that need
/// them, foreign thinking becomes text, images follow the model's input types.
fn convert_messages(model: &Model, messages: &[Message]) -> Vec<Value> {
    let needs_id = requires_tool_call_id(&model.id);
    let normalize = |id: &str| -> String {
        if !needs_id {
            return id.to_owned();
        }
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
    };
    let messages = transform_messages(messages, model, Some(&normalize));
    let mut contents: Vec<Value> = Vec::new();
    for msg in &messages {
        match msg {
            Message::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"text": s})],
                    UserContent::Blocks(blocks) => blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(json!({"text": t.text})),
                            Content::Image(i) => Some(
                                json!({"inlineData": {"mimeType": i.mime_type, "data": i.data}}),
                            ),
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            Message::Assistant(a) => {
                let same = a.provider == model.provider && a.model == model.id;
                let sig = |s: Option<&String>| {
                    if same {
                        valid_signature(s.map(String::as_str)).map(str::to_owned)
                    } else {
                        None
                    }
                };
                let mut parts = Vec::new();
                for block in &a.content {
                    match block {
                        Content::Text(t) => {
                            let signature = sig(t.text_signature.as_ref());
                            if t.text.trim().is_empty() && signature.is_none() {
                                continue;
                            }
                            let mut p = json!({"text": t.text});
                            if let Some(s) = signature {
                                p["thoughtSignature"] = json!(s);
                            }
                            parts.push(p);
                        }
                        Content::Thinking(t) => {
                            if same {
                                let signature = sig(t.thinking_signature.as_ref());
                                if t.thinking.trim().is_empty() && signature.is_none() {
                                    continue;
                                }
                                let mut p = json!({"thought": true, "text": t.thinking});
                                if let Some(s) = signature {
                                    p["thoughtSignature"] = json!(s);
                                }
                                parts.push(p);
                            } else if !t.thinking.trim().is_empty() {
                                parts.push(json!({"text": t.thinking}));
                            }
                        }
                        Content::ToolCall(tc) => {
                            let mut call = Map::new();
                            call.insert("name".into(), json!(tc.name));
                            call.insert(
                                "args".into(),
                                if tc.arguments.is_null() {
                                    json!({})
                                } else {
                                    tc.arguments.clone()
                                },
                            );
                            if needs_id {
                                call.insert("id".into(), json!(tc.id));
                            }
                            let mut p = json!({"functionCall": Value::Object(call)});
                            if let Some(s) = sig(tc.thought_signature.as_ref()) {
                                p["thoughtSignature"] = json!(s);
                            }
                            parts.push(p);
                        }
                        Content::Image(_) => {}
                    }
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
            Message::ToolResult(tr) => {
                let text = tr
                    .content
                    .iter()
                    .filter_map(Content::as_text)
                    .collect::<Vec<_>>()
                    .join("\n");
                let images: Vec<Value> = if model.input.iter().any(|i| i == "image") {
                    tr.content
                        .iter()
                        .filter_map(|c| match c {
                            Content::Image(i) => Some(
                                json!({"inlineData": {"mimeType": i.mime_type, "data": i.data}}),
                            ),
                            _ => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let value = if !text.trim().is_empty() {
                    text
                } else if !images.is_empty() {
                    "(see attached image)".to_owned()
                } else {
                    String::new()
                };
                let nested = multimodal_function_response(&model.id);
                let mut response = Map::new();
                response.insert("name".into(), json!(tr.tool_name));
                response.insert(
                    "response".into(),
                    if tr.is_error {
                        json!({"error": value})
                    } else {
                        json!({"output": value})
                    },
                );
                if !images.is_empty() && nested {
                    response.insert("parts".into(), json!(images));
                }
                if needs_id {
                    response.insert("id".into(), json!(tr.tool_call_id));
                }
                let part = json!({"functionResponse": Value::Object(response)});
                // All function responses of one turn go into a single user turn.
                let merged = match contents.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && last["parts"].as_array().is_some_and(|ps| {
                                ps.iter().any(|p| p.get("functionResponse").is_some())
                            }) =>
                    {
                        if let Some(ps) = last["parts"].as_array_mut() {
                            ps.push(part.clone());
                        }
                        true
                    }
                    _ => false,
                };
                if !merged {
                    contents.push(json!({"role": "user", "parts": [part]}));
                }
                if !images.is_empty() && !nested {
                    let mut parts = vec![json!({"text": "Tool result image:"})];
                    parts.extend(images);
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            _ => {}
        }
    }
    contents
}

/// JSON-schema keys Gemini's `parametersJsonSchema` does not take as keywords in name maps.
const NAME_MAPS: [&str; 6] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];
const SUBSCHEMAS: [&str; 16] = [
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];

/// Gemini ignores `const` but honours `enum`: string and number `const`s become one-value
/// `enum`s, recursively through subschemas.
fn const_as_enum(schema: &Value, name_map: bool) -> Value {
    match schema {
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| const_as_enum(v, false)).collect())
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let v = if name_map || SUBSCHEMAS.contains(&k.as_str()) {
                    const_as_enum(v, false)
                } else if NAME_MAPS.contains(&k.as_str()) {
                    const_as_enum(v, true)
                } else {
                    v.clone()
                };
                out.insert(k.clone(), v);
            }
            if !name_map && !out.contains_key("enum") {
                if let Some(c) = out.get("const").cloned() {
                    if c.is_string() || c.is_number() {
                        out.shift_remove("const");
                        out.insert("enum".into(), json!([c]));
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The `generateContent` request body upstream 1.6 sends through `@google/genai` (key order
/// as recorded): `contents`, `systemInstruction`, `tools` (`functionDeclarations` with
/// `parametersJsonSchema`; strict schemas for Gemini 3+), `toolConfig` (`VALIDATED` when a
/// tool is strict), `generationConfig` (`maxOutputTokens`, `thinkingConfig`). Errors: an unsupported thinking-level mapping (upstream's text).
pub(crate) fn build_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    flavor: Flavor,
) -> Result<Value, String> {
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(convert_messages(model, &context.messages)),
    );
    if !context.system_prompt.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": context.system_prompt}], "role": "user"}),
        );
    }
    let mut generation = Map::new();
    generation.insert(
        "maxOutputTokens".into(),
        json!(common::clamp_max_tokens_to_context(model, context, options)),
    );
    if let Some(tc) = thinking_config(model, options, tuning, flavor)? {
        generation.insert("thinkingConfig".into(), tc);
    }
    if !context.tools.is_empty() {
        // Gemini 3+ validates required parameters: strict schemas and `VALIDATED` calling.
        let strict_ok = gemini_major(&model.id).is_some_and(|v| v >= 3);
        let mut any_strict = false;
        let declarations: Vec<Value> = context
            .tools
            .iter()
            .map(|t| {
                let strict = (strict_ok && prefers_strict_sampling(t))
                    .then(|| strict_schema(&t.parameters))
                    .flatten();
                any_strict |= strict.is_some();
                let params = strict.as_ref().unwrap_or(&t.parameters);
                json!({
                    "name": t.name,
                    "description": t.description,
                    "parametersJsonSchema": const_as_enum(params, false),
                })
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
        if any_strict {
            body.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": "VALIDATED"}}),
            );
        }
    }
    body.insert("generationConfig".into(), Value::Object(generation));
    Ok(Value::Object(body))
}

/// `errorMessage` of a non-2xx Gemini/Vertex response, as `@google/genai` words it: the JSON
/// body re-serialised compactly (`{"error":{"code":429,"message":…,"status":…}}`), or for a
/// non-JSON body `{"error":{"message":<text>,"code":<status>,"status":<reason phrase>}}`.
pub(crate) fn google_http_error(status: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body.trim()) {
        Ok(v) => compact(&v),
        Err(_) => {
            let reason = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            compact(&json!({"error": {"message": body, "code": status, "status": reason}}))
        }
    }
}

/// The delay of a `google.rpc.RetryInfo` detail in an error body (`"retryDelay": "2s"` or
/// `"1.5s"`), in ms.
pub(crate) fn retry_info_delay_ms(body: &str) -> Option<u64> {
    let v: Value = serde_json::from_str(body).ok()?;
    let details = v.get("error")?.get("details")?.as_array()?;
    details.iter().find_map(|d| {
        let kind = d.get("@type")?.as_str()?;
        if !kind.ends_with("google.rpc.RetryInfo") {
            return None;
        }
        let secs: f64 = d
            .get("retryDelay")?
            .as_str()?
            .strip_suffix('s')?
            .parse()
            .ok()?;
        (secs >= 0.0).then(|| (secs * 1000.0).ceil() as u64)
    })
}

/// How a Gemini request is addressed and authenticated.
pub(crate) struct Target {
    /// Full URL including `?alt=sse`.
    pub url: String,
    /// Auth headers (`x-goog-api-key` or `authorization: Bearer …`).
    pub auth: Vec<(String, String)>,
}

/// Counter for ids synthesised for function calls without one (or with a repeated one).
static TOOL_CALL_COUNTER: AtomicU64 = AtomicU64::new(0);

/// `finishReason` → stopReason (upstream `mapStopReason`); unknown values are an error.
fn map_finish(reason: &str) -> Result<StopReason, String> {
    match reason {
        "STOP" => Ok(StopReason::Stop),
        "MAX_TOKENS" | "CONTINUATION" => Ok(StopReason::Length),
        "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "SAFETY"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "IMAGE_OTHER"
        | "RECITATION"
        | "FINISH_REASON_UNSPECIFIED"
        | "OTHER"
        | "LANGUAGE"
        | "MALFORMED_FUNCTION_CALL"
        | "UNEXPECTED_TOOL_CALL"
        | "TOO_MANY_TOOL_CALLS"
        | "NO_IMAGE" => Ok(StopReason::Error),
        other => Err(format!("Unhandled stop reason: {other}")),
    }
}

/// Stream state: the open text or thinking block, if any.
#[derive(Default)]
struct State {
    open: Option<usize>,
}

impl State {
    fn close(&mut self, out: &AssistantMessage, em: &Emitter) {
        if let Some(ci) = self.open.take() {
            if let Some(e) = out.content.get(ci).and_then(|b| end_event(ci, b)) {
                em.emit(e);
            }
        }
    }

    fn handle(
        &mut self,
        chunk: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
    ) -> Result<(), String> {
        if out.response_id.is_none() {
            if let Some(id) = chunk
                .get("responseId")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                out.response_id = Some(id.to_owned());
            }
        }
        let candidate = chunk.get("candidates").and_then(|c| c.get(0));
        let parts = candidate
            .and_then(|c| c.get("content"))
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                let thinking = part.get("thought").and_then(Value::as_bool) == Some(true);
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
                let signature = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let Some(ci) = self.open else { continue };
                match out.content.get_mut(ci) {
                    Some(Content::Thinking(t)) => {
                        t.thinking.push_str(text);
                        if let Some(s) = signature {
                            t.thinking_signature = Some(s.to_owned());
                        }
                        em.emit(AssistantMessageEvent::ThinkingDelta {
                            content_index: ci,
                            delta: text.to_owned(),
                        });
                    }
                    Some(Content::Text(t)) => {
                        t.text.push_str(text);
                        if let Some(s) = signature {
                            t.text_signature = Some(s.to_owned());
                        }
                        em.emit(AssistantMessageEvent::TextDelta {
                            content_index: ci,
                            delta: text.to_owned(),
                        });
                    }
                    _ => {}
                }
            }
            if let Some(call) = part.get("functionCall") {
                self.close(out, em);
                let name = call.get("name").and_then(Value::as_str).unwrap_or("");
                let provided = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let duplicate = |id: &str| {
                    out.content
                        .iter()
                        .any(|b| matches!(b, Content::ToolCall(tc) if tc.id == id))
                };
                let id = match provided {
                    Some(id) if !duplicate(id) => id.to_owned(),
                    _ => {
                        let n = TOOL_CALL_COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
                        let ms = SystemTime::now()
                            .duration_since(SystemTime::UNIX_EPOCH)
                            .map(|d| d.as_millis())
                            .unwrap_or(0);
                        format!("{name}_{ms}_{n}")
                    }
                };
                let arguments = match call.get("args") {
                    Some(v) if !v.is_null() => v.clone(),
                    _ => json!({}),
                };
                let tc = ToolCall {
                    id,
                    name: name.to_owned(),
                    arguments,
                    thought_signature: part
                        .get("thoughtSignature")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                    extra: Default::default(),
                };
                let delta = compact(&tc.arguments);
                let ci = push_block(out, em, Content::ToolCall(tc));
                em.emit(AssistantMessageEvent::ToolCallDelta {
                    content_index: ci,
                    delta,
                });
                if let Some(e) = out.content.get(ci).and_then(|b| end_event(ci, b)) {
                    em.emit(e);
                }
            }
        }
        if let Some(reason) = candidate
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str)
        {
            out.raw_stop_reason = Some(reason.to_owned());
            out.stop_reason = map_finish(reason)?;
            if out.stop_reason == StopReason::Stop
                && out
                    .content
                    .iter()
                    .any(|b| matches!(b, Content::ToolCall(_)))
            {
                out.stop_reason = StopReason::ToolUse;
            }
        }
        if let Some(u) = chunk.get("usageMetadata") {
            let get = |k: &str| json_u64(u.get(k)).unwrap_or(0);
            let cached = get("cachedContentTokenCount");
            let thoughts = get("thoughtsTokenCount");
            out.usage.input = get("promptTokenCount").saturating_sub(cached);
            out.usage.output = get("candidatesTokenCount") + thoughts;
            out.usage.cache_read = cached;
            out.usage.cache_write = 0;
            out.usage.reasoning = Some(thoughts);
            out.usage.total_tokens = get("totalTokenCount");
            out.usage.cost = Cost {
                total_from_provider: Some(false),
                ..Cost::default()
            };
            out.usage.compute_cost(&model.cost);
            em.usage(&out.usage);
        }
        Ok(())
    }
}

/// Start a Gemini stream: build the body now (an error becomes the stream's only event),
/// resolve the target (URL, auth) when the stream is polled, then read the SSE events.
pub(crate) fn stream_gemini<F, Fut>(
    client: LazyClient,
    model: &Model,
    context: &Context,
    options: StreamOptions,
    tuning: &RequestTuning,
    flavor: Flavor,
    target: F,
) -> AssistantStream
where
    F: FnOnce(reqwest::Client, Model, StreamOptions) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Target, ProviderError>> + Send + 'static,
{
    let model = model.clone();
    let body = build_body(&model, context, &options, tuning, flavor);
    let hooks = tuning.hooks.clone();
    event_stream(move |em| async move {
        let started = Instant::now();
        let mut output = AssistantMessage::empty(&model);
        output.api = flavor.api().to_owned();
        let cancel = options.cancel.clone();
        if cancel.is_cancelled() {
            em.fail(output, common::aborted(), started);
            return;
        }
        let body = match body {
            Ok(b) => b,
            Err(message) => {
                em.fail(output, ProviderError::Protocol { message }, started);
                return;
            }
        };
        let http = client.options();
        let client = client.get();
        let target = tokio::select! {
            _ = cancel.cancelled() => Err(common::aborted()),
            t = target(client.clone(), model.clone(), options.clone()) => t,
        };
        let target = match target {
            Ok(t) => t,
            Err(error) => {
                em.fail(output, error, started);
                return;
            }
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        apply_headers(&mut headers, target.auth);
        apply_headers(&mut headers, extra_headers(&model, &options));
        // Upstream's Gemini SDK exposes the headers and the payload, not the response: no
        // `after_provider_response` here, as upstream 1.6.
        common::hooked_headers(hooks.as_ref(), &options, &mut headers).await;
        let body = common::hooked_payload(hooks.as_ref(), body).await;
        let payload = serde_json::to_vec(&body).unwrap_or_default();
        let request = client.post(&target.url).headers(headers).body(payload);
        let response =
            match send_streaming_request(request, &cancel, google_http_error, &http).await {
                Ok(r) => r,
                Err(error) => {
                    em.fail(output, with_retry_info(error), started);
                    return;
                }
            };
        em.start(&output);
        let mut events = response.bytes_stream().eventsource();
        let mut state = State::default();
        let end = loop {
            let event = match next_sse_event(&mut events, &cancel, http.idle_timeout_ms).await {
                Ok(event) => event,
                Err(end) => break end,
            };
            if event.data.trim().is_empty() {
                continue;
            }
            let chunk = match crate::json::parse_stream_chunk(&event.data) {
                Ok(v) => v,
                Err(e) => {
                    break StreamEnd::Failed(ProviderError::Protocol {
                        message: format!(
                            "Could not parse Gemini SSE event: {e}; data={}",
                            event.data
                        ),
                    })
                }
            };
            if let Some(err) = chunk.get("error") {
                break StreamEnd::Failed(ProviderError::Stream {
                    message: compact(&json!({"error": err})),
                });
            }
            if let Err(text) = state.handle(&chunk, &mut output, &em, &model) {
                break StreamEnd::Failed(ProviderError::Protocol { message: text });
            }
        };
        match end {
            StreamEnd::Aborted => em.fail(output, common::aborted(), started),
            StreamEnd::Failed(error) => {
                let error = error.aborted_if(cancel.is_cancelled());
                em.fail(output, error, started)
            }
            StreamEnd::Finished => {
                state.close(&output, &em);
                if cancel.is_cancelled() {
                    em.fail(output, common::aborted(), started);
                } else if output.stop_reason == StopReason::Pending {
                    let error = ProviderError::StreamEndedEarly {
                        message: flavor.no_finish_text().to_owned(),
                    };
                    em.fail(output, error, started);
                } else if matches!(output.stop_reason, StopReason::Error | StopReason::Aborted) {
                    let message = match &output.raw_stop_reason {
                        Some(r) => format!("Provider stopped with: {r}"),
                        None => "An unknown error occurred".to_owned(),
                    };
                    em.fail(output, ProviderError::Stream { message }, started);
                } else {
                    em.done(output, started);
                }
            }
        }
    })
}

/// An HTTP error without a `retry-after` header takes the delay of a `google.rpc.RetryInfo`
/// detail in its body, so that retries wait what the server asked for.
fn with_retry_info(error: ProviderError) -> ProviderError {
    match error {
        ProviderError::Http {
            status,
            retry_after_ms: None,
            body,
            message,
        } => ProviderError::Http {
            status,
            retry_after_ms: retry_info_delay_ms(&body),
            body,
            message,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_level_models() {
        for id in [
            "gemini-3-pro-preview",
            "gemini-3.1-pro-preview",
            "gemini-3-flash-preview",
            "gemini-3.8-flash",
            "gemini-4-argon",
            "gemini-12-x",
            "gemini-flash-latest",
            "gemma-4-27b",
            "gemma4-e4b",
        ] {
            assert!(uses_thinking_level(id), "{id}");
        }
        for id in [
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "gemini-3-nano",
            "gemma-3-27b",
        ] {
            assert!(!uses_thinking_level(id), "{id}");
        }
        assert!(requires_tool_call_id("gemini-3-pro-preview"));
        assert!(requires_tool_call_id("claude-sonnet-4"));
        assert!(!requires_tool_call_id("gemini-2.5-flash"));
    }

    #[test]
    fn signatures_and_errors() {
        assert_eq!(
            valid_signature(Some("c2lnLWdvb2dsZS0x")),
            Some("c2lnLWdvb2dsZS0x")
        );
        assert_eq!(valid_signature(Some("sig_fake_1")), None);
        assert_eq!(valid_signature(Some("abc")), None);
        let body = r#"{"error": {"code": 429, "message": "x", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}"#;
        assert_eq!(retry_info_delay_ms(body), Some(1500));
        assert!(google_http_error(429, body).starts_with(r#"{"error":{"code":429,"message":"x""#));
        assert_eq!(
            google_http_error(502, "bad gateway"),
            r#"{"error":{"message":"bad gateway","code":502,"status":"Bad Gateway"}}"#
        );
    }

    #[test]
    fn const_becomes_enum() {
        let s =
            json!({"type": "object", "properties": {"const": {"const": "a"}, "n": {"const": 1}}});
        assert_eq!(
            const_as_enum(&s, false),
            json!({"type": "object", "properties": {"const": {"enum": ["a"]}, "n": {"enum": [1]}}})
        );
    }
}
