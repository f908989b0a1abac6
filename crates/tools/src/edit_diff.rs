//! Matching, replacement and diff rendering for the `edit` tool (spec tools.md §3.3–§3.4).
//!
//! Offsets are byte offsets into Rust strings. Matching is exact first; if any edit only matches
//! after fuzzy normalisation (NFKC, trailing whitespace per line, typographic quotes, dashes and
//! special spaces), all edits are matched in the normalised text and the changed lines are
//! written back while untouched lines keep their original bytes.

use similar::{Algorithm, ChangeTag, DiffOp, TextDiff};
use unicode_normalization::UnicodeNormalization;

/// One replacement: `old_text` must occur exactly once in the original file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Text to find (`edits[].oldText`), matched exactly or, failing that, fuzzily.
    pub old_text: String,
    /// Replacement text (`edits[].newText`).
    pub new_text: String,
}

/// `"\r\n"` if the first line break of `content` is CRLF, else `"\n"`.
pub fn detect_line_ending(content: &str) -> &'static str {
    match (content.find("\r\n"), content.find('\n')) {
        (Some(crlf), Some(lf)) if crlf < lf => "\r\n",
        _ => "\n",
    }
}

/// CRLF and lone CR become LF.
pub fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// LF becomes `ending`.
pub fn restore_line_endings(text: &str, ending: &str) -> String {
    if ending == "\r\n" {
        text.replace('\n', "\r\n")
    } else {
        text.to_string()
    }
}

/// Splits a leading U+FEFF off `content`: `(bom, rest)`.
pub fn strip_bom(content: &str) -> (&str, &str) {
    match content.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", content),
    }
}

fn is_js_whitespace(c: char) -> bool {
    c.is_whitespace() || c == '\u{FEFF}'
}

