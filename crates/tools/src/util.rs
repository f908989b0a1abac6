//! Small helpers shared by the tools: path resolution (spec tools.md §0.3), Node-style OS error
//! texts, JavaScript number formatting, argument access, the per-file mutation lock, the
//! cancellation boilerplate of `AgentTool::execute` and the notices of the listing tools
//! (grep, find, ls; spec tools.md §5–§7).

use super::truncate::{format_size, truncate_head, TruncationLimits, DEFAULT_MAX_BYTES};
use pi_agent::{ToolError, ToolOutput};
use pi_ai::{Content, ToolDefinition};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;

/// The user's home directory (`$HOME`), if known.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// Normalises a model-supplied path without resolving it: strips one leading `@`, turns exotic
/// Unicode spaces into plain spaces and expands `~` / `~/…` to the home directory.
pub fn expand_path(input: &str) -> String {
    let stripped = input.strip_prefix('@').unwrap_or(input);
    let spaced: String = stripped
        .chars()
        .map(|c| if is_unicode_space(c) { ' ' } else { c })
        .collect();
    if let Some(home) = home_dir() {
        if spaced == "~" {
            return home.to_string_lossy().into_owned();
        }
        if let Some(rest) = spaced.strip_prefix("~/") {
            return home.join(rest).to_string_lossy().into_owned();
        }
    }
    spaced
}

/// Lexically normalises an absolute path (`.` and `..` removed, no trailing slash), like Node's
/// `path.resolve`.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

/// Resolves a tool path argument against the tool's `cwd` (spec tools.md §0.3): [`expand_path`],
/// then absolute paths are kept and relative ones joined to `cwd`; the result is normalised.
pub fn resolve_to_cwd(input: &str, cwd: &Path) -> PathBuf {
    let expanded = expand_path(input);
    let p = Path::new(&expanded);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    normalize_lexically(&joined)
}

/// [`resolve_to_cwd`] plus the macOS file-name variants the read tool tries when the plain path
/// does not exist: narrow no-break space before `AM.`/`PM.`, NFD form, `'` → U+2019, and NFD with
/// U+2019. The first existing variant wins, else the plain resolved path.
pub fn resolve_read_path(input: &str, cwd: &Path) -> PathBuf {
    use unicode_normalization::UnicodeNormalization;
    let resolved = resolve_to_cwd(input, cwd);
    if resolved.exists() {
        return resolved;
    }
    let plain = resolved.to_string_lossy().into_owned();
    let am_pm = replace_am_pm(&plain);
    let nfd: String = plain.nfd().collect();
    let curly = plain.replace('\'', "\u{2019}");
    let nfd_curly = nfd.replace('\'', "\u{2019}");
    for candidate in [am_pm, nfd, curly, nfd_curly] {
        if candidate != plain && Path::new(&candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    resolved
}

/// ` AM.` / ` PM.` (any case) with U+202F instead of the space.
fn replace_am_pm(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' '
            && i + 3 < chars.len()
            && matches!(chars[i + 1], 'a' | 'A' | 'p' | 'P')
            && matches!(chars[i + 2], 'm' | 'M')
            && chars[i + 3] == '.'
        {
            out.push('\u{202F}');
        } else {
            out.push(chars[i]);
        }
        i += 1;
    }
    out
}

/// Node's error code for an I/O error (`ENOENT`, `EACCES`, …).
pub fn error_code(err: &io::Error) -> String {
    let Some(errno) = err.raw_os_error() else {
        return match err.kind() {
            io::ErrorKind::NotFound => "ENOENT".into(),
            io::ErrorKind::PermissionDenied => "EACCES".into(),
            io::ErrorKind::AlreadyExists => "EEXIST".into(),
            _ => "EIO".into(),
        };
    };
    let (code, _) = errno_text(errno);
    code.to_string()
}

fn errno_text(errno: i32) -> (&'static str, &'static str) {
    match errno {
        libc::ENOENT => ("ENOENT", "no such file or directory"),
        libc::EACCES => ("EACCES", "permission denied"),
        libc::EPERM => ("EPERM", "operation not permitted"),
        libc::EISDIR => ("EISDIR", "illegal operation on a directory"),
        libc::ENOTDIR => ("ENOTDIR", "not a directory"),
        libc::EEXIST => ("EEXIST", "file already exists"),
        libc::ELOOP => ("ELOOP", "too many symbolic links encountered"),
        libc::ENAMETOOLONG => ("ENAMETOOLONG", "name too long"),
        libc::ENOSPC => ("ENOSPC", "no space left on device"),
        libc::EROFS => ("EROFS", "read-only file system"),
        libc::EBUSY => ("EBUSY", "resource busy or locked"),
        libc::EMFILE => ("EMFILE", "too many open files"),
        libc::EINVAL => ("EINVAL", "invalid argument"),
        libc::ETXTBSY => ("ETXTBSY", "text file is busy"),
        libc::EIO => ("EIO", "i/o error"),
        _ => ("EIO", "i/o error"),
    }
}

/// Formats an OS error as Node does: `ENOENT: no such file or directory, access '/a/b'`.
/// `path` is omitted when `None` (e.g. `EISDIR: illegal operation on a directory, read`).
pub fn node_error(err: &io::Error, syscall: &str, path: Option<&Path>) -> String {
    let (code, desc) = match err.raw_os_error() {
        Some(errno) => errno_text(errno),
        None => return err.to_string(),
    };
    match path {
        Some(p) => format!("{code}: {desc}, {syscall} '{}'", p.display()),
        None => format!("{code}: {desc}, {syscall}"),
    }
}

/// A kind of file the file tools refuse to open ([`special_file_kind`]); displays as
/// `a FIFO (named pipe)`, `a character device`, `a block device`, `a socket`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialFile {
    /// A named pipe: opening it blocks until the other side opens it.
    Fifo,
    /// A character device such as `/dev/zero` (may never end).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
}

