//! The HTTP server: routes, turn selection, streaming, request records.

use crate::script::{Api, Script, Turn};
use crate::wire;
use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use base64::Engine as _;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// One request the fake received (the same fields as fakellm.py's JSONL log).
#[derive(Clone, Debug, Serialize)]
pub struct RecordedRequest {
    /// 1-based arrival number; also the `<seq>` in generated ids.
    pub seq: u64,
    /// Arrival time, seconds since the Unix epoch.
    pub t: f64,
    /// HTTP method.
    pub method: String,
    /// Request path including any query string (e.g. `/v1/messages?beta=true`).
    pub path: String,
    /// `openai`, `anthropic`, `google`, `mistral`, `token` (the OAuth token endpoint) or
    /// `unknown`.
    pub api: String,
    /// Headers with lower-cased names (the last value wins for repeated names).
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON, or the raw text when it is not JSON (`null` when empty).
    pub body: Value,
    /// Index of the scripted turn served (`None` for the exhausted turn or unknown paths).
    pub turn_index: Option<usize>,
    /// `pending`, `ok`, `error_<status>`, `disconnected_after_<n>`, `client_disconnected`, `404`;
    /// for WebSocket upgrades ([`FakeLlm::ws_upgrades`]) `accepted` or `refused`.
    pub outcome: String,
    /// For a `content-encoding: zstd` body: the body as sent, base64 (`body` is then the
    /// decoded JSON). `None` for plain bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoded_body: Option<String>,
}

impl RecordedRequest {
    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The path without its query string.
    pub fn path_only(&self) -> &str {
        self.path.split('?').next().unwrap_or(&self.path)
    }

    /// The body as compact JSON text (handy for substring assertions).
    pub fn body_text(&self) -> String {
        match &self.body {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// Options for [`FakeLlm::spawn_with`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Port to bind on 127.0.0.1 (0 = any free port).
    pub port: u16,
    /// Append every request (and outcome updates) to this JSONL file, like fakellm.py's `--log`.
    pub log_path: Option<PathBuf>,
}

pub(crate) struct ScriptState {
    pub(crate) script: Script,
    used: Vec<bool>,
}

impl ScriptState {
    pub(crate) fn pick(&mut self, api: Api, body_text: &str) -> (Option<usize>, Turn) {
        for (i, turn) in self.script.turns.iter().enumerate() {
            if !self.used[i] && turn.fits(api, body_text) {
                self.used[i] = true;
                return (Some(i), turn.clone());
            }
        }
        (None, self.script.exhausted_turn())
    }
}

pub(crate) struct Shared {
    pub(crate) script: Mutex<ScriptState>,
    pub(crate) requests: Mutex<Vec<RecordedRequest>>,
    /// WebSocket upgrade attempts (not model requests: each `response.create` message on an
    /// accepted socket is recorded in `requests` with method `WS`).
    pub(crate) upgrades: Mutex<Vec<RecordedRequest>>,
    changed: Condvar,
    pub(crate) stopping: AtomicBool,
    log: Option<Mutex<std::fs::File>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn log_line(&self, v: &impl Serialize) {
        if let Some(log) = &self.log {
            let mut f = lock(log);
            if let Ok(line) = serde_json::to_string(v) {
                let _ = writeln!(f, "{line}");
            }
        }
    }

    pub(crate) fn record(&self, mut entry: RecordedRequest) -> u64 {
        let seq = {
            let mut reqs = lock(&self.requests);
            entry.seq = reqs.len() as u64 + 1;
            reqs.push(entry.clone());
            entry.seq
        };
        self.changed.notify_all();
        self.log_line(&entry);
        seq
    }

    pub(crate) fn set_outcome(&self, seq: u64, outcome: String) {
        {
            let mut reqs = lock(&self.requests);
            if let Some(e) = reqs.iter_mut().find(|e| e.seq == seq) {
                e.outcome = outcome.clone();
            }
        }
        self.changed.notify_all();
        self.log_line(&json!({"seq": seq, "outcome_update": outcome}));
    }
}

/// A running fake LLM server on 127.0.0.1. It runs on its own thread with its own tokio
/// runtime, so it can be used from plain `#[test]`s and from async tests alike. Dropping it
/// stops the server.
pub struct FakeLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLlm")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FakeLlm {
    /// Starts serving `script` on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// If no loopback port can be bound.
    pub async fn start(script: Script) -> std::io::Result<FakeLlm> {
        Self::spawn(script)
    }

    /// Synchronous twin of [`FakeLlm::start`] for non-async tests.
    ///
    /// # Errors
    /// If no loopback port can be bound.
    pub fn spawn(script: Script) -> std::io::Result<FakeLlm> {
        Self::spawn_with(script, Options::default())
    }

    /// Starts serving `script` with explicit options.
    pub fn spawn_with(script: Script, options: Options) -> std::io::Result<FakeLlm> {
        let listener = TcpListener::bind(("127.0.0.1", options.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let log = match &options.log_path {
            Some(p) => Some(Mutex::new(std::fs::File::create(p)?)),
            None => None,
        };
        let used = vec![false; script.turns.len()];
        let shared = Arc::new(Shared {
            script: Mutex::new(ScriptState { script, used }),
            requests: Mutex::new(Vec::new()),
            upgrades: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            stopping: AtomicBool::new(false),
            log,
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fakellm")
            .enable_all()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name("fakellm".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("fakellm: {e}");
                            return;
                        }
                    };
                    tokio::select! {
                        // No Nagle delay: each SSE event is its own small write, and behind
                        // an unacknowledged one it would wait for the client's delayed ACK
                        // (up to 40 ms per response on a kept-alive connection).
                        r = axum::serve(listener, app).tcp_nodelay(true) => {
                            if let Err(e) = r {
                                eprintln!("fakellm: server error: {e}");
                            }
                        }
                        _ = rx => {}
                    }
                });
                runtime.shutdown_background();
            })?;
        Ok(FakeLlm {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:<port>/v1` — the OpenAI-compatible base URL.
    pub fn base_url_openai(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port())
    }

    /// `http://127.0.0.1:<port>` — the Anthropic base URL (the client appends `/v1/messages`).
    pub fn base_url_anthropic(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// A snapshot of every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The WebSocket upgrade attempts so far (method `GET`, the handshake's headers, outcome
    /// `accepted` or `refused`), in arrival order.
    pub fn ws_upgrades(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.upgrades).clone()
    }

    /// The requests that went to a model endpoint (OpenAI or Anthropic), in arrival order.
    pub fn llm_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.api != "unknown" && r.api != "token")
            .collect()
    }

    /// Blocks until at least `n` requests have arrived; false on timeout.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |reqs| reqs.len() >= n)
    }

