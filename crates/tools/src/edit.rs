//! The `edit` tool (spec tools.md §3, newer multi-edit form; result shape from the 1.6 recording
//! `tool_edit`: `Successfully replaced <n> block(s) in <path>.` with
//! `details: {diff, firstChangedLine, patch}`).

use super::edit_diff::{
    apply_edits_with_replacements, generate_diff_string, generate_unified_patch, lossy_offsets,
    lossy_to_byte_offset, normalize_to_lf, splice_into_original, splice_parts, strip_bom, Edit,
    SplicePart,
};
use super::schema;
use super::util::{
    access, check_aborted, error_code, file_lock, node_error, require_str, resolve_to_cwd,
    special_file_kind, tool_definition,
};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Content, ToolDefinition};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::path::PathBuf;

/// Context lines in the display diff and the patch.
const DIFF_CONTEXT: usize = 4;

/// The edit tool.
pub struct EditTool {
    cwd: PathBuf,
}

impl EditTool {
    /// An edit tool resolving relative paths against `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        EditTool { cwd }
    }
}

/// JSON-Schema of the edit tool's parameters.
pub fn parameters() -> Value {
    let item = schema::object(
        &["oldText", "newText"],
        vec![
            (
                "oldText",
                schema::string(
                    "Text to replace, copied exactly from the file. It must occur only once in the \
                     original file and must not overlap the oldText of another edit in this call.",
                ),
            ),
            ("newText", schema::string("The text that takes its place.")),
        ],
    );
    let mut edits = Map::new();
    edits.insert("type".into(), json!("array"));
    edits.insert("items".into(), item);
    edits.insert(
        "description".into(),
        json!(
            "The replacements to make. Each one is located in the file as it was before this call, \
             not after earlier replacements. Edits must not overlap or nest; combine changes to \
             the same or neighbouring lines into a single edit."
        ),
    );
    schema::object(
        &["path", "edits"],
        vec![
            (
                "path",
                schema::string("File to change, absolute or relative to the working directory."),
            ),
            ("edits", Value::Object(edits)),
        ],
    )
}

/// Rewrites legacy argument shapes before validation (upstream `prepareArguments`): `edits`
/// given as a JSON string is parsed, and top-level `oldText`/`newText` strings are moved into
/// `edits`.
pub fn prepare_edit_arguments(args: Value) -> Value {
    let Value::Object(mut map) = args else {
        return args;
    };
    if let Some(Value::String(s)) = map.get("edits") {
        if let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s) {
            map.insert("edits".into(), parsed);
        }
    }
    let legacy = matches!(
        (map.get("oldText"), map.get("newText")),
        (Some(Value::String(_)), Some(Value::String(_)))
    );
    if legacy {
        let old = map.remove("oldText").unwrap_or_default();
        let new = map.remove("newText").unwrap_or_default();
        let mut edits = match map.remove("edits") {
            Some(Value::Array(a)) => a,
            _ => Vec::new(),
        };
        edits.push(json!({"oldText": old, "newText": new}));
        map.insert("edits".into(), Value::Array(edits));
    }
    Value::Object(map)
}

fn parse_edits(args: &Value) -> Result<Vec<Edit>, String> {
    let invalid = || "Edit tool input is invalid. edits must contain at least one replacement.";
    let list = args
        .get("edits")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or_else(invalid)?;
    list.iter()
        .map(|e| {
            let old = e.get("oldText").and_then(Value::as_str);
            let new = e.get("newText").and_then(Value::as_str);
            match (old, new) {
                (Some(o), Some(n)) => Ok(Edit {
                    old_text: o.to_string(),
                    new_text: n.to_string(),
                }),
                _ => Err(invalid().to_string()),
            }
        })
        .collect()
}

#[async_trait]
impl AgentTool for EditTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition(
            "edit",
            "Change one file by exact text replacement. Every edits[].oldText has to \
             match a distinct, non-overlapping part of the file as it is now. Merge \
             changes that touch the same or adjacent lines into one edit, and keep \
             oldText short instead of spanning large unchanged regions.",
            parameters(),
        )
    }

    fn prepare_arguments(&self, args: Value) -> Value {
        prepare_edit_arguments(args)
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args = prepare_edit_arguments(args);
        let edits = parse_edits(&args)?;
        let path_arg = require_str(&args, "path")?.to_string();
        let abs = resolve_to_cwd(&path_arg, &self.cwd);
        let lock = file_lock(&abs);
        let _guard = lock.lock().await;
        check_aborted(&ctx.cancel)?;
        if let Err(e) = access(&abs, libc::R_OK | libc::W_OK) {
            check_aborted(&ctx.cancel)?;
            return Err(format!(
                "Could not edit file: {path_arg}. Error code: {}.",
                error_code(&e)
            )
            .into());
        }
        if let Some(kind) = special_file_kind(&abs) {
            return Err(format!(
                "Could not edit file: {path_arg}. It is {kind}, not a regular file."
            )
            .into());
        }
        let bytes = tokio::fs::read(&abs).await.map_err(|e| {
            format!(
                "Could not edit file: {path_arg}. Error code: {}.",
                error_code(&e)
            )
        })?;
        check_aborted(&ctx.cancel)?;
        let raw = String::from_utf8_lossy(&bytes);
        let (bom, content) = strip_bom(&raw);
        let base = normalize_to_lf(content);
        let (new_content, replacements) = apply_edits_with_replacements(&base, &edits, &path_arg)?;
        check_aborted(&ctx.cancel)?;
        // Spliced into the original text: untouched bytes, line endings included, stay as they
        // were. Without any CR the original is the normalised text and the result is final.
        // A file that is not valid UTF-8 was matched in its lossy decoding (the text `read`
        // showed); the kept ranges are copied from its bytes, so only the edited spans change
        // (issue 28).
        let final_bytes: Vec<u8> = if matches!(raw, Cow::Owned(_)) {
            let offsets = lossy_offsets(&bytes);
            let at = |o: usize| lossy_to_byte_offset(&offsets, bom.len() + o).min(bytes.len());
            let mut out = bytes[..at(0)].to_vec();
            for part in splice_parts(content, &replacements) {
                match part {
                    SplicePart::Keep(r) => out.extend_from_slice(&bytes[at(r.start)..at(r.end)]),
                    SplicePart::Insert(text) => out.extend_from_slice(text.as_bytes()),
                }
            }
            out
        } else if content.contains('\r') {
            format!("{bom}{}", splice_into_original(content, &replacements)).into_bytes()
        } else {
            format!("{bom}{new_content}").into_bytes()
        };
        tokio::fs::write(&abs, &final_bytes)
            .await
            .map_err(|e| node_error(&e, "open", Some(&abs)))?;
        check_aborted(&ctx.cancel)?;
        let (diff, first_changed) = generate_diff_string(&base, &new_content, DIFF_CONTEXT);
        let patch = generate_unified_patch(&path_arg, &base, &new_content, DIFF_CONTEXT);
        let mut details = Map::new();
        // Key order as upstream writes it (golden tool_edit).
        details.insert("diff".into(), json!(diff));
        details.insert("patch".into(), json!(patch));
        if let Some(line) = first_changed {
            details.insert("firstChangedLine".into(), json!(line));
        }
        Ok(ToolOutput {
            content: vec![Content::text(format!(
                "Successfully replaced {} block(s) in {path_arg}.",
                edits.len()
            ))],
            details: Some(Value::Object(details)),
            structured_content: None,
            is_error: None,
        })
    }
}
