//! Read-only views of a session: `get_state`, `get_session_stats`, `get_last_assistant_text`,
//! `get_entries`, `get_tree`, `get_fork_messages` (spec rpc-protocol.md §4.2, §4.9).

use super::convert::context_tokens;
use super::queues::QueueKind;
use super::AgentSession;
use crate::protocol::rpc::{
    js_string, ContextUsage, EntriesData, ForkMessage, SessionState, SessionStats, TokenTotals,
    TreeData,
};
use crate::session::EntryKind;
use crate::tools::util::json_number;
use pi_ai::{Message, Model, StopReason};
use serde::Deserialize;

/// The branch has a compaction and no later reply (neither aborted nor an error) with usage:
/// context usage is unknown (agent-loop.md §10.3).
fn compaction_without_usage(store: &crate::session::SessionManager) -> bool {
    for e in store.branch().into_iter().rev() {
        // Large files keep messages on disk (`EntryKind::Stored`): read each back as needed.
        let e = store.materialize(&e);
        match &e.kind {
            EntryKind::Compaction(_) => return true,
            EntryKind::Message(Message::Assistant(a))
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
                    && super::compaction::prepare::usage_tokens(&a.usage) > 0 =>
            {
                return false
            }
            _ => {}
        }
    }
    false
}
use serde_json::Value;

impl AgentSession {
    /// `get_state` data (rpc-protocol.md §4.2).
    pub fn state(&self) -> SessionState {
        let (model, thinking_level) = {
            let st = self.inner.setup.lock();
            (
                st.model.clone().unwrap_or_else(Model::unknown),
                st.thinking_level,
            )
        };
        let (steering_mode, follow_up_mode, pending) = {
            let pending = self.inner.pending.lock();
            let q = &pending.queues;
            (
                q.mode(QueueKind::Steering).clone(),
                q.mode(QueueKind::FollowUp).clone(),
                q.pending_count() as u64,
            )
        };
        let (session_file, session_id, session_name) = {
            let store = self.inner.store.lock();
            (
                store
                    .session_file()
                    .map(|f| f.to_string_lossy().into_owned()),
                store.session_id().to_string(),
                store.session_name(),
            )
        };
        let phase = self.phase();
        SessionState {
            model,
            thinking_level: thinking_level.as_str().to_string(),
            is_streaming: phase.is_streaming(),
            is_compacting: phase.is_compacting() || self.inner.compaction.refuses_prompt(),
            steering_mode,
            follow_up_mode,
            session_file,
            session_id,
            session_name,
            auto_compaction_enabled: self.auto_compaction(),
            message_count: self.transcript().len() as u64,
            pending_message_count: pending,
        }
    }

    /// The last assistant message of the active branch, also one a `context_edit` hid from
    /// the context (a reply cut at the output limit is hidden as soon as its run ends, 1.6
    /// notes §5), or `None` when the branch has none. Print mode reads it to answer a cut reply
    /// as upstream's `print-mode.ts` means to (its `stopReason === "length"` branch).
    pub fn last_branch_assistant(&self) -> Option<pi_ai::AssistantMessage> {
        let store = self.inner.store.lock();
        store
            .branch()
            .into_iter()
            .rev()
            .find_map(|e| match &store.materialize(&e).kind {
                EntryKind::Message(Message::Assistant(a)) => Some(a.clone()),
                _ => None,
            })
    }

    /// Text of the last assistant message (skipping aborted empty ones), or `None`.
    pub fn last_assistant_text(&self) -> Option<String> {
        self.transcript().iter().rev().find_map(|m| match m {
            Message::Assistant(a)
                if a.stop_reason == StopReason::Aborted && a.content.is_empty() =>
            {
                None
            }
            Message::Assistant(a) => Some(a.text()),
            _ => None,
        })
    }

