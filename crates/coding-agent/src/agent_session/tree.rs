//! Tree navigation (`ctx.navigateTree(targetId, options?)`, upstream 1.6
//! `AgentSession.navigateTree`, docs/extensions.md "ctx.navigateTree", docs/sessions.md): moves
//! the leaf to another point of the session tree, optionally writing a `branch_summary` of the
//! branch left (pi's own summary, or one a `session_before_tree` handler supplies), with the
//! `session_before_tree` / `session_tree` events around it.

use super::compaction::files::FileOps;
use super::compaction::prompt;
use super::compaction::CompactionState;
use super::convert::{convert_to_llm, estimate_tokens};
use super::AgentSession;
use crate::extensions::wire::{SessionEvent, TreePreparation};
use crate::protocol::rpc::{CompactionReason, SummarizationSource};
use crate::session::{entry_context_messages, EntryKind, SessionEntry};
use pi_ai::{Content, Message, Usage};
use serde_json::Value;
use std::collections::HashSet;
use tokio_util::sync::CancellationToken;

/// What upstream puts before a branch summary.
const BRANCH_SUMMARY_PREAMBLE: &str =
    "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n";

/// Upstream 1.6's branch summary instructions.
const BRANCH_SUMMARY_PROMPT: &str =
    "Create a structured summary of this conversation branch for context when returning later.

Use this EXACT format:

## Goal
[What was the user trying to accomplish in this branch?]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned]
- [Or \"(none)\" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Work that was started but not finished]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [What should happen next to continue this work]

Keep each section concise. Preserve exact file paths, function names, and error messages.";

/// The options of `ctx.navigateTree` (upstream `NavigateTreeOptions`).
#[derive(Debug, Clone, Default)]
pub struct NavigateOptions {
    /// Summarize the branch left.
    pub summarize: bool,
    /// Instructions for the summarizer.
    pub custom_instructions: Option<String>,
    /// `true`: the instructions replace the default prompt (else they are appended as
    /// "Additional focus").
    pub replace_instructions: Option<bool>,
    /// Label for the summary entry, or for the target without a summary.
    pub label: Option<String>,
}

/// What a navigation did (upstream's RPC-mode result is `{cancelled}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Navigated {
    /// A `session_before_tree` handler cancelled it, or the summary was aborted.
    pub cancelled: bool,
    /// The text of the user (or custom) message navigated to, for the editor.
    pub editor_text: Option<String>,
}

/// Marks a tree navigation in progress on the session's [`CompactionState`] while alive.
struct BranchInProgress<'a> {
    state: &'a CompactionState,
    n: u64,
}

impl<'a> BranchInProgress<'a> {
    fn begin(state: &'a CompactionState, cancel: &CancellationToken) -> Self {
        let n = state.begin_branch(cancel);
        BranchInProgress { state, n }
    }
}

impl Drop for BranchInProgress<'_> {
    fn drop(&mut self) {
        self.state.end_branch(self.n);
    }
}

/// A summary to record: text, `details`, whether an extension gave it, usage.
struct BranchSummary {
    text: String,
    details: Option<Value>,
    from_extension: bool,
    usage: Option<Usage>,
}

/// The text of content that is a string or blocks (text blocks joined without separator, as
/// upstream `contentText(content, "")`).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| serde_json::from_value::<Content>(b.clone()).ok())
            .filter_map(|c| c.as_text().map(str::to_string))
            .collect(),
        _ => String::new(),
    }
}

/// The entries of the branch left when going from `old_leaf` to `target_id` (upstream
/// `collectEntriesForBranchSummary`): those from the old leaf back to (not including) the
/// deepest entry on both paths, oldest first, and that common ancestor.
fn branch_left(
    store: &crate::session::SessionManager,
    old_leaf: &str,
    target_id: &str,
) -> (Vec<SessionEntry>, Option<String>) {
    let old_path = store.branch_to(old_leaf);
    let on_old: HashSet<&str> = old_path.iter().map(|e| e.id.as_str()).collect();
    let common = store
        .branch_to(target_id)
        .iter()
        .rev()
        .find(|e| on_old.contains(e.id.as_str()))
        .map(|e| e.id.clone());
    let mut entries: Vec<SessionEntry> = old_path
        .iter()
        .rev()
        .take_while(|e| Some(&e.id) != common.as_ref())
        .map(|e| store.materialize(e).into_owned())
        .collect();
    entries.reverse();
    (entries, common)
}

/// Where the leaf goes for `target` and the editor text: a user or custom message's parent
/// and its text; any other entry itself and none.
fn landing(target: &SessionEntry) -> (Option<String>, Option<String>) {
    let text = |content: Value| Some(content_text(&content));
    match &target.kind {
        EntryKind::Message(Message::User(u)) => (
            target.parent_id.clone(),
            text(serde_json::to_value(&u.content).unwrap_or(Value::Null)),
        ),
        EntryKind::CustomMessage(c) => (
            target.parent_id.clone(),
            text(serde_json::to_value(&c.content).unwrap_or(Value::Null)),
        ),
        _ => (Some(target.id.clone()), None),
    }
}

