//! The `write` tool (spec tools.md §2; the 1.6 recording `tool_write` shows the success text
//! `Successfully wrote to <path>` and no `details`).

use super::schema;
use super::util::{
    check_aborted, file_lock, node_error, require_str, resolve_to_cwd, special_file_kind,
    tool_definition, SpecialFile,
};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde_json::Value;
use std::path::PathBuf;

/// The write tool.
pub struct WriteTool {
    cwd: PathBuf,
}

impl WriteTool {
    /// A write tool resolving relative paths against `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        WriteTool { cwd }
    }
}

/// JSON-Schema of the write tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &["path", "content"],
        vec![
            (
                "path",
                schema::string("File to write, absolute or relative to the working directory."),
            ),
            (
                "content",
                schema::string("The complete new contents of the file."),
            ),
        ],
    )
}

#[async_trait]
impl AgentTool for WriteTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition(
            "write",
            "Write text to a file, replacing it if it exists and creating it (and any \
             missing parent directories) if it does not.",
            parameters(),
        )
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let path_arg = require_str(&args, "path")?.to_string();
        let content = require_str(&args, "content")?.to_string();
        let abs = resolve_to_cwd(&path_arg, &self.cwd);
        let lock = file_lock(&abs);
        let _guard = lock.lock().await;
        check_aborted(&ctx.cancel)?;
        if let Some(dir) = abs.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| node_error(&e, "mkdir", Some(dir)))?;
        }
        check_aborted(&ctx.cancel)?;
        // Opening a FIFO for writing blocks until a reader appears (issue 28).
        if let Some(kind @ SpecialFile::Fifo) = special_file_kind(&abs) {
            return Err(
                format!("Cannot write {path_arg}: it is {kind}, not a regular file").into(),
            );
        }
        tokio::fs::write(&abs, content.as_bytes())
            .await
            .map_err(|e| node_error(&e, "open", Some(&abs)))?;
        check_aborted(&ctx.cancel)?;
        Ok(ToolOutput::text(format!(
            "Successfully wrote to {path_arg}"
        )))
    }
}
