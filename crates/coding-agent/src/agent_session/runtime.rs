//! The session runtime (upstream `AgentSessionRuntime`): owns the current [`AgentSession`]
//! and the [`SessionFactory`], and swaps sessions. The RPC loop owns one runtime and asks it
//! for the current session per command, so commands that replace the session
//! (`new_session`, `switch_session`, `fork`, `clone`) only need [`AgentSessionRuntime::replace`].

use super::factory::{SessionFactory, SessionRequest};
use super::{AgentSession, EventSink};
use crate::session::{NewSessionOptions, SessionManager};
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

    /// `new_session {parentSession?}` (rpc-protocol.md §4.1): tears down the current session
    /// and starts a fresh one in the same session directory and cwd, holding the current
    /// model and thinking level as its first entries (1.6 notes §14).
    pub async fn new_session(&self, parent_session: Option<String>) -> Result<(), String> {
        let current = self.session();
        let mut store = current.store_snapshot();
        store
            .new_session(NewSessionOptions {
                id: None,
                parent_session,
            })
            .map_err(|e| e.to_string())?;
        let (model, level) = (current.model(), current.thinking_level());
        record_start(&mut store, model.as_ref(), level);
        self.replace(SessionRequest {
            cwd: store.cwd().to_path_buf(),
            store,
            model,
            thinking_level: level,
        })
        .await;
        Ok(())
    }

    /// `fork {entryId}` (rpc-protocol.md §4.9): `entryId` must be a user message. The new
    /// session holds the path up to (not including) it, or is empty with `parentSession` set
    /// when it is the first entry. Returns the user message's text for the editor.
    pub async fn fork(&self, entry_id: &str) -> Result<String, String> {
        const INVALID: &str = "Invalid entry ID for forking";
        let current = self.session();
        let mut store = current.store_snapshot();
        let (text, parent) = match store.entry(entry_id) {
            Some(e) => match e.message() {
                Some(pi_ai::Message::User(u)) => (u.content.joined_text(), e.parent_id.clone()),
                _ => return Err(INVALID.into()),
            },
            None => return Err(INVALID.into()),
        };
        if store.is_persisted() && !store.is_flushed() {
            return Err(NOT_SAVED_YET.into());
        }
        match parent {
            Some(p) => {
                store
                    .create_branched_session(&p)
                    .map_err(|e| e.to_string())?;
            }
            None => {
                let parent_session = store
                    .session_file()
                    .map(|f| f.to_string_lossy().into_owned());
                store
                    .new_session(NewSessionOptions {
                        id: None,
                        parent_session,
                    })
                    .map_err(|e| e.to_string())?;
                record_start(
                    &mut store,
                    current.model().as_ref(),
                    current.thinking_level(),
                );
            }
        }
        self.replace(SessionRequest {
            cwd: store.cwd().to_path_buf(),
            store,
            model: current.model(),
            thinking_level: current.thinking_level(),
        })
        .await;
        Ok(text)
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
        let (context_model, context_level, _) = store.resume_settings();
        let model = context_model
            .as_ref()
            .and_then(|r| {
                current
                    .available_models()
                    .into_iter()
                    .find(|m| m.provider == r.provider && m.id == r.model_id)
            })
            .or_else(|| current.model());
        let level = if store.leaf_id().is_some() {
            ThinkingLevel::parse(&context_level).unwrap_or(ThinkingLevel::Off)
        } else {
            current.thinking_level()
        };
        let level = crate::config::clamp_thinking_level(model.as_ref(), level);
        let has_level = store.has_thinking_level_change();
        if store.is_empty() {
            record_start(&mut store, model.as_ref(), level);
        } else if !has_level {
            // A session without a recorded level gets the one it now runs at (as upstream 1.6).
            if let Err(e) = store.append_thinking_level_change(level.as_str()) {
                tracing::warn!("could not record the thinking level: {e}");
            }
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

/// A fresh session starts with its model and thinking level as entries, as at start-up
/// (1.6 notes §14). A write failure is a warning: the session still works in memory.
pub fn record_start(
    store: &mut SessionManager,
    model: Option<&pi_ai::Model>,
    level: ThinkingLevel,
) {
    if let Some(m) = model {
        if let Err(e) = store.append_model_change(&m.provider, &m.id) {
            tracing::warn!("could not record the model: {e}");
        }
    }
    if let Err(e) = store.append_thinking_level_change(level.as_str()) {
        tracing::warn!("could not record the thinking level: {e}");
    }
}
