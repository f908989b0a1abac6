//! Compaction: summarizing old context so a long session fits the model's window (spec
//! agent-loop.md §8, §10; messages-and-models.md §6.1; sessions.md §3.4, §9; upstream 1.6
//! docs/compaction.md and docs/settings.md "Compaction").
//!
//! * [`prepare`]: cut point, what to summarize, token estimates on the context projection;
//! * [`prompt`]: the conversation as text and our summarization prompts;
//! * [`summarize`]: the summary requests, with `summarization_retry_*` events;
//! * [`files`]: read/modified file lists carried from summary to summary.
//!
//! This file holds the session side: the manual `compact` command, the check after each
//! low-level run and before a prompt (threshold and overflow recovery), the `compaction`
//! entry and the `compaction_start`/`compaction_end` events. The run loop (`run.rs`) calls
//! [`AgentSession::check_compaction`] after a run that is not retried (the retry decision of
//! `retry.rs` comes first), and `omit_attempt` for a truncated reply the check left in place.
//!
//! Bounds: overflow recovery is tried once per user message (a second overflow ends the run
//! with `Context overflow recovery failed after one compact-and-retry attempt…`); a compaction
//! that leaves the context above `contextWindow − reserveTokens` is reported as an error and
//! never followed by a retry or continuation; a failing summary request (also one that itself
//! overflows) is retried only for transient errors, at most `retry.maxRetries` times.

pub mod files;
pub mod prepare;
pub mod prompt;
pub mod summarize;

use super::convert::convert_to_llm;
use super::AgentSession;
use crate::config::CompactionSettings;
use crate::extensions::wire::{
    CompactionFileOps, CompactionPreparation, CompactionSettingsView, SessionEvent,
};
use crate::protocol::rpc::{CompactionReason, CompactionResult, RpcEvent};
use crate::session::{EntryKind, SessionEntry};
use parking_lot::Mutex;
use pi_ai::{AssistantMessage, Message, Model, StopReason};
use prepare::Preparation;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use summarize::{combine_usage, Summarizer};
use tokio_util::sync::CancellationToken;

/// Error text when overflow recovery already ran for this user message.
pub const OVERFLOW_RECOVERY_FAILED: &str = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model.";

/// Error text when recovery from a truncated (`length`) reply already ran.
pub const LENGTH_RECOVERY_FAILED: &str =
    "Truncated response recovery failed after one compact-and-retry attempt.";

/// Text of a manual compaction refused while one is running.
pub const MANUAL_BUSY: &str = "Compaction is already in progress.";

/// Error text of a prompt sent during a manual compaction (upstream wording of the refusal's
/// facts: wait for it to finish).
pub const PROMPT_DURING_COMPACTION: &str =
    "Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and retry.";

/// Why a compaction did not produce an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// Nothing lies before the cut point.
    #[error("Nothing to compact (session too small)")]
    NothingToCompact,
    /// The branch already ends with a compaction.
    #[error("Already compacted")]
    AlreadyCompacted,
    /// No model is selected (the no-model help text).
    #[error("{0}")]
    NoModel(String),
    /// The model's provider has no credentials or adapter.
    #[error("No API key for {0}")]
    NoApiKey(String),
    /// `abort` during the compaction.
    #[error("Compaction cancelled")]
    Aborted,
    /// A summary request failed (`Summarization failed: …`).
    #[error("{0}")]
    Summary(String),
    /// The compaction entry could not be written.
    #[error("Could not write the compaction entry: {0}")]
    Store(String),
}

/// A compaction that failed, and whether it was using the compaction an extension's
/// `session_before_compact` handler supplied (`session_compact_failed.fromExtension`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failed {
    /// Why it failed.
    error: CompactionError,
    /// An extension supplied the compaction (it then failed on an abort or a write error).
    from_extension: bool,
}

impl From<CompactionError> for Failed {
    fn from(error: CompactionError) -> Self {
        Self {
            error,
            from_extension: false,
        }
    }
}

/// What an automatic compaction led to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct AutoOutcome {
    /// Run the loop again (a retry after overflow recovery, or queued messages).
    proceed: bool,
    /// A compaction ran but left the context above the threshold (reported as an error).
    ineffective: bool,
}

