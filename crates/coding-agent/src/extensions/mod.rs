//! Extensions: pi's JS extensions run in a Node child process (the extension host, our own
//! program `host.mjs` shipped in the binary), started only when at least one extension is
//! configured (issue 12; upstream docs/extensions.md, docs/rpc-extension-ui.md;
//! rpc-protocol.md §5.9, §6).
//!
//! * [`discover`] finds the entry files: `-e <file|dir>` (repeatable), then — unless
//!   `--no-extensions` — `<agent>/extensions/`, settings `extensions` and, for a trusted
//!   project only, `.pi/extensions/`.
//! * [`Extensions::start`] starts the host and loads them; Node missing or too old, or any
//!   extension that fails to load (throws or rejects, does not parse, an import fails, a tool
//!   name conflicts), is an error: `pi` exits 1 before serving anything, as upstream (the run
//!   must not start ungated).
//! * [`Extensions`] implements [`pi_agent::ToolCallHooks`]: `tool_call` handlers may block or
//!   change arguments, `tool_result` handlers may change the result. It never fails open: a
//!   handler that throws, times out or whose host died blocks the call and `extension_error`
//!   is emitted; an abort ends a pending round (the call is blocked), and once stdin has
//!   closed no round waits longer than [`host::EOF_GRACE`].

pub mod api;
mod commands;
mod discovery;
pub mod events;
pub mod host;
mod input;
mod lifecycle;
pub mod provider;
pub mod provider_hooks;
mod resources;
pub mod sdk;
pub mod tool;
mod tools;
pub mod typescript;
pub mod wire;

pub use discovery::{discover, DiscoverOptions, ExtensionSource};
pub use lifecycle::{StartError, LOAD_FAILURE_HINT};
pub use resources::Discovered;

use crate::protocol::rpc::EventSink;
use crate::protocol::rpc::RpcEvent;
use futures::future::BoxFuture;
use futures::FutureExt;
use host::ExtensionHost;
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;
use std::time::Duration;
use wire::{LoadResult, ToHost};

/// Default limit for one `tool_call` / `tool_result` round (handlers may wait on a dialog).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(300);

/// The loaded extensions and their host.
pub struct Extensions {
    host: Arc<ExtensionHost>,
    sources: Vec<ExtensionSource>,
    /// The mode the extensions were loaded for (`rpc`/`json`/`print`).
    mode: String,
    /// The extension flag values sent to the host ([`Extensions::apply_flags`]), for
    /// [`Extensions::start_another`].
    flag_values: Mutex<serde_json::Map<String, serde_json::Value>>,
    /// What the current instances registered (replaced by [`Extensions::reload`]).
    loaded: RwLock<LoadResult>,
    sink: EventSink,
    hook_timeout: Duration,
    shaper: events::EventShaper,
    /// The session runtime, for the state mirror ([`Extensions::push_state`]).
    runtime: api::RuntimeSlot,
    /// `(session id, last entry id)` of the last mirror push: the next one sends only the
    /// entries after it.
    pushed: Mutex<Option<(String, Option<String>)>>,
    /// Skills and prompt templates the `resources_discover` handlers added (files).
    discovered: RwLock<Discovered>,
    /// What failed to load at the last [`Extensions::reload`]: while not empty, every tool
    /// call is blocked (a gate that broke on reload must not fail open).
    reload_failures: RwLock<Vec<wire::LoadError>>,
}

impl Extensions {
    /// The entry files of the loaded extensions (absolute), in load order.
    pub fn entry_paths(&self) -> Vec<std::path::PathBuf> {
        self.sources.iter().map(|s| s.path.clone()).collect()
    }

    /// Sends the host the session mirror (`ToHost::State`, [`api::HostApi::state`]): only the entries
    /// after the last push when the session is the same. Nothing before the runtime exists.
    pub fn push_state(&self) {
        let Some(runtime) = self.runtime.get() else {
            return;
        };
        if self.host.is_dead() {
            return;
        }
        let mut pushed = self.pushed.lock();
        let id = runtime.session_id();
        let from = match &*pushed {
            Some((sid, last)) if *sid == id => last.clone(),
            _ => None,
        };
        let state = runtime.state(from.as_deref());
        let last = wire::last_entry_id(&state).or(from);
        *pushed = Some((id, last));
        // Sent under the lock: pushes reach the host in the order they were computed.
        self.host.send(&ToHost::State {
            state: Box::new(state),
        });
    }

