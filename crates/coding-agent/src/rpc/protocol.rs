//! The RPC wire protocol: every command, response and event as a serde type, named as on the
//! wire (spec rpc-protocol.md §3–§6, upstream-1.6-notes.md).
//!
//! * [`RpcCommand`]: one stdin record, tagged by `type`. Parsing is as lenient as upstream's:
//!   unknown fields are ignored, a field of the wrong JSON type reads as absent (upstream does no
//!   validation and lets the value fail later, see §3.1), an unknown `type` is
//!   [`RpcCommand::Unknown`].
//! * [`RpcResponse`]: `{id?, type:"response", command?, success, data?|error?}` with a typed
//!   [`ResponseData`] payload per command.
//! * [`RpcEvent`]: every event, tagged by `type`, fields in upstream's key order.
//! * [`RpcOutput`]: one stdout record (a response or an event); clients and tests decode every
//!   line into it.
//!
//! No event or response JSON is built anywhere else; the serializers here keep upstream's key
//! order (`id, type, command, success, data/error` for responses; `type` first for events).

use crate::session::{SessionEntry, SessionTreeNode};
use crate::tools::shell::BashResult;
use pi_agent::{AgentEvent, ToolOutput};
use pi_ai::{AssistantMessageEvent, Content, Message, Model, ToolCall, Usage};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Lenient field readers (rpc-protocol.md §3.1: upstream validates nothing up front).
// ---------------------------------------------------------------------------------------------

/// A string field: `Some` only for a JSON string; any other JSON value reads as absent.
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// A boolean field: `Some` only for a JSON boolean.
fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(Value::deserialize(d)?.as_bool())
}

/// Any JSON value, with a present `null` kept as `Some(Value::Null)` (absent stays `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// JavaScript's `String(value)` for a JSON value, as upstream interpolates command fields into
/// error texts (`Entry not found: null`).
pub fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n
            .as_f64()
            .map(|f| pi_agent::validate::json_number(f).to_string())
            .unwrap_or_else(|| n.to_string()),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Null => String::new(),
                other => js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Commands (stdin)
// ---------------------------------------------------------------------------------------------

