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

mod events;
mod input;
mod request;
mod response;
mod strict;

use super::common::{apply_headers, compat_str, event_stream, extra_headers, resolve_api_key};
use super::{common, HttpOptions};
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions};
use crate::types::{Context, Model};
pub(crate) use input::convert_input;
pub use request::{build_request_body, zstd_body, ZSTD_LEVEL};
pub(crate) use request::{
    cache_session, clamp_cache_key, convert_tools, max_output_tokens, off_effort, reasoning_effort,
    Compat, Flavor, ResponsesRequest, OPENAI_TOOL_CALL_PROVIDERS,
};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
pub(crate) use response::{run, EventReader};
pub use strict::{strict_schema, UnsupportedStrictSchema};

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

#[cfg(test)]
mod tests;
