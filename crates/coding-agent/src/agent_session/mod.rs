//! The session behind every mode (upstream `core/agent-session.ts`), split into small parts:
//!
//! * [`queues`]: steering/follow-up queues and what `queue_update` shows;
//! * [`run_control`]: the run phase (one value), abort and the settled signal;
//! * `run`: prompt admission, the run task, its settle guard and event translation;
//! * [`retry`]: automatic retry — the decision after a run ends and the chain state;
//! * `bash`: the RPC `bash` command;
//! * `queries`: read-only views (`get_state`, stats, entries, tree, fork messages);
//! * [`compaction`]: manual `compact`, threshold compaction and overflow recovery;
//! * [`convert`]: context → model messages and token estimates;
//! * [`factory`] builds sessions, [`runtime`] owns the current one and swaps it.
//!
//! An [`AgentSession`] is a cheap handle; all state sits behind locks that cannot poison
//! (`parking_lot`), except the transcript shared with the agent loop, whose poisoning is
//! recovered from ([`AgentSession::transcript`]). Every event goes through the session's
//! [`EventSink`] as a typed [`RpcEvent`] (spec rpc-protocol.md §5).
//!
//! # Locks
//!
//! The state that changes lives in four structs, one lock each, grouped by what changes
//! together: `RunState` (the retry chain, the system prompt a `before_agent_start` handler
//! forced for the run, the admission order of `input` handlers, the "allow always" answers),
//! `Setup` (model, thinking level, loadout, the auto-compaction / auto-retry toggles),
//! `Pending` (the steering / follow-up queues, `nextTurn` messages, RPC `bash` results and
//! cancel token) and the store (`SessionManager`, its own lock because appends write the
//! session file). Every guard is taken for a statement or a short block and is never held
//! across an `.await` (the guards are not `Send`, so the compiler refuses it in the run task).
//!
//! A lock may be taken while one above it in this list is held, never one above it while one
//! below it is held:
//!
//! 1. `retry_announce` (an ordering lock: held across the announcement of a back-off and by
//!    `abort_retry`);
//! 2. `run_state`;
//! 3. `setup`;
//! 4. `pending`;
//! 5. `store`;
//! 6. the transcript (`messages`; the agent loop holds it while it converts the context,
//!    which reads `rejected_images` and the settings);
//! 7. leaves, under which no other lock is taken: `rejected_images`, the settings of
//!    [`SessionServices`] (shared by every session of the process; `settings.json` is
//!    written under it), [`RunControl`]'s and [`compaction::CompactionState`]'s own locks,
//!    and [`PermissionGate`]'s (`client`, then `pending`, inside the gate).
//!
//! Today the only nesting is 1 → 2 (a back-off's announcement and `abort_retry`) and, under
//! 1, the run phase and the store write of the `context_edit`; 6 → 7 in the agent loop's
//! request conversion. Everything else takes one lock at a time: a function that needs two
//! values copies the first out and drops its guard before it takes the next (e.g.
//! `navigate_tree` reads the model before it locks the store). Events are emitted with no
//! lock held, except `run_state` (and `retry_announce`) where upstream's single thread orders
//! the events of a retry chain (`auto_retry_end` before `abort_retry`'s response, before
//! `agent_settled`); the sink never takes `run_state` (the extension tap's state mirror reads
//! `setup`, `pending` and the store only for run and message events, none of which is
//! emitted under it).

pub mod admit;
mod bash;
mod boundary;
mod commands;
pub mod compaction;
pub mod convert;
mod extension_api;
pub mod factory;
pub mod host_calls;
mod image_guard;
pub mod permission;
mod prompt_options;
mod queries;
pub mod queues;
pub mod retry;
mod run;
pub mod run_control;
mod run_hooks;
pub mod runtime;
pub mod tree;

pub use admit::{Admission, Admitting, InputSource, PromptInput, Responder};
pub use convert::{context_tokens, convert_to_llm, estimate_tokens, user_message};
pub use extension_api::custom_message;
pub use permission::PermissionGate;
pub use queues::{MessageQueues, QueueKind};
pub use run::PromptOutcome;
pub use run_control::{RunControl, RunPhase};

