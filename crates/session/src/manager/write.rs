//! Appending entries (lazy first write, one line per append afterwards) and branching into a
//! new session (spec `sessions.md` §5, §8).

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use pi_ai::{Message, UserContent};
use serde_json::Value;

use super::{SessionError, SessionManager};
use crate::context::{current_system_message, system_message_value};
use crate::entry::{
    generate_entry_id, iso_now, BranchSummaryEntry, CompactionEntry, CustomMessageEntry, EntryKind,
    SessionEntry, UsageEntry,
};
use crate::store;

impl SessionManager {
    // ---------------------------------------------------------------- appends

    pub(super) fn persist_last(&mut self) -> io::Result<()> {
        if !self.persist {
            return Ok(());
        }
        let Some(file) = self.session_file.clone() else {
            return Ok(());
        };
        if self.flushed {
            let line = self
                .loaded
                .last()
                .map(SessionEntry::to_line)
                .unwrap_or_default();
            match store::append(&file, line.as_bytes(), self.repair) {
                Ok(offset) => {
                    if self.lazy_file.is_none() {
                        self.lazy_file = std::fs::File::open(&file).ok().map(Arc::new);
                    }
                    if let Some(slot) = self.slots.last_mut() {
                        slot.offset = offset;
                        slot.len = u32::try_from(line.len().saturating_sub(1)).unwrap_or(0);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The file (or its folder) was deleted under us: write it again whole,
                    // header first, rather than leave a headerless file behind.
                    tracing::warn!(
                        "session file {} disappeared; writing it again",
                        file.display()
                    );
                    self.write_whole(&file)?;
                }
                Err(e) => return Err(e),
            }
            self.repair = None;
        } else if self.has_assistant {
            self.write_whole(&file)?;
            self.flushed = true;
        }
        Ok(())
    }

    /// Add a finished entry as the new leaf and persist it; on an I/O error the entry is
    /// removed again so memory and file agree.
    pub(super) fn commit(&mut self, entry: SessionEntry) -> io::Result<&SessionEntry> {
        let prev_leaf = self.leaf_id.replace(entry.id.clone());
        let prev_assistant = self.has_assistant;
        self.has_assistant |= entry.is_assistant_message();
        let at = self.slots.len() as u32;
        self.push_entry(entry);
        if let Some(slot) = self.slots.last() {
            self.index.insert(slot.id, at);
        }
        if let Err(e) = self.persist_last() {
            self.pop_entry();
            self.leaf_id = prev_leaf;
            self.has_assistant = prev_assistant;
            return Err(e);
        }
        let last = self.loaded.len() - 1;
        if let EntryKind::Label { target_id, label } = &self.loaded[last].kind {
            match label.as_deref().filter(|l| !l.is_empty()) {
                Some(l) => {
                    let ts = self.loaded[last].timestamp.clone();
                    self.labels.insert(target_id.clone(), (l.to_string(), ts));
                }
                None => {
                    self.labels.remove(target_id);
                }
            }
        }
        Ok(&self.loaded[last])
    }

    pub(super) fn new_id(&self) -> String {
        generate_entry_id(|c| self.contains(c))
    }

    /// Append any entry kind as a child of the current leaf; it becomes the leaf. Returns the
    /// stored entry (for `entry_appended`).
    pub fn append_entry(&mut self, kind: EntryKind) -> io::Result<&SessionEntry> {
        let entry = SessionEntry::new(self.new_id(), self.leaf_id.clone(), kind);
        self.commit(entry)
    }

    /// Append an entry whose id was chosen by its author (an extension's `newSession` setup
    /// writes through a session manager of its own and hands its ids out at once, as upstream's
    /// `SessionManager.append*` do); any other id (empty, or already in the session) is
    /// replaced by a fresh one. The entry is a child of the current leaf and becomes the leaf;
    /// a `message` is then stored as [`Self::append_message`] stores it. Returns the id used.
    pub fn append_entry_as(&mut self, id: &str, kind: EntryKind) -> io::Result<String> {
        let id = if id.is_empty() || self.contains(id) {
            self.new_id()
        } else {
            id.to_string()
        };
        let is_message = matches!(kind, EntryKind::Message(_));
        let entry = SessionEntry::new(id, self.leaf_id.clone(), kind);
        let id = self.commit(entry)?.id.clone();
        if is_message {
            let from = if std::mem::take(&mut self.whole_written) {
                0
            } else {
                self.slots.len().saturating_sub(1)
            };
            self.release_messages(from);
        }
        Ok(id)
    }

    /// Append a `message` entry; returns its id. The first assistant message flushes a new
    /// session to disk. Once the entry's line is in the file the store keeps only its place
    /// there ([`EntryKind::Stored`]; the caller's transcript holds the message): an unflushed
    /// new session and an in-memory one keep their entries.
    pub fn append_message(&mut self, msg: &Message) -> io::Result<String> {
        let id = self
            .append_entry(EntryKind::Message(msg.clone()))?
            .id
            .clone();
        let from = if std::mem::take(&mut self.whole_written) {
            0
        } else {
            self.slots.len().saturating_sub(1)
        };
        self.release_messages(from);
        Ok(id)
    }

    /// Append `model_change {provider, modelId}`.
    pub fn append_model_change(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::ModelChange {
            provider: provider.to_string(),
            model_id: model_id.to_string(),
        })
    }

