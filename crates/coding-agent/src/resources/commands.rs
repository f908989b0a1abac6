//! Slash commands over RPC (spec config.md §10, rpc-protocol.md §4.10; upstream 1.6
//! `modes/rpc/rpc-mode.ts` `get_commands`, golden commands_templates_skills, get_state_fresh):
//! the `get_commands` listing, the built-in `/mcp` and `/llama` commands, and the expansion of
//! `/skill:name args` and `/template args` in `prompt`, `steer` and `follow_up` input.
//!
//! Listing order: built-in extension commands (`llama`, `mcp`), prompt templates, then skills
//! as `skill:<name>` (left out when `enableSkillCommands` is false — upstream uses that
//! setting for its command discovery; typed `/skill:name` input is expanded either way).

use super::{skills, templates, PromptTemplate, Skill, SourceInfo};
use crate::protocol::rpc::SlashCommand;
use pi_ai::Model;
use std::path::Path;

/// The built-in commands upstream 1.6 lists in every project: `(name, path, description)`.
pub const BUILTIN_COMMANDS: [(&str, &str, &str); 2] = [
    (
        "llama",
        "builtin:llama.cpp",
        "Show the local GGUF models this agent runs in-process",
    ),
    (
        "mcp",
        "builtin:mcp",
        "MCP servers: status, sign in and out, reconnect",
    ),
];

fn builtin_info(path: &str) -> SourceInfo {
    SourceInfo {
        path: path.into(),
        source: "builtin".into(),
        scope: "temporary".into(),
        origin: "top-level".into(),
        base_dir: None,
        changelog_path: None,
    }
}

fn info_value(info: &SourceInfo) -> serde_json::Value {
    serde_json::to_value(info).unwrap_or_default()
}

/// The `get_commands` entries (see the module docs for the order).
///
/// `shadowed`: the extension commands' names; a built-in command of one of those names is left
/// out (upstream does not load a built-in extension whose command another extension registers).
pub fn list(
    templates: &[PromptTemplate],
    skills: &[Skill],
    skill_commands: bool,
    shadowed: &[String],
) -> Vec<SlashCommand> {
    let mut out: Vec<SlashCommand> = BUILTIN_COMMANDS
        .iter()
        .filter(|(name, _, _)| !shadowed.iter().any(|s| s == name))
        .map(|(name, path, description)| SlashCommand {
            name: (*name).into(),
            description: Some((*description).into()),
            source: "extension".into(),
            source_info: info_value(&builtin_info(path)),
        })
        .collect();
    out.extend(templates.iter().map(|t| SlashCommand {
        name: t.name.clone(),
        description: Some(t.description.clone()),
        source: "prompt".into(),
        source_info: info_value(&t.source_info),
    }));
    if skill_commands {
        out.extend(skills.iter().map(|s| SlashCommand {
            name: format!("skill:{}", s.name),
            description: Some(s.description.clone()),
            source: "skill".into(),
            source_info: info_value(&s.source_info),
        }));
    }
    out
}

/// A built-in command found at the start of some input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `/mcp [args]`.
    Mcp,
    /// `/llama [args]`.
    Llama,
}

/// The built-in command `text` invokes, with its argument text: the name runs from the `/` to
/// the first space.
pub fn builtin(text: &str) -> Option<(Builtin, &str)> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.find(' ') {
        Some(i) => (&rest[..i], rest[i + 1..].trim()),
        None => (rest, ""),
    };
    match name {
        "mcp" => Some((Builtin::Mcp, args)),
        "llama" => Some((Builtin::Llama, args)),
        _ => None,
    }
}

/// Error of `steer`/`follow_up` with a built-in command (upstream's wording of the fact).
pub fn cannot_queue(text: &str) -> String {
    let rest = text.strip_prefix('/').unwrap_or(text);
    let name = rest.split(' ').next().unwrap_or(rest);
    format!("Extension command \"/{name}\" cannot be queued. Use prompt() or execute the command when not streaming.")
}

/// One `notify` to send: `(message, notifyType)`.
pub type Notice = (String, &'static str);

/// The usage line of `/mcp` (upstream's subcommands).
pub const MCP_USAGE: &str =
    "Usage: /mcp, /mcp login [server], /mcp logout [server], /mcp reconnect [server]";

/// What `/mcp` answers when no server is configured (or `--no-mcp`): where servers would be
/// configured; `/mcp <anything>` gets the usage line.
pub fn run_mcp(args: &str, agent_dir: &Path) -> Notice {
    if args.is_empty() {
        (
            format!(
                "No MCP servers configured. Add them to {} or .pi/mcp.json.",
                agent_dir.join("mcp.json").display()
            ),
            "info",
        )
    } else {
        (MCP_USAGE.into(), "warning")
    }
}

/// What `/llama` answers: the local GGUF models (api `local-gguf`) among `models`, one per
/// line as `provider/id (file)`, or how to get one when there are none.
pub fn run_llama(models: &[Model], agent_dir: &Path) -> Notice {
    let local: Vec<String> = models
        .iter()
        .filter(|m| m.api == crate::config::models::LOCAL_API)
        .map(|m| {
            if m.base_url.is_empty() {
                format!("{}/{}", m.provider, m.id)
            } else {
                format!("{}/{} ({})", m.provider, m.id, m.base_url)
            }
        })
        .collect();
    if local.is_empty() {
        (
            format!(
                "No local GGUF models. Put a .gguf file into {} or run `pi models pull <name>`.",
                agent_dir.join("models").display()
            ),
            "info",
        )
    } else {
        (
            format!(
                "Local GGUF models run in-process on the CPU:\n{}",
                local.join("\n")
            ),
            "info",
        )
    }
}

/// Expands `/skill:name args`, then `/template args` (config.md §8.5, §9). A skill file that
/// can no longer be read leaves the text unchanged and is returned as the second value
/// (`(file, error text)`, reported as `extension_error` with `event: "skill_expansion"`).
pub fn expand_input(
    text: &str,
    skill_list: &[Skill],
    template_list: &[PromptTemplate],
) -> (String, Option<(String, String)>) {
    let (text, err) = match skills::expand(text, skill_list) {
        Ok(Some(t)) => (t, None),
        Ok(None) => (text.to_string(), None),
        Err((file, e)) => (text.to_string(), Some((file, e.to_string()))),
    };
    (templates::expand(&text, template_list), err)
}
