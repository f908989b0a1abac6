//! The `pi --list-models [search]` table (upstream 1.6 `cli/list-models.ts`, with pi-tui's
//! `fuzzyFilter` for the search).
//!
//! Columns `provider  model  context  max-out  thinking  images`, each padded to its widest
//! cell and joined by two spaces (trailing padding kept, as upstream prints it); token counts
//! as `200K`, `1.0M`, `65.5K` ([`format_token_count`]); rows sorted by provider, then id, in
//! locale order ([`crate::config::resolve::locale_cmp`]).

use crate::config::resolve::locale_cmp;
use pi_ai::Model;

/// `count` tokens for humans: `1M`/`1.5M` from a million up, `200K`/`65.5K` from a thousand
/// up (one decimal when not whole; JavaScript `toFixed(1)` rounding), else the number.
pub fn format_token_count(count: u64) -> String {
    let scaled = |unit: u64, suffix: &str| {
        if count.is_multiple_of(unit) {
            format!("{}{suffix}", count / unit)
        } else {
            format!("{:.1}{suffix}", count as f64 / unit as f64)
        }
    };
    if count >= 1_000_000 {
        scaled(1_000_000, "M")
    } else if count >= 1_000 {
        scaled(1_000, "K")
    } else {
        count.to_string()
    }
}

/// Whether every character of `query` occurs in `text` in order (both lowercased), or the
/// query with its letter run and digit run swapped does (`gemini3` ~ `3gemini`); pi-tui
/// `fuzzyMatch` membership.
pub fn fuzzy_matches(query: &str, text: &str) -> bool {
    let q = query.to_lowercase();
    let t = text.to_lowercase();
    let subsequence = |q: &str| {
        let mut rest = t.chars();
        q.chars().all(|c| rest.any(|x| x == c))
    };
    if q.chars().count() <= t.chars().count() && subsequence(&q) {
        return true;
    }
    let split = q.find(|c: char| !c.is_ascii_lowercase()).unwrap_or(q.len());
    let (head, tail) = q.split_at(split);
    let swapped =
        if !head.is_empty() && !tail.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) {
            Some(format!("{tail}{head}"))
        } else {
            let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
            let (head, tail) = q.split_at(split);
            (!head.is_empty() && !tail.is_empty() && tail.chars().all(|c| c.is_ascii_lowercase()))
                .then(|| format!("{tail}{head}"))
        };
    swapped.is_some_and(|s| s.chars().count() <= t.chars().count() && subsequence(&s))
}

/// The models of `models` that `search` keeps: every whitespace- or `/`-separated token fuzzy
/// matches `"<provider> <id>"` ([`fuzzy_matches`]); all of them without a search.
pub fn filter<'a>(models: &'a [Model], search: Option<&str>) -> Vec<&'a Model> {
    let tokens: Vec<&str> = search
        .unwrap_or_default()
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|t| !t.is_empty())
        .collect();
    models
        .iter()
        .filter(|m| {
            let text = format!("{} {}", m.provider, m.id);
            tokens.iter().all(|t| fuzzy_matches(t, &text))
        })
        .collect()
}

/// The table for `models` (header and one line per model, each ending in `\n`), or `None`
/// when `search` keeps none.
pub fn table(models: &[Model], search: Option<&str>) -> Option<String> {
    let mut rows = filter(models, search);
    if rows.is_empty() {
        return None;
    }
    rows.sort_by(|a, b| {
        locale_cmp(&a.provider, &b.provider).then_with(|| locale_cmp(&a.id, &b.id))
    });
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|m| {
            [
                m.provider.clone(),
                m.id.clone(),
                format_token_count(m.context_window),
                format_token_count(m.max_tokens),
                yes_no(m.reasoning),
                yes_no(m.supports_images()),
            ]
        })
        .collect();
    let header = [
        "provider", "model", "context", "max-out", "thinking", "images",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.chars().count());
    for r in &cells {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&header).chain(&cells) {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(&line.join("  "));
        out.push('\n');
    }
    Some(out)
}
