//! Extension providers (upstream docs/custom-provider.md, docs/virtual-models.md): the
//! request of a stream, its events, the (un)registration calls, OAuth and model refresh, and
//! virtual model routing.

use super::{lenient, present};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Upstream 1.6 `TranscriptContext` (pi-ai `utils/transcript`): the system prompt and the tools
/// travel in a leading system message (`getCurrentSystemPrompt(context.messages)`,
/// `getCurrentTools(context.messages)` read them), then the conversation.
#[derive(Debug, Clone, Serialize)]
pub struct TranscriptContext {
    /// `[system?, ...messages]`.
    pub messages: Vec<TranscriptMessage>,
}

/// One message of a [`TranscriptContext`].
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum TranscriptMessage {
    /// The leading system message.
    System(SystemMessage),
    /// A `user`, `assistant` or `toolResult` message as the session stores it.
    Message(Box<pi_ai::Message>),
}

/// Upstream `SystemMessage`: `{role: "system", content, toolsAdded?, timestamp}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMessage {
    /// Always `"system"`.
    pub role: &'static str,
    /// The system prompt text.
    pub content: String,
    /// The tools offered (`{name, description, parameters}`); absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools_added: Vec<pi_ai::ToolDefinition>,
    /// Upstream's `createInitialSystemMessage` writes 0.
    pub timestamp: i64,
}

impl TranscriptContext {
    /// Upstream `normalizeContext`: a leading system message when there is a system prompt
    /// or a tool, then the messages.
    pub fn from_context(context: &pi_ai::Context) -> Self {
        let mut messages = Vec::with_capacity(context.messages.len() + 1);
        if !context.system_prompt.is_empty() || !context.tools.is_empty() {
            messages.push(TranscriptMessage::System(SystemMessage {
                role: "system",
                content: context.system_prompt.clone(),
                tools_added: context.tools.clone(),
                timestamp: 0,
            }));
        }
        messages.extend(
            context
                .messages
                .iter()
                .map(|m| TranscriptMessage::Message(Box::new(m.clone()))),
        );
        TranscriptContext { messages }
    }
}

/// The upstream `SimpleStreamOptions` fields a request carries to the host.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamRequestOptions {
    /// The resolved API key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The thinking level (`minimal` … `xhigh`); absent = off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Output token cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The session id (prompt caching).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Extra request headers (resolved).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub headers: serde_json::Map<String, Value>,
}

/// An event of an extension provider's stream (upstream `AssistantMessageEvent`), as host.mjs
/// forwards it: without `partial`, except on `start`; `toolcall_start` carries the block's
/// `id` and `toolName` from the partial message; `usage` is sent whenever the partial
/// message's usage changed.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProviderStreamEvent {
    /// The response started.
    Start {
        /// The partial message so far (normalised by the host).
        #[serde(default)]
        partial: Option<Box<pi_ai::AssistantMessage>>,
    },
    /// A text block opens.
    #[serde(rename_all = "camelCase")]
    TextStart {
        /// Index of the block in the message content.
        content_index: usize,
    },
    /// More text.
    #[serde(rename_all = "camelCase")]
    TextDelta {
        /// Index of the block.
        content_index: usize,
        /// The appended text.
        delta: String,
    },
    /// A text block is complete.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's text.
        #[serde(default)]
        content: String,
    },
    /// A thinking block opens.
    #[serde(rename_all = "camelCase")]
    ThinkingStart {
        /// Index of the block.
        content_index: usize,
    },
    /// More reasoning text.
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        /// Index of the block.
        content_index: usize,
        /// The appended text.
        delta: String,
    },
    /// A thinking block is complete.
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        /// Index of the block.
        content_index: usize,
        /// The block's text.
        #[serde(default)]
        content: String,
    },
    /// A tool call opens.
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolCallStart {
        /// Index of the block.
        content_index: usize,
        /// The call id (from the partial message).
        #[serde(default)]
        id: String,
        /// The tool name (from the partial message).
        #[serde(default)]
        tool_name: String,
    },
    /// A fragment of the arguments JSON.
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolCallDelta {
        /// Index of the block.
        content_index: usize,
        /// The fragment.
        delta: String,
    },
    /// A tool call is complete.
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolCallEnd {
        /// Index of the block.
        content_index: usize,
        /// The block (`{type: "toolCall", id, name, arguments}`).
        tool_call: pi_ai::Content,
    },
    /// The partial message's usage changed (cumulative).
    Usage {
        /// The usage so far.
        usage: pi_ai::Usage,
    },
    /// The normal end.
    Done {
        /// `stop`, `length` or `toolUse`.
        reason: pi_ai::StopReason,
        /// The final message.
        message: Box<pi_ai::AssistantMessage>,
    },
    /// Failure or abort.
    Error {
        /// `error` or `aborted`.
        reason: pi_ai::StopReason,
        /// The final message (`errorMessage` set).
        error: Box<pi_ai::AssistantMessage>,
    },
}

