//! `auth.json` credentials (spec config.md §5.1; upstream `core/auth-storage.ts`).
//!
//! ```json
//! {"anthropic": {"type": "api_key", "key": "sk-ant-..."},
//!  "openai-codex": {"type": "oauth", "refresh": "...", "access": "...", "expires": 1760000000000}}
//! ```
//! `api_key` entries are resolved like every config value ([`super::resolve_config_value`],
//! `!command` results cached), with the entry's `env` object consulted before the process
//! environment.
//! OAuth entries: their access token is used while it has more than five minutes left; before a
//! request, [`AuthStorage::oauth_access`] refreshes the entries of the providers upstream
//! refreshes (see [`super::oauth`]) and keeps the refreshed entry in memory too. Runtime keys
//! (`--api-key`) live only in memory and win over the file.

pub use super::oauth::refresh::RefreshError;
use super::value::resolve_config_value_with;
use super::{read_json_file, warn, JsonFile};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One `auth.json` entry.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthCredential {
    /// `{"type":"api_key","key":…}`; `key` is an unresolved config value.
    ApiKey {
        /// The configured value (literal, `$NAME` template or `!command`).
        key: String,
        /// The entry's `env` object: variables that take priority over the process environment
        /// when `key` is resolved (string values only).
        env: Option<Map<String, Value>>,
    },
    /// `{"type":"oauth","access","refresh","expires",…}`; provider-specific extras kept raw.
    OAuth {
        /// Access token.
        access: Option<String>,
        /// Refresh token (never used here).
        refresh: Option<String>,
        /// Expiry in ms since the epoch.
        expires: Option<i64>,
        /// The whole entry.
        raw: Map<String, Value>,
    },
    /// Any other shape, kept verbatim.
    Other(Value),
}

impl AuthCredential {
    fn from_value(v: &Value) -> Self {
        let Some(obj) = v.as_object() else {
            return AuthCredential::Other(v.clone());
        };
        let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
        match obj.get("type").and_then(Value::as_str) {
            Some("api_key") => match s("key") {
                Some(key) => AuthCredential::ApiKey {
                    key,
                    env: obj.get("env").and_then(Value::as_object).cloned(),
                },
                None => AuthCredential::Other(v.clone()),
            },
            Some("oauth") => AuthCredential::OAuth {
                access: s("access"),
                refresh: s("refresh"),
                expires: obj.get("expires").and_then(Value::as_i64),
                raw: obj.clone(),
            },
            _ => AuthCredential::Other(v.clone()),
        }
    }
}

/// The credential store: `auth.json` entries plus runtime keys. The entries sit behind a lock
/// so that a refresh can replace one through a shared reference.
#[derive(Debug, Default)]
pub struct AuthStorage {
    path: Option<PathBuf>,
    entries: parking_lot::RwLock<Map<String, Value>>,
    runtime: HashMap<String, String>,
}

impl Clone for AuthStorage {
    fn clone(&self) -> Self {
        AuthStorage {
            path: self.path.clone(),
            entries: parking_lot::RwLock::new(self.entries.read().clone()),
            runtime: self.runtime.clone(),
        }
    }
}

/// A usable OAuth access token and what goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthAccess {
    /// The access token (sent as the provider's API key).
    pub access: String,
    /// A base URL the credential implies (GitHub Copilot: from the token's `proxy-ep`).
    pub base_url: Option<String>,
}

impl AuthStorage {
    /// Reads `<agent_dir>/auth.json`. A missing file is empty; a broken one is warned about and
    /// treated as empty.
    pub fn load(agent_dir: &Path) -> Self {
        let path = agent_dir.join("auth.json");
        let entries = match read_json_file(&path) {
            JsonFile::Missing => Map::new(),
            JsonFile::Parsed(Value::Object(m)) => m,
            JsonFile::Parsed(_) => {
                warn(&format!(
                    "Ignoring {}: the top level is not a JSON object",
                    path.display()
                ));
                Map::new()
            }
            JsonFile::Invalid(e) => {
                warn(&format!("Could not read {}: {e}", path.display()));
                Map::new()
            }
        };
        AuthStorage {
            path: Some(path),
            entries: parking_lot::RwLock::new(entries),
            runtime: HashMap::new(),
        }
    }

