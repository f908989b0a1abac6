//! `pi-ai`: models, messages, usage/cost and one streaming adapter per wire API.
//!
//! Mirrors upstream `packages/ai`. Types are named as on the wire (spec
//! `messages-and-models.md`); adapters live in [`providers`].

pub mod providers;
pub mod stream;
pub mod types;

pub use stream::*;
pub use types::*;
