//! `tool_search` (upstream 1.6 `docs/mcp.md` "Control tool exposure", `deferred` exposure):
//! ranks the MCP tools that are not declared (exposure `deferred` or `codemode`) against a
//! query with BM25 and loads the matches: from the next LLM call on they are declared like
//! `direct` tools. What was loaded is read back from the transcript (`details.loaded` of this
//! tool's results, see [`loaded_names`]), so it stays declared on that branch only, also
//! after a resume.
//!
//! Input `{query: string, limit?: number}` (default 8). Result text: the loaded tools, one
//! `- name: description` line each; `details: {loaded: [names]}`.

use super::{catalog, mcp_entries, SERVER_WAIT};
use crate::mcp::config::Exposure;
use crate::mcp::McpManager;
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Message, ToolDefinition};
use serde_json::{json, Value};
use std::sync::Arc;

/// The tool's name.
pub const NAME: &str = "tool_search";
/// Default number of matches.
pub const DEFAULT_LIMIT: usize = 8;
/// The one-line summary for the system prompt's tool list.
pub const SNIPPET: &str = "Find tools that are not declared yet and load the matching ones";

/// The `tool_search` tool.
pub struct ToolSearchTool {
    mcp: Arc<McpManager>,
}

impl ToolSearchTool {
    /// Searches the servers of `mcp`.
    pub fn new(mcp: Arc<McpManager>) -> Self {
        ToolSearchTool { mcp }
    }
}

/// Names loaded by earlier `tool_search` results in `messages` (the current branch), in order,
/// without repeats.
pub fn loaded_names(messages: &[Message]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in messages {
        let Message::ToolResult(r) = m else { continue };
        if r.tool_name != NAME {
            continue;
        }
        let Some(list) = r
            .details
            .as_ref()
            .and_then(|d| d.get("loaded"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for n in list.iter().filter_map(Value::as_str) {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// The tools `names` name among the connected servers' `deferred` and `codemode` tools.
pub fn loaded_tools(mcp: &Arc<McpManager>, names: &[String]) -> Vec<Arc<dyn AgentTool>> {
    if names.is_empty() {
        return Vec::new();
    }
    mcp_entries(mcp, &[Exposure::Deferred, Exposure::Codemode])
        .into_iter()
        .filter(|e| names.contains(&e.name))
        .map(|e| e.tool)
        .collect()
}

#[async_trait]
impl AgentTool for ToolSearchTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: NAME.into(),
            description: "Find tools that were not declared to you up front, such as the tools of MCP servers, and load the best matches (BM25 over their names and descriptions): they can be called from your next call on. Use it whenever you need an MCP tool you have not been given.".into(),
            parameters: json!({
                "type": "object",
                "required": ["query"],
                "properties": {
                    "query": {"type": "string", "description": "Words describing the tool you need."},
                    "limit": {"type": "number", "description": "How many tools to load at most (default 8)."}
                }
            }),
        }
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidArguments("query must be a string".into()))?;
        let limit = args
            .get("limit")
            .and_then(Value::as_f64)
            .filter(|n| *n >= 1.0)
            .map(|n| n as usize)
            .unwrap_or(DEFAULT_LIMIT);
        tokio::select! {
            _ = self.mcp.wait_for_all(SERVER_WAIT) => {}
            _ = ctx.cancel.cancelled() => return Err(ToolError::Aborted),
        }
        let pool = mcp_entries(&self.mcp, &[Exposure::Deferred, Exposure::Codemode]);
        let docs: Vec<String> = pool.iter().map(catalog::search_text).collect();
        let hits = catalog::bm25(&docs, query, limit);
        let loaded: Vec<&catalog::Entry> = hits.iter().map(|i| &pool[*i]).collect();
        let text = if loaded.is_empty() {
            format!("No tool matched \"{query}\"; nothing was loaded.")
        } else {
            let lines: Vec<String> = loaded
                .iter()
                .map(|e| {
                    let first = e.description.lines().next().unwrap_or("");
                    format!("- {}: {first}", e.name)
                })
                .collect();
            format!(
                "{} tool(s) loaded; you can call them from your next call on:\n{}",
                loaded.len(),
                lines.join("\n")
            )
        };
        Ok(ToolOutput {
            details: Some(
                json!({"loaded": loaded.iter().map(|e| e.name.clone()).collect::<Vec<_>>()}),
            ),
            ..ToolOutput::text(text)
        })
    }
}
