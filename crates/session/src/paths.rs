//! Where sessions live: the session id rule, the per-cwd session folder, file names and the
//! most recent session of a folder (spec `sessions.md` §1).

use std::path::{Component, Path, PathBuf};

use super::entry::SessionHeader;
use super::manager::SessionError;
use super::store;

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

/// A session folder as the user gave it: an absolute path as [`resolve_path`] makes it; a
/// relative one stays relative (to the process cwd, which is pi's cwd) with `.`/`..` removed
/// lexically, like Node's `path.join`, so the session files in it read as upstream 1.6 shows
/// them (`sessionDir: "sess"` → `sessionFile` `sess/<file>.jsonl`; issue 27).
pub(crate) fn session_dir_path(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return resolve_path(p);
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
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

pub(super) fn file_name_for(header: &SessionHeader) -> String {
    let ts: String = header
        .timestamp
        .chars()
        .map(|c| if c == ':' || c == '.' { '-' } else { c })
        .collect();
    format!("{ts}_{}.jsonl", header.id)
}
