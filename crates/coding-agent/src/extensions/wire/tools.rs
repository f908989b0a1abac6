//! The tool messages: the replies of the `tool_call` / `tool_result` rounds and of an
//! extension tool's `execute` ([`super::ToHost::Tool`]), and its partial results.

use super::lenient;
use serde::Deserialize;
use serde_json::Value;

/// The reply to [`ToHost::ToolCall`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallResult {
    /// Do not execute the tool.
    #[serde(default)]
    pub block: bool,
    /// Why (the error result's text).
    #[serde(default)]
    pub reason: Option<String>,
    /// The arguments after the handlers (they may edit `event.input`).
    #[serde(default)]
    pub input: Option<Value>,
}

/// The reply to [`ToHost::Tool`]: `{content, details?, isError?}` as the tool returned it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReply {
    /// The result's content blocks (unreadable = none).
    #[serde(default, deserialize_with = "lenient")]
    pub content: Vec<pi_ai::Content>,
    /// The tool's `details` (extension data; `null` = none).
    #[serde(default)]
    pub details: Option<Value>,
    /// Whether it is an error result (non-boolean = no).
    #[serde(default, deserialize_with = "lenient")]
    pub is_error: Option<bool>,
}

/// A tool's `onUpdate` value in the `{content, details?}` shape ([`FromHost::ToolUpdate`]).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolPartial {
    /// The partial content blocks.
    pub content: Vec<pi_ai::Content>,
    /// Its `details` (`null` = none).
    #[serde(default)]
    pub details: Option<Value>,
}

impl ToolPartial {
    /// `v` in that shape; `None` when it is not an object with readable `content`.
    pub fn from_value(v: &Value) -> Option<Self> {
        v.as_object()?;
        Self::deserialize(v).ok()
    }
}