/// A provider (un)registration call from an extension ([`FromHost::Call`] methods
/// `registerProvider` / `unregisterProvider`, upstream `pi.registerProvider(name, config)`).
#[derive(Debug, Clone)]
pub enum ProviderCall {
    /// `registerProvider`: `{name, config, streams}`.
    Register(Box<RegisterProvider>),
    /// `unregisterProvider`: `{name}`.
    Unregister {
        /// The provider's name.
        name: String,
    },
    /// `registerVirtualModel`: `{definition}`.
    RegisterVirtual(Box<VirtualModelDefinition>),
    /// `unregisterVirtualModel`: `{provider, id}`.
    UnregisterVirtual {
        /// The provider it is listed under.
        provider: String,
        /// Its id.
        id: String,
    },
}

#[derive(Deserialize)]
struct RegisterVirtualParams {
    definition: VirtualModelDefinition,
}

#[derive(Deserialize)]
struct UnregisterVirtualParams {
    provider: String,
    id: String,
}

/// The params of a `registerProvider` call.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterProvider {
    /// The provider's name (id).
    pub name: String,
    /// The legacy `ProviderConfig` with its functions dropped (parsed as `models.json`'s
    /// provider entries are; unknown keys such as `oauth`, `type` are ignored).
    pub config: crate::config::models::ProviderConfig,
    /// Whether the config has `streamSimple` (or `stream`).
    #[serde(default)]
    pub streams: bool,
    /// `{name}` when the config has an `oauth` login (its functions stay in the host).
    #[serde(default)]
    pub oauth: Option<OAuthInfo>,
    /// Whether the config has `refreshModels`.
    #[serde(default)]
    pub refreshes: bool,
}

/// What pi knows of an extension provider's `oauth` config.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct OAuthInfo {
    /// The display name of the login (`oauth.name`).
    #[serde(default)]
    pub name: Option<String>,
}

/// A `pi.registerVirtualModel(definition)` minus `route` (upstream docs/virtual-models.md
/// "Register a virtual model").
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualModelDefinition {
    /// The provider it is listed under.
    pub provider: String,
    /// Its id.
    pub id: String,
    /// Display name (defaults to the id).
    #[serde(default)]
    pub name: Option<String>,
    /// Levels offered for selection (default `["off"]`).
    #[serde(default)]
    pub thinking_levels: Option<Vec<String>>,
    /// Shown before the first response (0 = unknown).
    #[serde(default)]
    pub context_window: Option<f64>,
    /// Shown before the first response (0 = unknown).
    #[serde(default)]
    pub max_tokens: Option<f64>,
    /// Input types offered (default text and images).
    #[serde(default)]
    pub input: Option<Vec<String>>,
}

