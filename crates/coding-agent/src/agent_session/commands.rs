//! Slash-command input of a session (spec config.md §8.5, §9, §10): expansion of
//! `/skill:name` and `/template` text, and the built-in `/mcp` and `/llama` commands.

use super::AgentSession;
use crate::resources::commands::{self, Builtin};
use crate::rpc::protocol::RpcEvent;
use std::path::Path;

impl AgentSession {
    /// `text` with `/skill:name args` and `/template args` expanded. A skill file that can no
    /// longer be read is reported as `extension_error {extensionPath: <file>, event:
    /// "skill_expansion", error}` and the text goes on unchanged.
    pub fn expand_input(&self, text: &str) -> String {
        let res = self.command_resources();
        let (out, err) = commands::expand_input(text, &res.skills, &res.prompt_templates);
        if let Some((file, error)) = err {
            self.emit(RpcEvent::ExtensionError {
                extension_path: file,
                event: "skill_expansion".into(),
                error,
            });
        }
        out
    }

    /// Runs a built-in command if `text` is one (`/mcp …`, `/llama …`): emits its `notify`
    /// request and returns true (the prompt is then `handled`); false for any other text.
    pub fn run_builtin_command(&self, text: &str, agent_dir: &Path) -> bool {
        let Some((which, args)) = commands::builtin(text) else {
            return false;
        };
        let (message, kind) = match which {
            Builtin::Mcp => commands::run_mcp(args, agent_dir),
            Builtin::Llama => commands::run_llama(&self.available_models(), agent_dir),
        };
        self.emit(RpcEvent::ExtensionUiRequest(
            crate::rpc::protocol::ExtensionUiRequest {
                id: uuid::Uuid::new_v4().to_string(),
                method: "notify".into(),
                message: Some(message),
                notify_type: Some(kind.into()),
                ..Default::default()
            },
        ));
        true
    }
}

impl AgentSession {
    /// `export_html` (rpc-protocol.md §4.9, config.md §11): writes the session page with the
    /// system prompt and tool definitions; `Err` is the failure text.
    pub fn export_html(&self, output: Option<&str>) -> Result<String, String> {
        let (system_prompt, tools) = {
            let l = self.inner.loadout.lock();
            let tools: Vec<serde_json::Value> = l
                .tools
                .iter()
                .map(|t| {
                    let d = t.definition();
                    serde_json::json!({"name": d.name, "description": d.description, "parameters": d.parameters})
                })
                .collect();
            (l.system_prompt.clone(), tools)
        };
        let store = self.store_snapshot();
        crate::export::export_session(&store, Some(&system_prompt), Some(tools), output)
            .map_err(|e| e.to_string())
    }
}
