//! Extension events that shape a run and tool semantics (issue 12): `before_agent_start`,
//! `context`, `model_select`, `user_bash`, the agent/turn/message event payloads, handler
//! composition across extensions, and registered tools (argument validation and coercion,
//! `--tools`/`-nt` selection, abort signals, `onUpdate`). The extensions are our own.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};

fn ui_notes(agent: &RpcAgent) -> Vec<String> {
    agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "extension_ui_request" && v["method"] == "notify")
        .map(|v| v["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn tool_end(agent: &RpcAgent) -> Value {
    agent
        .events()
        .into_iter()
        .find(|v| kind(v) == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {}", agent.dump()))
}

/// The system prompt the fake model received in request `i` (OpenAI chat: the first message).
pub(crate) fn system_of(fake: &pi_fakellm::FakeLlm, i: usize) -> String {
    let body: Value = serde_json::from_str(&fake.requests()[i].body_text()).unwrap();
    body["messages"][0]["content"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| body["messages"][0]["content"].to_string())
}

#[test]
fn before_agent_start_chains_system_prompts_and_injects_messages() {
    let a = r#"export default function (pi) {
      pi.on("before_agent_start", (event, ctx) => {
        if (event.prompt !== "first") return;
        ctx.ui.notify("A sees " + event.messageType + " " + (event.systemPrompt === ctx.getSystemPrompt()));
        return { systemPrompt: event.systemPrompt + "\nRULE-A", message: { customType: "note-a", content: "context from A", display: true } };
      });
    }"#;
    let b = r#"export default function (pi) {
      pi.on("before_agent_start", (event, ctx) => {
        if (event.prompt !== "first") return;
        ctx.ui.notify("B sees A: " + event.systemPrompt.endsWith("RULE-A") + " " + ctx.getSystemPrompt().endsWith("RULE-A"));
        return { systemPrompt: event.systemPrompt + "\nRULE-B", message: { customType: "note-b", content: [{ type: "text", text: "context from B" }], display: false } };
      });
    }"#;
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("a.js", a);
    root.write_cwd_file("b.js", b);
    let mut agent = root.spawn_with(true, &["-e", "a.js", "-e", "b.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "first"}));
    agent.wait_event("agent_settled");
    assert_eq!(
        ui_notes(&agent),
        ["A sees user true", "B sees A: true true"],
        "{}",
        agent.dump()
    );
    let sys = system_of(&fake, 0);
    assert!(sys.ends_with("\nRULE-A\nRULE-B"), "{sys}");
    let body = fake.requests()[0].body_text();
    let (u, ca, cb) = (
        body.find("first").unwrap(),
        body.find("context from A").expect("message of A sent"),
        body.find("context from B").expect("message of B sent"),
    );
    assert!(u < ca && ca < cb, "prompt, then A, then B: {body}");
    // The custom messages are announced and stored as custom_message entries.
    let customs: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "message_end" && v["message"]["role"] == "custom")
        .collect();
    assert_eq!(customs.len(), 2, "{}", agent.dump());
    assert_eq!(customs[0]["message"]["customType"], "note-a");
    assert_eq!(customs[0]["message"]["display"], true);
    let file = root.session_files().pop().expect("session file");
    let entries = check_session_file(&file).unwrap();
    let stored: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "custom_message")
        .collect();
    assert_eq!(stored.len(), 2, "{entries:?}");
    assert_eq!(stored[1]["customType"], "note-b");
    // The replaced prompt held for that run only.
    agent.request(json!({"id": "p2", "type": "prompt", "message": "second"}));
    agent.wait_event("agent_settled");
    let sys2 = system_of(&fake, 1);
    assert!(!sys2.contains("RULE-A"), "{sys2}");
}

