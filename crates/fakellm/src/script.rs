//! The script format: what the fake answers, turn by turn.
//!
//! The JSON shape is the one `shared/conformance/fakellm.py` reads, so scenario files can be
//! served by either implementation:
//!
//! ```json
//! {
//!   "default_chunk_size": 8,
//!   "default_delay_ms": 0,
//!   "turns": [
//!     {"blocks": [{"type": "text", "text": "Hello"},
//!                 {"type": "tool_call", "name": "bash", "arguments": {"command": "echo hi"}}],
//!      "usage": {"input": 100, "output": 20}, "chunk_size": 4, "delay_ms": 10,
//!      "match": "substring", "api": "openai",
//!      "error": {"status": 529}, "stall_after_events": 3, "stall_ms": 30000,
//!      "disconnect_after_events": 3, "raw_sse": ["data: {...}\n\n"]}
//!   ],
//!   "exhausted": {"blocks": [{"type": "text", "text": "(fakellm: script exhausted)"}]},
//!   "websocket": true
//! }
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Text of the reply served once every scripted turn has been used.
pub const EXHAUSTED_TEXT: &str = "(fakellm: script exhausted)";

/// Which wire format a request used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI chat completions (`POST …/chat/completions`).
    Openai,
    /// Anthropic Messages (`POST …/messages`).
    Anthropic,
    /// Gemini `streamGenerateContent` (Google Generative AI and Vertex AI:
    /// `POST …/models/<model>:streamGenerateContent`).
    Google,
    /// Native Mistral chat completions (`POST /mistral/…/chat/completions`: the `/mistral`
    /// prefix of the base URL tells it from the OpenAI wire).
    Mistral,
    /// OpenAI Responses (`POST …/responses`, also Azure and Codex).
    Responses,
    /// Amazon Bedrock ConverseStream (`POST …/model/<id>/converse-stream`, AWS event-stream
    /// framing).
    Bedrock,
}

impl Api {
    /// The name used in scripts and request records (`"openai"` / `"anthropic"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Openai => "openai",
            Api::Anthropic => "anthropic",
            Api::Google => "google",
            Api::Mistral => "mistral",
            Api::Responses => "responses",
            Api::Bedrock => "bedrock",
        }
    }
}

/// A whole script: the turns to serve in order, plus defaults.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Script {
    /// Characters per text/thinking/arguments delta unless a turn says otherwise.
    #[serde(default = "default_chunk_size")]
    pub default_chunk_size: usize,
    /// Sleep before each SSE event (milliseconds) unless a turn says otherwise.
    #[serde(default)]
    pub default_delay_ms: f64,
    /// The scripted turns; each is served at most once.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// What to serve once no unused turn fits (default: a text reply [`EXHAUSTED_TEXT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhausted: Option<Turn>,
    /// Whether WebSocket upgrades (`GET …/responses` with `Upgrade: websocket`, the Codex
    /// transport) are accepted; when false (the default) they are refused with 404 so a client
    /// falls back to SSE. Either way the attempt is recorded ([`crate::FakeLlm::ws_upgrades`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub websocket: bool,
}

fn default_chunk_size() -> usize {
    8
}

impl Default for Script {
    fn default() -> Self {
        Script {
            default_chunk_size: default_chunk_size(),
            default_delay_ms: 0.0,
            turns: Vec::new(),
            exhausted: None,
            websocket: false,
        }
    }
}

impl Script {
    /// A script serving `turns` in order with the default chunk size (8) and no delay.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Script {
            turns: turns.into_iter().collect(),
            ..Script::default()
        }
    }

    /// Parses a script from JSON text. A scenario file (an object with an `llm` key and no
    /// `turns`) is accepted too; its `llm` member is the script.
    pub fn from_json_str(text: &str) -> serde_json::Result<Self> {
        let value: Value = serde_json::from_str(text)?;
        Self::from_value(value)
    }

    /// Like [`Script::from_json_str`], from an already parsed value (`null` = empty script).
    pub fn from_value(value: Value) -> serde_json::Result<Self> {
        let value = match value {
            Value::Null => return Ok(Script::default()),
            Value::Object(mut m) if m.contains_key("llm") && !m.contains_key("turns") => {
                m.remove("llm").unwrap_or(Value::Null)
            }
            other => other,
        };
        if value.is_null() {
            return Ok(Script::default());
        }
        serde_json::from_value(value)
    }

    /// Sets the default chunk size.
    pub fn chunk_size(mut self, size: usize) -> Self {
        self.default_chunk_size = size;
        self
    }

    /// Sets the default per-event delay.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.default_delay_ms = ms as f64;
        self
    }

    /// Accepts (`true`) or refuses (`false`, the default) WebSocket upgrades.
    pub fn websocket(mut self, accept: bool) -> Self {
        self.websocket = accept;
        self
    }

    /// Replaces the turn served when the script is exhausted.
    pub fn exhausted(mut self, turn: Turn) -> Self {
        self.exhausted = Some(turn);
        self
    }

    /// The turn served when the script is exhausted.
    pub fn exhausted_turn(&self) -> Turn {
        self.exhausted
            .clone()
            .unwrap_or_else(|| Turn::text(EXHAUSTED_TEXT))
    }
}

