//! The extension host's API calls that act on the session (upstream docs/extensions.md
//! "ExtensionAPI", "ExtensionContext", "ExtensionCommandContext": `pi.sendUserMessage`,
//! `pi.setModel`, `pi.appendEntry`, `ctx.newSession()`, …), and the session mirror the host
//! reads its synchronous accessors from.
//!
//! The session runtime sits on a higher floor (issue 23), so this floor holds only the
//! [`HostApi`] trait; the runtime implements it (`agent_session::host_calls`) and binds
//! itself to the [`RuntimeSlot`] once it exists (extensions load first).

use crate::extensions::host::CallReply;
use pi_ai::Model;
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// What the extensions need from the session runtime.
pub trait HostApi: Send + Sync {
    /// Carries out one API call (`method` as upstream spells it, `params` as the host sends
    /// them): `{value}` or `{error}` for calls that answer (`callApi` in host.mjs), the
    /// mirror ([`HostApi::state`]) pushed just before the answer. Unknown methods are
    /// answered `{error}`.
    fn handle(&self, method: &str, params: &Value) -> CallReply;

    /// The session mirror for the host (`ToHost::State`, wire/mod.rs): `entries` are those
    /// after `entries_from` when given (the host appends them), else all of them.
    ///
    /// Shape: `{cwd, sessionFile, sessionId, sessionName, sessionDir, header, leafId,
    /// entries, entriesFrom, model, availableModels, thinkingLevel, activeTools, allTools,
    /// isIdle, hasPendingMessages, contextUsage, systemPrompt, commands}`.
    fn state(&self, entries_from: Option<&str>) -> super::wire::SessionMirror;

    /// The current session's id.
    fn session_id(&self) -> String;

    /// Whether the session's active tools are the default tool set.
    fn on_default_tools(&self) -> bool;

    /// Rebuilds the session's tools and system prompt after the extensions' tools changed:
    /// the default tool set when `default`, else the active tools plus `added`.
    fn rebuild_tools(&self, default: bool, added: Vec<String>);

    /// The session's model, if any.
    fn model(&self) -> Option<Model>;

    /// Gives the session a new definition of its model (a provider registration changed it).
    fn refresh_model(&self, fresh: Model);

    /// The extensions of the current session.
    fn extensions(&self) -> Option<Arc<super::Extensions>>;
}

/// The session the calls act on, bound once the runtime exists (extensions load first).
pub type RuntimeSlot = Arc<OnceLock<Arc<dyn HostApi>>>;

/// Carries out one API call on the bound session ([`HostApi::handle`]). Calls before the
/// session exists are answered `{error}` (and ignored when nothing waits for them).
pub fn handle(slot: &RuntimeSlot, method: &str, params: &Value) -> CallReply {
    let Some(runtime) = slot.get() else {
        tracing::warn!("extension call {method} before the session started; ignored");
        return CallReply::Now(super::wire::CallResult::Error(super::wire::CallError {
            error: format!("{method}: the session has not started yet"),
        }));
    };
    runtime.handle(method, params)
}
