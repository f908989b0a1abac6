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
    build_tree, current_system_message, system_message_value, ModelRef, SessionContext,
    SessionTreeNode,
};
use super::entry::{
    generate_entry_id, iso_now, BranchSummaryEntry, CompactionEntry, CustomMessageEntry, EntryKind,
    SessionEntry, SessionHeader, StoredEntry, UsageEntry,
};
use super::scan::{self, MessageHead};
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

/// An entry id in 8 bytes: an id of exactly 8 lowercase hex chars (every id pi writes) is
/// its value; any other id is interned in [`Ids`] and this is [`Key::LONG`] | its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key(u64);

impl Key {
    /// `parentId: null`.
    const NONE: Key = Key(u64::MAX);
    const LONG: u64 = 1 << 62;

    fn short(id: &str) -> Option<Key> {
        let bytes = id.as_bytes();
        if bytes.len() != 8 {
            return None;
        }
        let mut v = 0u64;
        for &c in bytes {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            v = v << 4 | u64::from(d);
        }
        Some(Key(v))
    }
}

/// The ids that do not fit a [`Key`] by value (full UUIDs after an id collision, ids of
/// hand-written or foreign files).
#[derive(Debug, Clone, Default)]
struct Ids {
    long: Vec<String>,
    by_text: HashMap<String, u64>,
}

impl Ids {
    fn intern(&mut self, id: &str) -> Key {
        if let Some(k) = Key::short(id) {
            return k;
        }
        if let Some(&n) = self.by_text.get(id) {
            return Key(Key::LONG | n);
        }
        let n = self.long.len() as u64;
        self.long.push(id.to_string());
        self.by_text.insert(id.to_string(), n);
        Key(Key::LONG | n)
    }

    /// The key of an id seen before; `None` if no entry can have it.
    fn find(&self, id: &str) -> Option<Key> {
        Key::short(id).or_else(|| self.by_text.get(id).map(|&n| Key(Key::LONG | n)))
    }

    fn text(&self, key: Key) -> String {
        if key.0 & Key::LONG != 0 && key != Key::NONE {
            let n = usize::try_from(key.0 & !Key::LONG).unwrap_or(usize::MAX);
            return self.long.get(n).cloned().unwrap_or_default();
        }
        format!("{:08x}", key.0)
    }
}

/// `Slot::loaded` of an entry whose line stays in the file.
const STORED: u32 = u32::MAX;
/// `Slot::role` values of a stored `message` entry.
const ROLE_OTHER: u8 = 0;
const ROLE_ASSISTANT: u8 = 1;
const ROLE_SYSTEM: u8 = 2;

/// One entry of the session in 40 bytes (issue 8): its id and parent as [`Key`]s, and either
/// its parsed form (`loaded`, an index into `SessionManager::loaded`) or where its `message`
/// line is in the file (`offset`, `len`) with the message's role.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: Key,
    parent: Key,
    offset: u64,
    len: u32,
    loaded: u32,
    role: u8,
}