    /// A store backed by the given entries only (no file).
    pub fn from_entries(entries: Map<String, Value>) -> Self {
        AuthStorage {
            path: None,
            entries: parking_lot::RwLock::new(entries),
            runtime: HashMap::new(),
        }
    }

    /// The file this store was read from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Sets a runtime key (`--api-key`) for `provider`; it wins over every other source.
    pub fn set_runtime_api_key(&mut self, provider: &str, key: impl Into<String>) {
        self.runtime.insert(provider.to_string(), key.into());
    }

    /// The runtime key of `provider`, if one was set.
    pub fn runtime_api_key(&self, provider: &str) -> Option<&str> {
        self.runtime.get(provider).map(String::as_str)
    }

    /// The `auth.json` entry of `provider`.
    pub fn get(&self, provider: &str) -> Option<AuthCredential> {
        self.entries
            .read()
            .get(provider)
            .map(AuthCredential::from_value)
    }

    /// Whether a runtime key or an `auth.json` entry exists for `provider` (no resolution, no
    /// refresh).
    pub fn has_entry(&self, provider: &str) -> bool {
        self.runtime.contains_key(provider)
            || matches!(
                self.get(provider),
                Some(AuthCredential::ApiKey { .. } | AuthCredential::OAuth { .. })
            )
    }

    /// The key from the runtime map or `auth.json` (spec §5.3 steps 1–3): the runtime key, else
    /// the resolved `api_key`, else an unexpired OAuth access token.
    pub fn stored_api_key(&self, provider: &str) -> Option<String> {
        if let Some(k) = self.runtime.get(provider) {
            return Some(k.clone());
        }
        match self.get(provider)? {
            AuthCredential::ApiKey { key, env } => {
                resolve_config_value_with(&key, env.as_ref()).filter(|k| !k.is_empty())
            }
            AuthCredential::OAuth {
                access, expires, ..
            } => {
                let fresh = match expires {
                    Some(e) => pi_ai::now_ms() < e,
                    None => true,
                };
                access.filter(|a| fresh && !a.is_empty())
            }
            AuthCredential::Other(_) => None,
        }
    }

    /// Whether `provider`'s credential is an OAuth entry.
    pub fn is_oauth(&self, provider: &str) -> bool {
        !self.runtime.contains_key(provider)
            && matches!(self.get(provider), Some(AuthCredential::OAuth { .. }))
    }

    /// The OAuth access token of `provider` for a request, refreshed first when it has less
    /// than five minutes (or `min_validity_ms`, if larger) left and upstream refreshes that
    /// provider (upstream `resolveStoredOAuth`). `Ok(None)`: no OAuth entry (or it vanished
    /// from `auth.json` meanwhile), or one this build cannot refresh that has expired.
    /// With `refresh` false nothing is refreshed and an expired token is returned as it is (to
    /// tell whether credentials are configured). Blocking when it refreshes (file lock, HTTP).
    ///
    /// # Errors
    /// [`RefreshError`] with upstream's text (`OAuth refresh failed for <provider>: …`).
    pub fn oauth_access(
        &self,
        provider: &str,
        min_validity_ms: Option<i64>,
        refresh: bool,
    ) -> Result<Option<OAuthAccess>, RefreshError> {
        use super::oauth::{self, refresh as r};
        if self.runtime.contains_key(provider) {
            return Ok(None);
        }
        let Some(Value::Object(entry)) = self.entries.read().get(provider).cloned() else {
            return Ok(None);
        };
        if entry.get("type").and_then(Value::as_str) != Some("oauth") {
            return Ok(None);
        }
        let threshold = r::threshold(min_validity_ms);
        let kind = oauth::OAuthProvider::for_id(provider);
        let entry = match (kind, &self.path) {
            (Some(kind), Some(path)) if refresh && r::needs_refresh(&entry, threshold) => {
                let agent_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                let id = provider.to_string();
                let result = oauth::http::blocking(move || {
                    r::refresh_stored(&agent_dir, &id, kind, threshold)
                })
                .map_err(|cause| RefreshError::Failed {
                    provider: provider.to_string(),
                    cause,
                })??;
                let Some(next) = result else {
                    self.entries.write().remove(provider);
                    return Ok(None);
                };
                self.entries
                    .write()
                    .insert(provider.to_string(), Value::Object(next.clone()));
                if min_validity_ms.is_some() && r::needs_refresh(&next, threshold) {
                    return Err(RefreshError::TooSoon(provider.to_string()));
                }
                next
            }
            // Not refreshable here: usable only while it has not expired.
            (None, _) if refresh && r::needs_refresh(&entry, min_validity_ms.unwrap_or(0)) => {
                return Ok(None)
            }
            _ => entry,
        };
        let Some(access) = entry
            .get("access")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        else {
            return Ok(None);
        };
        let base_url = (kind == Some(oauth::OAuthProvider::GitHubCopilot)).then(|| {
            let enterprise = entry
                .get("enterpriseUrl")
                .and_then(Value::as_str)
                .and_then(oauth::normalize_domain);
            oauth::copilot_base_url(access, enterprise.as_deref())
        });
        Ok(Some(OAuthAccess {
            access: access.to_string(),
            base_url,
        }))
    }
}

