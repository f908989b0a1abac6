//! Context file discovery and the system prompt message (golden simple_text,
//! context_agents_md, commands_templates_skills).

use pi_ai::ToolDefinition;
use pi_coding_agent::resources::{
    load_append_prompt, load_context_files, load_custom_prompt, ContextFile, Skill,
};
use pi_coding_agent::system_prompt::{
    build_system_message, system_message_text, DocsPaths, PromptTool, SystemPromptInput,
};
use serde_json::json;
use std::path::{Path, PathBuf};

fn tool(name: &str) -> PromptTool {
    PromptTool::new(ToolDefinition {
        name: name.into(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}),
    })
}

fn default_tools() -> Vec<PromptTool> {
    ["read", "bash", "edit", "write"]
        .into_iter()
        .map(tool)
        .collect()
}

fn input(cwd: &str) -> SystemPromptInput {
    let mut i = SystemPromptInput::new(cwd, default_tools());
    i.docs = DocsPaths::under(PathBuf::from("/opt/pi"));
    i
}

fn keys(msg: &pi_ai::SystemMessage) -> Vec<String> {
    msg.sections.as_ref().unwrap().keys().cloned().collect()
}

fn section(msg: &pi_ai::SystemMessage, k: &str) -> String {
    msg.sections.as_ref().unwrap()[k]
        .as_str()
        .unwrap()
        .to_string()
}

/// Tool names of the `<tools>` block, the way the conformance digest reads them.
fn tool_names(text: &str) -> Vec<String> {
    let start = text.find("<tools>\n").unwrap() + "<tools>\n".len();
    let end = text[start..].find("</tools>").unwrap() + start;
    text[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.to_string()))
        .collect()
}

#[test]
fn default_sections_tools_and_flattening() {
    let (msg, text) = build_system_message(&input("/work/proj"));
    assert_eq!(keys(&msg), ["preamble", "tools", "rules", "docs", "cwd"]);
    assert_eq!(msg.content, pi_ai::UserContent::Text(String::new()));
    assert_eq!(section(&msg, "cwd"), "<cwd>\n/work/proj\n</cwd>");
    let tools = section(&msg, "tools");
    assert!(tools.starts_with("<tools>\n- read: "), "{tools}");
    assert!(tools.ends_with("\n</tools>"));
    // list, blank line, one note paragraph
    let inner = &tools["<tools>\n".len()..tools.len() - "\n</tools>".len()];
    let (list, note) = inner.split_once("\n\n").unwrap();
    assert_eq!(list.lines().count(), 4);
    assert!(!note.contains('\n'));
    assert_eq!(tool_names(&text), ["read", "bash", "edit", "write"]);
    assert!(section(&msg, "rules").starts_with("<rules>\n- "));
    assert!(section(&msg, "docs").contains("/opt/pi/README.md"));
    // The model gets the sections joined by blank lines, in order.
    let joined: Vec<String> = msg
        .sections
        .as_ref()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, joined.join("\n\n"));
    assert_eq!(text, system_message_text(&msg));
    assert!(text.ends_with("<cwd>\n/work/proj\n</cwd>"));
    // toolsAdded
    let added = msg.tools_added.as_ref().unwrap();
    assert_eq!(added.len(), 4);
    assert_eq!(
        added[0],
        json!({"name": "read", "description": "The read tool.",
               "parameters": {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
               "constrainedSampling": {"type": "json_schema", "strict": "prefer"}})
    );
    let v = serde_json::to_value(pi_ai::Message::System(msg)).unwrap();
    assert_eq!(v["role"], "system");
    assert_eq!(v["content"], "");
    assert!(v["toolsAdded"].is_array());
}

#[test]
fn project_context_section_shape() {
    let mut i = input("/r/cwd");
    i.context_files = vec![
        ContextFile {
            path: "/r/AGENTS.md".into(),
            content: "outer\n".into(),
        },
        ContextFile {
            path: "/r/cwd/AGENTS.md".into(),
            content: "# Project rules\n\nAlways answer in haiku.\n".into(),
        },
    ];
    let (msg, _) = build_system_message(&i);
    assert_eq!(
        keys(&msg),
        [
            "preamble",
            "tools",
            "rules",
            "docs",
            "project_context",
            "cwd"
        ]
    );
    let pc = section(&msg, "project_context");
    let (intro, rest) = pc
        .strip_prefix("<project_context>\n")
        .unwrap()
        .split_once("\n\n")
        .unwrap();
    assert!(!intro.is_empty() && !intro.contains('\n'));
    assert_eq!(
        rest,
        "<project_instructions path=\"/r/AGENTS.md\">\nouter\n\n</project_instructions>\n\n\
         <project_instructions path=\"/r/cwd/AGENTS.md\">\n# Project rules\n\nAlways answer in haiku.\n\n</project_instructions>\n</project_context>"
    );
}