use crate::config::{ScopedModel, Settings};
use crate::protocol::rpc::{QueueTexts, RpcEvent};
use crate::session::SessionManager;
use crate::tools::shell::UserBashOptions;
use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use pi_agent::{AgentTool, SharedMessages};
use pi_ai::{Message, Model, SystemMessage, ThinkingLevel};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use crate::config::models::ProviderResolver;
pub use crate::protocol::rpc::EventSink;

/// Credentials for one request: API key (if any) and extra headers.
#[derive(Debug, Clone, Default)]
pub struct RequestCredentials {
    /// The provider API key; `None` = send no key.
    pub api_key: Option<String>,
    /// Extra HTTP headers for the request (e.g. from models.json).
    pub headers: Vec<(String, String)>,
    /// The model needs no credentials (an in-process GGUF model, issue 3): a prompt is not
    /// refused for lack of a key.
    pub keyless: bool,
    /// A base URL the credential implies (GitHub Copilot OAuth tokens); replaces the model's.
    pub base_url: Option<String>,
    /// Credentials are configured but unusable for this request (an OAuth refresh failed):
    /// the request fails with this text as the assistant's `errorMessage`, as upstream's.
    pub error: Option<String>,
}

/// What credentials are looked up for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// Prompt admission: only whether credentials are configured; nothing is refreshed.
    Check,
    /// A request about to be sent: expiring OAuth tokens are refreshed first.
    Request,
}

/// Looks up credentials for a model's provider; `Err` = none usable.
pub type KeyResolver =
    Arc<dyn Fn(&Model, KeyUse) -> Result<RequestCredentials, String> + Send + Sync>;

/// Lists the models that have credentials, in registry order.
pub type ModelLister = Arc<dyn Fn() -> Vec<Model> + Send + Sync>;

/// What every session of one process shares: model registry views, credentials, adapters and
/// the settings (written back by `set_steering_mode` & co., rpc-protocol.md §4.5–§4.7).
#[derive(Clone)]
pub struct SessionServices {
    /// Models with credentials (`get_available_models`).
    pub available_models: ModelLister,
    /// The `--models` / `enabledModels` scope that `cycle_model` walks (config.md §7.4).
    pub scoped_models: Vec<ScopedModel>,
    /// Credential lookup, asked before every LLM call.
    pub api_key: KeyResolver,
    /// Adapter lookup by the model's `api`.
    pub provider: ProviderResolver,
    /// Global + project settings; toggles and queue modes are persisted to the global file.
    pub settings: Arc<Mutex<Settings>>,
    /// The MCP servers of the process (`None`: none configured, or `--no-mcp`); their `direct`
    /// tools are added to every LLM call's tools (crate::mcp).
    pub mcp: Option<Arc<crate::mcp::McpManager>>,
    /// The loaded extensions (`None` = none configured, no Node started).
    pub extensions: Option<Arc<crate::extensions::Extensions>>,
    /// The tool permission policy (`None` = none configured: every tool call runs as
    /// without one; [`permission`], [`crate::permissions`]).
    pub permissions: Option<Arc<PermissionGate>>,
}

/// The tools and system prompt a session offers the model. Replaceable at run time (the next
/// LLM call picks up a change), e.g. when extensions or MCP add tools.
#[derive(Clone)]
pub struct Loadout {
    /// Active tools, in the order offered to the model.
    pub tools: Vec<Arc<dyn AgentTool>>,
    /// The `role:"system"` message recorded at the first run of a session.
    pub system_message: SystemMessage,
    /// The flat system prompt text sent to the model.
    pub system_prompt: String,
    /// Skills and prompt templates for `get_commands` and input expansion.
    pub commands: Arc<CommandResources>,
    /// The bash tool's session variables, bound to the session that takes this loadout.
    pub session_env: Option<crate::tools::bash::SessionEnvSlot>,
    /// The read tool's image policy, bound to the session that takes this loadout (its model
    /// and `images.autoResize`).
    pub image_policy: Option<crate::images::ImagePolicySlot>,
    /// Where the `codemode` tool keeps `store()` values (bound to the session that takes this
    /// loadout); `None` without codemode.
    pub codemode_store: Option<crate::codemode::StoreSlot>,
    /// What the `mcp_servers` section is rendered from, refreshed when a prompt starts;
    /// `None` without MCP.
    pub mcp_section: Option<factory::McpSection>,
    /// What `system_message` was built from: `before_agent_start` shows it to extensions as
    /// `systemPromptOptions` and builds a run's prompt from their edits of it.
    pub prompt_input: crate::system_prompt::SystemPromptInput,
}

