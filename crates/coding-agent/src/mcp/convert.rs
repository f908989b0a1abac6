//! MCP results → model-facing content (upstream 1.6 `docs/mcp.md` "Control tool exposure",
//! pi-mcp `toLlmContent` / `limitMcpContent`): text and images pass through, embedded text
//! resources become text, embedded images become images, binary resources are saved to a
//! temporary file named in the text, resource links become a one-line note; text over 20 KB
//! (all text blocks joined by `\n`) keeps its first and last 10 KB around a
//! `…N chars truncated…` marker, and the full text goes to a temporary file named in the
//! result (`details.fullOutputPath`).

use pi_agent::ToolOutput;
use pi_ai::{Content, ImageContent};
use serde_json::{json, Value};

/// Model-facing text beyond this many bytes is cut in the middle (upstream: 20 KB).
pub const MAX_OUTPUT_BYTES: usize = 20 * 1024;

/// Name of the tool that reads resources (docs/mcp.md "Use resources").
pub const READ_MCP_RESOURCE: &str = "read_mcp_resource";

/// Writes `data` to a new file `pi-mcp-<random><ext>` in the temp directory; returns its path.
pub fn save_temp(data: &[u8], ext: &str) -> Result<String, String> {
    let file = tempfile::Builder::new()
        .prefix("pi-mcp-")
        .suffix(ext)
        .tempfile()
        .map_err(|e| e.to_string())?;
    std::fs::write(file.path(), data).map_err(|e| e.to_string())?;
    let (_, path) = file.keep().map_err(|e| e.to_string())?;
    Ok(path.to_string_lossy().into_owned())
}

fn image(data: &str, mime: &str) -> Content {
    Content::Image(ImageContent {
        data: data.to_string(),
        mime_type: mime.to_string(),
        extra: Default::default(),
    })
}

fn size_text(n: usize) -> String {
    if n < 1024 {
        format!("{n}B")
    } else if n < 1024 * 1024 {
        format!("{:.1}KB", n as f64 / 1024.0)
    } else {
        format!("{:.1}MB", n as f64 / (1024.0 * 1024.0))
    }
}

fn is_text_mime(mime: Option<&str>) -> bool {
    let Some(m) = mime else { return false };
    let t = m
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    t.starts_with("text/") || t == "application/json" || t.ends_with("+json") || t.ends_with("+xml")
}

fn ext_of(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rsplit_once('.') {
        Some((_, e))
            if !e.is_empty() && e.len() <= 8 && e.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            format!(".{e}")
        }
        _ => ".bin".into(),
    }
}

/// One MCP content block of `server`'s result as model content.
pub fn block_to_content(server: &str, block: &Value, readable_resources: bool) -> Content {
    let s = |k: &str| block.get(k).and_then(Value::as_str);
    match s("type").unwrap_or("") {
        "text" => Content::text(s("text").unwrap_or("")),
        "image" => image(
            s("data").unwrap_or(""),
            s("mimeType").unwrap_or("image/png"),
        ),
        "audio" => Content::text(format!(
            "[audio {} omitted]",
            s("mimeType").unwrap_or("unknown")
        )),
        "resource_link" => {
            let uri = s("uri").unwrap_or("");
            let name = s("title").or(s("name")).unwrap_or(uri);
            let mut details = Vec::new();
            if let Some(m) = s("mimeType") {
                details.push(m.to_string());
            }
            if let Some(n) = block.get("size").and_then(Value::as_u64) {
                details.push(size_text(n as usize));
            }
            let details = if details.is_empty() {
                String::new()
            } else {
                format!(" ({})", details.join(", "))
            };
            let desc = s("description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let read = if readable_resources {
                format!(". Read it with {READ_MCP_RESOURCE} (server \"{server}\")")
            } else {
                String::new()
            };
            Content::text(format!("[Resource {uri} \"{name}\"{details}{desc}{read}]"))
        }
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or(Value::Null);
            resource_to_content(&r)
        }
        other => Content::text(format!("[unsupported MCP content {other}]")),
    }
}

