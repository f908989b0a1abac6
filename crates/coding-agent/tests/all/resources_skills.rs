//! Skills (spec config.md §8, upstream 1.6 docs/skills.md): discovery in every location,
//! precedence and collisions, frontmatter validation, the system-prompt listing, and
//! `/skill:name args` expansion in `prompt`, `steer` and `follow_up`.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::path::Path;

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody of {name}.\n")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `(name, sourceInfo)` of the `skill:` entries of `get_commands`.
fn skills(agent: &mut RpcAgent) -> Vec<(String, Value)> {
    let cmds = agent.request(json!({"id": "g", "type": "get_commands"}));
    cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "skill")
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["sourceInfo"].clone(),
            )
        })
        .collect()
}

fn names(list: &[(String, Value)]) -> Vec<&str> {
    list.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn every_location_in_precedence_order() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    // The cwd is a git repository's subfolder: .agents/skills are read up to the repo root.
    let repo = root.cwd.clone();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let sub = repo.join("pkg");
    std::fs::create_dir_all(&sub).unwrap();
    write(
        &sub.join(".pi/skills/proj/SKILL.md"),
        &skill_md("proj", "Project skill."),
    );
    write(
        &sub.join(".pi/skills/flat.md"),
        "---\ndescription: A file-based skill.\n---\nFlat.",
    );
    write(
        &sub.join(".agents/skills/here/SKILL.md"),
        &skill_md("here", "In the cwd."),
    );
    write(
        &repo.join(".agents/skills/up/SKILL.md"),
        &skill_md("up", "At the repo root."),
    );
    write(
        &repo
            .parent()
            .unwrap()
            .join(".agents/skills/outside/SKILL.md"),
        &skill_md("outside", "Above the repo."),
    );
    write(
        &root.agent_dir.join("skills/user/SKILL.md"),
        &skill_md("user", "User skill."),
    );
    write(
        &root.home.join(".agents/skills/home/SKILL.md"),
        &skill_md("home", "Home agents skill."),
    );
    write(
        &root.agent_dir.join("extra/set/SKILL.md"),
        &skill_md("set", "From settings."),
    );
    write(
        &root.cwd.join("cli/clidir/SKILL.md"),
        &skill_md("clidir", "From --skill."),
    );
    root.merge_settings(json!({"skills": ["extra"]}));
    let mut agent = root.spawn_in(&sub, false, &["--skill", "../cli"], &[]);
    let list = skills(&mut agent);
    assert_eq!(
        names(&list),
        [
            "skill:set",
            "skill:skills",
            "skill:proj",
            "skill:here",
            "skill:up",
            "skill:user",
            "skill:home",
            "skill:clidir"
        ]
    );
    let info = |n: &str| list.iter().find(|(x, _)| x == n).unwrap().1.clone();
    assert_eq!(info("skill:proj")["baseDir"], json!(sub.join(".pi")));
    assert_eq!(info("skill:proj")["scope"], "project");
    assert_eq!(info("skill:up")["baseDir"], json!(repo.join(".agents")));
    assert_eq!(
        info("skill:home")["baseDir"],
        json!(root.home.join(".agents"))
    );
    assert_eq!(info("skill:home")["scope"], "user");
    assert_eq!(info("skill:set")["source"], "local");
    assert_eq!(info("skill:clidir")["scope"], "temporary");
    assert_eq!(
        info("skill:clidir")["baseDir"],
        json!(root.cwd.join("cli/clidir"))
    );
    // --no-skills: only the --skill path.
    drop(agent);
    let mut agent = root.spawn_in(&sub, false, &["--no-skills", "--skill", "../cli"], &[]);
    assert_eq!(names(&skills(&mut agent)), ["skill:clidir"]);
}

#[test]
fn project_skills_are_skipped_without_trust() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write(
        &root.cwd.join(".pi/skills/proj/SKILL.md"),
        &skill_md("proj", "Project."),
    );
    write(
        &root.cwd.join(".agents/skills/ag/SKILL.md"),
        &skill_md("ag", "Agents."),
    );
    write(
        &root.agent_dir.join("skills/user/SKILL.md"),
        &skill_md("user", "User."),
    );
    let mut agent = root.spawn();
    assert_eq!(names(&skills(&mut agent)), ["skill:user"]);
}

