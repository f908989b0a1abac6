//! The Codex Responses WebSocket flavour (upstream 1.6 `openai-codex-responses`, transport
//! `websocket`/`auto`).
//!
//! * Handshake: `GET …/responses` with `Upgrade: websocket`. Recorded in
//!   [`crate::FakeLlm::ws_upgrades`] (outcome `accepted` / `refused`); refused with 404 unless
//!   the script says `"websocket": true`.
//! * Each text frame from the client is one request, `{"type": "response.create", …body}`:
//!   recorded as a request (method `WS`, the handshake's path and headers, the frame as `body`),
//!   matched against the script like a `POST …/responses`, and answered with the turn's
//!   Responses events ([`crate::wire_responses`]), one JSON text frame per event (the SSE
//!   `data:` payloads; `raw_sse` turns are sent the same way).
//! * A turn with `error` is answered with one frame `{"type": "error", "status": <status>,
//!   "error": <the error body's "error">}`; the socket stays open.
//! * `disconnect_after_events: n`: after `n` frames the TCP connection is dropped with no close
//!   frame (a socket lost mid-stream). `delay_ms` applies before each frame.
//! * The socket stays open between requests (upstream reuses it per session) until the client
//!   closes it or the server stops.

use crate::script::{Api, Turn};
use crate::server::{header_record, lock, now_secs, pacing, RecordedRequest, Shared, TurnPacing};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Answer an upgrade request on `path`: accept it when the script allows WebSockets and the
/// path is a Responses endpoint, else 404.
pub(crate) fn upgrade(
    shared: Arc<Shared>,
    upgrade: WebSocketUpgrade,
    path: String,
    headers: &HeaderMap,
) -> Response {
    let accept = lock(&shared.script).script.websocket
        && path
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/responses"));
    let record = RecordedRequest {
        seq: 0,
        t: now_secs(),
        method: "GET".into(),
        path: path.clone(),
        api: Api::Responses.as_str().into(),
        headers: header_record(headers),
        body: Value::Null,
        turn_index: None,
        outcome: if accept { "accepted" } else { "refused" }.into(),
        encoded_body: None,
    };
    {
        let mut ups = lock(&shared.upgrades);
        let mut record = record;
        record.seq = ups.len() as u64 + 1;
        ups.push(record);
    }
    if !accept {
        let body = json!({"error": {"message": format!("fakellm: websocket refused on {path}")}});
        return (StatusCode::NOT_FOUND, body.to_string()).into_response();
    }
    let headers = header_record(headers);
    upgrade.on_upgrade(move |socket| session(shared, socket, path, headers))
}

/// The data payloads of SSE event texts (`event: …\ndata: {…}\n\n`).
fn sse_payloads(events: Vec<String>) -> Vec<String> {
    events
        .iter()
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .filter(|d| !d.is_empty() && d != "[DONE]")
        .collect()
}

async fn session(
    shared: Arc<Shared>,
    mut socket: WebSocket,
    path: String,
    headers: BTreeMap<String, String>,
) {
    while let Some(Ok(message)) = socket.recv().await {
        let text = match message {
            Message::Text(t) => t,
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Close(_) => return,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        let body = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
        let (turn_index, turn) = lock(&shared.script).pick(Api::Responses, &text);
        let seq = shared.record(RecordedRequest {
            seq: 0,
            t: now_secs(),
            method: "WS".into(),
            path: path.clone(),
            api: Api::Responses.as_str().into(),
            headers: headers.clone(),
            body: body.clone(),
            turn_index,
            outcome: "pending".into(),
            encoded_body: None,
        });
        match answer(&shared, &mut socket, &turn, &body, seq).await {
            Ok(outcome) => shared.set_outcome(seq, outcome),
            Err(outcome) => {
                shared.set_outcome(seq, outcome);
                // Dropping the socket closes the TCP connection without a close frame.
                return;
            }
        }
    }
}

/// Serve `turn` on `socket`: `Ok(outcome)` keeps the socket, `Err(outcome)` drops it.
async fn answer(
    shared: &Shared,
    socket: &mut WebSocket,
    turn: &Turn,
    req: &Value,
    seq: u64,
) -> Result<String, String> {
    const GONE: &str = "client_disconnected";
    if let Some(err) = &turn.error {
        let body = err
            .body
            .clone()
            .unwrap_or_else(|| crate::wire::default_error_body(Api::Responses, err.status));
        let inner = body.get("error").cloned().unwrap_or(body);
        let frame = json!({"type": "error", "status": err.status, "error": inner});
        return match socket.send(Message::Text(frame.to_string())).await {
            Ok(()) => Ok(format!("error_{}", err.status)),
            Err(_) => Err(GONE.into()),
        };
    }
    let TurnPacing {
        chunk_size,
        delay_ms,
        model,
    } = pacing(shared, turn, req, None);
    let events = match &turn.raw_sse {
        Some(raw) => sse_payloads(raw.clone()),
        None => sse_payloads(crate::wire_responses::responses_events(
            turn, &model, seq, chunk_size,
        )),
    };
    for (i, payload) in events.into_iter().enumerate() {
        if turn.disconnect_after_events.is_some_and(|n| i >= n) {
            return Err(format!("disconnected_after_{i}"));
        }
        if delay_ms > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(delay_ms / 1000.0)).await;
        }
        if shared.stopping.load(Ordering::SeqCst) {
            return Err(GONE.into());
        }
        if socket.send(Message::Text(payload)).await.is_err() {
            return Err(GONE.into());
        }
    }
    Ok("ok".into())
}
