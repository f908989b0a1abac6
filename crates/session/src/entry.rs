//! Session header and entry types, with upstream's exact JSON shapes and field order.
//!
//! Spec: `sessions.md` §2 (header, entry base), §3 (entry types) and
//! `messages-and-models.md` §5. Field order follows upstream's object literals as seen in the
//! 1.6 recordings: `type, id, parentId, timestamp, <payload>` for most entries, but
//! `type, customType, …, id, parentId, timestamp` for `custom` and `custom_message`.

use pi_ai::{Message, Usage, UserContent};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Current session file format version (spec `sessions.md` §2.1, §6).
pub const CURRENT_SESSION_VERSION: u64 = 3;

/// The current UTC time as ISO-8601 with milliseconds and a `Z` suffix, like JavaScript's
/// `Date.toISOString()` (e.g. `2026-03-14T09:05:12.345Z`).
pub fn iso_now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Parse an ISO-8601 / RFC 3339 timestamp into Unix epoch milliseconds; `None` if invalid.
pub(crate) fn iso_to_ms(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.timestamp_millis())
}

/// A fresh entry id: the first 8 lowercase hex chars of a random UUID v4, re-drawn (up to
/// 100 tries) while `exists` reports a collision; after that a full 36-char UUID
/// (spec `sessions.md` §2.2).
pub fn generate_entry_id(exists: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        let id = &uuid[..8];
        if !exists(id) {
            return id.to_string();
        }
    }
    uuid::Uuid::new_v4().to_string()
}

/// Line 1 of a session file:
/// `{"type":"session","version":3,"id","timestamp","cwd","parentSession"?}`
/// (spec `sessions.md` §2.1). Unknown header fields are kept in `extra` and written back.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    /// Format version; `None` for v1 files (written back only when present).
    pub version: Option<u64>,
    /// Session id (UUID v7 for new sessions, or a caller-supplied id).
    pub id: String,
    /// Creation time, ISO-8601 with ms, UTC.
    pub timestamp: String,
    /// Working directory the session belongs to ("" when the file has none).
    pub cwd: String,
    /// Path of the session file this one was forked/cloned from.
    pub parent_session: Option<String>,
    /// Fields not modelled here, preserved verbatim.
    pub extra: Map<String, Value>,
}

impl SessionHeader {
    /// A new v3 header stamped now.
    pub fn new(
        id: impl Into<String>,
        cwd: impl Into<String>,
        parent_session: Option<String>,
    ) -> Self {
        SessionHeader {
            version: Some(CURRENT_SESSION_VERSION),
            id: id.into(),
            timestamp: iso_now(),
            cwd: cwd.into(),
            parent_session,
            extra: Map::new(),
        }
    }

    /// Read a header from a parsed line: must be an object with `type:"session"` and a string
    /// `id`, otherwise `None`.
    pub fn from_value(value: &Value) -> Option<Self> {
        let map = value.as_object()?;
        if map.get("type").and_then(Value::as_str) != Some("session") {
            return None;
        }
        let id = map.get("id")?.as_str()?.to_string();
        let str_field = |k: &str| map.get(k).and_then(Value::as_str).map(str::to_string);
        let extra = map
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "type" | "version" | "id" | "timestamp" | "cwd" | "parentSession"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(SessionHeader {
            version: map.get("version").and_then(Value::as_u64),
            id,
            timestamp: str_field("timestamp").unwrap_or_default(),
            cwd: str_field("cwd").unwrap_or_default(),
            parent_session: str_field("parentSession"),
            extra,
        })
    }

