//! The ACP sessions of one process: `session/new`, `session/load`, `session/list`,
//! `session/prompt`, `session/cancel`, `session/set_config_option`, and the
//! `available_commands_update` sent after a session opens. Sessions are pi's session files.
//!
//! Extensions: every session has its own extension runtime, as upstream has with the pi-acp
//! adapter (one `pi --mode rpc` process per ACP session), so what a handler does
//! (`pi.sendMessage`, `pi.appendEntry`, a command's `ctx.*`) acts on the session whose event or
//! command ran it, and extension state is per session. The first session uses the host started
//! at start-up (which also serves the extension providers and credentials of the whole
//! process, and so stays up until EOF); every later session starts a host of its own with the
//! same extensions ([`crate::extensions::Extensions::start_another`]), stopped when the session
//! closes (`session/close`, a `session/load` of it again, EOF). No extension configured: no
//! host at all.

use super::update::{replay, Mapper};
use super::{ui, AcpStart, Connection, EventRelay};
use crate::agent_session::factory::{SessionFactory, SessionRequest};
use crate::agent_session::runtime::{record_start, AgentSessionRuntime};
use crate::agent_session::{host_calls, Admission, Admitting, AgentSession, InputSource};
use crate::agent_session::{EventSink, PromptInput, Responder};
use crate::extensions::api::RuntimeSlot;
use crate::extensions::wire::SessionEvent;
use crate::extensions::Extensions;
use crate::protocol::rpc::RpcEvent;
use crate::session::resolve::list_sessions;
use crate::session::{default_session_dir, SessionManager};
use agent_client_protocol::v1::schema::{
    self as acp, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock,
    Cost, EmbeddedResourceResource, ListSessionsRequest, ListSessionsResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionConfigId, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionId, SessionInfo,
    SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, StopReason, UnstructuredCommandInput, UsageUpdate,
};
use agent_client_protocol::Error;
use parking_lot::Mutex;
use pi_ai::{Model, StopReason as PiStop, ThinkingLevel};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// The config option ids of `session/set_config_option`.
const MODEL_OPTION: &str = "model";
const THINKING_OPTION: &str = "thought_level";

/// The process's ACP state: the factory, the open sessions, the connection.
pub(super) struct Agent {
    factory: SessionFactory,
    /// The command line's session, until a `session/new` for its cwd takes it.
    launch: Mutex<Option<SessionRequest>>,
    /// Whether sessions are written (false with `--no-session`).
    persist: bool,
    model: Option<Model>,
    thinking_level: ThinkingLevel,
    session_dir: Option<PathBuf>,
    api_slot: RuntimeSlot,
    relay: EventRelay,
    /// Where the later sessions' extension hosts register providers.
    registry: crate::extensions::provider::SharedRegistry,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
    /// The session that uses the start-up extension host, while it is open: that host's own
    /// UI requests go to it.
    first: Mutex<Option<Arc<AcpSession>>>,
    /// The session prompted last: extension UI requests that belong to no session go there.
    active: Mutex<Option<Arc<AcpSession>>>,
    /// Whether the start-up extension host was taken by a session (the first one).
    started: AtomicBool,
    /// Whether the client announced elicitation forms (`clientCapabilities.elicitation.form`
    /// of `initialize`): extension `input`/`editor` dialogs are then put to it ([`ui`]).
    forms: Arc<AtomicBool>,
    /// `--tools`/`--exclude-tools` for the client's MCP servers; `None` with `--no-mcp` (the
    /// client's servers are ignored).
    mcp_filter: Option<crate::mcp::ToolFilter>,
}

/// One open ACP session: its runtime and what maps its events.
pub(super) struct AcpSession {
    id: SessionId,
    runtime: AgentSessionRuntime,
    cx: Connection,
    /// Set by `session/cancel`, cleared when a prompt starts: the turn ends `cancelled`.
    cancelled: AtomicBool,
    /// The session's MCP servers when the client gave some (`mcpServers`): stopped with the
    /// session ([`super::mcp`]).
    mcp: Option<Arc<crate::mcp::McpManager>>,
    /// The session's extension host (`None`: no extension configured).
    extensions: Option<Arc<Extensions>>,
    /// Whether `extensions` is the session's own host (stopped with the session), not the
    /// start-up one.
    own_host: bool,
    /// Set once the extensions were told `session_shutdown`.
    shut_down: AtomicBool,
}

