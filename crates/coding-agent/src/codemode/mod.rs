//! The `codemode` tool (upstream 1.6 `docs/codemode.md`; `docs/mcp.md` "Control tool
//! exposure"): the model writes a JavaScript script that calls the session's other tools and
//! the MCP tools of every non-hidden server; only the script's output reaches the model.
//!
//! * Input `{code: string}`: raw JavaScript, the body of an async function ([`sandbox`]). An
//!   optional first line `// @options: {"max_output_tokens": N, "timeout_ms": N}` sets the
//!   output limit (default 10000 estimated tokens, 4 characters each; longer output keeps its
//!   start and end and the whole text goes to a temp file named in the result) and a hard
//!   deadline (none by default). An options line anywhere else fails the call before the
//!   script runs.
//! * Result: `Script completed|failed\nWall time <s with 1 decimal> seconds\nOutput:\n`, then
//!   the output items in order (several texts each start with `==> text N/M <==`), images with
//!   the temp file they were saved to, a `<console_output>` block, and on failure
//!   `Script error:\n<error>` and which tool calls were made. `details.calls` lists every call:
//!   `{id: "<codemode call id>/<n>", name, args (JSON text), status: "ok"|"error", durationMs,
//!   error?}`. A failed script is an error result.
//! * Active when a server has `codemode` tools, or when `defaultTools`/`--tools` names
//!   `codemode` (then only the session's own tools are callable). `codemode.mode`: `on`
//!   (default: declared tools stay declared and their descriptions say what a script call
//!   resolves to) or `only` (the session's own tools are hidden from the model and listed in
//!   this tool's description, within `codemode.inlineBudget` estimated tokens, default 3000).
//! * `store()`/`load()`: each successful script that stored values appends a `custom` entry
//!   `{customType: "codemode-store", data: {set: {key: value}, delete: [keys]}}` to the
//!   session ([`StoreSlot`]); a script starts from the entries on the current branch, so
//!   resumed sessions keep the values and each branch sees only its own.

pub mod catalog;
pub mod sandbox;
pub mod search;

use crate::mcp::config::Exposure;
use crate::mcp::McpManager;
use async_trait::async_trait;
use catalog::{js_identifier, namespace_matches, Entry, Returns};
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Content, ImageContent, ToolDefinition};
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The tool's name.
pub const NAME: &str = crate::tools::CODEMODE_TOOL;
/// Default `max_output_tokens`.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;
/// Default `codemode.inlineBudget`, in estimated tokens.
pub const DEFAULT_INLINE_BUDGET: u64 = 3000;
/// How long a script waits for a free worker (upstream: 60 s).
pub const WORKER_WAIT: Duration = Duration::from_secs(60);
/// How long a script waits for the MCP servers it needs (as the first prompt does for direct
/// servers).
pub const SERVER_WAIT: Duration = Duration::from_secs(10);

/// `codemode.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Declared tools stay declared (default).
    #[default]
    On,
    /// The session's own tools are only reachable from scripts.
    Only,
}

/// The `codemode.*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodemodeSettings {
    /// `codemode.mode`: `"on"` (default) or `"only"`.
    pub mode: Mode,
    /// `codemode.inlineBudget`: estimated tokens of declarations listed in the description.
    pub inline_budget: u64,
}

impl Default for CodemodeSettings {
    fn default() -> Self {
        CodemodeSettings {
            mode: Mode::On,
            inline_budget: DEFAULT_INLINE_BUDGET,
        }
    }
}

impl CodemodeSettings {
    /// From merged settings (`codemode.mode`, `codemode.inlineBudget`); other values fall back
    /// to the defaults.
    pub fn from_settings(s: &crate::config::settings::Settings) -> Self {
        let mode = match s.get_path(&["codemode", "mode"]).and_then(Value::as_str) {
            Some("only") => Mode::Only,
            _ => Mode::On,
        };
        let inline_budget = s
            .get_path(&["codemode", "inlineBudget"])
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_INLINE_BUDGET);
        CodemodeSettings {
            mode,
            inline_budget,
        }
    }
}

/// The one-line summary for the system prompt's tool list.
pub const SNIPPET: &str = "Run a JavaScript script that calls the other tools";
/// The rule it adds to the system prompt.
pub const GUIDELINE: &str = "Prefer one codemode script over many separate calls when calls are independent (Promise.allSettled), depend on each other, or return large output to filter";

