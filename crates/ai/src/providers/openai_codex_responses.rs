//! `openai-codex-responses`: the Responses API of the ChatGPT backend (ChatGPT-plan "Codex"
//! sign-in), streaming `POST {baseUrl}/codex/responses` over SSE.
//!
//! Source: upstream 1.6 `@earendil-works/pi-ai` `dist/api/openai-codex-responses.js`, checked
//! against what upstream 1.6 sent to the project's fake server
//! (`crates/coding-agent/tests/data/responses/codex_*.json`). Request conversion and stream
//! reading are those of [`super::openai_responses`].
//!
//! * URL: `baseUrl` (default `https://chatgpt.com/backend-api`) + `/codex/responses`
//!   (kept when it already ends so; `/responses` added to a `…/codex` base).
//! * Headers: `originator: pi`, the model's and caller's headers, `Authorization: Bearer
//!   <token>`, `chatgpt-account-id` (the `chatgpt_account_id` claim under
//!   `https://api.openai.com/auth` of the OAuth access token, a JWT), `OpenAI-Beta:
//!   responses=experimental`, `accept: text/event-stream`, and `session-id` /
//!   `x-client-request-id` = the session id.
//! * Body: `model, store: false, stream: true, input, text: {verbosity: "low"}, include:
//!   ["reasoning.encrypted_content"], prompt_cache_key, tool_choice: "auto",
//!   parallel_tool_calls: true, max_output_tokens, tools (strict: null), reasoning` — with
//!   thinking off a reasoning model is sent `reasoning: {effort: "none", summary: "auto"}`.
//!   The system prompt is the leading `developer` item (no top-level `instructions`).
//! * Transport (settings `transport`, [`Transport`]): except with `sse`, the request first goes
//!   over the WebSocket ([`super::codex_websocket`]); SSE is used when that fails before its
//!   first event, and for the rest of the session after any WebSocket failure.
//! * SSE bodies are sent zstd-compressed (`content-encoding: zstd`, level 3, see
//!   [`super::openai_responses::zstd_body`]), as upstream does under Node 22.15+ (plain JSON if
//!   compression fails). WebSocket frames are never compressed.
//! * Not done (upstream does them): `configuration_update` items, proxies for the WebSocket.

use super::azure_openai_responses::fail_now;
use super::codex_websocket::{self, WsOutcome, WsRequest};
use super::common::{self, apply_headers, event_stream, extra_headers, resolve_api_key};
use super::openai_responses::{
    cache_session, clamp_cache_key, convert_input, convert_tools, max_output_tokens, run, Compat,
    Flavor, ResponsesRequest, OPENAI_TOOL_CALL_PROVIDERS,
};
use super::HttpOptions;
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions, Transport};
use crate::types::{Context, Model};
use base64::Engine as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};

/// The `api` value of this adapter.
pub const API: &str = "openai-codex-responses";

/// The claim holding the ChatGPT account of an access token.
const JWT_CLAIM_PATH: &str = "https://api.openai.com/auth";

/// The `openai-codex-responses` adapter (one HTTP request per [`Provider::stream`]).
#[derive(Debug, Clone)]
pub struct OpenAiCodexResponses {
    client: common::LazyClient,
}

impl Default for OpenAiCodexResponses {
    fn default() -> Self {
        OpenAiCodexResponses {
            client: common::LazyClient::Default,
        }
    }
}

impl OpenAiCodexResponses {
    /// The adapter over a new HTTP client with `http`'s timeouts and retries.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        OpenAiCodexResponses { client }
    }
}

/// The ChatGPT account id in an OAuth access token (a JWT: the `chatgpt_account_id` of claim
/// `https://api.openai.com/auth`), or upstream's error text
/// `Failed to extract accountId from token`.
pub fn account_id_from_token(token: &str) -> Result<String, String> {
    const ERR: &str = "Failed to extract accountId from token";
    let parts: Vec<&str> = token.split('.').collect();
    let [_, payload, _] = parts.as_slice() else {
        return Err(ERR.into());
    };
    let payload = payload.trim_end_matches('=');
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(payload))
        .map_err(|_| ERR.to_owned())?;
    let claims: Value = serde_json::from_slice(&bytes).map_err(|_| ERR.to_owned())?;
    claims
        .get(JWT_CLAIM_PATH)
        .and_then(|c| c.get("chatgpt_account_id"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ERR.to_owned())
}

/// The WebSocket endpoint for a Codex `baseUrl`: [`codex_url`] with `ws://` / `wss://`.
pub fn codex_websocket_url(base_url: &str) -> String {
    let url = codex_url(base_url);
    if let Some(rest) = url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        url
    }
}

