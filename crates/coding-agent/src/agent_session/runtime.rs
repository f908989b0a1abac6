//! The session runtime (upstream `AgentSessionRuntime`): owns the current [`AgentSession`]
//! and the [`SessionFactory`], and swaps sessions. The RPC loop owns one runtime and asks it
//! for the current session per command, so commands that replace the session
//! (`new_session`, `switch_session`, `fork`, `clone`) only need [`AgentSessionRuntime::replace`].

use super::factory::{SessionFactory, SessionRequest};
use super::{AgentSession, EventSink};
use parking_lot::RwLock;
use std::sync::Arc;

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

    /// Waits until the current session has no run in flight (EOF handling).
    pub async fn wait_settled(&self) {
        self.session().wait_settled().await;
    }
}
