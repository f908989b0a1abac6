//! The `read` tool (spec tools.md §1; result shape from the 1.6 recording `tool_read`).
//!
//! Text files are returned raw (no line numbers) as one text block, also mirrored in
//! `structuredContent` as the same string. Images (PNG, JPEG, GIF, WebP, BMP, detected by
//! content) are prepared for the current model ([`pi_platform::images`]) and returned as the text
//! `Read image file [<mime>]` (plus the conversion/dimension notes, one per line) and the image
//! block; `structuredContent` is `{type:"image", data, mimeType, note}` and, for a model without
//! image input, `details` is `{imageUnsupportedByModel: <model id>}` (upstream 1.6 read tool).
//! An image that does not decode is an error result and is never sent.

use super::schema;
use super::truncate::{format_size, truncate_head, TruncatedBy, TruncationLimits};
use super::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use super::util::{
    access, arg_f64, check_aborted, js_number, node_error, require_str, resolve_read_path,
    run_blocking_cancellable, special_file_kind, tool_definition,
};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Content, ToolDefinition};
use pi_platform::images::{prepare_image, ImageError, ImagePolicySlot};
use serde_json::{json, Value};
use std::io::Read;
use std::path::PathBuf;

pub use pi_platform::images::detect_image_mime;

/// The read tool.
pub struct ReadTool {
    cwd: PathBuf,
    images: ImagePolicySlot,
}

impl ReadTool {
    /// A read tool resolving relative paths against `cwd`, preparing images with the default
    /// policy.
    pub fn new(cwd: PathBuf) -> Self {
        ReadTool::with_images(cwd, ImagePolicySlot::default())
    }

    /// A read tool preparing images with the policy the session binds into `images`.
    pub fn with_images(cwd: PathBuf, images: ImagePolicySlot) -> Self {
        ReadTool { cwd, images }
    }
}

/// JSON-Schema of the read tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &["path"],
        vec![
            (
                "path",
                schema::string("File to read, absolute or relative to the working directory."),
            ),
            (
                "offset",
                schema::number("First line to return, counting from 1."),
            ),
            (
                "limit",
                schema::number("Largest number of lines to return."),
            ),
        ],
    )
}

fn description() -> String {
    format!(
        "Read a file. Text files and images (jpg, png, gif, webp) are supported; images come back as \
         attachments. Text output stops after {DEFAULT_MAX_LINES} lines or {}KB, whichever comes \
         first; use offset and limit to page through large files and keep reading with a higher \
         offset until you have everything you need.",
        DEFAULT_MAX_BYTES / 1024
    )
}

/// Bytes sniffed from the start of a file to tell an image by content (upstream 1.6
/// `IMAGE_TYPE_SNIFF_BYTES`, spec tools.md §1: first 4100 bytes).
pub const IMAGE_SNIFF_BYTES: usize = 4100;

/// Largest image file read into memory (64 MiB); a bigger image answers the "could not be
/// resized below the inline image size limit" note without being read. Beyond upstream 1.6,
/// which reads any image whole (issue 28: bounded memory on hostile input).
pub const MAX_IMAGE_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Bytes read from the file at a time while streaming a text read.
const READ_CHUNK: usize = 64 * 1024;

/// The lines of a text read picked out of a stream: only the lines the output can show are
/// kept, the rest are counted, so memory stays bounded by the output caps whatever the file's
/// size (upstream 1.6 `selectLinesFromStream`). Lines are split on `\n` and decoded as lossy
/// UTF-8, exactly as splitting `String::from_utf8_lossy` of the whole file would.
#[derive(Debug, Default)]
struct Selection {
    /// Lines in the whole file (`split('\n')` count: a trailing newline opens an empty line).
    file_lines: usize,
    /// The first selected lines, as many as [`truncate_head`] needs to decide (a line past the
    /// byte cap may be kept only in part).
    stored: Vec<String>,
    /// UTF-8 bytes of `stored` joined by `\n`.
    stored_bytes: usize,
    /// Selected lines.
    selected_lines: usize,
    /// UTF-8 bytes of the selected lines joined by `\n`.
    selected_bytes: usize,
    /// Whether the last selected line is empty.
    last_line_empty: bool,
    /// UTF-8 bytes of the first selected line.
    first_line_bytes: usize,
}

