//! The servers of one `pi` process (docs/mcp.md "Diagnose connection problems"): every enabled
//! server connects in the background when the manager starts; a failure is reported once on
//! stderr and the agent keeps serving; the first prompt waits up to [`DIRECT_WAIT`] only for
//! servers that may have `direct` tools; a dropped connection reconnects on the next call;
//! `tools/list_changed` refreshes the server's tools.

use super::client::{self, Connection, Handler, McpError, Peer, ServerInfo};
use super::config::{Exposure, McpConfig, ServerConfig};
use super::log::McpLog;
use super::tools::{mcp_tool_name, McpTool, ResourceTool, ResourceToolKind};
use pi_agent::AgentTool;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long a prompt waits for servers with `direct` tools (upstream: 10 s).
pub const DIRECT_WAIT: Duration = Duration::from_secs(10);

/// Connection state of one server, as `pi mcp list` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// `enabled: false`.
    Disabled,
    /// Connect in progress.
    Connecting,
    /// Connected; tools listed.
    Connected,
    /// Was connected; the transport closed. Reconnects on the next call.
    Disconnected,
    /// The last connect failed (message).
    Failed(String),
    /// An OAuth server rejected the connection and no stored token helped: `pi mcp login`
    /// or `/mcp login <server>` is needed.
    NeedsAuth,
}

impl ServerState {
    /// `connected`, `failed`, … (upstream's state words).
    pub fn word(&self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Disconnected => "disconnected",
            ServerState::Failed(_) => "failed",
            ServerState::NeedsAuth => "needs-auth",
        }
    }
}

struct SlotState {
    state: ServerState,
    info: ServerInfo,
    peer: Option<Peer>,
    /// Declared tools of this server (direct exposure), rebuilt on connect / list change.
    direct: Vec<Arc<dyn AgentTool>>,
    reported: bool,
    /// Why a connected server dropped (`Connection closed`), shown by `/mcp`.
    error: Option<String>,
    /// The last `WWW-Authenticate` challenge of an OAuth server (sign-in reads its
    /// `resource_metadata` and `scope`).
    challenge: Option<String>,
    /// When the access token sent on this connection expires (ms since the epoch).
    token_expires: Option<i64>,
}

/// Waits between connect attempts to an HTTP server after a transient failure (upstream:
/// 250 ms, then 1 s: two retries).
const CONNECT_RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// One configured server.
pub struct ServerSlot {
    /// Its configuration.
    pub cfg: ServerConfig,
    cwd: PathBuf,
    log: McpLog,
    state: parking_lot::Mutex<SlotState>,
    conn: tokio::sync::Mutex<Option<Connection>>,
    settled: tokio::sync::watch::Sender<bool>,
    report_errors: bool,
    /// Fired by [`McpManager::shutdown`]: a connect in progress gives up at once (its child,
    /// still registered with crate::procs, is killed when `pi` exits).
    shutdown: tokio_util::sync::CancellationToken,
    /// `<agent dir>/mcp-auth.json` (OAuth tokens).
    auth: super::oauth::AuthStore,
}

impl ServerSlot {
    /// Current state.
    pub fn state(&self) -> ServerState {
        self.state.lock().state.clone()
    }

    /// Tools as the server listed them.
    pub fn tools(&self) -> Vec<Value> {
        self.state.lock().info.tools.clone()
    }

    /// Whether the server announced resources.
    pub fn has_resources(&self) -> bool {
        self.state.lock().info.has_resources
    }

    /// Whether the server may declare direct tools (decided from its config alone).
    pub fn may_have_direct(&self) -> bool {
        self.cfg.enabled
            && (self.cfg.exposure == Exposure::Direct
                || self
                    .cfg
                    .tool_exposure
                    .iter()
                    .any(|(_, e)| *e == Exposure::Direct))
    }

