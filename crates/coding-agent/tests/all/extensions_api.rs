//! The extension API methods and contexts (issue 12; upstream docs/extensions.md
//! "ExtensionCommandContext", "ExtensionAPI Methods"): the command context's session control
//! through pi's session runtime, session events, `registerFlag` values from the command line,
//! and the session accessors. The extensions here are our own, written for these tests.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::time::Duration;

/// A command `/ctl <verb> [arg]` that drives the command context and reports through
/// `notify`; session events are reported too. Cross-instance state lives on `globalThis`
/// (every session replacement makes a fresh extension instance, as upstream).
const CTL_EXT: &str = r#"
export default function (pi) {
  const say = (ctx, text) => ctx.ui.notify(text, "info");
  pi.registerFlag("plan", { description: "plan mode", type: "boolean", default: false });
  pi.registerFlag("level", { description: "a level", type: "string", default: "low" });
  pi.on("session_start", (e, ctx) => say(ctx, `start ${e.reason} prev=${e.previousSessionFile ? "yes" : "no"} plan=${pi.getFlag("plan")} level=${pi.getFlag("level")}`));
  pi.on("session_shutdown", (e, ctx) => say(ctx, `shutdown ${e.reason}`));
  pi.on("session_before_switch", (e) => (globalThis.blockSwitch ? { cancel: true } : undefined));
  pi.on("session_before_fork", (e) => (globalThis.blockSwitch ? { cancel: true } : undefined));
  pi.registerCommand("ctl", {
    description: "drive the command context",
    handler: async (args, ctx) => {
      const [verb, arg] = args.split(" ");
      const sm = ctx.sessionManager;
      if (verb === "info") {
        const user = sm.getEntries().find((e) => e.type === "message" && e.message.role === "user");
        say(ctx, JSON.stringify({
          id: sm.getSessionId(), file: sm.getSessionFile() ?? null, leaf: sm.getLeafId(), n: sm.getEntries().length,
          branch: sm.getBranch().length, user: user ? user.id : null, name: pi.getSessionName() ?? null,
          level: pi.getThinkingLevel(), model: ctx.model ? ctx.model.id : null, idle: ctx.isIdle(),
          active: pi.getActiveTools(), all: pi.getAllTools().map((t) => t.name + ":" + t.sourceInfo.source),
        }));
      } else if (verb === "block") globalThis.blockSwitch = arg === "on";
      else if (verb === "new") say(ctx, "new " + JSON.stringify(await ctx.newSession()) + " " + sm.getEntries().length);
      else if (verb === "fork") say(ctx, "fork " + JSON.stringify(await ctx.fork(arg)));
      else if (verb === "clone") say(ctx, "clone " + JSON.stringify(await ctx.fork(arg, { position: "at" })));
      else if (verb === "switch") say(ctx, "switch " + JSON.stringify(await ctx.switchSession(arg)) + " " + sm.getSessionFile());
      else if (verb === "wait") { await ctx.waitForIdle(); say(ctx, "idle " + ctx.isIdle()); }
      else if (verb === "reload") { await ctx.reload(); say(ctx, "reloaded"); }
      else if (verb === "tools") { pi.setActiveTools(["read", "nope"]); say(ctx, "tools " + pi.getActiveTools().join(",")); }
      else if (verb === "think") { pi.setThinkingLevel(arg); say(ctx, "think"); }
      else if (verb === "model") say(ctx, "model " + (await pi.setModel({ provider: arg, id: "nope" })));
      else if (verb === "label") { pi.setLabel(arg, "mark"); say(ctx, "label"); }
      else if (verb === "quit") ctx.shutdown();
      else if (verb === "msg") pi.sendMessage({ customType: "note", content: "remember " + arg, display: true, details: { a: 1 } }, { triggerTurn: arg === "go" });
    },
  });
}
"#;