    /// Blocks until `pred` holds for the request list; false on timeout. Outcome updates
    /// (e.g. a stream finishing) also wake the waiter. This blocks the calling thread: from an
    /// async test use a multi-threaded runtime (or `spawn_blocking`) so the client side keeps
    /// running.
    pub fn wait_until(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&[RecordedRequest]) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut reqs = lock(&self.shared.requests);
        loop {
            if pred(&reqs) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            reqs = self
                .shared
                .changed
                .wait_timeout(reqs, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// How many scripted turns have not been served yet.
    pub fn unused_turns(&self) -> usize {
        lock(&self.shared.script)
            .used
            .iter()
            .filter(|u| !**u)
            .count()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn json_response(status: u16, body: &Value, extra: &Map<String, Value>) -> Response {
    let data = match body {
        Value::String(s) => s.clone().into_bytes(),
        other => serde_json::to_vec(other).unwrap_or_default(),
    };
    let mut resp = Response::new(Body::from(data));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    for (k, v) in extra {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(k.as_str()),
            HeaderValue::try_from(text),
        ) {
            h.insert(name, value);
        }
    }
    resp
}

pub(crate) fn header_record(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Option<WebSocketUpgrade>,
    body: Bytes,
) -> Response {
    let full_path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| uri.path().to_string());
    if let Some(upgrade) = upgrade {
        return crate::ws::upgrade(shared, upgrade, full_path, &headers);
    }
    if method == Method::GET {
        if uri.path().starts_with("/_fake/requests") {
            let reqs = lock(&shared.requests).clone();
            return json_response(
                200,
                &serde_json::to_value(reqs).unwrap_or_default(),
                &Map::new(),
            );
        }
        if uri.path().starts_with("/_fake/ws_upgrades") {
            let ups = lock(&shared.upgrades).clone();
            return json_response(
                200,
                &serde_json::to_value(ups).unwrap_or_default(),
                &Map::new(),
            );
        }
        if uri.path().starts_with("/_fake/health") {
            return json_response(200, &json!({"ok": true}), &Map::new());
        }
        return json_response(
            404,
            &json!({"error": {"message": format!("not found: {full_path}")}}),
            &Map::new(),
        );
    }
    let zstd = headers
        .get("content-encoding")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"zstd"));
    let (body, encoded_body) = if zstd {
        match zstd::stream::decode_all(&body[..]) {
            Ok(decoded) => (
                Bytes::from(decoded),
                Some(base64::engine::general_purpose::STANDARD.encode(&body)),
            ),
            Err(e) => {
                return json_response(
                    400,
                    &json!({"error": {"message": format!("fakellm: bad zstd body: {e}")}}),
                    &Map::new(),
                )
            }
        }
    } else {
        (body, None)
    };
    let text = String::from_utf8_lossy(&body).into_owned();
    let parsed = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()))
    };
    if method == Method::POST && uri.path().ends_with("/token") {
        let seq = shared.record(RecordedRequest {
            seq: 0,
            t: now_secs(),
            method: method.as_str().to_string(),
            path: full_path.clone(),
            api: "token".into(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: Value::String(text.clone()),
            turn_index: None,
            outcome: "ok".into(),
            encoded_body: None,
        });
        return json_response(200, &crate::wire_gemini::token_response(seq), &Map::new());
    }
    let api = if method != Method::POST {
        None
    } else if uri.path().contains("/model/") && uri.path().ends_with("/converse-stream") {
        Some(Api::Bedrock)
    } else if uri.path().contains(":streamGenerateContent") {
        Some(Api::Google)
    } else if uri.path().starts_with("/mistral/") && uri.path().ends_with("/chat/completions") {
        Some(Api::Mistral)
    } else if uri.path().ends_with("/chat/completions") {
        Some(Api::Openai)
    } else if uri.path().ends_with("/messages") {
        Some(Api::Anthropic)
    } else if uri.path().ends_with("/responses") {
        Some(Api::Responses)
    } else {
        None
    };
    let (turn_index, turn) = match api {
        Some(api) => {
            let (i, t) = lock(&shared.script).pick(api, &text);
            (i, Some(t))
        }
        None => (None, None),
    };
    let mut header_map = BTreeMap::new();
    for (k, v) in &headers {
        header_map.insert(
            k.as_str().to_ascii_lowercase(),
            String::from_utf8_lossy(v.as_bytes()).into_owned(),
        );
    }
    let seq = shared.record(RecordedRequest {
        seq: 0,
        t: now_secs(),
        method: method.as_str().to_string(),
        path: full_path.clone(),
        api: api.map_or("unknown", Api::as_str).to_string(),
        headers: header_map,
        body: parsed.clone(),
        turn_index,
        outcome: "pending".into(),
        encoded_body,
    });
    let (Some(api), Some(turn)) = (api, turn) else {
        shared.set_outcome(seq, "404".into());
        return json_response(
            404,
            &json!({"error": {"message": format!("unknown path {full_path}")}}),
            &Map::new(),
        );
    };
    // Gemini names the model in the path: `…/models/<model>:streamGenerateContent`.
    let path_model = uri
        .path()
        .split_once(":streamGenerateContent")
        .and_then(|(head, _)| head.rsplit('/').next())
        .map(str::to_string)
        .or_else(|| bedrock_path_model(uri.path()));
    serve_turn(shared, api, turn, parsed, seq, path_model).await
}

