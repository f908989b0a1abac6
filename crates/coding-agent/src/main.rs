//! `pi`: the coding agent's command-line entry point (spec config.md §7).

use pi_ai::Model;
use pi_coding_agent::agent_session::factory::{SessionFactory, SessionRequest};
use pi_coding_agent::agent_session::host_calls;
use pi_coding_agent::agent_session::runtime::AgentSessionRuntime;
use pi_coding_agent::cli::{self, Cli};
use pi_coding_agent::config::{self, ModelRegistry, Settings};
use pi_coding_agent::extensions::wire::SessionEvent;
use pi_coding_agent::output::Output;
use pi_coding_agent::{extensions, file_args, package_cmd, packages, print_mode, procs, rpc};
use std::sync::{Arc, RwLock};

mod startup;

fn main() {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Subcommands are commands, never prompts (upstream-1.6-notes.md item 25).
    match cli::subcommand(args.first().map(String::as_str)) {
        // `pi models pull|list`: its own small command line (models_cmd.rs).
        Some(cli::Subcommand::Models) => {
            std::process::exit(pi_coding_agent::models_cmd::main(args.iter().cloned()));
        }
        Some(sub) => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            let agent_dir = config::agent_dir();
            if sub == cli::Subcommand::Auth {
                if let Some(code) = auth_with_extensions(&args, &cwd, &agent_dir) {
                    std::process::exit(code);
                }
            }
            std::process::exit(package_cmd::run(sub, &args, &cwd, &agent_dir));
        }
        None => {}
    }
    let cli = Cli::parse(&args);
    for d in &cli.diagnostics {
        match d.severity {
            cli::Severity::Error => eprintln!("Error: {}", d.message),
            cli::Severity::Warning => eprintln!("Warning: {}", d.message),
        }
    }
    if cli.has_errors() {
        std::process::exit(1);
    }
    if cli.version {
        println!("{}", env!("CARGO_PKG_VERSION"));
        return;
    }
    // `--help` lists the extensions' flags too, so it is answered once they have loaded
    // (startup.rs), as upstream's is.
    // Unknown `--flags` may belong to extensions (`pi.registerFlag`): they are matched once
    // the extensions have loaded (below), as upstream does.
    // Every child process can tell it runs under pi (upstream-1.6-notes.md item 21).
    std::env::set_var("AI_AGENT", "pi");
    std::env::set_var("PI_CODING_AGENT", "true");
    if cli.offline {
        // Same as PI_OFFLINE=1 for everything this process starts (set before any thread).
        std::env::set_var("PI_OFFLINE", "1");
        std::env::set_var("PI_SKIP_VERSION_CHECK", "1");
    }
    if let Some(input) = &cli.export {
        // `pi --export <session.jsonl> [output]` (config.md §11): the first message is the output.
        let input = std::path::Path::new(input);
        match pi_coding_agent::export::export_file(input, cli.messages.first().map(String::as_str))
        {
            Ok(path) => {
                println!("Exported to: {path}");
                return;
            }
            Err(e) => {
                eprintln!("Error: {e}");
                std::process::exit(1);
            }
        }
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .without_time()
        .with_target(false)
        .init();
    // One worker (issue 15: context switches while streaming). A session is one stream of work
    // at a time, and what runs in parallel has its own threads (grep/find's walker, tool output
    // readers, the blocking pool); with two workers, hyper's
    // connection task and the task reading the response body woke each other across threads
    // for every read (~3–5 switches per 20 streamed deltas, against ~0.3 with one worker).
    // The RPC reader runs on the main thread (`block_on`), so commands are read and answered
    // while the worker is busy.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("Error: could not start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async {
        install_signal_handlers();
        startup::run(cli).await
    });
    procs::kill_all();
    std::process::exit(code);
}