/// `event.systemPromptOptions` edits (upstream 1.6 docs/extensions.md "before_agent_start"),
/// as upstream does them on the fake server with this extension: removing a tool from
/// `selectedTools` takes it out of the request's tools and the prompt's tool list, records a
/// system message `toolsRemoved: [{name: "bash"}]`, and holds for later runs (as
/// `pi.setActiveTools`); `forceSystemPrompt` is the whole system prompt of that run only, and
/// later handlers see it as `event.systemPrompt`.
#[test]
fn before_agent_start_system_prompt_options_select_tools_and_force_the_prompt() {
    let ext = r#"export default function (pi) {
      pi.on("before_agent_start", (event) => {
        const o = event.systemPromptOptions;
        if (event.prompt === "tools") o.selectedTools = o.selectedTools.filter((t) => t !== "bash");
        if (event.prompt === "force") o.forceSystemPrompt = "FORCED PROMPT";
      });
      pi.on("before_agent_start", (event, ctx) => {
        if (event.prompt === "force") ctx.ui.notify("next sees " + event.systemPrompt + " " + ctx.getSystemPrompt());
      });
    }"#;
    let (fake, root) = setup(
        Script::new([
            Turn::text("r0"),
            Turn::text("r1"),
            Turn::text("r2"),
            Turn::text("r3"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("spo.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "spo.js"]);
    for (i, text) in ["plain", "tools", "force", "plain"].iter().enumerate() {
        agent.prompt_settled(&format!("p{i}"), text);
    }
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 4, "{}", agent.dump());
    let tools = |i: usize| -> Vec<String> {
        reqs[i].body["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(tools(0), ["read", "bash", "edit", "write"]);
    for i in 1..4 {
        assert_eq!(tools(i), ["read", "edit", "write"], "request {i}");
    }
    assert!(system_of(&fake, 0).contains("- bash:"));
    assert!(
        !system_of(&fake, 1).contains("- bash:"),
        "{}",
        system_of(&fake, 1)
    );
    assert_eq!(system_of(&fake, 2), "FORCED PROMPT");
    let last = system_of(&fake, 3);
    assert!(
        !last.contains("FORCED") && !last.contains("- bash:"),
        "{last}"
    );
    assert_eq!(
        ui_notes(&agent),
        ["next sees FORCED PROMPT FORCED PROMPT"],
        "{}",
        agent.dump()
    );
    let patches: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "message_end" && v["message"]["role"] == "system")
        .map(|v| v["message"].clone())
        .collect();
    assert_eq!(patches.len(), 2, "{}", agent.dump());
    assert_eq!(patches[1]["toolsRemoved"], json!([{"name": "bash"}]));
    assert!(patches[1]["sections"]["tools"].is_string());
}

#[test]
fn context_handlers_change_what_the_model_sees_but_not_the_session() {
    let ext = r#"export default function (pi) {
      pi.on("context", (event) => {
        const roles = event.messages.map((m) => m.role).join(",");
        const messages = event.messages.map((m) => m.role === "user"
          ? { ...m, content: [{ type: "text", text: "[redacted " + roles + "]" }] } : m);
        return { messages };
      });
      pi.on("context", (event) => {
        event.messages.push({ role: "user", content: [{ type: "text", text: "second saw " + event.messages[0].content[0].text }], timestamp: 1 });
      });
    }"#;
    let (fake, root) = setup(Script::new([Turn::text("ok")]), DEFAULT_MODEL);
    root.write_cwd_file("c.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "c.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "SECRET text"}));
    agent.wait_event("agent_settled");
    let body = fake.requests()[0].body_text();
    assert!(!body.contains("SECRET"), "{body}");
    assert!(
        body.contains("[redacted user]"),
        "no system message shown: {body}"
    );
    assert!(
        body.contains("second saw [redacted user]"),
        "chained: {body}"
    );
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    assert!(msgs.to_string().contains("SECRET text"));
    assert!(!msgs.to_string().contains("redacted"));
}

/// Upstream 1.6 `context_with_system` (docs/extensions.md): after the `context` handlers the
/// full transcript, leading system message included, goes to the handler; what it returns is
/// sent as it is and owns the request's prompt and tool declarations. Dropping the leading
/// system message is reported with upstream's text and the request goes out without prompt or
/// tools; a handler that changes nothing leaves the request as without the hook.
#[test]
fn context_with_system_owns_the_request_prompt_and_tools() {
    let ext = r#"export default function (pi) {
      pi.on("context", (event) => {
        return { messages: event.messages.map((m) => m.role === "user" ? { ...m, content: [{ type: "text", text: "CTX " + m.content[0].text }] } : m) };
      });
      pi.on("context_with_system", (event, ctx) => {
        const head = event.messages[0];
        const last = event.messages[event.messages.length - 1];
        const said = last.content[0].text;
        ctx.ui.notify("head " + head.role + " " + (head.toolsAdded || []).map((t) => t.name).join(",") + " | " + said);
        if (said.endsWith("own")) {
          const read = head.toolsAdded.find((t) => t.name === "read");
          return { messages: [{ role: "system", content: "OWNED PROMPT", timestamp: 1, toolsAdded: [read] }, ...event.messages.slice(1)] };
        }
        if (said.endsWith("drop")) return { messages: event.messages.slice(1) };
        return undefined;
      });
    }"#;
    let (fake, root) = setup(
        Script::new([Turn::text("a"), Turn::text("b"), Turn::text("c")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("w.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "w.js"]);
    for (i, word) in ["keep", "own", "drop"].iter().enumerate() {
        agent.request(json!({"id": format!("p{i}"), "type": "prompt", "message": word}));
        agent.wait_event("agent_settled");
    }
    let notes = ui_notes(&agent);
    assert_eq!(notes.len(), 3, "{}", agent.dump());
    assert!(
        notes[0].starts_with("head system read,bash,edit,write | CTX keep"),
        "after the context handlers, system head shown: {notes:?}"
    );
    let body =
        |i: usize| -> Value { serde_json::from_str(&fake.requests()[i].body_text()).unwrap() };
    let tools = |b: &Value| -> Vec<String> {
        b["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Unchanged: the turn's own prompt and tools.
    let keep = body(0);
    assert_eq!(tools(&keep), ["read", "bash", "edit", "write"], "{keep}");
    assert_ne!(system_of(&fake, 0), "OWNED PROMPT");
    // Owned: the handler's prompt and its one tool.
    let own = body(1);
    assert_eq!(system_of(&fake, 1), "OWNED PROMPT", "{own}");
    assert_eq!(tools(&own), ["read"], "{own}");
    assert!(own.to_string().contains("CTX own"), "{own}");
    // Dropped head: no prompt, no tools, and upstream's error text.
    let drop = body(2);
    assert_eq!(drop["messages"][0]["role"], "user", "{drop}");
    assert!(tools(&drop).is_empty(), "{drop}");
    let errors: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "extension_error")
        .collect();
    assert_eq!(errors.len(), 1, "{}", agent.dump());
    assert_eq!(errors[0]["event"], "context_with_system");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("Handler removed the leading system message;"),
        "{}",
        errors[0]
    );
    // Nothing of it is stored.
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    assert!(!msgs.to_string().contains("OWNED PROMPT") && !msgs.to_string().contains("CTX"));
}

#[test]
fn model_select_fires_on_set_and_cycle_before_the_response() {
    let ext = r#"export default function (pi) {
      pi.on("model_select", (event, ctx) => {
        const prev = event.previousModel ? event.previousModel.provider + "/" + event.previousModel.id : "none";
        ctx.ui.notify(`${event.source} ${prev} -> ${event.model.provider}/${event.model.id}`);
      });
    }"#;
    let (_fake, root) = setup(Script::default(), DEFAULT_MODEL);
    root.write_cwd_file("m.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "m.js"]);
    let r = agent.request(
        json!({"id": "s", "type": "set_model", "provider": "fake-openai", "modelId": "fake-gpt"}),
    );
    assert_eq!(r["success"], true, "{r}");
    let notes = ui_notes(&agent);
    assert_eq!(
        notes,
        ["set fake-openai/fake-gpt-mini -> fake-openai/fake-gpt"],
        "before the response: {}",
        agent.dump()
    );
    // The same model again: no event.
    agent.request(
        json!({"id": "s2", "type": "set_model", "provider": "fake-openai", "modelId": "fake-gpt"}),
    );
    let c = agent.request(json!({"id": "c", "type": "cycle_model"}));
    let next = format!(
        "{}/{}",
        c["data"]["model"]["provider"].as_str().unwrap(),
        c["data"]["model"]["id"].as_str().unwrap()
    );
    let notes = ui_notes(&agent);
    assert_eq!(notes.len(), 2, "{}", agent.dump());
    assert_eq!(notes[1], format!("cycle fake-openai/fake-gpt -> {next}"));
}

#[test]
fn user_bash_handlers_replace_or_run_the_command() {
    let ext = r#"import { spawn } from "node:child_process";
    export default function (pi) {
      pi.on("user_bash", (event) => {
        if (event.command === "pass") return undefined;
        if (event.command === "fake") return { result: { output: "canned " + event.excludeFromContext + " " + (event.cwd === process.cwd()), exitCode: 3, cancelled: false, truncated: false } };
        if (event.command === "bad") return { nonsense: true };
        if (event.command.startsWith("remote")) return { operations: {
          exec(command, cwd, { onData, signal }) {
            return new Promise((resolve) => {
              const child = spawn("sh", ["-c", "printf 'via ops: '; " + command.slice(7)], { cwd });
              child.stdout.on("data", onData);
              signal.addEventListener("abort", () => child.kill("SIGKILL"));
              child.on("close", (code) => resolve({ exitCode: code }));
            });
          },
        } };
      });
    }"#;
    let (fake, root) = setup(Script::new([Turn::text("ok")]), DEFAULT_MODEL);
    root.write_cwd_file("u.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "u.js"]);
    let r = agent.request(
        json!({"id": "b1", "type": "bash", "command": "fake", "excludeFromContext": true}),
    );
    assert_eq!(
        r["data"],
        json!({"output": "canned true true", "exitCode": 3, "cancelled": false, "truncated": false}),
        "{r}"
    );
    let r = agent.request(json!({"id": "b2", "type": "bash", "command": "remote echo hi; exit 4"}));
    assert_eq!(r["data"]["output"], "via ops: hi\n", "{r}");
    assert_eq!(r["data"]["exitCode"], 4);
    let deltas: String = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "bash_execution_update" && v["id"] == "b2")
        .map(|v| v["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(deltas, "via ops: hi\n");
    let r = agent.request(json!({"id": "b3", "type": "bash", "command": "pass"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["exitCode"], 127, "ran locally: {r}");
    let r = agent.request(json!({"id": "b4", "type": "bash", "command": "bad"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("Invalid user_bash handler result"),
        "{r}"
    );
    let err = agent.wait_event("extension_error");
    assert_eq!(err["event"], "user_bash");
    // The replaced results are recorded like local ones (the excluded one stays out).
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let body = fake.requests()[0].body_text();
    assert!(body.contains("via ops: hi"), "{body}");
    assert!(!body.contains("canned"), "{body}");
}

#[test]
fn agent_turn_and_message_events_carry_upstream_payloads() {
    let ext = r#"export default function (pi) {
      const seen = [];
      pi.on("agent_start", (e) => { seen.push("agent_start:" + Object.keys(e).join("+")); });
      pi.on("turn_start", (e) => { seen.push("turn_start:" + e.turnIndex + ":" + (typeof e.timestamp)); });
      pi.on("message_start", (e) => { seen.push("message_start:" + e.message.role); });
      pi.on("tool_execution_start", (e) => { seen.push("tool_start:" + e.toolName + ":" + e.args.command); });
      pi.on("tool_execution_end", (e) => { seen.push("tool_end:" + e.isError + ":" + (typeof e.durationMs)); });
      pi.on("turn_end", (e) => { seen.push("turn_end:" + e.turnIndex + ":" + e.message.role + ":" + e.toolResults.length); });
      pi.on("agent_end", (e, ctx) => { seen.push("agent_end:" + e.messages.length + ":" + ("willRetry" in e)); ctx.ui.notify(seen.join(" ")); });
    }"#;
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "true"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("e.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "e.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let (at, n) = agent.wait_from(0, LIVENESS, |v| {
        kind(v) == "extension_ui_request" && v["method"] == "notify"
    });
    // Handlers of agent-loop events run before the client sees the event (upstream order).
    let (end_at, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_end");
    assert!(at < end_at, "notify before agent_end: {}", agent.dump());
    assert_eq!(
        n["message"],
        "agent_start:type turn_start:0:number message_start:system message_start:user message_start:assistant \
         tool_start:bash:true tool_end:false:number message_start:toolResult \
         turn_end:0:assistant:1 turn_start:1:number message_start:assistant \
         turn_end:1:assistant:0 agent_end:5:false",
        "{}",
        agent.dump()
    );
}

/// Upstream's "emit to extensions first", with handlers that take time: a `turn_start` and a
/// `tool_execution_start` handler each await a 300 ms timer, note the time and then notify.
/// The client sees each notify before the event it came from, and the run waits for them: the
/// model request comes after the `turn_start` handler finished, the tool runs after the
/// `tool_execution_start` handler finished (the loop awaits its handlers, issue 23).
#[test]
fn slow_loop_event_handlers_hold_the_run_and_come_before_the_event() {
    let ext = r#"import { writeFileSync } from "node:fs";
    export default function (pi) {
      const slow = () => new Promise((r) => setTimeout(r, 300));
      pi.on("turn_start", async (e, ctx) => {
        if (e.turnIndex !== 0) return;
        await slow();
        writeFileSync("turn_done.txt", String(Date.now()));
        ctx.ui.notify("turn handler done");
      });
      pi.on("tool_execution_start", async (e, ctx) => {
        await slow();
        writeFileSync("tool_done.txt", String(Date.now()));
        ctx.ui.notify("tool handler done");
      });
    }"#;
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "date +%s%3N > tool_ran.txt"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("slow.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "slow.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let notify = |text: &'static str| {
        move |v: &Value| {
            kind(v) == "extension_ui_request" && v["method"] == "notify" && v["message"] == text
        }
    };
    let (turn_note, _) = agent.wait_from(0, LIVENESS, notify("turn handler done"));
    let (turn_start, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "turn_start");
    assert!(
        turn_note < turn_start,
        "notify before turn_start: {}",
        agent.dump()
    );
    let (tool_note, _) = agent.wait_from(0, LIVENESS, notify("tool handler done"));
    let (tool_start, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "tool_execution_start");
    assert!(
        tool_note < tool_start,
        "notify before tool_execution_start: {}",
        agent.dump()
    );
    let ms = |file: &str| -> f64 {
        let text = std::fs::read_to_string(root.cwd.join(file)).unwrap();
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{file}: {text:?}: {e}"))
    };
    let requested = fake.requests()[0].t * 1000.0;
    let turn_done = ms("turn_done.txt");
    assert!(
        requested >= turn_done - 1.0,
        "model request at {requested} before the turn_start handler finished at {turn_done}"
    );
    let (tool_ran, tool_done) = (ms("tool_ran.txt"), ms("tool_done.txt"));
    assert!(
        tool_ran >= tool_done - 1.0,
        "tool ran at {tool_ran} before the tool_execution_start handler finished at {tool_done}"
    );
}

#[test]
fn handlers_compose_in_load_then_registration_order() {
    let a = r#"import { writeFileSync } from "node:fs";
    export default function (pi) {
      pi.on("input", (e) => ({ action: "transform", text: e.text + " a1" }));
      pi.on("input", (e) => ({ action: "transform", text: e.text + " a2" }));
      pi.on("tool_call", (e) => { e.input.command = e.input.command + " A"; });
      pi.on("tool_result", (e) => ({ content: [{ type: "text", text: "one" }] }));
    }"#;
    let b = r#"import { writeFileSync } from "node:fs";
    export default function (pi) {
      pi.on("input", (e) => ({ action: "transform", text: e.text + " b" }));
      pi.on("tool_call", (e) => ({ block: true, reason: "B blocked: " + e.input.command }));
      pi.on("tool_call", () => { writeFileSync("later-ran", "x"); });
      pi.on("tool_result", (e) => ({ content: [{ type: "text", text: e.content[0].text + " two" }] }));
    }"#;
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "echo x"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("a.js", a);
    root.write_cwd_file("b.js", b);
    let mut agent = root.spawn_with(false, &["-e", "a.js", "-e", "b.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "in"}));
    agent.wait_event("agent_settled");
    assert!(fake.requests()[0].body_text().contains("in a1 a2 b"));
    let end = tool_end(&agent);
    assert_eq!(end["result"]["content"][0]["text"], "B blocked: echo x A");
    assert!(
        !root.cwd.join("later-ran").exists(),
        "a block short-circuits"
    );
    // tool_result chain (the blocked call skipped it; a second prompt runs a tool).
    let a2 = r#"export default function (pi) {
      pi.on("tool_result", () => ({ content: [{ type: "text", text: "one" }], details: { by: "a" } }));
    }"#;
    let b2 = r#"export default function (pi) {
      pi.on("tool_result", (e) => ({ content: [{ type: "text", text: e.content[0].text + " two " + e.details.by }] }));
    }"#;
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "echo x"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("a.js", a2);
    root.write_cwd_file("b.js", b2);
    let mut agent = root.spawn_with(false, &["-e", "a.js", "-e", "b.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(end["result"]["content"][0]["text"], "one two a");
    assert_eq!(end["result"]["details"], json!({"by": "a"}));
}

const COUNT_TOOL: &str = r#"import { Type } from "typebox";
export default function (pi) {
  pi.registerTool({
    name: "count", label: "Count", description: "Counts",
    promptSnippet: "Count things",
    promptGuidelines: ["Count before you guess."],
    parameters: Type.Object({ n: Type.Number(), loud: Type.Optional(Type.Boolean()) }),
    async execute(id, params) {
      return { content: [{ type: "text", text: typeof params.n + ":" + params.n + ":" + typeof params.loud }] };
    },
  });
}"#;

#[test]
fn registered_tool_arguments_are_validated_and_coerced() {
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("count", json!({"n": "3", "loud": "true"})),
            Turn::tool_call("count", json!({"loud": true})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("t.js", COUNT_TOOL);
    let mut agent = root.spawn_with(false, &["-e", "t.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let ends: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["isError"], false, "{}", agent.dump());
    assert_eq!(ends[0]["result"]["content"][0]["text"], "number:3:boolean");
    assert_eq!(ends[1]["isError"], true);
    let text = ends[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Validation failed for tool \"count\":\n  - n: "),
        "{text}"
    );
    // Snippet and guideline are in the system prompt.
    let sys = system_of(&fake, 0);
    assert!(sys.contains("Count things"), "{sys}");
    assert!(sys.contains("Count before you guess."), "{sys}");
}

#[test]
fn tool_flags_select_extension_tools() {
    let declared = |args: &[&str]| -> Vec<String> {
        let (fake, root) = setup(Script::new([Turn::text("ok")]), DEFAULT_MODEL);
        root.write_cwd_file("t.js", COUNT_TOOL);
        let mut all = vec!["-e", "t.js"];
        all.extend_from_slice(args);
        let mut agent = root.spawn_with(false, &all);
        agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
        agent.wait_event("agent_settled");
        let body: Value = serde_json::from_str(&fake.requests()[0].body_text()).unwrap();
        body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|x| x["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(declared(&[]), ["read", "bash", "edit", "write", "count"]);
    assert!(declared(&["-nt"]).is_empty());
    assert_eq!(declared(&["-nbt"]), ["count"]);
    assert_eq!(declared(&["--tools", "read"]), ["read"]);
    assert_eq!(declared(&["--tools", "read,cou*"]), ["read", "count"]);
    // `-name` edits the built-in defaults only (as upstream 1.6).
    assert_eq!(
        declared(&["--tools", "-count,-write"]),
        ["read", "bash", "edit", "count"]
    );
    assert_eq!(
        declared(&["--exclude-tools", "count"]),
        ["read", "bash", "edit", "write"]
    );
}

#[test]
fn extension_tool_sees_abort_and_streams_updates() {
    let ext = r#"import { writeFileSync } from "node:fs";
    export default function (pi) {
      pi.registerTool({
        name: "wait", label: "Wait", description: "Waits for an abort",
        parameters: { type: "object", properties: {} },
        async execute(id, params, signal, onUpdate) {
          onUpdate({ content: [{ type: "text", text: "half" }], details: { p: 50 } });
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
          writeFileSync("aborted", String(signal.aborted));
          return { content: [{ type: "text", text: "late" }] };
        },
      });
    }"#;
    let (_fake, root) = setup(
        Script::new([Turn::tool_call("wait", json!({})), Turn::text("ok")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("w.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "w.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (_, up) = agent.wait_from(0, LIVENESS, |v| kind(v) == "tool_execution_update");
    assert_eq!(up["partialResult"]["content"][0]["text"], "half");
    assert_eq!(up["partialResult"]["details"], json!({"p": 50}));
    agent.request(json!({"id": "a", "type": "abort"}));
    agent.wait_event("agent_settled");
    assert_eq!(
        tool_end(&agent)["result"]["content"][0]["text"],
        "Operation aborted"
    );
    let mark = root.cwd.join("aborted");
    let start = std::time::Instant::now();
    // writeFileSync creates the file before it writes: wait for the content, not the name.
    let read = || std::fs::read_to_string(&mark).unwrap_or_default();
    while read().is_empty() && start.elapsed() < LIVENESS {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(read(), "true");
}

#[test]
fn awaited_event_handlers_work_in_json_mode() {
    let ext = r#"import { appendFileSync } from "node:fs";
    export default function (pi) {
      pi.on("message_end", async (e) => { await new Promise((r) => setTimeout(r, 5)); appendFileSync("seen.txt", e.message.role + " "); });
    }"#;
    let (_fake, root) = setup(Script::new([Turn::text("hi")]), DEFAULT_MODEL);
    root.write_cwd_file("j.js", ext);
    let bin = std::env::var_os("PI_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    let out = std::process::Command::new(bin)
        .args(["--mode", "json", "--no-session", "-e", "j.js", "go"])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"agent_end\""), "{text}");
    let seen = std::fs::read_to_string(root.cwd.join("seen.txt")).unwrap();
    assert_eq!(seen, "system user assistant ");
}

/// `turn_end` / `agent_before_settle` results (upstream docs/extensions.md "turn_start /
/// turn_end"): proposals chain across handlers, entries are appended in order after all of
/// them (`entry_appended`, session file), a continuation where the model has nothing to answer
/// is refused (`extension_error` from `<boundary>`), a `custom_message` + `continue` from
/// `agent_before_settle` makes one more run that sends it, and a throwing handler is reported
/// while the next still runs.
#[test]
fn boundary_results_append_entries_chain_and_continue() {
    let ext = r#"export default function (pi) {
      let n = 0, s = 0;
      const show = (ev) => ev.type + " " + ev.turnIndex + " " + ev.outcome + " " + JSON.stringify(ev.entries) + " " + ev.continue + " " + ev.context.canContinue;
      pi.on("turn_end", (ev, ctx) => {
        ctx.ui.notify("A " + show(ev) + " " + ev.messageEntryId + " " + JSON.stringify(ev.toolResultEntryIds));
        if (n++ === 0) return { entries: [...ev.entries, { type: "custom", customType: "mark", data: { k: 1 } }] };
      });
      pi.on("turn_end", (ev, ctx) => {
        ctx.ui.notify("B " + show(ev) + " " + ev.context.contextEntries.length);
        if (n === 1) return { continue: true };
        throw new Error("boom");
      });
      pi.on("turn_end", (ev, ctx) => { ctx.ui.notify("C ran"); });
      pi.on("agent_before_settle", (ev, ctx) => {
        ctx.ui.notify("S " + show(ev));
        if (s++ === 0) return { entries: [...ev.entries, { type: "custom_message", customType: "remind", content: "Review it.", display: false }], continue: true };
      });
    }"#;
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two"), Turn::text("three")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("b.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "b.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    let file = root.session_files().pop().expect("session file");
    let entries = check_session_file(&file).unwrap();
    let assistant_ids: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(assistant_ids.len(), 2, "{entries:?}");
    let notes = ui_notes(&agent);
    assert_eq!(
        notes,
        [
            format!("A turn_end 0 completed [] false false {} []", assistant_ids[0]),
            // B sees A's proposal and the context as it would leave it.
            r#"B turn_end 0 completed [{"type":"custom","customType":"mark","data":{"k":1}}] false false 6"#.to_string(),
            "C ran".to_string(),
            "S agent_before_settle undefined completed [] false false".to_string(),
            format!("A turn_end 0 completed [] false false {} []", assistant_ids[1]),
            "B turn_end 0 completed [] false false 8".to_string(),
            "C ran".to_string(),
            "S agent_before_settle undefined completed [] false false".to_string(),
        ],
        "{}",
        agent.dump()
    );
    let events = agent.events();
    let pos = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred);
    let mark = pos(&|v| kind(v) == "entry_appended" && v["entry"]["customType"] == "mark")
        .unwrap_or_else(|| panic!("no mark entry: {}", agent.dump()));
    let refused = pos(&|v| {
        kind(v) == "extension_error"
            && v["extensionPath"] == "<boundary>"
            && v["error"] == "turn_end requested continuation without runnable model context"
    })
    .unwrap_or_else(|| panic!("no refusal: {}", agent.dump()));
    let first_turn_end = pos(&|v| kind(v) == "turn_end").unwrap();
    assert!(
        mark < refused && refused < first_turn_end,
        "{}",
        agent.dump()
    );
    assert!(
        events.iter().any(|v| kind(v) == "extension_error"
            && v["event"] == "turn_end"
            && v["error"] == "boom"),
        "{}",
        agent.dump()
    );
    // Two runs, the second answering the custom message; no third request.
    assert_eq!(
        events.iter().filter(|v| kind(v) == "agent_start").count(),
        2,
        "{}",
        agent.dump()
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].body_text().contains("Review it."));
    assert!(!reqs[0].body_text().contains("Review it."));
    let kinds: Vec<&str> = entries.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = kinds
        .iter()
        .position(|k| *k == "custom")
        .expect("custom entry");
    assert_eq!(kinds[at + 1], "custom_message", "{kinds:?}");
    assert_eq!(entries[at + 1]["customType"], "remind");
    assert_eq!(entries[at + 2]["id"], assistant_ids[1]);
}

/// A `turn_end` after tool results gets the entry ids of the assistant message and its tool
/// results; a `custom_message` it appends is in the next request (tool results already make
/// it, `continue` adds none), stored as a `custom_message` entry, with no message events.
#[test]
fn turn_end_after_tools_names_entry_ids_and_adds_messages() {
    let ext = r#"export default function (pi) {
      let n = 0;
      pi.on("turn_end", (ev, ctx) => {
        ctx.ui.notify(ev.messageEntryId + " " + ev.toolResultEntryIds.join(",") + " " + ev.toolResults.length + " " + ev.context.canContinue);
        if (n++ === 0) return { entries: [{ type: "custom_message", customType: "again", content: [{ type: "text", text: "again please" }], display: true }], continue: true };
      });
    }"#;
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "echo hi"})),
            Turn::text("two"),
            Turn::text("three"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("t.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "t.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    let entries = check_session_file(&root.session_files().pop().unwrap()).unwrap();
    let id_of = |role: &str, nth: usize| -> String {
        entries
            .iter()
            .filter(|e| e["type"] == "message" && e["message"]["role"] == role)
            .nth(nth)
            .map(|e| e["id"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        ui_notes(&agent),
        [
            format!(
                "{} {} 1 true",
                id_of("assistant", 0),
                id_of("toolResult", 0)
            ),
            format!("{}  0 false", id_of("assistant", 1)),
        ],
        "{}",
        agent.dump()
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "{}", agent.dump());
    assert!(reqs[1].body_text().contains("again please"));
    assert!(entries
        .iter()
        .any(|e| e["type"] == "custom_message" && e["customType"] == "again"));
    assert!(!agent
        .events()
        .iter()
        .any(|v| kind(v) == "message_end" && v["message"]["role"] == "custom"));
}

/// An aborted turn still gets `turn_end` (outcome `aborted`, its entries committed) but no
/// continuation, and the aborted run skips `agent_before_settle`.
#[test]
fn aborted_run_commits_entries_without_continuing_or_settling_hooks() {
    let ext = r#"export default function (pi) {
      pi.on("turn_end", (ev, ctx) => {
        ctx.ui.notify("T " + ev.outcome);
        return { entries: [{ type: "custom", customType: "at-abort" }], continue: true };
      });
      pi.on("agent_before_settle", (ev, ctx) => { ctx.ui.notify("S " + ev.outcome); });
    }"#;
    let (fake, root) = setup(
        Script::new([Turn::text(
            "one two three four five six seven eight nine ten",
        )])
        .delay_ms(100),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("a.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "a.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("message_update");
    agent.request(json!({"id": "a", "type": "abort"}));
    let settled = agent.wait_event("agent_settled");
    assert_eq!(settled["aborted"], true);
    assert_eq!(ui_notes(&agent), ["T aborted"], "{}", agent.dump());
    assert!(agent
        .events()
        .iter()
        .any(|v| kind(v) == "entry_appended" && v["entry"]["customType"] == "at-abort"));
    assert_eq!(fake.requests().len(), 1, "{}", agent.dump());
}

/// `message_end` handlers replace the finalized message (upstream docs/extensions.md
/// "message_end"): handlers chain, the replacement is what the session file holds, what the
/// client's `message_end` carries and what the next request sends; a replacement with another
/// role is rejected (`extension_error`) and the message kept.
#[test]
fn message_end_replacements_chain_persist_and_reach_the_model() {
    let ext = r#"export default function (pi) {
      pi.on("message_end", (ev) => {
        if (ev.message.role === "toolResult") return { message: { ...ev.message, content: [{ type: "text", text: "REPLACED-TR" }] } };
        if (ev.message.role === "user") return { message: { ...ev.message, role: "assistant" } };
      });
      pi.on("message_end", (ev) => {
        if (ev.message.role === "toolResult") return { message: { ...ev.message, content: [{ type: "text", text: ev.message.content[0].text + "+2" }] } };
      });
    }"#;
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "printf orig%s inal-output"})),
            Turn::text("two"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("t.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "t.js"]);
    agent.request(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    let events = agent.events();
    let tr_end = events
        .iter()
        .find(|v| kind(v) == "message_end" && v["message"]["role"] == "toolResult")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        tr_end["message"]["content"][0]["text"],
        "REPLACED-TR+2",
        "{}",
        agent.dump()
    );
    let user_end = events
        .iter()
        .find(|v| kind(v) == "message_end" && v["message"]["role"] == "user");
    assert!(user_end.is_some(), "{}", agent.dump());
    assert!(
        events.iter().any(|v| kind(v) == "extension_error"
            && v["event"] == "message_end"
            && v["error"] == "message_end handlers must return a message with the same role"),
        "{}",
        agent.dump()
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "{}", agent.dump());
    assert!(reqs[1].body_text().contains("REPLACED-TR+2"));
    // The real output (`original-output`) appears nowhere in the next request.
    assert!(!reqs[1].body_text().contains("original-output"));
    let entries = check_session_file(&root.session_files().pop().unwrap()).unwrap();
    let tr = entries
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .cloned()
        .unwrap_or_default();
    assert_eq!(tr["message"]["content"][0]["text"], "REPLACED-TR+2");
    assert!(entries
        .iter()
        .any(|e| e["type"] == "message" && e["message"]["role"] == "user"));
}