/// The index of the first `\n` in `hay`. The C library's `memchr`: vectorised in every build
/// profile (a debug build scans a 2 GB file in a second, not half a minute).
fn find_newline(hay: &[u8]) -> Option<usize> {
    // SAFETY: the pointer and length describe the live slice `hay`; memchr reads only them.
    let found = unsafe { libc::memchr(hay.as_ptr().cast(), libc::c_int::from(b'\n'), hay.len()) };
    (!found.is_null()).then(|| found as usize - hay.as_ptr() as usize)
}

/// Decodes `seg` as lossy UTF-8 into `sink` (U+FFFD per maximal invalid subpart, as
/// `String::from_utf8_lossy`). Unless `last` is set, an incomplete sequence at the end is left
/// undecoded for the next piece; returns the bytes consumed.
fn decode_lossy(seg: &[u8], last: bool, sink: &mut impl FnMut(&str)) -> usize {
    let mut at = 0;
    loop {
        let rest = &seg[at..];
        match std::str::from_utf8(rest) {
            Ok(s) => {
                sink(s);
                return seg.len();
            }
            Err(e) => {
                let valid = e.valid_up_to();
                if let Ok(s) = std::str::from_utf8(&rest[..valid]) {
                    sink(s);
                }
                match e.error_len() {
                    Some(n) => {
                        sink("\u{FFFD}");
                        at += valid + n;
                    }
                    None if last => {
                        sink("\u{FFFD}");
                        return seg.len();
                    }
                    None => return at + valid,
                }
            }
        }
    }
}

/// One selected line being read.
#[derive(Default)]
struct LineAcc {
    text: String,
    bytes: usize,
    has_text: bool,
}

impl Selection {
    fn add_piece(&mut self, acc: &mut LineAcc, storing: bool, piece: &str) {
        if piece.is_empty() {
            return;
        }
        acc.has_text = true;
        if storing && acc.bytes <= DEFAULT_MAX_BYTES {
            acc.text.push_str(piece);
        }
        acc.bytes += piece.len();
    }

    /// Ends the current selected line; returns whether later lines are still stored.
    fn finish_line(&mut self, acc: &mut LineAcc, storing: bool) -> bool {
        let acc = std::mem::take(acc);
        if self.selected_lines == 0 {
            self.first_line_bytes = acc.bytes;
        }
        let mut still = storing;
        if storing {
            if self.stored.len() > DEFAULT_MAX_LINES || self.stored_bytes > DEFAULT_MAX_BYTES {
                still = false;
            }
            self.stored_bytes += acc.text.len() + usize::from(!self.stored.is_empty());
            self.stored.push(acc.text);
        }
        self.selected_bytes += acc.bytes + usize::from(self.selected_lines > 0);
        self.selected_lines += 1;
        self.last_line_empty = !acc.has_text;
        still
    }
}

/// Reads `reader` to its end, selecting lines `start..end` (0-based, `end` exclusive, `None`:
/// to the end). `aborted` is polled between chunks; when it answers true the read stops with
/// an `Interrupted` error.
fn select_lines(
    reader: impl Read,
    start: usize,
    end: Option<usize>,
    aborted: &dyn Fn() -> bool,
) -> std::io::Result<Selection> {
    select_lines_in_chunks(reader, start, end, aborted, READ_CHUNK)
}

