//! `systemPromptOptions` of `before_agent_start`: what the session's system prompt was built
//! from, as upstream 1.6 shows it to extensions (`normalizeBuildSystemPromptOptions`), and the
//! run's prompt built again from their edits (upstream `_prepareRun` →
//! `_preparePromptAndToolLoadout(result.systemPromptOptions)`: the edits hold for that run; the
//! next run without them patches the sections back).

use crate::extensions::wire::{SystemPromptEdits, SystemPromptOptions};
use crate::system_prompt::SystemPromptInput;
use serde_json::{json, Map, Value};

/// The options `input` stands for, with `selected` as the active tools (upstream
/// `BuildSystemPromptOptions`: snippets and guidelines keyed by tool name, context files as
/// `{path, content}`, `sections` empty since pi adds none of its own there).
pub(super) fn options_of(input: &SystemPromptInput, selected: Vec<String>) -> SystemPromptOptions {
    let mut tool_snippets = Map::new();
    let mut tool_guidelines = Map::new();
    for t in &input.tools {
        if let Some(s) = t.snippet.as_ref().filter(|s| !s.is_empty()) {
            tool_snippets.insert(t.definition.name.clone(), Value::String(s.clone()));
        }
        if !t.guidelines.is_empty() {
            tool_guidelines.insert(t.definition.name.clone(), json!(t.guidelines));
        }
    }
    SystemPromptOptions {
        custom_prompt: input.custom_prompt.clone().filter(|p| !p.is_empty()),
        selected_tools: selected,
        hidden_tools: Vec::new(),
        tool_snippets,
        tool_guidelines,
        prompt_guidelines: input.extra_guidelines.clone(),
        append_system_prompt: input.append_prompt.clone().unwrap_or_default(),
        sections: Map::new(),
        cwd: input.cwd.to_string_lossy().replace('\\', "/"),
        context_files: input
            .context_files
            .iter()
            .map(|f| json!({"path": f.path.to_string_lossy(), "content": f.content}))
            .collect(),
        skills: input
            .skills
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "description": s.description,
                    "filePath": s.file_path.to_string_lossy(),
                    "baseDir": s.base_dir.to_string_lossy(),
                    "source": s.source,
                    "disableModelInvocation": s.disable_model_invocation,
                })
            })
            .collect(),
    }
}

/// Whether `name` may name an extra section: upstream's `^[a-z][a-z0-9_-]*$`, not `preamble`.
fn valid_section_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name != "preamble"
}

/// `input` with the handlers' `edits` applied: snippets and guidelines replace the named
/// tools' own, the further guidelines, appended text, default-body replacement and context
/// files replace the session's, and the extra sections are added (a name upstream refuses is
/// skipped, with a warning).
pub(super) fn apply_edits(
    input: &SystemPromptInput,
    edits: &SystemPromptEdits,
) -> SystemPromptInput {
    let mut out = input.clone();
    if let Some(snippets) = &edits.tool_snippets {
        for t in &mut out.tools {
            t.snippet = snippets.get(&t.definition.name).cloned();
        }
    }
    if let Some(guidelines) = &edits.tool_guidelines {
        for t in &mut out.tools {
            t.guidelines = guidelines
                .get(&t.definition.name)
                .cloned()
                .unwrap_or_default();
        }
    }
    if let Some(g) = &edits.prompt_guidelines {
        out.extra_guidelines = g.clone();
    }
    if let Some(a) = &edits.append_system_prompt {
        out.append_prompt = Some(a.clone()).filter(|a| !a.is_empty());
    }
    if let Some(c) = &edits.custom_prompt {
        out.custom_prompt = Some(c.clone()).filter(|c| !c.is_empty());
    }
    if let Some(files) = &edits.context_files {
        out.context_files = files
            .iter()
            .map(|f| crate::resources::ContextFile {
                path: f.path.clone().into(),
                content: f.content.clone(),
            })
            .collect();
    }
    if let Some(sections) = &edits.sections {
        out.sections = sections
            .iter()
            .filter(|(name, _)| {
                let ok = valid_section_name(name);
                if !ok {
                    tracing::warn!(
                        "before_agent_start: invalid system prompt section name: {name}"
                    );
                }
                ok
            })
            .filter_map(|(name, text)| Some((name.clone(), text.as_str()?.to_string())))
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names_follow_upstream_rule() {
        assert!(valid_section_name("house"));
        assert!(valid_section_name("a1_b-c"));
        assert!(!valid_section_name("preamble"));
        assert!(!valid_section_name("House"));
        assert!(!valid_section_name("1x"));
        assert!(!valid_section_name(""));
    }
}
