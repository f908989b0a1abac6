//! The entry table of a [`SessionManager`]: compact slots (id and parent keys, parsed or
//! stored-in-file payload), the id index and labels, and reading stored entries back (issue 8,
//! issue 15).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use pi_ai::Message;

use super::SessionManager;
use crate::context::ModelRef;
use crate::entry::{EntryKind, SessionEntry, StoredEntry};
use crate::scan::MessageHead;
use crate::store;

/// An entry id in 8 bytes: an id of exactly 8 lowercase hex chars (every id pi writes) is
/// its value; any other id is interned in [`Ids`] and this is [`Key::LONG`] | its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key(u64);

impl Key {
    /// `parentId: null`.
    pub(super) const NONE: Key = Key(u64::MAX);
    pub(super) const LONG: u64 = 1 << 62;

    pub(super) fn short(id: &str) -> Option<Key> {
        let bytes = id.as_bytes();
        if bytes.len() != 8 {
            return None;
        }
        let mut v = 0u64;
        for &c in bytes {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            v = v << 4 | u64::from(d);
        }
        Some(Key(v))
    }
}

/// The ids that do not fit a [`Key`] by value (full UUIDs after an id collision, ids of
/// hand-written or foreign files).
#[derive(Debug, Clone, Default)]
pub(super) struct Ids {
    pub(super) long: Vec<String>,
    pub(super) by_text: HashMap<String, u64>,
}

impl Ids {
    pub(super) fn intern(&mut self, id: &str) -> Key {
        if let Some(k) = Key::short(id) {
            return k;
        }
        if let Some(&n) = self.by_text.get(id) {
            return Key(Key::LONG | n);
        }
        let n = self.long.len() as u64;
        self.long.push(id.to_string());
        self.by_text.insert(id.to_string(), n);
        Key(Key::LONG | n)
    }

    /// The key of an id seen before; `None` if no entry can have it.
    pub(super) fn find(&self, id: &str) -> Option<Key> {
        Key::short(id).or_else(|| self.by_text.get(id).map(|&n| Key(Key::LONG | n)))
    }

    pub(super) fn text(&self, key: Key) -> String {
        if key.0 & Key::LONG != 0 && key != Key::NONE {
            let n = usize::try_from(key.0 & !Key::LONG).unwrap_or(usize::MAX);
            return self.long.get(n).cloned().unwrap_or_default();
        }
        format!("{:08x}", key.0)
    }
}

/// `Slot::loaded` of an entry whose line stays in the file.
pub(super) const STORED: u32 = u32::MAX;
/// `Slot::role` values of a stored `message` entry.
pub(super) const ROLE_OTHER: u8 = 0;
pub(super) const ROLE_ASSISTANT: u8 = 1;
pub(super) const ROLE_SYSTEM: u8 = 2;

/// One entry of the session in 40 bytes (issue 8): its id and parent as [`Key`]s, and either
/// its parsed form (`loaded`, an index into `SessionManager::loaded`) or where its `message`
/// line is in the file (`offset`, `len`) with the message's role.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) id: Key,
    pub(super) parent: Key,
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) loaded: u32,
    pub(super) role: u8,
}

/// What [`SessionManager::resume_settings`] and the context read from a path.
#[derive(Debug, Default)]
pub(super) struct PathSettings {
    pub(super) model: Option<ModelRef>,
    /// The last `model_change` on the path (a virtual model's selection holds over the
    /// physical models its responses name).
    pub(super) model_change: Option<ModelRef>,
    pub(super) thinking_level: String,
    pub(super) has_messages: bool,
    pub(super) has_level_entry: bool,
}

impl SessionManager {
    /// Appends a parsed entry to the table (the index is not touched).
    pub(super) fn push_entry(&mut self, entry: SessionEntry) {
        let id = self.ids.intern(&entry.id);
        let parent = match &entry.parent_id {
            Some(p) => self.ids.intern(p),
            None => Key::NONE,
        };
        self.slots.push(Slot {
            id,
            parent,
            offset: 0,
            len: 0,
            loaded: u32::try_from(self.loaded.len()).unwrap_or(STORED - 1),
            role: ROLE_OTHER,
        });
        self.loaded.push(entry);
    }

