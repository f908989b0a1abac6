//! Extensions in the Node host (issue 12): loading, the extension UI sub-protocol
//! (rpc-protocol.md §6), `tool_call` / `tool_result` hooks that never fail open, commands.
//! The extensions here are our own, written for these tests.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::time::Duration;

/// A command that walks through the UI methods (fire-and-forget and dialogs).
const UI_EXT: &str = r#"
export default function (pi) {
  pi.registerCommand("probe", {
    description: "walk the UI",
    handler: async (args, ctx) => {
      ctx.ui.notify(`start ${args} ${ctx.mode} ${ctx.hasUI}`, "info");
      const ok = await ctx.ui.confirm("Sure?", "Really.");
      const pick = await ctx.ui.select("Pick", ["a", "b"]);
      const name = await ctx.ui.input("Name", "here", { timeout: 200 });
      const text = await ctx.ui.editor("Edit", "pre");
      const custom = await ctx.ui.custom(() => null);
      ctx.ui.setWidget("w", ["one", "two"], { placement: "belowEditor" });
      ctx.ui.setTitle("T");
      ctx.ui.setEditorText("E");
      ctx.ui.notify(`ok=${ok} pick=${pick} name=${name ?? null} text=${text} custom=${custom}`, "warning");
      ctx.ui.setStatus("k", undefined);
    },
  });
}
"#;

/// A `tool_call` gate: asks before `rm`, blocks on anything but "Yes"; rewrites `echo old` to
/// `echo new`.
const GATE_EXT: &str = r#"
export default function (pi) {
  pi.on("tool_call", async (event, ctx) => {
    if (event.toolName !== "bash") return undefined;
    if (event.input.command.includes("echo old")) {
      event.input.command = event.input.command.replace("echo old", "echo new");
      return undefined;
    }
    if (!/\brm\b/.test(event.input.command)) return undefined;
    const choice = await ctx.ui.select("Allow " + event.input.command + "?", ["Yes", "No"]);
    if (choice !== "Yes") return { block: true, reason: "Blocked by user" };
  });
}
"#;

fn ext_root(script: Script, file: &str, source: &str) -> (pi_fakellm::FakeLlm, RunRoot) {
    let (fake, root) = setup(script, DEFAULT_MODEL);
    root.write_cwd_file(file, source);
    (fake, root)
}

pub(crate) fn ui_request(agent: &RpcAgent, from: usize, method: &str) -> (usize, Value) {
    agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_ui_request" && v["method"] == method
    })
}

#[test]
fn command_dialogs_follow_the_ui_sub_protocol() {
    let (_fake, root) = ext_root(Script::new([]), "ext/ui.js", UI_EXT);
    let mut agent = root.spawn_with(false, &["-e", "ext/ui.js"]);
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    let probe = &cmds["data"]["commands"][0];
    assert_eq!(probe["name"], "probe", "{cmds}");
    assert_eq!(probe["source"], "extension");
    assert_eq!(probe["sourceInfo"]["source"], "cli");
    assert_eq!(probe["sourceInfo"]["scope"], "temporary");

    agent.send(json!({"id": "p", "type": "prompt", "message": "/probe  hi there "}));
    let (i, confirm) = ui_request(&agent, 0, "confirm");
    assert_eq!(confirm["title"], "Sure?");
    assert_eq!(confirm["message"], "Really.");
    assert!(confirm.get("timeout").is_none());
    agent.send(json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}));
    let (i, select) = ui_request(&agent, i, "select");
    assert_eq!(select["options"], json!(["a", "b"]));
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "cancelled": true}));
    let (i, input) = ui_request(&agent, i, "input");
    assert_eq!(input["placeholder"], "here");
    assert_eq!(input["timeout"], 200);
    // No answer: the input times out. Then the editor gets a value.
    let (_, editor) = ui_request(&agent, i, "editor");
    assert_eq!(editor["prefill"], "pre");
    assert!(editor.get("timeout").is_none());
    agent.send(json!({"type": "extension_ui_response", "id": editor["id"], "value": "typed"}));
    let resp = agent.wait_response("p");
    assert_eq!(
        resp["data"],
        json!({"disposition": "handled"}),
        "{}",
        agent.dump()
    );
    // A late answer and an unknown id produce nothing.
    let n = agent.len();
    agent.send(json!({"type": "extension_ui_response", "id": input["id"], "value": "late"}));
    agent.send(json!({"type": "extension_ui_response", "id": "nope", "value": "x"}));
    agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(agent.len(), n + 1, "{}", agent.dump());

    let ui: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "extension_ui_request")
        .collect();
    let methods: Vec<&str> = ui.iter().map(|v| v["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        [
            "notify",
            "confirm",
            "select",
            "input",
            "editor",
            "setWidget",
            "setTitle",
            "set_editor_text",
            "notify",
            "setStatus"
        ]
    );
    assert_eq!(ui[0]["message"], "start hi there rpc true");
    assert_eq!(ui[0]["notifyType"], "info");
    assert_eq!(ui[5]["widgetLines"], json!(["one", "two"]));
    assert_eq!(ui[5]["widgetPlacement"], "belowEditor");
    assert_eq!(ui[6]["title"], "T");
    assert_eq!(ui[7]["text"], "E");
    assert_eq!(
        ui[8]["message"],
        "ok=true pick=undefined name=null text=typed custom=undefined"
    );
    assert_eq!(
        ui[9],
        json!({"type": "extension_ui_request", "id": ui[9]["id"], "method": "setStatus", "statusKey": "k"})
    );
    // Ids are UUID v4 and distinct.
    let mut ids: Vec<&str> = ui.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert!(ids
        .iter()
        .all(|id| id.len() == 36 && id.as_bytes()[14] == b'4'));
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), ui.len());
}