/// One command record (rpc-protocol.md §4), tagged by `type`. The `id` is read separately
/// ([`CommandEnvelope`]) because it is echoed for every command, known or not.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RpcCommand {
    /// `prompt {message, images?, streamingBehavior?}` (§4.1).
    Prompt {
        /// User text; absent = empty.
        #[serde(default, deserialize_with = "lenient_string")]
        message: Option<String>,
        /// `ImageContent[]`, decoded by the handler (a bad image is a failure response).
        #[serde(default)]
        images: Option<Value>,
        /// `"steer"` | `"followUp"`; required while a run is active.
        #[serde(
            default,
            rename = "streamingBehavior",
            deserialize_with = "lenient_string"
        )]
        streaming_behavior: Option<String>,
    },
    /// `steer {message, images?}` (§4.1).
    Steer {
        /// User text; absent = empty.
        #[serde(default, deserialize_with = "lenient_string")]
        message: Option<String>,
        /// `ImageContent[]`.
        #[serde(default)]
        images: Option<Value>,
    },
    /// `follow_up {message, images?}` (§4.1).
    FollowUp {
        /// User text; absent = empty.
        #[serde(default, deserialize_with = "lenient_string")]
        message: Option<String>,
        /// `ImageContent[]`.
        #[serde(default)]
        images: Option<Value>,
    },
    /// `abort` (§4.1): answered after the aborted run has settled.
    Abort {},
    /// `clear_queue` (§4.1).
    ClearQueue {},
    /// `new_session {parentSession?}` (§4.1).
    NewSession {
        /// Path recorded as the new header's `parentSession`.
        #[serde(default, rename = "parentSession", deserialize_with = "lenient_string")]
        parent_session: Option<String>,
    },
    /// `get_state` (§4.2).
    GetState {},
    /// `get_messages` (§4.2).
    GetMessages {},
    /// `set_model {provider, modelId}` (§4.3).
    SetModel {
        /// Provider name.
        #[serde(default, deserialize_with = "lenient_string")]
        provider: Option<String>,
        /// Model id.
        #[serde(default, rename = "modelId", deserialize_with = "lenient_string")]
        model_id: Option<String>,
    },
    /// `cycle_model` (§4.3).
    CycleModel {},
    /// `get_available_models` (§4.3).
    GetAvailableModels {},
    /// `set_thinking_level {level}` (§4.4); an unknown level clamps like `off`.
    SetThinkingLevel {
        /// Requested level.
        #[serde(default, deserialize_with = "lenient_string")]
        level: Option<String>,
    },
    /// `cycle_thinking_level` (§4.4).
    CycleThinkingLevel {},
    /// `get_available_thinking_levels` (§4.4).
    GetAvailableThinkingLevels {},
    /// `set_steering_mode {mode}` (§4.5): any value is accepted and stored.
    SetSteeringMode {
        /// The mode as sent (`"all"`, `"one-at-a-time"` or anything else).
        #[serde(default, deserialize_with = "present")]
        mode: Option<Value>,
    },
    /// `set_follow_up_mode {mode}` (§4.5).
    SetFollowUpMode {
        /// The mode as sent.
        #[serde(default, deserialize_with = "present")]
        mode: Option<Value>,
    },
    /// `compact {customInstructions?}` (§4.6).
    Compact {
        /// Extra summarization instructions.
        #[serde(
            default,
            rename = "customInstructions",
            deserialize_with = "lenient_string"
        )]
        custom_instructions: Option<String>,
    },
    /// `set_auto_compaction {enabled}` (§4.6).
    SetAutoCompaction {
        /// New state; a non-boolean reads as `false`.
        #[serde(default, deserialize_with = "lenient_bool")]
        enabled: Option<bool>,
    },
    /// `set_auto_retry {enabled}` (§4.7).
    SetAutoRetry {
        /// New state; a non-boolean reads as `false`.
        #[serde(default, deserialize_with = "lenient_bool")]
        enabled: Option<bool>,
    },
    /// `abort_retry` (§4.7).
    AbortRetry {},
    /// `bash {command, excludeFromContext?}` (§4.8).
    Bash {
        /// The shell command.
        #[serde(default, deserialize_with = "lenient_string")]
        command: Option<String>,
        /// Keep the result out of the model context.
        #[serde(
            default,
            rename = "excludeFromContext",
            deserialize_with = "lenient_bool"
        )]
        exclude_from_context: Option<bool>,
    },
    /// `abort_bash` (§4.8).
    AbortBash {},
    /// `get_session_stats` (§4.9).
    GetSessionStats {},
    /// `export_html {outputPath?}` (§4.9).
    ExportHtml {
        /// Where to write the file.
        #[serde(default, rename = "outputPath", deserialize_with = "lenient_string")]
        output_path: Option<String>,
    },
    /// `switch_session {sessionPath}` (§4.9).
    SwitchSession {
        /// The session file to open.
        #[serde(default, rename = "sessionPath", deserialize_with = "lenient_string")]
        session_path: Option<String>,
    },
    /// `fork {entryId}` (§4.9).
    Fork {
        /// A user-message entry id.
        #[serde(default, rename = "entryId", deserialize_with = "lenient_string")]
        entry_id: Option<String>,
    },
    /// `clone` (§4.9).
    Clone {},
    /// `get_fork_messages` (§4.9).
    GetForkMessages {},
    /// `get_entries {since?}` (§4.9). A present `null` or `""` is an unknown cursor, as upstream.
    GetEntries {
        /// Entry id cursor; `Some(Value::Null)` when sent as `null`.
        #[serde(default, deserialize_with = "present")]
        since: Option<Value>,
    },
    /// `get_tree` (§4.9).
    GetTree {},
    /// `get_last_assistant_text` (§4.9).
    GetLastAssistantText {},
    /// `set_session_name {name}` (§4.9).
    SetSessionName {
        /// The new name (trimmed by the handler).
        #[serde(default, deserialize_with = "lenient_string")]
        name: Option<String>,
    },
    /// `get_commands` (§4.10).
    GetCommands {},
    /// `extension_ui_response {id, value?|confirmed?|cancelled?}` (§6.2): never answered.
    ExtensionUiResponse {
        /// The dialog's request id (also in the envelope).
        #[serde(default, deserialize_with = "present")]
        id: Option<Value>,
        /// Selected option / entered text.
        #[serde(default, deserialize_with = "lenient_string")]
        value: Option<String>,
        /// Confirm-dialog answer.
        #[serde(default, deserialize_with = "lenient_bool")]
        confirmed: Option<bool>,
        /// The user dismissed the dialog.
        #[serde(default, deserialize_with = "lenient_bool")]
        cancelled: Option<bool>,
    },
    /// Any other `type` string: answered `Unknown command: <type>`.
    #[serde(other)]
    Unknown,
}