/// `pi auth login|logout|check` for a provider an extension registers (upstream 1.6 resolves
/// `pi auth` without extensions, so only its interactive `/login` reaches them; here the
/// global extensions — agent dir and global settings, the project untrusted as upstream's
/// auth commands load settings — are started first, so their providers are known). A login
/// of a provider with an `oauth` config runs its `login(callbacks)` in the host: `onAuth`
/// URLs and progress are printed, `onPrompt` answers are read from stdin one line each; the
/// credential is stored as upstream stores it (`{...credentials, type: "oauth"}`), then its
/// models are refreshed. `None`: not such a provider (the plain `pi auth` handles it).
fn auth_with_extensions(
    args: &[String],
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
) -> Option<i32> {
    let sub = args.get(1)?.as_str();
    let rest = &args[2..];
    let provider = match sub {
        "login" | "logout" => rest.iter().find(|a| !a.starts_with('-'))?.clone(),
        "check" => {
            let at = rest.iter().position(|a| a == "--provider")?;
            rest.get(at + 1)?.clone()
        }
        _ => return None,
    };
    if pi_ai::models::builtin_provider(&provider).is_some() {
        return None;
    }
    let base = ModelRegistry::load(agent_dir);
    if base.providers().contains(&provider) {
        return None;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let settings = Settings::load_with_trust(agent_dir, cwd, false);
        let registry = Arc::new(RwLock::new(base));
        let api_slot: extensions::api::RuntimeSlot = Arc::default();
        let no_cli = Cli::parse::<&str>(&[]);
        let start = ExtensionStart {
            cli: &no_cli,
            agent_dir,
            launch_cwd: cwd,
            mode: Mode::Print,
            registry: &registry,
            api_slot: &api_slot,
        };
        let (ext, _) = match start.start(cwd, &settings, false, Arc::new(|_| {})).await {
            Ok((Some(e), p)) => (e, p),
            Ok((None, _)) => return None,
            Err(code) => return Some(code),
        };
        let snapshot = registry.read().ok()?.clone();
        let known = snapshot.providers().contains(&provider)
            || snapshot.extension_oauth(&provider);
        if !known {
            return None;
        }
        if sub != "login" || rest.iter().any(|a| a == "--api-key") || !snapshot.extension_oauth(&provider) {
            let mut snapshot = snapshot;
            // `check` resolves the credential as a request would (unless `--no-refresh`): an
            // expired extension OAuth token is refreshed by the extension first.
            if sub == "check"
                && !rest.iter().any(|a| a == "--no-refresh")
                && snapshot.extension_oauth(&provider)
                && snapshot.auth().is_oauth(&provider)
            {
                let host = ext.host().clone();
                let (dir, id) = (agent_dir.to_path_buf(), provider.clone());
                // Blocking (it waits for the host): off the runtime's one worker.
                let refreshed = tokio::task::spawn_blocking(move || {
                    extensions::provider::oauth_request_key(&host, &dir, &id)
                })
                .await;
                if !matches!(refreshed, Ok(Ok(Some(_)))) {
                    // As a failed built-in refresh: the state is invalid.
                    if rest.iter().any(|a| a == "--json") {
                        let result = serde_json::json!({"status": "invalid", "provider": provider, "reason": "invalid_state"});
                        println!("{result}");
                    } else {
                        println!("invalid");
                    }
                    return Some(2);
                }
                snapshot.reload(agent_dir);
            }
            let code = pi_coding_agent::auth_cmd::run_with(&args[1..], agent_dir, Some(snapshot));
            return Some(code);
        }
        if rest.iter().filter(|a| !a.starts_with('-')).count() != 1
            || rest.iter().any(|a| a.starts_with('-') && a != "--no-browser")
        {
            eprintln!("Usage: pi auth login <provider> [--api-key] [--no-browser]");
            return Some(1);
        }
        let name = snapshot
            .extension_login_name(&provider)
            .unwrap_or_else(|| provider.clone());
        let entry = match extensions::provider::oauth_login(ext.host(), &provider).await {
            Ok(entry) => entry,
            Err(message) if message == "Login cancelled" => {
                eprintln!("Login cancelled.");
                return Some(1);
            }
            Err(message) => {
                eprintln!("Failed to log in to {name}: {message}");
                return Some(1);
            }
        };
        let stored = config::update_auth_file(agent_dir, |entries| {
            entries.insert(provider.clone(), serde_json::Value::Object(entry));
            true
        });
        match stored {
            Ok(path) => println!("Logged in to {name}. Credentials saved to {}", path.display()),
            Err(e) => {
                eprintln!("Failed to log in to {name}: {e}");
                return Some(1);
            }
        }
        // Upstream refreshes the provider's catalog after a login.
        if let Ok(mut reg) = registry.write() {
            reg.reload(agent_dir);
        }
        let errors = extensions::provider::refresh_models(
            ext.host(),
            &registry,
            Some(&provider),
            std::env::var_os("PI_OFFLINE").is_none(),
        )
        .await;
        if !errors.is_empty() {
            println!("The {name} model catalog could not be refreshed; pi retries on next start.");
        }
        Some(0)
    })
}