/// [`select_lines`] reading `chunk` bytes at a time (tests use tiny chunks).
fn select_lines_in_chunks(
    mut reader: impl Read,
    start: usize,
    end: Option<usize>,
    aborted: &dyn Fn() -> bool,
    chunk: usize,
) -> std::io::Result<Selection> {
    let mut sel = Selection {
        last_line_empty: true,
        ..Default::default()
    };
    let mut buf = vec![0u8; chunk.max(1) + 4];
    let mut carry = 0usize;
    let mut line = 0usize;
    let mut acc = LineAcc::default();
    let mut storing = true;
    let in_range = |line: usize| line >= start && end.is_none_or(|e| line < e);
    loop {
        if aborted() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "Operation aborted",
            ));
        }
        let n = match reader.read(&mut buf[carry..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let eof = n == 0;
        let len = carry + n;
        let data = &buf[..len];
        let mut pos = 0;
        let mut keep_from = len;
        loop {
            let rest = &data[pos..];
            if !in_range(line) {
                if end.is_some_and(|e| line >= e) {
                    // Past the selection: only the count of lines matters.
                    let mut at = 0;
                    while let Some(i) = find_newline(&rest[at..]) {
                        line += 1;
                        at += i + 1;
                    }
                    break;
                }
                match find_newline(rest) {
                    Some(i) => {
                        line += 1;
                        pos += i + 1;
                        continue;
                    }
                    None => break,
                }
            }
            let nl = find_newline(rest);
            let seg = &rest[..nl.unwrap_or(rest.len())];
            let used = decode_lossy(seg, nl.is_some() || eof, &mut |piece| {
                sel.add_piece(&mut acc, storing, piece)
            });
            match nl {
                Some(i) => {
                    storing = sel.finish_line(&mut acc, storing);
                    line += 1;
                    pos += i + 1;
                }
                None => {
                    keep_from = pos + used;
                    break;
                }
            }
        }
        if eof {
            break;
        }
        buf.copy_within(keep_from..len, 0);
        carry = len - keep_from;
    }
    if in_range(line) {
        sel.finish_line(&mut acc, storing);
    }
    sel.file_lines = line + 1;
    Ok(sel)
}

/// The 0-based first line and the exclusive end of a read's `offset`/`limit` (spec tools.md
/// §1.2: `offset` counts from 1, 0 or absent is the start; a negative, fractional or NaN
/// `limit` counts as its floor of at least 0).
fn line_range(offset: Option<f64>, limit: Option<f64>) -> (usize, Option<usize>) {
    let start = match offset {
        Some(o) if o != 0.0 && !o.is_nan() => (o - 1.0).max(0.0).floor() as usize,
        _ => 0,
    };
    let end = limit.map(|l| {
        let l = if l.is_nan() { 0.0 } else { l.max(0.0).floor() };
        start.saturating_add(l as usize)
    });
    (start, end)
}

/// Formats the text of a (possibly offset/limited) read as upstream does (spec tools.md §1.2).
/// Returns the output text and the truncation details when truncation happened.
pub fn format_text_read(
    text: &str,
    path_arg: &str,
    offset: Option<f64>,
    limit: Option<f64>,
) -> Result<(String, Option<Value>), String> {
    let (start, end) = line_range(offset, limit);
    let sel = select_lines(text.as_bytes(), start, end, &|| false).map_err(|e| e.to_string())?;
    format_selection(sel, start, end, path_arg, offset)
}

