//! The answers pi sends back for API calls that wait for one (`call_result` `result`; host.mjs
//! `callApi` resolves the extension's promise with `value` or throws `error`).

use serde::Serialize;
use serde_json::Value;

/// The answer to an API call: `{value}` (resolved with it) or `{error}` (thrown in the
/// extension as an `Error` of that message).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CallAnswer<T = Value> {
    /// `{value}`: the call succeeded; `null` for calls without a result.
    Value {
        /// The result.
        value: T,
    },
    /// `{error}`: the call failed, or the method is not supported (`"<method> is not
    /// supported by this pi build"`).
    Error {
        /// The message.
        error: String,
    },
}

impl<T: Serialize> CallAnswer<T> {
    /// The answer as the JSON value the `call_result` carries (`null` should `T` not
    /// serialize, which pi's results always do).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl CallAnswer {
    /// `{value: null}`: the answer of a call that has no result.
    pub fn done() -> Self {
        CallAnswer::Value { value: Value::Null }
    }

    /// `{error: "<method> is not supported by this pi build"}`.
    pub fn unsupported(method: &str) -> Self {
        CallAnswer::Error {
            error: format!("{method} is not supported by this pi build"),
        }
    }
}

/// The value of the session replacements of the command context (`ctx.newSession`,
/// `ctx.fork`, `ctx.switchSession`; upstream docs/extensions.md "ExtensionCommandContext"):
/// `{cancelled}` — `true` when a `session_before_*` handler cancelled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cancelled {
    /// Whether the replacement was cancelled.
    pub cancelled: bool,
}
