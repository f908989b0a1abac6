//! The read views of a [`SessionManager`]: resume settings, accessors, the active branch, the
//! context and tree, and leaf movement (spec `sessions.md` §4, §9, §10).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use pi_ai::Message;
use serde_json::Value;

use super::table::{Key, ROLE_ASSISTANT, ROLE_SYSTEM};
use super::{SessionError, SessionManager};
use crate::context::{build_tree, ModelRef, SessionContext, SessionTreeNode};
use crate::entry::{EntryKind, SessionEntry, SessionHeader};

impl SessionManager {
    /// The last `model_change` on the active branch: a virtual model's selection holds there
    /// over the physical models of later responses (upstream `getBranchSelection`, decided by
    /// the caller, which knows which models are virtual).
    pub fn resume_model_change(&self) -> Option<ModelRef> {
        self.path_settings(&self.path_slots(self.leaf_id.as_deref()))
            .model_change
    }

    /// Model, thinking level and whether there are messages on the active branch, without
    /// reading stored payloads back (but the last assistant message's, when it names the
    /// model): start-up and `switch_session` decide the model from this (spec `sessions.md`
    /// §7, §9.2).
    pub fn resume_settings(&self) -> (Option<ModelRef>, String, bool) {
        let s = self.path_settings(&self.path_slots(self.leaf_id.as_deref()));
        (s.model, s.thinking_level, s.has_messages)
    }

    /// Whether the active branch has a `thinking_level_change` entry.
    pub fn has_thinking_level_change(&self) -> bool {
        self.path_slots(self.leaf_id.as_deref())
            .iter()
            .filter_map(|&i| self.loaded_of(&self.slots[i as usize]))
            .any(|e| matches!(e.kind, EntryKind::ThinkingLevelChange { .. }))
    }