/// One content block of a scripted reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Visible text, streamed in `chunk_size` pieces.
    Text {
        /// The full text.
        #[serde(default)]
        text: String,
    },
    /// Reasoning text. OpenAI streams it in `field` (default `reasoning_content`); Anthropic
    /// streams `thinking_delta`s followed by one `signature_delta`.
    Thinking {
        /// The full thinking text.
        #[serde(default)]
        text: String,
        /// Anthropic signature (default `sig_fake_<seq>_<index>`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// OpenAI delta field name (default `reasoning_content`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field: Option<String>,
    },
    /// Anthropic redacted thinking (ignored on the OpenAI wire).
    RedactedThinking {
        /// Opaque data (default `redacted`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
    },
    /// A tool call; `arguments` is streamed as JSON text (a string is streamed verbatim).
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments object (or a raw string, possibly invalid JSON).
        #[serde(default = "empty_object")]
        arguments: Value,
        /// Tool call id (default `call_fake_<seq>_<i>` / `toolu_fake_<seq>_<i>`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// Any other block type: skipped, like fakellm.py does.
    #[serde(other)]
    Unknown,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text { text: text.into() }
    }

    /// A thinking block with a signature.
    pub fn thinking(text: impl Into<String>, signature: impl Into<String>) -> Self {
        Block::Thinking {
            text: text.into(),
            signature: Some(signature.into()),
            field: None,
        }
    }

    /// A tool call with a generated id.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Block::ToolCall {
            name: name.into(),
            arguments,
            id: None,
        }
    }

    /// A tool call with an explicit id.
    pub fn tool_call_with_id(
        name: impl Into<String>,
        arguments: Value,
        id: impl Into<String>,
    ) -> Self {
        Block::ToolCall {
            name: name.into(),
            arguments,
            id: Some(id.into()),
        }
    }
}

/// Token usage reported for a turn (fakellm.py defaults: 10 input, 5 output, no cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    #[serde(default = "default_input")]
    pub input: u64,
    /// Output tokens.
    #[serde(default = "default_output")]
    pub output: u64,
    /// Cache-read input tokens.
    #[serde(default)]
    pub cache_read: u64,
    /// Cache-write input tokens.
    #[serde(default)]
    pub cache_write: u64,
}

fn default_input() -> u64 {
    10
}

fn default_output() -> u64 {
    5
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input: default_input(),
            output: default_output(),
            cache_read: 0,
            cache_write: 0,
        }
    }
}

impl Usage {
    /// Usage with the given input/output tokens and no cache.
    pub fn new(input: u64, output: u64) -> Self {
        Usage {
            input,
            output,
            cache_read: 0,
            cache_write: 0,
        }
    }

    /// Sets the cache-read and cache-write tokens.
    pub fn cache(mut self, read: u64, write: u64) -> Self {
        self.cache_read = read;
        self.cache_write = write;
        self
    }
}

/// `match`: a substring, or a list of substrings of which any may occur.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MatchSpec {
    /// The request body text must contain this.
    One(String),
    /// The request body text must contain any of these.
    Any(Vec<String>),
}

impl MatchSpec {
    /// Whether the raw request body text fits.
    pub fn matches(&self, body_text: &str) -> bool {
        match self {
            MatchSpec::One(s) => body_text.contains(s.as_str()),
            MatchSpec::Any(list) => list.iter().any(|s| body_text.contains(s.as_str())),
        }
    }
}

