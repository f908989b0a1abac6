//! The tools the extensions registered, and their `tool_call` / `tool_result` hooks
//! ([`pi_agent::ToolCallHooks`]).

use super::wire::{self, ToHost, ToolCallEvent, ToolCallResult, ToolResultEvent, ToolResultReply};
use super::{tool, Extensions};
use pi_agent::{BeforeToolCall, ToolCallHooks, ToolOutput};
use pi_ai::ToolCall;
use serde_json::Value;
use std::sync::Arc;

impl Extensions {
    /// Every registered tool in registration order ([`wire::ToolInfo::seq`]; load order for
    /// equal places).
    fn tool_infos(&self) -> Vec<wire::ToolInfo> {
        let mut all: Vec<wire::ToolInfo> = self
            .loaded
            .read()
            .extensions
            .iter()
            .flat_map(|e| e.tools.iter().cloned())
            .collect();
        all.sort_by_key(|t| t.seq);
        all
    }

    /// `(tool name, extension path)` of every registered tool.
    pub fn tool_paths(&self) -> Vec<(String, String)> {
        self.loaded
            .read()
            .extensions
            .iter()
            .flat_map(|e| e.tools.iter().map(|t| (t.name.clone(), e.path.clone())))
            .collect()
    }

    /// The registered tools, in load order, as agent tools.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn pi_agent::AgentTool>> {
        self.tool_infos()
            .into_iter()
            .map(|info| {
                Arc::new(tool::ExtensionTool {
                    info,
                    extensions: self.clone(),
                }) as Arc<dyn pi_agent::AgentTool>
            })
            .collect()
    }

    /// The system-prompt view of the registered tools (snippet and guidelines as given).
    pub fn prompt_tools(&self) -> Vec<crate::system_prompt::PromptTool> {
        self.tool_infos()
            .iter()
            .map(|t| crate::system_prompt::PromptTool {
                definition: pi_ai::ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone().unwrap_or_default(),
                    parameters: t.parameters.clone().unwrap_or(Value::Null),
                },
                snippet: t.prompt_snippet.clone(),
                guidelines: t.prompt_guidelines.clone().unwrap_or_default(),
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl ToolCallHooks for Extensions {
    async fn before_tool_call(
        &self,
        call: &ToolCall,
        args: Value,
        parent: Option<&str>,
    ) -> BeforeToolCall {
        if let Some(f) = self.reload_failures.read().first() {
            return BeforeToolCall::Block(format!(
                "Tool call blocked: extension \"{}\" failed to load on reload ({}); fix it and reload, or restart pi",
                f.path, f.error
            ));
        }
        if !self.handles("tool_call") {
            return BeforeToolCall::Proceed(args);
        }
        let id = self.host.next_id();
        let event = ToolCallEvent {
            tool_name: &call.name,
            tool_call_id: &call.id,
            parent_tool_call_id: parent,
            input: &args,
        };
        let msg = ToHost::ToolCall { id, event };
        let started = std::time::Instant::now();
        let reply = self.host.request(id, &msg, Some(self.hook_timeout)).await;
        // Read by bench/extension_hooks.py (PI_LOG=pi_coding_agent::extensions=debug).
        tracing::debug!(
            "tool_call hook round trip us={}",
            started.elapsed().as_micros()
        );
        match reply {
            Ok(v) => match serde_json::from_value::<ToolCallResult>(v) {
                Ok(r) if r.block => BeforeToolCall::Block(r.reason.unwrap_or_default()),
                Ok(r) => BeforeToolCall::Proceed(r.input.unwrap_or(args)),
                Err(e) => {
                    let text = format!("invalid tool_call result: {e}");
                    self.error("<runtime>", "tool_call", &text);
                    BeforeToolCall::Block(format!("Blocked: extension {text}"))
                }
            },
            Err(e) => {
                let text = e.to_string();
                let owners = self.handlers_of("tool_call");
                for p in &owners {
                    self.error(p, "tool_call", &text);
                }
                BeforeToolCall::Block(format!(
                    "Tool call blocked: the extension tool_call hook failed ({text})"
                ))
            }
        }
    }

    async fn after_tool_call(
        &self,
        call: &ToolCall,
        args: &Value,
        output: ToolOutput,
        is_error: bool,
        parent: Option<&str>,
    ) -> (ToolOutput, bool) {
        if !self.handles("tool_result") || self.host.is_dead() {
            return (output, is_error);
        }
        let id = self.host.next_id();
        let event = ToolResultEvent {
            tool_name: &call.name,
            tool_call_id: &call.id,
            parent_tool_call_id: parent,
            input: args,
            content: &output.content,
            details: &output.details,
            structured_content: output.structured_content.as_ref(),
            is_error,
        };
        let msg = ToHost::ToolResult { id, event };
        let reply = self.host.request(id, &msg, Some(self.hook_timeout)).await;
        // The event borrows `output`, which the reply replaces.
        drop(msg);
        match reply {
            Ok(Value::Null) => (output, is_error),
            Ok(v) => ToolResultReply::from_value(&v).apply(output, is_error),
            Err(e) => {
                for p in self.handlers_of("tool_result") {
                    self.error(&p, "tool_result", &e.to_string());
                }
                (output, is_error)
            }
        }
    }
}
