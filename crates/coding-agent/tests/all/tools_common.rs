//! Shared helpers for the tools integration tests (included with `#[path]`).

#![allow(dead_code)]

use pi_agent::{AgentTool, ToolContext, ToolOutput};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// A context with a fresh cancel token whose updates are recorded.
pub fn ctx() -> (ToolContext, Arc<Mutex<Vec<ToolOutput>>>) {
    ctx_with(CancellationToken::new())
}

pub fn ctx_with(cancel: CancellationToken) -> (ToolContext, Arc<Mutex<Vec<ToolOutput>>>) {
    let updates = Arc::new(Mutex::new(Vec::new()));
    let sink = updates.clone();
    let ctx = ToolContext {
        call_id: "call_1".into(),
        cancel,
        on_update: Arc::new(move |o| sink.lock().unwrap().push(o)),
        nested: pi_agent::NestedCalls::new("call_1", None),
    };
    (ctx, updates)
}

/// Runs `tool` with a fresh context; an error is returned as its tool-result text.
pub async fn run(tool: &dyn AgentTool, args: Value) -> Result<ToolOutput, String> {
    let (c, _) = ctx();
    tool.execute(c, args).await.map_err(|e| e.to_string())
}

pub fn text(out: &ToolOutput) -> String {
    out.content
        .iter()
        .filter_map(|c| c.as_text())
        .collect::<Vec<_>>()
        .join("")
}

pub fn tool(cwd: &std::path::Path, name: &str) -> Arc<dyn AgentTool> {
    pi_coding_agent::tools::create_tools(cwd, &[name])
        .pop()
        .expect("known tool")
}
