//! `bedrock-converse-stream`: Amazon Bedrock's ConverseStream API,
//! `POST {endpoint}/model/{model id, URL-encoded}/converse-stream`, answered in AWS
//! event-stream binary framing (see [`EventStreamDecoder`]).
//!
//! Source: upstream 1.6 `dist/api/bedrock-converse-stream.js` and `dist/providers/amazon-bedrock.js`
//! (facts only), the Bedrock Runtime API reference (Converse, ConverseStream), the AWS
//! event-stream encoding, and the recordings in
//! `crates/coding-agent/tests/fixtures/providers/upstream/bedrock*.json`.
//!
//! Credentials, as upstream resolves them ([`BedrockAuth::resolve`]): a bearer token
//! (`options.apiKey`, else `AWS_BEARER_TOKEN_BEDROCK`; `Authorization: Bearer`), else SigV4
//! (service `bedrock`) with `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, else
//! the rest of the AWS SDK's default credential chain, in its order: the `AWS_PROFILE` (or
//! `default`) profile of `~/.aws/credentials` / `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`,
//! `AWS_CONFIG_FILE`) with assume-role, static keys, web identity, `credential_process` or
//! SSO; then `AWS_WEB_IDENTITY_TOKEN_FILE`; container credentials; EC2 instance metadata
//! (see [`super::aws_credentials`]). `AWS_BEDROCK_SKIP_AUTH=1` signs with dummy keys (proxies
//! that need no auth).
//!
//! Endpoint and region ([`resolve_endpoint`]): a model `baseUrl` that is not a standard
//! `bedrock-runtime.<region>.amazonaws.com` host (a proxy, the tests' fake) is always used; a
//! standard one only while neither `AWS_REGION`/`AWS_DEFAULT_REGION` nor `AWS_PROFILE` is set.
//! Otherwise the endpoint is `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL`, or
//! `https://bedrock-runtime.<region>.amazonaws.com`. Region: from an inference-profile ARN,
//! else the variables, else the standard `baseUrl`'s, else the profile's `region`, else
//! `us-east-1`.
//!
//! Requests that fail before streaming with a throttling error, HTTP 429/500/502/503/504 or no
//! response are retried as the AWS SDK's standard retry mode does (`AWS_MAX_ATTEMPTS`
//! attempts in all, default 3; full-jitter backoff from 100 ms, 500 ms for throttling, capped
//! at 20 s). Errors read `<prefix>: <message>` (`Throttling error`, `Validation error`,
//! `Internal server error`, `Model stream error`, `Service unavailable`, else the exception
//! name), which the retry and context-overflow classifiers match.
//!
//! Strict-tool-limit fallback (upstream 1.6 `strict-tool-limits.js`): when tools were sent
//! strict (`compat.supportsStrictMode` and a tool preferring strict sampling) and Bedrock
//! answers `ValidationException` with one of Claude's strict-limit messages ("Too many strict
//! tools (", "The compiled grammar is too large", "Schemas contains too many parameters with
//! union types ("), the request is sent once more with every tool non-strict, and the session
//! (`StreamOptions::session_id`) sends its tools non-strict from then on. Upstream also adds
//! a `bedrock_strict_tools_fallback` diagnostic to the assistant message; our messages carry no
//! diagnostics, so it is logged (`tracing`, info) instead.
//!
//! HTTP version: upstream's SDK client speaks HTTP/2 to Bedrock by default; with
//! `AWS_BEDROCK_FORCE_HTTP1=1` (exactly `1`) it switches to its HTTP/1.1 handler for endpoints
//! that cannot take HTTP/2. Ours negotiates `h2` or `http/1.1` through TLS ALPN (plain `http://`
//! endpoints always get HTTP/1.1); with the variable the Bedrock request goes through a client
//! that offers only HTTP/1.1 ([`force_http1`]). The credential calls are unaffected, as upstream.

mod env;
mod eventstream;
mod request;
mod response;
mod send;

use super::common;
use super::HttpOptions;
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions};
use crate::types::{Context, Model};
pub(crate) use env::encode_label;
pub use env::{
    converse_stream_url, resolve_endpoint, AwsEnv, AwsKeys, BedrockAuth, BedrockEndpoint,
};
pub use eventstream::{EventStreamDecoder, Frame, FrameError};
pub use request::build_request_body;
use request::{strict_tools_disabled, tool_config};
use response::{run, Bodies};
pub(crate) use send::sign_sigv4;
pub use send::{bedrock_error_message, force_http1};

/// The `api` value of this adapter.
pub const API: &str = "bedrock-converse-stream";

/// Text sent for a block that must not be empty (upstream `EMPTY_TEXT_PLACEHOLDER`).
const EMPTY_TEXT: &str = "<empty>";

/// Thinking text shown for encrypted (redacted) reasoning.
const REDACTED_THINKING_TEXT: &str = "[Reasoning redacted]";

/// Beta of adaptive thinking's `block_binding`.
const BLOCK_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

/// Beta of thinking between tool calls (budget-based Claude).
const INTERLEAVED_BETA: &str = "interleaved-thinking-2025-05-14";

/// The tool-result text standing for an image moved after the tool results (Claude rejects
/// images inside error tool results).
const ERROR_TOOL_IMAGE_TEXT: &str = "(image attached after the tool results)";

/// Default region when nothing else names one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// SigV4 service name of the Bedrock runtime.
const SIGNING_SERVICE: &str = "bedrock";

/// Largest event-stream message accepted, in bytes (the format's own limit is 16 MiB).
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The `bedrock-converse-stream` adapter over the HTTP client it was built with.
#[derive(Debug, Clone)]
pub struct BedrockConverseStream {
    client: common::LazyClient,
}

impl Default for BedrockConverseStream {
    fn default() -> Self {
        BedrockConverseStream {
            client: common::LazyClient::Default,
        }
    }
}

impl BedrockConverseStream {
    /// The adapter over a new HTTP client with `http`'s timeouts.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        BedrockConverseStream { client }
    }
}

impl Provider for BedrockConverseStream {
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
        let env = AwsEnv::from_process();
        let body = build_request_body(&model, context, &options, &tuning, &env);
        // Upstream's strict-tool-limit fallback: the same request with every tool non-strict,
        // sent once if Bedrock rejects the strict tools for exceeding Claude's limits.
        let fallback = match tool_config(&model, context, strict_tools_disabled(&options)) {
            Some((_, true)) => tool_config(&model, context, true).map(|(config, _)| {
                let mut b = body.clone();
                b["toolConfig"] = config;
                b
            }),
            _ => None,
        };
        let client = self.client.clone();
        let bodies = Bodies {
            body,
            fallback,
            hooks: tuning.hooks,
        };
        common::event_stream(move |em| run(em, client, model, bodies, options, env))
    }
}

#[cfg(test)]
mod tests;
