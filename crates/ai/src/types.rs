//! Messages, content blocks, usage and models, named as on the wire.
//!
//! Source: spec `messages-and-models.md` §2–§7 (upstream `packages/ai/src/types.ts`,
//! `packages/coding-agent/src/core/messages.ts`). Optional fields are omitted when unset.

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
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_signature: Option<String>,
}

/// `{"type":"thinking","thinking":…,"thinkingSignature"?,"redacted"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThinkingContent {
    pub thinking: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
}

/// `{"type":"image","data":<base64 without data: prefix>,"mimeType":"image/png"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    pub data: String,
    pub mime_type: String,
}

/// `{"type":"toolCall","id","name","arguments":{…}}`. `arguments` is always a JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// Any content block. Which variants are legal depends on the message role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Content {
    #[serde(rename = "text")]
    Text(TextContent),
    #[serde(rename = "thinking")]
    Thinking(ThinkingContent),
    #[serde(rename = "image")]
    Image(ImageContent),
    #[serde(rename = "toolCall")]
    ToolCall(ToolCall),
}

impl Content {
    /// A plain text block.
    pub fn text(s: impl Into<String>) -> Self {
        Content::Text(TextContent {
            text: s.into(),
            text_signature: None,
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
    Text(String),
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
    #[serde(serialize_with = "js_f64")]
    pub input: f64,
    #[serde(serialize_with = "js_f64")]
    pub output: f64,
    #[serde(serialize_with = "js_f64")]
    pub cache_read: f64,
    #[serde(serialize_with = "js_f64")]
    pub cache_write: f64,
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
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "cacheWrite1h"
    )]
    pub cache_write_1h: Option<u64>,
    /// Reasoning tokens (a subset of `output`). Upstream 1.6 writes it only for APIs that report
    /// it (`openai-completions`: always once usage arrived); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    pub total_tokens: u64,
    pub cost: Cost,
}

impl Usage {
    /// Fill `cost` from the model's per-million price table (spec §3 cost formula).
    pub fn compute_cost(&mut self, price: &ModelCost) {
        let m = 1_000_000.0;
        self.cost.input = price.input / m * self.input as f64;
        self.cost.output = price.output / m * self.output as f64;
        self.cost.cache_read = price.cache_read / m * self.cache_read as f64;
        self.cost.cache_write = price.cache_write / m * self.cache_write as f64;
        self.cost.total =
            self.cost.input + self.cost.output + self.cost.cache_read + self.cost.cache_write;
    }
}

/// Why an assistant message ended (spec §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
    /// Only on the partial message of `message_start`.
    Pending,
}

/// Thinking levels in canonical order (spec §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

impl ThinkingLevel {
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];
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
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// `role:"system"` message (upstream 1.6: the system prompt is recorded as a message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMessage {
    pub content: UserContent,
    /// Section name → text, in prompt order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections: Option<Map<String, Value>>,
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_added: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_removed: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    pub content: UserContent,
    pub timestamp: i64,
}

/// An assistant response (spec §4.3). `timestamp` is when the request started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub content: Vec<Content>,
    pub api: String,
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    pub stop_reason: StopReason,
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<ThinkingLevel>,
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
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    pub timestamp: i64,
}

/// Output of an RPC `bash` command (spec §4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    pub command: String,
    pub output: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
    pub timestamp: i64,
}

/// Every message role of the coding agent. Unknown roles are kept verbatim in `Other`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum Message {
    #[serde(rename = "system")]
    System(SystemMessage),
    #[serde(rename = "user")]
    User(UserMessage),
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
    #[serde(rename = "bashExecution")]
    BashExecution(BashExecutionMessage),
    /// `custom`, `branchSummary`, `compactionSummary` and unknown roles: fields without `role`.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl Message {
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
    pub fn user_text(text: impl Into<String>) -> Self {
        Message::User(UserMessage {
            content: UserContent::Blocks(vec![Content::text(text)]),
            timestamp: now_ms(),
        })
    }
}

/// Per-million-token prices in US dollars (spec §7.1 `cost`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub input: f64,
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub output: f64,
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub cache_read: f64,
    #[serde(serialize_with = "js_f64")]
    #[serde(default)]
    pub cache_write: f64,
}

/// A model as the registry and RPC expose it (spec §7.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    pub id: String,
    pub name: String,
    pub api: String,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<Map<String, Value>>,
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
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
            cost: ModelCost::default(),
            context_window: 0,
            max_tokens: 0,
            headers: None,
            compat: None,
        }
    }
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
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// What one LLM request carries. `messages` are already converted for the model
/// (only `user`, `assistant` and `toolResult` roles).
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub system_prompt: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
}
