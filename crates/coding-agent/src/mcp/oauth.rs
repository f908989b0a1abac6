//! OAuth for streamable-HTTP MCP servers (upstream 1.6 `docs/mcp.md` "Authenticate with OAuth";
//! facts from its `extensions/mcp/oauth.ts` and `@earendil-works/pi-mcp/oauth`).
//!
//! * Which servers: HTTP servers without an `Authorization` header ([`uses_oauth`]).
//! * Connections never start a browser flow: they send the stored access token as
//!   `Authorization: Bearer …`, refresh it (grant `refresh_token`) when it has expired or the
//!   server answered 401, and otherwise report "needs sign-in".
//! * Sign-in ([`sign_in`], run by `pi mcp login <server>` and `/mcp login <server>`): protected
//!   resource metadata (RFC 9728: the `resource_metadata` of the server's `WWW-Authenticate`
//!   challenge, else `/.well-known/oauth-protected-resource[/path]`), authorization server
//!   metadata (RFC 8414 / OpenID discovery, or `oauth.authServerMetadataUrl`) whose `issuer` must
//!   be the expected one, a client (`oauth.clientId`, a client registered before whose redirect
//!   URI still matches, or dynamic client registration, RFC 7591, as `pi` or
//!   `oauth.clientName`), then the authorization code flow with PKCE (S256), `state` and the
//!   `resource` parameter (RFC 8707) against a loopback callback
//!   `http://127.0.0.1:<port>/callback` (`oauth.callbackPort` / `oauth.callbackUrl`).
//! * Storage: `<agent dir>/mcp-auth.json`, mode 0600, an object keyed
//!   `mcp__<server, '-' as '_'>|<normalised server URL>` whose values hold `serverUrl`,
//!   `clientInformation`, `tokens` (`access_token`, `token_type`, `refresh_token`, …),
//!   `tokensExpireAt` (ms since the epoch) and `discovery` (upstream's field names). A legacy
//!   entry keyed by the URL alone is taken over on first load. Writes replace the whole file
//!   through a temp file and a rename, so a reader never sees half of it.
//!
//! Not built (yet): pi's Client ID Metadata Document (`clientRegistration: "cimd"`; `auto`
//! registers dynamically here) and the pasted-redirect-URL prompt (only the loopback callback
//! is served).

use super::config::{resolve_value, ServerConfig, Transport};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long `/mcp login` and `pi mcp login` wait for the browser step.
pub const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Requests to the authorization server give up after this.
const AS_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an OAuth step failed. `Display` is the text shown to the user.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    /// Discovery found no usable authorization server metadata.
    #[error("OAuth discovery failed: {0}")]
    Discovery(String),
    /// Client registration was refused or impossible.
    #[error("client registration failed: {0}")]
    Registration(String),
    /// The authorization server answered the token request with an error.
    #[error("token request failed: {0}")]
    Token(String),
    /// The browser step failed (error redirect, bad state, no callback in time).
    #[error("{0}")]
    Authorization(String),
    /// The credential file could not be read or written.
    #[error("{0}")]
    Store(String),
    /// No refresh token, or nothing stored: the user must sign in.
    #[error("sign-in required")]
    SignInRequired,
    /// Another process held the server's refresh lock for the whole wait (upstream
    /// `McpRefreshLockBusyError`); the stored tokens are left as they are.
    #[error("Another process is refreshing the MCP server's tokens")]
    RefreshBusy,
}

/// Whether `cfg` authenticates with OAuth: an HTTP server whose headers have no
/// `Authorization` (upstream `usesOAuth`).
pub fn uses_oauth(cfg: &ServerConfig) -> bool {
    match &cfg.transport {
        Transport::Http { headers, .. } => !headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("authorization")),
        Transport::Stdio { .. } => false,
    }
}

/// The server URL when `cfg` uses OAuth.
pub fn oauth_url(cfg: &ServerConfig) -> Option<&str> {
    match &cfg.transport {
        Transport::Http { url, .. } if uses_oauth(cfg) => Some(url),
        _ => None,
    }
}

