//! Provider adapters, one per wire API, and the lookup from an `api` value to its adapter.

pub mod anthropic_messages;
mod common;
pub mod openai_completions;

pub use anthropic_messages::AnthropicMessages;
pub use common::parse_streaming_json;
pub use openai_completions::OpenAiCompletions;

use crate::stream::Provider;
use std::sync::Arc;

/// The adapter for a model's `api` value (`"openai-completions"` or `"anthropic-messages"`);
/// `None` for APIs this port does not speak.
pub fn provider_for_api(api: &str) -> Option<Arc<dyn Provider>> {
    match api {
        openai_completions::API => Some(Arc::new(OpenAiCompletions)),
        anthropic_messages::API => Some(Arc::new(AnthropicMessages)),
        _ => None,
    }
}
