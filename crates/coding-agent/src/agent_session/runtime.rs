//! The session runtime (upstream `AgentSessionRuntime`): owns the current [`AgentSession`]
//! and the [`SessionFactory`], and swaps sessions. The RPC loop owns one runtime and asks it
//! for the current session per command, so commands that replace the session
//! (`new_session`, `switch_session`, `fork`, `clone`) only need [`AgentSessionRuntime::replace`].

use super::factory::{SessionFactory, SessionRequest};
use super::{AgentSession, EventSink};
use crate::extensions::wire::SessionEvent;
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
    shutdown: Arc<tokio::sync::Notify>,
}

/// Why a session is replaced, as extensions see it (`session_shutdown.reason`,
/// `session_start.reason`; upstream docs/extensions.md "Session Events").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaceReason {
    /// `new_session` / `ctx.newSession()`.
    New,
    /// `switch_session` / `ctx.switchSession()`.
    Resume,
    /// `fork`, `clone` / `ctx.fork()`.
    Fork,
}

impl ReplaceReason {
    fn as_str(self) -> &'static str {
        match self {
            ReplaceReason::New => "new",
            ReplaceReason::Resume => "resume",
            ReplaceReason::Fork => "fork",
        }
    }
}

impl AgentSessionRuntime {
    /// Builds the first session from `request`; every session's events go to `sink`.
    pub fn new(factory: SessionFactory, request: SessionRequest, sink: EventSink) -> Self {
        let session = factory.create(request, sink.clone());
        AgentSessionRuntime {
            factory: Arc::new(factory),
            current: Arc::new(RwLock::new(session)),
            sink,
            shutdown: Arc::default(),
        }
    }

    /// `ctx.shutdown()` in RPC mode (upstream docs/extensions.md): the process ends once the
    /// session is idle; the RPC loop waits on [`Self::shutdown_requested`], then lets commands
    /// in flight answer.
    pub fn request_shutdown(&self) {
        let rt = self.clone();
        tokio::spawn(async move {
            // Let the requesting handler (and its command) finish first.
            tokio::task::yield_now().await;
            rt.wait_settled().await;
            rt.shutdown.notify_one();
        });
    }

    /// Resolves once an extension has asked for shutdown and the session is idle.
    pub async fn shutdown_requested(&self) {
        self.shutdown.notified().await
    }

    /// Runs `session_before_switch` / `session_before_fork` handlers: whether one cancelled.
    async fn cancelled_by_extensions(&self, event: SessionEvent<'_>) -> bool {
        let Some(ext) = self.session().extensions().cloned() else {
            return false;
        };
        ext.emit_session_event(&event).await.cancel
    }