/// The skills and prompt templates of a session (spec config.md §8–§10).
#[derive(Debug, Clone, Default)]
pub struct CommandResources {
    /// Skills, first of each name.
    pub skills: Vec<crate::resources::Skill>,
    /// Prompt templates, first of each name.
    pub prompt_templates: Vec<crate::resources::PromptTemplate>,
    /// `enableSkillCommands` (default true): list `skill:<name>` in `get_commands`.
    pub skill_commands: bool,
}

/// Everything one session is built from (see [`factory::SessionFactory`]).
pub struct SessionConfig {
    /// Working directory of the tools and the RPC `bash` command.
    pub cwd: PathBuf,
    /// Shell settings for the RPC `bash` command.
    pub bash_options: UserBashOptions,
    /// Initial model; `None` = no model configured (get_state shows the placeholder).
    pub model: Option<Model>,
    /// Initial thinking level.
    pub thinking_level: ThinkingLevel,
    /// Tools and system prompt.
    pub loadout: Loadout,
    /// The session store (file-backed or in-memory).
    pub store: SessionManager,
}

/// The session's configuration, what every LLM call is built from (lock `setup`, after
/// `run_state` in the order of the module docs). Changed together by `set_model` / `cycle_model` (model, then
/// the thinking level re-derived for it), `set_thinking_level`, `set_loadout` (extensions and
/// MCP changing the tools), `refresh_system_sections` (the `mcp_servers` section) and the
/// toggle setters; read as one snapshot by each turn's `turn_config`.
struct Setup {
    /// The current model; `None` = none configured.
    model: Option<Model>,
    /// The thinking level, clamped to the model's supported levels.
    thinking_level: ThinkingLevel,
    /// The tools and system prompt offered to the model.
    loadout: Loadout,
    /// `set_auto_compaction` (settings `compaction.enabled`).
    auto_compaction: bool,
    /// `set_auto_retry` (settings `retry.enabled`).
    auto_retry: bool,
}

/// What waits to enter the context (lock `pending`, after `setup` in the order of the module docs).
/// Filled by `prompt` / `steer` / `follow_up` while streaming, `pi.sendMessage` and the RPC
/// `bash` command; emptied by the agent loop (it drains the queues), a run's start (the
/// `nextTurn` messages), its settle (the `bash` results), `clear_queue`; `abort_bash` swaps the
/// cancel token.
struct Pending {
    /// The steering and follow-up queues and what `queue_update` shows.
    queues: MessageQueues,
    /// Custom messages of `pi.sendMessage(…, {deliverAs: "nextTurn"})`: they enter the context
    /// with the next run's prompt, right after it (upstream `_pendingNextTurnMessages`).
    next_turn: Vec<Message>,
    /// `bashExecution` messages of RPC `bash` commands that finished during a run: recorded
    /// when it settles.
    bash_results: Vec<Message>,
    /// The one cancel token of every running RPC `bash` command (`abort_bash` fires it and
    /// puts a fresh one in its place).
    bash_cancel: CancellationToken,
}

/// What the runs and admissions of this session keep (lock `run_state`, the first of the
/// four state locks in the order of the module docs). Its guard is held across events only where
/// upstream's single thread orders them (`abort_retry`'s `auto_retry_end` before its
/// response; the end of a retry chain).
#[derive(Default)]
struct RunState {
    /// The retry chain: attempt, the back-off in progress, the decision at `agent_end`.
    retry: retry::RetryState,
    /// The system prompt of the run in flight when a `before_agent_start` handler replaced it
    /// (cleared when the run settles).
    system_prompt: Option<String>,
    /// The system prompt sections of the run in flight when `before_agent_start` handlers
    /// edited `systemPromptOptions` ([`prompt_options`]; cleared when the run settles).
    prompt_sections: Option<serde_json::Map<String, serde_json::Value>>,
    /// The last admission that ran `input` handlers: a later one queues or starts only once
    /// it has (admissions keep arrival order; [`admit`]).
    admit_turn: Option<tokio::sync::oneshot::Receiver<()>>,
    /// The calls the client answered "allow always" for in this session ([`permission`]).
    permission_allows: std::collections::HashSet<crate::permissions::CallSubject>,
}