/// What one parsed input line is, before dispatch (rpc-protocol.md §2.3–§2.4).
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A command with its `id` (echoed as given, any JSON value) and `type` string.
    Command {
        /// The `id` to echo; `None` = absent.
        id: Option<Value>,
        /// The `type` string as sent.
        kind: String,
        /// The typed command ([`RpcCommand::Unknown`] for an unknown `type`).
        command: RpcCommand,
    },
    /// A known `type` whose fields could not be read at all: answered as a failure.
    Invalid {
        /// The `id` to echo.
        id: Option<Value>,
        /// The `type` string.
        kind: String,
        /// What was wrong.
        error: String,
    },
    /// Valid JSON without a string `type` (`42`, `[]`, `{}`): `Unknown command: undefined`.
    Untyped {
        /// The `id` to echo, if the value was an object with one.
        id: Option<Value>,
    },
}

impl Incoming {
    /// Classifies one decoded JSON value. `null` is [`Incoming::Untyped`] too (upstream
    /// crashes on it, 1.6 notes §16; the caller answers with a parse error instead).
    pub fn from_value(value: Value) -> Incoming {
        let id = value.get("id").cloned();
        let Some(kind) = value
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Incoming::Untyped { id };
        };
        match serde_json::from_value::<RpcCommand>(value) {
            Ok(command) => Incoming::Command { id, kind, command },
            Err(e) => Incoming::Invalid {
                id,
                kind,
                error: e.to_string(),
            },
        }
    }
}

/// The envelope of a command: only what every command carries.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CommandEnvelope {
    /// The correlation id (any JSON value, echoed as given).
    #[serde(default, deserialize_with = "present")]
    pub id: Option<Value>,
}

// ---------------------------------------------------------------------------------------------
// Responses (stdout)
// ---------------------------------------------------------------------------------------------

/// The literal `"response"` tag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseTag {
    /// `"response"`.
    #[default]
    #[serde(rename = "response")]
    Response,
}

/// One response record (rpc-protocol.md §3.2), keys in upstream order:
/// `id?, type, command?, success, data?` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcResponse {
    /// Echo of the command's `id`; absent when the command had none (and for parse errors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// Always `"response"`.
    #[serde(rename = "type")]
    pub tag: ResponseTag,
    /// The command's `type`; `"parse"` for unreadable lines; absent for untyped values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Whether the command succeeded.
    pub success: bool,
    /// The payload; absent for commands that return nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<ResponseData>,
    /// The failure text (only when `success` is false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RpcResponse {
    /// A success with an optional payload.
    pub fn ok(id: Option<Value>, command: &str, data: Option<ResponseData>) -> Self {
        RpcResponse {
            id,
            tag: ResponseTag::Response,
            command: Some(command.to_string()),
            success: true,
            data,
            error: None,
        }
    }

    /// A failure. `command: None` leaves the key out (untyped values).
    pub fn error(id: Option<Value>, command: Option<&str>, error: impl Into<String>) -> Self {
        RpcResponse {
            id,
            tag: ResponseTag::Response,
            command: command.map(str::to_string),
            success: false,
            data: None,
            error: Some(error.into()),
        }
    }

    /// The response to a line that is not JSON (§2.3): no id, `command: "parse"`.
    pub fn parse_error(message: &str) -> Self {
        Self::error(
            None,
            Some("parse"),
            format!("Failed to parse command: {message}"),
        )
    }

    /// A success (`Ok`) or failure (`Err`) from a handler's result.
    pub fn from_result(
        id: Option<Value>,
        command: &str,
        result: Result<Option<ResponseData>, String>,
    ) -> Self {
        match result {
            Ok(data) => Self::ok(id, command, data),
            Err(e) => Self::error(id, Some(command), e),
        }
    }
}

