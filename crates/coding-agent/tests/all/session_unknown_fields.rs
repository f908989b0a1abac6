//! Unknown fields survive load and rewrite, as upstream keeps them: on the header, on session
//! entries, on messages and on content blocks (spec sessions.md §2–§3, messages-and-models.md
//! §2–§4). Known keys keep their wire order; unknown keys follow them.
//!
//! The base is a real upstream 1.6 session file (fixtures/upstream_auto_compaction_threshold.jsonl,
//! copied from the conformance recordings), extended with lines in upstream's shapes for the
//! block and message kinds that recording lacks (thinking, tool call, tool result with an
//! image, bash execution, a custom-role message); then every object level gets extra fields.

use crate::common::*;
use pi_coding_agent::session::{EntryKind, SessionManager};
use serde_json::{json, Map, Value};
use std::path::Path;

const UPSTREAM: &str = include_str!("../fixtures/upstream_auto_compaction_threshold.jsonl");

/// Upstream-shaped lines chained after the recording's last entry (`0ca4f66d`).
fn extra_lines() -> Vec<Value> {
    let usage = json!({"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
        "cost": {"input": 0.00001, "output": 0.0000075, "cacheRead": 0, "cacheWrite": 0,
                 "total": 0.0000175, "totalFromProvider": false}});
    vec![
        json!({"type": "message", "id": "a1000001", "parentId": "0ca4f66d",
            "timestamp": "2026-11-29T19:56:56.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}],
                "timestamp": 1795982216000_i64}}),
        json!({"type": "message", "id": "a1000002", "parentId": "a1000001",
            "timestamp": "2026-11-29T19:56:56.100Z",
            "message": {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
                {"type": "text", "text": "Running it.", "textSignature": "ts"},
                {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls"}}],
                "api": "openai-completions", "provider": "fake-openai", "model": "fake-gpt-mini",
                "usage": usage, "stopReason": "toolUse", "timestamp": 1795982216050_i64,
                "responseId": "resp_1", "durationMs": 42}}),
        json!({"type": "message", "id": "a1000003", "parentId": "a1000002",
            "timestamp": "2026-11-29T19:56:56.200Z",
            "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "bash",
                "content": [{"type": "text", "text": "a.txt\n"},
                    {"type": "image", "data": "R0lGOD==", "mimeType": "image/gif"}],
                "details": {"exitCode": 0}, "isError": false, "durationMs": 7,
                "timestamp": 1795982216150_i64}}),
        json!({"type": "message", "id": "a1000004", "parentId": "a1000003",
            "timestamp": "2026-11-29T19:56:56.300Z",
            "message": {"role": "bashExecution", "command": "echo hi", "output": "hi\n",
                "exitCode": 0, "cancelled": false, "truncated": false,
                "timestamp": 1795982216250_i64}}),
        json!({"type": "message", "id": "a1000005", "parentId": "a1000004",
            "timestamp": "2026-11-29T19:56:56.400Z",
            "message": {"role": "custom", "customType": "note",
                "content": [{"type": "text", "text": "from an extension"}],
                "display": true, "timestamp": 1795982216350_i64}}),
        json!({"type": "session_info", "id": "a1000006", "parentId": "a1000005",
            "timestamp": "2026-11-29T19:56:56.500Z", "name": "unknown fields"}),
    ]
}

/// Appends `key: value` at the end of an object.
fn put(v: &mut Value, key: &str, value: Value) {
    if let Some(o) = v.as_object_mut() {
        o.insert(key.to_string(), value);
    }
}

/// Adds unknown fields at every level: header, entry, message, each content block (message
/// `content` arrays) and the compaction `usage`-free payload level (the entry itself).
fn with_unknown_fields(mut line: Value) -> Value {
    if line["type"] == "session" {
        put(&mut line, "futureHeaderField", json!({"h": 1}));
        return line;
    }
    put(&mut line, "futureField", json!({"x": 1}));
    if let Some(m) = line.get_mut("message") {
        if let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) {
            for (i, b) in blocks.iter_mut().enumerate() {
                put(
                    b,
                    "futureBlockField",
                    json!({"index": i, "tags": ["a", null]}),
                );
            }
        }
        put(m, "futureMessageField", json!([1, "two", {"three": 3.5}]));
        put(m, "zzLast", Value::Null);
    }
    line
}

/// The upstream recording plus [`extra_lines`], each with unknown fields, as parsed values.
fn augmented() -> Vec<Value> {
    UPSTREAM
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("fixture line is JSON"))
        .chain(extra_lines())
        .map(with_unknown_fields)
        .collect()
}

fn write_lines(path: &Path, lines: &[Value]) {
    let mut text = String::new();
    for l in lines {
        text.push_str(&serde_json::to_string(l).unwrap());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("complete JSON line"))
        .collect()
}

/// Equal as JSON values *and* with the same key order at every level (the compact
/// serializations of the two values match).
fn assert_same(ours: &Value, orig: &Value, what: &str) {
    assert_eq!(ours, orig, "{what}");
    assert_eq!(
        serde_json::to_string(ours).unwrap(),
        serde_json::to_string(orig).unwrap(),
        "{what}: key order"
    );
}

fn assert_all_same(ours: &[Value], orig: &[Value], what: &str) {
    assert_eq!(ours.len(), orig.len(), "{what}: line count");
    for (i, (o, g)) in ours.iter().zip(orig).enumerate() {
        assert_same(o, g, &format!("{what}: line {}", i + 1));
    }
}

