//! Resuming sessions from the command line (issue 8): `--session <path|id|prefix>`, `-c`,
//! `--session-id`, `--fork`, the session folder's precedence, the recorded cwd, exact restore
//! of model and thinking level from upstream-recorded files, and write failures surfacing as
//! `session_write_error` with a non-zero exit in `--mode json`.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `/a/b/c` → `--a-b-c--` (sessions.md §1.2).
fn encoded_cwd(cwd: &Path) -> String {
    let s = cwd.to_string_lossy();
    let s = s.strip_prefix('/').unwrap_or(&s);
    format!("--{}--", s.replace(['/', '\\', ':'], "-"))
}

/// Installs an upstream-recorded fixture (cwd placeholder `/RUN_ROOT/cwd` replaced by the run
/// root's cwd) in the project's session folder; returns its path.
fn install_fixture(root: &RunRoot, name: &str) -> PathBuf {
    install_fixture_as(root, name, None)
}

/// [`install_fixture`] with the header's session id replaced by `id`.
fn install_fixture_as(root: &RunRoot, name: &str, id: Option<&str>) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(src).unwrap();
    let text = text.replace("/RUN_ROOT/cwd", &root.cwd.to_string_lossy());
    let mut header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let text = match id {
        Some(id) => {
            let old = header["id"].as_str().unwrap().to_string();
            header["id"] = id.into();
            text.replacen(&old, id, 1)
        }
        None => text,
    };
    let ts = header["timestamp"]
        .as_str()
        .unwrap()
        .replace([':', '.'], "-");
    let dir = root.agent_dir.join("sessions").join(encoded_cwd(&root.cwd));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{ts}_{}.jsonl", header["id"].as_str().unwrap()));
    std::fs::write(&path, text).unwrap();
    path
}

fn state(agent: &mut RpcAgent, id: &str) -> Value {
    let r = agent.request(json!({"id": id, "type": "get_state"}));
    assert_eq!(r["success"], true, "{r}");
    r["data"].clone()
}

fn finish(mut agent: RpcAgent) {
    agent.close_stdin();
    assert_eq!(
        agent.wait_exit(LIVENESS).and_then(|s| s.code()),
        Some(0),
        "{}",
        agent.dump()
    );
}

/// Runs `pi <args>` to completion in the run root's cwd (stdin closed); returns (code, stderr).
fn run_pi(root: &RunRoot, args: &[&str], extra_env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .envs(extra_env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn upstream_session_resumes_its_model_and_level_and_opening_writes_nothing() {
    let (fake, root) = setup(Script::new([Turn::text("Third answer.")]), DEFAULT_MODEL);
    let file = install_fixture(&root, "upstream_claude_high.jsonl");
    let original = std::fs::read(&file).unwrap();
    let path = file.to_string_lossy().into_owned();

    // Open + get_state + exit: the file is byte for byte what it was.
    let mut agent = root.spawn_with(true, &["--session", &path]);
    let st = state(&mut agent, "s1");
    assert_eq!(st["model"]["provider"], "fake-anthropic", "{st}");
    assert_eq!(st["model"]["id"], "fake-claude", "{st}");
    assert_eq!(st["thinkingLevel"], "high", "{st}");
    assert_eq!(st["sessionFile"], path.as_str());
    assert_eq!(st["sessionName"], "recorded upstream");
    finish(agent);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        original,
        "opening wrote to the file"
    );

    // By id prefix this time; the next request goes to the recorded model and level.
    let mut agent = root.spawn_with(true, &["--session", "01a2317a-7c9"]);
    let st = state(&mut agent, "s2");
    assert_eq!(st["sessionFile"], path.as_str(), "{st}");
    agent.send(json!({"id": "p", "type": "prompt", "message": "Third question"}));
    agent.wait_event("agent_settled");
    finish(agent);
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 1);
    assert!(
        reqs[0].path.starts_with("/v1/messages"),
        "the Anthropic fake"
    );
    assert_eq!(reqs[0].body["model"], "fake-claude");
    assert!(
        reqs[0].body["thinking"].is_object(),
        "thinking level high reaches the request: {}",
        reqs[0].body
    );
    let after = std::fs::read(&file).unwrap();
    assert!(after.starts_with(&original), "appends only");
    let lines = check_session_file(&file).unwrap();
    let new: Vec<(&str, &str)> = lines[original.iter().filter(|&&b| b == b'\n').count()..]
        .iter()
        .map(|v| {
            let role = v["message"]["role"].as_str().unwrap_or("");
            (v["type"].as_str().unwrap(), role)
        })
        .collect();
    // No model/level entries on resume; the prompt sections this build sends differ from
    // those upstream recorded (other prose), so a system message
    // patching them comes first, as upstream records a changed prompt.
    assert_eq!(
        new,
        [
            ("message", "system"),
            ("message", "user"),
            ("message", "assistant")
        ],
        "{lines:?}"
    );
    let patch = &lines[lines.len() - 3]["message"];
    assert_eq!(patch["content"], "", "{patch}");
    // Upstream's preamble is in its own words, ours in ours.
    assert!(patch["sections"]["preamble"].is_string(), "{patch}");
    // Our tool descriptions are in our words too: the tools whose declaration differs from
    // the recorded one are declared again (upstream pi-ai `getToolStateChanges` compares
    // whole declarations), none is removed.
    let added: Vec<&str> = patch["toolsAdded"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        !added.is_empty()
            && added
                .iter()
                .all(|n| ["read", "bash", "edit", "write"].contains(n)),
        "{patch}"
    );
    assert!(patch.get("toolsRemoved").is_none(), "{patch}");
}