    /// The header as a JSON object in upstream field order.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), "session".into());
        if let Some(v) = self.version {
            map.insert("version".into(), v.into());
        }
        map.insert("id".into(), self.id.clone().into());
        map.insert("timestamp".into(), self.timestamp.clone().into());
        map.insert("cwd".into(), self.cwd.clone().into());
        if let Some(p) = &self.parent_session {
            map.insert("parentSession".into(), p.clone().into());
        }
        for (k, v) in &self.extra {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

impl Serialize for SessionHeader {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SessionHeader {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        SessionHeader::from_value(&value)
            .ok_or_else(|| serde::de::Error::custom("not a session header"))
    }
}

fn de_lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    Ok(n.as_u64()
        .or_else(|| n.as_f64().map(|f| if f > 0.0 { f as u64 } else { 0 }))
        .unwrap_or(0))
}

/// Payload of a `compaction` entry (spec `sessions.md` §3.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    /// Full summary text.
    pub summary: String,
    /// Id of the first entry kept verbatim after the summary.
    #[serde(default)]
    pub first_kept_entry_id: String,
    /// Estimated context tokens before compaction.
    #[serde(deserialize_with = "de_lenient_u64")]
    pub tokens_before: u64,
    /// pi: `{readFiles, modifiedFiles}`; extensions: anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// LLM usage of the summarisation call(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// `true` when produced by an extension; pi writes `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
    /// Snapshot of the replayed system prompt/tools at this boundary (upstream 1.6), a
    /// `role:"system"` message kept as raw JSON so it round-trips exactly; emitted before the
    /// summary when the context is rebuilt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_message: Option<Value>,
}

/// Payload of a `branch_summary` entry (spec `sessions.md` §3.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryEntry {
    /// The id of the entry the summary is attached to (the leaf position before appending), or `"root"` at the root; not the abandoned leaf despite the name (sessions.md §3.5). `null` possible.
    #[serde(default)]
    pub from_id: Option<String>,
    /// Summary text; an empty summary contributes no message.
    pub summary: String,
    /// pi: `{readFiles, modifiedFiles}`; extensions: anything; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// LLM usage of the summarisation call (newer upstream); `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Wire `fromHook`: `true` when produced by an extension; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_hook: Option<bool>,
}

/// Payload of a `custom_message` entry (spec `sessions.md` §3.7): enters the model context as
/// a `custom` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessageEntry {
    /// Wire `customType`: the extension-defined message kind.
    pub custom_type: String,
    /// A string or text/image blocks; sent to the model as a user message.
    pub content: UserContent,
    /// Whether UIs should render it; absent reads as `false`.
    #[serde(default)]
    pub display: bool,
    /// Extension data, not sent to the model; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// Payload of a `usage` entry: usage not attached to a message (e.g. cache warming); counted
/// by session stats (messages-and-models.md §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageEntry {
    /// Usage category, e.g. `"cache_warm"`.
    pub kind: String,
    /// Provider id the usage was billed to.
    pub provider: String,
    /// Model id the usage was billed to.
    pub model: String,
    /// Tokens and US-dollar cost.
    pub usage: Usage,
    /// Free-form remark; `None` = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What an entry is, with its type-specific payload (spec `sessions.md` §3).
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    /// `message`: one agent message.
    Message(Message),
    /// `model_change`: `{provider, modelId}`.
    ModelChange {
        /// Provider id of the new model.
        provider: String,
        /// Wire `modelId`: id of the new model.
        model_id: String,
    },
    /// `thinking_level_change`: `{thinkingLevel}`.
    ThinkingLevelChange {
        /// Wire `thinkingLevel`: the new level, e.g. `"high"`, kept as written.
        thinking_level: String,
    },
    /// `compaction`.
    Compaction(CompactionEntry),
    /// `branch_summary`.
    BranchSummary(BranchSummaryEntry),
    /// `custom`: extension state, never in the model context.
    Custom {
        /// Wire `customType`: the extension-defined kind.
        custom_type: String,
        /// Extension state; `None` = absent.
        data: Option<Value>,
    },
    /// `custom_message`.
    CustomMessage(CustomMessageEntry),
    /// `label`: `label` absent = cleared.
    Label {
        /// Wire `targetId`: id of the labelled entry.
        target_id: String,
        /// The label text; `None` = absent (label cleared).
        label: Option<String>,
    },
    /// `session_info`: display name.
    SessionInfo {
        /// Session name; `None` = absent.
        name: Option<String>,
    },
    /// `context_edit`: `replacement` `None` (JSON `null`) hides the target from the model
    /// context; `Some({"content": …})` replaces its content.
    ContextEdit {
        /// Wire `targetId`: id of the edited entry.
        target_id: String,
        /// `None` (written as JSON `null`) hides the target; `Some` replaces its content.
        replacement: Option<Value>,
    },
    /// `usage`.
    Usage(UsageEntry),
    /// A `message` entry of a large session file whose payload was left in the file (issue 8):
    /// only where its line is and what resuming needs without it. The store reads it back
    /// (`SessionManager` materialises it) wherever the payload is needed; it is never
    /// serialised as is.
    Stored(StoredEntry),
    /// Any other type (or a known type whose payload did not parse): the whole line is kept
    /// verbatim in `raw` and written back unchanged except for `id`/`parentId`/`timestamp`.
    Unknown {
        /// The wire `type` string.
        entry_type: String,
        /// The whole JSON line as read.
        raw: Map<String, Value>,
    },
}

