//! One connection to one MCP server, on the `rmcp` SDK (docs/mcp.md "Diagnose connection
//! problems"): stdio child processes and streamable HTTP.
//!
//! A stdio server runs in a process group of its own under the [`crate::child_guard`]
//! supervisor (so it dies with `pi`, even on `SIGKILL`), and is registered with
//! [`crate::procs`]. [`Connection::close`] stops it as upstream does: close its stdin, give it
//! 500 ms to exit, `SIGTERM` the group, and `SIGKILL` the group 2 s later.

use super::config::{expand_home, resolve_value, ServerConfig, Transport};
use super::log::McpLog;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, ReadResourceRequestParams};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Grace after stdin closes before `SIGTERM` (upstream pi-mcp stdio transport: 500 ms).
const STDIN_CLOSE_GRACE: Duration = Duration::from_millis(500);
/// From `SIGTERM` to `SIGKILL` (upstream: 2 s).
const TERM_GRACE: Duration = Duration::from_secs(2);
/// Bytes of a stdio server's stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// Why a connection or a request failed. `Display` is the text reported on stderr and given to
/// the model in an error tool result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The process could not be started, or the HTTP client not built.
    #[error("failed to start: {0}")]
    Start(String),
    /// `initialize` failed or did not answer in time; the payload includes the stderr tail.
    #[error("failed to connect: {0}")]
    Connect(String),
    /// A request got no answer within the server's `timeout`.
    #[error("request timed out after {0} s")]
    Timeout(u64),
    /// The connection is gone (the server exited or closed it); text as upstream's.
    #[error("MCP connection closed")]
    Closed,
    /// The server answered with an error, or an invalid message.
    #[error("{0}")]
    Request(String),
    /// An HTTP failure worth another attempt (docs/mcp.md: network errors, 408, 429, 5xx
    /// except 501); the text says which.
    #[error("{0}")]
    Transient(String),
    /// The HTTP server answered 401 (or 403 `insufficient_scope`); the payload is its
    /// `WWW-Authenticate` challenge when it sent one.
    #[error("authorization required")]
    AuthRequired(Option<String>),
}

impl McpError {
    /// Whether a connect or read-only request that failed so is retried (upstream
    /// `isTransientError`).
    pub fn is_transient(&self) -> bool {
        matches!(self, McpError::Transient(_))
    }
}

/// What an HTTP transport failure means for retries and sign-in.
enum HttpClass {
    Transient,
    Auth(Option<String>),
    Other,
}

/// 408, 429 and 5xx except 501 (upstream `isTransientError`).
fn transient_status(status: u16) -> bool {
    status == 408 || status == 429 || (status >= 500 && status != 501 && status < 600)
}

fn classify_dyn(e: &(dyn std::error::Error + 'static)) -> HttpClass {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(se) = err.downcast_ref::<StreamableHttpError<reqwest013::Error>>() {
            return match se {
                StreamableHttpError::HttpStatus(h) if transient_status(h.status) => {
                    HttpClass::Transient
                }
                StreamableHttpError::AuthRequired(a) => {
                    HttpClass::Auth(Some(a.www_authenticate_header.clone()))
                }
                StreamableHttpError::InsufficientScope(a) => {
                    HttpClass::Auth(Some(a.www_authenticate_header.clone()))
                }
                StreamableHttpError::Client(re) => match re.status().map(|s| s.as_u16()) {
                    Some(401) => HttpClass::Auth(None),
                    Some(s) if transient_status(s) => HttpClass::Transient,
                    Some(_) => HttpClass::Other,
                    None if re.is_connect()
                        || re.is_timeout()
                        || re.is_request()
                        || re.is_body() =>
                    {
                        HttpClass::Transient
                    }
                    None => HttpClass::Other,
                },
                StreamableHttpError::Io(_) => HttpClass::Transient,
                _ => HttpClass::Other,
            };
        }
        if let Some(re) = err.downcast_ref::<reqwest013::Error>() {
            return match re.status().map(|s| s.as_u16()) {
                Some(401) => HttpClass::Auth(None),
                Some(s) if transient_status(s) => HttpClass::Transient,
                Some(_) => HttpClass::Other,
                None => HttpClass::Transient,
            };
        }
        cur = err.source();
    }
    HttpClass::Other
}

fn classify_transport(e: &rmcp::transport::DynamicTransportError) -> HttpClass {
    classify_dyn(e.error.as_ref())
}

