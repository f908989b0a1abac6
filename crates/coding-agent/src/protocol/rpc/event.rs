//! Event records (rpc-protocol.md §5).

use super::QueueTexts;
use crate::session::SessionEntry;
use pi_agent::{AgentEvent, ToolOutput};
use pi_ai::{AssistantMessageEvent, Content, Message, ToolCall, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CompactionResult;

// ---------------------------------------------------------------------------------------------
// Events (stdout)
// ---------------------------------------------------------------------------------------------

/// `assistantMessageEvent` of `message_update` (§5.2): the provider's streaming events minus
/// `start`/`done`/`error`, which become `message_start`/`message_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MessageUpdateEvent {
    /// A text block opens.
    #[serde(rename_all = "camelCase")]
    TextStart {
        /// Index in the final `message.content`.
        content_index: usize,
    },
    /// More text.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The appended fragment.
        delta: String,
    },
    /// A text block is complete.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The block's full text.
        content: String,
    },
    /// A thinking block opens.
    #[serde(rename_all = "camelCase")]
    ThinkingStart {
        /// Index in the final `message.content`.
        content_index: usize,
    },
    /// More reasoning text.
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The appended fragment.
        delta: String,
    },
    /// A thinking block is complete.
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The full thinking text.
        content: String,
    },
    /// A tool call opens.
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolCallStart {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The tool call id.
        id: String,
        /// The called tool.
        tool_name: String,
    },
    /// A raw fragment of the arguments JSON.
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolCallDelta {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The fragment.
        delta: String,
    },
    /// A tool call is complete; `toolCall` is a `{"type":"toolCall",…}` block.
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolCallEnd {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The complete block.
        tool_call: Content,
    },
}

impl MessageUpdateEvent {
    /// The wire form of a provider streaming event; `None` for `start`/`usage`/`done`/`error`.
    pub fn from_stream(ev: AssistantMessageEvent) -> Option<Self> {
        use AssistantMessageEvent as A;
        Some(match ev {
            A::Start { .. } | A::Usage { .. } | A::Done { .. } | A::Error { .. } => return None,
            A::TextStart { content_index } => Self::TextStart { content_index },
            A::TextDelta {
                content_index,
                delta,
            } => Self::TextDelta {
                content_index,
                delta,
            },
            A::TextEnd {
                content_index,
                content,
            } => Self::TextEnd {
                content_index,
                content,
            },
            A::ThinkingStart { content_index } => Self::ThinkingStart { content_index },
            A::ThinkingDelta {
                content_index,
                delta,
            } => Self::ThinkingDelta {
                content_index,
                delta,
            },
            A::ThinkingEnd {
                content_index,
                content,
            } => Self::ThinkingEnd {
                content_index,
                content,
            },
            A::ToolCallStart {
                content_index,
                id,
                tool_name,
            } => Self::ToolCallStart {
                content_index,
                id,
                tool_name,
            },
            A::ToolCallDelta {
                content_index,
                delta,
            } => Self::ToolCallDelta {
                content_index,
                delta,
            },
            A::ToolCallEnd {
                content_index,
                tool_call,
            } => Self::ToolCallEnd {
                content_index,
                tool_call: Content::ToolCall(tool_call),
            },
        })
    }

    /// The tool call of a `toolcall_end`.
    pub fn tool_call(&self) -> Option<&ToolCall> {
        match self {
            Self::ToolCallEnd {
                tool_call: Content::ToolCall(c),
                ..
            } => Some(c),
            _ => None,
        }
    }
}

/// `reason` of `compaction_start`/`compaction_end` (§5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    /// The `compact` command.
    Manual,
    /// The context crossed `contextWindow − reserveTokens`.
    Threshold,
    /// The provider reported a context overflow.
    Overflow,
}

/// `source` of `summarization_retry_attempt_start` (§5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SummarizationSource {
    /// A compaction summary.
    Compaction,
    /// A branch summary.
    BranchSummary,
}