impl AgentSession {
    /// Navigates to `target_id` (upstream `navigateTree`). Errors (upstream's texts): a run or
    /// compaction is active, `summarize` without a model, an unknown entry, a failed summary,
    /// a write error. Navigating to the current leaf does nothing.
    ///
    /// A user message (or custom message) as target puts the leaf on its parent and returns
    /// its text as `editor_text`; any other entry becomes the leaf. With a summary, a
    /// `branch_summary` entry is appended at the new position (labelled with `label`);
    /// without, `label` goes to the target entry.
    pub async fn navigate_tree(
        &self,
        target_id: &str,
        options: NavigateOptions,
    ) -> Result<Navigated, String> {
        if self.is_streaming() {
            return Err(
                "Wait for the current response to finish before navigating the session tree."
                    .into(),
            );
        }
        if self.is_compacting() {
            return Err("Wait for the current compaction or tree navigation to finish before navigating the session tree.".into());
        }
        // Read before the store is locked: `setup` comes before `store` (lock order, module
        // docs of `agent_session`).
        let no_model = self.model().is_none();
        let (old_leaf, target, to_summarize, common) = {
            let store = self.inner.store.lock();
            let old_leaf = store.leaf_id().map(str::to_string);
            if old_leaf.as_deref() == Some(target_id) {
                return Ok(Navigated::default());
            }
            if options.summarize && no_model {
                return Err("No model available for summarization".into());
            }
            let Some(target) = store
                .entry(target_id)
                .map(|e| store.materialize(&e).into_owned())
            else {
                return Err(format!("Entry {target_id} not found"));
            };
            let (entries, common) = match &old_leaf {
                None => (vec![], None),
                Some(old) => branch_left(&store, old, target_id),
            };
            (old_leaf, target, entries, common)
        };
        let mut custom = options.custom_instructions.clone();
        let mut replace = options.replace_instructions;
        let mut label = options.label.clone();
        let mut summary: Option<BranchSummary> = None;
        // From here until `session_tree` the navigation is in progress (upstream's
        // `_branchSummaryAbortController`): a second navigation and a prompt are refused, and
        // `abort` cancels the branch summary.
        let cancel = CancellationToken::new();
        let in_progress = BranchInProgress::begin(&self.inner.compaction, &cancel);
        if let Some(ext) = self.extensions().cloned() {
            let reply = ext
                .emit_session_event_until(
                    &SessionEvent::SessionBeforeTree {
                        preparation: TreePreparation {
                            target_id,
                            old_leaf_id: old_leaf.as_deref(),
                            common_ancestor_id: common.as_deref(),
                            entries_to_summarize: &to_summarize,
                            user_wants_summary: options.summarize,
                            custom_instructions: options.custom_instructions.as_deref(),
                            replace_instructions: options.replace_instructions,
                            label: options.label.as_deref(),
                        },
                    },
                    &cancel,
                )
                .await;
            if reply.cancel {
                return Ok(Navigated {
                    cancelled: true,
                    editor_text: None,
                });
            }
            if options.summarize {
                if let Some(s) = reply.summary {
                    if let Some(text) = s.summary {
                        summary = Some(BranchSummary {
                            text,
                            details: s.details,
                            from_extension: true,
                            usage: s.usage,
                        });
                    }
                }
            }
            if reply.custom_instructions.is_some() {
                custom = reply.custom_instructions;
            }
            if reply.replace_instructions.is_some() {
                replace = reply.replace_instructions;
            }
            if reply.label.is_some() {
                label = reply.label;
            }
        }
        if options.summarize && summary.is_none() && !to_summarize.is_empty() {
            match self
                .branch_summary(
                    &to_summarize,
                    custom.as_deref(),
                    replace == Some(true),
                    cancel,
                )
                .await?
            {
                Some(s) => summary = Some(s),
                None => {
                    return Ok(Navigated {
                        cancelled: true,
                        editor_text: None,
                    })
                }
            }
        }
        let (new_leaf, editor_text) = landing(&target);
        let summary_entry = self.move_leaf(
            new_leaf.as_deref(),
            target_id,
            summary.as_ref(),
            label.as_deref(),
        )?;
        let from_extension = summary.as_ref().map(|s| s.from_extension);
        // The new context is in place: `session_tree` handlers may prompt or navigate again.
        drop(in_progress);
        if let Some(ext) = self.extensions().cloned() {
            let new_leaf_now = self.inner.store.lock().leaf_id().map(str::to_string);
            ext.emit_session_event(&SessionEvent::SessionTree {
                new_leaf_id: new_leaf_now.as_deref(),
                old_leaf_id: old_leaf.as_deref(),
                summary_entry: summary_entry.as_ref(),
                from_extension,
            })
            .await;
        }
        Ok(Navigated {
            cancelled: false,
            editor_text,
        })
    }

