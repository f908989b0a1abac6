//! The pipe protocol between `pi` and its extension host (our own; host.mjs speaks it).
//!
//! Newline-delimited JSON, one object per line, tagged by `t`. `pi` → host: [`ToHost`]; host →
//! `pi`: [`FromHost`]. Requests carry a numeric `id`; the host answers each with exactly one
//! [`FromHost::Reply`] of the same id.

use crate::protocol::rpc::ExtensionUiRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A message from `pi` to the host.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToHost {
    /// Import the extensions and run their factories. Reply: [`LoadResult`].
    #[serde(rename_all = "camelCase")]
    Load {
        /// Request id.
        id: u64,
        /// Absolute extension entry files, in load order.
        paths: Vec<String>,
        /// `ctx.mode`: `rpc`, `json` or `print`.
        mode: String,
        /// `ctx.cwd`.
        cwd: String,
    },
    /// The command-line values of registered extension flags (upstream
    /// `applyExtensionFlagValues`): name without dashes → `true` (boolean flag) or the string
    /// given. `pi.getFlag` answers these, else the registered default. Fire and forget.
    Flags {
        /// The values.
        values: serde_json::Map<String, Value>,
    },
    /// Re-import every extension and run its factory again (a fresh instance, as upstream
    /// after a session replacement or `ctx.reload()`). Reply: [`LoadResult`].
    Reload {
        /// Request id.
        id: u64,
    },
    /// The session state the host mirrors for synchronous accessors (`pi.getThinkingLevel`,
    /// `ctx.sessionManager.*`, `ctx.model`, …); see `api::state`. Fire and forget.
    State {
        /// `{cwd, sessionFile, sessionId, sessionName, sessionDir, header, leafId, entries,
        /// entriesFrom, model, thinkingLevel, activeTools, allTools, isIdle,
        /// hasPendingMessages, contextUsage, systemPrompt, commands}`; `entriesFrom` = the id after which `entries`
        /// follow (`null` = `entries` are all of them).
        state: Value,
    },
    /// Run the `tool_call` handlers. `event` = `{type:"tool_call", toolCallId, toolName, input}`.
    /// Reply: [`ToolCallResult`].
    ToolCall {
        /// Request id.
        id: u64,
        /// The upstream event object.
        event: Value,
    },
    /// Run the `tool_result` handlers. `event` = `{type:"tool_result", toolCallId, toolName,
    /// input, content, details, isError}`. Reply: `null` (unchanged) or `{content, details,
    /// isError}`.
    ToolResult {
        /// Request id.
        id: u64,
        /// The upstream event object.
        event: Value,
    },
    /// Run the handlers of a [`HostEvent`] pi knows the shape of (sent as `event`, as
    /// [`ToHost::Event`] is). Reply: the event's reply (see each [`HostEvent`]).
    #[serde(rename = "event")]
    HostEvent {
        /// Request id; `None` = fire and forget.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
        /// The event.
        event: HostEvent,
    },
    /// Run the handlers of `event.type` (a notification: agent/turn/message/session events).
    /// Without an id nothing is answered.
    Event {
        /// Request id; `None` = fire and forget.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
        /// The event object as the RPC client would see it.
        event: Value,
    },
    /// Run a registered slash command. Reply: `null` once the handler has returned.
    Command {
        /// Request id.
        id: u64,
        /// Command name without the slash.
        name: String,
        /// The text after the name (trimmed), `""` when none.
        args: String,
    },
    /// Answered (`null`) once the host has sent everything it had scheduled before it (its
    /// pending `setImmediate` work, such as a deferred `sendUserMessage`).
    Ping {
        /// Request id.
        id: u64,
    },
    /// The answer to a [`FromHost::Call`] that carried an id (e.g. `transpile` →
    /// `{code}` or `{error}`).
    CallResult {
        /// The call's id.
        id: u64,
        /// The answer.
        result: Value,
    },
    /// Execute a registered tool. Reply: `{content, details?, isError?}`.
    #[serde(rename_all = "camelCase")]
    Tool {
        /// Request id.
        id: u64,
        /// The tool's name.
        name: String,
        /// The tool call's id.
        tool_call_id: String,
        /// Validated arguments.
        params: Value,
    },
    /// Run the `user_bash` handlers for the RPC `bash` command. `event` = `{type:"user_bash",
    /// command, excludeFromContext, cwd}` (upstream `UserBashEvent`); `command` is what a
    /// handler's `operations.exec` runs (the command with `shellCommandPrefix`). Output of such
    /// a run comes back as [`FromHost::ToolUpdate`] text deltas. Reply: `null` (run it here),
    /// `{result: {output, exitCode?, cancelled, truncated, fullOutputPath?}}` (record as is) or
    /// `{executed: {output, exitCode?, cancelled}}` (run by the extension).
    UserBash {
        /// Request id.
        id: u64,
        /// The upstream event object.
        event: UserBashEvent,
        /// The command line for `operations.exec`.
        command: String,
    },
    /// Fire the `AbortSignal` of request `id` (a running tool's `execute`, a `user_bash`
    /// `operations.exec`). Nothing is answered; the request itself still replies.
    Abort {
        /// The request to abort.
        id: u64,
    },
    /// Stream one response from an extension provider's `streamSimple` (upstream
    /// docs/custom-provider.md "Implement custom streaming"). The host calls
    /// `streamSimple(model, context, options)` of the provider registered as `provider`, with
    /// an `AbortSignal` that [`ToHost::Abort`] of this id fires, and sends each event it yields
    /// as [`FromHost::StreamEvent`]. Reply: `null` once the stream has ended; an error when
    /// `streamSimple` threw or the provider is gone.
    Stream {
        /// Request id.
        id: u64,
        /// The registered provider's name.
        provider: String,
        /// The model object (upstream `Model`, as `get_state` shows it).
        model: Box<pi_ai::Model>,
        /// The request context in upstream 1.6's `TranscriptContext` shape.
        context: TranscriptContext,
        /// Upstream `SimpleStreamOptions` (the `signal` is added by the host).
        options: StreamRequestOptions,
    },
    /// An OAuth operation of an extension provider registered with `oauth` (upstream
    /// docs/custom-provider.md "Provide authentication"; the legacy config is adapted as
    /// upstream's `provider-composer` does). `op`: `login` (the extension's `login(callbacks)`;
    /// the callbacks arrive as `authNotify` / `authPrompt` calls carrying this id; reply
    /// `{credentials, name}`), `refresh` (`refreshToken(credentials, signal)`; reply
    /// `{credentials}`) or `apiKey` (`getApiKey(credentials)`; reply `{apiKey}`). Credentials are
    /// the `auth.json` entry (`{type: "oauth", refresh, access, expires, …}`).
    ProviderAuth {
        /// Request id ([`ToHost::Abort`] of it fires the callback's `signal`).
        id: u64,
        /// The registered provider's name.
        provider: String,
        /// `login`, `refresh` or `apiKey`.
        op: String,
        /// The stored credential (`null` for `login`).
        credentials: Value,
    },
    /// Run the `refreshModels(context)` of extension provider `provider` (upstream
    /// docs/extensions.md "pi.registerProvider"). Reply: `{models}` (the model definitions that
    /// replace the registration's models; `null` = unchanged).
    #[serde(rename_all = "camelCase")]
    RefreshModels {
        /// Request id.
        id: u64,
        /// The registered provider's name.
        provider: String,
        /// `context.allowNetwork`.
        allow_network: bool,
        /// `context.credential`: the stored or resolved credential (`null` = none).
        credential: Option<RefreshCredential>,
        /// `context.stored`: the provider's `models-store.json` snapshot (`null` = none).
        stored: Value,
    },
    /// Ask a virtual model's router for one request's model (upstream docs/virtual-models.md
    /// "Route requests"). Reply: [`RouteResult`].
    Route {
        /// Request id.
        id: u64,
        /// The route request (the signal is added by the host).
        request: Box<RouteRequest>,
        /// The models `ctx.modelRegistry` answers from (those with credentials).
        models: Vec<pi_ai::Model>,
    },
    /// A client's `extension_ui_response` (rpc-protocol.md §6.2), forwarded as is.
    UiResponse {
        /// The dialog's request id.
        id: String,
        /// Selected option / entered text.
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// Confirm answer.
        #[serde(skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        /// Dismissed.
        #[serde(skip_serializing_if = "Option::is_none")]
        cancelled: Option<bool>,
    },
}