    /// Appends a `message` entry whose line stays in the file (the index is not touched).
    pub(super) fn push_stored(&mut self, head: &MessageHead<'_>, offset: u64, len: u32) {
        let id = self.ids.intern(&head.id);
        let parent = match &head.parent_id {
            Some(p) => self.ids.intern(p),
            None => Key::NONE,
        };
        let role = match head.role.as_ref() {
            "assistant" => ROLE_ASSISTANT,
            "system" => ROLE_SYSTEM,
            _ => ROLE_OTHER,
        };
        self.slots.push(Slot {
            id,
            parent,
            offset,
            len,
            loaded: STORED,
            role,
        });
    }

    /// Releases the parsed `message` entries of slots `from..` whose line is known to be in the
    /// file (`len > 0`, set when this process wrote it) to [`EntryKind::Stored`] slots: the
    /// store then holds no copy of the message, which the agent's transcript already holds
    /// (issue 15: one copy per message). Nothing is released without a handle to read it back.
    pub(super) fn release_messages(&mut self, from: usize) {
        if self.lazy_file.is_none() {
            return;
        }
        let mut released = false;
        for i in from..self.slots.len() {
            let slot = self.slots[i];
            if slot.loaded == STORED || slot.len == 0 {
                continue;
            }
            let Some(SessionEntry {
                kind: EntryKind::Message(m),
                ..
            }) = self.loaded.get(slot.loaded as usize)
            else {
                continue;
            };
            let role = match m {
                Message::Assistant(a) => {
                    self.stored_ts.insert(i as u32, a.timestamp);
                    ROLE_ASSISTANT
                }
                Message::System(_) => ROLE_SYSTEM,
                _ => ROLE_OTHER,
            };
            // The last parsed entry (the usual case: the message just appended) is popped;
            // any other is dropped when the table is compacted below.
            if slot.loaded as usize + 1 == self.loaded.len() && i + 1 == self.slots.len() {
                self.loaded.pop();
            } else {
                released = true;
            }
            self.slots[i].loaded = STORED;
            self.slots[i].role = role;
        }
        if released {
            let old = std::mem::take(&mut self.loaded);
            let mut old: Vec<Option<SessionEntry>> = old.into_iter().map(Some).collect();
            for slot in &mut self.slots {
                if slot.loaded == STORED {
                    continue;
                }
                if let Some(e) = old.get_mut(slot.loaded as usize).and_then(Option::take) {
                    slot.loaded = u32::try_from(self.loaded.len()).unwrap_or(STORED - 1);
                    self.loaded.push(e);
                }
            }
        }
    }

    /// Writes header and every entry as the whole file (exclusive create, see
    /// [`store::create_exclusive`]), then reads stored entries from the new file and knows
    /// where every line is, so [`release_messages`](Self::release_messages) can release them.
    pub(super) fn write_whole(&mut self, file: &Path) -> io::Result<()> {
        let mut data = self.header.to_value().to_string();
        data.push('\n');
        let mut spans = Vec::with_capacity(self.slots.len());
        for i in 0..self.slots.len() {
            let start = data.len() as u64;
            let line = self.full(i).to_line();
            spans.push((
                start,
                u32::try_from(line.len().saturating_sub(1)).unwrap_or(0),
            ));
            data.push_str(&line);
        }
        store::create_exclusive(file, data.as_bytes())?;
        drop(data);
        match std::fs::File::open(file) {
            Ok(f) => {
                self.lazy_file = Some(Arc::new(f));
                for (slot, (offset, len)) in self.slots.iter_mut().zip(spans) {
                    slot.offset = offset;
                    slot.len = len;
                }
                self.whole_written = true;
            }
            // Stored entries keep being read from the old handle; nothing new is released.
            Err(e) => tracing::warn!("could not reopen session file {}: {e}", file.display()),
        }
        Ok(())
    }

    /// Removes the last slot (a commit that could not be written).
    pub(super) fn pop_entry(&mut self) {
        if let Some(slot) = self.slots.pop() {
            if slot.loaded != STORED {
                self.loaded.pop();
            }
            if self.index.get(&slot.id) == Some(&(self.slots.len() as u32)) {
                self.index.remove(&slot.id);
            }
        }
    }