/// An HTTP error answer instead of a stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorSpec {
    /// HTTP status (default 500).
    #[serde(default = "default_error_status")]
    pub status: u16,
    /// Body: a JSON value, or a string sent verbatim (default: the provider's usual error JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Extra response headers (e.g. `retry-after`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub headers: Map<String, Value>,
    /// Sleep before answering (milliseconds).
    #[serde(default)]
    pub delay_ms: f64,
}

/// A Bedrock exception frame ending a ConverseStream answer (`:message-type` `exception`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExceptionSpec {
    /// `:exception-type`, e.g. `throttlingException`, `validationException`,
    /// `internalServerException`, `serviceUnavailableException`, `modelStreamErrorException`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payload's `message`.
    #[serde(default)]
    pub message: String,
}

fn default_error_status() -> u16 {
    500
}

/// One scripted reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Content blocks in stream order.
    #[serde(default)]
    pub blocks: Vec<Block>,
    /// Generic stop reason (`stop`, `length`, `tool_use`, or a provider-specific value);
    /// inferred when absent: `tool_use` if any tool call, else `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Reported usage (default [`Usage::default`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Characters per delta (default: the script's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// Sleep before each event (default: the script's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    /// Serve this turn only to a request whose body text contains this.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<MatchSpec>,
    /// Serve this turn only to requests of this wire format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// Answer with an HTTP error instead of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorSpec>,
    /// Drop the connection (no terminating chunk) after this many SSE events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnect_after_events: Option<usize>,
    /// Stop sending after this many events and wait (`stall_ms`, default 30000) before going on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_after_events: Option<usize>,
    /// Maximum stall time in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<f64>,
    /// During a stall, send nothing at all (default false: an SSE comment every 100 ms, which
    /// parsers ignore but which keeps the connection visibly alive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_silent: Option<bool>,
    /// Sleep this long (milliseconds) before sending the response headers: a stall before the
    /// first byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_delay_ms: Option<f64>,
    /// While waiting `delay_ms` before an event, send an SSE keep-alive comment (`: ping`)
    /// every this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keepalive_ms: Option<f64>,
    /// Send these raw SSE strings instead of generated events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_sse: Option<Vec<String>>,
    /// HTTP status of a streamed answer (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Anthropic: send a `ping` event after `message_start` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping: Option<bool>,
    /// OpenAI: send the usage chunk even when the request did not ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_usage: Option<bool>,
    /// Bedrock: end the stream (after the content blocks) with this exception frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<ExceptionSpec>,
}

impl Turn {
    /// A turn with these blocks.
    pub fn blocks(blocks: impl IntoIterator<Item = Block>) -> Self {
        Turn {
            blocks: blocks.into_iter().collect(),
            ..Turn::default()
        }
    }

    /// A plain text reply.
    pub fn text(text: impl Into<String>) -> Self {
        Turn::blocks([Block::text(text)])
    }

