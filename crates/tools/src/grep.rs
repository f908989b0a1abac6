//! The `grep` tool (spec tools.md §5), implemented in-process with the `ignore`, `grep-regex`
//! and `grep-searcher` crates instead of spawning ripgrep, with ripgrep's default filtering
//! (`.gitignore` inside git repositories, `.ignore`, `.rgignore`, hidden files included, binary
//! files skipped).

use super::schema;
use super::truncate::{truncate_line, DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH};
use super::util::{
    arg_bool, arg_f64, arg_str, check_aborted, listing_output, require_str, resolve_to_cwd,
    run_blocking_cancellable, special_file_kind, tool_definition, ListingNotice,
};
use super::walk::{first_in_walk_order, Found, Search};
use async_trait::async_trait;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Default number of matching lines returned.
pub const DEFAULT_GREP_LIMIT: f64 = 100.0;

/// The grep tool.
pub struct GrepTool {
    cwd: PathBuf,
}

impl GrepTool {
    /// A grep tool searching relative to `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        GrepTool { cwd }
    }
}

/// JSON-Schema of the grep tool's parameters.
pub fn parameters() -> Value {
    schema::object(
        &["pattern"],
        vec![
            (
                "pattern",
                schema::string("Regular expression (or plain text with literal) to look for."),
            ),
            (
                "path",
                schema::string("Directory or single file to search; defaults to the working directory."),
            ),
            (
                "glob",
                schema::string("Only search files matching this glob, such as '*.rs' or '**/*.test.ts'."),
            ),
            (
                "ignoreCase",
                schema::boolean("Match without regard to letter case (default false)."),
            ),
            (
                "literal",
                schema::boolean("Treat the pattern as plain text rather than a regular expression (default false)."),
            ),
            (
                "context",
                schema::number("Lines of surrounding context to print before and after every match (default 0)."),
            ),
            (
                "limit",
                schema::number("Stop after this many matching lines (default 100)."),
            ),
        ],
    )
}

fn description() -> String {
    format!(
        "Search the contents of files for a pattern and list the matching lines with their file \
         path and line number. Files excluded by .gitignore are skipped. At most {} matches or {}KB \
         of output are returned, whichever comes first, and lines longer than {GREP_MAX_LINE_LENGTH} \
         characters are shortened.",
        DEFAULT_GREP_LIMIT as u64,
        DEFAULT_MAX_BYTES / 1024
    )
}

struct GrepParams {
    pattern: String,
    search_path: PathBuf,
    glob: Option<String>,
    ignore_case: bool,
    literal: bool,
    context: usize,
    limit: f64,
    root: PathBuf,
}

/// A search of file contents: the matching lines of every file walked.
struct GrepSearch<'a> {
    matcher: &'a grep_regex::RegexMatcher,
}

/// A matching line: its number (1-based) and its bytes as text, line terminator included.
type Hit = (u64, String);

impl Search for GrepSearch<'_> {
    type Item = Hit;
    type State = Searcher;

    fn new_state(&self) -> Searcher {
        SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build()
    }

    fn cost(&self, entry: &ignore::DirEntry) -> usize {
        usize::from(entry.file_type().is_some_and(|t| t.is_file()))
    }

    fn visit(
        &self,
        searcher: &mut Searcher,
        entry: ignore::DirEntry,
        room: usize,
        out: &mut Vec<Found<Hit>>,
    ) {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return;
        }
        let mut sink = CollectSink {
            path: entry.path(),
            hits: out,
            left: room,
        };
        // Unreadable files are skipped, like ripgrep's per-file errors.
        let _ = searcher.search_path(self.matcher, entry.path(), &mut sink);
    }
}

/// Collects the matching lines of one file, at most `left` of them.
struct CollectSink<'a> {
    path: &'a Path,
    hits: &'a mut Vec<Found<Hit>>,
    left: usize,
}

impl Sink for CollectSink<'_> {
    type Error = std::io::Error;
    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.hits.push((
            self.path.to_path_buf(),
            (
                m.line_number().unwrap_or(0),
                String::from_utf8_lossy(m.bytes()).into_owned(),
            ),
        ));
        self.left = self.left.saturating_sub(1);
        Ok(self.left > 0)
    }
}

/// The number of matching lines a `limit` stands for: the sequential search stopped once
/// `count >= limit`, so a fractional limit rounds up.
pub(crate) fn limit_count(limit: f64) -> usize {
    if limit >= usize::MAX as f64 {
        usize::MAX
    } else {
        (limit.ceil() as usize).max(1)
    }
}

/// Files the sorted sequential walk searches before the parallel walk takes over
/// ([`super::walk`]).
const SEQUENTIAL_FILES: usize = 256;

