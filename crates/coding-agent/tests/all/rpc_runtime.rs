//! The session runtime over RPC, with the real binary and session files: state commands that
//! upstream 1.6 answers from the store (`get_entries`, `get_tree`, `get_fork_messages`,
//! `set_session_name`, `clear_queue`), settings that are persisted (queue modes, toggles),
//! `thinking_level_changed`, and the commands that replace the session (`clone`, `fork`,
//! `new_session`, `switch_session`). Every stdout line is decoded into the protocol types by
//! the common harness.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};

fn entries(agent: &mut RpcAgent, id: &str, since: Option<Value>) -> Value {
    let mut cmd = json!({"id": id, "type": "get_entries"});
    if let Some(s) = since {
        cmd["since"] = s;
    }
    agent.request(cmd)
}

fn state(agent: &mut RpcAgent, id: &str) -> Value {
    agent.request(json!({"id": id, "type": "get_state"}))["data"].clone()
}

#[test]
fn entries_cursor_tree_and_session_name() {
    let (_fake, root) = setup(Script::new([Turn::text("One.")]), DEFAULT_MODEL);
    let mut agent = root.spawn_with_session();
    let e0 = entries(&mut agent, "e0", None);
    let fresh = e0["data"]["entries"].as_array().unwrap().clone();
    let kinds: Vec<&str> = fresh.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_change", "thinking_level_change"], "{e0}");
    assert_eq!(e0["data"]["leafId"], fresh[1]["id"]);

    agent.send(json!({"id": "p1", "type": "prompt", "message": "Q"}));
    agent.wait_event("agent_settled");
    let all = entries(&mut agent, "e1", None)["data"]["entries"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(all.len(), 5, "system, user and assistant follow");
    let after = entries(&mut agent, "e2", Some(all[2]["id"].clone()));
    assert_eq!(after["data"]["entries"].as_array().unwrap().len(), 2);
    let leaf = all[4]["id"].clone();
    let none = entries(&mut agent, "e3", Some(leaf.clone()));
    assert_eq!(none["data"]["entries"], json!([]));
    for (id, since, text) in [
        ("e4", json!("deadbeef"), "Entry not found: deadbeef"),
        ("e5", json!(""), "Entry not found: "),
        ("e6", Value::Null, "Entry not found: null"),
    ] {
        let r = entries(&mut agent, id, Some(since));
        assert_eq!(r["success"], false);
        assert_eq!(r["error"], text);
    }

    let tree = agent.request(json!({"id": "t1", "type": "get_tree"}));
    assert_eq!(tree["data"]["leafId"], leaf);
    let roots = tree["data"]["tree"].as_array().unwrap();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0]["entry"]["type"], "model_change");

    let empty = agent.request(json!({"id": "n0", "type": "set_session_name", "name": "  "}));
    assert_eq!(empty["error"], "Session name cannot be empty");
    let from = agent.len();
    let named = agent.request(json!({"id": "n1", "type": "set_session_name", "name": "Mine"}));
    assert_eq!(named["success"], true);
    let (i, ev) = agent.wait_from(from, LIVENESS, |v| kind(v) == "session_info_changed");
    assert_eq!(ev["name"], "Mine");
    let (j, _) = agent.wait_from(from, LIVENESS, |v| v["id"] == "n1");
    assert!(i < j, "the event precedes the response");
    assert_eq!(state(&mut agent, "s1")["sessionName"], "Mine");
    let info = entries(&mut agent, "e7", Some(leaf));
    assert_eq!(info["data"]["entries"][0]["type"], "session_info");

    let forks = agent.request(json!({"id": "f0", "type": "get_fork_messages"}));
    assert_eq!(forks["data"]["messages"][0]["text"], "Q");
    assert_eq!(forks["data"]["messages"][0]["entryId"], all[3]["id"]);
}