    /// Runs the handlers of a session event ([`wire::SessionEvent`]: `session_start`,
    /// `session_shutdown`, `session_before_switch`, `session_before_fork`, the compaction
    /// events) and waits for them; returns their combined reply (`{cancel: true}` from a
    /// `session_before_*` handler, a `session_before_compact` handler's `compaction`), the
    /// empty reply when no extension handles it or the host failed (then after an
    /// `extension_error`).
    pub async fn emit_session_event(
        &self,
        event: &wire::SessionEvent<'_>,
    ) -> wire::SessionEventReply {
        self.session_event(event, None).await
    }

    /// [`Extensions::emit_session_event`] for an event whose handlers get an `AbortSignal`
    /// (`session_before_compact`'s `event.signal`, upstream docs/extensions.md): when `cancel`
    /// fires (the compaction's token: RPC `abort`) while the handlers run, the host is sent
    /// [`ToHost::Abort`] of the event's request id, which fires that signal; the handlers then
    /// get [`host::ABORT_GRACE`] to answer (a later answer is given up on, reported as
    /// `extension_error`, and the reply is the empty one).
    pub async fn emit_session_event_until(
        &self,
        event: &wire::SessionEvent<'_>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> wire::SessionEventReply {
        self.session_event(event, Some(cancel)).await
    }

    /// [`Extensions::emit_session_event`], aborted with `cancel` when given.
    async fn session_event(
        &self,
        event: &wire::SessionEvent<'_>,
        cancel: Option<&tokio_util::sync::CancellationToken>,
    ) -> wire::SessionEventReply {
        let kind = event.kind();
        if !self.handles(kind) || self.host.is_dead() {
            return wire::SessionEventReply::default();
        }
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::Event {
            id: Some(id),
            event: wire::Notification::Session(event),
        };
        let timeout = Some(self.hook_timeout);
        let reply = match cancel {
            None => self.host.request(id, &msg, timeout).await,
            Some(cancel) => {
                let request = self.host.request_until(id, &msg, timeout, cancel);
                tokio::pin!(request);
                // Biased: the request is sent (on its first poll) before any abort of it.
                tokio::select! {
                    biased;
                    r = &mut request => r,
                    () = cancel.cancelled() => {
                        self.host.abort(id);
                        request.await
                    }
                }
            }
        };
        match reply {
            Ok(v) => wire::SessionEventReply::from_value(&v),
            Err(e) => {
                for p in self.handlers_of(kind) {
                    self.error(&p, kind, &e.to_string());
                }
                wire::SessionEventReply::default()
            }
        }
    }

    /// The host process (tests and benches).
    pub fn host(&self) -> &Arc<ExtensionHost> {
        &self.host
    }

    /// Whether any loaded extension handles `event`.
    pub fn handles(&self, event: &str) -> bool {
        self.loaded
            .read()
            .extensions
            .iter()
            .any(|e| e.events.iter().any(|x| x == event))
    }

    /// The extensions with handlers for `event`.
    fn handlers_of(&self, event: &str) -> Vec<String> {
        self.loaded
            .read()
            .extensions
            .iter()
            .filter(|e| e.events.iter().any(|x| x == event))
            .map(|e| e.path.clone())
            .collect()
    }

    /// Emits `extension_error` (and writes it to stderr).
    fn error(&self, path: &str, event: &str, error: &str) {
        eprintln!("Extension error ({path}, {event}): {error}");
        (self.sink)(RpcEvent::ExtensionError {
            extension_path: path.into(),
            event: event.into(),
            error: error.into(),
        });
    }

    /// Wraps `sink` so that the session events extensions listen to are also sent to the host,
    /// in upstream's extension shape ([`events::EventShaper`]), without waiting for their
    /// handlers. The agent-loop events of [`events::AWAITED`] that are to wait for their
    /// handlers go through [`Extensions::notify_awaited`] first, which sends them itself: the
    /// tap then only passes them on. An awaited event that reaches the tap directly (emitted
    /// outside the loop, e.g. an idle `sendMessage`'s `message_start`) is sent without waiting.
    pub fn tap(self: &Arc<Self>, sink: EventSink) -> EventSink {
        let me = self.clone();
        Arc::new(move |ev: RpcEvent| {
            if !events::take_notified() {
                me.observe(&ev, false);
            }
            sink(ev)
        })
    }