impl Agent {
    pub(super) fn new(start: AcpStart) -> Self {
        Agent {
            persist: start.request.store.is_persisted(),
            model: start.request.model.clone(),
            thinking_level: start.request.thinking_level,
            launch: Mutex::new(Some(start.request)),
            factory: start.factory,
            session_dir: start.session_dir,
            api_slot: start.api_slot,
            relay: start.relay,
            registry: start.registry,
            sessions: Mutex::default(),
            first: Mutex::default(),
            active: Mutex::default(),
            started: AtomicBool::new(false),
            forms: Arc::default(),
            mcp_filter: start.mcp_filter,
        }
    }

    pub(super) fn factory(&self) -> &SessionFactory {
        &self.factory
    }

    /// Whether the client's MCP servers are started (not with `--no-mcp`).
    pub(super) fn mcp_enabled(&self) -> bool {
        self.mcp_filter.is_some()
    }

    /// Called for `initialize`: the start-up extension host's own UI requests now go to the
    /// client, through the session that uses that host while it is open, else the session
    /// prompted last. Notes whether the client takes elicitation forms (`req`'s capabilities).
    pub(super) fn connected(self: &Arc<Self>, cx: &Connection, req: &acp::InitializeRequest) {
        let forms = req
            .client_capabilities
            .elicitation
            .as_ref()
            .is_some_and(acp::ElicitationCapabilities::supports_form);
        self.forms.store(forms, Ordering::SeqCst);
        let forms = self.forms.clone();
        let me = Arc::downgrade(self);
        let cx = cx.clone();
        let services = self.factory.services.clone();
        self.relay.install(Arc::new(move |ev: RpcEvent| {
            let RpcEvent::ExtensionUiRequest(req) = ev else {
                return;
            };
            let target = me.upgrade().and_then(|a| {
                let first = a.first.lock().clone();
                first.or_else(|| a.active.lock().clone())
            });
            let id = target.map(|s| s.id.clone());
            ui::request(&cx, id, req, &services, forms.load(Ordering::SeqCst));
        }));
    }

    /// The open session `id`, or ACP's `session not found` error.
    pub(super) fn session(&self, id: &SessionId) -> Result<Arc<AcpSession>, Error> {
        self.sessions
            .lock()
            .get(&*id.0)
            .cloned()
            .ok_or_else(|| acp::Error::session_not_found(id.clone()).into())
    }

    /// The folder of `cwd`'s session files.
    fn dir_for(&self, cwd: &Path) -> PathBuf {
        self.session_dir
            .clone()
            .unwrap_or_else(|| default_session_dir(&self.factory.agent_dir, cwd))
    }

