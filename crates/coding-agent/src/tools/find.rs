//! The `find` tool (spec tools.md §6, newer fd semantics), implemented in-process with the
//! `ignore` and `globset` crates: hidden files included, `.gitignore`/`.ignore`/`.fdignore`
//! honoured inside and outside git repositories, `.git` directories skipped, smart case.

use super::grep::{limit_count, FirstInWalkOrder};
use super::schema;
use super::truncate::DEFAULT_MAX_BYTES;
use super::util::{
    arg_f64, arg_str, check_aborted, listing_output, require_str, resolve_to_cwd,
    run_blocking_cancellable, tool_definition, ListingNotice,
};
use async_trait::async_trait;
use globset::GlobBuilder;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde_json::Value;
use std::path::PathBuf;
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

/// Entries the sorted sequential walk visits before a listing goes parallel.
const SEQUENTIAL_ENTRIES: usize = 2048;

/// The first `limit` matching entries in sorted walk order (path, is a directory), by a
/// parallel walk.
fn find_parallel(
    walk: &ignore::WalkBuilder,
    matches: &(dyn Fn(&std::path::Path) -> bool + Sync),
    limit: usize,
    cancel: &CancellationToken,
) -> Vec<(PathBuf, bool)> {
    let gathered = FirstInWalkOrder::<bool>::new(limit);
    walk.build_parallel().run(|| {
        let gathered = &gathered;
        Box::new(move |entry| {
            use ignore::WalkState;
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if entry.depth() == 0 {
                return WalkState::Continue;
            }
            if gathered.beyond(entry.path()) {
                return WalkState::Skip;
            }
            if matches(entry.path()) {
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                gathered.add([(entry.into_path(), is_dir)]);
            }
            WalkState::Continue
        })
    });
    gathered.finish()
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

    let matches = |path: &std::path::Path| -> bool {
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
        .add_custom_ignore_filename(".fdignore")
        .filter_entry(|e| e.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b));
    let limit = limit_count(limit_arg);
    // A listing whose limit is reached early is done fastest by the sorted walk, which stops
    // right there; one that goes on past `SEQUENTIAL_ENTRIES` entries starts over in parallel.
    let mut found: Vec<(PathBuf, bool)> = Vec::new();
    let mut visited = 0usize;
    let mut complete = true;
    for entry in walk.build() {
        check_aborted(cancel).map_err(|e| e.to_string())?;
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if visited >= SEQUENTIAL_ENTRIES {
            complete = false;
            break;
        }
        visited += 1;
        if matches(entry.path()) {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            found.push((entry.into_path(), is_dir));
            if found.len() >= limit {
                break;
            }
        }
    }
    if !complete {
        found = find_parallel(&walk, &matches, limit, cancel);
        check_aborted(cancel).map_err(|e| e.to_string())?;
    }
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
    let limit_reached = results.len() >= limit;
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