const BASE_DESCRIPTION: &str = "Run a JavaScript script that calls other tools; only what the script outputs comes back. Send raw JavaScript (no JSON, no code fence): it runs as the body of an async function in a QuickJS sandbox, so top-level `await` and `return` work. There is no Node, file system, network or timer; the outside world is reached through tools only.
- `await tools.<name>({ ...args })` resolves to a string, or to an object when the tool's declaration says so, and rejects with an Error when the call fails. A tool declared to return an object (MCP tools: their CallToolResult) also resolves when it reports a failure in that object; look at its fields. Calls still running when the script ends are cancelled.
- An optional first line sets limits: `// @options: {\"max_output_tokens\": 10000, \"timeout_ms\": 60000}`

Globals:
- Output: `text(value)`, `image(dataUrlOrImageBlock)`, `console.log(...)` and a top-level `return`; `exit()` ends the script. Several text items each get a `==> text N/M <==` header line, and console lines come after the rest in one `<console_output>` block. `image()` also saves the image to a temp file whose path the result gives.
- `store(key, value)` / `load(key)`: JSON values kept from one codemode call to the next.
- Finding tools that are not listed, such as MCP tools: `ALL_TOOLS`, `await searchTools(query, { limit?, namespace? })`, `await describeTool(name)`, `await describeNamespace(name)`.";

/// The `customType` of the session entries holding stored values.
pub const STORE_ENTRY: &str = "codemode-store";

/// Where `store()` values are kept: the session bound to the loadout.
pub trait StoreBackend: Send + Sync {
    /// The `data` of every `codemode-store` entry on the current branch, oldest first.
    fn entries(&self) -> Vec<Value>;
    /// Appends one `codemode-store` entry with `data`.
    fn append(&self, data: Value) -> Result<(), String>;
}

/// The session a loadout's `codemode` tool keeps its values in, bound when a session takes
/// the loadout (unbound: values live in memory only).
#[derive(Clone, Default)]
pub struct StoreSlot(pub Arc<OnceLock<Arc<dyn StoreBackend>>>);

impl StoreSlot {
    /// Binds the slot (a second bind is ignored).
    pub fn bind(&self, backend: Arc<dyn StoreBackend>) {
        let _ = self.0.set(backend);
    }
}

/// The values that `entries` (`codemode-store` data, oldest first) leave.
pub fn replay_store(entries: &[Value]) -> Map<String, Value> {
    let mut m = Map::new();
    for e in entries {
        if let Some(set) = e.get("set").and_then(Value::as_object) {
            for (k, v) in set {
                m.insert(k.clone(), v.clone());
            }
        }
        for k in e
            .get("delete")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(k) = k.as_str() {
                m.remove(k);
            }
        }
    }
    m
}

/// The `codemode` tool of one session.
pub struct CodemodeTool {
    own: Vec<Arc<dyn AgentTool>>,
    mcp: Option<Arc<McpManager>>,
    /// The session's `tool_call`/`tool_result` hooks (extensions), run around every call a
    /// script makes, as around the model's own calls (upstream nested-tool-calls: each nested
    /// call goes through the tool pipeline with its hooks). A gate is never bypassed.
    hooks: Option<Arc<dyn pi_agent::ToolCallHooks>>,
    memory: Arc<parking_lot::Mutex<Map<String, Value>>>,
    slot: StoreSlot,
    description: String,
}