/// Compaction state of one session.
#[derive(Debug, Default)]
pub struct CompactionState {
    /// Cancel token of a manual `compact` in progress.
    manual: Mutex<Option<CancellationToken>>,
    /// Cancel token of a tree navigation in progress (`ctx.navigateTree`, from its
    /// `session_before_tree` through the branch summary; upstream's
    /// `_branchSummaryAbortController`).
    branch: Mutex<Option<(u64, CancellationToken)>>,
    /// Number of the last tree navigation begun (identifies the slot's owner).
    branch_seq: AtomicU64,
    /// Overflow recovery already ran since the last user message.
    overflow_attempted: AtomicBool,
}

impl CompactionState {
    /// A manual compaction is in progress (`get_state.isCompacting`, prompt refusal).
    pub fn manual_running(&self) -> bool {
        self.manual.lock().is_some()
    }

    /// Cancels a manual compaction in progress (`abort`).
    pub fn abort_manual(&self) {
        if let Some(t) = self.manual.lock().as_ref() {
            t.cancel();
        }
    }

    /// A tree navigation (its `session_before_tree` or branch summary) is in progress.
    pub fn branch_running(&self) -> bool {
        self.branch.lock().is_some()
    }

    /// A manual compaction or a tree navigation is in progress: a prompt is refused with
    /// [`PROMPT_DURING_COMPACTION`] (upstream 1.6 `AgentSession.prompt` checks both
    /// controllers) and `get_state.isCompacting` is true.
    pub fn refuses_prompt(&self) -> bool {
        self.manual_running() || self.branch_running()
    }

    /// Marks a tree navigation in progress with `token` (what `abort` cancels); returns the
    /// number to pass to [`CompactionState::end_branch`].
    pub fn begin_branch(&self, token: &CancellationToken) -> u64 {
        let n = self.branch_seq.fetch_add(1, Ordering::SeqCst) + 1;
        *self.branch.lock() = Some((n, token.clone()));
        n
    }

    /// Ends tree navigation `n`: clears the slot if navigation `n` still holds it (a
    /// navigation a `session_tree` handler started owns the slot then, as upstream).
    pub fn end_branch(&self, n: u64) {
        let mut slot = self.branch.lock();
        if slot.as_ref().is_some_and(|(m, _)| *m == n) {
            *slot = None;
        }
    }

    /// Cancels a tree navigation in progress (`abort`; upstream `abortBranchSummary`).
    pub fn abort_branch(&self) {
        if let Some((_, t)) = self.branch.lock().as_ref() {
            t.cancel();
        }
    }

    /// A user message started or a reply succeeded: overflow recovery may run again.
    pub fn reset_overflow(&self) {
        self.overflow_attempted.store(false, Ordering::SeqCst);
    }
}

/// Resolves `compaction.*` for `model`: each of `reserveTokens`/`keepRecentTokens` from
/// `compaction.modelOverrides["provider/id"]`, else the plain setting, else the default;
/// `enabled` is global (docs/settings.md "Per-model overrides").
pub fn settings_for(settings: &crate::config::Settings, model: &Model) -> CompactionSettings {
    let mut s = settings.compaction();
    let key = format!("{}/{}", model.provider, model.id);
    if let Some(o) = settings
        .get_path(&["compaction", "modelOverrides"])
        .and_then(|v| v.get(&key))
    {
        if let Some(n) = o.get("reserveTokens").and_then(Value::as_u64) {
            s.reserve_tokens = n;
        }
        if let Some(n) = o.get("keepRecentTokens").and_then(Value::as_u64) {
            s.keep_recent_tokens = n;
        }
    }
    s
}

fn iso_ms(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.timestamp_millis())
}

/// `contextTokens > contextWindow − reserveTokens`, in signed arithmetic as JavaScript does.
fn over_threshold(tokens: u64, window: u64, reserve: u64) -> bool {
    i128::from(tokens) > i128::from(window) - i128::from(reserve)
}

