//! The npm reference MCP servers through pi (issue 13): `@modelcontextprotocol/server-everything`
//! (a tool call through the direct exposure, a resource read) and
//! `@modelcontextprotocol/server-filesystem` (a file read through a direct tool), with the fake
//! model calling them. `scripts/install-test-mcp-servers.sh` installs both (`.ci/run` runs it);
//! without them a test passes with a notice, or fails under `PI_REQUIRE_TEST_RESOURCES=1`.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::path::PathBuf;

/// `node_modules/.bin/<bin>` of the install directory, if installed.
fn reference_server(bin: &str) -> Option<String> {
    let dir = match std::env::var_os("PI_TEST_MCP_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            cache.join("pi-test-mcp-servers")
        }
    };
    let p = dir.join("node_modules/.bin").join(bin);
    if p.exists() {
        return Some(p.to_string_lossy().into_owned());
    }
    let what = format!("npm MCP server {bin} ({} missing)", p.display());
    let how = "run scripts/install-test-mcp-servers.sh";
    if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
        panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
    }
    eprintln!("SKIP: {what}; {how}");
    None
}

/// `node` must be found by the servers' `#!/usr/bin/env node`: the test child gets a PATH.
fn path_env() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
}

fn tool_ends(agent: &mut RpcAgent, text: &str) -> Vec<Value> {
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": text}));
    let (end, _) = agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    agent.events()[from..=end]
        .iter()
        .filter(|v| kind(v) == "tool_execution_end")
        .cloned()
        .collect()
}

fn text_of(end: &Value) -> String {
    end["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn server_everything_tool_call_and_resource_read() {
    let Some(bin) = reference_server("mcp-server-everything") else {
        return;
    };
    let uri = "demo://resource/static/document/architecture.md";
    let (fake, root) = setup(
        Script::new([
            Turn::text("")
                .with_tool_call("mcp__everything__echo", json!({"message": "hi there"}))
                .with_tool_call(
                    "read_mcp_resource",
                    json!({"server": "everything", "uri": uri}),
                ),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_agent_file(
        "mcp.json",
        &json!({"mcpServers": {"everything": {
            "command": bin, "exposure": "direct", "env": {"PATH": path_env()}
        }}}),
    );
    let mut agent = root.spawn();
    let ends = tool_ends(&mut agent, "go");
    let echo = ends
        .iter()
        .find(|e| e["toolName"] == "mcp__everything__echo")
        .unwrap_or_else(|| panic!("{}", agent.dump()));
    assert_eq!(echo["isError"], false, "{echo}");
    assert_eq!(text_of(echo), "Echo: hi there");
    let read = ends
        .iter()
        .find(|e| e["toolName"] == "read_mcp_resource")
        .unwrap();
    assert_eq!(read["isError"], false, "{read}");
    assert!(
        text_of(read).to_lowercase().contains("architecture"),
        "{read}"
    );
    let body = fake.llm_requests()[1].body_text();
    assert!(body.contains("Echo: hi there"), "{body}");
}

#[test]
fn server_filesystem_reads_a_file_through_a_direct_tool() {
    let Some(bin) = reference_server("mcp-server-filesystem") else {
        return;
    };
    // A relative path: the server runs in the session directory, which it is allowed to read.
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__fs__read_text_file", json!({"path": "note.txt"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    let dir = root.cwd.canonicalize().unwrap();
    std::fs::write(dir.join("note.txt"), "reference servers work\n").unwrap();
    root.write_agent_file(
        "mcp.json",
        &json!({"mcpServers": {"fs": {
            "command": bin, "args": [dir.to_string_lossy()], "exposure": "direct",
            "env": {"PATH": path_env()}
        }}}),
    );
    let mut agent = root.spawn();
    let ends = tool_ends(&mut agent, "read it");
    let end = ends.first().unwrap_or_else(|| panic!("{}", agent.dump()));
    assert_eq!(end["toolName"], "mcp__fs__read_text_file");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(text_of(end).trim(), "reference servers work");
}