/// An HTTP connect failure as an [`McpError`].
fn http_connect_error(e: rmcp::service::ClientInitializeError) -> McpError {
    use rmcp::service::ClientInitializeError;
    // The transport's own error, without rmcp's type names.
    let (class, text) = match &e {
        ClientInitializeError::TransportError { error, context } => (
            classify_transport(error),
            format!("{}, when {context}", error.error),
        ),
        other => (classify_dyn(other), other.to_string()),
    };
    match class {
        HttpClass::Auth(h) => McpError::AuthRequired(h),
        HttpClass::Transient => McpError::Transient(format!("failed to connect: {text}")),
        HttpClass::Other => McpError::Connect(text),
    }
}

/// What a connected server offers.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    /// `instructions` from `initialize`.
    pub instructions: Option<String>,
    /// Whether `capabilities.resources` was announced.
    pub has_resources: bool,
    /// `tools/list`, each tool as sent (`name`, `description`, `inputSchema`, …).
    pub tools: Vec<Value>,
}

/// Receives server notifications.
#[derive(Clone)]
pub struct Handler {
    server: String,
    log: McpLog,
    /// Called on `notifications/tools/list_changed`.
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
}

impl Handler {
    /// A handler for `server`, logging to `log`.
    pub fn new(server: &str, log: McpLog, on_tools_changed: Arc<dyn Fn() + Send + Sync>) -> Self {
        Handler {
            server: server.to_string(),
            log,
            on_tools_changed,
        }
    }
}

impl rmcp::ClientHandler for Handler {
    // Logging is deprecated by the newest MCP revision (SEP-2577) but servers still send it,
    // and upstream 1.6 appends it to mcp.log.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let v = serde_json::to_value(&params).unwrap_or(Value::Null);
        let level = v.get("level").and_then(Value::as_str).unwrap_or("info");
        let logger = v.get("logger").and_then(Value::as_str).unwrap_or("");
        let data = match v.get("data") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        self.log.append(&self.server, level, logger, &data);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_tools_changed)();
    }
}

struct Child {
    child: tokio::process::Child,
    pgid: i32,
}

/// A live connection.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    child: Option<Child>,
    /// What the server offered at connect time.
    pub info: ServerInfo,
    timeout: Duration,
}

type StderrTail = Arc<parking_lot::Mutex<VecDeque<u8>>>;

fn tail_text(tail: &StderrTail) -> String {
    let bytes: Vec<u8> = tail.lock().iter().copied().collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// Connects to `cfg` (stdio relative `cwd` against `session_cwd`), runs `initialize` and
/// `tools/list` within the server's timeout.
/// `bearer`: an OAuth access token sent as `Authorization: Bearer …` (HTTP only).
pub async fn connect(
    cfg: &ServerConfig,
    session_cwd: &Path,
    handler: Handler,
    bearer: Option<String>,
) -> Result<Connection, McpError> {
    match &cfg.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(expand_home(command));
            cmd.args(args.iter().map(|a| expand_home(a)));
            for (k, v) in env {
                if let Some(v) = resolve_value(v) {
                    cmd.env(k, v);
                }
            }
            let dir = match cwd {
                Some(c) => session_cwd.join(expand_home(c)),
                None => session_cwd.to_path_buf(),
            };
            cmd.current_dir(dir)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .process_group(0)
                .kill_on_drop(false);
            crate::child_guard::supervise_group(cmd.as_std_mut());
            let mut child = cmd
                .spawn()
                .map_err(|e| McpError::Start(format!("{command}: {e}")))?;
            let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
            if pgid > 0 {
                crate::procs::register(pgid);
            }
            let tail: StderrTail = Arc::default();
            let mut stderr_task = None;
            if let Some(mut stderr) = child.stderr.take() {
                let tail = tail.clone();
                stderr_task = Some(tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stderr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let mut t = tail.lock();
                        t.extend(&buf[..n]);
                        while t.len() > STDERR_TAIL {
                            t.pop_front();
                        }
                    }
                }));
            }
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                stop_child(Child { child, pgid }).await;
                return Err(McpError::Start("no stdio pipes".into()));
            };
            let child = Child { child, pgid };
            match tokio::time::timeout(cfg.timeout, handler.serve((stdout, stdin))).await {
                Ok(Ok(service)) => finish(service, Some(child), cfg.timeout).await,
                Ok(Err(e)) => {
                    stop_child(child).await;
                    // The process is gone: let the reader take what it wrote last.
                    if let Some(t) = stderr_task {
                        let _ = tokio::time::timeout(Duration::from_millis(500), t).await;
                    }
                    let mut msg = e.to_string();
                    let t = tail_text(&tail);
                    if !t.is_empty() {
                        msg.push_str("\nstderr: ");
                        msg.push_str(&t);
                    }
                    Err(McpError::Connect(msg))
                }
                Err(_) => {
                    stop_child(child).await;
                    Err(McpError::Connect(format!(
                        "no answer to initialize within {} s",
                        cfg.timeout.as_secs()
                    )))
                }
            }
        }
        Transport::Http { url, headers } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            use rmcp::transport::StreamableHttpClientTransport;
            let client = http_client().map_err(McpError::Start)?;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut custom = std::collections::HashMap::new();
            for (k, v) in headers {
                // `Authorization` too is sent as written (any scheme, not only `Bearer`).
                let Some(v) = resolve_value(v) else { continue };
                let name = reqwest013::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| McpError::Start(format!("header {k}: {e}")))?;
                let value = reqwest013::header::HeaderValue::from_str(&v)
                    .map_err(|e| McpError::Start(format!("header {k}: {e}")))?;
                custom.insert(name, value);
            }
            if let Some(token) = bearer {
                // rmcp adds the `Bearer ` prefix.
                config = config.auth_header(token);
            }
            config = config.custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, config);
            match tokio::time::timeout(cfg.timeout, handler.serve(transport)).await {
                Ok(Ok(service)) => finish(service, None, cfg.timeout).await,
                Ok(Err(e)) => Err(http_connect_error(e)),
                Err(_) => Err(McpError::Connect(format!(
                    "no answer to initialize within {} s",
                    cfg.timeout.as_secs()
                ))),
            }
        }
    }
}

