//! Opening a session file (streamed, lazily for large files, migrated when old) and forking
//! another file into a new one (spec `sessions.md` §5.2–§5.4, §8.6).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::{
    file_name_for, resolve_path, session_dir_path, validate_session_id, SessionError,
    SessionManager, LAZY_MIN_BYTES,
};
use crate::entry::{SessionEntry, SessionHeader};
use crate::scan;
use crate::store;

impl SessionManager {
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

    /// [`open_with`](Self::open_with) for a file found by listing `session_dir`
    /// (`--continue`): a relative folder's file keeps its relative path, as upstream's
    /// `continueRecent` shows it (`sess/<file>.jsonl`; issue 27).
    pub(crate) fn open_listed(
        path: &Path,
        session_dir: &Path,
    ) -> Result<SessionManager, SessionError> {
        let mut sm = Self::open_with(path, Some(session_dir), None)?;
        if path.is_relative() {
            sm.session_file = Some(session_dir_path(path));
        }
        Ok(sm)
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
                            < crate::entry::CURRENT_SESSION_VERSION;
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
        let dir = session_dir_path(session_dir);
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
}
