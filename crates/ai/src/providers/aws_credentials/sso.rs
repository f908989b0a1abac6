//! SSO credentials: the portal's `GetRoleCredentials` with the token cached by `aws sso
//! login`, refreshed through SSO OIDC `CreateToken` when it nears its expiry (throttled per
//! session).

use super::profiles::{non_empty, Section};
use super::wire::percent;
use super::wire::{iso8601_millis, parse_iso8601};
use super::SERVICE_TIMEOUT;
use super::{with_cache, Ctx, Timed};
use crate::providers::bedrock_converse_stream::AwsKeys;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An `sso-session` token is refreshed once it is this close to `expiresAt` (the SDK's
/// `EXPIRE_WINDOW_MS`).
pub(super) const SSO_REFRESH_WINDOW: Duration = Duration::from_secs(300);
/// At most one refresh attempt per SSO session in this long (the SDK's throttle).
pub(super) const SSO_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// When a refresh of each SSO session was last tried.
pub(super) fn refresh_attempts() -> &'static Mutex<HashMap<String, std::time::Instant>> {
    static LAST: OnceLock<Mutex<HashMap<String, std::time::Instant>>> = OnceLock::new();
    LAST.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether a refresh of SSO session `id` was tried less than [`SSO_REFRESH_INTERVAL`] ago.
pub(super) fn refresh_throttled(id: &str) -> bool {
    refresh_attempts().lock().is_ok_and(|last| {
        last.get(id)
            .is_some_and(|t| t.elapsed() < SSO_REFRESH_INTERVAL)
    })
}

pub(super) fn record_refresh_attempt(id: &str) {
    if let Ok(mut last) = refresh_attempts().lock() {
        last.insert(id.to_owned(), std::time::Instant::now());
    }
}

/// The SSO token cache entry to read for a profile.
pub(super) struct SsoToken<'a> {
    /// The profile's name (for the `aws sso login` hint).
    profile: &'a str,
    /// The `sso-session` name, or the legacy profile's start URL.
    id: &'a str,
    /// `sso_region`, where SSO OIDC is called.
    region: &'a str,
    /// `sso-session` tokens are refreshed; legacy ones are not.
    refreshable: bool,
}

/// A token from SSO OIDC `CreateToken`.
pub(super) struct FreshToken {
    access: String,
    expires: SystemTime,
    refresh: Option<String>,
}

pub(super) fn login_hint(profile: &str) -> String {
    format!("To refresh it, run `aws sso login --profile {profile}`.")
}

impl<'a> Ctx<'a> {
    pub(super) async fn sso(&self, name: &str, data: &Section) -> Result<Timed, String> {
        let (start_url, region, token_id, session) = match non_empty(data, "sso_session") {
            Some(session) => {
                let title = format!("sso-session {session}");
                let s = self
                    .profiles
                    .get(&title)
                    .ok_or_else(|| format!("the [{title}] section was not found"))?;
                let start = non_empty(s, "sso_start_url")
                    .ok_or_else(|| format!("[{title}] has no sso_start_url"))?;
                let region = non_empty(s, "sso_region")
                    .ok_or_else(|| format!("[{title}] has no sso_region"))?;
                (
                    start.to_owned(),
                    region.to_owned(),
                    session.to_owned(),
                    true,
                )
            }
            None => {
                let start = non_empty(data, "sso_start_url");
                let region = non_empty(data, "sso_region");
                match (start, region) {
                    (Some(s), Some(r)) => (s.to_owned(), r.to_owned(), s.to_owned(), false),
                    _ => {
                        return Err(
                            "SSO needs sso_session, or sso_start_url and sso_region".to_owned()
                        )
                    }
                }
            }
        };
        let (Some(account), Some(role)) = (
            non_empty(data, "sso_account_id"),
            non_empty(data, "sso_role_name"),
        ) else {
            return Err("SSO needs sso_account_id and sso_role_name".to_owned());
        };
        let key = format!("sso\0{start_url}\0{account}\0{role}");
        with_cache(key, async {
            let token = SsoToken {
                profile: name,
                id: &token_id,
                region: &region,
                refreshable: session,
            };
            let access = self.sso_access_token(&token).await?;
            self.role_credentials(name, &region, account, role, &access)
                .await
        })
        .await
    }

