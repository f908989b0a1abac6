//! Slash-command input of a session (spec config.md §8.5, §9, §10): expansion of
//! `/skill:name` and `/template` text, and the built-in `/mcp` and `/llama` commands.

use super::AgentSession;
use crate::protocol::rpc::RpcEvent;
use crate::resources::commands::{self, Builtin};
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

    /// The built-in command `text` invokes (`/mcp …`, `/llama …`), as a future that emits its
    /// `notify` requests; `None` for any other text (the prompt then goes on). The RPC layer
    /// answers `handled` once the future has finished (upstream: extension commands).
    pub fn builtin_command(
        &self,
        text: &str,
        agent_dir: &Path,
    ) -> Option<futures::future::BoxFuture<'static, ()>> {
        let (which, args) = commands::builtin(text)?;
        let this = self.clone();
        let args = args.to_string();
        let agent_dir = agent_dir.to_path_buf();
        Some(Box::pin(async move {
            match which {
                Builtin::Mcp => this.run_mcp_command(&args, &agent_dir).await,
                Builtin::Llama => {
                    let (message, kind) = commands::run_llama(&this.available_models(), &agent_dir);
                    this.notify(message, kind);
                }
            }
        }))
    }

    /// Lets the MCP servers' background connects begin
    /// ([`crate::mcp::McpManager::begin_connecting`]); a no-op without MCP.
    pub fn begin_mcp_connecting(&self) {
        if let Some(mcp) = &self.inner.services.mcp {
            mcp.begin_connecting();
        }
    }

    /// Upstream's startup report over RPC: once every server's first connect attempt has
    /// settled, one `notify` (`warning`) listing the configuration errors and the servers that
    /// failed or need a sign-in, if any (docs/mcp.md: problems are reported once after
    /// startup).
    pub async fn report_mcp_startup(&self) {
        let Some(mcp) = self.inner.services.mcp.clone() else {
            return;
        };
        mcp.wait_for_all(std::time::Duration::from_secs(600)).await;
        if let Some(text) = mcp.attention_text() {
            self.notify(text, "warning");
        }
    }

    /// Emits one extension-UI `notify` request (`kind`: `info`, `warning`, `error`).
    fn notify(&self, message: String, kind: &str) {
        self.emit(RpcEvent::ExtensionUiRequest(
            crate::protocol::rpc::ExtensionUiRequest {
                id: uuid::Uuid::new_v4().to_string(),
                method: "notify".into(),
                message: Some(message),
                notify_type: Some(kind.into()),
                ..Default::default()
            },
        ));
    }

    /// `/mcp [login|logout|reconnect [server]]` outside the TUI (docs/mcp.md "Inspect or change
    /// a server"; upstream's plain status and subcommands): the status of every server once
    /// their first connect attempts have settled, or the subcommand's outcome, as `notify`.
    async fn run_mcp_command(&self, args: &str, agent_dir: &Path) {
        let words: Vec<&str> = args.split_whitespace().collect();
        let Some(mcp) = self.inner.services.mcp.clone() else {
            let (message, kind) = commands::run_mcp(args, agent_dir);
            return self.notify(message, kind);
        };
        if words.len() > 2
            || words
                .first()
                .is_some_and(|w| !matches!(*w, "login" | "logout" | "reconnect"))
        {
            return self.notify(commands::MCP_USAGE.into(), "warning");
        }
        // As upstream, wait for the first connect attempts (each bounded by its `timeout`).
        mcp.wait_for_all(std::time::Duration::from_secs(600)).await;
        let Some(action) = words.first() else {
            return self.notify(mcp.status_text(), "info");
        };
        let servers = mcp.servers();
        let oauth_none = "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.";
        let reconnect_none = "No enabled MCP server to reconnect.";
        let eligible = |s: &crate::mcp::manager::ServerSlot| match *action {
            "reconnect" => s.cfg.enabled,
            _ => s.cfg.enabled && s.oauth_url().is_some(),
        };
        let none = if *action == "reconnect" {
            reconnect_none
        } else {
            oauth_none
        };
        let slot = match words.get(1) {
            Some(name) => match mcp.find(name) {
                None => return self.notify(format!("No MCP server named \"{name}\"."), "error"),
                Some(s) if !eligible(&s) => return self.notify(none.into(), "error"),
                Some(s) => s,
            },
            None => {
                let candidates: Vec<_> = servers.iter().filter(|s| eligible(s)).cloned().collect();
                let preferred: Vec<_> = candidates
                    .iter()
                    .filter(|s| match *action {
                        "reconnect" => matches!(
                            s.state(),
                            crate::mcp::ServerState::Failed(_)
                                | crate::mcp::ServerState::Disconnected
                        ),
                        _ => s.state() == crate::mcp::ServerState::NeedsAuth,
                    })
                    .cloned()
                    .collect();
                match (candidates.len(), preferred.len()) {
                    (0, _) => return self.notify(none.into(), "info"),
                    (1, _) => candidates[0].clone(),
                    (_, 1) => preferred[0].clone(),
                    _ => {
                        // Upstream asks with a select dialog; here the name must be given.
                        let names: Vec<&str> =
                            candidates.iter().map(|s| s.cfg.name.as_str()).collect();
                        return self.notify(
                            format!(
                                "Name the MCP server: /mcp {action} <server> (one of {}).",
                                names.join(", ")
                            ),
                            "warning",
                        );
                    }
                }
            }
        };
        let name = slot.cfg.name.clone();
        match *action {
            "reconnect" => match slot.reconnect().await {
                Ok(()) => self.notify(
                    format!(
                        "Reconnected to MCP server \"{name}\" ({}).",
                        slot.describe_state()
                    ),
                    "info",
                ),
                Err(e) => self.notify(e.to_string(), "error"),
            },
            "logout" => match slot.sign_out().await {
                Ok(true) => self.notify(format!("Signed out of MCP server \"{name}\"."), "info"),
                Ok(false) => self.notify(
                    format!("No stored credentials for MCP server \"{name}\"."),
                    "info",
                ),
                Err(e) => self.notify(e.to_string(), "error"),
            },
            _ => {
                let Some(url) = slot.oauth_url().map(str::to_string) else {
                    return self.notify(oauth_none.into(), "error");
                };
                let this = self.clone();
                let shown = name.clone();
                let result = crate::mcp::oauth::sign_in(
                    slot.auth_store(),
                    crate::mcp::oauth::SignIn {
                        name: &name,
                        url: &url,
                        settings: crate::mcp::oauth::OAuthSettings::from_config(&slot.cfg),
                        challenge: slot.challenge(),
                        show_url: Box::new(move |u| {
                            this.notify(
                                format!("Sign in to MCP server \"{shown}\" in your browser:\n{u}"),
                                "info",
                            )
                        }),
                        wait: crate::mcp::oauth::SIGN_IN_WAIT,
                    },
                )
                .await;
                if let Err(e) = result {
                    return self.notify(format!("Sign-in failed: {e}"), "error");
                }
                match slot.reconnect().await {
                    Ok(()) => self.notify(
                        format!(
                            "Signed in to MCP server \"{name}\" ({} tools).",
                            slot.tools().len()
                        ),
                        "info",
                    ),
                    Err(e) => self.notify(format!("Signed in, but {e}"), "error"),
                }
            }
        }
    }
}

impl AgentSession {
    /// `export_html` (rpc-protocol.md §4.9, config.md §11): writes the session page with the
    /// system prompt and tool definitions; `Err` is the failure text.
    pub fn export_html(&self, output: Option<&str>) -> Result<String, String> {
        let (system_prompt, tools) = {
            let setup = self.inner.setup.lock();
            let l = &setup.loadout;
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