/// Why `auth.json` could not be updated.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    /// Reading, locking or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file exists but is not a JSON object.
    #[error("{0}: not a JSON object; fix or remove it first")]
    Invalid(PathBuf),
    /// Its lock (`auth.json.lock`, shared with upstream pi) could not be taken.
    #[error(transparent)]
    Lock(#[from] super::lock::LockError),
}

/// The entries of `<agent_dir>/auth.json` as they are on disk now (empty when missing).
pub fn read_auth_entries(agent_dir: &Path) -> Result<Map<String, Value>, AuthFileError> {
    let path = agent_dir.join("auth.json");
    match read_json_file(&path) {
        JsonFile::Missing => Ok(Map::new()),
        JsonFile::Parsed(Value::Object(m)) => Ok(m),
        _ => Err(AuthFileError::Invalid(path)),
    }
}

/// Read-modify-write of `<agent_dir>/auth.json` under its lock (the directory
/// `auth.json.lock`, as upstream pi takes it: [`super::lock::DirLock`]): the file is re-read under
/// the lock, `change` edits the entries and answers whether anything changed, and a change is
/// written whole (pretty JSON) to a temporary file with mode 0600, then renamed over
/// `auth.json`, so no reader ever sees half a file. Returns the file's path.
pub fn update_auth_file(
    agent_dir: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> bool,
) -> Result<PathBuf, AuthFileError> {
    update_locked_json(&agent_dir.join("auth.json"), change)
}

/// [`update_auth_file`] for any JSON-object file kept the way upstream keeps `auth.json`
/// (`FileAuthStorageBackend`): `<path>.lock` directory lock, re-read, atomic 0600 rewrite.
/// Upstream stores `models-store.json` (refreshed provider catalogs) this way too.
pub fn update_locked_json(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> bool,
) -> Result<PathBuf, AuthFileError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = path.to_path_buf();
    let agent_dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let _lock = super::lock::DirLock::acquire(&path, true, super::lock::LockTiming::AUTH_FILE)?;
    let mut entries = match read_json_file(&path) {
        JsonFile::Missing => Map::new(),
        JsonFile::Parsed(Value::Object(m)) => m,
        _ => return Err(AuthFileError::Invalid(path)),
    };
    if !change(&mut entries) {
        return Ok(path);
    }
    // A symlinked file is written through: the file it points to is replaced.
    let real = super::lock::resolve_symlinks(&path);
    let dir = real.parent().unwrap_or(&agent_dir).to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|source| AuthFileError::Io {
        path: dir.clone(),
        source,
    })?;
    let stem = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "auth.json".into());
    let tmp = dir.join(format!(".{stem}.{}.tmp", std::process::id()));
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| AuthFileError::Io { path: p, source }
    };
    let mut text = serde_json::to_string_pretty(&Value::Object(entries)).unwrap_or_default();
    text.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, &real).map_err(io(&real))?;
    Ok(path)
}
