//! The `find` tool (spec tools.md §6, newer fd semantics), implemented in-process with the
//! `ignore` and `globset` crates: hidden files included, `.gitignore`/`.ignore`/`.fdignore`
//! honoured inside and outside git repositories, `.git` directories skipped, smart case.

use super::grep::limit_count;
use super::schema;
use super::truncate::DEFAULT_MAX_BYTES;
use super::util::{
    arg_f64, arg_str, check_aborted, listing_output, require_str, resolve_to_cwd,
    run_blocking_cancellable, tool_definition, ListingNotice,
};
use super::walk::{first_in_walk_order, EntryFilter, Found, Search};
use async_trait::async_trait;
use globset::GlobBuilder;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Default number of results.
pub const DEFAULT_FIND_LIMIT: f64 = 1000.0;

/// The find tool.
pub struct FindTool {
    cwd: PathBuf,
}

impl FindTool {
    /// A find tool searching relative to `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        FindTool { cwd }
    }
}

/// JSON-Schema of the find tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &["pattern"],
        vec![
            (
                "pattern",
                schema::string(
                    "Glob for the paths to list, for example '*.rs', '**/*.json' or 'src/**/*_test.go'.",
                ),
            ),
            (
                "path",
                schema::string("Directory to search; defaults to the working directory."),
            ),
            (
                "limit",
                schema::number("Largest number of paths to return (default 1000)."),
            ),
        ],
    )
}

fn description() -> String {
    format!(
        "Find files by glob pattern and list their paths relative to the search directory. Files \
         excluded by .gitignore are skipped. The list stops after {} entries or {}KB, whichever \
         comes first.",
        DEFAULT_FIND_LIMIT as u64,
        DEFAULT_MAX_BYTES / 1024
    )
}

/// Entries the sorted sequential walk visits before the parallel walk takes over
/// ([`super::walk`]).
const SEQUENTIAL_ENTRIES: usize = 2048;

/// A listing of the entries whose path matches a glob; the item says whether the entry is a
/// directory.
struct FindSearch<F> {
    matches: F,
}

impl<F: Fn(&Path) -> bool + Sync> Search for FindSearch<F> {
    type Item = bool;
    type State = ();

    fn new_state(&self) {}

    fn cost(&self, entry: &ignore::DirEntry) -> usize {
        usize::from(entry.depth() > 0)
    }

    fn visit(&self, _: &mut (), entry: ignore::DirEntry, _room: usize, out: &mut Vec<Found<bool>>) {
        if entry.depth() > 0 && (self.matches)(entry.path()) {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            out.push((entry.into_path(), is_dir));
        }
    }
}

fn run_find(
    pattern: &str,
    search: &std::path::Path,
    limit_arg: f64,
    cancel: &CancellationToken,
) -> Result<ToolOutput, String> {
    if !search.exists() {
        return Err(format!("Path not found: {}", search.display()));
    }
    // 1.6 (upstream-1.6-notes.md item 22): a pattern with a slash is matched against the path
    // relative to the search directory (`src/*.ts` matches `src/b.ts`, not `pkg/src/a.ts`);
    // a leading `./` is dropped. An absolute pattern is matched against the full path.
    let full_path = pattern.contains('/');
    let absolute = pattern.starts_with('/');
    let effective = pattern.strip_prefix("./").unwrap_or(pattern).to_string();
    let case_insensitive = !pattern.chars().any(char::is_uppercase);
    let glob = GlobBuilder::new(&effective)
        .literal_separator(full_path)
        .case_insensitive(case_insensitive)
        .build()
        .map_err(|e| e.to_string())?
        .compile_matcher();

    let matches = |path: &Path| -> bool {
        if absolute {
            glob.is_match(path)
        } else if full_path {
            path.strip_prefix(search)
                .is_ok_and(|rel| glob.is_match(rel))
        } else {
            path.file_name().is_some_and(|n| glob.is_match(n))
        }
    };
    let mut walk = ignore::WalkBuilder::new(search);
    walk.hidden(false)
        .require_git(false)
        .add_custom_ignore_filename(".fdignore");
    let not_git: EntryFilter = Arc::new(|e: &ignore::DirEntry| e.file_name() != ".git");
    let limit = limit_count(limit_arg);
    // One result past the limit tells "exactly `limit` matches" (no notice) from "more"
    // (upstream 1.6 asks fd for `limit + 1`, pi #7121).
    let mut found = first_in_walk_order(
        &mut walk,
        Some(not_git),
        &FindSearch { matches },
        limit.saturating_add(1),
        SEQUENTIAL_ENTRIES,
        cancel,
    )
    .map_err(|e| e.to_string())?;
    let limit_reached = found.len() > limit;
    found.truncate(limit);
    let results: Vec<String> = found
        .into_iter()
        .map(|(path, is_dir)| {
            let rel = path
                .strip_prefix(search)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            if is_dir {
                format!("{rel}/")
            } else {
                rel
            }
        })
        .collect();
    if results.is_empty() {
        return Ok(ToolOutput::text("No files found matching pattern"));
    }
    let row_limit = limit_reached.then(|| {
        ListingNotice::row_limit(
            limit_arg,
            "results",
            ", or refine pattern",
            "resultLimitReached",
        )
    });
    Ok(listing_output(&results, row_limit, None))
}

#[async_trait]
impl AgentTool for FindTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition("find", description(), parameters())
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        check_aborted(&ctx.cancel)?;
        let pattern = require_str(&args, "pattern")?.to_string();
        let path_arg = arg_str(&args, "path")
            .filter(|s| !s.is_empty())
            .unwrap_or(".");
        let search = resolve_to_cwd(path_arg, &self.cwd);
        let limit = arg_f64(&args, "limit")
            .unwrap_or(DEFAULT_FIND_LIMIT)
            .max(1.0);
        let cancel = ctx.cancel.clone();
        run_blocking_cancellable("find", &ctx.cancel, move || {
            run_find(&pattern, &search, limit, &cancel)
        })
        .await
    }
}
