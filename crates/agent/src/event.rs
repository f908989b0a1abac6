//! Low-level agent events (spec agent-loop.md §1, rpc-protocol.md §5.1–5.3).

use crate::tool::ToolOutput;
use pi_ai::{AssistantMessageEvent, Message, ToolResultMessage, Usage};
use serde_json::Value;

/// One event of a run, in emission order. The session layer serializes these as RPC events.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// `agent_start`.
    AgentStart,
    /// `turn_start`.
    TurnStart,
    /// `message_start {message}`; for an assistant message this is the empty partial with
    /// `stopReason: "pending"`.
    MessageStart { message: Message },
    /// `message_update {usage, assistantMessageEvent}` (1.6 notes §3: no `message`, no `partial`).
    MessageUpdate {
        usage: Usage,
        event: AssistantMessageEvent,
    },
    /// `message_end {message}`.
    MessageEnd { message: Message },
    /// `tool_execution_start {toolCallId, toolName, args}`.
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: Value,
    },
    /// `tool_execution_update {toolCallId, toolName, args, partialResult}`.
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        partial_result: ToolOutput,
    },
    /// `tool_execution_end {toolCallId, toolName, result, isError, durationMs?}`; `durationMs`
    /// (ms) is absent for calls that failed before running (unknown tool, invalid arguments).
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: ToolOutput,
        is_error: bool,
        duration_ms: Option<u64>,
    },
    /// `turn_end {message, toolResults}`.
    TurnEnd {
        message: Message,
        tool_results: Vec<ToolResultMessage>,
    },
    /// `agent_end {messages}`: every message created in this run, in order.
    AgentEnd { messages: Vec<Message> },
}
