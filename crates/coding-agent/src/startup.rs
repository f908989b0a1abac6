//! The composition root of a `pi` run (spec config.md §7): [`Startup`] is built from the
//! parsed command line and puts the run together step by step — mode, launch directory and
//! its trust, the session file, extensions, the initial model, then the session services and
//! factory — before [`crate::run_mode`] runs the mode. Each step that can stop the run returns
//! `Err(exit code)` after writing its error to stderr.

use crate::{cli_paths, fail, http_options, list_models, provider_resolver, same_dir};
use crate::{ExtensionStart, Mode, ModeIo, RunPackages};
use pi_ai::{Model, ThinkingLevel};
use pi_coding_agent::agent_session::factory::{SessionFactory, SessionRequest};
use pi_coding_agent::agent_session::runtime::record_start;
use pi_coding_agent::agent_session::{
    EventSink, KeyUse, PermissionGate, RequestCredentials, SessionServices,
};
use pi_coding_agent::cli::Cli;
use pi_coding_agent::config::{
    self, InitialModel, InitialModelOptions, ModelRegistry, ScopedModel, Settings,
};
use pi_coding_agent::output::Output;
use pi_coding_agent::permissions::PermissionPolicy;
use pi_coding_agent::resources::ResourceOptions;
use pi_coding_agent::session::{resolve, SessionManager};
use pi_coding_agent::{extensions, tools, trust};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// Runs `pi` for the parsed `cli` (no subcommand): the exit code.
pub(crate) async fn run(cli: Cli) -> i32 {
    match Startup::new(cli).and_then(Startup::check) {
        Ok(startup) => startup.run().await.unwrap_or_else(|code| code),
        Err(code) => code,
    }
}

/// What the launch decides before the session is chosen: mode, directories, trust, settings
/// and the shared model registry.
pub(crate) struct Startup {
    cli: Cli,
    mode: Mode,
    stdin_tty: bool,
    /// The directory pi was started in.
    launch_cwd: PathBuf,
    agent_dir: PathBuf,
    trust_policy: trust::TrustPolicy,
    launch_decision: trust::TrustDecision,
    /// Settings as the launch directory's trust allows.
    launch_settings: Settings,
    /// Shared from here on: extension providers (`pi.registerProvider`) are merged into it as
    /// they register. A models.json problem is reported on stderr by the loader itself.
    registry: Arc<RwLock<ModelRegistry>>,
    api_slot: extensions::api::RuntimeSlot,
}

/// The session to run and what its file says (spec sessions.md §1.4, §7, §9.2).
struct Opened {
    session: SessionManager,
    /// The session's cwd (a resumed session runs in its recorded one).
    cwd: PathBuf,
    trust_decision: trust::TrustDecision,
    /// Settings of the session's cwd.
    settings: Settings,
    has_messages: bool,
    has_level_entry: bool,
    session_model: Option<(String, String)>,
    session_thinking_level: Option<ThinkingLevel>,
}

/// Upstream: `--mode` wins; else `-p` or a non-TTY stdin/stdout means print mode; else the
/// interactive TUI, which this build does not have: messages are answered as in print mode
/// and a bare `pi` on a terminal speaks RPC.
fn mode_of(cli: &Cli, stdin_tty: bool, stdout_tty: bool) -> Mode {
    match (cli.mode.as_deref(), cli.print) {
        (Some("rpc"), _) => Mode::Rpc,
        (Some("acp"), _) => Mode::Acp,
        (Some("json"), _) => Mode::Json,
        (_, true) | (Some("text"), _) => Mode::Print,
        _ if !stdin_tty || !stdout_tty => Mode::Print,
        _ if !cli.messages.is_empty() || !cli.file_args.is_empty() => Mode::Print,
        _ => Mode::Rpc,
    }
}

