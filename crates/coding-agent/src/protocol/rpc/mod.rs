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

mod event;
mod response;

pub use event::*;
pub use response::*;

/// Receives every protocol event, in order (the session runtime emits into it; each mode
/// decides where the events go: stdout in RPC and json mode, the extension host, a test).
pub type EventSink = std::sync::Arc<dyn Fn(RpcEvent) + Send + Sync>;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Lenient field readers (rpc-protocol.md §3.1: upstream validates nothing up front).
// ---------------------------------------------------------------------------------------------

/// A string field: `Some` only for a JSON string; any other JSON value reads as absent.
pub(crate) fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// A boolean field: `Some` only for a JSON boolean.
pub(crate) fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(Value::deserialize(d)?.as_bool())
}

/// Any JSON value, with a present `null` kept as `Some(Value::Null)` (absent stays `None`).
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
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
/// ([`Incoming::from_value`]) because it is echoed for every command, known or not.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RpcCommand {
    /// `prompt {message, images?, streamingBehavior?}` (§4.1).
    Prompt {
        /// User text as sent: `None` when absent, `Some(Value::Null)` for `null`; anything but
        /// a string is refused by the handler with upstream's text.
        #[serde(default, deserialize_with = "present")]
        message: Option<Value>,
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
        /// User text as sent: `None` when absent, `Some(Value::Null)` for `null`; anything but
        /// a string is refused by the handler with upstream's text.
        #[serde(default, deserialize_with = "present")]
        message: Option<Value>,
        /// `ImageContent[]`.
        #[serde(default)]
        images: Option<Value>,
    },
    /// `follow_up {message, images?}` (§4.1).
    FollowUp {
        /// User text as sent: `None` when absent, `Some(Value::Null)` for `null`; anything but
        /// a string is refused by the handler with upstream's text.
        #[serde(default, deserialize_with = "present")]
        message: Option<Value>,
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
    /// `get_sandbox` (ours, not upstream): the sandbox of the bash tool, `{mode, network}`.
    GetSandbox {},
    /// `get_permissions` (ours, not upstream): the tool permission policy,
    /// `{mode, allow, deny, askTimeoutMs}` ([`response::PermissionsData`]).
    GetPermissions {},
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

/// The top-level `id` of a JSON object text, when `text` is an object with one (the last, as
/// `JSON.parse` keeps), without parsing the other values: they are only skipped (strings,
/// balanced brackets, scalars), so a value serde would refuse (`1e400`, nesting beyond
/// [`pi_ai::json::MAX_DEPTH`]) does not hide the id. Meant for text V8 would accept (syntax is
/// not checked past what the scan needs); `None` when the text is not an object, has no `id`,
/// or the id's own value does not parse.
pub fn recover_top_level_id(text: &str) -> Option<Value> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut id = None;
    loop {
        i = skip_ws(b, i);
        match b.get(i)? {
            b'}' => return id,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = skip_string(b, i)?;
        let key = pi_ai::json::parse_str(text.get(i..key_end)?).ok()?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let value_end = skip_value(b, i)?;
        if key.as_str() == Some("id") {
            id = pi_ai::json::parse_str(text.get(i..value_end)?).ok();
        }
        i = value_end;
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// The end (exclusive) of the string starting at `b[i] == '"'`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// The end (exclusive) of the value starting at `b[i]`; nesting is counted, not recursed into.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => j = skip_string(b, j)?,
                    b'{' | b'[' => {
                        depth += 1;
                        j += 1;
                    }
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        j += 1;
                        if depth == 0 {
                            return Some(j);
                        }
                    }
                    _ => j += 1,
                }
            }
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                j += 1;
            }
            (j > i).then_some(j)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streamed_get_messages_is_the_same_line_as_the_built_one() {
        let messages = vec![
            pi_ai::Message::user_text("hi \u{2028} there"),
            pi_ai::Message::user_text("second"),
        ];
        for id in [None, Some(json!("m1")), Some(json!({"x": 1}))] {
            let built = RpcOutput::Response(RpcResponse::ok(
                id.clone(),
                "get_messages",
                Some(ResponseData::Messages(MessagesData {
                    messages: messages.clone(),
                })),
            ))
            .to_line();
            let mut streamed = Vec::new();
            MessagesResponse::new(id.as_ref(), &messages)
                .write_line(&mut streamed)
                .unwrap();
            assert_eq!(String::from_utf8(streamed).unwrap(), format!("{built}\n"));
        }
    }

    fn incoming(v: Value) -> Incoming {
        Incoming::from_value(v)
    }

    #[test]
    fn commands_are_lenient_like_upstream() {
        let Incoming::Command { id, kind, command } =
            incoming(json!({"id": {"x": 1}, "type": "prompt", "message": 5, "extra": true}))
        else {
            panic!("a prompt is a command");
        };
        assert_eq!(id, Some(json!({"x": 1})));
        assert_eq!(kind, "prompt");
        assert_eq!(
            command,
            RpcCommand::Prompt {
                message: Some(json!(5)),
                images: None,
                streaming_behavior: None
            }
        );
        let Incoming::Command { command, .. } =
            incoming(json!({"type": "get_entries", "since": null}))
        else {
            panic!()
        };
        assert_eq!(
            command,
            RpcCommand::GetEntries {
                since: Some(Value::Null)
            }
        );
        let Incoming::Command { command, .. } = incoming(json!({"type": "get_entries"})) else {
            panic!()
        };
        assert_eq!(command, RpcCommand::GetEntries { since: None });
        let Incoming::Command { kind, command, .. } = incoming(json!({"type": "retry"})) else {
            panic!()
        };
        assert_eq!((kind.as_str(), command), ("retry", RpcCommand::Unknown));
        assert_eq!(incoming(json!([1])), Incoming::Untyped { id: None });
        assert_eq!(
            incoming(json!({"id": "a", "type": 5})),
            Incoming::Untyped {
                id: Some(json!("a"))
            }
        );
    }

    #[test]
    fn responses_keep_upstream_key_order_and_decode_by_command() {
        let r = RpcResponse::ok(
            Some(json!("c1")),
            "cycle_thinking_level",
            Some(ResponseData::Null),
        );
        let line = RpcOutput::from(r.clone()).to_line();
        assert_eq!(
            line,
            r#"{"id":"c1","type":"response","command":"cycle_thinking_level","success":true,"data":null}"#
        );
        assert_eq!(
            serde_json::from_str::<RpcOutput>(&line).unwrap(),
            RpcOutput::Response(r)
        );
        let bad =
            r#"{"type":"response","command":"get_state","success":true,"data":{"levels":[]}}"#;
        assert!(
            serde_json::from_str::<RpcOutput>(bad).is_err(),
            "wrong payload shape"
        );
        let parse = RpcOutput::from(RpcResponse::parse_error("x")).to_line();
        assert_eq!(
            parse,
            r#"{"type":"response","command":"parse","success":false,"error":"Failed to parse command: x"}"#
        );
    }

    #[test]
    fn events_put_type_first_and_reject_unknown_fields() {
        let e = RpcEvent::queue_update(QueueTexts {
            steering: vec!["a".into()],
            follow_up: vec![],
        });
        assert_eq!(
            RpcOutput::from(e).to_line(),
            r#"{"type":"queue_update","steering":["a"],"followUp":[]}"#
        );
        assert!(serde_json::from_str::<RpcOutput>(
            r#"{"type":"agent_settled","aborted":false,"x":1}"#
        )
        .is_err());
        assert!(serde_json::from_str::<RpcOutput>(r#"{"type":"no_such_event"}"#).is_err());
    }
}