#[test]
fn custom_append_and_skills() {
    let mut i = input("C:\\work\\x");
    i.custom_prompt = Some("You are a pirate.".into());
    i.append_prompt = Some("Extra words.".into());
    i.skills = vec![
        Skill {
            name: "greeter".into(),
            description: "Greets <people> & co".into(),
            file_path: "/s/greeter/SKILL.md".into(),
            base_dir: "/s/greeter".into(),
            disable_model_invocation: false,
            source: "project".into(),
            source_info: Default::default(),
        },
        Skill {
            name: "hidden".into(),
            description: "not listed".into(),
            file_path: "/s/hidden/SKILL.md".into(),
            base_dir: "/s/hidden".into(),
            disable_model_invocation: true,
            source: "user".into(),
            source_info: Default::default(),
        },
    ];
    let (msg, text) = build_system_message(&i);
    assert_eq!(keys(&msg), ["preamble", "addendum", "skills", "cwd"]);
    assert_eq!(section(&msg, "preamble"), "You are a pirate.");
    assert_eq!(
        section(&msg, "addendum"),
        "<addendum>\nExtra words.\n</addendum>"
    );
    assert_eq!(section(&msg, "cwd"), "<cwd>\nC:/work/x\n</cwd>");
    let skills = section(&msg, "skills");
    assert!(skills.contains(
        "<available_skills>\n  <skill>\n    <name>greeter</name>\n    <description>Greets &lt;people&gt; &amp; co</description>\n    <location>/s/greeter/SKILL.md</location>\n  </skill>\n</available_skills>\n</skills>"
    ));
    assert!(!text.contains("hidden"));
    // Without read or bash, skills are not listed.
    i.tools = vec![tool("edit")];
    let (msg, _) = build_system_message(&i);
    assert_eq!(keys(&msg), ["preamble", "addendum", "cwd"]);
}

#[test]
fn no_tools_lists_none() {
    let mut i = input("/x");
    i.tools.clear();
    let (msg, text) = build_system_message(&i);
    assert!(section(&msg, "tools").starts_with("<tools>\n(none)\n\n"));
    assert!(text.contains("<rules>\n- "));
    assert_eq!(msg.tools_added.as_ref().unwrap().len(), 0);
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn context_files_global_first_then_root_to_cwd() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let agent = root.join("agent");
    let cwd = root.join("a").join("b").join("c");
    std::fs::create_dir_all(&cwd).unwrap();
    write(&agent.join("AGENTS.md"), "global");
    write(&root.join("a").join("CLAUDE.md"), "claude a");
    write(&root.join("a").join("b").join("AGENTS.md"), "agents b");
    write(
        &root.join("a").join("b").join("CLAUDE.md"),
        "ignored: AGENTS.md wins",
    );
    write(&cwd.join("\u{feff}x"), "not a context file");
    write(&cwd.join("AGENTS.md"), "\u{feff}agents c");
    std::fs::create_dir_all(root.join("a").join("b").join("c").join("sub")).unwrap();
    let files = load_context_files(&cwd, &agent);
    let got: Vec<(PathBuf, &str)> = files
        .iter()
        .map(|f| (f.path.clone(), f.content.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (agent.join("AGENTS.md"), "global"),
            (root.join("a").join("CLAUDE.md"), "claude a"),
            (root.join("a").join("b").join("AGENTS.md"), "agents b"),
            (cwd.join("AGENTS.md"), "agents c"),
        ]
    );
    // The agent dir inside the walked path is not listed twice.
    let files = load_context_files(&agent, &agent);
    assert_eq!(
        files
            .iter()
            .filter(|f| f.path == agent.join("AGENTS.md"))
            .count(),
        1
    );
    // A directory named AGENTS.md is not a context file.
    let odd = root.join("odd");
    std::fs::create_dir_all(odd.join("AGENTS.md")).unwrap();
    write(&odd.join("CLAUDE.md"), "claude odd");
    let files = load_context_files(&odd, &root.join("none"));
    assert_eq!(files.last().unwrap().content, "claude odd");
}

#[test]
fn custom_and_append_prompt_sources() {
    let root = tempfile::tempdir().unwrap();
    let agent = root.path().join("agent");
    let cwd = root.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    assert_eq!(load_custom_prompt(&cwd, &agent, None), None);
    write(&agent.join("SYSTEM.md"), "agent system");
    assert_eq!(
        load_custom_prompt(&cwd, &agent, None).as_deref(),
        Some("agent system")
    );
    write(&cwd.join(".pi").join("SYSTEM.md"), "project system");
    assert_eq!(
        load_custom_prompt(&cwd, &agent, None).as_deref(),
        Some("project system")
    );
    assert_eq!(
        load_custom_prompt(&cwd, &agent, Some("literal")).as_deref(),
        Some("literal")
    );
    let file = root.path().join("p.txt");
    write(&file, "from file");
    assert_eq!(
        load_custom_prompt(&cwd, &agent, Some(file.to_str().unwrap())).as_deref(),
        Some("from file")
    );
    write(&agent.join("APPEND_SYSTEM.md"), "append agent");
    assert_eq!(
        load_append_prompt(&cwd, &agent, &[]).as_deref(),
        Some("append agent")
    );
    let cli = vec!["one".to_string(), file.to_str().unwrap().to_string()];
    assert_eq!(
        load_append_prompt(&cwd, &agent, &cli).as_deref(),
        Some("one\n\nfrom file")
    );
}
