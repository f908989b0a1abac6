//! The WebSocket transport of `openai-codex-responses` (settings `transport`: `auto`,
//! `websocket`, `websocket-cached`).
//!
//! Source: upstream 1.6 `@earendil-works/pi-ai` `dist/api/openai-codex-responses.js`, checked
//! against what upstream 1.6 sent to the fake server
//! (`crates/coding-agent/tests/data/responses/openai-codex-ws-*.json`).
//!
//! * URL: the SSE endpoint with `ws://` / `wss://` for `http://` / `https://`.
//! * Handshake headers: `originator: pi`, the model's and caller's headers, `Authorization`,
//!   `chatgpt-account-id`, `OpenAI-Beta: responses_websockets=2026-02-06`, and `session-id` =
//!   `x-client-request-id` = the session id (a fresh UUIDv7 without one). Connect timeout 15 s.
//! * One request = one text frame `{"type": "response.create", …body}` (the SSE body, never
//!   compressed); the server answers with the Responses events, one JSON text frame each,
//!   ending with `response.completed` / `response.incomplete` / `response.done`.
//! * Sockets are kept per (session, ChatGPT account) for the next request: closed after 5
//!   minutes idle, not reused once 45 minutes old, dropped after any failure or abort. A
//!   request that finds its session's socket busy opens a private one.
//! * `auto` / `websocket-cached` on a kept socket: when the new body equals the previous one
//!   except `input`, and the new `input` starts with the previous input plus the previous
//!   answer's items, only the rest is sent, with `previous_response_id` = the previous answer's
//!   id. An `error` (or `response.failed`) event `previous_response_not_found` before the
//!   first event is retried once, in any mode, on a new socket with the full body;
//!   `websocket_connection_limit_reached` before the first event once on a fresh socket.
//! * Proxy: the connection goes through the HTTP proxy upstream's
//!   `resolveHttpProxyUrlForTarget` picks for the `http(s)://` form of the URL
//!   ([`super::proxy::proxy_for_target`]: `NO_PROXY`, `HTTPS_PROXY`/`HTTP_PROXY`, settings
//!   `httpProxy`, `ALL_PROXY`) as a `CONNECT` tunnel; TLS to `wss://` hosts runs inside it.
//! * Failure before the first event (refused upgrade, connect error, socket lost): the request
//!   goes over SSE, and so does every later request of the session. A socket lost after events
//!   arrived ends the message with `WebSocket error` / `WebSocket closed <code> <reason>` (the
//!   agent's auto-retry treats both as transient); the session then uses SSE too.

use super::common::{self, Emitter, StreamEnd};
use super::openai_responses::{
    convert_input, Compat, EventReader, Flavor, OPENAI_TOOL_CALL_PROVIDERS,
};
use crate::error::ProviderError;
use crate::stream::{StreamOptions, Transport};
use crate::types::{Context, Message, Model};
use futures::{SinkExt as _, StreamExt as _};
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::Message as WsMessage;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Upstream `DEFAULT_WEBSOCKET_CONNECT_TIMEOUT_MS`.
const CONNECT_TIMEOUT_MS: u64 = 15_000;
/// A kept socket is closed after this long unused (upstream `SESSION_WEBSOCKET_CACHE_TTL_MS`).
const IDLE_TTL: Duration = Duration::from_secs(5 * 60);
/// A kept socket is not reused once this old (upstream `SESSION_WEBSOCKET_MAX_AGE_MS`: the
/// server closes sockets after 60 minutes, even mid-response).
const MAX_AGE: Duration = Duration::from_secs(45 * 60);
const CONNECTION_LIMIT_CODE: &str = "websocket_connection_limit_reached";
const PREVIOUS_RESPONSE_NOT_FOUND_CODE: &str = "previous_response_not_found";

/// One Codex request as the WebSocket transport needs it.
pub(crate) struct WsRequest {
    /// `ws://…` / `wss://…` endpoint.
    pub(crate) url: String,
    /// Handshake headers (see the module docs).
    pub(crate) headers: HeaderMap,
    /// The request body (without `type`).
    pub(crate) body: Value,
    /// The session id sockets are kept under; `None` = a private socket per request.
    pub(crate) session: Option<String>,
    /// The ChatGPT account of the token.
    pub(crate) account: String,
    /// Compat of the model (for the continuation's response items).
    pub(crate) compat: Compat,
}

