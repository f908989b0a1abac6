//! Messages, content blocks, usage and models, named as on the wire.
//!
//! Source: spec `messages-and-models.md` §2–§7 (upstream `packages/ai/src/types.ts`,
//! `packages/coding-agent/src/core/messages.ts`). Optional fields are omitted when unset.

use crate::error::ProviderError;
pub use crate::extra::Extra;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Milliseconds since the Unix epoch, as used by message `timestamp`s.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Serializes an `f64` the way JavaScript's `JSON.stringify` does: integral values without a
/// fractional part (`0`, `3`), everything else as the shortest round-trip form.
pub fn js_f64<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

/// `{"type":"text","text":…}` (spec messages-and-models.md §2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextContent {
    /// The text itself.
    pub text: String,
    /// Wire `textSignature`: opaque provider metadata kept verbatim; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted block); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `{"type":"thinking","thinking":…,"thinkingSignature"?,"redacted"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    /// The reasoning text (a placeholder or empty when redacted).
    pub thinking: String,
    /// Wire `thinkingSignature`: opaque provider replay data (holds the encrypted payload when
    /// redacted); `None` = absent. Sent back unchanged on later turns (spec §2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// `true` for redacted thinking; `None` = absent (not redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted block); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `{"type":"image","data":<base64 without data: prefix>,"mimeType":"image/png"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64 image bytes, without a `data:` prefix.
    pub data: String,
    /// Wire `mimeType`, e.g. `image/png`.
    pub mime_type: String,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted block); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `{"type":"toolCall","id","name","arguments":{…}}`. `arguments` is always a JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Provider-assigned call id; tool results refer to it as `toolCallId`.
    pub id: String,
    /// Name of the tool to run.
    pub name: String,
    /// Arguments as a JSON object (a best-effort partial parse while streaming); an absent key
    /// reads as `{}`.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Wire `thoughtSignature`: Google-specific opaque value; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted block); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// Any content block. Which variants are legal depends on the message role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Content {
    /// `"type":"text"`.
    #[serde(rename = "text")]
    Text(TextContent),
    /// `"type":"thinking"` (assistant only).
    #[serde(rename = "thinking")]
    Thinking(ThinkingContent),
    /// `"type":"image"` (user, custom and tool-result content).
    #[serde(rename = "image")]
    Image(ImageContent),
    /// `"type":"toolCall"` (assistant only).
    #[serde(rename = "toolCall")]
    ToolCall(ToolCall),
}

impl Content {
    /// A plain text block.
    pub fn text(s: impl Into<String>) -> Self {
        Content::Text(TextContent {
            text: s.into(),
            text_signature: None,
            extra: Default::default(),
        })
    }
    /// The text of a text block, else `None`.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// User/custom message content: a plain string or an array of text/image blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// Wire form: a bare JSON string (extension/SDK messages, older sessions).
    Text(String),
    /// Wire form: an array of text/image blocks (what RPC `prompt`/`steer`/`follow_up` create).
    Blocks(Vec<Content>),
}

impl UserContent {
    /// Content as blocks (a string becomes one text block).
    pub fn to_blocks(&self) -> Vec<Content> {
        match self {
            UserContent::Text(s) => vec![Content::text(s.clone())],
            UserContent::Blocks(b) => b.clone(),
        }
    }
    /// All text blocks joined with "".
    pub fn joined_text(&self) -> String {
        match self {
            UserContent::Text(s) => s.clone(),
            UserContent::Blocks(b) => b.iter().filter_map(Content::as_text).collect(),
        }
    }
}

/// Per-component cost in US dollars (spec §3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Cost of uncached input tokens, US dollars.
    #[serde(serialize_with = "js_f64")]
    pub input: f64,
    /// Cost of output tokens, US dollars.
    #[serde(serialize_with = "js_f64")]
    pub output: f64,
    /// Wire `cacheRead`: cost of cache-read tokens, US dollars.
    #[serde(serialize_with = "js_f64")]
    pub cache_read: f64,
    /// Wire `cacheWrite`: cost of cache-write tokens, US dollars.
    #[serde(serialize_with = "js_f64")]
    pub cache_write: f64,
    /// Sum of the four component costs, US dollars.
    #[serde(serialize_with = "js_f64")]
    pub total: f64,
    /// Upstream 1.6 writes `totalFromProvider: false` once a provider reported usage; messages
    /// whose usage was never reported (HTTP errors, aborts before usage) omit the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_from_provider: Option<bool>,
}