#[test]
fn rich_upstream_tree_resumes_appends_and_resumes_again() {
    let (fake, root) = setup(
        Script::new([Turn::text("Fourth answer."), Turn::text("Fifth answer.")]),
        DEFAULT_MODEL,
    );
    let file = install_fixture(&root, "upstream_rich_tree.jsonl");
    let original = std::fs::read(&file).unwrap();
    let path = file.to_string_lossy().into_owned();

    let mut agent = root.spawn_with(true, &["--session", &path]);
    let st = state(&mut agent, "s");
    assert_eq!(st["model"]["id"], "fake-claude");
    assert_eq!(st["thinkingLevel"], "high");
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    let text = msgs["data"]["messages"].to_string();
    assert!(
        text.contains("Compacted: the user asked three questions."),
        "{text}"
    );
    assert!(
        text.contains("Third question"),
        "kept after the compaction: {text}"
    );
    assert!(
        text.contains("Edited third answer."),
        "context_edit applied: {text}"
    );
    assert!(!text.contains("Second answer."), "abandoned branch: {text}");
    let tree = agent.request(json!({"id": "t", "type": "get_tree"}));
    let tree_text = tree["data"].to_string();
    assert!(
        tree_text.contains("\"start\"") && tree_text.contains("\"third\""),
        "labels: {tree_text}"
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "Fourth question"}));
    agent.wait_event("agent_settled");
    finish(agent);
    assert!(std::fs::read(&file).unwrap().starts_with(&original));
    let reqs = fake.llm_requests();
    let sent = reqs[0].body.to_string();
    assert!(
        sent.contains("Edited third answer.") && sent.contains("A note for the model"),
        "{sent}"
    );

    // Unknown fields and entry kinds are still in the file, unchanged.
    let raw = std::fs::read_to_string(&file).unwrap();
    for needle in [
        "futureEntryField",
        "futureBlockField",
        "futureMessageField",
        "future_entry_kind",
    ] {
        assert!(raw.contains(needle), "{needle} lost");
    }

    // And the file we appended to resumes again.
    let mut agent = root.spawn_with(true, &["--session", &path]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "Fifth question"}));
    agent.wait_event("agent_settled");
    let msgs = agent.request(json!({"id": "m", "type": "get_messages"}));
    let text = msgs["data"]["messages"].to_string();
    assert!(
        text.contains("Fourth answer.") && text.contains("Fifth answer."),
        "{text}"
    );
    finish(agent);
    check_session_file(&file).unwrap();
}

#[test]
fn session_prefix_that_matches_nothing_is_an_error_not_a_new_file() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    install_fixture(&root, "upstream_claude_high.jsonl");
    let before = root.session_files();
    let (code, stderr) = run_pi(&root, &["--mode", "rpc", "--session", "01a2307f"], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    // Upstream 1.6 prints this line bare (no `Error: ` prefix).
    assert!(
        stderr
            .lines()
            .any(|l| l == "No session found matching '01a2307f'"),
        "{stderr}"
    );
    assert_eq!(root.session_files(), before);
    assert!(!root.cwd.join("01a2307f").exists());
}