#[test]
fn collisions_validation_and_settings_patterns() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let a = &root.agent_dir;
    write(&a.join("skills/one/SKILL.md"), &skill_md("same", "First."));
    write(&a.join("skills/two/SKILL.md"), &skill_md("same", "Second."));
    write(
        &a.join("skills/Bad_Name/SKILL.md"),
        "---\ndescription: Odd name.\n---\nx",
    );
    write(
        &a.join("skills/nodesc/SKILL.md"),
        "---\nname: nodesc\n---\nx",
    );
    write(
        &a.join("skills/broken/SKILL.md"),
        "---\nname: \"broken\n---\nx",
    );
    write(&a.join("skills/plain.md"), "no frontmatter, not a skill");
    write(
        &a.join("skills/outer/SKILL.md"),
        &skill_md("outer", "Outer."),
    );
    write(
        &a.join("skills/outer/inner/SKILL.md"),
        &skill_md("inner", "Not reached."),
    );
    write(
        &a.join("skills/node_modules/nm/SKILL.md"),
        &skill_md("nm", "Skipped."),
    );
    write(
        &a.join("skills/ign/SKILL.md"),
        &skill_md("ign", "Ignored by .gitignore."),
    );
    write(&a.join("skills/.gitignore"), "ign/\n");
    write(
        &a.join("skills/off/SKILL.md"),
        &skill_md("off", "Disabled by !glob."),
    );
    write(
        &a.join("skills/forced/SKILL.md"),
        &skill_md("forced", "Forced out by -path."),
    );
    root.merge_settings(json!({"skills": ["!off", "-skills/forced/SKILL.md"]}));
    let mut agent = root.spawn();
    let list = skills(&mut agent);
    assert_eq!(
        names(&list),
        ["skill:Bad_Name", "skill:same", "skill:outer"]
    );
    let cmds = agent.request(json!({"id": "g2", "type": "get_commands"}));
    let same = cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "skill:same")
        .unwrap()
        .clone();
    assert_eq!(same["description"], "First.");
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    let err = agent.stderr();
    assert!(err.contains("collision"), "{err}");
    assert!(err.contains("lowercase"), "{err}");
    assert!(
        err.contains("nodesc/SKILL.md: description is missing"),
        "{err}"
    );
    assert!(err.contains("broken/SKILL.md"), "{err}");
    assert!(!err.contains("plain.md"), "{err}");
}

fn system_prompt(fake: &pi_fakellm::FakeLlm) -> String {
    let r = &fake.llm_requests()[0];
    let body: Value = serde_json::from_str(&r.body_text()).unwrap();
    body["messages"][0]["content"].as_str().unwrap().to_string()
}

fn last_user_text(fake: &pi_fakellm::FakeLlm, i: usize) -> String {
    let r = &fake.llm_requests()[i];
    let body: Value = serde_json::from_str(&r.body_text()).unwrap();
    let m = body["messages"].as_array().unwrap();
    let u = m.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &u["content"] {
        Value::String(s) => s.clone(),
        c => c[0]["text"].as_str().unwrap().to_string(),
    }
}

#[test]
fn listing_and_expansion_in_prompt_steer_and_follow_up() {
    let (fake, root) = setup(Script::new([Turn::text("ok")]), DEFAULT_MODEL);
    let file = root.agent_dir.join("skills/greeter/SKILL.md");
    write(&file, &skill_md("greeter", "Greets <people> & co."));
    write(
        &root.agent_dir.join("skills/secret/SKILL.md"),
        "---\nname: secret\ndescription: Only by command.\ndisable-model-invocation: true\n---\nSecret body.",
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p", "type": "prompt", "message": "/skill:greeter   Alice  "}));
    agent.wait_event("agent_settled");
    let sp = system_prompt(&fake);
    assert!(sp.contains("<name>greeter</name>"), "{sp}");
    assert!(
        sp.contains("<description>Greets &lt;people&gt; &amp; co.</description>"),
        "{sp}"
    );
    assert!(
        sp.contains(&format!("<location>{}</location>", file.display())),
        "{sp}"
    );
    assert!(!sp.contains("secret"), "{sp}");
    let dir = file.parent().unwrap();
    assert_eq!(
        last_user_text(&fake, 0),
        format!(
            "<skill name=\"greeter\" location=\"{}\">\nReferences are relative to {}.\n\n# greeter\n\nBody of greeter.\n</skill>\n\nAlice",
            file.display(),
            dir.display()
        )
    );
    agent.request(json!({"id": "s", "type": "steer", "message": "/skill:secret"}));
    agent.request(json!({"id": "f", "type": "follow_up", "message": "/skill:greeter Bob"}));
    agent.request(json!({"id": "n", "type": "follow_up", "message": "/skill:nosuch x"}));
    let r = agent.request(json!({"id": "c", "type": "clear_queue"}));
    let secret = root.agent_dir.join("skills/secret");
    assert_eq!(
        r["data"]["steering"],
        json!([format!(
            "<skill name=\"secret\" location=\"{}\">\nReferences are relative to {}.\n\nSecret body.\n</skill>",
            secret.join("SKILL.md").display(),
            secret.display()
        )])
    );
    let fu = r["data"]["followUp"].as_array().unwrap();
    assert!(
        fu[0].as_str().unwrap().ends_with("</skill>\n\nBob"),
        "{fu:?}"
    );
    assert_eq!(fu[1], "/skill:nosuch x");
}

#[test]
fn enable_skill_commands_false_hides_them_from_get_commands_only() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write(
        &root.agent_dir.join("skills/greeter/SKILL.md"),
        &skill_md("greeter", "Greets."),
    );
    root.merge_settings(json!({"enableSkillCommands": false}));
    let mut agent = root.spawn();
    assert!(skills(&mut agent).is_empty());
    agent.request(json!({"id": "s", "type": "steer", "message": "/skill:greeter"}));
    let r = agent.request(json!({"id": "c", "type": "clear_queue"}));
    assert!(r["data"]["steering"][0]
        .as_str()
        .unwrap()
        .starts_with("<skill name=\"greeter\""));
}

