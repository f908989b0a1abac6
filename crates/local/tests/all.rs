//! Integration tests of `local`, one test binary (each module is one former test file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/smoke.rs"]
mod smoke;

#[path = "all/tool_calls.rs"]
mod tool_calls;