/// One `resources/read` content (or embedded resource) as model content.
pub fn resource_to_content(r: &Value) -> Content {
    let s = |k: &str| r.get(k).and_then(Value::as_str);
    if let Some(t) = s("text") {
        return Content::text(t);
    }
    let uri = s("uri").unwrap_or("");
    let mime = s("mimeType");
    let blob = s("blob").unwrap_or("");
    if mime.is_some_and(|m| m.starts_with("image/")) {
        return image(blob, mime.unwrap_or("image/png"));
    }
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap_or_default();
    if is_text_mime(mime) {
        return Content::text(String::from_utf8_lossy(&data).into_owned());
    }
    let kind = format!(
        "{}, {}",
        mime.unwrap_or("unknown type"),
        size_text(data.len())
    );
    match save_temp(&data, &ext_of(uri)) {
        Ok(path) => Content::text(format!("[Binary resource {uri} ({kind}) saved to {path}]")),
        Err(e) => Content::text(format!(
            "[Binary resource {uri} ({kind}) could not be saved: {e}]"
        )),
    }
}

/// Keeps model-facing text within [`MAX_OUTPUT_BYTES`]: longer text becomes one text block
/// (a header with the original token estimate and line count, the cut text, and where the full
/// text was saved), followed by the images. Returns the content and the saved file's path.
pub fn limit_content(content: Vec<Content>) -> (Vec<Content>, Option<String>) {
    let combined: Vec<&str> = content.iter().filter_map(Content::as_text).collect();
    let combined = combined.join("\n");
    if combined.len() <= MAX_OUTPUT_BYTES {
        return (content, None);
    }
    let half = MAX_OUTPUT_BYTES / 2;
    let mut head_end = half;
    while head_end > 0 && !combined.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = combined.len() - (MAX_OUTPUT_BYTES - half);
    while tail_start < combined.len() && !combined.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let removed = combined[head_end..tail_start].chars().count();
    let lines = combined.split('\n').count() - usize::from(combined.ends_with('\n'));
    let tokens = combined.len().div_ceil(4);
    let (where_, path) = match save_temp(combined.as_bytes(), ".txt") {
        Ok(p) => (
            format!("\n\n[Full output: {p} (read it with offset/limit)]"),
            Some(p),
        ),
        Err(e) => (format!("\n\n[Could not save the full output: {e}]"), None),
    };
    let text = format!(
        "Warning: truncated output (original token count: {tokens})\nTotal output lines: {lines}\n\n{}…{removed} chars truncated…{}{where_}",
        &combined[..head_end],
        &combined[tail_start..]
    );
    let mut out = vec![Content::text(text)];
    out.extend(
        content
            .into_iter()
            .filter(|c| matches!(c, Content::Image(_))),
    );
    (out, path)
}

/// A `tools/call` result of `server`'s `tool` as a tool result: content converted and limited,
/// `details: {server, tool, fullOutputPath?}`, `structuredContent` = the result without
/// `_meta`, `isError` kept (an error without text gets `MCP tool <server>/<tool> returned an
/// error`).
pub fn convert_call_result(
    server: &str,
    tool: &str,
    result: &Value,
    readable_resources: bool,
) -> ToolOutput {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut content: Vec<Content> = blocks
        .iter()
        .map(|b| block_to_content(server, b, readable_resources))
        .collect();
    if content.is_empty() {
        if let Some(sc) = result.get("structuredContent") {
            content.push(Content::text(
                serde_json::to_string_pretty(sc).unwrap_or_default(),
            ));
        }
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    if is_error
        && content
            .iter()
            .filter_map(Content::as_text)
            .all(str::is_empty)
    {
        content.push(Content::text(format!(
            "MCP tool {server}/{tool} returned an error"
        )));
    }
    let (content, full) = limit_content(content);
    let mut details = json!({"server": server, "tool": tool});
    if let Some(p) = full {
        details["fullOutputPath"] = json!(p);
    }
    let mut structured = result.clone();
    if let Some(o) = structured.as_object_mut() {
        o.remove("_meta");
    }
    ToolOutput {
        content,
        details: Some(details),
        structured_content: Some(structured),
        is_error: is_error.then_some(true),
    }
}
