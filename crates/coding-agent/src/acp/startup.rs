//! The startup info of a new ACP session (`session/new`, not `session/load`/`resume`): one
//! `agent_message_chunk` after the answer (the client learns the session id from the answer;
//! the `pi-acp` adapter sends its block at the same point), a short markdown text with pi's
//! version and what the session loaded: context files, skills, prompt templates, extensions.
//! Left out when settings `quietStartup` is true (agent dir or project settings of the
//! directory pi was started in, as every ACP session's settings).

use crate::agent_session::AgentSession;

/// The startup text of `session`: a first line `pi v<version>`, then one `## <kind>` list per
/// kind that has entries (context files and extensions by path, skills by name and file,
/// prompt templates as `/name`).
pub(super) fn text(session: &AgentSession) -> String {
    let mut md = vec![format!("pi v{}", env!("CARGO_PKG_VERSION"))];
    let mut section = |title: &str, items: Vec<String>| {
        if items.is_empty() {
            return;
        }
        md.push(String::new());
        md.push(format!("## {title}"));
        md.extend(items.into_iter().map(|i| format!("- {i}")));
    };
    let context = session
        .context_files()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    section("Context", context);
    let res = session.command_resources();
    let skills = res
        .skills
        .iter()
        .map(|s| format!("{} ({})", s.name, s.file_path.display()))
        .collect();
    section("Skills", skills);
    let prompts = res
        .prompt_templates
        .iter()
        .map(|t| format!("/{}", t.name))
        .collect();
    section("Prompts", prompts);
    let extensions = session
        .extensions()
        .map(|e| {
            e.entry_paths()
                .iter()
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    section("Extensions", extensions);
    md.join("\n") + "\n"
}