    /// The SSO portal's `GetRoleCredentials` for `account`/`role` with the bearer `access`.
    async fn role_credentials(
        &self,
        name: &str,
        region: &str,
        account: &str,
        role: &str,
        access: &str,
    ) -> Result<Timed, String> {
        let endpoint = self
            .endpoint("AWS_ENDPOINT_URL_SSO")
            .unwrap_or_else(|| format!("https://portal.sso.{region}.amazonaws.com"));
        let url = format!(
            "{endpoint}/federation/credentials?account_id={}&role_name={}",
            percent(account),
            percent(role)
        );
        let response = self
            .http
            .get(&url)
            .header("x-amz-sso_bearer_token", access)
            .timeout(SERVICE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("cannot reach the SSO portal {endpoint}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let message = v
                .get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .unwrap_or(&text);
            let hint = if status.as_u16() == 401 {
                format!(" {}", login_hint(name))
            } else {
                String::new()
            };
            return Err(format!(
                "SSO GetRoleCredentials failed: HTTP {}: {message}{hint}",
                status.as_u16()
            ));
        }
        let rc = v
            .get("roleCredentials")
            .ok_or_else(|| "SSO returned no roleCredentials".to_owned())?;
        let get = |k: &str| {
            rc.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| format!("SSO returned invalid temporary credentials (no {k})"))
        };
        Ok(Timed {
            keys: AwsKeys {
                access_key_id: get("accessKeyId")?,
                secret_access_key: get("secretAccessKey")?,
                session_token: Some(get("sessionToken")?),
            },
            expires: rc
                .get("expiration")
                .and_then(Value::as_u64)
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        })
    }