impl std::fmt::Display for SpecialFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpecialFile::Fifo => "a FIFO (named pipe)",
            SpecialFile::CharDevice => "a character device",
            SpecialFile::BlockDevice => "a block device",
            SpecialFile::Socket => "a socket",
        })
    }
}

/// What `path` is when it is a FIFO, a device or a socket (symlinks followed, as `stat(2)`);
/// `None` for regular files, directories, and paths that cannot be stat-ed (the caller's own
/// open then reports the error). Checked before opening: opening a FIFO blocks until a writer
/// appears, and a device such as `/dev/zero` never ends (issue 28; beyond upstream 1.6, which
/// hangs or grows without bound on them).
pub fn special_file_kind(path: &Path) -> Option<SpecialFile> {
    use std::os::unix::fs::FileTypeExt;
    let ft = std::fs::metadata(path).ok()?.file_type();
    if ft.is_fifo() {
        Some(SpecialFile::Fifo)
    } else if ft.is_char_device() {
        Some(SpecialFile::CharDevice)
    } else if ft.is_block_device() {
        Some(SpecialFile::BlockDevice)
    } else if ft.is_socket() {
        Some(SpecialFile::Socket)
    } else {
        None
    }
}

/// `access(2)` with the given mode (`libc::R_OK`, …), as an `io::Result`.
pub fn access(path: &Path, mode: libc::c_int) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::access(c.as_ptr(), mode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

// `js_number` (JavaScript's `String(n)`) and `json_number` (a JSON number without a spurious
// `.0`) live in `pi_agent::validate`, which needs them for argument coercion; re-exported here so
// the tools and the session keep using `tools::util::{js_number, json_number}`.
pub use pi_agent::validate::{js_number, json_number};

/// A string argument, if present and a string.
pub fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A numeric argument, if present and a number.
pub fn arg_f64(args: &Value, key: &str) -> Option<f64> {
    args.get(key).and_then(Value::as_f64)
}

/// A boolean argument, if present and a boolean.
pub fn arg_bool(args: &Value, key: &str) -> Option<bool> {
    args.get(key).and_then(Value::as_bool)
}

/// A required string argument or the error text upstream would produce for a missing one.
pub fn require_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    arg_str(args, key).ok_or_else(|| format!("Missing required argument: {key}"))
}

/// The error text of a tool call stopped through its cancellation token (upstream's abort text).
pub const ABORTED: &str = "Operation aborted";

/// `Err(`[`ToolError::Aborted`]`)` (text [`ABORTED`]) when `cancel` has fired, else `Ok(())`.
pub fn check_aborted(cancel: &CancellationToken) -> Result<(), ToolError> {
    if cancel.is_cancelled() {
        Err(ToolError::Aborted)
    } else {
        Ok(())
    }
}

/// The [`ToolDefinition`] of a built-in tool: its `name`, model-facing `description` and
/// JSON-Schema `parameters`.
pub fn tool_definition(
    name: &str,
    description: impl Into<String>,
    parameters: Value,
) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        parameters,
    }
}

/// Runs `work` on tokio's blocking pool and waits for it, unless `cancel` fires first.
///
/// Errors: [`ToolError::Aborted`] when `cancel` fires before `work` finishes (the blocking
/// work is not interrupted, its result is dropped; `work` may poll a clone of `cancel` to stop
/// early); [`ToolError::Failed`] `"<tool> failed: <join error>"` when the task panics;
/// otherwise `work`'s own result (a `String` error becomes [`ToolError::Failed`]).
pub async fn run_blocking_cancellable<F, E>(
    tool: &str,
    cancel: &CancellationToken,
    work: F,
) -> Result<ToolOutput, ToolError>
where
    F: FnOnce() -> Result<ToolOutput, E> + Send + 'static,
    E: Into<ToolError> + Send + 'static,
{
    let task = tokio::task::spawn_blocking(work);
    tokio::select! {
        _ = cancel.cancelled() => Err(ToolError::Aborted),
        res = task => match res {
            Ok(result) => result.map_err(Into::into),
            Err(e) => Err(ToolError::Failed(format!("{tool} failed: {e}"))),
        },
    }
}