/// Every event record (§5), tagged by `type`; fields in upstream's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RpcEvent {
    /// A low-level run begins.
    AgentStart,
    /// A low-level run ended.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        /// Messages created by this run.
        messages: Vec<Message>,
        /// An automatic retry follows.
        will_retry: bool,
    },
    /// The session-level run is completely over (1.6 notes §1).
    AgentSettled {
        /// The run was aborted.
        aborted: bool,
    },
    /// A turn begins.
    TurnStart,
    /// A turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// The turn's assistant message.
        message: Message,
        /// Its tool results, in call order.
        tool_results: Vec<Message>,
    },
    /// A message enters the transcript (assistant: the empty partial).
    MessageStart {
        /// The message.
        message: Message,
    },
    /// A streaming update of the assistant message (1.6 notes §3: no `message`/`partial`).
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        /// Cumulative usage so far.
        usage: Usage,
        /// The streaming event.
        assistant_message_event: MessageUpdateEvent,
    },
    /// A message is final.
    MessageEnd {
        /// The final message.
        message: Message,
    },
    /// A tool call starts.
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        /// The tool call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The call's arguments.
        args: Value,
        /// For a call another tool made while it ran (a codemode script's call), that tool's
        /// call id; absent for the model's calls.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        parent_tool_call_id: Option<String>,
    },
    /// Accumulated partial output of a running tool.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        /// The tool call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The call's arguments.
        args: Value,
        /// Output so far (not a delta).
        partial_result: ToolOutput,
        /// For a call another tool made while it ran (a codemode script's call), that tool's
        /// call id; absent for the model's calls.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        parent_tool_call_id: Option<String>,
    },
    /// A tool call finished.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        /// The tool call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The final output.
        result: ToolOutput,
        /// The call failed.
        is_error: bool,
        /// Execution time (ms); absent when the call never ran.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        duration_ms: Option<u64>,
        /// For a call another tool made while it ran (a codemode script's call), that tool's
        /// call id; absent for the model's calls.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        parent_tool_call_id: Option<String>,
    },
    /// The pending queues changed (§5.4).
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        /// Pending steering texts.
        steering: Vec<String>,
        /// Pending follow-up texts.
        follow_up: Vec<String>,
    },
    /// A compaction begins (§5.5).
    CompactionStart {
        /// Why.
        reason: CompactionReason,
    },
    /// A compaction ended.
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        /// Why it ran.
        reason: CompactionReason,
        /// The result on success.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        result: Option<CompactionResult>,
        /// It was aborted or cancelled.
        aborted: bool,
        /// The interrupted turn is re-run.
        will_retry: bool,
        /// The failure text.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error_message: Option<String>,
    },
    /// A retry is scheduled (§5.6).
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        /// 1-based attempt.
        attempt: u32,
        /// `retry.maxRetries`.
        max_attempts: u32,
        /// Back-off before the attempt (ms).
        delay_ms: u64,
        /// The error being retried.
        error_message: String,
    },
    /// The retry loop ended.
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        /// A retried request succeeded.
        success: bool,
        /// The last attempt.
        attempt: u32,
        /// The last error (failure), or `Retry cancelled`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        final_error: Option<String>,
    },
    /// A summarization call will be retried (§5.7).
    #[serde(rename_all = "camelCase")]
    SummarizationRetryScheduled {
        /// 1-based attempt.
        attempt: u32,
        /// Maximum attempts.
        max_attempts: u32,
        /// Back-off (ms).
        delay_ms: u64,
        /// The error being retried.
        error_message: String,
    },
    /// A summarization retry attempt starts.
    SummarizationRetryAttemptStart {
        /// What is being summarized.
        source: SummarizationSource,
        /// The compaction's reason (absent for branch summaries).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        reason: Option<CompactionReason>,
    },
    /// A summarization retry loop finished.
    SummarizationRetryFinished {},
    /// Output of an RPC `bash` command (§5.8).
    BashExecutionUpdate {
        /// The `bash` command's id; absent when it had none.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<Value>,
        /// Sanitized output chunk.
        delta: String,
    },
    /// The effective thinking level changed (§5.10).
    ThinkingLevelChanged {
        /// The new level.
        level: String,
    },
    /// The session name changed (§5.10).
    SessionInfoChanged {
        /// The new name.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        name: Option<String>,
    },
    /// An entry was appended outside the message flow (§5.10).
    EntryAppended {
        /// The entry as written to the session file.
        entry: SessionEntry,
    },
    /// Writing to the session file failed and could not be repaired (issue 8; not in
    /// upstream, which throws instead): the entry named by the run is not on disk. `pi -p` and
    /// `--mode json` exit non-zero after such an event.
    #[serde(rename_all = "camelCase")]
    SessionWriteError {
        /// The session file that could not be written.
        session_file: String,
        /// The operating system's error text.
        error: String,
    },
    /// An extension handler failed (§5.9).
    #[serde(rename_all = "camelCase")]
    ExtensionError {
        /// The extension file (or `command:<name>`).
        extension_path: String,
        /// The hooked event.
        event: String,
        /// The error text.
        error: String,
    },
    /// An extension asks the client's UI for something (§6.1): a dialog (`select`, `confirm`,
    /// `input`, `editor`; answered with `extension_ui_response`) or a fire-and-forget update
    /// (`notify`, `setStatus`, `setWidget`, `setTitle`, `set_editor_text`).
    ExtensionUiRequest(ExtensionUiRequest),
}