#[test]
fn queue_modes_and_toggles_are_stored_as_sent_and_persisted() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    for (id, kind_, mode) in [
        ("q1", "set_steering_mode", "all"),
        ("q2", "set_follow_up_mode", "all"),
        ("q3", "set_steering_mode", "bogus"),
    ] {
        let r = agent.request(json!({"id": id, "type": kind_, "mode": mode}));
        assert_eq!(r["success"], true, "{r}");
    }
    agent.request(json!({"id": "a1", "type": "set_auto_compaction", "enabled": false}));
    agent.request(json!({"id": "a2", "type": "set_auto_retry", "enabled": false}));
    let st = state(&mut agent, "s1");
    assert_eq!(st["steeringMode"], "bogus");
    assert_eq!(st["followUpMode"], "all");
    assert_eq!(st["autoCompactionEnabled"], false);
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(root.agent_dir.join("settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["steeringMode"], "bogus");
    assert_eq!(settings["followUpMode"], "all");
    assert_eq!(settings["compaction"]["enabled"], false);
    assert_eq!(settings["retry"]["enabled"], false);
    assert_eq!(settings["defaultModel"], "fake-gpt-mini", "other keys kept");
}

#[test]
fn thinking_level_changes_are_events_before_the_response() {
    let (_fake, root) = setup(Script::new([]), "fake-openai/fake-gpt");
    let mut agent = root.spawn();
    let from = agent.len();
    agent.request(json!({"id": "t1", "type": "set_thinking_level", "level": "high"}));
    let (i, ev) = agent.wait_from(from, LIVENESS, |v| kind(v) == "thinking_level_changed");
    assert_eq!(ev["level"], "high");
    let (j, _) = agent.wait_from(from, LIVENESS, |v| v["id"] == "t1");
    assert!(i < j);
    // The same level again: no event.
    let from = agent.len();
    agent.request(json!({"id": "t2", "type": "set_thinking_level", "level": "high"}));
    agent.request(json!({"id": "s", "type": "get_state"}));
    assert!(!agent.events()[from..]
        .iter()
        .any(|v| kind(v) == "thinking_level_changed"));
    // A non-reasoning model clamps to off, with an event.
    let from = agent.len();
    agent.request(json!({"id": "m", "type": "set_model", "provider": "fake-openai", "modelId": "fake-gpt-mini"}));
    let (_, ev) = agent.wait_from(from, LIVENESS, |v| kind(v) == "thinking_level_changed");
    assert_eq!(ev["level"], "off");
}

#[test]
fn clear_queue_returns_and_announces_the_removed_texts() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.request(json!({"id": "s", "type": "steer", "message": "later"}));
    agent.request(json!({"id": "f", "type": "follow_up", "message": "after"}));
    assert_eq!(state(&mut agent, "g")["pendingMessageCount"], 2);
    let from = agent.len();
    let r = agent.request(json!({"id": "c", "type": "clear_queue"}));
    assert_eq!(
        r["data"],
        json!({"steering": ["later"], "followUp": ["after"]})
    );
    let (_, ev) = agent.wait_from(from, LIVENESS, |v| kind(v) == "queue_update");
    assert_eq!(ev["steering"], json!([]));
    assert_eq!(state(&mut agent, "g2")["pendingMessageCount"], 0);
}

