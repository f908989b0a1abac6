//! `pi`: the coding agent's command-line entry point (spec config.md §7).

use clap::Parser;
use pi_ai::{Model, ThinkingLevel};
use pi_coding_agent::agent_session::factory::{SessionFactory, SessionRequest};
use pi_coding_agent::agent_session::runtime::{record_start, AgentSessionRuntime};
use pi_coding_agent::agent_session::{RequestCredentials, SessionServices};
use pi_coding_agent::cli::Cli;
use pi_coding_agent::config::{self, InitialModelOptions, ModelRegistry, Settings};
use pi_coding_agent::output::Output;
use pi_coding_agent::resources::ResourceOptions;
use pi_coding_agent::session::{resolve, EntryKind};
use pi_coding_agent::{print_mode, procs, rpc, tools};
use std::sync::{Arc, RwLock};

fn main() {
    // `pi models pull|list`: its own small command line (models_cmd.rs).
    if std::env::args_os().nth(1).is_some_and(|a| a == "models") {
        let args = std::env::args_os().skip(1);
        std::process::exit(pi_coding_agent::models_cmd::main(args));
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 1 } else { 0 });
        }
    };
    if cli.version {
        println!("{}", env!("CARGO_PKG_VERSION"));
        return;
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
        run(cli).await
    });
    procs::kill_all();
    std::process::exit(code);
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

