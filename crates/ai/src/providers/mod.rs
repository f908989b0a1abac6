//! Provider adapters, one per wire API, the lookup from an `api` value to its adapter, and the
//! HTTP client settings they share.

pub mod anthropic_messages;
pub mod aws_credentials;
pub mod azure_openai_responses;
pub mod bedrock_converse_stream;
mod codex_websocket;
mod common;
pub mod google_auth;
pub mod google_generative_ai;
mod google_shared;
pub mod google_vertex;
pub mod mistral_conversations;
pub mod openai_codex_responses;
pub mod openai_completions;
pub mod openai_responses;
mod proxy;
mod strict_schema;

pub use anthropic_messages::AnthropicMessages;
pub use azure_openai_responses::AzureOpenAiResponses;
pub use bedrock_converse_stream::BedrockConverseStream;
pub use common::parse_streaming_json;
pub use google_generative_ai::GoogleGenerativeAi;
pub use google_vertex::GoogleVertex;
pub use mistral_conversations::MistralConversations;
pub use openai_codex_responses::OpenAiCodexResponses;
pub use openai_completions::OpenAiCompletions;
pub use openai_responses::OpenAiResponses;
pub use proxy::set_http_proxy;

use crate::stream::Provider;
use std::sync::Arc;

/// Upstream's default for settings `httpIdleTimeoutMs`, in ms (5 minutes; spec config.md §3.2).
pub const DEFAULT_HTTP_IDLE_TIMEOUT_MS: u64 = 300_000;

/// Default connect timeout in ms (10 s, the connect timeout of upstream's HTTP stack, undici).
pub const DEFAULT_HTTP_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Upstream's default for settings `retry.provider.maxRetryDelayMs`, in ms (60 s; upstream
/// docs/settings.md).
pub const DEFAULT_MAX_RETRY_DELAY_MS: u64 = 60_000;

/// HTTP client settings of the built-in adapters.
///
/// A request that exceeds a timeout ends as an assistant message with `stopReason: "error"`
/// and a retryable [`crate::ProviderError::Timeout`]: `Request timed out.` before the response
/// headers, `terminated: Body Timeout Error (UND_ERR_BODY_TIMEOUT)` when no byte arrives while
/// the body streams, and `Stream idle timeout: no event in <n> ms` when bytes arrive but no SSE
/// event does (a server sending only keep-alive comments).
///
/// Provider-level retries (upstream `retryProviderRequest`, settings `retry.provider.*`):
/// a request that fails before streaming with HTTP 408, 409, 429 or 5xx, or without any
/// response, is sent again up to [`HttpOptions::max_retries`] times, after the server's
/// `retry-after-ms`/`retry-after` delay or else `min(0.5 s · 2^i, 8 s)` minus up to 25 %
/// jitter. A server delay above [`HttpOptions::max_retry_delay_ms`] fails at once with
/// `Server requested <n>s retry delay (max: <m>s). <error>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    /// Longest wait for the TCP (and TLS) connection, in ms; `0` = no limit. Default
    /// [`DEFAULT_HTTP_CONNECT_TIMEOUT_MS`].
    pub connect_timeout_ms: u64,
    /// Longest silence while waiting for the response headers or for the next chunk of the
    /// body, in ms (settings `httpIdleTimeoutMs`, which upstream applies as both its headers
    /// and its body timeout); `0` = disabled. Default [`DEFAULT_HTTP_IDLE_TIMEOUT_MS`].
    pub idle_timeout_ms: u64,
    /// Longest wait for the response headers of one request, in ms (settings
    /// `retry.provider.timeoutMs`, default `httpIdleTimeoutMs`); `0` = no limit beyond
    /// `idle_timeout_ms`. Default [`DEFAULT_HTTP_IDLE_TIMEOUT_MS`].
    pub request_timeout_ms: u64,
    /// Provider-level retries of a request that failed before streaming (settings
    /// `retry.provider.maxRetries`, default 0 as in upstream 1.6).
    pub max_retries: u32,
    /// Longest server-requested delay a provider-level retry waits, in ms (settings
    /// `retry.provider.maxRetryDelayMs`, default [`DEFAULT_MAX_RETRY_DELAY_MS`]); `0` = no
    /// limit.
    pub max_retry_delay_ms: u64,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout_ms: DEFAULT_HTTP_CONNECT_TIMEOUT_MS,
            idle_timeout_ms: DEFAULT_HTTP_IDLE_TIMEOUT_MS,
            request_timeout_ms: DEFAULT_HTTP_IDLE_TIMEOUT_MS,
            max_retries: 0,
            max_retry_delay_ms: DEFAULT_MAX_RETRY_DELAY_MS,
        }
    }
}

