//! Host events pi sends and waits for (host.mjs `emit*`), and the replies of their handlers.

use super::{lenient, present};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// HTTP headers as an object of strings, in the order given.
#[derive(Debug, Clone, Default)]
pub struct Headers(pub Vec<(String, String)>);

impl Serialize for Headers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `systemPromptOptions` of `before_agent_start` (upstream 1.6 `BuildSystemPromptOptions`,
/// normalized as `normalizeBuildSystemPromptOptions` leaves it; fields in upstream's key order).
/// The host hands it to the handlers as one mutable object; what they change comes back as
/// [`SystemPromptEdits`].
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPromptOptions {
    /// The replacement of the default body (`--system-prompt`, `SYSTEM.md`); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_prompt: Option<String>,
    /// The active tools' names.
    pub selected_tools: Vec<String>,
    /// Always empty (no hidden tools in RPC mode).
    pub hidden_tools: Vec<String>,
    /// Each active tool's one-line snippet, by tool name (tools without one are left out).
    pub tool_snippets: serde_json::Map<String, Value>,
    /// Each active tool's guideline bullets, by tool name (tools without any are left out).
    pub tool_guidelines: serde_json::Map<String, Value>,
    /// Further guideline bullets after the tools' own.
    pub prompt_guidelines: Vec<String>,
    /// The appended text (`--append-system-prompt`, `APPEND_SYSTEM.md`); `""` when none.
    pub append_system_prompt: String,
    /// Extra XML-wrapped sections by tag name; pi adds none.
    pub sections: serde_json::Map<String, Value>,
    /// The session's working directory.
    pub cwd: String,
    /// The context files: `{path, content}`.
    pub context_files: Vec<Value>,
    /// The skills listed in the prompt: `{name, description, filePath, baseDir, source,
    /// disableModelInvocation}`.
    pub skills: Vec<Value>,
}

/// What the `before_agent_start` handlers changed in [`SystemPromptOptions`] (host.mjs sends
/// the changed fields only); pi builds this run's system prompt from the options so edited
/// (upstream `_preparePromptAndToolLoadout(result.systemPromptOptions)`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SystemPromptEdits {
    /// A new default-body replacement (`""` = back to the default body).
    #[serde(default, deserialize_with = "lenient")]
    pub custom_prompt: Option<String>,
    /// New snippets by tool name.
    #[serde(default, deserialize_with = "lenient")]
    pub tool_snippets: Option<std::collections::BTreeMap<String, String>>,
    /// New guideline bullets by tool name.
    #[serde(default, deserialize_with = "lenient")]
    pub tool_guidelines: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// New further guideline bullets.
    #[serde(default, deserialize_with = "lenient")]
    pub prompt_guidelines: Option<Vec<String>>,
    /// New appended text.
    #[serde(default, deserialize_with = "lenient")]
    pub append_system_prompt: Option<String>,
    /// Extra sections by tag name, in the order the handlers left them.
    #[serde(default, deserialize_with = "lenient")]
    pub sections: Option<serde_json::Map<String, Value>>,
    /// New context files (`{path, content}`).
    #[serde(default, deserialize_with = "lenient")]
    pub context_files: Option<Vec<ContextFileDraft>>,
}

/// A context file as an extension left it in `systemPromptOptions.contextFiles`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ContextFileDraft {
    /// Its path as given.
    #[serde(default)]
    pub path: String,
    /// Its text.
    #[serde(default)]
    pub content: String,
}

