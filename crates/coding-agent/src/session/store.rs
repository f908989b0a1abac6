//! Low-level file I/O for session files: tolerant reading, whole-line appends, rewrites and
//! version migration (spec `sessions.md` §2, §5, §6).
//!
//! Durability rule: every write is one `write_all` of complete `\n`-terminated lines to a file
//! opened with `O_APPEND`; if the write fails the file is truncated back to its previous
//! length, so a half-written line is never left behind by us. A torn trailing line left by a
//! crash is ignored on read and repaired before the next append.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use serde_json::Value;

use super::entry::{generate_entry_id, CURRENT_SESSION_VERSION};

/// What must be done to the file before the next append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repair {
    /// The last line was not terminated and did not parse: cut the file to this length.
    Truncate(u64),
    /// The last line parsed but had no trailing `\n`: write one first.
    Newline,
}

/// The parsed lines of a file.
#[derive(Debug, Default)]
pub(crate) struct RawFile {
    /// Every line that parsed as JSON, in file order (blank/garbage lines skipped).
    pub values: Vec<Value>,
    /// Repair to apply before appending.
    pub repair: Option<Repair>,
    /// File size in bytes.
    pub size: u64,
}

/// Read and parse a session file line by line. Lines that are not valid JSON are skipped;
/// an unterminated last line is used if it parses (upstream does the same) and otherwise
/// scheduled for truncation.
pub(crate) fn read_raw(path: &Path) -> io::Result<RawFile> {
    let bytes = fs::read(path)?;
    let mut out = RawFile {
        size: bytes.len() as u64,
        ..RawFile::default()
    };
    let complete_len = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|p| p + 1)
        .unwrap_or(0);
    for line in bytes[..complete_len].split(|&b| b == b'\n') {
        if let Some(v) = parse_line(line) {
            out.values.push(v);
        }
    }
    let tail = &bytes[complete_len..];
    if !tail.iter().all(u8::is_ascii_whitespace) {
        match parse_line(tail) {
            Some(v) => {
                out.values.push(v);
                out.repair = Some(Repair::Newline);
            }
            None => out.repair = Some(Repair::Truncate(complete_len as u64)),
        }
    }
    Ok(out)
}

fn parse_line(line: &[u8]) -> Option<Value> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    pi_ai::json::parse_value(line).ok()
}

/// Read only the first parsed line of a file (up to 1 MiB) as a header candidate.
pub(crate) fn read_first_value(path: &Path) -> Option<Value> {
    use std::io::Read;
    let file = File::open(path).ok()?;
    let mut buf = Vec::new();
    file.take(1024 * 1024).read_to_end(&mut buf).ok()?;
    buf.split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .and_then(|l| pi_ai::json::parse_value(l).ok())
}

/// Append `data` (complete lines) to `path` with one `write_all` on an `O_APPEND` handle,
/// after applying `repair`. On a failed write the file is cut back to its previous length.
pub(crate) fn append(path: &Path, data: &[u8], repair: Option<Repair>) -> io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let mut buf = Vec::with_capacity(data.len() + 1);
    match repair {
        Some(Repair::Truncate(len)) => file.set_len(len)?,
        Some(Repair::Newline) => buf.push(b'\n'),
        None => {}
    }
    buf.extend_from_slice(data);
    let before = file.metadata()?.len();
    if let Err(e) = file.write_all(&buf) {
        let _ = file.set_len(before);
        return Err(e);
    }
    Ok(())
}

/// Create `path` exclusively (fails if it exists) holding `data`. The lines are written to a
/// temp file in the same folder first and then linked into place, so a crash (even SIGKILL)
/// leaves either no session file or a complete one, never an empty or half-written file.
pub(crate) fn create_exclusive(path: &Path, data: &[u8]) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".pi-session-")
        .suffix(".tmp")
        .tempfile_in(parent)?;
    tmp.write_all(data)?;
    tmp.persist_noclobber(path).map_err(|e| e.error)?;
    Ok(())
}

/// Replace `path` with `data` atomically (temp file in the same folder, then rename).
pub(crate) fn rewrite(path: &Path, data: &[u8]) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent)?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)?;
    tmp.write_all(data)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Bring raw file lines (header first) to version 3 in place (spec `sessions.md` §6).
/// Returns whether anything changed (the caller then rewrites the file).
pub(crate) fn migrate(values: &mut [Value]) -> bool {
    let version = values
        .first()
        .and_then(|h| h.get("version"))
        .and_then(Value::as_u64)
        .unwrap_or(1);
    if version >= CURRENT_SESSION_VERSION {
        return false;
    }
    if version < 2 {
        let mut ids = std::collections::HashSet::new();
        let mut prev: Option<String> = None;
        for i in 0..values.len() {
            if values[i].get("type").and_then(Value::as_str) == Some("session") {
                continue;
            }
            let id = generate_entry_id(|c| ids.contains(c));
            ids.insert(id.clone());
            let keep_index = values[i]
                .get("firstKeptEntryIndex")
                .and_then(Value::as_u64)
                .map(|n| n as usize);
            let kept_id = keep_index
                .and_then(|k| values.get(k))
                .filter(|t| t.get("type").and_then(Value::as_str) != Some("session"))
                .and_then(|t| t.get("id").cloned());
            let Some(obj) = values[i].as_object_mut() else {
                continue;
            };
            obj.insert("id".into(), id.clone().into());
            obj.insert(
                "parentId".into(),
                prev.clone().map(Value::String).unwrap_or(Value::Null),
            );
            if obj.get("type").and_then(Value::as_str) == Some("compaction") && keep_index.is_some()
            {
                if let Some(k) = kept_id {
                    obj.insert("firstKeptEntryId".into(), k);
                }
                obj.remove("firstKeptEntryIndex");
            }
            prev = Some(id);
        }
    }
    for v in values.iter_mut() {
        let Some(obj) = v.as_object_mut() else {
            continue;
        };
        if obj.get("type").and_then(Value::as_str) == Some("session") {
            obj.insert("version".into(), CURRENT_SESSION_VERSION.into());
            continue;
        }
        if obj.get("type").and_then(Value::as_str) == Some("message") {
            if let Some(m) = obj.get_mut("message").and_then(Value::as_object_mut) {
                if m.get("role").and_then(Value::as_str) == Some("hookMessage") {
                    m.insert("role".into(), "custom".into());
                }
            }
        }
    }
    true
}
