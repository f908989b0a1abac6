//! The session lifecycle and compaction events pi runs the handlers of and waits for
//! (upstream docs/extensions.md "Session Events", "session_before_compact / session_compact"),
//! sent as [`super::ToHost::Event`], and their combined reply (host.mjs `emitEvent`: the first
//! `session_before_*` handler that returns `{cancel: true}` decides).

use super::lenient;
use crate::protocol::rpc::CompactionReason;
use crate::session::SessionEntry;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// A session event, `{type, …}` with upstream's field names, in the key order pi has always
/// sent. Optional fields that upstream leaves `undefined` in some cases are absent then;
/// `Option<Option<_>>` fields distinguish absent (`None`) from `null` (`Some(None)`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionEvent<'a> {
    /// `session_start {reason, previousSessionFile?}`: `reason` `startup`, `reload`, `new`,
    /// `resume` or `fork`; `previousSessionFile` (the replaced session's file, `null` when it
    /// had none) only after a replacement. Reply: `null`.
    #[serde(rename_all = "camelCase")]
    SessionStart {
        /// Why the session starts.
        reason: &'a str,
        /// The file of the session replaced (absent on `startup` / `reload`).
        #[serde(skip_serializing_if = "Option::is_none")]
        previous_session_file: Option<Option<&'a str>>,
    },
    /// `session_shutdown {reason, targetSessionFile?}`: `reason` `quit`, `reload`, `new`,
    /// `resume` or `fork`; `targetSessionFile` (the next session's file, `null` when it has
    /// none) only before a replacement. Reply: `null`.
    #[serde(rename_all = "camelCase")]
    SessionShutdown {
        /// Why the session ends.
        reason: &'a str,
        /// The file of the session that replaces it (absent on `quit` / `reload`).
        #[serde(skip_serializing_if = "Option::is_none")]
        target_session_file: Option<Option<&'a str>>,
    },
    /// `session_before_switch {reason, targetSessionFile?}`: `reason` `new` (no target) or
    /// `resume` (the file to open). Reply: `{cancel: true}` cancels.
    #[serde(rename_all = "camelCase")]
    SessionBeforeSwitch {
        /// `new` or `resume`.
        reason: &'a str,
        /// The session file to switch to (absent for `new`).
        #[serde(skip_serializing_if = "Option::is_none")]
        target_session_file: Option<&'a str>,
    },
    /// `session_before_fork {entryId, position}`: `position` `before` (`fork`: the session
    /// holds the path up to, not including, the entry) or `at` (`clone`, `ctx.fork(id,
    /// {position: "at"})`: through it). Reply: `{cancel: true}` cancels.
    #[serde(rename_all = "camelCase")]
    SessionBeforeFork {
        /// The entry forked at.
        entry_id: &'a str,
        /// `before` or `at`.
        position: &'a str,
    },
    /// `session_before_compact {preparation, customInstructions, reason, willRetry}` (the
    /// host adds `branchEntries` and `signal`). Reply: [`SessionEventReply`] (`cancel`, or a
    /// `compaction` to record instead of pi's summary).
    #[serde(rename_all = "camelCase")]
    SessionBeforeCompact {
        /// What would be summarized.
        preparation: CompactionPreparation<'a>,
        /// The `compact` command's instructions (`null` when none).
        custom_instructions: Option<&'a str>,
        /// Why it compacts.
        reason: CompactionReason,
        /// Whether the prompt is retried after it (overflow recovery).
        will_retry: bool,
    },
    /// `session_before_tree {preparation}` (`ctx.navigateTree`; the host adds `signal`).
    /// Reply: [`SessionEventReply`] (`cancel`; a `summary` to record instead of pi's, used
    /// when the navigation asked for one; `customInstructions`, `replaceInstructions`,
    /// `label` overrides).
    SessionBeforeTree {
        /// What the navigation would do.
        preparation: TreePreparation<'a>,
    },
    /// `session_tree {newLeafId, oldLeafId, summaryEntry?, fromExtension?}`: the leaf moved;
    /// `summaryEntry` / `fromExtension` only when a branch summary was written. Reply:
    /// `null`.
    #[serde(rename_all = "camelCase")]
    SessionTree {
        /// The leaf after the navigation (`null` = before the root).
        new_leaf_id: Option<&'a str>,
        /// The leaf before it.
        old_leaf_id: Option<&'a str>,
        /// The `branch_summary` entry written, when one was.
        #[serde(skip_serializing_if = "Option::is_none")]
        summary_entry: Option<&'a SessionEntry>,
        /// Whether that summary came from a `session_before_tree` handler.
        #[serde(skip_serializing_if = "Option::is_none")]
        from_extension: Option<bool>,
    },
    /// `session_compact {compactionEntry, fromExtension, reason, willRetry}`: a compaction was
    /// recorded. Reply: `null`.
    #[serde(rename_all = "camelCase")]
    SessionCompact {
        /// The `compaction` entry appended (as in the session file).
        compaction_entry: &'a SessionEntry,
        /// Whether its summary came from a `session_before_compact` handler.
        from_extension: bool,
        /// Why it compacted.
        reason: CompactionReason,
        /// Whether the prompt is retried after it.
        will_retry: bool,
    },
    /// `session_compact_failed {reason, aborted, willRetry, fromExtension, errorMessage?}`:
    /// `errorMessage` is the `compaction_end` one, absent when aborted or cancelled. Reply:
    /// `null`.
    #[serde(rename_all = "camelCase")]
    SessionCompactFailed {
        /// Why it was compacting.
        reason: CompactionReason,
        /// Aborted or cancelled.
        aborted: bool,
        /// Whether the prompt is retried after it.
        will_retry: bool,
        /// Always `false` (a compaction an extension supplied fails only on an abort or a
        /// write error).
        from_extension: bool,
        /// The error (absent when aborted or cancelled).
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<&'a str>,
    },
}

