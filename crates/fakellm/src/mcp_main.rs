//! `fake-mcp`: a scripted MCP server for tests, on `rmcp`'s server side (issue 13).
//!
//! Usage: `fake-mcp [--http 127.0.0.1:0] [--tools N] [--pidfile PATH] [--hang] [--garbage]
//! [--exit] [--instructions TEXT] [--fail-first N] [--fail-status S] [--oauth] [--token-ttl SECS] [--ops]`.
//!
//! * stdio by default; `--http ADDR` serves streamable HTTP at `http://ADDR/mcp` and prints that
//!   URL as the first stdout line.
//! * Tools: `echo {text}` → `echo: <text>`; `add {a, b}` → the sum as text; `image` → a 1×1 PNG;
//!   `big {bytes}` → that many bytes of text (`0123456789` repeated, newline every 100);
//!   `sleep {ms}` → `slept <ms>` after that long; `fail` → an `isError` result;
//!   `crash` → the process exits mid-call; `log {text}` → a log notification, then `logged`;
//!   `dash-name` and `dash_name` (collide once sanitised); plus `tool_0`…`tool_<N-1>` (`--tools N`).
//! * Resources: `fake://readme` (text) and `fake://logo.png` (image); template `fake://item/{id}`.
//! * With `--ops` only: `grow` → lists the tool `late` (→ `late ran`) from then on and sends
//!   `notifications/tools/list_changed`.
//!   With `--ops` only: `progress {ms, steps}` → sends `steps` progress notifications `ms` apart, then `progressed`.
//! * HTTP only: `--fail-first N` answers the first N requests with status `--fail-status`
//!   (default 503) before serving; `--fail-method METHOD:N` answers the first N POSTs of
//!   JSON-RPC method METHOD (e.g. `resources/read:1`) so; `--oauth` requires `Authorization: Bearer <token>` from its
//!   own OAuth authorization server on the same address (protected resource metadata at
//!   `/.well-known/oauth-protected-resource/mcp`, metadata at
//!   `/.well-known/oauth-authorization-server`, `/register`, `/authorize` (redirects at once to
//!   the redirect URI with a code: no login page), `/token` (PKCE S256 checked; grants
//!   `authorization_code` and `refresh_token`); access tokens live `--token-ttl` seconds
//!   (default 3600); `GET /stats` answers `{"tokenRequests": {...}, "mcpRequests": n}`).
//! * `--malformed`: a hand-written stdio server (no rmcp) whose `tools/call` answers break the
//!   result shape: tool `scalar` → `result: 42`, `text_content` → `{"content": "not a list"}`,
//!   `null_content` → `{"content": null}`, `array` → `[1, 2]`, `ok` → one text block `fine`.
//! * `--hang`: never answers (reads stdin forever); `--garbage`: writes non-JSON lines and
//!   exits; `--exit`: writes to stderr and exits 3 at once; `--pidfile`: writes its pid first.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::io::Write;

const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[derive(Clone)]
struct Fake {
    extra_tools: usize,
    instructions: Option<String>,
    /// `--ops`: also list `progress` and `grow` (kept out of the default list, which a test
    /// compares with an upstream recording).
    ops: bool,
    /// Set by the `grow` tool: the tool `late` is listed from then on.
    grown: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn tool(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props, "required": required},
    })
}

