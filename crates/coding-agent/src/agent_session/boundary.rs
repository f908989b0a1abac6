//! The actionable boundaries of a run (upstream docs/extensions.md "turn_start / turn_end",
//! "agent_start / agent_end / agent_before_settle / agent_settled"): extensions' `turn_end`
//! handlers run after a turn's messages are persisted and before the client's `turn_end`;
//! `agent_before_settle` handlers run once no more work would start another low-level run
//! (never after an abort). Their proposal — draft entries and `continue` — is validated as a
//! whole, the entries are appended in order (each announced with `entry_appended`) and the
//! context is rebuilt; `continue` asks for one more model request.

use super::AgentSession;
use crate::extensions::wire::{
    BeforeSettleEvent, BoundaryContext, BoundaryDraft as Draft, ContextEntry, Notification,
    TurnEndEvent,
};
use crate::protocol::rpc::RpcEvent;
use crate::session::{EntryKind, SessionEntry};
use pi_ai::{Message, StopReason, ToolResultMessage};
use serde_json::Value;

/// Continuation requested where the model has nothing to answer (upstream's text).
fn not_runnable(event: &str) -> String {
    format!("{event} requested continuation without runnable model context")
}

/// Why a boundary proposal was refused as a whole (nothing of it is appended).
#[derive(Debug, thiserror::Error)]
enum DraftError {
    /// An entry is not one of the allowed drafts or misses a field.
    #[error("invalid {event} entry {index}: {reason}")]
    Shape {
        event: String,
        index: usize,
        reason: String,
    },
    /// A `context_edit` names an entry the session does not have.
    #[error("invalid {event} entry {index}: context_edit target {target} not found")]
    Target {
        event: String,
        index: usize,
        target: String,
    },
}

/// `completed`, `error` or `aborted`, from an assistant message's stop reason.
fn outcome_of(message: &Message) -> &'static str {
    match message {
        Message::Assistant(a) => match a.stop_reason {
            StopReason::Aborted => "aborted",
            StopReason::Error => "error",
            _ => "completed",
        },
        _ => "completed",
    }
}

impl AgentSession {
    /// The `turn_end` boundary of one turn (called by the loop before its `turn_end` event).
    /// Returns whether a continuation is to be made: requested, the turn completed, not
    /// aborted meanwhile, and the context ends with something the model can answer (else
    /// `extension_error` from `<boundary>`).
    pub(super) async fn turn_boundary(
        &self,
        message: &Message,
        tool_results: &[ToolResultMessage],
        cancel: &tokio_util::sync::CancellationToken,
    ) -> bool {
        let Some(ext) = self.extensions().cloned() else {
            return false;
        };
        if !ext.handles("turn_end") {
            return false;
        }
        ext.push_state();
        let (message_entry_id, tool_result_entry_ids) = self.turn_entry_ids(tool_results.len());
        let outcome = outcome_of(message);
        let event = TurnEndEvent {
            turn_index: ext.turn_index(),
            message,
            tool_results,
            message_entry_id,
            tool_result_entry_ids,
            outcome,
            entries: vec![],
            continue_run: false,
            context: self.boundary_context(),
        };
        let proposal = ext.boundary(Notification::TurnEnd(&event), cancel).await;
        self.commit_drafts("turn_end", proposal.entries);
        if !proposal.continue_run {
            return false;
        }
        // Tool results already make the next request; else the context must end with
        // something to answer (checked, and reported, also for an aborted turn as upstream).
        let runnable = !tool_results.is_empty() || self.continuation_possible("turn_end");
        runnable && outcome == "completed" && !cancel.is_cancelled()
    }