impl CodemodeTool {
    /// `own`: the session's own tools (built-in and extension tools) callable from scripts;
    /// `mcp`: the servers whose non-hidden tools are callable too. In mode `only` the own
    /// tools' declarations are listed in the description, within the inline budget.
    pub fn new(
        own: Vec<Arc<dyn AgentTool>>,
        mcp: Option<Arc<McpManager>>,
        settings: CodemodeSettings,
        slot: StoreSlot,
    ) -> Self {
        let mut description = BASE_DESCRIPTION.to_string();
        if settings.mode == Mode::Only && !own.is_empty() {
            let budget = (settings.inline_budget as usize).saturating_mul(4);
            let mut used = 0usize;
            let mut listed = Vec::new();
            let mut left = 0usize;
            for t in &own {
                let e = own_entry(t);
                let decl = format!("/** {} */\n{}", e.description.trim(), e.declaration());
                if used + decl.len() > budget {
                    left += 1;
                    continue;
                }
                used += decl.len();
                listed.push(decl);
            }
            if !listed.is_empty() {
                description.push_str("\n\nTools to call from scripts:\n```ts\n");
                description.push_str(&listed.join("\n"));
                description.push_str("\n```");
            }
            if left > 0 {
                description.push_str(&format!(
                    "\n{left} more tool(s) are not listed here: find them with searchTools() or ALL_TOOLS."
                ));
            }
        }
        CodemodeTool {
            own,
            mcp,
            hooks: None,
            memory: Default::default(),
            slot,
            description,
        }
    }

    /// Runs `hooks` (the extensions' `tool_call`/`tool_result` handlers) around every tool call
    /// a script makes: a blocked call rejects in the script with the reason.
    pub fn with_hooks(mut self, hooks: Option<Arc<dyn pi_agent::ToolCallHooks>>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The stored values a script starts from.
    fn load_store(&self) -> Map<String, Value> {
        match self.slot.0.get() {
            Some(b) => replay_store(&b.entries()),
            None => self.memory.lock().clone(),
        }
    }

    /// Keeps a successful script's writes.
    fn save_store(&self, writes: &[(String, Option<Value>)]) -> Result<(), String> {
        if writes.is_empty() {
            return Ok(());
        }
        let mut set = Map::new();
        let mut delete: Vec<String> = Vec::new();
        for (k, v) in writes {
            match v {
                Some(v) => {
                    delete.retain(|d| d != k);
                    set.insert(k.clone(), v.clone());
                }
                None => {
                    set.remove(k);
                    if !delete.contains(k) {
                        delete.push(k.clone());
                    }
                }
            }
        }
        match self.slot.0.get() {
            Some(b) => b.append(json!({"set": set, "delete": delete})),
            None => {
                let mut m = self.memory.lock();
                for (k, v) in set {
                    m.insert(k, v);
                }
                for k in delete {
                    m.remove(&k);
                }
                Ok(())
            }
        }
    }

    /// Every tool a script can call now: the own tools, then each connected server's
    /// non-hidden tools (a name already taken is skipped).
    fn entries(&self) -> Vec<Entry> {
        let mut out: Vec<Entry> = self.own.iter().map(own_entry).collect();
        if let Some(m) = &self.mcp {
            out.extend(mcp_entries(
                m,
                &[Exposure::Direct, Exposure::Codemode, Exposure::Deferred],
            ));
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|e| seen.insert(e.name.clone()));
        out
    }

    /// Waits for the servers `code` names (`mcp__<server>`), or for all of them when it
    /// searches or lists tools.
    async fn wait_for_servers(&self, code: &str) {
        let Some(m) = &self.mcp else { return };
        let all = [
            "searchTools",
            "ALL_TOOLS",
            "describeTool",
            "describeNamespace",
        ]
        .iter()
        .any(|w| code.contains(w));
        if all {
            m.wait_for_all(SERVER_WAIT).await;
            return;
        }
        let waits = m.servers().iter().filter(|s| {
            let a = format!("mcp__{}", s.cfg.name);
            let b = format!("mcp__{}", js_identifier(&s.cfg.name));
            s.cfg.enabled && (code.contains(&a) || code.contains(&b))
        });
        futures::future::join_all(waits.map(|s| s.wait_settled(SERVER_WAIT))).await;
    }
}

/// An entry for one of the session's own tools.
fn own_entry(t: &Arc<dyn AgentTool>) -> Entry {
    let d = t.definition();
    Entry {
        returns: if d.name.starts_with("mcp__") {
            Returns::McpResult
        } else {
            Returns::of(&d.name)
        },
        name: d.name,
        description: d.description,
        parameters: d.parameters,
        namespace: None,
        namespace_description: None,
        tool: t.clone(),
    }
}

/// Entries for the MCP tools of connected servers with one of `exposures`.
pub fn mcp_entries(m: &Arc<McpManager>, exposures: &[Exposure]) -> Vec<Entry> {
    let mut out = Vec::new();
    for slot in m.servers() {
        let ns = crate::mcp::config::namespace(&slot.cfg.name);
        let ns_desc = slot.cfg.description.clone().or_else(|| {
            slot.instructions()
                .and_then(|i| i.lines().next().map(str::to_string))
        });
        for (name, exposure, tool) in slot.reachable_tools(&m.filter) {
            if !exposures.contains(&exposure) {
                continue;
            }
            let d = tool.definition();
            out.push(Entry {
                name,
                description: d.description,
                parameters: d.parameters,
                namespace: Some(ns.clone()),
                namespace_description: ns_desc.clone(),
                returns: Returns::McpResult,
                tool: Arc::new(tool),
            });
        }
    }
    out
}

/// The text appended to a declared tool's description in mode `on`: what a script call
/// resolves to.
pub fn declared_note(name: &str) -> String {
    format!(
        "\n\nIn codemode scripts, `tools.{}(args)` resolves to {}.",
        js_identifier(name),
        Returns::of(name).short()
    )
}

/// A declared tool whose description carries [`declared_note`] (mode `on`).
pub struct NotedTool(pub Arc<dyn AgentTool>);

#[async_trait]
impl AgentTool for NotedTool {
    fn definition(&self) -> ToolDefinition {
        let mut d = self.0.definition();
        d.description.push_str(&declared_note(&d.name));
        d
    }
    fn prepare_arguments(&self, args: Value) -> Value {
        self.0.prepare_arguments(args)
    }
    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        self.0.execute(ctx, args).await
    }
}