/// The body of `extension_ui_request` (rpc-protocol.md §6.1). Only the fields of `method` are
/// present; `id` is a UUID v4 generated by the agent (the extension host), also for
/// fire-and-forget methods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtensionUiRequest {
    /// Request id; a dialog's `extension_ui_response` must carry it.
    pub id: String,
    /// `select` | `confirm` | `input` | `editor` | `notify` | `setStatus` | `setWidget` |
    /// `setTitle` | `set_editor_text`.
    pub method: String,
    /// Dialog title (`select`, `confirm`, `input`, `editor`) or window title (`setTitle`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub title: Option<String>,
    /// `select` options.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub options: Option<Vec<String>>,
    /// `confirm` body or `notify` text.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    /// `input` placeholder.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub placeholder: Option<String>,
    /// `editor` prefilled text.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prefill: Option<String>,
    /// Dialog timeout in ms (never on `editor`); the agent resolves the default itself.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeout: Option<u64>,
    /// `notify` kind: `info` | `warning` | `error` (absent = info).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub notify_type: Option<String>,
    /// `setStatus` key.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status_key: Option<String>,
    /// `setStatus` text (absent = clear the key).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status_text: Option<String>,
    /// `setWidget` key.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub widget_key: Option<String>,
    /// `setWidget` lines (absent = clear).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub widget_lines: Option<Vec<String>>,
    /// `setWidget` placement (`aboveEditor` default, `belowEditor`, border corners).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub widget_placement: Option<String>,
    /// `set_editor_text` text.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub text: Option<String>,
}

impl RpcEvent {
    /// The wire form of a low-level loop event; `None` for events that have none
    /// (`message_update` of `start`/`done`/`error`). `will_retry` fills `agent_end.willRetry`.
    pub fn from_agent(ev: AgentEvent, will_retry: bool) -> Option<Self> {
        Some(match ev {
            AgentEvent::AgentStart => RpcEvent::AgentStart,
            AgentEvent::TurnStart => RpcEvent::TurnStart,
            AgentEvent::MessageStart { message } => RpcEvent::MessageStart { message },
            AgentEvent::MessageUpdate { usage, event } => RpcEvent::MessageUpdate {
                usage,
                assistant_message_event: MessageUpdateEvent::from_stream(event)?,
            },
            AgentEvent::MessageEnd { message } => RpcEvent::MessageEnd { message },
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                parent_tool_call_id,
            } => RpcEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                parent_tool_call_id,
            },
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
                parent_tool_call_id,
            } => RpcEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
                parent_tool_call_id,
            },
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
                parent_tool_call_id,
            } => RpcEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
                parent_tool_call_id,
            },
            AgentEvent::TurnEnd {
                message,
                tool_results,
            } => RpcEvent::TurnEnd {
                message,
                tool_results: tool_results
                    .into_iter()
                    .map(Message::ToolResult)
                    .collect::<Vec<_>>(),
            },
            AgentEvent::AgentEnd { messages } => RpcEvent::AgentEnd {
                messages,
                will_retry,
            },
        })
    }

    /// The `queue_update` event for the given pending texts.
    pub fn queue_update(q: QueueTexts) -> Self {
        RpcEvent::QueueUpdate {
            steering: q.steering,
            follow_up: q.follow_up,
        }
    }
}
