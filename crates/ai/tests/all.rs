//! Integration tests of `ai`, one test binary (each module is one former test file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[path = "all/anthropic_messages.rs"]
mod anthropic_messages;

#[path = "all/error_classification.rs"]
mod error_classification;

#[path = "all/golden_requests.rs"]
mod golden_requests;

#[path = "all/openai_completions.rs"]
mod openai_completions;

#[path = "all/provider_errors.rs"]
mod provider_errors;

#[path = "all/unknown_fields.rs"]
mod unknown_fields;
