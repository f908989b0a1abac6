//! The params of the API calls the session answers ([`super::super::FromHost::Call`] `params`,
//! as host.mjs sends them for upstream docs/extensions.md "ExtensionAPI Methods",
//! "ExtensionContext" and "ExtensionCommandContext").
//!
//! Every field reads leniently, as pi always read them: a field that is absent or of the wrong
//! type reads as its default (`""`, `None`, `false`, empty), and params that are not an object
//! read as all defaults ([`CallParams::read`]). Nested option objects read only from objects.

use super::super::lenient;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Params of an API call, read from the `params` value of a call.
pub trait CallParams: DeserializeOwned + Default {
    /// `params` as `Self`: an object reads field by field (see the module doc); anything else
    /// (`null`, an array, a string) reads as `Self::default()`. Never fails.
    fn read(params: &Value) -> Self {
        if !params.is_object() {
            return Self::default();
        }
        Self::deserialize(params).unwrap_or_default()
    }
}

/// Reads a nested options object: an object reads as `T` (leniently), anything else as the
/// default (an array does not read positionally, as a derived struct otherwise would).
fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let v = Value::deserialize(d)?;
    if !v.is_object() {
        return Ok(T::default());
    }
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// Reads a list of names: the strings of an array, in order (other elements are skipped);
/// anything but an array reads as empty.
fn strings<'de, D>(d: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => vec![],
    })
}

/// `pi.setSessionName(name)`: `{name}` (non-string = `""`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SetSessionNameParams {
    /// The display name.
    #[serde(deserialize_with = "lenient")]
    pub name: String,
}
impl CallParams for SetSessionNameParams {}

/// `options` of `pi.sendUserMessage` / `pi.sendMessage`: `{deliverAs?, triggerTurn?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SendOptions {
    /// `steer`, `followUp` or `nextTurn` (non-string = none; each call has its default).
    #[serde(deserialize_with = "lenient")]
    pub deliver_as: Option<String>,
    /// `sendMessage` only: whether an idle session starts a run for it (non-bool = `false`).
    #[serde(deserialize_with = "lenient")]
    pub trigger_turn: bool,
}

/// `pi.sendUserMessage(content, options?)`: `{content, options?}`; `content` is a string or
/// an array of content blocks.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SendUserMessageParams {
    /// The content as sent (absent = `null`); see [`Self::text`].
    pub content: Value,
    /// The delivery options.
    #[serde(deserialize_with = "object")]
    pub options: SendOptions,
}
impl CallParams for SendUserMessageParams {}

impl SendUserMessageParams {
    /// The text of `content`: a string as is, the `text` of each block that has a string one
    /// joined by `\n` for a block array, else `""` (images are not carried).
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    Value::Object(m) => m.get("text").and_then(Value::as_str),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// `pi.sendMessage(message, options?)`: `{message, options?}`; `message` is the
/// `{customType, content, display, details}` draft (read by
/// [`super::super::CustomMessageDraft`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SendMessageParams {
    /// The message draft as sent (absent = `null`).
    pub message: Value,
    /// The delivery options (`deliverAs` default `steer`, `triggerTurn` default `false`).
    #[serde(deserialize_with = "object")]
    pub options: SendOptions,
}
impl CallParams for SendMessageParams {}

/// The `role` of a message pi holds as an opaque object (`Message::Other`), to tell the
/// `role: "custom"` messages `pi.sendMessage` makes (non-string = none).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MessageRole {
    /// The role.
    #[serde(deserialize_with = "lenient")]
    pub role: Option<String>,
}

impl MessageRole {
    /// Whether `message` is `role: "custom"`.
    pub fn is_custom(message: &serde_json::Map<String, Value>) -> bool {
        Self::deserialize(message).is_ok_and(|r| r.role.as_deref() == Some("custom"))
    }
}

/// `pi.appendEntry(customType, data?)`: `{customType, data?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AppendEntryParams {
    /// The entry's `customType` (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub custom_type: String,
    /// The extension's data, any JSON (`null` = none).
    pub data: Option<Value>,
}
impl CallParams for AppendEntryParams {}

/// `pi.setLabel(entryId, label)`: `{entryId, label?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SetLabelParams {
    /// The labelled entry (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub entry_id: String,
    /// The label; none (absent, `null`, non-string) clears it.
    #[serde(deserialize_with = "lenient")]
    pub label: Option<String>,
}
impl CallParams for SetLabelParams {}