    /// The error shown by `/mcp` for a server that is not connected.
    pub fn error(&self) -> Option<String> {
        let st = self.state.lock();
        match &st.state {
            ServerState::Failed(m) => Some(m.clone()),
            ServerState::Disconnected => st.error.clone(),
            _ => None,
        }
    }

    /// The server URL when the server authenticates with OAuth (an HTTP server without an
    /// `Authorization` header).
    pub fn oauth_url(&self) -> Option<&str> {
        super::oauth::oauth_url(&self.cfg)
    }

    /// The last `WWW-Authenticate` challenge of this server.
    pub fn challenge(&self) -> Option<String> {
        self.state.lock().challenge.clone()
    }

    /// The credential store.
    pub fn auth_store(&self) -> &super::oauth::AuthStore {
        &self.auth
    }

    fn set_needs_auth(&self, challenge: Option<String>) {
        let report = {
            let mut st = self.state.lock();
            st.state = ServerState::NeedsAuth;
            st.peer = None;
            st.direct.clear();
            if challenge.is_some() {
                st.challenge = challenge;
            }
            !std::mem::replace(&mut st.reported, true)
        };
        if report && self.report_errors {
            crate::config::warn(&format!(
                "MCP server \"{}\" requires sign-in. Run /mcp login {} or pi mcp login {}.",
                self.cfg.name, self.cfg.name, self.cfg.name
            ));
        }
    }

    fn set_failed(&self, e: &McpError) {
        let msg = e.to_string();
        let report = {
            let mut st = self.state.lock();
            st.state = ServerState::Failed(msg.clone());
            st.peer = None;
            st.direct.clear();
            !std::mem::replace(&mut st.reported, true)
        };
        if report && self.report_errors {
            crate::config::warn(&format!(
                "MCP server \"{}\" failed to connect: {msg}",
                self.cfg.name
            ));
        }
    }