/// What [`SessionManager::resume_settings`] and the context read from a path.
#[derive(Debug, Default)]
struct PathSettings {
    model: Option<ModelRef>,
    /// The last `model_change` on the path (a virtual model's selection holds over the
    /// physical models its responses name).
    model_change: Option<ModelRef>,
    thinking_level: String,
    has_messages: bool,
    has_level_entry: bool,
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
        // Entries go into this table (only its slots, loaded entries and ids are used).
        let mut table = Self::blank(Path::new("/"), None, true);
        // Large files keep `message` payloads in the file (read back on demand through a
        // handle that stays open, so even a file deleted later can still be read).
        let lazy_file = match std::fs::metadata(&file) {
            Ok(m) if m.len() >= LAZY_MIN_BYTES => std::fs::File::open(&file).ok().map(Arc::new),
            _ => None,
        };
        let summary = store::for_each_record(&file, |bytes, offset| {
            if header.is_some() && lazy_file.is_some() {
                if let (Some(head), Ok(len)) =
                    (scan::message_head(bytes), u32::try_from(bytes.len()))
                {
                    if scan::is_complete_object(bytes) {
                        table.push_stored(&head, offset, len);
                        return true;
                    }
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
                    table.push_entry(e);
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
            table = Self::blank(Path::new("/"), None, true);
            values
                .filter(|v| v.get("type").and_then(Value::as_str) != Some("session"))
                .filter_map(SessionEntry::from_value)
                .for_each(|e| table.push_entry(e));
            repair = None;
        }
        let cwd = match cwd_override {
            Some(c) => c.to_path_buf(),
            None if !header.cwd.is_empty() => PathBuf::from(&header.cwd),
            None => process_cwd(),
        };
        let mut sm = Self::blank(&cwd, dir, true);
        sm.header = header;
        sm.slots = table.slots;
        sm.loaded = table.loaded;
        sm.ids = table.ids;
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
        let target_cwd = resolve_path(target_cwd);
        let header = SessionHeader::new(
            id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            target_cwd.to_string_lossy(),
            Some(source.to_string_lossy().into_owned()),
        );
        let dir = resolve_path(session_dir);
        let file = dir.join(file_name_for(&header));
        // Streamed, one record at a time (the source may be large): the first record that
        // parses must be a header; every later one that parses, but headers, is copied.
        let mut source_ok = true;
        let mut write_error = None;
        let created = store::create_exclusive_with(&file, |w| {
            let mut line = header.to_value().to_string();
            line.push('\n');
            w.write_all(line.as_bytes())?;
            let mut first = true;
            let read = store::for_each_value(&source, |v| {
                if std::mem::take(&mut first) {
                    source_ok = SessionHeader::from_value(&v).is_some();
                    return source_ok;
                }
                if v.get("type").and_then(Value::as_str) == Some("session") {
                    return true;
                }
                line.clear();
                line.push_str(&v.to_string());
                line.push('\n');
                match w.write_all(line.as_bytes()) {
                    Ok(()) => true,
                    Err(e) => {
                        write_error = Some(e);
                        false
                    }
                }
            });
            if let Some(e) = write_error.take() {
                return Err(e);
            }
            source_ok &= read.is_ok() && !first;
            Ok(source_ok)
        })?;
        if !created {
            return Err(SessionError::ForkSourceInvalid(source));
        }
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

    // ---------------------------------------------------------------- the entry table

    /// Appends a parsed entry to the table (the index is not touched).
    fn push_entry(&mut self, entry: SessionEntry) {
        let id = self.ids.intern(&entry.id);
        let parent = match &entry.parent_id {
            Some(p) => self.ids.intern(p),
            None => Key::NONE,
        };
        self.slots.push(Slot {
            id,
            parent,
            offset: 0,
            len: 0,
            loaded: u32::try_from(self.loaded.len()).unwrap_or(STORED - 1),
            role: ROLE_OTHER,
        });
        self.loaded.push(entry);
    }

    /// Appends a `message` entry whose line stays in the file (the index is not touched).
    fn push_stored(&mut self, head: &MessageHead<'_>, offset: u64, len: u32) {
        let id = self.ids.intern(&head.id);
        let parent = match &head.parent_id {
            Some(p) => self.ids.intern(p),
            None => Key::NONE,
        };
        let role = match head.role.as_ref() {
            "assistant" => ROLE_ASSISTANT,
            "system" => ROLE_SYSTEM,
            _ => ROLE_OTHER,
        };
        self.slots.push(Slot {
            id,
            parent,
            offset,
            len,
            loaded: STORED,
            role,
        });
    }

    /// Releases the parsed `message` entries of slots `from..` whose line is known to be in the
    /// file (`len > 0`, set when this process wrote it) to [`EntryKind::Stored`] slots: the
    /// store then holds no copy of the message, which the agent's transcript already holds
    /// (issue 15: one copy per message). Nothing is released without a handle to read it back.
    fn release_messages(&mut self, from: usize) {
        if self.lazy_file.is_none() {
            return;
        }
        let mut released = false;
        for i in from..self.slots.len() {
            let slot = self.slots[i];
            if slot.loaded == STORED || slot.len == 0 {
                continue;
            }
            let Some(SessionEntry {
                kind: EntryKind::Message(m),
                ..
            }) = self.loaded.get(slot.loaded as usize)
            else {
                continue;
            };
            let role = match m {
                Message::Assistant(a) => {
                    self.stored_ts.insert(i as u32, a.timestamp);
                    ROLE_ASSISTANT
                }
                Message::System(_) => ROLE_SYSTEM,
                _ => ROLE_OTHER,
            };
            // The last parsed entry (the usual case: the message just appended) is popped;
            // any other is dropped when the table is compacted below.
            if slot.loaded as usize + 1 == self.loaded.len() && i + 1 == self.slots.len() {
                self.loaded.pop();
            } else {
                released = true;
            }
            self.slots[i].loaded = STORED;
            self.slots[i].role = role;
        }
        if released {
            let old = std::mem::take(&mut self.loaded);
            let mut old: Vec<Option<SessionEntry>> = old.into_iter().map(Some).collect();
            for slot in &mut self.slots {
                if slot.loaded == STORED {
                    continue;
                }
                if let Some(e) = old.get_mut(slot.loaded as usize).and_then(Option::take) {
                    slot.loaded = u32::try_from(self.loaded.len()).unwrap_or(STORED - 1);
                    self.loaded.push(e);
                }
            }
        }
    }

    /// Writes header and every entry as the whole file (exclusive create, see
    /// [`store::create_exclusive`]), then reads stored entries from the new file and knows
    /// where every line is, so [`release_messages`](Self::release_messages) can release them.
    fn write_whole(&mut self, file: &Path) -> io::Result<()> {
        let mut data = self.header.to_value().to_string();
        data.push('\n');
        let mut spans = Vec::with_capacity(self.slots.len());
        for i in 0..self.slots.len() {
            let start = data.len() as u64;
            let line = self.full(i).to_line();
            spans.push((
                start,
                u32::try_from(line.len().saturating_sub(1)).unwrap_or(0),
            ));
            data.push_str(&line);
        }
        store::create_exclusive(file, data.as_bytes())?;
        drop(data);
        match std::fs::File::open(file) {
            Ok(f) => {
                self.lazy_file = Some(Arc::new(f));
                for (slot, (offset, len)) in self.slots.iter_mut().zip(spans) {
                    slot.offset = offset;
                    slot.len = len;
                }
                self.whole_written = true;
            }
            // Stored entries keep being read from the old handle; nothing new is released.
            Err(e) => tracing::warn!("could not reopen session file {}: {e}", file.display()),
        }
        Ok(())
    }

    /// Removes the last slot (a commit that could not be written).
    fn pop_entry(&mut self) {
        if let Some(slot) = self.slots.pop() {
            if slot.loaded != STORED {
                self.loaded.pop();
            }
            if self.index.get(&slot.id) == Some(&(self.slots.len() as u32)) {
                self.index.remove(&slot.id);
            }
        }
    }

    /// The parsed entry of a slot, if it is loaded.
    fn loaded_of(&self, slot: &Slot) -> Option<&SessionEntry> {
        (slot.loaded != STORED)
            .then(|| self.loaded.get(slot.loaded as usize))
            .flatten()
    }

    fn stored_of(slot: &Slot) -> StoredEntry {
        StoredEntry {
            offset: slot.offset,
            len: slot.len,
            assistant: slot.role == ROLE_ASSISTANT,
        }
    }

    /// The entry of slot `i`: the parsed one, or for a stored one a stub ([`EntryKind::Stored`]:
    /// id, parent and type right, no timestamp).
    fn stub(&self, i: usize) -> Cow<'_, SessionEntry> {
        let slot = &self.slots[i];
        if let Some(e) = self.loaded_of(slot) {
            return Cow::Borrowed(e);
        }
        Cow::Owned(SessionEntry {
            id: self.ids.text(slot.id),
            parent_id: (slot.parent != Key::NONE).then(|| self.ids.text(slot.parent)),
            timestamp: String::new(),
            kind: EntryKind::Stored(Self::stored_of(slot)),
            extra: serde_json::Map::new(),
        })
    }

    /// The entry of slot `i` with its payload (a stored one read back; the stub if that fails).
    fn full(&self, i: usize) -> Cow<'_, SessionEntry> {
        let slot = &self.slots[i];
        if let Some(e) = self.loaded_of(slot) {
            return Cow::Borrowed(e);
        }
        match self.load_stored(&Self::stored_of(slot)) {
            Some(e) => Cow::Owned(e),
            None => self.stub(i),
        }
    }

    /// The slot of entry `id` (the last one of a duplicated id).
    fn slot_of(&self, id: &str) -> Option<usize> {
        let key = self.ids.find(id)?;
        self.index.get(&key).map(|&i| i as usize)
    }

    fn contains(&self, id: &str) -> bool {
        self.slot_of(id).is_some()
    }

    /// Root-first slots from `leaf` following parent links; stops at a missing parent and at
    /// a cycle (malformed files), so it always terminates (spec §4.3).
    fn path_slots(&self, leaf: Option<&str>) -> Vec<u32> {
        let mut path = Vec::new();
        let Some(mut current) = leaf.and_then(|id| self.slot_of(id)) else {
            return path;
        };
        let mut seen = vec![0u64; self.slots.len().div_ceil(64)];
        loop {
            let (word, bit) = (current / 64, 1u64 << (current % 64));
            if seen[word] & bit != 0 {
                break;
            }
            seen[word] |= bit;
            path.push(current as u32);
            let parent = self.slots[current].parent;
            match (parent != Key::NONE)
                .then(|| self.index.get(&parent))
                .flatten()
            {
                Some(&p) => current = p as usize,
                None => break,
            }
        }
        path.reverse();
        path
    }

    fn rebuild_index(&mut self) {
        self.index = HashMap::with_capacity(self.slots.len());
        for (i, slot) in self.slots.iter().enumerate() {
            self.index.insert(slot.id, i as u32);
        }
        self.labels.clear();
        for (target, label, ts) in self.ordered_labels() {
            self.labels.insert(target, (label, ts));
        }
        self.leaf_id = self.slots.last().map(|s| self.ids.text(s.id));
        self.has_assistant = self.slots.iter().any(|s| match self.loaded_of(s) {
            Some(e) => e.is_assistant_message(),
            None => s.role == ROLE_ASSISTANT,
        });
    }

    /// Labels resolved by replaying label entries in file order, in JS `Map` insertion order.
    fn ordered_labels(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = Vec::new();
        for e in &self.loaded {
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
        for i in 0..self.slots.len() {
            data.push_str(&self.full(i).to_line());
        }
        data
    }

    /// Reads the line of a [`EntryKind::Stored`] entry from the file as opened.
    fn read_stored(&self, stored: &StoredEntry) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let file = self.lazy_file.as_ref()?;
        let mut buf = vec![0u8; stored.len as usize];
        if let Err(e) = file.read_exact_at(&mut buf, stored.offset) {
            tracing::warn!("could not read a session entry back: {e}");
            return None;
        }
        Some(buf)
    }

    /// Reads a [`EntryKind::Stored`] entry back from the file as opened.
    fn load_stored(&self, stored: &StoredEntry) -> Option<SessionEntry> {
        let buf = self.read_stored(stored)?;
        store::parse_record(&buf).and_then(SessionEntry::from_value)
    }

    /// The context messages of a stored `message` entry: the message is deserialised straight
    /// from the line (no intermediate JSON tree), falling back to the full reader.
    fn stored_context_messages(&self, stored: &StoredEntry) -> Vec<Message> {
        #[derive(serde::Deserialize)]
        struct Line {
            message: Message,
        }
        let Some(buf) = self.read_stored(stored) else {
            return Vec::new();
        };
        match serde_json::from_slice::<Line>(&buf) {
            Ok(line) => vec![line.message],
            Err(_) => store::parse_record(&buf)
                .and_then(SessionEntry::from_value)
                .filter(|e| !matches!(e.kind, EntryKind::Stored(_)))
                .map(|e| super::context::entry_context_messages(&e))
                .unwrap_or_default(),
        }
    }

    /// Thinking level, model and what else resuming needs from the path `path` (slots), without
    /// reading stored payloads back except the one assistant message that names the model.
    fn path_settings(&self, path: &[u32]) -> PathSettings {
        let mut out = PathSettings {
            thinking_level: "off".to_string(),
            ..PathSettings::default()
        };
        // The last model_change or assistant message names the model; the last
        // thinking_level_change the level ("off" without one): spec §9.2.
        let mut model_at = None;
        for &i in path {
            let slot = &self.slots[i as usize];
            let Some(e) = self.loaded_of(slot) else {
                out.has_messages = true;
                if slot.role == ROLE_ASSISTANT {
                    model_at = Some(i as usize);
                }
                continue;
            };
            match &e.kind {
                EntryKind::ThinkingLevelChange { thinking_level } => {
                    out.thinking_level = thinking_level.clone();
                    out.has_level_entry = true;
                }
                EntryKind::ModelChange { provider, model_id } => {
                    model_at = Some(i as usize);
                    out.model_change = Some(ModelRef {
                        provider: provider.clone(),
                        model_id: model_id.clone(),
                    });
                }
                EntryKind::Message(m) => {
                    out.has_messages = true;
                    if matches!(m, Message::Assistant(_)) {
                        model_at = Some(i as usize);
                    }
                }
                EntryKind::Stored(s) => {
                    out.has_messages = true;
                    if s.assistant {
                        model_at = Some(i as usize);
                    }
                }
                EntryKind::CustomMessage(_)
                | EntryKind::BranchSummary(_)
                | EntryKind::Compaction(_) => out.has_messages = true,
                _ => {}
            }
        }
        out.model = model_at.and_then(|i| match &self.full(i).kind {
            EntryKind::ModelChange { provider, model_id } => Some(ModelRef {
                provider: provider.clone(),
                model_id: model_id.clone(),
            }),
            EntryKind::Message(Message::Assistant(a)) => Some(ModelRef {
                provider: a.provider.clone(),
                model_id: a.model.clone(),
            }),
            _ => None,
        });
        out
    }

    /// The last `model_change` on the active branch: a virtual model's selection holds there
    /// over the physical models of later responses (upstream `getBranchSelection`, decided by
    /// the caller, which knows which models are virtual).
    pub fn resume_model_change(&self) -> Option<ModelRef> {
        self.path_settings(&self.path_slots(self.leaf_id.as_deref()))
            .model_change
    }

    /// Model, thinking level and whether there are messages on the active branch, without
    /// reading stored payloads back (but the last assistant message's, when it names the
    /// model): start-up and `switch_session` decide the model from this (spec `sessions.md`
    /// §7, §9.2).
    pub fn resume_settings(&self) -> (Option<ModelRef>, String, bool) {
        let s = self.path_settings(&self.path_slots(self.leaf_id.as_deref()));
        (s.model, s.thinking_level, s.has_messages)
    }

    /// Whether the active branch has a `thinking_level_change` entry.
    pub fn has_thinking_level_change(&self) -> bool {
        self.path_slots(self.leaf_id.as_deref())
            .iter()
            .filter_map(|&i| self.loaded_of(&self.slots[i as usize]))
            .any(|e| matches!(e.kind, EntryKind::ThinkingLevelChange { .. }))
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
        for i in 0..self.slots.len() {
            f(&self.full(i));
        }
    }

    /// Every entry in file order with its payload (owned; for `get_entries`).
    pub fn loaded_entries(&self) -> Vec<SessionEntry> {
        (0..self.slots.len())
            .map(|i| self.full(i).into_owned())
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
    /// Number of entries (header excluded).
    pub fn entry_count(&self) -> usize {
        self.slots.len()
    }
    /// Whether the session has no entries yet.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    /// All entries in append (file) order, header excluded. In a large file `message` entries
    /// are [`EntryKind::Stored`] stubs (ids, parents and type are right; see
    /// [`materialize`](Self::materialize), [`loaded_entries`](Self::loaded_entries)).
    pub fn entries(&self) -> Vec<Cow<'_, SessionEntry>> {
        (0..self.slots.len()).map(|i| self.stub(i)).collect()
    }
    /// Entries strictly after `id` in append order (RPC `get_entries.since`); `None` if the
    /// id is unknown.
    pub fn entries_since(&self, id: &str) -> Option<Vec<SessionEntry>> {
        let pos = self.slot_of(id)?;
        Some(
            (pos + 1..self.slots.len())
                .map(|i| self.full(i).into_owned())
                .collect(),
        )
    }
    /// The entry with this id, with its payload.
    pub fn entry(&self, id: &str) -> Option<Cow<'_, SessionEntry>> {
        self.slot_of(id).map(|i| self.full(i))
    }
    /// Direct children of `parent_id` (`None` = roots), in file order (stubs as in
    /// [`entries`](Self::entries)).
    pub fn children(&self, parent_id: Option<&str>) -> Vec<Cow<'_, SessionEntry>> {
        let want = match parent_id {
            None => Key::NONE,
            Some(p) => match self.ids.find(p) {
                Some(k) => k,
                None => return Vec::new(),
            },
        };
        (0..self.slots.len())
            .filter(|&i| self.slots[i].parent == want)
            .map(|i| self.stub(i))
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
    /// The active branch, root first, ending at the leaf (spec §4.3); stubs as in
    /// [`entries`](Self::entries).
    pub fn branch(&self) -> Vec<Cow<'_, SessionEntry>> {
        self.branch_of(self.leaf_id.as_deref())
    }
    /// The path from the root to `id` (empty if unknown); stubs as in
    /// [`entries`](Self::entries).
    pub fn branch_to(&self, id: &str) -> Vec<Cow<'_, SessionEntry>> {
        self.branch_of(Some(id))
    }
    fn branch_of(&self, leaf: Option<&str>) -> Vec<Cow<'_, SessionEntry>> {
        self.path_slots(leaf)
            .into_iter()
            .map(|i| self.stub(i as usize))
            .collect()
    }
    /// The slots the context selects from `path` (upstream `buildContextEntries`): the whole
    /// path, or with a compaction C on it `[C, path[firstKept..C], path[C+1..]]`; the flag
    /// marks the kept range before C, whose system messages are dropped.
    fn context_selection(&self, path: &[u32]) -> Vec<(u32, bool)> {
        let loaded_at = |p: usize| self.loaded_of(&self.slots[path[p] as usize]);
        let compaction = (0..path.len())
            .rev()
            .find_map(|p| match loaded_at(p).map(|e| &e.kind) {
                Some(EntryKind::Compaction(c)) => Some((p, c)),
                _ => None,
            });
        let mut selected: Vec<(u32, bool)> = Vec::new();
        match compaction {
            None => selected.extend(path.iter().map(|&i| (i, false))),
            Some((cidx, c)) => {
                selected.push((path[cidx], false));
                let first_kept = self.ids.find(&c.first_kept_entry_id);
                if let Some(start) =
                    (0..cidx).find(|&p| Some(self.slots[path[p] as usize].id) == first_kept)
                {
                    selected.extend(path[start..cidx].iter().map(|&i| (i, true)));
                }
                selected.extend(path[cidx + 1..].iter().map(|&i| (i, false)));
            }
        }
        selected
    }

    /// The `context_edit`s among `selected`: target → replacement (`None` hides it); the
    /// last edit of a target wins.
    fn context_edits(&self, selected: &[(u32, bool)]) -> HashMap<Key, &Option<Value>> {
        let mut edits: HashMap<Key, &Option<Value>> = HashMap::new();
        for &(i, _) in selected {
            if let Some(EntryKind::ContextEdit {
                target_id,
                replacement,
            }) = self.loaded_of(&self.slots[i as usize]).map(|e| &e.kind)
            {
                if let Some(k) = self.ids.find(target_id) {
                    edits.insert(k, replacement);
                }
            }
        }
        edits
    }

    /// Whether the context of the active branch selects a `context_edit` entry (then
    /// [`build_projection`](Self::build_projection) differs from the plain messages). Reads
    /// nothing back from the file.
    pub fn context_has_edits(&self) -> bool {
        let path = self.path_slots(self.leaf_id.as_deref());
        !self
            .context_edits(&self.context_selection(&path))
            .is_empty()
    }

    /// Whether the `message` entry `id` contributes its message to the context of the active
    /// branch (selected, not a dropped system message, not hidden by a `context_edit` with a
    /// null replacement): [`build_projection`](Self::build_projection)'s non-empty messages
    /// for it, without reading anything back. `false` for an unknown id.
    pub fn message_in_context(&self, id: &str) -> bool {
        let Some(at) = self.slot_of(id) else {
            return false;
        };
        let path = self.path_slots(self.leaf_id.as_deref());
        let selected = self.context_selection(&path);
        let Some(&(_, drop_system)) = selected.iter().find(|(i, _)| *i as usize == at) else {
            return false;
        };
        let slot = &self.slots[at];
        let system = match self.loaded_of(slot) {
            Some(e) => match &e.kind {
                EntryKind::Message(m) => matches!(m, Message::System(_)),
                _ => return false,
            },
            None => slot.role == ROLE_SYSTEM,
        };
        if drop_system && system {
            return false;
        }
        !matches!(self.context_edits(&selected).get(&slot.id), Some(None))
    }

    /// The id of the last `message` entry on the active branch holding the assistant message
    /// with this `timestamp` (ms), if any. Assistant messages this process appended are
    /// matched from memory; only older stored ones (a large file as opened) are read back,
    /// newest first.
    pub fn assistant_entry_id(&self, timestamp: i64) -> Option<String> {
        let path = self.path_slots(self.leaf_id.as_deref());
        path.iter().rev().find_map(|&i| {
            let slot = &self.slots[i as usize];
            let hit = match self.loaded_of(slot) {
                Some(e) => {
                    matches!(&e.kind, EntryKind::Message(Message::Assistant(a)) if a.timestamp == timestamp)
                }
                None if slot.role != ROLE_ASSISTANT => false,
                None => match self.stored_ts.get(&i) {
                    Some(&ts) => ts == timestamp,
                    None => matches!(
                        self.full(i as usize).kind,
                        EntryKind::Message(Message::Assistant(ref a)) if a.timestamp == timestamp
                    ),
                },
            };
            hit.then(|| self.ids.text(slot.id))
        })
    }

    /// Messages, thinking level and model of the active branch (spec §9), built from the
    /// table: only the entries the context selects are read (a stored message once, moved
    /// into the context), so a compacted large file costs the context, not the file.
    pub fn build_session_context(&self) -> SessionContext {
        if self.leaf_id.is_none() {
            return SessionContext {
                thinking_level: "off".into(),
                ..SessionContext::default()
            };
        }
        let path = self.path_slots(self.leaf_id.as_deref());
        let settings = self.path_settings(&path);
        let selected = self.context_selection(&path);
        let edits = self.context_edits(&selected);
        let mut messages = Vec::with_capacity(selected.len());
        for (n, &(i, drop_system)) in selected.iter().enumerate() {
            let slot = &self.slots[i as usize];
            let produced = match self.loaded_of(slot) {
                Some(e) => {
                    // An older compaction inside the kept range contributes nothing; only the
                    // newest (selected first) provides the summary.
                    if n > 0 && matches!(e.kind, EntryKind::Compaction(_)) {
                        continue;
                    }
                    if drop_system && matches!(&e.kind, EntryKind::Message(Message::System(_))) {
                        continue;
                    }
                    super::context::entry_context_messages(e)
                }
                None => {
                    if drop_system && slot.role == ROLE_SYSTEM {
                        continue;
                    }
                    self.stored_context_messages(&Self::stored_of(slot))
                }
            };
            match edits.get(&slot.id) {
                None => messages.extend(produced),
                Some(None) => {}
                Some(Some(replacement)) => messages.extend(
                    produced
                        .into_iter()
                        .map(|m| super::context::replace_content(m, replacement)),
                ),
            }
        }
        SessionContext {
            messages,
            thinking_level: settings.thinking_level,
            model: settings.model,
        }
    }
    /// The context projection of the active branch: every selected entry with the messages it
    /// contributes (see [`super::project_path`]); empty before the first entry.
    pub fn build_projection(&self) -> Vec<super::ProjectedEntry> {
        if self.leaf_id.is_none() {
            return Vec::new();
        }
        let branch = self.branch();
        let refs: Vec<&SessionEntry> = branch.iter().map(|e| e.as_ref()).collect();
        super::context::project_path_with(&refs, &|s| self.load_stored(s))
    }
    /// The active branch, root first, with every payload read back (large files keep message
    /// entries on disk as [`EntryKind::Stored`]); for compaction, which reads roles and contents.
    pub fn loaded_branch(&self) -> Vec<SessionEntry> {
        self.path_slots(self.leaf_id.as_deref())
            .into_iter()
            .map(|i| self.full(i as usize).into_owned())
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
        self.loaded.iter().rev().find_map(|e| match &e.kind {
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
        if self.loaded.len() != self.slots.len() {
            return build_tree(&self.loaded_entries(), &self.labels);
        }
        build_tree(&self.loaded, &self.labels)
    }

    // ---------------------------------------------------------------- leaf movement

    /// Move the leaf to `id` so the next append branches from there (spec §4.2 `branch`).
    pub fn set_leaf(&mut self, id: &str) -> Result<(), SessionError> {
        if !self.contains(id) {
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
                .loaded
                .last()
                .map(SessionEntry::to_line)
                .unwrap_or_default();
            match store::append(&file, line.as_bytes(), self.repair) {
                Ok(offset) => {
                    if self.lazy_file.is_none() {
                        self.lazy_file = std::fs::File::open(&file).ok().map(Arc::new);
                    }
                    if let Some(slot) = self.slots.last_mut() {
                        slot.offset = offset;
                        slot.len = u32::try_from(line.len().saturating_sub(1)).unwrap_or(0);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The file (or its folder) was deleted under us: write it again whole,
                    // header first, rather than leave a headerless file behind.
                    tracing::warn!(
                        "session file {} disappeared; writing it again",
                        file.display()
                    );
                    self.write_whole(&file)?;
                }
                Err(e) => return Err(e),
            }
            self.repair = None;
        } else if self.has_assistant {
            self.write_whole(&file)?;
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
        let at = self.slots.len() as u32;
        self.push_entry(entry);
        if let Some(slot) = self.slots.last() {
            self.index.insert(slot.id, at);
        }
        if let Err(e) = self.persist_last() {
            self.pop_entry();
            self.leaf_id = prev_leaf;
            self.has_assistant = prev_assistant;
            return Err(e);
        }
        let last = self.loaded.len() - 1;
        if let EntryKind::Label { target_id, label } = &self.loaded[last].kind {
            match label.as_deref().filter(|l| !l.is_empty()) {
                Some(l) => {
                    let ts = self.loaded[last].timestamp.clone();
                    self.labels.insert(target_id.clone(), (l.to_string(), ts));
                }
                None => {
                    self.labels.remove(target_id);
                }
            }
        }
        Ok(&self.loaded[last])
    }

    fn new_id(&self) -> String {
        generate_entry_id(|c| self.contains(c))
    }

    /// Append any entry kind as a child of the current leaf; it becomes the leaf. Returns the
    /// stored entry (for `entry_appended`).
    pub fn append_entry(&mut self, kind: EntryKind) -> io::Result<&SessionEntry> {
        let entry = SessionEntry::new(self.new_id(), self.leaf_id.clone(), kind);
        self.commit(entry)
    }

    /// Append a `message` entry; returns its id. The first assistant message flushes a new
    /// session to disk. Once the entry's line is in the file the store keeps only its place
    /// there ([`EntryKind::Stored`]; the caller's transcript holds the message): an unflushed
    /// new session and an in-memory one keep their entries.
    pub fn append_message(&mut self, msg: &Message) -> io::Result<String> {
        let id = self
            .append_entry(EntryKind::Message(msg.clone()))?
            .id
            .clone();
        let from = if std::mem::take(&mut self.whole_written) {
            0
        } else {
            self.slots.len().saturating_sub(1)
        };
        self.release_messages(from);
        Ok(id)
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
        let on_branch = self.ids.find(target_id).is_some_and(|k| {
            self.path_slots(self.leaf_id.as_deref())
                .iter()
                .any(|&i| self.slots[i as usize].id == k)
        });
        if !on_branch {
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
        if !self.contains(target_id) {
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
            if !self.contains(id) {
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
        let last = self.loaded.len() - 1;
        Ok(&self.loaded[last])
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
            .path_slots(Some(leaf_id))
            .into_iter()
            .map(|i| self.full(i as usize).into_owned())
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
        for e in kept {
            self.push_entry(e);
        }
        self.rebuild_index();
        if self.persist && self.has_assistant {
            if let Some(file) = self.session_file.clone() {
                self.write_whole(&file)?;
                self.flushed = true;
                self.whole_written = false;
                self.release_messages(0);
            }
        }
        Ok(self.session_file.clone())
    }
}