/// An event pi runs the handlers of and waits for ([`ToHost::HostEvent`]), as upstream's
/// extension event objects (docs/extensions.md "Events"); fields in upstream's key order.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostEvent {
    /// `before_agent_start` of a user prompt. Reply: [`BeforeAgentStartReply`].
    #[serde(rename_all = "camelCase")]
    BeforeAgentStart {
        /// Always `"user"`.
        message_type: String,
        /// The prompt text.
        prompt: String,
        /// The system prompt the run would use.
        system_prompt: String,
        /// How that prompt was built (boxed: the largest event by far).
        system_prompt_options: Box<SystemPromptOptions>,
        /// The prompt's images; absent when none (upstream's `undefined`).
        #[serde(skip_serializing_if = "Option::is_none")]
        images: Option<Vec<pi_ai::ImageContent>>,
    },
    /// `message_end` of a finalized message. Reply: [`MessageEndReply`].
    MessageEnd {
        /// The message.
        message: Box<pi_ai::Message>,
    },
    /// `context` of one LLM call (system messages left out). Reply: `null` (unchanged) or
    /// [`ContextReply`].
    Context {
        /// The messages.
        messages: Vec<pi_ai::Message>,
    },
    /// `context_with_system` of one LLM call: the full transcript after the `context`
    /// handlers, system messages included (upstream 1.6 docs/extensions.md
    /// "context_with_system"). Reply: `null` (unchanged) or [`ContextReply`].
    ContextWithSystem {
        /// The messages.
        messages: Vec<pi_ai::Message>,
    },
    /// `model_select`. Reply: `null`.
    #[serde(rename_all = "camelCase")]
    ModelSelect {
        /// The new model.
        model: Box<pi_ai::Model>,
        /// The model before; absent when none.
        #[serde(skip_serializing_if = "Option::is_none")]
        previous_model: Option<Box<pi_ai::Model>>,
        /// `set` or `cycle`.
        source: String,
    },
    /// `before_provider_headers`. Reply: [`HeadersReply`].
    BeforeProviderHeaders {
        /// The request headers.
        headers: Headers,
    },
    /// `before_provider_request`. Reply: `null` (unchanged) or [`PayloadReply`].
    BeforeProviderRequest {
        /// The provider-specific request body.
        payload: Value,
    },
    /// `after_provider_response`. Reply: `null`.
    AfterProviderResponse {
        /// The HTTP status.
        status: u16,
        /// The response headers (lower-case names).
        headers: Headers,
    },
}

/// The event of [`ToHost::UserBash`] (upstream `UserBashEvent`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "user_bash", rename_all = "camelCase")]
pub struct UserBashEvent {
    /// The command as the client sent it.
    pub command: String,
    /// `excludeFromContext` of the `bash` command.
    pub exclude_from_context: bool,
    /// The working directory.
    pub cwd: String,
}

/// A `custom` message as an extension gives it (`pi.sendMessage`, a `before_agent_start`
/// `message`): `{customType, content, display, details}`. `customType`, `content`, `display`
/// and `details` pass as given (extension data; upstream `sendCustomMessage` copies them).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessageDraft {
    /// `customType` (absent = `None`).
    #[serde(default, deserialize_with = "present")]
    pub custom_type: Option<Value>,
    /// `content`: a string or content blocks (absent = `None`).
    #[serde(default, deserialize_with = "present")]
    pub content: Option<Value>,
    /// Whether the client shows it, as given (absent = `None`; [`CustomMessageDraft::shown`]).
    #[serde(default, deserialize_with = "present")]
    pub display: Option<Value>,
    /// `details` (`null` = none).
    #[serde(default)]
    pub details: Option<Value>,
}

impl CustomMessageDraft {
    /// `v` as a draft; `None` when it is not an object.
    pub fn from_value(v: &Value) -> Option<Self> {
        v.as_object()?;
        Self::deserialize(v).ok()
    }

    /// Whether the client is to show it: `display` is `true` (anything else reads `false`,
    /// as for the session's `custom_message` entry).
    pub fn shown(&self) -> bool {
        self.display == Some(Value::Bool(true))
    }

    /// The `role: "custom"` message pi enters for it (upstream `sendCustomMessage` and
    /// `before_agent_start`'s `message`): `customType`, `display` and `details` as given
    /// (absent stays absent), `content` missing or `null` becomes `[]`, `timestamp` is `now`
    /// (ms).
    pub fn into_message(self, now: i64) -> pi_ai::Message {
        let mut m = serde_json::Map::new();
        m.insert("role".into(), "custom".into());
        if let Some(t) = self.custom_type {
            m.insert("customType".into(), t);
        }
        let content = match self.content {
            None | Some(Value::Null) => Value::Array(vec![]),
            Some(c) => c,
        };
        m.insert("content".into(), content);
        if let Some(d) = self.display {
            m.insert("display".into(), d);
        }
        if let Some(d) = self.details {
            m.insert("details".into(), d);
        }
        m.insert("timestamp".into(), now.into());
        pi_ai::Message::Other(m)
    }
}

/// The reply to `before_agent_start`: `{messages, systemPrompt?}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BeforeAgentStartReply {
    /// The returned messages, in handler order (drafts; see [`CustomMessageDraft`]).
    #[serde(default, deserialize_with = "lenient")]
    pub messages: Vec<Value>,
    /// The system prompt when a handler replaced it.
    #[serde(default, deserialize_with = "lenient")]
    pub system_prompt: Option<String>,
    /// What the handlers changed in `systemPromptOptions` (besides `forceSystemPrompt` and
    /// `selectedTools`, applied by the host); absent when nothing.
    #[serde(default, deserialize_with = "lenient")]
    pub prompt_edits: Option<SystemPromptEdits>,
}