/// What a `compaction` entry records, from pi's own summary or an extension's
/// `session_before_compact` reply.
struct Summarized {
    /// The summary text.
    summary: String,
    /// The entry the kept context starts at.
    first_kept_entry_id: String,
    /// Estimated context tokens before the compaction.
    tokens_before: u64,
    /// `details` of the entry (pi's: the file lists; an extension's: whatever it gave).
    details: Option<Value>,
    /// Usage of the summary requests (none for an extension's summary without one).
    usage: Option<pi_ai::Usage>,
}

impl AgentSession {
    fn compaction_settings(&self, model: &Model) -> CompactionSettings {
        let mut s = settings_for(&self.inner.services.settings.lock(), model);
        s.enabled = self.auto_compaction();
        s
    }

    /// The active branch (cloned) and its context projection. With `loaded`, every message
    /// payload of the branch is read back from disk (large files keep them as
    /// `EntryKind::Stored` stubs); without it stubs stay stubs, which is enough for the checks
    /// that only look at compaction and `context_edit` entries and ids.
    fn branch_and_projection(
        &self,
        loaded: bool,
    ) -> (Vec<SessionEntry>, Vec<crate::session::ProjectedEntry>) {
        let store = self.inner.store.lock();
        let branch: Vec<SessionEntry> = if loaded {
            store.loaded_branch()
        } else {
            store
                .branch()
                .into_iter()
                .map(std::borrow::Cow::into_owned)
                .collect()
        };
        (branch, store.build_projection())
    }

    /// Preparation for `model`'s settings, or why there is nothing to do.
    fn prepare_compaction(&self, model: &Model) -> Result<Preparation, CompactionError> {
        let settings = self.compaction_settings(model);
        let (branch, projection) = self.branch_and_projection(true);
        let refs: Vec<&SessionEntry> = branch.iter().collect();
        prepare::prepare(&projection, &refs, settings.keep_recent_tokens).ok_or_else(
            || match branch.last().map(|e| &e.kind) {
                Some(EntryKind::Compaction(_)) => CompactionError::AlreadyCompacted,
                _ => CompactionError::NothingToCompact,
            },
        )
    }

    pub(super) async fn summarizer(
        &self,
        model: &Model,
        reason: CompactionReason,
        cancel: CancellationToken,
    ) -> Result<Summarizer, CompactionError> {
        // A virtual model's summary goes where its router sends a `direct` request.
        let (model, thinking_level) = if crate::config::models::is_virtual(model) {
            self.route_virtual_model_off_worker(model, self.thinking_level(), true)
                .await
                .map_err(|e| CompactionError::Summary(format!("Summarization failed: {e}")))?
        } else {
            (model.clone(), self.thinking_level())
        };
        let provider = (self.inner.services.provider)(&model)
            .ok_or_else(|| CompactionError::NoApiKey(model.provider.clone()))?;
        let creds = self
            .request_credentials(&model)
            .await
            .map_err(|_| CompactionError::NoApiKey(model.provider.clone()))?;
        if let Some(e) = creds.error {
            return Err(CompactionError::Summary(format!(
                "Summarization failed: {e}"
            )));
        }
        let mut model = model;
        if let Some(base) = creds.base_url {
            model.base_url = base;
        }
        Ok(Summarizer {
            model,
            provider,
            api_key: creds.api_key,
            headers: creds.headers,
            thinking_level,
            retry: self.retry_policy(),
            cancel,
            sink: self.inner.sink.clone(),
            reason,
            source: crate::protocol::rpc::SummarizationSource::Compaction,
        })
    }

