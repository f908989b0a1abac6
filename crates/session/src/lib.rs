//! The session store: append-only JSONL session files forming a tree of entries.
//!
//! Behaviour follows spec `sessions.md` (file locations §1, format §2–§3, tree §4,
//! persistence §5, migration §6, branching §8, context rebuild §9, read views §10) and
//! `messages-and-models.md` §5, checked against the upstream 1.6 recordings in
//! `conformance/golden/*/sessions/`.
//!
//! * [`SessionHeader`] is line 1 of a file; every further line is one [`SessionEntry`].
//! * [`SessionManager`] owns the in-memory entry list, the leaf pointer and the file.
//! * [`build_session_context`] turns the active branch into the agent's messages.

mod context;
mod entry;
mod manager;
mod paths;
pub mod resolve;
mod scan;
mod store;

pub use context::{
    build_session_context, current_system_message, entry_context_messages, project_path, ModelRef,
    ProjectedEntry, SessionContext, SessionTreeNode,
};
pub use entry::{
    generate_entry_id, iso_now, BranchSummaryEntry, CompactionEntry, CustomMessageEntry, EntryKind,
    SessionEntry, SessionHeader, StoredEntry, UsageEntry, CURRENT_SESSION_VERSION,
};
pub use manager::{
    default_session_dir, encode_cwd, find_most_recent_session, validate_session_id,
    NewSessionOptions, SessionError, SessionManager, LAZY_MIN_BYTES,
};