/// A reqwest client whose TLS is our rustls config (ring provider, webpki roots), so no
/// aws-lc C library is built.
pub(crate) fn http_client() -> Result<reqwest013::Client, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest013::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| e.to_string())
}

async fn finish(
    service: RunningService<RoleClient, Handler>,
    child: Option<Child>,
    timeout: Duration,
) -> Result<Connection, McpError> {
    let peer_info = service
        .peer()
        .peer_info()
        .and_then(|i| serde_json::to_value(&*i).ok())
        .unwrap_or(Value::Null);
    let instructions = peer_info
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::to_string);
    let caps = peer_info.get("capabilities");
    let has_resources = caps.and_then(|c| c.get("resources")).is_some();
    let has_tools = caps.and_then(|c| c.get("tools")).is_some();
    let mut conn = Connection {
        service,
        child,
        info: ServerInfo {
            instructions,
            has_resources,
            tools: Vec::new(),
        },
        timeout,
    };
    if has_tools {
        match conn.list_tools().await {
            Ok(t) => conn.info.tools = t,
            Err(e) => {
                conn.close().await;
                return Err(McpError::Connect(format!("tools/list failed: {e}")));
            }
        }
    }
    Ok(conn)
}

fn request_error(e: rmcp::service::ServiceError) -> McpError {
    use rmcp::service::ServiceError;
    match e {
        ServiceError::TransportSend(t) => match classify_transport(&t) {
            HttpClass::Auth(h) => McpError::AuthRequired(h),
            HttpClass::Transient => McpError::Transient(format!("request failed: {}", t.error)),
            HttpClass::Other => McpError::Closed,
        },
        ServiceError::TransportClosed => McpError::Closed,
        ServiceError::Timeout { timeout } => McpError::Timeout(timeout.as_secs()),
        other => McpError::Request(other.to_string()),
    }
}

impl Connection {
    /// Whether the transport is still up.
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// A cheap handle for requests that does not keep the connection from being closed.
    pub fn peer(&self) -> Peer {
        Peer {
            peer: self.service.peer().clone(),
            timeout: self.timeout,
        }
    }

    /// `tools/list`, every page.
    pub async fn list_tools(&self) -> Result<Vec<Value>, McpError> {
        let peer = self.service.peer();
        let tools = tokio::time::timeout(self.timeout, peer.list_all_tools())
            .await
            .map_err(|_| McpError::Timeout(self.timeout.as_secs()))?
            .map_err(request_error)?;
        Ok(tools
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect())
    }

    /// Stops the connection: for stdio, close stdin, then `SIGTERM`/`SIGKILL` the group.
    pub async fn close(self) {
        let Connection { service, child, .. } = self;
        // Cancelling drops the transport, which closes the child's stdin.
        let _ = service.cancel().await;
        if let Some(child) = child {
            stop_child(child).await;
        }
    }
}

