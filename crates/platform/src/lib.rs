//! `pi-platform`: the bottom floor of the pi coding agent (docs/architecture.md), code that
//! knows nothing of sessions, settings or protocols and imports no other crate of the agent
//! but `pi-ai`'s message types:
//!
//! * [`procs`]: the registry of live child process groups and how they are stopped;
//! * [`child_guard`]: children that die with the agent even when it is `SIGKILL`ed;
//! * [`json_error`]: the `SyntaxError` texts Node's `JSON.parse` gives for invalid input;
//! * [`images`]: image detection, conversion and resizing for models;
//! * [`mem`]: handing freed heap memory back to the system between runs;
//! * [`cli`]: the `pi` command-line grammar (flags, values, diagnostics);
//! * [`tasks`]: the texts of task panics, and why nothing blocks on async work.
//!
//! `pi-coding-agent` re-exports each module under its old path (`pi_coding_agent::procs`, …).

pub mod child_guard;
pub mod cli;
pub mod images;
pub mod json_error;
pub mod mem;
pub mod procs;
pub mod tasks;