impl Fake {
    fn tools(&self) -> Vec<Value> {
        let mut t = vec![
            tool(
                "echo",
                "Echo the text back",
                json!({"text": {"type": "string"}}),
                &["text"],
            ),
            tool(
                "add",
                "Add two numbers",
                json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                &["a", "b"],
            ),
            tool("image", "Return a tiny PNG", json!({}), &[]),
            tool(
                "big",
                "Return many bytes",
                json!({"bytes": {"type": "number"}}),
                &["bytes"],
            ),
            tool(
                "sleep",
                "Sleep, then answer",
                json!({"ms": {"type": "number"}}),
                &["ms"],
            ),
            tool("fail", "Always fails", json!({}), &[]),
            tool("crash", "Exit the server mid-call", json!({}), &[]),
            tool(
                "log",
                "Send a log message",
                json!({"text": {"type": "string"}}),
                &["text"],
            ),
            json!({"name": "dash-name", "inputSchema": {"type": "object"}}),
            json!({"name": "dash_name", "inputSchema": {"type": "object"}}),
        ];
        if self.ops {
            t.push(tool(
                "progress",
                "Report progress, then answer",
                json!({"ms": {"type": "number"}, "steps": {"type": "number"}}),
                &["ms", "steps"],
            ));
            t.push(tool(
                "grow",
                "Add the tool late and announce the changed list",
                json!({}),
                &[],
            ));
        }
        if self.grown.load(std::sync::atomic::Ordering::SeqCst) {
            t.push(tool("late", "Listed after grow", json!({}), &[]));
        }
        for i in 0..self.extra_tools {
            t.push(tool(
                &format!("tool_{i}"),
                &format!("Extra tool number {i}"),
                json!({"x": {"type": "string"}}),
                &[],
            ));
        }
        t
    }
}

fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

