//! Low-level file I/O for session files: tolerant streaming reads, whole-line appends,
//! rewrites and version migration (spec `sessions.md` §2, §5, §6).
//!
//! Durability rules (issue 8, beyond upstream):
//! * every write is one `write_all` of complete `\n`-terminated lines to a file opened with
//!   `O_APPEND`; if the write fails the file is truncated back to its previous length, so a
//!   half-written line is never left behind by us;
//! * a torn trailing line left by a crash is kept byte for byte; the next append first writes
//!   a `\n` so new entries start on a line of their own;
//! * a run of NUL bytes (the zero-filled tail some filesystems leave after a crash) separates
//!   records like a newline, so an entry glued behind it is still read;
//! * an append never creates a file: a session file deleted under us is reported as
//!   [`io::ErrorKind::NotFound`] so the caller can rewrite it whole (header first).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use serde_json::Value;

use super::entry::{generate_entry_id, CURRENT_SESSION_VERSION};

/// What must be done to the file before the next append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repair {
    /// The file does not end in `\n` (a torn or unterminated last line, or NUL bytes): write
    /// one first. The torn bytes themselves are never removed.
    Newline,
}

/// Summary of a streamed read.
#[derive(Debug, Default)]
pub(crate) struct ReadSummary {
    /// Non-blank records seen.
    pub records: usize,
    /// Repair to apply before appending.
    pub repair: Option<Repair>,
    /// File size in bytes.
    pub size: u64,
}

/// Stream a session file record by record: records are separated by `\n` and by runs of NUL
/// bytes; each non-blank record is handed to `each` with its byte offset in the file, in file
/// order. Only one line is held in memory at a time. `each` returns `false` to stop early.
pub(crate) fn for_each_record(
    path: &Path,
    mut each: impl FnMut(&[u8], u64) -> bool,
) -> io::Result<ReadSummary> {
    let file = File::open(path)?;
    let mut summary = ReadSummary {
        size: file.metadata()?.len(),
        ..ReadSummary::default()
    };
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::new();
    let mut last_byte = None;
    let mut offset = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        last_byte = line.last().copied();
        if memchr::memchr(0, &line).is_none() {
            // The common case, one record: found without looking at every byte.
            let record = line.strip_suffix(b"\n").unwrap_or(&line);
            if !record.iter().all(u8::is_ascii_whitespace) {
                summary.records += 1;
                if !each(record, offset) {
                    return Ok(summary);
                }
            }
            offset += n as u64;
            continue;
        }
        let mut start = 0usize;
        for segment in line.split(|&b| b == 0 || b == b'\n') {
            let at = offset + start as u64;
            start += segment.len() + 1;
            if segment.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            summary.records += 1;
            if !each(segment, at) {
                return Ok(summary);
            }
        }
        offset += n as u64;
    }
    if summary.size > 0 && last_byte != Some(b'\n') {
        summary.repair = Some(Repair::Newline);
    }
    Ok(summary)
}

/// [`for_each_record`], handing over each record that parses as JSON; anything else (garbage,
/// a torn half object) is skipped but left in the file.
pub(crate) fn for_each_value(
    path: &Path,
    mut each: impl FnMut(Value) -> bool,
) -> io::Result<ReadSummary> {
    for_each_record(path, |bytes, _| match parse_line(bytes) {
        Some(v) => each(v),
        None => true,
    })
}

/// Parse one record.
pub(crate) fn parse_record(bytes: &[u8]) -> Option<Value> {
    parse_line(bytes)
}

/// The parsed records of a file (used where all of them are needed at once: migration, the
/// source of a cross-project fork).
#[derive(Debug, Default)]
pub(crate) struct RawFile {
    /// Every record that parsed as JSON, in file order.
    pub values: Vec<Value>,
}

/// Read every record of a file (see [`for_each_value`]).
pub(crate) fn read_raw(path: &Path) -> io::Result<RawFile> {
    let mut values = Vec::new();
    for_each_value(path, |v| {
        values.push(v);
        true
    })?;
    Ok(RawFile { values })
}

fn parse_line(line: &[u8]) -> Option<Value> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    pi_ai::json::parse_value(line).ok()
}

/// Read only the first record of a file (from its first 1 MiB) as a header candidate; used by
/// session listing, which reads headers only.
pub(crate) fn read_first_value(path: &Path) -> Option<Value> {
    use std::io::Read;
    let file = File::open(path).ok()?;
    let mut buf = Vec::new();
    file.take(1024 * 1024).read_to_end(&mut buf).ok()?;
    buf.split(|&b| b == b'\n' || b == 0)
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .and_then(|l| pi_ai::json::parse_value(l).ok())
}

/// Append `data` (complete lines) to the existing file `path` with one `write_all` on an
/// `O_APPEND` handle, after applying `repair`. On a failed write the file is cut back to its
/// previous length. A missing file (or folder) is `NotFound`: the file is not created, since
/// a file without its header would be rejected by the next resume. Returns the byte offset at
/// which `data` starts in the file.
pub(crate) fn append(path: &Path, data: &[u8], repair: Option<Repair>) -> io::Result<u64> {
    use std::io::Seek;
    let mut file = OpenOptions::new().append(true).open(path)?;
    let mut buf = Vec::with_capacity(data.len() + 1);
    if repair == Some(Repair::Newline) {
        buf.push(b'\n');
    }
    buf.extend_from_slice(data);
    let before = file.metadata()?.len();
    if let Err(e) = file.write_all(&buf) {
        let _ = file.set_len(before);
        return Err(e);
    }
    // An append-mode write leaves the position at the end of what it wrote, even when another
    // process appended in between.
    let end = file.stream_position()?;
    Ok(end.saturating_sub(data.len() as u64))
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

/// [`create_exclusive`] with the data written by `write` (through a buffer) rather than held
/// in memory: for copies of large files. `write` returns `Ok(false)` to give up, in which case
/// no file is created and `Ok(false)` is returned.
pub(crate) fn create_exclusive_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<bool>,
) -> io::Result<bool> {
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new()
        .prefix(".pi-session-")
        .suffix(".tmp")
        .tempfile_in(parent)?;
    let mut out = io::BufWriter::with_capacity(256 * 1024, tmp);
    if !write(&mut out)? {
        return Ok(false);
    }
    let tmp = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    tmp.persist_noclobber(path).map_err(|e| e.error)?;
    Ok(true)
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