/// The state of one session. The state that changes is in four structs behind one lock each,
/// taken in this order ([`run_state`](Inner::run_state) → [`setup`](Inner::setup) →
/// [`pending`](Inner::pending) → [`store`](Inner::store); module docs "Locks"); the other
/// locks and cells are kept apart for the reason given on each.
struct Inner {
    cwd: PathBuf,
    bash_options: UserBashOptions,
    services: SessionServices,
    /// Held while a back-off is announced (`auto_retry_start` and the `context_edit` hiding
    /// the failed attempt) and by `abort_retry`, so a client that answers `auto_retry_start`
    /// at once still sees the edit before `auto_retry_end`, as upstream's single thread
    /// orders them. Apart from `run_state` because it is held across event emission and the
    /// store write of the edit; taken first of all, never while another session lock is held.
    retry_announce: Mutex<()>,
    /// State lock 1: the retry chain, the run's forced system prompt, admission order, allowed calls.
    run_state: Mutex<RunState>,
    /// State lock 2: model, thinking level, loadout, toggles.
    setup: Mutex<Setup>,
    /// State lock 3: the queues and the messages waiting for a run.
    pending: Mutex<Pending>,
    /// State lock 4: the session store. Its own lock because every append writes the session file
    /// (I/O under the guard); nothing else is locked while it is held.
    store: Mutex<SessionManager>,
    /// The context transcript, shared with the agent loop (pi_agent), which locks it itself
    /// and converts the context to the request under it ([`AgentSession::llm_messages`]):
    /// after the four state locks; under it only `rejected_images` and the settings are taken.
    messages: SharedMessages,
    /// Fingerprints of images the provider rejected ([`image_guard`]). Apart from `run_state`
    /// because it is read while the agent loop holds the transcript, and `run_state` is held
    /// across event emission: a leaf, taken for one statement.
    rejected_images: Mutex<std::collections::HashSet<u64>>,
    /// The run phase, abort and the settled signal: its own lock and watch ([`RunControl`]),
    /// read by `get_state` and admission without waiting on a run; a leaf.
    run: RunControl,
    /// Manual compaction and branch summary tokens, the overflow flag
    /// ([`compaction::CompactionState`]); leaves.
    compaction: compaction::CompactionState,
    /// A `role:"system"` message is already in the context (recorded at the first run).
    system_recorded: AtomicBool,
    /// A session write failed and could not be repaired (`session_write_error` was sent).
    write_failed: AtomicBool,
    /// How many prompts are being admitted through `input` handlers ([`admit`]); a watch, so
    /// `wait_idle` is woken when it drops to 0 instead of polling.
    admitting: tokio::sync::watch::Sender<usize>,
    sink: EventSink,
}

impl Inner {
    /// The retry chain's state, under the `run_state` lock.
    fn retry(&self) -> MappedMutexGuard<'_, retry::RetryState> {
        MutexGuard::map(self.run_state.lock(), |s| &mut s.retry)
    }
}

/// Cheap to clone handle to one session.
#[derive(Clone)]
pub struct AgentSession {
    inner: Arc<Inner>,
}

impl AgentSession {
    /// Builds a session from its config and the shared services; `sink` receives every event.
    pub fn new(config: SessionConfig, services: SessionServices, sink: EventSink) -> Self {
        let context = config.store.build_context();
        let system_recorded = context.iter().any(|m| matches!(m, Message::System(_)));
        let (steering_mode, follow_up_mode, auto_compaction, auto_retry) = {
            let s = services.settings.lock();
            // The raw values, as upstream keeps whatever the file holds.
            let mode = |key: &str, parsed: crate::config::QueueMode| {
                s.get(key)
                    .cloned()
                    .unwrap_or_else(|| Value::String(parsed.as_str().to_string()))
            };
            (
                mode("steeringMode", s.steering_mode()),
                mode("followUpMode", s.follow_up_mode()),
                s.compaction().enabled,
                s.retry().enabled,
            )
        };
        let session = AgentSession {
            inner: Arc::new(Inner {
                cwd: config.cwd,
                bash_options: config.bash_options,
                services,
                setup: Mutex::new(Setup {
                    model: config.model,
                    thinking_level: config.thinking_level,
                    loadout: config.loadout,
                    auto_compaction,
                    auto_retry,
                }),
                pending: Mutex::new(Pending {
                    queues: MessageQueues::new(steering_mode, follow_up_mode),
                    next_turn: Vec::new(),
                    bash_results: Vec::new(),
                    bash_cancel: CancellationToken::new(),
                }),
                run: RunControl::default(),
                run_state: Mutex::default(),
                retry_announce: Mutex::new(()),
                store: Mutex::new(config.store),
                messages: Arc::new(std::sync::Mutex::new(context)),
                system_recorded: AtomicBool::new(system_recorded),
                admitting: tokio::sync::watch::Sender::new(0),
                write_failed: AtomicBool::new(false),
                compaction: Default::default(),
                rejected_images: Mutex::default(),
                sink,
            }),
        };
        {
            let loadout = session.inner.setup.lock().loadout.clone();
            bind_session_env(&session.inner, &loadout);
        }
        session
    }