/// The fuzzy form used when exact matching fails: NFKC, trailing whitespace removed from every
/// line, typographic single/double quotes to ASCII, Unicode dashes (U+2010–U+2015, U+2212) to
/// `-`, special spaces (U+00A0, U+2002–U+200A, U+202F, U+205F, U+3000) to a plain space.
pub fn normalize_for_fuzzy_match(text: &str) -> String {
    let nfkc: String = text.nfkc().collect();
    let trimmed: Vec<&str> = nfkc
        .split('\n')
        .map(|l| l.trim_end_matches(is_js_whitespace))
        .collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

/// Lines including their `\n` (a final line without one is kept; no empty trailing entry).
fn split_lines_with_endings(content: &str) -> Vec<&str> {
    content.split_inclusive('\n').collect()
}

#[derive(Debug, Clone)]
struct Match {
    edit_index: usize,
    index: usize,
    len: usize,
    new_text: String,
}

/// Where `needle` first occurs in `content`: `(index, len, used_fuzzy)`, with offsets into
/// `content` for exact matches and into its fuzzy form otherwise.
fn fuzzy_find(content: &str, needle: &str) -> Option<(usize, usize, bool)> {
    if let Some(i) = content.find(needle) {
        return Some((i, needle.len(), false));
    }
    let fc = normalize_for_fuzzy_match(content);
    let fo = normalize_for_fuzzy_match(needle);
    fc.find(&fo).map(|i| (i, fo.len(), true))
}

fn count_occurrences(content: &str, needle: &str) -> usize {
    let fc = normalize_for_fuzzy_match(content);
    let fo = normalize_for_fuzzy_match(needle);
    if fo.is_empty() {
        return fc.chars().count().saturating_sub(1);
    }
    fc.matches(&fo).count()
}

fn apply_replacements(content: &str, matches: &[Match], offset: usize) -> String {
    let mut sorted: Vec<&Match> = matches.iter().collect();
    sorted.sort_by_key(|m| m.index);
    let mut out = String::with_capacity(content.len());
    let mut pos = 0;
    for m in sorted {
        let start = m.index - offset;
        out.push_str(&content[pos..start]);
        out.push_str(&m.new_text);
        pos = start + m.len;
    }
    out.push_str(&content[pos..]);
    out
}

/// Widens replacements located in `base` (a normalised view of `original` with the same line
/// count) to the lines they touch: each group of touched lines becomes one replacement of
/// `original`'s lines by those lines of `base` with the replacements applied, so every other
/// line keeps its original text.
fn widen_to_lines(original: &str, base: &str, matches: &[Match]) -> Result<Vec<Match>, String> {
    let line_spans = |text: &str| {
        let mut spans = Vec::new();
        let mut off = 0;
        for line in split_lines_with_endings(text) {
            spans.push((off, off + line.len()));
            off += line.len();
        }
        spans
    };
    let original_spans = line_spans(original);
    let spans = line_spans(base);
    if original_spans.len() != spans.len() {
        return Err(
            "Cannot preserve unchanged lines because the base content has a different line count."
                .into(),
        );
    }
    let mut sorted: Vec<Match> = matches.to_vec();
    sorted.sort_by_key(|m| m.index);
    let outside = || "Replacement range is outside the base content.".to_string();
    let mut groups: Vec<(usize, usize, Vec<Match>)> = Vec::new();
    for m in sorted {
        let start_line = spans
            .iter()
            .position(|&(s, e)| m.index >= s && m.index < e)
            .ok_or_else(outside)?;
        let end_pos = m.index + m.len;
        let mut end_line = start_line;
        while end_line < spans.len() && spans[end_line].1 < end_pos {
            end_line += 1;
        }
        if end_line >= spans.len() {
            return Err(outside());
        }
        let end_line = end_line + 1;
        match groups.last_mut() {
            Some(g) if start_line < g.1 => {
                g.1 = g.1.max(end_line);
                g.2.push(m);
            }
            _ => groups.push((start_line, end_line, vec![m])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(start, end, group)| {
            let from = spans[start].0;
            let to = spans[end - 1].1;
            let original_from = original_spans[start].0;
            Match {
                edit_index: group.first().map_or(0, |m| m.edit_index),
                index: original_from,
                len: original_spans[end - 1].1 - original_from,
                new_text: apply_replacements(&base[from..to], &group, from),
            }
        })
        .collect())
}

/// One replacement of an edit, in the LF-normalised content: `len` bytes at `index` become
/// `new_text` (LF line breaks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// Byte offset in the LF-normalised content.
    pub index: usize,
    /// Bytes replaced.
    pub len: usize,
    /// The replacement text.
    pub new_text: String,
}

/// The line break of the line holding byte `offset` of `original`: its own `\r\n` or `\n`
/// (for an unterminated last line, the one before); in a file without any `\n`, `\r` if it
/// has one (classic Mac endings), else `\n`. A lone CR in a file with LFs is taken as a
/// character inside a line, not as a line break.
fn line_ending_at(original: &str, offset: usize) -> &'static str {
    let lf = original[offset..]
        .find('\n')
        .map(|i| i + offset)
        .or_else(|| original[..offset].rfind('\n'));
    match lf {
        None if original.contains('\r') => "\r",
        None => "\n",
        Some(i) if i > 0 && original.as_bytes()[i - 1] == b'\r' => "\r\n",
        Some(_) => "\n",
    }
}

/// Applies `replacements`, located in `normalize_to_lf(original)`, to `original` itself: every
/// byte outside the replaced ranges is kept (line endings included), and the line breaks of
/// each new text take the ending of the line where its range starts ([`line_ending_at`]).
/// The result, normalised to LF, equals the replacements applied to the normalised content.
pub fn splice_into_original(original: &str, replacements: &[Replacement]) -> String {
    let mut out = String::with_capacity(original.len());
    for part in splice_parts(original, replacements) {
        match part {
            SplicePart::Keep(range) => out.push_str(&original[range]),
            SplicePart::Insert(text) => out.push_str(&text),
        }
    }
    out
}

/// One part of a spliced file ([`splice_parts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplicePart {
    /// These bytes of the original, unchanged.
    Keep(std::ops::Range<usize>),
    /// New text.
    Insert(String),
}

