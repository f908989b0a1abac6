//! Prompt templates (spec config.md §9; upstream 1.6 `docs/prompt-templates.md`): loading one
//! `*.md` file, shell-like argument parsing and argument substitution, and `/name args`
//! expansion.

use super::frontmatter;
use super::{PromptTemplate, SourceInfo};
use std::path::Path;

/// Splits the text after a template name into arguments, shell-like: whitespace separates
/// arguments; a `"` or `'` opens a quoted part only at the start of an argument (so `doesn't`
/// stays one word); inside quotes a backslash before the same quote character yields that
/// character, other backslashes stay as typed; an unclosed quote is kept as text and the rest
/// is parsed normally; `""` is an (empty) argument.
pub fn parse_command_args(input: &str) -> Vec<String> {
    let chars: Vec<char> = input.chars().collect();
    let mut args = Vec::new();
    let mut current = String::new();
    let mut has_token = false;
    let mut in_quote: Option<char> = None;
    let mut quote_start = 0usize;
    let mut i = 0usize;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = in_quote {
            if c == '\\' && chars.get(i + 1) == Some(&q) {
                current.push(q);
                i += 1;
            } else if c == q {
                in_quote = None;
            } else {
                current.push(c);
            }
        } else if (c == '"' || c == '\'') && !has_token {
            in_quote = Some(c);
            quote_start = i;
            has_token = true;
        } else if c.is_whitespace() {
            if has_token {
                args.push(std::mem::take(&mut current));
                has_token = false;
            }
        } else {
            current.push(c);
            has_token = true;
        }
        if in_quote.is_some() && i + 1 >= chars.len() {
            // Unclosed: the quote is text; re-read what followed it.
            in_quote = None;
            current = chars[quote_start].to_string();
            i = quote_start;
        }
        i += 1;
    }
    if has_token {
        args.push(current);
    }
    args
}

fn digits(s: &[char], from: usize) -> usize {
    s[from..].iter().take_while(|c| c.is_ascii_digit()).count()
}

fn num(s: &[char], from: usize, len: usize) -> usize {
    s[from..from + len]
        .iter()
        .collect::<String>()
        .parse::<usize>()
        .unwrap_or(usize::MAX)
}

fn starts(s: &[char], at: usize, lit: &str) -> bool {
    let lit: Vec<char> = lit.chars().collect();
    s.len() >= at + lit.len() && s[at..at + lit.len()] == lit[..]
}