/// A message from the host to `pi`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum FromHost {
    /// The answer to request `id`: `result` when `ok`, else `error` (a thrown error's message).
    Reply {
        /// The request id.
        id: u64,
        /// Whether the request succeeded.
        ok: bool,
        /// The result (`null` when none).
        #[serde(default)]
        result: Value,
        /// The error text when `!ok`.
        #[serde(default)]
        error: Option<String>,
    },
    /// An extension UI request to forward to the client as `extension_ui_request`.
    Ui {
        /// The request body.
        request: Box<ExtensionUiRequest>,
    },
    /// A handler failed; forwarded as `extension_error` (rpc-protocol.md §5.9).
    #[serde(rename_all = "camelCase")]
    Error {
        /// The extension file or `command:<name>`.
        extension_path: String,
        /// The hooked event.
        event: String,
        /// The error text.
        error: String,
    },
    /// An API call (`sendUserMessage`, `appendEntry`, …) from an extension.
    Call {
        /// Set when the host waits for a `call_result` (none yet).
        #[serde(default)]
        id: Option<u64>,
        /// The API method name as upstream spells it.
        method: String,
        /// Its arguments.
        #[serde(default)]
        params: Value,
    },
    /// What the extensions have registered, whole, after a registration made later than the
    /// factories (`pi.registerTool`, `registerCommand`, `on`, `registerFlag` in `session_start`
    /// or any other handler, as upstream allows). Sent before the reply of the round that made
    /// it, so the reply's waiter already sees it.
    Registered {
        /// Every loaded extension, in load order (the shape of [`LoadResult::extensions`]).
        #[serde(default)]
        extensions: Vec<LoadedExtension>,
    },
    /// One event of the stream of [`ToHost::Stream`] request `id`, normalised by the host.
    StreamEvent {
        /// The request id.
        id: u64,
        /// The event.
        event: Box<ProviderStreamEvent>,
    },
    /// A partial result of request `id`: an extension tool's `onUpdate` value (forwarded as
    /// `tool_execution_update`), or a text delta of a `user_bash` `operations.exec` run.
    ToolUpdate {
        /// The request id.
        id: u64,
        /// The partial result.
        #[serde(default)]
        partial: Value,
    },
}

