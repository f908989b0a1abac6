//! Extensions: pi's JS extensions run in a Node child process (the extension host, our own
//! program `host.mjs` shipped in the binary), started only when at least one extension is
//! configured (issue 12; upstream docs/extensions.md, docs/rpc-extension-ui.md;
//! rpc-protocol.md §5.9, §6).
//!
//! * [`discover`] finds the entry files: `-e <file|dir>` (repeatable), then — unless
//!   `--no-extensions` — `<agent>/extensions/`, settings `extensions` and, for a trusted
//!   project only, `.pi/extensions/`.
//! * [`Extensions::start`] starts the host and loads them; Node missing or too old, or any
//!   extension that fails to load (throws or rejects, does not parse, an import fails, a tool
//!   name conflicts), is an error: `pi` exits 1 before serving anything, as upstream (the run
//!   must not start ungated).
//! * [`Extensions`] implements [`pi_agent::ToolCallHooks`]: `tool_call` handlers may block or
//!   change arguments, `tool_result` handlers may change the result. It never fails open: a
//!   handler that throws, times out or whose host died blocks the call and `extension_error`
//!   is emitted; an abort ends a pending round (the call is blocked), and once stdin has
//!   closed no round waits longer than [`host::EOF_GRACE`].

pub mod api;
pub mod events;
pub mod host;
pub mod provider;
pub mod provider_hooks;
pub mod sdk;
pub mod tool;
pub mod typescript;
pub mod wire;

use crate::protocol::rpc::EventSink;
use crate::protocol::rpc::{RpcEvent, SlashCommand};
use futures::future::BoxFuture;
use futures::FutureExt;
use host::{CallHandler, ExtensionHost, HostError};
use parking_lot::{Mutex, RwLock};
use pi_agent::{BeforeToolCall, ToolCallHooks, ToolOutput};
use pi_ai::{ImageContent, ToolCall};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use wire::{FlagInfo, LoadResult, ToHost, ToolCallResult};

/// Default limit for one `tool_call` / `tool_result` round (handlers may wait on a dialog).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(300);

/// Where an extension was configured (`get_commands` `sourceInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionSource {
    /// The entry file (absolute).
    pub path: PathBuf,
    /// `cli` (from `-e`) or `local` (discovered / settings).
    pub source: &'static str,
    /// `temporary` (cli), `user` (agent dir, settings) or `project` (`.pi/extensions`).
    pub scope: &'static str,
    /// For an extension a package provides ([`crate::packages`]): the `sourceInfo` upstream
    /// reports (`source` = the package source, `origin: "package"`, `baseDir`), which
    /// replaces `source`/`scope` above in `get_commands`.
    pub package: Option<crate::resources::SourceInfo>,
}

impl ExtensionSource {
    /// The entry of a package resource ([`crate::packages::PackageResource`]).
    pub fn from_package(r: &crate::packages::PackageResource) -> Self {
        let scope = match r.info.scope.as_str() {
            "project" => "project",
            "temporary" => "temporary",
            _ => "user",
        };
        ExtensionSource {
            path: r.path.clone(),
            source: "package",
            scope,
            package: Some(r.info.clone()),
        }
    }
}

/// Inputs of [`discover`].
#[derive(Debug, Clone, Default)]
pub struct DiscoverOptions {
    /// `-e` values in order.
    pub cli: Vec<String>,
    /// `--no-extensions`: skip discovery (explicit `-e` still loads).
    pub no_extensions: bool,
    /// Settings `extensions` (paths, relative to the agent dir unless absolute).
    pub settings: Vec<String>,
    /// The agent directory.
    pub agent_dir: PathBuf,
    /// The working directory.
    pub cwd: PathBuf,
    /// Whether the project is trusted (`.pi/extensions` is read only then).
    pub project_trusted: bool,
    /// Extensions of `-e` package sources (npm, git; [`crate::packages`]), loaded right
    /// after the `-e` paths.
    pub cli_packages: Vec<ExtensionSource>,
    /// Extensions of the configured `packages` (loaded last, as upstream ranks package
    /// resources below the user's and project's own); skipped with `--no-extensions`.
    pub packages: Vec<ExtensionSource>,
}

/// The entry files of a path: a file is itself; a folder gives its `package.json`
/// `pi.extensions` entries, else `index.ts` / `index.js` / `index.mjs`.
fn entries_of(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    if !path.is_dir() {
        return vec![];
    }
    if let Ok(text) = std::fs::read_to_string(path.join("package.json")) {
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            if let Some(list) = v.pointer("/pi/extensions").and_then(Value::as_array) {
                return list
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|p| path.join(p))
                    .filter(|p| p.is_file())
                    .collect();
            }
        }
    }
    ["index.ts", "index.js", "index.mjs"]
        .iter()
        .map(|n| path.join(n))
        .find(|p| p.is_file())
        .into_iter()
        .collect()
}

/// The extensions of a discovery folder: its `*.ts`/`*.js`/`*.mjs` files and sub-folders with
/// an entry, sorted by name.
fn scan_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    names.sort();
    names
        .into_iter()
        .flat_map(|p| {
            if p.is_dir() {
                entries_of(&p)
            } else if p
                .extension()
                .is_some_and(|x| x == "ts" || x == "js" || x == "mjs")
            {
                vec![p]
            } else {
                vec![]
            }
        })
        .collect()
}