/// [`splice_into_original`] as the kept ranges of `original` and the inserted texts, in order;
/// joined they are its result. Lets a caller keep the original *bytes* of the kept ranges
/// (a file that is not valid UTF-8, read lossily: [`lossy_to_byte_offset`]).
pub fn splice_parts(original: &str, replacements: &[Replacement]) -> Vec<SplicePart> {
    // Normalising shortens only CRLFs: a normalised offset maps back by adding the CRLFs whose
    // LF lies before it (an offset at such an LF maps to its CR, so a range covering the LF
    // covers the whole CRLF).
    let crlfs: Vec<usize> = original.match_indices("\r\n").map(|(i, _)| i).collect();
    let to_original = |offset: usize| {
        let before = crlfs
            .iter()
            .enumerate()
            .take_while(|&(n, &p)| p - n < offset)
            .count();
        offset + before
    };
    let mut parts = Vec::new();
    let mut ends_with_cr = false;
    let mut push = |parts: &mut Vec<SplicePart>, text: &str, part: SplicePart| {
        if text.is_empty() {
            return;
        }
        // A kept CR followed by an inserted LF (or the two sides of a deletion) would read as
        // one CRLF: an extra LF keeps them the two line breaks the diff shows.
        if ends_with_cr && text.starts_with('\n') {
            parts.push(SplicePart::Insert("\n".into()));
        }
        ends_with_cr = text.ends_with('\r');
        parts.push(part);
    };
    let mut sorted: Vec<&Replacement> = replacements.iter().collect();
    sorted.sort_by_key(|r| r.index);
    let mut pos = 0;
    for r in sorted {
        let start = to_original(r.index).min(original.len());
        let end = to_original(r.index + r.len).clamp(start, original.len());
        let kept = pos.min(start)..start;
        push(&mut parts, &original[kept.clone()], SplicePart::Keep(kept));
        let ending = line_ending_at(original, start);
        let text = if ending == "\n" {
            r.new_text.clone()
        } else {
            r.new_text.replace('\n', ending)
        };
        push(&mut parts, &text, SplicePart::Insert(text.clone()));
        pos = end;
    }
    let rest = pos.min(original.len())..original.len();
    push(&mut parts, &original[rest.clone()], SplicePart::Keep(rest));
    parts
}

/// Maps a character-boundary offset of `String::from_utf8_lossy(bytes)` to the offset in
/// `bytes` of the same position: each U+FFFD that stands for an invalid sequence (3 bytes in
/// the text) maps to that sequence's bytes. `offsets` comes from [`lossy_offsets`].
pub fn lossy_to_byte_offset(offsets: &[(usize, usize)], lossy: usize) -> usize {
    let i = offsets.partition_point(|&(l, _)| l <= lossy);
    match i.checked_sub(1).and_then(|i| offsets.get(i)) {
        Some(&(l, b)) => b + (lossy - l),
        None => lossy,
    }
}

/// Where each valid run of `bytes` starts, as `(offset in the lossy text, offset in bytes)`,
/// in order (for [`lossy_to_byte_offset`]).
pub fn lossy_offsets(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = vec![(0, 0)];
    let (mut lossy, mut byte) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        lossy += chunk.valid().len();
        byte += chunk.valid().len();
        if !chunk.invalid().is_empty() {
            lossy += '\u{FFFD}'.len_utf8();
            byte += chunk.invalid().len();
            out.push((lossy, byte));
        }
    }
    out
}

/// Applies `edits` to LF-normalised `content` (all matched against the original, unique and
/// non-overlapping). Returns the new content or the upstream error text; `path` is the path as
/// the model gave it.
pub fn apply_edits(content: &str, edits: &[Edit], path: &str) -> Result<String, String> {
    apply_edits_with_replacements(content, edits, path).map(|(new, _)| new)
}