impl<'de> Deserialize<'de> for RpcResponse {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            #[serde(default, deserialize_with = "present")]
            id: Option<Value>,
            #[serde(rename = "type")]
            tag: ResponseTag,
            #[serde(default)]
            command: Option<String>,
            success: bool,
            #[serde(default, deserialize_with = "present")]
            data: Option<Value>,
            #[serde(default)]
            error: Option<String>,
        }
        let raw = Raw::deserialize(d)?;
        let data = match raw.data {
            None => None,
            Some(v) => Some(
                ResponseData::decode(raw.command.as_deref().unwrap_or(""), v)
                    .map_err(D::Error::custom)?,
            ),
        };
        if raw.success == raw.error.is_some() {
            return Err(D::Error::custom(
                "a response has `error` exactly when `success` is false",
            ));
        }
        Ok(RpcResponse {
            id: raw.id,
            tag: raw.tag,
            command: raw.command,
            success: raw.success,
            data,
            error: raw.error,
        })
    }
}

/// How a `prompt`/`steer`/`follow_up` was taken (§4.1 `data.disposition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Disposition {
    /// A run was started: wait for `agent_settled`.
    Started,
    /// The message went into the steering or follow-up queue.
    Queued,
    /// An extension command or input handler consumed it; no run.
    Handled,
}

/// `{disposition}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispositionData {
    /// How the message was taken.
    pub disposition: Disposition,
}

/// `get_state` data: `RpcSessionState` (§4.2), keys in upstream order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionState {
    /// The current model (the `unknown` placeholder when none is configured, 1.6 notes §15).
    pub model: Model,
    /// `off minimal low medium high xhigh max`.
    pub thinking_level: String,
    /// True from prompt acceptance until `agent_settled`.
    pub is_streaming: bool,
    /// A compaction is running.
    pub is_compacting: bool,
    /// The steering mode as set (any string is kept).
    pub steering_mode: String,
    /// The follow-up mode as set.
    pub follow_up_mode: String,
    /// The session file; absent with `--no-session`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_file: Option<String>,
    /// The session id (UUID v7).
    pub session_id: String,
    /// The display name; absent when never set.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_name: Option<String>,
    /// Automatic compaction is on.
    pub auto_compaction_enabled: bool,
    /// Messages in the context (`get_messages`).
    pub message_count: u64,
    /// Queued steering + follow-up messages.
    pub pending_message_count: u64,
}

/// `{messages}` of `get_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessagesData {
    /// The context transcript.
    pub messages: Vec<Message>,
}

/// `{models}` of `get_available_models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsData {
    /// Models with credentials, in registry order.
    pub models: Vec<Model>,
}

/// `cycle_model` data (§4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CycleModelData {
    /// The model now selected.
    pub model: Model,
    /// The thinking level after the switch.
    pub thinking_level: String,
    /// Whether the model came from the `--models` scope.
    pub is_scoped: bool,
}

/// `{levels}` of `get_available_thinking_levels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelsData {
    /// Supported levels in canonical order.
    pub levels: Vec<String>,
}

/// `{level}` of `cycle_thinking_level`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelData {
    /// The new level.
    pub level: String,
}

/// `{text?}` of `get_last_assistant_text`: upstream writes `{}` when there is no text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastAssistantTextData {
    /// The text of the last assistant message.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub text: Option<String>,
}

/// Token totals of [`SessionStats`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenTotals {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache-read tokens.
    pub cache_read: u64,
    /// Cache-write tokens.
    pub cache_write: u64,
    /// Sum of the four.
    pub total: u64,
}

/// `contextUsage` of [`SessionStats`] (agent-loop.md §10.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextUsage {
    /// Estimated context tokens.
    pub tokens: u64,
    /// The model's context window (tokens).
    pub context_window: u64,
    /// `tokens / contextWindow * 100`, a JS number.
    pub percent: Value,
}

/// `get_session_stats` data (messages-and-models.md §11, 1.6 notes §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionStats {
    /// The session id.
    pub session_id: String,
    /// The session file; absent with `--no-session`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_file: Option<String>,
    /// User messages in the whole file.
    pub user_messages: u64,
    /// Assistant messages in the whole file.
    pub assistant_messages: u64,
    /// Tool calls made.
    pub tool_calls: u64,
    /// Tool results recorded.
    pub tool_results: u64,
    /// All message entries.
    pub total_messages: u64,
    /// Token totals.
    pub tokens: TokenTotals,
    /// Total cost in USD, a JS number.
    pub cost: Value,
    /// Context usage; absent without a model context window.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub context_usage: Option<ContextUsage>,
}

/// `{entries, leafId}` of `get_entries` (§4.9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EntriesData {
    /// Entries in file order.
    pub entries: Vec<SessionEntry>,
    /// The current leaf; `null` for an empty session.
    pub leaf_id: Option<String>,
}

