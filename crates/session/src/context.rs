//! Rebuilding the model context and the tree view from session entries.
//!
//! Spec: `sessions.md` §4.3 (path), §9 (context rebuild), §10.3 (`get_tree`), with upstream
//! 1.6's projection rules: system messages before a compaction's kept range are replaced by
//! the compaction's `systemMessage` snapshot, and `context_edit` entries on the selected
//! range hide (`replacement: null`) or replace the content of their target.

use std::collections::{HashMap, HashSet};

use pi_ai::{Content, Message, SystemMessage, UserContent};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::entry::{iso_to_ms, EntryKind, SessionEntry, StoredEntry};

/// A `{provider, modelId}` reference restored from a session (spec `sessions.md` §9.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    /// Provider id.
    pub provider: String,
    /// Wire `modelId`: the provider's model id.
    pub model_id: String,
}

/// Result of [`build_session_context`] (spec `sessions.md` §9.1).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionContext {
    /// The agent messages of the active branch, compaction and context edits applied.
    pub messages: Vec<Message>,
    /// Last `thinking_level_change` on the path, `"off"` if none.
    pub thinking_level: String,
    /// Last `model_change` or assistant message's model on the path.
    pub model: Option<ModelRef>,
}

/// One node of [`SessionManager::get_tree`](super::SessionManager::get_tree), serialized as
/// `{entry, children, label?, labelTimestamp?}` (spec `sessions.md` §10.3).
///
/// A linear session of N entries is a tree N nodes deep, so neither serializing nor dropping a
/// node recurses: [`Serialize`] writes the whole subtree with an explicit stack (as raw JSON,
/// so it needs `serde_json`'s serializer, which is what the RPC writer uses) and [`Drop`] takes
/// the children apart level by level. A 100,000-entry chain used to overflow the stack and
/// abort pi (upstream 1.6 answers it with `Maximum call stack size exceeded`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTreeNode {
    /// The entry at this node, serialized as in the session file.
    pub entry: SessionEntry,
    /// Child nodes sorted by entry timestamp (stable for ties).
    pub children: Vec<SessionTreeNode>,
    /// Resolved label of this entry.
    pub label: Option<String>,
    /// Timestamp of the label entry that set `label`.
    pub label_timestamp: Option<String>,
}

impl SessionTreeNode {
    /// The subtree as JSON text: `{"entry":…,"children":[…],"label":…,"labelTimestamp":…}`
    /// (the field order of upstream's nodes; `label`/`labelTimestamp` only when set), built
    /// without recursion. Errors: an entry that `serde_json` cannot serialize.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        fn open(n: &SessionTreeNode, out: &mut String) -> Result<(), serde_json::Error> {
            out.push_str("{\"entry\":");
            out.push_str(&serde_json::to_string(&n.entry)?);
            out.push_str(",\"children\":[");
            Ok(())
        }
        fn close(n: &SessionTreeNode, out: &mut String) -> Result<(), serde_json::Error> {
            out.push(']');
            if let Some(label) = &n.label {
                out.push_str(",\"label\":");
                out.push_str(&serde_json::to_string(label)?);
            }
            if let Some(ts) = &n.label_timestamp {
                out.push_str(",\"labelTimestamp\":");
                out.push_str(&serde_json::to_string(ts)?);
            }
            out.push('}');
            Ok(())
        }
        let mut out = String::new();
        open(self, &mut out)?;
        // (node, index of its next child to write)
        let mut stack: Vec<(&SessionTreeNode, usize)> = vec![(self, 0)];
        while let Some(&(node, next)) = stack.last() {
            if let Some(child) = node.children.get(next) {
                if next > 0 {
                    out.push(',');
                }
                if let Some(top) = stack.last_mut() {
                    top.1 += 1;
                }
                open(child, &mut out)?;
                stack.push((child, 0));
            } else {
                close(node, &mut out)?;
                stack.pop();
            }
        }
        Ok(out)
    }
}

