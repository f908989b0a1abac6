//! [`SessionManager`]: the in-memory session tree plus its JSONL file.
//!
//! Spec: `sessions.md` §1 (locations, file names), §4 (tree, leaf), §5 (lazy creation and
//! persistence), §8 (new/fork/clone/branch), §10 (read views).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use pi_ai::{Message, UserContent};
use serde_json::Value;

use super::context::{
    build_index, build_tree, context_from_path_with, current_system_message, path_to,
    system_message_value, ModelRef, SessionContext, SessionTreeNode,
};
use super::entry::{
    generate_entry_id, iso_now, BranchSummaryEntry, CompactionEntry, CustomMessageEntry, EntryKind,
    SessionEntry, SessionHeader, StoredEntry, UsageEntry,
};
use super::store::{self, Repair};

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

/// Check a caller-supplied session id against `^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`.
pub fn validate_session_id(id: &str) -> Result<(), SessionError> {
    let bytes = id.as_bytes();
    let ok = match (bytes.first(), bytes.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(SessionError::InvalidSessionId)
    }
}

/// Make `p` absolute (against the process cwd) and remove `.`/`..` lexically, like Node's
/// `path.resolve`.
pub(crate) fn resolve_path(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The session folder name for a cwd: `--` + cwd without one leading `/` or `\`, with every
/// `/`, `\` and `:` replaced by `-`, + `--` (spec `sessions.md` §1.2).
/// Example: `/home/u/my-proj` → `--home-u-my-proj--`.
pub fn encode_cwd(cwd: &Path) -> String {
    let s = cwd.to_string_lossy();
    let s = s
        .strip_prefix('/')
        .or_else(|| s.strip_prefix('\\'))
        .unwrap_or(&s);
    let encoded: String = s
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{encoded}--")
}

/// `<agent_dir>/sessions/--<encoded cwd>--` for the resolved (absolute, normalized) cwd
/// (spec `sessions.md` §1.2). Does not create the folder; [`SessionManager::create`] does.
pub fn default_session_dir(agent_dir: &Path, cwd: &Path) -> PathBuf {
    resolve_path(agent_dir)
        .join("sessions")
        .join(encode_cwd(&resolve_path(cwd)))
}

/// The most recently modified valid session file (`*.jsonl` whose first line is a header) in
/// `dir`, for `--continue` (spec `sessions.md` §1.6). With `cwd`, only sessions whose header
/// `cwd` equals it (resolved) qualify.
pub fn find_most_recent_session(dir: &Path, cwd: Option<&Path>) -> Option<PathBuf> {
    let want_cwd = cwd.map(resolve_path);
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| {
            let mtime = std::fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((mtime, p))
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    files.into_iter().map(|(_, p)| p).find(|p| {
        let Some(header) = store::read_first_value(p).and_then(|v| SessionHeader::from_value(&v))
        else {
            return false;
        };
        match &want_cwd {
            Some(c) => !header.cwd.is_empty() && resolve_path(Path::new(&header.cwd)) == *c,
            None => true,
        }
    })
}

/// Files at least this large are opened lazily: `message` entries become
/// [`EntryKind::Stored`] (issue 8: memory in proportion to the context, not the file).
pub const LAZY_MIN_BYTES: u64 = 1 << 20;

/// The little of a `message` line that is kept without its payload; `None` for other types
/// or lines that need the full parser (the caller then parses them whole).
fn stub_of(bytes: &[u8], offset: u64) -> Option<SessionEntry> {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "type")]
        ty: String,
        id: String,
        #[serde(rename = "parentId", default)]
        parent_id: Option<String>,
        #[serde(default)]
        timestamp: Option<String>,
        message: MessageHead,
    }
    #[derive(serde::Deserialize)]
    struct MessageHead {
        role: String,
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        model: Option<String>,
    }
    // Cheap pre-check before a full scan: only `message` lines are stubbed.
    const NEEDLE: &[u8] = b"\"type\":\"message\"";
    let head = bytes.get(..64)?;
    if !head.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
        return None;
    }
    let h: Head = serde_json::from_slice(bytes).ok()?;
    if h.ty != "message" {
        return None;
    }
    let assistant_model = (h.message.role == "assistant").then(|| {
        (
            h.message.provider.unwrap_or_default(),
            h.message.model.unwrap_or_default(),
        )
    });
    Some(SessionEntry {
        id: h.id,
        parent_id: h.parent_id,
        // Not kept: every view that shows it reads the entry back.
        timestamp: {
            let _ = h.timestamp;
            String::new()
        },
        kind: EntryKind::Stored(StoredEntry {
            entry_type: h.ty,
            offset,
            len: u32::try_from(bytes.len()).ok()?,
            assistant_model,
        }),
        extra: serde_json::Map::new(),
    })
}

fn file_name_for(header: &SessionHeader) -> String {
    let ts: String = header
        .timestamp
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .collect();
    format!("{ts}_{}.jsonl", header.id)
}

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
    entries: Vec<SessionEntry>,
    index: HashMap<String, usize>,
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
}

impl SessionManager {
    fn blank(cwd: &Path, session_dir: Option<PathBuf>, persist: bool) -> Self {
        let cwd = resolve_path(cwd);
        SessionManager {
            header: SessionHeader::new("", cwd.to_string_lossy(), None),
            entries: Vec::new(),
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
        }
    }

    /// A new persisted session in `session_dir` (created if missing). Nothing is written until
    /// the first assistant message (spec §5.1); the file will be
    /// `<session_dir>/<timestamp with ':' '.' → '-'>_<uuid v7>.jsonl` (spec §1.3).
    pub fn create(session_dir: &Path, cwd: &Path) -> SessionManager {
        let dir = resolve_path(session_dir);
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

    /// Open a session file (spec §5.2–§5.4). The session dir becomes the file's folder and the
    /// cwd comes from the header (the process cwd if the header has none).
    ///
    /// * The file is streamed (one line in memory at a time). Unparseable records are
    ///   skipped but kept in the file; records are split at `\n` and at NUL runs, so an entry
    ///   glued behind a crash's NUL bytes is recovered; a torn last line is kept byte for byte
    ///   and the next append starts on a new line.
    /// * A missing file starts a fresh session that will be written to exactly `path`.
    /// * An empty file gets a fresh header written immediately.
    /// * A non-empty file without a valid header is an error and is left untouched.
    /// * Files older than version 3 are migrated and rewritten.
    pub fn open(path: &Path) -> Result<SessionManager, SessionError> {
        Self::open_with(path, None, None)
    }

    /// [`open`](Self::open) with an explicit session dir (for later new/fork/clone) and/or a cwd
    /// that overrides the header's.
    pub fn open_with(
        path: &Path,
        session_dir: Option<&Path>,
        cwd_override: Option<&Path>,
    ) -> Result<SessionManager, SessionError> {
        let file = resolve_path(path);
        let dir = session_dir
            .map(resolve_path)
            .or_else(|| file.parent().map(Path::to_path_buf));
        let process_cwd = || std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        if !file.exists() {
            let cwd = cwd_override
                .map(Path::to_path_buf)
                .unwrap_or_else(process_cwd);
            let mut sm = Self::blank(&cwd, dir, true);
            sm.start_new(None, None);
            sm.session_file = Some(file);
            return Ok(sm);
        }
        // Stream the file: the header, then one entry per record; raw lines are never all
        // held at once. Files older than version 3 take the migrating path below.
        let mut header: Option<SessionHeader> = None;
        let mut first_invalid = false;
        let mut needs_migration = false;
        let mut entries: Vec<SessionEntry> = Vec::new();
        // Large files keep `message` payloads in the file (read back on demand through a
        // handle that stays open, so even a file deleted later can still be read).
        let lazy_file = match std::fs::metadata(&file) {
            Ok(m) if m.len() >= LAZY_MIN_BYTES => std::fs::File::open(&file).ok().map(Arc::new),
            _ => None,
        };
        let summary = store::for_each_record(&file, |bytes, offset| {
            if header.is_some() && lazy_file.is_some() {
                if let Some(stub) = stub_of(bytes, offset) {
                    entries.push(stub);
                    return true;
                }
            }
            let Some(v) = store::parse_record(bytes) else {
                return true;
            };
            if header.is_none() {
                match SessionHeader::from_value(&v) {
                    Some(h) => {
                        needs_migration = v.get("version").and_then(Value::as_u64).unwrap_or(1)
                            < super::entry::CURRENT_SESSION_VERSION;
                        header = Some(h);
                        return !needs_migration;
                    }
                    None => {
                        first_invalid = true;
                        return false;
                    }
                }
            }
            if v.get("type").and_then(Value::as_str) != Some("session") {
                if let Some(e) = SessionEntry::from_value(v) {
                    entries.push(e);
                }
            }
            true
        })?;
        if first_invalid {
            return Err(SessionError::InvalidFile(file));
        }
        let Some(mut header) = header else {
            if summary.size > 0 {
                return Err(SessionError::InvalidFile(file));
            }
            // Empty: a fresh header is written at once (spec §5.4).
            let cwd = cwd_override
                .map(Path::to_path_buf)
                .unwrap_or_else(process_cwd);
            let mut sm = Self::blank(&cwd, dir, true);
            sm.start_new(None, None);
            sm.session_file = Some(file.clone());
            store::rewrite(&file, sm.all_lines().as_bytes())?;
            sm.flushed = true;
            return Ok(sm);
        };
        let mut repair = summary.repair;
        if needs_migration {
            let mut raw = store::read_raw(&file)?;
            store::migrate(&mut raw.values);
            let mut values = raw.values.into_iter();
            header = values
                .next()
                .and_then(|v| SessionHeader::from_value(&v))
                .ok_or_else(|| SessionError::InvalidFile(file.clone()))?;
            entries = values
                .filter(|v| v.get("type").and_then(Value::as_str) != Some("session"))
                .filter_map(SessionEntry::from_value)
                .collect();
            repair = None;
        }
        let cwd = match cwd_override {
            Some(c) => c.to_path_buf(),
            None if !header.cwd.is_empty() => PathBuf::from(&header.cwd),
            None => process_cwd(),
        };
        let mut sm = Self::blank(&cwd, dir, true);
        sm.header = header;
        sm.entries = entries;
        sm.lazy_file = if needs_migration { None } else { lazy_file };
        sm.session_file = Some(file.clone());
        sm.rebuild_index();
        if needs_migration {
            store::rewrite(&file, sm.all_lines().as_bytes())?;
        } else {
            sm.repair = repair;
        }
        sm.flushed = true;
        Ok(sm)
    }

    /// Copy every entry of another session file into a new file for `target_cwd`
    /// (cross-project fork, spec §8.6), written immediately, and open it.
    pub fn fork_from(
        source: &Path,
        target_cwd: &Path,
        session_dir: &Path,
    ) -> Result<SessionManager, SessionError> {
        Self::fork_from_with(source, target_cwd, session_dir, None)
    }

    /// [`fork_from`](Self::fork_from) with a caller-supplied id for the new session
    /// (`--fork … --session-id <id>`; validated here).
    pub fn fork_from_with(
        source: &Path,
        target_cwd: &Path,
        session_dir: &Path,
        id: Option<String>,
    ) -> Result<SessionManager, SessionError> {
        if let Some(id) = &id {
            validate_session_id(id)?;
        }
        let source = resolve_path(source);
        let raw = store::read_raw(&source)
            .map_err(|_| SessionError::ForkSourceInvalid(source.clone()))?;
        if raw
            .values
            .first()
            .and_then(SessionHeader::from_value)
            .is_none()
        {
            return Err(SessionError::ForkSourceInvalid(source));
        }
        let target_cwd = resolve_path(target_cwd);
        let header = SessionHeader::new(
            id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            target_cwd.to_string_lossy(),
            Some(source.to_string_lossy().into_owned()),
        );
        let dir = resolve_path(session_dir);
        let file = dir.join(file_name_for(&header));
        let mut data = header.to_value().to_string();
        data.push('\n');
        for v in raw.values.iter().skip(1) {
            if v.get("type").and_then(Value::as_str) == Some("session") {
                continue;
            }
            data.push_str(&v.to_string());
            data.push('\n');
        }
        store::create_exclusive(&file, data.as_bytes())?;
        Self::open_with(&file, Some(&dir), Some(&target_cwd))
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
        self.entries.clear();
        self.index.clear();
        self.labels.clear();
        self.leaf_id = None;
        self.flushed = false;
        self.has_assistant = false;
        self.repair = None;
        self.lazy_file = None;
        self.session_file = match (&self.session_dir, self.persist) {
            (Some(dir), true) => Some(dir.join(file_name_for(&self.header))),
            _ => None,
        };
    }

    fn rebuild_index(&mut self) {
        self.index = build_index(&self.entries);
        self.labels.clear();
        for (target, label, ts) in self.ordered_labels() {
            self.labels.insert(target, (label, ts));
        }
        self.leaf_id = self.entries.last().map(|e| e.id.clone());
        self.has_assistant = self.entries.iter().any(SessionEntry::is_assistant_message);
    }

    /// Labels resolved by replaying label entries in file order, in JS `Map` insertion order.
    fn ordered_labels(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = Vec::new();
        for e in &self.entries {
            if let EntryKind::Label { target_id, label } = &e.kind {
                match label.as_deref().filter(|l| !l.is_empty()) {
                    Some(l) => match out.iter_mut().find(|x| x.0 == *target_id) {
                        Some(x) => {
                            x.1 = l.to_string();
                            x.2 = e.timestamp.clone();
                        }
                        None => out.push((target_id.clone(), l.to_string(), e.timestamp.clone())),
                    },
                    None => out.retain(|x| x.0 != *target_id),
                }
            }
        }
        out
    }

    fn all_lines(&self) -> String {
        let mut data = self.header.to_value().to_string();
        data.push('\n');
        for e in &self.entries {
            data.push_str(&self.materialize(e).to_line());
        }
        data
    }

    /// Reads a [`EntryKind::Stored`] entry back from the file as opened.
    fn load_stored(&self, stored: &StoredEntry) -> Option<SessionEntry> {
        use std::os::unix::fs::FileExt;
        let file = self.lazy_file.as_ref()?;
        let mut buf = vec![0u8; stored.len as usize];
        if let Err(e) = file.read_exact_at(&mut buf, stored.offset) {
            tracing::warn!("could not read a session entry back: {e}");
            return None;
        }
        store::parse_record(&buf).and_then(SessionEntry::from_value)
    }

    /// Reads a stored `message` entry back for the context: the message is deserialised
    /// straight from the line (no intermediate JSON tree), falling back to the full reader.
    fn load_stored_message(&self, stored: &StoredEntry, id: &str) -> Option<SessionEntry> {
        use std::os::unix::fs::FileExt;
        #[derive(serde::Deserialize)]
        struct Line {
            message: Message,
        }
        let file = self.lazy_file.as_ref()?;
        let mut buf = vec![0u8; stored.len as usize];
        if let Err(e) = file.read_exact_at(&mut buf, stored.offset) {
            tracing::warn!("could not read a session entry back: {e}");
            return None;
        }
        match serde_json::from_slice::<Line>(&buf) {
            Ok(line) => Some(SessionEntry {
                id: id.to_string(),
                parent_id: None,
                timestamp: String::new(),
                kind: EntryKind::Message(line.message),
                extra: serde_json::Map::new(),
            }),
            Err(_) => store::parse_record(&buf).and_then(SessionEntry::from_value),
        }
    }

    /// Model, thinking level and whether there are messages on the active branch, without
    /// reading stored payloads back (start-up and `switch_session` decide the model from this;
    /// spec `sessions.md` §7, §9.2).
    pub fn resume_settings(&self) -> (Option<ModelRef>, String, bool) {
        let branch = self.branch();
        let has_messages = branch.iter().any(|e| {
            matches!(
                e.kind,
                EntryKind::Message(_)
                    | EntryKind::Stored(_)
                    | EntryKind::CustomMessage(_)
                    | EntryKind::BranchSummary(_)
                    | EntryKind::Compaction(_)
            )
        });
        // The same rule as the context's (§9.2): the last model_change or assistant message
        // names the model; the last thinking_level_change the level ("off" without one).
        let mut model = None;
        let mut level = "off".to_string();
        for e in &branch {
            match &e.kind {
                EntryKind::ThinkingLevelChange { thinking_level } => level = thinking_level.clone(),
                EntryKind::ModelChange { provider, model_id } => {
                    model = Some(ModelRef {
                        provider: provider.clone(),
                        model_id: model_id.clone(),
                    })
                }
                EntryKind::Message(Message::Assistant(a)) => {
                    model = Some(ModelRef {
                        provider: a.provider.clone(),
                        model_id: a.model.clone(),
                    })
                }
                EntryKind::Stored(StoredEntry {
                    assistant_model: Some((provider, model_id)),
                    ..
                }) => {
                    model = Some(ModelRef {
                        provider: provider.clone(),
                        model_id: model_id.clone(),
                    })
                }
                _ => {}
            }
        }
        (model, level, has_messages)
    }

    /// The entry with its payload: a [`EntryKind::Stored`] entry is read back from the file
    /// (kept as the stub if that fails, which only a file truncated under us can cause).
    pub fn materialize<'a>(&self, entry: &'a SessionEntry) -> Cow<'a, SessionEntry> {
        match &entry.kind {
            EntryKind::Stored(stored) => match self.load_stored(stored) {
                Some(e) => Cow::Owned(e),
                None => Cow::Borrowed(entry),
            },
            _ => Cow::Borrowed(entry),
        }
    }

    /// Calls `f` with every entry in file order, payloads read back one at a time (memory stays
    /// bounded on large files).
    pub fn visit_entries(&self, mut f: impl FnMut(&SessionEntry)) {
        for e in &self.entries {
            f(&self.materialize(e));
        }
    }

    /// Every entry in file order with its payload (owned; for `get_entries`).
    pub fn loaded_entries(&self) -> Vec<SessionEntry> {
        self.entries
            .iter()
            .map(|e| self.materialize(e).into_owned())
            .collect()
    }

    // ---------------------------------------------------------------- accessors

    /// The session id (header `id`).
    pub fn session_id(&self) -> &str {
        &self.header.id
    }
    /// The session file path, also before it is first written; `None` in memory.
    pub fn session_file(&self) -> Option<&Path> {
        self.session_file.as_deref()
    }
    /// Folder for new/forked/cloned sessions; `None` in memory.
    pub fn session_dir(&self) -> Option<&Path> {
        self.session_dir.as_deref()
    }
    /// Working directory of the session (absolute).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
    /// The header (line 1).
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
    /// Whether this manager writes to disk at all.
    pub fn is_persisted(&self) -> bool {
        self.persist
    }
    /// Whether the file exists on disk with everything appended so far.
    pub fn is_flushed(&self) -> bool {
        self.flushed
    }
    /// All entries in append (file) order, header excluded. In a large file `message` entries
    /// are [`EntryKind::Stored`] stubs (ids, parents and type are right; see
    /// [`materialize`](Self::materialize), [`loaded_entries`](Self::loaded_entries)).
    pub fn entries(&self) -> &[SessionEntry] {
        &self.entries
    }
    /// Entries strictly after `id` in append order (RPC `get_entries.since`); `None` if the
    /// id is unknown.
    pub fn entries_since(&self, id: &str) -> Option<Vec<SessionEntry>> {
        let pos = *self.index.get(id)?;
        Some(
            self.entries[pos + 1..]
                .iter()
                .map(|e| self.materialize(e).into_owned())
                .collect(),
        )
    }
    /// The entry with this id, with its payload.
    pub fn entry(&self, id: &str) -> Option<Cow<'_, SessionEntry>> {
        self.index
            .get(id)
            .map(|&i| self.materialize(&self.entries[i]))
    }
    /// Direct children of `parent_id` (`None` = roots), in file order.
    pub fn children(&self, parent_id: Option<&str>) -> Vec<&SessionEntry> {
        self.entries
            .iter()
            .filter(|e| e.parent_id.as_deref() == parent_id)
            .collect()
    }
    /// Current leaf id; `None` before the first entry or after [`reset_leaf`](Self::reset_leaf).
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf_id.as_deref()
    }
    /// The current leaf entry.
    pub fn leaf_entry(&self) -> Option<Cow<'_, SessionEntry>> {
        self.leaf_id.as_deref().and_then(|id| self.entry(id))
    }
    /// Resolved label of an entry.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.labels.get(id).map(|l| l.0.as_str())
    }
    /// The active branch, root first, ending at the leaf (spec §4.3).
    pub fn branch(&self) -> Vec<&SessionEntry> {
        path_to(&self.entries, &self.index, self.leaf_id.as_deref())
    }
    /// The path from the root to `id` (empty if unknown).
    pub fn branch_to(&self, id: &str) -> Vec<&SessionEntry> {
        path_to(&self.entries, &self.index, Some(id))
    }
    /// Messages, thinking level and model of the active branch (spec §9).
    pub fn build_session_context(&self) -> SessionContext {
        if self.leaf_id.is_none() {
            return SessionContext {
                thinking_level: "off".into(),
                ..SessionContext::default()
            };
        }
        let branch = self.branch();
        let ids: HashMap<(u64, u32), &str> = branch
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::Stored(s) => Some(((s.offset, s.len), e.id.as_str())),
                _ => None,
            })
            .collect();
        context_from_path_with(&branch, &|s| {
            let id = ids.get(&(s.offset, s.len)).copied().unwrap_or_default();
            self.load_stored_message(s, id)
        })
    }
    /// The context projection of the active branch: every selected entry with the messages it
    /// contributes (see [`super::project_path`]); empty before the first entry.
    pub fn build_projection(&self) -> Vec<super::ProjectedEntry> {
        if self.leaf_id.is_none() {
            return Vec::new();
        }
        super::context::project_path_with(&self.branch(), &|s| self.load_stored(s))
    }
    /// The active branch, root first, with every payload read back (large files keep message
    /// entries on disk as [`EntryKind::Stored`]); for compaction, which reads roles and contents.
    pub fn loaded_branch(&self) -> Vec<SessionEntry> {
        self.branch()
            .into_iter()
            .map(|e| self.materialize(e).into_owned())
            .collect()
    }
    /// The agent messages of the active branch (spec §9): compaction applied, `context_edit`
    /// with null replacement hides its target, custom/branch/compaction summaries as messages.
    pub fn build_context(&self) -> Vec<Message> {
        self.build_session_context().messages
    }
    /// Display name: the latest `session_info` entry decides; empty/whitespace clears
    /// (spec §3.9, newer semantics).
    pub fn session_name(&self) -> Option<String> {
        self.entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::SessionInfo { name } => Some(
                name.as_deref()
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
            ),
            _ => None,
        })?
    }
    /// The whole session as a tree (spec §10.3).
    pub fn get_tree(&self) -> Vec<SessionTreeNode> {
        if self.lazy_file.is_some() {
            return build_tree(&self.loaded_entries(), &self.labels);
        }
        build_tree(&self.entries, &self.labels)
    }

    // ---------------------------------------------------------------- leaf movement

    /// Move the leaf to `id` so the next append branches from there (spec §4.2 `branch`).
    pub fn set_leaf(&mut self, id: &str) -> Result<(), SessionError> {
        if !self.index.contains_key(id) {
            return Err(SessionError::EntryNotFound(id.to_string()));
        }
        self.leaf_id = Some(id.to_string());
        Ok(())
    }
    /// Leaf := none; the next append creates a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf_id = None;
    }

    // ---------------------------------------------------------------- appends

    fn persist_last(&mut self) -> io::Result<()> {
        if !self.persist {
            return Ok(());
        }
        let Some(file) = self.session_file.clone() else {
            return Ok(());
        };
        if self.flushed {
            let line = self
                .entries
                .last()
                .map(SessionEntry::to_line)
                .unwrap_or_default();
            match store::append(&file, line.as_bytes(), self.repair) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The file (or its folder) was deleted under us: write it again whole,
                    // header first, rather than leave a headerless file behind.
                    tracing::warn!(
                        "session file {} disappeared; writing it again",
                        file.display()
                    );
                    store::create_exclusive(&file, self.all_lines().as_bytes())?;
                }
                Err(e) => return Err(e),
            }
            self.repair = None;
        } else if self.has_assistant {
            store::create_exclusive(&file, self.all_lines().as_bytes())?;
            self.flushed = true;
        }
        Ok(())
    }

    /// Add a finished entry as the new leaf and persist it; on an I/O error the entry is
    /// removed again so memory and file agree.
    fn commit(&mut self, entry: SessionEntry) -> io::Result<&SessionEntry> {
        let prev_leaf = self.leaf_id.replace(entry.id.clone());
        let prev_assistant = self.has_assistant;
        self.has_assistant |= entry.is_assistant_message();
        let id = entry.id.clone();
        self.index.insert(id.clone(), self.entries.len());
        self.entries.push(entry);
        if let Err(e) = self.persist_last() {
            self.entries.pop();
            self.index.remove(&id);
            self.leaf_id = prev_leaf;
            self.has_assistant = prev_assistant;
            return Err(e);
        }
        let last = self.entries.len() - 1;
        if let EntryKind::Label { target_id, label } = &self.entries[last].kind {
            match label.as_deref().filter(|l| !l.is_empty()) {
                Some(l) => {
                    let ts = self.entries[last].timestamp.clone();
                    self.labels.insert(target_id.clone(), (l.to_string(), ts));
                }
                None => {
                    self.labels.remove(target_id);
                }
            }
        }
        Ok(&self.entries[last])
    }

    fn new_id(&self) -> String {
        generate_entry_id(|c| self.index.contains_key(c))
    }

    /// Append any entry kind as a child of the current leaf; it becomes the leaf. Returns the
    /// stored entry (for `entry_appended`).
    pub fn append_entry(&mut self, kind: EntryKind) -> io::Result<&SessionEntry> {
        let entry = SessionEntry::new(self.new_id(), self.leaf_id.clone(), kind);
        self.commit(entry)
    }

    /// Append a `message` entry; returns its id. The first assistant message flushes a new
    /// session to disk.
    pub fn append_message(&mut self, msg: &Message) -> io::Result<String> {
        Ok(self
            .append_entry(EntryKind::Message(msg.clone()))?
            .id
            .clone())
    }

    /// Append `model_change {provider, modelId}`.
    pub fn append_model_change(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::ModelChange {
            provider: provider.to_string(),
            model_id: model_id.to_string(),
        })
    }

    /// Append `thinking_level_change {thinkingLevel}`.
    pub fn append_thinking_level_change(&mut self, level: &str) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::ThinkingLevelChange {
            thinking_level: level.to_string(),
        })
    }

    /// Append `session_info {name}`; runs of `\r`/`\n` become one space, then the name is
    /// trimmed (spec §3.9). Rejecting empty names is the caller's job.
    pub fn append_session_info(&mut self, name: &str) -> io::Result<&SessionEntry> {
        let mut sanitized = String::with_capacity(name.len());
        let mut in_break = false;
        for c in name.chars() {
            if c == '\r' || c == '\n' {
                if !in_break {
                    sanitized.push(' ');
                }
                in_break = true;
            } else {
                sanitized.push(c);
                in_break = false;
            }
        }
        self.append_entry(EntryKind::SessionInfo {
            name: Some(sanitized.trim().to_string()),
        })
    }

    /// Append `custom {customType, data?}` (extension state).
    pub fn append_custom_entry(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
    ) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::Custom {
            custom_type: custom_type.to_string(),
            data,
        })
    }

    /// Append `custom_message {customType, content, display, details?}`.
    pub fn append_custom_message_entry(
        &mut self,
        custom_type: &str,
        content: UserContent,
        display: bool,
        details: Option<Value>,
    ) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::CustomMessage(CustomMessageEntry {
            custom_type: custom_type.to_string(),
            content,
            display,
            details,
        }))
    }

    /// Append a `usage` entry.
    pub fn append_usage(&mut self, usage: UsageEntry) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::Usage(usage))
    }

    /// Append a `compaction` entry. `first_kept_entry_id: None` means "nothing kept" (the id of
    /// the compaction itself, as upstream). The current replayed system message is stored as
    /// `systemMessage` with the compaction's time.
    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: Option<&str>,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<pi_ai::Usage>,
    ) -> io::Result<&SessionEntry> {
        let id = self.new_id();
        let timestamp = iso_now();
        let system_message = current_system_message(&self.build_context()).map(|s| {
            let ms = super::entry::iso_to_ms(&timestamp).unwrap_or(s.timestamp);
            system_message_value(&s, ms)
        });
        let mut entry = SessionEntry::new(
            id.clone(),
            self.leaf_id.clone(),
            EntryKind::Compaction(CompactionEntry {
                summary: summary.to_string(),
                first_kept_entry_id: first_kept_entry_id.map(str::to_string).unwrap_or(id),
                tokens_before,
                details,
                usage,
                from_hook,
                system_message,
            }),
        );
        entry.timestamp = timestamp;
        self.commit(entry)
    }

    /// Append `context_edit {targetId, replacement}`. `None` hides the target from the model
    /// context; `Some({"content": string|array})` replaces its content (a string for an
    /// assistant/toolResult target is stored as one text block). The target must be a
    /// user/assistant/toolResult message or a custom_message on the active branch.
    pub fn append_context_edit(
        &mut self,
        target_id: &str,
        replacement: Option<Value>,
    ) -> Result<&SessionEntry, SessionError> {
        if let Some(r) = &replacement {
            let valid = matches!(r.get("content"), Some(Value::String(_) | Value::Array(_)));
            if !valid {
                return Err(SessionError::InvalidReplacement);
            }
        }
        let target = self
            .entry(target_id)
            .ok_or_else(|| SessionError::EntryNotFound(target_id.to_string()))?;
        let role = match &target.kind {
            EntryKind::CustomMessage(_) => "custom".to_string(),
            EntryKind::Message(m) => m.role().to_string(),
            _ => String::new(),
        };
        if !self.branch().iter().any(|e| e.id == target_id) {
            return Err(SessionError::NotOnBranch(target_id.to_string()));
        }
        if !matches!(
            role.as_str(),
            "custom" | "user" | "assistant" | "toolResult"
        ) {
            return Err(SessionError::NotEditable(target_id.to_string()));
        }
        let replacement = replacement.map(|mut r| {
            if let Some(Value::String(s)) = r.get("content") {
                if role == "assistant" || role == "toolResult" {
                    let block = serde_json::json!([{"type": "text", "text": s}]);
                    r["content"] = block;
                }
            }
            r
        });
        Ok(self.append_entry(EntryKind::ContextEdit {
            target_id: target_id.to_string(),
            replacement,
        })?)
    }

    /// Set (`Some(non-empty)`) or clear a label on an entry (spec §3.8, §8.8).
    pub fn append_label_change(
        &mut self,
        target_id: &str,
        label: Option<&str>,
    ) -> Result<&SessionEntry, SessionError> {
        if !self.index.contains_key(target_id) {
            return Err(SessionError::EntryNotFound(target_id.to_string()));
        }
        Ok(self.append_entry(EntryKind::Label {
            target_id: target_id.to_string(),
            label: label.map(str::to_string),
        })?)
    }

    /// Move the leaf to `branch_from` (`None` = before the root) and append a
    /// `branch_summary` there; `fromId` is the previous leaf or `"root"` (spec §4.2).
    pub fn branch_with_summary(
        &mut self,
        branch_from: Option<&str>,
        summary: &str,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<pi_ai::Usage>,
    ) -> Result<&SessionEntry, SessionError> {
        if let Some(id) = branch_from {
            if !self.index.contains_key(id) {
                return Err(SessionError::EntryNotFound(id.to_string()));
            }
        }
        let from_id = self.leaf_id.clone().unwrap_or_else(|| "root".to_string());
        let prev_leaf = std::mem::replace(&mut self.leaf_id, branch_from.map(str::to_string));
        let result = self
            .append_entry(EntryKind::BranchSummary(BranchSummaryEntry {
                from_id: Some(from_id),
                summary: summary.to_string(),
                details,
                usage,
                from_hook,
            }))
            .map(|_| ());
        if let Err(e) = result {
            self.leaf_id = prev_leaf;
            return Err(e.into());
        }
        let last = self.entries.len() - 1;
        Ok(&self.entries[last])
    }

    // ---------------------------------------------------------------- branching

    /// Replace this session by a new one holding only the path root→`leaf_id` (spec §8.5;
    /// used by `fork` and `clone`). Label entries are dropped from the path, the rest is
    /// re-chained linearly with ids preserved, and labels resolved on kept entries are
    /// re-appended with their original timestamps. The header gets a new id, the same cwd
    /// and `parentSession` = the previous file. The file is written at once if the path holds
    /// an assistant message, else lazily. Returns the new file (`None` in memory).
    pub fn create_branched_session(
        &mut self,
        leaf_id: &str,
    ) -> Result<Option<PathBuf>, SessionError> {
        let path: Vec<SessionEntry> = self
            .branch_to(leaf_id)
            .into_iter()
            .map(|e| self.materialize(e).into_owned())
            .collect();
        if path.is_empty() {
            return Err(SessionError::EntryNotFound(leaf_id.to_string()));
        }
        let mut kept: Vec<SessionEntry> = Vec::with_capacity(path.len());
        let mut replacement_for_label: HashMap<String, String> = HashMap::new();
        let mut pending_labels: Vec<String> = Vec::new();
        let mut parent: Option<String> = None;
        for mut entry in path {
            if matches!(entry.kind, EntryKind::Label { .. }) {
                pending_labels.push(entry.id);
                continue;
            }
            for l in pending_labels.drain(..) {
                replacement_for_label.insert(l, entry.id.clone());
            }
            if let EntryKind::Compaction(c) = &mut entry.kind {
                if c.first_kept_entry_id != entry.id {
                    if let Some(r) = replacement_for_label.get(&c.first_kept_entry_id) {
                        c.first_kept_entry_id = r.clone();
                    }
                }
            }
            entry.parent_id = parent.replace(entry.id.clone());
            kept.push(entry);
        }
        let mut ids: std::collections::HashSet<String> =
            kept.iter().map(|e| e.id.clone()).collect();
        let labels: Vec<(String, String, String)> = self
            .ordered_labels()
            .into_iter()
            .filter(|(t, _, _)| ids.contains(t))
            .collect();
        for (target, label, ts) in labels {
            let id = generate_entry_id(|c| ids.contains(c));
            ids.insert(id.clone());
            let mut e = SessionEntry::new(
                id.clone(),
                parent.replace(id),
                EntryKind::Label {
                    target_id: target,
                    label: Some(label),
                },
            );
            e.timestamp = ts;
            kept.push(e);
        }
        let previous_file = self.session_file.clone();
        let parent_session = if self.persist {
            previous_file.map(|p| p.to_string_lossy().into_owned())
        } else {
            None
        };
        self.start_new(None, parent_session);
        self.entries = kept;
        self.rebuild_index();
        if self.persist && self.has_assistant {
            if let Some(file) = self.session_file.clone() {
                store::create_exclusive(&file, self.all_lines().as_bytes())?;
                self.flushed = true;
            }
        }
        Ok(self.session_file.clone())
    }
}
