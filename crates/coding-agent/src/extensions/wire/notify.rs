//! The events [`super::ToHost::Event`] carries ([`Notification`]), the agent-loop events in the
//! shape extensions receive them ([`ExtensionEvent`]), and the answers [`super::ToHost::CallResult`]
//! carries ([`CallResult`]).

use super::{
    AuthPromptAnswer, BeforeSettleEvent, CallAnswer, CallError, InputEvent, ProviderCallResult,
    ResourcesDiscoverEvent, SessionEvent, TranspileReply, TurnEndEvent,
};
use crate::protocol::rpc::{MessageUpdateEvent, RpcEvent};
use pi_agent::ToolOutput;
use pi_ai::Message;
use serde::Serialize;
use serde_json::Value;

/// The event of a [`super::ToHost::Event`]: each shape serializes as itself (`{type, …}`).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Notification<'a> {
    /// A session event (`session_start`, `session_before_*`, the compaction events, …).
    Session(&'a SessionEvent<'a>),
    /// `input` of a prompt.
    Input(InputEvent<'a>),
    /// `resources_discover`.
    ResourcesDiscover(ResourcesDiscoverEvent<'a>),
    /// The `turn_end` boundary.
    TurnEnd(&'a TurnEndEvent<'a>),
    /// The `agent_before_settle` boundary.
    BeforeSettle(&'a BeforeSettleEvent),
    /// An agent-loop event reshaped for the extensions ([`ExtensionEvent`]).
    Agent(Box<ExtensionEvent>),
    /// Any other protocol event, as the RPC client sees it.
    AsIs(&'a RpcEvent),
}

impl Notification<'_> {
    /// The event's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Notification::Session(e) => e.kind(),
            Notification::Input(_) => "input",
            Notification::ResourcesDiscover(_) => "resources_discover",
            Notification::TurnEnd(_) => "turn_end",
            Notification::BeforeSettle(_) => "agent_before_settle",
            Notification::Agent(e) => e.kind(),
            Notification::AsIs(e) => rpc_event_kind(e),
        }
    }
}

/// The agent-loop events as extensions receive them (upstream `_emitExtensionEvent`,
/// docs/extensions.md "Agent Events"): `agent_start {}`, `agent_end {messages}`,
/// `agent_settled {aborted}`, `turn_start
/// {turnIndex, timestamp}`, `turn_end {turnIndex}`, `message_start`/`message_end {message}`,
/// `message_update {assistantMessageEvent}`, `tool_execution_start {toolCallId, toolName,
/// args}`, `tool_execution_update {…, partialResult}`, `tool_execution_end {toolCallId,
/// toolName, result, isError, durationMs?}`; fields in this order (what the client's event has
/// beyond them, `willRetry`, `usage`, `parentToolCallId`, is left out).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExtensionEvent {
    /// A run started.
    AgentStart,
    /// A run ended.
    AgentEnd {
        /// The run's messages.
        messages: Vec<Message>,
    },
    /// The session-level run is over (upstream `_emitAgentSettled`: `{aborted}`).
    AgentSettled {
        /// The run was aborted.
        aborted: bool,
    },
    /// A turn started.
    #[serde(rename_all = "camelCase")]
    TurnStart {
        /// The turn's index in the run, from 0.
        turn_index: u64,
        /// When (ms since the epoch).
        timestamp: i64,
    },
    /// A turn ended (the count only; the session's turn boundary sends the full one).
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// The turn's index in the run, from 0.
        turn_index: u64,
    },
    /// A message started.
    MessageStart {
        /// The message.
        message: Message,
    },
    /// A streaming delta.
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        /// The delta.
        assistant_message_event: MessageUpdateEvent,
    },
    /// A message is final.
    MessageEnd {
        /// The message.
        message: Message,
    },
    /// A tool started.
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The call's arguments.
        args: Value,
    },
    /// A tool's partial result.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The call's arguments.
        args: Value,
        /// The partial result.
        partial_result: ToolOutput,
    },
    /// A tool finished.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// Its result.
        result: ToolOutput,
        /// Whether the result is an error.
        is_error: bool,
        /// How long it ran (ms), when measured.
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
}