impl Serialize for SessionTreeNode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.to_json().map_err(serde::ser::Error::custom)?;
        let raw =
            serde_json::value::RawValue::from_string(text).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl Drop for SessionTreeNode {
    fn drop(&mut self) {
        let mut pending = std::mem::take(&mut self.children);
        while let Some(mut node) = pending.pop() {
            pending.append(&mut node.children);
        }
    }
}

/// Index from entry id to position; the last entry wins for duplicate ids.
pub(crate) fn build_index(entries: &[SessionEntry]) -> HashMap<String, usize> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.clone(), i))
        .collect()
}

/// Root-first path from `leaf` following `parentId` links. Stops at a missing parent and at
/// cycles (malformed files), so it always terminates.
pub(crate) fn path_to<'a>(
    entries: &'a [SessionEntry],
    index: &HashMap<String, usize>,
    leaf: Option<&str>,
) -> Vec<&'a SessionEntry> {
    let mut path = Vec::new();
    let mut seen = HashSet::new();
    let mut current = leaf.and_then(|id| index.get(id)).map(|&i| &entries[i]);
    while let Some(entry) = current {
        if !seen.insert(entry.id.as_str()) {
            break;
        }
        path.push(entry);
        current = entry
            .parent_id
            .as_deref()
            .and_then(|p| index.get(p))
            .map(|&i| &entries[i]);
    }
    path.reverse();
    path
}

/// Replay every system message into one holding the current prompt and tools (upstream
/// `getCurrentSystemMessage`): contents are joined with a blank line, `sections` are patched
/// by name (`null` removes), tools are resolved from `toolsAdded`/`toolsRemoved` in order.
pub fn current_system_message<M: std::borrow::Borrow<Message>>(
    messages: &[M],
) -> Option<SystemMessage> {
    let mut content: Vec<String> = Vec::new();
    let mut sections = Map::new();
    let mut timestamp = None;
    let mut tools: Vec<(String, Value)> = Vec::new();
    for m in messages {
        let Message::System(s) = m.borrow() else {
            continue;
        };
        timestamp.get_or_insert(s.timestamp);
        let text = s.content.joined_text();
        if !text.is_empty() {
            content.push(text);
        }
        for (name, value) in s.sections.iter().flatten() {
            if value.is_null() {
                sections.shift_remove(name);
            } else {
                sections.insert(name.clone(), value.clone());
            }
        }
        let tool_name = |t: &Value| {
            t.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        for t in s.tools_removed.iter().flatten() {
            let name = tool_name(t);
            tools.retain(|(n, _)| *n != name);
        }
        for t in s.tools_added.iter().flatten() {
            let name = tool_name(t);
            match tools.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = t.clone(),
                None => tools.push((name, t.clone())),
            }
        }
    }
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    Some(SystemMessage {
        content: UserContent::Text(content.join("\n\n")),
        sections: (!sections.is_empty()).then_some(sections),
        timestamp: timestamp.unwrap_or(0),
        tools_added: (!tools.is_empty()).then(|| tools.into_iter().map(|(_, t)| t).collect()),
        tools_removed: None,
        replace: None,
        extra: Default::default(),
    })
}

/// A replayed system message as JSON in upstream's field order
/// (`role, content, sections?, toolsAdded?, timestamp`), for a compaction's `systemMessage`.
pub(crate) fn system_message_value(s: &SystemMessage, timestamp: i64) -> Value {
    let mut map = Map::new();
    map.insert("role".into(), "system".into());
    map.insert(
        "content".into(),
        serde_json::to_value(&s.content).unwrap_or(Value::Null),
    );
    if let Some(sections) = &s.sections {
        map.insert("sections".into(), Value::Object(sections.clone()));
    }
    if let Some(tools) = &s.tools_added {
        map.insert("toolsAdded".into(), Value::Array(tools.clone()));
    }
    map.insert("timestamp".into(), timestamp.into());
    Value::Object(map)
}

fn ms_value(iso: &str) -> Value {
    iso_to_ms(iso).map(Value::from).unwrap_or(Value::Null)
}