    /// A reply that is just one tool call (stop reason `tool_use`).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Turn::blocks([Block::tool_call(name, arguments)])
    }

    /// An HTTP error answer with the provider's default error body.
    pub fn error(status: u16) -> Self {
        Turn {
            error: Some(ErrorSpec {
                status,
                body: None,
                headers: Map::new(),
                delay_ms: 0.0,
            }),
            ..Turn::default()
        }
    }

    /// Appends a block.
    pub fn with_block(mut self, block: Block) -> Self {
        self.blocks.push(block);
        self
    }

    /// Appends a text block.
    pub fn with_text(self, text: impl Into<String>) -> Self {
        self.with_block(Block::text(text))
    }

    /// Appends a thinking block.
    pub fn with_thinking(self, text: impl Into<String>, signature: impl Into<String>) -> Self {
        self.with_block(Block::thinking(text, signature))
    }

    /// Appends a tool call.
    pub fn with_tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.with_block(Block::tool_call(name, arguments))
    }

    /// Sets the usage.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the stop reason.
    pub fn stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Sets the characters per delta.
    pub fn chunk_size(mut self, size: usize) -> Self {
        self.chunk_size = Some(size);
        self
    }

    /// Sets the sleep before each event.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = Some(ms as f64);
        self
    }

    /// Serves this turn only to requests whose body contains `needle`.
    pub fn matching(mut self, needle: impl Into<String>) -> Self {
        self.match_ = Some(MatchSpec::One(needle.into()));
        self
    }

    /// Serves this turn only to requests of this wire format.
    pub fn api(mut self, api: Api) -> Self {
        self.api = Some(api);
        self
    }

    /// Stalls after `events` SSE events for at most `ms` milliseconds.
    pub fn stall_after(mut self, events: usize, ms: u64) -> Self {
        self.stall_after_events = Some(events);
        self.stall_ms = Some(ms as f64);
        self
    }

    /// Stalls after `events` SSE events for at most `ms` milliseconds, sending nothing.
    pub fn silent_stall_after(mut self, events: usize, ms: u64) -> Self {
        self = self.stall_after(events, ms);
        self.stall_silent = Some(true);
        self
    }

    /// Waits `ms` milliseconds before sending the response headers.
    pub fn headers_delay(mut self, ms: u64) -> Self {
        self.headers_delay_ms = Some(ms as f64);
        self
    }

    /// Sends an SSE keep-alive comment every `ms` milliseconds while waiting between events.
    pub fn keepalive(mut self, ms: u64) -> Self {
        self.keepalive_ms = Some(ms as f64);
        self
    }

    /// Adds a response header to an error answer (e.g. `retry-after`); the turn must be an
    /// error turn ([`Turn::error`]), else nothing changes.
    pub fn error_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Some(spec) = self.error.as_mut() {
            spec.headers
                .insert(name.into(), Value::String(value.into()));
        }
        self
    }

    /// Drops the connection after `events` SSE events.
    pub fn disconnect_after(mut self, events: usize) -> Self {
        self.disconnect_after_events = Some(events);
        self
    }

    /// Sets the error body (turning the turn into an error answer if it was not one).
    pub fn error_body(mut self, status: u16, body: Value) -> Self {
        let mut spec = self.error.take().unwrap_or(ErrorSpec {
            status,
            body: None,
            headers: Map::new(),
            delay_ms: 0.0,
        });
        spec.status = status;
        spec.body = Some(body);
        self.error = Some(spec);
        self
    }

    /// The generic stop reason: the scripted one, else `tool_use` if there is a tool call, else
    /// `stop`.
    pub fn effective_stop_reason(&self) -> String {
        match &self.stop_reason {
            Some(s) if !s.is_empty() => s.clone(),
            _ if self
                .blocks
                .iter()
                .any(|b| matches!(b, Block::ToolCall { .. })) =>
            {
                "tool_use".into()
            }
            _ => "stop".into(),
        }
    }

    pub(crate) fn fits(&self, api: Api, body_text: &str) -> bool {
        if self.api.is_some_and(|a| a != api) {
            return false;
        }
        match &self.match_ {
            Some(m) => m.matches(body_text),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_fakellm_py_script_shape() {
        let s = Script::from_json_str(
            r#"{"llm": {"default_chunk_size": 4, "turns": [
                {"blocks": [{"type": "thinking", "text": "hm", "signature": "s"},
                            {"type": "text", "text": "hi"},
                            {"type": "tool_call", "name": "bash", "arguments": {"command": "ls"}},
                            {"type": "mystery"}],
                 "usage": {"input": 7}, "match": ["a", "b"], "api": "anthropic",
                 "error": {"status": 529, "headers": {"retry-after": "0"}},
                 "stall_after_events": 3, "delay_ms": 1.5}
            ]}, "steps": []}"#,
        )
        .unwrap();
        assert_eq!(s.default_chunk_size, 4);
        let t = &s.turns[0];
        assert_eq!(t.blocks.len(), 4);
        assert_eq!(t.blocks[3], Block::Unknown);
        assert_eq!(
            t.usage,
            Some(Usage {
                input: 7,
                output: 5,
                cache_read: 0,
                cache_write: 0
            })
        );
        assert_eq!(t.api, Some(Api::Anthropic));
        assert!(t.fits(Api::Anthropic, "xx b yy"));
        assert!(!t.fits(Api::Anthropic, "nothing"));
        assert!(!t.fits(Api::Openai, "a"));
        assert_eq!(t.error.as_ref().unwrap().status, 529);
        assert_eq!(t.effective_stop_reason(), "tool_use");
    }

    #[test]
    fn builders_round_trip_through_json() {
        let t = Turn::text("a")
            .with_tool_call("read", json!({"path": "x"}))
            .usage(Usage::new(1, 2).cache(3, 4))
            .matching("needle")
            .stall_after(2, 100);
        let back: Turn = serde_json::from_value(serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(Turn::text("x").effective_stop_reason(), "stop");
        assert_eq!(
            Turn::text("x")
                .stop_reason("length")
                .effective_stop_reason(),
            "length"
        );
    }
}