async fn run(cli: Cli) -> i32 {
    if let Some(m) = cli.mode.as_deref() {
        if !matches!(m, "rpc" | "json" | "text") {
            return fail(&format!("Unknown mode \"{m}\": use text, json or rpc"));
        }
    }
    let mode = match (cli.mode.as_deref(), cli.print) {
        (Some("rpc"), _) => Mode::Rpc,
        (Some("json"), _) => Mode::Json,
        (_, true) | (Some("text"), _) => Mode::Print,
        (None, false) if !cli.messages.is_empty() => Mode::Print,
        _ => Mode::Rpc,
    };
    if mode == Mode::Rpc && cli.messages.iter().any(|m| m.starts_with('@')) {
        return fail("@file arguments are not supported in RPC mode");
    }
    if !cli.extension.is_empty() {
        config::warn("extensions are not supported by this build; ignoring -e/--extension");
    }
    let cwd = match std::env::current_dir() {
        Ok(c) => c,
        Err(e) => return fail(&format!("cannot read the working directory: {e}")),
    };
    let agent_dir = config::agent_dir();
    config::ensure_agent_files(&agent_dir);
    let settings = Settings::load(&agent_dir, &cwd);
    // A models.json problem is reported on stderr by the loader itself.
    let mut registry = ModelRegistry::load(&agent_dir);

    let cli_thinking = match cli.thinking.as_deref() {
        None => None,
        Some(t) => match ThinkingLevel::parse(t) {
            Some(l) => Some(l),
            None => {
                config::warn(&format!(
                    "Invalid thinking level \"{t}\"; valid levels: off, minimal, low, medium, high, xhigh, max"
                ));
                None
            }
        },
    };

    // Session store (spec sessions.md §1.4, §1.6; session/resolve.rs).
    let env_session_dir = std::env::var("PI_CODING_AGENT_SESSION_DIR").ok();
    let session_dir = resolve::session_dir_override(
        cli.session_dir.as_deref(),
        env_session_dir.as_deref(),
        settings.session_dir(),
        &cwd,
    );
    let flags = resolve::SessionFlags {
        continue_recent: cli.continue_recent,
        session: cli.session.clone(),
        session_id: cli.session_id.clone(),
        fork: cli.fork.clone(),
        no_session: cli.no_session,
    };
    let session =
        match resolve::open_startup_session(&flags, &cwd, &agent_dir, session_dir.as_deref()) {
            Ok(s) => {
                if let Some(w) = &s.warning {
                    config::warn(w);
                }
                s.store
            }
            Err(e) => return fail(&e.to_string()),
        };
    if let Err(e) = resolve::check_session_cwd(&session, &cwd) {
        return fail(&e.to_string());
    }
    // A resumed session runs in its recorded cwd.
    let cwd = session.cwd().to_path_buf();
    // What the file says about model and thinking level (spec sessions.md §7, §9.2).
    let (resumed_model, resumed_level, has_messages) = session.resume_settings();
    let has_level_entry = session
        .branch()
        .iter()
        .any(|e| matches!(e.kind, EntryKind::ThinkingLevelChange { .. }));
    let session_model = resumed_model
        .filter(|_| has_messages)
        .map(|m| (m.provider, m.model_id));
    let session_thinking_level = if has_messages && has_level_entry {
        ThinkingLevel::parse(&resumed_level)
    } else {
        None
    };

    // `--models` (else settings `enabledModels`) scopes startup selection and cycle_model.
    let scope_patterns: Vec<String> = match &cli.models {
        Some(list) => list
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        None => settings.enabled_models().unwrap_or_default(),
    };
    let (scoped_models, scope_warnings) =
        config::resolve_model_scope(&scope_patterns, &registry.available());
    for w in &scope_warnings {
        config::warn(w);
    }
    let initial = match config::find_initial_model(
        &InitialModelOptions {
            scoped_models: scoped_models.clone(),
            cli_provider: cli.provider.clone(),
            cli_model: cli.model.clone(),
            cli_thinking,
            is_continuing: has_messages,
            session_model,
            session_thinking_level,
            default_provider: settings.default_provider().map(str::to_string),
            default_model: settings.default_model().map(str::to_string),
            default_thinking_level: settings.default_thinking_level(),
        },
        &registry,
    ) {
        Ok(i) => i,
        Err(e) => return fail(&e),
    };
    if let Some(w) = &initial.warning {
        config::warn(w);
    }
    if let (Some(key), Some(model)) = (&cli.api_key, &initial.model) {
        registry.set_runtime_api_key(&model.provider, key.clone());
    }
    if initial.model.is_none() {
        config::warn(&config::no_models_available_message());
        if mode != Mode::Rpc {
            eprintln!("{}", config::get_a_model_guidance(&agent_dir));
            return 1;
        }
    }

    // Tools, resources and the session factory.
    let tool_names: Vec<String> = if cli.no_tools {
        vec![]
    } else if let Some(list) = &cli.tools {
        list.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    } else {
        tools::DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect()
    };
    for name in &tool_names {
        if !tools::ALL_TOOLS.contains(&name.as_str()) {
            config::warn(&format!("Unknown tool \"{name}\" ignored"));
        }
    }
    let mut session = session;
    if let Some(name) = &cli.name {
        if let Err(e) = session.append_session_info(name) {
            config::warn(&format!("could not record the session name: {e}"));
        }
    }
    if session.entries().is_empty() {
        record_start(&mut session, initial.model.as_ref(), initial.thinking_level);
    } else if has_messages && !has_level_entry {
        // An older session without a recorded level gets the one it now runs at (upstream
        // sdk.ts); a session that has one is resumed without writing anything.
        if let Err(e) = session.append_thinking_level_change(initial.thinking_level.as_str()) {
            config::warn(&format!("could not record the thinking level: {e}"));
        }
    }

    let registry = Arc::new(RwLock::new(registry));
    let reg_models = registry.clone();
    let reg_keys = registry.clone();
    let services = SessionServices {
        available_models: Arc::new(move || {
            reg_models.read().map(|r| r.available()).unwrap_or_default()
        }),
        scoped_models,
        api_key: Arc::new(move |m: &Model| {
            let reg = reg_keys.read().map_err(|e| e.to_string())?;
            let auth = reg.request_auth(m)?;
            Ok(RequestCredentials {
                api_key: auth.api_key,
                headers: auth
                    .headers
                    .into_iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
                    .collect(),
                keyless: auth.keyless,
            })
        }),
        provider: provider_resolver(
            &agent_dir,
            &pi_ai::providers::HttpOptions {
                idle_timeout_ms: settings.http_idle_timeout_ms(),
                ..Default::default()
            },
        ),
        settings: Arc::new(parking_lot::Mutex::new(settings.clone())),
    };
    let factory = SessionFactory {
        services,
        agent_dir: agent_dir.clone(),
        tool_names,
        tool_options: tools::ToolOptions {
            bash: tools::bash::BashToolOptions {
                command_prefix: settings.shell_command_prefix().map(str::to_string),
                shell_path: settings.shell_path().map(Into::into),
                bin_dir: Some(agent_dir.join("bin")),
                extra_env: vec![],
            },
        },
        resource_options: ResourceOptions {
            no_context_files: cli.no_context_files,
            system_prompt: cli.system_prompt.clone(),
            append_system_prompt: cli.append_system_prompt.clone(),
        },
        bash_options: tools::shell::UserBashOptions {
            command_prefix: settings.shell_command_prefix().map(str::to_string),
            shell_path: settings.shell_path().map(Into::into),
            bin_dir: Some(agent_dir.join("bin")),
        },
    };
    let request = SessionRequest {
        cwd: cwd.clone(),
        store: session,
        model: initial.model.clone(),
        thinking_level: initial.thinking_level,
    };

    match mode {
        Mode::Rpc => {
            let out = Output::stdout();
            let runtime = AgentSessionRuntime::new(factory, request, out.sink());
            let code = match rpc::run(runtime, out.clone()).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("Error: {e}");
                    1
                }
            };
            out.flush();
            code
        }
        Mode::Json => {
            let out = Output::stdout();
            let session = factory.create(request, out.sink());
            out.raw_line(session.header_json().to_string());
            let code = print_mode::run(&session, cli.messages.clone(), true).await;
            out.flush();
            code
        }
        Mode::Print => {
            let session = factory.create(request, Arc::new(|_| {}));
            print_mode::run(&session, cli.messages.clone(), false).await
        }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Rpc,
    Json,
    Print,
}
