//! Nothing lost, nothing left behind (issue 7), through the real `pi` binary: every byte of a
//! fast RPC `bash` reaches the full-output file and the deltas, in order, before the response;
//! commands take effect in arrival order (`abort_bash` after `bash`, `prompt` after `abort` in
//! one read); `tool_execution_start` is on stdout before the tool runs; surrogate escapes in
//! provider streams are joined or replaced, never dropped; bad prompts are refused with
//! upstream's texts; print and json modes exit non-zero when nothing was answered.

use crate::common::*;
use pi_fakellm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn index_of(recs: &[Value], pred: impl Fn(&Value) -> bool) -> Option<usize> {
    recs.iter().position(pred)
}

fn is_response(v: &Value, id: &str) -> bool {
    v["type"] == "response" && v["id"] == id
}

#[test]
fn rpc_bash_delivers_every_byte_in_order_before_its_response() {
    let (_fake, root) = setup(Script::new(vec![]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    // ~6.9 MB, far more than the pipe and the read-ahead: the reader has to keep up or wait.
    let n = 1_000_000;
    agent.send(json!({"id": "b", "type": "bash", "command": format!("seq 1 {n}")}));
    let (_, resp) = agent.wait_from(0, Duration::from_secs(120), |v| is_response(v, "b"));
    let expected: String = (1..=n).map(|i| format!("{i}\n")).collect();
    assert_eq!(resp["success"], true, "{resp}");
    assert_eq!(resp["data"]["exitCode"], 0);
    assert_eq!(resp["data"]["truncated"], true);
    let path = resp["data"]["fullOutputPath"].as_str().unwrap().to_string();
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(
        file == expected,
        "full-output file has {} of {} bytes; last line {:?}",
        file.len(),
        expected.len(),
        file.lines().last()
    );
    let recs = agent.events();
    let resp_at = index_of(&recs, |v| is_response(v, "b")).unwrap();
    let last_delta = recs
        .iter()
        .rposition(|v| v["type"] == "bash_execution_update")
        .unwrap();
    assert!(last_delta < resp_at, "a delta came after the response");
    let deltas: String = recs
        .iter()
        .filter(|v| v["type"] == "bash_execution_update")
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    assert!(
        deltas == expected,
        "deltas hold {} of {} bytes",
        deltas.len(),
        expected.len()
    );
    assert!(resp["data"]["output"]
        .as_str()
        .unwrap()
        .ends_with(&format!("\n{n}")));
    std::fs::remove_file(path).ok();
}

#[test]
fn abort_bash_in_the_same_read_cancels_the_bash_before_it() {
    let (_fake, root) = setup(Script::new(vec![]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    for i in 0..5 {
        let bash = json!({"id": format!("b{i}"), "type": "bash", "command": "sleep 600"});
        let abort = json!({"id": format!("a{i}"), "type": "abort_bash"});
        agent.send_raw(format!("{bash}\n{abort}\n").as_bytes());
        let id = format!("b{i}");
        let (_, resp) = agent.wait_from(0, Duration::from_secs(10), |v| is_response(v, &id));
        assert_eq!(resp["data"]["cancelled"], true, "round {i}: {resp}");
    }
}

#[test]
fn prompt_right_after_abort_in_the_same_read_starts_after_the_abort() {
    let script = Script::new(vec![
        Turn::text("a long answer that never ends").stall_after(2, 60_000),
        Turn::text("second answer"),
    ]);
    let (fake, root) = setup(script, DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "first"}));
    agent.wait_event("message_update");
    let abort = json!({"id": "a", "type": "abort"});
    let prompt = json!({"id": "p2", "type": "prompt", "message": "second"});
    agent.send_raw(format!("{abort}\n{prompt}\n").as_bytes());
    let resp = agent.wait_response("p2");
    assert_eq!(resp["success"], true, "{resp}");
    assert_eq!(resp["data"]["disposition"], "started");
    let recs = agent.events();
    let abort_at = index_of(&recs, |v| is_response(v, "a")).unwrap();
    let p2_at = index_of(&recs, |v| is_response(v, "p2")).unwrap();
    assert!(abort_at < p2_at, "the prompt was answered before the abort");
    agent.wait_from(p2_at, LIVENESS, |v| v["type"] == "agent_settled");
    assert_eq!(fake.llm_requests().len(), 2);
}

#[test]
fn tool_execution_start_is_on_stdout_before_the_tool_runs() {
    // The edit is announced after a large text, so stdout's pipe is full when the tool call
    // comes. While nobody reads stdout, the announcement cannot be written, so the edit must
    // not have happened yet.
    let big = "filler text ".repeat(20_000);
    let script = Script::new(vec![
        Turn::text(big).chunk_size(60_000).with_tool_call(
            "edit",
            json!({"path": "a.txt", "edits": [{"oldText": "old", "newText": "new"}]}),
        ),
        Turn::text("done"),
    ]);
    let (_fake, root) = setup(script, DEFAULT_MODEL);
    root.write_cwd_file("a.txt", "old\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(["--mode", "rpc", "--no-session"])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"id": "p", "type": "prompt", "message": "edit it"})
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let before = std::fs::read_to_string(root.cwd.join("a.txt")).unwrap();
    // Now read everything (the tool runs once its announcement is out).
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut seen_start = None;
    let deadline = Instant::now() + LIVENESS;
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "tool_execution_start" {
            seen_start = Some(v["toolName"].clone());
        }
        if v["type"] == "agent_settled" {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    assert_eq!(
        before, "old\n",
        "the edit ran while its tool_execution_start was unwritten"
    );
    assert_eq!(seen_start, Some(json!("edit")));
    assert_eq!(
        std::fs::read_to_string(root.cwd.join("a.txt")).unwrap(),
        "new\n"
    );
}

#[test]
fn prompt_without_a_string_message_is_refused_as_upstream_refuses_it() {
    let (fake, root) = setup(Script::new(vec![]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let undefined = "Cannot read properties of undefined (reading 'startsWith')";
    let null = "Cannot read properties of null (reading 'startsWith')";
    let not_a_function = "text.startsWith is not a function";
    let cases = [
        (json!({"id": "1", "type": "prompt"}), undefined),
        (json!({"id": "2", "type": "prompt", "message": null}), null),
        (
            json!({"id": "3", "type": "prompt", "message": 5}),
            not_a_function,
        ),
        (
            json!({"id": "4", "type": "prompt", "message": {"a": 1}}),
            not_a_function,
        ),
        (
            json!({"id": "5", "type": "prompt", "message": []}),
            not_a_function,
        ),
        (json!({"id": "6", "type": "steer"}), undefined),
        (
            json!({"id": "7", "type": "follow_up", "message": 5}),
            not_a_function,
        ),
    ];
    for (cmd, error) in cases {
        let resp = agent.request(cmd.clone());
        assert_eq!(resp["success"], false, "{cmd}: {resp}");
        assert_eq!(resp["error"], error, "{cmd}");
    }
    assert!(
        fake.llm_requests().is_empty(),
        "a refused prompt reached the provider"
    );
}

/// An OpenAI chunk with one `content` delta given as raw JSON string text (escapes kept).
fn openai_chunk(raw_content: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{raw_content}\"}}}}]}}\n\n"
    )
}

const SPLIT: [&str; 3] = ["start ", "pair:\\ud83d", "\\ude00 lone:\\udc00 end"];
const JOINED: &str = "start pair:\u{1F600} lone:\u{FFFD} end";

fn final_assistant(agent: &RpcAgent) -> Value {
    let end = agent.wait_event("agent_end");
    end["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .unwrap()
}

#[test]
fn surrogate_pairs_split_across_openai_chunks_are_joined() {
    let mut sse: Vec<String> = SPLIT.iter().map(|c| openai_chunk(c)).collect();
    sse.push("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".into());
    sse.push("data: [DONE]\n\n".into());
    let mut turn = Turn::text("unused");
    turn.raw_sse = Some(sse);
    let (_fake, root) = setup(Script::new(vec![turn]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    let msg = final_assistant(&agent);
    assert_eq!(msg["stopReason"], "stop", "{msg}");
    assert_eq!(msg["content"][0]["text"], JOINED, "{msg}");
    let deltas: String = agent
        .events()
        .iter()
        .filter(|v| v["assistantMessageEvent"]["type"] == "text_delta")
        .map(|v| {
            v["assistantMessageEvent"]["delta"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(deltas, JOINED);
}

#[test]
fn an_openai_chunk_that_is_not_json_is_an_error_the_client_sees() {
    let sse = vec![
        openai_chunk("kept "),
        "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"brok\n\n".to_string(),
        openai_chunk("after"),
        "data: [DONE]\n\n".to_string(),
    ];
    let mut turn = Turn::text("unused");
    turn.raw_sse = Some(sse);
    let (_fake, root) = setup(Script::new(vec![turn]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    let msg = final_assistant(&agent);
    assert_eq!(msg["stopReason"], "error", "{msg}");
    assert!(
        msg["errorMessage"]
            .as_str()
            .unwrap()
            .contains("Could not parse"),
        "{msg}"
    );
    assert_eq!(msg["content"][0]["text"], "kept ");
}

#[test]
fn surrogate_pairs_split_across_anthropic_deltas_are_joined() {
    let ev = |name: &str, data: String| format!("event: {name}\ndata: {data}\n\n");
    let mut sse = vec![
        ev("message_start", r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"fake-claude","stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}"#.into()),
        ev("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.into()),
    ];
    for part in SPLIT {
        sse.push(ev(
            "content_block_delta",
            format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{part}"}}}}"#),
        ));
    }
    sse.push(ev(
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#.into(),
    ));
    sse.push(ev("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#.into()));
    sse.push(ev("message_stop", r#"{"type":"message_stop"}"#.into()));
    let mut turn = Turn::text("unused");
    turn.raw_sse = Some(sse);
    let (_fake, root) = setup(Script::new(vec![turn]), "fake-anthropic/fake-claude-haiku");
    let mut agent = root.spawn();
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    let msg = final_assistant(&agent);
    assert_eq!(msg["stopReason"], "stop", "{msg}");
    assert_eq!(msg["content"][0]["text"], JOINED, "{msg}");
}

/// `pi <args>` in print/json mode with stdin closed: (exit code, stderr).
fn one_shot(root: &RunRoot, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn print_without_a_message_exits_non_zero_with_a_message() {
    let fake = FakeLlm::spawn(Script::new(vec![])).unwrap();
    let root = RunRoot::new(fake.port());
    let (code, stderr) = one_shot(&root, &["-p", "--no-session"]);
    assert_ne!(code, Some(0), "stderr: {stderr}");
    assert!(!stderr.trim().is_empty());
}

#[test]
fn json_mode_after_an_http_500_exits_non_zero_with_the_error() {
    let fake = FakeLlm::spawn(Script::new(vec![Turn::error(500)])).unwrap();
    let root = RunRoot::new(fake.port());
    root.merge_settings(json!({"retry": {"enabled": false}}));
    let (code, stderr) = one_shot(&root, &["--mode", "json", "-p", "--no-session", "hello"]);
    assert_ne!(code, Some(0), "stderr: {stderr}");
    assert!(!stderr.trim().is_empty());
}