/// The `oauth` object of a server entry, resolved.
#[derive(Debug, Clone, Default)]
pub struct OAuthSettings {
    /// `clientId`: a registered client instead of dynamic registration.
    pub client_id: Option<String>,
    /// `clientSecret` (`${VAR}` / `!command` resolved).
    pub client_secret: Option<String>,
    /// `callbackPort`.
    pub callback_port: Option<u16>,
    /// `callbackUrl` (HTTP on a loopback host).
    pub callback_url: Option<String>,
    /// `scope`: space-separated.
    pub scope: Option<String>,
    /// `clientName` sent when registering (default `pi`).
    pub client_name: Option<String>,
    /// `authServerMetadataUrl`: skips discovery.
    pub auth_server_metadata_url: Option<String>,
}

impl OAuthSettings {
    /// From the raw `oauth` object (absent: defaults).
    pub fn from_config(cfg: &ServerConfig) -> Self {
        let Some(o) = cfg.oauth.as_ref().and_then(Value::as_object) else {
            return OAuthSettings::default();
        };
        let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
        OAuthSettings {
            client_id: s("clientId"),
            client_secret: s("clientSecret").and_then(|v| resolve_value(&v)),
            callback_port: o
                .get("callbackPort")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok()),
            callback_url: s("callbackUrl"),
            scope: s("scope"),
            client_name: s("clientName"),
            auth_server_metadata_url: s("authServerMetadataUrl"),
        }
    }
}

/// Tokens as the token endpoint sent them (RFC 6749 §5.1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tokens {
    /// The bearer token.
    pub access_token: String,
    /// Normally `Bearer`.
    #[serde(default)]
    pub token_type: String,
    /// Seconds the access token lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<u64>,
    /// Granted scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// For the `refresh_token` grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// OpenID Connect ID token, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
}

/// One server's entry in `mcp-auth.json` (upstream `McpOAuthState`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthState {
    /// The server URL the state belongs to.
    #[serde(default)]
    pub server_url: String,
    /// The client: `client_id`, `client_secret`, `redirect_uris`, … as registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_information: Option<Value>,
    /// The current tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// When the access token expires, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_expire_at: Option<i64>,
    /// `authorizationServerUrl`, `authorizationServerMetadata`, `resourceMetadata`,
    /// `resourceMetadataUrl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Value>,
    /// Fields of other versions, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl OAuthState {
    /// Whether the access token has expired (or will within 10 s).
    pub fn expired(&self) -> bool {
        self.tokens_expire_at
            .is_some_and(|t| t <= chrono::Utc::now().timestamp_millis() + EXPIRY_MARGIN_MS)
    }
}

/// How long before its stated expiry an access token counts as expired (ms): it is refreshed
/// then, so that a request never carries a token that runs out on its way to the server.
pub const EXPIRY_MARGIN_MS: i64 = 10_000;

/// `mcp-auth.json` of an agent dir.
#[derive(Debug, Clone)]
pub struct AuthStore {
    path: PathBuf,
}