/// Sends requests on a connection; cloned per call.
#[derive(Clone)]
pub struct Peer {
    peer: rmcp::service::Peer<RoleClient>,
    timeout: Duration,
}

impl Peer {
    async fn timed<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, rmcp::service::ServiceError>>,
    ) -> Result<T, McpError> {
        tokio::time::timeout(self.timeout, f)
            .await
            .map_err(|_| McpError::Timeout(self.timeout.as_secs()))?
            .map_err(request_error)
    }

    /// `tools/call`; the result as sent (`content`, `structuredContent`, `isError`).
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<Value, McpError> {
        let params: CallToolRequestParams =
            serde_json::from_value(serde_json::json!({"name": name, "arguments": args}))
                .map_err(|e| McpError::Request(format!("invalid arguments: {e}")))?;
        // The timeout restarts with every progress notification for this call (docs/mcp.md
        // `timeout`); rmcp puts the progress token in `_meta`.
        let request =
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let options = rmcp::service::PeerRequestOptions::with_timeout(self.timeout)
            .reset_timeout_on_progress();
        let handle = self
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(request_error)?;
        let r = handle.await_response().await.map_err(request_error)?;
        match r {
            rmcp::model::ServerResult::CallToolResult(r) => {
                serde_json::to_value(&r).map_err(|e| McpError::Request(e.to_string()))
            }
            // Not a typed tool result (rmcp's untyped catch-all keeps the value as sent): held
            // to the shape upstream checks.
            other => serde_json::to_value(&other)
                .map_err(|e| McpError::Request(e.to_string()))
                .and_then(validate_call_result),
        }
    }

    /// `resources/list` (one page from `cursor`).
    pub async fn list_resources(&self, cursor: Option<String>) -> Result<Value, McpError> {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let r = self.timed(self.peer.list_resources(params)).await?;
        serde_json::to_value(&r).map_err(|e| McpError::Request(e.to_string()))
    }

    /// `resources/templates/list` (one page from `cursor`).
    pub async fn list_resource_templates(&self, cursor: Option<String>) -> Result<Value, McpError> {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let r = self
            .timed(self.peer.list_resource_templates(params))
            .await?;
        serde_json::to_value(&r).map_err(|e| McpError::Request(e.to_string()))
    }

    /// `resources/read`.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, McpError> {
        let params: ReadResourceRequestParams =
            serde_json::from_value(serde_json::json!({"uri": uri}))
                .map_err(|e| McpError::Request(e.to_string()))?;
        let r = self.timed(self.peer.read_resource(params)).await?;
        serde_json::to_value(&r).map_err(|e| McpError::Request(e.to_string()))
    }
}

/// Text of the error for a `tools/call` result of the wrong shape (upstream pi-mcp
/// `validateCallToolResult`).
pub const INVALID_CALL_RESULT: &str = "Invalid MCP tools/call result";

/// A `tools/call` result as upstream pi-mcp accepts it: an object whose `content`, when
/// present, is an array (`structuredContent` may be anything). Anything else, a scalar, an
/// array, `null`, or `content` that is not a list, is [`McpError::Request`] with
/// [`INVALID_CALL_RESULT`], an error result for the model instead of an empty success.
pub fn validate_call_result(value: Value) -> Result<Value, McpError> {
    match &value {
        Value::Object(m) if m.get("content").is_none_or(Value::is_array) => Ok(value),
        _ => Err(McpError::Request(INVALID_CALL_RESULT.into())),
    }
}

fn signal_group(pgid: i32, sig: libc::c_int) {
    if pgid > 0 {
        // SAFETY: kill(2) on a negative pid (a process group we created); no memory shared.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// Close stdin (already dropped by the caller), wait [`STDIN_CLOSE_GRACE`], `SIGTERM` the
/// group, wait [`TERM_GRACE`], `SIGKILL` the group; then reap.
async fn stop_child(mut c: Child) {
    drop(c.child.stdin.take());
    let exited = tokio::time::timeout(STDIN_CLOSE_GRACE, c.child.wait())
        .await
        .is_ok();
    if !exited {
        signal_group(c.pgid, libc::SIGTERM);
        if tokio::time::timeout(TERM_GRACE, c.child.wait())
            .await
            .is_err()
        {
            signal_group(c.pgid, libc::SIGKILL);
            let _ = c.child.wait().await;
        }
    }
    // Descendants left in the group (wrappers such as `npx`) go too.
    signal_group(c.pgid, libc::SIGKILL);
    if c.pgid > 0 {
        crate::procs::unregister(c.pgid);
    }
}