fn other_message(fields: Vec<(&str, Value)>) -> Message {
    Message::Other(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// The messages one entry contributes to the context (spec `sessions.md` §9.3).
fn entry_messages(entry: &SessionEntry, load: StoredLoader<'_>) -> Vec<Message> {
    match &entry.kind {
        EntryKind::Message(m) => vec![m.clone()],
        EntryKind::Stored(stored) => match load(stored) {
            Some(SessionEntry {
                kind: EntryKind::Message(m),
                ..
            }) => vec![m],
            Some(other) if !matches!(other.kind, EntryKind::Stored(_)) => {
                entry_messages(&other, load)
            }
            _ => vec![],
        },
        EntryKind::CustomMessage(c) => {
            let mut fields = vec![
                ("role", Value::from("custom")),
                ("customType", Value::from(c.custom_type.clone())),
                (
                    "content",
                    serde_json::to_value(&c.content).unwrap_or(Value::Null),
                ),
                ("display", Value::from(c.display)),
            ];
            if let Some(d) = &c.details {
                fields.push(("details", d.clone()));
            }
            fields.push(("timestamp", ms_value(&entry.timestamp)));
            vec![other_message(fields)]
        }
        EntryKind::BranchSummary(b) if !b.summary.is_empty() => vec![other_message(vec![
            ("role", "branchSummary".into()),
            ("summary", b.summary.clone().into()),
            (
                "fromId",
                b.from_id.clone().map(Value::String).unwrap_or(Value::Null),
            ),
            ("timestamp", ms_value(&entry.timestamp)),
        ])],
        EntryKind::Compaction(c) => {
            let mut out = Vec::new();
            if let Some(sys) = &c.system_message {
                if let Ok(m) = Message::deserialize(sys) {
                    out.push(m);
                }
            }
            out.push(other_message(vec![
                ("role", "compactionSummary".into()),
                ("summary", c.summary.clone().into()),
                ("tokensBefore", c.tokens_before.into()),
                ("timestamp", ms_value(&entry.timestamp)),
            ]));
            out
        }
        _ => Vec::new(),
    }
}

/// Apply a non-null `context_edit` replacement `{content}` to a user/assistant/toolResult/
/// custom message; other roles are left alone. A string replacement for assistant/toolResult
/// becomes one text block.
pub(crate) fn replace_content(message: Message, replacement: &Value) -> Message {
    let role = message.role().to_string();
    if !matches!(
        role.as_str(),
        "user" | "assistant" | "toolResult" | "custom"
    ) {
        return message;
    }
    let Some(content) = replacement.get("content") else {
        return message;
    };
    let content = match content {
        Value::String(s) if role == "assistant" || role == "toolResult" => {
            serde_json::to_value(vec![Content::text(s.clone())]).unwrap_or(Value::Null)
        }
        other => other.clone(),
    };
    let Ok(Value::Object(mut map)) = serde_json::to_value(&message) else {
        return message;
    };
    map.insert("content".into(), content);
    serde_json::from_value(Value::Object(map.clone())).unwrap_or(Message::Other(map))
}

/// Entries selected for the context: the whole path, or with a compaction C on it:
/// `[C, path[firstKept..C] minus system messages, path[C+1..]]` (upstream
/// `buildContextEntries`).
fn context_entries<'a>(path: &[&'a SessionEntry]) -> Vec<&'a SessionEntry> {
    let Some(cidx) = path
        .iter()
        .rposition(|e| matches!(e.kind, EntryKind::Compaction(_)))
    else {
        return path.to_vec();
    };
    let compaction = path[cidx];
    let first_kept = match &compaction.kind {
        EntryKind::Compaction(c) => c.first_kept_entry_id.as_str(),
        _ => "",
    };
    let mut out = vec![compaction];
    let mut found = false;
    for entry in &path[..cidx] {
        if entry.id == first_kept {
            found = true;
        }
        let is_system = matches!(&entry.kind, EntryKind::Message(Message::System(_)));
        if found && !is_system {
            out.push(entry);
        }
    }
    out.extend_from_slice(&path[cidx + 1..]);
    out
}

