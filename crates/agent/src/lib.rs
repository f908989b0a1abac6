//! `pi-agent`: the agent loop (upstream `packages/agent`).
//!
//! [`run_agent_loop`] runs one agent run against a [`RunHooks`] owner; tools implement
//! [`AgentTool`]; events are [`AgentEvent`]s.

pub mod agent_loop;
pub mod event;
pub mod nested;
pub mod tool;
pub mod validate;

pub use agent_loop::*;
pub use event::*;
pub use nested::{NestedCall, NestedCalls};
pub use tool::*;