#[test]
fn clone_fork_new_and_switch_replace_the_session() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("A1."),
            Turn::text("A2."),
            Turn::text("On the fork."),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with_session();
    let early = agent.request(json!({"id": "c0", "type": "clone"}));
    assert_eq!(
        early["error"],
        "This session has not been saved yet. Send a message before cloning or forking it."
    );
    agent.send(json!({"id": "p1", "type": "prompt", "message": "Q1"}));
    agent.wait_event("agent_settled");
    agent.send(json!({"id": "p2", "type": "prompt", "message": "Q2"}));
    agent.wait_event("agent_settled");
    let original = state(&mut agent, "s0");
    let original_file = original["sessionFile"].as_str().unwrap().to_string();

    let c = agent.request(json!({"id": "c1", "type": "clone"}));
    assert_eq!(c["data"], json!({"cancelled": false}), "{c}");
    let cloned = state(&mut agent, "s1");
    assert_ne!(cloned["sessionId"], original["sessionId"]);
    assert_eq!(cloned["messageCount"], original["messageCount"]);

    let forks = agent.request(json!({"id": "g", "type": "get_fork_messages"}));
    let second = forks["data"]["messages"][1]["entryId"].clone();
    let f = agent.request(json!({"id": "f1", "type": "fork", "entryId": second}));
    assert_eq!(f["data"], json!({"text": "Q2", "cancelled": false}), "{f}");
    let forked = state(&mut agent, "s2");
    assert_eq!(forked["messageCount"], 3, "system, Q1, A1");
    let bad = agent.request(json!({"id": "f2", "type": "fork", "entryId": "nope"}));
    assert_eq!(bad["error"], "Invalid entry ID for forking");
    agent.send(json!({"id": "p3", "type": "prompt", "message": "Q2 again"}));
    agent.wait_event("agent_settled");

    let n = agent.request(json!({"id": "n1", "type": "new_session"}));
    assert_eq!(n["data"], json!({"cancelled": false}));
    let fresh = state(&mut agent, "s3");
    assert_eq!(fresh["messageCount"], 0);
    let e = agent.request(json!({"id": "e", "type": "get_entries"}));
    assert_eq!(e["data"]["entries"].as_array().unwrap().len(), 2);

    let sw =
        agent.request(json!({"id": "w1", "type": "switch_session", "sessionPath": original_file}));
    assert_eq!(sw["data"], json!({"cancelled": false}));
    let back = state(&mut agent, "s4");
    assert_eq!(back["sessionId"], original["sessionId"]);
    assert_eq!(back["messageCount"], original["messageCount"]);
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    let texts: Vec<String> = msgs["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, ["Q1", "Q2"], "the original is unchanged");

    agent.close_stdin();
    assert_eq!(agent.wait_exit(LIVENESS).and_then(|s| s.code()), Some(0));
    // Original, clone and fork were written; the fresh session had no assistant message.
    assert_eq!(root.session_files().len(), 3, "{:?}", root.session_files());
    for f in root.session_files() {
        check_session_file(&f).unwrap();
    }
}