/// One extension command as the host reports it after loading.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CommandInfo {
    /// Name without the slash.
    pub name: String,
    /// Description shown by `get_commands`.
    #[serde(default)]
    pub description: Option<String>,
}

/// One loaded extension.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoadedExtension {
    /// The entry file.
    pub path: String,
    /// Event names it has handlers for.
    #[serde(default)]
    pub events: Vec<String>,
    /// Its slash commands.
    #[serde(default)]
    pub commands: Vec<CommandInfo>,
    /// Its tools.
    #[serde(default)]
    pub tools: Vec<ToolInfo>,
    /// Its command-line flags (`pi.registerFlag`).
    #[serde(default)]
    pub flags: Vec<FlagInfo>,
}

/// One flag registered with `pi.registerFlag(name, {type, default, description})`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FlagInfo {
    /// Name without the dashes.
    pub name: String,
    /// `boolean` or `string` (upstream's two flag types; anything else is treated as `string`).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Shown by `--help` (not yet).
    #[serde(default)]
    pub description: Option<String>,
}

/// One registered tool as the host reports it (`pi.registerTool` definition minus code).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// The name the model calls.
    pub name: String,
    /// Its place in registration order across all extensions (0 first; absent = 0). Tools are
    /// offered in this order, as upstream's registry keeps them.
    #[serde(default)]
    pub seq: u64,
    /// Description for the model.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the arguments (TypeBox output).
    #[serde(default)]
    pub parameters: Option<Value>,
    /// One-line summary for the system prompt's tool list.
    #[serde(default)]
    pub prompt_snippet: Option<String>,
    /// Rule bullets for the system prompt.
    #[serde(default)]
    pub prompt_guidelines: Option<Vec<String>>,
}

