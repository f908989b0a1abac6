//! The indirect exposures (issue 13): `codemode` (upstream's default: the `codemode` tool runs
//! a script in a QuickJS sandbox) and `deferred` (`tool_search`), against `fake-mcp` with the
//! fake model writing the calls; their shapes compared with upstream 1.6 recordings
//! (`mcp_upstream_codemode.json`, `mcp_upstream_deferred.json`).

use crate::common::*;
use crate::mcp::{fake_mcp, offered_tools, prompt, text_of, tool_end, tool_end_of, write_mcp};
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn codemode(code: &str) -> Turn {
    Turn::text("").with_tool_call("codemode", json!({ "code": code }))
}

/// The LLM request `i` the fake received.
fn request(fake: &pi_fakellm::FakeLlm, i: usize) -> Value {
    serde_json::from_str(&fake.llm_requests()[i].body_text()).unwrap()
}

fn system_text(body: &Value) -> String {
    body["messages"][0]["content"].as_str().unwrap().to_string()
}

/// The lines of the `<name>` section of the system prompt.
fn section_lines(system: &str, name: &str) -> Vec<String> {
    let open = format!("<{name}>\n");
    let close = format!("\n</{name}>");
    let start = system
        .find(&open)
        .unwrap_or_else(|| panic!("no <{name}> in {system}"))
        + open.len();
    let end = start + system[start..].find(&close).unwrap();
    system[start..end].lines().map(str::to_string).collect()
}

/// The tool list of a request in the fixtures' shape: built-in tools by name and whether their
/// description says what a script call resolves to; `codemode`/`tool_search` with their
/// parameter structure (descriptions dropped: prose); MCP tools in full.
fn tools_summary(body: &Value) -> Vec<Value> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let f = &t["function"];
            let name = f["name"].as_str().unwrap();
            if name == "codemode" || name == "tool_search" {
                json!({"name": name, "parameters": strip_descriptions(&f["parameters"])})
            } else if name.starts_with("mcp__") {
                f.clone()
            } else {
                let d = f["description"].as_str().unwrap();
                json!({"name": name, "notes_script_call": d.contains(&format!("tools.{name}(args)"))})
            }
        })
        .collect()
}

fn strip_descriptions(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, x)| !(k.as_str() == "description" && x.is_string()))
                .map(|(k, x)| (k.clone(), strip_descriptions(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_descriptions).collect()),
        other => other.clone(),
    }
}

/// The text items of a codemode result body (split at `==> text N/M <==`) and its console
/// block.
fn items_and_console(body: &str) -> (Vec<String>, Option<String>) {
    let (main, console) = match body.split_once("\n<console_output>\n") {
        Some((m, c)) => (
            m,
            Some(c.trim_end_matches("\n</console_output>").to_string()),
        ),
        None => (body, None),
    };
    let mut items = Vec::new();
    let mut cur: Option<String> = None;
    for line in main.split('\n') {
        if line.starts_with("==> text ") && line.ends_with(" <==") {
            items.extend(cur.take());
            cur = Some(String::new());
        } else if let Some(c) = cur.as_mut() {
            if !c.is_empty() {
                c.push('\n');
            }
            c.push_str(line);
        }
    }
    items.extend(cur);
    (items, console)
}

fn assert_head(result: &Value, word: &str) {
    let head = result["content"][0]["text"].as_str().unwrap();
    let rest = head
        .strip_prefix(&format!("Script {word}\nWall time "))
        .unwrap_or_else(|| panic!("{head:?}"));
    let secs = rest
        .strip_suffix(" seconds\nOutput:\n")
        .unwrap_or_else(|| panic!("{head:?}"));
    let (whole, tenth) = secs.split_once('.').unwrap();
    assert!(whole.parse::<u64>().is_ok() && tenth.len() == 1, "{head:?}");
}