/// The fixture must really exercise every level, and parse into the modelled types (not the
/// verbatim fallbacks for unknown entry types / roles).
#[test]
fn fixture_covers_every_level() {
    let lines = augmented();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    for needle in [
        "\"type\":\"thinking\"",
        "\"type\":\"toolCall\"",
        "\"type\":\"image\"",
        "\"role\":\"toolResult\"",
        "\"role\":\"bashExecution\"",
        "\"role\":\"system\"",
        "\"type\":\"compaction\"",
        "futureBlockField",
        "futureMessageField",
        "futureHeaderField",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    write_lines(&file, &lines);
    let sm = SessionManager::open(&file).unwrap();
    assert_eq!(sm.entries().len(), lines.len() - 1);
    for e in sm.entries() {
        assert!(
            !matches!(e.kind, EntryKind::Unknown { .. }),
            "{} parsed as an unknown entry",
            e.id
        );
        if let Some(m) = e.message() {
            let fell_back = matches!(
                m,
                pi_ai::Message::Other(_) if m.role() != "custom"
            );
            assert!(!fell_back, "{} fell back to a raw message", e.id);
        }
    }
}

/// Loading keeps everything: each entry serializes back to its line, extras included, known
/// keys in wire order and extras after them.
#[test]
fn load_keeps_unknown_fields() {
    let lines = augmented();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    write_lines(&file, &lines);
    let sm = SessionManager::open(&file).unwrap();
    let mut ours = vec![sm.header().to_value()];
    ours.extend(sm.entries().iter().map(|e| e.to_value()));
    assert_all_same(&ours, &lines, "loaded");
    // Through the typed message too (what get_messages and events serialize).
    let e = sm.entry("a1000002").unwrap();
    let v = serde_json::to_value(e.message().unwrap()).unwrap();
    assert_same(&v, &lines[lines.len() - 5]["message"], "assistant message");
}

/// Appending to the file leaves the existing lines byte-for-byte alone.
#[test]
fn append_leaves_existing_lines_alone() {
    let lines = augmented();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    write_lines(&file, &lines);
    let before = std::fs::read_to_string(&file).unwrap();
    let mut sm = SessionManager::open(&file).unwrap();
    sm.append_session_info("renamed").unwrap();
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.starts_with(&before), "existing lines were changed");
    let reread = read_lines(&file);
    assert_all_same(&reread[..lines.len()], &lines, "appended file");
    assert_eq!(reread.len(), lines.len() + 1);
    // And the reopened file still holds every extra.
    let sm = SessionManager::open(&file).unwrap();
    let mut ours = vec![sm.header().to_value()];
    ours.extend(sm.entries().iter().map(|e| e.to_value()));
    assert_all_same(&ours[..lines.len()], &lines, "reopened");
}

/// A migration rewrites every line from the parsed entries (here a v2 header): all lines come
/// back equal, extras included, only the header's version is bumped.
#[test]
fn migration_rewrite_keeps_unknown_fields() {
    let mut lines = augmented();
    lines[0]["version"] = json!(2);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    write_lines(&file, &lines);
    let sm = SessionManager::open(&file).unwrap();
    drop(sm);
    lines[0]["version"] = json!(3);
    assert_all_same(&read_lines(&file), &lines, "rewritten");
}

/// A branched session (RPC `clone`/`fork`) re-serializes the kept path into a new file: the
/// entries keep their extras there too.
#[test]
fn branched_session_keeps_unknown_fields() {
    let lines = augmented();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    write_lines(&file, &lines);
    let mut sm = SessionManager::open(&file).unwrap();
    let leaf = sm.leaf_id().unwrap().to_string();
    let new_file = sm.create_branched_session(&leaf).unwrap().expect("a file");
    let copied = read_lines(&new_file);
    assert_ne!(copied[0]["id"], lines[0]["id"]);
    // The recording is one linear path without labels, so entries are copied unchanged.
    assert_all_same(&copied[1..], &lines[1..], "branched");
}

fn obj(v: &Value) -> &Map<String, Value> {
    v.as_object().expect("object")
}

/// Over RPC: a session opened with `--session` reports messages with their unknown fields
/// (`get_messages`), and they are still in the file after the agent appended to it.
#[test]
fn rpc_get_messages_and_appends_keep_unknown_fields() {
    let (_fake, root) = setup(
        pi_fakellm::Script::new([pi_fakellm::Turn::text("ok")]),
        DEFAULT_MODEL,
    );
    let mut lines = augmented();
    // A resumed session runs in its recorded cwd, which must exist (issue 8).
    lines[0]["cwd"] = root.cwd.to_string_lossy().into_owned().into();
    let file = root.path().join("s.jsonl");
    write_lines(&file, &lines);
    let file_arg = file.to_string_lossy().into_owned();
    let mut agent = root.spawn_with(true, &["--session", &file_arg]);
    let r = agent.request(json!({"id": "m", "type": "get_messages"}));
    assert_eq!(r["success"], true, "{r}");
    let messages = r["data"]["messages"].as_array().unwrap().clone();
    let expected: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l.get("message"))
        .filter(|m| m["role"] == "assistant" || m["role"] == "toolResult")
        .collect();
    let got: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant" || m["role"] == "toolResult")
        .collect();
    assert!(!expected.is_empty());
    // The last ones in the context are the branch's (compaction may hide earlier ones).
    let tail = &got[got.len() - 2..];
    for (g, e) in tail.iter().zip(&expected[expected.len() - 2..]) {
        assert_same(g, e, "get_messages");
        assert!(obj(g).contains_key("futureMessageField"));
    }
    agent.request(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_settled");
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    let reread = read_lines(&file);
    assert!(reread.len() > lines.len(), "the agent appended entries");
    assert_all_same(&reread[..lines.len()], &lines, "after the agent's appends");
}
