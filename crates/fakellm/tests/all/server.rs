//! Black-box tests of the fake server over real HTTP on 127.0.0.1.

use pi_fakellm::{Block, FakeLlm, Script, Turn, Usage, EXHAUSTED_TEXT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Parses an SSE body into `(event name, data)` pairs; comment lines are skipped.
fn sse(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .filter_map(|block| {
            let mut name = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = Some(d.to_string());
                }
            }
            data.map(|d| (name, d))
        })
        .collect()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test]
async fn openai_stream_text_and_tool_call() {
    let fake = FakeLlm::start(Script::new([Turn::text("Hello there, world")
        .with_tool_call("bash", json!({"command": "echo hi"}))
        .usage(Usage::new(100, 20).cache(5, 0))]))
    .await
    .unwrap();
    let resp = client()
        .post(format!("{}/chat/completions", fake.base_url_openai()))
        .header("authorization", "Bearer k")
        .json(
            &json!({"model": "fake-gpt", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["x-request-id"], "req_fake_1");
    let body = resp.text().await.unwrap();
    let events = sse(&body);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["id"] == "chatcmpl-fake-1" && c["model"] == "fake-gpt"));
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello there, world");
    let pieces: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(pieces, ["", "Hello th", "ere, wor", "ld"]);
    let tc_start = chunks
        .iter()
        .find(|c| c["choices"][0]["delta"]["tool_calls"][0]["id"].is_string())
        .unwrap();
    assert_eq!(
        tc_start["choices"][0]["delta"]["tool_calls"][0]["id"],
        "call_fake_1_0"
    );
    assert_eq!(
        tc_start["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "bash"
    );
    let args: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, r#"{"command": "echo hi"}"#);
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("tool_calls")]);
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["prompt_tokens"], 105);
    assert_eq!(usage["completion_tokens"], 20);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 5);

    assert!(fake.wait_until(Duration::from_secs(5), |r| r.len() == 1
        && r[0].outcome == "ok"));
    let reqs = fake.requests();
    assert_eq!(reqs[0].api, "openai");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("Authorization"), Some("Bearer k"));
    assert_eq!(reqs[0].body["messages"][0]["content"], "hi");
    assert_eq!(reqs[0].turn_index, Some(0));
    assert_eq!(fake.unused_turns(), 0);
}