fn gate_script(command: &str) -> Script {
    Script::new([
        Turn::tool_call("bash", json!({"command": command})),
        Turn::text("done"),
    ])
}

pub(crate) fn tool_end(agent: &RpcAgent) -> Value {
    agent
        .events()
        .into_iter()
        .find(|v| kind(v) == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {}", agent.dump()))
}

#[test]
fn gate_answered_no_blocks_the_command() {
    let (fake, root) = ext_root(gate_script("rm -f keep.txt"), "gate.js", GATE_EXT);
    root.write_cwd_file("keep.txt", "precious");
    let mut agent = root.spawn_with(false, &["-e", "gate.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "clean up"}));
    let (_, select) = ui_request(&agent, 0, "select");
    assert_eq!(select["title"], "Allow rm -f keep.txt?");
    assert_eq!(select["options"], json!(["Yes", "No"]));
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "value": "No"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["content"][0]["text"], "Blocked by user");
    assert!(root.cwd.join("keep.txt").is_file(), "the command never ran");
    // The model saw the blocked result.
    let reqs = fake.requests();
    assert!(reqs.last().unwrap().body_text().contains("Blocked by user"));
}

#[test]
fn gate_answered_yes_runs_and_handlers_can_change_arguments() {
    let (_fake, root) = ext_root(gate_script("rm -f gone.txt"), "gate.js", GATE_EXT);
    root.write_cwd_file("gone.txt", "x");
    let mut agent = root.spawn_with(false, &["-e", "gate.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let (_, select) = ui_request(&agent, 0, "select");
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "value": "Yes"}));
    agent.wait_event("agent_settled");
    assert_eq!(tool_end(&agent)["isError"], false, "{}", agent.dump());
    assert!(!root.cwd.join("gone.txt").exists());

    let (_fake, root) = ext_root(gate_script("echo old"), "gate.js", GATE_EXT);
    let mut agent = root.spawn_with(false, &["-e", "gate.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    assert_eq!(tool_end(&agent)["result"]["content"][0]["text"], "new\n");
}

#[test]
fn throwing_tool_call_handler_blocks_and_reports() {
    let ext = r#"export default function (pi) {
      pi.on("tool_call", () => { throw new Error("gate broke"); });
    }"#;
    let (_fake, root) = ext_root(gate_script("touch ran.txt"), "bad.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "bad.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(end["isError"], true);
    assert!(end["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("gate broke"));
    assert!(!root.cwd.join("ran.txt").exists(), "fail closed");
    let err = agent.wait_event("extension_error");
    assert_eq!(err["event"], "tool_call");
    assert_eq!(err["error"], "gate broke");
    assert!(err["extensionPath"].as_str().unwrap().ends_with("bad.js"));
}

#[test]
fn killed_host_blocks_the_pending_tool_call_and_the_run_settles() {
    // The handler records the host's pid and never answers.
    let ext = r#"import { writeFileSync } from "node:fs";
    export default function (pi) {
      pi.on("tool_call", () => { writeFileSync("host.pid", String(process.pid)); return new Promise(() => {}); });
    }"#;
    let (_fake, root) = ext_root(gate_script("touch ran.txt"), "hang.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "hang.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let pid_file = root.cwd.join("host.pid");
    let start = std::time::Instant::now();
    let pid: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.parse().ok())
        {
            break p;
        }
        assert!(
            start.elapsed() < LIVENESS,
            "handler never ran: {}",
            agent.dump()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let (_, host) = agent.wait_from(0, LIVENESS, |v| {
        kind(v) == "extension_error" && v["event"] == "host"
    });
    assert_eq!(host["extensionPath"], "<runtime>");
    let (_, err) = agent.wait_from(0, LIVENESS, |v| {
        kind(v) == "extension_error" && v["event"] == "tool_call"
    });
    assert_eq!(err["event"], "tool_call");
    assert!(err["error"].as_str().unwrap().contains("exited"), "{err}");
    agent.wait_event("agent_settled");
    assert_eq!(tool_end(&agent)["isError"], true);
    assert!(!root.cwd.join("ran.txt").exists(), "fail closed");
}

#[test]
fn tool_result_handler_changes_the_result() {
    let ext = r#"export default function (pi) {
      pi.on("tool_result", (event) => ({ content: [{ type: "text", text: "redacted " + event.toolName }] }));
    }"#;
    let (fake, root) = ext_root(gate_script("echo secret"), "r.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "r.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    assert_eq!(
        tool_end(&agent)["result"]["content"][0]["text"],
        "redacted bash"
    );
    let body = fake.requests().last().unwrap().body_text();
    assert!(
        body.contains("redacted bash") && !body.contains("secret\\n"),
        "{body}"
    );
}

#[test]
fn node_missing_fails_closed_naming_the_extension() {
    let (_fake, root) = ext_root(Script::new([]), "gate.js", GATE_EXT);
    let mut agent = root.spawn_with_env(
        false,
        &["-e", "gate.js"],
        &[("PI_NODE", "/nonexistent/node")],
    );
    let status = agent.wait_exit(LIVENESS).expect("pi exits");
    assert_eq!(status.code(), Some(1));
    let err = agent.stderr();
    assert!(err.contains("gate.js") && err.contains("Node.js"), "{err}");
}

#[test]
fn no_extension_starts_no_node() {
    // A "node" that leaves a mark when started.
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mark = root.path().join("node-started");
    let fake_node = root.path().join("fake-node.sh");
    std::fs::write(
        &fake_node,
        format!("#!/bin/sh\ntouch {}\nexit 1\n", mark.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &fake_node,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let node = fake_node.to_string_lossy().into_owned();
    let mut agent = root.spawn_with_env(false, &[], &[("PI_NODE", &node)]);
    agent.request(json!({"id": "s", "type": "get_state"}));
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    assert!(!mark.exists());
    drop(cmds);
    // With an extension configured the same "node" is started (and, being broken, stops pi).
    root.write_cwd_file("gate.js", GATE_EXT);
    let mut agent = root.spawn_with_env(false, &["-e", "gate.js"], &[("PI_NODE", &node)]);
    assert_eq!(agent.wait_exit(LIVENESS).and_then(|s| s.code()), Some(1));
    assert!(mark.exists());
}

#[test]
fn discovery_agent_dir_project_trust_and_no_extensions() {
    let cmd_ext = |name: &str| {
        format!(
            r#"export default function (pi) {{ pi.registerCommand("{name}", {{ description: "d", handler: async () => {{}} }}); }}"#
        )
    };
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let agent_ext = root.path().join("agent/extensions/a.js");
    std::fs::create_dir_all(agent_ext.parent().unwrap()).unwrap();
    std::fs::write(&agent_ext, cmd_ext("from-agent")).unwrap();
    let pkg = root.path().join("agent/extensions/pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"pi": {"extensions": ["./main.js"]}}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("main.js"), cmd_ext("from-pkg")).unwrap();
    root.write_cwd_file(".pi/extensions/p.js", &cmd_ext("from-project"));
    let names = |args: &[&str]| -> Vec<String> {
        let mut agent = root.spawn_with(false, args);
        let r = agent.request(json!({"id": "c", "type": "get_commands"}));
        r["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["sourceInfo"]["source"] != "builtin")
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["--no-approve"]), ["from-agent", "from-pkg"]);
    assert_eq!(
        names(&["--approve"]),
        ["from-agent", "from-pkg", "from-project"]
    );
    assert!(names(&["-ne", "--approve"]).is_empty());
}

#[test]
fn json_mode_dialogs_resolve_at_once() {
    let ext = r#"export default function (pi) {
      pi.on("tool_call", async (event, ctx) => {
        const c = await ctx.ui.confirm("ok?", "m");
        if (!c) return { block: true, reason: `no UI in ${ctx.mode} (hasUI ${ctx.hasUI})` };
      });
    }"#;
    let (_fake, root) = ext_root(gate_script("touch ran.txt"), "j.js", ext);
    let bin = std::env::var_os("PI_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    let out = std::process::Command::new(bin)
        .args(["--mode", "json", "--no-session", "-e", "j.js", "go"])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no UI in json (hasUI false)"), "{text}");
    assert!(!text.contains("extension_ui_request"));
    assert!(!root.cwd.join("ran.txt").exists());
}

#[test]
fn typescript_extensions_load_with_types_enums_and_ts_imports() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file(
        "ts/helper.ts",
        "export enum Greeting { Hi = \"hi\", Yo = \"yo\" }\nexport function greet(who: string): string { return `${Greeting.Hi} ${who}`; }\n",
    );
    root.write_cwd_file(
        "ts/index.ts",
        r#"import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "@earendil-works/pi-ai";
import { greet } from "./helper.js";
interface Opts { loud?: boolean }
class Greeter { constructor(private readonly opts: Opts) {} say(x: string): string { return this.opts.loud ? greet(x).toUpperCase() : greet(x); } }
const schema = Type.Object({ name: Type.String() });
export default function (pi: ExtensionAPI) {
  const g = new Greeter({ loud: true });
  pi.registerCommand("greet", { description: g.say("ts") + " " + Object.keys(schema.properties).join(), handler: async (args: string, ctx: any) => { ctx.ui.notify(g.say(args)); } });
}
"#,
    );
    root.write_cwd_file(
        "bad.ts",
        "export default function (pi) {\n  const x: = 1;\n}\n",
    );
    // A TypeScript file that does not transpile stops pi (fail closed), naming the position.
    let mut bad = root.spawn_with(false, &["-e", "ts", "-e", "bad.ts"]);
    let status = bad.wait_exit(LIVENESS).expect("pi exits");
    assert_eq!(status.code(), Some(1), "{}", bad.dump());
    let err = bad.stderr();
    assert!(err.contains("bad.ts:2:"), "source position in {err}");
    assert!(bad.records().is_empty(), "{}", bad.dump());
    let mut agent = root.spawn_with(false, &["-e", "ts"]);
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    assert_eq!(
        cmds["data"]["commands"][0]["name"],
        "greet",
        "{}",
        agent.dump()
    );
    assert_eq!(cmds["data"]["commands"][0]["description"], "HI TS name");
    agent.send(json!({"id": "p", "type": "prompt", "message": "/greet you"}));
    let resp = agent.wait_response("p");
    assert_eq!(resp["data"]["disposition"], "handled");
    let (_, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "HI YOU");
}

#[test]
fn api_calls_and_session_events_reach_the_extension() {
    let ext = r#"export default function (pi) {
      pi.registerCommand("go", { handler: async () => {
        pi.setSessionName("named by ext");
        pi.appendEntry("ext-state", { n: 1 });
        pi.sendUserMessage("hello from ext");
      } });
      pi.on("agent_end", (event, ctx) => { ctx.ui.notify("agent_end with " + event.messages.length + " messages"); });
    }"#;
    let (fake, root) = ext_root(Script::new([Turn::text("hi back")]), "api.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "api.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "/go"}));
    agent.wait_event("agent_settled");
    let (_, n) = ui_request(&agent, 0, "notify");
    assert!(
        n["message"]
            .as_str()
            .unwrap()
            .starts_with("agent_end with "),
        "{n}"
    );
    let info = agent.wait_event("session_info_changed");
    assert_eq!(info["name"], "named by ext");
    let entry = agent.wait_event("entry_appended");
    assert_eq!(entry["entry"]["type"], "custom");
    assert_eq!(entry["entry"]["customType"], "ext-state");
    assert_eq!(entry["entry"]["data"], json!({"n": 1}));
    assert!(fake.requests()[0].body_text().contains("hello from ext"));
}

#[test]
fn registered_tool_is_offered_called_and_listed_in_the_prompt() {
    let ext = r#"import { Type } from "typebox";
    export default function (pi) {
      pi.registerTool({
        name: "shout", label: "Shout", description: "Shouts a word",
        promptSnippet: "Shout a word back",
        parameters: Type.Object({ word: Type.String({ description: "what" }) }),
        async execute(id, params) { return { content: [{ type: "text", text: params.word.toUpperCase() + " " + id }], details: { n: 1 } }; },
      });
    }"#;
    let (fake, root) = ext_root(
        Script::new([
            Turn::tool_call("shout", json!({"word": "hey"})),
            Turn::text("ok"),
        ]),
        "t.js",
        ext,
    );
    let mut agent = root.spawn_with(false, &["-e", "t.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "shout"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(end["isError"], false, "{}", agent.dump());
    assert_eq!(end["result"]["content"][0]["text"], "HEY call_fake_1_0");
    assert_eq!(end["result"]["details"], json!({"n": 1}));
    let first = fake.requests()[0].body_text();
    assert!(
        first.contains("\"shout\"") && first.contains("Shouts a word"),
        "{first}"
    );
    assert!(first.contains("Shout a word back"));
}

/// Upstream 1.6's `examples/extensions` folder (`PI_UPSTREAM_EXAMPLES`, set by `.ci/run` from
/// `scripts/fetch-upstream-examples.sh`). Missing: a failure with `PI_REQUIRE_TEST_RESOURCES=1`,
/// else a notice on stderr and the test passes without running.
pub(crate) fn upstream_examples() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("PI_UPSTREAM_EXAMPLES")
        .map(std::path::PathBuf::from)
        .filter(|d| d.join("hello.ts").is_file());
    if dir.is_none() {
        let what = "upstream 1.6's example extensions (PI_UPSTREAM_EXAMPLES)";
        let how = "run PI_UPSTREAM_EXAMPLES=$(scripts/fetch-upstream-examples.sh) cargo test";
        if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
            panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
        }
        eprintln!("SKIP: {what}; {how}");
    }
    dir
}

/// Upstream 1.6's own example extensions, unchanged (see [`upstream_examples`]).
#[test]
fn upstream_permission_gate_example_blocks_when_answered_no() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let gate = dir.join("permission-gate.ts");
    let (_fake, root) = setup(gate_script("rm -rf victim"), DEFAULT_MODEL);
    std::fs::create_dir_all(root.cwd.join("victim")).unwrap();
    let mut agent = root.spawn_with(false, &["-e", gate.to_str().unwrap()]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "clean"}));
    let (_, select) = ui_request(&agent, 0, "select");
    assert_eq!(select["options"], json!(["Yes", "No"]));
    assert!(select["title"].as_str().unwrap().contains("rm -rf victim"));
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "value": "No"}));
    agent.wait_event("agent_settled");
    assert_eq!(
        tool_end(&agent)["result"]["content"][0]["text"],
        "Blocked by user"
    );
    assert!(root.cwd.join("victim").is_dir(), "the command never ran");
}