/// The parsed options line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptOptions {
    /// `max_output_tokens` (default [`DEFAULT_MAX_OUTPUT_TOKENS`]).
    pub max_output_tokens: u64,
    /// `timeout_ms` (default none).
    pub timeout_ms: Option<u64>,
}

const OPTIONS_PREFIX: &str = "// @options:";

/// Splits the options line off `code`. Errors (the call fails before the script runs): an
/// options line that is not the first line, JSON that is not an object, an unknown key, or a
/// value that is not a positive integer.
pub fn parse_options(code: &str) -> Result<(ScriptOptions, String), String> {
    let mut opts = ScriptOptions {
        max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
        timeout_ms: None,
    };
    let mut lines = code.split('\n');
    let first = lines.next().unwrap_or("");
    let (body, had_first) = match first.trim_start().strip_prefix(OPTIONS_PREFIX) {
        Some(json_text) => {
            let v: Value = serde_json::from_str(json_text.trim())
                .map_err(|e| format!("The // @options: line is not valid JSON: {e}"))?;
            let obj = v
                .as_object()
                .ok_or("The // @options: line must hold a JSON object")?;
            for (k, v) in obj {
                let n = v
                    .as_u64()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("// @options: {k} must be a positive integer"))?;
                match k.as_str() {
                    "max_output_tokens" => opts.max_output_tokens = n,
                    "timeout_ms" => opts.timeout_ms = Some(n),
                    other => {
                        return Err(format!(
                            "// @options: unknown option {other} (known: max_output_tokens, timeout_ms)"
                        ))
                    }
                }
            }
            (lines.collect::<Vec<_>>().join("\n"), true)
        }
        None => (code.to_string(), false),
    };
    let offset = if had_first { 2 } else { 1 };
    for (i, line) in body.split('\n').enumerate() {
        if i + offset > 1 && line.trim_start().starts_with(OPTIONS_PREFIX) {
            return Err(format!(
                "An // @options: line may only be the first line of the script; line {} has one",
                i + offset
            ));
        }
    }
    Ok((opts, body))
}

fn workers() -> &'static Arc<tokio::sync::Semaphore> {
    static W: OnceLock<Arc<tokio::sync::Semaphore>> = OnceLock::new();
    W.get_or_init(|| {
        let n = std::env::var("PI_CODEMODE_MAX_WORKERS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(2);
        Arc::new(tokio::sync::Semaphore::new(n))
    })
}

/// The session side of a running script.
struct ScriptHost {
    handle: tokio::runtime::Handle,
    entries: Vec<Entry>,
    /// The codemode call's nested calls: ids `<codemode call id>/<n>`, their events and record.
    nested: pi_agent::NestedCalls,
    /// The codemode call's own partial-result sink (its `details.calls` progress).
    on_update: pi_agent::UpdateFn,
    cancel: tokio_util::sync::CancellationToken,
    deadline: Option<Instant>,
    calls: parking_lot::Mutex<Vec<Value>>,
    mcp: Option<Arc<McpManager>>,
    hooks: Option<Arc<dyn pi_agent::ToolCallHooks>>,
}