    /// Moves the leaf to `new_leaf` (`None` = before the root): with `summary`, by appending
    /// the `branch_summary` entry there (returned; `label` goes on it), else by moving the
    /// leaf (`label` goes on `target_id`). The context is rebuilt from the new branch.
    fn move_leaf(
        &self,
        new_leaf: Option<&str>,
        target_id: &str,
        summary: Option<&BranchSummary>,
        label: Option<&str>,
    ) -> Result<Option<SessionEntry>, String> {
        let label = label.filter(|l| !l.is_empty());
        let mut store = self.inner.store.lock();
        let written = match summary {
            Some(s) => {
                let entry = store
                    .branch_with_summary(
                        new_leaf,
                        &s.text,
                        s.details.clone(),
                        Some(s.from_extension),
                        s.usage.clone(),
                    )
                    .map_err(|e| e.to_string())?
                    .clone();
                if let Some(l) = label {
                    store
                        .append_label_change(&entry.id, Some(l))
                        .map_err(|e| e.to_string())?;
                }
                Some(entry)
            }
            None => {
                match new_leaf {
                    None => store.reset_leaf(),
                    Some(id) => store.set_leaf(id).map_err(|e| e.to_string())?,
                }
                if let Some(l) = label {
                    store
                        .append_label_change(target_id, Some(l))
                        .map_err(|e| e.to_string())?;
                }
                None
            }
        };
        let context = store.build_context();
        drop(store);
        *self.transcript() = context;
        Ok(written)
    }

    /// pi's summary of the branch left (upstream `generateBranchSummary`): the entries'
    /// context messages (tool results left out), newest first within the model's context
    /// window minus `branchSummary.reserveTokens`, serialized, with upstream's instructions,
    /// the file lists appended. `None`: aborted.
    async fn branch_summary(
        &self,
        entries: &[SessionEntry],
        custom: Option<&str>,
        replace: bool,
        cancel: CancellationToken,
    ) -> Result<Option<BranchSummary>, String> {
        let Some(model) = self.model() else {
            return Err("No model available for summarization".into());
        };
        let reserve = self
            .inner
            .services
            .settings
            .lock()
            .branch_summary_reserve_tokens();
        let window = if model.context_window == 0 {
            128_000
        } else {
            model.context_window
        };
        let budget = window.saturating_sub(reserve);
        let mut files = FileOps::default();
        for e in entries {
            if let EntryKind::BranchSummary(b) = &e.kind {
                if b.from_hook != Some(true) {
                    if let Some(d) = &b.details {
                        files.add_details(d);
                    }
                }
            }
        }
        let mut messages: Vec<Message> = Vec::new();
        let mut total = 0u64;
        for e in entries.iter().rev() {
            let is_summary = matches!(
                e.kind,
                EntryKind::Compaction(_) | EntryKind::BranchSummary(_)
            );
            // An entry's own message (a compaction's summary, not its system snapshot); tool
            // results are left out (their call is in the assistant message).
            let Some(message) = entry_context_messages(e).into_iter().last() else {
                continue;
            };
            if matches!(message, Message::ToolResult(_)) {
                continue;
            }
            files.add_message(&message);
            let tokens = estimate_tokens(&message);
            if budget > 0 && total + tokens > budget {
                if is_summary && (total as f64) < budget as f64 * 0.9 {
                    messages.insert(0, message);
                }
                break;
            }
            messages.insert(0, message);
            total += tokens;
        }
        if messages.is_empty() {
            return Ok(Some(BranchSummary {
                text: "No content to summarize".into(),
                details: None,
                from_extension: false,
                usage: None,
            }));
        }
        let conversation = prompt::serialize_conversation(&convert_to_llm(&messages));
        let instructions = match custom {
            Some(c) if replace => c.to_string(),
            Some(c) => format!("{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {c}"),
            None => BRANCH_SUMMARY_PROMPT.to_string(),
        };
        let text = format!("<conversation>\n{conversation}\n</conversation>\n\n{instructions}");
        let mut summarizer = self
            .summarizer(&model, CompactionReason::Manual, cancel)
            .await
            .map_err(|e| e.to_string())?;
        summarizer.source = SummarizationSource::BranchSummary;
        let s = match summarizer.summarize(text, "Branch summarization").await {
            Ok(s) => s,
            Err(super::compaction::CompactionError::Aborted) => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let text = format!(
            "{BRANCH_SUMMARY_PREAMBLE}{}{}",
            s.text,
            files.summary_suffix()
        );
        Ok(Some(BranchSummary {
            text,
            details: Some(files.details()),
            from_extension: false,
            usage: Some(s.usage),
        }))
    }
}