/// An extension that failed to load.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoadError {
    /// The entry file.
    pub path: String,
    /// What went wrong.
    pub error: String,
}

/// The reply to [`ToHost::Load`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LoadResult {
    /// Extensions that loaded, in load order.
    #[serde(default)]
    pub extensions: Vec<LoadedExtension>,
    /// Extensions that failed.
    #[serde(default)]
    pub errors: Vec<LoadError>,
}

/// One handler's answer to `resources_discover` (upstream docs/extensions.md): paths of
/// skills, prompt templates and themes (files or folders) the extension at `path` adds.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredResources {
    /// The extension's entry file.
    pub path: String,
    /// Skill files or folders.
    #[serde(default)]
    pub skill_paths: Vec<String>,
    /// Prompt template files or folders.
    #[serde(default)]
    pub prompt_paths: Vec<String>,
    /// Theme files or folders (no themes in RPC mode; kept for completeness).
    #[serde(default)]
    pub theme_paths: Vec<String>,
}

/// The reply to [`ToHost::ToolCall`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallResult {
    /// Do not execute the tool.
    #[serde(default)]
    pub block: bool,
    /// Why (the error result's text).
    #[serde(default)]
    pub reason: Option<String>,
    /// The arguments after the handlers (they may edit `event.input`).
    #[serde(default)]
    pub input: Option<Value>,
}

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

// ---- host events pi sends, and the replies of their handlers (host.mjs `emit*`) ----

/// Reads a field leniently: a value of the wrong type reads as the default (the host passes
/// extension-returned values through, so a field may hold anything).
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// Reads a field whose presence matters: present (`null` included) = `Some`.
fn present<'de, D>(d: D) -> Result<Option<Value>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Value::deserialize(d).map(Some)
}

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

/// `systemPromptOptions` of `before_agent_start` (upstream `BuildSystemPromptOptions`, the
/// parts pi fills).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPromptOptions {
    /// The session's working directory.
    pub cwd: String,
    /// The active tools' names.
    pub selected_tools: Vec<String>,
    /// Always empty (no hidden tools in RPC mode).
    pub hidden_tools: Vec<String>,
    /// Always empty.
    pub prompt_guidelines: Vec<String>,
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
        /// How that prompt was built.
        system_prompt_options: SystemPromptOptions,
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
/// `message`): `{customType, content, display, details}`. `customType`, `content` and
/// `details` pass as given (extension data); `display` not `true`/`false` reads `false`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessageDraft {
    /// `customType` (absent = `None`).
    #[serde(default, deserialize_with = "present")]
    pub custom_type: Option<Value>,
    /// `content`: a string or content blocks (absent = `None`).
    #[serde(default, deserialize_with = "present")]
    pub content: Option<Value>,
    /// Whether the client shows it.
    #[serde(default, deserialize_with = "lenient")]
    pub display: bool,
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

/// The reply to [`ToHost::Tool`]: `{content, details?, isError?}` as the tool returned it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReply {
    /// The result's content blocks (unreadable = none).
    #[serde(default, deserialize_with = "lenient")]
    pub content: Vec<pi_ai::Content>,
    /// The tool's `details` (extension data; `null` = none).
    #[serde(default)]
    pub details: Option<Value>,
    /// Whether it is an error result (non-boolean = no).
    #[serde(default, deserialize_with = "lenient")]
    pub is_error: Option<bool>,
}

/// A tool's `onUpdate` value in the `{content, details?}` shape ([`FromHost::ToolUpdate`]).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolPartial {
    /// The partial content blocks.
    pub content: Vec<pi_ai::Content>,
    /// Its `details` (`null` = none).
    #[serde(default)]
    pub details: Option<Value>,
}

