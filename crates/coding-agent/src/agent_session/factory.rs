//! Builds sessions (upstream `createAgentSessionFromServices`): one [`SessionFactory`] per
//! process, asked at start-up and by every command that replaces the session later
//! (`new_session`, `switch_session`, `fork`, `clone`). A session's tools, context files and
//! system prompt depend on its cwd, so they are built here, per session.

use super::{AgentSession, CommandResources, EventSink, Loadout, SessionConfig, SessionServices};
use crate::mcp::config::Exposure;
use crate::resources::{ResourceOptions, Resources};
use crate::session::SessionManager;
use crate::system_prompt::{build_system_message, McpServerLine, PromptTool, SystemPromptInput};
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
        let builtin = tools::create_tools_with(cwd, &names, &tool_options);
        let settings = self.services.settings.lock().clone();
        let resources = match &self.services.extensions {
            Some(ext) => {
                // Skills and prompt templates of `resources_discover` handlers join the
                // packages' ones.
                let found = ext.discovered();
                let mut options = self.resource_options.clone();
                options.package_skills.extend(found.skills);
                options.package_prompts.extend(found.prompts);
                Resources::load(cwd, &self.agent_dir, &settings, &options)
            }
            None => Resources::load(cwd, &self.agent_dir, &settings, &self.resource_options),
        };
        let ext_tools = self
            .services
            .extensions
            .as_ref()
            .map(super::super::extensions::Extensions::tools)
            .unwrap_or_default();
        let mcp = self.services.mcp.clone();
        // codemode: named in the tool selection (`defaultTools` `+codemode`), or a server with
        // codemode tools; tool_search: a server with deferred tools (docs/mcp.md).
        // An extension tool of the same name replaces the built-in one (docs/mcp.md).
        let ext_has = |n: &str| ext_tools.iter().any(|t| t.definition().name == n);
        let codemode_on = !ext_has(crate::codemode::NAME)
            && (names.contains(&crate::codemode::NAME)
                || mcp.as_ref().is_some_and(|m| {
                    m.servers()
                        .iter()
                        .any(|s| s.may_have(crate::mcp::config::Exposure::Codemode))
                }));
        let search_on = !ext_has(crate::codemode::search::NAME)
            && mcp.as_ref().is_some_and(|m| {
                m.servers()
                    .iter()
                    .any(|s| s.may_have(crate::mcp::config::Exposure::Deferred))
            });
        let cm_settings = crate::codemode::CodemodeSettings::from_settings(&settings);
        let only = codemode_on && cm_settings.mode == crate::codemode::Mode::Only;
        let mut codemode_store = None;
        let mut tools: Vec<std::sync::Arc<dyn pi_agent::AgentTool>> = Vec::new();
        let mut prompt_tools: Vec<PromptTool> = Vec::new();
        if !only {
            for t in &builtin {
                let t: std::sync::Arc<dyn pi_agent::AgentTool> = if codemode_on {
                    std::sync::Arc::new(crate::codemode::NotedTool(t.clone()))
                } else {
                    t.clone()
                };
                prompt_tools.push(PromptTool::new(t.definition()));
                tools.push(t);
            }
        }
        if codemode_on {
            let own: Vec<_> = builtin.iter().chain(ext_tools.iter()).cloned().collect();
            let slot = crate::codemode::StoreSlot::default();
            codemode_store = Some(slot.clone());
            let cm: std::sync::Arc<dyn pi_agent::AgentTool> = std::sync::Arc::new(
                crate::codemode::CodemodeTool::new(own, mcp.clone(), cm_settings, slot).with_hooks(
                    self.services
                        .extensions
                        .clone()
                        .map(|e| e as std::sync::Arc<dyn pi_agent::ToolCallHooks>),
                ),
            );
            prompt_tools.push(PromptTool {
                definition: cm.definition(),
                snippet: Some(crate::codemode::SNIPPET.into()),
                guidelines: vec![crate::codemode::GUIDELINE.into()],
            });
            tools.push(cm);
        }
        if let (true, Some(m)) = (search_on, &mcp) {
            let ts: std::sync::Arc<dyn pi_agent::AgentTool> =
                std::sync::Arc::new(crate::codemode::search::ToolSearchTool::new(m.clone()));
            prompt_tools.push(PromptTool {
                definition: ts.definition(),
                snippet: Some(crate::codemode::search::SNIPPET.into()),
                guidelines: Vec::new(),
            });
            tools.push(ts);
        }
        // Extension tools (pi.registerTool) follow the built-in ones.
        // An active extension tool replaces the built-in tool of the same name.
        if let Some(ext) = &self.services.extensions {
            let keep = |name: &str| !only && self.tool_selection.keeps_extension_tool(name);
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
        let mcp_section = mcp.as_ref().map(|m| McpSection {
            manager: m.clone(),
            codemode: codemode_on,
            tool_search: search_on,
        });
        if let Some(s) = &mcp_section {
            input.mcp_servers = s.lines();
        }
        input.context_files = resources.context_files;
        input.custom_prompt = resources.custom_prompt;
        input.append_prompt = resources.append_prompt;
        input.skills = resources.skills.clone();
        input.sandbox = self.tool_options.sandbox.prompt_text(cwd);
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
            codemode_store,
            mcp_section,
            prompt_input: input,
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

/// What the `mcp_servers` section is made of: the servers and which indirect mechanisms the
/// session's tools offer. Rendered when the loadout is built and again when each prompt starts
/// (after the wait for servers with `direct` tools), when a server that connected meanwhile
/// contributes its instructions (docs/mcp.md "Control tool exposure").
#[derive(Clone)]
pub struct McpSection {
    /// The process's MCP servers.
    pub manager: std::sync::Arc<crate::mcp::McpManager>,
    /// `codemode` is among the session's tools.
    pub codemode: bool,
    /// `tool_search` is among the session's tools.
    pub tool_search: bool,
}

impl McpSection {
    /// The section's servers: every enabled server with `codemode` or `deferred` tools whose
    /// mechanism is active, by name, each with the first line of its configured `description`
    /// or else of the instructions it sent when it connected (upstream `mcpServerSummary`).
    pub fn lines(&self) -> Vec<McpServerLine> {
        let mut lines: Vec<(String, McpServerLine)> = self
            .manager
            .servers()
            .iter()
            .filter(|s| s.cfg.enabled)
            .filter_map(|s| {
                let reached_by = match s.cfg.exposure {
                    Exposure::Codemode if self.codemode => "codemode",
                    Exposure::Deferred if self.tool_search => "tool_search",
                    _ if self.codemode && s.may_have(Exposure::Codemode) => "codemode",
                    _ if self.tool_search && s.may_have(Exposure::Deferred) => "tool_search",
                    _ => return None,
                };
                let described = s.cfg.description.as_deref().map(str::trim);
                let summary = match described.filter(|d| !d.is_empty()) {
                    Some(d) => Some(d.to_string()),
                    None => s.instructions().map(|i| i.trim().to_string()),
                }
                .and_then(|t| t.lines().next().map(|l| l.trim().to_string()))
                .filter(|l| !l.is_empty());
                Some((
                    s.cfg.name.clone(),
                    McpServerLine {
                        namespace: crate::mcp::config::namespace(&s.cfg.name),
                        reached_by,
                        summary,
                    },
                ))
            })
            .collect();
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        lines.into_iter().map(|(_, l)| l).collect()
    }

    /// The section's text as the system message holds it, `None` when no server is listed.
    pub fn text(&self) -> Option<String> {
        crate::system_prompt::mcp_servers_section(&self.lines())
    }
}
