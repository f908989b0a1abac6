//! Four real third-party pi packages (issue 22's first "done when"): `pi-aliases`,
//! `pi-subagents`, `pi-mcp-adapter` and `pi-prompt-template-model` at the versions pinned in
//! `scripts/fetch-test-packages.sh`, in an agent dir laid out as upstream 1.6's `pi install
//! npm:<name>@<version>` leaves it (`<agent>/npm/`, `packages` in settings.json), and again in
//! an agent dir that **our** `pi install` filled (the real npm, offline, from the npm cache the
//! script filled). Each alone and all four together load; the commands, tools and skills, and
//! one use of each, are what upstream 1.6 gives over the same agent dir against the fake model
//! (measured by hand; the expectations below are upstream's results).

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How long the first response may take: four packages' extensions load before it.
const STARTUP: std::time::Duration = std::time::Duration::from_secs(120);

/// The packages at the versions `scripts/fetch-test-packages.sh` pins, as `pi install` is
/// given them and records them in `packages`.
const ALIASES: &str = "npm:pi-aliases@1.0.7";
const SUBAGENTS: &str = "npm:pi-subagents@0.67.0";
const MCP: &str = "npm:pi-mcp-adapter@2.36.0";
const TEMPLATES: &str = "npm:pi-prompt-template-model@0.12.2";

/// Who filled the agent dir's `npm/` folder.
#[derive(Clone, Copy, Debug)]
enum Installer {
    /// Upstream 1.6's `pi install` (the cached layout, linked in).
    Upstream,
    /// Our `pi install`, run here with the real npm against the cached npm cache, offline.
    Ours,
}

/// The package cache (`PI_TEST_PACKAGES`, set by `.ci/run` from
/// `scripts/fetch-test-packages.sh`; it holds `npm/` as an agent dir's). Missing: a failure with
/// `PI_REQUIRE_TEST_RESOURCES=1`, else a notice on stderr and the test passes without running.
fn test_packages() -> Option<PathBuf> {
    let dir = std::env::var_os("PI_TEST_PACKAGES")
        .map(PathBuf::from)
        .filter(|d| d.join(".complete").is_file());
    if dir.is_none() {
        let what = "the real pi packages (PI_TEST_PACKAGES)";
        let how = "run PI_TEST_PACKAGES=$(scripts/fetch-test-packages.sh) cargo test";
        if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
            panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
        }
        eprintln!("SKIP: {what}; {how}");
    }
    dir
}

/// A run root whose agent dir holds `list` installed by `installer`, with `packages` = `list`.
fn packages_root(
    cache: &Path,
    script: Script,
    list: &[&str],
    installer: Installer,
) -> (pi_fakellm::FakeLlm, RunRoot) {
    let (fake, root) = setup(script, DEFAULT_MODEL);
    match installer {
        Installer::Upstream => {
            std::os::unix::fs::symlink(cache.join("npm"), root.agent_dir.join("npm")).unwrap();
            root.merge_settings(json!({ "packages": list }));
        }
        Installer::Ours => {
            for spec in list {
                our_install(cache, &root, spec);
            }
            let settings: Value = serde_json::from_str(
                &std::fs::read_to_string(root.agent_dir.join("settings.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(settings["packages"], json!(list), "{settings}");
        }
    }
    (fake, root)
}

/// Runs our `pi install <spec>` in `root` with the real npm, offline, against the npm cache
/// that `scripts/fetch-test-packages.sh` filled (npm's offline mode answers from the cache only
/// and fails rather than ask the registry); asserts upstream's output and exit code.
fn our_install(cache: &Path, root: &RunRoot, spec: &str) {
    let bin = std::env::var_os("PI_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_pi")));
    let out = Command::new(bin)
        .args(["install", spec])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .env("npm_config_cache", cache.join("npm-cache"))
        .env("npm_config_offline", "true")
        .env("npm_config_update_notifier", "false")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "pi install {spec}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with(&format!("Installing {spec}...\n"))
            && stdout.ends_with(&format!("Installed {spec}\n")),
        "{stdout}"
    );
}

/// The installed folders under `npm/node_modules` (scoped ones as `@scope/name`), sorted.
fn installed(npm: &Path) -> Vec<String> {
    let mut names = vec![];
    for e in std::fs::read_dir(npm.join("node_modules")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if name.starts_with('@') {
            for s in std::fs::read_dir(npm.join("node_modules").join(&name)).unwrap() {
                names.push(format!(
                    "{name}/{}",
                    s.unwrap().file_name().to_string_lossy()
                ));
            }
        } else {
            names.push(name);
        }
    }
    names.sort();
    names
}

