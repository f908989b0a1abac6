//! The actionable boundary events pi sends the host (upstream docs/extensions.md
//! "turn_start / turn_end", "agent_before_settle") and the draft entries their handlers may
//! return (upstream "Allowed draft entry types"); the reply itself is
//! [`super::super::BoundaryReply`].

use crate::session::{CustomMessageEntry, SessionEntry};
use pi_ai::{Message, ToolResultMessage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `turn_end` event: `{type: "turn_end", turnIndex, message, toolResults,
/// messageEntryId, toolResultEntryIds, outcome, entries: [], continue: false, context}`, in
/// upstream's member order. `entries` and `continue` start empty/`false`; handlers change
/// them.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "turn_end", rename_all = "camelCase")]
pub struct TurnEndEvent<'a> {
    /// The turn's index in the run.
    pub turn_index: u64,
    /// The turn's assistant message.
    pub message: &'a Message,
    /// Its tool results, in order.
    pub tool_results: &'a [ToolResultMessage],
    /// The assistant message's entry id (`null` when not found).
    pub message_entry_id: Option<String>,
    /// The tool results' entry ids.
    pub tool_result_entry_ids: Vec<String>,
    /// `completed`, `error` or `aborted`.
    pub outcome: &'static str,
    /// Draft entries (none yet).
    pub entries: Vec<Value>,
    /// Whether a continuation is asked for (`false` yet).
    #[serde(rename = "continue")]
    pub continue_run: bool,
    /// The model context at the boundary.
    pub context: BoundaryContext,
}

/// The `agent_before_settle` event: `{type: "agent_before_settle", outcome, entries: [],
/// continue: false, context}`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "agent_before_settle")]
pub struct BeforeSettleEvent {
    /// The last assistant message's outcome: `completed`, `error` or `aborted`.
    pub outcome: &'static str,
    /// Draft entries (none yet).
    pub entries: Vec<Value>,
    /// Whether a continuation is asked for (`false` yet).
    #[serde(rename = "continue")]
    pub continue_run: bool,
    /// The model context at the boundary.
    pub context: BoundaryContext,
}

/// `event.context` of a boundary: `{contextEntries, contextMessages, llmMessages,
/// pendingMessages, canContinue}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BoundaryContext {
    /// Each entry of the context projection with what it contributes.
    pub context_entries: Vec<ContextEntry>,
    /// The transcript.
    pub context_messages: Vec<Message>,
    /// What the model is sent.
    pub llm_messages: Vec<Message>,
    /// Queued steering and follow-up messages.
    pub pending_messages: Vec<Message>,
    /// Whether the context ends with something the model can answer.
    pub can_continue: bool,
}

/// One entry of [`BoundaryContext::context_entries`]: `{sourceEntry, messages}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextEntry {
    /// The session entry.
    pub source_entry: SessionEntry,
    /// What it contributes to the model context, in order (possibly nothing).
    pub messages: Vec<Message>,
}

/// One draft entry a boundary handler may return (upstream "Allowed draft entry types");
/// anything else refuses the whole proposal.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BoundaryDraft {
    /// `{type: "custom", customType, data?}`: extension state, not in the context.
    Custom {
        /// The entry's `customType`.
        #[serde(rename = "customType")]
        custom_type: String,
        /// The extension's data.
        #[serde(default)]
        data: Option<Value>,
    },
    /// `{type: "custom_message", customType, content, display?, details?}`: a user-role
    /// message for the model.
    CustomMessage(CustomMessageEntry),
    /// `{type: "context_edit", targetId, replacement}`: `null` hides the target.
    ContextEdit {
        /// The entry edited.
        #[serde(rename = "targetId")]
        target_id: String,
        /// What the model sees instead (`null` = nothing).
        replacement: Option<Value>,
    },
    /// `{type: "compaction", summary, firstKeptEntryId?, tokensBefore?, details?}`.
    Compaction {
        /// The summary text.
        summary: String,
        /// The first entry kept after it.
        #[serde(default, rename = "firstKeptEntryId")]
        first_kept_entry_id: Option<String>,
        /// Context tokens before it (default 0).
        #[serde(default, rename = "tokensBefore")]
        tokens_before: u64,
        /// Extension data.
        #[serde(default)]
        details: Option<Value>,
    },
}
