//! The system prompt, recorded as the session's leading `role:"system"` message
//! (upstream-1.6-notes.md §2, §13; spec messages-and-models.md §4.1, config.md §6).
//!
//! Shape (golden `simple_text`, `context_agents_md`, `commands_templates_skills`):
//! `{"role":"system","content":"","sections":{…},"toolsAdded":[…],"timestamp":…}` where
//! `sections` holds, in this order and only when present:
//!
//! | key | present when | text |
//! |---|---|---|
//! | `preamble` | always | the default introduction, or the custom prompt (untagged) |
//! | `tools` | no custom prompt | `<tools>\n- name: summary\n…\n\n<note>\n</tools>` (`(none)` without tools) |
//! | `rules` | no custom prompt | `<rules>\n- rule\n…\n</rules>` |
//! | `docs` | no custom prompt | `<docs>\n…\n</docs>` (where pi's own docs live) |
//! | `addendum` | append text given | `<addendum>\n…\n</addendum>` |
//! | `project_context` | context files found | `<project_context>\n<intro>\n\n<project_instructions path="…">\n<content>\n</project_instructions>…\n</project_context>` |
//! | `skills` | visible skills and `read` or `bash` declared | `<skills>\n<intro>\n\n<available_skills>…</available_skills>\n</skills>` |
//! | `cwd` | always | `<cwd>\n<cwd with \ → />\n</cwd>` |
//! | `sandbox` | a sandbox mode is active (ours) | `<sandbox>\n<the boundary in a line>\n</sandbox>` |
//!
//! The text sent to the model is `content` (when non-empty) followed by the section texts,
//! joined with blank lines. `toolsAdded` lists every tool definition, those of `read`, `bash`,
//! `edit` and `write` with `constrainedSampling: {"type":"json_schema","strict":"prefer"}`
//! appended (as upstream 1.6).
//!
//! The wording is this implementation's own; the facts (tool names, context files, skills,
//! cwd) match upstream's.

use crate::resources::{ContextFile, Skill};
use pi_ai::{now_ms, SystemMessage, ToolDefinition, UserContent};
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// A tool as the system prompt presents it.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptTool {
    /// Name, description and parameters (also what `toolsAdded` carries).
    pub definition: ToolDefinition,
    /// One-line summary for the `<tools>` list; a tool without one is not listed.
    pub snippet: Option<String>,
    /// Rule bullets this tool contributes to `<rules>`.
    pub guidelines: Vec<String>,
}

impl PromptTool {
    /// A tool with the built-in summary and rules of its name (see [`builtin_snippet`],
    /// [`builtin_guidelines`]); other names get none.
    pub fn new(definition: ToolDefinition) -> Self {
        let snippet = builtin_snippet(&definition.name).map(str::to_string);
        let guidelines = builtin_guidelines(&definition.name)
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        PromptTool {
            definition,
            snippet,
            guidelines,
        }
    }
}

/// One-line summaries of the built-in tools.
pub fn builtin_snippet(name: &str) -> Option<&'static str> {
    Some(match name {
        "read" => "Show the contents of a file (text, or images as attachments)",
        "bash" => "Run a shell command in the working directory",
        "edit" => {
            "Change an existing file by replacing exact text spans, several at once if needed"
        }
        "write" => "Create a file, or replace everything in an existing one",
        "grep" => "Search file contents with a pattern (honours .gitignore)",
        "find" => "Locate files by glob pattern (honours .gitignore)",
        "ls" => "List what a directory contains",
        _ => return None,
    })
}

/// Rule bullets contributed by the built-in tools.
pub fn builtin_guidelines(name: &str) -> &'static [&'static str] {
    const REPORT: &str =
        "When reporting what you changed, describe it in plain text instead of printing files with cat or bash";
    const EXPLORE: &str =
        "For exploring files, prefer grep, find and ls over bash: they are quicker and honour .gitignore";
    match name {
        "read" => &["Look at files with read instead of cat or sed"],
        "edit" => &[
            "Use edit for targeted changes; every oldText must match the file exactly, whitespace included",
            REPORT,
        ],
        "write" => &["Use write only for new files or complete rewrites", REPORT],
        "grep" | "find" | "ls" => &[EXPLORE],
        _ => &[],
    }
}

