//! What the host reports after loading the extensions ([`super::ToHost::Load`], [`super::ToHost::Reload`],
//! [`super::FromHost::Registered`]) and the `resources_discover` answer.

use super::lenient;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The params of the host's `transpile` call (a `.ts` extension file it imports, host.mjs
/// `callPi("transpile", {path})`): `{path}`; a missing or non-string `path` reads as `""`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TranspileParams {
    /// The file to transpile.
    #[serde(default, deserialize_with = "lenient")]
    pub path: String,
}

impl TranspileParams {
    /// The params `v`; anything but an object reads as `{}`.
    pub fn from_value(v: &Value) -> Self {
        if !v.is_object() {
            return Self::default();
        }
        Self::deserialize(v).unwrap_or_default()
    }
}

/// The answer to `transpile` ([`super::ToHost::CallResult`]): `{code}` (the JavaScript) or
/// `{error}` (why the file could not be read or transpiled).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum TranspileReply {
    /// Transpiled.
    Code {
        /// The JavaScript module text.
        code: String,
    },
    /// Failed.
    Error {
        /// The reason.
        error: String,
    },
}

impl From<Result<String, String>> for TranspileReply {
    fn from(r: Result<String, String>) -> Self {
        match r {
            Ok(code) => Self::Code { code },
            Err(error) => Self::Error { error },
        }
    }
}

/// The answer to an API call pi cannot carry out (made before the session exists, while the
/// extensions load): `{error}` ([`super::ToHost::CallResult`]; host.mjs rejects the call's
/// promise with it).
#[derive(Debug, Clone, Serialize)]
pub struct CallError {
    /// The reason.
    pub error: String,
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
    /// Shown by `--help` (`Registered by <path>` when absent).
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