/// How a WebSocket attempt ended.
pub(crate) enum WsOutcome {
    /// The message was finished on `em` (done, error or aborted).
    Emitted,
    /// Nothing was emitted: send the request over SSE.
    Fallback,
}

/// Server-side context of the last answer on a kept socket.
#[derive(Clone)]
struct Continuation {
    last_body: Value,
    last_response_id: String,
    last_items: Vec<Value>,
}

struct Kept {
    socket: Socket,
    created: Instant,
    continuation: Option<Continuation>,
    generation: u64,
}

#[derive(Default)]
struct Registry {
    kept: HashMap<(String, String), Kept>,
    busy: HashSet<(String, String)>,
    sse_sessions: HashSet<String>,
    generation: u64,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `session` already fell back to SSE (after a WebSocket failure).
pub(crate) fn sse_fallback_active(session: Option<&str>) -> bool {
    session.is_some_and(|s| registry().sse_sessions.contains(s))
}

fn record_failure(session: Option<&str>) {
    if let Some(s) = session {
        registry().sse_sessions.insert(s.to_owned());
    }
}

/// Close `socket` in the background (a close frame, code 1000).
fn close_later(mut socket: Socket) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
        });
    }
}

/// The socket for one request and where it goes afterwards.
struct Lease {
    socket: Socket,
    /// `Some` when the socket is kept for the session afterwards.
    key: Option<(String, String)>,
    created: Instant,
    continuation: Option<Continuation>,
}

async fn connect(url: &str, headers: &HeaderMap) -> Result<Socket, String> {
    let mut request = url
        .into_client_request()
        .map_err(|e| format!("Invalid WebSocket URL: {e}"))?;
    for (name, value) in headers {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    let target = match url.split_once("://") {
        Some(("wss", rest)) => format!("https://{rest}"),
        Some(("ws", rest)) => format!("http://{rest}"),
        _ => url.to_owned(),
    };
    let proxy = super::proxy::proxy_for_target(&target).map_err(|e| e.to_string())?;
    let open = async {
        match proxy {
            None => tokio_tungstenite::connect_async(request)
                .await
                .map(|(socket, _)| socket)
                .map_err(|e| format!("WebSocket error: {e}")),
            Some(proxy) => {
                let tcp = tunnel(&proxy, &target).await?;
                tokio_tungstenite::client_async_tls_with_config(request, tcp, None, None)
                    .await
                    .map(|(socket, _)| socket)
                    .map_err(|e| format!("WebSocket error: {e}"))
            }
        }
    };
    match tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), open).await {
        Err(_) => Err(format!(
            "WebSocket connect timeout after {CONNECT_TIMEOUT_MS}ms"
        )),
        Ok(result) => result,
    }
}

/// A TCP connection to `target`'s host and port through the HTTP proxy `proxy`: `CONNECT
/// host:port`, with `Proxy-Authorization: Basic …` when the proxy URL has a user, and a 2xx
/// answer. An `https:` proxy (TLS to the proxy itself) is not supported here: `Err`, so the
/// request goes over SSE, whose client speaks to such proxies.
async fn tunnel(proxy: &reqwest::Url, target: &str) -> Result<tokio::net::TcpStream, String> {
    use base64::Engine as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    if proxy.scheme() != "http" {
        return Err(format!(
            "WebSocket error: {} proxies are not supported for the WebSocket",
            proxy.scheme()
        ));
    }
    let target = reqwest::Url::parse(target).map_err(|e| format!("WebSocket error: {e}"))?;
    let host = target.host_str().unwrap_or_default();
    let authority = format!("{host}:{}", target.port_or_known_default().unwrap_or(443));
    let proxy_host = proxy.host_str().unwrap_or_default();
    let proxy_port = proxy.port_or_known_default().unwrap_or(80);
    let mut tcp = tokio::net::TcpStream::connect((strip_ipv6(proxy_host), proxy_port))
        .await
        .map_err(|e| format!("WebSocket error: proxy {proxy_host}:{proxy_port}: {e}"))?;
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if !proxy.username().is_empty() {
        let user = percent_decode(proxy.username());
        let pass = percent_decode(proxy.password().unwrap_or(""));
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        head.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("WebSocket error: {e}"))?;
    // Read the proxy's answer head byte by byte: nothing after it may be consumed.
    let mut answer = Vec::new();
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() > 16 * 1024 {
            return Err("WebSocket error: proxy answer too long".into());
        }
        let byte = tcp
            .read_u8()
            .await
            .map_err(|e| format!("WebSocket error: proxy closed the tunnel: {e}"))?;
        answer.push(byte);
    }
    let status_line = String::from_utf8_lossy(&answer);
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();
    if !status.starts_with('2') {
        let line = status_line.lines().next().unwrap_or_default().to_owned();
        return Err(format!("WebSocket error: proxy refused CONNECT: {line}"));
    }
    Ok(tcp)
}