/// `{tree, leafId}` of `get_tree` (§4.9).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeData {
    /// Root nodes.
    pub tree: Vec<SessionTreeNode>,
    /// The current leaf; `null` for an empty session.
    pub leaf_id: Option<String>,
}

/// One entry of `get_fork_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkMessage {
    /// The user message's entry id.
    pub entry_id: String,
    /// Its text blocks joined.
    pub text: String,
}

/// `{messages}` of `get_fork_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkMessagesData {
    /// User messages with text, all branches, file order.
    pub messages: Vec<ForkMessage>,
}

/// `{steering, followUp}`: `clear_queue` data and the `queue_update` payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueTexts {
    /// Pending steering texts.
    pub steering: Vec<String>,
    /// Pending follow-up texts.
    pub follow_up: Vec<String>,
}

/// `{cancelled}` of `new_session`, `switch_session`, `clone`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelledData {
    /// An extension cancelled the switch.
    pub cancelled: bool,
}

/// `{text?, cancelled}` of `fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkData {
    /// The forked user message's text; absent when cancelled.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub text: Option<String>,
    /// An extension cancelled the fork.
    pub cancelled: bool,
}

/// `{path}` of `export_html`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathData {
    /// Where the file was written.
    pub path: String,
}

/// `CompactionResult` (messages-and-models.md §6.1): `compact` data and `compaction_end.result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionResult {
    /// The summary text.
    pub summary: String,
    /// First entry kept verbatim after the summary.
    pub first_kept_entry_id: String,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// chars/4 estimate of the rebuilt context.
    pub estimated_tokens_after: u64,
    /// Cost of the summarization call(s).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub usage: Option<Usage>,
    /// `{readFiles, modifiedFiles}` by default.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
}

/// One entry of `get_commands` (§4.10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlashCommand {
    /// Name without the slash (skills: `skill:<name>`).
    pub name: String,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    /// `extension` | `prompt` | `skill`.
    pub source: String,
    /// Where it was found: `{path, source, scope, origin, baseDir?}`.
    pub source_info: Value,
}

/// `{commands}` of `get_commands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandsData {
    /// Extension commands, prompt templates, skills.
    pub commands: Vec<SlashCommand>,
}

/// A response payload. Serialized as the payload itself; [`ResponseData::Null`] is an explicit
/// `"data": null` (`cycle_model`, `cycle_thinking_level` with nothing to cycle).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResponseData {
    /// `"data": null`.
    Null,
    /// `prompt`, `steer`, `follow_up`.
    Disposition(DispositionData),
    /// `get_state`.
    State(Box<SessionState>),
    /// `get_messages`.
    Messages(MessagesData),
    /// `get_available_models`.
    Models(ModelsData),
    /// `set_model`: the selected model.
    Model(Box<Model>),
    /// `cycle_model`.
    CycleModel(Box<CycleModelData>),
    /// `get_available_thinking_levels`.
    Levels(LevelsData),
    /// `cycle_thinking_level`.
    Level(LevelData),
    /// `bash`.
    Bash(BashResult),
    /// `get_session_stats`.
    Stats(Box<SessionStats>),
    /// `get_last_assistant_text`.
    LastAssistantText(LastAssistantTextData),
    /// `get_commands`.
    Commands(CommandsData),
    /// `get_entries`.
    Entries(EntriesData),
    /// `get_tree`.
    Tree(TreeData),
    /// `get_fork_messages`.
    ForkMessages(ForkMessagesData),
    /// `clear_queue`.
    Queue(QueueTexts),
    /// `new_session`, `switch_session`, `clone`.
    Cancelled(CancelledData),
    /// `fork`.
    Fork(ForkData),
    /// `export_html`.
    Path(PathData),
    /// `compact`.
    Compaction(Box<CompactionResult>),
}