/// What the model receives for the default (`codemode`) exposure and what a script gets back
/// match upstream 1.6's recording against the same server and script: tool list and order,
/// built-in tools' script notes, the `codemode` parameters, the `<tools>` names and the
/// `<mcp_servers>` lines (last section), and the script's result: head, the MCP result,
/// `searchTools()`, the `describeTool()` declaration, `describeNamespace()`, `store`/`load`,
/// the console block and `details.calls`.
#[test]
fn codemode_is_the_default_exposure_and_matches_the_upstream_recording() {
    let fixture: Value = serde_json::from_str(include_str!("mcp_upstream_codemode.json")).unwrap();
    let script = fixture["script"].as_str().unwrap();
    let (fake, root) = setup(
        Script::new([codemode(script), Turn::text("done")]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": {"command": fake_mcp()}}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let body = request(&fake, 0);
    assert_eq!(
        Value::Array(tools_summary(&body)),
        strip_descriptions(&fixture["tools"])
    );
    let system = system_text(&body);
    let tool_names: Vec<String> = section_lines(&system, "tools")
        .iter()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect();
    assert_eq!(json!(tool_names), fixture["tools_section_names"]);
    let servers: Vec<String> = section_lines(&system, "mcp_servers")
        .into_iter()
        .filter(|l| l.starts_with("- "))
        .collect();
    assert_eq!(json!(servers), fixture["mcp_servers_lines"]);
    assert!(system.trim_end().ends_with("</mcp_servers>"), "{system}");

    let end = tool_end(&events, 0);
    let want = &fixture["result"];
    assert_eq!(end["isError"], want["isError"], "{end}");
    let result = &end["result"];
    assert_head(result, "completed");
    assert_eq!(
        result["content"].as_array().unwrap().len() as u64,
        want["blocks"]
    );
    let (items, console) = items_and_console(result["content"][1]["text"].as_str().unwrap());
    assert_eq!(items.len(), 5, "{items:?}");
    for (i, w) in want["items"].as_array().unwrap().iter().enumerate() {
        if let Some(w) = w.as_str() {
            assert_eq!(items[i], w, "item {}", i + 1);
        }
    }
    let decl = items[2]
        .split("```ts\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .unwrap_or_else(|| panic!("{}", items[2]));
    assert_eq!(decl, want["declaration"].as_str().unwrap());
    assert!(items[2].starts_with("Add two numbers\n"), "{}", items[2]);
    assert_eq!(console.as_deref(), want["console"].as_str());
    let call = &result["details"]["calls"][0];
    let mut keys: Vec<&String> = call.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(json!(keys), want["details_call_keys"]);
    for k in ["name", "args", "status"] {
        assert_eq!(call[k], want["details_call"][k], "{call}");
    }
    assert_eq!(call["id"], json!("call_fake_1_0/1"));
    // The MCP tools themselves are not declared.
    assert!(offered_tools(&fake, 1)
        .iter()
        .all(|t| !t.starts_with("mcp__")));
}

/// The `<mcp_servers>` lines follow upstream 1.6's rules (`extensions/mcp/index.js`): servers
/// sorted by name, the namespace written as in the tool names (`-` → `_`), and a summary cut
/// to 250 characters, the cut marked by `…`.
#[test]
fn mcp_servers_lines_use_the_tool_namespace_and_cut_long_summaries() {
    let long = format!("Tools for the dev box. {}", "word ".repeat(100));
    let (fake, root) = setup(Script::new([Turn::text("done")]), DEFAULT_MODEL);
    write_mcp(
        &root,
        json!({
            "dev-box": {"command": fake_mcp(), "description": long},
            "alpha": {"command": fake_mcp(), "exposure": "deferred", "description": "Alpha\nsecond line"}
        }),
    );
    let mut agent = root.spawn();
    prompt(&mut agent, "go");
    let system = system_text(&request(&fake, 0));
    let servers: Vec<String> = section_lines(&system, "mcp_servers")
        .into_iter()
        .filter(|l| l.starts_with("- "))
        .collect();
    let cut: String = long.chars().take(249).collect();
    assert_eq!(
        servers,
        vec![
            "- mcp__alpha (tool_search): Alpha".to_string(),
            format!("- mcp__dev_box (codemode): {}…", cut.trim_end()),
        ]
    );
}

/// `deferred`: only `tool_search` is declared at first; a search loads the match, which is
/// declared from the next LLM call on and called directly — as upstream's recording.
#[test]
fn deferred_tools_are_found_with_tool_search_and_then_called() {
    let fixture: Value = serde_json::from_str(include_str!("mcp_upstream_deferred.json")).unwrap();
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("tool_search", json!({"query": "echo"})),
            Turn::text("").with_tool_call("mcp__fake__echo", json!({"text": "hi"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(
        &root,
        json!({"fake": {"command": fake_mcp(), "exposure": "deferred", "description": "A fake server for tests"}}),
    );
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let per_request: Vec<Vec<String>> = (0..3).map(|i| offered_tools(&fake, i)).collect();
    assert_eq!(json!(per_request), fixture["tools_per_request"]);
    let body = request(&fake, 0);
    assert_eq!(
        Value::Array(tools_summary(&body)),
        strip_descriptions(&fixture["tools"])
    );
    let system = system_text(&body);
    let servers: Vec<String> = section_lines(&system, "mcp_servers")
        .into_iter()
        .filter(|l| l.starts_with("- "))
        .collect();
    assert_eq!(json!(servers), fixture["mcp_servers_lines"]);
    let search = tool_end_of(&events, 1, 0);
    assert_eq!(
        search["result"]["details"], fixture["search_details"],
        "{search}"
    );
    let lines: Vec<String> = text_of(&search["result"])
        .lines()
        .filter(|l| l.starts_with("- "))
        .map(str::to_string)
        .collect();
    assert_eq!(json!(lines), fixture["search_lines"]);
    let mut echo = tool_end_of(&events, 2, 0);
    echo.as_object_mut()
        .unwrap()
        .retain(|k, _| ["toolName", "result", "isError"].contains(&k.as_str()));
    assert_eq!(echo, fixture["echo_end"]);
}

/// A script that never ends stops at its `timeout_ms` with an error result that keeps the
/// output made before; one that allocates without bound hits the VM's memory limit; both
/// leave the session serving (the last turn answers).
#[test]
fn scripts_hit_the_time_and_memory_limits() {
    let (_fake, root) = setup(
        Script::new([
            codemode("// @options: {\"timeout_ms\": 300}\ntext('before');\nwhile (true) {}"),
            codemode("const a = [];\nwhile (true) a.push('x'.repeat(1000000) + a.length);"),
            codemode("text(1);\n// @options: {}"),
            Turn::text("still here"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": {"command": fake_mcp()}}));
    let mut agent = root.spawn();
    let started = Instant::now();
    let events = prompt(&mut agent, "go");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );

    let timeout = tool_end_of(&events, 1, 0);
    assert_eq!(timeout["isError"], json!(true), "{timeout}");
    assert_head(&timeout["result"], "failed");
    let text = text_of(&timeout["result"]);
    assert!(
        text.contains("before\nScript error:\nScript timed out after 300 ms"),
        "{text}"
    );
    assert!(text.ends_with("No tool calls were made."), "{text}");

    let oom = tool_end_of(&events, 2, 0);
    assert_eq!(oom["isError"], json!(true), "{oom}");
    let text = text_of(&oom["result"]);
    assert!(
        text.contains("Script error:\nInternalError: out of memory"),
        "{text}"
    );

    let misplaced = tool_end_of(&events, 3, 0);
    assert_eq!(misplaced["isError"], json!(true), "{misplaced}");
    let text = text_of(&misplaced["result"]);
    assert!(text.contains("line 2"), "{text}");
    assert!(!text.contains("Script"), "fails before running: {text}");

    assert_eq!(
        agent
            .events()
            .iter()
            .rev()
            .find(|v| kind(v) == "message_end")
            .unwrap()["message"]["content"][0]["text"],
        json!("still here")
    );
}

/// Without MCP, `defaultTools` `+codemode` activates the tool over the built-in tools: a
/// script runs `bash` and gets its structured result; mode `only` hides the built-in tools from
/// the model and lists their declarations in the `codemode` description instead.
#[test]
fn codemode_without_mcp_calls_builtin_tools_and_mode_only_hides_them() {
    let (fake, root) = setup(
        Script::new([
            codemode("const r = await tools.bash({ command: 'echo hi' });\nreturn r.exit_code + ':' + r.output.trim();"),
            codemode("try { await tools.read({ path: 'missing.txt' }); } catch (e) { text('rejected: ' + (e instanceof Error)); }\nconst n = await tools.nope?.();\nreturn typeof n;"),
            Turn::text("done"),
            Turn::text("two"),
        ]),
        DEFAULT_MODEL,
    );
    root.merge_settings(json!({"defaultTools": ["+codemode"]}));
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    assert_eq!(
        offered_tools(&fake, 0),
        vec!["read", "bash", "edit", "write", "codemode"]
    );
    let first = tool_end_of(&events, 1, 0);
    assert_eq!(
        text_of(&first["result"]).lines().last(),
        Some("0:hi"),
        "{first}"
    );
    let second = tool_end_of(&events, 2, 0);
    let text = text_of(&second["result"]);
    assert!(text.contains("rejected: true"), "{text}");
    assert!(text.contains("undefined"), "{text}");
    assert_eq!(
        second["result"]["details"]["calls"][0]["status"],
        json!("error")
    );
    drop(agent);

    root.merge_settings(json!({"codemode": {"mode": "only"}}));
    let mut agent = root.spawn();
    prompt(&mut agent, "again");
    let n = fake.llm_requests().len();
    let body = request(&fake, n - 1);
    assert_eq!(offered_tools(&fake, n - 1), vec!["codemode"]);
    let description = body["tools"][0]["function"]["description"]
        .as_str()
        .unwrap();
    assert!(description.contains("declare const tools: { bash(args: { command: string; timeout?: number; }): Promise<{ output: string;"), "{description}");
}

/// Scripts see every non-hidden tool of a server, `direct` ones included, and an MCP result
/// with `isError` resolves (it is the server's answer) while its call is recorded as an error.
#[test]
fn codemode_calls_direct_tools_and_resolves_mcp_errors() {
    let (_fake, root) = setup(
        Script::new([
            codemode("const a = await tools.mcp__fake__add({ a: 2, b: 3 });\nconst f = await tools.mcp__fake__fail({});\nreturn [a.content[0].text, f.isError];"),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    // One codemode tool activates codemode; the direct ones are callable from scripts too.
    write_mcp(
        &root,
        json!({"fake": {"command": fake_mcp(), "exposure": "direct", "toolExposure": {"log": "codemode"}}}),
    );
    let mut agent = root.spawn();
    let events = prompt(&mut agent, "go");
    let end = tool_end(&events, 0);
    assert_eq!(end["isError"], json!(false), "{end}");
    let text = text_of(&end["result"]);
    assert!(text.ends_with("[\"5\",true]"), "{text}");
    let calls = &end["result"]["details"]["calls"];
    assert_eq!(calls[0]["status"], json!("ok"));
    assert_eq!(calls[1]["status"], json!("error"));
}

/// `abort` stops a script at once, both in a loop that never calls a tool (QuickJS's
/// interrupt handler) and while it waits for a slow MCP call; the session keeps serving.
#[test]
fn abort_stops_a_running_script() {
    let (_fake, root) = setup(
        Script::new([
            codemode("while (true) {}"),
            codemode("await tools.mcp__fake__sleep({ ms: 20000 });"),
            Turn::text("after"),
        ]),
        DEFAULT_MODEL,
    );
    write_mcp(&root, json!({"fake": {"command": fake_mcp()}}));
    let mut agent = root.spawn();
    for (n, message) in ["one", "two"].iter().enumerate() {
        let from = agent.len();
        agent.send(json!({"id": format!("p{n}"), "type": "prompt", "message": message}));
        agent.wait_from(from, LIVENESS, |v| kind(v) == "tool_execution_start");
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        agent.send(json!({"id": format!("a{n}"), "type": "abort"}));
        let (i, _) = agent.wait_from(from, LIVENESS, |v| kind(v) == "tool_execution_end");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let end = agent.events()[i].clone();
        assert_eq!(end["isError"], json!(true), "{end}");
        agent.wait_from(i, LIVENESS, |v| kind(v) == "agent_settled");
    }
    let events = prompt(&mut agent, "three");
    assert!(events
        .iter()
        .any(|v| kind(v) == "message_end" && v["message"]["content"][0]["text"] == json!("after")));
}

/// `store()` values written by a successful script are kept as `codemode-store` entries of the
/// session: the next script loads them, also after a resume (`-c`); a failed script's writes
/// are dropped, and storing `undefined` deletes a key.
#[test]
fn stored_values_survive_scripts_and_resume() {
    let (_fake, root) = setup(
        Script::new([
            codemode("store('cursor', { page: 2 });\nstore('gone', 1);\nstore('gone', undefined);"),
            Turn::text("one"),
            codemode("store('cursor', 'lost');\nthrow new Error('no');"),
            Turn::text("two"),
            codemode("return [load('cursor'), load('gone')];"),
            Turn::text("three"),
        ]),
        DEFAULT_MODEL,
    );
    root.merge_settings(json!({"defaultTools": ["+codemode"]}));
    let mut agent = root.spawn_with_session();
    prompt(&mut agent, "one");
    let events = prompt(&mut agent, "two");
    let failed = events
        .iter()
        .rev()
        .find(|v| kind(v) == "tool_execution_end")
        .unwrap();
    assert_eq!(failed["isError"], json!(true), "{failed}");
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    drop(agent);
    let file = root.session_files().pop().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let stores: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "custom" && v["customType"] == "codemode-store")
        .collect();
    assert_eq!(stores.len(), 1, "{text}");
    assert_eq!(
        stores[0]["data"],
        json!({"set": {"cursor": {"page": 2}}, "delete": ["gone"]})
    );

    let mut agent = root.spawn_with(true, &["-c"]);
    let events = prompt(&mut agent, "three");
    let end = events
        .iter()
        .rev()
        .find(|v| kind(v) == "tool_execution_end")
        .unwrap();
    assert!(
        text_of(&end["result"]).ends_with("[{\"page\":2},null]"),
        "{end}"
    );
}

/// The `mcp_servers` lines of a section text (`<mcp_servers>\n<intro>\n- …\n</mcp_servers>`),
/// the intro (prose) left out.
fn server_lines(section: &str) -> Value {
    let inner = section
        .strip_prefix("<mcp_servers>\n")
        .and_then(|s| s.strip_suffix("\n</mcp_servers>"))
        .unwrap_or_else(|| panic!("{section:?}"));
    json!(inner.lines().skip(1).collect::<Vec<_>>())
}

/// A server that connects after the first prompt: the second prompt starts with a system
/// message patching only `mcp_servers` (now with the server's instructions), placed before the
/// user message and recorded in the session; the third prompt adds none; every request's
/// system prompt holds the section as it then is. Compared with upstream 1.6's recording
/// (`mcp_upstream_section_update.json`). The server waits for a gate file, opened after the
/// first run; `/mcp` waits until it is connected.
#[test]
fn a_late_servers_instructions_reach_the_conversation_as_a_section_update() {
    let fixture: Value =
        serde_json::from_str(include_str!("mcp_upstream_section_update.json")).unwrap();
    let (fake, root) = setup(
        Script::new([
            Turn::text("first"),
            Turn::text("second"),
            Turn::text("third"),
        ]),
        DEFAULT_MODEL,
    );
    let gate = root.tmp.join("gate");
    let cmd = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; exec '{}' --instructions 'Late server instructions.\nSecond line.'",
        gate.display(),
        fake_mcp()
    );
    write_mcp(
        &root,
        json!({"late": {"command": "sh", "args": ["-c", cmd]}}),
    );
    let mut agent = root.spawn_with_session();
    let mut runs = Vec::new();
    let mut from = 0;
    for (i, text) in ["one", "two", "three"].into_iter().enumerate() {
        if i == 1 {
            std::fs::write(&gate, "").unwrap();
            let r = agent.request(json!({"id": "m", "type": "prompt", "message": "/mcp"}));
            assert_eq!(r["data"], json!({"disposition": "handled"}), "{r}");
        }
        let events = prompt(&mut agent, text);
        let run: Vec<Value> = events[from..]
            .iter()
            .filter(|v| kind(v) == "message_end")
            .map(|v| {
                let m = &v["message"];
                if m["role"] != "system" {
                    return json!({"role": m["role"]});
                }
                let sections = m["sections"].as_object().unwrap();
                let mut out = json!({
                    "role": "system",
                    "keys": m.as_object().unwrap().keys().collect::<Vec<_>>(),
                    "mcp_servers_lines": server_lines(sections["mcp_servers"].as_str().unwrap()),
                });
                if sections.len() > 1 {
                    out["section_names"] = json!(sections.keys().collect::<Vec<_>>());
                } else {
                    assert_eq!(m["content"], json!(""), "{m}");
                }
                out
            })
            .collect();
        runs.push(Value::Array(run));
        from = events.len();
    }
    assert_eq!(Value::Array(runs), fixture["runs"]);

    let file = &root.session_files()[0];
    let entries: Vec<Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "message")
        .map(|e| {
            json!({
                "entry_keys": e.as_object().unwrap().keys().collect::<Vec<_>>(),
                "role": e["message"]["role"],
                "message_keys": e["message"].as_object().unwrap().keys().collect::<Vec<_>>(),
            })
        })
        .collect();
    assert_eq!(Value::Array(entries), fixture["session_messages"]);

    let requests: Vec<Value> = (0..3)
        .map(|i| {
            let body = request(&fake, i);
            let system = system_text(&body);
            let at = system.find("<mcp_servers>").unwrap_or_else(|| panic!("{system}"));
            json!({
                "roles": body["messages"].as_array().unwrap().iter().map(|m| m["role"].clone()).collect::<Vec<_>>(),
                "mcp_servers_lines": server_lines(&system[at..]),
            })
        })
        .collect();
    assert_eq!(Value::Array(requests), fixture["requests"]);
}
