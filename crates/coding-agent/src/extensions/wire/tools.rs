//! The tool messages: the replies of the `tool_call` / `tool_result` rounds and of an
//! extension tool's `execute` ([`super::ToHost::Tool`]), and its partial results.

use super::{lenient, present};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The event of [`super::ToHost::ToolCall`] (upstream docs/extensions.md "tool_call",
/// `ToolCallEvent`): `{type: "tool_call", toolName, toolCallId, parentToolCallId?, input}`;
/// `parentToolCallId` (the call of the tool that made this one) is absent at the top level.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "tool_call", rename_all = "camelCase")]
pub struct ToolCallEvent<'a> {
    /// The tool's name.
    pub tool_name: &'a str,
    /// The call's id.
    pub tool_call_id: &'a str,
    /// The enclosing tool call, when nested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<&'a str>,
    /// The call's arguments (handlers may edit them).
    pub input: &'a Value,
}

/// The event of [`super::ToHost::ToolResult`] (upstream docs/extensions.md "tool_result",
/// `ToolResultEvent`): `{type: "tool_result", toolName, toolCallId, parentToolCallId?, input,
/// content, details, structuredContent?, isError}`; `details` is `null` when none,
/// `structuredContent` absent when none.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "tool_result", rename_all = "camelCase")]
pub struct ToolResultEvent<'a> {
    /// The tool's name.
    pub tool_name: &'a str,
    /// The call's id.
    pub tool_call_id: &'a str,
    /// The enclosing tool call, when nested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<&'a str>,
    /// The call's arguments.
    pub input: &'a Value,
    /// The result's content blocks.
    pub content: &'a [pi_ai::Content],
    /// The result's `details` (`null` = none).
    pub details: &'a Option<Value>,
    /// The machine-readable result, when the tool gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<&'a Value>,
    /// Whether the result is an error.
    pub is_error: bool,
}

/// The reply to [`super::ToHost::ToolResult`] when a handler changed the result (host.mjs
/// `emitToolResult`: `{content, details, isError}`; `null` = unchanged is handled by the
/// caller). `content` that does not read as content blocks and a non-boolean `isError` read as
/// absent (kept); `structuredContent` and `details` count when present, `null` = cleared.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultReply {
    /// The replacement content blocks.
    #[serde(default, deserialize_with = "lenient")]
    pub content: Option<Vec<pi_ai::Content>>,
    /// The replacement machine-readable result (`Some(null)` = cleared).
    #[serde(default, deserialize_with = "present")]
    pub structured_content: Option<Value>,
    /// The replacement `details` (`Some(null)` = cleared).
    #[serde(default, deserialize_with = "present")]
    pub details: Option<Value>,
    /// The replacement error flag.
    #[serde(default, deserialize_with = "lenient")]
    pub is_error: Option<bool>,
}

impl ToolResultReply {
    /// The reply `v`; anything but an object reads as `{}` (nothing replaced).
    pub fn from_value(v: &Value) -> Self {
        if !v.is_object() {
            return Self::default();
        }
        Self::deserialize(v).unwrap_or_default()
    }

    /// `output` and `is_error` with the reply's replacements: new `content` also drops the
    /// machine-readable result, so a redaction cannot leak through it (upstream
    /// `ToolResultEvent`); a present `structuredContent` / `details` replaces it (`null` =
    /// none).
    pub fn apply(
        self,
        output: pi_agent::ToolOutput,
        is_error: bool,
    ) -> (pi_agent::ToolOutput, bool) {
        let mut out = output;
        if let Some(c) = self.content {
            out.content = c;
            out.structured_content = None;
        }
        if let Some(s) = self.structured_content {
            out.structured_content = (!s.is_null()).then_some(s);
        }
        if let Some(d) = self.details {
            out.details = (!d.is_null()).then_some(d);
        }
        (out, self.is_error.unwrap_or(is_error))
    }
}

/// The parameters schema of an extension tool registered without one: `{type: "object",
/// properties: {}}` (no arguments).
#[derive(Debug, Clone, Serialize)]
pub struct EmptyObjectSchema {
    /// Always `"object"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always empty.
    pub properties: serde_json::Map<String, Value>,
}

impl EmptyObjectSchema {
    /// The schema as a value.
    pub fn value() -> Value {
        super::value_of(&Self {
            kind: "object",
            properties: serde_json::Map::new(),
        })
    }
}

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
