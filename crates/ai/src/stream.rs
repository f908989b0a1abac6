//! The provider-neutral streaming interface.
//!
//! A provider turns a [`Context`] into a stream of [`AssistantMessageEvent`]s that always ends
//! with exactly one `Done` or `Error` carrying the final [`AssistantMessage`]. Providers never
//! return `Err` for network or API failures: those become `Error` with `stopReason: "error"`
//! (or `"aborted"` when the cancel token fired) and an `errorMessage`
//! (spec agent-loop.md §2.3 point 6).

use crate::types::{AssistantMessage, Context, Model, StopReason, ThinkingLevel, ToolCall};
use futures::stream::BoxStream;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// One streaming event, serialized as `assistantMessageEvent` in `message_update`
/// (upstream 1.6 sends these without `partial`; 1.6 notes §3).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent {
    /// The request was accepted; the partial message is empty. Not sent over RPC as an update.
    Start {
        /// The empty partial message (`stopReason: "pending"`); not serialized.
        #[serde(skip)]
        partial: Box<AssistantMessage>,
    },
    /// `"type":"text_start"`: a text block opens (rpc-protocol.md §5.2).
    #[serde(rename_all = "camelCase")]
    TextStart {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
    },
    /// `"type":"text_delta"`: more text for an open text block.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// The appended text fragment.
        delta: String,
    },
    /// `"type":"text_end"`: a text block is complete.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// The block's full text.
        content: String,
    },
    /// `"type":"thinking_start"`: a thinking block opens.
    #[serde(rename_all = "camelCase")]
    ThinkingStart {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
    },
    /// `"type":"thinking_delta"`: more reasoning text for an open thinking block.
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// The appended reasoning fragment.
        delta: String,
    },
    /// `"type":"thinking_end"`: a thinking block is complete (signatures only appear in the
    /// final message).
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// The block's full thinking text (a placeholder when redacted).
        content: String,
    },
    /// `"type":"toolcall_start"`: a tool-call block opens.
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolCallStart {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// The tool call id.
        id: String,
        /// Wire `toolName`: the called tool's name.
        tool_name: String,
    },
    /// `"type":"toolcall_delta"`: a raw fragment of the arguments JSON text.
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolCallDelta {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// The appended JSON text fragment.
        delta: String,
    },
    /// `"type":"toolcall_end"`: a tool call is complete, with parsed arguments.
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolCallEnd {
        /// Wire `contentIndex`: index of the block in the final `message.content`.
        content_index: usize,
        /// Wire `toolCall`. Serialized as a content block (`{"type":"toolCall",…}`), as upstream sends it.
        #[serde(serialize_with = "serialize_tool_call_block")]
        tool_call: ToolCall,
    },
    /// The usage known so far changed (Anthropic `message_start`/`message_delta`, an OpenAI
    /// usage chunk); the cumulative counters with their cost. Not sent over RPC as an update:
    /// it is the `usage` of the `message_update`s that follow (upstream sends the live
    /// partial's usage).
    Usage {
        /// Cumulative usage so far.
        #[serde(skip)]
        usage: crate::types::Usage,
    },
    /// Normal end; `message.stopReason` is `stop`, `length` or `toolUse`. Not sent over RPC as
    /// an update (it becomes `message_end`).
    Done {
        /// Same as `message.stop_reason`.
        reason: StopReason,
        /// The final message; not serialized.
        #[serde(skip)]
        message: Box<AssistantMessage>,
    },
    /// Failure or abort; `message.stopReason` is `error` or `aborted`, `errorMessage` set. Not
    /// sent over RPC as an update (it becomes `message_end`).
    Error {
        /// `Error` or `Aborted`; same as `message.stop_reason`.
        reason: StopReason,
        /// The final message; not serialized.
        #[serde(skip)]
        message: Box<AssistantMessage>,
    },
}

fn serialize_tool_call_block<S: serde::Serializer>(tc: &ToolCall, s: S) -> Result<S::Ok, S::Error> {
    crate::types::Content::ToolCall(tc.clone()).serialize(s)
}