impl Startup {
    /// Mode, launch directory, agent directory (its files created), trust and settings.
    fn new(cli: Cli) -> Result<Self, i32> {
        use std::io::IsTerminal;
        let stdin_tty = std::io::stdin().is_terminal();
        let mode = mode_of(&cli, stdin_tty, std::io::stdout().is_terminal());
        let launch_cwd = std::env::current_dir()
            .map_err(|e| fail(&format!("cannot read the working directory: {e}")))?;
        let agent_dir = config::agent_dir();
        config::ensure_agent_files(&agent_dir);
        // Project trust decides whether `.pi/settings.json` and the other protected project
        // files are read (trust.rs); `defaultProjectTrust` comes from the agent-dir settings.
        let global_settings = Settings::load_with_trust(&agent_dir, &launch_cwd, false);
        let trust_policy = trust::TrustPolicy {
            cli_override: cli.approve,
            default_trust: global_settings.default_project_trust().to_string(),
            store: trust::TrustStore::new(&agent_dir),
            home: config::home_dir(),
        };
        // The launch directory's decision serves only to find the session (`sessionDir` of a
        // trusted launch project); a resumed session may run elsewhere, and what runs there is
        // decided for that directory (issue 28).
        let launch_decision = trust_policy.decide(&launch_cwd);
        let launch_settings = if launch_decision.trusted {
            Settings::load(&agent_dir, &launch_cwd)
        } else {
            global_settings
        };
        Ok(Startup {
            mode,
            stdin_tty,
            registry: Arc::new(RwLock::new(ModelRegistry::load(&agent_dir))),
            api_slot: Arc::default(),
            cli,
            launch_cwd,
            agent_dir,
            trust_policy,
            launch_decision,
            launch_settings,
        })
    }

    /// Refuses what the mode cannot take (`@file` arguments in RPC mode).
    fn check(self) -> Result<Self, i32> {
        if self.mode == Mode::Rpc && !self.cli.file_args.is_empty() {
            return Err(fail("@file arguments are not supported in RPC mode"));
        }
        if self.mode == Mode::Acp && !self.cli.file_args.is_empty() {
            return Err(fail("@file arguments are not supported in ACP mode"));
        }
        Ok(self)
    }