/// Token usage of one response (spec §3). `reasoning` is a subset of `output`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens, reasoning tokens included.
    pub output: u64,
    /// Wire `cacheRead`: prompt-cache read tokens.
    pub cache_read: u64,
    /// Wire `cacheWrite`: prompt-cache write tokens.
    pub cache_write: u64,
    /// Reasoning tokens (a subset of `output`). Upstream 1.6 writes it only for APIs that report
    /// it (`openai-completions`: always once usage arrived); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    /// Wire `totalTokens`: the provider's total, or the sum of the four counters when it
    /// reports none.
    pub total_tokens: u64,
    /// Dollar cost per component, computed from the model's prices.
    pub cost: Cost,
    /// Wire `cacheWrite1h`: the part of `cacheWrite` written with 1-hour retention (Anthropic
    /// only); `None` = absent. Declared after `cost` because upstream 1.6 writes it last (raw
    /// golden `thinking_anthropic`: `…,"totalTokens":…,"cost":{…},"cacheWrite1h":0}`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "cacheWrite1h"
    )]
    pub cache_write_1h: Option<u64>,
}

impl Usage {
    /// Fill `cost` from the model's per-million price table (spec §3 cost formula).
    /// When the price table has [`ModelCost::tiers`], the tier with the highest
    /// `inputTokensAbove` that input + cache-read + cache-write tokens exceed gives the rates
    /// (upstream 1.6 `calculateCost`).
    pub fn compute_cost(&mut self, price: &ModelCost) {
        let m = 1_000_000.0;
        let input_tokens = (self.input + self.cache_read + self.cache_write) as f64;
        let mut rates = [
            price.input,
            price.output,
            price.cache_read,
            price.cache_write,
        ];
        let mut matched = -1.0;
        for tier in price.tiers.iter().flatten() {
            if input_tokens > tier.input_tokens_above && tier.input_tokens_above > matched {
                rates = [tier.input, tier.output, tier.cache_read, tier.cache_write];
                matched = tier.input_tokens_above;
            }
        }
        self.cost.input = rates[0] / m * self.input as f64;
        self.cost.output = rates[1] / m * self.output as f64;
        self.cost.cache_read = rates[2] / m * self.cache_read as f64;
        self.cost.cache_write = rates[3] / m * self.cache_write as f64;
        self.cost.total =
            self.cost.input + self.cost.output + self.cost.cache_read + self.cost.cache_write;
    }
}

/// Why an assistant message ended (spec §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// `"stop"`: normal completion.
    Stop,
    /// `"length"`: the output-token limit was hit; tool calls in the message are not run.
    Length,
    /// `"toolUse"`: the model asked for tool calls.
    ToolUse,
    /// `"error"`: the request or stream failed; `errorMessage` is set.
    Error,
    /// `"aborted"`: cancelled by the user or abort signal; `errorMessage` is set.
    Aborted,
    /// `"pending"`: only on the partial message of `message_start`; never persisted.
    Pending,
}

/// Thinking levels in canonical order (spec §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// `"off"`: no reasoning.
    Off,
    /// `"minimal"`.
    Minimal,
    /// `"low"`.
    Low,
    /// `"medium"`: the default when nothing is configured.
    Medium,
    /// `"high"`.
    High,
    /// `"xhigh"`: opt-in; needs an explicit `thinkingLevelMap` entry.
    Xhigh,
    /// `"max"`: opt-in; needs an explicit `thinkingLevelMap` entry.
    Max,
}