#[test]
fn continue_session_id_and_fork_pick_the_right_files() {
    let (_fake, root) = setup(Script::new([Turn::text("Forked answer.")]), DEFAULT_MODEL);
    let older = install_fixture(&root, "upstream_claude_high.jsonl");
    let newer = install_fixture_as(
        &root,
        "upstream_rich_tree.jsonl",
        Some("01a2317a-ffff-749f-a31b-0bf9e4016aa1"),
    );
    let t = std::time::SystemTime::now();
    std::fs::File::options()
        .write(true)
        .open(&older)
        .unwrap()
        .set_modified(t - std::time::Duration::from_secs(60))
        .unwrap();

    // -c: the most recently modified session of the cwd.
    let mut agent = root.spawn_with(true, &["-c"]);
    assert_eq!(
        state(&mut agent, "s")["sessionFile"],
        newer.to_string_lossy().as_ref()
    );
    finish(agent);

    // A prefix shared by both picks the newest; an exact id its own file.
    let mut agent = root.spawn_with(true, &["--session", "01a2317a"]);
    assert_eq!(
        state(&mut agent, "s")["sessionFile"],
        newer.to_string_lossy().as_ref()
    );
    finish(agent);
    let mut agent = root.spawn_with(
        true,
        &["--session-id", "01a2317a-7c92-749f-a31b-0bf9e4016aa1"],
    );
    assert_eq!(
        state(&mut agent, "s")["sessionFile"],
        older.to_string_lossy().as_ref()
    );
    finish(agent);

    // --session-id with a new id: a new session `<ts>_<id>.jsonl`, written lazily.
    let mut agent = root.spawn_with(true, &["--session-id", "my-chat.1"]);
    let st = state(&mut agent, "s");
    assert_eq!(st["sessionId"], "my-chat.1");
    assert!(
        st["sessionFile"]
            .as_str()
            .unwrap()
            .ends_with("_my-chat.1.jsonl"),
        "{st}"
    );
    finish(agent);

    // --fork by id: a new file with every entry and parentSession = the source.
    let mut agent = root.spawn_with(true, &["--fork", "01a2317a-7c9"]);
    let st = state(&mut agent, "s");
    let forked = PathBuf::from(st["sessionFile"].as_str().unwrap());
    assert_ne!(forked, older);
    assert_eq!(st["model"]["id"], "fake-claude");
    agent.send(json!({"id": "p", "type": "prompt", "message": "On the fork"}));
    agent.wait_event("agent_settled");
    finish(agent);
    let lines = check_session_file(&forked).unwrap();
    assert_eq!(lines[0]["parentSession"], older.to_string_lossy().as_ref());
    assert_eq!(
        lines.len(),
        9 + 3,
        "source entries + the section patch (recorded by upstream elsewhere) + the new turn"
    );

    // Conflicts and bad ids are refused.
    let (code, stderr) = run_pi(&root, &["--mode", "rpc", "--fork", "x", "-c"], &[]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("--fork cannot be combined with --continue"),
        "{stderr}"
    );
    let (code, stderr) = run_pi(&root, &["--mode", "rpc", "--session-id", "bad-"], &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("Session id must be non-empty"), "{stderr}");
}

#[test]
fn session_dir_flag_beats_the_environment_which_beats_settings() {
    let (_fake, root) = setup(
        Script::new([Turn::text("A."), Turn::text("B.")]),
        DEFAULT_MODEL,
    );
    let from_settings = root.path().join("from-settings");
    let from_env = root.path().join("from-env");
    let from_flag = root.path().join("from-flag");
    root.merge_settings(json!({"sessionDir": from_settings.to_string_lossy()}));
    let env = [("PI_CODING_AGENT_SESSION_DIR", from_env.to_str().unwrap())];

    let mut agent = root.spawn_with(true, &[]);
    let st = state(&mut agent, "s");
    assert!(
        Path::new(st["sessionFile"].as_str().unwrap()).starts_with(&from_settings),
        "{st}"
    );
    finish(agent);

    let mut agent = root.spawn_with_env(true, &[], &env);
    let st = state(&mut agent, "s");
    assert!(
        Path::new(st["sessionFile"].as_str().unwrap()).starts_with(&from_env),
        "{st}"
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "Q"}));
    agent.wait_event("agent_settled");
    finish(agent);

    let flag = from_flag.to_string_lossy().into_owned();
    let mut agent = root.spawn_with_env(true, &["--session-dir", &flag], &env);
    let st = state(&mut agent, "s");
    assert!(
        Path::new(st["sessionFile"].as_str().unwrap()).starts_with(&from_flag),
        "{st}"
    );
    finish(agent);

    // -c looks in the environment's folder and finds the session written there.
    let mut agent = root.spawn_with_env(true, &["-c"], &env);
    let st = state(&mut agent, "s");
    assert!(
        Path::new(st["sessionFile"].as_str().unwrap()).starts_with(&from_env),
        "{st}"
    );
    assert_eq!(st["messageCount"], 3, "{st}");
    finish(agent);
}

