//! API calls from extensions that act on the session (`pi.sendUserMessage`,
//! `pi.setSessionName`, `ctx.abort`; upstream docs/extensions.md "ExtensionAPI").

use crate::agent_session::runtime::AgentSessionRuntime;
use crate::agent_session::PromptOutcome;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// The session the calls act on, bound once the runtime exists (extensions load first).
pub type RuntimeSlot = Arc<OnceLock<AgentSessionRuntime>>;

/// The text of a `sendUserMessage` content: a string, or the text blocks of a block array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Carries out one fire-and-forget API call (`method` as upstream spells it, `params` as the
/// host sends them). Calls before the session exists, and unknown methods, are ignored.
/// `sendUserMessage` starts a run when idle; while streaming it is queued as
/// `options.deliverAs` says (`steer`, else `followUp`).
pub fn handle(slot: &RuntimeSlot, method: &str, params: &Value) {
    let Some(runtime) = slot.get() else {
        tracing::warn!("extension call {method} before the session started; ignored");
        return;
    };
    let session = runtime.session();
    match method {
        "setSessionName" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            if let Err(e) = session.set_session_name(name) {
                tracing::warn!("extension setSessionName: {e}");
            }
        }
        "sendUserMessage" => {
            let text = text_of(params.get("content").unwrap_or(&Value::Null));
            let deliver = params
                .pointer("/options/deliverAs")
                .and_then(Value::as_str)
                .unwrap_or("followUp");
            match session.prompt(text, vec![], Some(deliver)) {
                Ok(PromptOutcome::Started(run)) => {
                    tokio::spawn(run);
                }
                Ok(PromptOutcome::Queued) => {}
                Err(e) => tracing::warn!("extension sendUserMessage: {e}"),
            }
        }
        "appendEntry" => {
            let custom_type = params
                .get("customType")
                .and_then(Value::as_str)
                .unwrap_or("");
            let data = params.get("data").cloned().filter(|d| !d.is_null());
            if let Err(e) = session.append_custom_entry(custom_type, data) {
                tracing::warn!("extension appendEntry: {e}");
            }
        }
        "abort" => {
            tokio::spawn(async move { session.abort().await });
        }
        other => tracing::debug!("extension call {other} is not supported yet"),
    }
}
