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
    MessageStart {
        /// The message (for an assistant message, the empty partial).
        message: Message,
    },
    /// `message_update {usage, assistantMessageEvent}` (1.6 notes §3: no `message`, no `partial`).
    MessageUpdate {
        /// The partial message's cumulative usage so far (may be all zeros until reported).
        usage: Usage,
        /// Wire `assistantMessageEvent`: the streaming event (never `Start`/`Done`/`Error`).
        event: AssistantMessageEvent,
    },
    /// `message_end {message}`.
    MessageEnd {
        /// The final, authoritative message.
        message: Message,
    },
    /// `tool_execution_start {toolCallId, toolName, args}`.
    ToolExecutionStart {
        /// Wire `toolCallId`: the tool call's `id`.
        tool_call_id: String,
        /// Wire `toolName`.
        tool_name: String,
        /// The tool call's `arguments` object.
        args: Value,
        /// Wire `parentToolCallId`: for a call another tool made while it ran (a codemode
        /// script's call; [`crate::NestedCalls`]), that tool's call id; `None` = absent.
        parent_tool_call_id: Option<String>,
    },
    /// `tool_execution_update {toolCallId, toolName, args, partialResult}`.
    ToolExecutionUpdate {
        /// Wire `toolCallId`: the tool call's `id`.
        tool_call_id: String,
        /// Wire `toolName`.
        tool_name: String,
        /// The tool call's `arguments` object.
        args: Value,
        /// Wire `partialResult`: the output accumulated so far, not a delta.
        partial_result: ToolOutput,
        /// Wire `parentToolCallId`: for a call another tool made while it ran (a codemode
        /// script's call; [`crate::NestedCalls`]), that tool's call id; `None` = absent.
        parent_tool_call_id: Option<String>,
    },
    /// `tool_execution_end {toolCallId, toolName, result, isError, durationMs?}`; `durationMs`
    /// (ms) is absent for calls that failed before running (unknown tool, invalid arguments).
    ToolExecutionEnd {
        /// Wire `toolCallId`: the tool call's `id`.
        tool_call_id: String,
        /// Wire `toolName`.
        tool_name: String,
        /// The final tool output.
        result: ToolOutput,
        /// Wire `isError`: whether the call failed.
        is_error: bool,
        /// Wire `durationMs`: execution time in ms; `None` = absent (never ran).
        duration_ms: Option<u64>,
        /// Wire `parentToolCallId`: for a call another tool made while it ran (a codemode
        /// script's call; [`crate::NestedCalls`]), that tool's call id; `None` = absent.
        parent_tool_call_id: Option<String>,
    },
    /// `turn_end {message, toolResults}`.
    TurnEnd {
        /// The turn's assistant message.
        message: Message,
        /// Wire `toolResults`: results of the turn's tool calls, in order; empty if none.
        tool_results: Vec<ToolResultMessage>,
    },
    /// `agent_end {messages}`: every message created in this run, in order.
    AgentEnd {
        /// Every message created in this run, in order.
        messages: Vec<Message>,
    },
}
