//! Best-effort repair of streamed, possibly truncated JSON tool arguments
//! ([`parse_streaming_json`]) and compact JSON text.

use serde_json::{Map, Value};

/// Compact JSON text of a value (as JavaScript `JSON.stringify` writes it).
pub(crate) fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Best-effort parse of possibly truncated JSON tool arguments into an object (upstream
/// `parseStreamingJson`). Unterminated strings and containers are closed; a dangling key,
/// `:` or `,` is cut back to the previous complete member. Anything that does not yield an
/// object gives `{}`.
pub fn parse_streaming_json(text: &str) -> Value {
    let t = text.trim();
    if t.is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(v) = crate::json::parse_str(t) {
        return object_or_empty(v);
    }
    // Positions outside strings where the text may be cut: just after `{`/`[`, or at `,`.
    let mut cuts = Vec::new();
    let mut scan = JsonScan::default();
    for (i, c) in t.char_indices() {
        if !scan.is_structural(c) {
            continue;
        }
        match c {
            '{' | '[' => cuts.push(i + 1),
            ',' => cuts.push(i),
            _ => {}
        }
    }
    if let Some(v) = try_complete(t) {
        return v;
    }
    for &cut in cuts.iter().rev().take(16) {
        if let Some(v) = try_complete(&t[..cut]) {
            return v;
        }
    }
    Value::Object(Map::new())
}

/// Character-by-character JSON lexer state: tracks whether the scan is inside a string
/// literal and whether the previous character was a backslash escape inside it.
#[derive(Default)]
pub(super) struct JsonScan {
    in_str: bool,
    esc: bool,
}

impl JsonScan {
    /// Feed the next character; `true` when `c` lies outside string literals and is not a
    /// quote (so it may be a structural `{`, `[`, `}`, `]` or `,`).
    fn is_structural(&mut self, c: char) -> bool {
        if self.in_str {
            if self.esc {
                self.esc = false;
            } else if c == '\\' {
                self.esc = true;
            } else if c == '"' {
                self.in_str = false;
            }
            return false;
        }
        if c == '"' {
            self.in_str = true;
            return false;
        }
        true
    }
}

pub(super) fn object_or_empty(v: Value) -> Value {
    match v {
        Value::Object(_) => v,
        _ => Value::Object(Map::new()),
    }
}

/// Close open strings and containers of `prefix` and parse it.
pub(super) fn try_complete(prefix: &str) -> Option<Value> {
    let mut stack = Vec::new();
    let mut scan = JsonScan::default();
    for c in prefix.chars() {
        if !scan.is_structural(c) {
            continue;
        }
        match c {
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    let mut s = prefix.trim_end().to_owned();
    if scan.in_str {
        if scan.esc {
            s.pop();
        }
        s.push('"');
    }
    while let Some(c) = stack.pop() {
        s.push(c);
    }
    match crate::json::parse_str(&s) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}