/// The reply to [`ToHost::Route`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteResult {
    /// The physical model's provider.
    pub provider: String,
    /// The physical model's id.
    pub id: String,
    /// The thinking level the router chose (`null` = none given).
    #[serde(default)]
    pub thinking_level: Option<String>,
    /// New router state (only meaningful with `state_changed`).
    #[serde(default)]
    pub state: Value,
    /// Whether the router returned a new state object.
    #[serde(default)]
    pub state_changed: bool,
}

/// `data` of the custom entry that keeps a virtual model's router state on the session branch
/// (`crate::extensions::provider::VIRTUAL_STATE_ENTRY`, upstream `VIRTUAL_MODEL_STATE_ENTRY`):
/// `{provider, modelId, state}`, `state` being what the router returned (opaque to pi).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualModelState {
    /// The virtual model's provider.
    pub provider: String,
    /// The virtual model's id.
    pub model_id: String,
    /// The router state (a missing one reads `null`).
    #[serde(default)]
    pub state: Value,
}

impl VirtualModelState {
    /// The entry data `v` as a state record; `None` when `v` is not an object or its
    /// `provider` or `modelId` is missing or not a string (the entry then belongs to no
    /// model).
    pub fn from_value(v: &Value) -> Option<Self> {
        if !v.is_object() {
            return None;
        }
        Self::deserialize(v).ok()
    }

    /// The record as entry data (`null` should the state not serialize, which a JSON value
    /// always does).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Deserialize)]
struct UnregisterParams {
    name: String,
}

impl ProviderCall {
    /// The provider call `method` names with its `params`; `None` for any other method,
    /// `Some(Err)` for params that do not parse.
    pub fn parse(method: &str, params: &Value) -> Option<Result<ProviderCall, String>> {
        match method {
            "registerProvider" => Some(
                RegisterProvider::deserialize(params)
                    .map(|r| ProviderCall::Register(Box::new(r)))
                    .map_err(|e| e.to_string()),
            ),
            "unregisterProvider" => Some(
                UnregisterParams::deserialize(params)
                    .map(|p| ProviderCall::Unregister { name: p.name })
                    .map_err(|e| e.to_string()),
            ),
            "registerVirtualModel" => Some(
                RegisterVirtualParams::deserialize(params)
                    .map(|p| ProviderCall::RegisterVirtual(Box::new(p.definition)))
                    .map_err(|e| e.to_string()),
            ),
            "unregisterVirtualModel" => Some(
                UnregisterVirtualParams::deserialize(params)
                    .map(|p| ProviderCall::UnregisterVirtual {
                        provider: p.provider,
                        id: p.id,
                    })
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        }
    }
}

/// The answer to a provider call: `{error}` when the registration was refused.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProviderCallResult {
    /// Why the registration was refused (upstream's message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The params of an `authNotify` call: `{id, event}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuthNotifyParams {
    /// The login callback's event.
    #[serde(default, deserialize_with = "lenient")]
    pub event: LoginEvent,
}

/// One `onAuth` / `onDeviceCode` / `onProgress` event of an OAuth login (upstream
/// `OAuthLoginCallbacks`): `{type, url?, instructions?, verificationUri?, userCode?,
/// message?}`; absent or non-string fields read as `""`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginEvent {
    /// `auth_url`, `device_code` or another kind.
    #[serde(default, rename = "type", deserialize_with = "lenient")]
    pub kind: String,
    /// The URL to open (`auth_url`).
    #[serde(default, deserialize_with = "lenient")]
    pub url: String,
    /// Shown after the URL.
    #[serde(default, deserialize_with = "lenient")]
    pub instructions: String,
    /// Where to enter the code (`device_code`).
    #[serde(default, deserialize_with = "lenient")]
    pub verification_uri: String,
    /// The code (`device_code`).
    #[serde(default, deserialize_with = "lenient")]
    pub user_code: String,
    /// Any other event's text.
    #[serde(default, deserialize_with = "lenient")]
    pub message: String,
}

/// The params of an `authPrompt` call: `{id, prompt}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuthPromptParams {
    /// The question.
    #[serde(default, deserialize_with = "lenient")]
    pub prompt: LoginPrompt,
}

