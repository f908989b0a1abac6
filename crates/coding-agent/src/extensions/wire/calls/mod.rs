//! The API calls extensions make ([`super::FromHost::Call`]) as pi reads and answers them:
//! their params ([`params`]), the answers ([`replies`]), and the session shapes pi sends the
//! host along with them: the state mirror ([`mirror`]) and the boundary events ([`boundary`]).

mod boundary;
mod mirror;
mod params;
mod replies;
#[cfg(test)]
mod tests;

pub use boundary::*;
pub use mirror::*;
pub use params::*;
pub use replies::*;

use super::{checked, lenient};
use serde::Deserialize;

/// `context` of a `complete` call: `{systemPrompt?, messages, tools?}` in pi's shapes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteContext {
    /// The system prompt (non-string = none).
    #[serde(default, deserialize_with = "lenient")]
    pub system_prompt: Option<String>,
    /// The messages: `None` = absent, `Some(Err)` = unreadable (the reason).
    #[serde(default, deserialize_with = "checked")]
    pub messages: Option<Result<Vec<pi_ai::Message>, String>>,
    /// The tools: `None` = absent, `Some(Ok(None))` = `null`, `Some(Err)` = unreadable.
    #[serde(default, deserialize_with = "checked")]
    pub tools: Option<Result<Option<Vec<pi_ai::ToolDefinition>>, String>>,
}

/// `options` of a `complete` call (upstream `SimpleStreamOptions`, the fields pi reads).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteOptions {
    /// A thinking level.
    #[serde(default, deserialize_with = "lenient")]
    pub reasoning: Option<String>,
    /// Output cap.
    #[serde(default, deserialize_with = "lenient")]
    pub max_tokens: Option<u64>,
    /// Session id (prompt caching).
    #[serde(default, deserialize_with = "lenient")]
    pub session_id: Option<String>,
    /// `none` disables prompt caching.
    #[serde(default, deserialize_with = "lenient")]
    pub cache_retention: Option<String>,
}
