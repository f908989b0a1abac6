//! `pi-coding-agent` library: tools, sessions, settings, resources and the run modes.

pub mod agent_session;
pub mod auth;
pub mod auth_cmd;
pub mod child_guard;
pub mod cli;
pub mod codemode;
pub mod config;
pub mod export;
pub mod extensions;
pub mod file_args;
pub mod images;
pub mod json_error;
pub mod list_models;
pub mod mcp;
pub mod mem;
pub mod models_cmd;
pub mod output;
pub mod package_cmd;
pub mod print_mode;
pub mod procs;
pub mod resources;
pub mod rpc;
pub mod session;
pub mod system_prompt;
pub mod tools;
pub mod trust;
