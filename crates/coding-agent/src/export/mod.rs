//! HTML export of a session (spec config.md §11; upstream 1.6 `export_html`, `--export`).
//!
//! The page is one self-contained file: our own stylesheet and viewer script inline, and the
//! session as base64-encoded JSON in `<script id="session-data" type="application/json">`:
//! `{header, entries (every entry of every branch), leafId, systemPrompt?, tools?: [{name,
//! description, parameters}]}` (`systemPrompt`/`tools` only for a live session), the same
//! object as upstream's page carries. Beside it, in `<script id="rendered-markdown"
//! type="application/json">` (base64 JSON too), the `rendered` map: each markdown block's HTML,
//! rendered here at export time by
//! [`markdown::Renderer`] (CommonMark + GFM, highlighted code, sanitised by an allow-list):
//! key `"<entry id>:<block index>"` for a `text`/`thinking` block of a message's (or custom
//! message's) content array, `"<entry id>:s"` for string content and for a compaction's or
//! branch summary's `summary`.
//!
//! Safety: base64 cannot close the `<script>` element; the viewer builds the page with DOM
//! calls and `textContent`, except that it parses the `rendered` HTML, which only the
//! sanitiser produced (no script, style, event or `style` attribute, form element or frame;
//! links only `http(s):` and `mailto:`; images only `data:` URLs of raster image MIME types),
//! in an inert `<template>`; the viewer runs no markdown parser, and a block missing from
//! `rendered` shows as plain text. A Content-Security-Policy meta tag allows exactly the
//! page's own script and style (by hash), `data:` images and nothing else (no network, no
//! inline event handlers or style attributes), a third layer under the first two.

pub mod markdown;

use crate::session::SessionManager;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use thiserror::Error;

const VIEWER_JS: &str = include_str!("viewer.js");
const VIEWER_CSS: &str = include_str!("viewer.css");

/// Why an export failed. The texts are upstream's (golden export_html).
#[derive(Debug, Error)]
pub enum ExportError {
    /// `--no-session`: nothing on disk to export.
    #[error("Cannot export in-memory session to HTML")]
    InMemory,
    /// The session file has not been written yet (no message so far).
    #[error("Nothing to export yet - start a conversation first")]
    NothingYet,
    /// `--export` of a missing file.
    #[error("File not found: {0}")]
    NotFound(String),
    /// The session file could not be opened.
    #[error("{0}")]
    Open(String),
    /// Writing the page failed: Node's wording (`ENOENT: no such file or directory, open
    /// '<path>'`) for the common cases.
    #[error("{}", node_io_text(.source, .path))]
    Write {
        /// The output path as given.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

fn node_io_text(e: &std::io::Error, path: &str) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => format!("ENOENT: no such file or directory, open '{path}'"),
        PermissionDenied => format!("EACCES: permission denied, open '{path}'"),
        IsADirectory => format!("EISDIR: illegal operation on a directory, open '{path}'"),
        _ => format!("{e}, open '{path}'"),
    }
}

/// `'sha256-…'` CSP source of an inline element's text.
fn csp_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Escapes text for HTML element content and attribute values.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page for `data` (the session-data object described in the module docs);
/// `title` is the session name when it has one.
pub fn render_html(data: &Value, title: Option<&str>) -> String {
    let b64 = |v: &Value| {
        let json = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
        base64::engine::general_purpose::STANDARD.encode(json.as_bytes())
    };
    let payload = b64(data);
    let rendered = b64(&rendered_markdown(&data["entries"]));
    let title = match title {
        Some(t) if !t.is_empty() => format!("{t} - pi session"),
        _ => "pi session".to_string(),
    };
    let csp = format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(VIEWER_JS),
        csp_hash(VIEWER_CSS)
    );
    let mut html = String::with_capacity(
        payload.len() + rendered.len() + VIEWER_JS.len() + VIEWER_CSS.len() + 1024,
    );
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    html.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n",
        escape_html(&csp)
    ));
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str("<meta name=\"generator\" content=\"pi (Rust) session export\">\n");
    html.push_str(&format!("<title>{}</title>\n", escape_html(&title)));
    html.push_str("<style>");
    html.push_str(VIEWER_CSS);
    html.push_str("</style>\n</head>\n<body>\n");
    html.push_str("<noscript><p>This page shows a pi session; it needs JavaScript to render.</p></noscript>\n");
    html.push_str("<script id=\"session-data\" type=\"application/json\">");
    html.push_str(&payload);
    html.push_str("</script>\n<script id=\"rendered-markdown\" type=\"application/json\">");
    html.push_str(&rendered);
    html.push_str("</script>\n<script>");
    html.push_str(VIEWER_JS);
    html.push_str("</script>\n</body>\n</html>\n");
    html
}

