//! `pi --mode rpc` with a real GGUF model run in-process (issue 3, "Done when"): the model file
//! in the run root's `agent/models/` is listed as provider `local`, becomes the default model
//! when nothing else has credentials, streams `text_delta`s and ends with `agent_settled`; an
//! `abort` sent after the first `text_delta` settles within 2 s.
//!
//! Model file: env `PI_LOCAL_TEST_MODEL`, else `~/.pi/agent/models/*.gguf` of the user running
//! the tests (`SmolLM2-135M-Instruct.Q4_1.gguf` preferred; `scripts/fetch-default-model.sh`
//! puts it there). Without one, each test prints a notice and passes, or fails when
//! `PI_REQUIRE_TEST_RESOURCES=1`.

#![cfg(feature = "local")]

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The file `scripts/fetch-default-model.sh` installs.
const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// How long a whole answer of the small model may take (debug build, shared CPU): a liveness
/// bound, not a performance assertion.
const ANSWER_BOUND: Duration = Duration::from_secs(300);

/// Issue 3: `abort` mid-answer settles within this bound.
const ABORT_BOUND: Duration = Duration::from_secs(2);

/// The tests run one at a time: each `pi` decodes on every core, and two at once on a small
/// machine would measure CPU oversubscription rather than the abort path.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A resource the tests need is missing: with `PI_REQUIRE_TEST_RESOURCES=1` (as in `.ci/run`)
/// that is a failure; otherwise a notice on stderr and the test passes.
fn missing_resource(what: &str, how: &str) {
    if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
        panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
    }
    eprintln!("SKIP: {what}; {how}");
}

/// The model file to test with, or `None` (see [`missing_resource`]).
fn model_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PI_LOCAL_TEST_MODEL") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
        missing_resource(
            &format!("PI_LOCAL_TEST_MODEL={} is not a file", p.display()),
            "point it at a GGUF model file",
        );
        return None;
    }
    let dir = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pi/agent/models"));
    let found = dir.as_deref().and_then(|dir| {
        let preferred = dir.join(DEFAULT_FILE);
        if preferred.is_file() {
            return Some(preferred);
        }
        let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "gguf") && p.is_file())
            .collect();
        all.sort();
        all.into_iter().next()
    });
    if found.is_none() {
        missing_resource(
            "no GGUF model in ~/.pi/agent/models",
            "run scripts/fetch-default-model.sh or set PI_LOCAL_TEST_MODEL",
        );
    }
    found
}

/// A run root with no hosted provider (empty models.json and settings), and `model` linked into
/// `agent/models/`. Returns the run root and the model's id (the file stem).
fn local_root(model: &Path) -> (RunRoot, String) {
    let rr = RunRoot::new(1);
    rr.write_agent_file("models.json", &json!({"providers": {}}));
    rr.write_agent_file("settings.json", &json!({}));
    let models = rr.agent_dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let name = model.file_name().unwrap();
    let link = models.join(name);
    if std::os::unix::fs::symlink(model, &link).is_err() {
        std::fs::copy(model, &link).expect("copy the model file");
    }
    let id = Path::new(name)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (rr, id)
}

/// `pi --mode rpc --no-session` with `PI_LOCAL_THREADS` from the test's environment, else 1:
/// the abort bound is about the abort path, and on a busy small machine several decoding
/// threads that wait on each other between operations can stretch a single token to seconds.
fn spawn(rr: &RunRoot) -> RpcAgent {
    let threads = std::env::var("PI_LOCAL_THREADS").unwrap_or_else(|_| "1".into());
    rr.spawn_with_env(false, &[], &[("PI_LOCAL_THREADS", &threads)])
}

fn is_text_delta(v: &Value) -> bool {
    kind(v) == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta"
}

#[test]
fn discovered_model_is_default_and_streams_an_answer() {
    let Some(file) = model_file() else { return };
    let _serial = serial();
    let (rr, id) = local_root(&file);
    let mut agent = spawn(&rr);

    let models = agent.request(json!({"id": "m", "type": "get_available_models"}));
    assert_eq!(models["success"], true, "{models}");
    let listed = models["data"]["models"].as_array().expect("models array");
    let local = listed
        .iter()
        .find(|m| m["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not listed: {models}"));
    assert_eq!(local["provider"], "local");
    assert_eq!(local["api"], "local-gguf");
    assert_eq!(local["cost"]["input"], 0.0);

    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["provider"], "local", "{state}");
    assert_eq!(state["data"]["model"]["id"], id.as_str(), "{state}");

    let from = agent.len();
    let resp = agent.request(json!({
        "id": "p", "type": "prompt",
        "message": "Say hello in one short sentence."
    }));
    assert_eq!(resp["success"], true, "{resp}");
    let (end, settled) = agent.wait_from(from, ANSWER_BOUND, |v| kind(v) == "agent_settled");
    assert_eq!(settled, json!({"type": "agent_settled", "aborted": false}));
    let recs: Vec<Value> = agent.records()[from..=end]
        .iter()
        .filter_map(|r| r.value.clone())
        .collect();
    let deltas: String = recs
        .iter()
        .filter(|v| is_text_delta(v))
        .map(|v| v["assistantMessageEvent"]["delta"].as_str().unwrap_or(""))
        .collect();
    assert!(
        !deltas.trim().is_empty(),
        "no text streamed\n{}",
        agent.dump()
    );
    let msg = recs
        .iter()
        .rev()
        .find(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| v["message"].clone())
        .expect("assistant message_end");
    assert!(
        matches!(msg["stopReason"].as_str(), Some("stop" | "length")),
        "{msg}"
    );
    assert_eq!(msg["provider"], "local", "{msg}");
    assert_eq!(msg["content"][0]["text"].as_str(), Some(deltas.as_str()));
    assert!(msg["usage"]["input"].as_u64().unwrap_or(0) > 0, "{msg}");
    assert!(msg["usage"]["output"].as_u64().unwrap_or(0) > 0, "{msg}");
    assert_eq!(msg["usage"]["cost"]["total"], 0.0, "{msg}");
}

