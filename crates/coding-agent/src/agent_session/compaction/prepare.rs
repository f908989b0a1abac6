//! What a compaction summarizes and keeps (spec agent-loop.md §8.5, §10; upstream 1.6
//! docs/compaction.md "How It Works", "Cut Point Rules", "Split user-message spans"). Pure
//! functions over the context projection of the active branch.

use super::files::FileOps;
use crate::agent_session::convert::estimate_tokens;
use crate::session::{current_system_message, entry_context_messages, ProjectedEntry};
use crate::session::{EntryKind, SessionEntry};
use pi_ai::{Message, StopReason, Usage};
use std::borrow::Borrow;
use std::collections::HashSet;

/// What to summarize and where the kept part starts (upstream `CompactionPreparation`).
#[derive(Debug, Clone, PartialEq)]
pub struct Preparation {
    /// Id of the first entry kept verbatim.
    pub first_kept_entry_id: String,
    /// Messages before the kept part (or before the split turn), system messages left out.
    pub messages_to_summarize: Vec<Message>,
    /// The split turn's messages before the cut point (empty unless `is_split_turn`).
    pub turn_prefix_messages: Vec<Message>,
    /// The cut falls inside a turn.
    pub is_split_turn: bool,
    /// Context tokens before compaction ([`projected_context_tokens`]).
    pub tokens_before: u64,
    /// The summary of the previous compaction in the context, if any.
    pub previous_summary: Option<String>,
    /// File operations of the summarized messages and of the previous summary.
    pub file_ops: FileOps,
}

/// `calculateContextTokens`: `totalTokens`, or the sum of the four counters when it is 0.
pub fn usage_tokens(u: &Usage) -> u64 {
    if u.total_tokens > 0 {
        u.total_tokens
    } else {
        u.input + u.output + u.cache_read + u.cache_write
    }
}

/// The index and usage tokens of the last assistant message that was neither aborted nor an
/// error and has non-zero usage.
fn last_usage<M: Borrow<Message>>(messages: &[M]) -> Option<(usize, u64)> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m.borrow() {
            Message::Assistant(a)
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
                    && usage_tokens(&a.usage) > 0 =>
            {
                Some((i, usage_tokens(&a.usage)))
            }
            _ => None,
        })
}

/// `estimateContextTokens(messages)`: last valid usage plus estimates of the messages after
/// it; else the estimate of every message. Returns `(tokens, index of the usage message)`.
/// Generic over owned messages and references, so the per-turn checks borrow the projection
/// instead of copying it (issue 24).
pub fn context_tokens<M: Borrow<Message>>(messages: &[M]) -> (u64, Option<usize>) {
    let estimate = |m: &M| estimate_tokens(m.borrow());
    match last_usage(messages) {
        Some((i, used)) => (
            used + messages[i + 1..].iter().map(estimate).sum::<u64>(),
            Some(i),
        ),
        None => (messages.iter().map(estimate).sum(), None),
    }
}

/// Sum of `estimateTokens` over `messages` (`estimatedTokensAfter`).
pub fn estimate_messages(messages: &[Message]) -> u64 {
    messages.iter().map(estimate_tokens).sum()
}

