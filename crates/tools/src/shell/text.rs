//! A command's output as text: UTF-8 decoding across chunks, ANSI stripping, sanitising, the
//! accumulated tail and the temp log of the full output (spec tools.md §4.3).

use crate::truncate::{truncate_tail, TruncationLimits, TruncationResult};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A fresh temp-file path `<tmpdir>/<prefix>-<16 hex chars>.log`.
pub fn temp_log_path(prefix: &str) -> PathBuf {
    let id: u64 = rand::random();
    std::env::temp_dir().join(format!("{prefix}-{id:016x}.log"))
}

/// Creates a file readable only by the owner (mode 0600).
pub fn create_private_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Incremental UTF-8 decoder: complete characters are returned, an incomplete trailing sequence
/// is kept for the next chunk, invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes `bytes` (after anything kept from the previous call).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // SAFETY-free: the prefix was just validated.
                    out.push_str(std::str::from_utf8(&rest[..valid]).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &rest[valid + n..];
                        }
                        None => {
                            rest = &rest[valid..];
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// Flushes a trailing incomplete sequence as U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            "\u{FFFD}".to_string()
        }
    }
}

/// Point-in-time view of an [`OutputAccumulator`].
#[derive(Debug, Clone)]
pub struct OutputSnapshot {
    /// Tail-truncated text.
    pub content: String,
    /// Truncation over the whole output (true totals, not only the kept window).
    pub truncation: TruncationResult,
    /// Temp file holding the complete raw output, once one was needed.
    pub full_output_path: Option<PathBuf>,
    /// Bytes of the last (possibly unfinished) line.
    pub last_line_bytes: usize,
}

/// Collects streaming command output with bounded memory: a decoded tail window (twice the byte
/// limit) for display, exact line/byte totals, and a temp file `pi-bash-<hex>.log` receiving the
/// complete raw output once it exceeds the limits (spec tools.md §4.4, newer behaviour).
#[derive(Debug)]
pub struct OutputAccumulator {
    limits: TruncationLimits,
    rolling_max: usize,
    prefix: String,
    decoder: Utf8Stream,
    raw_chunks: Vec<Vec<u8>>,
    tail: String,
    tail_at_line_start: bool,
    total_raw: usize,
    total_decoded: usize,
    completed_lines: usize,
    has_open_line: bool,
    current_line_bytes: usize,
    temp_path: Option<PathBuf>,
    temp_file: Option<File>,
}

impl OutputAccumulator {
    /// A new accumulator with the given limits; temp files are named `<prefix>-<hex>.log`.
    pub fn new(limits: TruncationLimits, prefix: &str) -> Self {
        OutputAccumulator {
            limits,
            rolling_max: limits.max_bytes.saturating_mul(2).max(1),
            prefix: prefix.to_string(),
            decoder: Utf8Stream::default(),
            raw_chunks: Vec::new(),
            tail: String::new(),
            tail_at_line_start: true,
            total_raw: 0,
            total_decoded: 0,
            completed_lines: 0,
            has_open_line: false,
            current_line_bytes: 0,
            temp_path: None,
            temp_file: None,
        }
    }

    /// Adds raw output bytes.
    pub fn append(&mut self, data: &[u8]) {
        self.total_raw += data.len();
        let text = self.decoder.push(data);
        self.append_text(&text);
        if self.temp_file.is_some() || self.needs_temp_file() {
            self.ensure_temp_file();
            if let Some(f) = self.temp_file.as_mut() {
                let _ = f.write_all(data);
            }
        } else if !data.is_empty() {
            self.raw_chunks.push(data.to_vec());
        }
    }

    /// Marks the end of output (flushes the decoder, creates the temp file if needed).
    pub fn finish(&mut self) {
        let rest = self.decoder.finish();
        self.append_text(&rest);
        if self.needs_temp_file() {
            self.ensure_temp_file();
        }
        if let Some(f) = self.temp_file.as_mut() {
            let _ = f.flush();
        }
    }

    /// Total raw bytes seen.
    pub fn total_raw_bytes(&self) -> usize {
        self.total_raw
    }