impl ServerHandler for Fake {
    fn get_info(&self) -> InitializeResult {
        let mut v = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}, "resources": {}, "logging": {}},
            "serverInfo": {"name": "fake-mcp", "version": "1.0.0"},
        });
        if let Some(i) = &self.instructions {
            v["instructions"] = json!(i);
        }
        serde_json::from_value(v).unwrap_or_default()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        from(json!({"tools": self.tools()}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let s = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let v = match request.name.as_ref() {
            "echo" => text_result(&format!("echo: {}", s("text")), false),
            "add" => text_result(&format!("{}", n("a") + n("b")), false),
            "image" => json!({"content": [
                {"type": "text", "text": "a pixel"},
                {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}
            ]}),
            "big" => {
                let want = n("bytes") as usize;
                let mut out = String::with_capacity(want);
                while out.len() < want {
                    if out.len() % 101 == 100 {
                        out.push('\n');
                    } else {
                        out.push(char::from(b'0' + (out.len() % 10) as u8));
                    }
                }
                text_result(&out, false)
            }
            "sleep" => {
                tokio::time::sleep(std::time::Duration::from_millis(n("ms") as u64)).await;
                text_result(&format!("slept {}", n("ms")), false)
            }
            "fail" => text_result("it failed", true),
            "grow" => {
                self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text_result("grown", false)
            }
            "late" => text_result("late ran", false),
            "progress" => {
                let token = context.meta.get_progress_token();
                let steps = n("steps") as u64;
                for i in 0..steps {
                    tokio::time::sleep(std::time::Duration::from_millis(n("ms") as u64)).await;
                    if let Some(t) = &token {
                        let p =
                            from(json!({"progressToken": t, "progress": i + 1, "total": steps}))?;
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
                text_result("progressed", false)
            }
            "crash" => std::process::exit(7),
            #[allow(deprecated)]
            "log" => {
                let p = from(json!({"level": "warning", "logger": "fake", "data": s("text")}))?;
                let _ = context.peer.notify_logging_message(p).await;
                text_result("logged", false)
            }
            other if other.starts_with("tool_") || other.starts_with("dash") => {
                text_result(&format!("{other} ran"), false)
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        let r: CallToolResult = from(v)?;
        Ok(CallToolResponse::Complete(r))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from(json!({"resources": [
            {"uri": "fake://readme", "name": "readme", "mimeType": "text/plain"},
            {"uri": "fake://logo.png", "name": "logo", "mimeType": "image/png"},
            {"uri": "ui://app", "name": "app ui", "mimeType": "text/html"}
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from(json!({"resourceTemplates": [
            {"uriTemplate": "fake://item/{id}", "name": "item"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let contents = match uri.as_str() {
            "fake://readme" => {
                json!([{"uri": uri, "mimeType": "text/plain", "text": "Read me: fake resource text"}])
            }
            "fake://logo.png" => json!([{"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}]),
            u if u.starts_with("fake://item/") => {
                json!([{"uri": uri, "text": format!("item {}", &u[12..])}])
            }
            _ => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {uri}"),
                    None,
                ))
            }
        };
        let r: ReadResourceResult = from(json!({ "contents": contents }))?;
        Ok(ReadResourceResponse::Complete(r))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    if let Some(p) = opt("--pidfile") {
        let _ = std::fs::write(p, std::process::id().to_string());
    }
    if flag("--exit") {
        eprintln!("fake-mcp: exiting as asked");
        std::process::exit(3);
    }
    if flag("--garbage") {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "this is not json");
        let _ = writeln!(out, "{{\"jsonrpc\": \"1.0\", \"nonsense\": true}}");
        let _ = out.flush();
        std::process::exit(0);
    }
    if flag("--malformed") {
        malformed_server();
        return;
    }
    if flag("--hang") {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
        // stdin closed: keep hanging until killed.
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    let fake = Fake {
        extra_tools: opt("--tools").and_then(|n| n.parse().ok()).unwrap_or(0),
        instructions: opt("--instructions"),
        ops: flag("--ops"),
        grown: Default::default(),
    };
    if let Some(addr) = opt("--http") {
        use rmcp::transport::streamable_http_server::{
            session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
        };
        let service = StreamableHttpService::new(
            move || Ok(fake.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let fail_first: usize = opt("--fail-first")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let fail_status: u16 = opt("--fail-status")
            .and_then(|n| n.parse().ok())
            .unwrap_or(503);
        let ttl: u64 = opt("--token-ttl")
            .and_then(|n| n.parse().ok())
            .unwrap_or(3600);
        let fail_method = opt("--fail-method").and_then(|v| {
            let (m, n) = v.rsplit_once(':')?;
            Some((m.to_string(), n.parse::<usize>().ok()?))
        });
        let listener = match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fake-mcp: bind {addr}: {e}");
                std::process::exit(1);
            }
        };
        let base = match listener.local_addr() {
            Ok(a) => format!("http://{a}"),
            Err(_) => String::new(),
        };
        let mut auth =
            oauth::Auth::new(base.clone(), ttl, flag("--oauth"), fail_first, fail_status);
        if let Some((m, n)) = fail_method {
            auth = auth.fail_method(m, n);
        }
        let router = oauth::wrap(router, auth);
        println!("{base}/mcp");
        let _ = std::io::stdout().flush();
        let _ = axum::serve(listener, router).await;
        return;
    }
    match fake.serve(rmcp::transport::io::stdio()).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => eprintln!("fake-mcp: {e}"),
    }
}

/// The fake OAuth authorization server and the bearer check (`--oauth`), and `--fail-first`.
mod oauth {
    use axum::body::Body;
    use axum::extract::{Form, Query, State};
    use axum::http::{HeaderMap, Request, StatusCode};
    use axum::middleware::Next;
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};
    use axum::{Json, Router};
    use serde_json::{json, Value};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    #[derive(Default)]
    struct Tokens {
        /// code → (code_challenge, redirect_uri, client_id)
        codes: HashMap<String, (String, String, String)>,
        access: HashMap<String, Instant>,
        refresh: HashMap<String, String>,
        counter: usize,
        grants: HashMap<String, usize>,
    }

    #[derive(Clone)]
    pub struct Auth {
        base: String,
        ttl: u64,
        required: bool,
        fail_left: Arc<AtomicUsize>,
        fail_status: u16,
        fail_method: Option<(String, Arc<AtomicUsize>)>,
        mcp_requests: Arc<AtomicUsize>,
        tokens: Arc<Mutex<Tokens>>,
    }

    impl Auth {
        pub fn new(
            base: String,
            ttl: u64,
            required: bool,
            fail_first: usize,
            fail_status: u16,
        ) -> Self {
            Auth {
                base,
                ttl,
                required,
                fail_left: Arc::new(AtomicUsize::new(fail_first)),
                fail_status,
                fail_method: None,
                mcp_requests: Arc::default(),
                tokens: Arc::default(),
            }
        }

        pub fn fail_method(mut self, method: String, n: usize) -> Self {
            self.fail_method = Some((method, Arc::new(AtomicUsize::new(n))));
            self
        }

        fn issue(&self, t: &mut Tokens) -> Value {
            t.counter += 1;
            let access = format!("at-{}", t.counter);
            let refresh = format!("rt-{}", t.counter);
            t.access.insert(
                access.clone(),
                Instant::now() + Duration::from_secs(self.ttl),
            );
            t.refresh.insert(refresh.clone(), access.clone());
            json!({"access_token": access, "token_type": "Bearer", "expires_in": self.ttl, "refresh_token": refresh, "scope": "mcp"})
        }
    }

    fn b64url_sha256(v: &str) -> String {
        use base64::Engine;
        use sha2::Digest;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(v.as_bytes()))
    }

    async fn gate(State(auth): State<Auth>, req: Request<Body>, next: Next) -> Response {
        let path = req.uri().path().to_string();
        if !path.starts_with("/mcp") {
            return next.run(req).await;
        }
        auth.mcp_requests.fetch_add(1, Ordering::SeqCst);
        if auth
            .fail_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            let status =
                StatusCode::from_u16(auth.fail_status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            return (status, "failing as asked").into_response();
        }
        let req = match &auth.fail_method {
            Some((method, left)) if req.method() == axum::http::Method::POST => {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 16 << 20)
                    .await
                    .unwrap_or_default();
                let called = serde_json::from_slice::<Value>(&bytes)
                    .ok()
                    .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string));
                if called.as_deref() == Some(method.as_str())
                    && left
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                {
                    let status = StatusCode::from_u16(auth.fail_status)
                        .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                    return (status, "failing as asked").into_response();
                }
                Request::from_parts(parts, Body::from(bytes))
            }
            _ => req,
        };
        if auth.required {
            let ok = req
                .headers()
                .get("authorization")
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "))
                .is_some_and(|t| {
                    auth.tokens
                        .lock()
                        .map(|g| g.access.get(t).is_some_and(|exp| *exp > Instant::now()))
                        .unwrap_or(false)
                });
            if !ok {
                let challenge = format!(
                    "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\"",
                    auth.base
                );
                return (
                    StatusCode::UNAUTHORIZED,
                    [("www-authenticate", challenge)],
                    "",
                )
                    .into_response();
            }
        }
        next.run(req).await
    }

    async fn resource(State(a): State<Auth>) -> Json<Value> {
        Json(
            json!({"resource": format!("{}/mcp", a.base), "authorization_servers": [a.base], "scopes_supported": ["mcp"]}),
        )
    }

    async fn metadata(State(a): State<Auth>) -> Json<Value> {
        Json(json!({
            "issuer": a.base,
            "authorization_endpoint": format!("{}/authorize", a.base),
            "token_endpoint": format!("{}/token", a.base),
            "registration_endpoint": format!("{}/register", a.base),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": true,
        }))
    }

    async fn register(State(a): State<Auth>, Json(body): Json<Value>) -> Response {
        let mut t = match a.tokens.lock() {
            Ok(t) => t,
            Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        };
        t.counter += 1;
        let mut out = body;
        out["client_id"] = json!(format!("client-{}", t.counter));
        (StatusCode::CREATED, Json(out)).into_response()
    }

    async fn authorize(
        State(a): State<Auth>,
        Query(q): Query<HashMap<String, String>>,
    ) -> Response {
        let (Some(redirect), Some(state), Some(challenge), Some(client)) = (
            q.get("redirect_uri"),
            q.get("state"),
            q.get("code_challenge"),
            q.get("client_id"),
        ) else {
            return (StatusCode::BAD_REQUEST, "missing parameters").into_response();
        };
        if q.get("resource").map(String::as_str) != Some(format!("{}/mcp", a.base).as_str()) {
            return (StatusCode::BAD_REQUEST, "wrong resource").into_response();
        }
        let code = format!("code-{}", uuid_ish());
        if let Ok(mut t) = a.tokens.lock() {
            t.codes.insert(
                code.clone(),
                (challenge.clone(), redirect.clone(), client.clone()),
            );
        }
        let sep = if redirect.contains('?') { '&' } else { '?' };
        let enc = |v: &str| {
            v.replace('%', "%25")
                .replace('&', "%26")
                .replace(':', "%3A")
                .replace('/', "%2F")
        };
        let location = format!(
            "{redirect}{sep}code={code}&state={state}&iss={}",
            enc(&a.base)
        );
        (StatusCode::FOUND, [("location", location)], "").into_response()
    }

    fn uuid_ish() -> String {
        use std::time::SystemTime;
        let n = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("{n:x}")
    }

    async fn token(
        State(a): State<Auth>,
        _headers: HeaderMap,
        Form(f): Form<HashMap<String, String>>,
    ) -> Response {
        let bad = |what: &str| {
            (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": "invalid_grant", "error_description": what})),
            )
                .into_response()
        };
        let mut t = match a.tokens.lock() {
            Ok(t) => t,
            Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        };
        let grant = f.get("grant_type").cloned().unwrap_or_default();
        *t.grants.entry(grant.clone()).or_default() += 1;
        match grant.as_str() {
            "authorization_code" => {
                let Some((challenge, redirect, client)) =
                    f.get("code").and_then(|c| t.codes.remove(c))
                else {
                    return bad("unknown code");
                };
                let verifier = f.get("code_verifier").cloned().unwrap_or_default();
                if b64url_sha256(&verifier) != challenge {
                    return bad("PKCE verification failed");
                }
                if f.get("redirect_uri") != Some(&redirect) || f.get("client_id") != Some(&client) {
                    return bad("redirect_uri or client_id mismatch");
                }
                let v = a.issue(&mut t);
                Json(v).into_response()
            }
            "refresh_token" => {
                let Some(old) = f.get("refresh_token").and_then(|r| t.refresh.remove(r)) else {
                    return bad("unknown refresh token");
                };
                t.access.remove(&old);
                let v = a.issue(&mut t);
                Json(v).into_response()
            }
            _ => bad("unsupported grant"),
        }
    }

    async fn stats(State(a): State<Auth>) -> Json<Value> {
        let grants = a
            .tokens
            .lock()
            .map(|t| json!(t.grants))
            .unwrap_or(Value::Null);
        Json(json!({"tokenRequests": grants, "mcpRequests": a.mcp_requests.load(Ordering::SeqCst)}))
    }

    pub fn wrap(router: Router, auth: Auth) -> Router {
        let as_routes = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(resource))
            .route("/.well-known/oauth-protected-resource", get(resource))
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/stats", get(stats))
            .with_state(auth.clone());
        router
            .merge(as_routes)
            .layer(axum::middleware::from_fn_with_state(auth, gate))
    }
}

/// The `--malformed` server: JSON-RPC lines on stdin/stdout, answering `initialize`,
/// `tools/list`, `ping` and `tools/call` (with the malformed results the usage lists).
fn malformed_server() {
    use std::io::BufRead;
    let tools = ["scalar", "text_content", "null_content", "array", "ok"];
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue; // a notification
        };
        let method = msg["method"].as_str().unwrap_or("");
        let result = match method {
            "initialize" => serde_json::json!({
                "protocolVersion": msg["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-malformed", "version": "1.0.0"},
            }),
            "tools/list" => serde_json::json!({
                "tools": tools.iter().map(|t| serde_json::json!({
                    "name": t,
                    "description": format!("answers a {t} result"),
                    "inputSchema": {"type": "object", "properties": {}},
                })).collect::<Vec<_>>()
            }),
            "ping" => serde_json::json!({}),
            "tools/call" => match msg["params"]["name"].as_str().unwrap_or("") {
                "scalar" => serde_json::json!(42),
                "text_content" => serde_json::json!({"content": "not a list"}),
                "null_content" => serde_json::json!({"content": null}),
                "array" => serde_json::json!([1, 2]),
                _ => serde_json::json!({"content": [{"type": "text", "text": "fine"}]}),
            },
            _ => {
                let reply = serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("no method {method}")}});
                let _ = writeln!(out, "{reply}");
                let _ = out.flush();
                continue;
            }
        };
        let reply = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}