/// Reads a [`EntryKind::Stored`] entry back from its file (`None` if it cannot).
pub(crate) type StoredLoader<'a> = &'a dyn Fn(&StoredEntry) -> Option<SessionEntry>;
/// One entry of the context projection: the entry and the messages it contributes after
/// compaction and `context_edit`s are applied (upstream 1.6 `buildSessionProjection`). An
/// entry hidden by a `context_edit` (or a metadata entry) is present with no messages, so
/// compaction can still see where it lies.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedEntry {
    /// The session entry.
    pub entry: SessionEntry,
    /// What it contributes to the model context, in order (possibly nothing).
    pub messages: Vec<Message>,
}

/// The messages `entry` contributes to the context by itself, before any `context_edit`
/// (upstream `sessionEntryToContextMessages`; a compaction gives its `systemMessage` snapshot
/// and its `compactionSummary`).
pub fn entry_context_messages(entry: &SessionEntry) -> Vec<Message> {
    entry_messages(entry, &|_| None)
}

/// The context projection of a root-first path (spec `sessions.md` §9): the selected entries
/// (see `context_entries`) in order, each with the messages it contributes.
pub fn project_path(path: &[&SessionEntry]) -> Vec<ProjectedEntry> {
    project_path_with(path, &|_| None)
}

/// [`project_path`] for a path that may hold [`EntryKind::Stored`] entries (large files): each
/// selected stored entry is read back through `load`, and its projection holds the loaded
/// entry, so callers (compaction) see message roles and contents.
pub(crate) fn project_path_with(
    path: &[&SessionEntry],
    load: StoredLoader<'_>,
) -> Vec<ProjectedEntry> {
    let selected = context_entries(path);
    let mut edits: HashMap<&str, &Option<Value>> = HashMap::new();
    for entry in &selected {
        if let EntryKind::ContextEdit {
            target_id,
            replacement,
        } = &entry.kind
        {
            edits.insert(target_id.as_str(), replacement);
        }
    }
    let mut out = Vec::with_capacity(selected.len());
    for (i, entry) in selected.iter().enumerate() {
        // An older compaction inside the kept range contributes nothing; only the newest
        // (index 0) provides the summary.
        let loaded = match &entry.kind {
            EntryKind::Stored(stored) => load(stored),
            _ => None,
        };
        let entry: &SessionEntry = loaded.as_ref().unwrap_or(entry);
        let produced = if i > 0 && matches!(entry.kind, EntryKind::Compaction(_)) {
            Vec::new()
        } else {
            entry_messages(entry, load)
        };
        let messages = match edits.get(entry.id.as_str()) {
            None => produced,
            Some(None) => Vec::new(),
            Some(Some(replacement)) => produced
                .into_iter()
                .map(|m| replace_content(m, replacement))
                .collect(),
        };
        out.push(ProjectedEntry {
            entry: entry.clone(),
            messages,
        });
    }
    out
}

pub(crate) fn context_from_path(path: &[&SessionEntry]) -> SessionContext {
    context_from_path_with(path, &|_| None)
}

