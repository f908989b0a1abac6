//! `pi-ai`: models, messages, usage/cost and one streaming adapter per wire API.
//!
//! Mirrors upstream `packages/ai`. Types are named as on the wire (spec
//! `messages-and-models.md`); adapters live in [`providers`], the built-in catalogue in
//! [`models`], environment API keys in [`env_keys`], and the provider-neutral context
//! normalisation in [`transform`].

pub mod env_keys;
pub mod models;
pub mod providers;
pub mod stream;
pub mod transform;
pub mod types;

pub use env_keys::env_api_key;
pub use providers::provider_for_api;
pub use stream::*;
pub use types::*;