#[test]
fn a_session_whose_recorded_cwd_is_gone_is_refused() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let file = install_fixture(&root, "upstream_claude_high.jsonl");
    let gone = root.path().join("gone");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(&*root.cwd.to_string_lossy(), &gone.to_string_lossy());
    std::fs::write(&file, &text).unwrap();
    let (code, stderr) = run_pi(
        &root,
        &["--mode", "rpc", "--session", file.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Stored session working directory does not exist: {}",
            gone.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

#[test]
fn a_resumed_session_runs_in_its_recorded_cwd() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let file = install_fixture(&root, "upstream_claude_high.jsonl");
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
    cmd.args(["--mode", "rpc", "--session", file.to_str().unwrap()])
        .current_dir(&elsewhere)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut agent = RpcAgent::start(cmd);
    let r = agent.request(json!({"id": "b", "type": "bash", "command": "pwd"}));
    assert_eq!(
        r["data"]["output"].as_str().unwrap().trim(),
        root.cwd.to_string_lossy(),
        "{r}"
    );
    finish(agent);
}

#[test]
fn an_unwritable_session_is_an_error_event_and_a_failed_exit_in_json_mode() {
    let (fake, root) = setup(
        Script::new([Turn::text("Answer.").delay_ms(1500)]),
        DEFAULT_MODEL,
    );
    let file = install_fixture(&root, "upstream_claude_high.jsonl");
    let dir = file.parent().unwrap().to_path_buf();
    let child = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args([
            "--mode",
            "json",
            "--session",
            file.to_str().unwrap(),
            "Question",
        ])
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(fake.wait_requests(1, LIVENESS));
    // The user message is on disk; now the folder becomes a plain file, so the assistant
    // message can be neither appended nor written again with its header.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, b"in the way").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{stdout}");
    let errors: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "session_write_error")
        .collect();
    assert!(!errors.is_empty(), "{stdout}");
    assert_eq!(errors[0]["sessionFile"], file.to_string_lossy().as_ref());
}

/// A resumed session records a changed prompt as upstream does: after `AGENTS.md` appears, the
/// first prompt of `--continue` puts a system message patching only `project_context` before
/// the user message, in the session file and in what the model gets; a resume with nothing
/// changed adds none. Before, the request carried the new section while the file kept the old
/// prompt (and a later compaction saved that one).
#[test]
fn a_resumed_session_records_a_changed_prompt_section() {
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two"), Turn::text("three")]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with(true, &[]);
    agent.send(json!({"id": "p1", "type": "prompt", "message": "first"}));
    agent.wait_event("agent_settled");
    finish(agent);
    root.write_cwd_file("AGENTS.md", "Always answer in haiku.");
    for (i, msg) in ["second", "third"].iter().enumerate() {
        let mut agent = root.spawn_with(true, &["--continue"]);
        agent.send(json!({"id": format!("p{}", i + 2), "type": "prompt", "message": msg}));
        agent.wait_event("agent_settled");
        finish(agent);
    }
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let lines = check_session_file(&files[0]).unwrap();
    let systems: Vec<&Value> = lines
        .iter()
        .filter(|v| v["message"]["role"] == "system")
        .map(|v| &v["message"])
        .collect();
    assert_eq!(systems.len(), 2, "one at the start, one patch: {lines:?}");
    let patch = systems[1]["sections"].as_object().unwrap();
    assert_eq!(
        patch.keys().collect::<Vec<_>>(),
        ["project_context"],
        "{patch:?}"
    );
    assert!(patch["project_context"]
        .as_str()
        .unwrap()
        .contains("Always answer in haiku."));
    assert!(systems[1].get("toolsAdded").is_none());
    // The patch sits right before the second prompt, and the model saw the new section.
    let at = lines
        .iter()
        .position(|v| {
            v["message"]["role"] == "system" && v["message"]["sections"].get("preamble").is_none()
        })
        .unwrap();
    assert_eq!(lines[at + 1]["message"]["content"][0]["text"], "second");
    let reqs = fake.llm_requests();
    assert!(reqs[1].body_text().contains("Always answer in haiku."));
}

