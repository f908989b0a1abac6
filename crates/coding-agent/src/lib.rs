//! `pi-coding-agent` library: tools, sessions, settings, resources and the run modes.

// The platform floor, the built-in tools, the config stores and the session store live in
// their own crates; their modules keep their paths here (`crate::procs`, `crate::tools::shell`,
// `crate::config`, `crate::session`).
pub use pi_config as config;
pub use pi_platform::{child_guard, cli, images, json_error, mem, procs, tasks};
pub use pi_session as session;
pub use pi_tools as tools;

pub mod acp;
pub mod agent_session;
pub mod auth;
pub mod auth_cmd;
pub mod codemode;
pub mod export;
pub mod extensions;
pub mod file_args;
pub mod list_models;
pub mod mcp;
pub mod models_cmd;
pub mod output;
pub mod package_cmd;
pub mod packages;
pub mod permissions;
pub mod print_mode;
pub mod protocol;
pub mod resources;
pub mod rpc;
pub mod system_prompt;
pub mod trust;