fn run_grep(p: &GrepParams, cancel: &CancellationToken) -> Result<ToolOutput, String> {
    let meta = std::fs::metadata(&p.search_path)
        .map_err(|_| format!("Path not found: {}", p.search_path.display()))?;
    let is_dir = meta.is_dir();
    // A FIFO would block the search and a device never end (issue 28).
    if let Some(kind) = special_file_kind(&p.search_path) {
        return Err(format!(
            "Cannot search {}: it is {kind}, not a regular file",
            p.search_path.display()
        ));
    }
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(p.ignore_case)
        .fixed_strings(p.literal)
        .build(&p.pattern)
        .map_err(|e| e.to_string())?;
    let mut walk = ignore::WalkBuilder::new(&p.search_path);
    walk.hidden(false).add_custom_ignore_filename(".rgignore");
    if let Some(g) = &p.glob {
        let mut ob = ignore::overrides::OverrideBuilder::new(&p.root);
        ob.add(g).map_err(|e| e.to_string())?;
        walk.overrides(ob.build().map_err(|e| e.to_string())?);
    }

    let limit = limit_count(p.limit);
    // Only a match past the limit proves that the limit cut results off (upstream 1.6's
    // grep waits for one more match before its notice).
    let mut hits = first_in_walk_order(
        &mut walk,
        None,
        &GrepSearch { matcher: &matcher },
        limit.saturating_add(1),
        SEQUENTIAL_FILES,
        cancel,
    )
    .map_err(|e| e.to_string())?;
    if hits.is_empty() {
        return Ok(ToolOutput::text("No matches found"));
    }
    let limit_reached = hits.len() > limit;
    hits.truncate(limit);

    let format_path = |file: &Path| -> String {
        if is_dir {
            if let Ok(rel) = file.strip_prefix(&p.search_path) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                if !rel.is_empty() && !rel.starts_with("..") {
                    return rel;
                }
            }
        }
        file.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut cache: std::collections::HashMap<PathBuf, Vec<String>> = Default::default();
    let mut lines_truncated = false;
    let mut out_lines: Vec<String> = Vec::new();
    for (path, (line, text)) in &hits {
        let shown = format_path(path);
        if p.context == 0 {
            let text = text.replace("\r\n", "\n").replace('\r', "");
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let (t, cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
            lines_truncated |= cut;
            out_lines.push(format!("{shown}:{line}: {t}"));
            continue;
        }
        let lines = cache.entry(path.clone()).or_insert_with(|| {
            std::fs::read(path)
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .replace("\r\n", "\n")
                        .replace('\r', "\n")
                        .split('\n')
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        });
        if lines.is_empty() {
            out_lines.push(format!("{shown}:{line}: (unable to read file)"));
            continue;
        }
        let ln = *line as usize;
        let start = ln.saturating_sub(p.context).max(1);
        let end = ln.saturating_add(p.context).min(lines.len());
        for current in start..=end {
            let raw = lines.get(current - 1).map(String::as_str).unwrap_or("");
            let clean = raw.replace('\r', "");
            let (t, cut) = truncate_line(&clean, GREP_MAX_LINE_LENGTH);
            lines_truncated |= cut;
            if current == ln {
                out_lines.push(format!("{shown}:{current}: {t}"));
            } else {
                out_lines.push(format!("{shown}-{current}- {t}"));
            }
        }
    }
    let row_limit = limit_reached.then(|| {
        ListingNotice::row_limit(
            p.limit,
            "matches",
            ", or refine pattern",
            "matchLimitReached",
        )
    });
    let lines_notice = lines_truncated.then(|| ListingNotice {
        text: format!(
            "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        ),
        key: "linesTruncated",
        value: json!(true),
    });
    Ok(listing_output(&out_lines, row_limit, lines_notice))
}

#[async_trait]
impl AgentTool for GrepTool {
    fn definition(&self) -> ToolDefinition {
        tool_definition("grep", description(), parameters())
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        check_aborted(&ctx.cancel)?;
        let path_arg = arg_str(&args, "path")
            .filter(|s| !s.is_empty())
            .unwrap_or(".");
        let context = arg_f64(&args, "context").unwrap_or(0.0);
        let params = GrepParams {
            pattern: require_str(&args, "pattern")?.to_string(),
            search_path: resolve_to_cwd(path_arg, &self.cwd),
            glob: arg_str(&args, "glob")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            ignore_case: arg_bool(&args, "ignoreCase").unwrap_or(false),
            literal: arg_bool(&args, "literal").unwrap_or(false),
            context: if context > 0.0 { context as usize } else { 0 },
            limit: arg_f64(&args, "limit")
                .unwrap_or(DEFAULT_GREP_LIMIT)
                .max(1.0),
            root: self.cwd.clone(),
        };
        let cancel = ctx.cancel.clone();
        run_blocking_cancellable("grep", &ctx.cancel, move || run_grep(&params, &cancel)).await
    }
}