/// `pi.setActiveTools(names)`: `{names}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SetActiveToolsParams {
    /// The tool names, in order (non-strings skipped; a non-array = none).
    #[serde(deserialize_with = "strings")]
    pub names: Vec<String>,
}
impl CallParams for SetActiveToolsParams {}

/// `pi.setThinkingLevel(level)`: `{level}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SetThinkingLevelParams {
    /// The level's name as sent (non-string = none); parsed by the session.
    #[serde(deserialize_with = "lenient")]
    pub level: Option<String>,
}
impl CallParams for SetThinkingLevelParams {}

/// `pi.setModel(model)` and `ctx.modelRegistry.complete(model, …)`'s model: `{provider, id}`
/// (non-strings = `""`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SetModelParams {
    /// The model's provider.
    #[serde(deserialize_with = "lenient")]
    pub provider: String,
    /// The model's id.
    #[serde(deserialize_with = "lenient")]
    pub id: String,
}
impl CallParams for SetModelParams {}

/// `ctx.compact({customInstructions?})`: `{customInstructions?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactParams {
    /// Extra instructions for the summary (non-string = none).
    #[serde(deserialize_with = "lenient")]
    pub custom_instructions: Option<String>,
}
impl CallParams for CompactParams {}

/// `ctx.modelRegistry.complete(model, context, options?)`: `{provider, id, context, options}`.
/// `context` and `options` pass on as sent (absent = `null`) and are read as
/// [`super::CompleteContext`] / [`super::CompleteOptions`] by the session.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CompleteParams {
    /// The model's provider (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub provider: String,
    /// The model's id (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub id: String,
    /// `{systemPrompt?, messages, tools?}`.
    pub context: Value,
    /// Upstream `SimpleStreamOptions`.
    pub options: Value,
}
impl CallParams for CompleteParams {}

/// `ctx.newSession({parentSession?})` (command context): `{parentSession?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NewSessionParams {
    /// The parent session file to record (non-string = none).
    #[serde(deserialize_with = "lenient")]
    pub parent_session: Option<String>,
}
impl CallParams for NewSessionParams {}

/// The entries an extension's `ctx.newSession({setup})` callback appended to the new
/// session (host.mjs sends them once `setup` has returned): `{entries: [entry, …]}`, each a
/// session entry as upstream's `SessionManager.append*` build it (`{type, id, parentId,
/// timestamp, …}`). Anything but an array reads as none.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionSetupParams {
    /// The entries in the order they were appended.
    #[serde(deserialize_with = "values")]
    pub entries: Vec<Value>,
}
impl CallParams for SessionSetupParams {}

/// Reads a list of values: an array as is, anything else as empty.
fn values<'de, D>(d: D) -> Result<Vec<Value>, D::Error>
where
    D: Deserializer<'de>,
{
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items,
        _ => vec![],
    })
}

/// `ctx.fork(entryId, {position?})` (command context): `{entryId, position?}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ForkParams {
    /// The entry to fork from (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub entry_id: String,
    /// `at` (clone through the entry) or anything else (fork before it, upstream's default).
    #[serde(deserialize_with = "lenient")]
    pub position: Option<String>,
}
impl CallParams for ForkParams {}

impl ForkParams {
    /// Whether the fork keeps the entry itself (`position: "at"`).
    pub fn at(&self) -> bool {
        self.position.as_deref() == Some("at")
    }
}

/// `ctx.navigateTree(targetId, options?)` (command context): `{targetId, summarize?,
/// customInstructions?, replaceInstructions?, label?}`; values of the wrong type read as
/// absent (`summarize`: `false`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NavigateTreeParams {
    /// The entry to navigate to (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub target_id: String,
    /// Whether to summarize the branch left.
    #[serde(deserialize_with = "lenient")]
    pub summarize: bool,
    /// Instructions for the summarizer.
    #[serde(deserialize_with = "lenient")]
    pub custom_instructions: Option<String>,
    /// `true`: the instructions replace the default prompt.
    #[serde(deserialize_with = "lenient")]
    pub replace_instructions: Option<bool>,
    /// A label for the summary entry (or the target, without a summary).
    #[serde(deserialize_with = "lenient")]
    pub label: Option<String>,
}
impl CallParams for NavigateTreeParams {}

/// `ctx.switchSession(sessionPath)` (command context): `{sessionPath}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SwitchSessionParams {
    /// The session file (non-string = `""`).
    #[serde(deserialize_with = "lenient")]
    pub session_path: String,
}
impl CallParams for SwitchSessionParams {}