#[test]
fn builtin_mcp_and_llama_commands() {
    let (fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn();
    let from = agent.len();
    let r = agent.request(json!({"id": "m", "type": "prompt", "message": "/mcp"}));
    assert_eq!(r["data"], json!({"disposition": "handled"}));
    let notify = agent.events()[from..]
        .iter()
        .find(|v| kind(v) == "extension_ui_request")
        .cloned()
        .unwrap();
    assert_eq!(notify["method"], "notify");
    assert_eq!(notify["notifyType"], "info");
    assert!(notify["message"]
        .as_str()
        .unwrap()
        .contains("No MCP servers"));
    let from = agent.len();
    let r = agent.request(json!({"id": "l", "type": "prompt", "message": "/llama"}));
    assert_eq!(r["data"], json!({"disposition": "handled"}));
    assert!(agent.events()[from..]
        .iter()
        .any(|v| kind(v) == "extension_ui_request"
            && v["message"].as_str().unwrap().contains("GGUF")));
    let r = agent.request(json!({"id": "s", "type": "steer", "message": "/mcp"}));
    assert_eq!(r["success"], false);
    assert_eq!(
        r["error"],
        "Extension command \"/mcp\" cannot be queued. Use prompt() or execute the command when not streaming."
    );
    assert!(fake.llm_requests().is_empty());
}

/// Project skills (`.pi/skills`, `.agents/skills`) and prompts (`.pi/prompts`) load exactly
/// when the project is trusted (crate::trust): not by default headless, with `--approve`/`-a`,
/// with a saved `trust.json` decision (which `--no-approve` beats), with `defaultProjectTrust`.
#[test]
fn project_skills_and_prompts_load_exactly_when_the_project_is_trusted() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    write(
        &root.cwd.join(".pi/skills/proj/SKILL.md"),
        &skill_md("proj", "Project skill."),
    );
    write(
        &root.cwd.join(".agents/skills/agentsk/SKILL.md"),
        &skill_md("agentsk", "Project .agents skill."),
    );
    write(&root.cwd.join(".pi/prompts/projtpl.md"), "Project template");
    write(
        &root.agent_dir.join("skills/user/SKILL.md"),
        &skill_md("user", "User skill."),
    );
    write(&root.agent_dir.join("prompts/usertpl.md"), "User template");
    let listed = |args: &[&str]| -> (Vec<String>, String) {
        let mut agent = root.spawn_with(false, args);
        let cmds = agent.request(json!({"id": "g", "type": "get_commands"}));
        let names = cmds["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        agent.close_stdin();
        agent.wait_exit(LIVENESS);
        (names, agent.stderr())
    };
    let untrusted = ["llama", "mcp", "usertpl", "skill:user"];
    let trusted = [
        "llama",
        "mcp",
        "projtpl",
        "usertpl",
        "skill:proj",
        "skill:agentsk",
        "skill:user",
    ];
    let (names, stderr) = listed(&[]);
    assert_eq!(names, untrusted, "untrusted by default headless");
    assert!(
        stderr.contains(".pi/skills")
            && stderr.contains(".pi/prompts")
            && stderr.contains("--approve"),
        "the notice names what was skipped: {stderr}"
    );
    for flag in ["--approve", "-a"] {
        assert_eq!(listed(&[flag]).0, trusted, "{flag}");
    }
    assert_eq!(
        listed(&["-a", "--no-approve"]).0,
        untrusted,
        "the last flag wins"
    );
    let key = root.cwd.canonicalize().unwrap().display().to_string();
    root.write_agent_file("trust.json", &json!({ key.clone(): true }));
    assert_eq!(listed(&[]).0, trusted, "saved decision");
    assert_eq!(
        listed(&["-na"]).0,
        untrusted,
        "--no-approve beats trust.json"
    );
    root.write_agent_file("trust.json", &json!({ key: false }));
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    assert_eq!(
        listed(&[]).0,
        untrusted,
        "a saved false beats defaultProjectTrust"
    );
    root.write_agent_file("trust.json", &json!({}));
    assert_eq!(listed(&[]).0, trusted, "defaultProjectTrust: always");
}