    /// The `agent_before_settle` boundary, after the last low-level run when it was not
    /// aborted. Returns whether one more low-level run is to be made (requested, not aborted
    /// while the handlers ran, and the context ends with something the model can answer).
    pub(super) async fn before_settle(&self, cancel: &tokio_util::sync::CancellationToken) -> bool {
        let Some(ext) = self.extensions().cloned() else {
            return false;
        };
        if !ext.handles("agent_before_settle") || cancel.is_cancelled() {
            return false;
        }
        ext.push_state();
        let outcome = self
            .transcript()
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Assistant(_)))
            .map_or("completed", outcome_of);
        let event = BeforeSettleEvent {
            outcome,
            entries: vec![],
            continue_run: false,
            context: self.boundary_context(),
        };
        let proposal = ext
            .boundary(Notification::BeforeSettle(&event), cancel)
            .await;
        self.commit_drafts("agent_before_settle", proposal.entries);
        proposal.continue_run
            && !cancel.is_cancelled()
            && self.continuation_possible("agent_before_settle")
    }

    /// Whether the model context ends with a message the model can answer (a user-role or
    /// tool result message); reports `extension_error` when not.
    fn continuation_possible(&self, event: &str) -> bool {
        let llm = self.llm_messages(&self.transcript());
        let ok = llm
            .iter()
            .rev()
            .find(|m| !matches!(m, Message::System(_)))
            .is_some_and(|m| !matches!(m, Message::Assistant(_)));
        if !ok {
            if let Some(ext) = self.extensions() {
                ext.boundary_error(event, &not_runnable(event));
            }
        }
        ok
    }

    /// The entry ids of the turn just persisted: the assistant message's and its `n` tool
    /// results' (the last message entries of the branch).
    fn turn_entry_ids(&self, n: usize) -> (Option<String>, Vec<String>) {
        let store = self.inner.store.lock();
        let mut ids: Vec<String> = store
            .branch()
            .iter()
            .rev()
            // A message entry whose line stays in the file is a `Stored` stub.
            .filter(|e| matches!(e.kind, EntryKind::Message(_) | EntryKind::Stored(_)))
            .take(n + 1)
            .map(|e| e.id.clone())
            .collect();
        ids.reverse();
        if ids.len() < n + 1 {
            return (None, vec![]);
        }
        let message = ids.remove(0);
        (Some(message), ids)
    }

    /// `event.context` of a boundary: `contextEntries` (`{sourceEntry, messages}` for each
    /// entry of the projection), `contextMessages` (the transcript), `llmMessages` (what the
    /// model is sent), `pendingMessages` (queued steering and follow-ups) and `canContinue`.
    fn boundary_context(&self) -> BoundaryContext {
        let context_entries: Vec<ContextEntry> = self
            .inner
            .store
            .lock()
            .build_projection()
            .into_iter()
            .map(|p| ContextEntry {
                source_entry: p.entry,
                messages: p.messages,
            })
            .collect();
        let messages = self.transcript().clone();
        let llm = self.llm_messages(&messages);
        let can_continue = llm
            .iter()
            .rev()
            .find(|m| !matches!(m, Message::System(_)))
            .is_some_and(|m| !matches!(m, Message::Assistant(_)));
        let pending = self.inner.pending.lock().queues.pending();
        BoundaryContext {
            context_entries,
            context_messages: messages,
            llm_messages: llm,
            pending_messages: pending,
            can_continue,
        }
    }

    /// Validates the proposal as a whole and appends its entries in order (`entry_appended`
    /// for each), then rebuilds the context. An invalid proposal is reported
    /// (`extension_error` from `<boundary>`) and nothing of it is appended; a write that fails
    /// midway stops there (persistence is not transactional, as upstream).
    fn commit_drafts(&self, event: &str, entries: Vec<Value>) {
        if entries.is_empty() {
            return;
        }
        let drafts = match self.validate_drafts(event, entries) {
            Ok(d) => d,
            Err(e) => {
                if let Some(ext) = self.extensions() {
                    ext.boundary_error(event, &e.to_string());
                }
                return;
            }
        };
        let mut appended: Vec<SessionEntry> = vec![];
        let mut failure: Option<String> = None;
        let context = {
            let mut store = self.inner.store.lock();
            for d in drafts {
                let r: Result<SessionEntry, String> = match d {
                    Draft::Custom { custom_type, data } => store
                        .append_custom_entry(&custom_type, data)
                        .cloned()
                        .map_err(|e| e.to_string()),
                    Draft::CustomMessage(c) => store
                        .append_entry(EntryKind::CustomMessage(c))
                        .cloned()
                        .map_err(|e| e.to_string()),
                    Draft::ContextEdit {
                        target_id,
                        replacement,
                    } => store
                        .append_context_edit(&target_id, replacement)
                        .cloned()
                        .map_err(|e| e.to_string()),
                    Draft::Compaction {
                        summary,
                        first_kept_entry_id,
                        tokens_before,
                        details,
                    } => store
                        .append_compaction(
                            &summary,
                            first_kept_entry_id.as_deref(),
                            tokens_before,
                            details,
                            Some(true),
                            None,
                        )
                        .cloned()
                        .map_err(|e| e.to_string()),
                };
                match r {
                    Ok(entry) => appended.push(entry),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            (!appended.is_empty()).then(|| store.build_context())
        };
        if let Some(context) = context {
            *self.transcript() = context;
        }
        for entry in appended {
            self.emit(RpcEvent::EntryAppended { entry });
        }
        if let (Some(e), Some(ext)) = (failure, self.extensions()) {
            ext.boundary_error(event, &e);
        }
    }

    /// Decodes every draft and checks `context_edit` targets before anything is appended.
    fn validate_drafts(&self, event: &str, entries: Vec<Value>) -> Result<Vec<Draft>, DraftError> {
        let store = self.inner.store.lock();
        let mut out = Vec::with_capacity(entries.len());
        for (index, v) in entries.into_iter().enumerate() {
            let d: Draft = serde_json::from_value(v).map_err(|e| DraftError::Shape {
                event: event.to_string(),
                index,
                reason: e.to_string(),
            })?;
            if let Draft::ContextEdit { target_id, .. } = &d {
                if store.entry(target_id).is_none() {
                    return Err(DraftError::Target {
                        event: event.to_string(),
                        index,
                        target: target_id.clone(),
                    });
                }
            }
            out.push(d);
        }
        Ok(out)
    }
}