#[test]
fn input_handlers_transform_or_handle_prompts() {
    let ext = r#"export default function (pi) {
      pi.on("input", async (event, ctx) => {
        if (event.text === "ping") { ctx.ui.notify("pong " + event.source); return { action: "handled" }; }
        if (event.text.startsWith("?q ")) return { action: "transform", text: "Briefly: " + event.text.slice(3) };
        return { action: "continue" };
      });
    }"#;
    let (fake, root) = ext_root(Script::new([Turn::text("a")]), "in.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "in.js"]);
    let r = agent.request(json!({"id": "p1", "type": "prompt", "message": "ping"}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    let (_, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "pong rpc");
    let r = agent.request(json!({"id": "p2", "type": "prompt", "message": "?q why"}));
    assert_eq!(r["data"]["disposition"], "started");
    agent.wait_event("agent_settled");
    assert_eq!(fake.requests().len(), 1);
    assert!(fake.requests()[0].body_text().contains("Briefly: why"));
}

/// Upstream's `hello.ts` (registerTool with TypeBox parameters; see [`upstream_examples`]).
#[test]
fn upstream_hello_example_tool_runs() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let hello = dir.join("hello.ts");
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("hello", json!({"name": "pi"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with(false, &["-e", hello.to_str().unwrap()]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "greet"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Hello, pi!",
        "{}",
        agent.dump()
    );
    assert_eq!(end["result"]["details"], json!({"greeted": "pi"}));
}

/// One of upstream 1.6's example extensions, or `None` (see [`upstream_examples`]).
pub(crate) fn upstream_example(name: &str) -> Option<String> {
    upstream_examples().map(|d| d.join(name).to_string_lossy().into_owned())
}

/// Upstream's `input-transform.ts`: `?quick` rewrites the prompt, `ping` is answered without
/// the model.
#[test]
fn upstream_input_transform_example() {
    let Some(ext) = upstream_example("input-transform.ts") else {
        return;
    };
    let (fake, root) = setup(Script::new([Turn::text("short")]), DEFAULT_MODEL);
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    let r = agent.request(json!({"id": "p1", "type": "prompt", "message": "ping"}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    let (_, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "pong");
    assert_eq!(n["notifyType"], "info");
    let r = agent.request(json!({"id": "p2", "type": "prompt", "message": "?quick What is Rust?"}));
    assert_eq!(r["data"]["disposition"], "started");
    agent.wait_event("agent_settled");
    assert_eq!(fake.requests().len(), 1);
    assert!(fake.requests()[0]
        .body_text()
        .contains("Respond briefly in 1-2 sentences: What is Rust?"));
}

/// Upstream's `tools.ts`: loads (session_start restores from the branch) and `/tools` says it
/// needs the TUI.
#[test]
fn upstream_tools_example() {
    let Some(ext) = upstream_example("tools.ts") else {
        return;
    };
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    assert_eq!(cmds["data"]["commands"][0]["name"], "tools", "{cmds}");
    let r = agent.request(json!({"id": "p", "type": "prompt", "message": "/tools"}));
    assert_eq!(r["data"]["disposition"], "handled");
    let (_, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "/tools requires TUI mode");
    assert_eq!(n["notifyType"], "error");
    assert!(
        !agent.events().iter().any(|v| kind(v) == "extension_error"),
        "{}",
        agent.dump()
    );
}

/// Upstream's `commands.ts`: `/commands` lists the session's slash commands in a `select`
/// (headers per source), then offers the chosen command's path in a `confirm`.
#[test]
fn upstream_commands_example_lists_commands() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let file = dir.join("commands.ts");
    let (_fake, root) = setup(Script::new([Turn::text("x")]), DEFAULT_MODEL);
    let mut agent = root.spawn_with(false, &["-e", file.to_str().unwrap()]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "/commands"}));
    let (_, select) = ui_request(&agent, 0, "select");
    assert_eq!(select["title"], "Available Commands");
    let options = select["options"].as_array().unwrap().clone();
    assert_eq!(options[0], "--- Extensions ---", "{select}");
    let own = "/commands - List available slash commands";
    assert!(options.contains(&json!(own)), "{select}");
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "value": own}));
    let (_, confirm) = ui_request(&agent, 0, "confirm");
    assert_eq!(confirm["title"], "commands");
    assert!(confirm["message"].as_str().unwrap().contains("commands.ts"));
    agent.send(json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}));
    let (_, n) = ui_request(&agent, 0, "notify");
    assert!(
        n["message"].as_str().unwrap().ends_with("commands.ts"),
        "{n}"
    );
    assert_eq!(agent.wait_response("p")["data"]["disposition"], "handled");
}

