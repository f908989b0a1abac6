//! Refreshing a stored OAuth entry (upstream `pi-ai` `auth/resolve.ts`
//! `refreshStoredOAuthCredential`): double-checked under the `auth.json` file lock, so that
//! concurrent processes refresh once and the others pick up the new token.

use super::{OAuthProvider, MIN_VALIDITY_MS};
use serde_json::{Map, Value};
use std::path::Path;

/// Why a stored OAuth credential could not be made usable. The texts are upstream's
/// (`ModelsError` message, then `: ` and its cause).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RefreshError {
    /// The token endpoint refused or could not be reached; `cause` is the provider's text.
    #[error("OAuth refresh failed for {provider}: {cause}")]
    Failed {
        /// Provider id.
        provider: String,
        /// The provider-specific cause.
        cause: String,
    },
    /// `auth.json` could not be locked, read or written.
    #[error("Credential store modify failed for {provider}: {cause}")]
    Store {
        /// Provider id.
        provider: String,
        /// The I/O or parse error.
        cause: String,
    },
    /// A caller asked for a minimum lifetime (`print-bearer-token --min-expiry`) that even the
    /// refreshed token does not have.
    #[error("OAuth refresh returned a token that expires too soon for {0}")]
    TooSoon(String),
}

/// Whether `entry` (an `{"type":"oauth"}` object) has less than `min_validity_ms` left; an
/// entry without a numeric `expires` never needs a refresh (as upstream's comparison with
/// `undefined`).
pub fn needs_refresh(entry: &Map<String, Value>, min_validity_ms: i64) -> bool {
    entry
        .get("expires")
        .and_then(Value::as_f64)
        .is_some_and(|e| (pi_ai::now_ms() + min_validity_ms) as f64 >= e)
}

/// The lifetime a refresh is triggered below: five minutes, or more if asked.
pub fn threshold(min_validity_ms: Option<i64>) -> i64 {
    MIN_VALIDITY_MS.max(min_validity_ms.unwrap_or(0))
}

/// Refreshes `provider`'s entry of `<agent_dir>/auth.json` if it (still) needs it: takes the
/// file lock, re-reads the file, skips the refresh when the entry on disk is already fresh (or
/// gone: `Ok(None)`, logged out meanwhile), else calls the token endpoint while holding the
/// lock and writes the new entry (atomic rename, 0600). Returns the entry now stored.
/// Blocking (flock and HTTP): call it through [`super::http::blocking`].
pub fn refresh_stored(
    agent_dir: &Path,
    provider: &str,
    oauth: OAuthProvider,
    min_validity_ms: i64,
) -> Result<Option<Map<String, Value>>, RefreshError> {
    let mut outcome: Result<Option<Map<String, Value>>, RefreshError> = Ok(None);
    let written = crate::update_auth_file(agent_dir, |entries| {
        let Some(current) = entries
            .get(provider)
            .and_then(Value::as_object)
            .filter(|o| o.get("type").and_then(Value::as_str) == Some("oauth"))
            .cloned()
        else {
            return false;
        };
        if !needs_refresh(&current, min_validity_ms) {
            outcome = Ok(Some(current));
            return false;
        }
        match oauth.refresh(&current) {
            Ok(next) => {
                entries.insert(provider.to_string(), Value::Object(next.clone()));
                outcome = Ok(Some(next));
                true
            }
            Err(cause) => {
                outcome = Err(RefreshError::Failed {
                    provider: provider.to_string(),
                    cause,
                });
                false
            }
        }
    });
    if let Err(e) = written {
        return match outcome {
            Err(refresh) => Err(refresh),
            Ok(_) => Err(RefreshError::Store {
                provider: provider.to_string(),
                cause: e.to_string(),
            }),
        };
    }
    outcome
}
