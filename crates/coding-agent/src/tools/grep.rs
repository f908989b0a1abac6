//! The `grep` tool (spec tools.md §5), implemented in-process with the `ignore`, `grep-regex`
//! and `grep-searcher` crates instead of spawning ripgrep, with ripgrep's default filtering
//! (`.gitignore` inside git repositories, `.ignore`, `.rgignore`, hidden files included, binary
//! files skipped).

use super::schema;
use super::truncate::{truncate_line, DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH};
use super::util::{
    arg_bool, arg_f64, arg_str, check_aborted, listing_output, require_str, resolve_to_cwd,
    run_blocking_cancellable, tool_definition, ListingNotice,
};
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

struct Hit {
    path: PathBuf,
    line: u64,
    text: String,
}

struct CollectSink<'a> {
    path: &'a Path,
    hits: &'a mut Vec<Hit>,
    limit: usize,
}

impl Sink for CollectSink<'_> {
    type Error = std::io::Error;
    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.hits.push(Hit {
            path: self.path.to_path_buf(),
            line: m.line_number().unwrap_or(0),
            text: String::from_utf8_lossy(m.bytes()).into_owned(),
        });
        Ok(self.hits.len() < self.limit)
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

/// The first `limit` items in walk order, gathered by a parallel walk: every visitor adds what
/// it found; once `limit` items are known, entries whose path sorts after the `limit`-th
/// smallest one so far are skipped (with their whole subtree, as everything below a directory
/// sorts after it). The result is what a sequential walk sorted by file name would have
/// returned first: a sorted pre-order walk visits paths in [`Path`] order (component by
/// component, byte-wise).
pub(crate) struct FirstInWalkOrder<T> {
    state: std::sync::Mutex<Gathered<T>>,
    limit: usize,
}

struct Gathered<T> {
    items: Vec<(PathBuf, T)>,
    /// Set once `limit` items are known: the path of the `limit`-th smallest.
    bound: Option<PathBuf>,
}

impl<T: Ord> FirstInWalkOrder<T> {
    /// Gathers at most `limit` items (≥ 1).
    pub(crate) fn new(limit: usize) -> Self {
        FirstInWalkOrder {
            state: std::sync::Mutex::new(Gathered {
                items: Vec::new(),
                bound: None,
            }),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Gathered<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an entry at `path` can no longer contribute (it sorts after the bound).
    pub(crate) fn beyond(&self, path: &Path) -> bool {
        self.lock().bound.as_deref().is_some_and(|b| path > b)
    }

    /// Adds the items found at one entry.
    pub(crate) fn add(&self, found: impl IntoIterator<Item = (PathBuf, T)>) {
        let mut g = self.lock();
        g.items.extend(found);
        // The first time `limit` items are known, and then whenever they have doubled.
        let due = if g.bound.is_none() {
            self.limit
        } else {
            self.limit.saturating_mul(2)
        };
        if g.items.len() >= due {
            Self::settle(&mut g, self.limit);
        }
    }

    fn settle(g: &mut Gathered<T>, limit: usize) {
        g.items
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        g.items.truncate(limit);
        if g.items.len() >= limit {
            g.bound = g.items.last().map(|(p, _)| p.clone());
        }
    }

    /// The first `limit` items in walk order.
    pub(crate) fn finish(self) -> Vec<(PathBuf, T)> {
        let limit = self.limit;
        let mut g = self.state.into_inner().unwrap_or_else(|e| e.into_inner());
        Self::settle(&mut g, limit);
        g.items
    }
}

/// Files the sorted sequential walk searches before a search goes parallel.
const SEQUENTIAL_FILES: usize = 256;

/// The first `limit` matching lines in sorted walk order, by a parallel walk.
fn search_parallel(
    walk: &ignore::WalkBuilder,
    matcher: &grep_regex::RegexMatcher,
    new_searcher: &dyn Fn() -> Searcher,
    limit: usize,
    cancel: &CancellationToken,
) -> Vec<Hit> {
    let gathered = FirstInWalkOrder::<(u64, String)>::new(limit);
    walk.build_parallel().run(|| {
        let gathered = &gathered;
        let mut searcher = new_searcher();
        let mut hits: Vec<Hit> = Vec::new();
        Box::new(move |entry| {
            use ignore::WalkState;
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if gathered.beyond(entry.path()) {
                return WalkState::Skip;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let path = entry.path();
            let mut sink = CollectSink {
                path,
                hits: &mut hits,
                limit,
            };
            // Unreadable files are skipped, like ripgrep's per-file errors.
            let _ = searcher.search_path(matcher, path, &mut sink);
            if !hits.is_empty() {
                gathered.add(hits.drain(..).map(|h| (h.path, (h.line, h.text))));
            }
            WalkState::Continue
        })
    });
    gathered
        .finish()
        .into_iter()
        .map(|(path, (line, text))| Hit { path, line, text })
        .collect()
}

fn run_grep(p: &GrepParams, cancel: &CancellationToken) -> Result<ToolOutput, String> {
    let meta = std::fs::metadata(&p.search_path)
        .map_err(|_| format!("Path not found: {}", p.search_path.display()))?;
    let is_dir = meta.is_dir();
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(p.ignore_case)
        .fixed_strings(p.literal)
        .build(&p.pattern)
        .map_err(|e| e.to_string())?;
    let new_searcher = || {
        SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build()
    };

    let mut walk = ignore::WalkBuilder::new(&p.search_path);
    walk.hidden(false)
        .add_custom_ignore_filename(".rgignore")
        .sort_by_file_name(|a, b| a.cmp(b));
    if let Some(g) = &p.glob {
        let mut ob = ignore::overrides::OverrideBuilder::new(&p.root);
        ob.add(g).map_err(|e| e.to_string())?;
        walk.overrides(ob.build().map_err(|e| e.to_string())?);
    }

    let limit = limit_count(p.limit);
    // A search whose limit is reached early is done fastest by the sorted walk, which stops
    // right there; one that goes on past `SEQUENTIAL_FILES` files starts over in parallel.
    let mut searcher = new_searcher();
    let mut hits: Vec<Hit> = Vec::new();
    let mut searched = 0usize;
    let mut complete = true;
    for entry in walk.build() {
        check_aborted(cancel).map_err(|e| e.to_string())?;
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if searched >= SEQUENTIAL_FILES {
            complete = false;
            break;
        }
        searched += 1;
        let mut sink = CollectSink {
            path: entry.path(),
            hits: &mut hits,
            limit,
        };
        // Unreadable files are skipped, like ripgrep's per-file errors.
        let _ = searcher.search_path(&matcher, entry.path(), &mut sink);
        if hits.len() >= limit {
            break;
        }
    }
    if !complete {
        hits = search_parallel(&walk, &matcher, &new_searcher, limit, cancel);
        check_aborted(cancel).map_err(|e| e.to_string())?;
    }
    if hits.is_empty() {
        return Ok(ToolOutput::text("No matches found"));
    }
    let limit_reached = hits.len() >= limit;

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
    for hit in &hits {
        let shown = format_path(&hit.path);
        if p.context == 0 {
            let text = hit.text.replace("\r\n", "\n").replace('\r', "");
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let (t, cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
            lines_truncated |= cut;
            out_lines.push(format!("{shown}:{}: {t}", hit.line));
            continue;
        }
        let lines = cache.entry(hit.path.clone()).or_insert_with(|| {
            std::fs::read(&hit.path)
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
            out_lines.push(format!("{shown}:{}: (unable to read file)", hit.line));
            continue;
        }
        let ln = hit.line as usize;
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