    /// The entry with its payload: a [`EntryKind::Stored`] entry is read back from the file
    /// (kept as the stub if that fails, which only a file truncated under us can cause).
    pub fn materialize<'a>(&self, entry: &'a SessionEntry) -> Cow<'a, SessionEntry> {
        match &entry.kind {
            EntryKind::Stored(stored) => match self.load_stored(stored) {
                Some(e) => Cow::Owned(e),
                None => Cow::Borrowed(entry),
            },
            _ => Cow::Borrowed(entry),
        }
    }

    /// Calls `f` with every entry in file order, payloads read back one at a time (memory stays
    /// bounded on large files).
    pub fn visit_entries(&self, mut f: impl FnMut(&SessionEntry)) {
        for i in 0..self.slots.len() {
            f(&self.full(i));
        }
    }

    /// Every entry in file order with its payload (owned; for `get_entries`).
    pub fn loaded_entries(&self) -> Vec<SessionEntry> {
        (0..self.slots.len())
            .map(|i| self.full(i).into_owned())
            .collect()
    }

    // ---------------------------------------------------------------- accessors

    /// The session id (header `id`).
    pub fn session_id(&self) -> &str {
        &self.header.id
    }
    /// The session file path, also before it is first written; `None` in memory.
    pub fn session_file(&self) -> Option<&Path> {
        self.session_file.as_deref()
    }
    /// Folder for new/forked/cloned sessions; `None` in memory.
    pub fn session_dir(&self) -> Option<&Path> {
        self.session_dir.as_deref()
    }
    /// Working directory of the session (absolute).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
    /// The header (line 1).
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
    /// Whether this manager writes to disk at all.
    pub fn is_persisted(&self) -> bool {
        self.persist
    }
    /// Whether the file exists on disk with everything appended so far.
    pub fn is_flushed(&self) -> bool {
        self.flushed
    }
    /// Number of entries (header excluded).
    pub fn entry_count(&self) -> usize {
        self.slots.len()
    }
    /// Whether the session has no entries yet.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    /// All entries in append (file) order, header excluded. In a large file `message` entries
    /// are [`EntryKind::Stored`] stubs (ids, parents and type are right; see
    /// [`materialize`](Self::materialize), [`loaded_entries`](Self::loaded_entries)).
    pub fn entries(&self) -> Vec<Cow<'_, SessionEntry>> {
        (0..self.slots.len()).map(|i| self.stub(i)).collect()
    }
    /// Entries strictly after `id` in append order (RPC `get_entries.since`); `None` if the
    /// id is unknown.
    pub fn entries_since(&self, id: &str) -> Option<Vec<SessionEntry>> {
        let pos = self.slot_of(id)?;
        Some(
            (pos + 1..self.slots.len())
                .map(|i| self.full(i).into_owned())
                .collect(),
        )
    }
    /// The entry with this id, with its payload.
    pub fn entry(&self, id: &str) -> Option<Cow<'_, SessionEntry>> {
        self.slot_of(id).map(|i| self.full(i))
    }
    /// Direct children of `parent_id` (`None` = roots), in file order (stubs as in
    /// [`entries`](Self::entries)).
    pub fn children(&self, parent_id: Option<&str>) -> Vec<Cow<'_, SessionEntry>> {
        let want = match parent_id {
            None => Key::NONE,
            Some(p) => match self.ids.find(p) {
                Some(k) => k,
                None => return Vec::new(),
            },
        };
        (0..self.slots.len())
            .filter(|&i| self.slots[i].parent == want)
            .map(|i| self.stub(i))
            .collect()
    }
    /// Current leaf id; `None` before the first entry or after [`reset_leaf`](Self::reset_leaf).
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf_id.as_deref()
    }
    /// The current leaf entry.
    pub fn leaf_entry(&self) -> Option<Cow<'_, SessionEntry>> {
        self.leaf_id.as_deref().and_then(|id| self.entry(id))
    }
    /// Resolved label of an entry.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.labels.get(id).map(|l| l.0.as_str())
    }
    /// The active branch, root first, ending at the leaf (spec §4.3); stubs as in
    /// [`entries`](Self::entries).
    pub fn branch(&self) -> Vec<Cow<'_, SessionEntry>> {
        self.branch_of(self.leaf_id.as_deref())
    }
    /// The path from the root to `id` (empty if unknown); stubs as in
    /// [`entries`](Self::entries).
    pub fn branch_to(&self, id: &str) -> Vec<Cow<'_, SessionEntry>> {
        self.branch_of(Some(id))
    }
    pub(super) fn branch_of(&self, leaf: Option<&str>) -> Vec<Cow<'_, SessionEntry>> {
        self.path_slots(leaf)
            .into_iter()
            .map(|i| self.stub(i as usize))
            .collect()
    }
    /// The slots the context selects from `path` (upstream `buildContextEntries`): the whole
    /// path, or with a compaction C on it `[C, path[firstKept..C], path[C+1..]]`; the flag
    /// marks the kept range before C, whose system messages are dropped.
    pub(super) fn context_selection(&self, path: &[u32]) -> Vec<(u32, bool)> {
        let loaded_at = |p: usize| self.loaded_of(&self.slots[path[p] as usize]);
        let compaction = (0..path.len())
            .rev()
            .find_map(|p| match loaded_at(p).map(|e| &e.kind) {
                Some(EntryKind::Compaction(c)) => Some((p, c)),
                _ => None,
            });
        let mut selected: Vec<(u32, bool)> = Vec::new();
        match compaction {
            None => selected.extend(path.iter().map(|&i| (i, false))),
            Some((cidx, c)) => {
                selected.push((path[cidx], false));
                let first_kept = self.ids.find(&c.first_kept_entry_id);
                if let Some(start) =
                    (0..cidx).find(|&p| Some(self.slots[path[p] as usize].id) == first_kept)
                {
                    selected.extend(path[start..cidx].iter().map(|&i| (i, true)));
                }
                selected.extend(path[cidx + 1..].iter().map(|&i| (i, false)));
            }
        }
        selected
    }

    /// The `context_edit`s among `selected`: target → replacement (`None` hides it); the
    /// last edit of a target wins.
    pub(super) fn context_edits(&self, selected: &[(u32, bool)]) -> HashMap<Key, &Option<Value>> {
        let mut edits: HashMap<Key, &Option<Value>> = HashMap::new();
        for &(i, _) in selected {
            if let Some(EntryKind::ContextEdit {
                target_id,
                replacement,
            }) = self.loaded_of(&self.slots[i as usize]).map(|e| &e.kind)
            {
                if let Some(k) = self.ids.find(target_id) {
                    edits.insert(k, replacement);
                }
            }
        }
        edits
    }

    /// Whether the context of the active branch selects a `context_edit` entry (then
    /// [`build_projection`](Self::build_projection) differs from the plain messages). Reads
    /// nothing back from the file.
    pub fn context_has_edits(&self) -> bool {
        let path = self.path_slots(self.leaf_id.as_deref());
        !self
            .context_edits(&self.context_selection(&path))
            .is_empty()
    }

    /// Whether the `message` entry `id` contributes its message to the context of the active
    /// branch (selected, not a dropped system message, not hidden by a `context_edit` with a
    /// null replacement): [`build_projection`](Self::build_projection)'s non-empty messages
    /// for it, without reading anything back. `false` for an unknown id.
    pub fn message_in_context(&self, id: &str) -> bool {
        let Some(at) = self.slot_of(id) else {
            return false;
        };
        let path = self.path_slots(self.leaf_id.as_deref());
        let selected = self.context_selection(&path);
        let Some(&(_, drop_system)) = selected.iter().find(|(i, _)| *i as usize == at) else {
            return false;
        };
        let slot = &self.slots[at];
        let system = match self.loaded_of(slot) {
            Some(e) => match &e.kind {
                EntryKind::Message(m) => matches!(m, Message::System(_)),
                _ => return false,
            },
            None => slot.role == ROLE_SYSTEM,
        };
        if drop_system && system {
            return false;
        }
        !matches!(self.context_edits(&selected).get(&slot.id), Some(None))
    }

    /// The id of the last `message` entry on the active branch holding the assistant message
    /// with this `timestamp` (ms), if any. Assistant messages this process appended are
    /// matched from memory; only older stored ones (a large file as opened) are read back,
    /// newest first.
    pub fn assistant_entry_id(&self, timestamp: i64) -> Option<String> {
        let path = self.path_slots(self.leaf_id.as_deref());
        path.iter().rev().find_map(|&i| {
            let slot = &self.slots[i as usize];
            let hit = match self.loaded_of(slot) {
                Some(e) => {
                    matches!(&e.kind, EntryKind::Message(Message::Assistant(a)) if a.timestamp == timestamp)
                }
                None if slot.role != ROLE_ASSISTANT => false,
                None => match self.stored_ts.get(&i) {
                    Some(&ts) => ts == timestamp,
                    None => matches!(
                        self.full(i as usize).kind,
                        EntryKind::Message(Message::Assistant(ref a)) if a.timestamp == timestamp
                    ),
                },
            };
            hit.then(|| self.ids.text(slot.id))
        })
    }

    /// Messages, thinking level and model of the active branch (spec §9), built from the
    /// table: only the entries the context selects are read (a stored message once, moved
    /// into the context), so a compacted large file costs the context, not the file.
    pub fn build_session_context(&self) -> SessionContext {
        if self.leaf_id.is_none() {
            return SessionContext {
                thinking_level: "off".into(),
                ..SessionContext::default()
            };
        }
        let path = self.path_slots(self.leaf_id.as_deref());
        let settings = self.path_settings(&path);
        let selected = self.context_selection(&path);
        let edits = self.context_edits(&selected);
        let mut messages = Vec::with_capacity(selected.len());
        for (n, &(i, drop_system)) in selected.iter().enumerate() {
            let slot = &self.slots[i as usize];
            let produced = match self.loaded_of(slot) {
                Some(e) => {
                    // An older compaction inside the kept range contributes nothing; only the
                    // newest (selected first) provides the summary.
                    if n > 0 && matches!(e.kind, EntryKind::Compaction(_)) {
                        continue;
                    }
                    if drop_system && matches!(&e.kind, EntryKind::Message(Message::System(_))) {
                        continue;
                    }
                    crate::context::entry_context_messages(e)
                }
                None => {
                    if drop_system && slot.role == ROLE_SYSTEM {
                        continue;
                    }
                    self.stored_context_messages(&Self::stored_of(slot))
                }
            };
            match edits.get(&slot.id) {
                None => messages.extend(produced),
                Some(None) => {}
                Some(Some(replacement)) => messages.extend(
                    produced
                        .into_iter()
                        .map(|m| crate::context::replace_content(m, replacement)),
                ),
            }
        }
        SessionContext {
            messages,
            thinking_level: settings.thinking_level,
            model: settings.model,
        }
    }
    /// The context projection of the active branch: every selected entry with the messages it
    /// contributes (see [`super::project_path`]); empty before the first entry.
    pub fn build_projection(&self) -> Vec<crate::ProjectedEntry> {
        if self.leaf_id.is_none() {
            return Vec::new();
        }
        let branch = self.branch();
        let refs: Vec<&SessionEntry> = branch.iter().map(std::convert::AsRef::as_ref).collect();
        crate::context::project_path_with(&refs, &|s| self.load_stored(s))
    }
    /// The active branch, root first, with every payload read back (large files keep message
    /// entries on disk as [`EntryKind::Stored`]); for compaction, which reads roles and contents.
    pub fn loaded_branch(&self) -> Vec<SessionEntry> {
        self.path_slots(self.leaf_id.as_deref())
            .into_iter()
            .map(|i| self.full(i as usize).into_owned())
            .collect()
    }
    /// The agent messages of the active branch (spec §9): compaction applied, `context_edit`
    /// with null replacement hides its target, custom/branch/compaction summaries as messages.
    pub fn build_context(&self) -> Vec<Message> {
        self.build_session_context().messages
    }
    /// Display name: the latest `session_info` entry decides; empty/whitespace clears
    /// (spec §3.9, newer semantics).
    pub fn session_name(&self) -> Option<String> {
        self.loaded.iter().rev().find_map(|e| match &e.kind {
            EntryKind::SessionInfo { name } => Some(
                name.as_deref()
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
            ),
            _ => None,
        })?
    }
    /// The whole session as a tree (spec §10.3).
    pub fn get_tree(&self) -> Vec<SessionTreeNode> {
        if self.loaded.len() != self.slots.len() {
            return build_tree(&self.loaded_entries(), &self.labels);
        }
        build_tree(&self.loaded, &self.labels)
    }

    // ---------------------------------------------------------------- leaf movement

    /// Move the leaf to `id` so the next append branches from there (spec §4.2 `branch`).
    pub fn set_leaf(&mut self, id: &str) -> Result<(), SessionError> {
        if !self.contains(id) {
            return Err(SessionError::EntryNotFound(id.to_string()));
        }
        self.leaf_id = Some(id.to_string());
        Ok(())
    }
    /// Leaf := none; the next append creates a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf_id = None;
    }
}