/// Replaces the argument placeholders of `content` (one pass, values are never re-scanned):
/// `${N:-default}`, `${@:-default}`, `${ARGUMENTS:-default}` (the value, or the default when it
/// is missing or empty); `${@:N}` (arguments from the N-th, 1-based, 0 counts as 1) and
/// `${@:N:L}` (L of them), joined by spaces; `$ARGUMENTS` and `$@` (all arguments joined by
/// spaces); `$N` (the N-th argument or empty). Anything else is kept.
pub fn substitute_args(content: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let s: Vec<char> = content.chars().collect();
    let mut out = String::with_capacity(content.len());
    let mut i = 0;
    let arg = |n: usize| -> Option<&String> { n.checked_sub(1).and_then(|k| args.get(k)) };
    while i < s.len() {
        if s[i] != '$' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let j = i + 1;
        if s.get(j) == Some(&'{') {
            let k = j + 1;
            // ${target:-default}
            let target_len = if starts(&s, k, "ARGUMENTS") {
                9
            } else if s.get(k) == Some(&'@') {
                1
            } else {
                digits(&s, k)
            };
            if target_len > 0 && starts(&s, k + target_len, ":-") {
                let d0 = k + target_len + 2;
                if let Some(close) = s[d0..].iter().position(|c| *c == '}') {
                    let default: String = s[d0..d0 + close].iter().collect();
                    let value = if s[k].is_ascii_digit() {
                        arg(num(&s, k, target_len)).cloned().unwrap_or_default()
                    } else {
                        all.clone()
                    };
                    out.push_str(if value.is_empty() { &default } else { &value });
                    i = d0 + close + 1;
                    continue;
                }
            }
            // ${@:N} / ${@:N:L}
            if starts(&s, k, "@:") {
                let n0 = k + 2;
                let nl = digits(&s, n0);
                if nl > 0 {
                    let start = num(&s, n0, nl).saturating_sub(1);
                    let after = n0 + nl;
                    let (len, end) = if s.get(after) == Some(&':') {
                        let ll = digits(&s, after + 1);
                        if ll > 0 {
                            (Some(num(&s, after + 1, ll)), after + 1 + ll)
                        } else {
                            (None, usize::MAX)
                        }
                    } else {
                        (None, after)
                    };
                    if end != usize::MAX && s.get(end) == Some(&'}') {
                        let from = start.min(args.len());
                        let to = match len {
                            Some(l) => from.saturating_add(l).min(args.len()),
                            None => args.len(),
                        };
                        out.push_str(&args[from..to].join(" "));
                        i = end + 1;
                        continue;
                    }
                }
            }
            out.push('$');
            i += 1;
            continue;
        }
        if starts(&s, j, "ARGUMENTS") {
            out.push_str(&all);
            i = j + 9;
        } else if s.get(j) == Some(&'@') {
            out.push_str(&all);
            i = j + 1;
        } else {
            let nl = digits(&s, j);
            if nl > 0 {
                if let Some(a) = arg(num(&s, j, nl)) {
                    out.push_str(a);
                }
                i = j + nl;
            } else {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

/// Loads one template file. Name = file name without `.md`; description = frontmatter
/// `description`, else the first non-blank body line cut to 60 characters (`...` appended when
/// longer); `argument-hint` from the frontmatter; content = the body.
/// `Err` is the warning text (unreadable file, malformed frontmatter).
pub fn load_template(path: &Path, source_info: SourceInfo) -> Result<PromptTemplate, String> {
    let raw = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let parsed = frontmatter::parse(&raw).map_err(|e| e.to_string())?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let name = name.strip_suffix(".md").unwrap_or(&name).to_string();
    let mut description = parsed.str("description").unwrap_or_default().to_string();
    if description.is_empty() {
        if let Some(first) = parsed.body.split('\n').find(|l| !l.trim().is_empty()) {
            // Upstream counts UTF-16 units; we count characters.
            description = first.chars().take(60).collect();
            if first.chars().count() > 60 {
                description.push_str("...");
            }
        }
    }
    Ok(PromptTemplate {
        name,
        description,
        argument_hint: parsed.str("argument-hint").map(str::to_string),
        content: parsed.body,
        file_path: path.to_path_buf(),
        source: source_info.scope.clone(),
        source_info,
    })
}

/// Expands `/name args` when `name` is a known template (config.md §9): the name runs up to
/// the first whitespace, the rest is parsed by [`parse_command_args`] and substituted into the
/// template's content. Any other text is returned unchanged.
pub fn expand(text: &str, templates: &[PromptTemplate]) -> String {
    let Some(rest) = text.strip_prefix('/') else {
        return text.to_string();
    };
    let name_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..name_end];
    if name.is_empty() {
        return text.to_string();
    }
    let Some(t) = templates.iter().find(|t| t.name == name) else {
        return text.to_string();
    };
    let args = parse_command_args(rest[name_end..].trim_start());
    substitute_args(&t.content, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[&str]) -> Vec<String> {
        v.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn quoting() {
        assert_eq!(
            parse_command_args("\"API compatibility\" extra"),
            a(&["API compatibility", "extra"])
        );
        assert_eq!(parse_command_args("doesn't work"), a(&["doesn't", "work"]));
        assert_eq!(
            parse_command_args("\"the \\\"fast\\\" path\""),
            a(&["the \"fast\" path"])
        );
        assert_eq!(parse_command_args("'a\\b' \"\""), a(&["a\\b", ""]));
        assert_eq!(parse_command_args("\"open x"), a(&["\"open", "x"]));
        assert_eq!(parse_command_args("  a\t b\n c "), a(&["a", "b", "c"]));
    }

    #[test]
    fn substitution() {
        let args = a(&["one", "two", "three"]);
        assert_eq!(
            substitute_args("$1-$2-$4-$ARGUMENTS-$@", &args),
            "one-two--one two three-one two three"
        );
        assert_eq!(
            substitute_args("${1:-d} ${5:-d} ${@:-none}", &args),
            "one d one two three"
        );
        assert_eq!(substitute_args("${@:-none}|${ARGUMENTS:-x}", &[]), "none|x");
        assert_eq!(
            substitute_args("${@:2}|${@:0}|${@:2:1}|${@:9}", &args),
            "two three|one two three|two|"
        );
        assert_eq!(substitute_args("$$ ${x} $", &args), "$$ ${x} $");
        assert_eq!(substitute_args("$1", &a(&["$2", "b"])), "$2");
    }
}
