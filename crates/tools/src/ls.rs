//! The `ls` tool (spec tools.md §7): every entry including dotfiles, sorted case-insensitively,
//! directories (symlinks followed) suffixed with `/`, no ignore-file filtering.

use super::schema;
use super::truncate::DEFAULT_MAX_BYTES;
use super::util::{
    arg_f64, arg_str, check_aborted, listing_output, node_error, resolve_to_cwd,
    run_blocking_cancellable, tool_definition, ListingNotice,
};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde_json::Value;
use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// Default number of entries.
pub const DEFAULT_LS_LIMIT: f64 = 500.0;

/// The ls tool.
pub struct LsTool {
    cwd: PathBuf,
}

impl LsTool {
    /// An ls tool resolving relative paths against `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        LsTool { cwd }
    }
}

/// JSON-Schema of the ls tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &[],
        vec![
            (
                "path",
                schema::string("Directory to list; defaults to the working directory."),
            ),
            (
                "limit",
                schema::number("Largest number of entries to return (default 500)."),
            ),
        ],
    )
}

fn char_class(c: char) -> u8 {
    if c.is_whitespace() {
        0
    } else if c.is_ascii_punctuation()
        && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~')
    {
        1
    } else if c.is_ascii_punctuation() {
        2
    } else if c.is_numeric() {
        3
    } else {
        4
    }
}

/// Approximates `a.toLowerCase().localeCompare(b.toLowerCase())`: whitespace, punctuation,
/// symbols, digits, then letters; ties broken by code point.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    let la = a.to_lowercase();
    let lb = b.to_lowercase();
    let key = |s: &str| -> Vec<(u8, char)> { s.chars().map(|c| (char_class(c), c)).collect() };
    key(&la).cmp(&key(&lb)).then_with(|| a.cmp(b))
}

fn run_ls(dir: &Path, limit: f64) -> Result<ToolOutput, String> {
    if !dir.exists() {
        return Err(format!("Path not found: {}", dir.display()));
    }
    let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err(format!("Not a directory: {}", dir.display()));
    }
    let reader = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "Cannot read directory: {}",
            node_error(&e, "scandir", Some(dir))
        )
    })?;
    let mut names: Vec<String> = reader
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by(|a, b| locale_compare(a, b));
    let mut results = Vec::new();
    let mut limit_reached = false;
    for name in names {
        if (results.len() as f64) >= limit {
            limit_reached = true;
            break;
        }
        let Ok(m) = std::fs::metadata(dir.join(&name)) else {
            continue;
        };
        results.push(if m.is_dir() { format!("{name}/") } else { name });
    }
    if results.is_empty() {
        return Ok(ToolOutput::text("(empty directory)"));
    }
    let row_limit =
        limit_reached.then(|| ListingNotice::row_limit(limit, "entries", "", "entryLimitReached"));
    Ok(listing_output(&results, row_limit, None))
}

#[async_trait]
impl AgentTool for LsTool {
    fn definition(&self) -> ToolDefinition {
        let description = format!(
            "List the entries of a directory in alphabetical order, including hidden ones; \
             directories end with '/'. At most {} entries or {}KB are returned, whichever \
             comes first.",
            DEFAULT_LS_LIMIT as u64,
            DEFAULT_MAX_BYTES / 1024
        );
        tool_definition("ls", description, parameters())
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        check_aborted(&ctx.cancel)?;
        let path_arg = arg_str(&args, "path")
            .filter(|s| !s.is_empty())
            .unwrap_or(".");
        let dir = resolve_to_cwd(path_arg, &self.cwd);
        let limit = arg_f64(&args, "limit").unwrap_or(DEFAULT_LS_LIMIT);
        run_blocking_cancellable("ls", &ctx.cancel, move || run_ls(&dir, limit)).await
    }
}