fn strip_ipv6(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// `%XX` escapes of a URL's user or password decoded.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

async fn acquire(req: &WsRequest, fresh: bool) -> Result<Lease, String> {
    let Some(session) = &req.session else {
        let socket = connect(&req.url, &req.headers).await?;
        return Ok(Lease {
            socket,
            key: None,
            created: Instant::now(),
            continuation: None,
        });
    };
    let key = (session.clone(), req.account.clone());
    let (kept, busy) = {
        let mut reg = registry();
        if reg.busy.contains(&key) {
            (None, true)
        } else {
            let kept = reg.kept.remove(&key);
            reg.busy.insert(key.clone());
            (kept, false)
        }
    };
    if busy {
        let socket = connect(&req.url, &req.headers).await?;
        return Ok(Lease {
            socket,
            key: None,
            created: Instant::now(),
            continuation: None,
        });
    }
    if let Some(kept) = kept {
        if !fresh && kept.created.elapsed() < MAX_AGE {
            return Ok(Lease {
                socket: kept.socket,
                key: Some(key),
                created: kept.created,
                continuation: kept.continuation,
            });
        }
        close_later(kept.socket);
    }
    match connect(&req.url, &req.headers).await {
        Ok(socket) => Ok(Lease {
            socket,
            key: Some(key),
            created: Instant::now(),
            continuation: None,
        }),
        Err(e) => {
            registry().busy.remove(&key);
            Err(e)
        }
    }
}

/// Return `lease` after a request: kept for its session (with `continuation`) when `keep`,
/// else closed.
fn release(lease: Lease, keep: bool, continuation: Option<Continuation>) {
    let Some(key) = lease.key else {
        close_later(lease.socket);
        return;
    };
    let mut reg = registry();
    reg.busy.remove(&key);
    if !keep {
        drop(reg);
        close_later(lease.socket);
        return;
    }
    reg.generation += 1;
    let generation = reg.generation;
    reg.kept.insert(
        key.clone(),
        Kept {
            socket: lease.socket,
            created: lease.created,
            continuation,
            generation,
        },
    );
    drop(reg);
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move {
            tokio::time::sleep(IDLE_TTL).await;
            let expired = {
                let mut reg = registry();
                match reg.kept.get(&key) {
                    Some(k) if k.generation == generation => reg.kept.remove(&key),
                    _ => None,
                }
            };
            if let Some(k) = expired {
                close_later(k.socket);
            }
        });
    }
}

fn without_input(body: &Value) -> Value {
    let mut b = body.clone();
    if let Value::Object(m) = &mut b {
        m.remove("input");
        m.remove("previous_response_id");
    }
    b
}

/// The body to send on a kept socket: the input delta with `previous_response_id` when the
/// continuation applies, else `None` (send the full body).
fn delta_body(body: &Value, cont: &Continuation) -> Option<Value> {
    if without_input(body) != without_input(&cont.last_body) {
        return None;
    }
    let empty = Vec::new();
    let input = body
        .get("input")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut baseline: Vec<Value> = cont
        .last_body
        .get("input")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    baseline.extend(cont.last_items.iter().cloned());
    if input.len() < baseline.len() || input[..baseline.len()] != baseline[..] {
        return None;
    }
    let mut out = body.clone();
    if let Value::Object(m) = &mut out {
        m.insert(
            "previous_response_id".into(),
            Value::String(cont.last_response_id.clone()),
        );
        m.insert(
            "input".into(),
            Value::Array(input[baseline.len()..].to_vec()),
        );
    }
    Some(out)
}