/// `String(new URL(url))`: the WHATWG serialisation (lower-case host, `/` for an empty path).
fn normalise_url(url: &str) -> String {
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
    fn refresh_lock_target(&self, name: &str, url: &str) -> PathBuf {
        use sha2::Digest;
        let (key, _) = Self::keys(name, url);
        let hash = sha2::Sha256::digest(key.as_bytes());
        let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        dir.join(format!("mcp-auth-refresh-{hex}"))
    }

    fn keys(name: &str, url: &str) -> (String, String) {
        let legacy = normalise_url(url);
        (format!("mcp__{}|{legacy}", name.replace('-', "_")), legacy)
    }

    fn read(&self) -> Result<Map<String, Value>, OAuthError> {
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

    fn write(&self, states: &Map<String, Value>) -> Result<(), OAuthError> {
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
    /// another process holds it.
    fn lock(&self) -> Result<crate::config::lock::DirLock, OAuthError> {
        use crate::config::lock::{DirLock, LockTiming};
        crate::tasks::block_in_place(|| DirLock::acquire(&self.path, true, LockTiming::AUTH_FILE))
            .map_err(|e| OAuthError::Store(e.to_string()))
    }

    /// The state of server `name` at `url`; a legacy URL-keyed entry is moved to the new key.
    pub fn load(&self, name: &str, url: &str) -> Result<Option<OAuthState>, OAuthError> {
        let (key, legacy) = Self::keys(name, url);
        let mut states = self.read()?;
        if !states.contains_key(&key) {
            if !states.contains_key(&legacy) {
                return Ok(None);
            }
            let _lock = self.lock()?;
            states = self.read()?;
            if !states.contains_key(&key) {
                let Some(old) = states.remove(&legacy) else {
                    return Ok(None);
                };
                states.insert(key.clone(), old);
                self.write(&states)?;
            }
        }
        Ok(states
            .get(&key)
            .and_then(|v| serde_json::from_value(v.clone()).ok()))
    }

    /// Replaces the state of server `name` at `url`.
    pub fn save(&self, name: &str, url: &str, state: &OAuthState) -> Result<(), OAuthError> {
        let (key, _) = Self::keys(name, url);
        let _lock = self.lock()?;
        let mut states = self.read()?;
        states.insert(
            key,
            serde_json::to_value(state).map_err(|e| OAuthError::Store(e.to_string()))?,
        );
        self.write(&states)
    }

    /// Deletes the credentials of server `name` at `url`; whether there were any.
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

fn client() -> Result<reqwest013::Client, OAuthError> {
    super::client::http_client().map_err(OAuthError::Discovery)
}

async fn get_json(http: &reqwest013::Client, url: &str) -> Result<Option<Value>, String> {
    let resp = tokio::time::timeout(
        AS_TIMEOUT,
        http.get(url).header("accept", "application/json").send(),
    )
    .await
    .map_err(|_| format!("{url}: timed out"))?
    .map_err(|e| format!("{url}: {e}"))?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    let bytes = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    Ok(serde_json::from_slice(&bytes).ok())
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

async fn post(
    http: &reqwest013::Client,
    url: &str,
    content_type: &str,
    body: String,
    basic: Option<(&str, &str)>,
) -> Result<(u16, Value), String> {
    let mut req = http
        .post(url)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(body);
    if let Some((id, secret)) = basic {
        use base64::Engine;
        let creds = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_encode(id),
            form_encode(secret)
        ));
        req = req.header("authorization", format!("Basic {creds}"));
    }
    let resp = tokio::time::timeout(AS_TIMEOUT, req.send())
        .await
        .map_err(|_| format!("{url}: timed out"))?
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, v))
}

/// The `resource_metadata` and `scope` parameters of a `WWW-Authenticate: Bearer …` challenge.
pub fn parse_challenge(header: &str) -> (Option<String>, Option<String>) {
    let param = |name: &str| {
        let lower = header.to_ascii_lowercase();
        let mut from = 0;
        while let Some(i) = lower[from..].find(name) {
            let at = from + i;
            let before_ok = at == 0 || matches!(lower.as_bytes()[at - 1], b' ' | b',' | b'\t');
            let rest = &header[at + name.len()..];
            if before_ok && rest.starts_with('=') {
                let v = &rest[1..];
                return Some(if let Some(q) = v.strip_prefix('"') {
                    q.split('"').next().unwrap_or("").to_string()
                } else {
                    v.split([',', ' ']).next().unwrap_or("").to_string()
                });
            }
            from = at + name.len();
        }
        None
    };
    (param("resource_metadata"), param("scope"))
}

/// The discovered authorization server.
#[derive(Debug, Clone)]
struct Discovery {
    as_url: String,
    metadata: Value,
    resource_metadata: Option<Value>,
    resource_metadata_url: Option<String>,
}

