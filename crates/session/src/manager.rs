//! [`SessionManager`]: the in-memory session tree plus its JSONL file.
//!
//! Spec: `sessions.md` §1 (locations, file names), §4 (tree, leaf), §5 (lazy creation and
//! persistence), §8 (new/fork/clone/branch), §10 (read views).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::entry::{SessionEntry, SessionHeader};
use super::store::Repair;

mod open;
mod read;
mod table;
mod write;

use super::paths::file_name_for;
pub use super::paths::{
    default_session_dir, encode_cwd, find_most_recent_session, validate_session_id,
};
pub(crate) use super::paths::{resolve_path, session_dir_path};
use table::{Ids, Key, Slot};

/// Errors of the session store. Display texts match upstream's error messages.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Reading or writing the session file failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A non-empty file whose first line is not a session header.
    #[error("Session file is not a valid pi session: {}", .0.display())]
    InvalidFile(PathBuf),
    /// An entry id that is not in the session.
    #[error("Entry {0} not found")]
    EntryNotFound(String),
    /// `context_edit` target not on the active branch.
    #[error("Entry {0} is not on the active branch")]
    NotOnBranch(String),
    /// `context_edit` target that has no editable model content.
    #[error("Entry {0} does not contribute editable model content")]
    NotEditable(String),
    /// `context_edit` replacement that is neither null nor `{content: string|array}`.
    #[error("Context edit replacement must be null or contain string/array content")]
    InvalidReplacement,
    /// A caller-supplied session id with forbidden characters.
    #[error("Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character")]
    InvalidSessionId,
    /// `fork_from` on a source without a valid header.
    #[error("Cannot fork: source session file is empty or invalid: {}", .0.display())]
    ForkSourceInvalid(PathBuf),
}

/// Options for a new session (spec `sessions.md` §1.3, §8.1).
#[derive(Debug, Clone, Default)]
pub struct NewSessionOptions {
    /// Use exactly this session id (validated by [`validate_session_id`]); else a UUID v7.
    pub id: Option<String>,
    /// Written to the header's `parentSession` verbatim.
    pub parent_session: Option<String>,
}

/// Files at least this large are opened lazily: `message` entries become
/// [`EntryKind::Stored`] (issue 8: memory in proportion to the context, not the file).
pub const LAZY_MIN_BYTES: u64 = 1 << 20;

/// The session store: header, entries in file order, leaf pointer and (optionally) the file.
///
/// Writes follow spec `sessions.md` §5: a new session stays in memory until the first
/// assistant message is appended, then header and all entries are written at once
/// (exclusive create); afterwards each append writes exactly its own line. Sessions opened
/// from disk append directly. In-memory sessions ([`SessionManager::in_memory`]) never touch
/// the disk. A clone is an independent copy of the in-memory state bound to the same file
/// (used to branch into a new session while the old one stays intact).
#[derive(Debug, Clone)]
pub struct SessionManager {
    header: SessionHeader,
    /// Every entry in file (append) order.
    slots: Vec<Slot>,
    /// The parsed entries, in file order (every entry of a small file; in a large one all but
    /// `message` entries, plus everything appended since it was opened).
    loaded: Vec<SessionEntry>,
    ids: Ids,
    /// Entry id → slot; the last entry wins for duplicate ids.
    index: HashMap<Key, u32>,
    /// target id → (label, timestamp of the label entry).
    labels: HashMap<String, (String, String)>,
    leaf_id: Option<String>,
    cwd: PathBuf,
    session_dir: Option<PathBuf>,
    session_file: Option<PathBuf>,
    persist: bool,
    flushed: bool,
    has_assistant: bool,
    repair: Option<Repair>,
    /// The file as opened, for reading [`EntryKind::Stored`] entries back.
    lazy_file: Option<Arc<std::fs::File>>,
    /// Slot → timestamp of each assistant message released to the file by this process, so
    /// finding a just-persisted assistant message's entry reads nothing back (issue 15).
    stored_ts: HashMap<u32, i64>,
    /// Set when the whole file was (re)written: every `message` entry may be released.
    whole_written: bool,
}

impl SessionManager {
    fn blank(cwd: &Path, session_dir: Option<PathBuf>, persist: bool) -> Self {
        let cwd = resolve_path(cwd);
        SessionManager {
            header: SessionHeader::new("", cwd.to_string_lossy(), None),
            slots: Vec::new(),
            loaded: Vec::new(),
            ids: Ids::default(),
            index: HashMap::new(),
            labels: HashMap::new(),
            leaf_id: None,
            cwd,
            session_dir,
            session_file: None,
            persist,
            flushed: false,
            has_assistant: false,
            repair: None,
            lazy_file: None,
            stored_ts: HashMap::new(),
            whole_written: false,
        }
    }

    /// A new persisted session in `session_dir` (created if missing). Nothing is written until
    /// the first assistant message (spec §5.1); the file will be
    /// `<session_dir>/<timestamp with ':' '.' → '-'>_<uuid v7>.jsonl` (spec §1.3).
    pub fn create(session_dir: &Path, cwd: &Path) -> SessionManager {
        let dir = session_dir_path(session_dir);
        let _ = std::fs::create_dir_all(&dir);
        let mut sm = Self::blank(cwd, Some(dir), true);
        sm.start_new(None, None);
        sm
    }

    /// Like [`create`](Self::create) with a caller-supplied id and/or `parentSession`.
    pub fn create_with(
        session_dir: &Path,
        cwd: &Path,
        options: NewSessionOptions,
    ) -> Result<SessionManager, SessionError> {
        if let Some(id) = &options.id {
            validate_session_id(id)?;
        }
        let mut sm = Self::create(session_dir, cwd);
        sm.start_new(options.id, options.parent_session);
        Ok(sm)
    }

    /// A session that never touches the disk (`--no-session`, spec §1.5): `session_file()` is
    /// `None`, ids and tree logic are the same.
    pub fn in_memory(cwd: &Path) -> SessionManager {
        Self::in_memory_with(cwd, None)
    }

    /// [`in_memory`](Self::in_memory) with a caller-supplied session id (`--no-session
    /// --session-id`); the caller validates it.
    pub fn in_memory_with(cwd: &Path, id: Option<String>) -> SessionManager {
        let mut sm = Self::blank(cwd, None, false);
        sm.start_new(id, None);
        sm
    }

    /// Start a brand-new session in place (RPC `new_session`, spec §8.1): new id and header,
    /// no entries, new file name in the same session dir (written lazily).
    /// Returns the new file path (`None` in memory).
    pub fn new_session(
        &mut self,
        options: NewSessionOptions,
    ) -> Result<Option<&Path>, SessionError> {
        if let Some(id) = &options.id {
            validate_session_id(id)?;
        }
        self.start_new(options.id, options.parent_session);
        Ok(self.session_file.as_deref())
    }

    fn start_new(&mut self, id: Option<String>, parent_session: Option<String>) {
        let id = id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        self.header = SessionHeader::new(id, self.cwd.to_string_lossy(), parent_session);
        self.slots.clear();
        self.loaded.clear();
        self.ids = Ids::default();
        self.index.clear();
        self.labels.clear();
        self.leaf_id = None;
        self.flushed = false;
        self.has_assistant = false;
        self.repair = None;
        self.lazy_file = None;
        self.stored_ts.clear();
        self.whole_written = false;
        self.session_file = match (&self.session_dir, self.persist) {
            (Some(dir), true) => Some(dir.join(file_name_for(&self.header))),
            _ => None,
        };
    }
}