impl ResponseData {
    /// Decodes a payload by the command it answers; fails when the shape is not that
    /// command's (so a test decoding stdout notices a wrong payload).
    pub fn decode(command: &str, v: Value) -> Result<Self, serde_json::Error> {
        use serde_json::from_value as f;
        if v.is_null() {
            return match command {
                "cycle_model" | "cycle_thinking_level" => Ok(ResponseData::Null),
                other => Err(serde_json::Error::custom(format!(
                    "`{other}` never answers with data: null"
                ))),
            };
        }
        Ok(match command {
            "prompt" | "steer" | "follow_up" => ResponseData::Disposition(f(v)?),
            "get_state" => ResponseData::State(Box::new(f(v)?)),
            "get_messages" => ResponseData::Messages(f(v)?),
            "get_available_models" => ResponseData::Models(f(v)?),
            "set_model" => ResponseData::Model(Box::new(f(v)?)),
            "cycle_model" => ResponseData::CycleModel(Box::new(f(v)?)),
            "get_available_thinking_levels" => ResponseData::Levels(f(v)?),
            "cycle_thinking_level" => ResponseData::Level(f(v)?),
            "bash" => ResponseData::Bash(f(v)?),
            "get_session_stats" => ResponseData::Stats(Box::new(f(v)?)),
            "get_last_assistant_text" => ResponseData::LastAssistantText(f(v)?),
            "get_commands" => ResponseData::Commands(f(v)?),
            "get_entries" => ResponseData::Entries(f(v)?),
            "get_tree" => {
                // Tree nodes are checked for shape, then kept as decoded entries.
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase", deny_unknown_fields)]
                struct RawTree {
                    tree: Vec<RawNode>,
                    leaf_id: Option<String>,
                }
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase", deny_unknown_fields)]
                struct RawNode {
                    entry: SessionEntry,
                    children: Vec<RawNode>,
                    #[serde(default)]
                    label: Option<String>,
                    #[serde(default)]
                    label_timestamp: Option<String>,
                }
                fn node(n: RawNode) -> SessionTreeNode {
                    SessionTreeNode {
                        entry: n.entry,
                        children: n.children.into_iter().map(node).collect(),
                        label: n.label,
                        label_timestamp: n.label_timestamp,
                    }
                }
                let raw: RawTree = f(v)?;
                ResponseData::Tree(TreeData {
                    tree: raw.tree.into_iter().map(node).collect(),
                    leaf_id: raw.leaf_id,
                })
            }
            "get_fork_messages" => ResponseData::ForkMessages(f(v)?),
            "clear_queue" => ResponseData::Queue(f(v)?),
            "new_session" | "switch_session" | "clone" => ResponseData::Cancelled(f(v)?),
            "fork" => ResponseData::Fork(f(v)?),
            "export_html" => ResponseData::Path(f(v)?),
            "compact" => ResponseData::Compaction(Box::new(f(v)?)),
            other => {
                return Err(serde_json::Error::custom(format!(
                    "`{other}` answers without data"
                )))
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Events (stdout)
// ---------------------------------------------------------------------------------------------

/// `assistantMessageEvent` of `message_update` (§5.2): the provider's streaming events minus
/// `start`/`done`/`error`, which become `message_start`/`message_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MessageUpdateEvent {
    /// A text block opens.
    #[serde(rename_all = "camelCase")]
    TextStart {
        /// Index in the final `message.content`.
        content_index: usize,
    },
    /// More text.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The appended fragment.
        delta: String,
    },
    /// A text block is complete.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The block's full text.
        content: String,
    },
    /// A thinking block opens.
    #[serde(rename_all = "camelCase")]
    ThinkingStart {
        /// Index in the final `message.content`.
        content_index: usize,
    },
    /// More reasoning text.
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The appended fragment.
        delta: String,
    },
    /// A thinking block is complete.
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The full thinking text.
        content: String,
    },
    /// A tool call opens.
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolCallStart {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The tool call id.
        id: String,
        /// The called tool.
        tool_name: String,
    },
    /// A raw fragment of the arguments JSON.
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolCallDelta {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The fragment.
        delta: String,
    },
    /// A tool call is complete; `toolCall` is a `{"type":"toolCall",…}` block.
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolCallEnd {
        /// Index in the final `message.content`.
        content_index: usize,
        /// The complete block.
        tool_call: Content,
    },
}