impl Discovery {
    fn endpoint(&self, key: &str) -> Result<String, OAuthError> {
        self.metadata
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                OAuthError::Discovery(format!("authorization server metadata has no {key}"))
            })
    }

    fn to_value(&self) -> Value {
        let mut v = json!({
            "authorizationServerUrl": self.as_url,
            "authorizationServerMetadata": self.metadata,
        });
        if let Some(r) = &self.resource_metadata {
            v["resourceMetadata"] = r.clone();
        }
        if let Some(u) = &self.resource_metadata_url {
            v["resourceMetadataUrl"] = json!(u);
        }
        v
    }

    fn from_value(v: &Value) -> Option<Discovery> {
        Some(Discovery {
            as_url: v.get("authorizationServerUrl")?.as_str()?.to_string(),
            metadata: v.get("authorizationServerMetadata")?.clone(),
            resource_metadata: v.get("resourceMetadata").cloned(),
            resource_metadata_url: v
                .get("resourceMetadataUrl")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

fn with_path(origin: &reqwest013::Url, prefix: &str, path: &str) -> String {
    let path = path.trim_end_matches('/');
    let mut u = origin.clone();
    u.set_path(&format!("{prefix}{path}"));
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

async fn discover(
    http: &reqwest013::Client,
    server_url: &str,
    settings: &OAuthSettings,
    challenge_metadata: Option<&str>,
) -> Result<Discovery, OAuthError> {
    let server = reqwest013::Url::parse(server_url)
        .map_err(|e| OAuthError::Discovery(format!("{server_url}: {e}")))?;
    if let Some(url) = &settings.auth_server_metadata_url {
        let md = get_json(http, url)
            .await
            .map_err(OAuthError::Discovery)?
            .ok_or_else(|| OAuthError::Discovery(format!("no metadata at {url}")))?;
        let issuer = md
            .get("issuer")
            .and_then(Value::as_str)
            .unwrap_or(url)
            .to_string();
        return Ok(Discovery {
            as_url: issuer,
            metadata: md,
            resource_metadata: None,
            resource_metadata_url: None,
        });
    }
    // Protected resource metadata (RFC 9728).
    let mut candidates = Vec::new();
    if let Some(u) = challenge_metadata {
        candidates.push(u.to_string());
    }
    candidates.push(with_path(
        &server,
        "/.well-known/oauth-protected-resource",
        server.path(),
    ));
    candidates.push(with_path(
        &server,
        "/.well-known/oauth-protected-resource",
        "",
    ));
    let mut resource = None;
    for url in candidates {
        if let Ok(Some(md)) = get_json(http, &url).await {
            resource = Some((url, md));
            break;
        }
    }
    let as_url = resource
        .as_ref()
        .and_then(|(_, md)| md.get("authorization_servers"))
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| with_path(&server, "", ""));
    let issuer = reqwest013::Url::parse(&as_url)
        .map_err(|e| OAuthError::Discovery(format!("{as_url}: {e}")))?;
    let ipath = issuer.path().trim_end_matches('/').to_string();
    let mut urls = vec![
        with_path(&issuer, "/.well-known/oauth-authorization-server", &ipath),
        with_path(&issuer, "/.well-known/openid-configuration", &ipath),
    ];
    if !ipath.is_empty() {
        urls.push(with_path(
            &issuer,
            &format!("{ipath}/.well-known/openid-configuration"),
            "",
        ));
    }
    for url in urls {
        if let Ok(Some(md)) = get_json(http, &url).await {
            let got = md.get("issuer").and_then(Value::as_str).unwrap_or("");
            if !same_issuer(got, &as_url) {
                return Err(OAuthError::Discovery(format!(
                    "authorization server metadata at {url} names issuer \"{got}\", expected \"{as_url}\""
                )));
            }
            return Ok(Discovery {
                as_url,
                metadata: md,
                resource_metadata: resource.as_ref().map(|(_, m)| m.clone()),
                resource_metadata_url: resource.map(|(u, _)| u),
            });
        }
    }
    Err(OAuthError::Discovery(format!(
        "no authorization server metadata found for {as_url}"
    )))
}

/// How a token request authenticates the client: HTTP Basic `(id, secret)`, and form fields.
type ClientAuth<'a> = (Option<(&'a str, &'a str)>, Vec<(&'static str, &'a str)>);

fn client_auth<'a>(client: &'a Value, method_hint: Option<&str>) -> ClientAuth<'a> {
    let id = client
        .get("client_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let secret = client.get("client_secret").and_then(Value::as_str);
    let method = client
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .or(method_hint);
    match (secret, method) {
        (Some(s), Some("client_secret_basic")) => (Some((id, s)), vec![]),
        (Some(s), _) => (None, vec![("client_id", id), ("client_secret", s)]),
        (None, _) => (None, vec![("client_id", id)]),
    }
}

async fn token_request(
    http: &reqwest013::Client,
    discovery: &Discovery,
    client: &Value,
    mut params: Vec<(&str, &str)>,
) -> Result<Tokens, OAuthError> {
    let endpoint = discovery.endpoint("token_endpoint")?;
    let (basic, extra) = client_auth(client, None);
    params.extend(extra);
    let (status, body) = post(
        http,
        &endpoint,
        "application/x-www-form-urlencoded",
        form(&params),
        basic,
    )
    .await
    .map_err(OAuthError::Token)?;
    if !(200..300).contains(&status) {
        let what = body
            .get("error_description")
            .or_else(|| body.get("error"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string());
        return Err(OAuthError::Token(format!("HTTP {status}: {what}")));
    }
    serde_json::from_value(body)
        .map_err(|e| OAuthError::Token(format!("invalid token response: {e}")))
}

fn store_tokens(state: &mut OAuthState, tokens: Tokens, scope: Option<&str>) {
    let mut tokens = tokens;
    if tokens.scope.is_none() {
        tokens.scope = scope.map(str::to_string);
    }
    state.tokens_expire_at = tokens
        .expires_in
        .map(|s| chrono::Utc::now().timestamp_millis() + (s as i64) * 1000);
    state.tokens = Some(tokens);
}

/// Uses the stored refresh token of server `name` at `url` (grant `refresh_token`) and saves the
/// new tokens; `SignInRequired` when there is none or the authorization server refused it.
///
/// Processes sharing the agent directory refresh one server one at a time: the refresh runs
/// under the lock `<agent dir>/mcp-auth-refresh-<16 hex of sha256(key)>.lock` (as upstream's,
/// so upstream processes take part: [`crate::config::lock`]), and a process that waited for it
/// re-reads the store and uses the tokens the other one got instead of spending the
/// (possibly rotated, single-use) refresh token again. `stale` is the access token the caller
/// found expired or refused (`None`: the one stored now). `RefreshBusy` when the lock stayed
/// held for 25 s.
pub async fn refresh(
    store: &AuthStore,
    name: &str,
    url: &str,
    stale: Option<&str>,
) -> Result<OAuthState, OAuthError> {
    let seen = match stale {
        Some(t) => Some(t.to_string()),
        None => store
            .load(name, url)?
            .and_then(|s| s.tokens.map(|t| t.access_token)),
    };
    let target = store.refresh_lock_target(name, url);
    let _lock = tokio::task::spawn_blocking(move || {
        use crate::config::lock::{DirLock, LockError, LockTiming};
        DirLock::acquire(&target, false, LockTiming::MCP_REFRESH).map_err(|e| match e {
            LockError::Busy(_) => OAuthError::RefreshBusy,
            e => OAuthError::Store(e.to_string()),
        })
    })
    .await
    .map_err(|e| OAuthError::Store(e.to_string()))??;
    let mut state = store.load(name, url)?.ok_or(OAuthError::SignInRequired)?;
    let now = state.tokens.as_ref().map(|t| t.access_token.clone());
    if now != seen && now.is_some() {
        // Refreshed (or signed in again) by another process while this one waited.
        return Ok(state);
    }
    let refresh_token = state
        .tokens
        .as_ref()
        .and_then(|t| t.refresh_token.clone())
        .ok_or(OAuthError::SignInRequired)?;
    let discovery = state
        .discovery
        .as_ref()
        .and_then(Discovery::from_value)
        .ok_or(OAuthError::SignInRequired)?;
    let client_info = state
        .client_information
        .clone()
        .ok_or(OAuthError::SignInRequired)?;
    let http = client()?;
    let resource = normalise_url(url);
    let tokens = token_request(
        &http,
        &discovery,
        &client_info,
        vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh_token),
            ("resource", &resource),
        ],
    )
    .await
    .map_err(|_| OAuthError::SignInRequired)?;
    let old_scope = state.tokens.as_ref().and_then(|t| t.scope.clone());
    let mut tokens = tokens;
    if tokens.refresh_token.is_none() {
        tokens.refresh_token = Some(refresh_token);
    }
    store_tokens(&mut state, tokens, old_scope.as_deref());
    store.save(name, url, &state)?;
    Ok(state)
}

/// The access token to send for server `name` at `url`: the stored one, refreshed first when it
/// has expired. `None`: nothing stored (or the refresh failed): connect without one.
pub async fn access_token(store: &AuthStore, name: &str, url: &str) -> Option<String> {
    let state = store.load(name, url).ok().flatten()?;
    let state = if state.expired() {
        let stale = state.tokens.as_ref().map(|t| t.access_token.clone());
        refresh(store, name, url, stale.as_deref()).await.ok()?
    } else {
        state
    };
    state.tokens.map(|t| t.access_token)
}

/// How the browser step reaches the user: the authorization URL to open.
pub type ShowUrl = Box<dyn Fn(&str) + Send + Sync>;

struct Callback {
    listener: tokio::net::TcpListener,
    redirect: String,
    path: String,
}

async fn listen(settings: &OAuthSettings) -> Result<Callback, OAuthError> {
    let fail = |e: String| {
        OAuthError::Authorization(format!("cannot listen for the sign-in callback: {e}"))
    };
    let (host, port, path) = match &settings.callback_url {
        Some(u) => {
            let url = reqwest013::Url::parse(u).map_err(|e| fail(e.to_string()))?;
            let host = url.host_str().unwrap_or("127.0.0.1").to_string();
            if url.scheme() != "http"
                || !matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
            {
                return Err(OAuthError::Authorization(
                    "oauth.callbackUrl must use http on localhost, 127.0.0.1 or [::1]".into(),
                ));
            }
            (
                host,
                url.port().or(settings.callback_port),
                url.path().to_string(),
            )
        }
        None => (
            "127.0.0.1".to_string(),
            settings.callback_port,
            "/callback".to_string(),
        ),
    };
    let bind_host = if host == "localhost" {
        "127.0.0.1".to_string()
    } else {
        host.trim_matches(['[', ']']).to_string()
    };
    let listener = tokio::net::TcpListener::bind((bind_host.as_str(), port.unwrap_or(0)))
        .await
        .map_err(|e| fail(e.to_string()))?;
    let bound = listener
        .local_addr()
        .map_err(|e| fail(e.to_string()))?
        .port();
    let redirect = match &settings.callback_url {
        Some(u)
            if port.is_some()
                && reqwest013::Url::parse(u)
                    .ok()
                    .and_then(|x| x.port())
                    .is_some() =>
        {
            u.clone()
        }
        Some(u) => {
            let mut url = reqwest013::Url::parse(u).map_err(|e| fail(e.to_string()))?;
            let _ = url.set_port(Some(bound));
            url.to_string()
        }
        None => format!("http://127.0.0.1:{bound}/callback"),
    };
    Ok(Callback {
        listener,
        redirect,
        path,
    })
}

const PAGE_OK: &str = "<!doctype html><meta charset=utf-8><title>pi</title><p>Signed in to the MCP server. This page can be closed.</p>";

fn page_error(msg: &str) -> String {
    let esc = msg
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!("<!doctype html><meta charset=utf-8><title>pi</title><p>Sign-in failed: {esc}</p>")
}

/// Serves the loopback callback until a request to its path carries our `state`: the query
/// parameters of that request.
async fn wait_for_callback(
    cb: &Callback,
    state: &str,
    limit: Duration,
) -> Result<Vec<(String, String)>, OAuthError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let (mut sock, _) = tokio::time::timeout_at(deadline, cb.listener.accept())
            .await
            .map_err(|_| OAuthError::Authorization("no sign-in callback arrived in time".into()))?
            .map_err(|e| OAuthError::Authorization(e.to_string()))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 2048];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16384 {
            match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let url = reqwest013::Url::parse(&format!("http://127.0.0.1{target}")).ok();
        let respond = |status: &str, body: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        };
        let Some(url) = url.filter(|u| u.path() == cb.path) else {
            let _ = sock
                .write_all(respond("404 Not Found", "").as_bytes())
                .await;
            continue;
        };
        let params: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if get("state").as_deref() != Some(state) {
            let _ = sock
                .write_all(respond("400 Bad Request", &page_error("unexpected state")).as_bytes())
                .await;
            continue;
        }
        if let Some(err) = get("error") {
            let what = get("error_description").unwrap_or(err);
            let _ = sock
                .write_all(respond("200 OK", &page_error(&what)).as_bytes())
                .await;
            return Err(OAuthError::Authorization(format!(
                "authorization denied: {what}"
            )));
        }
        let _ = sock.write_all(respond("200 OK", PAGE_OK).as_bytes()).await;
        let _ = sock.shutdown().await;
        return Ok(params);
    }
}

