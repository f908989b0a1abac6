//! A scripted fake LLM server on 127.0.0.1 for adapter tests (modelled on
//! `shared/conformance/fakellm.py`): each request consumes the next [`Reply`] and is recorded.

#![allow(dead_code)]

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Router;
use futures::StreamExt;
use pi_ai::{AssistantMessage, AssistantMessageEvent, AssistantStream, Model, ModelCost};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// What the fake answers to one request.
pub enum Reply {
    /// `200 text/event-stream` with these raw SSE strings. After `disconnect_after` events the
    /// connection is dropped without the terminating chunk; after `stall_after` events the
    /// server sends nothing more and never finishes.
    Sse {
        events: Vec<String>,
        disconnect_after: Option<usize>,
        stall_after: Option<usize>,
    },
    /// A JSON (or any text) error response.
    Error { status: u16, body: String },
    /// Like `Error`, with extra response headers (e.g. `retry-after`).
    ErrorWithHeaders {
        status: u16,
        body: String,
        headers: Vec<(&'static str, String)>,
    },
}

impl Reply {
    /// A complete SSE reply.
    pub fn sse(events: Vec<String>) -> Self {
        Reply::Sse {
            events,
            disconnect_after: None,
            stall_after: None,
        }
    }
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Clone)]
struct Shared {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// A running fake server.
pub struct FakeServer {
    pub port: u16,
    shared: Shared,
}

impl FakeServer {
    /// Bind 127.0.0.1:0 and serve `replies` in order.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let shared = Shared {
            replies: Arc::new(Mutex::new(replies.into())),
            requests: Arc::new(Mutex::new(Vec::new())),
        };
        let state = shared.clone();
        let app = Router::new().fallback(move |req: Request| {
            let state = state.clone();
            async move { handle(state, req).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeServer { port, shared }
    }

    /// `http://127.0.0.1:PORT` + `suffix`.
    pub fn url(&self, suffix: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, suffix)
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().expect("lock").clone()
    }
}

async fn handle(state: Shared, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    state.requests.lock().expect("lock").push(Recorded {
        path_and_query: parts
            .uri
            .path_and_query()
            .map(std::string::ToString::to_string)
            .unwrap_or_default(),
        headers: parts.headers,
        body,
    });
    let reply = state.replies.lock().expect("lock").pop_front();
    match reply {
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("script exhausted"))
            .expect("response"),
        Some(Reply::Error { status, body }) => Response::builder()
            .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("response"),
        Some(Reply::ErrorWithHeaders {
            status,
            body,
            headers,
        }) => {
            let mut builder = Response::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
                .header("content-type", "application/json");
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder.body(Body::from(body)).expect("response")
        }
        Some(Reply::Sse {
            events,
            disconnect_after,
            stall_after,
        }) => {
            let n = events.len();
            let cut = disconnect_after.unwrap_or(n).min(n);
            let stall = stall_after.unwrap_or(n).min(n);
            let take = cut.min(stall);
            let head = futures::stream::iter(
                events
                    .into_iter()
                    .take(take)
                    .map(|e| Ok::<Bytes, std::io::Error>(Bytes::from(e))),
            );
            let tail: futures::stream::BoxStream<'static, Result<Bytes, std::io::Error>> =
                if disconnect_after.is_some() && cut <= stall {
                    futures::stream::once(async {
                        // Let hyper flush what was sent before dropping the connection.
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "disconnect",
                        ))
                    })
                    .boxed()
                } else if stall_after.is_some() {
                    futures::stream::pending().boxed()
                } else {
                    futures::stream::empty().boxed()
                };
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "text/event-stream")
                .header("cache-control", "no-cache")
                .body(Body::from_stream(head.chain(tail)))
                .expect("response")
        }
    }
}

/// A 127.0.0.1 server that accepts connections and reads requests but never answers: the
/// port, and the task holding the sockets open (abort it to close them).
pub async fn start_silent_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (port, task)
}

/// `data: <json>\n\n`.
pub fn sse_data(v: &Value) -> String {
    format!("data: {}\n\n", serde_json::to_string(v).expect("json"))
}

/// `event: <name>\ndata: <json>\n\n`.
pub fn sse_event(name: &str, v: &Value) -> String {
    format!("event: {name}\n{}", sse_data(v))
}

/// One OpenAI `chat.completion.chunk` with a single choice.
pub fn oa_chunk(id: &str, delta: Value, finish: Option<&str>) -> String {
    sse_data(&json!({
        "id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }))
}

/// The usage-only chunk OpenAI sends last with `stream_options.include_usage`.
pub fn oa_usage(id: &str, prompt: u64, completion: u64, cached: u64, cache_write: u64) -> String {
    let details = if cache_write > 0 {
        json!({"cached_tokens": cached, "cache_write_tokens": cache_write})
    } else {
        json!({"cached_tokens": cached})
    };
    sse_data(&json!({
        "id": id, "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion, "prompt_tokens_details": details},
    }))
}

/// Split `s` into pieces of `n` characters.
pub fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// A model pointing at the fake.
pub fn model(api: &str, provider: &str, id: &str, base_url: String, reasoning: bool) -> Model {
    let mut m = Model::unknown();
    m.id = id.into();
    m.name = id.into();
    m.api = api.into();
    m.provider = provider.into();
    m.base_url = base_url;
    m.reasoning = reasoning;
    m.input = vec!["text".into(), "image".into()];
    m.context_window = 200_000;
    m.max_tokens = 32_000;
    m.cost = ModelCost {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
        cache_write: 3.75,
        tiers: None,
    };
    m
}

/// Drain a stream: all events plus the final message (from `Done`/`Error`).
/// The stream's events without the `Usage` updates (see [`collect_all`]) and its final
/// message.
pub async fn collect(stream: AssistantStream) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let (events, last) = collect_all(stream).await;
    let events = events
        .into_iter()
        .filter(|e| !matches!(e, AssistantMessageEvent::Usage { .. }))
        .collect();
    (events, last)
}

/// Every event of the stream, `Usage` updates included, and its final message.
pub async fn collect_all(
    mut stream: AssistantStream,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let mut events = Vec::new();
    let mut last = None;
    while let Some(ev) = stream.next().await {
        match &ev {
            AssistantMessageEvent::Done { message, .. }
            | AssistantMessageEvent::Error { message, .. } => last = Some((**message).clone()),
            _ => {}
        }
        events.push(ev);
    }
    (events, last.expect("stream ended without done/error"))
}

/// Events serialized as RPC would (`assistantMessageEvent` objects), for order assertions.
pub fn event_json(events: &[AssistantMessageEvent]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).expect("event json"))
        .collect()
}