fn absolute(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Finds the configured extension entry files, each once, in load order: `-e`, agent dir,
/// settings, trusted project. A `-e` path that does not exist is reported in `missing`.
pub fn discover(o: &DiscoverOptions) -> (Vec<ExtensionSource>, Vec<String>) {
    fn add(out: &mut Vec<ExtensionSource>, src: ExtensionSource) {
        if !out.iter().any(|s| s.path == src.path) {
            out.push(src);
        }
    }
    let mut out: Vec<ExtensionSource> = vec![];
    let mut missing = vec![];
    let local = |path: PathBuf, source, scope| ExtensionSource {
        path,
        source,
        scope,
        package: None,
    };
    for e in &o.cli {
        let p = absolute(&o.cwd, e);
        let found = entries_of(&p);
        if found.is_empty() {
            missing.push(e.clone());
        }
        for f in found {
            add(&mut out, local(f, "cli", "temporary"));
        }
    }
    for p in &o.cli_packages {
        add(&mut out, p.clone());
    }
    if !o.no_extensions {
        for f in scan_dir(&o.agent_dir.join("extensions")) {
            add(&mut out, local(f, "local", "user"));
        }
        for s in &o.settings {
            for f in entries_of(&absolute(&o.agent_dir, s)) {
                add(&mut out, local(f, "local", "user"));
            }
        }
        if o.project_trusted {
            for f in scan_dir(&o.cwd.join(".pi").join("extensions")) {
                add(&mut out, local(f, "local", "project"));
            }
        }
        for p in &o.packages {
            add(&mut out, p.clone());
        }
    }
    (out, missing)
}

/// The loaded extensions and their host.
pub struct Extensions {
    host: Arc<ExtensionHost>,
    sources: Vec<ExtensionSource>,
    /// What the current instances registered (replaced by [`Extensions::reload`]).
    loaded: RwLock<LoadResult>,
    sink: EventSink,
    hook_timeout: Duration,
    shaper: events::EventShaper,
    /// The session runtime, for the state mirror ([`Extensions::push_state`]).
    runtime: api::RuntimeSlot,
    /// `(session id, last entry id)` of the last mirror push: the next one sends only the
    /// entries after it.
    pushed: Mutex<Option<(String, Option<String>)>>,
    /// Skills and prompt templates the `resources_discover` handlers added (files).
    discovered: RwLock<Discovered>,
}

/// What [`Extensions::discover_resources`] found: skill files and prompt template files, each
/// with the `sourceInfo` upstream gives it (`source: "extension:<name>"`).
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    /// Skill files.
    pub skills: Vec<crate::packages::PackageResource>,
    /// Prompt template files.
    pub prompts: Vec<crate::packages::PackageResource>,
}

/// Why extensions could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Node is missing or too old; names the extensions that need it.
    #[error("cannot load extension{s} {names}: {reason}", s = if .0.len() == 1 { "" } else { "s" }, names = .0.join(", "), reason = .1)]
    NoNode(Vec<String>, String),
    /// The host failed while loading.
    #[error("cannot load extensions: {0}")]
    Host(HostError),
    /// One or more extensions failed to load (their factory threw or rejected, the module did
    /// not parse or an import failed, or a tool name conflicts). Upstream 1.6 main.ts writes
    /// one `Error: Failed to load extension "<path>": <error>` line per failure, then the
    /// `-ne` hint, and exits 1 before serving anything; the text here is those lines without
    /// the first `Error: ` (the caller prints it after `Error: `).
    #[error("{}", load_failure_text(.0))]
    LoadFailed(Vec<wire::LoadError>),
}

/// The hint upstream prints after extension load failures (main.ts
/// `EXTENSION_LOAD_FAILURE_HINT`).
pub const LOAD_FAILURE_HINT: &str = "Hint: Start without extensions using \"pi -ne\".";

/// [`StartError::LoadFailed`]'s text: `Failed to load extension "<path>": <error>` per failure,
/// joined by `\nError: `, then [`LOAD_FAILURE_HINT`] on its own line.
fn load_failure_text(errors: &[wire::LoadError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| format!("Failed to load extension \"{}\": {}", e.path, e.error))
        .collect();
    format!("{}\n{LOAD_FAILURE_HINT}", lines.join("\nError: "))
}

/// The modules the extension host provides itself (upstream resource-loader
/// `HOST_PROVIDED_EXTENSION_PACKAGES`): a package should list them as peer dependencies.
const HOST_PROVIDED_MODULES: [&str; 10] = [
    "@earendil-works/pi-agent-core",
    "@earendil-works/pi-ai",
    "@earendil-works/pi-coding-agent",
    "@earendil-works/pi-tui",
    "@mariozechner/pi-agent-core",
    "@mariozechner/pi-ai",
    "@mariozechner/pi-coding-agent",
    "@mariozechner/pi-tui",
    "@sinclair/typebox",
    "typebox",
];

