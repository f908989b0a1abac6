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
        #[serde(skip)]
        partial: Box<AssistantMessage>,
    },
    #[serde(rename_all = "camelCase")]
    TextStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    TextDelta { content_index: usize, delta: String },
    #[serde(rename_all = "camelCase")]
    TextEnd {
        content_index: usize,
        content: String,
    },
    #[serde(rename_all = "camelCase")]
    ThinkingStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    ThinkingDelta { content_index: usize, delta: String },
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        content_index: usize,
        content: String,
    },
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolCallStart {
        content_index: usize,
        id: String,
        tool_name: String,
    },
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolCallDelta { content_index: usize, delta: String },
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolCallEnd {
        content_index: usize,
        /// Serialized as a content block (`{"type":"toolCall",…}`), as upstream sends it.
        #[serde(serialize_with = "serialize_tool_call_block")]
        tool_call: ToolCall,
    },
    /// Normal end; `message.stopReason` is `stop`, `length` or `toolUse`.
    Done {
        reason: StopReason,
        #[serde(skip)]
        message: Box<AssistantMessage>,
    },
    /// Failure or abort; `message.stopReason` is `error` or `aborted`, `errorMessage` set.
    Error {
        reason: StopReason,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimal: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medium: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<u64>,
}

/// The event stream of one request.
pub type AssistantStream = BoxStream<'static, AssistantMessageEvent>;

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