/// [`apply_edits`], also returning the replacements it made in `content` (for
/// [`splice_into_original`]). With fuzzy matching (spec tools.md, upstream edit docs: exact
/// match first, else NFKC / trailing whitespace / quotes / dashes / special spaces), each
/// replacement covers the whole lines it touched, rewritten from the fuzzy form; all other lines
/// are untouched.
pub fn apply_edits_with_replacements(
    content: &str,
    edits: &[Edit],
    path: &str,
) -> Result<(String, Vec<Replacement>), String> {
    let total = edits.len();
    let edits: Vec<Edit> = edits
        .iter()
        .map(|e| Edit {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
        })
        .collect();
    for (i, e) in edits.iter().enumerate() {
        if e.old_text.is_empty() {
            return Err(if total == 1 {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            });
        }
    }
    let used_fuzzy = edits
        .iter()
        .any(|e| matches!(fuzzy_find(content, &e.old_text), Some((_, _, true))));
    let base = if used_fuzzy {
        normalize_for_fuzzy_match(content)
    } else {
        content.to_string()
    };
    let mut matches = Vec::new();
    for (i, e) in edits.iter().enumerate() {
        let Some((index, len, _)) = fuzzy_find(&base, &e.old_text) else {
            return Err(if total == 1 {
                format!("Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines.")
            } else {
                format!("Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines.")
            });
        };
        let n = count_occurrences(&base, &e.old_text);
        if n > 1 {
            return Err(if total == 1 {
                format!("Found {n} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique.")
            } else {
                format!("Found {n} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique.")
            });
        }
        matches.push(Match {
            edit_index: i,
            index,
            len,
            new_text: e.new_text.clone(),
        });
    }
    matches.sort_by_key(|m| m.index);
    for pair in matches.windows(2) {
        if pair[0].index + pair[0].len > pair[1].index {
            return Err(format!(
                "edits[{}] and edits[{}] overlap in {path}. Merge them into one edit or target disjoint regions.",
                pair[0].edit_index, pair[1].edit_index
            ));
        }
    }
    let replacements = if used_fuzzy {
        widen_to_lines(content, &base, &matches)?
    } else {
        matches
    };
    let new_content = apply_replacements(content, &replacements, 0);
    if new_content == content {
        return Err(if total == 1 {
            format!("No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.")
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        });
    }
    let replacements = replacements
        .into_iter()
        .map(|m| Replacement {
            index: m.index,
            len: m.len,
            new_text: m.new_text,
        })
        .collect();
    Ok((new_content, replacements))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartKind {
    Same,
    Removed,
    Added,
}

/// Line diff as runs of equal / removed / added lines (removals before additions in a change).
fn diff_parts<'a>(old: &'a str, new: &'a str) -> Vec<(PartKind, Vec<&'a str>)> {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(old, new);
    let mut parts: Vec<(PartKind, Vec<&'a str>)> = Vec::new();
    let mut removed: Vec<&'a str> = Vec::new();
    let mut added: Vec<&'a str> = Vec::new();
    let flush = |parts: &mut Vec<(PartKind, Vec<&'a str>)>,
                 removed: &mut Vec<&'a str>,
                 added: &mut Vec<&'a str>| {
        if !removed.is_empty() {
            parts.push((PartKind::Removed, std::mem::take(removed)));
        }
        if !added.is_empty() {
            parts.push((PartKind::Added, std::mem::take(added)));
        }
    };
    for change in diff.iter_all_changes() {
        let line = change.value();
        let line = line.strip_suffix('\n').unwrap_or(line);
        match change.tag() {
            ChangeTag::Equal => {
                flush(&mut parts, &mut removed, &mut added);
                match parts.last_mut() {
                    Some((PartKind::Same, lines)) => lines.push(line),
                    _ => parts.push((PartKind::Same, vec![line])),
                }
            }
            ChangeTag::Delete => removed.push(line),
            ChangeTag::Insert => added.push(line),
        }
    }
    flush(&mut parts, &mut removed, &mut added);
    parts
}

/// The display diff of `details.diff` and the new-file line of the first change
/// (spec tools.md §3.4): `-<n> text`, `+<n> text`, ` <n> text`, at most `context` unchanged lines
/// around changes and ` <pad> ...` for skipped runs; numbers right-aligned to a common width.
pub fn generate_diff_string(old: &str, new: &str, context: usize) -> (String, Option<usize>) {
    let parts = diff_parts(old, new);
    let width = old
        .split('\n')
        .count()
        .max(new.split('\n').count())
        .to_string()
        .len();
    let num = |n: usize| format!("{n:>width$}");
    let ellipsis = format!(" {} ...", " ".repeat(width));
    let mut out: Vec<String> = Vec::new();
    let (mut old_n, mut new_n) = (1usize, 1usize);
    let mut last_was_change = false;
    let mut first_changed = None;
    for (i, (kind, lines)) in parts.iter().enumerate() {
        match kind {
            PartKind::Added | PartKind::Removed => {
                first_changed.get_or_insert(new_n);
                for line in lines {
                    if *kind == PartKind::Added {
                        out.push(format!("+{} {line}", num(new_n)));
                        new_n += 1;
                    } else {
                        out.push(format!("-{} {line}", num(old_n)));
                        old_n += 1;
                    }
                }
                last_was_change = true;
            }
            PartKind::Same => {
                let next_is_change = parts.get(i + 1).is_some_and(|(k, _)| *k != PartKind::Same);
                let show = |line: &str, out: &mut Vec<String>, o: &mut usize, n: &mut usize| {
                    out.push(format!(" {} {line}", num(*o)));
                    *o += 1;
                    *n += 1;
                };
                let len = lines.len();
                if last_was_change && next_is_change {
                    if len <= context * 2 {
                        for l in lines {
                            show(l, &mut out, &mut old_n, &mut new_n);
                        }
                    } else {
                        for l in &lines[..context] {
                            show(l, &mut out, &mut old_n, &mut new_n);
                        }
                        out.push(ellipsis.clone());
                        let skipped = len - 2 * context;
                        old_n += skipped;
                        new_n += skipped;
                        for l in &lines[len - context..] {
                            show(l, &mut out, &mut old_n, &mut new_n);
                        }
                    }
                } else if last_was_change {
                    let shown = len.min(context);
                    for l in &lines[..shown] {
                        show(l, &mut out, &mut old_n, &mut new_n);
                    }
                    if len > shown {
                        out.push(ellipsis.clone());
                        old_n += len - shown;
                        new_n += len - shown;
                    }
                } else if next_is_change {
                    let skipped = len.saturating_sub(context);
                    if skipped > 0 {
                        out.push(ellipsis.clone());
                        old_n += skipped;
                        new_n += skipped;
                    }
                    for l in &lines[skipped..] {
                        show(l, &mut out, &mut old_n, &mut new_n);
                    }
                } else {
                    old_n += len;
                    new_n += len;
                }
                last_was_change = false;
            }
        }
    }
    (out.join("\n"), first_changed)
}

/// A unified patch with file headers only (`--- path`, `+++ path`) and `context` lines of
/// context, hunk ranges always written as `start,count`, `\ No newline at end of file` where a
/// side lacks a final newline (the format of jsdiff's `createTwoFilesPatch`).
pub fn generate_unified_patch(path: &str, old: &str, new: &str, context: usize) -> String {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(old, new);
    let mut out = format!("--- {path}\n+++ {path}\n");
    for group in diff.grouped_ops(context) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_start = first.old_range().start;
        let old_len = last.old_range().end - old_start;
        let new_start = first.new_range().start;
        let new_len = last.new_range().end - new_start;
        let os = if old_len == 0 {
            old_start
        } else {
            old_start + 1
        };
        let ns = if new_len == 0 {
            new_start
        } else {
            new_start + 1
        };
        out.push_str(&format!("@@ -{os},{old_len} +{ns},{new_len} @@\n"));
        for op in &group {
            push_op_lines(&diff, op, &mut out);
        }
    }
    out
}