impl SessionEvent<'_> {
    /// The event's `type`, as on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionEvent::SessionStart { .. } => "session_start",
            SessionEvent::SessionShutdown { .. } => "session_shutdown",
            SessionEvent::SessionBeforeSwitch { .. } => "session_before_switch",
            SessionEvent::SessionBeforeFork { .. } => "session_before_fork",
            SessionEvent::SessionBeforeCompact { .. } => "session_before_compact",
            SessionEvent::SessionCompact { .. } => "session_compact",
            SessionEvent::SessionCompactFailed { .. } => "session_compact_failed",
            SessionEvent::SessionBeforeTree { .. } => "session_before_tree",
            SessionEvent::SessionTree { .. } => "session_tree",
        }
    }
}

/// `preparation` of `session_before_compact` (upstream `CompactionPreparation`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionPreparation<'a> {
    /// Id of the first entry kept verbatim.
    pub first_kept_entry_id: &'a str,
    /// Messages before the kept part (or before the split turn).
    pub messages_to_summarize: &'a [pi_ai::Message],
    /// The split turn's messages before the cut point (empty unless `is_split_turn`).
    pub turn_prefix_messages: &'a [pi_ai::Message],
    /// The cut falls inside a turn.
    pub is_split_turn: bool,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// The summary of the previous compaction in the context (`null` when none).
    pub previous_summary: Option<&'a str>,
    /// File operations of the summarized messages.
    pub file_ops: CompactionFileOps<'a>,
    /// The compaction settings (`null` without a model).
    pub settings: Option<CompactionSettingsView>,
}

/// `fileOps` of a [`CompactionPreparation`]: sorted path lists.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionFileOps<'a> {
    /// Paths passed to `read`.
    pub read: &'a BTreeSet<String>,
    /// Paths passed to `write`.
    pub written: &'a BTreeSet<String>,
    /// Paths passed to `edit`.
    pub edited: &'a BTreeSet<String>,
}

/// `settings` of a [`CompactionPreparation`]: `{enabled, reserveTokens, keepRecentTokens}`
/// (tokens).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSettingsView {
    /// Auto-compaction on.
    pub enabled: bool,
    /// Tokens kept free for the reply.
    pub reserve_tokens: u64,
    /// Recent tokens kept verbatim.
    pub keep_recent_tokens: u64,
}

