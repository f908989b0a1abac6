//! `openai-codex-responses` transports (issue 14): the WebSocket (settings `transport`, default
//! `auto`), the SSE fallback and zstd request bodies, end to end through `pi --mode rpc`
//! against the fake server's Codex WebSocket flavour.
//!
//! `tests/data/responses/openai-codex-ws-<scenario>.json` holds what upstream 1.6 did for each
//! scenario (recorded with `tests/data/responses/record_ws.py`): the WebSocket handshakes, the
//! `response.create` frames / SSE posts, and the assistant messages and retry events. The tests
//! replay the same script and prompts through our `pi` and compare them after masking prose and
//! the session id.

use crate::common::*;
use crate::rpc_responses::{
    self, drive, json_diff, key_headers, key_message, mask_body, masked_headers, root_for,
};
use base64::Engine as _;
use pi_fakellm::{FakeLlm, RecordedRequest, Script, Turn};
use serde_json::{json, Value};

fn recording(scenario: &str) -> Value {
    rpc_responses::recording(&format!("openai-codex-ws-{scenario}"))
}

/// A run root with the Codex provider `fake-resp/fake-gpt5` of the recordings on `fake`, and
/// `settings` merged into settings.json.
fn codex_root(fake: &FakeLlm, settings: Value) -> RunRoot {
    let root = root_for(&recording("websocket")["provider"], fake);
    root.merge_settings(settings);
    root
}

/// The handshake headers that carry meaning (session ids masked).
fn upgrade_headers(headers: &Value) -> Value {
    masked_headers(
        headers,
        &[
            "authorization",
            "chatgpt-account-id",
            "openai-beta",
            "originator",
            "content-type",
            "upgrade",
            "session-id",
            "x-client-request-id",
        ],
    )
}

/// The assistant messages and `auto_retry_*` events of `agent` (key fields only).
fn key_events(agent: &RpcAgent) -> Vec<Value> {
    agent
        .events()
        .into_iter()
        .filter_map(|e| match kind(&e) {
            "message_end" if e["message"]["role"] == "assistant" => {
                Some(json!({"type": "message_end", "message": key_message(&e["message"])}))
            }
            "auto_retry_start" => Some(json!({"type": kind(&e), "attempt": e["attempt"],
                "delayMs": e["delayMs"], "errorMessage": e["errorMessage"]})),
            "auto_retry_end" => Some(json!({"type": kind(&e), "attempt": e["attempt"],
                "success": e["success"]})),
            _ => None,
        })
        .collect()
}

fn recorded_key_events(rec: &Value) -> Vec<Value> {
    rec["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["type"].as_str() {
            Some("message_end") => {
                json!({"type": "message_end", "message": key_message(&e["message"])})
            }
            Some("auto_retry_start") => json!({"type": e["type"], "attempt": e["attempt"],
                "delayMs": e["delayMs"], "errorMessage": e["errorMessage"]}),
            _ => json!({"type": e["type"], "attempt": e["attempt"], "success": e["success"]}),
        })
        .collect()
}

fn assert_same_body(i: usize, ours: &Value, theirs: &Value) {
    let mut diffs = Vec::new();
    json_diff("", &mask_body(ours), &mask_body(theirs), &mut diffs);
    assert!(
        diffs.is_empty(),
        "request {i}: body differs (ours vs upstream):\n{}",
        diffs.join("\n")
    );
}