    fn extension_start(&self) -> ExtensionStart<'_> {
        ExtensionStart {
            cli: &self.cli,
            agent_dir: &self.agent_dir,
            launch_cwd: &self.launch_cwd,
            mode: self.mode,
            registry: &self.registry,
            api_slot: &self.api_slot,
        }
    }

    /// The configured extensions started at the launch folder with no event sink, for
    /// `--help` (their flags) and `--list-models` (their providers); the error is the exit code
    /// of an extension that failed to load.
    async fn start_extensions_for_listing(
        &self,
    ) -> Result<(Option<Arc<extensions::Extensions>>, RunPackages), i32> {
        self.extension_start()
            .start(
                &self.launch_cwd,
                &self.launch_settings,
                self.launch_decision.trusted,
                Arc::new(|_| {}),
            )
            .await
    }

    /// The whole run after the launch: `--help`, `--list-models`, or the session in its mode.
    async fn run(self) -> Result<i32, i32> {
        if self.cli.help {
            // The help lists the flags the configured extensions register (upstream main.ts
            // loads them before `printHelp`).
            let extensions = self.start_extensions_for_listing().await?;
            let flags = extensions.0.map(|e| e.help_section()).unwrap_or_default();
            print!("{}", pi_coding_agent::cli::help_with(&flags));
            return Ok(0);
        }
        if let Some(search) = &self.cli.list_models {
            // Extension providers are listed too (upstream loads extensions for --list-models).
            let _extensions = self.start_extensions_for_listing().await?;
            let reg = self
                .registry
                .read()
                .map_err(|_| fail("the model registry is unavailable"))?;
            return Ok(list_models(&reg, search));
        }
        let mut opened = self.open_session()?;
        // A sandbox that was asked for and cannot be had stops the run (never unsandboxed).
        let sandbox = tools::sandbox::SandboxPolicy::from_setting(
            opened.settings.get(tools::sandbox::SETTINGS_KEY),
            self.cli.sandbox.as_deref(),
        )
        .and_then(|p| p.check_available().map(|()| p))
        .map_err(|e| fail(&e))?;
        // The tool permission policy of the session's settings (permissions.rs): a bad rule
        // stops the run before anything starts.
        let permissions = PermissionPolicy::from_settings(
            opened.settings.global(),
            opened.settings.project(),
            self.cli.permission_mode.as_deref(),
        )
        .map_err(|e| fail(&e))?
        .map(|p| Arc::new(PermissionGate::new(p)));
        // Extensions: a Node host only when at least one is configured (extensions/mod.rs). A
        // configured extension that cannot load stops the run (fail closed). They start before
        // the initial model is chosen, so providers they register take part in the choice.
        let out = Output::stdout();
        // ACP mode: stdout belongs to the ACP connection; the extension host's own events
        // reach it through the relay once it is up.
        let relay = pi_coding_agent::acp::EventRelay::default();
        let base_sink: EventSink = match self.mode {
            Mode::Print => Arc::new(|_| {}),
            Mode::Acp => relay.sink(),
            _ => out.sink(),
        };
        let (extensions, packages) = self
            .extension_start()
            .start(
                &opened.cwd,
                &opened.settings,
                opened.trust_decision.trusted,
                base_sink.clone(),
            )
            .await?;
        let (scoped_models, initial) = self.choose_model(&opened)?;
        self.record_session_start(&mut opened, &initial);
        self.check_tool_names(extensions.as_ref());
        self.apply_extension_flags(extensions.as_ref())?;
        let sink = match &extensions {
            Some(e) => e.tap(base_sink),
            None => base_sink,
        };
        let services = self.services(&opened, scoped_models, extensions, permissions);
        let mcp = services.mcp.clone();
        let factory = self.factory(&opened, services, &packages, sandbox);
        let request = SessionRequest {
            cwd: opened.cwd.clone(),
            store: opened.session,
            model: initial.model.clone(),
            thinking_level: initial.thinking_level,
        };
        let io = ModeIo {
            out,
            sink,
            api_slot: self.api_slot.clone(),
            relay,
            session_dir: self.session_dir_override(),
            registry: self.registry.clone(),
        };
        let code = crate::run_mode(
            self.mode,
            factory,
            request,
            io,
            &self.launch_cwd,
            &self.cli,
            self.stdin_tty,
        )
        .await;
        if let Some(m) = mcp {
            m.shutdown().await;
        }
        Ok(code)
    }

    /// The session folder override: `--session-dir` > `PI_CODING_AGENT_SESSION_DIR` >
    /// settings `sessionDir` ([`resolve::session_dir_override`]).
    fn session_dir_override(&self) -> Option<PathBuf> {
        let env_session_dir = std::env::var("PI_CODING_AGENT_SESSION_DIR").ok();
        resolve::session_dir_override(
            self.cli.session_dir.as_deref(),
            env_session_dir.as_deref(),
            self.launch_settings.session_dir(),
        )
    }

    /// Opens the session store (spec sessions.md §1.4, §1.6; session/resolve.rs) and decides
    /// trust and settings for the session's cwd.
    fn open_session(&self) -> Result<Opened, i32> {
        let cli = &self.cli;
        let session_dir = self.session_dir_override();
        let flags = resolve::SessionFlags {
            continue_recent: cli.continue_session,
            session: cli.session.clone(),
            session_id: cli.session_id.clone(),
            fork: cli.fork.clone(),
            no_session: cli.no_session,
        };
        let opened = resolve::open_startup_session(
            &flags,
            &self.launch_cwd,
            &self.agent_dir,
            session_dir.as_deref(),
        )
        .map_err(|e| match e {
            // Upstream 1.6 prints this one bare (main.ts `console.error`), every other with
            // `Error: `.
            resolve::ResolveError::NotFound(_) => {
                eprintln!("{e}");
                1
            }
            e => fail(&e.to_string()),
        })?;
        if let Some(w) = &opened.warning {
            config::warn(w);
        }
        let session = opened.store;
        resolve::check_session_cwd(&session, &self.launch_cwd).map_err(|e| fail(&e.to_string()))?;
        // A resumed session runs in its recorded cwd; `@file` arguments stay relative to the
        // directory pi was started in (upstream resolves them against process.cwd()). Every
        // protected resource (project settings, extensions, MCP servers, skills, prompts,
        // SYSTEM.md) is loaded from the session's cwd, so its trust is decided for that
        // directory (upstream 1.6 main.ts decides it per runtime cwd, after the session).
        let cwd = session.cwd().to_path_buf();
        let (trust_decision, settings) = if same_dir(&cwd, &self.launch_cwd) {
            (self.launch_decision.clone(), self.launch_settings.clone())
        } else {
            let decision = self.trust_policy.decide(&cwd);
            let settings = Settings::load_with_trust(&self.agent_dir, &cwd, decision.trusted);
            (decision, settings)
        };
        if let Some(notice) = self.trust_policy.notice(&cwd, &trust_decision) {
            config::warn(&notice);
        }
        // What the file says about model and thinking level (spec sessions.md §7, §9.2).
        let (resumed_model, resumed_level, has_messages) = session.resume_settings();
        let has_level_entry = session.has_thinking_level_change();
        let session_model = resumed_model
            .filter(|_| has_messages)
            .map(|m| (m.provider, m.model_id));
        let session_thinking_level = if has_messages && has_level_entry {
            ThinkingLevel::parse(&resumed_level)
        } else {
            None
        };
        Ok(Opened {
            session,
            cwd,
            trust_decision,
            settings,
            has_messages,
            has_level_entry,
            session_model,
            session_thinking_level,
        })
    }

    /// The model scope (`--models`, else settings `enabledModels`) and the initial model
    /// (spec config.md §7.3); the registry is locked for the choice only (no await inside).
    /// With no model at all, the run stops unless it is RPC.
    fn choose_model(&self, opened: &Opened) -> Result<(Vec<ScopedModel>, InitialModel), i32> {
        let cli = &self.cli;
        let settings = &opened.settings;
        let mut registry = self
            .registry
            .write()
            .map_err(|_| fail("the model registry is unavailable"))?;
        // A virtual model selected by the branch's last `model_change` holds over the physical
        // models its responses name (upstream `getBranchSelection`); known once extensions
        // registered their virtual models.
        let session_model = match opened.session.resume_model_change() {
            Some(mc)
                if opened.has_messages
                    && registry
                        .find(&mc.provider, &mc.model_id)
                        .is_some_and(config::models::is_virtual) =>
            {
                Some((mc.provider, mc.model_id))
            }
            _ => opened.session_model.clone(),
        };
        let scope_patterns: Vec<String> = match &cli.models {
            Some(list) => list.clone(),
            None => settings.enabled_models().unwrap_or_default(),
        };
        let (scoped_models, scope_warnings) =
            config::resolve_model_scope(&scope_patterns, &registry.available());
        for w in &scope_warnings {
            config::warn(w);
        }
        let options = InitialModelOptions {
            scoped_models: scoped_models.clone(),
            cli_provider: cli.provider.clone(),
            cli_model: cli.model.clone(),
            cli_thinking: cli.thinking,
            is_continuing: opened.has_messages,
            session_model,
            session_thinking_level: opened.session_thinking_level,
            default_provider: settings.default_provider().map(str::to_string),
            default_model: settings.default_model().map(str::to_string),
            default_thinking_level: settings.default_thinking_level(),
            model_thinking_levels: settings.model_thinking_levels().cloned(),
        };
        let initial = config::find_initial_model(&options, &registry).map_err(|e| fail(&e))?;
        if let Some(w) = &initial.warning {
            config::warn(w);
        }
        if let (Some(key), Some(model)) = (&cli.api_key, &initial.model) {
            registry.set_runtime_api_key(&model.provider, key.clone());
        }
        drop(registry);
        if initial.model.is_none() {
            config::warn(&config::no_models_available_message());
            if !matches!(self.mode, Mode::Rpc | Mode::Acp) {
                eprintln!("{}", config::get_a_model_guidance(&self.agent_dir));
                return Err(1);
            }
        }
        Ok((scoped_models, initial))
    }

    /// Records `--name`, and the start (model, thinking level) of a new session or the level
    /// of an older one that has none (upstream sdk.ts); a session that has one is resumed
    /// without writing anything.
    fn record_session_start(&self, opened: &mut Opened, initial: &InitialModel) {
        let session = &mut opened.session;
        // Whether the session is new is decided before `--name` adds its `session_info`
        // (upstream writes session_info, model_change, thinking_level_change in that order).
        let fresh = session.is_empty();
        if let Some(name) = &self.cli.name {
            if let Err(e) = session.append_session_info(name) {
                config::warn(&format!("could not record the session name: {e}"));
            }
        }
        if fresh {
            record_start(session, initial.model.as_ref(), initial.thinking_level);
        } else if opened.has_messages && !opened.has_level_entry {
            if let Err(e) = session.append_thinking_level_change(initial.thinking_level.as_str()) {
                config::warn(&format!("could not record the thinking level: {e}"));
            }
        }
    }

    /// Warns about `--tools` names that no built-in or extension tool has (MCP tools are
    /// matched when their servers connect: mcp::ToolFilter).
    fn check_tool_names(&self, extensions: Option<&Arc<extensions::Extensions>>) {
        let ext_tool_names: Vec<String> = extensions
            .map(|e| e.tools().iter().map(|t| t.definition().name).collect())
            .unwrap_or_default();
        for name in self.cli.tools.iter().flatten() {
            let name = name.trim_start_matches(['+', '-']);
            let mcp = name.starts_with("mcp__") || name.contains("mcp_resource");
            let own = name == pi_coding_agent::codemode::NAME
                || name == pi_coding_agent::codemode::search::NAME;
            let known =
                tools::ALL_TOOLS.contains(&name) || ext_tool_names.iter().any(|t| t == name);
            if !name.contains('*') && !known && !mcp && !own {
                config::warn(&format!("Unknown tool \"{name}\" ignored"));
            }
        }
    }

    /// Command-line values of extension flags (upstream applyExtensionFlagValues); with no
    /// extension, any unknown `--flag` is an error.
    fn apply_extension_flags(
        &self,
        extensions: Option<&Arc<extensions::Extensions>>,
    ) -> Result<(), i32> {
        let flags = &self.cli.unknown_flags;
        if flags.is_empty() {
            return Ok(());
        }
        let result = match extensions {
            Some(e) => e.apply_flags(flags),
            None => {
                let names: Vec<String> = flags.iter().map(|(n, _)| format!("--{n}")).collect();
                let s = if names.len() == 1 { "" } else { "s" };
                Err(format!("Unknown option{s}: {}", names.join(", ")))
            }
        };
        result.map_err(|e| fail(&e))
    }

    /// The services every session of the run shares: models, credentials, providers,
    /// settings, MCP (its servers connect in the background from here on) and extensions.
    fn services(
        &self,
        opened: &Opened,
        scoped_models: Vec<ScopedModel>,
        extensions: Option<Arc<extensions::Extensions>>,
        permissions: Option<Arc<PermissionGate>>,
    ) -> SessionServices {
        let settings = &opened.settings;
        let reg_models = self.registry.clone();
        // Settings `httpProxy` (agent-dir settings only) for every provider request.
        pi_ai::providers::set_http_proxy(settings.http_proxy());
        let provider = provider_resolver(&self.agent_dir, &http_options(settings));
        let cli = &self.cli;
        SessionServices {
            available_models: Arc::new(move || {
                reg_models.read().map(|r| r.available()).unwrap_or_default()
            }),
            scoped_models,
            api_key: key_resolver(
                self.registry.clone(),
                extensions.as_ref().map(|e| e.host().clone()),
                self.agent_dir.clone(),
            ),
            provider: match &extensions {
                // Models of providers an extension streams (`streamSimple`) go to its host.
                Some(e) => extensions::provider::resolver(
                    provider,
                    self.registry.clone(),
                    e.host().clone(),
                ),
                None => provider,
            },
            settings: Arc::new(parking_lot::Mutex::new(settings.clone())),
            mcp: if cli.no_mcp {
                None
            } else {
                pi_coding_agent::mcp::start(
                    &self.agent_dir,
                    &opened.cwd,
                    opened.trust_decision.trusted,
                    pi_coding_agent::mcp::ToolFilter::from_cli(
                        cli.tools.as_deref(),
                        cli.exclude_tools.as_deref(),
                    ),
                )
            },
            extensions,
            permissions,
        }
    }

    /// The session factory: tools, resources and shell options from the CLI and settings.
    fn factory(
        &self,
        opened: &Opened,
        services: SessionServices,
        packages: &RunPackages,
        sandbox: tools::sandbox::SandboxPolicy,
    ) -> SessionFactory {
        let cli = &self.cli;
        let settings = &opened.settings;
        let agent_dir = &self.agent_dir;
        let tool_selection = tools::select::ToolSelection {
            no_tools: cli.no_tools,
            no_builtin_tools: cli.no_builtin_tools,
            tools: cli.tools.clone(),
            exclude_tools: cli.exclude_tools.clone(),
            default_tools: settings.default_tools(),
        };
        SessionFactory {
            services,
            agent_dir: agent_dir.clone(),
            tool_names: tool_selection.resolve(),
            tool_selection,
            tool_options: tools::ToolOptions {
                bash: tools::bash::BashToolOptions {
                    command_prefix: settings.shell_command_prefix().map(str::to_string),
                    shell_path: settings.shell_path().map(Into::into),
                    bin_dir: Some(agent_dir.join("bin")),
                    extra_env: vec![],
                    session_env: None,
                    sandbox,
                },
                images: Default::default(),
                sandbox,
            },
            resource_options: ResourceOptions {
                no_context_files: cli.no_context_files,
                system_prompt: cli.system_prompt.clone(),
                append_system_prompt: cli.append_system_prompt.clone(),
                no_skills: cli.no_skills,
                skill_paths: cli_paths(&self.launch_cwd, &cli.skill),
                no_prompt_templates: cli.no_prompt_templates,
                prompt_template_paths: cli_paths(&self.launch_cwd, &cli.prompt_template),
                trust: Some(self.trust_policy.clone()),
                package_skills: packages.skills(),
                package_prompts: packages.prompts(),
            },
            bash_options: tools::shell::UserBashOptions {
                command_prefix: settings.shell_command_prefix().map(str::to_string),
                shell_path: settings.shell_path().map(Into::into),
                bin_dir: Some(agent_dir.join("bin")),
                sandbox: if sandbox.user_bash {
                    sandbox
                } else {
                    tools::sandbox::SandboxPolicy::default()
                },
            },
        }
    }
}