    /// `ctx.reload()` (upstream docs/extensions.md): `session_shutdown {reason:"reload"}`, a
    /// fresh instance of every extension, the session's tools and system prompt rebuilt, then
    /// `session_start {reason:"reload"}`. Refused while a run is in flight.
    pub async fn reload_extensions(&self) -> Result<(), String> {
        let session = self.session();
        let Some(ext) = session.extensions().cloned() else {
            return Ok(());
        };
        if session.is_streaming() {
            return Err("Cannot reload while the agent is running".into());
        }
        ext.emit_session_event(&SessionEvent::SessionShutdown {
            reason: "reload",
            target_session_file: None,
        })
        .await;
        ext.reload().await.map_err(|e| e.to_string())?;
        session.set_loadout(self.factory.loadout(session.cwd()));
        ext.push_state();
        ext.emit_session_event(&SessionEvent::SessionStart {
            reason: "reload",
            previous_session_file: None,
        })
        .await;
        ext.discover_resources(session.cwd(), "reload").await;
        Ok(())
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
    ///
    /// With extensions (upstream `AgentSessionRuntime.teardownCurrent` / `createRuntime`):
    /// `session_shutdown {reason, targetSessionFile}` once the run has settled, a fresh
    /// instance of every extension, then `session_start {reason, previousSessionFile}` on the
    /// new session.
    pub async fn replace(&self, request: SessionRequest, reason: ReplaceReason) -> AgentSession {
        let old = self.session();
        old.abort_bash();
        old.abort().await;
        let ext = old.extensions().cloned();
        let previous = old.state().session_file;
        if let Some(ext) = &ext {
            let target = request
                .store
                .session_file()
                .map(|f| f.to_string_lossy().into_owned());
            ext.emit_session_event(&SessionEvent::SessionShutdown {
                reason: reason.as_str(),
                target_session_file: Some(target.as_deref()),
            })
            .await;
            if let Err(e) = ext.reload().await {
                tracing::warn!("extensions could not be re-instantiated: {e}");
            }
        }
        let next = self.factory.create(request, self.sink.clone());
        *self.current.write() = next.clone();
        if let Some(ext) = &ext {
            ext.push_state();
            ext.emit_session_event(&SessionEvent::SessionStart {
                reason: reason.as_str(),
                previous_session_file: Some(previous.as_deref()),
            })
            .await;
            ext.discover_resources(next.cwd(), "startup").await;
        }
        next
    }

    /// `clone` (rpc-protocol.md §4.9): duplicates the active branch up to the leaf into a new
    /// session file (header `parentSession` = the old file) and switches to it. `Ok(true)` =
    /// cancelled by a `session_before_fork` handler.
    pub async fn clone_session(&self) -> Result<bool, String> {
        let store = self.session().store_snapshot();
        if store.is_persisted() && !store.is_flushed() {
            return Err(NOT_SAVED_YET.into());
        }
        let Some(leaf) = store.leaf_id().map(str::to_string) else {
            return Err("Cannot clone session: no current entry selected".into());
        };
        self.clone_through(&leaf).await
    }

    /// `ctx.fork(entryId, {position:"at"})`: like `clone`, through `entry_id` instead of the
    /// leaf. `Ok(true)` = cancelled by a `session_before_fork` handler.
    pub async fn clone_through(&self, entry_id: &str) -> Result<bool, String> {
        let before = SessionEvent::SessionBeforeFork {
            entry_id,
            position: "at",
        };
        if self.cancelled_by_extensions(before).await {
            return Ok(true);
        }
        let session = self.session();
        let mut store = session.store_snapshot();
        if store.entry(entry_id).is_none() {
            return Err("Invalid entry ID for forking".into());
        }
        if store.is_persisted() && !store.is_flushed() {
            return Err(NOT_SAVED_YET.into());
        }
        store
            .create_branched_session(entry_id)
            .map_err(|e| e.to_string())?;
        let request = SessionRequest {
            cwd: store.cwd().to_path_buf(),
            store,
            model: session.model(),
            thinking_level: session.thinking_level(),
        };
        self.replace(request, ReplaceReason::Fork).await;
        Ok(false)
    }

    /// `new_session {parentSession?}` (rpc-protocol.md §4.1): tears down the current session
    /// and starts a fresh one in the same session directory and cwd, holding the current
    /// model and thinking level as its first entries (1.6 notes §14). `Ok(true)` = cancelled
    /// by a `session_before_switch` handler.
    pub async fn new_session(&self, parent_session: Option<String>) -> Result<bool, String> {
        if self
            .cancelled_by_extensions(SessionEvent::SessionBeforeSwitch {
                reason: "new",
                target_session_file: None,
            })
            .await
        {
            return Ok(true);
        }
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
        self.replace(
            SessionRequest {
                cwd: store.cwd().to_path_buf(),
                store,
                model,
                thinking_level: level,
            },
            ReplaceReason::New,
        )
        .await;
        Ok(false)
    }

    /// `fork {entryId}` (rpc-protocol.md §4.9): `entryId` must be a user message. The new
    /// session holds the path up to (not including) it, or is empty with `parentSession` set
    /// when it is the first entry. Returns the user message's text for the editor; `None` =
    /// cancelled by a `session_before_fork` handler.
    pub async fn fork(&self, entry_id: &str) -> Result<Option<String>, String> {
        const INVALID: &str = "Invalid entry ID for forking";
        let before = SessionEvent::SessionBeforeFork {
            entry_id,
            position: "before",
        };
        if self.cancelled_by_extensions(before).await {
            return Ok(None);
        }
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
        self.replace(
            SessionRequest {
                cwd: store.cwd().to_path_buf(),
                store,
                model: current.model(),
                thinking_level: current.thinking_level(),
            },
            ReplaceReason::Fork,
        )
        .await;
        Ok(Some(text))
    }

    /// `switch_session {sessionPath}` (rpc-protocol.md §4.9): opens the file (a missing file
    /// starts a new session at exactly that path), restores its model when that model is
    /// available and its thinking level (clamped), and switches to it in its recorded cwd.
    /// `Ok(true)` = cancelled by a `session_before_switch` handler.
    pub async fn switch_session(&self, path: &str) -> Result<bool, String> {
        let before = SessionEvent::SessionBeforeSwitch {
            reason: "resume",
            target_session_file: Some(path),
        };
        if self.cancelled_by_extensions(before).await {
            return Ok(true);
        }
        let current = self.session();
        let mut store = SessionManager::open(Path::new(path)).map_err(|e| e.to_string())?;
        if !store.cwd().is_dir() {
            return Err(format!(
                "Session working directory does not exist: {}",
                store.cwd().display()
            ));
        }
        let (context_model, context_level, _) = store.resume_settings();
        // A virtual model's `model_change` holds over the physical models of its responses.
        let context_model = store
            .resume_model_change()
            .filter(|mc| {
                current.available_models().iter().any(|m| {
                    m.provider == mc.provider
                        && m.id == mc.model_id
                        && crate::config::models::is_virtual(m)
                })
            })
            .or(context_model);
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
        self.replace(request, ReplaceReason::Resume).await;
        Ok(false)
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
