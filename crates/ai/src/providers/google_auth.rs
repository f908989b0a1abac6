//! Google application default credentials for `google-vertex`: an OAuth access token from a
//! service-account key (an RS256-signed JWT exchanged at the key's `token_uri`, RFC 7523) or
//! from gcloud's `authorized_user` file (a refresh-token grant), cached until shortly before
//! it expires.
//!
//! Source: Google's public OAuth 2.0 service-account and ADC documentation; the file shapes
//! are those `gcloud auth application-default login` and the IAM console write. Upstream 1.6
//! gets the same through `google-auth-library` (checked against the recording
//! `crates/coding-agent/tests/fixtures/providers/upstream/vertex_adc.json`).

use super::common::compact;
use crate::error::ProviderError;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The OAuth scope requested for Vertex AI.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, used when a credentials file names none.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// Text when no credentials file exists (google-auth-library's wording).
pub const NO_CREDENTIALS_MESSAGE: &str = "Could not load the default credentials. Browse to https://cloud.google.com/docs/authentication/getting-started for more information.";

/// A token is renewed this long before it expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

struct Cached {
    /// The credentials file the token came from.
    path: PathBuf,
    token: String,
    renew_at: Instant,
}

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// The credentials file: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's ADC file under
/// `$HOME/.config/gcloud/`.
fn credentials_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    let p = PathBuf::from(home).join(".config/gcloud/application_default_credentials.json");
    p.exists().then_some(p)
}

fn auth_error(message: impl Into<String>) -> ProviderError {
    ProviderError::Protocol {
        message: message.into(),
    }
}

/// An access token for Vertex AI from the application default credentials (cached per
/// process). Errors: no or unreadable credentials file, an unsupported `type`, a key that does
/// not parse (PKCS#8 PEM expected), and a refused token request (`ProviderError::Http` with
/// the endpoint's status and body) or one that got no answer (`ProviderError::Transport`).
pub async fn access_token(client: &reqwest::Client) -> Result<String, ProviderError> {
    let path = credentials_path().ok_or_else(|| auth_error(NO_CREDENTIALS_MESSAGE))?;
    if let Ok(guard) = CACHE.lock() {
        if let Some(c) = guard.as_ref() {
            if c.path == path && Instant::now() < c.renew_at {
                return Ok(c.token.clone());
            }
        }
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        auth_error(format!(
            "Could not read the credentials file {}: {e}",
            path.display()
        ))
    })?;
    let creds: Value = serde_json::from_str(&text).map_err(|e| {
        auth_error(format!(
            "Could not parse the credentials file {}: {e}",
            path.display()
        ))
    })?;
    let field = |k: &str| creds.get(k).and_then(Value::as_str).unwrap_or("");
    let token_uri = Some(field("token_uri"))
        .filter(|u| !u.is_empty())
        .unwrap_or(DEFAULT_TOKEN_URI)
        .to_owned();
    let form: Vec<(&str, String)> = match field("type") {
        "service_account" => {
            let jwt = signed_jwt(
                field("client_email"),
                field("private_key_id"),
                field("private_key"),
                &token_uri,
            )?;
            vec![
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned(),
                ),
                ("assertion", jwt),
            ]
        }
        "authorized_user" => vec![
            ("grant_type", "refresh_token".to_owned()),
            ("client_id", field("client_id").to_owned()),
            ("client_secret", field("client_secret").to_owned()),
            ("refresh_token", field("refresh_token").to_owned()),
        ],
        other => {
            return Err(auth_error(format!(
                "Unsupported credentials type in {}: {other:?}",
                path.display()
            )))
        }
    };
    let body = form
        .iter()
        .map(|(k, v)| format!("{k}={}", form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let response = client
        .post(&token_uri)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|e| ProviderError::Transport {
            message: format!("Could not get an access token from {token_uri}: {e}"),
        })?;
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(ProviderError::Http {
            status,
            retry_after_ms: None,
            message: format!("Could not get an access token ({status}): {}", text.trim()),
            body: text,
        });
    }
    let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| auth_error(format!("The token endpoint sent no access_token: {text}")))?
        .to_owned();
    let lifetime = Duration::from_secs(
        answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .unwrap_or(3600),
    );
    if let Ok(mut guard) = CACHE.lock() {
        *guard = Some(Cached {
            path,
            token: token.clone(),
            renew_at: Instant::now() + lifetime.saturating_sub(EXPIRY_MARGIN),
        });
    }
    Ok(token)
}

/// `application/x-www-form-urlencoded` escaping of one value (the `form_urlencoded` crate:
/// `*-._` and alphanumerics kept, space as `+`, the rest `%XX`).
fn form_encode(v: &str) -> String {
    form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

/// A one-hour JWT assertion for the service account, signed RS256 with its PKCS#8 key:
/// header `{"alg":"RS256","typ":"JWT","kid":<private_key_id>}`, claims `iss` (the account's
/// e-mail), `scope` ([`CLOUD_PLATFORM_SCOPE`]), `aud` (the token URI), `iat`, `exp`.
pub fn signed_jwt(
    client_email: &str,
    key_id: &str,
    private_key_pem: &str,
    token_uri: &str,
) -> Result<String, ProviderError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if !key_id.is_empty() {
        header["kid"] = json!(key_id);
    }
    let claims = json!({
        "iss": client_email,
        "scope": CLOUD_PLATFORM_SCOPE,
        "aud": token_uri,
        "iat": now,
        "exp": now + 3600,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(compact(&header)),
        URL_SAFE_NO_PAD.encode(compact(&claims))
    );
    let der: String = private_key_pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = STANDARD
        .decode(der)
        .map_err(|e| auth_error(format!("The service account private_key is not PEM: {e}")))?;
    let key = ring::signature::RsaKeyPair::from_pkcs8(&der).map_err(|e| {
        auth_error(format!(
            "The service account private_key is not a PKCS#8 RSA key: {e}"
        ))
    })?;
    let mut signature = vec![0u8; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| auth_error("Could not sign the service account assertion"))?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding() {
        assert_eq!(form_encode("a b+c/="), "a+b%2Bc%2F%3D");
        assert_eq!(form_encode("urn:x"), "urn%3Ax");
    }
}