/// Upstream's `session-name.ts`: `/session-name x` names the session, `/session-name` shows it.
#[test]
fn upstream_session_name_example_sets_and_shows_the_name() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let file = dir.join("session-name.ts");
    let (_fake, root) = setup(Script::new([Turn::text("x")]), DEFAULT_MODEL);
    let mut agent = root.spawn_with(false, &["-e", file.to_str().unwrap()]);
    let r = agent.request(json!({"id": "s", "type": "prompt", "message": "/session-name"}));
    assert_eq!(r["data"]["disposition"], "handled");
    let (at, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "No session name set");
    agent.request(json!({"id": "n", "type": "prompt", "message": "/session-name  Refactor auth "}));
    let info = agent.wait_event("session_info_changed");
    assert_eq!(info["name"], "Refactor auth");
    let (at, n) = ui_request(&agent, at + 1, "notify");
    assert_eq!(n["message"], "Session named: Refactor auth");
    // A name set by the client is the one the extension reads.
    agent.request(json!({"id": "c", "type": "set_session_name", "name": "From client"}));
    agent.request(json!({"id": "g", "type": "prompt", "message": "/session-name"}));
    let (_, n) = ui_request(&agent, at + 1, "notify");
    assert_eq!(n["message"], "Session: From client");
    let state = agent.request(json!({"id": "st", "type": "get_state"}));
    assert_eq!(state["data"]["sessionName"], "From client");
}

