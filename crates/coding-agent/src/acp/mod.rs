//! ACP mode (`pi --mode acp`): the Agent Client Protocol v1 over stdio, newline-delimited
//! JSON-RPC 2.0, through the official Rust SDK (`agent-client-protocol`; every message is one
//! of its `v1::schema` types). See docs/acp.md.
//!
//! Like RPC mode this module only translates: the session ([`AgentSession`]) owns admission,
//! retry, compaction and the session file. Each ACP session is one [`AgentSessionRuntime`] of
//! the process's [`SessionFactory`], writing pi's own session files (the ones `pi --mode rpc`
//! writes, so either can resume them); several can be open at once.
//!
//! Framing and bad input are the SDK's: a line that is not JSON gets a `-32700` parse error,
//! an unknown method `-32601`, and the agent keeps serving. Handlers run in the SDK's dispatch
//! loop and return at once; whatever waits (a run, extension handlers, a permission request to
//! the client) runs as a tokio task, so the loop keeps reading (the SDK's futures are `Send`,
//! so they run on our multi-thread runtime as they are; no `LocalSet`).
//!
//! At EOF the runs still in flight are aborted and waited for, so their messages reach the
//! session file; a client that closed pi's stdout first is treated the same way
//! ([`transport::ClientOut`]), not as a transport failure.

mod commands;
mod mcp;
mod sessions;
mod startup;
mod transport;
mod ui;
pub mod update;

use crate::agent_session::factory::{SessionFactory, SessionRequest};
use crate::extensions::api::RuntimeSlot;
use crate::protocol::rpc::{EventSink, RpcEvent};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest, LoadSessionRequest,
    McpCapabilities, NewSessionRequest, PromptCapabilities, PromptRequest, ResumeSessionRequest,
    SessionCapabilities, SessionCloseCapabilities, SessionListCapabilities,
    SessionResumeCapabilities, SetSessionConfigOptionRequest,
};
use agent_client_protocol::{ByteStreams, Client, JsonRpcResponse};
use parking_lot::RwLock;
use sessions::Agent;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The connection to the client, as the SDK's handlers get it.
pub type Connection = agent_client_protocol::v1::ConnectionTo<Client>;

/// Forwards the events of the extension host itself (its UI requests, which belong to no
/// session) to whatever ACP mode installs once the connection is up; before that they are
/// dropped. Cheap to clone.
#[derive(Clone, Default)]
pub struct EventRelay(Arc<RwLock<Option<EventSink>>>);

impl EventRelay {
    /// A sink that hands every event to the installed one.
    pub fn sink(&self) -> EventSink {
        let slot = self.0.clone();
        Arc::new(move |ev: RpcEvent| {
            let target = slot.read().clone();
            if let Some(target) = target {
                target(ev)
            }
        })
    }

    /// Installs the receiver of the relayed events.
    fn install(&self, sink: EventSink) {
        *self.0.write() = Some(sink);
    }
}

/// What ACP mode is started with (built by the start-up as for RPC mode).
pub struct AcpStart {
    /// Builds every session of the process.
    pub factory: SessionFactory,
    /// The session the command line chose (`--session`, `--no-session`, …): taken by the first
    /// `session/new` for the same cwd; its model and thinking level are every new session's.
    pub request: SessionRequest,
    /// Where the API calls of the extension host started at start-up go (the one in
    /// `factory`): bound to the first session, which uses that host; every later session gets
    /// a host of its own (acp/sessions.rs).
    pub api_slot: RuntimeSlot,
    /// The extension host's own events (its sink at start-up).
    pub relay: EventRelay,
    /// The session folder override (`--session-dir`, `PI_CODING_AGENT_SESSION_DIR`, settings
    /// `sessionDir`); `None` = pi's per-cwd folder under the agent dir.
    pub session_dir: Option<PathBuf>,
    /// The model registry: the provider calls of the later sessions' extension hosts
    /// (`pi.registerProvider`) go to it, as the first host's do.
    pub registry: crate::extensions::provider::SharedRegistry,
    /// `--tools` / `--exclude-tools` as they apply to the MCP tools of the client's servers
    /// (`mcpServers` of `session/new`/`load`/`resume`); `None` with `--no-mcp`: the client's
    /// servers are ignored and `initialize` announces no HTTP.
    pub mcp_filter: Option<crate::mcp::ToolFilter>,
}

