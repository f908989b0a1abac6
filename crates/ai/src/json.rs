//! JSON text → [`Value`] without serde_json's fixed 128-level recursion limit.
//!
//! Upstream (V8's `JSON.parse`) reads deeply nested JSON — tool-call arguments, RPC commands,
//! session lines — that serde_json's default parser refuses at depth 128; refusing them lost
//! session entries and turned tool arguments into `{}`. [`parse_value`] accepts nesting up to
//! [`MAX_DEPTH`] levels, growing the stack as it goes (`serde_stacker`), and refuses deeper
//! input with a clear error instead of risking a stack overflow later, when the value is
//! serialized or dropped (both recursive).

use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

/// The deepest nesting of arrays/objects accepted (levels).
pub const MAX_DEPTH: usize = 1000;

/// Nesting up to which [`parse_value`] uses serde_json's recursive parser directly (below its
/// default recursion limit of 128).
const SHALLOW_DEPTH: usize = 100;

/// Nesting depth of JSON text (arrays and objects, strings skipped); stops counting once
/// past `limit`.
fn depth_exceeds(text: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The 4 hex digits at `b[at..at + 4]` as a number.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// Replaces `\u` escapes of unpaired UTF-16 surrogates inside strings by `\ufffd`, as
/// JavaScript reads them into strings and upstream writes them out well-formed
/// (rpc-protocol.md §2.1); serde_json refuses them. Text without any is returned as is.
pub fn replace_lone_surrogates(text: &[u8]) -> Cow<'_, [u8]> {
    rewrite_lone_surrogates(text, |_| *b"\\ufffd")
}

/// First of the 2048 code points (U+10F800–U+10FFFF, the top of private-use plane 16) that
/// [`parse_stream_chunk`] puts in place of lone surrogate escapes, in surrogate order.
pub const SURROGATE_MARK_BASE: u32 = 0x10_F800;

/// The mark standing for the surrogate `code` (U+D800–U+DFFF), as UTF-8.
fn surrogate_mark(code: u32) -> [u8; 4] {
    let mut buf = [0u8; 4];
    let mark = char::from_u32(SURROGATE_MARK_BASE + (code - 0xD800)).unwrap_or('\u{FFFD}');
    mark.encode_utf8(&mut buf);
    buf
}

/// The surrogate a mark of [`parse_stream_chunk`] stands for.
fn marked_surrogate(c: char) -> Option<u32> {
    let c = c as u32;
    (c >= SURROGATE_MARK_BASE).then(|| c - SURROGATE_MARK_BASE + 0xD800)
}