/// [`context_from_path`] for a path that may hold [`EntryKind::Stored`] entries: the selected
/// ones are read back one at a time through `load` and moved into the context, so building
/// the context of a large file holds each message once.
pub(crate) fn context_from_path_with(
    path: &[&SessionEntry],
    load: StoredLoader<'_>,
) -> SessionContext {
    let mut thinking_level = "off".to_string();
    let mut model = None;
    for entry in path {
        match &entry.kind {
            EntryKind::ThinkingLevelChange { thinking_level: t } => thinking_level = t.clone(),
            EntryKind::ModelChange { provider, model_id } => {
                model = Some(ModelRef {
                    provider: provider.clone(),
                    model_id: model_id.clone(),
                })
            }
            EntryKind::Message(Message::Assistant(a)) => {
                model = Some(ModelRef {
                    provider: a.provider.clone(),
                    model_id: a.model.clone(),
                })
            }
            EntryKind::Stored(
                stored @ StoredEntry {
                    assistant: true, ..
                },
            ) => {
                if let Some(SessionEntry {
                    kind: EntryKind::Message(Message::Assistant(a)),
                    ..
                }) = load(stored)
                {
                    model = Some(ModelRef {
                        provider: a.provider,
                        model_id: a.model,
                    })
                }
            }
            _ => {}
        }
    }
    let selected = context_entries(path);
    let mut edits: HashMap<&str, &Option<Value>> = HashMap::new();
    for entry in &selected {
        if let EntryKind::ContextEdit {
            target_id,
            replacement,
        } = &entry.kind
        {
            edits.insert(target_id.as_str(), replacement);
        }
    }
    // Almost every selected entry gives one message: reserving avoids the doubling's slack
    // (up to half the vector, 336 bytes per message) in a long session.
    let mut messages = Vec::with_capacity(selected.len());
    for (i, entry) in selected.iter().enumerate() {
        // An older compaction inside the kept range contributes nothing; only the newest
        // (index 0) provides the summary.
        if i > 0 && matches!(entry.kind, EntryKind::Compaction(_)) {
            continue;
        }
        let produced = entry_messages(entry, load);
        match edits.get(entry.id.as_str()) {
            None => messages.extend(produced),
            Some(None) => {}
            Some(Some(replacement)) => messages.extend(
                produced
                    .into_iter()
                    .map(|m| replace_content(m, replacement)),
            ),
        }
    }
    SessionContext {
        messages,
        thinking_level,
        model,
    }
}

/// Rebuild the context for `leaf_id` from `entries` (file order), spec `sessions.md` §9.1.
/// `None` means "before the first entry" and yields an empty context; an unknown id falls back
/// to the last entry.
pub fn build_session_context(entries: &[SessionEntry], leaf_id: Option<&str>) -> SessionContext {
    let Some(leaf) = leaf_id else {
        return SessionContext {
            thinking_level: "off".into(),
            ..SessionContext::default()
        };
    };
    let index = build_index(entries);
    let leaf = if index.contains_key(leaf) {
        Some(leaf)
    } else {
        entries.last().map(|e| e.id.as_str())
    };
    let path = path_to(entries, &index, leaf);
    context_from_path(&path)
}

/// Build the tree view without recursion (deep linear sessions are common).
pub(crate) fn build_tree(
    entries: &[SessionEntry],
    labels: &HashMap<String, (String, String)>,
) -> Vec<SessionTreeNode> {
    let index = build_index(entries);
    // Only the last entry of a duplicated id is a node (matches upstream's Map semantics).
    let is_node = |i: usize| index.get(&entries[i].id) == Some(&i);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
    let mut roots = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if !is_node(i) {
            continue;
        }
        match entry.parent_id.as_deref() {
            None => roots.push(i),
            Some(p) if p == entry.id => roots.push(i),
            Some(p) => match index.get(p) {
                Some(&pi) => children[pi].push(i),
                None => roots.push(i),
            },
        }
    }
    for list in &mut children {
        list.sort_by_key(|&i| iso_to_ms(&entries[i].timestamp));
    }
    let make_node = |i: usize, kids: Vec<SessionTreeNode>| {
        let label = labels.get(&entries[i].id);
        SessionTreeNode {
            entry: entries[i].clone(),
            children: kids,
            label: label.map(|l| l.0.clone()),
            label_timestamp: label.map(|l| l.1.clone()),
        }
    };
    let mut built: Vec<Option<SessionTreeNode>> = vec![None; entries.len()];
    let mut visited = vec![false; entries.len()];
    for &root in &roots {
        // Iterative post-order: (node, children expanded?)
        let mut stack = vec![(root, false)];
        while let Some((i, expanded)) = stack.pop() {
            if expanded {
                let kids = children[i]
                    .iter()
                    .filter_map(|&c| built[c].take())
                    .collect();
                built[i] = Some(make_node(i, kids));
                continue;
            }
            if visited[i] {
                continue;
            }
            visited[i] = true;
            stack.push((i, true));
            for &c in children[i].iter().rev() {
                if !visited[c] {
                    stack.push((c, false));
                }
            }
        }
    }
    roots.into_iter().filter_map(|r| built[r].take()).collect()
}
