//! The built-in MCP client (issue 13) against real MCP servers: `fake-mcp` (crates/fakellm, on
//! rmcp's server side) over stdio and streamable HTTP, driven through `pi --mode rpc` with the
//! fake model calling the tools.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `fake-mcp`, built next to `pi` by `cargo test --workspace` (or
/// `cargo build -p pi-fakellm --bin fake-mcp`); `PI_FAKE_MCP` names another one.
pub(crate) fn fake_mcp() -> String {
    if let Some(p) = std::env::var_os("PI_FAKE_MCP") {
        return p.to_string_lossy().into_owned();
    }
    let pi = PathBuf::from(env!("CARGO_BIN_EXE_pi"));
    let p = pi.parent().unwrap().join("fake-mcp");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build -p pi-fakellm --bin fake-mcp` (cargo test --workspace builds it)",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

pub(crate) fn stdio_server(extra_args: &[&str], exposure: &str) -> Value {
    json!({"command": fake_mcp(), "args": extra_args, "exposure": exposure})
}

pub(crate) fn write_mcp(root: &RunRoot, servers: Value) {
    root.write_agent_file("mcp.json", &json!({ "mcpServers": servers }));
}

/// The tool names the model was offered in LLM request `i` (OpenAI chat format).
pub(crate) fn offered_tools(fake: &pi_fakellm::FakeLlm, i: usize) -> Vec<String> {
    let reqs = fake.llm_requests();
    let body: Value = serde_json::from_str(&reqs[i].body_text()).unwrap();
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs one prompt and returns the events up to `agent_settled`.
pub(crate) fn prompt(agent: &mut RpcAgent, text: &str) -> Vec<Value> {
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": text}));
    let (end, _) = agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    agent.events()[..=end].to_vec()
}

/// The `tool_execution_end` of the `n`th tool call of the fake's turns (calls run in
/// parallel, so ends come in any order): turn `turn` (1-based), call `n`.
pub(crate) fn tool_end_of(events: &[Value], turn: usize, n: usize) -> Value {
    let id = format!("call_fake_{turn}_{n}");
    events
        .iter()
        .find(|v| kind(v) == "tool_execution_end" && v["toolCallId"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no tool_execution_end for {id}"))
}

pub(crate) fn tool_end(events: &[Value], n: usize) -> Value {
    tool_end_of(events, 1, n)
}

pub(crate) fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn direct_stdio_tool_is_declared_called_and_named_on_the_stream() {
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__fake__echo", json!({"text": "hi"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "call it");
    let start = events
        .iter()
        .find(|v| kind(v) == "tool_execution_start")
        .expect("tool_execution_start");
    assert_eq!(start["toolName"], "mcp__fake__echo", "{}", agent.dump());
    let end = tool_end(&events, 0);
    assert_eq!(end["toolName"], "mcp__fake__echo");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(text_of(&end["result"]), "echo: hi");
    assert_eq!(
        end["result"]["details"],
        json!({"server": "fake", "tool": "echo"})
    );
    let tools = offered_tools(&fake, 0);
    assert!(tools.contains(&"mcp__fake__echo".to_string()), "{tools:?}");
    assert!(tools.contains(&"read".to_string()), "{tools:?}");
    // `dash-name` and `dash_name` collide once sanitised: both get a hash suffix.
    let dashed: Vec<&String> = tools
        .iter()
        .filter(|t| t.starts_with("mcp__fake__dash_name"))
        .collect();
    assert_eq!(dashed.len(), 2, "{tools:?}");
    assert!(
        dashed
            .iter()
            .all(|t| t.len() == "mcp__fake__dash_name".len() + 9),
        "{tools:?}"
    );
    // The resource tools come with a direct server that offers resources.
    assert!(
        tools.contains(&"read_mcp_resource".to_string()),
        "{tools:?}"
    );
    // The tool result reached the model.
    let second = fake.llm_requests()[1].body_text();
    assert!(second.contains("echo: hi"), "{second}");
}

#[test]
fn direct_http_tool_call() {
    let mut server = Command::new(fake_mcp())
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__web__add", json!({"a": 2, "b": 3})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"web": {"url": url, "exposure": "direct"}}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "add");
    let end = tool_end(&events, 0);
    assert_eq!(end["toolName"], "mcp__web__add");
    assert_eq!(end["isError"], false, "{end} {}", agent.stderr());
    assert_eq!(text_of(&end["result"]), "5");
    assert!(offered_tools(&fake, 0).contains(&"mcp__web__add".to_string()));
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn images_errors_and_large_text_results() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("")
                .with_tool_call("mcp__fake__image", json!({}))
                .with_tool_call("mcp__fake__big", json!({"bytes": 30000}))
                .with_tool_call("mcp__fake__fail", json!({})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let ends: Vec<Value> = events
        .iter()
        .filter(|v| kind(v) == "tool_execution_end")
        .cloned()
        .collect();
    let by = |name: &str| ends.iter().find(|e| e["toolName"] == name).unwrap().clone();
    let image = by("mcp__fake__image");
    assert_eq!(image["result"]["content"][1]["type"], "image", "{image}");
    assert_eq!(image["result"]["content"][1]["mimeType"], "image/png");
    let big = by("mcp__fake__big");
    let text = text_of(&big["result"]);
    assert!(
        text.starts_with("Warning: truncated output (original token count: 7500)"),
        "{text}"
    );
    assert!(text.contains("chars truncated…"), "{text}");
    let path = big["result"]["details"]["fullOutputPath"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(path).unwrap().len(), 30000);
    assert!(text.contains(path));
    assert!(text.len() < 21 * 1024, "{}", text.len());
    let fail = by("mcp__fake__fail");
    assert_eq!(fail["isError"], true, "{fail}");
    assert_eq!(text_of(&fail["result"]), "it failed");
}

#[test]
fn resources_are_listed_and_read() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("")
                .with_tool_call("list_mcp_resources", json!({}))
                .with_tool_call(
                    "read_mcp_resource",
                    json!({"server": "fake", "uri": "fake://readme"}),
                )
                .with_tool_call(
                    "read_mcp_resource",
                    json!({"server": "fake", "uri": "fake://logo.png"}),
                ),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let list = tool_end(&events, 0);
    let listed = &list["result"]["structuredContent"]["resources"];
    assert_eq!(
        listed.as_array().unwrap().len(),
        2,
        "ui:// is left out: {list}"
    );
    assert_eq!(listed[0]["server"], "fake");
    let read = tool_end(&events, 1);
    assert_eq!(
        text_of(&read["result"]),
        "Read me: fake resource text",
        "{read}"
    );
    let logo = tool_end(&events, 2);
    assert_eq!(logo["result"]["content"][0]["type"], "image", "{logo}");
}

#[test]
fn server_dying_mid_call_is_an_error_result_and_the_next_call_reconnects() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__fake__crash", json!({})),
            Turn::text("").with_tool_call("mcp__fake__echo", json!({"text": "again"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let crash = tool_end(&events, 0);
    assert_eq!(crash["isError"], true, "{crash}");
    // Upstream's text for a connection lost mid-call.
    assert_eq!(text_of(&crash["result"]), "MCP connection closed");
    let again = tool_end_of(&events, 2, 0);
    assert_eq!(again["isError"], false, "{again}");
    assert_eq!(text_of(&again["result"]), "echo: again");
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true);
}

#[test]
fn broken_servers_are_reported_once_and_do_not_block_prompts() {
    let (fake, root) = setup(Script::new([Turn::text("hello")]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({
            "exits": stdio_server(&["--exit"], "direct"),
            "garbage": stdio_server(&["--garbage"], "direct"),
            "missing": {"command": "/nonexistent/mcp-server", "exposure": "direct"},
            // Hangs in initialize; its 1 s timeout ends the direct-tools wait early.
            "hangs": {"command": fake_mcp(), "args": ["--hang"], "exposure": "direct", "timeout": 1},
            // Hangs too, but has no direct tools: never waited for.
            "slow": {"command": fake_mcp(), "args": ["--hang"]},
            "bad name!": {"command": "x"},
            "sse": {"url": "http://127.0.0.1:1/sse", "type": "sse"},
        }),
    );
    let started = Instant::now();
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "hi");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "waited for a server without direct tools: {:?}",
        started.elapsed()
    );
    assert!(events.iter().any(|v| kind(v) == "agent_end"));
    let tools = offered_tools(&fake, 0);
    assert!(tools.iter().all(|t| !t.starts_with("mcp__")), "{tools:?}");
    let err = agent.stderr();
    for name in ["exits", "garbage", "missing", "hangs"] {
        let needle = format!("MCP server \"{name}\" failed to connect");
        assert_eq!(err.matches(&needle).count(), 1, "{name}: {err}");
    }
    assert!(err.contains("invalid server name \"bad name!\""), "{err}");
    assert!(
        err.contains("legacy SSE transport is not supported"),
        "{err}"
    );
    assert!(
        err.contains("fake-mcp: exiting as asked"),
        "stderr tail: {err}"
    );
}

pub(crate) fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

pub(crate) fn read_pid(path: &std::path::Path) -> i32 {
    let deadline = Instant::now() + LIVENESS;
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(p) = s.trim().parse() {
                return p;
            }
        }
        assert!(Instant::now() < deadline, "no pid file");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn stdio_servers_stop_with_pi_on_exit_and_on_sigkill() {
    for sigkill in [false, true] {
        let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
        let pidfile = root.tmp.join("server.pid");
        write_mcp(
            &root,
            json!({"fake": stdio_server(&["--pidfile", pidfile.to_str().unwrap()], "direct")}),
        );
        let mut agent = root.spawn();
        let pid = read_pid(&pidfile);
        assert!(alive(pid));
        if sigkill {
            // SAFETY: kill(2) on the agent's own pid.
            unsafe { libc::kill(agent.pid() as i32, libc::SIGKILL) };
        } else {
            agent.close_stdin();
        }
        assert!(agent.wait_exit(LIVENESS).is_some());
        assert!(
            wait_gone(pid),
            "MCP server {pid} outlived pi (sigkill: {sigkill})"
        );
    }
}

#[test]
fn no_mcp_flag_and_non_direct_exposures_declare_no_mcp_tools() {
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({
            "code": stdio_server(&[], "codemode"),
            "mixed": {"command": fake_mcp(), "exposure": "hidden", "toolExposure": {"echo": "direct", "a*": "direct", "add": "hidden"}},
        }),
    );
    let mut agent = root.spawn();
    prompt(&mut agent, "hi");
    let tools = offered_tools(&fake, 0);
    let mcp: Vec<&String> = tools.iter().filter(|t| t.starts_with("mcp__")).collect();
    assert_eq!(
        mcp,
        vec!["mcp__mixed__echo"],
        "exact names beat patterns: {tools:?}"
    );
    assert!(
        !tools.contains(&"read_mcp_resource".to_string()),
        "{tools:?}"
    );
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    // The codemode server's tools are reached through the codemode tool (mcp_exposures.rs).
    assert!(tools.contains(&"codemode".to_string()), "{tools:?}");
    drop(agent);
    let mut agent = root.spawn_with(false, &["--no-mcp"]);
    prompt(&mut agent, "hi");
    let tools = offered_tools(&fake, 1);
    assert!(tools.iter().all(|t| !t.starts_with("mcp__")), "{tools:?}");
}

fn pi_cmd(root: &RunRoot, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn pi_mcp_list_reports_good_and_broken_servers_and_exits_1() {
    let root = RunRoot::new(1);
    write_mcp(
        &root,
        json!({
            "good": {"command": fake_mcp(), "toolExposure": {"echo": "direct"}},
            "broken": {"command": fake_mcp(), "args": ["--exit"]},
            "off": {"command": fake_mcp(), "enabled": false},
        }),
    );
    let out = pi_cmd(&root, &["mcp", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("good: connected, 10 tools (codemode, global)"),
        "{text}"
    );
    assert!(text.contains("echo [direct]"), "{text}");
    assert!(text.contains("offers resources"), "{text}");
    assert!(text.contains("broken: failed (codemode, global)"), "{text}");
    assert!(text.contains("fake-mcp: exiting as asked"), "{text}");
    assert!(text.contains("off: disabled"), "{text}");
    write_mcp(&root, json!({"good": {"command": fake_mcp()}}));
    let out = pi_cmd(&root, &["mcp", "list"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn pi_mcp_add_and_remove_edit_mcp_json() {
    let root = RunRoot::new(1);
    let out = pi_cmd(
        &root,
        &[
            "mcp",
            "add",
            "fs",
            "--env",
            "K=V",
            "--exposure",
            "direct",
            "--",
            "npx",
            "-y",
            "server",
            "--help",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(root.agent_dir.join("mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        cfg["mcpServers"]["fs"],
        json!({"command": "npx", "args": ["-y", "server", "--help"], "env": {"K": "V"}, "exposure": "direct"})
    );
    let out = pi_cmd(
        &root,
        &[
            "mcp",
            "add",
            "docs",
            "--url",
            "https://example.com/mcp",
            "--bearer-token-env-var",
            "TOK",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(root.agent_dir.join("mcp.json")).unwrap())
            .unwrap();
    assert_eq!(
        cfg["mcpServers"]["docs"],
        json!({"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOK}"}})
    );
    let bad = pi_cmd(&root, &["mcp", "add", "x", "--url", "ftp://x"]);
    assert_eq!(bad.status.code(), Some(1));
    let out = pi_cmd(&root, &["mcp", "remove", "fs"]);
    assert_eq!(out.status.code(), Some(0));
    let out = pi_cmd(&root, &["mcp", "remove", "fs"]);
    assert_eq!(out.status.code(), Some(1));
    let cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(root.agent_dir.join("mcp.json")).unwrap())
            .unwrap();
    assert!(cfg["mcpServers"].get("fs").is_none());
    assert!(cfg["mcpServers"].get("docs").is_some());
}

#[test]
fn config_merge_rules() {
    use pi_coding_agent::mcp::config::{load, Exposure, Transport};
    let root = RunRoot::new(1);
    write_mcp(
        &root,
        json!({
            "a": {"command": "x", "env": {"SECRET": "s"}},
            "b": {"url": "http://h/mcp"},
            "my-srv": {"command": "y"},
            "my_srv": {"command": "z"},
        }),
    );
    root.write_cwd_file(
        ".pi/mcp.json",
        &json!({"mcpServers": {
            "a": {"enabled": false, "exposure": "direct"},
            "b": {"command": "local"},
            "c": {"enabled": false},
            "my-srv": {"enabled": false, "env": {}},
        }})
        .to_string(),
    );
    let cfg = load(&root.agent_dir, &root.cwd, true);
    let a = cfg.servers.iter().find(|s| s.name == "a").unwrap();
    assert!(!a.enabled);
    assert_eq!(a.exposure, Exposure::Direct);
    assert!(matches!(&a.transport, Transport::Stdio { env, .. } if env["SECRET"] == "s"));
    let b = cfg.servers.iter().find(|s| s.name == "b").unwrap();
    assert!(matches!(&b.transport, Transport::Stdio { command, .. } if command == "local"));
    assert_eq!(b.scope, "project");
    assert!(cfg.servers.iter().all(|s| s.name != "my_srv"));
    let errs = cfg.errors.join("\n");
    assert!(
        errs.contains("server \"my_srv\" conflicts with \"my-srv\""),
        "{errs}"
    );
    assert!(
        errs.contains("server \"c\" needs \"command\" or \"url\""),
        "{errs}"
    );
    assert!(errs.contains("an override can only set"), "{errs}");
    // An untrusted project's file is not read.
    let cfg = load(&root.agent_dir, &root.cwd, false);
    assert!(cfg.servers.iter().find(|s| s.name == "a").unwrap().enabled);
    assert_eq!(cfg.errors.len(), 1, "{:?}", cfg.errors);
}

/// What the model receives for a `direct` server matches upstream 1.6's recording against the
/// same server and script (`mcp_upstream_direct.json`): the tool list in order, every MCP tool's
/// name, description and parameters, the resource tools' parameter shapes, and the
/// `tool_execution_end` of the call.
#[test]
fn direct_tools_and_result_match_the_upstream_recording() {
    let fixture: Value = serde_json::from_str(include_str!("mcp_upstream_direct.json")).unwrap();
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__fake__echo", json!({"text": "hi"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let body: Value = serde_json::from_str(&fake.llm_requests()[0].body_text()).unwrap();
    let ours: Vec<Value> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            let name = f["name"].as_str().unwrap();
            if name.starts_with("mcp__") {
                f.clone()
            } else if name.contains("mcp_resource") {
                let p = &f["parameters"];
                let mut props: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
                props.sort();
                json!({"name": name, "parameters": {
                    "type": p["type"], "properties": props,
                    "required": p.get("required").cloned().unwrap_or(json!([])),
                    "additionalProperties": p["additionalProperties"],
                }})
            } else {
                json!({"name": name})
            }
        })
        .collect();
    assert_eq!(Value::Array(ours), fixture["tools"]);
    let mut end = tool_end(&events, 0);
    end.as_object_mut().unwrap().remove("durationMs");
    assert_eq!(end, fixture["tool_execution_end"]);
}

#[test]
fn server_log_notifications_go_to_mcp_log() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__fake__log", json!({"text": "line1\nline2"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    assert_eq!(text_of(&tool_end(&events, 0)["result"]), "logged");
    let log = std::fs::read_to_string(root.agent_dir.join("mcp.log")).unwrap();
    // `<ISO time> [<server>] <level> <logger>: <message>`, continuation lines indented.
    let line = log.lines().next().unwrap();
    assert!(line.ends_with("Z [fake] warning fake: line1"), "{log}");
    assert_eq!(log.lines().nth(1), Some("    line2"), "{log}");
}

#[test]
fn pi_exits_promptly_while_a_server_hangs_in_initialize() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let pidfile = root.tmp.join("hang.pid");
    // Default timeout (60 s): exiting must not wait for it.
    write_mcp(
        &root,
        json!({"hangs": stdio_server(&["--hang", "--pidfile", pidfile.to_str().unwrap()], "direct")}),
    );
    let mut agent = root.spawn();
    let pid = read_pid(&pidfile);
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["success"], true);
    agent.close_stdin();
    let started = Instant::now();
    assert!(agent.wait_exit(LIVENESS).is_some(), "pi did not exit");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(wait_gone(pid), "hanging server {pid} outlived pi");
}

#[test]
fn a_call_past_the_server_timeout_is_an_error() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__slow__sleep", json!({"ms": 5000})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"slow": {"command": fake_mcp(), "exposure": "direct", "timeout": 1}}),
    );
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let end = tool_end(&events, 0);
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        text_of(&end["result"]),
        "MCP server \"slow\": request timed out after 1 s"
    );
}

#[test]
fn abort_stops_a_running_mcp_call() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__slow__sleep", json!({"ms": 20000})),
            Turn::text("unused"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"slow": {"command": fake_mcp(), "exposure": "direct"}}),
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("tool_execution_start");
    let started = Instant::now();
    agent.send(json!({"id": "a", "type": "abort"}));
    let (i, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "tool_execution_end");
    let end = agent.events()[i].clone();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(end["isError"], true, "{end}");
    agent.wait_from(i, LIVENESS, |v| kind(v) == "agent_settled");
}

#[test]
fn tools_flags_filter_mcp_tools_only_when_they_name_them() {
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two"), Turn::text("three")]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": stdio_server(&[], "direct")}));
    let runs: [&[&str]; 3] = [
        &["--tools", "read,mcp__fake__echo"],
        &["--tools", "read,bash"],
        &[
            "--exclude-tools",
            "mcp__fake__*,list_mcp_resource_templates",
        ],
    ];
    for (i, args) in runs.iter().enumerate() {
        let mut agent = root.spawn_with(false, args);
        prompt(&mut agent, "hi");
        let tools = offered_tools(&fake, i);
        let mcp: Vec<&String> = tools
            .iter()
            .filter(|t| t.starts_with("mcp__") || t.contains("mcp_resource"))
            .collect();
        match i {
            0 => assert_eq!(tools, vec!["read", "mcp__fake__echo"], "{}", agent.stderr()),
            1 => assert_eq!(mcp.len(), 13, "{tools:?}"),
            _ => assert_eq!(
                mcp,
                vec!["list_mcp_resources", "read_mcp_resource"],
                "{tools:?}"
            ),
        }
        assert!(
            !agent.stderr().contains("Unknown tool"),
            "{}",
            agent.stderr()
        );
    }
}
