//! `google-generative-ai`: streaming `POST {baseUrl}/models/{model}:streamGenerateContent?alt=sse`
//! (the Gemini API, `GEMINI_API_KEY`), authenticated with `x-goog-api-key`.
//!
//! Source: upstream 1.6 `dist/api/google-generative-ai.js` (facts only) and the recordings in
//! `crates/coding-agent/tests/fixtures/providers/upstream/google.json`. The body, the stream
//! and the error texts are shared with `google-vertex` (`google_shared.rs`).
//!
//! Events: text and thinking parts stream as `*_start`/`*_delta`/`*_end`; a function call
//! arrives whole and yields `toolcall_start`, one `toolcall_delta` (its arguments as JSON) and
//! `toolcall_end`. Calls without an id (Gemini 2.x) get `<name>_<unix ms>_<counter>`.
//! Thought signatures are kept on the block they came with (`thinkingSignature`,
//! `textSignature`, `thoughtSignature` of a tool call) and replayed only to the same
//! provider and model, and only when they are valid base64.

use super::common::{self, resolve_api_key};
use super::google_shared::{stream_gemini, Flavor, Target};
use super::HttpOptions;
use crate::error::ProviderError;
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions};
use crate::types::{Context, Model};

/// The `api` value of this adapter.
pub const API: &str = "google-generative-ai";

/// Base URL when a model gives none (the Gemini API's `v1beta`).
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The `google-generative-ai` adapter over the HTTP client it was built with.
#[derive(Debug, Clone)]
pub struct GoogleGenerativeAi {
    client: common::LazyClient,
}

impl Default for GoogleGenerativeAi {
    fn default() -> Self {
        GoogleGenerativeAi {
            client: common::LazyClient::Default,
        }
    }
}

impl GoogleGenerativeAi {
    /// The adapter over a new HTTP client with `http`'s timeouts and retries.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        GoogleGenerativeAi { client }
    }
}

impl Provider for GoogleGenerativeAi {
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
        let api_key = resolve_api_key(model, &options);
        stream_gemini(
            self.client.clone(),
            model,
            context,
            options,
            &tuning,
            Flavor::Gemini,
            move |_client, model, _options| async move { target(&model, api_key) },
        )
    }
}

/// URL and `x-goog-api-key` header; without a key upstream's `No API key for provider: <p>`.
fn target(model: &Model, api_key: Option<String>) -> Result<Target, ProviderError> {
    let Some(key) = api_key else {
        return Err(ProviderError::Protocol {
            message: format!("No API key for provider: {}", model.provider),
        });
    };
    let base = if model.base_url.trim().is_empty() {
        DEFAULT_BASE_URL
    } else {
        model.base_url.trim()
    };
    Ok(Target {
        url: format!(
            "{}/models/{}:streamGenerateContent?alt=sse",
            base.trim_end_matches('/'),
            model.id
        ),
        auth: vec![("x-goog-api-key".to_owned(), key)],
    })
}