/// The model id of a Bedrock path `…/model/<percent-encoded id>/converse-stream`.
fn bedrock_path_model(path: &str) -> Option<String> {
    let head = path.strip_suffix("/converse-stream")?;
    let (_, encoded) = head.rsplit_once("/model/")?;
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied(),
            bytes.get(i + 2).copied(),
        ) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                let v = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// How a streamed turn is paced and named: the turn's chunk size and per-chunk delay (ms),
/// else the script's defaults, and the model id of the request (`model`, else the one in the
/// path, else `fake-model`). Shared by the HTTP and WebSocket answers.
pub(crate) struct TurnPacing {
    pub(crate) chunk_size: usize,
    pub(crate) delay_ms: f64,
    pub(crate) model: String,
}

/// See [`TurnPacing`].
pub(crate) fn pacing(
    shared: &Shared,
    turn: &Turn,
    req: &Value,
    path_model: Option<String>,
) -> TurnPacing {
    let (chunk_size, default_delay) = {
        let s = lock(&shared.script);
        (s.script.default_chunk_size, s.script.default_delay_ms)
    };
    TurnPacing {
        chunk_size: turn.chunk_size.unwrap_or(chunk_size),
        delay_ms: turn.delay_ms.unwrap_or(default_delay),
        model: req
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .or(path_model)
            .unwrap_or_else(|| "fake-model".to_string()),
    }
}