/// Replays `scenario` through our `pi`; returns the fake for extra checks.
fn replay(scenario: &str) -> FakeLlm {
    let rec = recording(scenario);
    let script = Script::from_value(rec["script"].clone()).unwrap();
    let fake = FakeLlm::spawn(script).unwrap();
    let mut settings = rec["settings"].clone();
    for k in ["defaultProvider", "defaultModel"] {
        settings.as_object_mut().unwrap().remove(k);
    }
    let root = codex_root(&fake, settings);
    let mut agent = root.spawn();
    let prompts: Vec<Value> = rec["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| json!({"type": "prompt", "message": m}))
        .collect();
    drive(&mut agent, &prompts, "c");

    assert_eq!(key_events(&agent), recorded_key_events(&rec), "events");

    let ups = fake.ws_upgrades();
    let theirs = rec["ws_upgrades"].as_array().unwrap();
    assert_eq!(ups.len(), theirs.len(), "upgrade attempts");
    for (o, t) in ups.iter().zip(theirs) {
        assert_eq!(o.path, t["path"].as_str().unwrap());
        assert_eq!(o.outcome, t["outcome"].as_str().unwrap());
        let o = serde_json::to_value(o).unwrap();
        assert_eq!(
            upgrade_headers(&o["headers"]),
            upgrade_headers(&t["headers"])
        );
    }

    let ours = fake.llm_requests();
    let theirs = rec["requests"].as_array().unwrap();
    assert_eq!(ours.len(), theirs.len(), "request count");
    for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
        assert_eq!(
            o.method,
            t["method"].as_str().unwrap(),
            "request {i}: method"
        );
        assert_eq!(o.path, t["path"].as_str().unwrap(), "request {i}: path");
        assert_eq!(
            o.outcome,
            t["outcome"].as_str().unwrap(),
            "request {i}: outcome"
        );
        if o.method == "POST" {
            let oj = serde_json::to_value(o).unwrap();
            assert_eq!(key_headers(&oj), key_headers(t), "request {i}: headers");
            assert_eq!(
                o.header("content-encoding"),
                t["headers"]["content-encoding"].as_str(),
                "request {i}: content-encoding"
            );
            // The fake decoded our zstd bytes (and kept them).
            assert_eq!(o.encoded_body.is_some(), t["zstd_level3"] == true);
        }
        assert_same_body(i, &o.body, &t["body"]);
    }
    fake
}

#[test]
fn codex_websocket_text_and_tool_round_trip_match_upstream() {
    // One socket for the session; after the first, requests send only the new input with
    // `previous_response_id` (upstream's default `auto`): the next prompt, the tool result.
    let fake = replay("websocket");
    let reqs = fake.llm_requests();
    assert!(reqs.iter().all(|r| r.method == "WS"));
    assert_eq!(reqs[1].body["previous_response_id"], "resp_fake_1");
    assert_eq!(reqs[1].body["input"][0]["role"], "user");
    assert_eq!(reqs[2].body["previous_response_id"], "resp_fake_2");
    assert_eq!(reqs[2].body["input"][0]["type"], "function_call_output");
}

#[test]
fn codex_lost_previous_response_is_sent_again_in_full_on_a_new_socket_as_upstream() {
    // The second prompt's continuation (`previous_response_id`) is answered with an `error`
    // event `previous_response_not_found`: upstream drops that socket, opens another and sends
    // the full context on it, and the error never reaches the messages.
    let fake = replay("not-found");
    let reqs = fake.llm_requests();
    assert_eq!(fake.ws_upgrades().len(), 2);
    assert_eq!(reqs[1].body["previous_response_id"], "resp_fake_1");
    assert_eq!(reqs[1].outcome, "error_400");
    assert!(reqs[2].body.get("previous_response_id").is_none());
    assert_eq!(reqs[2].body["input"].as_array().unwrap().len(), 4);
}

#[test]
fn codex_refused_upgrade_falls_back_to_zstd_sse_as_upstream() {
    // The refused upgrade is tried once; every request of the session then goes over SSE
    // with a zstd body that the fake decodes to the same JSON as upstream's.
    let fake = replay("refused");
    assert_eq!(fake.ws_upgrades().len(), 1);
    assert!(fake.llm_requests().iter().all(|r| r.method == "POST"));
}

#[test]
fn codex_socket_dropped_mid_stream_errors_and_retries_over_sse() {
    // Lost after 4 frames: the message ends with `WebSocket error`, auto-retry runs and the
    // retried request goes over SSE (the session no longer uses the socket).
    replay("dropped");
}

