//! `pi-coding-agent` library: tools, sessions, settings, resources and the run modes.

pub mod tools;
pub mod config;
pub mod resources;
pub mod system_prompt;
pub mod session;
pub mod agent_session;
pub mod cli;
pub mod output;
pub mod print_mode;
pub mod procs;
pub mod rpc;
pub mod json_error;