impl ThinkingLevel {
    /// All levels in canonical order, `off` to `max` (spec §8).
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];
    /// The wire string, e.g. `"xhigh"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }
    /// The level for a wire string; `None` for anything unknown.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// `role:"system"` message (upstream 1.6: the system prompt is recorded as a message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMessage {
    /// Prompt text: a string or text blocks (spec messages-and-models.md §4.1).
    pub content: UserContent,
    /// Section name → text, in prompt order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections: Option<Map<String, Value>>,
    /// Ms since the Unix epoch.
    pub timestamp: i64,
    /// Wire `toolsAdded`: tool definitions that become available here; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_added: Option<Vec<Value>>,
    /// Wire `toolsRemoved`: `[{name}]` of tools no longer available; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_removed: Option<Vec<Value>>,
    /// `true` = this message replaces all earlier system state; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted message); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `role:"user"` message (spec messages-and-models.md §4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// A string or an array of text/image blocks.
    pub content: UserContent,
    /// Ms since the Unix epoch.
    pub timestamp: i64,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted message); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An assistant response (spec §4.3). `timestamp` is when the request started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks.
    pub content: Vec<Content>,
    /// Wire API used for the request, e.g. `anthropic-messages` (spec §7.2).
    pub api: String,
    /// Provider id.
    pub provider: String,
    /// Requested model id.
    pub model: String,
    /// Token usage and cost; always present (all zeros until the provider reports it).
    pub usage: Usage,
    /// Wire `stopReason`.
    pub stop_reason: StopReason,
    /// Ms since the Unix epoch, set when the request started.
    pub timestamp: i64,
    /// Wire `responseId`: the provider's response/message id; `None` = not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Wire `errorMessage`: present for `error` and `aborted` stops; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Wire `rawStopReason`: the provider's own stop reason string; `None` = not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_stop_reason: Option<String>,
    /// Wire `durationMs`: request duration in ms (upstream 1.6, notes §11); `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Wire `thinkingLevel`: the level used for the request (upstream 1.6, notes §11);
    /// `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<ThinkingLevel>,
    /// The typed failure behind `errorMessage` (spec agent-loop.md §6.1, §7), set by the
    /// built-in adapters for `error`/`aborted` stops; `None` otherwise. Never serialized, so
    /// the wire and session JSON are unchanged and messages read back from JSON have `None`
    /// (classify those by text: [`crate::error::classify`]).
    #[serde(skip)]
    pub error: Option<Box<ProviderError>>,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted message); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

impl AssistantMessage {
    /// An empty message for `model`, as streamed before the first delta.
    pub fn empty(model: &Model) -> Self {
        AssistantMessage {
            content: Vec::new(),
            api: model.api.clone(),
            provider: model.provider.clone(),
            model: model.id.clone(),
            response_id: None,
            usage: Usage::default(),
            stop_reason: StopReason::Pending,
            error_message: None,
            raw_stop_reason: None,
            thinking_level: None,
            duration_ms: None,
            timestamp: now_ms(),
            error: None,
            extra: Default::default(),
        }
    }
    /// The tool calls in content order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|c| match c {
            Content::ToolCall(t) => Some(t),
            _ => None,
        })
    }
    /// All text blocks joined with "".
    pub fn text(&self) -> String {
        self.content.iter().filter_map(Content::as_text).collect()
    }
}

/// A tool's result as recorded in the transcript (spec §4.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// Wire `toolCallId`: the `id` of the matching [`ToolCall`].
    pub tool_call_id: String,
    /// Wire `toolName`: the `name` of the matching [`ToolCall`].
    pub tool_name: String,
    /// Text/image blocks the model sees.
    pub content: Vec<Content>,
    /// Tool-specific structured data for UIs, not sent to the model; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Wire `isError`: whether the tool failed.
    pub is_error: bool,
    /// Wire `durationMs`: execution time in ms (upstream 1.6, notes §11); `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Wire `nestedCalls`: the calls this tool made to other tools while it ran (a codemode
    /// script's calls); `None` = it made none (upstream 1.6 docs/message-types.md
    /// "ToolResultMessage").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_calls: Option<NestedToolCalls>,
    /// Ms since the Unix epoch.
    pub timestamp: i64,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted message); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Wire `nestedCalls` of a tool result: a bounded record of the calls the tool made to other
/// tools (never their results). Limits ([`NestedToolCalls::MAX_CALLS`] calls,
/// [`NestedToolCalls::MAX_ARGUMENT_BYTES_PER_CALL`] / [`NestedToolCalls::MAX_ARGUMENT_BYTES_TOTAL`]
/// bytes of arguments, [`NestedToolCalls::MAX_ERROR_CHARS`] characters of error) are upstream
/// 1.6's (docs/extensions.md "Calling Other Tools"); `complete: false` marks a record that lost
/// something to them or holds a call that never finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NestedToolCalls {
    /// The calls in start order.
    pub calls: Vec<NestedToolCallRecord>,
    /// Whether every call is recorded whole and finished.
    pub complete: bool,
}