    /// The current tail-truncated view; with `persist_if_truncated` a temp file is created when
    /// the output is truncated.
    pub fn snapshot(&mut self, persist_if_truncated: bool) -> OutputSnapshot {
        let window = if self.tail_at_line_start {
            self.tail.as_str()
        } else {
            match self.tail.find('\n') {
                Some(i) => &self.tail[i + 1..],
                None => self.tail.as_str(),
            }
        };
        let mut t = truncate_tail(window, self.limits);
        let total_lines = self.completed_lines + usize::from(self.has_open_line);
        let truncated =
            total_lines > self.limits.max_lines || self.total_decoded > self.limits.max_bytes;
        t.truncated_by = if truncated {
            t.truncated_by
                .or(Some(if self.total_decoded > self.limits.max_bytes {
                    crate::truncate::TruncatedBy::Bytes
                } else {
                    crate::truncate::TruncatedBy::Lines
                }))
        } else {
            None
        };
        t.truncated = truncated;
        t.total_lines = total_lines;
        t.total_bytes = self.total_decoded;
        if persist_if_truncated && truncated {
            self.ensure_temp_file();
        }
        if let Some(f) = self.temp_file.as_mut() {
            let _ = f.flush();
        }
        OutputSnapshot {
            content: t.content.clone(),
            truncation: t,
            full_output_path: self.temp_path.clone(),
            last_line_bytes: self.current_line_bytes,
        }
    }

    fn needs_temp_file(&self) -> bool {
        let total_lines = self.completed_lines + usize::from(self.has_open_line);
        self.total_raw > self.limits.max_bytes
            || self.total_decoded > self.limits.max_bytes
            || total_lines > self.limits.max_lines
    }

    fn ensure_temp_file(&mut self) {
        if self.temp_path.is_some() {
            return;
        }
        let path = temp_log_path(&self.prefix);
        if let Ok(mut f) = create_private_file(&path) {
            for chunk in self.raw_chunks.drain(..) {
                let _ = f.write_all(&chunk);
            }
            self.temp_file = Some(f);
        }
        self.temp_path = Some(path);
    }

    fn append_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_decoded += text.len();
        self.tail.push_str(text);
        if self.tail.len() > self.rolling_max * 2 {
            self.trim_tail();
        }
        let newlines = text.bytes().filter(|b| *b == b'\n').count();
        if newlines == 0 {
            self.current_line_bytes += text.len();
            self.has_open_line = true;
        } else {
            self.completed_lines += newlines;
            let after = &text[text.rfind('\n').map_or(0, |i| i + 1)..];
            self.current_line_bytes = after.len();
            self.has_open_line = !after.is_empty();
        }
    }

    fn trim_tail(&mut self) {
        if self.tail.len() <= self.rolling_max {
            return;
        }
        let mut start = self.tail.len() - self.rolling_max;
        while start < self.tail.len() && !self.tail.is_char_boundary(start) {
            start += 1;
        }
        self.tail_at_line_start = self.tail.as_bytes()[start - 1] == b'\n';
        self.tail = self.tail[start..].to_string();
    }
}

/// Removes ANSI escape sequences from streamed text, keeping an unfinished trailing sequence for
/// the next chunk.
#[derive(Debug, Default)]
pub struct AnsiStripper {
    pending: String,
}

impl AnsiStripper {
    /// Strips sequences from `pending + text`.
    pub fn push(&mut self, text: &str) -> String {
        let mut input = std::mem::take(&mut self.pending);
        input.push_str(text);
        let (out, rest) = strip_ansi_prefix(&input);
        // A runaway "sequence" (e.g. an unterminated OSC) is not held back forever.
        if rest.len() > 4096 {
            let mut out = out;
            out.push_str(rest);
            return out;
        }
        self.pending = rest.to_string();
        out
    }