/// Where pi's own documentation lives (the `docs` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocsPaths {
    /// The main README.
    pub readme: PathBuf,
    /// The docs directory.
    pub docs: PathBuf,
    /// The examples directory.
    pub examples: PathBuf,
}

impl DocsPaths {
    /// Paths under `$PI_PACKAGE_DIR`, else under the directory of the running executable.
    pub fn detect() -> Self {
        let base = std::env::var_os("PI_PACKAGE_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::current_exe()
                    .ok()
                    .and_then(|p| p.parent().map(PathBuf::from))
            })
            .unwrap_or_else(|| PathBuf::from("."));
        DocsPaths::under(base)
    }

    /// `README.md`, `docs`, `examples` under `base`.
    pub fn under(base: PathBuf) -> Self {
        DocsPaths {
            readme: base.join("README.md"),
            docs: base.join("docs"),
            examples: base.join("examples"),
        }
    }
}

/// Everything the system prompt is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemPromptInput {
    /// Working directory (shown in the `cwd` section).
    pub cwd: PathBuf,
    /// Active tools, in order.
    pub tools: Vec<PromptTool>,
    /// Context files, in order ([`crate::resources::load_context_files`]).
    pub context_files: Vec<ContextFile>,
    /// Replacement for the default body (`--system-prompt`, `SYSTEM.md`).
    pub custom_prompt: Option<String>,
    /// Appended text (`--append-system-prompt`, `APPEND_SYSTEM.md`).
    pub append_prompt: Option<String>,
    /// Skills to list.
    pub skills: Vec<Skill>,
    /// Extra rule bullets (e.g. from extensions), after the tools' own.
    pub extra_guidelines: Vec<String>,
    /// Where pi's docs live.
    pub docs: DocsPaths,
    /// MCP servers whose tools are not declared (`mcp_servers` section, after `cwd`): name
    /// (`mcp__<server>`), how they are reached (`codemode` or `tool_search`) and an optional
    /// one-line summary (docs/mcp.md "Control tool exposure").
    pub mcp_servers: Vec<McpServerLine>,
    /// The boundary of an active sandbox in a line or two (`sandbox` section, right after
    /// `cwd`; [`crate::tools::sandbox::SandboxPolicy::prompt_text`]); `None` = no sandbox, no
    /// section (the prompt is then as before).
    pub sandbox: Option<String>,
    /// Extra sections by tag name, from an extension's `systemPromptOptions.sections` edit in
    /// `before_agent_start` (upstream 1.6 `buildSystemPromptSections`): one named like a
    /// section already there replaces its text in place, a new one goes last; an empty text
    /// adds nothing.
    pub sections: Vec<(String, String)>,
}

/// One server of the `mcp_servers` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerLine {
    /// `mcp__<server>` with `-` written as `_`, as in the server's tool names
    /// ([`crate::mcp::config::namespace`]).
    pub namespace: String,
    /// `codemode` or `tool_search`.
    pub reached_by: &'static str,
    /// One line: the first line of the configured `description`, or else of the instructions
    /// the server sent once connected; `None` without either.
    pub summary: Option<String>,
}

/// The whole `mcp_servers` section as the system message holds it
/// (`<mcp_servers>\n…\n</mcp_servers>`), or `None` when no server is listed. A prompt
/// compares it with the section the session's system messages hold (docs/mcp.md "Control tool
/// exposure").
pub fn mcp_servers_section(lines: &[McpServerLine]) -> Option<String> {
    (!lines.is_empty())
        .then(|| format!("<mcp_servers>\n{}\n</mcp_servers>", mcp_servers_text(lines)))
}

/// Characters (Unicode scalar values) one server's summary may take in the `mcp_servers`
/// section (upstream 1.6 `extensions/mcp`: 250, what Codex allows for a deferred namespace).
pub const MAX_MCP_SERVER_SUMMARY_CHARS: usize = 250;

/// Characters the whole `mcp_servers` section text may take (upstream 1.6: 4096). Summaries
/// shrink to fit; when the server lines alone do not fit, the last servers are left out and
/// counted in a closing line.
pub const MAX_MCP_SERVERS_SECTION_CHARS: usize = 4096;

