//! Starting the extension host and loading the extensions ([`Extensions::start`]), the
//! snapshots of what they registered later, the tool rebuild that follows, start-up warnings,
//! and reloading them ([`Extensions::reload`]).

use super::host::{CallHandler, ExtensionHost, HostError};
use super::wire::{self, LoadResult, ToHost};
use super::{api, events, sdk, ExtensionSource, Extensions, DEFAULT_HOOK_TIMEOUT};
use crate::protocol::rpc::EventSink;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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

/// What failed in `loaded`: each module that threw or did not import (upstream's loader wraps
/// the error in `Failed to load extension: `), then each tool-name conflict (bare).
fn load_failures(loaded: &LoadResult) -> Vec<wire::LoadError> {
    let mut failures: Vec<wire::LoadError> = loaded
        .errors
        .iter()
        .map(|e| wire::LoadError {
            path: e.path.clone(),
            error: format!("Failed to load extension: {}", e.error),
        })
        .collect();
    failures.extend(tool_conflicts(loaded));
    failures
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
        let failures = load_failures(&loaded);
        if !failures.is_empty() {
            return Err(StartError::LoadFailed(failures));
        }
        let ext = Arc::new(Extensions {
            host,
            sources,
            mode: mode.to_string(),
            flag_values: Mutex::default(),
            loaded: RwLock::new(loaded),
            sink,
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            shaper: events::EventShaper::default(),
            runtime,
            pushed: Mutex::new(None),
            discovered: RwLock::default(),
            reload_failures: RwLock::default(),
        });
        let weak = Arc::downgrade(&ext);
        ext.host.on_registered(Arc::new(move |list| {
            if let Some(ext) = weak.upgrade() {
                ext.apply_registered(list);
            }
        }));
        Ok(ext)
    }

    /// Another host running the same extensions ([`Extensions::start`] with the sources and
    /// mode of this one, in `cwd`), given the flag values this one was given
    /// ([`Extensions::apply_flags`]): a fresh instance of every extension, with its own state,
    /// whose API calls go to `runtime` through `on_call`. ACP mode gives every session after
    /// the first its own (upstream: pi-acp runs one `pi --mode rpc` per session). Errors as
    /// [`Extensions::start`].
    pub async fn start_another(
        &self,
        cwd: &Path,
        sink: EventSink,
        runtime: api::RuntimeSlot,
        on_call: CallHandler,
    ) -> Result<Arc<Self>, StartError> {
        let other = Self::start(
            self.sources.clone(),
            &self.mode,
            cwd,
            sink,
            runtime,
            on_call,
        )
        .await?;
        let values = self.flag_values.lock().clone();
        if !values.is_empty() {
            other.host.send(&ToHost::Flags {
                values: values.clone(),
            });
            *other.flag_values.lock() = values;
        }
        Ok(other)
    }

    /// Stops the host process ([`ExtensionHost::shutdown`]); returns once it has exited.
    pub async fn shutdown(&self) {
        self.host.shutdown().await;
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
    pub(super) fn rebuild_loadout(&self, change: impl FnOnce() -> Vec<String>) {
        let runtime = self.runtime.get();
        let default_before = runtime.is_none_or(|r| r.on_default_tools());
        let added = change();
        let Some(runtime) = runtime else {
            return;
        };
        runtime.rebuild_tools(default_before, added);
        self.push_state();
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

    /// A fresh instance of every extension (after a session replacement or `ctx.reload()`,
    /// as upstream rebinds them): the host imports them again and runs their factories; their
    /// commands, tools and handlers replace the old ones.
    ///
    /// Fails closed where upstream 1.6 fails open: upstream writes a failed load to stderr
    /// (`Error: Failed to load extension "<path>": …`, rpc-mode's `takeUnreportedDiagnostics`)
    /// and serves on without the extension, so a permission gate that throws on its second
    /// load lets every tool call through. Here the failure is written so to stderr, emitted as
    /// `extension_error` (event `load`), and every tool call is blocked
    /// ([`Extensions::reload_failures`]) until a reload succeeds. A host that cannot reload
    /// (died, timed out, answered nonsense) counts as a failure too, and is also returned.
    pub async fn reload(&self) -> Result<(), HostError> {
        let id = self.host.next_id();
        let reply = self
            .host
            .request(id, &ToHost::Reload { id }, Some(Duration::from_secs(60)))
            .await
            .and_then(|v| {
                serde_json::from_value::<LoadResult>(v)
                    .map_err(|e| HostError::Handler(format!("bad reload reply: {e}")))
            });
        let loaded = match reply {
            Ok(l) => l,
            Err(e) => {
                let failure = wire::LoadError {
                    path: "<extension host>".into(),
                    error: format!("the extensions could not be reloaded: {e}"),
                };
                eprintln!(
                    "Error: Failed to load extension \"{}\": {}",
                    failure.path, failure.error
                );
                self.error(&failure.path, "load", &failure.error);
                *self.reload_failures.write() = vec![failure];
                return Err(e);
            }
        };
        let failures = load_failures(&loaded);
        for e in &failures {
            eprintln!(
                "Error: Failed to load extension \"{}\": {}",
                e.path, e.error
            );
            self.error(&e.path, "load", &e.error);
        }
        *self.loaded.write() = loaded;
        *self.reload_failures.write() = failures;
        Ok(())
    }

    /// The extensions that failed to load at the last reload (`path`, upstream's error text);
    /// empty when it succeeded. While any is listed, every tool call is blocked.
    pub fn reload_failures(&self) -> Vec<wire::LoadError> {
        self.reload_failures.read().clone()
    }

    /// The RPC client closed stdin (or the loop ends on `ctx.shutdown()`): every extension
    /// round still pending, or started from now on, fails after [`host::EOF_GRACE`] if it
    /// has not answered, so a hook that never settles cannot hold the exit.
    pub fn input_closed(&self) {
        self.host.input_closed();
    }
}
