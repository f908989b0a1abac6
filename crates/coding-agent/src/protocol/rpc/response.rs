//! Response records and their typed payloads (rpc-protocol.md §3.2, §4).

use super::present;
use crate::session::{SessionEntry, SessionTreeNode};
use crate::tools::shell::BashResult;
use pi_ai::{Message, Model, Usage};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

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
        Self::parse_error_with_id(None, message)
    }

    /// [`RpcResponse::parse_error`] carrying `id`: for a line V8 would parse but serde cannot
    /// (a number out of range such as `1e400`, nesting deeper than the limit), whose top-level
    /// `id` was recovered ([`super::recover_top_level_id`]) so the client waiting on it gets
    /// its answer (issue 28).
    pub fn parse_error_with_id(id: Option<Value>, message: &str) -> Self {
        Self::error(
            id,
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
    /// The steering mode as set (any value is kept as sent; absent when never set).
    #[serde(skip_serializing_if = "Value::is_null", default)]
    pub steering_mode: Value,
    /// The follow-up mode as set.
    #[serde(skip_serializing_if = "Value::is_null", default)]
    pub follow_up_mode: Value,
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

/// The `get_messages` success response borrowing the transcript (issue 8): written straight to
/// the stdout writer with [`MessagesResponse::write_line`], so a huge context is neither copied
/// nor built as one string first. Same keys in the same order as
/// `RpcResponse::ok(id, "get_messages", Some(ResponseData::Messages(..)))`.
#[derive(Debug, Serialize)]
pub struct MessagesResponse<'a> {
    /// Echo of the command's `id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a Value>,
    /// Always `"response"`.
    #[serde(rename = "type")]
    pub tag: ResponseTag,
    /// Always `"get_messages"`.
    pub command: &'static str,
    /// Always `true`.
    pub success: bool,
    /// `{messages}`.
    pub data: MessagesDataRef<'a>,
}

/// Borrowed `{messages}` of [`MessagesResponse`].
#[derive(Debug, Serialize)]
pub struct MessagesDataRef<'a> {
    /// The context transcript.
    pub messages: &'a [Message],
}

impl<'a> MessagesResponse<'a> {
    /// The response for `id` over `messages`.
    pub fn new(id: Option<&'a Value>, messages: &'a [Message]) -> Self {
        MessagesResponse {
            id,
            tag: ResponseTag::Response,
            command: "get_messages",
            success: true,
            data: MessagesDataRef { messages },
        }
    }

    /// Serialises the record and its `\n` to `w`. An error comes only from `w`.
    pub fn write_line(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *w, self).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    }
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
    /// Estimated context tokens; `null` after a compaction until a reply reports usage
    /// (agent-loop.md §10.3).
    pub tokens: Option<u64>,
    /// The model's context window (tokens).
    pub context_window: u64,
    /// `tokens / contextWindow * 100`, a JS number.
    pub percent: Value,
}

/// `get_session_stats` data (messages-and-models.md §11, 1.6 notes §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionStats {
    /// The session file; absent with `--no-session`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_file: Option<String>,
    /// The session id.
    pub session_id: String,
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

/// `{mode, network}` of `get_sandbox` (ours, not upstream): the sandbox mode of the bash tool
/// and the file tools (`full`, `workspace-write`, `read-only`) and whether its commands may use
/// the network (always `true` under `full`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxData {
    /// The mode string.
    pub mode: String,
    /// Network allowed.
    pub network: bool,
}

/// `{mode, allow, deny, askTimeoutMs}` of `get_permissions` (ours, not upstream): the tool
/// permission policy in effect (`crate::permissions`): its mode (`off`, `ask`, `deny`), the
/// allow and deny rules as written (global and project deny rules together), and how long an
/// `ask` waits for the client (ms). No policy configured: mode `off`, no rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PermissionsData {
    /// The mode string.
    pub mode: String,
    /// Allow rules.
    pub allow: Vec<String>,
    /// Deny rules.
    pub deny: Vec<String>,
    /// The ask timeout in ms.
    pub ask_timeout_ms: u64,
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
    /// `get_sandbox` (ours).
    Sandbox(SandboxData),
    /// `get_permissions` (ours).
    Permissions(PermissionsData),
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
            "get_sandbox" => ResponseData::Sandbox(f(v)?),
            "get_permissions" => ResponseData::Permissions(f(v)?),
            other => {
                return Err(serde_json::Error::custom(format!(
                    "`{other}` answers without data"
                )))
            }
        })
    }
}