    /// `session/new`: the command line's session when it is for this cwd and still unused,
    /// else a new one (written once it has a reply, as in RPC mode). The client's `mcpServers`
    /// join the servers of `mcp.json` for this session ([`super::mcp`]).
    pub(super) async fn new_session(
        self: &Arc<Self>,
        req: NewSessionRequest,
        cx: &Connection,
    ) -> Result<(NewSessionResponse, Arc<AcpSession>), Error> {
        let cwd = checked_cwd(&req.cwd)?;
        let launch = {
            let mut slot = self.launch.lock();
            match slot.take() {
                Some(l) if same_dir(&l.cwd, &cwd) && !l.store.resume_settings().2 => Some(l),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        let request = match launch {
            Some(l) => l,
            None => {
                let mut store = if self.persist {
                    SessionManager::create(&self.dir_for(&cwd), &cwd)
                } else {
                    SessionManager::in_memory(&cwd)
                };
                record_start(&mut store, self.model.as_ref(), self.thinking_level);
                SessionRequest {
                    cwd: cwd.clone(),
                    store,
                    model: self.model.clone(),
                    thinking_level: self.thinking_level,
                }
            }
        };
        let id = SessionId::new(request.store.session_id());
        let session = self.open(id.clone(), request, &req.mcp_servers, cx).await?;
        let response =
            NewSessionResponse::new(id).config_options(config_options(&session.runtime.session()));
        Ok((response, session))
    }

    /// `session/load`: opens the pi session file with that id in the cwd's session folder,
    /// replays its transcript as `session/update`s, then answers.
    pub(super) async fn load_session(
        self: &Arc<Self>,
        req: LoadSessionRequest,
        cx: &Connection,
    ) -> Result<(LoadSessionResponse, Arc<AcpSession>), Error> {
        let session = self
            .open_file(&req.session_id, &req.cwd, &req.mcp_servers, cx)
            .await?;
        let current = session.runtime.session();
        for update in replay(&current.messages(), current.cwd()) {
            session.notify(update);
        }
        let response = LoadSessionResponse::new().config_options(config_options(&current));
        Ok((response, session))
    }

    /// `session/resume`: `session/load` without the replay.
    pub(super) async fn resume_session(
        self: &Arc<Self>,
        req: ResumeSessionRequest,
        cx: &Connection,
    ) -> Result<(ResumeSessionResponse, Arc<AcpSession>), Error> {
        let session = self
            .open_file(&req.session_id, &req.cwd, &req.mcp_servers, cx)
            .await?;
        let current = session.runtime.session();
        let response = ResumeSessionResponse::new().config_options(config_options(&current));
        Ok((response, session))
    }

    /// Opens the pi session file `id` of `cwd`'s session folder as RPC `switch_session` opens
    /// it (model and thinking level restored). A session already open under that id is closed
    /// first ([`Agent::close_session`]).
    async fn open_file(
        self: &Arc<Self>,
        id: &SessionId,
        cwd: &Path,
        servers: &[acp::McpServer],
        cx: &Connection,
    ) -> Result<Arc<AcpSession>, Error> {
        let cwd = checked_cwd(cwd)?;
        let path = list_sessions(&self.dir_for(&cwd))
            .into_iter()
            .find(|l| l.header.id == *id.0)
            .map(|l| l.path)
            .ok_or_else(|| Error::from(acp::Error::session_not_found(id.clone())))?;
        self.close_session(id).await;
        let request = SessionRequest {
            cwd: cwd.clone(),
            store: SessionManager::in_memory(&cwd),
            model: self.model.clone(),
            thinking_level: self.thinking_level,
        };
        let session = self.open(id.clone(), request, servers, cx).await?;
        let path = path.to_string_lossy().into_owned();
        let failed = match session.runtime.switch_session(&path).await {
            Ok(false) => return Ok(session),
            Ok(true) => "cancelled by an extension".to_string(),
            Err(e) => e,
        };
        self.sessions.lock().remove(&*id.0);
        self.forget(&session);
        session.close_mcp().await;
        session.close_extensions(false).await;
        Err(Error::internal_error().data(failed))
    }

    /// `session/close` (and a session loaded again): the run in flight is aborted and
    /// settled, then the session is forgotten. Its file stays. `false`: no such session.
    pub(super) async fn close_session(&self, id: &SessionId) -> bool {
        let Some(old) = self.sessions.lock().remove(&*id.0) else {
            return false;
        };
        self.forget(&old);
        old.stop().await;
        old.close_mcp().await;
        old.close_extensions(false).await;
        true
    }

    /// Drops `old` from the sessions that UI requests with no session of their own go to.
    fn forget(&self, old: &Arc<AcpSession>) {
        for slot in [&self.active, &self.first] {
            let mut slot = slot.lock();
            if slot.as_ref().is_some_and(|a| Arc::ptr_eq(a, old)) {
                *slot = None;
            }
        }
    }

    /// Builds the runtime of an ACP session (its events mapped to `session/update`s of `id`)
    /// and registers it, with the client's MCP `servers` beside the process's ones and its
    /// extension host (module doc: the start-up one for the first session, else its own, in
    /// the session's cwd), which is told `session_start {reason:"startup"}`. `Err`: the
    /// session's extension host failed to start or to load an extension (fail closed, as at
    /// start-up).
    async fn open(
        self: &Arc<Self>,
        id: SessionId,
        request: SessionRequest,
        servers: &[acp::McpServer],
        cx: &Connection,
    ) -> Result<Arc<AcpSession>, Error> {
        let ext_slot: Arc<OnceLock<Arc<Extensions>>> = Arc::default();
        let sink = self.session_sink(&id, &request.cwd, cx, ext_slot.clone());
        let (ext, slot, own_host) = self.extensions_for(&request.cwd, &sink).await?;
        if let Some(e) = &ext {
            let _ = ext_slot.set(e.clone());
        }
        let first = ext.is_some() && !own_host;
        let sink = match &ext {
            Some(e) => e.tap(sink),
            None => sink,
        };
        let mut factory = self.factory.clone();
        factory.services.extensions = ext.clone();
        let mcp = self.mcp_filter.as_ref().and_then(|filter| {
            super::mcp::session_manager(
                self.factory.services.mcp.as_ref(),
                servers,
                &request.cwd,
                &self.factory.agent_dir,
                filter,
            )
        });
        if mcp.is_some() {
            factory.services.mcp = mcp.clone();
        } else if self.mcp_filter.is_none() && !servers.is_empty() {
            crate::config::warn("MCP: the client's servers are ignored (--no-mcp)");
        }
        let runtime = AgentSessionRuntime::new(factory, request, sink);
        let session = Arc::new(AcpSession {
            id: id.clone(),
            runtime: runtime.clone(),
            cx: cx.clone(),
            cancelled: AtomicBool::new(false),
            mcp,
            extensions: ext.clone(),
            own_host,
            shut_down: AtomicBool::new(false),
        });
        self.sessions
            .lock()
            .insert(id.0.to_string(), session.clone());
        if let Some(slot) = &slot {
            host_calls::bind(slot, runtime.clone());
        }
        if first {
            *self.first.lock() = Some(session.clone());
            *self.active.lock() = Some(session.clone());
        }
        if let Some(ext) = &ext {
            let s = runtime.session();
            ext.emit_session_event(&SessionEvent::SessionStart {
                reason: "startup",
                previous_session_file: None,
            })
            .await;
            ext.discover_resources(s.cwd(), "startup").await;
        }
        runtime.session().begin_mcp_connecting();
        Ok(session)
    }

    /// The extension host of a new session, the slot its API calls go through, and whether it
    /// is the session's own: the start-up host for the first session, else a new host of the
    /// same extensions in `cwd` whose own events (its UI requests) go to `sink`; nothing when
    /// no extension is configured.
    async fn extensions_for(
        &self,
        cwd: &Path,
        sink: &EventSink,
    ) -> Result<(Option<Arc<Extensions>>, Option<RuntimeSlot>, bool), Error> {
        let Some(startup) = self.factory.services.extensions.clone() else {
            return Ok((None, None, false));
        };
        if !self.started.swap(true, Ordering::SeqCst) {
            return Ok((Some(startup), Some(self.api_slot.clone()), false));
        }
        let slot: RuntimeSlot = Arc::default();
        let on_call =
            crate::extensions::provider::call_handler(self.registry.clone(), slot.clone());
        let own = startup
            .start_another(cwd, sink.clone(), slot.clone(), on_call)
            .await
            .map_err(|e| Error::internal_error().data(e.to_string()))?;
        Ok((Some(own), Some(slot), true))
    }

    /// The sink of one session: its events as `session/update`s, its dialogs as permission
    /// requests ([`ui::request`]), answered to the session's extension host (`ext`, set once
    /// it is started).
    fn session_sink(
        &self,
        id: &SessionId,
        cwd: &Path,
        cx: &Connection,
        ext: Arc<OnceLock<Arc<Extensions>>>,
    ) -> EventSink {
        let mapper = Mutex::new(Mapper::new(cwd));
        let (id, cx) = (id.clone(), cx.clone());
        let services = self.factory.services.clone();
        let forms = self.forms.clone();
        Arc::new(move |ev: RpcEvent| {
            if let RpcEvent::ExtensionUiRequest(req) = ev {
                let forms = forms.load(Ordering::SeqCst);
                let mut services = services.clone();
                if let Some(own) = ext.get() {
                    services.extensions = Some(own.clone());
                }
                ui::request(&cx, Some(id.clone()), req, &services, forms);
                return;
            }
            for update in mapper.lock().map(&ev) {
                let _ = cx.send_notification(SessionNotification::new(id.clone(), update));
            }
        })
    }

    /// `session/list`: pi's session files of the cwd asked for (all of the session folder
    /// override when there is one, filtered by cwd), newest first. No paging (`nextCursor` is
    /// never set).
    pub(super) fn list_sessions(&self, req: &ListSessionsRequest) -> ListSessionsResponse {
        let listings = match &req.cwd {
            Some(cwd) => list_sessions(&self.dir_for(cwd))
                .into_iter()
                .filter(|l| same_dir(Path::new(&l.header.cwd), cwd))
                .collect(),
            None => match &self.session_dir {
                Some(dir) => list_sessions(dir),
                None => {
                    let root = self.factory.agent_dir.join("sessions");
                    std::fs::read_dir(root)
                        .map(|rd| {
                            rd.filter_map(Result::ok)
                                .flat_map(|e| list_sessions(&e.path()))
                                .collect()
                        })
                        .unwrap_or_default()
                }
            },
        };
        let sessions = listings
            .into_iter()
            .map(|l| {
                let updated: chrono::DateTime<chrono::Utc> = l.modified.into();
                SessionInfo::new(l.header.id.clone(), PathBuf::from(&l.header.cwd))
                    .updated_at(updated.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            })
            .collect();
        ListSessionsResponse::new(sessions)
    }

    /// At EOF: every run still in flight is aborted and settled, so the session files hold
    /// what was streamed; then every session's extensions hear `session_shutdown` and the
    /// sessions' own hosts are stopped (the start-up host ends with the process; it hears
    /// `session_shutdown` here when no session ever used it).
    pub(super) async fn close(&self) {
        if let Some(gate) = self.factory.services.permissions.as_ref() {
            gate.client_closed();
        }
        let sessions: Vec<Arc<AcpSession>> = self.sessions.lock().values().cloned().collect();
        for s in &sessions {
            s.stop().await;
        }
        for s in &sessions {
            s.close_mcp().await;
        }
        if let Some(ext) = self.factory.services.extensions.as_ref() {
            ext.input_closed();
        }
        for s in &sessions {
            s.close_extensions(true).await;
        }
        if let Some(ext) = self.factory.services.extensions.as_ref() {
            if !self.started.load(Ordering::SeqCst) {
                ext.emit_session_event(&SessionEvent::SessionShutdown {
                    reason: "quit",
                    target_session_file: None,
                })
                .await;
            }
        }
    }
}

impl AcpSession {
    /// Aborts the run in flight (and user bash commands) and waits until it has settled.
    async fn stop(&self) {
        let session = self.runtime.session();
        session.abort_bash();
        session.abort().await;
        self.runtime.wait_settled().await;
    }

    /// Stops the MCP servers the client gave this session (the process's stay).
    async fn close_mcp(&self) {
        if let Some(m) = &self.mcp {
            m.shutdown().await;
        }
    }

    /// The session is closing (`session/close`, loaded again, EOF when `at_eof`): its
    /// extensions hear `session_shutdown {reason:"quit"}` (once); its own host is then stopped
    /// ([`Extensions::shutdown`], after its rounds were given [`crate::extensions::host::EOF_GRACE`]
    /// to answer, as a `pi --mode rpc` whose stdin closed). The start-up host stays up for the
    /// process (its providers).
    async fn close_extensions(&self, at_eof: bool) {
        let Some(ext) = &self.extensions else {
            return;
        };
        if self.own_host || at_eof {
            ext.input_closed();
        }
        if !self.shut_down.swap(true, Ordering::SeqCst) {
            ext.emit_session_event(&SessionEvent::SessionShutdown {
                reason: "quit",
                target_session_file: None,
            })
            .await;
        }
        if self.own_host {
            ext.shutdown().await;
        }
    }

    fn notify(&self, update: SessionUpdate) {
        let _ = self
            .cx
            .send_notification(SessionNotification::new(self.id.clone(), update));
    }

    /// `available_commands_update`: extension commands, the built-in ones, prompt templates and
    /// skills, in the order of RPC `get_commands` (sent as `/name args` they run as in RPC),
    /// then pi-acp's headless commands they do not shadow ([`super::commands`]).
    pub(super) fn send_commands(&self) {
        let session = self.runtime.session();
        let commands = session.commands();
        let own: Vec<(String, String)> = commands
            .into_iter()
            .map(|c| (c.name, c.description.unwrap_or_default()))
            .collect();
        let extra: Vec<(String, String)> = super::commands::COMMANDS
            .iter()
            .filter(|(n, _)| !own.iter().any(|(o, _)| o == n))
            .map(|(n, d)| (n.to_string(), d.to_string()))
            .collect();
        let available = own
            .into_iter()
            .chain(extra)
            .map(|(name, description)| {
                AvailableCommand::new(name, description).input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new("arguments"),
                ))
            })
            .collect();
        self.notify(SessionUpdate::AvailableCommandsUpdate(
            AvailableCommandsUpdate::new(available),
        ));
    }

    /// The startup info of a new session ([`super::startup`]) as one `agent_message_chunk`.
    pub(super) fn send_startup_info(&self) {
        let text = super::startup::text(&self.runtime.session());
        self.notify(SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(
            ContentBlock::Text(acp::TextContent::new(text)),
        )));
    }

