//! Tools registered by extensions (`pi.registerTool`), executed in the extension host.

use super::host::HostError;
use super::wire::{EmptyObjectSchema, ToHost, ToolInfo, ToolPartial, ToolReply};
use super::Extensions;
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// One extension tool: its definition as the extension gave it; `execute` runs the
/// extension's `execute(toolCallId, params, signal, onUpdate, ctx)` in the host.
pub struct ExtensionTool {
    /// Name, description, parameters (JSON Schema) and prompt hints.
    pub info: ToolInfo,
    /// The host it runs in.
    pub extensions: Arc<Extensions>,
}

#[async_trait]
impl AgentTool for ExtensionTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.info.name.clone(),
            description: self.info.description.clone().unwrap_or_default(),
            parameters: self
                .info
                .parameters
                .clone()
                .unwrap_or_else(EmptyObjectSchema::value),
        }
    }

    /// The result is `{content, details?, isError?}` as the extension returned it; a thrown
    /// error becomes an error result with its message; an abort answers `Operation aborted`.
    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let host = self.extensions.host();
        let id = host.next_id();
        let msg = ToHost::Tool {
            id,
            name: self.info.name.clone(),
            tool_call_id: ctx.call_id.clone(),
            params: args,
        };
        // Partial results stream as tool_execution_update; an abort fires the tool's
        // AbortSignal and the call ends at once as `Operation aborted`.
        let on_update = ctx.on_update.clone();
        let updates: super::host::UpdateSink = Arc::new(move |partial: Value| {
            on_update(partial_output(partial));
        });
        let reply = tokio::select! {
            r = host.request_with_updates(id, &msg, None, updates, false) => r,
            _ = ctx.cancel.cancelled() => {
                host.abort(id);
                return Err(ToolError::Aborted);
            }
        };
        let v = match reply {
            Ok(v) => v,
            Err(HostError::Handler(text)) => return Err(ToolError::Failed(text)),
            Err(e) => return Err(ToolError::Failed(e.to_string())),
        };
        let reply = ToolReply::deserialize(&v).unwrap_or_default();
        Ok(ToolOutput {
            content: reply.content,
            details: reply.details,
            structured_content: None,
            is_error: reply.is_error.filter(|e| *e),
        })
    }
}

/// An `onUpdate` value as a partial result: `{content, details?}` as given; anything else is
/// kept as `details` with no content.
fn partial_output(v: Value) -> ToolOutput {
    match ToolPartial::from_value(&v) {
        Some(p) => ToolOutput {
            content: p.content,
            details: p.details,
            structured_content: None,
            is_error: None,
        },
        None => ToolOutput {
            details: Some(v),
            ..Default::default()
        },
    }
}