#[tokio::test]
async fn anthropic_stream_with_beta_query() {
    let fake = FakeLlm::start(Script::new([Turn::blocks([
        Block::thinking("Let me think", "sig-1"),
        Block::text("Hi"),
        Block::tool_call("read", json!({"path": "a.txt"})),
    ])
    .usage(Usage::new(200, 15).cache(50, 10))]))
    .await
    .unwrap();
    let resp = client()
        .post(format!(
            "{}/v1/messages?beta=true",
            fake.base_url_anthropic()
        ))
        .json(&json!({"model": "fake-claude", "stream": true, "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["request-id"], "req_fake_1");
    let events = sse(&resp.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let data: Vec<Value> = events
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data[0]["message"]["id"], "msg_fake_1");
    assert_eq!(data[0]["message"]["model"], "fake-claude");
    assert_eq!(data[0]["message"]["usage"]["cache_read_input_tokens"], 50);
    assert_eq!(
        data[5]["delta"],
        json!({"type": "signature_delta", "signature": "sig-1"})
    );
    assert_eq!(data[10]["content_block"]["id"], "toolu_fake_1_0");
    assert_eq!(data[10]["index"], 2);
    assert_eq!(data[15]["delta"]["stop_reason"], "tool_use");
    assert_eq!(data[15]["usage"]["output_tokens"], 15);
    assert!(fake.wait_until(Duration::from_secs(5), |r| r[0].outcome == "ok"));
    assert_eq!(fake.requests()[0].path_only(), "/v1/messages");
    assert_eq!(fake.requests()[0].api, "anthropic");
}

#[tokio::test]
async fn match_api_constraints_and_exhaustion() {
    let fake = FakeLlm::start(Script::new([
        Turn::text("for anthropic").api(pi_fakellm::Api::Anthropic),
        Turn::text("second").matching("SECOND"),
        Turn::text("first"),
    ]))
    .await
    .unwrap();
    let c = client();
    let ask = |msg: &'static str| {
        let c = c.clone();
        let url = format!("{}/chat/completions", fake.base_url_openai());
        async move {
            let body = c
                .post(url)
                .json(&json!({"model": "m", "msg": msg}))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            sse(&body)
                .iter()
                .filter(|(_, d)| d.as_str() != "[DONE]")
                .filter_map(|(_, d)| {
                    serde_json::from_str::<Value>(d).unwrap()["choices"][0]["delta"]["content"]
                        .as_str()
                        .map(String::from)
                })
                .collect::<String>()
        }
    };
    assert_eq!(ask("hello").await, "first");
    assert_eq!(ask("the SECOND one").await, "second");
    assert_eq!(ask("again").await, EXHAUSTED_TEXT);
    let reqs = fake.requests();
    assert_eq!(
        reqs.iter().map(|r| r.turn_index).collect::<Vec<_>>(),
        [Some(2), Some(1), None]
    );
    assert_eq!(fake.unused_turns(), 1);
}

#[tokio::test]
async fn scripted_errors_and_unknown_paths() {
    let mut t = Turn::error(529);
    t.error
        .as_mut()
        .unwrap()
        .headers
        .insert("retry-after".into(), json!("0"));
    let fake = FakeLlm::start(Script::new([
        t,
        Turn::error_body(Turn::default(), 400, json!("plain text body")),
    ]))
    .await
    .unwrap();
    let c = client();
    let r = c
        .post(format!("{}/v1/messages", fake.base_url_anthropic()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 529);
    assert_eq!(r.headers()["retry-after"], "0");
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let r = c
        .post(format!("{}/chat/completions", fake.base_url_openai()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.text().await.unwrap(), "plain text body");
    let r = c
        .post(format!("{}/v1/other", fake.base_url_anthropic()))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = c
        .get(format!("{}/_fake/health", fake.base_url_anthropic()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"ok": true}));
    let outcomes: Vec<String> = fake.requests().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, ["error_529", "error_400", "404"]);
    let listed: Value = c
        .get(format!("{}/_fake/requests", fake.base_url_anthropic()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3);
    assert_eq!(listed[2]["body"], "x");
}

#[tokio::test]
async fn disconnect_after_events_breaks_the_stream() {
    let fake = FakeLlm::start(Script::new([Turn::text("abcdefghijklmnop")
        .chunk_size(2)
        .disconnect_after(3)]))
    .await
    .unwrap();
    let resp = client()
        .post(format!("{}/chat/completions", fake.base_url_openai()))
        .json(&json!({"model": "m"}))
        .send()
        .await
        .unwrap();
    let mut resp = resp;
    let mut got = String::new();
    let err = loop {
        match resp.chunk().await {
            Ok(Some(b)) => got.push_str(&String::from_utf8_lossy(&b)),
            Ok(None) => panic!("stream ended cleanly; got {got:?}"),
            Err(e) => break e,
        }
    };
    assert_eq!(
        sse(&got).len(),
        3,
        "events before the drop: {got:?} ({err})"
    );
    assert!(fake.wait_until(Duration::from_secs(5), |r| r[0].outcome
        == "disconnected_after_3"));
}

// Multi-threaded: `wait_until` blocks this thread while reqwest's connection task must run
// to close the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_holds_the_stream_and_notices_a_client_that_leaves() {
    let fake = FakeLlm::start(Script::new([Turn::text("abcdefghijklmnop")
        .chunk_size(2)
        .stall_after(3, 20_000)]))
    .await
    .unwrap();
    let mut resp = client()
        .post(format!("{}/chat/completions", fake.base_url_openai()))
        .json(&json!({"model": "m"}))
        .send()
        .await
        .unwrap();
    let mut got = String::new();
    while sse(&got).len() < 3 {
        let b = resp
            .chunk()
            .await
            .unwrap()
            .expect("stream ended before the stall");
        got.push_str(&String::from_utf8_lossy(&b));
    }
    // During the stall only SSE comments arrive.
    let more = tokio::time::timeout(Duration::from_millis(500), resp.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(&more[..], b":\n\n");
    drop(resp);
    assert!(
        fake.wait_until(Duration::from_secs(10), |r| r[0].outcome
            == "client_disconnected"),
        "outcome: {}",
        fake.requests()[0].outcome
    );
}

#[test]
fn binary_serves_a_scenario_file() {
    let dir = std::env::temp_dir().join(format!("fakellm-bin-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("scenario.json");
    std::fs::write(
        &script,
        r#"{"llm": {"turns": [{"blocks": [{"type": "text", "text": "from file"}]}]}, "steps": []}"#,
    )
    .unwrap();
    let log = dir.join("log.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fakellm"))
        .arg("--script")
        .arg(&script)
        .arg("--log")
        .arg(&log)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .strip_prefix("LISTENING ")
        .expect("LISTENING line")
        .parse()
        .unwrap();
    let body = post_blocking(port);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        body.contains("\"content\":\"from fil\"") && body.ends_with("data: [DONE]\n\n"),
        "{body}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    let first: Value = serde_json::from_str(logged.lines().next().unwrap()).unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["api"], "openai");
    let _ = std::fs::remove_dir_all(&dir);
}

/// POSTs a chat completion to the fake on `port` from a throwaway runtime; returns the body.
fn post_blocking(port: u16) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        client()
            .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
            .json(&json!({"model": "m"}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
}
