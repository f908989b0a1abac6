//! Integration tests of `fakellm`, one test binary (each module is one former test file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/server.rs"]
mod server;
