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
use serde_json::{Map, Value};
use std::time::Duration;

mod endpoints;
mod sign_in;
mod store;

pub use endpoints::parse_challenge;
use endpoints::{client, discover, post, same_issuer, store_tokens, token_request, Discovery};
pub use sign_in::{sign_in, ShowUrl, SignIn};
use store::normalise_url;
pub use store::{AuthStore, EXPIRY_MARGIN_MS};

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
            .load(name, url)
            .await?
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
    let mut state = store
        .load(name, url)
        .await?
        .ok_or(OAuthError::SignInRequired)?;
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
    store.save(name, url, &state).await?;
    Ok(state)
}

/// The access token to send for server `name` at `url`: the stored one, refreshed first when it
/// has expired. `None`: nothing stored (or the refresh failed): connect without one.
pub async fn access_token(store: &AuthStore, name: &str, url: &str) -> Option<String> {
    let state = store.load(name, url).await.ok().flatten()?;
    let state = if state.expired() {
        let stale = state.tokens.as_ref().map(|t| t.access_token.clone());
        refresh(store, name, url, stale.as_deref()).await.ok()?
    } else {
        state
    };
    state.tokens.map(|t| t.access_token)
}