/// What a call's output resolves to in a script; `Err` = it rejects with that text.
fn script_value(returns: Returns, out: &ToolOutput) -> Result<Value, String> {
    let text = out
        .content
        .iter()
        .filter_map(Content::as_text)
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(s) = &out.structured_content {
        if returns != Returns::Text {
            return Ok(s.clone());
        }
    }
    if out.is_error == Some(true) {
        return Err(text);
    }
    Ok(Value::String(text))
}

/// How one call of a script ended, before it is reported.
enum CallOutcome {
    /// Refused before it ran (invalid arguments, or a `tool_call` handler blocked it).
    Refused(String),
    /// Stopped by abort or the script's deadline.
    Aborted,
    /// The tool ran; its (possibly hook-changed) output.
    Ran(ToolOutput),
}

impl sandbox::Host for ScriptHost {
    fn call_tool(&self, name: &str, args: Value) -> Result<Value, String> {
        let Some(entry) = self.entries.iter().find(|e| e.name == name) else {
            return Err(format!("Tool {name} not found"));
        };
        // The script's progress (`details.calls`) shows the call running before it starts, as
        // upstream's codemode does, with its id still unknown (`<parent>/?`).
        let slot = self.begin_record(name, &args);
        let started = Instant::now();
        let call = self.handle.block_on(self.nested.start(name, &args));
        let id = call.id.clone();
        let (result, output, is_error, ran) = match self.run_call(entry, &call, args) {
            CallOutcome::Refused(text) => (Err(text.clone()), ToolOutput::error(text), true, false),
            CallOutcome::Aborted => {
                let text = "Operation aborted".to_string();
                (Err(text.clone()), ToolOutput::error(text), true, true)
            }
            CallOutcome::Ran(o) => {
                let is_error = o.is_error == Some(true);
                (script_value(entry.returns, &o), o, is_error, true)
            }
        };
        let error_text = is_error.then(|| {
            let text = output
                .content
                .iter()
                .filter_map(Content::as_text)
                .collect::<Vec<_>>()
                .join("\n");
            if text.is_empty() {
                format!("Tool \"{name}\" failed")
            } else {
                text
            }
        });
        self.end_record(slot, &id, started, error_text.as_deref());
        self.handle
            .block_on(self.nested.finish(call, &output, is_error, ran));
        result
    }

    fn search(&self, query: &str, options: &Value) -> Value {
        let limit = options
            .get("limit")
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .unwrap_or(8);
        let ns = options.get("namespace").and_then(Value::as_str);
        let pool: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| match (ns, &e.namespace) {
                (None, _) => true,
                (Some(n), Some(space)) => {
                    let server = space.strip_prefix("mcp__").unwrap_or(space);
                    namespace_matches(space, server, n)
                }
                (Some(_), None) => false,
            })
            .collect();
        let docs: Vec<String> = pool.iter().map(|e| catalog::search_text(e)).collect();
        Value::Array(
            catalog::bm25(&docs, query, limit)
                .into_iter()
                .map(|i| json!({"name": pool[i].name, "description": pool[i].description}))
                .collect(),
        )
    }

    fn describe_tool(&self, name: &str) -> Option<String> {
        self.entries
            .iter()
            .find(|e| e.name == name || js_identifier(&e.name) == name)
            .map(Entry::describe)
    }

    fn describe_namespace(&self, name: &str) -> Option<Value> {
        let m = self.mcp.as_ref()?;
        let slot = m.servers().iter().find(|s| {
            let ns = crate::mcp::config::namespace(&s.cfg.name);
            namespace_matches(&ns, &s.cfg.name, name)
        })?;
        let ns = crate::mcp::config::namespace(&slot.cfg.name);
        let tools: Vec<&str> = self
            .entries
            .iter()
            .filter(|e| e.namespace.as_deref() == Some(ns.as_str()))
            .map(|e| e.name.as_str())
            .collect();
        let mut v = json!({"name": ns});
        let description = slot.cfg.description.clone().or_else(|| {
            slot.instructions()
                .and_then(|i| i.lines().next().map(str::to_string))
        });
        if let Some(d) = description {
            v["description"] = json!(d);
        }
        if let Some(i) = slot.instructions() {
            v["instructions"] = json!(i);
        }
        v["tools"] = json!(tools);
        Some(v)
    }
}