/// One bracketed notice of a listing tool's output together with the `details` entry that
/// records it (see [`listing_output`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ListingNotice {
    /// Notice text, without brackets or trailing period.
    pub text: String,
    /// Key of the `details` entry (camelCase, e.g. `resultLimitReached`).
    pub key: &'static str,
    /// Value of the `details` entry.
    pub value: Value,
}

impl ListingNotice {
    /// The row-count notice of grep/find/ls (spec tools.md §5.2, §6, §7):
    /// `"<limit> <noun> limit reached. Use limit=<2·limit> for more<hint>"` (numbers as
    /// JavaScript prints them) with `details.<key> = limit`. `hint` is appended verbatim, e.g.
    /// `", or refine pattern"` or `""`.
    pub fn row_limit(limit: f64, noun: &str, hint: &str, key: &'static str) -> Self {
        ListingNotice {
            text: format!(
                "{} {noun} limit reached. Use limit={} for more{hint}",
                js_number(limit),
                js_number(limit * 2.0)
            ),
            key,
            value: json_number(limit),
        }
    }
}

/// The result of a listing tool (grep, find, ls): `rows` joined with `\n` and cut to the first
/// [`DEFAULT_MAX_BYTES`] bytes of whole lines ([`truncate_head`] with
/// [`TruncationLimits::bytes_only`]), followed by `\n\n[<notices joined by ". ">]` when there are
/// any. Notice order: `row_limit` (when given), then `"<50.0KB> limit reached"` when the byte
/// limit cut the text (`details.truncation` = the truncation result), then `trailing` (when
/// given). `details` holds the entries of the notices shown, in that order, and is `None` when
/// there are none; no `structuredContent`, no `isError`.
pub fn listing_output(
    rows: &[String],
    row_limit: Option<ListingNotice>,
    trailing: Option<ListingNotice>,
) -> ToolOutput {
    let t = truncate_head(&rows.join("\n"), TruncationLimits::bytes_only());
    let byte_limit = t.truncated.then(|| ListingNotice {
        text: format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)),
        key: "truncation",
        value: t.to_json(),
    });
    let mut output = t.content;
    let mut details = Map::new();
    let mut notices = Vec::new();
    for notice in [row_limit, byte_limit, trailing].into_iter().flatten() {
        notices.push(notice.text);
        details.insert(notice.key.into(), notice.value);
    }
    if !notices.is_empty() {
        output.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    ToolOutput {
        content: vec![Content::text(output)],
        details: (!details.is_empty()).then_some(Value::Object(details)),
        structured_content: None,
        is_error: None,
    }
}

/// One async lock per absolute path: `write` and `edit` on the same file are serialised
/// (upstream's file mutation queue).
pub fn file_lock(path: &Path) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let map = LOCKS.get_or_init(Default::default);
    let mut guard = match map.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    // Drop entries nobody holds any more so the map does not grow without bound.
    guard.retain(|_, lock| Arc::strong_count(lock) > 1);
    guard
        .entry(path.to_path_buf())
        .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_and_at_prefix() {
        let cwd = Path::new("/work/x");
        assert_eq!(
            resolve_to_cwd("@src/../a.txt", cwd),
            PathBuf::from("/work/x/a.txt")
        );
        assert_eq!(
            resolve_to_cwd("/etc/./hosts", cwd),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(
            resolve_to_cwd("a\u{00A0}b", cwd),
            PathBuf::from("/work/x/a b")
        );
    }

    #[test]
    fn js_numbers() {
        assert_eq!(js_number(2.0), "2");
        assert_eq!(js_number(0.5), "0.5");
        assert_eq!(js_number(-3.0), "-3");
    }

    #[test]
    fn listing_output_notice_order_and_details() {
        let rows: Vec<String> = (0..2000).map(|i| format!("{i:0>40}")).collect();
        let out = listing_output(
            &rows,
            Some(ListingNotice::row_limit(
                2.0,
                "matches",
                ", or refine pattern",
                "matchLimitReached",
            )),
            Some(ListingNotice {
                text: "Some lines truncated".into(),
                key: "linesTruncated",
                value: Value::Bool(true),
            }),
        );
        let Content::Text(text) = &out.content[0] else {
            panic!("text block expected");
        };
        assert!(text.text.ends_with(
            "\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern. \
             50.0KB limit reached. Some lines truncated]"
        ));
        let details = out.details.expect("details");
        let keys: Vec<&String> = details.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["matchLimitReached", "truncation", "linesTruncated"]);
        assert_eq!(details["matchLimitReached"], 2);
        assert_eq!(details["truncation"]["truncatedBy"], "bytes");

        let small = listing_output(&["a".to_string()], None, None);
        assert!(small.details.is_none());
    }

    #[test]
    fn am_pm() {
        assert_eq!(replace_am_pm("a 10.00 PM.png"), "a 10.00\u{202F}PM.png");
    }
}