impl ExtensionEvent {
    /// The event's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            ExtensionEvent::AgentStart => "agent_start",
            ExtensionEvent::AgentEnd { .. } => "agent_end",
            ExtensionEvent::AgentSettled { .. } => "agent_settled",
            ExtensionEvent::TurnStart { .. } => "turn_start",
            ExtensionEvent::TurnEnd { .. } => "turn_end",
            ExtensionEvent::MessageStart { .. } => "message_start",
            ExtensionEvent::MessageUpdate { .. } => "message_update",
            ExtensionEvent::MessageEnd { .. } => "message_end",
            ExtensionEvent::ToolExecutionStart { .. } => "tool_execution_start",
            ExtensionEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            ExtensionEvent::ToolExecutionEnd { .. } => "tool_execution_end",
        }
    }

    /// The extension shape of `ev` when it is one of the reshaped agent-loop events, with
    /// `turn_index` and `timestamp` for `turn_start`/`turn_end`; `None` for any other event
    /// (it passes as the client sees it).
    pub fn of(ev: &RpcEvent, turn_index: u64, timestamp: i64) -> Option<Self> {
        Some(match ev {
            RpcEvent::AgentStart => ExtensionEvent::AgentStart,
            RpcEvent::AgentEnd { messages, .. } => ExtensionEvent::AgentEnd {
                messages: messages.clone(),
            },
            RpcEvent::AgentSettled { aborted } => {
                ExtensionEvent::AgentSettled { aborted: *aborted }
            }
            RpcEvent::TurnStart => ExtensionEvent::TurnStart {
                turn_index,
                timestamp,
            },
            RpcEvent::TurnEnd { .. } => ExtensionEvent::TurnEnd { turn_index },
            RpcEvent::MessageStart { message } => ExtensionEvent::MessageStart {
                message: message.clone(),
            },
            RpcEvent::MessageUpdate {
                assistant_message_event,
                ..
            } => ExtensionEvent::MessageUpdate {
                assistant_message_event: assistant_message_event.clone(),
            },
            RpcEvent::MessageEnd { message } => ExtensionEvent::MessageEnd {
                message: message.clone(),
            },
            RpcEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => ExtensionEvent::ToolExecutionStart {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                args: args.clone(),
            },
            RpcEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
                ..
            } => ExtensionEvent::ToolExecutionUpdate {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                args: args.clone(),
                partial_result: partial_result.clone(),
            },
            RpcEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
                ..
            } => ExtensionEvent::ToolExecutionEnd {
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_name.clone(),
                result: result.clone(),
                is_error: *is_error,
                duration_ms: *duration_ms,
            },
            _ => return None,
        })
    }
}

/// The `type` of a protocol event as it serializes (rpc-protocol.md §5).
pub fn rpc_event_kind(ev: &RpcEvent) -> &'static str {
    match ev {
        RpcEvent::AgentStart => "agent_start",
        RpcEvent::AgentEnd { .. } => "agent_end",
        RpcEvent::AgentSettled { .. } => "agent_settled",
        RpcEvent::TurnStart => "turn_start",
        RpcEvent::TurnEnd { .. } => "turn_end",
        RpcEvent::MessageStart { .. } => "message_start",
        RpcEvent::MessageUpdate { .. } => "message_update",
        RpcEvent::MessageEnd { .. } => "message_end",
        RpcEvent::ToolExecutionStart { .. } => "tool_execution_start",
        RpcEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
        RpcEvent::ToolExecutionEnd { .. } => "tool_execution_end",
        RpcEvent::QueueUpdate { .. } => "queue_update",
        RpcEvent::CompactionStart { .. } => "compaction_start",
        RpcEvent::CompactionEnd { .. } => "compaction_end",
        RpcEvent::AutoRetryStart { .. } => "auto_retry_start",
        RpcEvent::AutoRetryEnd { .. } => "auto_retry_end",
        RpcEvent::SummarizationRetryScheduled { .. } => "summarization_retry_scheduled",
        RpcEvent::SummarizationRetryAttemptStart { .. } => "summarization_retry_attempt_start",
        RpcEvent::SummarizationRetryFinished {} => "summarization_retry_finished",
        RpcEvent::BashExecutionUpdate { .. } => "bash_execution_update",
        RpcEvent::ThinkingLevelChanged { .. } => "thinking_level_changed",
        RpcEvent::SessionInfoChanged { .. } => "session_info_changed",
        RpcEvent::EntryAppended { .. } => "entry_appended",
        RpcEvent::SessionWriteError { .. } => "session_write_error",
        RpcEvent::ExtensionError { .. } => "extension_error",
        RpcEvent::ExtensionUiRequest(_) => "extension_ui_request",
    }
}

/// `result` of a [`super::ToHost::CallResult`]: what host.mjs resolves the waiting call with
/// (`callApi`: `{value}` resolves, `{error}` throws; the other shapes are read by the call's
/// own code in host.mjs).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum CallResult {
    /// `null`: the call has nothing to answer (`authNotify`).
    Null,
    /// `{value}` or `{error}` (the session calls).
    Answer(CallAnswer),
    /// `{error}` of a call made before the session exists.
    Error(CallError),
    /// `{}` or `{error}` of a provider registration call.
    Provider(ProviderCallResult),
    /// `{value}` or `{cancelled: true}` of `authPrompt`.
    AuthPrompt(AuthPromptAnswer),
    /// `{code}` or `{error}` of `transpile`.
    Transpile(TranspileReply),
}

impl From<CallAnswer> for CallResult {
    fn from(a: CallAnswer) -> Self {
        CallResult::Answer(a)
    }
}