    /// `get_session_stats` data: totals over the whole session file (1.6 notes §9).
    pub fn session_stats(&self) -> SessionStats {
        // Counted and summed in entry order, as upstream's `getSessionStats` (the float sum of
        // `cost` depends on the order): `usage` entries, summarization calls (compaction and
        // branch summary entries with usage), tool results that carry a `usage`, assistant
        // messages.
        let (counts, totals, session_id, session_file, after_compaction) = {
            let store = self.inner.store.lock();
            let mut counts = MessageCounts::default();
            let mut totals = UsageTotals::default();
            store.visit_entries(|e| {
                match &e.kind {
                    EntryKind::Usage(u) => totals.add(&u.usage),
                    EntryKind::Compaction(c) => c.usage.iter().for_each(|u| totals.add(u)),
                    EntryKind::BranchSummary(b) => b.usage.iter().for_each(|u| totals.add(u)),
                    _ => {}
                }
                let Some(m) = e.message() else { return };
                counts.total += 1;
                match m {
                    Message::User(_) => counts.user += 1,
                    Message::ToolResult(r) => {
                        counts.results += 1;
                        if let Some(u) = r
                            .extra
                            .get("usage")
                            .and_then(|u| pi_ai::Usage::deserialize(u).ok())
                        {
                            totals.add(&u);
                        }
                    }
                    Message::Assistant(a) => {
                        counts.assistant += 1;
                        counts.calls += a.tool_calls().count() as u64;
                        totals.add(&a.usage);
                    }
                    _ => {}
                }
            });
            (
                counts,
                totals,
                store.session_id().to_string(),
                store
                    .session_file()
                    .map(|f| f.to_string_lossy().into_owned()),
                compaction_without_usage(&store),
            )
        };
        let MessageCounts {
            user,
            assistant,
            calls,
            results,
            total,
        } = counts;
        let UsageTotals {
            input,
            output,
            cache_read: cr,
            cache_write: cw,
            cost,
        } = totals;
        let window = self.model().map(|m| m.context_window).unwrap_or(0);
        let tokens = (!after_compaction).then(|| context_tokens(&self.transcript()));
        SessionStats {
            session_id,
            session_file,
            user_messages: user,
            assistant_messages: assistant,
            tool_calls: calls,
            tool_results: results,
            total_messages: total,
            tokens: TokenTotals {
                input,
                output,
                cache_read: cr,
                cache_write: cw,
                total: input + output + cr + cw,
            },
            cost: json_number(cost),
            context_usage: (window > 0).then(|| ContextUsage {
                tokens,
                context_window: window,
                percent: tokens
                    .map(|t| json_number(t as f64 / window as f64 * 100.0))
                    .unwrap_or(Value::Null),
            }),
        }
    }

    /// `get_entries {since?}`: every entry in file order, or those strictly after `since`.
    /// A cursor that names no entry (also `""` and `null`) is `Entry not found: <since>`.
    pub fn entries(&self, since: Option<&Value>) -> Result<EntriesData, String> {
        let store = self.inner.store.lock();
        let entries = match since {
            None => store.loaded_entries(),
            Some(Value::String(id)) => store
                .entries_since(id)
                .ok_or_else(|| format!("Entry not found: {id}"))?,
            Some(other) => return Err(format!("Entry not found: {}", js_string(other))),
        };
        Ok(EntriesData {
            entries,
            leaf_id: store.leaf_id().map(str::to_string),
        })
    }

    /// `get_tree`: the entry tree and the leaf.
    pub fn tree(&self) -> TreeData {
        let store = self.inner.store.lock();
        TreeData {
            tree: store.get_tree(),
            leaf_id: store.leaf_id().map(str::to_string),
        }
    }

    /// `get_fork_messages`: every user message entry (all branches, file order) with text.
    pub fn fork_messages(&self) -> Vec<ForkMessage> {
        let store = self.inner.store.lock();
        let mut out = Vec::new();
        store.visit_entries(|e| {
            if let Some(Message::User(u)) = e.message() {
                let text = u.content.joined_text();
                if !text.is_empty() {
                    out.push(ForkMessage {
                        entry_id: e.id.clone(),
                        text,
                    });
                }
            }
        });
        out
    }
}

/// Message counts of [`AgentSession::session_stats`].
#[derive(Default)]
struct MessageCounts {
    user: u64,
    assistant: u64,
    calls: u64,
    results: u64,
    total: u64,
}

/// Usage summed over a session (upstream `usage-totals.js` `addUsageToTotals`): tokens, and
/// the dollar cost (`cost.total` of each usage).
#[derive(Default)]
struct UsageTotals {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    cost: f64,
}

impl UsageTotals {
    fn add(&mut self, u: &pi_ai::Usage) {
        self.input += u.input;
        self.output += u.output;
        self.cache_read += u.cache_read;
        self.cache_write += u.cache_write;
        self.cost += u.cost.total;
    }
}