impl MessageUpdateEvent {
    /// The wire form of a provider streaming event; `None` for `start`/`done`/`error`.
    pub fn from_stream(ev: AssistantMessageEvent) -> Option<Self> {
        use AssistantMessageEvent as A;
        Some(match ev {
            A::Start { .. } | A::Done { .. } | A::Error { .. } => return None,
            A::TextStart { content_index } => Self::TextStart { content_index },
            A::TextDelta {
                content_index,
                delta,
            } => Self::TextDelta {
                content_index,
                delta,
            },
            A::TextEnd {
                content_index,
                content,
            } => Self::TextEnd {
                content_index,
                content,
            },
            A::ThinkingStart { content_index } => Self::ThinkingStart { content_index },
            A::ThinkingDelta {
                content_index,
                delta,
            } => Self::ThinkingDelta {
                content_index,
                delta,
            },
            A::ThinkingEnd {
                content_index,
                content,
            } => Self::ThinkingEnd {
                content_index,
                content,
            },
            A::ToolCallStart {
                content_index,
                id,
                tool_name,
            } => Self::ToolCallStart {
                content_index,
                id,
                tool_name,
            },
            A::ToolCallDelta {
                content_index,
                delta,
            } => Self::ToolCallDelta {
                content_index,
                delta,
            },
            A::ToolCallEnd {
                content_index,
                tool_call,
            } => Self::ToolCallEnd {
                content_index,
                tool_call: Content::ToolCall(tool_call),
            },
        })
    }

    /// The tool call of a `toolcall_end`.
    pub fn tool_call(&self) -> Option<&ToolCall> {
        match self {
            Self::ToolCallEnd {
                tool_call: Content::ToolCall(c),
                ..
            } => Some(c),
            _ => None,
        }
    }
}

/// `reason` of `compaction_start`/`compaction_end` (§5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    /// The `compact` command.
    Manual,
    /// The context crossed `contextWindow − reserveTokens`.
    Threshold,
    /// The provider reported a context overflow.
    Overflow,
}

/// `source` of `summarization_retry_attempt_start` (§5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SummarizationSource {
    /// A compaction summary.
    Compaction,
    /// A branch summary.
    BranchSummary,
}

/// Every event record (§5), tagged by `type`; fields in upstream's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RpcEvent {
    /// A low-level run begins.
    AgentStart,
    /// A low-level run ended.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        /// Messages created by this run.
        messages: Vec<Message>,
        /// An automatic retry follows.
        will_retry: bool,
    },
    /// The session-level run is completely over (1.6 notes §1).
    AgentSettled {
        /// The run was aborted.
        aborted: bool,
    },
    /// A turn begins.
    TurnStart,
    /// A turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// The turn's assistant message.
        message: Message,
        /// Its tool results, in call order.
        tool_results: Vec<Message>,
    },
    /// A message enters the transcript (assistant: the empty partial).
    MessageStart {
        /// The message.
        message: Message,
    },
    /// A streaming update of the assistant message (1.6 notes §3: no `message`/`partial`).
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        /// Cumulative usage so far.
        usage: Usage,
        /// The streaming event.
        assistant_message_event: MessageUpdateEvent,
    },
    /// A message is final.
    MessageEnd {
        /// The final message.
        message: Message,
    },
    /// A tool call starts.
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        /// The tool call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The call's arguments.
        args: Value,
    },
    /// Accumulated partial output of a running tool.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        /// The tool call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The call's arguments.
        args: Value,
        /// Output so far (not a delta).
        partial_result: ToolOutput,
    },
    /// A tool call finished.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        /// The tool call id.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The final output.
        result: ToolOutput,
        /// The call failed.
        is_error: bool,
        /// Execution time (ms); absent when the call never ran.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        duration_ms: Option<u64>,
    },
    /// The pending queues changed (§5.4).
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        /// Pending steering texts.
        steering: Vec<String>,
        /// Pending follow-up texts.
        follow_up: Vec<String>,
    },
    /// A compaction begins (§5.5).
    CompactionStart {
        /// Why.
        reason: CompactionReason,
    },
    /// A compaction ended.
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        /// Why it ran.
        reason: CompactionReason,
        /// The result on success.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        result: Option<CompactionResult>,
        /// It was aborted or cancelled.
        aborted: bool,
        /// The interrupted turn is re-run.
        will_retry: bool,
        /// The failure text.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error_message: Option<String>,
    },
    /// A retry is scheduled (§5.6).
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        /// 1-based attempt.
        attempt: u32,
        /// `retry.maxRetries`.
        max_attempts: u32,
        /// Back-off before the attempt (ms).
        delay_ms: u64,
        /// The error being retried.
        error_message: String,
    },
    /// The retry loop ended.
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        /// A retried request succeeded.
        success: bool,
        /// The last attempt.
        attempt: u32,
        /// The last error (failure), or `Retry cancelled`.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        final_error: Option<String>,
    },
    /// A summarization call will be retried (§5.7).
    #[serde(rename_all = "camelCase")]
    SummarizationRetryScheduled {
        /// 1-based attempt.
        attempt: u32,
        /// Maximum attempts.
        max_attempts: u32,
        /// Back-off (ms).
        delay_ms: u64,
        /// The error being retried.
        error_message: String,
    },
    /// A summarization retry attempt starts.
    SummarizationRetryAttemptStart {
        /// What is being summarized.
        source: SummarizationSource,
        /// The compaction's reason (absent for branch summaries).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        reason: Option<CompactionReason>,
    },
    /// A summarization retry loop finished.
    SummarizationRetryFinished {},
    /// Output of an RPC `bash` command (§5.8).
    BashExecutionUpdate {
        /// The `bash` command's id; absent when it had none.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<Value>,
        /// Sanitized output chunk.
        delta: String,
    },
    /// The effective thinking level changed (§5.10).
    ThinkingLevelChanged {
        /// The new level.
        level: String,
    },
    /// The session name changed (§5.10).
    SessionInfoChanged {
        /// The new name.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        name: Option<String>,
    },
    /// An entry was appended outside the message flow (§5.10).
    EntryAppended {
        /// The entry as written to the session file.
        entry: SessionEntry,
    },
    /// An extension handler failed (§5.9).
    #[serde(rename_all = "camelCase")]
    ExtensionError {
        /// The extension file (or `command:<name>`).
        extension_path: String,
        /// The hooked event.
        event: String,
        /// The error text.
        error: String,
    },
}

