//! The `read` tool (spec tools.md §1; result shape from the 1.6 recording `tool_read`).
//!
//! Text files are returned raw (no line numbers) as one text block, also mirrored in
//! `structuredContent` as the same string. Images (PNG, JPEG, GIF, WebP, detected by content) are
//! returned as a text note plus an image block.

use super::schema;
use super::truncate::{format_size, truncate_head, TruncatedBy, TruncationLimits};
use super::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use super::util::{
    access, arg_f64, check_aborted, js_number, node_error, require_str, resolve_read_path,
    run_blocking_cancellable, tool_definition,
};
use async_trait::async_trait;
use base64::Engine;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Content, ImageContent, ToolDefinition};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The read tool.
pub struct ReadTool {
    cwd: PathBuf,
}

impl ReadTool {
    /// A read tool resolving relative paths against `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        ReadTool { cwd }
    }
}

/// JSON-Schema of the read tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &["path"],
        vec![
            (
                "path",
                schema::string("File to read, absolute or relative to the working directory."),
            ),
            (
                "offset",
                schema::number("First line to return, counting from 1."),
            ),
            (
                "limit",
                schema::number("Largest number of lines to return."),
            ),
        ],
    )
}

fn description() -> String {
    format!(
        "Read a file. Text files and images (jpg, png, gif, webp) are supported; images come back as \
         attachments. Text output stops after {DEFAULT_MAX_LINES} lines or {}KB, whichever comes \
         first; use offset and limit to page through large files and keep reading with a higher \
         offset until you have everything you need.",
        DEFAULT_MAX_BYTES / 1024
    )
}

/// Detects a supported image type from the file's leading bytes.
pub fn detect_image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Formats the text of a (possibly offset/limited) read as upstream does (spec tools.md §1.2).
/// Returns the output text and the truncation details when truncation happened.
pub fn format_text_read(
    text: &str,
    path_arg: &str,
    offset: Option<f64>,
    limit: Option<f64>,
) -> Result<(String, Option<Value>), String> {
    let all_lines: Vec<&str> = text.split('\n').collect();
    let total = all_lines.len();
    let start = match offset {
        Some(o) if o != 0.0 && !o.is_nan() => (o - 1.0).max(0.0).floor() as usize,
        _ => 0,
    };
    if start >= total {
        return Err(format!(
            "Offset {} is beyond end of file ({total} lines total)",
            js_number(offset.unwrap_or(0.0))
        ));
    }
    let (selected, user_limited) = match limit {
        Some(l) => {
            let l = if l.is_nan() { 0.0 } else { l.max(0.0).floor() };
            let end = (start as f64 + l).min(total as f64) as usize;
            let end = end.max(start);
            (all_lines[start..end].join("\n"), Some(end - start))
        }
        None => (all_lines[start..].join("\n"), None),
    };
    let t = truncate_head(&selected, TruncationLimits::default());
    let start_display = start + 1;
    if t.first_line_exceeds_limit {
        let size = format_size(all_lines[start].len());
        let out = format!(
            "[Line {start_display} is {size}, exceeds {} limit. Use bash: sed -n '{start_display}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(DEFAULT_MAX_BYTES)
        );
        return Ok((out, Some(json!({"truncation": t.to_json()}))));
    }
    if t.truncated {
        let end_display = start_display + t.output_lines - 1;
        let next = end_display + 1;
        let mut out = t.content.clone();
        if t.truncated_by == Some(TruncatedBy::Lines) {
            out.push_str(&format!(
                "\n\n[Showing lines {start_display}-{end_display} of {total}. Use offset={next} to continue.]"
            ));
        } else {
            out.push_str(&format!(
                "\n\n[Showing lines {start_display}-{end_display} of {total} ({} limit). Use offset={next} to continue.]",
                format_size(DEFAULT_MAX_BYTES)
            ));
        }
        return Ok((out, Some(json!({"truncation": t.to_json()}))));
    }
    if let Some(n) = user_limited {
        if start + n < total {
            let remaining = total - (start + n);
            let next = start + n + 1;
            return Ok((
                format!(
                    "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
                    t.content
                ),
                None,
            ));
        }
    }
    Ok((t.content, None))
}

#[async_trait]
impl AgentTool for ReadTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition("read", description(), parameters())
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        check_aborted(&ctx.cancel)?;
        let path_arg = require_str(&args, "path")?.to_string();
        let offset = arg_f64(&args, "offset");
        let limit = arg_f64(&args, "limit");
        let cwd = self.cwd.clone();
        run_blocking_cancellable(
            "read",
            &ctx.cancel,
            move || -> Result<ToolOutput, String> {
                let path = resolve_read_path(&path_arg, &cwd);
                access(&path, libc::R_OK).map_err(|e| node_error(&e, "access", Some(&path)))?;
                let bytes = std::fs::read(&path).map_err(|e| node_error(&e, "read", None))?;
                if let Some(mime) = detect_image_mime(&bytes) {
                    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                    return Ok(ToolOutput {
                        content: vec![
                            Content::text(format!("Read image file [{mime}]")),
                            Content::Image(ImageContent {
                                data,
                                mime_type: mime.to_string(),
                                extra: Default::default(),
                            }),
                        ],
                        ..Default::default()
                    });
                }
                let text = String::from_utf8_lossy(&bytes);
                let (out, details) = format_text_read(&text, &path_arg, offset, limit)?;
                Ok(ToolOutput {
                    content: vec![Content::text(out.clone())],
                    details,
                    structured_content: Some(Value::String(out)),
                    is_error: None,
                })
            },
        )
        .await
    }
}
