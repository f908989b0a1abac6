//! The built-in MCP client (issue 13; upstream 1.6 `docs/mcp.md`), on the official Rust SDK
//! `rmcp`: stdio and streamable-HTTP servers from `<agent dir>/mcp.json` and, for a trusted
//! project, `.pi/mcp.json` ([`config`]); connections in the background ([`manager`]); the
//! tools the model sees ([`tools`], results through [`convert`]); `pi mcp list|add|remove`
//! ([`cli`]).
//!
//! Exposures: `direct` (declared like a built-in tool, named `mcp__<server>__<tool>`),
//! `codemode` (the default: callable from `codemode` scripts, [`crate::codemode`]), `deferred`
//! (loaded through `tool_search`, [`search`]), `hidden`, per-tool `toolExposure`, and the
//! resource tools (declared when a `direct` server offers resources). OAuth sign-in:
//! [`oauth`]; `/mcp` over RPC: agent_session/commands.rs.

pub mod cli;
pub mod client;
pub mod config;
pub mod convert;
pub mod log;
pub mod manager;
pub mod oauth;
pub mod tools;

pub use manager::{McpManager, ServerState, ToolFilter, DIRECT_WAIT};

use std::path::Path;
use std::sync::Arc;

/// Loads the configuration and starts connecting every enabled server in the background
/// (call inside the tokio runtime). `None` when no server is configured and no config error
/// was found. Failures are reported on stderr, once.
/// `filter`: `--tools` / `--exclude-tools` as they apply to MCP tools.
pub fn start(
    agent_dir: &Path,
    cwd: &Path,
    project_trusted: bool,
    filter: ToolFilter,
) -> Option<Arc<McpManager>> {
    let cfg = config::load(agent_dir, cwd, project_trusted);
    if cfg.servers.is_empty() && cfg.errors.is_empty() {
        return None;
    }
    let mut manager = McpManager::new(
        cfg,
        cwd,
        agent_dir,
        log::McpLog::new(agent_dir.join("mcp.log")),
        true,
    );
    if let Some(m) = Arc::get_mut(&mut manager) {
        m.filter = filter;
    }
    manager.start();
    Some(manager)
}