impl ScriptHost {
    /// Validates, gates (the `tool_call` / `tool_result` hooks, with the codemode call as
    /// `parentToolCallId`) and runs one call of the script, until done, aborted or past the
    /// script's deadline.
    fn run_call(&self, entry: &Entry, call: &pi_agent::NestedCall, args: Value) -> CallOutcome {
        let (id, name) = (call.id.as_str(), entry.name.as_str());
        let args = entry.tool.prepare_arguments(args);
        let args = match pi_agent::validate::validate_tool_arguments(name, &entry.parameters, &args)
        {
            Ok(args) => args,
            Err(e) => return CallOutcome::Refused(e),
        };
        let (hooked, args) = match self.before_call(id, name, args) {
            Ok(gated) => gated,
            Err(reason) => return CallOutcome::Refused(reason),
        };
        let ctx = ToolContext {
            call_id: id.to_string(),
            cancel: self.cancel.child_token(),
            on_update: self.nested.updater(call),
            // Calls made by a script's tools are not recorded (no built-in tool makes any).
            nested: pi_agent::NestedCalls::new(id, None),
        };
        let deadline = self.deadline;
        let cancel = self.cancel.clone();
        let fut = entry.tool.execute(ctx, args.clone());
        let hooks = self.hooks.clone();
        let parent = self.nested.parent().to_string();
        self.handle.block_on(async move {
            let until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            let r = tokio::select! {
                r = fut => r,
                _ = cancel.cancelled() => return CallOutcome::Aborted,
                _ = until => return CallOutcome::Aborted,
            };
            let (mut output, is_error) = match r {
                Ok(o) => {
                    let e = o.is_error == Some(true);
                    (o, e)
                }
                Err(e) => (ToolOutput::error(e.to_string()), true),
            };
            let (Some(hooks), Some(call)) = (hooks, hooked) else {
                output.is_error = is_error.then_some(true);
                return CallOutcome::Ran(output);
            };
            // `tool_result` handlers see (and may change) the result; a round still pending
            // a grace after an abort is given up, withholding the result (as the agent loop).
            let (mut o, is_error) = tokio::select! {
                biased;
                r = hooks.after_tool_call(&call, &args, output, is_error, Some(&parent)) => r,
                () = pi_agent::abort_grace(&cancel) => {
                    (ToolOutput::error(pi_agent::HOOK_ABORTED_AFTER.to_string()), true)
                }
            };
            o.is_error = is_error.then_some(true);
            CallOutcome::Ran(o)
        })
    }