/// The session-data object of `store` (see the module docs).
pub fn session_data(
    store: &SessionManager,
    system_prompt: Option<&str>,
    tools: Option<Vec<Value>>,
) -> Value {
    let header = serde_json::to_value(store.header()).unwrap_or(Value::Null);
    let entries = serde_json::to_value(store.loaded_entries()).unwrap_or(Value::Null);
    let mut data = json!({
        "header": header,
        "entries": entries,
        "leafId": store.leaf_id(),
    });
    if let Some(sp) = system_prompt {
        data["systemPrompt"] = Value::String(sp.to_string());
    }
    if let Some(t) = tools {
        data["tools"] = Value::Array(t);
    }
    data
}

/// The `rendered` map of the module docs for `entries` (the session's entries as JSON).
pub fn rendered_markdown(entries: &Value) -> Value {
    let mut renderer = markdown::Renderer::new();
    let mut out = serde_json::Map::new();
    let mut content =
        |id: &str, content: &Value, out: &mut serde_json::Map<String, Value>| match content {
            Value::String(text) => {
                out.insert(format!("{id}:s"), Value::String(renderer.render(text)));
            }
            Value::Array(blocks) => {
                for (i, b) in blocks.iter().enumerate() {
                    let text = match b.get("type").and_then(Value::as_str) {
                        Some("text") => b.get("text"),
                        Some("thinking") => b.get("thinking"),
                        _ => None,
                    };
                    if let Some(Value::String(text)) = text {
                        out.insert(format!("{id}:{i}"), Value::String(renderer.render(text)));
                    }
                }
            }
            _ => {}
        };
    for e in entries.as_array().map(Vec::as_slice).unwrap_or_default() {
        let Some(id) = e.get("id").and_then(Value::as_str) else {
            continue;
        };
        match e.get("type").and_then(Value::as_str) {
            Some("message") => {
                let Some(m) = e.get("message") else { continue };
                let role = m.get("role").and_then(Value::as_str).unwrap_or("");
                if matches!(role, "toolResult" | "system" | "bashExecution") {
                    continue;
                }
                if let Some(c) = m.get("content") {
                    content(id, c, &mut out);
                }
            }
            Some("custom_message") => {
                if let Some(c) = e.get("content") {
                    content(id, c, &mut out);
                }
            }
            Some("compaction" | "branch_summary") => {
                if let Some(Value::String(s)) = e.get("summary") {
                    content(id, &Value::String(s.clone()), &mut out);
                }
            }
            _ => {}
        }
    }
    Value::Object(out)
}

/// Writes the page for `data` to `output` (relative paths against the process cwd), else to
/// `pi-session-<session file name without .jsonl>.html`. Returns the path as written.
fn write_page(
    data: &Value,
    title: Option<&str>,
    session_file: &Path,
    output: Option<&str>,
) -> Result<String, ExportError> {
    let path = match output.filter(|o| !o.is_empty()) {
        Some(o) => o.to_string(),
        None => {
            let stem = session_file
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let stem = stem.strip_suffix(".jsonl").unwrap_or(&stem).to_string();
            format!("pi-session-{stem}.html")
        }
    };
    let html = render_html(data, title);
    let target = crate::config::expand_home(&path);
    std::fs::write(&target, html).map_err(|source| ExportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// `export_html` of a live session (rpc-protocol.md §4.9): needs a session file that exists on
/// disk. `system_prompt` and `tools` (`{name, description, parameters}`) are embedded too.
pub fn export_session(
    store: &SessionManager,
    system_prompt: Option<&str>,
    tools: Option<Vec<Value>>,
    output: Option<&str>,
) -> Result<String, ExportError> {
    let file: PathBuf = store
        .session_file()
        .filter(|_| store.is_persisted())
        .ok_or(ExportError::InMemory)?
        .to_path_buf();
    if !file.exists() {
        return Err(ExportError::NothingYet);
    }
    let data = session_data(store, system_prompt, tools);
    write_page(&data, store.session_name().as_deref(), &file, output)
}

/// `pi --export <session.jsonl> [output]`: exports a session file (without system prompt
/// and tools).
pub fn export_file(input: &Path, output: Option<&str>) -> Result<String, ExportError> {
    let abs = if input.is_absolute() {
        input.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(input))
            .unwrap_or_else(|_| input.to_path_buf())
    };
    if !abs.exists() {
        return Err(ExportError::NotFound(abs.display().to_string()));
    }
    let store = SessionManager::open(&abs).map_err(|e| ExportError::Open(e.to_string()))?;
    let data = session_data(&store, None, None);
    write_page(&data, store.session_name().as_deref(), &abs, output)
}
