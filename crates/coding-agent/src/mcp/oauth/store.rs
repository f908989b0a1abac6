//! The MCP token store (`<agent dir>/mcp-auth.json`): one entry per server URL.

use super::{OAuthError, OAuthState};

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// How long before its stated expiry an access token counts as expired (ms): it is refreshed
/// then, so that a request never carries a token that runs out on its way to the server.
pub const EXPIRY_MARGIN_MS: i64 = 10_000;

/// `mcp-auth.json` of an agent dir.
#[derive(Debug, Clone)]
pub struct AuthStore {
    path: PathBuf,
}

/// `String(new URL(url))`: the WHATWG serialisation (lower-case host, `/` for an empty path).
pub(super) fn normalise_url(url: &str) -> String {
    reqwest013::Url::parse(url)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| url.to_string())
}

impl AuthStore {
    /// The store of `agent_dir`.
    pub fn new(agent_dir: &Path) -> Self {
        AuthStore {
            path: agent_dir.join("mcp-auth.json"),
        }
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the refresh lock of server `name` at `url` is named after:
    /// `<agent dir>/mcp-auth-refresh-<first 16 hex digits of sha256(store key)>`.
    pub(super) fn refresh_lock_target(&self, name: &str, url: &str) -> PathBuf {
        use sha2::Digest;
        let (key, _) = Self::keys(name, url);
        let hash = sha2::Sha256::digest(key.as_bytes());
        let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        dir.join(format!("mcp-auth-refresh-{hex}"))
    }

    pub(super) fn keys(name: &str, url: &str) -> (String, String) {
        let legacy = normalise_url(url);
        (format!("mcp__{}|{legacy}", name.replace('-', "_")), legacy)
    }

    pub(super) fn read(&self) -> Result<Map<String, Value>, OAuthError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) if text.trim().is_empty() => Ok(Map::new()),
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Ok(Map::new()),
                Err(e) => Err(OAuthError::Store(format!(
                    "{} is not valid JSON: {e}",
                    self.path.display()
                ))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
            Err(e) => Err(OAuthError::Store(format!(
                "cannot read {}: {e}",
                self.path.display()
            ))),
        }
    }

    pub(super) fn write(&self, states: &Map<String, Value>) -> Result<(), OAuthError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let fail = |e: std::io::Error| {
            OAuthError::Store(format!("cannot write {}: {e}", self.path.display()))
        };
        // A symlinked mcp-auth.json is written through: the file it points to is replaced.
        let real = crate::config::lock::resolve_symlinks(&self.path);
        let dir = real.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(fail)?;
        let tmp = dir.join(format!(
            ".mcp-auth.json.{}.tmp",
            uuid::Uuid::new_v4().simple()
        ));
        let text = serde_json::to_string_pretty(states).unwrap_or_else(|_| "{}".into()) + "\n";
        let result = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &real)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(fail)
    }

    /// The file's lock (`mcp-auth.json.lock`, as upstream takes it), held around every
    /// read-modify-write so two processes never lose each other's changes. Blocking while
    /// another process holds it: run it off the async workers ([`AuthStore::locked`]).
    pub(super) fn lock(&self) -> Result<crate::config::lock::DirLock, OAuthError> {
        use crate::config::lock::{DirLock, LockTiming};
        DirLock::acquire(&self.path, true, LockTiming::AUTH_FILE)
            .map_err(|e| OAuthError::Store(e.to_string()))
    }

    /// Runs `f` under the file's lock on the blocking pool (the lock may be held by another
    /// process for a while; the async worker goes on meanwhile).
    async fn locked<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Self) -> Result<T, OAuthError> + Send + 'static,
    ) -> Result<T, OAuthError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let _lock = me.lock()?;
            f(&me)
        })
        .await
        .map_err(|e| OAuthError::Store(e.to_string()))?
    }

    /// The state of server `name` at `url`; a legacy URL-keyed entry is moved to the new key
    /// (under the lock, on the blocking pool).
    pub async fn load(&self, name: &str, url: &str) -> Result<Option<OAuthState>, OAuthError> {
        let (key, legacy) = Self::keys(name, url);
        let mut states = self.read()?;
        if !states.contains_key(&key) {
            if !states.contains_key(&legacy) {
                return Ok(None);
            }
            let key = key.clone();
            states = self
                .locked(move |me| {
                    let mut states = me.read()?;
                    if !states.contains_key(&key) {
                        if let Some(old) = states.remove(&legacy) {
                            states.insert(key, old);
                            me.write(&states)?;
                        }
                    }
                    Ok(states)
                })
                .await?;
        }
        Ok(states
            .get(&key)
            .and_then(|v| serde_json::from_value(v.clone()).ok()))
    }

    /// Replaces the state of server `name` at `url` (under the lock, on the blocking pool).
    pub async fn save(&self, name: &str, url: &str, state: &OAuthState) -> Result<(), OAuthError> {
        let (key, _) = Self::keys(name, url);
        let value = serde_json::to_value(state).map_err(|e| OAuthError::Store(e.to_string()))?;
        self.locked(move |me| {
            let mut states = me.read()?;
            states.insert(key, value);
            me.write(&states)
        })
        .await
    }

    /// Deletes the credentials of server `name` at `url`; whether there were any. Blocking
    /// (the lock): for `pi mcp logout`, which runs outside the async workers.
    pub fn remove(&self, name: &str, url: &str) -> Result<bool, OAuthError> {
        let (key, legacy) = Self::keys(name, url);
        let _lock = self.lock()?;
        let mut states = self.read()?;
        let removed = states.remove(&key).is_some() | states.remove(&legacy).is_some();
        if removed {
            self.write(&states)?;
        }
        Ok(removed)
    }
}