/// `get_session_stats` sums usage in entry order, as upstream 1.6's `getSessionStats`: `usage`
/// entries, compaction/branch-summary usage, tool results carrying `usage` and assistant
/// messages all count, and the float sum of `cost` comes out as upstream's (the order
/// changes the last bits of the sum).
#[test]
fn session_stats_sum_usage_in_entry_order_including_usage_entries() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let usage = |input: u64, cost: f64| {
        json!({"input": input, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": input + 1,
               "cost": {"input": cost, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}})
    };
    let assistant = |text: &str, u: Value| {
        json!({"role": "assistant", "content": [{"type": "text", "text": text}], "api": "openai-completions",
               "provider": "fake-openai", "model": "fake-gpt-mini", "usage": u, "stopReason": "stop", "timestamp": 2})
    };
    let user = |text: &str| json!({"role": "user", "content": text, "timestamp": 1});
    let costs = [0.1, 0.2, 0.3, 0.7, 1e-5];
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "01a2b000-0000-7000-8000-000000000001",
        "timestamp": "2026-12-01T12:00:00.000Z", "cwd": root.cwd.to_string_lossy()}),
    ];
    let mut parent = Value::Null;
    let mut push = |lines: &mut Vec<Value>, mut e: Value| {
        let id = format!("e{:07}", lines.len());
        e["id"] = id.clone().into();
        e["parentId"] = parent.clone();
        e["timestamp"] = "2026-12-01T12:00:01.000Z".into();
        parent = id.into();
        lines.push(e);
    };
    push(
        &mut lines,
        json!({"type": "message", "message": user("one")}),
    );
    push(
        &mut lines,
        json!({"type": "message", "message": assistant("a", usage(10, costs[0]))}),
    );
    push(
        &mut lines,
        json!({"type": "usage", "kind": "side-call", "provider": "fake-openai",
        "model": "fake-gpt-mini", "usage": usage(20, costs[1])}),
    );
    push(
        &mut lines,
        json!({"type": "message", "message": {"role": "toolResult", "toolCallId": "c1",
        "toolName": "subagent", "content": [{"type": "text", "text": "done"}], "isError": false,
        "timestamp": 3, "usage": usage(30, costs[2])}}),
    );
    push(
        &mut lines,
        json!({"type": "compaction", "summary": "s", "firstKeptEntryId": "e0000001",
        "tokensBefore": 50, "usage": usage(40, costs[3])}),
    );
    push(
        &mut lines,
        json!({"type": "message", "message": assistant("b", usage(50, costs[4]))}),
    );
    let path = root.cwd.join("stats.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();

    let mut agent = root.spawn_with(true, &["--session", path.to_str().unwrap()]);
    let st = agent.request(json!({"id": "st", "type": "get_session_stats"}));
    assert_eq!(st["success"], true, "{st}");
    let d = &st["data"];
    assert_eq!(d["tokens"]["input"], 150, "every usage counted once: {d}");
    assert_eq!(d["tokens"]["output"], 5, "{d}");
    assert_eq!(
        (d["assistantMessages"].clone(), d["toolResults"].clone()),
        (json!(2), json!(1))
    );
    // Entry order, as upstream: ((((0.1 + 0.2) + 0.3) + 0.7) + 1e-5) = 1.30001, where
    // assistant messages first would give 1.3000099999999999.
    let in_order = costs.iter().fold(0.0, |a, c| a + c);
    let messages_first = costs[0] + costs[4] + costs[1] + costs[2] + costs[3];
    assert_ne!(
        in_order, messages_first,
        "the order must matter for this test"
    );
    assert_eq!(d["cost"].as_f64().unwrap(), in_order, "{d}");
    finish(agent);
}