/// Replaces every unpaired surrogate escape in strings by the 4-byte (UTF-8) or 6-byte
/// (escape) text `with(code)` returns (for the other case, `\ufffd`).
fn rewrite_lone_surrogates<const N: usize>(
    text: &[u8],
    with: impl Fn(u32) -> [u8; N],
) -> Cow<'_, [u8]> {
    let (mut out, mut i, mut copied) = (Vec::new(), 0usize, 0usize);
    let (mut in_string, mut changed) = (false, false);
    while i < text.len() {
        let b = text[i];
        if !in_string {
            in_string = b == b'"';
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' if text.get(i + 1) == Some(&b'u') => {
                let Some(code) = hex4(text, i + 2) else {
                    i += 2;
                    continue;
                };
                let paired_low = |at: usize| {
                    text.get(at) == Some(&b'\\')
                        && text.get(at + 1) == Some(&b'u')
                        && hex4(text, at + 2).is_some_and(|c| (0xDC00..=0xDFFF).contains(&c))
                };
                match code {
                    0xD800..=0xDBFF if paired_low(i + 6) => i += 12,
                    0xD800..=0xDFFF => {
                        out.extend_from_slice(&text[copied..i]);
                        out.extend_from_slice(&with(code));
                        i += 6;
                        copied = i;
                        changed = true;
                    }
                    _ => i += 6,
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.extend_from_slice(&text[copied.min(text.len())..]);
    Cow::Owned(out)
}

/// Parses JSON text (bytes must be UTF-8) into a [`Value`], nesting up to [`MAX_DEPTH`];
/// unpaired surrogate escapes read as U+FFFD ([`replace_lone_surrogates`]).
///
/// Errors: serde_json's syntax errors, or `JSON nested deeper than 1000 levels`.
pub fn parse_value(text: &[u8]) -> Result<Value, serde_json::Error> {
    let text: &[u8] = &replace_lone_surrogates(text);
    // Shallow text (nearly all of it: commands, stream chunks) takes serde_json's own
    // recursive parser within its default limit of 128, without the stack probing of
    // `serde_stacker` (whose first use on the main thread reads /proc/self/maps: issue 15,
    // start-up).
    if !depth_exceeds(text, SHALLOW_DEPTH) {
        return serde_json::from_slice(text);
    }
    if depth_exceeds(text, MAX_DEPTH) {
        return Err(serde::de::Error::custom(format!(
            "JSON nested deeper than {MAX_DEPTH} levels"
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let value = Value::deserialize(serde_stacker::Deserializer::new(&mut de))?;
    de.end()?;
    Ok(value)
}

/// [`parse_value`] for a `&str`.
pub fn parse_str(text: &str) -> Result<Value, serde_json::Error> {
    parse_value(text.as_bytes())
}

/// Parses one provider stream chunk (an SSE `data` payload). As [`parse_str`], except that an
/// unpaired surrogate escape reads as a *mark* (U+10F800 + its offset in U+D800–U+DFFF)
/// instead of U+FFFD: a pair split across two chunks (`"…\ud83d"`, then `"\ude00…"`) is then
/// joined by the adapter's [`SurrogateJoiner`] for that content block. Marks outside the text
/// handed to a joiner stay in the value (ids, names; never seen in practice). A text that
/// itself contains U+10F800–U+10FFFF is read as marks too (private use, not used by models).
///
/// Errors: as [`parse_value`]; the adapters turn them into a stream error the client sees.
pub fn parse_stream_chunk(text: &str) -> Result<Value, serde_json::Error> {
    let marked = rewrite_lone_surrogates(text.as_bytes(), surrogate_mark);
    parse_value(&marked)
}

/// Joins surrogate marks of [`parse_stream_chunk`] across the deltas of one content block:
/// a high mark at the end of one delta and a low mark at the start of the next become one
/// character; any other mark becomes U+FFFD (rpc-protocol.md §2.1: lone surrogates are
/// written as U+FFFD), and the text around it is kept.
#[derive(Debug, Default, Clone)]
pub struct SurrogateJoiner {
    /// A high surrogate seen last, waiting for its low half.
    pending_high: Option<u32>,
}

impl SurrogateJoiner {
    /// The text of `delta` that can be emitted now (a trailing high mark is held back).
    pub fn push(&mut self, delta: &str) -> String {
        let mut out = String::with_capacity(delta.len());
        for c in delta.chars() {
            match marked_surrogate(c) {
                Some(high @ 0xD800..=0xDBFF) => {
                    if self.pending_high.replace(high).is_some() {
                        out.push('\u{FFFD}');
                    }
                }
                Some(low) => match self.pending_high.take() {
                    Some(high) => {
                        let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                        out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    }
                    None => out.push('\u{FFFD}'),
                },
                None => {
                    if self.pending_high.take().is_some() {
                        out.push('\u{FFFD}');
                    }
                    out.push(c);
                }
            }
        }
        out
    }

    /// What is still held back at the end of the block: U+FFFD for a high surrogate whose low
    /// half never came, else nothing.
    pub fn finish(&mut self) -> &'static str {
        if self.pending_high.take().is_some() {
            "\u{FFFD}"
        } else {
            ""
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        format!("{{\"a\":{}1{}}}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn accepts_what_serde_json_refuses_by_default() {
        let text = nested(300);
        assert!(serde_json::from_str::<Value>(&text).is_err());
        let v = parse_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
    }

    #[test]
    fn refuses_past_the_limit_and_ignores_brackets_in_strings() {
        assert!(parse_str(&nested(MAX_DEPTH + 5)).is_err());
        let s = format!("{{\"s\":\"{}\\\"{}\"}}", "[".repeat(5000), "{".repeat(5000));
        assert!(parse_str(&s).is_ok());
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let v = parse_str(r#"{"id":"\ud800","b":"x\udc00y","ok":"\ud83d\ude00","esc":"\\ud800"}"#)
            .unwrap();
        assert_eq!(v["id"], "\u{FFFD}");
        assert_eq!(v["b"], "x\u{FFFD}y");
        assert_eq!(v["ok"], "\u{1F600}");
        assert_eq!(v["esc"], "\\ud800", "an escaped backslash is not an escape");
        assert!(matches!(
            replace_lone_surrogates(br#"{"a":"\u00e9"}"#),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn split_surrogate_pairs_are_joined_across_chunks() {
        let a = parse_stream_chunk(r#"{"t":"pair:\ud83d"}"#).unwrap();
        let b = parse_stream_chunk(r#"{"t":"\ude00 lone:\udc00 end\ud800"}"#).unwrap();
        let mut j = SurrogateJoiner::default();
        let first = j.push(a["t"].as_str().unwrap());
        let second = j.push(b["t"].as_str().unwrap());
        assert_eq!(first, "pair:");
        assert_eq!(second, "\u{1F600} lone:\u{FFFD} end");
        assert_eq!(j.finish(), "\u{FFFD}");
        assert_eq!(j.finish(), "");
        assert!(parse_stream_chunk(r#"{"t":"\ud83d"#).is_err());
    }

    #[test]
    fn trailing_garbage_is_an_error() {
        assert!(parse_str("{} x").is_err());
        assert!(parse_str("  {}  ").is_ok());
    }
}
