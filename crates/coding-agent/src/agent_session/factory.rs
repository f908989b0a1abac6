//! Builds sessions (upstream `createAgentSessionFromServices`): one [`SessionFactory`] per
//! process, asked at start-up and by every command that replaces the session later
//! (`new_session`, `switch_session`, `fork`, `clone`). A session's tools, context files and
//! system prompt depend on its cwd, so they are built here, per session.

use super::{AgentSession, CommandResources, EventSink, Loadout, SessionConfig, SessionServices};
use crate::resources::{ResourceOptions, Resources};
use crate::session::SessionManager;
use crate::system_prompt::{build_system_message, PromptTool, SystemPromptInput};
use crate::tools::{self, shell::UserBashOptions, ToolOptions};
use pi_ai::{Model, ThinkingLevel};
use std::path::{Path, PathBuf};

/// What stays the same for every session of a process: services, tool selection, resource
/// options and shell settings.
#[derive(Clone)]
pub struct SessionFactory {
    /// Shared registry views, credentials, adapters and settings.
    pub services: SessionServices,
    /// The agent directory (context files, `bin/`).
    pub agent_dir: PathBuf,
    /// Active tool names, in order (`--tools`, `--no-tools`, default set).
    pub tool_names: Vec<String>,
    /// The tool flags, for extension tools ([`crate::tools::select::ToolSelection::keeps_extension_tool`]).
    pub tool_selection: crate::tools::select::ToolSelection,
    /// Settings-dependent tool options.
    pub tool_options: ToolOptions,
    /// Context files and system-prompt flags.
    pub resource_options: ResourceOptions,
    /// Shell settings of the RPC `bash` command.
    pub bash_options: UserBashOptions,
}

/// What one session is built from.
pub struct SessionRequest {
    /// Working directory (a resumed session runs in its recorded cwd).
    pub cwd: PathBuf,
    /// The store: new, opened, forked or in-memory.
    pub store: SessionManager,
    /// The model; `None` = no model configured.
    pub model: Option<Model>,
    /// The thinking level (clamped by the caller).
    pub thinking_level: ThinkingLevel,
}

impl SessionFactory {
    /// Tools and system prompt for `cwd` (tools.md §0, config.md §6).
    pub fn loadout(&self, cwd: &Path) -> Loadout {
        let names: Vec<&str> = self.tool_names.iter().map(String::as_str).collect();
        let session_env = tools::bash::SessionEnvSlot::default();
        let mut tool_options = self.tool_options.clone();
        tool_options.bash.session_env = Some(session_env.clone());
        let image_policy = crate::images::ImagePolicySlot::default();
        tool_options.images = image_policy.clone();
        let mut tools = tools::create_tools_with(cwd, &names, &tool_options);
        let settings = self.services.settings.lock().clone();
        let resources = Resources::load(cwd, &self.agent_dir, &settings, &self.resource_options);
        let mut prompt_tools: Vec<PromptTool> = tools
            .iter()
            .map(|t| PromptTool::new(t.definition()))
            .collect();
        // Extension tools (pi.registerTool) follow the built-in ones.
        // An active extension tool replaces the built-in tool of the same name.
        if let Some(ext) = &self.services.extensions {
            let keep = |name: &str| self.tool_selection.keeps_extension_tool(name);
            let ext_tools: Vec<_> = ext
                .tools()
                .into_iter()
                .filter(|t| keep(&t.definition().name))
                .collect();
            let ext_prompt: Vec<PromptTool> = ext
                .prompt_tools()
                .into_iter()
                .filter(|t| keep(&t.definition.name))
                .collect();
            let taken: Vec<String> = ext_prompt
                .iter()
                .map(|t| t.definition.name.clone())
                .collect();
            tools.retain(|t| !taken.contains(&t.definition().name));
            prompt_tools.retain(|t| !taken.contains(&t.definition.name));
            tools.extend(ext_tools);
            prompt_tools.extend(ext_prompt);
        }
        let mut input = SystemPromptInput::new(cwd.to_path_buf(), prompt_tools);
        input.context_files = resources.context_files;
        input.custom_prompt = resources.custom_prompt;
        input.append_prompt = resources.append_prompt;
        input.skills = resources.skills.clone();
        let (system_message, system_prompt) = build_system_message(&input);
        Loadout {
            tools,
            system_message,
            system_prompt,
            commands: std::sync::Arc::new(CommandResources {
                skills: resources.skills,
                prompt_templates: resources.prompt_templates,
                skill_commands: settings.enable_skill_commands(),
            }),
            session_env: Some(session_env),
            image_policy: Some(image_policy),
        }
    }

    /// Builds a session; `sink` receives its events.
    pub fn create(&self, request: SessionRequest, sink: EventSink) -> AgentSession {
        let loadout = self.loadout(&request.cwd);
        AgentSession::new(
            SessionConfig {
                bash_options: self.bash_options.clone(),
                model: request.model,
                thinking_level: request.thinking_level,
                loadout,
                store: request.store,
                cwd: request.cwd,
            },
            self.services.clone(),
            sink,
        )
    }
}