    fn emit(&self, event: RpcEvent) {
        (self.inner.sink)(event)
    }

    /// The context transcript, recovering it if a panicking holder poisoned the lock.
    fn transcript(&self) -> std::sync::MutexGuard<'_, Vec<Message>> {
        self.inner
            .messages
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The loaded extensions, if any were configured.
    pub fn extensions(&self) -> Option<&Arc<crate::extensions::Extensions>> {
        self.inner.services.extensions.as_ref()
    }

    /// The working directory of the tools and the RPC `bash` command.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// An independent copy of the session store (to branch from without touching this one).
    pub fn store_snapshot(&self) -> SessionManager {
        self.inner.store.lock().clone()
    }

    /// The session header as a JSON object (first line of `--mode json`).
    pub fn header_json(&self) -> Value {
        serde_json::to_value(self.inner.store.lock().header()).unwrap_or(Value::Null)
    }

    /// The run phase (`get_state`, prompt admission, EOF handling).
    pub fn phase(&self) -> RunPhase {
        self.inner.run.phase()
    }

    /// True from prompt acceptance until `agent_settled`.
    pub fn is_streaming(&self) -> bool {
        self.phase().is_streaming()
    }

    /// Whether a compaction is running: inside a run, a manual `compact` or a tree
    /// navigation's branch summary (`get_state.isCompacting`, upstream `isCompacting`).
    pub fn is_compacting(&self) -> bool {
        self.phase().is_compacting() || self.inner.compaction.refuses_prompt()
    }

    /// Context transcript (`get_messages`).
    pub fn messages(&self) -> Vec<Message> {
        self.transcript().clone()
    }

    /// Number of messages in the context transcript.
    pub fn message_count(&self) -> usize {
        self.transcript().len()
    }

    /// Runs `f` on the context transcript without copying it (`get_messages` streams it). The
    /// transcript is locked meanwhile: keep `f` to serialising.
    pub fn with_messages<R>(&self, f: impl FnOnce(&[Message]) -> R) -> R {
        f(&self.transcript())
    }

    /// The current model, if any.
    pub fn model(&self) -> Option<Model> {
        self.inner.setup.lock().model.clone()
    }

    /// Takes the registry's current definition of the session's model, `fresh` (same provider
    /// and id), after an extension provider registered or unregistered (upstream 1.6
    /// `_refreshCurrentModelFromRegistry`): nothing is recorded in the session. A `fresh` of
    /// another provider/id is ignored.
    pub fn refresh_model(&self, fresh: Model) {
        let mut state = self.inner.setup.lock();
        if let Some(m) = state.model.as_mut() {
            if m.provider == fresh.provider && m.id == fresh.id {
                *m = fresh;
            }
        }
    }

    /// Models with credentials.
    pub fn available_models(&self) -> Vec<Model> {
        (self.inner.services.available_models)()
    }

    /// Prepares the images attached to a prompt, steer or follow-up for the current model
    /// ([`crate::images::prepare_prompt_images`]): returns the text with the resize notes
    /// appended and the images to send; `Err` (nothing is queued or sent) names an image that
    /// does not decode.
    pub fn prepare_images(
        &self,
        text: String,
        images: Vec<pi_ai::ImageContent>,
    ) -> Result<(String, Vec<pi_ai::ImageContent>), String> {
        if images.is_empty() {
            return Ok((text, images));
        }
        crate::images::prepare_prompt_images(text, images, &image_policy_of(&self.inner))
    }