/// SIGTERM → exit 143, SIGHUP → exit 129, after killing running tool process groups
/// (spec rpc-protocol.md §1).
fn install_signal_handlers() {
    use tokio::signal::unix::{signal, SignalKind};
    for (kind, code) in [(SignalKind::terminate(), 143), (SignalKind::hangup(), 129)] {
        if let Ok(mut s) = signal(kind) {
            tokio::spawn(async move {
                if s.recv().await.is_some() {
                    procs::kill_all();
                    // Lines already queued still go out whole (a reader that stopped reading
                    // holds the exit for at most this long).
                    pi_coding_agent::output::flush_stdout_for_exit(
                        std::time::Duration::from_millis(200),
                    );
                    std::process::exit(code);
                }
            });
        }
    }
}

fn fail(msg: &str) -> i32 {
    eprintln!("Error: {msg}");
    1
}

/// Whether `a` and `b` name the same directory (canonical paths when they exist).
fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    let canon = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

/// `-e`, `--skill` and `--prompt-template` values as paths of the directory pi was started in
/// (upstream 1.6 main.ts `resolveCliPaths`): a relative value must not resolve inside a resumed
/// session's cwd, whose project may be untrusted. `~` paths and package sources stay as given.
fn cli_paths(launch_cwd: &std::path::Path, values: &[String]) -> Vec<String> {
    const SOURCES: [&str; 7] = [
        "npm:", "git:", "github:", "http:", "https:", "ssh:", "builtin:",
    ];
    values
        .iter()
        .map(|v| {
            let relative = std::path::Path::new(v).is_relative()
                && !v.starts_with('~')
                && !SOURCES.iter().any(|s| v.starts_with(s));
            if relative {
                launch_cwd.join(v).to_string_lossy().into_owned()
            } else {
                v.clone()
            }
        })
        .collect()
}

/// What starting the extensions needs (extensions/mod.rs).
struct ExtensionStart<'a> {
    cli: &'a Cli,
    agent_dir: &'a std::path::Path,
    /// The directory pi was started in: relative `-e` paths name files there.
    launch_cwd: &'a std::path::Path,
    mode: Mode,
    registry: &'a Arc<RwLock<ModelRegistry>>,
    api_slot: &'a extensions::api::RuntimeSlot,
}

impl ExtensionStart<'_> {
    /// Discovers the configured extensions for `cwd` (with its `settings` and trust decision
    /// `trusted`: project extensions and packages only when trusted; packages that are
    /// configured but missing are installed first, [`resolve_packages`]) and starts the host
    /// when there is one (`Ok(None)` otherwise: no Node, no cost). Their API calls go to the session runtime
    /// (`api_slot`) and, for `pi.registerProvider`, to the registry. `Err`: the exit code after
    /// the error was written (an extension not found, Node missing, the host failing).
    async fn start(
        &self,
        cwd: &std::path::Path,
        settings: &Settings,
        trusted: bool,
        sink: pi_coding_agent::agent_session::EventSink,
    ) -> Result<(Option<Arc<extensions::Extensions>>, RunPackages), i32> {
        let packages =
            resolve_packages(&self.cli.extension, cwd, self.agent_dir, settings, trusted);
        let from_packages = |list: &[packages::PackageResource]| {
            list.iter()
                .map(extensions::ExtensionSource::from_package)
                .collect()
        };
        let (ext_sources, missing) = extensions::discover(&extensions::DiscoverOptions {
            cli: cli_paths(self.launch_cwd, &packages.cli_paths),
            cli_packages: from_packages(&packages.temporary.extensions),
            packages: from_packages(&packages.configured.extensions),
            no_extensions: self.cli.no_extensions,
            settings: settings.resource_paths("extensions"),
            agent_dir: self.agent_dir.to_path_buf(),
            cwd: cwd.to_path_buf(),
            project_trusted: trusted,
        });
        if !missing.is_empty() {
            return Err(fail(&format!(
                "extension not found: {}",
                missing.join(", ")
            )));
        }
        if ext_sources.is_empty() {
            return Ok((None, packages));
        }
        let mode_name = match self.mode {
            // ACP mode has a client that answers dialogs, as RPC mode (`ctx.hasUI`).
            Mode::Rpc | Mode::Acp => "rpc",
            Mode::Json => "json",
            Mode::Print => "print",
        };
        let on_call =
            extensions::provider::call_handler(self.registry.clone(), self.api_slot.clone());
        let extensions = extensions::Extensions::start(
            ext_sources,
            mode_name,
            cwd,
            sink,
            self.api_slot.clone(),
            on_call,
        )
        .await
        .map_err(|e| fail(&e.to_string()))?;
        for w in extensions.warnings() {
            config::warn(&w);
        }
        // A model refresh once the extensions registered (upstream awaits one before the
        // session starts): `refreshModels` replaces its registration's models.
        let offline = std::env::var_os("PI_OFFLINE").is_some_and(|v| !v.is_empty());
        for (provider, error) in
            extensions::provider::refresh_models(extensions.host(), self.registry, None, !offline)
                .await
        {
            config::warn(&format!("Model refresh failed for {provider}: {error}"));
        }
        Ok((Some(extensions), packages))
    }
}