fn command_names(agent: &mut RpcAgent) -> Vec<(String, String)> {
    // The first request after the spawn: it waits for the packages' extensions to load
    // (TypeBox and the SDK under Node), which took over 30 s on a 2-core machine at load 10.
    agent.send(json!({"id": "c", "type": "get_commands"}));
    let (_, r) = agent.wait_from(0, STARTUP, |v| v["type"] == "response" && v["id"] == "c");
    r["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["source"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn has(list: &[(String, String)], name: &str, source: &str) -> bool {
    list.iter().any(|(n, s)| n == name && s == source)
}

fn tool_names(req: &Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Prompts `text`, waits for the run to end, returns the first LLM request's body.
fn first_request(agent: &mut RpcAgent, fake: &pi_fakellm::FakeLlm, text: &str) -> Value {
    agent.request(json!({"id": "p", "type": "prompt", "message": text}));
    agent.wait_event("agent_end");
    fake.llm_requests()[0].body.clone()
}

fn tool_result_text(agent: &RpcAgent) -> String {
    let end = agent.wait_event("tool_execution_end");
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn pi_aliases_alone_clear_starts_a_new_session(installer: Installer) {
    let Some(cache) = test_packages() else { return };
    let (_fake, root) = packages_root(
        &cache,
        Script::new([Turn::text("ok")]),
        &[ALIASES],
        installer,
    );
    let mut agent = root.spawn();
    let cmds = command_names(&mut agent);
    assert!(
        has(&cmds, "clear", "extension") && has(&cmds, "exit", "extension"),
        "{cmds:?}"
    );
    let before =
        agent.request(json!({"id": "s1", "type": "get_state"}))["data"]["sessionId"].clone();
    let r = agent.request(json!({"id": "p", "type": "prompt", "message": "/clear"}));
    assert_eq!(r["data"]["disposition"], "handled", "{r}");
    let after =
        agent.request(json!({"id": "s2", "type": "get_state"}))["data"]["sessionId"].clone();
    assert_ne!(before, after);
    assert_eq!(agent.stderr(), "");
}

fn pi_subagents_alone_tools_skills_and_a_list_call(installer: Installer) {
    let Some(cache) = test_packages() else { return };
    let script = Script::new([
        Turn::tool_call("subagent", json!({"action": "list"})),
        Turn::text("done"),
    ]);
    let (fake, root) = packages_root(&cache, script, &[SUBAGENTS], installer);
    let mut agent = root.spawn();
    let cmds = command_names(&mut agent);
    for c in ["subagents", "subagents-doctor", "run"] {
        assert!(has(&cmds, c, "extension"), "{c}: {cmds:?}");
    }
    assert!(
        has(&cmds, "skill:pi-subagents", "skill") && has(&cmds, "parallel-review", "prompt"),
        "{cmds:?}"
    );
    let req = first_request(&mut agent, &fake, "list agents");
    // subagent_supervisor is registered in session_start, after the factory's tools.
    assert_eq!(
        tool_names(&req),
        [
            "read",
            "bash",
            "edit",
            "write",
            "subagent",
            "bg_wait",
            "subagent_supervisor"
        ]
    );
    let system = req["messages"][0]["content"].as_str().unwrap_or("");
    assert!(system.contains("<name>pi-subagents</name>"), "{system}");
    assert!(tool_result_text(&agent)
        .starts_with("Executable agents:\nBuiltin agents\n- claude-code (builtin, external-cli)"));
    assert!(
        agent.stderr().contains("Warning: Extension package \"") && agent.stderr().contains("pi-subagents/package.json\": Host-provided extension packages must be declared in peerDependencies with a \"*\" range, not dependencies: typebox."),
        "{}",
        agent.stderr()
    );
}

fn pi_mcp_adapter_alone_replaces_the_builtin_mcp_and_its_tool_answers(installer: Installer) {
    let Some(cache) = test_packages() else { return };
    let script = Script::new([Turn::tool_call("mcp", json!({})), Turn::text("done")]);
    let (fake, root) = packages_root(&cache, script, &[MCP], installer);
    let mut agent = root.spawn();
    let cmds = command_names(&mut agent);
    assert_eq!(
        cmds.iter().filter(|(n, _)| n == "mcp").count(),
        1,
        "{cmds:?}"
    );
    // Its mcp-scripting skill comes from resources_discover.
    assert!(
        has(&cmds, "skill:mcp-scripting", "skill") && has(&cmds, "mcp-auth", "extension"),
        "{cmds:?}"
    );
    let req = first_request(&mut agent, &fake, "use mcp");
    assert_eq!(
        tool_names(&req),
        ["read", "bash", "edit", "write", "mcpScript", "mcp"]
    );
    assert_eq!(tool_result_text(&agent), "MCP: 0/0 servers, 0 tools");
    let stderr = agent.stderr();
    assert!(
        stderr.starts_with("Warning: Extension package \"builtin:mcp\": Extension ")
            && stderr
                .contains("registers command `/mcp`, so built-in extension `mcp` was not loaded."),
        "{stderr}"
    );
}

fn pi_prompt_template_model_alone_runs_a_template_on_its_model(installer: Installer) {
    let Some(cache) = test_packages() else { return };
    let (fake, root) = packages_root(
        &cache,
        Script::new([Turn::text("ok")]),
        &[TEMPLATES],
        installer,
    );
    std::fs::create_dir_all(root.agent_dir.join("prompts")).unwrap();
    std::fs::write(
        root.agent_dir.join("prompts/rev.md"),
        "---\ndescription: Review with the big model\nmodel: fake-openai/fake-gpt\n---\nReview $@ carefully\n",
    )
    .unwrap();
    let mut agent = root.spawn();
    let cmds = command_names(&mut agent);
    assert!(
        has(&cmds, "rev", "extension")
            && has(&cmds, "rev", "prompt")
            && has(&cmds, "chain-prompts", "extension"),
        "{cmds:?}"
    );
    let r = agent.request(json!({"id": "p", "type": "prompt", "message": "/rev main.rs"}));
    assert_eq!(r["data"]["disposition"], "handled", "{r}");
    agent.wait_for(
        |v| kind(v) == "extension_ui_request" && v["message"] == "Restored to fake-gpt-mini",
        LIVENESS,
    );
    let req = &fake.llm_requests()[0].body;
    assert_eq!(req["model"], "fake-gpt");
    assert_eq!(
        req["messages"].as_array().unwrap().last().unwrap()["content"][0]["text"],
        "Review main.rs carefully"
    );
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["id"], "fake-gpt-mini");
    assert!(
        !agent.stderr().contains("Extension error"),
        "{}",
        agent.stderr()
    );
}

fn all_four_packages_together(installer: Installer) {
    let Some(cache) = test_packages() else { return };
    let (fake, root) = packages_root(
        &cache,
        Script::new([Turn::text("ok")]),
        &[ALIASES, SUBAGENTS, MCP, TEMPLATES],
        installer,
    );
    if let Installer::Ours = installer {
        // Our install leaves what upstream's leaves: the same package.json and the same
        // installed folders (the cached `npm/` is upstream's layout, see the script).
        let ours = root.agent_dir.join("npm");
        let upstream = cache.join("npm");
        assert_eq!(installed(&ours), installed(&upstream));
        let pj = |d: &Path| -> Value {
            serde_json::from_str(&std::fs::read_to_string(d.join("package.json")).unwrap()).unwrap()
        };
        assert_eq!(pj(&ours), pj(&upstream));
        assert_eq!(
            pj(&ours)["dependencies"]["pi-aliases"],
            "^1.0.7",
            "npm saved the range upstream's install saves"
        );
    }
    let mut agent = root.spawn();
    let cmds = command_names(&mut agent);
    let names: Vec<&str> = cmds.iter().map(|(n, _)| n.as_str()).collect();
    // Upstream 1.6's listing over the same agent dir, in its order.
    let upstream = [
        "clear",
        "exit",
        "subagents-watchdog",
        "subagents",
        "run",
        "subagent-cost",
        "subagents-doctor",
        "subagents-inspect-rpc",
        "subagents-guide",
        "subagents-refine",
        "subagents-fleet",
        "subagents-detach",
        "subagents-stop",
        "subagents-steer",
        "prompt-workflow",
        "subagents-models",
        "subagents-profiles",
        "subagents-load-profile",
        "subagents-refresh-provider-models",
        "subagents-generate-profiles",
        "subagents-check-profile",
        "mcp",
        "pi-mcp",
        "mcp-auth",
        "chain-prompts",
        "prompt-tool",
        "llama",
        "council",
        "gather-context-and-clarify",
        "parallel-cleanup",
        "parallel-research",
        "parallel-review",
        "review-loop",
        "skill:council-mode",
        "skill:pi-subagents",
        "skill:prompt-template-authoring",
        "skill:mcp-scripting",
    ];
    assert_eq!(names, upstream);
    let req = first_request(&mut agent, &fake, "hi");
    assert_eq!(
        tool_names(&req),
        [
            "read",
            "bash",
            "edit",
            "write",
            "subagent",
            "bg_wait",
            "mcpScript",
            "mcp",
            "subagent_supervisor"
        ]
    );
    let stderr = agent.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("Warning: Extension package \"builtin:mcp\""),
        "{stderr}"
    );
    assert!(
        lines[1].contains("Host-provided extension packages"),
        "{stderr}"
    );
}

/// Both installers for each case.
macro_rules! both {
    ($($case:ident),* $(,)?) => {
        mod upstream_installed {
            $(#[test]
            fn $case() {
                super::$case(super::Installer::Upstream)
            })*
        }
        mod ours_installed {
            $(#[test]
            fn $case() {
                super::$case(super::Installer::Ours)
            })*
        }
    };
}

both!(
    pi_aliases_alone_clear_starts_a_new_session,
    pi_subagents_alone_tools_skills_and_a_list_call,
    pi_mcp_adapter_alone_replaces_the_builtin_mcp_and_its_tool_answers,
    pi_prompt_template_model_alone_runs_a_template_on_its_model,
    all_four_packages_together,
);