/// The host-provided modules `manifest` (a `package.json`) lists under `dependencies`, sorted;
/// `None` when there are none or the file cannot be read or parsed.
fn host_provided_dependencies(manifest: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let value: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
    let deps = value.get("dependencies")?.as_object()?;
    let mut names: Vec<String> = deps
        .keys()
        .filter(|k| HOST_PROVIDED_MODULES.contains(&k.as_str()))
        .cloned()
        .collect();
    names.sort();
    (!names.is_empty()).then_some(names)
}

/// Upstream's conflict rule for tools (docs/extensions.md; loader `Tool "<name>" conflicts
/// with <path>`): a tool name already registered by an earlier extension is an error of the
/// later one. Returns one error per conflicting registration, in load order.
fn tool_conflicts(loaded: &LoadResult) -> Vec<wire::LoadError> {
    let mut owners: Vec<(&str, &str)> = vec![];
    let mut out = vec![];
    for ext in &loaded.extensions {
        for tool in &ext.tools {
            match owners.iter().find(|(n, _)| *n == tool.name) {
                Some((_, first)) if *first != ext.path => out.push(wire::LoadError {
                    path: ext.path.clone(),
                    error: format!("Tool \"{}\" conflicts with {first}", tool.name),
                }),
                Some(_) => {}
                None => owners.push((&tool.name, &ext.path)),
            }
        }
    }
    out
}

impl Extensions {
    /// Starts the host in `cwd` and loads `sources` for `mode` (`rpc`/`json`/`print`). Fails
    /// closed, as upstream: any extension that fails to load (or a tool name registered by
    /// two of them) is [`StartError::LoadFailed`], and the caller exits 1 before serving
    /// anything, so a gate that breaks at load never lets tool calls through.
    pub async fn start(
        sources: Vec<ExtensionSource>,
        mode: &str,
        cwd: &Path,
        sink: EventSink,
        runtime: api::RuntimeSlot,
        on_call: CallHandler,
    ) -> Result<Arc<Self>, StartError> {
        let names = || {
            sources
                .iter()
                .map(|s| s.path.display().to_string())
                .collect::<Vec<_>>()
        };
        // Upstream's real SDK modules for the extensions' imports (fetched once; sdk.rs).
        let sdk_dir = sdk::prepare().await;
        let host = match ExtensionHost::spawn(cwd, sdk_dir.as_deref(), sink.clone(), on_call) {
            Ok(h) => h,
            Err(e) => return Err(StartError::NoNode(names(), e.to_string())),
        };
        let paths: Vec<PathBuf> = sources.iter().map(|s| s.path.clone()).collect();
        let loaded = host
            .load(&paths, mode, cwd)
            .await
            .map_err(StartError::Host)?;
        // Upstream's loader wraps what a module threw in `Failed to load extension: `; its
        // conflict errors are bare.
        let mut failures: Vec<wire::LoadError> = loaded
            .errors
            .iter()
            .map(|e| wire::LoadError {
                path: e.path.clone(),
                error: format!("Failed to load extension: {}", e.error),
            })
            .collect();
        failures.extend(tool_conflicts(&loaded));
        if !failures.is_empty() {
            return Err(StartError::LoadFailed(failures));
        }
        let ext = Arc::new(Extensions {
            host,
            sources,
            loaded: RwLock::new(loaded),
            sink,
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            shaper: events::EventShaper::default(),
            runtime,
            pushed: Mutex::new(None),
            discovered: RwLock::default(),
        });
        let weak = Arc::downgrade(&ext);
        ext.host.on_registered(Arc::new(move |list| {
            if let Some(ext) = weak.upgrade() {
                ext.apply_registered(list);
            }
        }));
        Ok(ext)
    }

    /// Takes a [`wire::FromHost::Registered`] snapshot: commands, tools, handlers and flags
    /// registered after the factories (upstream lets `session_start` and later handlers
    /// register them). The session's tools and system prompt are rebuilt: a new tool is active
    /// (upstream `refreshTools` activates tools registered after startup), the others keep
    /// their state (`pi.setActiveTools`).
    fn apply_registered(&self, list: Vec<wire::LoadedExtension>) {
        let names = |l: &[wire::LoadedExtension]| -> Vec<String> {
            l.iter()
                .flat_map(|e| e.tools.iter().map(|t| t.name.clone()))
                .collect()
        };
        self.rebuild_loadout(|| {
            let before = names(&self.loaded.read().extensions);
            let added: Vec<String> = names(&list)
                .into_iter()
                .filter(|n| !before.contains(n))
                .collect();
            self.loaded.write().extensions = list;
            added
        });
    }

    /// Applies `change` (which returns the names of tools it added) and rebuilds the session's
    /// tools and system prompt: a session on the default tool set gets the new default one; a
    /// session whose tools were chosen (`pi.setActiveTools`) keeps them plus the added tools.
    fn rebuild_loadout(&self, change: impl FnOnce() -> Vec<String>) {
        let runtime = self.runtime.get();
        let session = runtime.map(|r| r.session());
        let default_before = match (runtime, &session) {
            (Some(r), Some(s)) => {
                let default: Vec<String> = r
                    .factory()
                    .loadout(s.cwd())
                    .tools
                    .iter()
                    .map(|t| t.definition().name)
                    .collect();
                default == s.active_tool_names()
            }
            _ => true,
        };
        let added = change();
        let (Some(runtime), Some(session)) = (runtime, session) else {
            return;
        };
        let loadout = if default_before {
            runtime.factory().loadout(session.cwd())
        } else {
            let mut active = session.active_tool_names();
            active.extend(added);
            runtime.factory().loadout_with(session.cwd(), &active)
        };
        session.set_loadout(loadout);
        self.push_state();
    }