/// Where a mode writes: stdout, the event sink (tapped by extensions when loaded), and the slot
/// through which extension API calls reach the RPC runtime.
struct ModeIo {
    out: Output,
    sink: pi_coding_agent::agent_session::EventSink,
    api_slot: extensions::api::RuntimeSlot,
    /// ACP mode: where the extension host's own events go once the connection is up.
    relay: pi_coding_agent::acp::EventRelay,
    /// ACP mode: the session folder override.
    session_dir: Option<std::path::PathBuf>,
    /// ACP mode: the model registry the extension hosts of later sessions register into.
    registry: extensions::provider::SharedRegistry,
}

async fn run_mode(
    mode: Mode,
    factory: SessionFactory,
    request: SessionRequest,
    io: ModeIo,
    launch_cwd: &std::path::Path,
    cli: &Cli,
    stdin_tty: bool,
) -> i32 {
    let ModeIo {
        out,
        sink,
        api_slot,
        relay,
        session_dir,
        registry,
    } = io;
    match mode {
        Mode::Acp => {
            // Every ACP session builds its own runtime (acp/sessions.rs), with its own sink.
            let _ = sink;
            let start = pi_coding_agent::acp::AcpStart {
                factory,
                request,
                api_slot,
                relay,
                session_dir,
                registry,
                mcp_filter: (!cli.no_mcp).then(|| {
                    pi_coding_agent::mcp::ToolFilter::from_cli(
                        cli.tools.as_deref(),
                        cli.exclude_tools.as_deref(),
                    )
                }),
            };
            match pi_coding_agent::acp::run(start).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("Error: {e}");
                    1
                }
            }
        }
        Mode::Rpc => {
            let runtime = AgentSessionRuntime::new(factory, request, sink);
            host_calls::bind(&api_slot, runtime.clone());
            extensions_started(&runtime).await;
            let result = rpc::run(runtime.clone(), out.clone()).await;
            extensions_stopping(&runtime).await;
            let code = match result {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("Error: {e}");
                    1
                }
            };
            out.flush();
            code
        }
        Mode::Json | Mode::Print => {
            // Piped stdin and @file arguments form the first message (file_args.rs).
            let stdin = if stdin_tty {
                None
            } else {
                file_args::read_piped_stdin()
            };
            let files = match file_args::process_file_args(launch_cwd, &cli.file_args) {
                Ok(f) => f,
                Err(e) => return fail(&e.to_string()),
            };
            let mut messages = cli.messages.clone();
            if let Some(first) = file_args::initial_message(stdin, &files, &mut messages) {
                messages.insert(0, first);
            }
            // A runtime, as in RPC mode: extension API calls (`sendMessage`, `appendEntry`,
            // `ctx.newSession()`, ...) reach the session through it.
            let runtime = AgentSessionRuntime::new(factory, request, sink);
            host_calls::bind(&api_slot, runtime.clone());
            let json = mode == Mode::Json;
            if json {
                out.raw_line(runtime.session().header_json().to_string());
            }
            extensions_started(&runtime).await;
            let code = print_mode::run_with_images(&runtime, messages, files.images, json).await;
            extensions_stopping(&runtime).await;
            out.flush();
            code
        }
    }
}

/// Tells the extensions the session has started (`session_start {reason:"startup"}`), then
/// lets them contribute resources (upstream `bindExtensions`, every mode).
async fn extensions_started(runtime: &AgentSessionRuntime) {
    let session = runtime.session();
    if let Some(ext) = session.extensions() {
        ext.emit_session_event(&SessionEvent::SessionStart {
            reason: "startup",
            previous_session_file: None,
        })
        .await;
        ext.discover_resources(session.cwd(), "startup").await;
    }
}

/// `session_shutdown {reason:"quit"}` to the extensions of the current session.
async fn extensions_stopping(runtime: &AgentSessionRuntime) {
    if let Some(ext) = runtime.session().extensions() {
        ext.emit_session_event(&SessionEvent::SessionShutdown {
            reason: "quit",
            target_session_file: None,
        })
        .await;
    }
}