/// Upstream's `rpc-demo.ts`: title, widget and status at `session_start`; status per turn;
/// a dangerous `bash` call asks, "Block" blocks it; `/rpc-input` and `/rpc-prefill`;
/// `new_session` asks to confirm and is cancelled when refused.
#[test]
fn upstream_rpc_demo_example_drives_the_ui_protocol() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let file = dir.join("rpc-demo.ts");
    let (_fake, root) = setup(gate_script("rm -rf victim"), DEFAULT_MODEL);
    std::fs::create_dir_all(root.cwd.join("victim")).unwrap();
    let mut agent = root.spawn_with(false, &["-e", file.to_str().unwrap()]);
    let (_, title) = ui_request(&agent, 0, "setTitle");
    assert_eq!(title["title"], "pi RPC Demo");
    let (_, widget) = ui_request(&agent, 0, "setWidget");
    assert_eq!(
        widget["widgetLines"],
        json!(["--- RPC Extension UI Demo ---", "Loaded and ready."])
    );
    let (_, status) = ui_request(&agent, 0, "setStatus");
    assert_eq!(status["statusText"], "Turns: 0");
    agent.send(json!({"id": "p", "type": "prompt", "message": "clean"}));
    let (_, select) = ui_request(&agent, 0, "select");
    assert_eq!(select["title"], "Dangerous command: rm -rf victim");
    assert_eq!(select["options"], json!(["Allow", "Block"]));
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "value": "Block"}));
    agent.wait_event("agent_settled");
    assert_eq!(
        tool_end(&agent)["result"]["content"][0]["text"],
        "Blocked by user"
    );
    assert!(root.cwd.join("victim").is_dir(), "the command never ran");
    let statuses: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| v["method"] == "setStatus")
        .map(|v| v["statusText"].clone())
        .collect();
    assert!(
        statuses.contains(&json!("Turn 1 running...")),
        "{statuses:?}"
    );
    assert!(statuses.contains(&json!("Turn 1 done")), "{statuses:?}");
    // /rpc-input: an input dialog, answered.
    let from = agent.len();
    agent.send(json!({"id": "i", "type": "prompt", "message": "/rpc-input"}));
    let (_, input) = ui_request(&agent, from, "input");
    agent.send(json!({"type": "extension_ui_response", "id": input["id"], "value": "typed"}));
    let (_, n) = ui_request(&agent, from, "notify");
    assert_eq!(n["message"], "You entered: typed");
    // /rpc-prefill: set_editor_text.
    let from = agent.len();
    agent.request(json!({"id": "f", "type": "prompt", "message": "/rpc-prefill"}));
    let (_, t) = ui_request(&agent, from, "set_editor_text");
    assert_eq!(t["text"], "This text was set by the rpc-demo extension.");
    // new_session: session_before_switch asks; refused, it is cancelled.
    let from = agent.len();
    agent.send(json!({"id": "n", "type": "new_session"}));
    let (_, c) = ui_request(&agent, from, "confirm");
    assert_eq!(c["title"], "Clear session?");
    agent.send(json!({"type": "extension_ui_response", "id": c["id"], "confirmed": false}));
    assert_eq!(agent.wait_response("n")["data"], json!({"cancelled": true}));
    // Accepted: a new session, and session_start says so.
    let from = agent.len();
    agent.send(json!({"id": "n2", "type": "new_session"}));
    let (_, c) = ui_request(&agent, from, "confirm");
    agent.send(json!({"type": "extension_ui_response", "id": c["id"], "confirmed": true}));
    assert_eq!(
        agent.wait_response("n2")["data"],
        json!({"cancelled": false})
    );
    let (_, title) = ui_request(&agent, from, "setTitle");
    assert_eq!(title["title"], "pi RPC Demo (new session)");
}