impl ToolPartial {
    /// `v` in that shape; `None` when it is not an object with readable `content`.
    pub fn from_value(v: &Value) -> Option<Self> {
        v.as_object()?;
        Self::deserialize(v).ok()
    }
}

// ---- extension provider auth and models (host.mjs `providerAuth`, `refreshModels`) ----

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

// ---- `ctx.modelRegistry.complete` (host.mjs `complete` call) ----

/// `context` of a `complete` call: `{systemPrompt?, messages, tools?}` in pi's shapes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteContext {
    /// The system prompt (non-string = none).
    #[serde(default, deserialize_with = "lenient")]
    pub system_prompt: Option<String>,
    /// The messages: `None` = absent, `Some(Err)` = unreadable (the reason).
    #[serde(default, deserialize_with = "checked")]
    pub messages: Option<Result<Vec<pi_ai::Message>, String>>,
    /// The tools: `None` = absent, `Some(Ok(None))` = `null`, `Some(Err)` = unreadable.
    #[serde(default, deserialize_with = "checked")]
    pub tools: Option<Result<Option<Vec<pi_ai::ToolDefinition>>, String>>,
}

/// Reads a present field as `Some(Ok)`, or `Some(Err)` (the reason) when it does not read as
/// `T`, so that the caller can name the field in its error.
fn checked<'de, D, T>(d: D) -> Result<Option<Result<T, String>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Value::deserialize(d)?;
    Ok(Some(serde_json::from_value(v).map_err(|e| e.to_string())))
}

/// `options` of a `complete` call (upstream `SimpleStreamOptions`, the fields pi reads).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteOptions {
    /// A thinking level.
    #[serde(default, deserialize_with = "lenient")]
    pub reasoning: Option<String>,
    /// Output cap.
    #[serde(default, deserialize_with = "lenient")]
    pub max_tokens: Option<u64>,
    /// Session id (prompt caching).
    #[serde(default, deserialize_with = "lenient")]
    pub session_id: Option<String>,
    /// `none` disables prompt caching.
    #[serde(default, deserialize_with = "lenient")]
    pub cache_retention: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn host_events_serialize_as_host_mjs_reads_them() {
        let msg = ToHost::HostEvent {
            id: Some(3),
            event: HostEvent::BeforeProviderHeaders {
                headers: Headers(vec![("b".into(), "1".into()), ("a".into(), "2".into())]),
            },
        };
        let line = serde_json::to_string(&msg).unwrap();
        assert_eq!(
            line,
            r#"{"t":"event","id":3,"event":{"type":"before_provider_headers","headers":{"b":"1","a":"2"}}}"#
        );
        let bash = ToHost::UserBash {
            id: 1,
            event: UserBashEvent {
                command: "ls".into(),
                exclude_from_context: true,
                cwd: "/w".into(),
            },
            command: "ls".into(),
        };
        assert_eq!(
            serde_json::to_value(&bash).unwrap()["event"],
            json!({"type": "user_bash", "command": "ls", "excludeFromContext": true, "cwd": "/w"})
        );
    }

    #[test]
    fn replies_tolerate_odd_fields_and_keep_presence() {
        let r = PayloadReply::deserialize(&json!({"payload": null})).unwrap();
        assert_eq!(r.payload, Some(Value::Null));
        assert_eq!(PayloadReply::deserialize(&json!({})).unwrap().payload, None);
        let b =
            BoundaryReply::deserialize(&json!({"entries": 3, "continue": "yes", "x": 1})).unwrap();
        assert!(b.entries.is_empty() && !b.continue_run);
        let t = ToolReply::deserialize(&json!({"content": "bad", "isError": 1})).unwrap();
        assert!(t.content.is_empty() && t.is_error.is_none());
        let m = RefreshModelsReply::deserialize(&json!({"models": null})).unwrap();
        assert!(m.models.is_none());
        let m = RefreshModelsReply::deserialize(&json!({"models": [1]})).unwrap();
        assert!(matches!(m.models, Some(Err(_))));
        assert!(CustomMessageDraft::from_value(&json!([1, 2])).is_none());
    }
}