/// One question of an OAuth login (`onPrompt` / `onSelect`): `{type?, message, placeholder?,
/// options?}`; absent or non-string fields read as `""`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoginPrompt {
    /// `select` for a choice, else a text question.
    #[serde(default, rename = "type", deserialize_with = "lenient")]
    pub kind: String,
    /// The question.
    #[serde(default, deserialize_with = "lenient")]
    pub message: String,
    /// Shown in parentheses.
    #[serde(default, deserialize_with = "lenient")]
    pub placeholder: String,
    /// The choices of a `select`.
    #[serde(default, deserialize_with = "lenient")]
    pub options: Vec<LoginOption>,
}

/// One choice of a `select` login question.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoginOption {
    /// Its label.
    #[serde(default, deserialize_with = "lenient")]
    pub label: String,
    /// Shown after the label.
    #[serde(default, deserialize_with = "lenient")]
    pub description: Option<String>,
}

/// The answer to an `authPrompt` call: `{value}` or `{cancelled: true}` (end of input).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum AuthPromptAnswer {
    /// The line read.
    Value {
        /// Its text.
        value: String,
    },
    /// No answer.
    Cancelled {
        /// Always `true`.
        cancelled: bool,
    },
}

/// The params of a `publishModels` call (`context.publish({persist})` of `refreshModels`):
/// `{provider, persist?}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PublishModelsParams {
    /// The provider (`""` = none given).
    #[serde(default, deserialize_with = "lenient")]
    pub provider: String,
    /// The snapshot to store (extension data); `null` = delete it; `None` = nothing to store.
    #[serde(default, deserialize_with = "present")]
    pub persist: Option<Value>,
}

/// The reply to [`ToHost::ProviderAuth`]: `{credentials, name}` (`login`), `{credentials}`
/// (`refresh`) or `{apiKey}` (`apiKey`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderAuthReply {
    /// The credential to store (a non-object reads as none).
    #[serde(default, deserialize_with = "lenient")]
    pub credentials: Option<serde_json::Map<String, Value>>,
    /// The request key (`null` = none).
    #[serde(default, deserialize_with = "lenient")]
    pub api_key: Option<String>,
}

/// `context.credential` of [`ToHost::RefreshModels`].
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RefreshCredential {
    /// The stored OAuth entry of `auth.json`, as is.
    Stored(serde_json::Map<String, Value>),
    /// A resolved API key: `{type: "api_key", key}`.
    ApiKey {
        /// Always `"api_key"`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The key.
        key: String,
    },
}

/// The reply to [`ToHost::RefreshModels`]: `{models, published}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RefreshModelsReply {
    /// The models replacing the registration's: `None` = unchanged (not a list), `Some(Err)`
    /// = a list that does not read as model definitions (the reason).
    #[serde(default, deserialize_with = "model_list")]
    pub models: Option<Result<Vec<crate::config::models::ModelConfig>, String>>,
}

type ModelList = Option<Result<Vec<crate::config::models::ModelConfig>, String>>;

fn model_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ModelList, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(v.is_array()
        .then(|| serde_json::from_value(v).map_err(|e| e.to_string())))
}

/// `request` of [`ToHost::Route`] (upstream `VirtualModelRouteRequest` minus `signal`):
/// `{model, thinkingLevel, reason, messages, state?, previous?}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteRequest {
    /// The virtual model.
    pub model: Box<pi_ai::Model>,
    /// The requested thinking level.
    pub thinking_level: String,
    /// `user`, `agent` or `direct`.
    pub reason: String,
    /// The conversation so far.
    pub messages: Vec<pi_ai::Message>,
    /// The router's state on the branch (router data); absent for `direct`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// `{model}`: the physical model of the latest successful response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<RoutePrevious>,
}

/// `previous` of a [`RouteRequest`].
#[derive(Debug, Clone, Serialize)]
pub struct RoutePrevious {
    /// The model.
    pub model: Box<pi_ai::Model>,
}