/// Upstream's `with-deps/` (a folder with a `package.json` `pi` manifest and its own
/// `node_modules`, after `npm install`): its tool uses the `ms` package.
#[test]
fn upstream_with_deps_example_resolves_its_own_node_modules() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let folder = dir.join("with-deps");
    if !folder.join("node_modules").join("ms").is_dir() {
        panic!(
            "{} has no node_modules: run scripts/fetch-upstream-examples.sh",
            folder.display()
        );
    }
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("parse_duration", json!({"duration": "2 days"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with(false, &["-e", folder.to_str().unwrap()]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "how long"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "2 days = 172800000 milliseconds",
        "{}",
        agent.dump()
    );
}

/// Upstream's `todo.ts`: the `todo` tool with a `StringEnum` action and a numeric id that the
/// model sends as a string (coerced), and `/todos` outside the TUI.
#[test]
fn upstream_todo_example() {
    let Some(ext) = upstream_example("todo.ts") else {
        return;
    };
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("todo", json!({"action": "add", "text": "buy milk"})),
            Turn::tool_call("todo", json!({"action": "toggle", "id": "1"})),
            Turn::tool_call("todo", json!({"action": "list"})),
            Turn::tool_call("todo", json!({"action": "explode"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "plan"}));
    agent.wait_event("agent_settled");
    let ends: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "tool_execution_end")
        .collect();
    let texts: Vec<&str> = ends
        .iter()
        .map(|e| e["result"]["content"][0]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(texts[0], "Added todo #1: buy milk", "{}", agent.dump());
    assert_eq!(texts[1], "Todo #1 completed");
    assert_eq!(texts[2], "[x] #1: buy milk");
    assert_eq!(ends[2]["result"]["details"]["todos"][0]["done"], true);
    assert_eq!(ends[3]["isError"], true);
    assert!(
        texts[3].starts_with(
            "Validation failed for tool \"todo\":\n  - action: expected one of [\"list\",\"add\",\"toggle\",\"clear\"]\n"
        ),
        "{}",
        texts[3]
    );
    assert!(fake.requests()[0].body_text().contains("\"todo\""));
    let r = agent.request(json!({"id": "t", "type": "prompt", "message": "/todos"}));
    assert_eq!(r["data"]["disposition"], "handled");
    let (_, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "/todos requires interactive mode");
}

/// A `tool_call` gate also sees the calls a `codemode` script makes (upstream runs nested calls
/// through the same hooks, with `parentToolCallId`): a blocked `bash` call rejects in the
/// script with the reason and never runs, and a `tool_result` handler changes what the script
/// gets back. The nested calls' `tool_execution_*` events carry `parentToolCallId` and the ids
/// `<codemode call>/<n>`, and the codemode result message records them in `nestedCalls`
/// (upstream 1.6 docs/extensions.md "Calling Other Tools").
#[test]
fn gates_see_the_calls_of_codemode_scripts() {
    let ext = r#"export default function (pi) {
      pi.on("tool_call", (event) => {
        if (event.toolName === "bash" && /touch/.test(event.input.command)) {
          return { block: true, reason: "no touching " + event.toolCallId.includes("/") + " " + event.parentToolCallId };
        }
      });
      pi.on("tool_result", (event) => {
        if (event.toolName === "read") return { content: [{ type: "text", text: "redacted" }] };
      });
    }"#;
    let code = "let m = 'none';\ntry { await tools.bash({ command: 'touch ran.txt' }); } catch (e) { m = String(e.message || e); }\nconst r = await tools.read({ path: 'secret.txt' });\nreturn m + ' | ' + r;";
    let (_fake, root) = ext_root(
        Script::new([
            Turn::text("").with_tool_call("codemode", json!({ "code": code })),
            Turn::text("done"),
        ]),
        "gate.js",
        ext,
    );
    root.write_cwd_file("secret.txt", "the secret");
    root.merge_settings(json!({"defaultTools": ["+codemode"]}));
    let mut agent = root.spawn_with(false, &["-e", "gate.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let events = agent.events();
    let of = |t: &str| -> Vec<Value> { events.iter().filter(|v| kind(v) == t).cloned().collect() };
    let (starts, ends) = (of("tool_execution_start"), of("tool_execution_end"));
    let parent = starts[0]["toolCallId"].as_str().unwrap().to_string();
    assert_eq!(starts[0]["toolName"], "codemode", "{}", agent.dump());
    assert!(starts[0].get("parentToolCallId").is_none());
    let nested = |v: &Value| {
        (
            v["toolCallId"].clone(),
            v["toolName"].clone(),
            v["parentToolCallId"].clone(),
        )
    };
    let want = vec![
        (json!(format!("{parent}/1")), json!("bash"), json!(parent)),
        (json!(format!("{parent}/2")), json!("read"), json!(parent)),
    ];
    assert_eq!(starts[1..].iter().map(nested).collect::<Vec<_>>(), want);
    assert_eq!(ends[..2].iter().map(nested).collect::<Vec<_>>(), want);
    // The script's progress: `details.calls` as each call starts (id not yet known) and ends.
    let progress: Vec<Value> = of("tool_execution_update")
        .iter()
        .filter(|u| u["toolCallId"] == json!(parent))
        .map(|u| {
            let calls = u["partialResult"]["details"]["calls"].as_array().unwrap();
            json!(calls
                .iter()
                .map(|c| json!([c["id"], c["status"]]))
                .collect::<Vec<_>>())
        })
        .collect();
    let (q, one, two) = (
        format!("{parent}/?"),
        format!("{parent}/1"),
        format!("{parent}/2"),
    );
    assert_eq!(
        progress,
        vec![
            json!([]),
            json!([[q, "running"]]),
            json!([[one, "error"]]),
            json!([[one, "error"], [q, "running"]]),
            json!([[one, "error"], [two, "ok"]]),
        ]
    );
    // The blocked call never ran: no duration, as for a call the loop refuses.
    assert_eq!(ends[0]["isError"], true);
    assert!(ends[0].get("durationMs").is_none(), "{}", ends[0]);
    assert_eq!(ends[1]["isError"], false);
    assert!(ends[1]["durationMs"].is_u64(), "{}", ends[1]);
    let end = &ends[2];
    assert_eq!(end["toolName"], "codemode", "{}", agent.dump());
    let text: String = end["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        text.contains(&format!("no touching true {parent} | redacted")),
        "{text}"
    );
    let result_message = of("message_end")
        .into_iter()
        .find(|v| v["message"]["role"] == "toolResult")
        .unwrap();
    let message: pi_ai::ToolResultMessage =
        serde_json::from_value(result_message["message"].clone()).unwrap();
    let record = message
        .nested_calls
        .expect("nestedCalls on the codemode result");
    assert!(record.complete);
    let calls: Vec<Value> = record
        .calls
        .iter()
        .map(|c| {
            json!([
                c.id,
                c.name,
                c.arguments,
                c.status,
                c.error,
                c.duration_ms.is_some()
            ])
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            json!([format!("{parent}/1"), "bash", {"command": "touch ran.txt"}, "error", format!("no touching true {parent}"), true]),
            json!([format!("{parent}/2"), "read", {"path": "secret.txt"}, "ok", null, true]),
        ]
    );
    assert!(!text.contains("the secret"), "{text}");
    assert!(
        !root.cwd.join("ran.txt").exists(),
        "the gated command never ran"
    );
}

/// The extension SDK cache (`PI_SDK_DIR`, set by `.ci/run` from `scripts/fetch-upstream-sdk.sh`;
/// src/extensions/sdk.rs): upstream's real modules behind the extensions' imports. Missing: a
/// failure with `PI_REQUIRE_TEST_RESOURCES=1`, else a notice on stderr and the test passes
/// without running.
pub(crate) fn upstream_sdk() -> bool {
    let ok = std::env::var_os("PI_SDK_DIR")
        .map(std::path::PathBuf::from)
        .is_some_and(|d| d.join(".complete").is_file());
    if !ok {
        let what = "upstream 1.6's extension SDK (PI_SDK_DIR)";
        let how = "run PI_SDK_DIR=$(scripts/fetch-upstream-sdk.sh) cargo test";
        if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
            panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
        }
        eprintln!("SKIP: {what}; {how}");
    }
    ok
}

/// Runs `/<command>` of the extension in `ext.js` and returns the message of its first notify.
fn command_notice(root: &RunRoot, extra: &[(&str, &str)], command: &str) -> (RpcAgent, String) {
    let mut agent = root.spawn_with_env(false, &["-e", "ext.js"], extra);
    let r = agent.request(json!({"id": "p", "type": "prompt", "message": format!("/{command}")}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    let (_, n) = ui_request(&agent, 0, "notify");
    let text = n["message"].as_str().unwrap_or_default().to_string();
    (agent, text)
}

/// Names the stand-ins lacked now come from upstream's real modules (`parseFrontmatter`,
/// `DEFAULT_MAX_BYTES`, `withFileMutationQueue`, `keyText` through the `@mariozechner` alias,
/// `Check` of `typebox/value`, pi-ai's `StringEnum`, pi-tui's `truncateToWidth`), and a name
/// the SDK does not export is `undefined` instead of a load error (upstream's jiti is as
/// forgiving).
#[test]
fn sdk_imports_are_upstreams_and_unknown_names_are_undefined() {
    if !upstream_sdk() {
        return;
    }
    let ext = r#"
import { parseFrontmatter, DEFAULT_MAX_BYTES, withFileMutationQueue, noSuchExport } from "@earendil-works/pi-coding-agent";
import { keyText } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";
import { Check } from "typebox/value";
import { StringEnum } from "@earendil-works/pi-ai";
import { truncateToWidth } from "@earendil-works/pi-tui";
export default function (pi) {
  pi.registerCommand("sdk", { description: "probe", handler: async (_args, ctx) => {
    const schema = Type.Object({ n: Type.Number() });
    ctx.ui.notify(JSON.stringify({
      fm: parseFrontmatter("---\nname: x\n---\nbody"), max: DEFAULT_MAX_BYTES,
      queue: typeof withFileMutationQueue, missing: typeof noSuchExport, key: typeof keyText,
      good: Check(schema, { n: 1 }), bad: Check(schema, { n: "x" }), e: StringEnum(["a", "b"]),
      t: truncateToWidth("abcdef", 3, ""), schema }));
  }});
}
"#;
    let (_fake, root) = ext_root(Script::new([]), "ext.js", ext);
    let (agent, text) = command_notice(&root, &[], "sdk");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{}", agent.dump()));
    assert_eq!(
        v["fm"],
        json!({"frontmatter": {"name": "x"}, "body": "body"})
    );
    assert_eq!(v["max"], 51200);
    assert_eq!(v["queue"], "function");
    assert_eq!(v["missing"], "undefined");
    assert_eq!(v["key"], "function");
    assert_eq!(
        (v["good"].clone(), v["bad"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(v["e"], json!({"type": "string", "enum": ["a", "b"]}));
    assert_eq!(v["t"], "abc\u{1b}[0m"); // pi-tui's own (it resets styles at the cut)
                                        // TypeBox's own JSON schema (key order as upstream sends it to the model).
    assert_eq!(
        serde_json::to_string(&v["schema"]).unwrap(),
        r#"{"type":"object","required":["n"],"properties":{"n":{"type":"number"}}}"#
    );
    assert!(
        !agent.stderr().contains("extension SDK"),
        "{}",
        agent.stderr()
    );
}

/// Without the SDK cache (and offline, so it cannot be filled) the host falls back to its
/// stand-ins with one warning on stderr; a name they lack is `undefined`, not a load error.
#[test]
fn without_the_sdk_stand_ins_load_with_one_warning_and_unknown_names_undefined() {
    let ext = r#"
import { Type, noSuchExport } from "@earendil-works/pi-coding-agent";
import { Value, alsoMissing } from "typebox/value";
export default function (pi) {
  pi.registerCommand("probe", { description: "probe", handler: async (_args, ctx) => {
    ctx.ui.notify([typeof Type.Object, typeof noSuchExport, typeof Value.Check, typeof alsoMissing].join(" "));
  }});
}
"#;
    let (_fake, root) = ext_root(Script::new([]), "ext.js", ext);
    let missing = root.path().join("no-sdk");
    let (agent, text) =
        command_notice(&root, &[("PI_SDK_DIR", missing.to_str().unwrap())], "probe");
    assert_eq!(
        text,
        "function undefined function undefined",
        "{}",
        agent.dump()
    );
    let err = agent.stderr();
    assert_eq!(err.matches("extension SDK").count(), 1, "{err}");
    assert!(err.contains("offline (PI_OFFLINE is set)"), "{err}");
    assert!(!missing.exists(), "nothing is fetched offline");
}

/// `ctx.ui.theme` is upstream's theme (initialised as upstream's RPC mode does): the accent
/// colour of the default theme is the same ANSI sequence upstream 1.6 sends in this
/// environment (TERM=dumb, no COLORTERM: 256 colours; upstream ignores NO_COLOR here).
#[test]
fn sdk_theme_colours_notifications_as_upstream() {
    if !upstream_sdk() {
        return;
    }
    let ext = r#"export default function (pi) {
  pi.registerCommand("colour", { description: "c", handler: async (_a, ctx) => {
    ctx.ui.notify(ctx.ui.theme.fg("accent", "hi") + "|" + ctx.ui.theme.bold("b"));
  }});
}"#;
    let (_fake, root) = ext_root(Script::new([]), "ext.js", ext);
    let (agent, text) = command_notice(&root, &[], "colour");
    assert_eq!(text, "\u{1b}[38;5;5mhi\u{1b}[39m|b", "{}", agent.dump());
}

/// Upstream 1.6's examples that import SDK names the stand-ins lacked (`createBashTool`,
/// `convertToLlm`, `VERSION`, `parseKey`, pi-ai's `complete`, pi-ai/compat, …) load unchanged
/// with the real SDK: no `extension_error`, no load error on stderr (see [`upstream_sdk`]).
#[test]
fn upstream_examples_that_need_the_real_sdk_load() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    for name in [
        "bash-spawn-hook.ts",
        "built-in-tool-renderer.ts",
        "custom-compaction.ts",
        "custom-header.ts",
        "custom-provider-gitlab-duo/index.ts",
        "doom-overlay/index.ts",
        "github-issue-autocomplete.ts",
        "handoff.ts",
        "minimal-mode.ts",
        "overlay-test.ts",
        "preset.ts",
        "provider-payload.ts",
        "space-invaders.ts",
        "ssh.ts",
        "subagent/index.ts",
        "summarize.ts",
        "tool-override.ts",
        "truncated-tool.ts",
    ] {
        let file = dir.join(name);
        let mut agent = root.spawn_with(false, &["-e", file.to_str().unwrap()]);
        let r = agent.request(json!({"id": "c", "type": "get_commands"}));
        assert_eq!(r["success"], true, "{name}: {}", agent.dump());
        let errors: Vec<Value> = agent
            .events()
            .into_iter()
            .filter(|v| kind(v) == "extension_error")
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
        assert!(
            !agent.stderr().contains("failed to load"),
            "{name}: {}",
            agent.stderr()
        );
        agent.kill();
    }
}

/// Upstream's `bash-spawn-hook.ts`: a `bash` tool made by the SDK's own `createBashTool` with
/// a spawn hook runs in the host; the hook's environment reaches the command.
#[test]
fn upstream_bash_spawn_hook_example_runs_the_sdks_bash_tool() {
    let Some(ext) = upstream_example("bash-spawn-hook.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "echo hook=$PI_SPAWN_HOOK"})),
            Turn::text("ok"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "run"}));
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    let text = end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("hook=1"), "{}", agent.dump());
}