#[test]
fn codex_zstd_bodies_are_upstreams_bytes() {
    // Upstream's compressor (Node zlib, level 3) on a masked body, reproduced byte for byte.
    let rec = recording("refused");
    let probe = &rec["zstd_probe"];
    let theirs = base64::engine::general_purpose::STANDARD
        .decode(probe["zstd_base64"].as_str().unwrap())
        .unwrap();
    let ours =
        pi_ai::providers::openai_responses::zstd_body(probe["text"].as_str().unwrap().as_bytes())
            .unwrap();
    assert_eq!(ours, theirs);
    for r in rec["requests"].as_array().unwrap() {
        assert_eq!(r["zstd_level3"], true, "upstream sent level-3 zstd");
    }
}

fn one_text_prompt(settings: Value, websocket: bool) -> (FakeLlm, Vec<RecordedRequest>) {
    let script = Script::new([Turn::text("ok")]).websocket(websocket);
    let fake = FakeLlm::spawn(script).unwrap();
    let root = codex_root(&fake, settings);
    let mut agent = root.spawn();
    let m = drive(
        &mut agent,
        &[json!({"type": "prompt", "message": "hi"})],
        "p",
    );
    assert_eq!(m[0]["stopReason"], "stop", "{}", m[0]);
    let reqs = fake.llm_requests();
    (fake, reqs)
}

#[test]
fn codex_transport_setting_picks_the_transport() {
    // `sse` never opens a socket, and neither does the legacy `websockets: false`.
    for settings in [json!({"transport": "sse"}), json!({"websockets": false})] {
        let (fake, reqs) = one_text_prompt(settings.clone(), true);
        assert!(fake.ws_upgrades().is_empty(), "{settings}");
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].method, "POST");
        assert_eq!(reqs[0].header("content-encoding"), Some("zstd"));
    }
    // `websocket` (and legacy `websockets: true`) send the full context on the socket.
    for settings in [
        json!({"transport": "websocket"}),
        json!({"websockets": true}),
    ] {
        let (fake, reqs) = one_text_prompt(settings.clone(), true);
        assert_eq!(fake.ws_upgrades().len(), 1, "{settings}");
        assert_eq!(reqs[0].method, "WS");
        assert_eq!(reqs[0].body["type"], "response.create");
    }
}

#[test]
fn codex_websocket_mode_sends_the_full_context_each_time() {
    // `websocket` (unlike `auto`) never sends `previous_response_id`.
    let script = Script::new([Turn::text("one"), Turn::text("two")]).websocket(true);
    let fake = FakeLlm::spawn(script).unwrap();
    let root = codex_root(&fake, json!({"transport": "websocket"}));
    let mut agent = root.spawn();
    drive(
        &mut agent,
        &[
            json!({"type": "prompt", "message": "a"}),
            json!({"type": "prompt", "message": "b"}),
        ],
        "p",
    );
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(fake.ws_upgrades().len(), 1, "the socket is reused");
    assert!(reqs[1].body.get("previous_response_id").is_none());
    assert_eq!(reqs[1].body["input"].as_array().unwrap().len(), 4);
}