/// `text` cut to `max` characters, the cut marked by `…` (trailing blanks before it dropped).
fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max <= 1 {
        return String::new();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{}…", head.trim_end())
}

fn mcp_servers_text(lines: &[McpServerLine]) -> String {
    let mut intro =
        String::from("Your declared tools do not include the tools of these MCP servers.");
    if lines.iter().any(|l| l.reached_by == "codemode") {
        intro.push_str(" Reach the tools of servers marked `codemode` from codemode scripts.");
    }
    if lines.iter().any(|l| l.reached_by == "tool_search") {
        intro.push_str(" Load the tools of servers marked `tool_search` with `tool_search` first.");
    }
    let heads: Vec<String> = lines
        .iter()
        .map(|l| format!("- {} ({})", l.namespace, l.reached_by))
        .collect();
    let omitted = |n: usize| match n {
        0 => None,
        1 => Some("- … and 1 more server (search its tools with searchTools())".to_string()),
        n => Some(format!(
            "- … and {n} more servers (search their tools with searchTools())"
        )),
    };
    // Characters of the intro, the first `kept` head lines and the omission line, newlines
    // between them included.
    let size = |kept: usize| {
        let parts = std::iter::once(intro.chars().count())
            .chain(heads[..kept].iter().map(|h| h.chars().count()))
            .chain(omitted(lines.len() - kept).map(|o| o.chars().count()));
        let (chars, count) = parts.fold((0, 0), |(c, n), len| (c + len, n + 1));
        chars + count - 1
    };
    let mut kept = lines.len();
    while kept > 0 && size(kept) > MAX_MCP_SERVERS_SECTION_CHARS {
        kept -= 1;
    }
    // Each summary also takes a ": " separator.
    let per_server = match kept {
        0 => 0,
        _ => ((MAX_MCP_SERVERS_SECTION_CHARS.saturating_sub(size(kept))) / kept)
            .saturating_sub(2)
            .min(MAX_MCP_SERVER_SUMMARY_CHARS),
    };
    let mut out = intro.clone();
    for (l, head) in lines.iter().zip(&heads).take(kept) {
        out.push('\n');
        out.push_str(head);
        let summary = l.summary.as_deref().map(str::trim).unwrap_or("");
        let summary = if per_server > 0 {
            cut_chars(summary, per_server)
        } else {
            String::new()
        };
        if !summary.is_empty() {
            out.push_str(": ");
            out.push_str(&summary);
        }
    }
    if let Some(o) = omitted(lines.len() - kept) {
        out.push('\n');
        out.push_str(&o);
    }
    out
}

impl SystemPromptInput {
    /// Input for `cwd` with the given tools and nothing else.
    pub fn new(cwd: impl Into<PathBuf>, tools: Vec<PromptTool>) -> Self {
        SystemPromptInput {
            cwd: cwd.into(),
            tools,
            context_files: Vec::new(),
            custom_prompt: None,
            append_prompt: None,
            skills: Vec::new(),
            extra_guidelines: Vec::new(),
            docs: DocsPaths::detect(),
            mcp_servers: Vec::new(),
            sandbox: None,
            sections: Vec::new(),
        }
    }
}

const PREAMBLE: &str = "You are a capable software engineering assistant running in pi, a harness for coding agents. You carry out the user's requests by inspecting files, running shell commands, changing code and creating new files.";
const TOOLS_NOTE: &str =
    "Depending on the project, further custom tools beyond the ones listed here may be available.";
const CONTEXT_INTRO: &str = "Instructions and conventions that apply to this project:";

fn tools_text(input: &SystemPromptInput) -> String {
    let lines: Vec<String> = input
        .tools
        .iter()
        .filter_map(|t| {
            let s = t
                .snippet
                .as_deref()?
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            (!s.is_empty()).then(|| format!("- {}: {s}", t.definition.name))
        })
        .collect();
    let list = if lines.is_empty() {
        "(none)".to_string()
    } else {
        lines.join("\n")
    };
    format!("{list}\n\n{TOOLS_NOTE}")
}