    /// The agent-loop event `ev` held until its handlers are done (upstream "emit to extensions
    /// first", so what a handler does, a `notify`, `sendMessage`, …, reaches the client before
    /// the event): when `ev` is one of [`events::AWAITED`] that an extension handles (and the
    /// host lives), it is sent to the host now (the state mirror refreshed first, the turn
    /// counter advanced, as the tap does), and the returned future awaits the handlers' reply
    /// (at most the hook timeout; a host that fails to answer only ends the wait, logged) and
    /// then hands `ev` to `sink`, a sink built by [`Extensions::tap`], which then does not send
    /// it again. Dropped unfinished, the future still sends `ev` to the host (if it had not
    /// yet) and to `sink`, without waiting. `None`: nothing to wait for, `ev` was handed to
    /// `sink` now (which taps it as usual).
    pub fn notify_awaited(
        self: &Arc<Self>,
        ev: RpcEvent,
        sink: EventSink,
    ) -> Option<BoxFuture<'static, ()>> {
        let waits = events::awaited_kind(&ev).is_some_and(|t| self.handles(t));
        if !waits || self.host.is_dead() {
            sink(ev);
            return None;
        }
        let Some(event) = self.observe(&ev, true) else {
            sink(ev);
            return None;
        };
        let mut delivery = events::Delivery::new(ev, sink, self.host.clone(), event);
        let me = self.clone();
        Some(
            async move {
                if let Some(event) = delivery.take_unsent() {
                    let id = me.host.next_id();
                    let msg = ToHost::Event {
                        id: Some(id),
                        event: wire::Notification::Agent(Box::new(event)),
                    };
                    if let Err(e) = me.host.request(id, &msg, Some(me.hook_timeout)).await {
                        tracing::warn!("extension notification: {e}");
                    }
                }
                delivery.deliver();
            }
            .boxed(),
        )
    }

    /// What the tap does for `ev` before the client sees it: refreshes the state mirror for
    /// the handlers that read the session, advances the turn counter, and sends the handled
    /// events to the host (without waiting). With `awaited`, an event of [`events::AWAITED`]
    /// that is handled is not sent: its shaped extension event is returned for the caller to
    /// send and wait for ([`Extensions::notify_awaited`]); `None` otherwise (and without
    /// `awaited`, always).
    fn observe(&self, ev: &RpcEvent, awaited: bool) -> Option<wire::ExtensionEvent> {
        let counted = matches!(ev, RpcEvent::AgentStart | RpcEvent::TurnEnd { .. });
        let t = wire::rpc_event_kind(ev);
        let handled = self.handles(t);
        // Handlers of these read the session (entries, idle state) as it is now; `tool_call`
        // handlers see it through the assistant message that made the call (upstream
        // docs/extensions.md "ctx.sessionManager").
        let refresh = (handled
            && matches!(
                t,
                "agent_start"
                    | "agent_end"
                    | "agent_settled"
                    | "turn_start"
                    | "turn_end"
                    | "message_end"
            ))
            || (t == "message_end" && self.handles("tool_call"));
        if !(handled || refresh) || self.host.is_dead() {
            // The turn counter follows every run, handled or not.
            if counted {
                self.shaper.shape(ev);
            }
            return None;
        }
        // `turn_end` handlers ran at the turn boundary already (`AgentSession::turn_boundary`);
        // the count still advances. Likewise `message_end` handlers ran before the message was
        // final (`Extensions::message_end`).
        let wait = awaited
            && handled
            && events::AWAITED.contains(&t)
            && !matches!(t, "message_end" | "turn_end");
        if refresh {
            self.push_state();
        }
        if handled && t == "message_end" {
        } else if handled && t == "turn_end" {
            self.shaper.shape(ev);
        } else if handled {
            let event = match self.shaper.shape(ev) {
                Some(shaped) if wait => return Some(shaped),
                Some(shaped) => wire::Notification::Agent(Box::new(shaped)),
                None => wire::Notification::AsIs(ev),
            };
            self.host.send(&ToHost::Event { id: None, event });
        } else if counted {
            self.shaper.shape(ev);
        }
        None
    }
}