impl RpcEvent {
    /// The wire form of a low-level loop event; `None` for events that have none
    /// (`message_update` of `start`/`done`/`error`). `will_retry` fills `agent_end.willRetry`.
    pub fn from_agent(ev: AgentEvent, will_retry: bool) -> Option<Self> {
        Some(match ev {
            AgentEvent::AgentStart => RpcEvent::AgentStart,
            AgentEvent::TurnStart => RpcEvent::TurnStart,
            AgentEvent::MessageStart { message } => RpcEvent::MessageStart { message },
            AgentEvent::MessageUpdate { usage, event } => RpcEvent::MessageUpdate {
                usage,
                assistant_message_event: MessageUpdateEvent::from_stream(event)?,
            },
            AgentEvent::MessageEnd { message } => RpcEvent::MessageEnd { message },
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => RpcEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            },
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => RpcEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            },
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
            } => RpcEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
            },
            AgentEvent::TurnEnd {
                message,
                tool_results,
            } => RpcEvent::TurnEnd {
                message,
                tool_results: tool_results
                    .into_iter()
                    .map(Message::ToolResult)
                    .collect::<Vec<_>>(),
            },
            AgentEvent::AgentEnd { messages } => RpcEvent::AgentEnd {
                messages,
                will_retry,
            },
        })
    }

    /// The `queue_update` event for the given pending texts.
    pub fn queue_update(q: QueueTexts) -> Self {
        RpcEvent::QueueUpdate {
            steering: q.steering,
            follow_up: q.follow_up,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One stdout record
// ---------------------------------------------------------------------------------------------

/// One stdout record: a response or an event (extension UI requests come with issue 12).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RpcOutput {
    /// `type: "response"`.
    Response(RpcResponse),
    /// Any event.
    Event(Box<RpcEvent>),
}

impl<'de> Deserialize<'de> for RpcOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Map::<String, Value>::deserialize(d)?;
        let v = Value::Object(v);
        if v.get("type").and_then(Value::as_str) == Some("response") {
            serde_json::from_value(v)
                .map(RpcOutput::Response)
                .map_err(D::Error::custom)
        } else {
            serde_json::from_value(v)
                .map(|e| RpcOutput::Event(Box::new(e)))
                .map_err(D::Error::custom)
        }
    }
}

impl RpcOutput {
    /// One compact JSON line without the trailing LF. Serializing these types cannot fail
    /// (string keys, finite numbers); a failure would yield an internal-error response line.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(
                "{{\"type\":\"response\",\"success\":false,\"error\":{}}}",
                Value::String(format!("internal error: could not serialize a record: {e}"))
            )
        })
    }
}

impl From<RpcEvent> for RpcOutput {
    fn from(e: RpcEvent) -> Self {
        RpcOutput::Event(Box::new(e))
    }
}

impl From<RpcResponse> for RpcOutput {
    fn from(r: RpcResponse) -> Self {
        RpcOutput::Response(r)
    }
}