/// The credential resolver of every request: extension providers with an `oauth` login
/// resolve their request key in the host (refreshToken / getApiKey,
/// `extensions::provider::oauth_request_key`), everything else through the registry. The
/// registry lock is not held while the host works (it may register meanwhile).
fn key_resolver(
    registry: Arc<RwLock<ModelRegistry>>,
    oauth_host: Option<Arc<extensions::host::ExtensionHost>>,
    key_dir: PathBuf,
) -> pi_coding_agent::agent_session::KeyResolver {
    Arc::new(move |m: &Model, key_use: KeyUse| {
        let extension_oauth = {
            let reg = registry.read().map_err(|e| e.to_string())?;
            reg.extension_oauth(&m.provider) && reg.auth().is_oauth(&m.provider)
        };
        let oauth_key = match (&oauth_host, extension_oauth && key_use == KeyUse::Request) {
            (Some(host), true) => {
                match extensions::provider::oauth_request_key(host, &key_dir, &m.provider) {
                    Ok(key) => key,
                    Err(error) => {
                        return Ok(RequestCredentials {
                            error: Some(error),
                            ..Default::default()
                        })
                    }
                }
            }
            _ => None,
        };
        let reg = registry.read().map_err(|e| e.to_string())?;
        let auth = reg.request_auth_given(m, key_use == KeyUse::Request, oauth_key)?;
        Ok(RequestCredentials {
            base_url: auth.base_url,
            error: auth.error,
            api_key: auth.api_key,
            headers: auth
                .headers
                .into_iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
                .collect(),
            keyless: auth.keyless,
        })
    })
}