/// `estimateProjectedContextTokens`: the usage-based estimate when its usage message comes
/// after the latest `context_edit`/`compaction` on `branch`; otherwise a pure estimate: the
/// replayed system message plus every non-system message.
pub fn projected_context_tokens(projection: &[ProjectedEntry], branch: &[&SessionEntry]) -> u64 {
    let messages: Vec<&Message> = projection.iter().flat_map(|p| &p.messages).collect();
    let (tokens, usage_index) = context_tokens(&messages);
    if let Some(ui) = usage_index {
        let mut seen = 0;
        let mut usage_entry = None;
        for p in projection {
            if ui < seen + p.messages.len() {
                usage_entry = Some(p.entry.id.as_str());
                break;
            }
            seen += p.messages.len();
        }
        let usage_pos = usage_entry.and_then(|id| branch.iter().position(|e| e.id == id));
        let invalidating = branch.iter().rposition(|e| {
            matches!(
                e.kind,
                EntryKind::ContextEdit { .. } | EntryKind::Compaction(_)
            )
        });
        let valid = match (usage_pos, invalidating) {
            (Some(u), Some(inv)) => u > inv,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if valid {
            return tokens;
        }
    }
    let system = current_system_message(&messages)
        .map(|s| estimate_tokens(&Message::System(s)))
        .unwrap_or(0);
    system
        + messages
            .iter()
            .filter(|m| !matches!(m, Message::System(_)))
            .map(|m| estimate_tokens(m))
            .sum::<u64>()
}

fn is_turn_start_message(m: &Message) -> bool {
    matches!(
        m.role(),
        "user" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

fn is_cut_point_message(m: &Message) -> bool {
    is_turn_start_message(m) || m.role() == "assistant"
}

fn is_compaction(p: &ProjectedEntry) -> bool {
    matches!(p.entry.kind, EntryKind::Compaction(_))
}

fn is_turn_start(p: &ProjectedEntry) -> bool {
    !is_compaction(p) && p.messages.iter().any(is_turn_start_message)
}

/// Cut point in `entries[start..end]`: `(first kept index, turn start index if split)`.
fn find_cut_point(
    entries: &[ProjectedEntry],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> (usize, Option<usize>) {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| {
            !is_compaction(&entries[i]) && entries[i].messages.iter().any(is_cut_point_message)
        })
        .collect();
    let Some(&first_cut) = cut_points.first() else {
        return (start, None);
    };
    let mut cut = first_cut;
    let mut accumulated = 0u64;
    let mut exceeded = false;
    for i in (start..end).rev() {
        let tokens: u64 = entries[i].messages.iter().map(estimate_tokens).sum();
        if tokens == 0 {
            continue;
        }
        accumulated += tokens;
        if accumulated >= keep_recent_tokens {
            exceeded = true;
            cut = cut_points
                .iter()
                .copied()
                .find(|&c| c >= i)
                .unwrap_or(cut_points[cut_points.len() - 1]);
            break;
        }
    }
    // A recovery attempt hidden by its context_edit lies after the last visible input: when
    // the suffix holds only such omitted entries (and invisible metadata), keep from the
    // omitted attempt on, so the input that caused it is summarized.
    let suffix = &entries[(cut + 1).min(end)..end];
    let visible = |p: &ProjectedEntry| {
        !matches!(p.entry.kind, EntryKind::ContextEdit { .. })
            && !entry_context_messages(&p.entry).is_empty()
    };
    let omitted = |p: &ProjectedEntry| visible(p) && p.messages.is_empty();
    let omitted_ids: HashSet<&str> = suffix
        .iter()
        .filter(|p| omitted(p))
        .map(|p| p.entry.id.as_str())
        .collect();
    let external_replacement = suffix.iter().any(|p| match &p.entry.kind {
        EntryKind::ContextEdit {
            target_id,
            replacement: Some(_),
        } => !omitted_ids.contains(target_id.as_str()),
        _ => false,
    });
    let omitted_assistant = suffix
        .iter()
        .any(|p| matches!(&p.entry.kind, EntryKind::Message(Message::Assistant(_))) && omitted(p));
    let only_omitted = suffix
        .iter()
        .all(|p| !is_compaction(p) && (!visible(p) || omitted(p)));
    if exceeded && !external_replacement && omitted_assistant && only_omitted {
        cut += 1;
    }
    while cut > start {
        let prev = &entries[cut - 1];
        if is_compaction(prev) || !prev.messages.is_empty() {
            break;
        }
        cut -= 1;
    }
    if cut >= end || is_turn_start(&entries[cut]) {
        return (cut, None);
    }
    let turn_start = (start..=cut).rev().find(|&i| is_turn_start(&entries[i]));
    (cut, turn_start)
}

fn summarizable(entries: &[ProjectedEntry]) -> Vec<Message> {
    entries
        .iter()
        .filter(|p| !is_compaction(p))
        .flat_map(|p| p.messages.iter())
        .filter(|m| !matches!(m, Message::System(_)))
        .cloned()
        .collect()
}

/// `prepareCompaction(pathEntries, settings)`: `None` when the branch ends with a compaction
/// or nothing lies before the cut point (the caller reports "Nothing to compact").
pub fn prepare(
    projection: &[ProjectedEntry],
    branch: &[&SessionEntry],
    keep_recent_tokens: u64,
) -> Option<Preparation> {
    if branch
        .last()
        .is_some_and(|e| matches!(e.kind, EntryKind::Compaction(_)))
    {
        return None;
    }
    let prev = projection
        .iter()
        .position(|p| is_compaction(p) && !p.messages.is_empty());
    let (previous_summary, prev_details, start) = match prev {
        Some(i) => match &projection[i].entry.kind {
            EntryKind::Compaction(c) => (
                Some(c.summary.clone()),
                (c.from_hook != Some(true))
                    .then(|| c.details.clone())
                    .flatten(),
                i + 1,
            ),
            _ => (None, None, i + 1),
        },
        None => (None, None, 0),
    };
    let end = projection.len();
    let tokens_before = projected_context_tokens(projection, branch);
    let (cut, turn_start) = find_cut_point(projection, start, end, keep_recent_tokens);
    let first_kept_entry_id = projection.get(cut)?.entry.id.clone();
    if first_kept_entry_id.is_empty() {
        return None;
    }
    let history_end = turn_start.unwrap_or(cut);
    let messages_to_summarize = summarizable(&projection[start..history_end]);
    let turn_prefix_messages = match turn_start {
        Some(ts) => summarizable(&projection[ts..cut]),
        None => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return None;
    }
    let mut file_ops = FileOps::default();
    if let Some(d) = &prev_details {
        file_ops.add_details(d);
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(m);
    }
    Some(Preparation {
        first_kept_entry_id,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: turn_start.is_some(),
        tokens_before,
        previous_summary,
        file_ops,
    })
}