#[test]
fn abort_after_first_delta_settles_quickly() {
    let Some(file) = model_file() else { return };
    let _serial = serial();
    let (rr, id) = local_root(&file);
    // The same file named by path in models.json (the documented shape), as the default model.
    rr.write_agent_file(
        "models.json",
        &json!({"providers": {"my-gguf": {
            "api": "local-gguf",
            "models": [{"id": "counter", "path": file.to_string_lossy(),
                        "contextWindow": 4096, "maxTokens": 1024}]
        }}}),
    );
    rr.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "my-gguf", "defaultModel": "counter"}),
    );
    let mut agent = spawn(&rr);
    let models = agent.request(json!({"id": "m", "type": "get_available_models"}));
    let listed = models["data"]["models"].as_array().expect("models array");
    let ids: Vec<(&str, &str)> = listed
        .iter()
        .map(|m| (m["provider"].as_str().unwrap(), m["id"].as_str().unwrap()))
        .collect();
    // models.json first, then the discovered file.
    assert_eq!(ids, [("my-gguf", "counter"), ("local", id.as_str())]);
    assert_eq!(listed[0]["contextWindow"], 4096);
    assert_eq!(listed[0]["maxTokens"], 1024);

    let from = agent.len();
    let resp = agent.request(json!({
        "id": "p", "type": "prompt",
        "message": "Count from 1 to 300, one number per line."
    }));
    assert_eq!(resp["success"], true, "{resp}");
    agent.wait_from(from, ANSWER_BOUND, is_text_delta);
    let sent = Instant::now();
    agent.send(json!({"id": "a", "type": "abort"}));
    let (_, settled) = agent.wait_from(from, ANSWER_BOUND, |v| kind(v) == "agent_settled");
    let took = sent.elapsed();
    eprintln!("abort settled {took:?} after it was sent");
    assert_eq!(
        settled,
        json!({"type": "agent_settled", "aborted": true}),
        "{}",
        agent.dump()
    );
    assert!(took <= ABORT_BOUND, "abort settled after {took:?}");
    let abort = agent.wait_response("a");
    assert_eq!(abort["success"], true, "{abort}");
    let msg = agent
        .events()
        .into_iter()
        .rev()
        .find(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| v["message"].clone())
        .expect("assistant message_end");
    assert_eq!(msg["stopReason"], "aborted", "{msg}");
    assert_eq!(msg["model"], "counter", "{msg}");
}

/// Issue 3: with a tool call required (`compat.toolChoice: "required"` in models.json), a
/// prompt that asks to list files produces a grammar-constrained tool call that parses, names
/// one of the active tools, and is executed by the agent (`tool_execution_end` for its id).
/// The model's choice of tool may be wrong; the call must be well formed. Every later turn is
/// required to call a tool too, so the test aborts once the first call has run.
#[test]
fn required_tool_call_parses_and_runs() {
    let Some(file) = model_file() else { return };
    let _serial = serial();
    let (rr, _id) = local_root(&file);
    rr.write_cwd_file("notes.txt", "hello\n");
    rr.write_agent_file(
        "models.json",
        &json!({"providers": {"my-gguf": {
            "api": "local-gguf",
            "models": [{"id": "tools", "path": file.to_string_lossy(),
                        "contextWindow": 4096, "maxTokens": 256,
                        "compat": {"toolChoice": "required"}}]
        }}}),
    );
    rr.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "my-gguf", "defaultModel": "tools"}),
    );
    let threads = std::env::var("PI_LOCAL_THREADS").unwrap_or_else(|_| "1".into());
    let mut agent = rr.spawn_with_env(
        false,
        &["--tools", "ls,read"],
        &[("PI_LOCAL_THREADS", &threads)],
    );

    let from = agent.len();
    let resp = agent.request(json!({
        "id": "p", "type": "prompt",
        "message": "List the files in the current directory."
    }));
    assert_eq!(resp["success"], true, "{resp}");
    let (end_at, end) = agent.wait_from(from, ANSWER_BOUND, |v| kind(v) == "tool_execution_end");
    let recs: Vec<Value> = agent.records()[from..end_at]
        .iter()
        .filter_map(|r| r.value.clone())
        .collect();
    let assistant = recs
        .iter()
        .rev()
        .find(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| v["message"].clone())
        .unwrap_or_else(|| panic!("no assistant message before the tool ran\n{}", agent.dump()));
    assert_eq!(assistant["stopReason"], "toolUse", "{assistant}");
    let call = assistant["content"]
        .as_array()
        .and_then(|c| c.iter().find(|b| b["type"] == "toolCall"))
        .unwrap_or_else(|| panic!("no toolCall block: {assistant}"))
        .clone();
    let name = call["name"].as_str().unwrap_or_default();
    assert!(
        ["ls", "read"].contains(&name),
        "unknown tool {name}: {call}"
    );
    assert!(
        call["arguments"].is_object(),
        "arguments not an object: {call}"
    );
    assert_eq!(end["toolCallId"], call["id"], "{end}");
    assert_eq!(end["toolName"], name, "{end}");
    assert!(end["result"]["content"].is_array(), "{end}");

    let a = agent.request(json!({"id": "a", "type": "abort"}));
    assert_eq!(a["success"], true, "{a}");
}
