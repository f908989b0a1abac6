//! Markdown frontmatter of skills and prompt templates (spec config.md §8.3, §9; upstream
//! `utils/frontmatter.ts`).
//!
//! A file whose text (BOM removed, CRLF/CR → LF) starts with `---` has frontmatter up to the
//! next `\n---`; the body is the rest, trimmed. Without frontmatter the body is the whole
//! normalized text, untrimmed. The frontmatter is a small YAML subset read by our own parser:
//! `key: value` lines (plain, `"double"` with escapes, `'single'` with `''`), `true`/`false`,
//! folded plain continuation lines, `|`/`>` block scalars, `#` comments; nested mappings and
//! lists are accepted and skipped (their keys are not needed).

use std::collections::BTreeMap;
use thiserror::Error;

/// A frontmatter scalar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FmValue {
    /// A string (quoted or plain, not `true`/`false`).
    Str(String),
    /// `true` / `false`.
    Bool(bool),
    /// Something else (a nested mapping or a list); its content is not kept.
    Other,
}

/// Why a frontmatter block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrontmatterError {
    /// A top-level line that is neither `key: value`, a comment nor a continuation.
    #[error("invalid frontmatter at line {line}: expected `key: value`")]
    Syntax {
        /// 1-based line inside the frontmatter block.
        line: usize,
    },
    /// A quoted value whose closing quote is missing.
    #[error("invalid frontmatter at line {line}: unterminated quoted string")]
    Unterminated {
        /// 1-based line inside the frontmatter block.
        line: usize,
    },
}

/// A parsed file: frontmatter keys and the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Top-level keys (empty without frontmatter).
    pub fields: BTreeMap<String, FmValue>,
    /// The body (see the module docs for trimming).
    pub body: String,
}

impl Parsed {
    /// A string field.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.fields.get(key) {
            Some(FmValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// A boolean field (`true`/`false` only).
    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.fields.get(key) {
            Some(FmValue::Bool(b)) => Some(*b),
            _ => None,
        }
    }
}

fn normalize(text: &str) -> String {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    t.replace("\r\n", "\n").replace('\r', "\n")
}

/// Splits `text` into frontmatter and body and parses the frontmatter.
pub fn parse(text: &str) -> Result<Parsed, FrontmatterError> {
    let norm = normalize(text);
    if !norm.starts_with("---") {
        return Ok(Parsed {
            fields: BTreeMap::new(),
            body: norm,
        });
    }
    let Some(end) = norm.get(3..).and_then(|s| s.find("\n---")).map(|i| i + 3) else {
        return Ok(Parsed {
            fields: BTreeMap::new(),
            body: norm,
        });
    };
    let yaml = norm.get(4..end).unwrap_or("");
    let body = norm.get(end + 4..).unwrap_or("").trim().to_string();
    Ok(Parsed {
        fields: parse_yaml(yaml)?,
        body,
    })
}

/// The body of `text` with any frontmatter removed (a malformed block is removed too).
pub fn strip(text: &str) -> String {
    match parse(text) {
        Ok(p) => p.body,
        Err(_) => {
            let norm = normalize(text);
            match norm.get(3..).and_then(|s| s.find("\n---")).map(|i| i + 3) {
                Some(end) if norm.starts_with("---") => {
                    norm.get(end + 4..).unwrap_or("").trim().to_string()
                }
                _ => norm,
            }
        }
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn strip_comment(value: &str) -> &str {
    // A ` #` starts a comment in a plain scalar.
    match value.find(" #") {
        Some(i) => value[..i].trim_end(),
        None => value,
    }
}

fn parse_double(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('0') => out.push('\0'),
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('/') => out.push('/'),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => return None,
            },
            c => out.push(c),
        }
    }
    None
}

fn parse_single(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut rest = s;
    loop {
        let i = rest.find('\'')?;
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('\'') {
            out.push('\'');
            rest = r;
        } else {
            return Some((out, rest));
        }
    }
}

fn scalar(plain: &str) -> FmValue {
    match plain {
        "true" | "True" | "TRUE" => FmValue::Bool(true),
        "false" | "False" | "FALSE" => FmValue::Bool(false),
        s => FmValue::Str(s.to_string()),
    }
}