/// The provider HTTP settings: `httpIdleTimeoutMs` and `retry.provider.*` (upstream 1.6
/// docs/settings.md; `retry.provider.timeoutMs` defaults to the idle timeout).
fn http_options(settings: &pi_coding_agent::config::Settings) -> pi_ai::providers::HttpOptions {
    let idle = settings.http_idle_timeout_ms();
    let retry = settings.retry();
    pi_ai::providers::HttpOptions {
        idle_timeout_ms: idle,
        request_timeout_ms: retry.provider_timeout_ms.unwrap_or(idle),
        max_retries: u32::try_from(retry.provider_max_retries).unwrap_or(u32::MAX),
        max_retry_delay_ms: retry.provider_max_retry_delay_ms,
        ..Default::default()
    }
}

/// Finds the adapter for a model's `api`: `"local-gguf"` → one shared
/// [`pi_local::LocalProvider`] whose bare model ids resolve to `<agent_dir>/models/<id>.gguf`
/// (issue 3; `local` feature), anything else → the built-in HTTP adapters, which share one
/// client with `http`'s timeouts (settings `httpIdleTimeoutMs`).
fn provider_resolver(
    agent_dir: &std::path::Path,
    http: &pi_ai::providers::HttpOptions,
) -> pi_coding_agent::agent_session::ProviderResolver {
    let builtin = pi_ai::providers::BuiltinProviders::new(http);
    #[cfg(feature = "local")]
    {
        let local: Arc<dyn pi_ai::Provider> = Arc::new(pi_local::LocalProvider::with_config(
            pi_local::LocalConfig {
                models_dir: Some(agent_dir.join("models")),
                ..pi_local::LocalConfig::default()
            },
        ));
        Arc::new(move |m: &Model| {
            if m.api == pi_local::API {
                Some(local.clone())
            } else {
                builtin.for_api(&m.api)
            }
        })
    }
    #[cfg(not(feature = "local"))]
    {
        let _ = agent_dir;
        Arc::new(move |m: &Model| builtin.for_api(&m.api))
    }
}

/// `pi --list-models [search]` (upstream 1.6 `cli/list-models.ts`): the available models, kept
/// when every search token fuzzy-matches `"<provider> <id>"` ([`pi_coding_agent::list_models`]),
/// sorted by provider then id, as a padded table.
fn list_models(registry: &ModelRegistry, search: &cli::ListModels) -> i32 {
    let available = registry.available();
    if available.is_empty() {
        println!("{}", config::no_models_available_message());
        return 0;
    }
    let search = match search {
        cli::ListModels::All => None,
        cli::ListModels::Search(s) => Some(s.as_str()),
    };
    match pi_coding_agent::list_models::table(&available, search) {
        Some(table) => print!("{table}"),
        None => println!("No models matching \"{}\"", search.unwrap_or_default()),
    }
    0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Rpc,
    /// `--mode acp`: the Agent Client Protocol (src/acp).
    Acp,
    Json,
    Print,
}

/// The packages of this run (packages/): the configured ones (agent dir; the project's only
/// when trusted) and the `-e` values that are package sources (npm, git) rather than paths.
struct RunPackages {
    /// `-e` values that are local paths.
    cli_paths: Vec<String>,
    /// What the `-e` package sources provide (scope `temporary`).
    temporary: packages::ResolvedPackages,
    /// What the configured `packages` provide.
    configured: packages::ResolvedPackages,
}

impl RunPackages {
    fn skills(&self) -> Vec<packages::PackageResource> {
        let mut v = self.configured.skills.clone();
        v.extend(self.temporary.skills.iter().cloned());
        v
    }

    fn prompts(&self) -> Vec<packages::PackageResource> {
        let mut v = self.configured.prompts.clone();
        v.extend(self.temporary.prompts.iter().cloned());
        v
    }
}

/// Resolves (installing what is missing, unless offline) the run's packages; a package that
/// cannot be installed is warned about on stderr and skipped, as upstream.
fn resolve_packages(
    extension_args: &[String],
    cwd: &std::path::Path,
    agent_dir: &std::path::Path,
    settings: &Settings,
    trusted: bool,
) -> RunPackages {
    let (cli_paths, sources): (Vec<String>, Vec<String>) = extension_args
        .iter()
        .cloned()
        .partition(|e| packages::source::is_local_path(e));
    let npm_command: Vec<String> = settings
        .get("npmCommand")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let pm = packages::PackageManager::new(
        cwd,
        agent_dir,
        trusted,
        npm_command,
        packages::ChildOutput::Stderr,
    );
    let configured = pm.resolve_configured(settings.global(), trusted.then(|| settings.project()));
    let temporary = pm.resolve_temporary(&sources);
    for f in configured.failures.iter().chain(&temporary.failures) {
        config::warn(&f.warning());
    }
    RunPackages {
        cli_paths,
        temporary,
        configured,
    }
}
