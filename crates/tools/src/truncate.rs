//! Output truncation shared by the tools (spec tools.md §0.5).
//!
//! Two independent limits apply, whichever is hit first: a line count and a UTF-8 byte count.
//! Lines are counted the way upstream 1.6 counts them: the text is split on `\n` and a single
//! trailing newline does not open an extra (empty) line, so `"a\nb\n"` has two lines.

use serde::Serialize;

/// Default line limit for tool output (2000 lines).
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Default byte limit for tool output (50 KiB = 51200 bytes).
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
/// Maximum characters of one grep output line before it is cut (500).
pub const GREP_MAX_LINE_LENGTH: usize = 500;

/// Which limit stopped the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TruncatedBy {
    /// The line limit (`"lines"`).
    Lines,
    /// The UTF-8 byte limit (`"bytes"`).
    Bytes,
}

/// Outcome of a truncation, serialized as `details.truncation` (camelCase keys, `truncatedBy`
/// is `"lines"`, `"bytes"` or `null`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TruncationResult {
    /// The text that was kept.
    pub content: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// The limit that was hit, `None` when nothing was cut.
    pub truncated_by: Option<TruncatedBy>,
    /// Lines in the original text.
    pub total_lines: usize,
    /// UTF-8 bytes in the original text.
    pub total_bytes: usize,
    /// Whole (or, for a partial last line, partial) lines kept.
    pub output_lines: usize,
    /// UTF-8 bytes kept.
    pub output_bytes: usize,
    /// Tail truncation kept only the end of an oversized last line.
    pub last_line_partial: bool,
    /// Head truncation found the first line alone above the byte limit.
    pub first_line_exceeds_limit: bool,
    /// Line limit that was applied.
    pub max_lines: usize,
    /// Byte limit that was applied.
    pub max_bytes: usize,
}

impl TruncationResult {
    /// The untouched result when `content` (with `lines` counted lines) is within both limits,
    /// else `None` (the caller has to cut). Shared opening of [`truncate_head`] and
    /// [`truncate_tail`].
    fn if_within(content: &str, lines: usize, limits: TruncationLimits) -> Option<Self> {
        (lines <= limits.max_lines && content.len() <= limits.max_bytes)
            .then(|| Self::untouched(content, lines, limits.max_lines, limits.max_bytes))
    }

    fn untouched(content: &str, lines: usize, max_lines: usize, max_bytes: usize) -> Self {
        TruncationResult {
            content: content.to_string(),
            truncated: false,
            truncated_by: None,
            total_lines: lines,
            total_bytes: content.len(),
            output_lines: lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines,
            max_bytes,
        }
    }

    /// As a JSON value (for `details.truncation`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Limits for [`truncate_head`] / [`truncate_tail`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncationLimits {
    /// Most lines kept.
    pub max_lines: usize,
    /// Most UTF-8 bytes kept (joining newlines included).
    pub max_bytes: usize,
}

