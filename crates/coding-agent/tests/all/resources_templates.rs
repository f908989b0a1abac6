//! Prompt templates (spec config.md §9, upstream 1.6 docs/prompt-templates.md): every
//! argument form, shell-like quoting, discovery, and expansion in `prompt`, `steer` and
//! `follow_up` through the real `pi --mode rpc`.

use crate::common::*;
use pi_coding_agent::resources::templates::{parse_command_args, substitute_args};
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};

fn a(v: &[&str]) -> Vec<String> {
    v.iter().map(std::string::ToString::to_string).collect()
}

#[test]
fn positional_arguments_and_missing_ones() {
    let args = a(&["one", "two"]);
    assert_eq!(substitute_args("[$1] [$2] [$3]", &args), "[one] [two] []");
    assert_eq!(substitute_args("$10|$1x", &args), "|onex");
}

#[test]
fn all_arguments_dollar_at_and_arguments() {
    let args = a(&["a b", "c"]);
    assert_eq!(substitute_args("$@ / $ARGUMENTS", &args), "a b c / a b c");
    assert_eq!(substitute_args("$@", &[]), "");
}

#[test]
fn defaults_for_positional_and_all() {
    let args = a(&["x", ""]);
    assert_eq!(
        substitute_args("${1:-d1} ${2:-d2} ${3:-d3}", &args),
        "x d2 d3"
    );
    assert_eq!(
        substitute_args("${@:-none} ${ARGUMENTS:-none}", &[]),
        "none none"
    );
    assert_eq!(substitute_args("${@:-none}", &args), "x ");
}

#[test]
fn slices_from_n_and_with_length() {
    let args = a(&["1", "2", "3", "4"]);
    assert_eq!(substitute_args("${@:2}", &args), "2 3 4");
    assert_eq!(substitute_args("${@:0}", &args), "1 2 3 4");
    assert_eq!(substitute_args("${@:2:2}", &args), "2 3");
    assert_eq!(substitute_args("${@:4:9}", &args), "4");
    assert_eq!(substitute_args("${@:7}|${@:2:0}", &args), "|");
}

#[test]
fn values_are_not_substituted_again_and_other_dollars_stay() {
    assert_eq!(substitute_args("$1 $2", &a(&["$2", "${@:1}"])), "$2 ${@:1}");
    assert_eq!(
        substitute_args("cost $ 5, ${HOME}, $x", &a(&["a"])),
        "cost $ 5, ${HOME}, $x"
    );
}

#[test]
fn shell_like_quoting() {
    assert_eq!(
        parse_command_args("\"API compatibility\" extra"),
        a(&["API compatibility", "extra"])
    );
    assert_eq!(
        parse_command_args("'single quoted' x"),
        a(&["single quoted", "x"])
    );
    assert_eq!(
        parse_command_args("doesn't matter"),
        a(&["doesn't", "matter"])
    );
    assert_eq!(
        parse_command_args("\"the \\\"fast\\\" path\""),
        a(&["the \"fast\" path"])
    );
    assert_eq!(
        parse_command_args("back\\slash \"a\\b\""),
        a(&["back\\slash", "a\\b"])
    );
    assert_eq!(parse_command_args("\"\" ''"), a(&["", ""]));
    assert_eq!(
        parse_command_args("\"unclosed rest"),
        a(&["\"unclosed", "rest"])
    );
    assert_eq!(parse_command_args(" \t\n"), Vec::<String>::new());
}

fn user_texts(fake: &pi_fakellm::FakeLlm) -> Vec<String> {
    fake.llm_requests()
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_str(&r.body_text()).unwrap();
            let msgs = body["messages"].as_array().unwrap();
            let last = msgs.iter().rev().find(|m| m["role"] == "user").unwrap();
            match &last["content"] {
                Value::String(s) => s.clone(),
                c => c[0]["text"].as_str().unwrap_or("").to_string(),
            }
        })
        .collect()
}

const REVIEW: &str = "---\ndescription: Review with a focus\nargument-hint: \"[focus]\"\n---\nFocus on ${1:-correctness}. Rest: ${@:2}. All: $ARGUMENTS\n";