/// Runs ACP mode on stdin/stdout until stdin closes (module doc). `Err`: the transport failed.
pub async fn run(start: AcpStart) -> std::io::Result<()> {
    let agent = Arc::new(Agent::new(start));
    if let Some(gate) = agent.factory().services.permissions.as_ref() {
        // The tool permission policy's `ask` goes to the client (session/request_permission).
        gate.client_attached();
    }
    let result = serve(agent.clone()).await;
    agent.close().await;
    result.map_err(|e| std::io::Error::other(e.to_string()))
}

/// The SDK connection with pi's handlers, until EOF.
async fn serve(agent: Arc<Agent>) -> Result<(), agent_client_protocol::Error> {
    let transport = ByteStreams::new(
        transport::ClientOut::new(tokio::io::stdout()).compat_write(),
        tokio::io::stdin().compat(),
    );
    let (a1, a2, a3, a4, a5, a6, a7, a8, a9) = (
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
    );
    agent_client_protocol::Agent
        .v1()
        .name("pi")
        .on_receive_request(
            async move |req: InitializeRequest, responder, cx: Connection| {
                a1.connected(&cx, &req);
                responder.respond(initialize(&req, a1.mcp_enabled()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx: Connection| {
                let agent = a2.clone();
                tokio::spawn(async move {
                    let quiet = agent.factory().services.settings.lock().quiet_startup();
                    answer_opened(responder, agent.new_session(req, &cx).await, !quiet)
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx: Connection| {
                let agent = a3.clone();
                tokio::spawn(async move {
                    answer_opened(responder, agent.load_session(req, &cx).await, false)
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ResumeSessionRequest, responder, cx: Connection| {
                let agent = a8.clone();
                tokio::spawn(async move {
                    answer_opened(responder, agent.resume_session(req, &cx).await, false)
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: CloseSessionRequest, responder, _cx: Connection| {
                let agent = a9.clone();
                tokio::spawn(async move {
                    let _ = if agent.close_session(&req.session_id).await {
                        responder.respond(CloseSessionResponse::new())
                    } else {
                        responder.respond_with_error(
                            agent_client_protocol::v1::schema::Error::session_not_found(
                                req.session_id,
                            )
                            .into(),
                        )
                    };
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest, responder, _cx: Connection| {
                responder.respond(a4.list_sessions(&req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, _cx: Connection| {
                let agent = a5.clone();
                let session = match agent.session(&req.session_id) {
                    Ok(s) => s,
                    Err(e) => return responder.respond_with_error(e),
                };
                tokio::spawn(async move {
                    let result = session.prompt(&agent, &req.prompt).await;
                    let _ = responder.respond_with_result(result);
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest, responder, _cx: Connection| {
                let agent = a6.clone();
                let result = agent
                    .session(&req.session_id)
                    .and_then(|s| s.set_config_option(&req));
                responder.respond_with_result(result)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx: Connection| {
                if let Ok(s) = a7.session(&n.session_id) {
                    s.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

/// Answers a `session/new`/`load`/`resume` once its session is open, then sends the session's
/// startup info when `startup` (a new session without `quietStartup`, [`startup`]),
/// `available_commands_update` and `usage_update` (after the answer, which tells the client
/// the session id).
fn answer_opened<T: JsonRpcResponse>(
    responder: agent_client_protocol::v1::Responder<T>,
    opened: Result<(T, Arc<sessions::AcpSession>), agent_client_protocol::Error>,
    startup: bool,
) {
    let _ = match opened {
        Ok((response, session)) => {
            let sent = responder.respond(response);
            if startup {
                session.send_startup_info();
            }
            session.send_commands();
            session.send_usage();
            sent
        }
        Err(e) => responder.respond_with_error(e),
    };
}

/// The `initialize` answer: protocol v1 and what this agent does (docs/acp.md): images and
/// embedded resources in prompts (no audio), `session/load`, `session/list`, `session/resume`,
/// `session/close`; the client's MCP servers over stdio and streamable HTTP (not SSE), unless
/// `mcp` is off (`--no-mcp`: stdio, which ACP does not negotiate, is ignored too).
fn initialize(req: &InitializeRequest, mcp: bool) -> InitializeResponse {
    let version = if req.protocol_version < ProtocolVersion::V1 {
        req.protocol_version
    } else {
        ProtocolVersion::V1
    };
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(
            PromptCapabilities::new()
                .image(true)
                .audio(false)
                .embedded_context(true),
        )
        .session_capabilities(
            SessionCapabilities::new()
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .close(SessionCloseCapabilities::new()),
        )
        .mcp_capabilities(McpCapabilities::new().http(mcp).sse(false));
    InitializeResponse::new(version)
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("pi", env!("CARGO_PKG_VERSION")))
}