fn rules_text(input: &SystemPromptInput) -> String {
    let has = |n: &str| input.tools.iter().any(|t| t.definition.name == n);
    let mut rules: Vec<String> = Vec::new();
    let mut add = |r: &str| {
        let r = r.trim();
        if !r.is_empty() && !rules.iter().any(|x| x == r) {
            rules.push(r.to_string());
        }
    };
    if has("bash") && !has("grep") && !has("find") && !has("ls") {
        add("Use bash for file operations such as listing, searching and finding files (ls, rg, find)");
    }
    for t in &input.tools {
        for g in &t.guidelines {
            add(g);
        }
    }
    for g in &input.extra_guidelines {
        add(g);
    }
    add("Keep your answers short and to the point");
    add("Mention file paths explicitly whenever you work with files");
    rules
        .iter()
        .map(|r| format!("- {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn docs_text(d: &DocsPaths) -> String {
    format!(
        "Documentation for pi itself (consult it only when the user asks about pi, its SDK, extensions, themes, skills or TUI):\n\
         - README: {}\n\
         - Docs folder: {}\n\
         - Examples folder: {} (extensions, custom tools, SDK usage)\n\
         - Resolve docs/... paths against the docs folder and examples/... paths against the examples folder, never against the working directory\n\
         - Topics: extensions (docs/extensions.md, examples/extensions/), themes (docs/themes.md), skills (docs/skills.md), prompt templates (docs/prompt-templates.md), TUI components (docs/tui.md), keybindings (docs/keybindings.md), SDK (docs/sdk.md), custom providers (docs/custom-provider.md), models (docs/models.md), packages (docs/packages.md), environment variables (docs/environment-variables.md)\n\
         - For work on pi itself, read the relevant documents in full and follow their cross-references before writing code",
        d.readme.display(),
        d.docs.display(),
        d.examples.display()
    )
}

fn project_context_text(files: &[ContextFile]) -> String {
    let mut parts = vec![CONTEXT_INTRO.to_string()];
    parts.extend(files.iter().map(|f| {
        format!(
            "<project_instructions path=\"{}\">\n{}\n</project_instructions>",
            f.path.display(),
            f.content
        )
    }));
    parts.join("\n\n")
}

/// Escapes `& < > " '` for the skills listing.
pub fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn skills_text(skills: &[&Skill], read_tool: &str) -> String {
    let mut out = format!(
        "Skills bundle specialised instructions for particular tasks. When a task fits a skill's description, load its file with the {read_tool} tool before you start. Paths mentioned inside a skill are relative to the skill's own directory.\n\n<available_skills>"
    );
    for s in skills {
        out.push_str(&format!(
            "\n  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n  </skill>",
            escape_xml(&s.name),
            escape_xml(&s.description),
            escape_xml(&s.file_path.display().to_string())
        ));
    }
    out.push_str("\n</available_skills>");
    out
}

/// The ordered sections (name, full text including the wrapping tag) — see the module docs.
pub fn build_sections(input: &SystemPromptInput) -> Vec<(String, String)> {
    let mut raw: Vec<(&str, String)> = Vec::new();
    match input.custom_prompt.as_deref().filter(|p| !p.is_empty()) {
        Some(custom) => raw.push(("preamble", custom.to_string())),
        None => {
            raw.push(("preamble", PREAMBLE.to_string()));
            raw.push(("tools", tools_text(input)));
            raw.push(("rules", rules_text(input)));
            raw.push(("docs", docs_text(&input.docs)));
        }
    }
    if let Some(a) = input.append_prompt.as_deref().filter(|a| !a.is_empty()) {
        raw.push(("addendum", a.to_string()));
    }
    if !input.context_files.is_empty() {
        raw.push((
            "project_context",
            project_context_text(&input.context_files),
        ));
    }
    let read_tool = ["read", "bash"]
        .into_iter()
        .find(|n| input.tools.iter().any(|t| t.definition.name == *n));
    let visible: Vec<&Skill> = input
        .skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if let (Some(tool), false) = (read_tool, visible.is_empty()) {
        raw.push(("skills", skills_text(&visible, tool)));
    }
    raw.push(("cwd", input.cwd.display().to_string().replace('\\', "/")));
    if let Some(sandbox) = input.sandbox.as_deref().filter(|s| !s.is_empty()) {
        raw.push(("sandbox", sandbox.to_string()));
    }
    if !input.mcp_servers.is_empty() {
        raw.push(("mcp_servers", mcp_servers_text(&input.mcp_servers)));
    }
    for (name, text) in input.sections.iter().filter(|(_, t)| !t.is_empty()) {
        match raw.iter_mut().find(|(n, _)| *n == name.as_str()) {
            Some(slot) => slot.1 = text.clone(),
            None => raw.push((name.as_str(), text.clone())),
        }
    }
    raw.into_iter()
        .map(|(name, text)| {
            let full = if name == "preamble" {
                text
            } else {
                format!("<{name}>\n{text}\n</{name}>")
            };
            (name.to_string(), full)
        })
        .collect()
}

/// The built-in tools whose definitions carry `constrainedSampling` (upstream 1.6 sets it on
/// `read`, `bash`, `edit` and `write` only; `grep`, `find`, `ls` and extension tools have none).
const CONSTRAINED_TOOLS: [&str; 4] = ["read", "bash", "edit", "write"];

/// A tool definition as listed in `toolsAdded`: `{name, description, parameters}`, plus
/// `constrainedSampling: {type: "json_schema", strict: "prefer"}` for the tools of
/// [`CONSTRAINED_TOOLS`].
pub fn tool_added_entry(def: &ToolDefinition) -> Value {
    let mut v = json!({
        "name": def.name,
        "description": def.description,
        "parameters": def.parameters,
    });
    if CONSTRAINED_TOOLS.contains(&def.name.as_str()) {
        v["constrainedSampling"] = json!({"type": "json_schema", "strict": "prefer"});
    }
    v
}

/// The text a system message stands for: `content` (when non-empty) and the string values of
/// `sections`, joined with blank lines.
pub fn system_message_text(msg: &SystemMessage) -> String {
    let mut parts: Vec<String> = Vec::new();
    let content = msg.content.joined_text();
    if !content.is_empty() {
        parts.push(content);
    }
    if let Some(sections) = &msg.sections {
        parts.extend(
            sections
                .values()
                .filter_map(|v| v.as_str().map(str::to_string)),
        );
    }
    parts.join("\n\n")
}

/// Builds the leading system message and the flattened prompt text sent to the model.
pub fn build_system_message(input: &SystemPromptInput) -> (SystemMessage, String) {
    let sections: Map<String, Value> = build_sections(input)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let msg = SystemMessage {
        content: UserContent::Text(String::new()),
        sections: Some(sections),
        timestamp: now_ms(),
        tools_added: Some(
            input
                .tools
                .iter()
                .map(|t| tool_added_entry(&t.definition))
                .collect(),
        ),
        tools_removed: None,
        replace: None,
        extra: Default::default(),
    };
    let text = system_message_text(&msg);
    (msg, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize) -> McpServerLine {
        McpServerLine {
            namespace: format!("mcp__server_with_a_long_name_{i:03}"),
            reached_by: "codemode",
            summary: Some("A server that does things.".into()),
        }
    }

    /// Too many servers for 4096 characters: the last ones are counted in a closing line, and
    /// the summaries (no room left for them) are dropped; the text stays within the limit.
    #[test]
    fn the_mcp_servers_section_leaves_out_what_does_not_fit() {
        let lines: Vec<McpServerLine> = (0..200).map(line).collect();
        let text = mcp_servers_text(&lines);
        assert!(
            text.chars().count() <= MAX_MCP_SERVERS_SECTION_CHARS,
            "{text}"
        );
        let listed = text.lines().filter(|l| l.starts_with("- mcp__")).count();
        assert!(listed > 0 && listed < 200, "{listed}");
        let last = text.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            format!(
                "- … and {} more servers (search their tools with searchTools())",
                200 - listed
            )
        );
        assert!(!text.contains("does things"), "{text}");
    }

    /// A few servers keep their summaries whole.
    #[test]
    fn a_short_mcp_servers_section_keeps_every_summary() {
        let text = mcp_servers_text(&[line(1), line(2)]);
        assert_eq!(
            text.lines()
                .filter(|l| l.ends_with(": A server that does things."))
                .count(),
            2
        );
    }
}
