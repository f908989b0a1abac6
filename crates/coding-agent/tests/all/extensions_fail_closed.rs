//! Extensions fail closed (issue 22, issue 28 item 4): an extension that fails to load stops
//! `pi` with exit 1 and upstream 1.6's message before anything is served or any provider is
//! asked, in every mode; a hook round that never settles neither blocks `abort` nor holds the
//! exit at stdin EOF. The extensions here are our own, written for these tests.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};

/// A `tool_call` hook that never settles.
const HANG_EXT: &str = r#"export default function (pi) {
  pi.on("tool_call", () => new Promise(() => {}));
}"#;

/// A turn calling `bash` (the call a gate would vet), then a plain answer.
fn touch_script() -> Script {
    Script::new([
        Turn::tool_call("bash", json!({"command": "touch ran.txt"})),
        Turn::text("done"),
    ])
}

fn tool_end(agent: &RpcAgent) -> Value {
    agent
        .events()
        .into_iter()
        .find(|v| kind(v) == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {}", agent.dump()))
}

#[test]
fn abort_ends_a_tool_call_hook_that_never_settles() {
    let (_fake, root) = setup(touch_script(), DEFAULT_MODEL);
    root.write_cwd_file("hang.js", HANG_EXT);
    let mut agent = root.spawn_with(false, &["-e", "hang.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("tool_execution_start");
    agent.send(json!({"id": "a", "type": "abort"}));
    // Before the fix the abort went unanswered until the hook's 300 s limit.
    let resp = agent.wait_response("a");
    assert_eq!(resp["success"], true, "{}", agent.dump());
    let settled = agent.wait_event("agent_settled");
    assert_eq!(settled["aborted"], true, "{}", agent.dump());
    let end = tool_end(&agent);
    assert_eq!(end["isError"], true);
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("blocked"), "{text}");
    assert!(!root.cwd.join("ran.txt").exists(), "the call never ran");
    // The session keeps serving.
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["isStreaming"], false);
}

#[test]
fn eof_with_a_tool_call_hook_that_never_settles_exits() {
    let (_fake, root) = setup(touch_script(), DEFAULT_MODEL);
    root.write_cwd_file("hang.js", HANG_EXT);
    let mut agent = root.spawn_with(false, &["-e", "hang.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("tool_execution_start");
    agent.close_stdin();
    // Before the fix pi waited out the hook's 300 s limit.
    let status = agent
        .wait_exit(LIVENESS)
        .unwrap_or_else(|| panic!("pi did not exit after EOF\n{}", agent.dump()));
    assert_eq!(status.code(), Some(0), "{}", agent.dump());
    let end = tool_end(&agent);
    assert_eq!(end["isError"], true, "the call is blocked (fail closed)");
    assert!(!root.cwd.join("ran.txt").exists(), "the call never ran");
}

#[test]
fn eof_with_a_command_waiting_on_a_dialog_exits() {
    // Nobody can answer the dialog once stdin has closed.
    let ext = r#"export default function (pi) {
      pi.registerCommand("ask", { handler: async (_a, ctx) => { await ctx.ui.confirm("Sure?", "x"); } });
      pi.on("session_shutdown", () => new Promise(() => {}));
    }"#;
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file("ask.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "ask.js"]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "/ask"}));
    agent.wait_for(|v| v["method"] == "confirm", LIVENESS);
    agent.close_stdin();
    let status = agent
        .wait_exit(LIVENESS)
        .unwrap_or_else(|| panic!("pi did not exit after EOF\n{}", agent.dump()));
    assert_eq!(status.code(), Some(0), "{}", agent.dump());
}

/// One way extensions can fail to load: the files (name, source) loaded in order with `-e`,
/// the file the failure is reported for, and what stderr says of it (after the path).
struct Broken {
    files: &'static [(&'static str, &'static str)],
    failing: &'static str,
    says: &'static str,
}

/// A tool `dup`, registered by two extensions in [`BROKEN`]'s conflict case.
const DUP_TOOL: &str = r#"export default function (pi) {
  pi.registerTool({ name: "dup", description: "d", parameters: { type: "object", properties: {} },
    execute: async () => ({ content: [{ type: "text", text: "x" }] }) });
}"#;

const BROKEN: [Broken; 5] = [
    Broken {
        files: &[(
            "throws.js",
            r#"export default function (pi) { pi.on("tool_call", () => ({ block: true })); throw new Error("gate broke at load"); }"#,
        )],
        failing: "throws.js",
        says: "Failed to load extension: gate broke at load",
    },
    Broken {
        files: &[(
            "syntax.js",
            "export default function (pi) { const x = ; }\n",
        )],
        failing: "syntax.js",
        says: "Failed to load extension: ",
    },
    Broken {
        files: &[(
            "rejects.js",
            r#"export default async function (pi) { await null; throw new Error("async nope"); }"#,
        )],
        failing: "rejects.js",
        says: "Failed to load extension: async nope",
    },
    Broken {
        files: &[(
            "missing_import.js",
            "import { x } from \"./nonexistent.js\";\nexport default function (pi) {}\n",
        )],
        failing: "missing_import.js",
        says: "Failed to load extension: ",
    },
    Broken {
        files: &[("first.js", DUP_TOOL), ("second.js", DUP_TOOL)],
        failing: "second.js",
        says: "Tool \"dup\" conflicts with {cwd}/first.js",
    },
];

impl Broken {
    /// Writes the files into `root`'s cwd; returns the `-e` arguments.
    fn install(&self, root: &RunRoot) -> Vec<&'static str> {
        let mut args = vec![];
        for (name, source) in self.files {
            root.write_cwd_file(name, source);
            args.extend(["-e", *name]);
        }
        args
    }

    /// Asserts upstream 1.6's failure: exit 1, `Error: Failed to load extension "<path>":
    /// <says>` and the `-ne` hint on stderr.
    fn check(&self, root: &RunRoot, code: Option<i32>, stderr: &str) {
        let cwd = root.cwd.to_str().unwrap();
        assert_eq!(code, Some(1), "{}: {stderr}", self.failing);
        let line = format!(
            "Error: Failed to load extension \"{cwd}/{}\": {}",
            self.failing,
            self.says.replace("{cwd}", cwd)
        );
        assert!(stderr.contains(&line), "{line} in {stderr}");
        assert!(
            stderr.contains("Hint: Start without extensions using \"pi -ne\"."),
            "{stderr}"
        );
    }
}

#[test]
fn an_extension_that_fails_to_load_stops_rpc_mode_before_serving() {
    for b in &BROKEN {
        let (fake, root) = setup(touch_script(), DEFAULT_MODEL);
        let args = b.install(&root);
        let mut agent = root.spawn_with(false, &args);
        // Had it served, these would be answered and the prompt would reach the model.
        let _ = agent.try_send_raw(b"{\"id\":\"s\",\"type\":\"get_state\"}\n");
        let _ = agent.try_send_raw(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"hi\"}\n");
        let status = agent
            .wait_exit(LIVENESS)
            .unwrap_or_else(|| panic!("{} did not stop pi\n{}", b.failing, agent.dump()));
        b.check(
            &root,
            status.code(),
            &agent.stderr_with("Hint: Start without extensions", LIVENESS),
        );
        assert!(agent.records().is_empty(), "{}", agent.dump());
        assert!(
            fake.requests().is_empty(),
            "{}: no provider was asked",
            b.failing
        );
        assert!(!root.cwd.join("ran.txt").exists());
    }
}

#[test]
fn an_extension_that_fails_to_load_stops_print_and_json_mode_before_asking_the_model() {
    for mode in [&["-p"][..], &["--mode", "json"][..]] {
        for b in &BROKEN {
            let (fake, root) = setup(touch_script(), DEFAULT_MODEL);
            let mut args = mode.to_vec();
            args.extend(["--no-session"]);
            args.extend(b.install(&root));
            args.push("hi");
            let out = print_run(&root, &args);
            b.check(
                &root,
                out.status.code(),
                &String::from_utf8_lossy(&out.stderr),
            );
            assert!(
                out.stdout.is_empty(),
                "{mode:?}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                fake.requests().is_empty(),
                "{mode:?} {}: no provider was asked",
                b.failing
            );
            assert!(!root.cwd.join("ran.txt").exists());
        }
    }
}

fn print_run(root: &RunRoot, args: &[&str]) -> std::process::Output {
    let bin = std::env::var_os("PI_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    std::process::Command::new(bin)
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_missing_named_import_of_the_sdk_is_undefined_not_a_load_error() {
    // `Type` from typebox: the real pi-coding-agent (PI_SDK_DIR) does not export it.
    let ext = r#"import { notExported } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import { alsoMissing as m } from "@earendil-works/pi-ai";
export default function (pi) {
  pi.registerCommand("x", { description: `${typeof notExported} ${typeof m} ${typeof Type}`, handler: async () => {} });
}"#;
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file("imp.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "imp.js"]);
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    let x = cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "x")
        .cloned()
        .unwrap_or_else(|| panic!("no command x: {}", agent.dump()));
    assert_eq!(x["description"], "undefined undefined object");
}

/// A gate that blocks `bash` and counts its loads in `loads.txt` (cwd); its second load
/// throws in the factory.
const FLAKY_GATE_EXT: &str = r#"
import fs from "node:fs";
export default function (pi) {
  const n = (fs.existsSync("loads.txt") ? Number(fs.readFileSync("loads.txt", "utf8")) : 0) + 1;
  fs.writeFileSync("loads.txt", String(n));
  if (n === 2) throw new Error("gate broke on load " + n);
  pi.on("tool_call", (e) => (e.toolName === "bash" ? { block: true, reason: "gate says no" } : undefined));
}
"#;

/// The `tool_execution_end` events from record `from` on.
fn tool_ends_from(agent: &RpcAgent, from: usize) -> Vec<Value> {
    agent.events()[from..]
        .iter()
        .filter(|v| kind(v) == "tool_execution_end")
        .cloned()
        .collect()
}

fn run_prompt(agent: &mut RpcAgent, id: &str) -> Value {
    let from = agent.events().len();
    agent.send(json!({"id": id, "type": "prompt", "message": "go"}));
    agent.wait_from(agent.len().saturating_sub(1), LIVENESS, |v| {
        kind(v) == "agent_settled"
    });
    let ends = tool_ends_from(agent, from);
    assert_eq!(ends.len(), 1, "{}", agent.dump());
    ends[0].clone()
}

/// Upstream 1.6 serves on after a session replacement whose reload fails (the failure only
/// goes to stderr), which would let tool calls past a gate that broke. Ours reports the
/// failure (stderr in upstream's words, `extension_error`) and blocks every tool call until a
/// reload succeeds.
#[test]
fn a_gate_that_fails_on_reload_blocks_every_tool_call_until_a_reload_succeeds() {
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "touch one.txt"})),
            Turn::text("done"),
            Turn::tool_call("bash", json!({"command": "touch two.txt"})),
            Turn::text("done"),
            Turn::tool_call("read", json!({"path": "loads.txt"})),
            Turn::text("done"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("gate.js", FLAKY_GATE_EXT);
    let mut agent = root.spawn_with(true, &["-e", "gate.js"]);

    // Load 1: the gate works.
    let end = run_prompt(&mut agent, "p1");
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(end["result"]["content"][0]["text"], "gate says no");
    assert!(!root.cwd.join("one.txt").exists());

    // Load 2 (the new session's instance) throws: reported, and tools stay shut.
    let from = agent.len();
    let r = agent.request(json!({"id": "n1", "type": "new_session"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    let (_, err) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_error" && v["event"] == "load"
    });
    assert!(err["extensionPath"].as_str().unwrap().ends_with("gate.js"));
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("gate broke on load 2"),
        "{err}"
    );
    let stderr = agent.stderr_with("Error: Failed to load extension", LIVENESS);
    assert!(
        stderr.contains("gate.js\": Failed to load extension: gate broke on load 2"),
        "{stderr}"
    );
    let end = run_prompt(&mut agent, "p2");
    assert_eq!(end["isError"], true, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("failed to load on reload"), "{text}");
    assert!(text.contains("gate broke on load 2"), "{text}");
    assert!(!root.cwd.join("two.txt").exists(), "fail closed");

    // Load 3 succeeds: tools are served again (the gate lets `read` through).
    let r = agent.request(json!({"id": "n2", "type": "new_session"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    let end = run_prompt(&mut agent, "p3");
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(end["result"]["content"][0]["text"], "3");
    agent.close_stdin();
    assert!(agent.wait_exit(LIVENESS).is_some_and(|s| s.success()));
}