/// The reply to an actionable boundary (`turn_end`, `agent_before_settle`):
/// `{entries, continue}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct BoundaryReply {
    /// Draft entries (validated by pi afterwards).
    #[serde(default, deserialize_with = "lenient")]
    pub entries: Vec<Value>,
    /// Whether one continuation is wanted.
    #[serde(default, rename = "continue", deserialize_with = "lenient")]
    pub continue_run: bool,
}

/// The reply to `message_end`: `{message}` (the final one; `null` = unchanged).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MessageEndReply {
    /// The message.
    #[serde(default)]
    pub message: Option<pi_ai::Message>,
}

/// The reply to `context` when the handlers changed the list: `{messages}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContextReply {
    /// The messages to send.
    pub messages: Vec<pi_ai::Message>,
}

/// The reply to `before_provider_headers`: `{headers}` as the handlers left them (`null` =
/// deleted).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HeadersReply {
    /// Name → value; a non-string value reads as `None`.
    #[serde(default, deserialize_with = "lenient")]
    pub headers: Option<serde_json::Map<String, Value>>,
}

/// The reply to `before_provider_request` when a handler returned a value: `{payload}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PayloadReply {
    /// The replacement body (`null` included); `None` = no replacement.
    #[serde(default, deserialize_with = "present")]
    pub payload: Option<Value>,
}

/// The reply to [`ToHost::UserBash`]: `null` (run here), `{result}` or `{executed}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserBashReply {
    /// The handler's `BashResult`, as given (pi checks it).
    #[serde(default)]
    pub result: Option<Value>,
    /// The outcome of a run through the handler's `operations`.
    #[serde(default)]
    pub executed: Option<BashExecuted>,
}

/// `{output, exitCode?, cancelled}` of a run through a `user_bash` handler's `operations`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecuted {
    /// Everything the command wrote.
    #[serde(default, deserialize_with = "lenient")]
    pub output: String,
    /// The exit code, when known.
    #[serde(default, deserialize_with = "lenient")]
    pub exit_code: Option<i64>,
    /// Aborted.
    #[serde(default, deserialize_with = "lenient")]
    pub cancelled: bool,
}

/// `v` as a JSON value, for the events [`ToHost::Event`] carries as a value. The event types
/// serialize without failing (string keys, plain data); should one fail, the event reads
/// `null` (`json!`, which this replaces, would have panicked).
pub fn value_of<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The `type` of an event object (`{type, …}`): a string `type` reads as `Some`; a missing or
/// non-string one, or a value that is not an object, as `None`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EventType {
    /// The event's `type`.
    #[serde(default, rename = "type", deserialize_with = "lenient")]
    pub kind: Option<String>,
}

impl EventType {
    /// The `type` of `v` (see [`EventType`]).
    pub fn of(v: &Value) -> Option<String> {
        if !v.is_object() {
            return None;
        }
        Self::deserialize(v).ok().and_then(|t| t.kind)
    }
}

/// The agent-loop events pi builds itself for the extensions rather than passing the client's
/// event on (upstream `_emitExtensionEvent`, docs/extensions.md "agent_start / agent_end",
/// "turn_start / turn_end"): `agent_start {}`, `turn_start {turnIndex, timestamp}`,
/// `turn_end {turnIndex}` (the count only; the session's turn boundary sends the full one).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LoopEvent {
    /// A run started.
    AgentStart,
    /// A turn started.
    #[serde(rename_all = "camelCase")]
    TurnStart {
        /// The turn's index in the run, from 0.
        turn_index: u64,
        /// When (ms since the epoch).
        timestamp: i64,
    },
    /// A turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// The turn's index in the run, from 0.
        turn_index: u64,
    },
}

/// `resources_discover` (upstream docs/extensions.md "resources_discover": after
/// `session_start`): `{type, cwd, reason}`, `reason` `startup` or `reload`. Reply: a list of
/// [`super::DiscoveredResources`].
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "resources_discover")]
pub struct ResourcesDiscoverEvent<'a> {
    /// The session's working directory (a non-UTF-8 path is written lossily).
    pub cwd: &'a str,
    /// Why discovery runs.
    pub reason: &'a str,
}

/// The `id` of the last entry of a state mirror ([`ToHost::State`]'s `state`): `None` when it
/// has no entries.
pub fn last_entry_id(state: &super::SessionMirror) -> Option<String> {
    state.entries.last().map(|e| e.id.clone())
}