/// Where a [`EntryKind::Stored`] entry's line is in the session file, and the little that is
/// kept of it. Only `message` lines are stored this way.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    /// Byte offset of the line in the file as opened.
    pub offset: u64,
    /// Byte length of the line (without its `\n`).
    pub len: u32,
    /// Whether the message is an assistant message (its provider and model, which the
    /// context's model follows, are read back from the line when needed).
    pub assistant: bool,
}

impl EntryKind {
    /// The `type` discriminator as written in the file.
    pub fn type_name(&self) -> &str {
        match self {
            EntryKind::Message(_) => "message",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::Compaction(_) => "compaction",
            EntryKind::BranchSummary(_) => "branch_summary",
            EntryKind::Custom { .. } => "custom",
            EntryKind::CustomMessage(_) => "custom_message",
            EntryKind::Label { .. } => "label",
            EntryKind::SessionInfo { .. } => "session_info",
            EntryKind::ContextEdit { .. } => "context_edit",
            EntryKind::Usage(_) => "usage",
            EntryKind::Stored(_) => "message",
            EntryKind::Unknown { entry_type, .. } => entry_type,
        }
    }
}

/// One non-header line of a session file: base fields plus an [`EntryKind`] payload
/// (spec `sessions.md` §2.2).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEntry {
    /// 8 lowercase hex chars (full UUID as collision fallback); unique within the session.
    pub id: String,
    /// Parent entry id; `None` (JSON `null`) for a root.
    pub parent_id: Option<String>,
    /// Creation time of the entry, ISO-8601 with ms, UTC.
    pub timestamp: String,
    /// Type and payload.
    pub kind: EntryKind,
    /// Fields of a known type that are not modelled, preserved and written after the known
    /// ones. Always empty for [`EntryKind::Unknown`] (its `raw` holds everything).
    pub extra: Map<String, Value>,
}

const BASE_KEYS: [&str; 4] = ["type", "id", "parentId", "timestamp"];