fn notify_from(agent: &RpcAgent, from: usize, prefix: &str) -> (usize, String) {
    let (i, v) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_ui_request"
            && v["method"] == "notify"
            && v["message"].as_str().is_some_and(|m| m.starts_with(prefix))
    });
    (i, v["message"].as_str().unwrap_or_default().to_string())
}

fn ctl(agent: &mut RpcAgent, id: &str, args: &str) -> usize {
    let from = agent.len();
    let r = agent.request(json!({"id": id, "type": "prompt", "message": format!("/ctl {args}")}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    from
}

fn info(agent: &mut RpcAgent, id: &str) -> Value {
    let from = ctl(agent, id, "info");
    let (_, text) = notify_from(agent, from, "{");
    serde_json::from_str(&text).unwrap()
}

fn ctl_root(script: Script) -> (pi_fakellm::FakeLlm, RunRoot) {
    let (fake, root) = setup(script, DEFAULT_MODEL);
    root.write_cwd_file("ctl.js", CTL_EXT);
    (fake, root)
}

#[test]
fn command_context_replaces_sessions_through_the_runtime() {
    let (_fake, root) = ctl_root(Script::new([Turn::text("one"), Turn::text("two")]));
    let mut agent = root.spawn_with(true, &["-e", "ctl.js", "--plan", "--level", "high"]);
    // session_start at startup, with the command line's flag values.
    let (_, start) = notify_from(&agent, 0, "start ");
    assert_eq!(start, "start startup prev=no plan=true level=high");
    agent.send(json!({"id": "p", "type": "prompt", "message": "hello"}));
    agent.wait_event("agent_settled");
    let first = agent.request(json!({"id": "s1", "type": "get_state"}))["data"].clone();

    // The mirror: entries, branch, leaf, thinking level, model, tools.
    let i = info(&mut agent, "c1");
    assert_eq!(i["id"], first["sessionId"]);
    assert_eq!(i["file"], first["sessionFile"]);
    let entries = agent.request(json!({"id": "e", "type": "get_entries"}))["data"].clone();
    assert_eq!(i["n"], entries["entries"].as_array().unwrap().len());
    assert_eq!(i["leaf"], entries["leafId"]);
    assert_eq!(i["level"], first["thinkingLevel"]);
    assert_eq!(i["model"], first["model"]["id"]);
    assert_eq!(i["idle"], true);
    assert_eq!(i["active"], json!(["read", "bash", "edit", "write"]));
    assert!(
        i["all"]
            .as_array()
            .unwrap()
            .contains(&json!("grep:builtin")),
        "{i}"
    );
    let user = i["user"].as_str().unwrap().to_string();

    // A cancelling session_before_switch / _fork handler: nothing is replaced, for the
    // command context and for the RPC commands alike.
    ctl(&mut agent, "b1", "block on");
    let from = ctl(&mut agent, "n1", "new");
    assert_eq!(
        notify_from(&agent, from, "new ").1,
        format!("new {{\"cancelled\":true}} {}", i["n"])
    );
    let r = agent.request(json!({"id": "rn", "type": "new_session"}));
    assert_eq!(r["data"], json!({"cancelled": true}), "{}", agent.dump());
    let r = agent.request(json!({"id": "rf", "type": "fork", "entryId": user}));
    assert_eq!(r["data"], json!({"cancelled": true}));
    ctl(&mut agent, "b2", "block off");

    // fork: the new session holds what came before the user message.
    let from = ctl(&mut agent, "f1", &format!("fork {user}"));
    assert_eq!(
        notify_from(&agent, from, "fork ").1,
        "fork {\"cancelled\":false}"
    );
    notify_from(&agent, from, "shutdown fork");
    assert_eq!(
        notify_from(&agent, from, "start ").1,
        "start fork prev=yes plan=true level=high"
    );
    let forked = agent.request(json!({"id": "s2", "type": "get_state"}))["data"].clone();
    assert_ne!(forked["sessionId"], first["sessionId"]);
    assert_eq!(info(&mut agent, "c2")["id"], forked["sessionId"]);

    // newSession: fresh session; the mirror follows it.
    let from = ctl(&mut agent, "n2", "new");
    let (_, text) = notify_from(&agent, from, "new ");
    assert!(text.starts_with("new {\"cancelled\":false}"), "{text}");
    notify_from(&agent, from, "start new prev=yes");
    let fresh = agent.request(json!({"id": "s3", "type": "get_state"}))["data"].clone();
    assert_ne!(fresh["sessionId"], forked["sessionId"]);

    // switchSession back to the first file.
    let path = first["sessionFile"].as_str().unwrap();
    let from = ctl(&mut agent, "w1", &format!("switch {path}"));
    assert_eq!(
        notify_from(&agent, from, "switch ").1,
        format!("switch {{\"cancelled\":false}} {path}")
    );
    notify_from(&agent, from, "start resume prev=yes");
    let back = agent.request(json!({"id": "s4", "type": "get_state"}))["data"].clone();
    assert_eq!(back["sessionId"], first["sessionId"]);

    // fork {position:"at"}: a copy through the entry.
    let from = ctl(&mut agent, "k1", &format!("clone {user}"));
    assert_eq!(
        notify_from(&agent, from, "clone ").1,
        "clone {\"cancelled\":false}"
    );
    let cloned = info(&mut agent, "c3");
    assert_eq!(cloned["leaf"], json!(user), "{cloned}");

    // reload: shutdown + start with reason "reload", a fresh instance.
    let from = ctl(&mut agent, "r1", "reload");
    notify_from(&agent, from, "shutdown reload");
    notify_from(&agent, from, "start reload");
    notify_from(&agent, from, "reloaded");
    agent.close_stdin();
    assert!(agent.wait_exit(LIVENESS).is_some_and(|s| s.success()));
}

#[test]
fn wait_for_idle_returns_after_the_run_settles_and_shutdown_ends_the_process() {
    let (_fake, root) = ctl_root(Script::new([Turn::text("slow").delay_ms(300)]));
    let mut agent = root.spawn_with(false, &["-e", "ctl.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "hello"}));
    agent.wait_event("agent_start");
    let from = ctl(&mut agent, "w", "wait");
    let (idle_at, text) = notify_from(&agent, from, "idle ");
    assert_eq!(text, "idle true");
    let (settled_at, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_settled");
    assert!(settled_at < idle_at, "{}", agent.dump());
    // ctx.shutdown(): the process ends without stdin being closed.
    let from = ctl(&mut agent, "q", "quit");
    notify_from(&agent, from, "shutdown quit");
    let status = agent.wait_exit(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{}", agent.dump());
}

#[test]
fn api_methods_change_tools_thinking_level_model_and_labels() {
    let (fake, root) = ctl_root(Script::new([Turn::text("one"), Turn::text("two")]));
    let mut agent = root.spawn_with(false, &["-e", "ctl.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "hello"}));
    agent.wait_event("agent_settled");
    // setActiveTools ignores unknown names; the next LLM call offers only `read`.
    let from = ctl(&mut agent, "t", "tools");
    assert_eq!(notify_from(&agent, from, "tools ").1, "tools read");
    assert_eq!(info(&mut agent, "i1")["active"], json!(["read"]));
    agent.send(json!({"id": "p2", "type": "prompt", "message": "again"}));
    agent.wait_event("agent_settled");
    let body = fake.requests()[1].body_text();
    assert!(
        body.contains("\"read\"") && !body.contains("\"bash\""),
        "{body}"
    );
    // setThinkingLevel goes through the session (thinking_level_changed, clamped).
    ctl(&mut agent, "k", "think off");
    assert_eq!(info(&mut agent, "i2")["level"], "off");
    // setModel without credentials for the provider: false.
    let from = ctl(&mut agent, "m", "model nowhere");
    assert_eq!(notify_from(&agent, from, "model ").1, "model false");
    // setLabel: a label entry.
    let leaf = info(&mut agent, "i3")["leaf"].as_str().unwrap().to_string();
    ctl(&mut agent, "l", &format!("label {leaf}"));
    let e = agent.wait_for(|v| kind(v) == "entry_appended", LIVENESS);
    assert_eq!(e["entry"]["type"], "label");
    assert_eq!(e["entry"]["targetId"], json!(leaf));
    assert_eq!(e["entry"]["label"], "mark");
}

#[test]
fn unregistered_flags_are_errors_and_string_flags_need_a_value() {
    let (_fake, root) = ctl_root(Script::new([Turn::text("x")]));
    let mut agent = root.spawn_with(false, &["-e", "ctl.js", "--nope"]);
    let status = agent.wait_exit(LIVENESS);
    assert_eq!(status.and_then(|s| s.code()), Some(1));
    assert!(
        agent.stderr().contains("Unknown option: --nope"),
        "{}",
        agent.stderr()
    );
    let mut agent = root.spawn_with(false, &["-e", "ctl.js", "--level"]);
    assert_eq!(agent.wait_exit(LIVENESS).and_then(|s| s.code()), Some(1));
    assert!(
        agent
            .stderr()
            .contains("Extension flag \"--level\" requires a value"),
        "{}",
        agent.stderr()
    );
    let mut agent = root.spawn_with(false, &["--nope"]);
    assert_eq!(agent.wait_exit(LIVENESS).and_then(|s| s.code()), Some(1));
    assert!(agent.stderr().contains("Unknown option: --nope"));
}

#[test]
fn send_message_enters_custom_messages_and_may_trigger_a_turn() {
    let (fake, root) = ctl_root(Script::new([Turn::text("noted")]));
    let mut agent = root.spawn_with(false, &["-e", "ctl.js"]);
    // Idle, no triggerTurn: entered (message_start/_end, a custom_message entry), no LLM call.
    ctl(&mut agent, "m1", "msg quiet");
    let (_, end) = agent.wait_from(0, LIVENESS, |v| kind(v) == "message_end");
    assert_eq!(end["message"]["role"], "custom");
    assert_eq!(end["message"]["content"], "remember quiet");
    assert_eq!(end["message"]["details"], json!({"a": 1}));
    let entries =
        agent.request(json!({"id": "e", "type": "get_entries"}))["data"]["entries"].clone();
    let last = entries.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "custom_message", "{last}");
    assert_eq!(last["customType"], "note");
    assert_eq!(fake.requests().len(), 0);
    // triggerTurn: a run answers the context, which holds both custom messages.
    ctl(&mut agent, "m2", "msg go");
    agent.wait_for(|v| kind(v) == "agent_settled", LIVENESS);
    let body = fake.requests()[0].body_text();
    assert!(
        body.contains("remember quiet") && body.contains("remember go"),
        "{body}"
    );
}

/// `pi.events`: one extension emits, another listens; a session replacement leaves one
/// listener (the fresh instance's), not two.
#[test]
fn event_bus_connects_extensions_across_instances() {
    let (_fake, root) = setup(Script::new([Turn::text("x")]), DEFAULT_MODEL);
    root.write_cwd_file(
        "a.js",
        r#"export default function (pi) {
          pi.registerCommand("ping", { handler: async (args) => { pi.events.emit("demo:ping", { n: args }); } });
        }"#,
    );
    root.write_cwd_file(
        "b.js",
        r#"export default function (pi) {
          let ui;
          pi.on("session_start", (_e, ctx) => { ui = ctx.ui; });
          pi.events.on("demo:ping", (d) => ui && ui.notify("got " + d.n));
        }"#,
    );
    let mut agent = root.spawn_with(false, &["-e", "a.js", "-e", "b.js"]);
    agent.request(json!({"id": "p1", "type": "prompt", "message": "/ping 1"}));
    let (_, n) = agent.wait_from(0, LIVENESS, |v| v["method"] == "notify");
    assert_eq!(n["message"], "got 1");
    agent.request(json!({"id": "n", "type": "new_session"}));
    let from = agent.len();
    agent.request(json!({"id": "p2", "type": "prompt", "message": "/ping 2"}));
    agent.wait_quiet(Duration::from_millis(300), LIVENESS);
    let got: Vec<Value> = agent.records()[from..]
        .iter()
        .filter_map(|r| r.value.clone())
        .filter(|v| v["method"] == "notify")
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["message"], "got 2");
}

/// A `tool_call` handler sees the session through the assistant message that made the call.
#[test]
fn tool_call_handlers_see_the_session_through_the_calling_message() {
    let ext = r#"export default function (pi) {
      pi.on("tool_call", (event, ctx) => {
        const last = ctx.sessionManager.getBranch().at(-1);
        const calls = last && last.message && last.message.content.filter((c) => c.type === "toolCall").map((c) => c.id);
        ctx.ui.notify("leaf has " + JSON.stringify(calls) + " idle=" + ctx.isIdle());
      });
    }"#;
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "true"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("tc.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "tc.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let (_, n) = agent.wait_from(0, LIVENESS, |v| v["method"] == "notify");
    assert_eq!(n["message"], "leaf has [\"call_fake_1_0\"] idle=false");
}

/// An extension that registers later than its factory, as upstream allows: a tool and a
/// command in `session_start`, a skill through `resources_discover`, and `/mcp` (which
/// replaces the built-in one). `/which` reports `ctx.modelRegistry` reads.
const LATE_EXT: &str = r#"
import { fileURLToPath } from "node:url";
export default function (pi) {
  pi.on("session_start", () => {
    pi.registerTool({
      name: "late_tool", label: "Late", description: "registered in session_start",
      parameters: { type: "object", properties: {} },
      execute: async () => ({ content: [{ type: "text", text: "late ran" }], details: {} }),
    });
    pi.registerCommand("late-cmd", { description: "registered in session_start", handler: async () => {} });
  });
  pi.on("resources_discover", (e) => ({
    skillPaths: [fileURLToPath(new URL("./skills/found/SKILL.md", import.meta.url))],
  }));
  pi.registerCommand("mcp", { description: "our own mcp", handler: async (_a, ctx) => ctx.ui.notify("own mcp", "info") });
  pi.registerCommand("which", {
    description: "model registry reads",
    handler: async (_a, ctx) => {
      const r = ctx.modelRegistry;
      const m = r.find("fake-openai", "fake-gpt");
      ctx.ui.notify(`find=${m && m.id} none=${r.find("fake-openai", "nope")} avail=${r.getAvailable().length > 0} auth=${r.hasConfiguredAuth(m)}`, "info");
    },
  });
}
"#;

/// A second extension whose factory registers a tool: upstream offers it before the one the
/// first extension registers later, in `session_start`.
const EARLY_EXT: &str = r#"
export default function (pi) {
  pi.registerTool({
    name: "early_tool", label: "Early", description: "registered in the factory",
    parameters: { type: "object", properties: {} },
    execute: async () => ({ content: [{ type: "text", text: "early ran" }], details: {} }),
  });
}
"#;

#[test]
fn registrations_after_the_factory_reach_tools_commands_and_skills() {
    let script = Script::new([Turn::tool_call("late_tool", json!({})), Turn::text("done")]);
    let (fake, root) = setup(script, DEFAULT_MODEL);
    root.write_cwd_file("late.js", LATE_EXT);
    root.write_cwd_file("early.js", EARLY_EXT);
    root.write_cwd_file(
        "skills/found/SKILL.md",
        "---\nname: found\ndescription: A skill an extension discovered.\n---\nBody.\n",
    );
    let mut agent = root.spawn_with(false, &["-e", "late.js", "-e", "early.js"]);
    let r = agent.request(json!({"id": "c", "type": "get_commands"}));
    let cmds = r["data"]["commands"].as_array().unwrap().clone();
    let named = |n: &str| {
        cmds.iter()
            .filter(|c| c["name"] == n)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(named("late-cmd").len(), 1, "{cmds:?}");
    let mcp = named("mcp");
    assert_eq!(mcp.len(), 1, "the built-in /mcp is replaced: {cmds:?}");
    assert_eq!(mcp[0]["description"], "our own mcp");
    let skill = named("skill:found");
    assert_eq!(skill.len(), 1, "{cmds:?}");
    assert_eq!(skill[0]["sourceInfo"]["source"], "extension:late");
    assert_eq!(skill[0]["sourceInfo"]["scope"], "temporary");
    assert_eq!(
        skill[0]["sourceInfo"]["baseDir"],
        root.cwd.to_string_lossy().as_ref()
    );
    agent.request(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_end");
    let req = &fake.llm_requests()[0].body;
    let tools: Vec<&str> = req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["read", "bash", "edit", "write", "early_tool", "late_tool"]
    );
    let system = req["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("<name>found</name>"), "{system}");
    let end = agent.wait_event("tool_execution_end");
    assert_eq!(end["result"]["content"][0]["text"], "late ran");
    let stderr = agent.stderr();
    assert!(
        stderr.contains("Warning: Extension package \"builtin:mcp\": Extension ")
            && stderr.contains(
                "late.js registers command `/mcp`, so built-in extension `mcp` was not loaded."
            ),
        "{stderr}"
    );
    let from = agent.len();
    let r = agent.request(json!({"id": "m", "type": "prompt", "message": "/mcp"}));
    assert_eq!(r["data"]["disposition"], "handled");
    let (_, text) = notify_from(&agent, from, "own");
    assert_eq!(text, "own mcp");
    let from = agent.len();
    agent.request(json!({"id": "w", "type": "prompt", "message": "/which"}));
    let (_, text) = notify_from(&agent, from, "find=");
    assert_eq!(text, "find=fake-gpt none=undefined avail=true auth=true");
}

/// `pi --help` lists the flags the configured extensions register, as upstream 1.6's
/// `printHelp` does (recorded from upstream with `-e` of this extension): an
/// `Extension CLI Flags:` section after the options, `  --name` (` <value>` for a string flag)
/// padded to 30 columns, then the description or `Registered by <extension path>`.
#[test]
fn help_lists_extension_flags_as_upstream() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file(
        "flag.js",
        r#"export default function (pi) {
  pi.registerFlag("plan", { description: "plan mode", type: "boolean", default: false });
  pi.registerFlag("level", { description: "a level", type: "string", default: "low" });
  pi.registerFlag("nodesc", { type: "string" });
}"#,
    );
    let bin = std::env::var_os("PI_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    let help = |args: &[&str]| {
        let out = std::process::Command::new(&bin)
            .args(args)
            .current_dir(&root.cwd)
            .env_clear()
            .envs(root.env())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let with = help(&["--help", "-e", "flag.js"]);
    let path = std::fs::canonicalize(root.cwd.join("flag.js")).unwrap();
    let section = format!(
        "Extension CLI Flags:\n  --plan                      plan mode\n  --level <value>             a level\n  --nodesc <value>            Registered by {}\n",
        path.display()
    );
    assert!(with.contains(&section), "{with}");
    // Right after the options (upstream: after its last option and note), once.
    let at = with.find("Extension CLI Flags:").unwrap();
    assert!(with[..at].ends_with("Show the version\n"), "{with}");
    assert_eq!(with.matches("Extension CLI Flags:").count(), 1);
    // Without an extension the help is as before.
    let without = help(&["--help"]);
    assert!(!without.contains("Extension CLI Flags"), "{without}");
    assert_eq!(with.replace(&section, ""), without);
}

/// `pi.sendMessage` of an idle session: `message_start` then `message_end`, each carrying the
/// message as upstream 1.6's `sendCustomMessage` builds it (recorded from upstream on the
/// fake server): `customType`, `display` and `details` as the extension gave them, absent
/// ones left out, `content` missing or `null` as `[]`, then `timestamp`.
#[test]
fn send_message_events_carry_the_message_as_given() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file(
        "m.js",
        r#"export default function (pi) {
  pi.registerCommand("m", { description: "d", handler: async () => {
    pi.sendMessage({ customType: "c3" });
    pi.sendMessage({ content: "y", display: false });
    pi.sendMessage({ customType: "c4", content: null, details: { k: 1 } });
  }});
}"#,
    );
    let mut agent = root.spawn_with(false, &["-e", "m.js"]);
    agent.request(json!({"id": "ready", "type": "get_state"}));
    let from = agent.len();
    let r = agent.request(json!({"id": "a", "type": "prompt", "message": "/m"}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "message_end" && v["message"]["customType"] == "c4"
    });
    let got: Vec<Value> = agent.records()[from..]
        .iter()
        .filter_map(|r| r.value.as_ref())
        .filter(|v| matches!(kind(v), "message_start" | "message_end"))
        .map(|v| {
            let mut m = v["message"].clone();
            assert!(m["timestamp"].is_i64(), "{v}");
            m.as_object_mut().unwrap().remove("timestamp");
            json!([kind(v), m])
        })
        .collect();
    let c3 = json!({"role": "custom", "customType": "c3", "content": []});
    let y = json!({"role": "custom", "content": "y", "display": false});
    let c4 = json!({"role": "custom", "customType": "c4", "content": [], "details": {"k": 1}});
    assert_eq!(
        got,
        vec![
            json!(["message_start", c3]),
            json!(["message_end", c3]),
            json!(["message_start", y]),
            json!(["message_end", y]),
            json!(["message_start", c4]),
            json!(["message_end", c4]),
        ],
        "{}",
        agent.dump()
    );
    // Key order as upstream's: role, customType, content, display, details, timestamp.
    let line = agent
        .records()
        .into_iter()
        .map(|r| r.raw)
        .find(|l| l.contains("\"c4\"") && l.contains("message_end"))
        .unwrap();
    assert!(
        line.contains(
            r#"{"role":"custom","customType":"c4","content":[],"details":{"k":1},"timestamp":"#
        ),
        "{line}"
    );
}

/// `/handoff`: `ctx.newSession({parentSession, setup, withSession})` as upstream
/// docs/extensions.md shows it. `setup` appends a user message, a custom entry, a label on
/// the message and a session name through the session manager it gets, and reads them back;
/// `withSession` reports on the replacement session and sends `continue`. `@START@` is
/// replaced by a `session_start` handler or by nothing.
const SETUP_EXT: &str = r#"
export default function (pi) {
  @START@
  pi.registerCommand("handoff", {
    description: "new session with setup",
    handler: async (args, ctx) => {
      await ctx.newSession({
        parentSession: ctx.sessionManager.getSessionFile(),
        setup: async (sm) => {
          const before = sm.getEntries().length;
          const id = sm.appendMessage({ role: "user", content: [{ type: "text", text: "Context from previous session" }], timestamp: Date.now() });
          sm.appendCustomEntry("handoff", { from: "old" });
          sm.appendLabelChange(id, "ctx");
          sm.appendSessionInfo("handed\noff");
          let bad = "none";
          try { sm.appendLabelChange("nope", "x"); } catch (e) { bad = e.message; }
          globalThis.report = `setup before=${before} idlen=${id.length} leaf=${sm.getLeafId() === sm.getEntries().at(-1).id} n=${sm.getEntries().length} branch=${sm.getBranch().length} label=${sm.getLabel(id)} name=${sm.getSessionName()} file=${typeof sm.getSessionFile()} bad=${bad} same=${sm.getEntry(id).message.content[0].text}`;
          globalThis.ctxId = id;
        },
        withSession: async (c) => {
          c.ui.notify(globalThis.report, "info");
          const sm = c.sessionManager;
          c.ui.notify(`with n=${sm.getEntries().length} name=${sm.getSessionName()} label=${sm.getLabel(globalThis.ctxId)} id=${sm.getEntries()[2].id === globalThis.ctxId} types=${sm.getEntries().map((e) => e.type).join(",")}`, "info");
          await c.sendUserMessage("continue");
        },
      });
    },
  });
}
"#;

/// What `/handoff` did, checked against upstream 1.6 on the fake server (same extension,
/// same script): `setup` runs on the new session before its `session_start` handlers (they
/// see 6 entries), its entries keep the ids `setup` was given, the context is rebuilt from
/// them (the next request carries the setup message before `continue`), nothing is emitted
/// for them, and the new file holds them after its header (`parentSession` = the old file).
fn check_handoff(with_start_handler: bool) {
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    let start = if with_start_handler {
        r#"pi.on("session_start", (e, ctx) => ctx.ui.notify(`start ${e.reason} n=${ctx.sessionManager.getEntries().length}`, "info"));"#
    } else {
        ""
    };
    root.write_cwd_file("setup.js", &SETUP_EXT.replace("@START@", start));
    let mut agent = root.spawn_with(true, &["-e", "setup.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "hello"}));
    agent.wait_event("agent_settled");
    let old = agent.request(json!({"id": "s1", "type": "get_state"}))["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let from = agent.len();
    agent.send(json!({"id": "h", "type": "prompt", "message": "/handoff"}));
    if with_start_handler {
        assert_eq!(notify_from(&agent, from, "start new").1, "start new n=6");
    }
    let (_, report) = notify_from(&agent, from, "setup ");
    assert_eq!(
        report,
        "setup before=2 idlen=8 leaf=true n=6 branch=6 label=ctx name=handed off file=string bad=Entry nope not found same=Context from previous session"
    );
    let (_, with) = notify_from(&agent, from, "with ");
    assert_eq!(
        with,
        "with n=6 name=handed off label=ctx id=true types=model_change,thinking_level_change,message,custom,label,session_info"
    );
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");

    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2, "{}", agent.dump());
    let roles: Vec<(String, String)> = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                c => c[0]["text"].as_str().unwrap_or_default().to_string(),
            };
            (m["role"].as_str().unwrap().to_string(), text)
        })
        .collect();
    assert_eq!(
        roles,
        [
            (
                "user".to_string(),
                "Context from previous session".to_string()
            ),
            ("user".to_string(), "continue".to_string())
        ]
    );
    // Nothing announced the setup entries (upstream writes them straight to the manager).
    assert!(
        !agent.events()[from..]
            .iter()
            .any(|v| kind(v) == "entry_appended" || kind(v) == "session_info_changed"),
        "{}",
        agent.dump()
    );
    let state = agent.request(json!({"id": "s2", "type": "get_state"}))["data"].clone();
    assert_eq!(state["sessionName"], "handed off");
    let file = state["sessionFile"].as_str().unwrap().to_string();
    assert_ne!(file, old);
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["parentSession"], json!(old));
    let types: Vec<&str> = lines.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "session",
            "model_change",
            "thinking_level_change",
            "message",
            "custom",
            "label",
            "session_info",
            "message",
            "message",
            "message"
        ]
    );
    assert_eq!(
        lines[3]["message"]["content"][0]["text"],
        "Context from previous session"
    );
    assert_eq!(lines[3]["parentId"], lines[2]["id"]);
    assert_eq!(lines[4]["customType"], "handoff");
    assert_eq!(lines[4]["data"], json!({"from": "old"}));
    assert_eq!(lines[5]["targetId"], lines[3]["id"]);
    assert_eq!(lines[5]["label"], "ctx");
    assert_eq!(lines[6]["name"], "handed off");
    assert_eq!(lines[8]["message"]["content"][0]["text"], "continue");
    for w in lines[1..].windows(2) {
        assert_eq!(w[1]["parentId"], w[0]["id"], "one chain");
    }
}

#[test]
fn new_session_setup_writes_the_new_session_before_session_start() {
    check_handoff(true);
}

#[test]
fn new_session_setup_runs_without_session_start_handlers() {
    check_handoff(false);
}