/// The combined reply to a [`SessionEvent`]: `null` (no handler, a failed host), `{cancel:
/// true}` from a `session_before_*` handler, or a `session_before_compact` handler's
/// `{compaction: {…}}`. Anything but an object reads as `{}`; a `cancel` other than `true`
/// reads `false`; a `compaction` that is not an object reads as absent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SessionEventReply {
    /// A handler cancelled the switch, fork or compaction.
    #[serde(default, deserialize_with = "lenient")]
    pub cancel: bool,
    /// The compaction a `session_before_compact` handler supplied.
    #[serde(default, deserialize_with = "object")]
    pub compaction: Option<CompactionReply>,
    /// The branch summary a `session_before_tree` handler supplied.
    #[serde(default, deserialize_with = "object")]
    pub summary: Option<TreeSummaryReply>,
    /// A `session_before_tree` handler's `customInstructions` (non-string = absent).
    #[serde(default, rename = "customInstructions", deserialize_with = "lenient")]
    pub custom_instructions: Option<String>,
    /// A `session_before_tree` handler's `replaceInstructions` (non-boolean = absent).
    #[serde(default, rename = "replaceInstructions", deserialize_with = "lenient")]
    pub replace_instructions: Option<bool>,
    /// A `session_before_tree` handler's `label` (non-string = absent).
    #[serde(default, deserialize_with = "lenient")]
    pub label: Option<String>,
}

/// `preparation` of `session_before_tree` (upstream `TreePreparation`): `{targetId, oldLeafId,
/// commonAncestorId, entriesToSummarize, userWantsSummary, customInstructions?,
/// replaceInstructions?, label?}`; the options the call left out are absent.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreePreparation<'a> {
    /// The entry navigated to.
    pub target_id: &'a str,
    /// The leaf before (`null` = none).
    pub old_leaf_id: Option<&'a str>,
    /// The deepest entry on both the old and the target path (`null` = none).
    pub common_ancestor_id: Option<&'a str>,
    /// The entries from the common ancestor (exclusive) to the old leaf, oldest first.
    pub entries_to_summarize: &'a [SessionEntry],
    /// Whether the call asked for a summary.
    pub user_wants_summary: bool,
    /// The call's `customInstructions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_instructions: Option<&'a str>,
    /// The call's `replaceInstructions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replace_instructions: Option<bool>,
    /// The call's `label`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'a str>,
}

/// `summary` of a `session_before_tree` reply: `{summary, details?, usage?}`; without a string
/// `summary` it is not used; `usage` that is not a whole `Usage` reads as absent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct TreeSummaryReply {
    /// The summary text.
    #[serde(default, deserialize_with = "lenient")]
    pub summary: Option<String>,
    /// `details` of the entry, as given (`null` = none).
    #[serde(default)]
    pub details: Option<Value>,
    /// Usage of the handler's summary requests.
    #[serde(default, deserialize_with = "lenient")]
    pub usage: Option<pi_ai::Usage>,
}

impl SessionEventReply {
    /// The reply `v` (see [`SessionEventReply`]).
    pub fn from_value(v: &Value) -> Self {
        if !v.is_object() {
            return Self::default();
        }
        Self::deserialize(v).unwrap_or_default()
    }
}

/// `compaction` of a `session_before_compact` reply (upstream `CompactionResult`): `{summary,
/// firstKeptEntryId?, tokensBefore?, usage?, details?}`. Every field reads leniently: a value
/// of the wrong type reads as absent (`tokensBefore` must be a non-negative integer, `usage`
/// a whole `Usage`); `details: null` is absent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionReply {
    /// The summary; without a string one the reply is not used.
    #[serde(default, deserialize_with = "lenient")]
    pub summary: Option<String>,
    /// The entry the kept context starts at (default: the preparation's).
    #[serde(default, deserialize_with = "lenient")]
    pub first_kept_entry_id: Option<String>,
    /// Context tokens before (default: the preparation's).
    #[serde(default, deserialize_with = "lenient")]
    pub tokens_before: Option<u64>,
    /// Usage of the handler's summary requests.
    #[serde(default, deserialize_with = "lenient")]
    pub usage: Option<pi_ai::Usage>,
    /// `details` of the entry, as given.
    #[serde(default)]
    pub details: Option<Value>,
}

/// Reads an object as `Some(T)` (should it not read as `T`, `None`); anything else as `None`.
fn object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Value::deserialize(d)?;
    if !v.is_object() {
        return Ok(None);
    }
    Ok(serde_json::from_value(v).ok())
}