    /// `usage_update`: the context tokens in use and the model's window (RPC
    /// `get_session_stats.contextUsage`), and the session's cost so far (`cost`: RPC
    /// `get_session_stats.cost`, the sum of every reply's `usage.cost.total`, in USD as the
    /// model catalogue prices it); nothing while the count is unknown (no model window, or
    /// right after a compaction until a reply reports usage).
    pub(super) fn send_usage(&self) {
        let stats = self.runtime.session().session_stats();
        let Some(usage) = stats.context_usage else {
            return;
        };
        let Some(tokens) = usage.tokens else {
            return;
        };
        let cost = stats
            .cost
            .as_f64()
            .filter(|c| c.is_finite())
            .map(|amount| Cost::new(amount, "USD"));
        self.notify(SessionUpdate::UsageUpdate(
            UsageUpdate::new(tokens, usage.context_window).cost(cost),
        ));
    }

    /// `session/prompt`: one of pi-acp's headless commands ([`super::commands`]) runs here and
    /// answers `end_turn`; anything else is admitted as an RPC `prompt` (a prompt while a turn
    /// runs is queued as a steer); answered when the session is quiet again, with the stop reason of the turn's
    /// last reply ([`stop_reason`]).
    pub(super) async fn prompt(
        self: &Arc<Self>,
        agent: &Agent,
        blocks: &[ContentBlock],
    ) -> Result<PromptResponse, Error> {
        let (text, images) = prompt_parts(blocks).map_err(|e| Error::invalid_params().data(e))?;
        *agent.active.lock() = Some(self.clone());
        let session = self.runtime.session();
        if images.is_empty() {
            if let Some(reply) = super::commands::run(&session, &text).await {
                if !reply.is_empty() {
                    self.notify(SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(
                        ContentBlock::Text(acp::TextContent::new(reply)),
                    )));
                }
                self.send_usage();
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
        }
        if !session.is_streaming() {
            self.cancelled.store(false, Ordering::SeqCst);
        }
        let input = PromptInput {
            text,
            images,
            streaming_behavior: Some("steer".into()),
            source: InputSource::Rpc,
            commands: true,
            agent_dir: Some(agent.factory.agent_dir.clone()),
        };
        let admission = match session.admit(input, Responder::ignore()) {
            Admitting::Done(a) => a,
            Admitting::Pending(work) => work.await,
        };
        let ran = match admission {
            Admission::Started(run) => {
                run.await;
                true
            }
            Admission::Queued => true,
            Admission::Handled => false,
            Admission::Failed(e) => return Err(Error::internal_error().data(e)),
        };
        session.wait_quiet().await;
        self.send_usage();
        if self.cancelled.load(Ordering::SeqCst) {
            return Ok(PromptResponse::new(StopReason::Cancelled));
        }
        if !ran {
            return Ok(PromptResponse::new(StopReason::EndTurn));
        }
        stop_reason(&session).map(PromptResponse::new)
    }

