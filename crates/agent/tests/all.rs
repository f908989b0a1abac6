//! Tests of the agent loop on its own: `run_agent_loop` driven by an in-process scripted
//! `Provider` (no network) and fake tools (spec agent-loop.md §2.2, §3, §4, §5).
//!
//! No test asserts on wall-clock durations; every run is bounded by a generous liveness
//! timeout only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/support.rs"]
mod support;

#[path = "all/abort.rs"]
mod abort;
#[path = "all/events.rs"]
mod events;
#[path = "all/queues.rs"]
mod queues;
#[path = "all/tools.rs"]
mod tools;