    /// Summarizes per `prep` — or takes the compaction an extension's `session_before_compact`
    /// handler returned ([`AgentSession::compaction_from_extensions`]) — appends the
    /// `compaction` entry, rebuilds the context, runs the `session_compact` handlers and
    /// returns the result (`estimatedTokensAfter` over the rebuilt context). A failure after an
    /// extension supplied the compaction (an abort, a write error) is
    /// [`Failed::from_extension`].
    async fn summarize_and_append(
        &self,
        model: &Model,
        prep: Preparation,
        reason: CompactionReason,
        custom: Option<&str>,
        will_retry: bool,
        cancel: &CancellationToken,
    ) -> Result<CompactionResult, Failed> {
        let hooked = self
            .compaction_from_extensions(&prep, reason, custom, will_retry, cancel)
            .await?;
        let from_extension = hooked.is_some();
        let failed = |error| Failed {
            error,
            from_extension,
        };
        let Summarized {
            summary,
            first_kept_entry_id,
            tokens_before,
            details,
            usage,
        } = match hooked {
            Some(c) => c,
            None => {
                let (summary, usage) = self
                    .default_summary(model, &prep, reason, custom, cancel)
                    .await?;
                Summarized {
                    summary,
                    first_kept_entry_id: prep.first_kept_entry_id.clone(),
                    tokens_before: prep.tokens_before,
                    details: Some(prep.file_ops.details()),
                    usage: Some(usage),
                }
            }
        };
        if cancel.is_cancelled() {
            return Err(failed(CompactionError::Aborted));
        }
        let (context, entry) = {
            let mut store = self.inner.store.lock();
            let entry = store
                .append_compaction(
                    &summary,
                    Some(&first_kept_entry_id),
                    tokens_before,
                    details.clone(),
                    Some(from_extension),
                    usage.clone(),
                )
                .map_err(|e| failed(CompactionError::Store(e.to_string())))?;
            let entry = entry.clone();
            (store.build_context(), entry)
        };
        let estimated_tokens_after = prepare::estimate_messages(&context);
        *self.transcript() = context;
        if let Some(ext) = self.extensions().cloned() {
            ext.emit_session_event(&SessionEvent::SessionCompact {
                compaction_entry: &entry,
                from_extension,
                reason,
                will_retry,
            })
            .await;
        }
        Ok(CompactionResult {
            summary,
            first_kept_entry_id,
            tokens_before,
            estimated_tokens_after,
            usage,
            details,
        })
    }

    /// Runs the extensions' `session_compact_failed` handlers (upstream docs/extensions.md:
    /// `{reason, errorMessage?, aborted, willRetry, fromExtension}`; `errorMessage` is the
    /// `compaction_end` one, absent when aborted or cancelled). `fromExtension`: the failed
    /// compaction was the one an extension's `session_before_compact` supplied (it fails
    /// only on an abort or a write error).
    async fn compaction_failed(
        &self,
        reason: CompactionReason,
        error_message: Option<String>,
        aborted: bool,
        will_retry: bool,
        from_extension: bool,
    ) {
        let Some(ext) = self.extensions().cloned() else {
            return;
        };
        ext.emit_session_event(&SessionEvent::SessionCompactFailed {
            reason,
            aborted,
            will_retry,
            from_extension,
            error_message: error_message.as_deref(),
        })
        .await;
    }

    /// Runs the extensions' `session_before_compact` handlers (upstream docs/extensions.md
    /// "session_before_compact"): the event carries `preparation` (`firstKeptEntryId`,
    /// `messagesToSummarize`, `turnPrefixMessages`, `isSplitTurn`, `tokensBefore`,
    /// `previousSummary`, `fileOps {read, written, edited}`, `settings`), `customInstructions`,
    /// `reason` and `willRetry` (the host adds `branchEntries` and `signal`, which fires when
    /// `cancel` does: [`crate::extensions::Extensions::emit_session_event_until`]). `{cancel: true}`
    /// is [`CompactionError::Aborted`] ("Compaction cancelled", as upstream); `{compaction:
    /// {summary, firstKeptEntryId?, tokensBefore?, usage?, details?}}` with a string summary is
    /// a [`Summarized`] (missing fields from the preparation); anything else (no handler, a
    /// failed host) is `None`: pi summarizes.
    async fn compaction_from_extensions(
        &self,
        prep: &Preparation,
        reason: CompactionReason,
        custom: Option<&str>,
        will_retry: bool,
        cancel: &CancellationToken,
    ) -> Result<Option<Summarized>, CompactionError> {
        const KIND: &str = "session_before_compact";
        let Some(ext) = self.extensions().cloned() else {
            return Ok(None);
        };
        if !ext.handles(KIND) {
            return Ok(None);
        }
        let settings =
            self.model()
                .map(|m| self.compaction_settings(&m))
                .map(|s| CompactionSettingsView {
                    enabled: s.enabled,
                    reserve_tokens: s.reserve_tokens,
                    keep_recent_tokens: s.keep_recent_tokens,
                });
        let event = SessionEvent::SessionBeforeCompact {
            preparation: CompactionPreparation {
                first_kept_entry_id: &prep.first_kept_entry_id,
                messages_to_summarize: &prep.messages_to_summarize,
                turn_prefix_messages: &prep.turn_prefix_messages,
                is_split_turn: prep.is_split_turn,
                tokens_before: prep.tokens_before,
                previous_summary: prep.previous_summary.as_deref(),
                file_ops: CompactionFileOps {
                    read: &prep.file_ops.read,
                    written: &prep.file_ops.written,
                    edited: &prep.file_ops.edited,
                },
                settings,
            },
            custom_instructions: custom,
            reason,
            will_retry,
        };
        let r = ext.emit_session_event_until(&event, cancel).await;
        if r.cancel {
            return Err(CompactionError::Aborted);
        }
        let Some(c) = r.compaction else {
            return Ok(None);
        };
        let Some(summary) = c.summary else {
            return Ok(None);
        };
        Ok(Some(Summarized {
            summary,
            first_kept_entry_id: c
                .first_kept_entry_id
                .unwrap_or_else(|| prep.first_kept_entry_id.clone()),
            tokens_before: c.tokens_before.unwrap_or(prep.tokens_before),
            details: c.details,
            usage: c.usage,
        }))
    }

