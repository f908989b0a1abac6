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
    /// The error result the loop builds from an `Err(message)`: one text block and `details: {}`.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::text(message)],
            details: Some(Value::Object(Default::default())),
            structured_content: None,
            is_error: None,
        }
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
    /// `Err("Operation aborted")` or, for bash, output ending with `Command aborted`.
    pub cancel: CancellationToken,
    /// Partial-result sink.
    pub on_update: UpdateFn,
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
    /// Run with already-validated arguments. `Err(text)` becomes an error tool result whose
    /// only content is `text` (upstream: a thrown `Error`'s message).
    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, String>;
}
