//! `pi-agent`: the agent loop (upstream `packages/agent`).

pub mod tool;
pub mod validate;

pub use tool::*;