    /// The context files (`AGENTS.md`/`CLAUDE.md`) of the system prompt, absolute paths in
    /// order.
    pub fn context_files(&self) -> Vec<std::path::PathBuf> {
        let setup = self.inner.setup.lock();
        let files = &setup.loadout.prompt_input.context_files;
        files.iter().map(|f| f.path.clone()).collect()
    }

    /// The session's skills and prompt templates.
    pub fn command_resources(&self) -> Arc<CommandResources> {
        self.inner.setup.lock().loadout.commands.clone()
    }

    /// The `get_commands` list (spec rpc-protocol.md §4.10, upstream 1.6 order): extension
    /// commands, then the built-in ones an extension command does not shadow, prompt
    /// templates and skills. RPC `get_commands`, `pi.getCommands()` and ACP's
    /// `available_commands_update` all show this list.
    pub fn commands(&self) -> Vec<crate::protocol::rpc::SlashCommand> {
        let res = self.command_resources();
        let mut commands = self.extensions().map(|e| e.commands()).unwrap_or_default();
        let shadowed: Vec<String> = commands.iter().map(|c| c.name.clone()).collect();
        commands.extend(crate::resources::commands::list(
            &res.prompt_templates,
            &res.skills,
            res.skill_commands,
            &shadowed,
        ));
        commands
    }

    /// Replaces the tools and system prompt; the next LLM call uses them.
    pub fn set_loadout(&self, loadout: Loadout) {
        bind_session_env(&self.inner, &loadout);
        self.inner.setup.lock().loadout = loadout;
    }

