//! Session persistence in RPC mode (without `--no-session`): the JSONL file under
//! `agent/sessions/--<cwd>--/`.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::json;

/// `/a/b/c` → `--a-b-c--` (sessions.md §1.2).
fn encoded_cwd(cwd: &std::path::Path) -> String {
    let s = cwd.to_string_lossy();
    let s = s.strip_prefix('/').unwrap_or(&s);
    format!("--{}--", s.replace(['/', '\\', ':'], "-"))
}

#[test]
fn session_file_is_written_and_well_formed() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("Running.").with_tool_call("bash", json!({"command": "echo hi"})),
            Turn::text("Done."),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with_session();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "Run echo hi"}));
    agent.wait_event("agent_settled");
    let st = agent.request(json!({"id": "s1", "type": "get_state"}));
    let session_file = st["data"]["sessionFile"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionFile: {st}"))
        .to_string();
    let session_id = st["data"]["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    agent.close_stdin();
    assert_eq!(
        agent.wait_exit(LIVENESS).and_then(|s| s.code()),
        Some(0),
        "{}",
        agent.dump()
    );

    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = &files[0];
    assert_eq!(file.to_string_lossy(), session_file);
    let dir = file.parent().unwrap();
    assert_eq!(dir.parent().unwrap(), root.agent_dir.join("sessions"));
    assert_eq!(
        dir.file_name().unwrap().to_string_lossy(),
        encoded_cwd(&root.cwd)
    );

    let lines = check_session_file(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let header = &lines[0];
    assert_eq!(header["cwd"], root.cwd.to_string_lossy().as_ref());
    let id = header["id"].as_str().unwrap();
    if !session_id.is_empty() {
        assert_eq!(id, session_id);
    }
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with(&format!("_{id}.jsonl")), "{name}");
    assert_eq!(
        name.len(),
        "2026-01-01T00-00-00-000Z_".len() + id.len() + ".jsonl".len(),
        "{name}"
    );

    // A linear chain: each entry's parent is the entry before it.
    for w in lines[1..].windows(2) {
        assert_eq!(w[1]["parentId"], w[0]["id"], "{}", w[1]);
    }
    assert!(lines[1]["parentId"].is_null());
    let types: Vec<&str> = lines[1..]
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        &types[..2],
        ["model_change", "thinking_level_change"],
        "{types:?}"
    );
    let roles: Vec<&str> = lines
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "toolResult", "assistant"]
    );
    let last = lines.iter().rfind(|e| e["type"] == "message").unwrap();
    assert_eq!(last["message"]["content"][0]["text"], "Done.");
}

#[test]
fn no_session_writes_nothing() {
    let (_fake, root) = setup(Script::new([Turn::text("hi")]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "hello"}));
    agent.wait_event("agent_settled");
    let st = agent.request(json!({"id": "s1", "type": "get_state"}));
    assert!(
        st["data"]
            .get("sessionFile")
            .is_none_or(serde_json::Value::is_null),
        "{st}"
    );
    agent.close_stdin();
    assert_eq!(agent.wait_exit(LIVENESS).and_then(|s| s.code()), Some(0));
    assert!(
        root.session_files().is_empty(),
        "{:?}",
        root.session_files()
    );
}
