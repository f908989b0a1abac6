//! The session mirror pi pushes to the host ([`super::super::ToHost::State`] `state`), which the
//! host's synchronous accessors answer from (`pi.getThinkingLevel`, `pi.getActiveTools`,
//! `pi.getAllTools`, `pi.getCommands`, `ctx.sessionManager.*`, `ctx.model`,
//! `ctx.modelRegistry`, `ctx.getContextUsage`, `ctx.getSystemPrompt`, `ctx.isIdle`,
//! `ctx.hasPendingMessages`; upstream docs/extensions.md).

use crate::protocol::rpc::{ContextUsage, SlashCommand};
use crate::session::SessionEntry;
use pi_ai::Model;
use serde::Serialize;
use serde_json::Value;

/// `state` of [`super::super::ToHost::State`]: `{cwd, sessionFile, sessionId, sessionName,
/// sessionDir, header, leafId, entries, entriesFrom, model, availableModels, thinkingLevel,
/// activeTools, allTools, isIdle, hasPendingMessages, contextUsage, systemPrompt, commands}`,
/// in this order; absent optional values are `null`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMirror {
    /// The session's working directory.
    pub cwd: String,
    /// The session file (`null` in memory).
    pub session_file: Option<String>,
    /// The session id.
    pub session_id: String,
    /// The display name (`null` when unnamed).
    pub session_name: Option<String>,
    /// Where the session file lives (`null` in memory).
    pub session_dir: Option<String>,
    /// The session header line as stored.
    pub header: Value,
    /// The current leaf (`null` for an empty session).
    pub leaf_id: Option<String>,
    /// Entries in file order: those after `entriesFrom`, or all of them.
    pub entries: Vec<SessionEntry>,
    /// The id after which `entries` follow (the host appends them); `null` = all of them.
    pub entries_from: Option<String>,
    /// The model object as `get_state` shows it (`null` without a model).
    pub model: Option<Model>,
    /// The models with credentials, as `get_available_models` lists them.
    pub available_models: Vec<Model>,
    /// The thinking level's name.
    pub thinking_level: String,
    /// The names of the tools offered to the model, in order.
    pub active_tools: Vec<String>,
    /// Every tool a session of this process can offer (`pi.getAllTools()`).
    pub all_tools: Vec<SessionToolInfo>,
    /// Neither streaming nor compacting.
    pub is_idle: bool,
    /// Whether messages are queued.
    pub has_pending_messages: bool,
    /// As `get_session_stats` reports it (`null` without a context window).
    pub context_usage: Option<ContextUsage>,
    /// The system prompt text sent to the model.
    pub system_prompt: String,
    /// The `get_commands` list (extension commands, built-in ones, templates, skills).
    pub commands: Vec<SlashCommand>,
}

/// One tool of `pi.getAllTools()` (upstream `SessionToolInfo`): `{name, description, parameters,
/// exposure, sourceInfo}`; `exposure` is always `direct`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionToolInfo {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
    /// `direct` (offered to the model as itself).
    pub exposure: &'static str,
    /// Where it comes from.
    pub source_info: SourceInfo,
}

impl SessionToolInfo {
    /// A tool with `exposure: "direct"`.
    pub fn direct(
        name: String,
        description: String,
        parameters: Value,
        source_info: SourceInfo,
    ) -> Self {
        SessionToolInfo {
            name,
            description,
            parameters,
            exposure: "direct",
            source_info,
        }
    }
}

/// Upstream's `SourceInfo` of a tool: `{path, source, scope, origin}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceInfo {
    /// `builtin:<name>` for a built-in tool, else the extension's file.
    pub path: String,
    /// `builtin` or `local`.
    pub source: &'static str,
    /// `temporary` (built-in) or `user` (extension).
    pub scope: &'static str,
    /// `top-level`.
    pub origin: &'static str,
}

impl SourceInfo {
    /// A built-in tool's: `{path: "builtin:<name>", source: "builtin", scope: "temporary",
    /// origin: "top-level"}`.
    pub fn builtin(name: &str) -> Self {
        SourceInfo {
            path: format!("builtin:{name}"),
            source: "builtin",
            scope: "temporary",
            origin: "top-level",
        }
    }

    /// An extension tool's: `{path, source: "local", scope: "user", origin: "top-level"}`.
    pub fn extension(path: &str) -> Self {
        SourceInfo {
            path: path.to_string(),
            source: "local",
            scope: "user",
            origin: "top-level",
        }
    }
}