    /// Runs the `resources_discover` handlers (upstream docs/extensions.md: after
    /// `session_start`; `reason` `startup` or `reload`) and makes the skills and prompt
    /// templates they name part of the session's resources (`get_commands`, the system
    /// prompt's skills, `/skill:` and template expansion). A folder gives the files discovery
    /// finds in it; relative paths resolve against `cwd`. Each file's `sourceInfo`:
    /// `{path, source: "extension:<entry file stem>", scope: "temporary", origin: "top-level",
    /// baseDir: <the entry file's folder>}`, as upstream reports them.
    pub async fn discover_resources(&self, cwd: &Path, reason: &str) {
        const EVENT: &str = "resources_discover";
        if !self.handles(EVENT) || self.host.is_dead() {
            return;
        }
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::Event {
            id: Some(id),
            event: json!({"type": EVENT, "cwd": cwd, "reason": reason}),
        };
        let found: Vec<wire::DiscoveredResources> =
            match self.host.request(id, &msg, Some(self.hook_timeout)).await {
                Ok(v) => serde_json::from_value(v).unwrap_or_default(),
                Err(e) => {
                    for p in self.handlers_of(EVENT) {
                        self.error(&p, EVENT, &e.to_string());
                    }
                    vec![]
                }
            };
        let mut out = Discovered::default();
        for f in &found {
            let entry = Path::new(&f.path);
            let name = entry
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let base = entry.parent().map(|p| p.to_string_lossy().into_owned());
            let resource = |file: PathBuf| crate::packages::PackageResource {
                info: crate::resources::SourceInfo {
                    path: file.to_string_lossy().into_owned(),
                    source: format!("extension:{name}"),
                    scope: "temporary".into(),
                    origin: "top-level".into(),
                    base_dir: base.clone(),
                    changelog_path: None,
                },
                path: file,
            };
            let files = |p: &String, dir_files: &dyn Fn(&Path) -> Vec<PathBuf>| {
                let p = cwd.join(p);
                if p.is_dir() {
                    dir_files(&p)
                } else {
                    vec![p]
                }
            };
            use crate::resources::discover::{collect_prompt_entries, collect_skill_entries};
            let skills =
                |d: &Path| collect_skill_entries(d, crate::resources::discover::SkillMode::Pi);
            for p in &f.skill_paths {
                out.skills
                    .extend(files(p, &skills).into_iter().map(resource));
            }
            for p in &f.prompt_paths {
                out.prompts
                    .extend(files(p, &collect_prompt_entries).into_iter().map(resource));
            }
        }
        self.rebuild_loadout(|| {
            *self.discovered.write() = out;
            vec![]
        });
    }

    /// The skills and prompt templates `resources_discover` handlers added.
    pub fn discovered(&self) -> Discovered {
        self.discovered.read().clone()
    }

