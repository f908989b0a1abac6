//! The session's side of the tool permission policy (issue 26; rules in
//! [`crate::permissions`]): after the extensions' `tool_call` gates, each call is decided by
//! the policy, and a call mode `ask` leaves open is put to the RPC client as an
//! `extension_ui_request` of method `select` (rpc-protocol.md §6.1), answered with
//! `extension_ui_response`. Fail closed: no answer within `askTimeoutMs`, the client's input
//! closing, a dismissed dialog, an unknown option, or no client at all (print and json
//! modes) refuse the call.

use super::AgentSession;
use crate::permissions::{denial, CallSubject, PermissionPolicy, Verdict};
use crate::protocol::rpc::{ExtensionUiRequest, RpcEvent};
use parking_lot::Mutex;
use pi_agent::{BeforeToolCall, ToolCallHooks, ToolOutput};
use pi_ai::ToolCall;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The `select` option that runs the call once.
pub const ALLOW_ONCE: &str = "Allow once";
/// The `select` option that runs the call and every identical call of this session.
pub const ALLOW_ALWAYS: &str = "Allow always (this session)";
/// The `select` option that refuses the call.
pub const DENY: &str = "Deny";

/// Whether there is a client to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    /// Print and json modes: nobody to ask.
    None,
    /// RPC mode while stdin is open.
    Open,
    /// RPC mode after stdin closed.
    Closed,
}

/// The process's policy and its dialogs in flight (shared by every session of the process).
pub struct PermissionGate {
    policy: PermissionPolicy,
    client: Mutex<Client>,
    /// Dialogs waiting for their `extension_ui_response`, by request id; the value is the
    /// selected option (`None`: dismissed).
    pending: Mutex<HashMap<String, oneshot::Sender<Option<String>>>>,
}

impl PermissionGate {
    /// The policy this gate enforces.
    pub fn policy(&self) -> &PermissionPolicy {
        &self.policy
    }

    /// A gate for `policy`, with no client until [`PermissionGate::client_attached`].
    pub fn new(policy: PermissionPolicy) -> Self {
        PermissionGate {
            policy,
            client: Mutex::new(Client::None),
            pending: Mutex::default(),
        }
    }

    /// RPC mode: the client on stdin can be asked from now on.
    pub fn client_attached(&self) {
        let mut c = self.client.lock();
        if *c == Client::None {
            *c = Client::Open;
        }
    }

    /// RPC stdin closed: every dialog still open, and every later `ask`, is refused.
    pub fn client_closed(&self) {
        *self.client.lock() = Client::Closed;
        // Dropping the senders wakes the askers with "closed".
        self.pending.lock().clear();
    }

    /// Delivers a client's `extension_ui_response`; `false` when `id` is not one of this
    /// gate's dialogs (it is then an extension's).
    pub fn answer(&self, id: &str, value: Option<String>, cancelled: Option<bool>) -> bool {
        let Some(tx) = self.pending.lock().remove(id) else {
            return false;
        };
        let choice = if cancelled == Some(true) { None } else { value };
        let _ = tx.send(choice);
        true
    }
}

/// How an `ask` ended.
enum Asked {
    Once,
    Always,
    Refused(String),
}

impl AgentSession {
    /// The permission gate of the process, when a policy is configured.
    pub fn permission_gate(&self) -> Option<&Arc<PermissionGate>> {
        self.inner.services.permissions.as_ref()
    }