    /// Connects (or reconnects) unless connected; returns a request handle.
    pub async fn ensure_connected(self: &Arc<Self>) -> Result<Peer, McpError> {
        let mut guard = self.conn.lock().await;
        if let Some(c) = guard.as_ref() {
            // The same margin as the stored token's: a connection whose token is about to run
            // out reconnects with a refreshed one rather than risk a 401 mid-call (which rmcp
            // may report as a closed transport, and a tool call is not sent twice).
            let expired = self.state.lock().token_expires.is_some_and(|t| {
                t <= chrono::Utc::now().timestamp_millis() + super::oauth::EXPIRY_MARGIN_MS
            });
            if !c.is_closed() && !expired {
                if let Some(p) = self.state.lock().peer.clone() {
                    return Ok(p);
                }
            }
        }
        if let Some(old) = guard.take() {
            old.close().await;
        }
        self.state.lock().state = ServerState::Connecting;
        let weak: Weak<ServerSlot> = Arc::downgrade(self);
        let on_changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(slot) = weak.upgrade() {
                tokio::spawn(async move { slot.refresh_tools().await });
            }
        });
        let handler = Handler::new(&self.cfg.name, self.log.clone(), on_changed);
        let result = tokio::select! {
            r = self.connect_with_retries(handler) => r,
            _ = self.shutdown.cancelled() => Err(McpError::Connect("shut down while connecting".into())),
        };
        let out = match result {
            Ok((conn, expires)) => {
                let peer = conn.peer();
                let info = conn.info.clone();
                *guard = Some(conn);
                self.install(info, Some(peer.clone()));
                self.state.lock().token_expires = expires;
                Ok(peer)
            }
            Err(McpError::AuthRequired(challenge)) if self.oauth_url().is_some() => {
                self.set_needs_auth(challenge);
                Err(McpError::Request(format!(
                    "MCP server \"{}\" requires sign-in. Run /mcp login {} to sign in.",
                    self.cfg.name, self.cfg.name
                )))
            }
            Err(McpError::AuthRequired(challenge)) => {
                let e = McpError::Connect(format!(
                    "the server answered 401 Unauthorized{}",
                    challenge.map(|c| format!(" ({c})")).unwrap_or_default()
                ));
                self.set_failed(&e);
                Err(e)
            }
            Err(e) => {
                self.set_failed(&e);
                Err(e)
            }
        };
        self.settled.send_replace(true);
        out
    }

    /// One connect, retried after transient HTTP failures ([`CONNECT_RETRY_DELAYS`]); an OAuth
    /// server gets its stored token (refreshed when expired), and after a 401 one refresh and
    /// one more attempt. Returns the connection and when its token expires.
    async fn connect_with_retries(
        &self,
        handler: Handler,
    ) -> Result<(Connection, Option<i64>), McpError> {
        let oauth = self.oauth_url().map(str::to_string);
        let mut token = None;
        let mut expires = None;
        if let Some(url) = &oauth {
            if let Ok(Some(mut st)) = self.auth.load(&self.cfg.name, url).await {
                if st.expired() {
                    let stale = st.tokens.as_ref().map(|t| t.access_token.clone());
                    let refreshed =
                        super::oauth::refresh(&self.auth, &self.cfg.name, url, stale.as_deref())
                            .await;
                    if let Ok(fresh) = refreshed {
                        st = fresh;
                    }
                }
                expires = st.tokens_expire_at;
                token = st.tokens.map(|t| t.access_token);
            }
        }
        let http = matches!(self.cfg.transport, super::config::Transport::Http { .. });
        let mut attempt = 0;
        let mut refreshed = false;
        loop {
            match client::connect(&self.cfg, &self.cwd, handler.clone(), token.clone()).await {
                Ok(c) => return Ok((c, expires)),
                Err(McpError::AuthRequired(challenge)) => {
                    if let Some(ch) = &challenge {
                        self.state.lock().challenge = Some(ch.clone());
                    }
                    let Some(url) = oauth.as_ref().filter(|_| token.is_some() && !refreshed) else {
                        return Err(McpError::AuthRequired(challenge));
                    };
                    refreshed = true;
                    match super::oauth::refresh(&self.auth, &self.cfg.name, url, token.as_deref())
                        .await
                    {
                        Ok(st) => {
                            expires = st.tokens_expire_at;
                            token = st.tokens.map(|t| t.access_token);
                        }
                        Err(_) => return Err(McpError::AuthRequired(challenge)),
                    }
                }
                Err(e) if http && e.is_transient() && attempt < CONNECT_RETRY_DELAYS.len() => {
                    tokio::time::sleep(CONNECT_RETRY_DELAYS[attempt]).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs one request on this server, connecting first when needed. A request the server
    /// refused with 401 is sent again once after a token refresh (it did not run); a
    /// `read_only` one (resource lists and reads) is sent again once, 250 ms after a transient
    /// HTTP failure; tool calls are not, since they may have run (docs/mcp.md). A closed
    /// transport marks the server disconnected: the next call reconnects.
    pub async fn request<T, F, Fut>(self: &Arc<Self>, read_only: bool, f: F) -> Result<T, McpError>
    where
        F: Fn(Peer) -> Fut,
        Fut: std::future::Future<Output = Result<T, McpError>>,
    {
        let mut auth_retried = false;
        let mut transient_retried = false;
        loop {
            let peer = self.ensure_connected().await?;
            match f(peer).await {
                Err(McpError::AuthRequired(challenge))
                    if !auth_retried && self.oauth_url().is_some() =>
                {
                    auth_retried = true;
                    if challenge.is_some() {
                        self.state.lock().challenge = challenge;
                    }
                    // Reconnect: the connect refreshes the token (or reports needs-auth).
                    self.state.lock().token_expires = Some(0);
                    if let Some(url) = self.oauth_url() {
                        let _ = super::oauth::refresh(&self.auth, &self.cfg.name, url, None).await;
                    }
                }
                Err(e) if read_only && !transient_retried && e.is_transient() => {
                    transient_retried = true;
                    tokio::time::sleep(CONNECT_RETRY_DELAYS[0]).await;
                }
                Err(McpError::Closed) => {
                    self.mark_dropped();
                    return Err(McpError::Closed);
                }
                other => return other,
            }
        }
    }

    /// Connects again (after a sign-in, or on `/mcp reconnect`): the old connection is closed
    /// first.
    pub async fn reconnect(self: &Arc<Self>) -> Result<(), McpError> {
        {
            let mut guard = self.conn.lock().await;
            if let Some(old) = guard.take() {
                old.close().await;
            }
            let mut st = self.state.lock();
            st.peer = None;
            st.reported = false;
        }
        self.ensure_connected().await.map(|_| ())
    }

    /// Deletes the stored credentials and disconnects (state needs sign-in); whether there
    /// were credentials.
    pub async fn sign_out(&self) -> Result<bool, super::oauth::OAuthError> {
        let Some(url) = self.oauth_url() else {
            return Ok(false);
        };
        let removed = self.auth.remove(&self.cfg.name, url)?;
        let conn = self.conn.lock().await.take();
        if let Some(c) = conn {
            c.close().await;
        }
        let mut st = self.state.lock();
        st.state = ServerState::NeedsAuth;
        st.peer = None;
        st.direct.clear();
        st.reported = true;
        Ok(removed)
    }

    /// `/mcp` status line(s) of this server (upstream's plain status): `name: state[, N tools]
    /// (exposure)` and the error, indented, for a server that is not connected.
    pub fn status_line(&self) -> String {
        let name = &self.cfg.name;
        let exposure = self.cfg.exposure.as_str();
        let st = self.state.lock();
        if !self.cfg.enabled {
            return format!("{name}: disabled ({exposure})");
        }
        let state = match &st.state {
            ServerState::NeedsAuth => {
                return format!("{name}: needs sign-in, run /mcp login {name} ({exposure})")
            }
            ServerState::Connected => format!("connected, {} tools", st.info.tools.len()),
            ServerState::Disconnected => "disconnected, reconnects on next call".to_string(),
            other => other.word().to_string(),
        };
        let error = match &st.state {
            ServerState::Failed(m) => Some(m.clone()),
            ServerState::Disconnected => st.error.clone(),
            _ => None,
        };
        let mut line = format!("{name}: {state} ({exposure})");
        if let Some(e) = error {
            for l in e.lines() {
                line.push_str("\n    ");
                line.push_str(l);
            }
        }
        line
    }

    /// Short state (upstream `describeState`): `connected · 3 tools · resources`, `failed:
    /// <first line>`, `needs sign-in`, …
    pub fn describe_state(&self) -> String {
        let st = self.state.lock();
        match &st.state {
            _ if !self.cfg.enabled => "disabled".into(),
            ServerState::NeedsAuth => "needs sign-in".into(),
            ServerState::Failed(m) => format!("failed: {}", m.lines().next().unwrap_or("")),
            ServerState::Connected => {
                let n = st.info.tools.len();
                format!(
                    "connected · {n} tool{}{}",
                    if n == 1 { "" } else { "s" },
                    if st.info.has_resources {
                        " · resources"
                    } else {
                        ""
                    }
                )
            }
            ServerState::Connecting => "connecting…".into(),
            other => other.word().into(),
        }
    }

    fn install(self: &Arc<Self>, info: ServerInfo, peer: Option<Peer>) {
        let direct = self.build_direct(&info.tools);
        let mut st = self.state.lock();
        st.state = ServerState::Connected;
        st.info = info;
        if peer.is_some() {
            st.peer = peer;
        }
        st.direct = direct;
        st.reported = false;
        st.error = None;
    }

    /// Re-lists tools after `notifications/tools/list_changed`: new tools are added, withdrawn
    /// ones become unreachable.
    async fn refresh_tools(self: &Arc<Self>) {
        let guard = self.conn.lock().await;
        let Some(conn) = guard.as_ref() else { return };
        if let Ok(tools) = conn.list_tools().await {
            let direct = self.build_direct(&tools);
            let mut st = self.state.lock();
            st.info.tools = tools;
            st.direct = direct;
        }
    }

    /// The model-facing names of this server's tools: `mcp__<server>__<tool>` sanitised; tools
    /// whose names collide after sanitising all get the hash suffix.
    fn names(&self, tools: &[Value]) -> Vec<(String, Value)> {
        let raw: Vec<&str> = tools
            .iter()
            .map(|t| t.get("name").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let plain: Vec<String> = raw
            .iter()
            .map(|t| mcp_tool_name(&self.cfg.name, t, false))
            .collect();
        tools
            .iter()
            .zip(raw.iter())
            .zip(plain.iter())
            .map(|((t, r), p)| {
                let taken = plain.iter().filter(|q| *q == p).count() > 1;
                let name = if taken {
                    mcp_tool_name(&self.cfg.name, r, true)
                } else {
                    p.clone()
                };
                (name, t.clone())
            })
            .collect()
    }

    fn build_direct(self: &Arc<Self>, tools: &[Value]) -> Vec<Arc<dyn AgentTool>> {
        self.names(tools)
            .into_iter()
            .filter(|(_, t)| {
                let name = t.get("name").and_then(Value::as_str).unwrap_or("");
                self.cfg.tool_exposure(name) == Exposure::Direct
            })
            .map(|(model_name, t)| {
                Arc::new(McpTool::new(self.clone(), model_name, t)) as Arc<dyn AgentTool>
            })
            .collect()
    }

    /// Every tool of the server that is not `hidden` (and passes `filter`), with its
    /// model-facing name and effective exposure; empty until the server connected.
    pub fn reachable_tools(
        self: &Arc<Self>,
        filter: &ToolFilter,
    ) -> Vec<(String, Exposure, McpTool)> {
        let tools = self.state.lock().info.tools.clone();
        self.names(&tools)
            .into_iter()
            .filter_map(|(model_name, t)| {
                let raw = t.get("name").and_then(Value::as_str).unwrap_or("");
                let exposure = self.cfg.tool_exposure(raw);
                (exposure != Exposure::Hidden && filter.keeps(&model_name)).then(|| {
                    (
                        model_name.clone(),
                        exposure,
                        McpTool::new(self.clone(), model_name, t),
                    )
                })
            })
            .collect()
    }

    /// `instructions` the server sent in `initialize`, once connected.
    pub fn instructions(&self) -> Option<String> {
        self.state.lock().info.instructions.clone()
    }

    /// Whether some tool of the server may have `exposure` (decided from its config alone).
    pub fn may_have(&self, exposure: Exposure) -> bool {
        self.cfg.enabled
            && (self.cfg.exposure == exposure
                || self.cfg.tool_exposure.iter().any(|(_, e)| *e == exposure))
    }

    /// Waits for this server's first connect attempt, at most `limit`.
    pub async fn wait_settled(&self, limit: Duration) {
        let mut rx = self.settled.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|v| *v)).await;
    }

    /// Marks the connection dropped (the next call reconnects).
    pub fn mark_dropped(&self) {
        let mut st = self.state.lock();
        if st.state == ServerState::Connected {
            st.state = ServerState::Disconnected;
            st.error = Some("Connection closed".into());
        }
        st.peer = None;
    }

    async fn close(&self) {
        let conn = self.conn.lock().await.take();
        if let Some(c) = conn {
            c.close().await;
        }
    }
}

/// `--tools` / `--exclude-tools` as they apply to MCP tools (docs/mcp.md "Control tool
/// exposure"): `--tools` removes MCP tools only when one of its entries starts with `mcp__`
/// (then only matching MCP tools, and resource tools named in it, stay); `--exclude-tools`
/// removes matching names (exact or `*` patterns).
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    /// The `--tools` entries when one starts with `mcp__`.
    pub include: Option<Vec<String>>,
    /// `--exclude-tools` entries.
    pub exclude: Vec<String>,
}

impl ToolFilter {
    /// From the raw `--tools` and `--exclude-tools` lists.
    pub fn from_cli(tools: Option<&[String]>, exclude: Option<&[String]>) -> Self {
        let include = tools
            .filter(|t| {
                t.iter()
                    .any(|e| e.trim_start_matches('+').starts_with("mcp__"))
            })
            .map(|t| {
                t.iter()
                    .map(|e| e.trim_start_matches('+').to_string())
                    .collect()
            });
        ToolFilter {
            include,
            exclude: exclude.map(<[String]>::to_vec).unwrap_or_default(),
        }
    }

    /// Whether the model-facing tool `name` is kept.
    pub fn keeps(&self, name: &str) -> bool {
        if crate::tools::select::matches_any(&self.exclude, name) {
            return false;
        }
        self.include
            .as_ref()
            .is_none_or(|inc| crate::tools::select::matches_any(inc, name))
    }
}

/// All servers of the process.
pub struct McpManager {
    /// Applied to [`McpManager::direct_tools`].
    pub filter: ToolFilter,
    slots: Vec<Arc<ServerSlot>>,
    shutdown: tokio_util::sync::CancellationToken,
    /// Configuration errors (already reported on stderr when the manager was started).
    pub config_errors: Vec<String>,
    /// Set once the background connects may begin ([`McpManager::begin_connecting`]).
    go: tokio::sync::watch::Sender<bool>,
    /// A session's manager ([`McpManager::for_session`]): the process's manager whose servers
    /// the first [`McpManager::own_from`] slots are (shared, not closed by this one).
    base: Option<Arc<McpManager>>,
    /// The index of the first slot this manager owns (and closes at [`McpManager::shutdown`]).
    own_from: usize,
}

/// How long [`McpManager::start`]'s background connects wait for
/// [`McpManager::begin_connecting`] at most (a client that sends nothing still gets its servers
/// connected).
pub const CONNECT_DEFER_LIMIT: Duration = Duration::from_millis(50);

impl McpManager {
    /// Builds the slots without connecting. `report_errors`: print failures on stderr (once per
    /// failure) — off for `pi mcp list`, which prints its own report.
    /// `agent_dir` holds `mcp-auth.json`.
    pub fn new(
        config: McpConfig,
        cwd: &Path,
        agent_dir: &Path,
        log: McpLog,
        report_errors: bool,
    ) -> Arc<Self> {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let slots = config
            .servers
            .into_iter()
            .map(|cfg| new_slot(cfg, cwd, agent_dir, &log, report_errors, &shutdown))
            .collect();
        Arc::new(McpManager {
            filter: ToolFilter::default(),
            slots,
            shutdown,
            config_errors: config.errors,
            go: tokio::sync::watch::channel(false).0,
            base: None,
            own_from: 0,
        })
    }

    /// The servers of one session (ACP's `mcpServers` of `session/new`/`load`/`resume`):
    /// `base`'s servers (the process's `mcp.json` ones, shared: connected once, closed by
    /// `base`), less those whose namespace one of `servers` takes, then `servers`, which this
    /// manager owns: they connect in the background now (call inside the tokio runtime) and
    /// stop at [`McpManager::shutdown`]. Failures are reported on stderr, once; `filter` as
    /// for the process's servers (`--tools` / `--exclude-tools`).
    pub fn for_session(
        base: Option<&Arc<McpManager>>,
        servers: Vec<ServerConfig>,
        cwd: &Path,
        agent_dir: &Path,
        filter: ToolFilter,
    ) -> Arc<Self> {
        let taken: Vec<String> = servers
            .iter()
            .map(|s| super::config::namespace(&s.name))
            .collect();
        let mut slots: Vec<Arc<ServerSlot>> = base
            .map(|b| {
                b.slots
                    .iter()
                    .filter(|s| !taken.contains(&super::config::namespace(&s.cfg.name)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let own_from = slots.len();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let log = McpLog::new(agent_dir.join("mcp.log"));
        slots.extend(
            servers
                .into_iter()
                .map(|cfg| new_slot(cfg, cwd, agent_dir, &log, true, &shutdown)),
        );
        let manager = Arc::new(McpManager {
            filter,
            slots,
            shutdown,
            config_errors: Vec::new(),
            go: tokio::sync::watch::channel(true).0,
            base: base.cloned(),
            own_from,
        });
        for slot in &manager.slots[own_from..] {
            if slot.cfg.enabled {
                let slot = slot.clone();
                tokio::spawn(async move {
                    let _ = slot.ensure_connected().await;
                });
            }
        }
        manager
    }

    /// Reports config errors on stderr and connects every enabled server in the background
    /// (must be called inside the tokio runtime). The connects begin once
    /// [`McpManager::begin_connecting`] is called — after the RPC reader has handled the first
    /// command, or when a prompt waits for direct servers — or after [`CONNECT_DEFER_LIMIT`],
    /// so that spawning the servers does not compete with the first response for the CPU
    /// (issue 13: the first `get_state` as fast as without MCP).
    pub fn start(self: &Arc<Self>) {
        for e in &self.config_errors {
            crate::config::warn(&format!("MCP: {e}"));
        }
        for slot in &self.slots {
            if slot.cfg.enabled {
                let slot = slot.clone();
                let mut go = self.go.subscribe();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(CONNECT_DEFER_LIMIT, go.wait_for(|v| *v)).await;
                    let _ = slot.ensure_connected().await;
                });
            }
        }
    }

    /// Lets the background connects of [`McpManager::start`] begin now (idempotent, cheap).
    pub fn begin_connecting(&self) {
        self.go.send_if_modified(|v| !std::mem::replace(v, true));
        if let Some(base) = &self.base {
            base.begin_connecting();
        }
    }

    /// The configured servers.
    pub fn servers(&self) -> &[Arc<ServerSlot>] {
        &self.slots
    }

    /// The server called `name` (`-` and `_` count as the same, as upstream's name rules).
    pub fn find(&self, name: &str) -> Option<Arc<ServerSlot>> {
        let norm = |s: &str| s.replace('-', "_");
        self.slots
            .iter()
            .find(|s| s.cfg.name == name)
            .or_else(|| self.slots.iter().find(|s| norm(&s.cfg.name) == norm(name)))
            .cloned()
    }

    /// The startup report (upstream `reportProblems`): `MCP servers need attention:`, one
    /// indented line per configuration error (`config: …`) and per server that failed or
    /// needs a sign-in (`<name>: <short state>`), then `Run /mcp to fix.`; `None` when all is
    /// well.
    pub fn attention_text(&self) -> Option<String> {
        let mut lines: Vec<String> = self
            .config_errors
            .iter()
            .map(|e| format!("config: {e}"))
            .collect();
        for s in &self.slots {
            if matches!(s.state(), ServerState::Failed(_) | ServerState::NeedsAuth) {
                lines.push(format!("{}: {}", s.cfg.name, s.describe_state()));
            }
        }
        if lines.is_empty() {
            return None;
        }
        let body: Vec<String> = lines.iter().map(|l| format!("  {l}")).collect();
        Some(format!(
            "MCP servers need attention:\n{}\nRun /mcp to fix.",
            body.join("\n")
        ))
    }

    /// `/mcp` without arguments: every server's [`ServerSlot::status_line`], then the
    /// configuration errors.
    pub fn status_text(&self) -> String {
        let mut lines: Vec<String> = self.slots.iter().map(|s| s.status_line()).collect();
        for e in &self.config_errors {
            lines.push(format!("config error: {e}"));
        }
        lines.join("\n")
    }

    /// Waits until every server that may have direct tools has finished its first connect
    /// attempt, at most `limit`.
    pub async fn wait_for_direct(&self, limit: Duration) {
        self.begin_connecting();
        let waits = self.slots.iter().filter(|s| s.may_have_direct()).map(|s| {
            let mut rx = s.settled.subscribe();
            async move {
                let _ = rx.wait_for(|v| *v).await;
            }
        });
        let all = futures::future::join_all(waits);
        let _ = tokio::time::timeout(limit, all).await;
    }

    /// Waits for every enabled server's first connect attempt, at most `limit`.
    pub async fn wait_for_all(&self, limit: Duration) {
        let waits = self.slots.iter().map(|s| {
            let mut rx = s.settled.subscribe();
            async move {
                let _ = rx.wait_for(|v| *v).await;
            }
        });
        let _ = tokio::time::timeout(limit, futures::future::join_all(waits)).await;
    }

    /// The tools declared to the model now: every connected server's direct tools, then the
    /// resource tools when a direct server offers resources.
    pub fn direct_tools(self: &Arc<Self>) -> Vec<Arc<dyn AgentTool>> {
        let mut out: Vec<Arc<dyn AgentTool>> = Vec::new();
        let mut resources_direct = false;
        for s in &self.slots {
            let st = s.state.lock();
            if st.state != ServerState::Connected && st.state != ServerState::Disconnected {
                continue;
            }
            out.extend(st.direct.iter().cloned());
            if st.info.has_resources && s.cfg.exposure == Exposure::Direct {
                resources_direct = true;
            }
        }
        if resources_direct {
            for kind in [
                ResourceToolKind::List,
                ResourceToolKind::Templates,
                ResourceToolKind::Read,
            ] {
                out.push(Arc::new(ResourceTool::new(Arc::downgrade(self), kind)));
            }
        }
        out.retain(|t| self.filter.keeps(&t.definition().name));
        out
    }

    /// Enabled, non-hidden servers that announced resources.
    pub fn resource_servers(&self) -> Vec<Arc<ServerSlot>> {
        let mut v: Vec<Arc<ServerSlot>> = self
            .slots
            .iter()
            .filter(|s| s.cfg.enabled && s.cfg.exposure != Exposure::Hidden && s.has_resources())
            .cloned()
            .collect();
        v.sort_by(|a, b| a.cfg.name.cmp(&b.cfg.name));
        v
    }

    /// Stops every server this manager owns (stdio: close stdin, SIGTERM, SIGKILL the group),
    /// in parallel; a session's manager leaves the shared ones of its base running.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let own = self.slots.get(self.own_from..).unwrap_or_default();
        futures::future::join_all(own.iter().map(|s| s.close())).await;
    }
}

/// One server's slot, not connected yet.
fn new_slot(
    cfg: ServerConfig,
    cwd: &Path,
    agent_dir: &Path,
    log: &McpLog,
    report_errors: bool,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Arc<ServerSlot> {
    let state = if cfg.enabled {
        ServerState::Connecting
    } else {
        ServerState::Disabled
    };
    Arc::new(ServerSlot {
        settled: tokio::sync::watch::channel(!cfg.enabled).0,
        cfg,
        cwd: cwd.to_path_buf(),
        log: log.clone(),
        state: parking_lot::Mutex::new(SlotState {
            state,
            info: ServerInfo::default(),
            peer: None,
            direct: Vec::new(),
            reported: false,
            error: None,
            challenge: None,
            token_expires: None,
        }),
        conn: tokio::sync::Mutex::new(None),
        report_errors,
        shutdown: shutdown.clone(),
        auth: super::oauth::AuthStore::new(agent_dir),
    })
}