    /// Supported thinking levels of the current model (`["off"]` without one; 1.6 notes §15).
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        match self.model() {
            Some(m) => m.supported_thinking_levels(),
            None => vec![ThinkingLevel::Off],
        }
    }

    /// The current thinking level.
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.inner.setup.lock().thinking_level
    }

    /// Clamps `level` to the model's supported levels; when the effective level changes,
    /// appends a `thinking_level_change` entry and emits `thinking_level_changed`
    /// (rpc-protocol.md §4.4, §5.10). Returns the effective level.
    pub fn set_thinking_level(&self, level: ThinkingLevel) -> ThinkingLevel {
        let effective = {
            let mut st = self.inner.setup.lock();
            let effective = match &st.model {
                Some(m) => crate::config::clamp_thinking_level(Some(m), level),
                None => ThinkingLevel::Off,
            };
            if st.thinking_level == effective {
                return effective;
            }
            st.thinking_level = effective;
            effective
        };
        if let Err(e) = self
            .inner
            .store
            .lock()
            .append_thinking_level_change(effective.as_str())
        {
            tracing::warn!("could not record thinking level change: {e}");
        }
        self.emit(RpcEvent::ThinkingLevelChanged {
            level: effective.as_str().to_string(),
        });
        effective
    }

    /// `cycle_thinking_level`: the next supported level, or `None` for a model without
    /// reasoning (or no model).
    pub fn cycle_thinking_level(&self) -> Option<ThinkingLevel> {
        let next =
            crate::config::cycle_thinking_level(self.model().as_ref(), self.thinking_level())?;
        Some(self.set_thinking_level(next))
    }

    /// Selects a model among the available ones (`set_model`, rpc-protocol.md §4.3): appends
    /// `model_change`, then re-clamps the thinking level (which may emit
    /// `thinking_level_changed`). Session-only: settings are not written (1.6 notes §8).
    pub fn set_model(&self, provider: &str, model_id: &str) -> Result<Model, String> {
        let model = self
            .available_models()
            .into_iter()
            .find(|m| m.provider == provider && m.id == model_id)
            .ok_or_else(|| format!("Model not found: {provider}/{model_id}"))?;
        self.inner.setup.lock().model = Some(model.clone());
        if let Err(e) = self
            .inner
            .store
            .lock()
            .append_model_change(&model.provider, &model.id)
        {
            tracing::warn!("could not record model change: {e}");
        }
        // The level is re-derived: the model's `modelThinkingLevels` entry, else the
        // `defaultThinkingLevel` setting, else the current level, then clamped
        // (rpc-protocol.md §4.3; golden thinking_levels_max; upstream 1.6
        // `_getThinkingLevelForModelSwitch`).
        let derived = {
            let settings = self.inner.services.settings.lock();
            crate::config::model_thinking_level(settings.model_thinking_levels(), &model)
                .or_else(|| settings.default_thinking_level())
        }
        .unwrap_or_else(|| self.thinking_level());
        self.set_thinking_level(derived);
        Ok(model)
    }

    /// Selects the next model (`cycle_model`, rpc-protocol.md §4.3): from the scoped models
    /// that currently have credentials if there are any, else from every available model.
    /// Returns `None` when that list has at most one entry, else the model and whether it came
    /// from the scope; a scoped entry's `:level` becomes the thinking level.
    pub fn cycle_model(&self) -> Result<Option<(Model, bool)>, String> {
        let available = self.available_models();
        let scoped: Vec<&ScopedModel> = self
            .inner
            .services
            .scoped_models
            .iter()
            .filter(|s| {
                available
                    .iter()
                    .any(|m| m.provider == s.model.provider && m.id == s.model.id)
            })
            .collect();
        let is_scoped = !scoped.is_empty();
        let candidates: Vec<(Model, Option<ThinkingLevel>)> = if is_scoped {
            scoped
                .into_iter()
                .map(|s| (s.model.clone(), s.thinking_level))
                .collect()
        } else {
            available.into_iter().map(|m| (m, None)).collect()
        };
        if candidates.len() <= 1 {
            return Ok(None);
        }
        let next = self
            .model()
            .and_then(|c| {
                candidates
                    .iter()
                    .position(|(m, _)| m.provider == c.provider && m.id == c.id)
            })
            .map(|i| (i + 1) % candidates.len())
            .unwrap_or(0);
        let (target, level) = &candidates[next];
        let model = self.set_model(&target.provider, &target.id)?;
        if let Some(level) = level {
            self.set_thinking_level(*level);
        }
        Ok(Some((model, is_scoped)))
    }

    /// Writes one global setting (a failure is a warning: the session keeps the value).
    fn persist_setting(&self, path: &[&str], value: Value) {
        if let Err(e) = self.inner.services.settings.lock().set_global(path, value) {
            tracing::warn!("could not write settings.json: {e}");
        }
    }

    /// Sets the steering or follow-up mode and persists it to the global settings. Any value
    /// is accepted and stored as given (rpc-protocol.md §4.5, golden queue_modes_and_toggles).
    pub fn set_queue_mode(&self, kind: QueueKind, mode: Value) {
        self.inner
            .pending
            .lock()
            .queues
            .set_mode(kind, mode.clone());
        let key = match kind {
            QueueKind::Steering => "steeringMode",
            QueueKind::FollowUp => "followUpMode",
        };
        self.persist_setting(&[key], mode);
    }

    /// Turns automatic compaction on or off and persists `compaction.enabled`.
    pub fn set_auto_compaction(&self, enabled: bool) {
        self.inner.setup.lock().auto_compaction = enabled;
        self.persist_setting(&["compaction", "enabled"], Value::Bool(enabled));
    }

    /// Turns automatic retry on or off and persists `retry.enabled`.
    pub fn set_auto_retry(&self, enabled: bool) {
        self.inner.setup.lock().auto_retry = enabled;
        self.persist_setting(&["retry", "enabled"], Value::Bool(enabled));
    }

    /// Whether transient provider errors are retried automatically.
    pub fn auto_retry(&self) -> bool {
        self.inner.setup.lock().auto_retry
    }

    /// Whether automatic compaction is on.
    pub fn auto_compaction(&self) -> bool {
        self.inner.setup.lock().auto_compaction
    }

    /// `set_session_name` (rpc-protocol.md §4.9): trims, refuses an empty name, appends a
    /// `session_info` entry and emits `session_info_changed`.
    pub fn set_session_name(&self, name: &str) -> Result<(), String> {
        if name.trim().is_empty() {
            return Err("Session name cannot be empty".into());
        }
        let stored = {
            let mut store = self.inner.store.lock();
            store.append_session_info(name).map_err(|e| e.to_string())?;
            store.session_name()
        };
        self.emit(RpcEvent::SessionInfoChanged { name: stored });
        Ok(())
    }

    /// Extension `pi.appendEntry(customType, data)`: appends a `custom` entry (not part of the
    /// LLM context) and emits `entry_appended` (rpc-protocol.md §5.10).
    pub fn append_custom_entry(
        &self,
        custom_type: &str,
        data: Option<Value>,
    ) -> Result<(), String> {
        let entry = {
            let mut store = self.inner.store.lock();
            store
                .append_custom_entry(custom_type, data)
                .map_err(|e| e.to_string())?
                .clone()
        };
        self.emit(RpcEvent::EntryAppended { entry });
        Ok(())
    }

    /// Queues a steering or follow-up message and emits `queue_update` (rpc-protocol.md §5.4).
    pub fn enqueue(&self, kind: QueueKind, message: Message) {
        let shown = self.inner.pending.lock().queues.push(kind, message);
        self.emit(RpcEvent::queue_update(shown));
    }

    /// Empties both queues, emits `queue_update` with empty lists and returns what was removed
    /// (`clear_queue`).
    pub fn clear_queue(&self) -> QueueTexts {
        let removed = self.inner.pending.lock().queues.clear();
        self.emit(RpcEvent::queue_update(QueueTexts::default()));
        removed
    }

    /// Aborts the run in flight (and a manual compaction, and a tree navigation's branch
    /// summary) and waits until it has settled (`abort`).
    pub async fn abort(&self) {
        self.inner.compaction.abort_manual();
        self.inner.compaction.abort_branch();
        self.inner.run.abort();
        self.wait_settled().await;
    }

    /// Resolves once no run is in flight.
    pub async fn wait_settled(&self) {
        self.inner.run.wait_settled().await;
    }
}