/// Per-request options.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// Credential for the provider; `None` (or empty) falls back to the provider's environment
    /// variable ([`crate::env_keys::env_api_key`]), and without one no auth header is sent.
    pub api_key: Option<String>,
    /// Thinking level; `None` or `Off` means no reasoning parameters are sent.
    pub reasoning: Option<ThinkingLevel>,
    /// Output token cap; default `min(model.maxTokens, 32000)` (agent-loop.md §2.3 point 4).
    pub max_tokens: Option<u64>,
    /// Session id, used by providers for prompt caching.
    pub session_id: Option<String>,
    /// Extra HTTP headers (model `headers` are added by the provider itself).
    pub headers: Vec<(String, String)>,
    /// Fires on abort: the stream ends with `Error { reason: Aborted }`.
    pub cancel: CancellationToken,
}

/// Request settings beyond [`StreamOptions`], passed through [`Provider::stream_tuned`].
/// (Kept separate so existing `StreamOptions { .. }` literals keep compiling.)
#[derive(Debug, Clone, Default)]
pub struct RequestTuning {
    /// Prompt-cache retention. [`CacheRetention::None`] (the compaction summarizer) sends no
    /// `cache_control` markers at all; upstream `CacheRetention`, default `short`.
    pub cache_retention: CacheRetention,
    /// Per-level thinking token budgets (settings `thinkingBudgets`) overriding the defaults
    /// used by budget-based Anthropic thinking (minimal 1024, low 2048, medium 8192, high 16384).
    pub thinking_budgets: Option<ThinkingBudgets>,
    /// Preferred transport where a provider has several (settings `transport`; today only
    /// `openai-codex-responses`). Default [`Transport::Auto`].
    pub transport: Transport,
    /// Hooks around the HTTP request (extensions' `before_provider_headers`,
    /// `before_provider_request`, `after_provider_response`); `None` = none. The
    /// `openai-completions`, `anthropic-messages`, `openai-responses`, Azure, Mistral and
    /// Bedrock adapters call all three; the Google and Vertex adapters the headers and payload
    /// hooks only (as upstream 1.6, whose Gemini SDK exposes no response); Codex none yet.
    pub hooks: Option<RequestHooks>,
}

/// What runs around one provider HTTP request (upstream pi-ai `onPayload` / `onResponse` and
/// the coding agent's header hook; upstream docs/extensions.md "before_provider_headers",
/// "before_provider_request", "after_provider_response"). Each is awaited; none may fail the
/// request (an implementation reports its own errors and answers "unchanged").
pub trait ProviderRequestHooks: Send + Sync {
    /// The assembled request headers (`name → value`, names as sent); returns the changes:
    /// `(name, Some(value))` sets or overrides, `(name, None)` removes. Called once per
    /// request (provider-level retries reuse the result).
    fn headers(
        &self,
        headers: Vec<(String, String)>,
    ) -> futures::future::BoxFuture<'static, Vec<(String, Option<String>)>>;
    /// The provider-specific JSON body, right before it is sent; returns the body to send
    /// (the same value when unchanged).
    fn payload(
        &self,
        payload: serde_json::Value,
    ) -> futures::future::BoxFuture<'static, serde_json::Value>;
    /// The HTTP status and response headers (lower-case names), before the body is read; for
    /// every response, errors included.
    fn response(
        &self,
        status: u16,
        headers: Vec<(String, String)>,
    ) -> futures::future::BoxFuture<'static, ()>;
}

/// A shared [`ProviderRequestHooks`] (the field of [`RequestTuning`]).
#[derive(Clone)]
pub struct RequestHooks(pub std::sync::Arc<dyn ProviderRequestHooks>);

impl std::fmt::Debug for RequestHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestHooks")
    }
}