    /// Returns whatever is still held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// Strips complete escape sequences; returns the cleaned text and an unfinished suffix.
fn strip_ansi_prefix(s: &str) -> (String, &str) {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut copy_from = 0;
    while i < b.len() {
        let c = b[i];
        let is_c1_csi = c == 0xC2 && b.get(i + 1) == Some(&0x9B);
        if c != 0x1B && !is_c1_csi {
            i += 1;
            continue;
        }
        out.push_str(&s[copy_from..i]);
        let start = i;
        let end = if is_c1_csi {
            csi_end(b, i + 2)
        } else {
            match b.get(i + 1) {
                None => None,
                Some(b'[') => csi_end(b, i + 2),
                Some(b']') | Some(b'P') | Some(b'X') | Some(b'^') | Some(b'_') => {
                    string_end(b, i + 2)
                }
                Some(_) => {
                    let mut j = i + 1;
                    while j < b.len() && (0x20..=0x2F).contains(&b[j]) {
                        j += 1;
                    }
                    // A two-byte escape ends with a final byte in 0x30..=0x7E. Anything else
                    // (e.g. U+FFFD from binary output) is not part of the sequence: only the
                    // ESC and its intermediates are dropped, the character is kept.
                    match b.get(j) {
                        None => None,
                        Some(c) if (0x30..=0x7E).contains(c) => Some(j + 1),
                        Some(_) => Some(j),
                    }
                }
            }
        };
        match end {
            Some(e) => {
                i = e;
                copy_from = e;
            }
            None => return (out, &s[start..]),
        }
    }
    out.push_str(&s[copy_from..]);
    (out, "")
}

fn csi_end(b: &[u8], mut j: usize) -> Option<usize> {
    while j < b.len() {
        if (0x40..=0x7E).contains(&b[j]) {
            return Some(j + 1);
        }
        if !(0x20..=0x3F).contains(&b[j]) {
            // Malformed: drop the introducer only.
            return Some(j);
        }
        j += 1;
    }
    None
}

fn string_end(b: &[u8], mut j: usize) -> Option<usize> {
    while j < b.len() {
        if b[j] == 0x07 {
            return Some(j + 1);
        }
        if b[j] == 0x1B {
            return match b.get(j + 1) {
                Some(b'\\') => Some(j + 2),
                Some(_) => Some(j + 1),
                None => None,
            };
        }
        j += 1;
    }
    None
}

/// Removes control characters except tab/LF/CR, the U+FFF9–U+FFFB annotation characters and
/// then every `\r` (spec tools.md §9).
pub fn sanitize_output(text: &str) -> String {
    text.chars()
        .filter(|&c| {
            let code = c as u32;
            if c == '\t' || c == '\n' {
                return true;
            }
            if code <= 0x1F {
                return false;
            }
            !(0xFFF9..=0xFFFB).contains(&code)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_before_a_multibyte_character_never_splits_it() {
        // printf '\033\377abc': ESC then an invalid byte, decoded as U+FFFD.
        let (out, rest) = strip_ansi_prefix("\x1b\u{FFFD}abc");
        assert_eq!((out.as_str(), rest), ("\u{FFFD}abc", ""));
        let mut st = AnsiStripper::default();
        assert_eq!(st.push("x\x1b"), "x");
        assert_eq!(st.push("\u{e9}y"), "\u{e9}y");
        assert_eq!(st.push("\x1b7z"), "z", "ESC 7 is a complete escape");
        // Pseudo-random bytes, lossily decoded as the shell reader does: no panic, and every
        // chunk split still yields valid text.
        let mut seed: u32 = 1;
        let bytes: Vec<u8> = (0..4000)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (seed >> 16) as u8
            })
            .collect();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut st = AnsiStripper::default();
        for chunk in text.as_bytes().chunks(97) {
            let piece = String::from_utf8_lossy(chunk);
            let _ = st.push(&piece);
        }
    }

    #[test]
    fn strips_ansi_across_chunks() {
        let mut s = AnsiStripper::default();
        let a = s.push("red \x1b[3");
        let b = s.push("1mtext\x1b[0m end");
        assert_eq!(format!("{a}{b}"), "red text end");
        assert_eq!(s.push("\x1b]0;title\x07x"), "x");
    }

    #[test]
    fn utf8_stream_keeps_partial() {
        let mut d = Utf8Stream::default();
        let bytes = "é".as_bytes();
        assert_eq!(d.push(&bytes[..1]), "");
        assert_eq!(d.push(&bytes[1..]), "é");
        assert_eq!(d.push(&[0xFF, b'a']), "\u{FFFD}a");
    }

    #[test]
    fn sanitizes() {
        assert_eq!(sanitize_output("a\r\nb\x07\tc\u{FFFA}"), "a\nb\tc");
    }
}