    /// `session/cancel`: aborts the run (the prompt then answers `cancelled`).
    pub(super) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let session = self.runtime.session();
        tokio::spawn(async move { session.abort().await });
    }

    /// `session/set_config_option`: `model` (`provider/id`) or `thought_level`.
    pub(super) fn set_config_option(
        &self,
        req: &SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        let session = self.runtime.session();
        let value = req
            .value
            .as_value_id()
            .map(|v| v.0.to_string())
            .ok_or_else(|| Error::invalid_params().data("a value id is expected"))?;
        match &*req.config_id.0 {
            MODEL_OPTION => {
                let (provider, id) = value
                    .split_once('/')
                    .ok_or_else(|| Error::invalid_params().data("model is provider/id"))?;
                session
                    .set_model(provider, id)
                    .map_err(|e| Error::invalid_params().data(e))?;
            }
            THINKING_OPTION => {
                let level = ThinkingLevel::parse(&value)
                    .ok_or_else(|| Error::invalid_params().data("unknown thinking level"))?;
                session.set_thinking_level(level);
            }
            other => {
                return Err(Error::invalid_params().data(format!("unknown config option {other}")))
            }
        }
        Ok(SetSessionConfigOptionResponse::new(config_options(
            &session,
        )))
    }
}

/// The ACP stop reason of the turn that just ended, from the branch's last reply: `stop` /
/// `toolUse` → `end_turn`, `length` → `max_tokens`, `aborted` → `cancelled`, a provider's
/// refusal (`error` with raw stop reason `refusal`/`sensitive`) → `refusal`; any other error is
/// the prompt's error (its text).
fn stop_reason(session: &AgentSession) -> Result<StopReason, Error> {
    let Some(last) = session.last_branch_assistant() else {
        return Ok(StopReason::EndTurn);
    };
    Ok(match last.stop_reason {
        PiStop::Stop | PiStop::ToolUse | PiStop::Pending => StopReason::EndTurn,
        PiStop::Length => StopReason::MaxTokens,
        PiStop::Aborted => StopReason::Cancelled,
        PiStop::Error
            if matches!(
                last.raw_stop_reason.as_deref(),
                Some("refusal" | "sensitive")
            ) =>
        {
            StopReason::Refusal
        }
        PiStop::Error => {
            return Err(Error::internal_error().data(
                last.error_message
                    .unwrap_or_else(|| "the request failed".into()),
            ))
        }
    })
}