impl NestedToolCalls {
    /// Calls kept in a record; later ones are dropped.
    pub const MAX_CALLS: usize = 256;
    /// Bytes of one call's JSON arguments above which they are left out (`argumentsBytes`).
    pub const MAX_ARGUMENT_BYTES_PER_CALL: usize = 8 * 1024;
    /// Bytes of arguments one record keeps in all.
    pub const MAX_ARGUMENT_BYTES_TOTAL: usize = 32 * 1024;
    /// Characters of a failed call's error text kept.
    pub const MAX_ERROR_CHARS: usize = 500;
}

/// One call of [`NestedToolCalls`].
///
/// Every field reads as its default when missing, so a hand-written or foreign record never
/// makes its message unreadable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NestedToolCallRecord {
    /// The call's id, `<calling tool call id>/<n>` (n from 1).
    pub id: String,
    /// The tool called.
    pub name: String,
    /// The call's arguments; `None` when they were over the limits (see `arguments_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Wire `argumentsBytes`: the size in bytes of arguments left out; `None` = kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_bytes: Option<u64>,
    /// `ok`, `error` or `unfinished` (kept as written, so a foreign value survives a rewrite).
    pub status: String,
    /// Wire `durationMs`: how long the call ran, in ms; `None` while unfinished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The error text of a failed call, cut to [`NestedToolCalls::MAX_ERROR_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Output of an RPC `bash` command (spec §4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    /// The command as given, without the configured shell prefix.
    pub command: String,
    /// Sanitized output, possibly tail-truncated.
    pub output: String,
    /// Wire `exitCode`; `None` = absent (cancelled or killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether the command was cancelled.
    pub cancelled: bool,
    /// Whether `output` was truncated.
    pub truncated: bool,
    /// Wire `fullOutputPath`: temp file holding the full output when truncated; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// Wire `excludeFromContext`: `true` = never sent to the model; `None` = absent (sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
    /// Ms since the Unix epoch.
    pub timestamp: i64,
    /// Unknown keys, kept verbatim and written after the known ones (upstream keeps every
    /// field of a persisted message); empty for anything pi creates.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Every message role of the coding agent. Unknown roles are kept verbatim in `Other`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum Message {
    /// `"role":"system"` (spec §4.1).
    #[serde(rename = "system")]
    System(SystemMessage),
    /// `"role":"user"` (spec §4.2).
    #[serde(rename = "user")]
    User(UserMessage),
    /// `"role":"assistant"` (spec §4.3).
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    /// `"role":"toolResult"` (spec §4.4).
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
    /// `"role":"bashExecution"` (spec §4.5).
    #[serde(rename = "bashExecution")]
    BashExecution(BashExecutionMessage),
    /// `custom`, `branchSummary`, `compactionSummary` and unknown roles: fields without `role`.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl Message {
    /// The wire `role` string; `"unknown"` for an [`Message::Other`] without one.
    pub fn role(&self) -> &str {
        match self {
            Message::System(_) => "system",
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "toolResult",
            Message::BashExecution(_) => "bashExecution",
            Message::Other(m) => m.get("role").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }
    /// A user message with one text block, timestamped now.
    pub fn user_text(text: impl Into<String>) -> Self {
        Message::User(UserMessage {
            content: UserContent::Blocks(vec![Content::text(text)]),
            timestamp: now_ms(),
            extra: Default::default(),
        })
    }
}

/// Per-million-token prices in US dollars (spec §7.1 `cost`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    /// US dollars per million uncached input tokens; absent reads as 0.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub input: f64,
    /// US dollars per million output tokens; absent reads as 0.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub output: f64,
    /// Wire `cacheRead`: US dollars per million cache-read tokens; absent reads as 0.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub cache_read: f64,
    /// Wire `cacheWrite`: US dollars per million cache-write tokens; absent reads as 0.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub cache_write: f64,
    /// Long-context price tiers (upstream 1.6 `ModelCost.tiers`): the tier with the highest
    /// `inputTokensAbove` below a request's input tokens replaces the four rates above
    /// ([`Usage::compute_cost`]). `None` = absent (one flat price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Vec<CostTier>>,
}

/// One long-context price tier of [`ModelCost::tiers`] (upstream 1.6 `ModelCostTier`; US
/// dollars per million tokens).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostTier {
    /// Wire `inputTokensAbove`: the tier applies when input + cache-read + cache-write tokens
    /// exceed this many tokens.
    #[serde(serialize_with = "js_f64")]
    pub input_tokens_above: f64,
    /// US dollars per million uncached input tokens.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub input: f64,
    /// US dollars per million output tokens.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub output: f64,
    /// Wire `cacheRead`: US dollars per million cache-read tokens.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub cache_read: f64,
    /// Wire `cacheWrite`: US dollars per million cache-write tokens.
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub cache_write: f64,
}