fn known_keys(ty: &str) -> &'static [&'static str] {
    match ty {
        "message" => &["message"],
        "model_change" => &["provider", "modelId"],
        "thinking_level_change" => &["thinkingLevel"],
        "compaction" => &[
            "summary",
            "firstKeptEntryId",
            "tokensBefore",
            "details",
            "usage",
            "fromHook",
            "systemMessage",
        ],
        "branch_summary" => &["fromId", "summary", "details", "usage", "fromHook"],
        "custom" => &["customType", "data"],
        "custom_message" => &["customType", "content", "display", "details"],
        "label" => &["targetId", "label"],
        "session_info" => &["name"],
        "context_edit" => &["targetId", "replacement"],
        "usage" => &["kind", "provider", "model", "usage", "note"],
        _ => &[],
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelChangeP {
    provider: String,
    model_id: String,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingP {
    thinking_level: String,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CustomP {
    custom_type: String,
    #[serde(default)]
    data: Option<Value>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LabelP {
    target_id: String,
    #[serde(default)]
    label: Option<String>,
}
#[derive(Deserialize)]
struct SessionInfoP {
    #[serde(default)]
    name: Option<String>,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContextEditP {
    target_id: String,
    #[serde(default)]
    replacement: Option<Value>,
}

fn parse_kind(ty: &str, value: &Value) -> Option<EntryKind> {
    Some(match ty {
        "message" => EntryKind::Message(Message::deserialize(value.get("message")?).ok()?),
        "model_change" => {
            let p = ModelChangeP::deserialize(value).ok()?;
            EntryKind::ModelChange {
                provider: p.provider,
                model_id: p.model_id,
            }
        }
        "thinking_level_change" => EntryKind::ThinkingLevelChange {
            thinking_level: ThinkingP::deserialize(value).ok()?.thinking_level,
        },
        "compaction" => EntryKind::Compaction(CompactionEntry::deserialize(value).ok()?),
        "branch_summary" => EntryKind::BranchSummary(BranchSummaryEntry::deserialize(value).ok()?),
        "custom" => {
            let p = CustomP::deserialize(value).ok()?;
            EntryKind::Custom {
                custom_type: p.custom_type,
                data: p.data,
            }
        }
        "custom_message" => EntryKind::CustomMessage(CustomMessageEntry::deserialize(value).ok()?),
        "label" => {
            let p = LabelP::deserialize(value).ok()?;
            EntryKind::Label {
                target_id: p.target_id,
                label: p.label,
            }
        }
        "session_info" => EntryKind::SessionInfo {
            name: SessionInfoP::deserialize(value).ok()?.name,
        },
        "context_edit" => {
            let p = ContextEditP::deserialize(value).ok()?;
            EntryKind::ContextEdit {
                target_id: p.target_id,
                replacement: p.replacement,
            }
        }
        "usage" => EntryKind::Usage(UsageEntry::deserialize(value).ok()?),
        _ => return None,
    })
}

fn payload_object<T: Serialize>(payload: &T) -> Map<String, Value> {
    match serde_json::to_value(payload) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

impl SessionEntry {
    /// A new entry stamped now. `id` must already be unique in its session.
    pub fn new(id: String, parent_id: Option<String>, kind: EntryKind) -> Self {
        SessionEntry {
            id,
            parent_id,
            timestamp: iso_now(),
            kind,
            extra: Map::new(),
        }
    }

    /// The `type` discriminator.
    pub fn entry_type(&self) -> &str {
        self.kind.type_name()
    }

    /// The message of a `message` entry.
    pub fn message(&self) -> Option<&Message> {
        match &self.kind {
            EntryKind::Message(m) => Some(m),
            _ => None,
        }
    }

    /// Whether this is a `message` entry holding an assistant message.
    pub fn is_assistant_message(&self) -> bool {
        match &self.kind {
            EntryKind::Message(m) => m.role() == "assistant",
            EntryKind::Stored(s) => s.assistant,
            _ => false,
        }
    }

    /// Read an entry from one parsed line. Returns `None` unless the line is an object with a
    /// string `id`. A known type whose payload does not parse is kept as
    /// [`EntryKind::Unknown`] so nothing is lost.
    pub fn from_value(value: Value) -> Option<Self> {
        let map = value.as_object()?;
        let id = map.get("id")?.as_str()?.to_string();
        let parent_id = map
            .get("parentId")
            .and_then(Value::as_str)
            .map(str::to_string);
        let timestamp = map
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ty = map
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(kind) = parse_kind(&ty, &value) {
            let known = known_keys(&ty);
            let extra = map
                .iter()
                .filter(|(k, _)| !BASE_KEYS.contains(&k.as_str()) && !known.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return Some(SessionEntry {
                id,
                parent_id,
                timestamp,
                kind,
                extra,
            });
        }
        let Value::Object(raw) = value else {
            return None;
        };
        Some(SessionEntry {
            id,
            parent_id,
            timestamp,
            kind: EntryKind::Unknown {
                entry_type: ty,
                raw,
            },
            extra: Map::new(),
        })
    }

    /// The entry as a JSON object in upstream field order.
    pub fn to_value(&self) -> Value {
        let parent = self
            .parent_id
            .clone()
            .map(Value::String)
            .unwrap_or(Value::Null);
        if let EntryKind::Unknown { raw, .. } = &self.kind {
            let mut map = raw.clone();
            map.insert("id".into(), self.id.clone().into());
            map.insert("parentId".into(), parent);
            map.insert("timestamp".into(), self.timestamp.clone().into());
            return Value::Object(map);
        }
        let mut map = Map::new();
        map.insert("type".into(), self.entry_type().into());
        let payload: Map<String, Value> = match &self.kind {
            EntryKind::Message(m) => {
                let mut p = Map::new();
                p.insert(
                    "message".into(),
                    serde_json::to_value(m).unwrap_or(Value::Null),
                );
                p
            }
            EntryKind::ModelChange { provider, model_id } => {
                let mut p = Map::new();
                p.insert("provider".into(), provider.clone().into());
                p.insert("modelId".into(), model_id.clone().into());
                p
            }
            EntryKind::ThinkingLevelChange { thinking_level } => {
                let mut p = Map::new();
                p.insert("thinkingLevel".into(), thinking_level.clone().into());
                p
            }
            EntryKind::Compaction(c) => payload_object(c),
            EntryKind::BranchSummary(b) => payload_object(b),
            EntryKind::Custom { custom_type, data } => {
                let mut p = Map::new();
                p.insert("customType".into(), custom_type.clone().into());
                if let Some(d) = data {
                    p.insert("data".into(), d.clone());
                }
                p
            }
            EntryKind::CustomMessage(c) => payload_object(c),
            EntryKind::Label { target_id, label } => {
                let mut p = Map::new();
                p.insert("targetId".into(), target_id.clone().into());
                if let Some(l) = label {
                    p.insert("label".into(), l.clone().into());
                }
                p
            }
            EntryKind::SessionInfo { name } => {
                let mut p = Map::new();
                if let Some(n) = name {
                    p.insert("name".into(), n.clone().into());
                }
                p
            }
            EntryKind::ContextEdit {
                target_id,
                replacement,
            } => {
                let mut p = Map::new();
                p.insert("targetId".into(), target_id.clone().into());
                p.insert(
                    "replacement".into(),
                    replacement.clone().unwrap_or(Value::Null),
                );
                p
            }
            EntryKind::Usage(u) => payload_object(u),
            EntryKind::Stored(_) | EntryKind::Unknown { .. } => Map::new(),
        };
        let payload_first = matches!(
            self.kind,
            EntryKind::Custom { .. } | EntryKind::CustomMessage(_)
        );
        let mut payload = Some(payload);
        if payload_first {
            map.extend(payload.take().unwrap_or_default());
        }
        map.insert("id".into(), self.id.clone().into());
        map.insert("parentId".into(), parent);
        map.insert("timestamp".into(), self.timestamp.clone().into());
        map.extend(payload.unwrap_or_default());
        for (k, v) in &self.extra {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(map)
    }

    /// The entry as one JSONL line: compact JSON followed by `\n`.
    pub fn to_line(&self) -> String {
        let mut line = self.to_value().to_string();
        line.push('\n');
        line
    }
}

impl Serialize for SessionEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SessionEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        SessionEntry::from_value(value)
            .ok_or_else(|| serde::de::Error::custom("not a session entry (object with string id)"))
    }
}