#[test]
fn codex_previous_response_not_found_is_resent_once_in_any_mode() {
    // Upstream resends once on a new socket whatever the transport mode; a second
    // `previous_response_not_found` ends the message with the error (no SSE fallback).
    let not_found = json!({"api": "responses", "error": {"status": 400, "body": {"error": {
        "type": "invalid_request_error", "code": "previous_response_not_found",
        "message": "Previous response with id 'resp_x' not found."}}}});
    let text = json!({"api": "responses", "blocks": [{"type": "text", "text": "one"}]});
    for (turns, stop, error) in [
        (vec![not_found.clone(), text], "stop", Value::Null),
        (
            vec![not_found.clone(), not_found],
            "error",
            json!("Codex error: Previous response with id 'resp_x' not found."),
        ),
    ] {
        let script = Script::from_value(json!({"websocket": true, "turns": turns})).unwrap();
        let fake = FakeLlm::spawn(script).unwrap();
        let root = codex_root(&fake, json!({"transport": "websocket"}));
        let mut agent = root.spawn();
        let m = drive(
            &mut agent,
            &[json!({"type": "prompt", "message": "a"})],
            "p",
        );
        assert_eq!(m.len(), 1);
        assert_eq!(m[0]["stopReason"], stop, "{}", m[0]);
        assert_eq!(m[0]["errorMessage"], error, "{}", m[0]);
        let reqs = fake.llm_requests();
        assert_eq!(reqs.len(), 2);
        assert!(reqs.iter().all(|r| r.method == "WS"));
        assert_eq!(reqs[0].body, reqs[1].body);
        assert_eq!(fake.ws_upgrades().len(), 2, "a new socket for the resend");
    }
}

/// An HTTP CONNECT proxy on 127.0.0.1: records each `CONNECT` target, answers 200 and pipes
/// the tunnel both ways.
struct ConnectProxy {
    port: u16,
    targets: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ConnectProxy {
    fn start() -> ConnectProxy {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let targets = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = targets.clone();
        std::thread::spawn(move || {
            for mut client in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if client.read(&mut byte).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let mut words = head.split_whitespace();
                    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
                        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n");
                        return;
                    };
                    seen.lock().unwrap().push(target.to_owned());
                    let Ok(upstream) = std::net::TcpStream::connect(target) else {
                        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                        return;
                    };
                    client
                        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                        .unwrap();
                    let (mut c2, mut u2) =
                        (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                    let (mut client, mut upstream) = (client, upstream);
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut u2, &mut c2);
                        let _ = c2.shutdown(std::net::Shutdown::Write);
                    });
                    let _ = std::io::copy(&mut client, &mut upstream);
                    let _ = upstream.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        ConnectProxy { port, targets }
    }

    fn targets(&self) -> Vec<String> {
        self.targets.lock().unwrap().clone()
    }
}

#[test]
fn codex_websocket_goes_through_the_http_proxy_of_its_scheme_unless_no_proxy_exempts_it() {
    // As upstream's `resolveHttpProxyUrlForTarget`: the `ws://` endpoint is an `http:` target,
    // so `HTTP_PROXY` tunnels it (CONNECT), `HTTPS_PROXY` does not, and `NO_PROXY` exempts it.
    let proxy = ConnectProxy::start();
    let via = format!("http://127.0.0.1:{}", proxy.port);
    let cases: [(&[(&str, &str)], bool); 3] = [
        (&[("HTTP_PROXY", &via)], true),
        (&[("HTTPS_PROXY", &via)], false),
        (
            &[("HTTP_PROXY", &via), ("NO_PROXY", "localhost,127.0.0.1")],
            false,
        ),
    ];
    for (env, tunnelled) in cases {
        let before = proxy.targets().len();
        let script = Script::new([Turn::text("ok")]).websocket(true);
        let fake = FakeLlm::spawn(script).unwrap();
        let root = codex_root(&fake, json!({"transport": "websocket"}));
        let mut agent = root.spawn_with_env(false, &[], env);
        let m = drive(
            &mut agent,
            &[json!({"type": "prompt", "message": "hi"})],
            "p",
        );
        assert_eq!(m[0]["stopReason"], "stop", "{env:?}: {}", m[0]);
        let reqs = fake.llm_requests();
        assert_eq!(reqs.len(), 1, "{env:?}");
        assert_eq!(reqs[0].method, "WS", "{env:?}");
        let expected = if tunnelled {
            vec![format!("127.0.0.1:{}", fake.port())]
        } else {
            Vec::new()
        };
        assert_eq!(proxy.targets()[before..].to_vec(), expected, "{env:?}");
    }
}