/// The session's config options: the model (`provider/id` of the available models; absent
/// without a model) and the thinking level (the model's levels).
fn config_options(session: &AgentSession) -> Vec<SessionConfigOption> {
    let mut out = Vec::new();
    if let Some(current) = session.model() {
        let mut models = session.available_models();
        if !models
            .iter()
            .any(|m| m.provider == current.provider && m.id == current.id)
        {
            models.insert(0, current.clone());
        }
        let options: Vec<SessionConfigSelectOption> = models
            .iter()
            .map(|m| {
                SessionConfigSelectOption::new(format!("{}/{}", m.provider, m.id), m.name.clone())
            })
            .collect();
        out.push(
            SessionConfigOption::select(
                SessionConfigId::new(MODEL_OPTION),
                "Model",
                format!("{}/{}", current.provider, current.id),
                options,
            )
            .category(SessionConfigOptionCategory::Model),
        );
    }
    let levels: Vec<SessionConfigSelectOption> = session
        .available_thinking_levels()
        .into_iter()
        .map(|l| SessionConfigSelectOption::new(l.as_str(), l.as_str()))
        .collect();
    out.push(
        SessionConfigOption::select(
            SessionConfigId::new(THINKING_OPTION),
            "Thinking",
            session.thinking_level().as_str(),
            levels,
        )
        .category(SessionConfigOptionCategory::ThoughtLevel),
    );
    out
}