    /// The `tool_call` hooks for the script's call `id`: `Ok((the call the hooks saw, possibly
    /// changed arguments))`, `(None, args)` without hooks, or `Err(reason)` when a handler
    /// blocked it (a handler that failed or a dead host blocks too: extensions fail closed).
    fn before_call(
        &self,
        id: &str,
        name: &str,
        args: Value,
    ) -> Result<(Option<pi_ai::ToolCall>, Value), String> {
        let Some(hooks) = &self.hooks else {
            return Ok((None, args));
        };
        let call = pi_ai::ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: args.clone(),
            thought_signature: None,
            extra: Default::default(),
        };
        let parent = Some(self.nested.parent());
        let cancel = self.cancel.clone();
        // An abort ends a round that has not answered: the call is blocked.
        let decision = self.handle.block_on(async {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => pi_agent::BeforeToolCall::Block(
                    pi_agent::HOOK_ABORTED_BEFORE.into(),
                ),
                d = hooks.before_tool_call(&call, args, parent) => d,
            }
        });
        match decision {
            pi_agent::BeforeToolCall::Proceed(args) => Ok((Some(call), args)),
            pi_agent::BeforeToolCall::Block(reason) if reason.is_empty() => {
                Err("Tool execution was blocked".into())
            }
            pi_agent::BeforeToolCall::Block(reason) => Err(reason),
        }
    }

    /// Adds a running call to `details.calls` (`args`: its JSON cut to
    /// [`ARGS_PREVIEW_CHARS`]) and publishes the progress; returns its index.
    fn begin_record(&self, name: &str, args: &Value) -> usize {
        let slot = {
            let mut calls = self.calls.lock();
            calls.push(json!({
                "id": format!("{}/?", self.nested.parent()),
                "name": name,
                "args": preview(&args.to_string(), ARGS_PREVIEW_CHARS),
                "status": "running",
            }));
            calls.len() - 1
        };
        self.publish();
        slot
    }

    /// Ends call `slot` of `details.calls`: its id, duration (ms) and status (`ok`, `error`
    /// with the text cut to [`ERROR_PREVIEW_CHARS`], or `cancelled` once the script was
    /// aborted), then publishes the progress.
    fn end_record(&self, slot: usize, id: &str, started: Instant, error: Option<&str>) {
        {
            let mut calls = self.calls.lock();
            let Some(c) = calls.get_mut(slot) else {
                return;
            };
            c["id"] = json!(id);
            c["durationMs"] = json!(started.elapsed().as_secs_f64() * 1000.0);
            c["status"] = json!(match error {
                None => "ok",
                Some(_) if self.cancel.is_cancelled() => "cancelled",
                Some(_) => "error",
            });
            if let Some(e) = error {
                c["error"] = json!(preview(e, ERROR_PREVIEW_CHARS));
            }
        }
        self.publish();
    }

    /// A `tool_execution_update` of the codemode call: no content, `details: {calls}`.
    fn publish(&self) {
        let calls = self.calls.lock().clone();
        (self.on_update)(progress(calls));
    }
}

/// Characters of a call's JSON arguments in `details.calls` (upstream 1.6 codemode: 200).
const ARGS_PREVIEW_CHARS: usize = 200;
/// Characters of a failed call's error text in `details.calls` (upstream 1.6 codemode: 500).
const ERROR_PREVIEW_CHARS: usize = 500;

/// `text` cut to `max` characters, the last three of them `...` when it was longer.
fn preview(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{head}...")
}

/// The codemode call's progress update: no content, `details: {calls}`.
fn progress(calls: Vec<Value>) -> ToolOutput {
    ToolOutput {
        content: vec![],
        details: Some(json!({ "calls": calls })),
        ..ToolOutput::default()
    }
}

/// Cuts `text` to about `max_chars`, keeping its start and end around a marker that names the
/// temp file holding the whole text.
fn limit_output(text: String, max_chars: usize) -> String {
    let n = text.chars().count();
    if n <= max_chars {
        return text;
    }
    let path = crate::mcp::convert::save_temp(text.as_bytes(), ".txt")
        .unwrap_or_else(|e| format!("(not saved: {e})"));
    let half = max_chars / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(n - half).collect();
    format!(
        "{head}\n…{} chars truncated; the whole output is in {path}…\n{tail}",
        n - 2 * half
    )
}

fn extension_of(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => ".jpg",
        "image/gif" => ".gif",
        "image/webp" => ".webp",
        _ => ".png",
    }
}

