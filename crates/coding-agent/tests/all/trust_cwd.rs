//! Project trust is decided for the directory a session runs in (issue 28; upstream 1.6
//! docs/security.md "Understand project trust"): a session resumed from elsewhere whose header
//! `cwd` is an untrusted project loads nothing of that project — not its extensions, MCP
//! servers, settings, skills or prompt templates — whichever way the session is reached, and
//! the stderr notice names that project. Saved `trust.json` decisions count however their key
//! is spelled (`path.resolve` rules).

use crate::common::*;
use pi_fakellm::Script;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The id in the header of the hand-written session.
const SESSION_ID: &str = "01a228e2-0000-7000-8000-0000000000aa";

/// A project whose every protected resource is observable: its extension writes `ext_mark`
/// when loaded and registers `/evil-ext`; its MCP server's command writes `mcp_mark`; its
/// settings set `steeringMode: "all"`; it has the skill `evil-skill` and the prompt template
/// `evil-prompt`. `session` is a session file outside it whose header `cwd` is the project.
struct Hostile {
    dir: PathBuf,
    ext_mark: PathBuf,
    mcp_mark: PathBuf,
    session: PathBuf,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn hostile(root: &RunRoot) -> Hostile {
    let dir = root.path().join("proj");
    let ext_mark = root.path().join("marks").join("ext-loaded");
    let mcp_mark = root.path().join("marks").join("mcp-started");
    std::fs::create_dir_all(ext_mark.parent().unwrap()).unwrap();
    let mark_js = serde_json::to_string(&ext_mark).unwrap();
    write(
        &dir.join(".pi/extensions/x.js"),
        &format!(
            r#"import fs from "node:fs";
fs.writeFileSync({mark_js}, "loaded");
export default function (pi) {{
  pi.registerCommand("evil-ext", {{ description: "d", handler: async () => {{}} }});
}}
"#
        ),
    );
    write(
        &dir.join(".pi/mcp.json"),
        &json!({"mcpServers": {"evil": {"command": "sh",
            "args": ["-c", format!("echo started > '{}'", mcp_mark.display())]}}})
        .to_string(),
    );
    write(&dir.join(".pi/settings.json"), r#"{"steeringMode": "all"}"#);
    write(
        &dir.join(".pi/skills/evil-skill/SKILL.md"),
        "---\nname: evil-skill\ndescription: from the project\n---\nbody\n",
    );
    write(
        &dir.join(".pi/prompts/evil-prompt.md"),
        "---\ndescription: from the project\n---\nbody\n",
    );
    let session = root.path().join("elsewhere").join("s.jsonl");
    write(&session, &session_text(&dir));
    Hostile {
        dir,
        ext_mark,
        mcp_mark,
        session,
    }
}

/// A session file: header with `cwd`, one user message `aaaa0001`.
fn session_text(cwd: &Path) -> String {
    let header = json!({"type": "session", "version": 3, "id": SESSION_ID,
        "timestamp": "2026-12-01T00:00:00.000Z", "cwd": cwd});
    let user = json!({"type": "message", "id": "aaaa0001", "parentId": null,
        "timestamp": "2026-12-01T00:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}});
    format!("{header}\n{user}\n")
}

/// What of the project the running agent shows, as `[extension command, settings, skill,
/// prompt template]`. Ends with `/mcp`, which answers only once every configured server's first
/// connect has settled, so a configured project server has run its command by then.
fn loaded(agent: &mut RpcAgent) -> [bool; 4] {
    let n = agent.len();
    let state = agent.request(json!({"id": format!("st{n}"), "type": "get_state"}));
    assert_eq!(state["success"], true, "{}", agent.dump());
    let cmds = agent.request(json!({"id": format!("gc{n}"), "type": "get_commands"}));
    let names: Vec<String> = cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let from = agent.len();
    let r = agent.request(json!({"id": format!("mcp{n}"), "type": "prompt", "message": "/mcp"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "extension_ui_request" && v["method"] == "notify"
    });
    let has = |n: &str| names.iter().any(|x| x == n);
    [
        has("evil-ext"),
        state["data"]["steeringMode"] == "all",
        has("skill:evil-skill"),
        has("evil-prompt"),
    ]
}

/// Asserts that nothing of `h`'s project is loaded in `agent` (`when`: the step, for messages).
fn assert_nothing_loaded(agent: &mut RpcAgent, h: &Hostile, when: &str) {
    let l = loaded(agent);
    assert_eq!(
        (l, h.ext_mark.exists(), h.mcp_mark.exists()),
        ([false; 4], false, false),
        "{when}: [extension command, settings, skill, prompt], extension ran, MCP server ran\n{}",
        agent.dump()
    );
}

/// Asserts that everything of `h`'s project is loaded (the observations work).
fn assert_all_loaded(agent: &mut RpcAgent, h: &Hostile, when: &str) {
    let l = loaded(agent);
    assert_eq!(
        (l, h.ext_mark.exists(), h.mcp_mark.exists()),
        ([true; 4], true, true),
        "{when}: [extension command, settings, skill, prompt], extension ran, MCP server ran\n{}",
        agent.dump()
    );
}

/// The stderr notice names the project (the session's directory), not the launch directory.
fn assert_notice_names(agent: &RpcAgent, dir: &Path) {
    let needle = format!("\"{}\": true", dir.display());
    let err = agent.stderr_with(&needle, LIVENESS);
    assert!(
        err.contains("Project not trusted") && err.contains(&needle),
        "{err}"
    );
}

fn root() -> (pi_fakellm::FakeLlm, RunRoot, Hostile) {
    let (fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let h = hostile(&root);
    (fake, root, h)
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn session_flag_decides_trust_for_the_sessions_cwd() {
    let (_fake, root, h) = root();
    let mut agent = root.spawn_with(true, &["--session", path_str(&h.session)]);
    assert_nothing_loaded(&mut agent, &h, "--session");
    assert_notice_names(&agent, &h.dir);
}

#[test]
fn session_flag_loads_a_trusted_sessions_project() {
    let (_fake, root, h) = root();
    root.write_agent_file("trust.json", &json!({path_str(&h.dir): true}));
    let mut agent = root.spawn_with(true, &["--session", path_str(&h.session)]);
    assert_all_loaded(&mut agent, &h, "--session, project trusted");
}

#[test]
fn trusted_launch_dir_does_not_lend_its_trust_to_the_session() {
    let (_fake, root, h) = root();
    // The launch directory is a trusted project of its own.
    root.write_cwd_file(".pi/settings.json", r#"{"followUpMode": "all"}"#);
    root.write_agent_file("trust.json", &json!({path_str(&root.cwd): true}));
    let mut agent = root.spawn_with(true, &["--session", path_str(&h.session)]);
    assert_nothing_loaded(&mut agent, &h, "--session from a trusted project");
    assert_notice_names(&agent, &h.dir);
}

/// The launch directory's session folder holds a session whose header names the project.
fn plant_local_session(root: &RunRoot, h: &Hostile) {
    let dir = pi_coding_agent::session::default_session_dir(&root.agent_dir, &root.cwd);
    write(&dir.join("planted.jsonl"), &session_text(&h.dir));
}

#[test]
fn continue_decides_trust_for_the_sessions_cwd() {
    let (_fake, root, h) = root();
    plant_local_session(&root, &h);
    let mut agent = root.spawn_with(true, &["-c"]);
    assert_nothing_loaded(&mut agent, &h, "-c");
    assert_notice_names(&agent, &h.dir);
}

#[test]
fn session_id_decides_trust_for_the_sessions_cwd() {
    let (_fake, root, h) = root();
    plant_local_session(&root, &h);
    let mut agent = root.spawn_with(true, &["--session-id", SESSION_ID]);
    assert_nothing_loaded(&mut agent, &h, "--session-id");
    assert_notice_names(&agent, &h.dir);
}

#[test]
fn fork_flag_runs_in_the_launch_dir_and_loads_nothing_of_the_source_project() {
    let (_fake, root, h) = root();
    let mut agent = root.spawn_with(true, &["--fork", path_str(&h.session)]);
    assert_nothing_loaded(&mut agent, &h, "--fork");
}

#[test]
fn relative_extension_paths_name_the_launch_dir_not_the_sessions() {
    let (_fake, root, h) = root();
    // The project holds a `tool.js` of its own; the launch directory's is harmless.
    let mark = root.path().join("marks").join("project-tool-js");
    write(
        &h.dir.join("tool.js"),
        &format!(
            "import fs from \"node:fs\";\nfs.writeFileSync({}, \"x\");\nexport default function () {{}}\n",
            serde_json::to_string(&mark).unwrap()
        ),
    );
    root.write_cwd_file(
        "tool.js",
        r#"export default function (pi) { pi.registerCommand("launch-tool", { description: "d", handler: async () => {} }); }"#,
    );
    let mut agent = root.spawn_with(true, &["--session", path_str(&h.session), "-e", "tool.js"]);
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    assert!(
        cmds["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "launch-tool"),
        "{}",
        agent.dump()
    );
    assert!(!mark.exists(), "the project's tool.js was loaded");
    assert_nothing_loaded(&mut agent, &h, "--session -e tool.js");
}

#[test]
fn rpc_session_commands_load_nothing_of_an_untrusted_project() {
    let (_fake, root, h) = root();
    let mut agent = root.spawn_with(true, &[]);
    let switch = |agent: &mut RpcAgent, id: &str| {
        let r = agent.request(
            json!({"id": id, "type": "switch_session", "sessionPath": path_str(&h.session)}),
        );
        assert_eq!(r["success"], true, "{}", agent.dump());
    };
    switch(&mut agent, "w1");
    assert_nothing_loaded(&mut agent, &h, "switch_session");
    let r = agent.request(json!({"id": "f", "type": "fork", "entryId": "aaaa0001"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_nothing_loaded(&mut agent, &h, "fork");
    // A fork or clone waits for its first message before it is written: clone the file itself.
    switch(&mut agent, "w2");
    let r = agent.request(json!({"id": "k", "type": "clone"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_nothing_loaded(&mut agent, &h, "clone");
    let r = agent.request(json!({"id": "n", "type": "new_session"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_nothing_loaded(&mut agent, &h, "new_session");
}

#[test]
fn rpc_session_commands_from_a_resumed_untrusted_session_load_nothing() {
    let (_fake, root, h) = root();
    let mut agent = root.spawn_with(true, &["--session", path_str(&h.session)]);
    let r = agent.request(json!({"id": "n", "type": "new_session"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_nothing_loaded(&mut agent, &h, "--session, then new_session");
}

/// `/go <verb> [arg]`: `switch <path>` or `new` through the command context; reports
/// `done <verb>` through `notify`.
const SWITCH_EXT: &str = r#"
export default function (pi) {
  pi.registerCommand("go", {
    description: "switch sessions",
    handler: async (args, ctx) => {
      const [verb, arg] = args.split(" ");
      const r = verb === "switch" ? await ctx.switchSession(arg) : await ctx.newSession();
      ctx.ui.notify("done " + verb + " " + JSON.stringify(r), "info");
    },
  });
}
"#;

#[test]
fn extension_switch_session_and_new_session_load_nothing_of_an_untrusted_project() {
    let (_fake, root, h) = root();
    root.write_cwd_file("go.js", SWITCH_EXT);
    let mut agent = root.spawn_with(true, &["-e", "go.js"]);
    for (verb, arg) in [("switch", path_str(&h.session)), ("new", "")] {
        let from = agent.len();
        let r = agent.request(
            json!({"id": format!("go-{verb}"), "type": "prompt", "message": format!("/go {verb} {arg}")}),
        );
        assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
        let (_, v) = agent.wait_from(from, LIVENESS, |v| {
            kind(v) == "extension_ui_request"
                && v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("done "))
        });
        assert_eq!(
            v["message"],
            format!("done {verb} {{\"cancelled\":false}}"),
            "{}",
            agent.dump()
        );
        assert_nothing_loaded(&mut agent, &h, &format!("ctx.{verb}"));
    }
}

// ---------------------------------------------------------------------------------------------
// trust.json keys in every spelling

/// Spellings of `dir` that `path.resolve` turns back into `dir`.
fn spellings(dir: &Path) -> Vec<String> {
    let d = path_str(dir);
    let parent = path_str(dir.parent().unwrap());
    let name = dir.file_name().unwrap().to_str().unwrap();
    vec![
        format!("{d}/"),
        format!("{d}//"),
        format!("{parent}//{name}"),
        format!("{parent}/./{name}"),
        format!("{parent}/{name}/."),
        format!("{parent}/x/../{name}"),
        format!("{parent}/x/y/../../{name}/"),
    ]
}

fn spawn_in_project(root: &RunRoot, h: &Hostile) -> RpcAgent {
    root.spawn_in(&h.dir, false, &[], &[])
}

#[test]
fn saved_distrust_counts_however_its_key_is_spelled() {
    let (_fake, root, h) = root();
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    for key in spellings(&h.dir) {
        let _ = std::fs::remove_file(&h.ext_mark);
        let _ = std::fs::remove_file(&h.mcp_mark);
        root.write_agent_file("trust.json", &json!({key.clone(): false}));
        let mut agent = spawn_in_project(&root, &h);
        assert_nothing_loaded(&mut agent, &h, &format!("\"{key}\": false"));
    }
    // A parent's distrust, spelled with a trailing slash, covers the project too.
    let parent = format!("{}/", path_str(h.dir.parent().unwrap()));
    root.write_agent_file("trust.json", &json!({parent.clone(): false}));
    let mut agent = spawn_in_project(&root, &h);
    assert_nothing_loaded(&mut agent, &h, &format!("\"{parent}\": false"));
}

#[test]
fn saved_trust_counts_however_its_key_is_spelled() {
    let (_fake, root, h) = root();
    for key in spellings(&h.dir) {
        let _ = std::fs::remove_file(&h.ext_mark);
        let _ = std::fs::remove_file(&h.mcp_mark);
        root.write_agent_file("trust.json", &json!({key.clone(): true}));
        let mut agent = spawn_in_project(&root, &h);
        assert_all_loaded(&mut agent, &h, &format!("\"{key}\": true"));
    }
}

#[test]
fn conflicting_spellings_of_one_dir_mean_not_trusted() {
    let (_fake, root, h) = root();
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    let d = path_str(&h.dir);
    // Both orders in the file: the exact spelling first, and last.
    for text in [
        format!("{{\"{d}\": true, \"{d}/\": false}}"),
        format!("{{\"{d}/\": false, \"{d}\": true}}"),
    ] {
        write(&root.agent_dir.join("trust.json"), &text);
        let mut agent = spawn_in_project(&root, &h);
        assert_nothing_loaded(&mut agent, &h, &text);
    }
    // A `null` for one spelling is no decision: the other spelling's `false` holds.
    write(
        &root.agent_dir.join("trust.json"),
        &format!("{{\"{d}\": null, \"{d}/\": false}}"),
    );
    let mut agent = spawn_in_project(&root, &h);
    assert_nothing_loaded(&mut agent, &h, "null and false");
}

#[test]
fn an_untrusted_session_project_with_its_distrust_spelled_oddly_loads_nothing() {
    let (_fake, root, h) = root();
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    root.write_agent_file(
        "trust.json",
        &json!({format!("{}/", path_str(&h.dir)): false}),
    );
    let mut agent = root.spawn_with(true, &["--session", path_str(&h.session)]);
    assert_nothing_loaded(&mut agent, &h, "--session, distrust spelled with /");
}