/// The adapter for a model's `api` value (`"openai-completions"`, `"anthropic-messages"`,
/// `"google-generative-ai"`, `"google-vertex"`, `"mistral-conversations"`, `"openai-responses"`,
/// `"azure-openai-responses"`, `"openai-codex-responses"` or `"bedrock-converse-stream"`)
/// with the default [`HttpOptions`]; `None` for APIs this port does not speak.
pub fn provider_for_api(api: &str) -> Option<Arc<dyn Provider>> {
    match api {
        openai_completions::API => Some(Arc::new(OpenAiCompletions::default())),
        anthropic_messages::API => Some(Arc::new(AnthropicMessages::default())),
        google_generative_ai::API => Some(Arc::new(GoogleGenerativeAi::default())),
        google_vertex::API => Some(Arc::new(GoogleVertex::default())),
        mistral_conversations::API => Some(Arc::new(MistralConversations::default())),
        openai_responses::API => Some(Arc::new(OpenAiResponses::default())),
        azure_openai_responses::API => Some(Arc::new(AzureOpenAiResponses::default())),
        openai_codex_responses::API => Some(Arc::new(OpenAiCodexResponses::default())),
        bedrock_converse_stream::API => Some(Arc::new(BedrockConverseStream::default())),
        _ => None,
    }
}

/// The built-in adapters sharing one HTTP client (one connection pool) built with the given
/// [`HttpOptions`]. Build it once per process and look adapters up with
/// [`BuiltinProviders::for_api`].
#[derive(Debug, Clone)]
pub struct BuiltinProviders {
    openai_completions: Arc<OpenAiCompletions>,
    anthropic_messages: Arc<AnthropicMessages>,
    google_generative_ai: Arc<GoogleGenerativeAi>,
    google_vertex: Arc<GoogleVertex>,
    mistral_conversations: Arc<MistralConversations>,
    openai_responses: Arc<OpenAiResponses>,
    azure_openai_responses: Arc<AzureOpenAiResponses>,
    openai_codex_responses: Arc<OpenAiCodexResponses>,
    bedrock_converse_stream: Arc<BedrockConverseStream>,
}

impl BuiltinProviders {
    /// Both adapters over one client with `http`'s timeouts, built on the first request
    /// (nothing is paid at start-up).
    pub fn new(http: &HttpOptions) -> Self {
        let client = common::LazyClient::configured(http);
        BuiltinProviders {
            openai_completions: Arc::new(OpenAiCompletions::with_lazy(client.clone())),
            anthropic_messages: Arc::new(AnthropicMessages::with_lazy(client.clone())),
            google_generative_ai: Arc::new(GoogleGenerativeAi::with_lazy(client.clone())),
            google_vertex: Arc::new(GoogleVertex::with_lazy(client.clone())),
            mistral_conversations: Arc::new(MistralConversations::with_lazy(client.clone())),
            openai_responses: Arc::new(OpenAiResponses::with_lazy(client.clone())),
            azure_openai_responses: Arc::new(AzureOpenAiResponses::with_lazy(client.clone())),
            openai_codex_responses: Arc::new(OpenAiCodexResponses::with_lazy(client.clone())),
            bedrock_converse_stream: Arc::new(BedrockConverseStream::with_lazy(client)),
        }
    }

    /// The adapter for a model's `api` value, as [`provider_for_api`]; `None` for APIs this
    /// port does not speak.
    pub fn for_api(&self, api: &str) -> Option<Arc<dyn Provider>> {
        match api {
            openai_completions::API => Some(self.openai_completions.clone()),
            anthropic_messages::API => Some(self.anthropic_messages.clone()),
            google_generative_ai::API => Some(self.google_generative_ai.clone()),
            google_vertex::API => Some(self.google_vertex.clone()),
            mistral_conversations::API => Some(self.mistral_conversations.clone()),
            openai_responses::API => Some(self.openai_responses.clone()),
            azure_openai_responses::API => Some(self.azure_openai_responses.clone()),
            openai_codex_responses::API => Some(self.openai_codex_responses.clone()),
            bedrock_converse_stream::API => Some(self.bedrock_converse_stream.clone()),
            _ => None,
        }
    }
}

impl Default for BuiltinProviders {
    /// [`BuiltinProviders::new`] with the default [`HttpOptions`].
    fn default() -> Self {
        BuiltinProviders::new(&HttpOptions::default())
    }
}