    /// pi's own summary of `prep` (one request, or two for a split turn) with the file
    /// lists appended, and the usage of its requests.
    async fn default_summary(
        &self,
        model: &Model,
        prep: &Preparation,
        reason: CompactionReason,
        custom: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<(String, pi_ai::Usage), CompactionError> {
        let summarizer = self.summarizer(model, reason, cancel.clone()).await?;
        let history_request = |messages: &[Message]| {
            prompt::history_request(
                &prompt::serialize_conversation(&convert_to_llm(messages)),
                prep.previous_summary.as_deref(),
                custom,
            )
        };
        let (mut summary, usage) = if prep.is_split_turn && !prep.turn_prefix_messages.is_empty() {
            let mut history_text = prep
                .previous_summary
                .clone()
                .unwrap_or_else(|| prompt::NO_HISTORY.to_string());
            let mut history_usage = None;
            if !prep.messages_to_summarize.is_empty() {
                let h = summarizer
                    .summarize(
                        history_request(&prep.messages_to_summarize),
                        "Summarization",
                    )
                    .await?;
                history_text = h.text;
                history_usage = Some(h.usage);
            }
            let prefix_text = prompt::turn_prefix_request(
                &prompt::serialize_conversation(&convert_to_llm(&prep.turn_prefix_messages)),
                custom,
            );
            let p = summarizer
                .summarize(prefix_text, "Turn prefix summarization")
                .await?;
            let usage = match &history_usage {
                Some(h) => combine_usage(h, &p.usage),
                None => p.usage,
            };
            (
                format!("{history_text}{}{}", prompt::SPLIT_TURN_SEPARATOR, p.text),
                usage,
            )
        } else {
            let h = summarizer
                .summarize(
                    history_request(&prep.messages_to_summarize),
                    "Summarization",
                )
                .await?;
            (h.text, h.usage)
        };
        summary.push_str(&prep.file_ops.summary_suffix());
        Ok((summary, usage))
    }

    /// `compact {customInstructions?}` (rpc-protocol.md §4.6, agent-loop.md §8.4): aborts the
    /// run in flight, emits `compaction_start {reason:"manual"}`, summarizes and appends the
    /// entry, emits `compaction_end` and returns the result. `Err` is the response's error
    /// text: `Nothing to compact (session too small)`, `Already compacted`, `Compaction
    /// cancelled` (after `abort`), the summary failure, …
    pub async fn compact(
        &self,
        custom_instructions: Option<String>,
    ) -> Result<CompactionResult, String> {
        if self.inner.compaction.manual_running() {
            return Err(MANUAL_BUSY.into());
        }
        self.abort().await;
        let cancel = CancellationToken::new();
        {
            let mut slot = self.inner.compaction.manual.lock();
            if slot.is_some() {
                return Err(MANUAL_BUSY.into());
            }
            *slot = Some(cancel.clone());
        }
        self.emit(RpcEvent::CompactionStart {
            reason: CompactionReason::Manual,
        });
        let custom = custom_instructions.filter(|c| !c.is_empty());
        let result = async {
            let model = self
                .model()
                .ok_or_else(|| CompactionError::NoModel(crate::config::no_api_key_message(None)))?;
            let prep = self.prepare_compaction(&model)?;
            self.summarize_and_append(
                &model,
                prep,
                CompactionReason::Manual,
                custom.as_deref(),
                false,
                &cancel,
            )
            .await
        }
        .await;
        let result = match result {
            Err(f) if cancel.is_cancelled() => Err(Failed {
                error: CompactionError::Aborted,
                ..f
            }),
            r => r,
        };
        *self.inner.compaction.manual.lock() = None;
        match result {
            Ok(r) => {
                self.emit(RpcEvent::CompactionEnd {
                    reason: CompactionReason::Manual,
                    result: Some(r.clone()),
                    aborted: false,
                    will_retry: false,
                    error_message: None,
                });
                Ok(r)
            }
            Err(Failed {
                error: e,
                from_extension,
            }) => {
                let aborted = e == CompactionError::Aborted;
                let error_message = (!aborted).then(|| format!("Compaction failed: {e}"));
                self.emit(RpcEvent::CompactionEnd {
                    reason: CompactionReason::Manual,
                    result: None,
                    aborted,
                    will_retry: false,
                    error_message: error_message.clone(),
                });
                self.compaction_failed(
                    CompactionReason::Manual,
                    error_message,
                    aborted,
                    false,
                    from_extension,
                )
                .await;
                Err(e.to_string())
            }
        }
    }

    /// Threshold or overflow compaction inside a run (upstream `_runAutoCompaction`). Nothing
    /// is emitted when there is nothing to compact.
    async fn run_auto_compaction(
        &self,
        reason: CompactionReason,
        will_retry: bool,
        cancel: &CancellationToken,
    ) -> AutoOutcome {
        let Some(model) = self.model() else {
            return AutoOutcome::default();
        };
        let Ok(prep) = self.prepare_compaction(&model) else {
            return AutoOutcome::default();
        };
        let settings = self.compaction_settings(&model);
        self.inner.run.set_phase(super::RunPhase::Compacting);
        self.emit(RpcEvent::CompactionStart { reason });
        let result = self
            .summarize_and_append(&model, prep, reason, None, will_retry, cancel)
            .await;
        self.inner.run.set_phase(super::RunPhase::Streaming);
        match result {
            Ok(r) => {
                let window = model.context_window;
                let ineffective = window > 0
                    && over_threshold(r.estimated_tokens_after, window, settings.reserve_tokens);
                let error_message = ineffective.then(|| {
                    format!(
                        "Compaction did not bring the context below the compaction threshold ({} estimated tokens, threshold {}); not continuing.",
                        r.estimated_tokens_after,
                        window.saturating_sub(settings.reserve_tokens)
                    )
                });
                let will_retry = will_retry && !ineffective;
                self.emit(RpcEvent::CompactionEnd {
                    reason,
                    result: Some(r),
                    aborted: false,
                    will_retry,
                    error_message,
                });
                let proceed = !ineffective
                    && !cancel.is_cancelled()
                    && (will_retry || self.inner.pending.lock().queues.pending_count() > 0);
                AutoOutcome {
                    proceed,
                    ineffective,
                }
            }
            Err(Failed {
                error: e,
                from_extension,
            }) => {
                let aborted = e == CompactionError::Aborted || cancel.is_cancelled();
                let error_message = (!aborted).then(|| match reason {
                    CompactionReason::Overflow => format!("Context overflow recovery failed: {e}"),
                    _ => format!("Auto-compaction failed: {e}"),
                });
                self.emit(RpcEvent::CompactionEnd {
                    reason,
                    result: None,
                    aborted,
                    will_retry: false,
                    error_message: error_message.clone(),
                });
                self.compaction_failed(reason, error_message, aborted, will_retry, from_extension)
                    .await;
                AutoOutcome::default()
            }
        }
    }

    /// The check between turns of one run (upstream `_compactBeforeNextAssistantResponse`):
    /// when the projected context passes `contextWindow − reserveTokens`, compact
    /// (`reason: threshold`). Returns `false` when the compaction left the context above the
    /// threshold, so the run stops instead of compacting before every further turn.
    pub async fn compact_before_next_turn(&self, cancel: &CancellationToken) -> bool {
        let Some(model) = self.model() else {
            return true;
        };
        let settings = self.compaction_settings(&model);
        if !settings.enabled || model.context_window == 0 || cancel.is_cancelled() {
            return true;
        }
        // Per turn: the branch is borrowed under the store's lock, not copied (issue 24).
        let tokens = {
            let store = self.inner.store.lock();
            let branch = store.branch();
            let refs: Vec<&SessionEntry> = branch.iter().map(std::convert::AsRef::as_ref).collect();
            prepare::projected_context_tokens(&store.build_projection(), &refs)
        };
        if !over_threshold(tokens, model.context_window, settings.reserve_tokens) {
            return true;
        }
        !self
            .run_auto_compaction(CompactionReason::Threshold, false, cancel)
            .await
            .ineffective
    }

    /// Hides the last assistant message of the branch and its tool results from the context
    /// with `context_edit` entries, each also sent as `entry_appended` (upstream
    /// `_omitRecoveryAttempt`).
    pub(super) fn omit_attempt(&self, assistant: &AssistantMessage) {
        let call_ids: Vec<&str> = assistant.tool_calls().map(|c| c.id.as_str()).collect();
        let appended = {
            let mut store = self.inner.store.lock();
            let branch: Vec<SessionEntry> = store.loaded_branch();
            let Some(pos) = branch.iter().rposition(|e| {
                matches!(&e.kind, EntryKind::Message(Message::Assistant(a)) if a.timestamp == assistant.timestamp)
            }) else {
                return;
            };
            let mut targets = vec![branch[pos].id.clone()];
            for e in &branch[pos + 1..] {
                match &e.kind {
                    EntryKind::Message(Message::Assistant(_)) => break,
                    EntryKind::Message(Message::ToolResult(t))
                        if call_ids.contains(&t.tool_call_id.as_str()) =>
                    {
                        targets.push(e.id.clone())
                    }
                    _ => {}
                }
            }
            let mut appended = Vec::new();
            for t in targets {
                match store.append_context_edit(&t, None) {
                    Ok(entry) => appended.push(entry.clone()),
                    Err(e) => tracing::warn!("could not record context edit: {e}"),
                }
            }
            let context = store.build_context();
            drop(store);
            *self.transcript() = context;
            appended
        };
        for entry in appended {
            self.emit(RpcEvent::EntryAppended { entry });
        }
    }

    /// The compaction check (upstream `_checkCompaction`), run after every low-level run with
    /// its last assistant message (`skip_aborted = true`) and before a prompt with the last
    /// assistant message in the context (`skip_aborted = false`; its result is ignored then).
    ///
    /// * overflow (a context-overflow error, a silent overflow, or a `length` stop below the
    ///   model's `maxTokens`) from the current model: once per user message, hide the attempt,
    ///   compact (`reason: overflow`) and return `true` so the caller runs the loop again; a
    ///   second time emits `compaction_end` with [`OVERFLOW_RECOVERY_FAILED`];
    /// * threshold: context tokens above `contextWindow − reserveTokens` compact
    ///   (`reason: threshold`); returns `true` only when messages are queued.
    ///
    /// Skipped when auto-compaction is off or the message predates the latest compaction.
    pub async fn check_compaction(
        &self,
        assistant: &AssistantMessage,
        skip_aborted: bool,
        cancel: &CancellationToken,
    ) -> bool {
        let Some(model) = self.model() else {
            return false;
        };
        let settings = self.compaction_settings(&model);
        if !settings.enabled || cancel.is_cancelled() {
            return false;
        }
        if skip_aborted && assistant.stop_reason == StopReason::Aborted {
            return false;
        }
        let same_model = assistant.provider == model.provider && assistant.model == model.id;
        let window = model.context_window;
        // Per turn: nothing is read back from the session file here (issue 15); the projection
        // with payloads is built only when a `context_edit` changes what the context holds.
        // The branch is borrowed under the store's lock and only what the decision needs
        // leaves it (issue 24: copying the branch made every turn O(session)).
        let (latest_compaction, projected, post_edit, retained, edited_tokens) = {
            let store = self.inner.store.lock();
            let branch = store.branch();
            let entry_id = store.assistant_entry_id(assistant.timestamp);
            let projected = entry_id
                .as_deref()
                .is_none_or(|id| store.message_in_context(id));
            let latest_compaction = branch.iter().rev().find_map(|e| match e.kind {
                EntryKind::Compaction(_) => Some(iso_ms(&e.timestamp).unwrap_or(i64::MAX)),
                _ => None,
            });
            let entry_pos = entry_id
                .as_ref()
                .and_then(|id| branch.iter().rposition(|e| &e.id == id));
            let after = entry_pos.map(|p| &branch[p + 1..]).unwrap_or(&[]);
            let post_edit = after
                .iter()
                .any(|e| matches!(e.kind, EntryKind::ContextEdit { .. }));
            let latest_edit_hides = after.iter().rev().find_map(|e| match &e.kind {
                EntryKind::ContextEdit {
                    target_id,
                    replacement,
                } if Some(target_id) == entry_id.as_ref() => Some(replacement.is_none()),
                _ => None,
            });
            let retained = entry_id.is_none()
                || (!after
                    .iter()
                    .any(|e| matches!(e.kind, EntryKind::Compaction(_)))
                    && latest_edit_hides != Some(true));
            let edited_tokens = store.context_has_edits().then(|| {
                let refs: Vec<&SessionEntry> =
                    branch.iter().map(std::convert::AsRef::as_ref).collect();
                prepare::projected_context_tokens(&store.build_projection(), &refs)
            });
            (
                latest_compaction,
                projected,
                post_edit,
                retained,
                edited_tokens,
            )
        };
        if latest_compaction.is_some_and(|ts| assistant.timestamp <= ts) {
            return false;
        }
        let explicit =
            assistant.stop_reason == StopReason::Error && pi_ai::is_context_overflow(assistant, 0);
        let overflow = same_model
            && ((explicit && retained)
                || (projected && !post_edit && pi_ai::is_context_overflow(assistant, window)));
        let recoverable_length = same_model
            && projected
            && assistant.stop_reason == StopReason::Length
            && model.max_tokens > 0
            && assistant.usage.output < model.max_tokens;
        if overflow || recoverable_length {
            let will_retry = assistant.stop_reason != StopReason::Stop;
            if !will_retry {
                return self
                    .run_auto_compaction(CompactionReason::Overflow, false, cancel)
                    .await
                    .proceed;
            }
            if self
                .inner
                .compaction
                .overflow_attempted
                .swap(true, Ordering::SeqCst)
            {
                self.emit(RpcEvent::CompactionEnd {
                    reason: CompactionReason::Overflow,
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(
                        if overflow {
                            OVERFLOW_RECOVERY_FAILED
                        } else {
                            LENGTH_RECOVERY_FAILED
                        }
                        .to_string(),
                    ),
                });
                return false;
            }
            self.omit_attempt(assistant);
            return self
                .run_auto_compaction(CompactionReason::Overflow, true, cancel)
                .await
                .proceed;
        }
        let direct = prepare::usage_tokens(&assistant.usage);
        let tokens = if let Some(tokens) = edited_tokens {
            tokens
        } else if assistant.stop_reason == StopReason::Error || direct == 0 {
            let messages = self.messages();
            let (tokens, usage_index) = prepare::context_tokens(&messages);
            if let (Some(i), Some(ts)) = (usage_index, latest_compaction) {
                if messages[i].role() == "assistant" && message_ts(&messages[i]) <= ts {
                    return false;
                }
            }
            tokens
        } else {
            direct
        };
        if window > 0 && over_threshold(tokens, window, settings.reserve_tokens) {
            return self
                .run_auto_compaction(CompactionReason::Threshold, false, cancel)
                .await
                .proceed;
        }
        false
    }
}

fn message_ts(m: &Message) -> i64 {
    match m {
        Message::Assistant(a) => a.timestamp,
        _ => 0,
    }
}
