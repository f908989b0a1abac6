//! The `read` tool (spec tools.md §1; result shape from the 1.6 recording `tool_read`).
//!
//! Text files are returned raw (no line numbers) as one text block, also mirrored in
//! `structuredContent` as the same string. Images (PNG, JPEG, GIF, WebP, BMP, detected by
//! content) are prepared for the current model ([`crate::images`]) and returned as the text
//! `Read image file [<mime>]` (plus the conversion/dimension notes, one per line) and the image
//! block; `structuredContent` is `{type:"image", data, mimeType, note}` and, for a model without
//! image input, `details` is `{imageUnsupportedByModel: <model id>}` (upstream 1.6 read tool).
//! An image that does not decode is an error result and is never sent.

use super::schema;
use super::truncate::{format_size, truncate_head, TruncatedBy, TruncationLimits};
use super::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use super::util::{
    access, arg_f64, check_aborted, js_number, node_error, require_str, resolve_read_path,
    run_blocking_cancellable, tool_definition,
};
use crate::images::{prepare_image, ImageError, ImagePolicySlot};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Content, ToolDefinition};
use serde_json::{json, Value};
use std::path::PathBuf;

pub use crate::images::detect_image_mime;

/// The read tool.
pub struct ReadTool {
    cwd: PathBuf,
    images: ImagePolicySlot,
}

impl ReadTool {
    /// A read tool resolving relative paths against `cwd`, preparing images with the default
    /// policy.
    pub fn new(cwd: PathBuf) -> Self {
        ReadTool::with_images(cwd, ImagePolicySlot::default())
    }

    /// A read tool preparing images with the policy the session binds into `images`.
    pub fn with_images(cwd: PathBuf, images: ImagePolicySlot) -> Self {
        ReadTool { cwd, images }
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
        let policy = self.images.policy();
        run_blocking_cancellable(
            "read",
            &ctx.cancel,
            move || -> Result<ToolOutput, String> {
                let path = resolve_read_path(&path_arg, &cwd);
                access(&path, libc::R_OK).map_err(|e| node_error(&e, "access", Some(&path)))?;
                let bytes = std::fs::read(&path).map_err(|e| node_error(&e, "read", None))?;
                if let Some(mime) = detect_image_mime(&bytes) {
                    let prepared = match prepare_image(&bytes, mime, None, &policy) {
                        Ok(p) => p,
                        Err(ImageError::TooLarge) => {
                            let note =
                                format!("Read image file [{mime}]\n[{}]", ImageError::TooLarge);
                            return Ok(ToolOutput {
                                content: vec![Content::text(note.clone())],
                                structured_content: Some(Value::String(note)),
                                ..Default::default()
                            });
                        }
                        Err(e) => {
                            return Err(format!(
                                "Could not read image file {}: {e}",
                                path.display()
                            ))
                        }
                    };
                    let mut note = format!("Read image file [{}]", prepared.image.mime_type);
                    for hint in &prepared.hints {
                        note.push('\n');
                        note.push_str(hint);
                    }
                    let structured = json!({
                        "type": "image",
                        "data": prepared.image.data,
                        "mimeType": prepared.image.mime_type,
                        "note": note,
                    });
                    return Ok(ToolOutput {
                        content: vec![Content::text(note), Content::Image(prepared.image)],
                        details: policy
                            .text_only_model
                            .as_ref()
                            .map(|id| json!({"imageUnsupportedByModel": id})),
                        structured_content: Some(structured),
                        is_error: None,
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
