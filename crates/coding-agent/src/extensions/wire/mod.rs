//! The pipe protocol between `pi` and its extension host (our own; host.mjs speaks it).
//!
//! Newline-delimited JSON, one object per line, tagged by `t`. `pi` → host: [`ToHost`]; host →
//! `pi`: [`FromHost`]. Requests carry a numeric `id`; the host answers each with exactly one
//! [`FromHost::Reply`] of the same id.

mod calls;
mod events;
#[cfg(test)]
mod host_tests;
mod input;
mod load;
mod notify;
#[cfg(test)]
mod notify_tests;
mod provider;
mod session;
#[cfg(test)]
mod tests;
mod tools;

pub use calls::*;
pub use events::*;
pub use input::*;
pub use load::*;
pub use notify::*;
pub use provider::*;
pub use session::*;
pub use tools::*;

use crate::protocol::rpc::ExtensionUiRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A message from `pi` to the host; `'a` is what the events it carries borrow.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToHost<'a> {
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
        /// The mirror ([`SessionMirror`]); `entriesFrom` = the id after which `entries`
        /// follow (`null` = `entries` are all of them).
        state: Box<SessionMirror>,
    },
    /// Run the `tool_call` handlers. Reply: [`ToolCallResult`].
    ToolCall {
        /// Request id.
        id: u64,
        /// The upstream event object.
        event: ToolCallEvent<'a>,
    },
    /// Run the `tool_result` handlers. Reply: `null` (unchanged) or [`ToolResultReply`].
    ToolResult {
        /// Request id.
        id: u64,
        /// The upstream event object.
        event: ToolResultEvent<'a>,
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
        /// The event object ([`Notification`]).
        event: Notification<'a>,
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
        result: CallResult,
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
    /// `operations.exec`, a `session_before_compact` event's `event.signal`). Nothing is
    /// answered; the request itself still replies.
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
