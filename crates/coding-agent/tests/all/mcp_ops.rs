//! MCP client operations (issue 13): `/mcp` status and subcommands over RPC, HTTP connect
//! retries, progress resetting a call's timeout, OAuth sign-in (`pi mcp login|logout`,
//! `/mcp login|logout`) against fake-mcp's own authorization server with the browser step
//! driven by a plain HTTP client, and token refresh.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn fake_mcp() -> String {
    if let Some(p) = std::env::var_os("PI_FAKE_MCP") {
        return p.to_string_lossy().into_owned();
    }
    let pi = PathBuf::from(env!("CARGO_BIN_EXE_pi"));
    let p = pi.parent().unwrap().join("fake-mcp");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build -p pi-fakellm --bin fake-mcp`",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn write_mcp(root: &RunRoot, servers: Value) {
    root.write_agent_file("mcp.json", &json!({ "mcpServers": servers }));
}

/// A fake-mcp HTTP server; killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(args: &[&str]) -> HttpServer {
        let mut child = Command::new(fake_mcp())
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        HttpServer { child, url }
    }

    fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_string()
    }

    fn stats(&self) -> Value {
        let (_, _, body) = http_get(&format!("{}/stats", self.base()));
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One bare HTTP/1.1 request (`Connection: close`): `(status, head, body)`.
fn http_exchange(method: &str, url: &str, headers: &str, body: &str) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(LIVENESS)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n{body}"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// A bare HTTP/1.1 GET: `(status, location header, body)`.
fn http_get(url: &str) -> (u16, Option<String>, String) {
    let (status, head, body) = http_exchange("GET", url, "", "");
    let location = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("location")
            .then(|| v.trim().to_string())
    });
    (status, location, body)
}

/// What a browser does with the authorization URL: follow the authorization server's redirect
/// to pi's loopback callback. Returns the callback page.
fn approve_in_browser(authorize_url: &str) -> String {
    let (status, location, body) = http_get(authorize_url);
    assert_eq!(status, 302, "authorize answered {status}: {body}");
    let callback = location.expect("redirect location");
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    let (status, _, page) = http_get(&callback);
    assert_eq!(status, 200, "{page}");
    page
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

/// Sends `/mcp …` as a prompt; returns the `notify` messages `(message, notifyType)` it
/// emitted before its `handled` response.
fn slash(agent: &mut RpcAgent, id: &str, text: &str) -> Vec<(String, String)> {
    let from = agent.len();
    let r = agent.request(json!({"id": id, "type": "prompt", "message": text}));
    assert_eq!(r["data"], json!({"disposition": "handled"}), "{r}");
    let events = agent.events();
    let end = events
        .iter()
        .position(|v| kind(v) == "response" && v["id"] == id)
        .unwrap();
    events[from..end]
        .iter()
        .filter(|v| kind(v) == "extension_ui_request" && v["method"] == "notify")
        // The startup report may land in between (tested on its own).
        .filter(|v| {
            !v["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("MCP servers need attention:")
        })
        .map(|v| {
            (
                v["message"].as_str().unwrap_or("").to_string(),
                v["notifyType"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn one(notes: Vec<(String, String)>) -> (String, String) {
    assert_eq!(notes.len(), 1, "{notes:?}");
    notes.into_iter().next().unwrap()
}

#[test]
fn slash_mcp_shows_each_servers_state_tools_and_errors() {
    let (fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({
            "good": {"command": fake_mcp(), "exposure": "direct"},
            "broken": {"command": fake_mcp(), "args": ["--exit"], "exposure": "direct"},
            "off": {"command": fake_mcp(), "enabled": false},
            "bad name!": {"command": "x"},
        }),
    );
    let mut agent = root.spawn();
    let (text, kind_) = one(slash(&mut agent, "m1", "/mcp"));
    assert_eq!(kind_, "info");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("good: connected, ") && l.ends_with(" tools (direct)")),
        "{text}"
    );
    let broken = lines
        .iter()
        .position(|l| *l == "broken: failed (direct)")
        .unwrap_or_else(|| panic!("{text}"));
    // The error, then the stderr tail, indented under the server.
    assert!(
        lines[broken + 1].starts_with("    failed to connect"),
        "{text}"
    );
    assert!(
        text.contains("    stderr: fake-mcp: exiting as asked"),
        "{text}"
    );
    assert!(lines.contains(&"off: disabled (codemode)"), "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("config error: ") && l.contains("bad name!")),
        "{text}"
    );
    // Reported once after startup, in a notify, and once on stderr.
    let (_, report) = agent.wait_from(0, LIVENESS, |v| {
        v["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("MCP servers need attention:"))
    });
    assert_eq!(report["notifyType"], "warning");
    let report = report["message"].as_str().unwrap();
    assert!(report.contains("\n  config: "), "{report}");
    assert!(
        report.contains("\n  broken: failed: failed to connect"),
        "{report}"
    );
    assert!(!report.contains("good:"), "{report}");
    assert!(report.ends_with("\nRun /mcp to fix."), "{report}");
    let reports = agent
        .events()
        .iter()
        .filter(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("MCP servers need attention:"))
        })
        .count();
    assert_eq!(reports, 1);
    let err = agent.stderr_with("MCP server \"broken\" failed to connect", LIVENESS);
    assert_eq!(
        err.matches("MCP server \"broken\" failed to connect")
            .count(),
        1,
        "{err}"
    );
    // Subcommand errors.
    let (text, k) = one(slash(&mut agent, "m2", "/mcp frobnicate"));
    assert_eq!(k, "warning");
    assert!(
        text.starts_with("Usage: /mcp, /mcp login [server]"),
        "{text}"
    );
    let (text, k) = one(slash(&mut agent, "m3", "/mcp reconnect nope"));
    assert_eq!(
        (text.as_str(), k.as_str()),
        ("No MCP server named \"nope\".", "error")
    );
    let (text, k) = one(slash(&mut agent, "m4", "/mcp login good"));
    assert_eq!(k, "error");
    assert!(
        text.starts_with("No enabled MCP server uses OAuth."),
        "{text}"
    );
    assert!(fake.llm_requests().is_empty());
}

#[test]
fn slash_mcp_reconnect_restarts_the_server() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let pidfile = root.tmp.join("good.pid");
    write_mcp(
        &root,
        json!({"good": {"command": fake_mcp(), "args": ["--pidfile", pidfile.to_str().unwrap()], "exposure": "direct"}}),
    );
    let mut agent = root.spawn();
    one(slash(&mut agent, "s", "/mcp"));
    let first = std::fs::read_to_string(&pidfile).unwrap();
    let (text, k) = one(slash(&mut agent, "r", "/mcp reconnect good"));
    assert_eq!(k, "info", "{text}");
    assert!(
        text.starts_with("Reconnected to MCP server \"good\" (connected · ")
            && text.ends_with(" tools · resources)."),
        "{text}"
    );
    let second = std::fs::read_to_string(&pidfile).unwrap();
    assert_ne!(first, second, "the server was not restarted");
    // Only one server: its name may be left out.
    let (text, _) = one(slash(&mut agent, "r2", "/mcp reconnect"));
    assert!(
        text.starts_with("Reconnected to MCP server \"good\""),
        "{text}"
    );
}

#[test]
fn get_commands_lists_the_builtin_mcp_command() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let r = agent.request(json!({"id": "c", "type": "get_commands"}));
    let mcp = r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "mcp")
        .cloned()
        .unwrap();
    assert_eq!(mcp["source"], "extension");
    assert_eq!(
        mcp["sourceInfo"],
        json!({"path": "builtin:mcp", "source": "builtin", "scope": "temporary", "origin": "top-level"})
    );
}

#[test]
fn http_connect_retries_transient_statuses_twice() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    // Two 503s then success: connected after the two retries.
    let two = HttpServer::start(&["--fail-first", "2"]);
    // Three 503s: one more than the retries.
    let three = HttpServer::start(&["--fail-first", "3"]);
    // 429 is transient too.
    let limited = HttpServer::start(&["--fail-first", "1", "--fail-status", "429"]);
    // 501 (not implemented) is not retried; nor is 400.
    let not_impl = HttpServer::start(&["--fail-first", "1", "--fail-status", "501"]);
    write_mcp(
        &root,
        json!({
            "two": {"url": two.url, "exposure": "direct", "headers": {"Authorization": "Bearer x"}},
            "three": {"url": three.url, "exposure": "direct", "headers": {"Authorization": "Bearer x"}},
            "limited": {"url": limited.url, "exposure": "direct", "headers": {"Authorization": "Bearer x"}},
            "notimpl": {"url": not_impl.url, "exposure": "direct", "headers": {"Authorization": "Bearer x"}},
        }),
    );
    let started = Instant::now();
    let out = pi_cmd(&root, &["mcp", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("two: connected"), "{text}");
    assert!(text.contains("limited: connected"), "{text}");
    assert!(text.contains("three: failed"), "{text}");
    assert!(text.contains("notimpl: failed"), "{text}");
    assert_eq!(out.status.code(), Some(1));
    // Back-off 250 ms + 1 s, not more.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    // Requests that reached the server: 3 failing + initialize… for `two`; exactly 3 for
    // `three` (no fourth attempt); exactly 1 for `notimpl`.
    assert_eq!(three.stats()["mcpRequests"], 3, "{}", three.stats());
    assert_eq!(not_impl.stats()["mcpRequests"], 1, "{}", not_impl.stats());
}

#[test]
fn progress_notifications_reset_the_call_timeout() {
    let (_fake, root) = setup(
        Script::new([
            // 5 × 400 ms = 2 s in all, past the 1 s timeout, but progress every 400 ms.
            Turn::text("").with_tool_call("mcp__slow__progress", json!({"ms": 400, "steps": 5})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"slow": {"command": fake_mcp(), "args": ["--ops"], "exposure": "direct", "timeout": 1}}),
    );
    let mut agent = root.spawn();
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (_, end) = agent.wait_from(from, LIVENESS, |v| kind(v) == "tool_execution_end");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(end["result"]["content"][0]["text"], "progressed");
}

/// Signs in with `pi mcp login <server>`, approving in the "browser"; returns its stdout.
fn cli_login(root: &RunRoot, server: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(["mcp", "login", server, "--timeout", "30"])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let mut url = None;
    for _ in 0..20 {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if line.starts_with("http://") && line.contains("/authorize?") {
            url = Some(line.trim().to_string());
            break;
        }
    }
    let url = url.unwrap_or_else(|| {
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!("no authorization URL: {seen}\n{err}")
    });
    let page = approve_in_browser(&url);
    assert!(page.contains("Signed in"), "{page}");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    seen.push_str(&rest);
    let status = child.wait().unwrap();
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(status.success(), "{seen}\n{err}");
    seen
}

fn auth_file(root: &RunRoot) -> Value {
    let text = std::fs::read_to_string(root.agent_dir.join("mcp-auth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn pi_mcp_login_signs_in_stores_tokens_0600_and_the_session_uses_them() {
    let server = HttpServer::start(&["--oauth"]);
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__web__echo", json!({"text": "authorized"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"web": {"url": server.url, "exposure": "direct"}}),
    );
    // Before sign-in: the server needs it; list says so and exits 1.
    let out = pi_cmd(&root, &["mcp", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("web: needs sign-in"), "{text}");
    assert!(text.contains("sign in with: pi mcp login web"), "{text}");
    assert_eq!(out.status.code(), Some(1));

    let said = cli_login(&root, "web");
    assert!(
        said.contains("Sign in to MCP server \"web\" in your browser:"),
        "{said}"
    );
    assert!(said.contains("Signed in to MCP server \"web\" ("), "{said}");
    let path = root.agent_dir.join("mcp-auth.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    let file = auth_file(&root);
    let key = format!("mcp__web|{}", server.url);
    let entry = &file[&key];
    assert_eq!(entry["serverUrl"], server.url.as_str(), "{file}");
    assert!(
        entry["tokens"]["access_token"]
            .as_str()
            .unwrap()
            .starts_with("at-"),
        "{file}"
    );
    assert!(entry["tokens"]["refresh_token"].is_string(), "{file}");
    assert!(entry["tokensExpireAt"].is_i64(), "{file}");
    assert!(
        entry["clientInformation"]["client_id"].is_string(),
        "{file}"
    );
    // Signed in already: nothing to do.
    let out = pi_cmd(&root, &["mcp", "login", "web"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Already signed in to MCP server \"web\""),
        "{out:?}"
    );

    // A session sends the token.
    let mut agent = root.spawn();
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (_, end) = agent.wait_from(from, LIVENESS, |v| kind(v) == "tool_execution_end");
    assert_eq!(end["isError"], false, "{end} {}", agent.stderr());
    assert_eq!(end["result"]["content"][0]["text"], "echo: authorized");
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    assert!(fake.llm_requests().len() >= 2);
    drop(agent);

    // Logout deletes the credentials; the session then shows needs sign-in.
    let out = pi_cmd(&root, &["mcp", "logout", "web"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Signed out of MCP server \"web\"."
    );
    assert!(auth_file(&root).get(&key).is_none());
    let out = pi_cmd(&root, &["mcp", "logout", "web"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "No stored credentials for MCP server \"web\"."
    );
    let mut agent = root.spawn();
    let (text, _) = one(slash(&mut agent, "s", "/mcp"));
    assert_eq!(text, "web: needs sign-in, run /mcp login web (direct)");
    assert_eq!(
        agent
            .stderr_with("MCP server \"web\" requires sign-in", LIVENESS)
            .matches("MCP server \"web\" requires sign-in")
            .count(),
        1,
        "{}",
        agent.stderr()
    );
}

#[test]
fn expired_tokens_are_refreshed_before_connecting() {
    // Access tokens live 1 s.
    let server = HttpServer::start(&["--oauth", "--token-ttl", "1"]);
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({"web": {"url": server.url, "exposure": "direct"}}),
    );
    cli_login(&root, "web");
    let key = format!("mcp__web|{}", server.url);
    let before = auth_file(&root)[&key]["tokens"]["access_token"].clone();
    std::thread::sleep(Duration::from_millis(1200));
    let out = pi_cmd(&root, &["mcp", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("web: connected"), "{text}");
    let after = auth_file(&root)[&key]["tokens"]["access_token"].clone();
    assert_ne!(before, after, "the token was not refreshed");
    assert!(
        server.stats()["tokenRequests"]["refresh_token"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

#[test]
fn slash_mcp_login_and_logout_over_rpc() {
    let server = HttpServer::start(&["--oauth"]);
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({"web": {"url": server.url, "exposure": "direct"}}),
    );
    let mut agent = root.spawn();
    let from = agent.len();
    agent.send(json!({"id": "l", "type": "prompt", "message": "/mcp login web"}));
    let (_, ask) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_ui_request"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Sign in to MCP server \"web\" in your browser:\n"))
    });
    let url = ask["message"]
        .as_str()
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    approve_in_browser(&url);
    let r = agent.wait_response("l");
    assert_eq!(r["data"], json!({"disposition": "handled"}));
    let (_, done) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_ui_request"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Signed in to MCP server \"web\" ("))
    });
    assert_eq!(done["notifyType"], "info");
    let (text, _) = one(slash(&mut agent, "s", "/mcp"));
    assert!(text.starts_with("web: connected, "), "{text}");
    let (text, _) = one(slash(&mut agent, "o", "/mcp logout web"));
    assert_eq!(text, "Signed out of MCP server \"web\".");
    let (text, _) = one(slash(&mut agent, "s2", "/mcp"));
    assert_eq!(text, "web: needs sign-in, run /mcp login web (direct)");
}

#[test]
fn tools_list_changed_adds_the_new_tool() {
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__fake__grow", json!({})),
            Turn::text("grown"),
            Turn::text("").with_tool_call("mcp__fake__late", json!({})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"fake": {"command": fake_mcp(), "args": ["--ops"], "exposure": "direct"}}),
    );
    let mut agent = root.spawn();
    for (id, text) in [("p1", "grow"), ("p2", "call late")] {
        let from = agent.len();
        agent.send(json!({"id": id, "type": "prompt", "message": text}));
        agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    }
    let tools = |i: usize| -> Vec<String> {
        let body: Value = serde_json::from_str(&fake.llm_requests()[i].body_text()).unwrap();
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!tools(0).contains(&"mcp__fake__late".to_string()));
    assert!(
        tools(2).contains(&"mcp__fake__late".to_string()),
        "{:?}",
        tools(2)
    );
    let end = agent
        .events()
        .into_iter()
        .rfind(|v| kind(v) == "tool_execution_end")
        .unwrap();
    assert_eq!(end["toolName"], "mcp__fake__late");
    assert_eq!(end["result"]["content"][0]["text"], "late ran");
}

#[test]
fn resource_reads_are_retried_once_after_a_transient_failure_tool_calls_never() {
    // The first resources/read and the first tools/call are answered 503.
    let reads = HttpServer::start(&["--fail-method", "resources/read:1"]);
    let calls = HttpServer::start(&["--fail-method", "tools/call:1"]);
    let (_fake, root) = setup(
        Script::new([
            Turn::text("")
                .with_tool_call(
                    "read_mcp_resource",
                    json!({"server": "reads", "uri": "fake://readme"}),
                )
                .with_tool_call("mcp__calls__echo", json!({"text": "once"})),
            Turn::text("").with_tool_call("mcp__calls__echo", json!({"text": "twice"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    let h = json!({"Authorization": "Bearer x"});
    write_mcp(
        &root,
        json!({
            "reads": {"url": reads.url, "exposure": "direct", "headers": h},
            "calls": {"url": calls.url, "exposure": "direct", "headers": h},
        }),
    );
    let mut agent = root.spawn();
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (end, _) = agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    let ends: Vec<Value> = agent.events()[from..=end]
        .iter()
        .filter(|v| kind(v) == "tool_execution_end")
        .cloned()
        .collect();
    let by = |id: &str| {
        ends.iter()
            .find(|e| e["toolCallId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id}: {ends:?}"))
    };
    let read = by("call_fake_1_0");
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(
        read["result"]["content"][0]["text"],
        "Read me: fake resource text"
    );
    // The failed call is not sent again; the model's next call works.
    let first = by("call_fake_1_1");
    assert_eq!(first["isError"], true, "{first}");
    assert_eq!(
        first["result"]["content"][0]["text"],
        "MCP server \"calls\": request failed: HTTP 503"
    );
    let second = by("call_fake_2_0");
    assert_eq!(second["isError"], false, "{second}");
    assert_eq!(second["result"]["content"][0]["text"], "echo: twice");
}

#[test]
fn an_expired_token_is_refreshed_between_calls_of_a_session() {
    let server = HttpServer::start(&["--oauth", "--token-ttl", "2"]);
    let (_fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__web__echo", json!({"text": "one"})),
            Turn::text("ok"),
            Turn::text("").with_tool_call("mcp__web__echo", json!({"text": "two"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"web": {"url": server.url, "exposure": "direct"}}),
    );
    cli_login(&root, "web");
    let mut agent = root.spawn();
    let mut results = Vec::new();
    for (i, id) in ["p1", "p2"].iter().enumerate() {
        if i == 1 {
            // Past the token's 2 s life.
            std::thread::sleep(Duration::from_millis(2500));
        }
        let from = agent.len();
        agent.send(json!({"id": id, "type": "prompt", "message": "go"}));
        let (_, end) = agent.wait_from(from, LIVENESS, |v| kind(v) == "tool_execution_end");
        agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
        results.push(end);
    }
    for (end, want) in results.iter().zip(["echo: one", "echo: two"]) {
        assert_eq!(end["isError"], false, "{end} {}", agent.stderr());
        assert_eq!(end["result"]["content"][0]["text"], want);
    }
    assert!(
        server.stats()["tokenRequests"]["refresh_token"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

/// A bare HTTP/1.1 form POST: `(status, body)`.
fn http_post_form(url: &str, form: &str) -> (u16, String) {
    let headers = format!(
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
        form.len()
    );
    let (status, _, body) = http_exchange("POST", url, &headers, form);
    (status, body)
}

/// Two processes on one agent directory refresh a server's tokens one at a time (upstream's
/// lock `mcp-auth-refresh-<hash>.lock`): while "another process" (the test) holds the lock and
/// spends the single-use refresh token, `pi mcp list` waits, then connects with the tokens the
/// other process stored instead of refreshing again with the spent token. Without the lock it
/// refreshes at once, and the test's own refresh is refused (the fake rotates refresh tokens).
#[test]
fn a_refresh_waits_for_another_process_and_uses_its_tokens() {
    use sha2::Digest;
    let server = HttpServer::start(&["--oauth", "--token-ttl", "2"]);
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({"web": {"url": server.url, "exposure": "direct"}}),
    );
    cli_login(&root, "web");
    // (The login itself may have refreshed already: a 2 s token is inside the 10 s margin.)
    let refreshes = || {
        server.stats()["tokenRequests"]["refresh_token"]
            .as_u64()
            .unwrap_or(0)
    };
    let before = refreshes();
    std::thread::sleep(Duration::from_millis(2200));
    let key = format!("mcp__web|{}", server.url);
    let hash: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let lock = root.agent_dir.join(format!("mcp-auth-refresh-{hash}.lock"));
    std::fs::create_dir(&lock).unwrap();
    let list = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(["mcp", "list"])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // The other process's refresh, while it holds the lock.
    let (_, _, meta) = http_get(&format!(
        "{}/.well-known/oauth-authorization-server",
        server.base()
    ));
    let meta: Value = serde_json::from_str(&meta).unwrap();
    let mut file = auth_file(&root);
    let refresh = file[&key]["tokens"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, body) = http_post_form(
        meta["token_endpoint"].as_str().unwrap(),
        &format!("grant_type=refresh_token&refresh_token={refresh}"),
    );
    assert_eq!(
        status, 200,
        "pi refreshed without waiting for the lock: {body}"
    );
    let tokens: Value = serde_json::from_str(&body).unwrap();
    file[&key]["tokens"] = tokens.clone();
    file[&key]["tokensExpireAt"] = json!(pi_ai::now_ms() + 3_600_000);
    // Written whole, then renamed, as pi and upstream write it.
    let tmp = root.agent_dir.join("mcp-auth.json.test.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    std::fs::rename(&tmp, root.agent_dir.join("mcp-auth.json")).unwrap();
    std::fs::remove_dir(&lock).unwrap();
    let out = list.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("web: connected"),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(auth_file(&root)[&key]["tokens"], tokens);
    assert_eq!(refreshes(), before + 1, "pi refreshed too");
    assert!(!lock.exists());
}