fn frame(body: &Value) -> String {
    let mut m = Map::new();
    m.insert("type".into(), Value::String("response.create".into()));
    if let Value::Object(b) = body {
        for (k, v) in b {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m).to_string()
}

/// The `code` and `message` of a Codex `error` event (top level or under `error`).
fn event_error(event: &Value) -> (Option<&str>, Option<&str>) {
    let nested = event.get("error").filter(|e| e.is_object());
    let pick = |key: &str| {
        event
            .get(key)
            .and_then(Value::as_str)
            .or_else(|| nested.and_then(|n| n.get(key)).and_then(Value::as_str))
    };
    (pick("code"), pick("message"))
}

enum Attempt {
    Finished(WsOutcome),
    /// Retry on a fresh socket (connection limit before the first event).
    RetryFresh,
    /// Retry with the full body (the server lost the previous response).
    RetryFull,
}

/// Send `req` over the WebSocket, emitting the message on `em` once the first event arrives.
pub(crate) async fn stream(
    em: &Emitter,
    model: &Model,
    req: &WsRequest,
    options: &StreamOptions,
    transport: Transport,
    idle_timeout_ms: u64,
    started: Instant,
) -> WsOutcome {
    let cached = matches!(transport, Transport::Auto | Transport::WebSocketCached);
    let (mut retried_fresh, mut retried_full, mut fresh, mut full) = (false, false, false, false);
    loop {
        match attempt(
            em,
            model,
            req,
            options,
            cached && !full,
            fresh,
            !retried_full,
            idle_timeout_ms,
            started,
        )
        .await
        {
            Attempt::Finished(outcome) => return outcome,
            Attempt::RetryFresh if !retried_fresh => {
                retried_fresh = true;
                fresh = true;
            }
            Attempt::RetryFull if !retried_full => {
                retried_full = true;
                full = true;
            }
            // Unreachable: `attempt` only asks for a retry not yet used.
            Attempt::RetryFresh | Attempt::RetryFull => return WsOutcome::Fallback,
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn attempt(
    em: &Emitter,
    model: &Model,
    req: &WsRequest,
    options: &StreamOptions,
    cached: bool,
    fresh: bool,
    may_resend: bool,
    idle_timeout_ms: u64,
    started: Instant,
) -> Attempt {
    let cancel = &options.cancel;
    let session = req.session.as_deref();
    let mut lease = match acquire(req, fresh).await {
        Ok(l) => l,
        Err(_) if cancel.is_cancelled() => {
            em.fail(
                crate::types::AssistantMessage::empty(model),
                common::aborted(),
                started,
            );
            return Attempt::Finished(WsOutcome::Emitted);
        }
        Err(_) => {
            record_failure(session);
            return Attempt::Finished(WsOutcome::Fallback);
        }
    };
    let body = match (&lease.continuation, cached) {
        (Some(cont), true) => delta_body(&req.body, cont).unwrap_or_else(|| req.body.clone()),
        _ => req.body.clone(),
    };
    lease.continuation = None;
    if lease
        .socket
        .send(WsMessage::Text(frame(&body)))
        .await
        .is_err()
    {
        release(lease, false, None);
        record_failure(session);
        return Attempt::Finished(WsOutcome::Fallback);
    }

    let flavor = Flavor::Codex;
    let mut reader = EventReader::new(model);
    let mut emitting = false;
    // `Err(text)`: the transport broke; `Ok(end)`: how the stream ended otherwise.
    let end: Result<StreamEnd, String> = loop {
        let idle = async {
            if idle_timeout_ms > 0 {
                tokio::time::sleep(Duration::from_millis(idle_timeout_ms)).await
            } else {
                std::future::pending::<()>().await
            }
        };
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Ok(StreamEnd::Aborted),
            n = lease.socket.next() => n,
            _ = idle => break Err(format!("WebSocket idle timeout after {idle_timeout_ms}ms")),
        };
        let text = match next {
            Some(Ok(WsMessage::Text(t))) => t,
            Some(Ok(WsMessage::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
            Some(Ok(WsMessage::Close(close))) => {
                break Err(match close {
                    Some(f) if !f.reason.is_empty() => {
                        format!("WebSocket closed {} {}", u16::from(f.code), f.reason)
                    }
                    Some(f) if u16::from(f.code) == 1009 => {
                        "WebSocket closed 1009 message too big".to_owned()
                    }
                    Some(f) => format!("WebSocket closed {}", u16::from(f.code)),
                    None => "WebSocket closed".to_owned(),
                })
            }
            Some(Ok(_)) => continue,
            Some(Err(_)) => break Err("WebSocket error".to_owned()),
            None => break Err("WebSocket closed".to_owned()),
        };
        let event: Value = match crate::json::parse_stream_chunk(&text) {
            Ok(v) => v,
            Err(e) => {
                break Ok(StreamEnd::Failed(ProviderError::Protocol {
                    message: format!("Invalid Codex WebSocket JSON: {e}"),
                }))
            }
        };
        // Upstream reads a code from `error` events and from `response.failed`.
        let code = match event.get("type").and_then(Value::as_str) {
            Some("error") => event_error(&event).0,
            Some("response.failed") => event["response"]["error"]["code"].as_str(),
            _ => None,
        };
        if !emitting && code == Some(CONNECTION_LIMIT_CODE) && !fresh {
            release(lease, false, None);
            return Attempt::RetryFresh;
        }
        // Whatever the transport mode, as upstream: once per request, on a new socket.
        if !emitting && code == Some(PREVIOUS_RESPONSE_NOT_FOUND_CODE) && may_resend {
            release(lease, false, None);
            return Attempt::RetryFull;
        }
        if !emitting {
            emitting = true;
            em.start(&reader.output);
        }
        match reader.feed(&event, em, model, &flavor) {
            Ok(true) => break Ok(StreamEnd::Finished),
            Ok(false) => {}
            Err(message) => break Ok(StreamEnd::Failed(ProviderError::Stream { message })),
        }
    };

    match end {
        Err(message) => {
            release(lease, false, None);
            record_failure(session);
            if !emitting {
                return Attempt::Finished(WsOutcome::Fallback);
            }
            reader.finish(
                em,
                StreamEnd::Failed(ProviderError::Disconnected { message }),
                &flavor,
                cancel,
                started,
            );
        }
        Ok(StreamEnd::Finished) if !cancel.is_cancelled() => {
            let out = reader.output.clone();
            let continuation = match (&out.response_id, cached) {
                (Some(id), true) if !matches!(out.stop_reason, crate::types::StopReason::Error) => {
                    let ctx = Context {
                        system_prompt: String::new(),
                        messages: vec![Message::Assistant(out.clone())],
                        tools: Vec::new(),
                    };
                    let items =
                        convert_input(model, &ctx, &req.compat, &OPENAI_TOOL_CALL_PROVIDERS)
                            .into_iter()
                            .filter(|i| {
                                !matches!(
                                    i.get("type").and_then(Value::as_str),
                                    Some("function_call_output" | "custom_tool_call_output")
                                )
                            })
                            .collect();
                    Some(Continuation {
                        last_body: req.body.clone(),
                        last_response_id: id.clone(),
                        last_items: items,
                    })
                }
                _ => None,
            };
            release(lease, true, continuation);
            reader.finish(em, StreamEnd::Finished, &flavor, cancel, started);
        }
        Ok(end) => {
            release(lease, false, None);
            reader.finish(em, end, &flavor, cancel, started);
        }
    }
    Attempt::Finished(WsOutcome::Emitted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delta_only_when_the_rest_matches() {
        let cont = Continuation {
            last_body: json!({"model": "m", "input": [{"a": 1}]}),
            last_response_id: "resp_1".into(),
            last_items: vec![json!({"b": 2})],
        };
        let next = json!({"model": "m", "input": [{"a": 1}, {"b": 2}, {"c": 3}]});
        assert_eq!(
            delta_body(&next, &cont).unwrap(),
            json!({"model": "m", "input": [{"c": 3}], "previous_response_id": "resp_1"})
        );
        assert!(delta_body(&json!({"model": "x", "input": [{"a": 1}, {"b": 2}]}), &cont).is_none());
        assert!(delta_body(&json!({"model": "m", "input": [{"z": 1}, {"b": 2}]}), &cont).is_none());
        assert!(delta_body(&json!({"model": "m", "input": [{"a": 1}]}), &cont).is_none());
    }

    #[test]
    fn frames_lead_with_the_type() {
        assert_eq!(
            frame(&json!({"model": "m"})),
            r#"{"type":"response.create","model":"m"}"#
        );
    }
}