#[test]
fn templates_expand_in_prompt_steer_and_follow_up() {
    let (fake, root) = setup(Script::new([Turn::text("ok")]), DEFAULT_MODEL);
    std::fs::create_dir_all(root.agent_dir.join("prompts")).unwrap();
    std::fs::write(root.agent_dir.join("prompts/review.md"), REVIEW).unwrap();
    std::fs::write(root.agent_dir.join("prompts/note.md"), "Note: $@\n").unwrap();
    let mut agent = root.spawn();
    agent.send(json!({"id": "p", "type": "prompt", "message": "/review \"API compat\" b c"}));
    agent.wait_event("agent_settled");
    assert_eq!(
        user_texts(&fake),
        ["Focus on API compat. Rest: b c. All: API compat b c"]
    );
    // Idle steer / follow_up only queue: the queue holds the expanded texts.
    agent.request(json!({"id": "s", "type": "steer", "message": "/note steer 'one two'"}));
    agent.request(json!({"id": "f", "type": "follow_up", "message": "/review"}));
    agent.request(json!({"id": "u", "type": "follow_up", "message": "/unknown a"}));
    let r = agent.request(json!({"id": "c", "type": "clear_queue"}));
    assert_eq!(
        r["data"],
        json!({"steering": ["Note: steer one two\n"],
               "followUp": ["Focus on correctness. Rest: . All: ", "/unknown a"]})
    );
    let cmds = agent.request(json!({"id": "g", "type": "get_commands"}));
    let names: Vec<&str> = cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["llama", "mcp", "note", "review"]);
    let review = &cmds["data"]["commands"][3];
    assert_eq!(review["description"], "Review with a focus");
    assert_eq!(review["source"], "prompt");
    assert_eq!(
        review["sourceInfo"],
        json!({"path": root.agent_dir.join("prompts/review.md"), "source": "auto",
               "scope": "user", "origin": "top-level", "baseDir": root.agent_dir})
    );
    assert_eq!(cmds["data"]["commands"][2]["description"], "Note: $@");
}

fn command_names(agent: &mut RpcAgent) -> Vec<String> {
    let cmds = agent.request(json!({"id": "g", "type": "get_commands"}));
    cmds["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn project_templates_need_trust_and_cli_paths_always_load() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file(".pi/prompts/proj.md", "Project $1");
    root.write_cwd_file("extra/cli.md", "From the CLI");
    root.write_cwd_file("extra/.hidden.md", "hidden");
    std::fs::create_dir_all(root.agent_dir.join("prompts")).unwrap();
    std::fs::write(root.agent_dir.join("prompts/user.md"), "User").unwrap();
    // Untrusted (the default in headless mode): no project templates.
    let mut agent = root.spawn_with(false, &["--prompt-template", "extra"]);
    assert_eq!(command_names(&mut agent), ["llama", "mcp", "user", "cli"]);
    drop(agent);
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    let mut agent = root.spawn_with(false, &["--prompt-template", "extra/cli.md"]);
    assert_eq!(
        command_names(&mut agent),
        ["llama", "mcp", "proj", "user", "cli"]
    );
    drop(agent);
    // --no-prompt-templates keeps only the explicit paths.
    let mut agent = root.spawn_with(
        false,
        &["--no-prompt-templates", "--prompt-template", "extra/cli.md"],
    );
    assert_eq!(command_names(&mut agent), ["llama", "mcp", "cli"]);
}

#[test]
fn settings_prompts_entries_and_name_collisions() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    std::fs::create_dir_all(root.agent_dir.join("prompts")).unwrap();
    std::fs::write(root.agent_dir.join("prompts/dup.md"), "from prompts/").unwrap();
    std::fs::create_dir_all(root.agent_dir.join("more/sub")).unwrap();
    std::fs::write(root.agent_dir.join("more/dup.md"), "from settings").unwrap();
    std::fs::write(root.agent_dir.join("more/sub/deep.md"), "deep").unwrap();
    std::fs::write(root.agent_dir.join("more/skip.md"), "skip").unwrap();
    root.merge_settings(json!({"prompts": ["more", "!skip.md"]}));
    let mut agent = root.spawn();
    // Settings entries come before the auto-discovered folder; the first `dup` wins.
    assert_eq!(command_names(&mut agent), ["llama", "mcp", "dup", "deep"]);
    let cmds = agent.request(json!({"id": "g2", "type": "get_commands"}));
    assert_eq!(cmds["data"]["commands"][2]["description"], "from settings");
    assert_eq!(
        cmds["data"]["commands"][2]["sourceInfo"],
        json!({"path": root.agent_dir.join("more/dup.md"), "source": "local",
               "scope": "user", "origin": "top-level"})
    );
    agent.close_stdin();
    agent.wait_exit(LIVENESS);
    assert!(agent.stderr().contains("collision"), "{}", agent.stderr());
}