fn push_op_lines<'a>(diff: &TextDiff<'a, 'a, 'a, str>, op: &DiffOp, out: &mut String) {
    for change in diff.iter_changes(op) {
        let sign = match change.tag() {
            ChangeTag::Equal => ' ',
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
        };
        let value = change.value();
        out.push(sign);
        match value.strip_suffix('\n') {
            Some(line) => {
                out.push_str(line);
                out.push('\n');
            }
            None => {
                out.push_str(value);
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_diff_and_patch() {
        let old = "alpha\nbeta\ngamma\n";
        let new = "alpha\nBETA\ngamma\n";
        let (diff, first) = generate_diff_string(old, new, 4);
        assert_eq!(diff, " 1 alpha\n-2 beta\n+2 BETA\n 3 gamma");
        assert_eq!(first, Some(2));
        assert_eq!(
            generate_unified_patch("a.txt", old, new, 4),
            "--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n"
        );
    }

    #[test]
    fn diff_skips_far_context() {
        let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l10\n", "X\n");
        let (diff, first) = generate_diff_string(&old, &new, 4);
        assert_eq!(first, Some(10));
        let lines: Vec<&str> = diff.lines().collect();
        assert_eq!(lines[0], "    ...");
        assert_eq!(lines[1], "  6 l6");
        assert_eq!(lines[5], "-10 l10");
        assert_eq!(lines[6], "+10 X");
        assert_eq!(lines.last().copied(), Some("    ..."));
    }
}
