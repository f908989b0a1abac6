//! The session runtime (upstream `AgentSessionRuntime`): owns the current [`AgentSession`]
//! and the [`SessionFactory`], and swaps sessions. The RPC loop owns one runtime and asks it
//! for the current session per command, so commands that replace the session
//! (`new_session`, `switch_session`, `fork`, `clone`) only need [`AgentSessionRuntime::replace`].

use super::factory::{SessionFactory, SessionRequest};
use super::{AgentSession, EventSink};
use crate::session::SessionManager;
use parking_lot::RwLock;
use pi_ai::ThinkingLevel;
use std::path::Path;
use std::sync::Arc;

/// `clone`/`fork` of a session whose file was never written (1.6 notes §14, golden
/// clone_session).
pub const NOT_SAVED_YET: &str =
    "This session has not been saved yet. Send a message before cloning or forking it.";

/// Owner of the current session. Cheap to clone.
#[derive(Clone)]
pub struct AgentSessionRuntime {
    factory: Arc<SessionFactory>,
    current: Arc<RwLock<AgentSession>>,
    sink: EventSink,
}

impl AgentSessionRuntime {
    /// Builds the first session from `request`; every session's events go to `sink`.
    pub fn new(factory: SessionFactory, request: SessionRequest, sink: EventSink) -> Self {
        let session = factory.create(request, sink.clone());
        AgentSessionRuntime {
            factory: Arc::new(factory),
            current: Arc::new(RwLock::new(session)),
            sink,
        }
    }

    /// The current session.
    pub fn session(&self) -> AgentSession {
        self.current.read().clone()
    }

    /// The factory (for commands that open or fork stores).
    pub fn factory(&self) -> &SessionFactory {
        &self.factory
    }

    /// Tears down the current session (aborts its run and waits for it to settle) and makes a
    /// new one from `request` current. Returns the new session.
    pub async fn replace(&self, request: SessionRequest) -> AgentSession {
        let old = self.session();
        old.abort_bash();
        old.abort().await;
        let next = self.factory.create(request, self.sink.clone());
        *self.current.write() = next.clone();
        next
    }

    /// `clone` (rpc-protocol.md §4.9): duplicates the active branch up to the leaf into a new
    /// session file (header `parentSession` = the old file) and switches to it.
    pub async fn clone_session(&self) -> Result<(), String> {
        let session = self.session();
        let mut store = session.store_snapshot();
        if store.is_persisted() && !store.is_flushed() {
            return Err(NOT_SAVED_YET.into());
        }
        let Some(leaf) = store.leaf_id().map(str::to_string) else {
            return Err("Cannot clone session: no current entry selected".into());
        };
        store
            .create_branched_session(&leaf)
            .map_err(|e| e.to_string())?;
        let request = SessionRequest {
            cwd: store.cwd().to_path_buf(),
            store,
            model: session.model(),
            thinking_level: session.thinking_level(),
        };
        self.replace(request).await;
        Ok(())
    }

    /// `switch_session {sessionPath}` (rpc-protocol.md §4.9): opens the file (a missing file
    /// starts a new session at exactly that path), restores its model when that model is
    /// available and its thinking level (clamped), and switches to it in its recorded cwd.
    pub async fn switch_session(&self, path: &str) -> Result<(), String> {
        let current = self.session();
        let mut store = SessionManager::open(Path::new(path)).map_err(|e| e.to_string())?;
        if !store.cwd().is_dir() {
            return Err(format!(
                "Session working directory does not exist: {}",
                store.cwd().display()
            ));
        }
        let context = store.build_session_context();
        let model = context
            .model
            .as_ref()
            .and_then(|r| {
                current
                    .available_models()
                    .into_iter()
                    .find(|m| m.provider == r.provider && m.id == r.model_id)
            })
            .or_else(|| current.model());
        let level = if store.leaf_id().is_some() {
            ThinkingLevel::parse(&context.thinking_level).unwrap_or(ThinkingLevel::Off)
        } else {
            current.thinking_level()
        };
        let level = crate::config::clamp_thinking_level(model.as_ref(), level);
        if store.entries().is_empty() {
            // A fresh session starts with its model and level, as at start-up (1.6 notes §14).
            if let Some(m) = &model {
                let _ = store.append_model_change(&m.provider, &m.id);
            }
            let _ = store.append_thinking_level_change(level.as_str());
        }
        let request = SessionRequest {
            cwd: store.cwd().to_path_buf(),
            store,
            model,
            thinking_level: level,
        };
        self.replace(request).await;
        Ok(())
    }

    /// Waits until the current session has no run in flight (EOF handling).
    pub async fn wait_settled(&self) {
        self.session().wait_settled().await;
    }
}