/// A prompt's text and images: text blocks in order (joined by a newline), images as pi
/// images, an embedded text resource as its text in a `<resource uri>` block, a resource link
/// as `[name](uri)`. Audio and binary resources are refused (not in our capabilities).
pub fn prompt_parts(blocks: &[ContentBlock]) -> Result<(String, Vec<pi_ai::ImageContent>), String> {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => images.push(pi_ai::ImageContent {
                data: i.data.clone(),
                mime_type: i.mime_type.clone(),
                extra: Default::default(),
            }),
            ContentBlock::ResourceLink(l) => parts.push(format!("[{}]({})", l.name, l.uri)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => parts.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    t.uri, t.text
                )),
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    return Err(format!("binary resources are not supported ({})", b.uri))
                }
                _ => return Err("unsupported resource".into()),
            },
            ContentBlock::Audio(_) => return Err("audio prompts are not supported".into()),
            _ => return Err("unsupported content block".into()),
        }
    }
    Ok((parts.join("\n"), images))
}

/// `cwd` of `session/new`/`load`: absolute and an existing folder, else `invalid_params`.
fn checked_cwd(cwd: &Path) -> Result<PathBuf, Error> {
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(Error::invalid_params().data(format!(
            "cwd must be an absolute path to a folder: {}",
            cwd.display()
        )));
    }
    Ok(cwd.to_path_buf())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}