    /// The start-up warnings upstream's resource loader gives for these extensions (the text
    /// after `Warning: `), in upstream's order:
    /// - a built-in extension command (`/mcp`, `/llama`) that a loaded extension registers
    ///   too: the built-in is not loaded (upstream `omitReplacedExtensions`);
    /// - a package whose `package.json` lists a host-provided module under `dependencies`
    ///   instead of `peerDependencies` (upstream `collectExtensionPackageWarnings`).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = vec![];
        let loaded = self.loaded.read();
        for (name, path, _) in crate::resources::commands::BUILTIN_COMMANDS {
            let Some(ext) = loaded
                .extensions
                .iter()
                .find(|e| e.commands.iter().any(|c| c.name == name))
            else {
                continue;
            };
            let builtin = path.trim_start_matches("builtin:");
            out.push(format!(
                "Extension package \"{path}\": Extension {} registers command `/{name}`, so built-in extension `{builtin}` was not loaded. To use `{builtin}`, run `pi config` and make sure it is enabled under Built-in extensions, then disable or remove the existing extension. We recommend only having one or the other loaded at a time.",
                ext.path
            ));
        }
        let mut roots: Vec<PathBuf> = vec![];
        for src in &self.sources {
            if let Some(dir) = src.package.as_ref().and_then(|p| p.base_dir.as_ref()) {
                let dir = PathBuf::from(dir);
                if !roots.contains(&dir) {
                    roots.push(dir);
                }
            }
        }
        for root in roots {
            let manifest = root.join("package.json");
            if let Some(names) = host_provided_dependencies(&manifest) {
                out.push(format!(
                    "Extension package \"{}\": Host-provided extension packages must be declared in peerDependencies with a \"*\" range, not dependencies: {}. Installed copies can bypass the extension loader and create duplicate runtime modules.",
                    manifest.display(),
                    names.join(", ")
                ));
            }
        }
        out
    }

    /// The flags the extensions registered (`pi.registerFlag`), in load order.
    pub fn flags(&self) -> Vec<FlagInfo> {
        self.loaded
            .read()
            .extensions
            .iter()
            .flat_map(|e| e.flags.iter().cloned())
            .collect()
    }

    /// Matches the command line's unknown `--flags` against the registered ones (upstream
    /// `applyExtensionFlagValues`) and hands the values to the host: a boolean flag is `true`
    /// (a value after it is consumed and ignored, as upstream), a string flag takes its value.
    /// `Err`: the message for stderr (`Unknown option(s): --a, --b`, or `Extension flag
    /// "--x" requires a value`); the caller exits 1.
    pub fn apply_flags(&self, given: &[(String, crate::cli::FlagValue)]) -> Result<(), String> {
        let registered = self.flags();
        let mut values = serde_json::Map::new();
        let mut unknown = vec![];
        let mut errors = vec![];
        for (name, value) in given {
            let Some(flag) = registered.iter().find(|f| f.name == *name) else {
                unknown.push(format!("--{name}"));
                continue;
            };
            match (flag.kind.as_deref().unwrap_or("boolean"), value) {
                ("boolean", _) => {
                    values.insert(name.clone(), Value::Bool(true));
                }
                (_, crate::cli::FlagValue::Text(t)) => {
                    values.insert(name.clone(), Value::String(t.clone()));
                }
                (_, crate::cli::FlagValue::Bool) => {
                    errors.push(format!("Extension flag \"--{name}\" requires a value"))
                }
            }
        }
        if !unknown.is_empty() {
            let s = if unknown.len() == 1 { "" } else { "s" };
            errors.push(format!("Unknown option{s}: {}", unknown.join(", ")));
        }
        if !values.is_empty() {
            self.host.send(&ToHost::Flags { values });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    /// Sends the host the session mirror (`ToHost::State`, `api::state`): only the entries
    /// after the last push when the session is the same. Nothing before the runtime exists.
    pub fn push_state(&self) {
        let Some(runtime) = self.runtime.get() else {
            return;
        };
        if self.host.is_dead() {
            return;
        }
        let mut pushed = self.pushed.lock();
        let session = runtime.session();
        let id = session.state().session_id;
        let from = match &*pushed {
            Some((sid, last)) if *sid == id => last.clone(),
            _ => None,
        };
        let state = api::state(runtime, from.as_deref());
        let last = state
            .get("entries")
            .and_then(Value::as_array)
            .and_then(|e| e.last())
            .and_then(|e| e.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(from);
        *pushed = Some((id, last));
        // Sent under the lock: pushes reach the host in the order they were computed.
        self.host.send(&ToHost::State { state });
    }

    /// Runs the handlers of a session event (`session_start`, `session_shutdown`,
    /// `session_before_switch`, `session_before_fork`) and waits for them; returns the
    /// combined result (`{cancel: true}` from a `session_before_*` handler), `null` when no
    /// extension handles it or the host failed (then after an `extension_error`).
    pub async fn emit_session_event(&self, event: Value) -> Value {
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !self.handles(&kind) || self.host.is_dead() {
            return Value::Null;
        }
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::Event {
            id: Some(id),
            event,
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(v) => v,
            Err(e) => {
                for p in self.handlers_of(&kind) {
                    self.error(&p, &kind, &e.to_string());
                }
                Value::Null
            }
        }
    }

    /// A fresh instance of every extension (after a session replacement or `ctx.reload()`,
    /// as upstream rebinds them): the host imports them again and runs their factories; their
    /// commands, tools and handlers replace the old ones. Load errors are reported as at start.
    pub async fn reload(&self) -> Result<(), HostError> {
        let id = self.host.next_id();
        let v = self
            .host
            .request(id, &ToHost::Reload { id }, Some(Duration::from_secs(60)))
            .await?;
        let loaded: LoadResult = serde_json::from_value(v)
            .map_err(|e| HostError::Handler(format!("bad reload reply: {e}")))?;
        for e in &loaded.errors {
            self.error(&e.path, "load", &e.error);
        }
        *self.loaded.write() = loaded;
        Ok(())
    }

    /// Every registered tool in registration order ([`wire::ToolInfo::seq`]; load order for
    /// equal places).
    fn tool_infos(&self) -> Vec<wire::ToolInfo> {
        let mut all: Vec<wire::ToolInfo> = self
            .loaded
            .read()
            .extensions
            .iter()
            .flat_map(|e| e.tools.iter().cloned())
            .collect();
        all.sort_by_key(|t| t.seq);
        all
    }

    /// `(tool name, extension path)` of every registered tool.
    pub fn tool_paths(&self) -> Vec<(String, String)> {
        self.loaded
            .read()
            .extensions
            .iter()
            .flat_map(|e| e.tools.iter().map(|t| (t.name.clone(), e.path.clone())))
            .collect()
    }

    /// The registered tools, in load order, as agent tools.
    pub fn tools(self: &Arc<Self>) -> Vec<Arc<dyn pi_agent::AgentTool>> {
        self.tool_infos()
            .into_iter()
            .map(|info| {
                Arc::new(tool::ExtensionTool {
                    info,
                    extensions: self.clone(),
                }) as Arc<dyn pi_agent::AgentTool>
            })
            .collect()
    }

    /// The system-prompt view of the registered tools (snippet and guidelines as given).
    pub fn prompt_tools(&self) -> Vec<crate::system_prompt::PromptTool> {
        self.tool_infos()
            .iter()
            .map(|t| crate::system_prompt::PromptTool {
                definition: pi_ai::ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone().unwrap_or_default(),
                    parameters: t.parameters.clone().unwrap_or(Value::Null),
                },
                snippet: t.prompt_snippet.clone(),
                guidelines: t.prompt_guidelines.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// The RPC client closed stdin (or the loop ends on `ctx.shutdown()`): every extension
    /// round still pending, or started from now on, fails after [`host::EOF_GRACE`] if it
    /// has not answered, so a hook that never settles cannot hold the exit.
    pub fn input_closed(&self) {
        self.host.input_closed();
    }

    /// The host process (tests and benches).
    pub fn host(&self) -> &Arc<ExtensionHost> {
        &self.host
    }

    /// Whether any loaded extension handles `event`.
    pub fn handles(&self, event: &str) -> bool {
        self.loaded
            .read()
            .extensions
            .iter()
            .any(|e| e.events.iter().any(|x| x == event))
    }

    /// The extensions with handlers for `event`.
    fn handlers_of(&self, event: &str) -> Vec<String> {
        self.loaded
            .read()
            .extensions
            .iter()
            .filter(|e| e.events.iter().any(|x| x == event))
            .map(|e| e.path.clone())
            .collect()
    }

    /// The registered slash commands in load order, as `get_commands` lists them (§4.10):
    /// `source: "extension"`, `sourceInfo: {path, source, scope, origin: "top-level"}`.
    pub fn commands(&self) -> Vec<SlashCommand> {
        let mut out = vec![];
        for ext in &self.loaded.read().extensions {
            let src = self
                .sources
                .iter()
                .find(|s| s.path.to_string_lossy() == ext.path.as_str());
            for c in &ext.commands {
                out.push(SlashCommand {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    source: "extension".into(),
                    source_info: match src.and_then(|s| s.package.as_ref()) {
                        Some(info) => json!(info),
                        None => json!({
                            "path": ext.path,
                            "source": src.map_or("local", |s| s.source),
                            "scope": src.map_or("user", |s| s.scope),
                            "origin": "top-level",
                        }),
                    },
                });
            }
        }
        out
    }

    /// If `text` is `/<name> [args]` for a registered command: its name and trimmed args.
    pub fn command_of(&self, text: &str) -> Option<(String, String)> {
        let rest = text.strip_prefix('/')?;
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(i) => (&rest[..i], rest[i..].trim()),
            None => (rest, ""),
        };
        self.loaded
            .read()
            .extensions
            .iter()
            .any(|e| e.commands.iter().any(|c| c.name == name))
            .then(|| (name.to_string(), args.to_string()))
    }

    /// Runs a registered command to completion (dialogs included). A handler that throws has
    /// already been reported as `extension_error` (`command:<name>`, `command`) by the host.
    pub async fn run_command(&self, name: &str, args: &str) -> Result<(), HostError> {
        self.run_command_then(name, args, Box::new(|| {})).await
    }

    /// [`Extensions::run_command`]; `on_done` is called by the host's reader as soon as the
    /// handler's promise has settled, before anything the host sends after it (upstream
    /// writes a command's `handled` response right when the handler returns, so a run the
    /// handler started with `sendUserMessage` just before returning comes after it). When the
    /// command fails otherwise (host died, input closed), `on_done` is not called.
    pub async fn run_command_then(
        &self,
        name: &str,
        args: &str,
        on_done: host::ReplyHook,
    ) -> Result<(), HostError> {
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::Command {
            id,
            name: name.into(),
            args: args.into(),
        };
        match self.host.request_then(id, &msg, None, on_done).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.error(&format!("command:{name}"), "command", &e.to_string());
                Err(e)
            }
        }
    }

    /// Resolves once the host has sent everything it scheduled before now (a
    /// `sendUserMessage` made just before a command handler returned, which the host sends
    /// one macrotask later), and pi has handled it. A host that does not answer within the
    /// hook timeout is given up on.
    pub async fn quiesce(&self) {
        let id = self.host.next_id();
        let _ = self
            .host
            .request(id, &ToHost::Ping { id }, Some(self.hook_timeout))
            .await;
    }

    /// Runs the `input` handlers on a prompt's text and images (upstream `emitInput`):
    /// `source` is `rpc` (a client's prompt in RPC mode), `interactive` (print and JSON mode)
    /// or `extension` (`pi.sendUserMessage`); `streaming_behavior` is the prompt's
    /// `streamingBehavior` while a run is active, else `None` (left out of the event, as are
    /// no images). `None` = handled (nothing is sent); else the text and images to go on with,
    /// transformed or not (a transform without `images` keeps the images). A host that cannot
    /// answer leaves both unchanged (after an `extension_error`).
    pub async fn input(
        &self,
        text: String,
        images: Vec<ImageContent>,
        source: &str,
        streaming_behavior: Option<&str>,
    ) -> Option<(String, Vec<ImageContent>)> {
        let id = self.host.next_id();
        let mut event = json!({"type": "input", "text": text, "source": source});
        if let Value::Object(m) = &mut event {
            if !images.is_empty() {
                m.insert("images".into(), json!(images));
            }
            if let Some(b) = streaming_behavior {
                m.insert("streamingBehavior".into(), json!(b));
            }
        }
        let msg = ToHost::Event {
            id: Some(id),
            event,
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(v) => match v.get("action").and_then(Value::as_str) {
                Some("handled") => None,
                Some("transform") => {
                    let text = v
                        .get("text")
                        .and_then(Value::as_str)
                        .map_or(text, str::to_string);
                    let images = match v.get("images") {
                        Some(Value::Array(list)) => images_of(list).unwrap_or(images),
                        _ => images,
                    };
                    Some((text, images))
                }
                _ => Some((text, images)),
            },
            Err(e) => {
                for p in self.handlers_of("input") {
                    self.error(&p, "input", &e.to_string());
                }
                Some((text, images))
            }
        }
    }

    /// Forwards a client's `extension_ui_response`.
    pub fn ui_response(
        &self,
        id: String,
        value: Option<String>,
        confirmed: Option<bool>,
        cancelled: Option<bool>,
    ) {
        self.host.send(&ToHost::UiResponse {
            id,
            value,
            confirmed,
            cancelled,
        });
    }

    /// Emits `extension_error` (and writes it to stderr).
    fn error(&self, path: &str, event: &str, error: &str) {
        eprintln!("Extension error ({path}, {event}): {error}");
        (self.sink)(RpcEvent::ExtensionError {
            extension_path: path.into(),
            event: event.into(),
            error: error.into(),
        });
    }

    /// Wraps `sink` so that the session events extensions listen to are also sent to the host,
    /// in upstream's extension shape ([`events::EventShaper`]), without waiting for their
    /// handlers. The agent-loop events of [`events::AWAITED`] that are to wait for their
    /// handlers go through [`Extensions::notify_awaited`] first, which sends them itself: the
    /// tap then only passes them on. An awaited event that reaches the tap directly (emitted
    /// outside the loop, e.g. an idle `sendMessage`'s `message_start`) is sent without waiting.
    pub fn tap(self: &Arc<Self>, sink: EventSink) -> EventSink {
        let me = self.clone();
        Arc::new(move |ev: RpcEvent| {
            if !events::take_notified() {
                me.observe(&ev, false);
            }
            sink(ev)
        })
    }

    /// The agent-loop event `ev` held until its handlers are done (upstream "emit to extensions
    /// first", so what a handler does, a `notify`, `sendMessage`, …, reaches the client before
    /// the event): when `ev` is one of [`events::AWAITED`] that an extension handles (and the
    /// host lives), it is sent to the host now (the state mirror refreshed first, the turn
    /// counter advanced, as the tap does), and the returned future awaits the handlers' reply
    /// (at most the hook timeout; a host that fails to answer only ends the wait, logged) and
    /// then hands `ev` to `sink`, a sink built by [`Extensions::tap`], which then does not send
    /// it again. Dropped unfinished, the future still sends `ev` to the host (if it had not
    /// yet) and to `sink`, without waiting. `None`: nothing to wait for, `ev` was handed to
    /// `sink` now (which taps it as usual).
    pub fn notify_awaited(
        self: &Arc<Self>,
        ev: RpcEvent,
        sink: EventSink,
    ) -> Option<BoxFuture<'static, ()>> {
        let waits = events::awaited_kind(&ev).is_some_and(|t| self.handles(t));
        if !waits || self.host.is_dead() {
            sink(ev);
            return None;
        }
        let Some(event) = self.observe(&ev, true) else {
            sink(ev);
            return None;
        };
        let mut delivery = events::Delivery::new(ev, sink, self.host.clone(), event);
        let me = self.clone();
        Some(
            async move {
                if let Some(event) = delivery.take_unsent() {
                    let id = me.host.next_id();
                    let msg = ToHost::Event {
                        id: Some(id),
                        event,
                    };
                    if let Err(e) = me.host.request(id, &msg, Some(me.hook_timeout)).await {
                        tracing::warn!("extension notification: {e}");
                    }
                }
                delivery.deliver();
            }
            .boxed(),
        )
    }

    /// What the tap does for `ev` before the client sees it: refreshes the state mirror for
    /// the handlers that read the session, advances the turn counter, and sends the handled
    /// events to the host (without waiting). With `awaited`, an event of [`events::AWAITED`]
    /// that is handled is not sent: its shaped extension event is returned for the caller to
    /// send and wait for ([`Extensions::notify_awaited`]); `None` otherwise (and without
    /// `awaited`, always).
    fn observe(&self, ev: &RpcEvent, awaited: bool) -> Option<Value> {
        let counted = matches!(ev, RpcEvent::AgentStart | RpcEvent::TurnEnd { .. });
        let Ok(v) = serde_json::to_value(ev) else {
            return None;
        };
        let t = v.get("type").and_then(Value::as_str)?;
        let handled = self.handles(t);
        // Handlers of these read the session (entries, idle state) as it is now; `tool_call`
        // handlers see it through the assistant message that made the call (upstream
        // docs/extensions.md "ctx.sessionManager").
        let refresh = (handled
            && matches!(
                t,
                "agent_start"
                    | "agent_end"
                    | "agent_settled"
                    | "turn_start"
                    | "turn_end"
                    | "message_end"
            ))
            || (t == "message_end" && self.handles("tool_call"));
        if !(handled || refresh) || self.host.is_dead() {
            // The turn counter follows every run, handled or not.
            if counted {
                self.shaper.shape(ev, Value::Null);
            }
            return None;
        }
        // `turn_end` handlers ran at the turn boundary already (`AgentSession::turn_boundary`);
        // the count still advances. Likewise `message_end` handlers ran before the message was
        // final (`Extensions::message_end`).
        let wait = awaited
            && handled
            && events::AWAITED.contains(&t)
            && !matches!(t, "message_end" | "turn_end");
        if refresh {
            self.push_state();
        }
        if handled && t == "message_end" {
        } else if handled && t == "turn_end" {
            self.shaper.shape(ev, Value::Null);
        } else if handled {
            let event = self.shaper.shape(ev, v);
            if wait {
                return Some(event);
            }
            self.host.send(&ToHost::Event { id: None, event });
        } else if counted {
            self.shaper.shape(ev, Value::Null);
        }
        None
    }
}