/// Binds `loadout`'s bash session variables to `inner` (held weakly, so tools never keep a
/// session alive): `PI_SESSION_ID`, `PI_SESSION_FILE` (when the session has a file),
/// `PI_PROVIDER` and `PI_MODEL` (when a model is set), `PI_REASONING_LEVEL`
/// (upstream-1.6-notes.md item 21).
fn bind_session_env(inner: &Arc<Inner>, loadout: &Loadout) {
    if let Some(slot) = &loadout.codemode_store {
        slot.bind(Arc::new(CodemodeStore(Arc::downgrade(inner))));
    }
    if let Some(slot) = &loadout.image_policy {
        let weak = Arc::downgrade(inner);
        slot.bind(Arc::new(move || match weak.upgrade() {
            Some(inner) => image_policy_of(&inner),
            None => crate::images::ImagePolicy::default(),
        }));
    }
    let Some(slot) = &loadout.session_env else {
        return;
    };
    let weak = Arc::downgrade(inner);
    slot.bind(Arc::new(move || {
        let Some(inner) = weak.upgrade() else {
            return Vec::new();
        };
        let mut vars = Vec::new();
        {
            let store = inner.store.lock();
            vars.push(("PI_SESSION_ID".to_string(), store.session_id().to_string()));
            if let Some(file) = store.session_file() {
                vars.push(("PI_SESSION_FILE".to_string(), file.display().to_string()));
            }
        }
        let state = inner.setup.lock();
        if let Some(m) = &state.model {
            vars.push(("PI_PROVIDER".to_string(), m.provider.clone()));
            vars.push(("PI_MODEL".to_string(), m.id.clone()));
        }
        vars.push((
            "PI_REASONING_LEVEL".to_string(),
            state.thinking_level.as_str().to_string(),
        ));
        vars
    }));
}

/// The image policy now: the current model's limits and image support, `images.autoResize`.
fn image_policy_of(inner: &Inner) -> crate::images::ImagePolicy {
    let auto_resize = inner.services.settings.lock().images_auto_resize();
    let state = inner.setup.lock();
    crate::images::ImagePolicy::new(state.model.as_ref(), auto_resize)
}

/// `store()` values of codemode scripts as `codemode-store` entries of the session (held
/// weakly).
struct CodemodeStore(std::sync::Weak<Inner>);

impl crate::codemode::StoreBackend for CodemodeStore {
    fn entries(&self) -> Vec<Value> {
        let Some(inner) = self.0.upgrade() else {
            return Vec::new();
        };
        let store = inner.store.lock();
        store
            .branch()
            .into_iter()
            .filter_map(|e| match &e.kind {
                crate::session::EntryKind::Custom { custom_type, data }
                    if custom_type == crate::codemode::STORE_ENTRY =>
                {
                    data.clone()
                }
                _ => None,
            })
            .collect()
    }

    fn append(&self, data: Value) -> Result<(), String> {
        let Some(inner) = self.0.upgrade() else {
            return Err("the session is gone".into());
        };
        AgentSession { inner }.append_custom_entry(crate::codemode::STORE_ENTRY, Some(data))
    }
}