    /// The access token of the SSO token cache file `aws sso login` wrote for `token.id`.
    ///
    /// A legacy profile's token (`refreshable` false) is used until it expires. An
    /// `sso-session` token within [`SSO_REFRESH_WINDOW`] of `expiresAt` is refreshed through
    /// SSO OIDC `CreateToken` with its `clientId`, `clientSecret` and `refreshToken`, and the
    /// new token is written back to the file; when that fails the old token is used while it
    /// lasts (the SDK's `fromSso`). A refresh is tried at most once per
    /// [`SSO_REFRESH_INTERVAL`] per session; a client registration past its
    /// `registrationExpiresAt` is not tried (the SDK sends it and is refused).
    async fn sso_access_token(&self, token: &SsoToken<'_>) -> Result<String, String> {
        let login = login_hint(token.profile);
        let path = self
            .sso_cache_file(token.id)
            .ok_or_else(|| format!("no SSO token cache (HOME is not set). {login}"))?;
        let text = std::fs::read_to_string(&path).map_err(|_| {
            format!(
                "the SSO session has no cached token ({}). {login}",
                path.display()
            )
        })?;
        let Ok(Value::Object(cached)) = serde_json::from_str::<Value>(&text) else {
            return Err(format!(
                "the cached SSO token {} is not a JSON object. {login}",
                path.display()
            ));
        };
        let field = |k: &str| cached.get(k).and_then(Value::as_str);
        let access = field("accessToken")
            .ok_or_else(|| format!("the cached SSO token has no accessToken. {login}"))?
            .to_owned();
        let expires = field("expiresAt").and_then(parse_iso8601);
        let now = SystemTime::now();
        let expired = || format!("the SSO session has expired. {login}");
        let Some(expires) = expires else {
            return Err(expired());
        };
        if !token.refreshable {
            return if expires > now {
                Ok(access)
            } else {
                Err(expired())
            };
        }
        if expires > now + SSO_REFRESH_WINDOW {
            return Ok(access);
        }
        // Inside the window: refresh, or keep the old token while it lasts.
        let keep = |why: String| {
            if expires > now {
                tracing::debug!("SSO token refresh failed ({why}); using the cached token");
                Ok(access.clone())
            } else {
                Err(format!(
                    "the SSO session has expired and could not be refreshed ({why}). {login}"
                ))
            }
        };
        if refresh_throttled(token.id) {
            return keep("a refresh was tried less than 30 s ago".to_owned());
        }
        let mut secrets = Vec::with_capacity(3);
        for k in ["clientId", "clientSecret", "refreshToken"] {
            match field(k) {
                Some(v) => secrets.push(v),
                None => {
                    let when = if expires > now {
                        "expires within five minutes"
                    } else {
                        "has expired"
                    };
                    return Err(format!(
                        "the SSO session {when}, and its cached token has no {k} to refresh it with. {login}"
                    ));
                }
            }
        }
        record_refresh_attempt(token.id);
        if let Some(reg) = field("registrationExpiresAt").and_then(parse_iso8601) {
            if reg <= now {
                return keep("the SSO client registration has expired".to_owned());
            }
        }
        let fresh = match self
            .create_token(token.region, secrets[0], secrets[1], secrets[2])
            .await
        {
            Ok(f) => f,
            Err(why) => return keep(why),
        };
        let mut written = cached.clone();
        written.insert("accessToken".into(), Value::String(fresh.access.clone()));
        written.insert(
            "expiresAt".into(),
            Value::String(iso8601_millis(fresh.expires)),
        );
        match fresh.refresh {
            Some(r) => written.insert("refreshToken".into(), Value::String(r)),
            None => written.remove("refreshToken"),
        };
        let pretty = serde_json::to_string_pretty(&Value::Object(written)).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, pretty) {
            tracing::debug!(
                "could not write the refreshed SSO token to {}: {e}",
                path.display()
            );
        }
        Ok(fresh.access)
    }

    /// SSO OIDC `CreateToken` with the `refresh_token` grant (`POST {endpoint}/token`, JSON,
    /// unsigned); endpoint `AWS_ENDPOINT_URL_SSO_OIDC`, `AWS_ENDPOINT_URL`, else
    /// `https://oidc.<sso_region>.amazonaws.com`.
    async fn create_token(
        &self,
        region: &str,
        client_id: &str,
        client_secret: &str,
        refresh_token: &str,
    ) -> Result<FreshToken, String> {
        let endpoint = self
            .endpoint("AWS_ENDPOINT_URL_SSO_OIDC")
            .unwrap_or_else(|| format!("https://oidc.{region}.amazonaws.com"));
        let body = serde_json::json!({
            "clientId": client_id,
            "clientSecret": client_secret,
            "grantType": "refresh_token",
            "refreshToken": refresh_token,
        });
        let response = self
            .http
            .post(format!("{endpoint}/token"))
            .json(&body)
            .timeout(SERVICE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("cannot reach SSO OIDC {endpoint}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let field = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        if !status.is_success() {
            let code = field("error").unwrap_or("");
            let message = field("error_description")
                .or_else(|| field("message"))
                .unwrap_or(text.trim());
            return Err(format!(
                "SSO OIDC CreateToken answered HTTP {}: {code}: {message}",
                status.as_u16()
            ));
        }
        let access = field("accessToken").ok_or("SSO OIDC CreateToken returned no accessToken")?;
        let expires_in = v
            .get("expiresIn")
            .and_then(Value::as_u64)
            .ok_or("SSO OIDC CreateToken returned no expiresIn")?;
        Ok(FreshToken {
            access: access.to_owned(),
            expires: SystemTime::now() + Duration::from_secs(expires_in),
            refresh: field("refreshToken").map(str::to_owned),
        })
    }

    fn sso_cache_file(&self, id: &str) -> Option<PathBuf> {
        let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, id.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Some(
            self.env
                .home()?
                .join(".aws")
                .join("sso")
                .join("cache")
                .join(format!("{hex}.json")),
        )
    }
}