#[async_trait::async_trait]
impl ToolCallHooks for Extensions {
    async fn before_tool_call(
        &self,
        call: &ToolCall,
        args: Value,
        parent: Option<&str>,
    ) -> BeforeToolCall {
        if !self.handles("tool_call") {
            return BeforeToolCall::Proceed(args);
        }
        let id = self.host.next_id();
        let mut event = json!({
            "type": "tool_call",
            "toolName": call.name,
            "toolCallId": call.id,
        });
        if let Some(p) = parent {
            event["parentToolCallId"] = json!(p);
        }
        event["input"] = args.clone();
        let msg = ToHost::ToolCall { id, event };
        let started = std::time::Instant::now();
        let reply = self.host.request(id, &msg, Some(self.hook_timeout)).await;
        // Read by bench/extension_hooks.py (PI_LOG=pi_coding_agent::extensions=debug).
        tracing::debug!(
            "tool_call hook round trip us={}",
            started.elapsed().as_micros()
        );
        match reply {
            Ok(v) => match serde_json::from_value::<ToolCallResult>(v) {
                Ok(r) if r.block => BeforeToolCall::Block(r.reason.unwrap_or_default()),
                Ok(r) => BeforeToolCall::Proceed(r.input.unwrap_or(args)),
                Err(e) => {
                    let text = format!("invalid tool_call result: {e}");
                    self.error("<runtime>", "tool_call", &text);
                    BeforeToolCall::Block(format!("Blocked: extension {text}"))
                }
            },
            Err(e) => {
                let text = e.to_string();
                let owners = self.handlers_of("tool_call");
                for p in &owners {
                    self.error(p, "tool_call", &text);
                }
                BeforeToolCall::Block(format!(
                    "Tool call blocked: the extension tool_call hook failed ({text})"
                ))
            }
        }
    }