fn parse_yaml(yaml: &str) -> Result<BTreeMap<String, FmValue>, FrontmatterError> {
    let lines: Vec<&str> = yaml.split('\n').collect();
    let mut fields = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let lineno = i + 1;
        i += 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indent_of(line) > 0 {
            // Continuation of a nested value that was skipped.
            continue;
        }
        let Some(colon) = find_key_colon(line) else {
            return Err(FrontmatterError::Syntax { line: lineno });
        };
        let key = line[..colon]
            .trim()
            .trim_matches('"')
            .trim_matches('\'')
            .to_string();
        let rest = line[colon + 1..].trim();
        // Following indented (or blank) lines belong to this key.
        let mut cont: Vec<&str> = Vec::new();
        while i < lines.len() && (lines[i].trim().is_empty() || indent_of(lines[i]) > 0) {
            cont.push(lines[i]);
            i += 1;
        }
        while cont.last().is_some_and(|l| l.trim().is_empty()) {
            cont.pop();
        }
        let value = if let Some(q) = rest.strip_prefix('"') {
            let joined = fold_quoted(q, &cont);
            match parse_double(&joined) {
                Some((s, _)) => FmValue::Str(s),
                None => return Err(FrontmatterError::Unterminated { line: lineno }),
            }
        } else if let Some(q) = rest.strip_prefix('\'') {
            let joined = fold_quoted(q, &cont);
            match parse_single(&joined) {
                Some((s, _)) => FmValue::Str(s),
                None => return Err(FrontmatterError::Unterminated { line: lineno }),
            }
        } else if rest.starts_with('|') || rest.starts_with('>') {
            FmValue::Str(block_scalar(rest, &cont))
        } else if rest.is_empty() {
            let nested = cont
                .iter()
                .any(|l| l.trim_start().starts_with("- ") || find_key_colon(l.trim()).is_some());
            if cont.is_empty() || nested {
                FmValue::Other
            } else {
                FmValue::Str(fold_plain("", &cont))
            }
        } else if rest.starts_with('[') || rest.starts_with('{') {
            FmValue::Other
        } else {
            let first = strip_comment(rest);
            if cont.is_empty() {
                scalar(first)
            } else {
                FmValue::Str(fold_plain(first, &cont))
            }
        };
        fields.insert(key, value);
    }
    Ok(fields)
}

/// The colon that ends a mapping key: followed by a space or the end of the line.
fn find_key_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ' || bytes[i + 1] == b'\t') {
            let key = line[..i].trim();
            return (!key.is_empty() && !key.starts_with('-')).then_some(i);
        }
    }
    None
}

fn fold_quoted(first: &str, cont: &[&str]) -> String {
    let mut s = first.to_string();
    for l in cont {
        let t = l.trim();
        if t.is_empty() {
            s.push('\n');
        } else {
            if !s.ends_with('\n') {
                s.push(' ');
            }
            s.push_str(t);
        }
    }
    s
}

fn fold_plain(first: &str, cont: &[&str]) -> String {
    let mut s = first.to_string();
    for l in cont {
        let t = strip_comment(l.trim());
        if t.is_empty() {
            s.push('\n');
        } else {
            if !s.is_empty() && !s.ends_with('\n') {
                s.push(' ');
            }
            s.push_str(t);
        }
    }
    s
}

fn block_scalar(header: &str, cont: &[&str]) -> String {
    let literal = header.starts_with('|');
    let keep = header.contains('+');
    let strip_final = header.contains('-');
    let indent = cont
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = cont
        .iter()
        .map(|l| if l.len() >= indent { &l[indent..] } else { "" })
        .collect();
    let mut out = if literal {
        lines.join("\n")
    } else {
        let mut s = String::new();
        for (n, l) in lines.iter().enumerate() {
            if l.is_empty() {
                s.push('\n');
            } else {
                if n > 0 && !s.ends_with('\n') {
                    s.push(' ');
                }
                s.push_str(l);
            }
        }
        s
    };
    if !strip_final && !out.is_empty() {
        out.push('\n');
    }
    if !keep {
        let trimmed = out.trim_end_matches('\n').len();
        let had_newline = out.len() > trimmed && !strip_final;
        out.truncate(trimmed);
        if had_newline {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_quoted_and_bool_fields() {
        let p = parse("---\nname: greeter\ndescription: \"Says \\\"hi\\\"\"\nargument-hint: '[focus]'\ndisable-model-invocation: true\n---\n\nBody\n").unwrap();
        assert_eq!(p.str("name"), Some("greeter"));
        assert_eq!(p.str("description"), Some("Says \"hi\""));
        assert_eq!(p.str("argument-hint"), Some("[focus]"));
        assert_eq!(p.bool("disable-model-invocation"), Some(true));
        assert_eq!(p.body, "Body");
    }

    #[test]
    fn no_frontmatter_keeps_body_untrimmed() {
        let p = parse("Note: $@\n").unwrap();
        assert!(p.fields.is_empty());
        assert_eq!(p.body, "Note: $@\n");
    }

    #[test]
    fn block_and_folded() {
        let p =
            parse("---\ndescription: >\n  one\n  two\nother: |\n  a\n  b\nmeta:\n  k: v\n---\nx")
                .unwrap();
        assert_eq!(p.str("description"), Some("one two\n"));
        assert_eq!(p.str("other"), Some("a\nb\n"));
        assert_eq!(p.fields.get("meta"), Some(&FmValue::Other));
    }

    #[test]
    fn malformed_is_an_error() {
        assert!(parse("---\njust words\n---\nx").is_err());
        assert!(parse("---\nname: \"open\n---\nx").is_err());
    }
}