async fn serve_turn(
    shared: Arc<Shared>,
    api: Api,
    turn: Turn,
    req: Value,
    seq: u64,
    path_model: Option<String>,
) -> Response {
    if let Some(ms) = turn.headers_delay_ms.filter(|ms| *ms > 0.0) {
        tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
    }
    if let Some(err) = &turn.error {
        if err.delay_ms > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(err.delay_ms / 1000.0)).await;
        }
        let body = err
            .body
            .clone()
            .unwrap_or_else(|| wire::default_error_body(api, err.status));
        shared.set_outcome(seq, format!("error_{}", err.status));
        let mut headers = err.headers.clone();
        if api == Api::Bedrock && !headers.contains_key("x-amzn-errortype") {
            headers.insert(
                "x-amzn-errortype".into(),
                json!(crate::wire_bedrock::bedrock_error_type(err.status)),
            );
        }
        return json_response(err.status, &body, &headers);
    }
    let TurnPacing {
        chunk_size,
        delay_ms,
        model,
    } = pacing(&shared, &turn, &req, path_model);
    let sse = |events: Vec<String>| -> Vec<Bytes> { events.into_iter().map(Bytes::from).collect() };
    let events: Vec<Bytes> = match (&turn.raw_sse, api) {
        (Some(raw), _) => sse(raw.clone()),
        (None, Api::Bedrock) => crate::wire_bedrock::bedrock_events(&turn, seq, chunk_size)
            .into_iter()
            .map(Bytes::from)
            .collect(),
        (None, Api::Openai) => sse(wire::openai_events(&turn, &model, seq, chunk_size, &req)),
        (None, Api::Anthropic) => sse(wire::anthropic_events(&turn, &model, seq, chunk_size)),
        (None, Api::Google) => sse(crate::wire_gemini::gemini_events(
            &turn, &model, seq, chunk_size,
        )),
        (None, Api::Mistral) => sse(crate::wire_mistral::mistral_events(
            &turn, &model, seq, chunk_size,
        )),
        (None, Api::Responses) => sse(crate::wire_responses::responses_events(
            &turn, &model, seq, chunk_size,
        )),
    };

    let mut turn = turn;
    if api == Api::Bedrock {
        // SSE comments would corrupt the binary framing: stalls stay silent.
        turn.stall_silent = Some(true);
        turn.keepalive_ms = None;
    }
    // Capacity 1: a send completes only once hyper has taken the previous chunk, so a failed
    // send promptly reveals a client that went away.
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let status = StatusCode::from_u16(turn.status.unwrap_or(200)).unwrap_or(StatusCode::OK);
    let producer_shared = shared.clone();
    tokio::spawn(async move {
        let outcome = produce(&producer_shared, &turn, &events, delay_ms, &tx).await;
        drop(tx);
        producer_shared.set_outcome(seq, outcome);
    });

    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static(if api == Api::Bedrock {
            "application/vnd.amazon.eventstream"
        } else {
            "text/event-stream"
        }),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    // `req_fake_<digits>` is always a valid header value.
    if let Ok(rid) = HeaderValue::try_from(format!("req_fake_{seq}")) {
        match api {
            Api::Anthropic => h.insert("request-id", rid),
            Api::Bedrock => h.insert("x-amzn-requestid", rid),
            Api::Openai | Api::Google | Api::Mistral | Api::Responses => {
                h.insert("x-request-id", rid)
            }
        };
    }
    resp
}

async fn produce(
    shared: &Shared,
    turn: &Turn,
    events: &[Bytes],
    delay_ms: f64,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> String {
    const GONE: &str = "client_disconnected";
    for (i, ev) in events.iter().enumerate() {
        if turn.disconnect_after_events.is_some_and(|n| i >= n) {
            // Let hyper flush what was already sent, then fail the body: hyper drops the
            // connection without the terminating chunk.
            tokio::time::sleep(Duration::from_millis(30)).await;
            let _ = tx
                .send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "fakellm: scripted disconnect",
                )))
                .await;
            return format!("disconnected_after_{i}");
        }
        if turn.stall_after_events == Some(i) {
            let stall = Duration::from_secs_f64(turn.stall_ms.unwrap_or(30_000.0) / 1000.0);
            let deadline = Instant::now() + stall;
            // Probe with SSE comments (ignored by parsers) to notice a client that went away;
            // a silent stall only watches the channel.
            let silent = turn.stall_silent.unwrap_or(false);
            while Instant::now() < deadline && !shared.stopping.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if silent {
                    if tx.is_closed() {
                        return GONE.into();
                    }
                } else if tx.send(Ok(Bytes::from_static(b":\n\n"))).await.is_err() {
                    return GONE.into();
                }
            }
        }
        if delay_ms > 0.0 {
            let deadline = Instant::now() + Duration::from_secs_f64(delay_ms / 1000.0);
            match turn.keepalive_ms.filter(|ms| *ms > 0.0) {
                Some(every) => {
                    let every = Duration::from_secs_f64(every / 1000.0);
                    loop {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        tokio::time::sleep(left.min(every)).await;
                        if Instant::now() < deadline
                            && tx
                                .send(Ok(Bytes::from_static(b": ping\n\n")))
                                .await
                                .is_err()
                        {
                            return GONE.into();
                        }
                    }
                }
                None => tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await,
            }
        }
        if tx.send(Ok(ev.clone())).await.is_err() {
            return GONE.into();
        }
    }
    "ok".into()
}