    /// The policy's decision for one call, asking the client where mode `ask` leaves it
    /// open: `None` = run it, `Some(reason)` = the error text of the refused call.
    async fn permission_check(&self, call: &ToolCall, args: &Value) -> Option<String> {
        let gate = self.permission_gate()?.clone();
        let subject = CallSubject::of(&call.name, args, &self.inner.cwd);
        let allowed = self
            .inner
            .run_state
            .lock()
            .permission_allows
            .contains(&subject);
        match gate.policy.decide(&subject, allowed) {
            Verdict::Allow => None,
            Verdict::Deny(why) => Some(denial(&subject, &why)),
            Verdict::Ask => match self.ask_permission(&gate, &subject).await {
                Asked::Once => None,
                Asked::Always => {
                    self.inner
                        .run_state
                        .lock()
                        .permission_allows
                        .insert(subject);
                    None
                }
                Asked::Refused(why) => Some(denial(&subject, &format!("mode ask: {why}"))),
            },
        }
    }

    /// Puts `subject` to the client as a `select` dialog and waits for the answer.
    async fn ask_permission(&self, gate: &PermissionGate, subject: &CallSubject) -> Asked {
        let timeout = gate.policy.ask_timeout;
        let id = uuid::Uuid::new_v4().to_string();
        let rx = {
            // The client state and the pending entry change together, so a close between
            // them cannot leave a dialog nobody refuses.
            let client = gate.client.lock();
            match *client {
                Client::None => return Asked::Refused("no client to ask outside RPC mode".into()),
                Client::Closed => return Asked::Refused("the client's input is closed".into()),
                Client::Open => {}
            }
            let (tx, rx) = oneshot::channel();
            gate.pending.lock().insert(id.clone(), tx);
            rx
        };
        self.emit(RpcEvent::ExtensionUiRequest(ExtensionUiRequest {
            id: id.clone(),
            method: "select".into(),
            title: Some(format!("Allow tool call {}?", subject.display())),
            options: Some(vec![ALLOW_ONCE.into(), ALLOW_ALWAYS.into(), DENY.into()]),
            timeout: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            ..Default::default()
        }));
        // The entry goes when the ask ends, also when an abort drops this future.
        let _pending = PendingGuard { gate, id: &id };
        let answer = tokio::time::timeout(timeout, rx).await;
        match answer {
            Err(_) => Asked::Refused(format!("no answer within {} ms", timeout.as_millis())),
            Ok(Err(_)) => Asked::Refused("the client's input is closed".into()),
            Ok(Ok(Some(choice))) if choice == ALLOW_ONCE => Asked::Once,
            Ok(Ok(Some(choice))) if choice == ALLOW_ALWAYS => Asked::Always,
            Ok(Ok(_)) => Asked::Refused("denied by the user".into()),
        }
    }
}

/// Removes a dialog's pending entry when its ask ends.
struct PendingGuard<'a> {
    gate: &'a PermissionGate,
    id: &'a str,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.gate.pending.lock().remove(self.id);
    }
}

/// The run's tool-call hooks when a policy is configured: the extensions' `tool_call` gates
/// first (their changed arguments are what the policy sees), then the policy; results go to
/// the extensions' `tool_result` hooks as before.
pub(super) struct PolicyHooks {
    pub(super) session: AgentSession,
}

#[async_trait::async_trait]
impl ToolCallHooks for PolicyHooks {
    async fn before_tool_call(
        &self,
        call: &ToolCall,
        args: Value,
        parent: Option<&str>,
    ) -> BeforeToolCall {
        let args = match self.session.extensions() {
            Some(ext) => match ext.before_tool_call(call, args, parent).await {
                BeforeToolCall::Proceed(args) => args,
                blocked => return blocked,
            },
            None => args,
        };
        match self.session.permission_check(call, &args).await {
            None => BeforeToolCall::Proceed(args),
            Some(reason) => BeforeToolCall::Block(reason),
        }
    }

    async fn after_tool_call(
        &self,
        call: &ToolCall,
        args: &Value,
        output: ToolOutput,
        is_error: bool,
        parent: Option<&str>,
    ) -> (ToolOutput, bool) {
        match self.session.extensions() {
            Some(ext) => {
                ext.after_tool_call(call, args, output, is_error, parent)
                    .await
            }
            None => (output, is_error),
        }
    }
}