    /// Append `thinking_level_change {thinkingLevel}`.
    pub fn append_thinking_level_change(&mut self, level: &str) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::ThinkingLevelChange {
            thinking_level: level.to_string(),
        })
    }

    /// Append `session_info {name}`; runs of `\r`/`\n` become one space, then the name is
    /// trimmed (spec §3.9). Rejecting empty names is the caller's job.
    pub fn append_session_info(&mut self, name: &str) -> io::Result<&SessionEntry> {
        let mut sanitized = String::with_capacity(name.len());
        let mut in_break = false;
        for c in name.chars() {
            if c == '\r' || c == '\n' {
                if !in_break {
                    sanitized.push(' ');
                }
                in_break = true;
            } else {
                sanitized.push(c);
                in_break = false;
            }
        }
        self.append_entry(EntryKind::SessionInfo {
            name: Some(sanitized.trim().to_string()),
        })
    }

    /// Append `custom {customType, data?}` (extension state).
    pub fn append_custom_entry(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
    ) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::Custom {
            custom_type: custom_type.to_string(),
            data,
        })
    }

    /// Append `custom_message {customType, content, display, details?}`.
    pub fn append_custom_message_entry(
        &mut self,
        custom_type: &str,
        content: UserContent,
        display: bool,
        details: Option<Value>,
    ) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::CustomMessage(CustomMessageEntry {
            custom_type: custom_type.to_string(),
            content,
            display,
            details,
        }))
    }

    /// Append a `usage` entry.
    pub fn append_usage(&mut self, usage: UsageEntry) -> io::Result<&SessionEntry> {
        self.append_entry(EntryKind::Usage(usage))
    }

    /// Append a `compaction` entry. `first_kept_entry_id: None` means "nothing kept" (the id of
    /// the compaction itself, as upstream). The current replayed system message is stored as
    /// `systemMessage` with the compaction's time.
    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: Option<&str>,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<pi_ai::Usage>,
    ) -> io::Result<&SessionEntry> {
        let id = self.new_id();
        let timestamp = iso_now();
        let system_message = current_system_message(&self.build_context()).map(|s| {
            let ms = crate::entry::iso_to_ms(&timestamp).unwrap_or(s.timestamp);
            system_message_value(&s, ms)
        });
        let mut entry = SessionEntry::new(
            id.clone(),
            self.leaf_id.clone(),
            EntryKind::Compaction(CompactionEntry {
                summary: summary.to_string(),
                first_kept_entry_id: first_kept_entry_id.map(str::to_string).unwrap_or(id),
                tokens_before,
                details,
                usage,
                from_hook,
                system_message,
            }),
        );
        entry.timestamp = timestamp;
        self.commit(entry)
    }

    /// Append `context_edit {targetId, replacement}`. `None` hides the target from the model
    /// context; `Some({"content": string|array})` replaces its content (a string for an
    /// assistant/toolResult target is stored as one text block). The target must be a
    /// user/assistant/toolResult message or a custom_message on the active branch.
    pub fn append_context_edit(
        &mut self,
        target_id: &str,
        replacement: Option<Value>,
    ) -> Result<&SessionEntry, SessionError> {
        if let Some(r) = &replacement {
            let valid = matches!(r.get("content"), Some(Value::String(_) | Value::Array(_)));
            if !valid {
                return Err(SessionError::InvalidReplacement);
            }
        }
        let target = self
            .entry(target_id)
            .ok_or_else(|| SessionError::EntryNotFound(target_id.to_string()))?;
        let role = match &target.kind {
            EntryKind::CustomMessage(_) => "custom".to_string(),
            EntryKind::Message(m) => m.role().to_string(),
            _ => String::new(),
        };
        let on_branch = self.ids.find(target_id).is_some_and(|k| {
            self.path_slots(self.leaf_id.as_deref())
                .iter()
                .any(|&i| self.slots[i as usize].id == k)
        });
        if !on_branch {
            return Err(SessionError::NotOnBranch(target_id.to_string()));
        }
        if !matches!(
            role.as_str(),
            "custom" | "user" | "assistant" | "toolResult"
        ) {
            return Err(SessionError::NotEditable(target_id.to_string()));
        }
        let replacement = replacement.map(|mut r| {
            if let Some(Value::String(s)) = r.get("content") {
                if role == "assistant" || role == "toolResult" {
                    let block = serde_json::json!([{"type": "text", "text": s}]);
                    r["content"] = block;
                }
            }
            r
        });
        Ok(self.append_entry(EntryKind::ContextEdit {
            target_id: target_id.to_string(),
            replacement,
        })?)
    }

    /// Set (`Some(non-empty)`) or clear a label on an entry (spec §3.8, §8.8).
    pub fn append_label_change(
        &mut self,
        target_id: &str,
        label: Option<&str>,
    ) -> Result<&SessionEntry, SessionError> {
        if !self.contains(target_id) {
            return Err(SessionError::EntryNotFound(target_id.to_string()));
        }
        Ok(self.append_entry(EntryKind::Label {
            target_id: target_id.to_string(),
            label: label.map(str::to_string),
        })?)
    }

    /// Move the leaf to `branch_from` (`None` = before the root) and append a
    /// `branch_summary` there; `fromId` is the previous leaf or `"root"` (spec §4.2).
    pub fn branch_with_summary(
        &mut self,
        branch_from: Option<&str>,
        summary: &str,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<pi_ai::Usage>,
    ) -> Result<&SessionEntry, SessionError> {
        if let Some(id) = branch_from {
            if !self.contains(id) {
                return Err(SessionError::EntryNotFound(id.to_string()));
            }
        }
        let from_id = self.leaf_id.clone().unwrap_or_else(|| "root".to_string());
        let prev_leaf = std::mem::replace(&mut self.leaf_id, branch_from.map(str::to_string));
        let result = self
            .append_entry(EntryKind::BranchSummary(BranchSummaryEntry {
                from_id: Some(from_id),
                summary: summary.to_string(),
                details,
                usage,
                from_hook,
            }))
            .map(|_| ());
        if let Err(e) = result {
            self.leaf_id = prev_leaf;
            return Err(e.into());
        }
        let last = self.loaded.len() - 1;
        Ok(&self.loaded[last])
    }

    // ---------------------------------------------------------------- branching

    /// Replace this session by a new one holding only the path root→`leaf_id` (spec §8.5;
    /// used by `fork` and `clone`). Label entries are dropped from the path, the rest is
    /// re-chained linearly with ids preserved, and labels resolved on kept entries are
    /// re-appended with their original timestamps. The header gets a new id, the same cwd
    /// and `parentSession` = the previous file. The file is written at once if the path holds
    /// an assistant message, else lazily. Returns the new file (`None` in memory).
    pub fn create_branched_session(
        &mut self,
        leaf_id: &str,
    ) -> Result<Option<PathBuf>, SessionError> {
        let path: Vec<SessionEntry> = self
            .path_slots(Some(leaf_id))
            .into_iter()
            .map(|i| self.full(i as usize).into_owned())
            .collect();
        if path.is_empty() {
            return Err(SessionError::EntryNotFound(leaf_id.to_string()));
        }
        let mut kept: Vec<SessionEntry> = Vec::with_capacity(path.len());
        let mut replacement_for_label: HashMap<String, String> = HashMap::new();
        let mut pending_labels: Vec<String> = Vec::new();
        let mut parent: Option<String> = None;
        for mut entry in path {
            if matches!(entry.kind, EntryKind::Label { .. }) {
                pending_labels.push(entry.id);
                continue;
            }
            for l in pending_labels.drain(..) {
                replacement_for_label.insert(l, entry.id.clone());
            }
            if let EntryKind::Compaction(c) = &mut entry.kind {
                if c.first_kept_entry_id != entry.id {
                    if let Some(r) = replacement_for_label.get(&c.first_kept_entry_id) {
                        c.first_kept_entry_id = r.clone();
                    }
                }
            }
            entry.parent_id = parent.replace(entry.id.clone());
            kept.push(entry);
        }
        let mut ids: std::collections::HashSet<String> =
            kept.iter().map(|e| e.id.clone()).collect();
        let labels: Vec<(String, String, String)> = self
            .ordered_labels()
            .into_iter()
            .filter(|(t, _, _)| ids.contains(t))
            .collect();
        for (target, label, ts) in labels {
            let id = generate_entry_id(|c| ids.contains(c));
            ids.insert(id.clone());
            let mut e = SessionEntry::new(
                id.clone(),
                parent.replace(id),
                EntryKind::Label {
                    target_id: target,
                    label: Some(label),
                },
            );
            e.timestamp = ts;
            kept.push(e);
        }
        let previous_file = self.session_file.clone();
        let parent_session = if self.persist {
            previous_file.map(|p| p.to_string_lossy().into_owned())
        } else {
            None
        };
        self.start_new(None, parent_session);
        for e in kept {
            self.push_entry(e);
        }
        self.rebuild_index();
        if self.persist && self.has_assistant {
            if let Some(file) = self.session_file.clone() {
                self.write_whole(&file)?;
                self.flushed = true;
                self.whole_written = false;
                self.release_messages(0);
            }
        }
        Ok(self.session_file.clone())
    }
}