/// The output text and truncation details of a read from its [`Selection`].
fn format_selection(
    sel: Selection,
    start: usize,
    end: Option<usize>,
    path_arg: &str,
    offset: Option<f64>,
) -> Result<(String, Option<Value>), String> {
    let total = sel.file_lines;
    if start >= total {
        return Err(format!(
            "Offset {} is beyond end of file ({total} lines total)",
            js_number(offset.unwrap_or(0.0))
        ));
    }
    let user_limited = end.map(|e| e.min(total).max(start) - start);
    let mut t = truncate_head(&sel.stored.join("\n"), TruncationLimits::default());
    // The kept lines are a prefix of the selection; the totals are the selection's own.
    t.total_lines = if sel.selected_bytes == 0 {
        0
    } else {
        sel.selected_lines - usize::from(sel.last_line_empty)
    };
    t.total_bytes = sel.selected_bytes;
    let start_display = start + 1;
    if t.first_line_exceeds_limit {
        let size = format_size(sel.first_line_bytes);
        let out = format!(
            "[Line {start_display} is {size}, exceeds {} limit. Use bash: sed -n '{start_display}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return Ok((out, Some(json!({"truncation": t.to_json()}))));
    }
    if t.truncated {
        let end_display = start_display + t.output_lines - 1;
        let next = end_display + 1;
        let mut out = t.content.clone();
        if t.truncated_by == Some(TruncatedBy::Lines) {
            out.push_str(&format!(
                "\n\n[Showing lines {start_display}-{end_display} of {total}. Use offset={next} to continue.]"
            ));
        } else {
            out.push_str(&format!(
                "\n\n[Showing lines {start_display}-{end_display} of {total} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES)
            ));
        }
        return Ok((out, Some(json!({"truncation": t.to_json()}))));
    }
    if let Some(n) = user_limited {
        if start + n < total {
            let remaining = total - (start + n);
            let next = start + n + 1;
            return Ok((
                format!(
                    "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
                    t.content
                ),
                None,
            ));
        }
    }
    Ok((t.content, None))
}

/// Reads up to `max` bytes of `reader` (fewer at its end).
fn read_up_to(reader: &mut impl Read, max: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    reader.take(max as u64).read_to_end(&mut out)?;
    Ok(out)
}

/// The answer for an image that cannot be sent: `Read image file [<mime>]` and upstream's
/// "could not be resized below the inline image size limit" note.
fn too_large_note(mime: &str) -> ToolOutput {
    let note = format!("Read image file [{mime}]\n[{}]", ImageError::TooLarge);
    ToolOutput {
        content: vec![Content::text(note.clone())],
        structured_content: Some(Value::String(note)),
        ..Default::default()
    }
}

/// The image answer for `bytes` of type `mime` (see the module docs).
fn image_output(
    bytes: &[u8],
    mime: &str,
    path: &std::path::Path,
    policy: &pi_platform::images::ImagePolicy,
) -> Result<ToolOutput, String> {
    let prepared = match prepare_image(bytes, mime, None, policy) {
        Ok(p) => p,
        Err(ImageError::TooLarge) => return Ok(too_large_note(mime)),
        Err(e) => return Err(format!("Could not read image file {}: {e}", path.display())),
    };
    let mut note = format!("Read image file [{}]", prepared.image.mime_type);
    for hint in &prepared.hints {
        note.push('\n');
        note.push_str(hint);
    }
    let structured = json!({
        "type": "image",
        "data": prepared.image.data,
        "mimeType": prepared.image.mime_type,
        "note": note,
    });
    Ok(ToolOutput {
        content: vec![Content::text(note), Content::Image(prepared.image)],
        details: policy
            .text_only_model
            .as_ref()
            .map(|id| json!({"imageUnsupportedByModel": id})),
        structured_content: Some(structured),
        is_error: None,
    })
}

/// The read itself, on a blocking thread: refuses devices, FIFOs and sockets before opening,
/// sniffs the first [`IMAGE_SNIFF_BYTES`] for an image, else streams the text. A regular file
/// is read up to its size when opened (a file growing meanwhile still ends); a file reporting
/// size 0 (`/proc`) to its end.
fn read_file(
    path_arg: &str,
    cwd: &std::path::Path,
    offset: Option<f64>,
    limit: Option<f64>,
    policy: &pi_platform::images::ImagePolicy,
    aborted: &dyn Fn() -> bool,
) -> Result<ToolOutput, String> {
    let path = resolve_read_path(path_arg, cwd);
    access(&path, libc::R_OK).map_err(|e| node_error(&e, "access", Some(&path)))?;
    if let Some(kind) = special_file_kind(&path) {
        return Err(format!(
            "Cannot read {path_arg}: it is {kind}, not a regular file"
        ));
    }
    let mut file = std::fs::File::open(&path).map_err(|e| node_error(&e, "open", Some(&path)))?;
    let size = file
        .metadata()
        .ok()
        .filter(|m| m.is_file() && m.len() > 0)
        .map(|m| m.len());
    let sniff =
        read_up_to(&mut file, IMAGE_SNIFF_BYTES).map_err(|e| node_error(&e, "read", None))?;
    let whole = (&sniff[..]).chain(file).take(size.unwrap_or(u64::MAX));
    if let Some(mime) = detect_image_mime(&sniff) {
        if size.is_some_and(|s| s > MAX_IMAGE_FILE_BYTES) {
            return Ok(too_large_note(mime));
        }
        let mut bytes = Vec::new();
        whole
            .take(MAX_IMAGE_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| node_error(&e, "read", None))?;
        return image_output(&bytes, mime, &path, policy);
    }
    let (start, end) = line_range(offset, limit);
    let sel = select_lines(whole, start, end, aborted).map_err(|e| node_error(&e, "read", None))?;
    let (out, details) = format_selection(sel, start, end, path_arg, offset)?;
    Ok(ToolOutput {
        content: vec![Content::text(out.clone())],
        details,
        structured_content: Some(Value::String(out)),
        is_error: None,
    })
}

#[async_trait]
impl AgentTool for ReadTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition("read", description(), parameters())
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        check_aborted(&ctx.cancel)?;
        let path_arg = require_str(&args, "path")?.to_string();
        let offset = arg_f64(&args, "offset");
        let limit = arg_f64(&args, "limit");
        let cwd = self.cwd.clone();
        let policy = self.images.policy();
        let cancel = ctx.cancel.clone();
        run_blocking_cancellable("read", &ctx.cancel, move || {
            read_file(&path_arg, &cwd, offset, limit, &policy, &|| {
                cancel.is_cancelled()
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-file algorithm this module replaced: decode all, split, slice, truncate.
    fn reference(
        text: &str,
        offset: Option<f64>,
        limit: Option<f64>,
    ) -> Result<(String, Option<Value>), String> {
        let all: Vec<&str> = text.split('\n').collect();
        let total = all.len();
        let (start, end) = line_range(offset, limit);
        if start >= total {
            return Err(format!(
                "Offset {} is beyond end of file ({total} lines total)",
                js_number(offset.unwrap_or(0.0))
            ));
        }
        let end = end.map(|e| e.min(total).max(start));
        let selected = all[start..end.unwrap_or(total)].join("\n");
        let t = truncate_head(&selected, TruncationLimits::default());
        let sd = start + 1;
        if t.first_line_exceeds_limit {
            let out = format!(
                "[Line {sd} is {}, exceeds 50.0KB limit. Use bash: sed -n '{sd}p' p | head -c 51200]",
                format_size(all[start].len())
            );
            return Ok((out, Some(json!({"truncation": t.to_json()}))));
        }
        if t.truncated {
            let ed = sd + t.output_lines - 1;
            let note = if t.truncated_by == Some(TruncatedBy::Lines) {
                format!(
                    "[Showing lines {sd}-{ed} of {total}. Use offset={} to continue.]",
                    ed + 1
                )
            } else {
                format!("[Showing lines {sd}-{ed} of {total} (50.0KB limit). Use offset={} to continue.]", ed + 1)
            };
            return Ok((
                format!("{}\n\n{note}", t.content),
                Some(json!({"truncation": t.to_json()})),
            ));
        }
        if let Some(e) = end {
            if e < total {
                return Ok((
                    format!(
                        "{}\n\n[{} more lines in file. Use offset={} to continue.]",
                        t.content,
                        total - e,
                        e + 1
                    ),
                    None,
                ));
            }
        }
        Ok((t.content, None))
    }

    fn streamed(
        bytes: &[u8],
        offset: Option<f64>,
        limit: Option<f64>,
        chunk: usize,
    ) -> Result<(String, Option<Value>), String> {
        let (start, end) = line_range(offset, limit);
        let sel = select_lines_in_chunks(bytes, start, end, &|| false, chunk)
            .map_err(|e| e.to_string())?;
        format_selection(sel, start, end, "p", offset)
    }

    #[test]
    fn streaming_matches_the_whole_file_read() {
        let many: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
        let wide: String = (0..30)
            .map(|i| format!("{}\n", "x".repeat(3000 + i)))
            .collect();
        let long_first = format!("{}\nshort\n", "é".repeat(40_000));
        let inputs: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"\n".to_vec(),
            b"a".to_vec(),
            b"a\nb\n".to_vec(),
            b"a\n\n\nb".to_vec(),
            b"bad \xff\xfe x\nsplit \xe2\x82\n\xe2\x82\xac ok\n\xf0\x9f\x98".to_vec(),
            b"\xef\xbb\xbfbom\r\nline\r\n".to_vec(),
            many.into_bytes(),
            wide.into_bytes(),
            long_first.into_bytes(),
        ];
        let ranges = [
            (None, None),
            (Some(1.0), Some(1.0)),
            (Some(2.0), None),
            (Some(2.5), Some(2.7)),
            (Some(-3.0), Some(0.0)),
            (None, Some(-1.0)),
            (Some(3.0), Some(2.0)),
            (Some(2400.0), None),
            (Some(9999.0), None),
            (None, Some(1e300)),
        ];
        for bytes in &inputs {
            let text = String::from_utf8_lossy(bytes);
            for (offset, limit) in ranges {
                let want = reference(&text, offset, limit);
                for chunk in [1, 2, 3, 5, 4096, READ_CHUNK] {
                    assert_eq!(
                        streamed(bytes, offset, limit, chunk),
                        want,
                        "input {:?}…, offset {offset:?}, limit {limit:?}, chunk {chunk}",
                        &text.chars().take(20).collect::<String>()
                    );
                }
            }
        }
    }
}