    /// The parsed entry of a slot, if it is loaded.
    pub(super) fn loaded_of(&self, slot: &Slot) -> Option<&SessionEntry> {
        (slot.loaded != STORED)
            .then(|| self.loaded.get(slot.loaded as usize))
            .flatten()
    }

    pub(super) fn stored_of(slot: &Slot) -> StoredEntry {
        StoredEntry {
            offset: slot.offset,
            len: slot.len,
            assistant: slot.role == ROLE_ASSISTANT,
        }
    }

    /// The entry of slot `i`: the parsed one, or for a stored one a stub ([`EntryKind::Stored`]:
    /// id, parent and type right, no timestamp).
    pub(super) fn stub(&self, i: usize) -> Cow<'_, SessionEntry> {
        let slot = &self.slots[i];
        if let Some(e) = self.loaded_of(slot) {
            return Cow::Borrowed(e);
        }
        Cow::Owned(SessionEntry {
            id: self.ids.text(slot.id),
            parent_id: (slot.parent != Key::NONE).then(|| self.ids.text(slot.parent)),
            timestamp: String::new(),
            kind: EntryKind::Stored(Self::stored_of(slot)),
            extra: serde_json::Map::new(),
        })
    }

    /// The entry of slot `i` with its payload (a stored one read back; the stub if that fails).
    pub(super) fn full(&self, i: usize) -> Cow<'_, SessionEntry> {
        let slot = &self.slots[i];
        if let Some(e) = self.loaded_of(slot) {
            return Cow::Borrowed(e);
        }
        match self.load_stored(&Self::stored_of(slot)) {
            Some(e) => Cow::Owned(e),
            None => self.stub(i),
        }
    }

    /// The slot of entry `id` (the last one of a duplicated id).
    pub(super) fn slot_of(&self, id: &str) -> Option<usize> {
        let key = self.ids.find(id)?;
        self.index.get(&key).map(|&i| i as usize)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.slot_of(id).is_some()
    }

    /// Root-first slots from `leaf` following parent links; stops at a missing parent and at
    /// a cycle (malformed files), so it always terminates (spec §4.3).
    pub(super) fn path_slots(&self, leaf: Option<&str>) -> Vec<u32> {
        let mut path = Vec::new();
        let Some(mut current) = leaf.and_then(|id| self.slot_of(id)) else {
            return path;
        };
        let mut seen = vec![0u64; self.slots.len().div_ceil(64)];
        loop {
            let (word, bit) = (current / 64, 1u64 << (current % 64));
            if seen[word] & bit != 0 {
                break;
            }
            seen[word] |= bit;
            path.push(current as u32);
            let parent = self.slots[current].parent;
            match (parent != Key::NONE)
                .then(|| self.index.get(&parent))
                .flatten()
            {
                Some(&p) => current = p as usize,
                None => break,
            }
        }
        path.reverse();
        path
    }

    pub(super) fn rebuild_index(&mut self) {
        self.index = HashMap::with_capacity(self.slots.len());
        for (i, slot) in self.slots.iter().enumerate() {
            self.index.insert(slot.id, i as u32);
        }
        self.labels.clear();
        for (target, label, ts) in self.ordered_labels() {
            self.labels.insert(target, (label, ts));
        }
        self.leaf_id = self.slots.last().map(|s| self.ids.text(s.id));
        self.has_assistant = self.slots.iter().any(|s| match self.loaded_of(s) {
            Some(e) => e.is_assistant_message(),
            None => s.role == ROLE_ASSISTANT,
        });
    }

    /// Labels resolved by replaying label entries in file order, in JS `Map` insertion order.
    pub(super) fn ordered_labels(&self) -> Vec<(String, String, String)> {
        let mut out: Vec<(String, String, String)> = Vec::new();
        for e in &self.loaded {
            if let EntryKind::Label { target_id, label } = &e.kind {
                match label.as_deref().filter(|l| !l.is_empty()) {
                    Some(l) => match out.iter_mut().find(|x| x.0 == *target_id) {
                        Some(x) => {
                            x.1 = l.to_string();
                            x.2 = e.timestamp.clone();
                        }
                        None => out.push((target_id.clone(), l.to_string(), e.timestamp.clone())),
                    },
                    None => out.retain(|x| x.0 != *target_id),
                }
            }
        }
        out
    }

    pub(super) fn all_lines(&self) -> String {
        let mut data = self.header.to_value().to_string();
        data.push('\n');
        for i in 0..self.slots.len() {
            data.push_str(&self.full(i).to_line());
        }
        data
    }

    /// Reads the line of a [`EntryKind::Stored`] entry from the file as opened.
    pub(super) fn read_stored(&self, stored: &StoredEntry) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let file = self.lazy_file.as_ref()?;
        let mut buf = vec![0u8; stored.len as usize];
        if let Err(e) = file.read_exact_at(&mut buf, stored.offset) {
            tracing::warn!("could not read a session entry back: {e}");
            return None;
        }
        Some(buf)
    }

    /// Reads a [`EntryKind::Stored`] entry back from the file as opened.
    pub(super) fn load_stored(&self, stored: &StoredEntry) -> Option<SessionEntry> {
        let buf = self.read_stored(stored)?;
        store::parse_record(&buf).and_then(SessionEntry::from_value)
    }

    /// The context messages of a stored `message` entry: the message is deserialised straight
    /// from the line (no intermediate JSON tree), falling back to the full reader.
    pub(super) fn stored_context_messages(&self, stored: &StoredEntry) -> Vec<Message> {
        #[derive(serde::Deserialize)]
        struct Line {
            message: Message,
        }
        let Some(buf) = self.read_stored(stored) else {
            return Vec::new();
        };
        match serde_json::from_slice::<Line>(&buf) {
            Ok(line) => vec![line.message],
            Err(_) => store::parse_record(&buf)
                .and_then(SessionEntry::from_value)
                .filter(|e| !matches!(e.kind, EntryKind::Stored(_)))
                .map(|e| crate::context::entry_context_messages(&e))
                .unwrap_or_default(),
        }
    }

    /// Thinking level, model and what else resuming needs from the path `path` (slots), without
    /// reading stored payloads back except the one assistant message that names the model.
    pub(super) fn path_settings(&self, path: &[u32]) -> PathSettings {
        let mut out = PathSettings {
            thinking_level: "off".to_string(),
            ..PathSettings::default()
        };
        // The last model_change or assistant message names the model; the last
        // thinking_level_change the level ("off" without one): spec §9.2.
        let mut model_at = None;
        for &i in path {
            let slot = &self.slots[i as usize];
            let Some(e) = self.loaded_of(slot) else {
                out.has_messages = true;
                if slot.role == ROLE_ASSISTANT {
                    model_at = Some(i as usize);
                }
                continue;
            };
            match &e.kind {
                EntryKind::ThinkingLevelChange { thinking_level } => {
                    out.thinking_level = thinking_level.clone();
                    out.has_level_entry = true;
                }
                EntryKind::ModelChange { provider, model_id } => {
                    model_at = Some(i as usize);
                    out.model_change = Some(ModelRef {
                        provider: provider.clone(),
                        model_id: model_id.clone(),
                    });
                }
                EntryKind::Message(m) => {
                    out.has_messages = true;
                    if matches!(m, Message::Assistant(_)) {
                        model_at = Some(i as usize);
                    }
                }
                EntryKind::Stored(s) => {
                    out.has_messages = true;
                    if s.assistant {
                        model_at = Some(i as usize);
                    }
                }
                EntryKind::CustomMessage(_)
                | EntryKind::BranchSummary(_)
                | EntryKind::Compaction(_) => out.has_messages = true,
                _ => {}
            }
        }
        out.model = model_at.and_then(|i| match &self.full(i).kind {
            EntryKind::ModelChange { provider, model_id } => Some(ModelRef {
                provider: provider.clone(),
                model_id: model_id.clone(),
            }),
            EntryKind::Message(Message::Assistant(a)) => Some(ModelRef {
                provider: a.provider.clone(),
                model_id: a.model.clone(),
            }),
            _ => None,
        });
        out
    }
}