/// Settings `transport` (upstream `Transport`, default `auto`; spec config.md). Only the
/// `openai-codex-responses` adapter reads it: `auto` and `websocket-cached` try the WebSocket
/// first and reuse the server's context of the previous response on a kept socket, `websocket`
/// tries the WebSocket sending the full context every time, `sse` never opens one; a WebSocket
/// that fails before its first event falls back to SSE in every mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    /// Server-sent events only.
    Sse,
    /// WebSocket first (full context each request), SSE as fallback.
    WebSocket,
    /// WebSocket first with connection-scoped `previous_response_id` continuation.
    WebSocketCached,
    /// As [`Transport::WebSocketCached`] (upstream's default).
    #[default]
    Auto,
}

impl Transport {
    /// The transport named by a settings value (`sse`, `websocket`, `websocket-cached`,
    /// `auto`), or `None` for anything else.
    pub fn from_setting(name: &str) -> Option<Transport> {
        match name {
            "sse" => Some(Transport::Sse),
            "websocket" => Some(Transport::WebSocket),
            "websocket-cached" => Some(Transport::WebSocketCached),
            "auto" => Some(Transport::Auto),
            _ => None,
        }
    }
}

/// Prompt-cache retention preference (upstream `CacheRetention`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheRetention {
    /// Send no cache markers.
    None,
    /// Default ephemeral (5 minute) caching.
    #[default]
    Short,
    /// Long retention (`ttl: "1h"` on Anthropic where supported).
    Long,
}

/// Thinking token budgets per level (settings `thinkingBudgets`); `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ThinkingBudgets {
    /// Budget in tokens for `minimal`; `None` = default (1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimal: Option<u64>,
    /// Budget in tokens for `low`; `None` = default (2048).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<u64>,
    /// Budget in tokens for `medium`; `None` = default (8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<u64>,
    /// Budget in tokens for `high`; `None` = default (16384).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<u64>,
}

impl ThinkingBudgets {
    /// The budget in tokens for `level` (upstream `thinkingBudgetForLevel`): the configured
    /// value, else the default (minimal 1024, low 2048, medium 8192, high 16384); `xhigh` and
    /// `max` use `high`'s; `off` gives 0.
    pub fn for_level(budgets: Option<&ThinkingBudgets>, level: ThinkingLevel) -> u64 {
        let c = budgets.copied().unwrap_or_default();
        match level {
            ThinkingLevel::Off => 0,
            ThinkingLevel::Minimal => c.minimal.unwrap_or(1024),
            ThinkingLevel::Low => c.low.unwrap_or(2048),
            ThinkingLevel::Medium => c.medium.unwrap_or(8192),
            _ => c.high.unwrap_or(16384),
        }
    }
}

/// The event stream of one request.
pub type AssistantStream = BoxStream<'static, AssistantMessageEvent>;

/// Drives `stream` to its end and returns the final assistant message: the one of its `done`
/// or `error` event (stop reason as the adapter set it), or `None` when the stream ended
/// without either (spec agent-loop.md: every stream ends in exactly one of them; the caller
/// decides what a missing one means). Events before the final one are dropped.
pub async fn final_message(mut stream: AssistantStream) -> Option<AssistantMessage> {
    use futures::StreamExt;
    while let Some(ev) = stream.next().await {
        match ev {
            AssistantMessageEvent::Done { message, .. }
            | AssistantMessageEvent::Error { message, .. } => return Some(*message),
            _ => {}
        }
    }
    None
}

/// A wire-API adapter (one per `api` value).
pub trait Provider: Send + Sync {
    /// The `api` value this adapter speaks, e.g. `"openai-completions"`.
    fn api(&self) -> &'static str;
    /// Start streaming one response. Must not block; all I/O happens inside the stream.
    fn stream(&self, model: &Model, context: &Context, options: StreamOptions) -> AssistantStream;
    /// Like [`Provider::stream`] with extra [`RequestTuning`]. The default ignores `tuning`;
    /// the built-in adapters honour it (`stream` = `stream_tuned` with the default tuning).
    fn stream_tuned(
        &self,
        model: &Model,
        context: &Context,
        options: StreamOptions,
        tuning: RequestTuning,
    ) -> AssistantStream {
        let _ = tuning;
        self.stream(model, context, options)
    }
}