#[test]
fn queue_update_comes_right_before_the_delivered_message() {
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "sleep 1; echo slow done"})),
            Turn::text("Handled steer."),
            Turn::text("Handled follow."),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "Go"}));
    agent.wait_event("tool_execution_start");
    agent.request(json!({"id": "s1", "type": "steer", "message": "Steer one"}));
    agent.request(json!({"id": "f1", "type": "follow_up", "message": "Follow one"}));
    let (end, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_settled");
    let recs = agent.events()[..=end].to_vec();
    let labels: Vec<String> = recs
        .iter()
        .filter(|v| !matches!(kind(v), "message_update" | "tool_execution_update"))
        .map(|v| match kind(v) {
            "queue_update" => format!("queue {} {}", v["steering"], v["followUp"]),
            "message_start" => format!("start {}", v["message"]["role"].as_str().unwrap()),
            k => k.to_string(),
        })
        .collect();
    let at = |label: &str| {
        labels
            .iter()
            .position(|l| l == label)
            .unwrap_or_else(|| panic!("{label} not in {labels:#?}"))
    };
    let steer_delivery = at(r#"queue [] ["Follow one"]"#);
    assert_eq!(labels[steer_delivery - 1], "turn_start", "{labels:#?}");
    assert_eq!(labels[steer_delivery + 1], "start user", "{labels:#?}");
    let follow_delivery = at("queue [] []");
    assert_eq!(labels[follow_delivery - 1], "turn_start", "{labels:#?}");
    assert_eq!(labels[follow_delivery + 1], "start user", "{labels:#?}");
    assert!(steer_delivery < follow_delivery);
}

#[test]
fn odd_fields_get_answers_not_empty_prompts() {
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "sleep 1"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    for (id, cmd) in [
        ("m1", json!({"id": "m1", "type": "prompt", "message": 5})),
        ("m2", json!({"id": "m2", "type": "prompt"})),
        ("m3", json!({"id": "m3", "type": "steer", "message": null})),
        ("m4", json!({"id": "m4", "type": "follow_up"})),
    ] {
        let r = agent.request(cmd);
        assert_eq!(r["success"], false, "{id}: {r}");
    }
    assert_eq!(fake.requests().len(), 0, "nothing reached the model");
    assert_eq!(state(&mut agent, "g")["pendingMessageCount"], 0);

    // A mode is stored as sent, a number included.
    agent.request(json!({"id": "q", "type": "set_steering_mode", "mode": 5}));
    assert_eq!(state(&mut agent, "g2")["steeringMode"], 5);

    // An unknown streamingBehavior during a run queues the message as steering.
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("tool_execution_start");
    let q = agent.request(
        json!({"id": "p2", "type": "prompt", "message": "more", "streamingBehavior": "bogus"}),
    );
    assert_eq!(q["data"]["disposition"], "queued", "{q}");
    agent.wait_event("agent_settled");
}

#[test]
fn rpc_bash_with_binary_output_is_answered() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let r = agent.request(json!({"id": "b1", "type": "bash", "command": "printf '\\033\\377abc'"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["output"], "\u{FFFD}abc");
    let r = agent.request(json!({"id": "b2", "type": "bash",
        "command": "python3 -c \"import sys,random; random.seed(1); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(20000)))\""}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["exitCode"], 0);
}

fn deep(n: usize) -> Value {
    let text = format!("{}1{}", "[".repeat(n), "]".repeat(n));
    pi_ai::json::parse_str(&text).unwrap()
}

#[test]
fn deeply_nested_json_is_read_like_upstream() {
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call(
                "bash",
                json!({"command": "echo deep-ok", "deep": deep(200)}),
            ),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with_session();
    // An RPC command with a deep field is answered under its id.
    let mut cmd = json!({"id": "d200", "type": "get_state"});
    cmd["x"] = deep(200);
    assert_eq!(agent.request(cmd)["success"], true);
    // Deep tool-call arguments reach the tool intact.
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (_, end) = agent.wait_from(0, LIVENESS, |v| kind(v) == "tool_execution_end");
    assert_eq!(end["isError"], false, "{end}");
    assert!(end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("deep-ok"));
    agent.wait_event("agent_settled");
    // The session file with that entry reloads whole.
    let file = state(&mut agent, "s")["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    agent.request(json!({"id": "n", "type": "new_session"}));
    let sw = agent.request(json!({"id": "w", "type": "switch_session", "sessionPath": file}));
    assert_eq!(sw["success"], true, "{sw}");
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    let roles: Vec<&str> = msgs["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "toolResult", "assistant"]
    );
    // Past the limit the line is refused with a parse error, and the agent keeps serving.
    let n = pi_ai::json::MAX_DEPTH + 2;
    let line = format!(
        "{{\"id\":\"d\",\"type\":\"get_state\",\"x\":{}1{}}}",
        "[".repeat(n),
        "]".repeat(n)
    );
    let from = agent.len();
    agent.send_raw(format!("{line}\n").as_bytes());
    let (_, r) = agent.wait_from(from, LIVENESS, |v| kind(v) == "response");
    assert_eq!(r["command"], "parse", "{r}");
    assert_eq!(
        agent.request(json!({"id": "after", "type": "get_state"}))["success"],
        true
    );
}

#[test]
fn lone_surrogate_escapes_are_read_as_replacement_characters() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let from = agent.len();
    agent.send_raw(b"{\"id\":\"\\ud800\",\"type\":\"get_state\"}\n");
    let (_, r) = agent.wait_from(from, LIVENESS, |v| kind(v) == "response");
    assert_eq!(r["id"], "\u{FFFD}", "{r}");
    assert_eq!(r["success"], true);
}

#[test]
fn switching_to_a_session_without_a_level_records_one() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let file = root.cwd.join("hand-written.jsonl");
    let header = json!({"type": "session", "version": 3, "id": "01a228e2-0000-7000-8000-000000000001",
        "timestamp": "2026-12-01T00:00:00.000Z", "cwd": root.cwd});
    let user = json!({"type": "message", "id": "aaaa0001", "parentId": null,
        "timestamp": "2026-12-01T00:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}});
    std::fs::write(&file, format!("{header}\n{user}\n")).unwrap();
    let mut agent = root.spawn();
    let sw = agent.request(json!({"id": "w", "type": "switch_session", "sessionPath": file}));
    assert_eq!(sw["success"], true, "{sw}");
    let e = entries(&mut agent, "e", None);
    let kinds: Vec<&str> = e["data"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["message", "thinking_level_change"]);
    let on_disk = std::fs::read_to_string(&file).unwrap();
    assert_eq!(on_disk.lines().count(), 3, "{on_disk}");
}