    async fn after_tool_call(
        &self,
        call: &ToolCall,
        args: &Value,
        output: ToolOutput,
        is_error: bool,
        parent: Option<&str>,
    ) -> (ToolOutput, bool) {
        if !self.handles("tool_result") || self.host.is_dead() {
            return (output, is_error);
        }
        let id = self.host.next_id();
        let mut event = json!({
            "type": "tool_result",
            "toolName": call.name,
            "toolCallId": call.id,
        });
        if let Some(p) = parent {
            event["parentToolCallId"] = json!(p);
        }
        event["input"] = args.clone();
        event["content"] = json!(output.content);
        event["details"] = json!(output.details);
        if let Some(sc) = &output.structured_content {
            event["structuredContent"] = sc.clone();
        }
        event["isError"] = json!(is_error);
        let msg = ToHost::ToolResult { id, event };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(Value::Null) => (output, is_error),
            Ok(v) => {
                let mut out = output;
                if let Some(c) = v
                    .get("content")
                    .and_then(|c| serde_json::from_value(c.clone()).ok())
                {
                    out.content = c;
                    // Replacing `content` alone drops the machine-readable result, so a
                    // redaction cannot leak through it (upstream `ToolResultEvent`).
                    out.structured_content = None;
                }
                if let Some(s) = v.get("structuredContent") {
                    out.structured_content = (!s.is_null()).then(|| s.clone());
                }
                if let Some(d) = v.get("details") {
                    out.details = (!d.is_null()).then(|| d.clone());
                }
                let is_error = v
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(is_error);
                (out, is_error)
            }
            Err(e) => {
                for p in self.handlers_of("tool_result") {
                    self.error(&p, "tool_result", &e.to_string());
                }
                (output, is_error)
            }
        }
    }
}

/// Image blocks an `input` handler returned; `None` if one is not an image block. The block's
/// `type` is implied (left in, it would be kept as an unknown key and written twice).
fn images_of(list: &[Value]) -> Option<Vec<ImageContent>> {
    list.iter()
        .map(|i| {
            let mut i = i.clone();
            if let Value::Object(m) = &mut i {
                if m.remove("type").is_some_and(|t| t != "image") {
                    return None;
                }
            }
            serde_json::from_value::<ImageContent>(i).ok()
        })
        .collect()
}
