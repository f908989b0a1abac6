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

mod messages;
mod request;
mod response;

use super::common::event_stream;
use super::{common, HttpOptions};
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions};
use crate::types::{Context, Model};
pub use request::build_request_body;
use response::run;

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
