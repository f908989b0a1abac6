//! `pi-ai`: models, messages, usage/cost and one streaming adapter per wire API.
//!
//! Mirrors upstream `packages/ai`. Types are named as on the wire (spec
//! `messages-and-models.md`); adapters live in [`providers`], the built-in catalogue in
//! [`models`], environment API keys in [`env_keys`], the provider-neutral context
//! normalisation in [`transform`], and typed provider failures with the retry / overflow
//! classification in [`error`].

pub mod env_keys;
pub mod error;
pub mod extra;
pub mod json;
pub mod models;
pub mod providers;
pub mod stream;
pub mod transform;
pub mod types;

pub use env_keys::{env_api_key, env_has_credentials};
pub use error::{
    classify, is_context_overflow, is_overflow_error_text, is_quota_error_text, is_retryable,
    is_retryable_error_text, parse_retry_after, ErrorClass, ProviderError,
};
pub use providers::provider_for_api;
pub use stream::*;
pub use types::*;