/// The tool result of a finished script.
fn format_result(
    outcome: &sandbox::Outcome,
    calls: &[Value],
    wall: Duration,
    opts: ScriptOptions,
) -> ToolOutput {
    let ok = outcome.error.is_none();
    let head = format!(
        "Script {}\nWall time {:.1} seconds\nOutput:\n",
        if ok { "completed" } else { "failed" },
        wall.as_secs_f64()
    );
    let mut content = vec![Content::text(head)];
    let texts = outcome
        .items
        .iter()
        .filter(|i| matches!(i, sandbox::Item::Text(_)))
        .count();
    let max_chars = (opts.max_output_tokens as usize).saturating_mul(4);
    let mut lines: Vec<String> = Vec::new();
    let mut k = 0;
    let flush = |lines: &mut Vec<String>, content: &mut Vec<Content>| {
        if !lines.is_empty() {
            content.push(Content::text(limit_output(lines.join("\n"), max_chars)));
            lines.clear();
        }
    };
    for item in &outcome.items {
        match item {
            sandbox::Item::Text(t) => {
                k += 1;
                if texts > 1 {
                    lines.push(format!("==> text {k}/{texts} <=="));
                }
                lines.push(t.clone());
            }
            sandbox::Item::Image { data, mime } => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .unwrap_or_default();
                match crate::mcp::convert::save_temp(&bytes, extension_of(mime)) {
                    Ok(p) => lines.push(format!("Image ({mime}) saved to {p}")),
                    Err(e) => lines.push(format!("Image ({mime}) could not be saved: {e}")),
                }
                flush(&mut lines, &mut content);
                content.push(Content::Image(ImageContent {
                    data: data.clone(),
                    mime_type: mime.clone(),
                    extra: Default::default(),
                }));
            }
        }
    }
    if !outcome.console.is_empty() {
        lines.push(format!(
            "<console_output>\n{}\n</console_output>",
            outcome.console.join("\n")
        ));
    }
    if let Some(e) = &outcome.error {
        let made: Vec<&str> = calls.iter().filter_map(|c| c["name"].as_str()).collect();
        let summary = if made.is_empty() {
            "No tool calls were made.".to_string()
        } else {
            format!(
                "Tool calls made before the failure (they are not undone): {}.",
                made.join(", ")
            )
        };
        lines.push(format!("Script error:\n{e}\n\n{summary}"));
    }
    flush(&mut lines, &mut content);
    ToolOutput {
        content,
        details: Some(json!({"calls": calls})),
        structured_content: None,
        is_error: (!ok).then_some(true),
    }
}

#[async_trait]
impl AgentTool for CodemodeTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: NAME.into(),
            description: self.description.clone(),
            parameters: json!({
                "type": "object",
                "required": ["code"],
                "properties": {"code": {"type": "string", "description": "The JavaScript source, as is."}}
            }),
        }
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let code = args
            .get("code")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidArguments("code must be a string".into()))?;
        let (opts, body) = parse_options(code).map_err(ToolError::Failed)?;
        // Shown as running before its first call (upstream publishes the empty progress too).
        (ctx.on_update)(progress(vec![]));
        let started = Instant::now();
        let deadline = opts
            .timeout_ms
            .map(|ms| started + Duration::from_millis(ms));
        let permit = {
            let limit = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(WORKER_WAIT),
                None => WORKER_WAIT,
            };
            let acquire = tokio::time::timeout(limit, workers().clone().acquire_owned());
            tokio::select! {
                r = acquire => match r {
                    Ok(Ok(p)) => p,
                    _ => return Err(ToolError::Failed("No codemode worker became free in time; the script did not run".into())),
                },
                _ = ctx.cancel.cancelled() => return Err(ToolError::Aborted),
            }
        };
        tokio::select! {
            _ = self.wait_for_servers(&body) => {}
            _ = ctx.cancel.cancelled() => return Err(ToolError::Aborted),
        }
        let entries = self.entries();
        let setup = sandbox::Setup {
            names: entries
                .iter()
                .map(|e| (js_identifier(&e.name), e.name.clone()))
                .collect(),
            all_tools: Value::Array(
                entries
                    .iter()
                    .map(|e| json!({"name": e.name, "description": e.description}))
                    .collect(),
            ),
            store: Value::Object(self.load_store()),
            deadline,
            timeout_ms: opts.timeout_ms,
            cancel: ctx.cancel.clone(),
        };
        let host = Arc::new(ScriptHost {
            handle: tokio::runtime::Handle::current(),
            entries,
            nested: ctx.nested.clone(),
            on_update: ctx.on_update.clone(),
            cancel: ctx.cancel.clone(),
            deadline,
            calls: Default::default(),
            mcp: self.mcp.clone(),
            hooks: self.hooks.clone(),
        });
        let h: Arc<dyn sandbox::Host> = host.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let o = sandbox::run(&body, setup, h);
            drop(permit);
            o
        })
        .await
        .map_err(|e| ToolError::Failed(format!("The codemode sandbox stopped: {e}")))?;
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Aborted);
        }
        if outcome.error.is_none() {
            if let Err(e) = self.save_store(&outcome.store_writes) {
                crate::config::warn(&format!("codemode: could not keep stored values: {e}"));
            }
        }
        let calls = host.calls.lock().clone();
        Ok(format_result(&outcome, &calls, started.elapsed(), opts))
    }
}