/// The SSE endpoint for a Codex `baseUrl` (see the module docs).
pub fn codex_url(base_url: &str) -> String {
    let base = if base_url.trim().is_empty() {
        "https://chatgpt.com/backend-api"
    } else {
        base_url
    };
    let n = base.trim_end_matches('/');
    if n.ends_with("/codex/responses") {
        n.to_owned()
    } else if n.ends_with("/codex") {
        format!("{n}/responses")
    } else {
        format!("{n}/codex/responses")
    }
}

impl Provider for OpenAiCodexResponses {
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
        let prepared = prepare(&model, context, &options, &tuning);
        let client = self.client.clone();
        let transport = tuning.transport;
        event_stream(move |em| async move {
            let (request, ws) = match prepared {
                Ok(p) => p,
                Err(message) => return fail_now(&em, &model, message),
            };
            if transport != Transport::Sse
                && !codex_websocket::sse_fallback_active(ws.session.as_deref())
            {
                let idle = client.options().idle_timeout_ms;
                let started = std::time::Instant::now();
                let outcome =
                    codex_websocket::stream(&em, &model, &ws, &options, transport, idle, started)
                        .await;
                if let WsOutcome::Emitted = outcome {
                    return;
                }
            }
            run(em, client, model, request, options).await
        })
    }
}

fn prepare(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
) -> Result<(ResponsesRequest, WsRequest), String> {
    let token = resolve_api_key(model, options)
        .ok_or_else(|| format!("No API key for provider: {}", model.provider))?;
    let account = account_id_from_token(&token)?;
    let session = cache_session(options, tuning).map(clamp_cache_key);

    let compat = Compat::resolve(model, true);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    body.insert(
        "input".into(),
        Value::Array(convert_input(
            model,
            context,
            &compat,
            &OPENAI_TOOL_CALL_PROVIDERS,
        )),
    );
    body.insert("text".into(), json!({"verbosity": "low"}));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if let Some(s) = &session {
        body.insert("prompt_cache_key".into(), json!(s));
    }
    body.insert("tool_choice".into(), json!("auto"));
    body.insert("parallel_tool_calls".into(), json!(true));
    if compat.supports_max_output_tokens {
        body.insert(
            "max_output_tokens".into(),
            json!(max_output_tokens(model, options)),
        );
    }
    if !context.tools.is_empty() {
        body.insert(
            "tools".into(),
            convert_tools(context, compat.supports_strict_mode, Value::Null),
        );
    }
    if model.reasoning {
        // Thinking off is sent as effort `none` (or the model's `off` entry; `null` = no field).
        let effort = match super::openai_responses::reasoning_effort(model, options) {
            Some(e) => Some(e),
            None => match model.thinking_level_map.as_ref().and_then(|m| m.get("off")) {
                Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                _ => Some("none".to_owned()),
            },
        };
        if let Some(effort) = effort {
            body.insert(
                "reasoning".into(),
                json!({"effort": effort, "summary": "auto"}),
            );
        }
    }

    let mut base = HeaderMap::new();
    let mut extra = vec![("originator".to_owned(), "pi".to_owned())];
    extra.extend(extra_headers(model, options));
    apply_headers(&mut base, extra);
    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
        base.insert(AUTHORIZATION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&account) {
        base.insert(HeaderName::from_static("chatgpt-account-id"), v);
    }

    let mut ws_headers = base.clone();
    ws_headers.remove(ACCEPT);
    ws_headers.remove(CONTENT_TYPE);
    ws_headers.insert(
        HeaderName::from_static("openai-beta"),
        HeaderValue::from_static("responses_websockets=2026-02-06"),
    );
    let request_id = session
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    apply_headers(
        &mut ws_headers,
        [
            ("x-client-request-id".to_owned(), request_id.clone()),
            ("session-id".to_owned(), request_id),
        ],
    );

    let mut headers = base;
    headers.insert(
        HeaderName::from_static("openai-beta"),
        HeaderValue::from_static("responses=experimental"),
    );
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(s) = &session {
        apply_headers(
            &mut headers,
            [
                ("session-id".to_owned(), s.clone()),
                ("x-client-request-id".to_owned(), s.clone()),
            ],
        );
    }
    let body = Value::Object(body);
    let ws = WsRequest {
        url: codex_websocket_url(&model.base_url),
        headers: ws_headers,
        body: body.clone(),
        session,
        account,
        compat,
    };
    let sse = ResponsesRequest {
        url: codex_url(&model.base_url),
        headers,
        body,
        flavor: Flavor::Codex,
        zstd: true,
        hooks: None,
    };
    Ok((sse, ws))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_id_and_url() {
        let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": "acc-1"}});
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        assert_eq!(
            account_id_from_token(&format!("h.{payload}.s")).unwrap(),
            "acc-1"
        );
        assert!(account_id_from_token("nope").is_err());
        assert_eq!(
            codex_url("https://chatgpt.com/backend-api"),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(codex_url("http://h/x/codex/"), "http://h/x/codex/responses");
    }
}