fn pkce() -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// What a sign-in needs besides the store.
pub struct SignIn<'a> {
    /// Server name (the store key).
    pub name: &'a str,
    /// Server URL.
    pub url: &'a str,
    /// Its `oauth` settings.
    pub settings: OAuthSettings,
    /// The server's last `WWW-Authenticate` challenge, if any.
    pub challenge: Option<String>,
    /// Shows the authorization URL to the user (and may open a browser).
    pub show_url: ShowUrl,
    /// How long to wait for the browser step.
    pub wait: Duration,
}

/// Signs in to the server (see the module docs) and saves the tokens. When a stored refresh
/// token still works, no browser step is needed.
pub async fn sign_in(store: &AuthStore, s: SignIn<'_>) -> Result<(), OAuthError> {
    if refresh(store, s.name, s.url, None).await.is_ok() {
        return Ok(());
    }
    let http = client()?;
    let (challenge_md, challenge_scope) = s
        .challenge
        .as_deref()
        .map(parse_challenge)
        .unwrap_or((None, None));
    let discovery = discover(&http, s.url, &s.settings, challenge_md.as_deref()).await?;
    let cb = listen(&s.settings).await?;
    let mut state = store.load(s.name, s.url)?.unwrap_or_default();
    state.server_url = s.url.to_string();
    // The client: configured, registered before with this redirect URI, or registered now.
    let client_info = if let Some(id) = &s.settings.client_id {
        let mut c = json!({"client_id": id, "redirect_uris": [cb.redirect]});
        if let Some(secret) = &s.settings.client_secret {
            c["client_secret"] = json!(secret);
        }
        c
    } else if let Some(c) = state.client_information.clone().filter(|c| {
        c.get("redirect_uris")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|u| u.as_str() == Some(cb.redirect.as_str())))
    }) {
        c
    } else {
        let endpoint = discovery.endpoint("registration_endpoint").map_err(|_| {
            OAuthError::Registration(
                "the authorization server offers no dynamic client registration; set oauth.clientId".into(),
            )
        })?;
        let body = json!({
            "redirect_uris": [cb.redirect],
            "client_name": s.settings.client_name.as_deref().unwrap_or("pi"),
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        let (status, reg) = post(&http, &endpoint, "application/json", body.to_string(), None)
            .await
            .map_err(OAuthError::Registration)?;
        if !(200..300).contains(&status) || reg.get("client_id").is_none() {
            return Err(OAuthError::Registration(format!("HTTP {status}: {reg}")));
        }
        reg
    };
    state.client_information = Some(client_info.clone());
    state.discovery = Some(discovery.to_value());
    // Scope: configured (plus what the challenge asked), else the challenge's, else advertised.
    let advertised = discovery
        .resource_metadata
        .as_ref()
        .and_then(|m| m.get("scopes_supported"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|s| !s.is_empty());
    let scope = match (&s.settings.scope, &challenge_scope) {
        (Some(c), Some(extra)) => Some(format!("{c} {extra}")),
        (Some(c), None) => Some(c.clone()),
        (None, Some(extra)) => Some(extra.clone()),
        (None, None) => advertised,
    };
    let (verifier, challenge) = pkce();
    let oauth_state = uuid::Uuid::new_v4().simple().to_string();
    let resource = normalise_url(s.url);
    let client_id = client_info
        .get("client_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut auth_url = reqwest013::Url::parse(&discovery.endpoint("authorization_endpoint")?)
        .map_err(|e| OAuthError::Discovery(format!("authorization_endpoint: {e}")))?;
    {
        let mut q = auth_url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", &cb.redirect)
            .append_pair("state", &oauth_state)
            .append_pair("resource", &resource);
        if let Some(sc) = &scope {
            q.append_pair("scope", sc);
        }
    }
    (s.show_url)(auth_url.as_str());
    let params = wait_for_callback(&cb, &oauth_state, s.wait).await?;
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    // RFC 9207: an `iss` must name our authorization server.
    if let Some(iss) = get("iss") {
        if !same_issuer(&iss, &discovery.as_url) {
            return Err(OAuthError::Authorization(format!(
                "the authorization response came from issuer \"{iss}\", expected \"{}\"",
                discovery.as_url
            )));
        }
    }
    let code = get("code")
        .ok_or_else(|| OAuthError::Authorization("the callback carried no code".into()))?;
    let tokens = token_request(
        &http,
        &discovery,
        &client_info,
        vec![
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &cb.redirect),
            ("code_verifier", &verifier),
            ("resource", &resource),
        ],
    )
    .await?;
    store_tokens(&mut state, tokens, scope.as_deref());
    store.save(s.name, s.url, &state)
}