/// A model as the registry and RPC expose it (spec §7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    /// The provider's model id (RPC `set_model.modelId`).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Wire API, e.g. `openai-completions` (spec §7.2); open set.
    pub api: String,
    /// Provider id (spec §7.3); open set.
    pub provider: String,
    /// Wire `baseUrl`: endpoint base URL.
    pub base_url: String,
    /// Whether the model supports thinking/reasoning.
    pub reasoning: bool,
    /// Wire `thinkingLevelMap`: level → provider value, `null` = level unsupported (spec §8.1);
    /// `None` = no map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<Map<String, Value>>,
    /// Accepted input modalities: `"text"` and/or `"image"`.
    pub input: Vec<String>,
    /// Wire `inputLimits`: provider input limits as upstream 1.6 declares them
    /// (`{maxRequestBytes?, images?: {resize?: {maxWidth?, maxHeight?, maxBytes?,
    /// jpegQuality?}, maxPerMessage?, maxPerRequest?}}`; pi-ai `ModelInputLimits`), kept
    /// opaque; read with [`Model::image_resize_limit`]. `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_limits: Option<Value>,
    /// Prices in US dollars per million tokens.
    pub cost: ModelCost,
    /// Wire `contextWindow`: context size in tokens.
    pub context_window: u64,
    /// Wire `maxTokens`: maximum output tokens.
    pub max_tokens: u64,
    /// Extra HTTP headers sent with each request; `None` = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
    /// API-specific compatibility overrides, passed through opaquely (spec §7.4); `None` = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
    /// Every other field upstream's catalogue gives the model, kept verbatim and written back
    /// after the fields above (upstream 1.6 built-ins: `type` = `"chat"`, `promptCache`
    /// `{short, long}` in seconds, and gateway metadata such as `lab`, `enabled`, `providers`,
    /// `free`). Empty for custom models.
    #[serde(flatten, default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Model {
    /// The placeholder `get_state` reports when no model is configured (1.6 notes §15).
    pub fn unknown() -> Self {
        Model {
            id: "unknown".into(),
            name: "unknown".into(),
            api: "unknown".into(),
            provider: "unknown".into(),
            base_url: String::new(),
            reasoning: false,
            thinking_level_map: None,
            input: vec![],
            input_limits: None,
            cost: ModelCost::default(),
            context_window: 0,
            max_tokens: 0,
            headers: None,
            compat: None,
            extra: Map::new(),
        }
    }
    /// A number under `inputLimits.images.resize.<key>` (e.g. `maxWidth`, pixels; `maxBytes`,
    /// bytes of base64 payload; `jpegQuality`, 1–100), if set to a positive number.
    pub fn image_resize_limit(&self, key: &str) -> Option<f64> {
        self.input_limits
            .as_ref()?
            .get("images")?
            .get("resize")?
            .get(key)?
            .as_f64()
            .filter(|v| v.is_finite() && *v > 0.0)
    }
    /// Whether `input` lists `"image"`.
    pub fn supports_images(&self) -> bool {
        self.input.iter().any(|i| i == "image")
    }
    /// Supported thinking levels in canonical order (spec messages-and-models.md §8.1).
    pub fn supported_thinking_levels(&self) -> Vec<ThinkingLevel> {
        if !self.reasoning {
            return vec![ThinkingLevel::Off];
        }
        let map = self.thinking_level_map.as_ref();
        ThinkingLevel::ALL
            .into_iter()
            .filter(|l| {
                let entry = map.and_then(|m| m.get(l.as_str()));
                match entry {
                    Some(Value::Null) => false,
                    Some(_) => true,
                    None => !matches!(l, ThinkingLevel::Xhigh | ThinkingLevel::Max),
                }
            })
            .collect()
    }
}

/// A tool as offered to the model: name, description and JSON-Schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Tool name the model calls it by.
    pub name: String,
    /// Description shown to the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// What one LLM request carries. `messages` are already converted for the model
/// (only `user`, `assistant` and `toolResult` roles).
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The system prompt text; empty = none.
    pub system_prompt: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools offered to the model; empty = none.
    pub tools: Vec<ToolDefinition>,
}
