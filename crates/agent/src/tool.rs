//! The tool interface the agent loop executes (spec agent-loop.md §3, tools.md §0).

use async_trait::async_trait;
use pi_ai::{Content, ToolDefinition};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a tool produced. Serialized as the `result` of `tool_execution_end`
/// (`{content, details?, structuredContent?, isError?}`), e.g. the bash tool returns
/// `structuredContent: {exit_code, output, truncated, wall_time_seconds}` and, for a non-zero
/// exit, `isError: true` (see golden `tool_bash_echo`, `tool_errors`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolOutput {
    /// Text/image blocks the model sees.
    pub content: Vec<Content>,
    /// Tool-specific data for UIs, not sent to the model; `None` = absent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
    /// Wire `structuredContent`: machine-readable result (bash); `None` = absent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub structured_content: Option<Value>,
    /// Wire `isError`. Set by tools that report failure as a result rather than as an `Err`
    /// (bash exit codes); `None` = absent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub is_error: Option<bool>,
}

impl ToolOutput {
    /// A result with one text block.
    pub fn text(s: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::text(s)],
            ..Default::default()
        }
    }
    /// The error result the loop builds from an `Err(error)` (with `error.to_string()`): one
    /// text block and `details: {}`.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::text(message)],
            details: Some(Value::Object(Default::default())),
            structured_content: None,
            is_error: None,
        }
    }
}

/// Why a tool call failed. `Display` is exactly the text of the error tool result the loop
/// builds from it (one text block, `details: {}`, `isError: true`; spec tools.md §0,
/// agent-loop.md §3), so wire output is the same as for the plain strings used before.
///
/// Tools that only have a message can use `?` on `Result<_, String>` (via `From<String>`,
/// which gives [`ToolError::Failed`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The call was stopped through [`ToolContext::cancel`]. Text: `Operation aborted`.
    #[error("Operation aborted")]
    Aborted,
    /// The arguments failed validation against the tool's schema (or the tool's own checks);
    /// the text is the validation message as is (tools.md §0.2).
    #[error("{0}")]
    InvalidArguments(String),
    /// No active tool has the called name (the payload). Text: `Tool <name> not found`.
    #[error("Tool {0} not found")]
    NotFound(String),
    /// The tool failed; the text is the message as is (upstream: a thrown `Error`'s message).
    #[error("{0}")]
    Failed(String),
    /// The tool's execution panicked; the payload is the panic message (`<unknown panic>` when
    /// it was not a string). Text: `Tool execution panicked: <message>`.
    #[error("Tool execution panicked: {0}")]
    Panicked(String),
}

impl From<String> for ToolError {
    /// [`ToolError::Failed`] with the text.
    fn from(text: String) -> Self {
        ToolError::Failed(text)
    }
}

impl From<&str> for ToolError {
    /// [`ToolError::Failed`] with the text.
    fn from(text: &str) -> Self {
        ToolError::Failed(text.to_owned())
    }
}

/// Callback for streaming partial results (`tool_execution_update.partialResult`, accumulated,
/// not a delta).
pub type UpdateFn = Arc<dyn Fn(ToolOutput) + Send + Sync>;

/// Per-call context handed to [`AgentTool::execute`].
#[derive(Clone)]
pub struct ToolContext {
    /// The `toolCall.id`.
    pub call_id: String,
    /// Fires on abort; tools must stop promptly (bash kills its process group) and return
    /// `Err(ToolError::Aborted)` or, for bash, an error whose text ends with `Command aborted`.
    pub cancel: CancellationToken,
    /// Partial-result sink.
    pub on_update: UpdateFn,
    /// The calls this tool makes to other tools itself (codemode scripts): their ids, events
    /// and the record that becomes the result's `nestedCalls`.
    pub nested: crate::NestedCalls,
}

/// A tool the model can call.
#[async_trait]
pub trait AgentTool: Send + Sync {
    /// Name, description and JSON-Schema parameters as sent to the model.
    fn definition(&self) -> ToolDefinition;
    /// Rewrites raw model arguments before validation (upstream `prepareArguments`, e.g. the
    /// edit tool accepts legacy shapes). The default returns them unchanged.
    fn prepare_arguments(&self, args: Value) -> Value {
        args
    }
    /// Run with already-validated arguments. `Err(e)` becomes an error tool result whose only
    /// content is `e.to_string()` (upstream: a thrown `Error`'s message). A panic is caught by
    /// the loop and reported as [`ToolError::Panicked`].
    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError>;
}