impl Default for TruncationLimits {
    fn default() -> Self {
        TruncationLimits {
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl TruncationLimits {
    /// Only the byte limit (used by grep, find and ls, whose row counts are capped elsewhere).
    pub fn bytes_only() -> Self {
        TruncationLimits {
            max_lines: usize::MAX,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// Splits text into counted lines: empty text has none, a trailing `\n` adds none.
pub fn count_lines_split(content: &str) -> Vec<&str> {
    if content.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = content.split('\n').collect();
    if content.ends_with('\n') {
        lines.pop();
    }
    lines
}

/// Human-readable size: `512B`, `1.5KB`, `2.0MB` (one decimal, 1024-based).
pub fn format_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// Keeps the beginning of `content`: whole lines only, while fewer than `max_lines` are kept and
/// the kept bytes (plus one per joining newline) stay within `max_bytes`. If the first line alone
/// is too big the result is empty with `first_line_exceeds_limit` set.
pub fn truncate_head(content: &str, limits: TruncationLimits) -> TruncationResult {
    let lines = count_lines_split(content);
    if let Some(untouched) = TruncationResult::if_within(content, lines.len(), limits) {
        return untouched;
    }
    let TruncationLimits {
        max_lines,
        max_bytes,
    } = limits;
    let mut result = TruncationResult {
        content: String::new(),
        truncated: true,
        truncated_by: Some(TruncatedBy::Bytes),
        total_lines: lines.len(),
        total_bytes: content.len(),
        output_lines: 0,
        output_bytes: 0,
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    };
    if lines.first().map_or(0, |l| l.len()) > max_bytes {
        result.first_line_exceeds_limit = true;
        return result;
    }
    let mut kept = 0usize;
    let mut bytes = 0usize;
    let mut by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate() {
        if kept >= max_lines {
            break;
        }
        let add = line.len() + usize::from(i > 0);
        if bytes + add > max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        bytes += add;
        kept += 1;
    }
    if kept >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    result.content = lines[..kept].join("\n");
    result.truncated_by = Some(by);
    result.output_lines = kept;
    result.output_bytes = result.content.len();
    result
}

/// Keeps the end of `content`, collecting whole lines from the bottom. If the very last line alone
/// exceeds `max_bytes`, its last `max_bytes` bytes (moved forward to a character boundary) are kept
/// and `last_line_partial` is set.
pub fn truncate_tail(content: &str, limits: TruncationLimits) -> TruncationResult {
    let lines = count_lines_split(content);
    if let Some(untouched) = TruncationResult::if_within(content, lines.len(), limits) {
        return untouched;
    }
    let TruncationLimits {
        max_lines,
        max_bytes,
    } = limits;
    let mut kept: Vec<&str> = Vec::new();
    let mut partial: Option<&str> = None;
    let mut bytes = 0usize;
    let mut by = TruncatedBy::Lines;
    for line in lines.iter().rev() {
        if kept.len() >= max_lines {
            break;
        }
        let add = line.len() + usize::from(!kept.is_empty());
        if bytes + add > max_bytes {
            by = TruncatedBy::Bytes;
            if kept.is_empty() {
                let tail = tail_bytes(line, max_bytes);
                bytes = tail.len();
                partial = Some(tail);
            }
            break;
        }
        kept.push(line);
        bytes += add;
    }
    if let Some(p) = partial {
        kept.push(p);
    }
    if kept.len() >= max_lines && bytes <= max_bytes {
        by = TruncatedBy::Lines;
    }
    kept.reverse();
    let text = kept.join("\n");
    TruncationResult {
        output_lines: kept.len(),
        output_bytes: text.len(),
        content: text,
        truncated: true,
        truncated_by: Some(by),
        total_lines: lines.len(),
        total_bytes: content.len(),
        last_line_partial: partial.is_some(),
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// The last at most `max_bytes` bytes of `s`, starting on a character boundary.
fn tail_bytes(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut start = s.len() - max_bytes;
    while start < s.len() && !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Cuts a line to `max_chars` characters plus `... [truncated]`; returns whether it was cut.
pub fn truncate_line(line: &str, max_chars: usize) -> (String, bool) {
    match line.char_indices().nth(max_chars) {
        None => (line.to_string(), false),
        Some((idx, _)) => (format!("{}... [truncated]", &line[..idx]), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_counts_trailing_newline_as_no_line() {
        let r = truncate_head("a\nb\n", TruncationLimits::default());
        assert!(!r.truncated);
        assert_eq!(r.total_lines, 2);
    }

    #[test]
    fn tail_keeps_last_lines() {
        let text: String = (1..=3000).map(|i| format!("{i}\n")).collect();
        let r = truncate_tail(&text, TruncationLimits::default());
        assert!(r.truncated);
        assert_eq!(r.truncated_by, Some(TruncatedBy::Lines));
        assert!(r.content.starts_with("1001\n"));
        assert!(r.content.ends_with("\n3000"));
        assert_eq!(r.output_lines, 2000);
        assert_eq!(r.total_lines, 3000);
    }

    #[test]
    fn tail_partial_last_line() {
        let text = "é".repeat(100);
        let r = truncate_tail(
            &text,
            TruncationLimits {
                max_lines: 10,
                max_bytes: 11,
            },
        );
        assert!(r.last_line_partial);
        assert_eq!(r.content, "é".repeat(5));
    }

    #[test]
    fn head_first_line_too_big() {
        let r = truncate_head(
            "abcdef\nx",
            TruncationLimits {
                max_lines: 10,
                max_bytes: 3,
            },
        );
        assert!(r.first_line_exceeds_limit);
        assert_eq!(r.content, "");
    }

    #[test]
    fn sizes() {
        assert_eq!(format_size(10), "10B");
        assert_eq!(format_size(51200), "50.0KB");
        assert_eq!(format_size(3 * 1024 * 1024), "3.0MB");
    }
}
