//! The OAuth providers upstream 1.6 refreshes, with their token endpoints, client ids and
//! response rules (upstream `pi-ai` `auth/oauth/{anthropic,openai-codex,github-copilot,
//! kimi-coding,xai}.ts`). A refresh answers the whole new `auth.json` entry, as upstream
//! replaces the stored credential with the refresh result.
//!
//! Not refreshed here: `meta` (its refresh mints an API key), `openrouter` (its key never
//! expires), `openai` (ChatGPT sign-in) and `radius`.
//!
//! This sits with the `auth.json` store ([`super::auth`]) because the per-request key
//! resolver refreshes stored entries; the sign-ins that also call these endpoints are in
//! `pi_coding_agent::auth`, a floor above. [`http`] is the blocking HTTP both use, [`refresh`] the
//! locked re-read/refresh/write of one stored entry.

pub mod http;
pub mod refresh;

use self::http::{Body, Reply};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Upstream's bound on one refresh (`DEFAULT_OAUTH_REFRESH_TIMEOUT_MS`).
pub const REFRESH_TIMEOUT: Duration = Duration::from_secs(15);
/// Tokens with less than this left are refreshed before a request (upstream
/// `DEFAULT_OAUTH_MINIMUM_VALIDITY_MS`), in ms.
pub const MIN_VALIDITY_MS: i64 = 5 * 60_000;
/// What upstream subtracts from some providers' reported lifetime, in ms.
const SKEW_MS: i64 = 5 * 60_000;

/// Anthropic (Claude Pro/Max) client id.
pub const ANTHROPIC_CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
/// Anthropic token endpoint (code exchange and refresh).
pub const ANTHROPIC_TOKEN_URL: &str = "https://platform.claude.com/v1/oauth/token";
/// OpenAI Codex (ChatGPT) client id.
pub const CODEX_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// OpenAI Codex token endpoint.
pub const CODEX_TOKEN_URL: &str = "https://auth.openai.com/oauth/token";
/// GitHub Copilot (VS Code) OAuth app client id.
pub const COPILOT_CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// Kimi Code client id.
pub const KIMI_CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
/// xAI client id.
pub const XAI_CLIENT_ID: &str = "b1a00492-073a-47ea-816f-4c329264a828";
/// xAI token endpoint.
pub const XAI_TOKEN_URL: &str = "https://auth.x.ai/oauth2/token";

/// The headers Copilot's token and models endpoints expect.
pub const COPILOT_HEADERS: &[(&str, &str)] = &[
    ("User-Agent", "GitHubCopilotChat/0.35.0"),
    ("Editor-Version", "vscode/1.107.0"),
    ("Editor-Plugin-Version", "copilot-chat/0.35.0"),
    ("Copilot-Integration-Id", "vscode-chat"),
];

/// A provider whose OAuth entries are refreshed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthProvider {
    /// `anthropic` (Claude Pro/Max).
    Anthropic,
    /// `openai-codex` (ChatGPT Plus/Pro).
    OpenAiCodex,
    /// `github-copilot`.
    GitHubCopilot,
    /// `kimi-coding` (Kimi Code subscription).
    KimiCoding,
    /// `xai` (SuperGrok / X Premium).
    Xai,
}

impl OAuthProvider {
    /// The provider for a built-in provider id, if upstream refreshes its OAuth entries.
    pub fn for_id(id: &str) -> Option<Self> {
        Some(match id {
            "anthropic" => Self::Anthropic,
            "openai-codex" => Self::OpenAiCodex,
            "github-copilot" => Self::GitHubCopilot,
            "kimi-coding" => Self::KimiCoding,
            "xai" => Self::Xai,
            _ => return None,
        })
    }

    /// Exchanges the entry's refresh token for a new entry. `Err` is the cause text upstream
    /// reports (the caller prefixes `OAuth refresh failed for <provider>: `). Blocking.
    pub fn refresh(self, entry: &Map<String, Value>) -> Result<Map<String, Value>, String> {
        let refresh = entry
            .get("refresh")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match self {
            Self::Anthropic => refresh_anthropic(refresh),
            Self::OpenAiCodex => refresh_codex(refresh),
            Self::GitHubCopilot => {
                let domain = entry
                    .get("enterpriseUrl")
                    .and_then(Value::as_str)
                    .and_then(normalize_domain);
                copilot_token(refresh, domain.as_deref(), true)
            }
            Self::KimiCoding => refresh_kimi(refresh),
            Self::Xai => refresh_xai(refresh),
        }
    }
}

fn oauth_entry(access: &str, refresh: &str, expires: i64) -> Map<String, Value> {
    let Value::Object(m) =
        json!({"type": "oauth", "refresh": refresh, "access": access, "expires": expires})
    else {
        return Map::new();
    };
    m
}

fn str_field<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn refresh_anthropic(refresh: &str) -> Result<Map<String, Value>, String> {
    let body = json!({"grant_type": "refresh_token", "client_id": ANTHROPIC_CLIENT_ID, "refresh_token": refresh});
    anthropic_token(
        &body,
        &format!("Anthropic token refresh request failed. url={ANTHROPIC_TOKEN_URL}"),
        &format!("Anthropic token refresh returned invalid JSON. url={ANTHROPIC_TOKEN_URL}"),
        Duration::from_secs(30).min(REFRESH_TIMEOUT),
    )
}

/// Posts `body` (JSON) to Anthropic's token endpoint, for a code exchange or a refresh, and
/// reads the answer into an entry `{type:"oauth", refresh, access, expires}`; `expires` is now
/// plus `expires_in` seconds less five minutes, in ms (upstream `anthropic.ts`). Missing fields
/// are stored empty, as upstream does not check them. Errors: `<request_failed>; details=…`
/// for a transport failure or a non-2xx answer (its status and body), `<invalid_json>;
/// body=…; details=…` for an answer that is not JSON. `timeout` bounds the request. Blocking.
pub fn anthropic_token(
    body: &Value,
    request_failed: &str,
    invalid_json: &str,
    timeout: Duration,
) -> Result<Map<String, Value>, String> {
    let failed = |details: String| format!("{request_failed}; details={details}");
    let reply = http::send(
        reqwest::Method::POST,
        &http::endpoint(ANTHROPIC_TOKEN_URL),
        &[("Accept", "application/json")],
        Body::Json(body),
        timeout,
    )
    .map_err(|e| failed(format!("Error: {e}")))?;
    if !reply.ok() {
        return Err(failed(format!(
            "Error: HTTP request failed. status={}; url={ANTHROPIC_TOKEN_URL}; body={}",
            reply.status, reply.body
        )));
    }
    let data: Value = serde_json::from_str(&reply.body).map_err(|e| {
        format!(
            "{invalid_json}; body={}; details=SyntaxError: {e}",
            reply.body
        )
    })?;
    let expires_in = data
        .get("expires_in")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    Ok(oauth_entry(
        str_field(&data, "access_token").unwrap_or_default(),
        str_field(&data, "refresh_token").unwrap_or_default(),
        pi_ai::now_ms() + (expires_in * 1000.0) as i64 - SKEW_MS,
    ))
}

/// Reads a Codex token answer (`exchange` or `refresh`) into access, refresh and expiry.
pub fn codex_token_reply(reply: &Reply, operation: &str) -> Result<(String, String, i64), String> {
    if !reply.ok() {
        let text = if reply.body.is_empty() {
            reply.status_text.clone()
        } else {
            reply.body.clone()
        };
        return Err(format!(
            "OpenAI Codex token {operation} failed ({}): {text}",
            reply.status
        ));
    }
    let json = reply.json();
    let expires_in = json.get("expires_in").and_then(Value::as_f64);
    match (
        str_field(&json, "access_token"),
        str_field(&json, "refresh_token"),
        expires_in,
    ) {
        (Some(a), Some(r), Some(e)) => Ok((
            a.to_string(),
            r.to_string(),
            pi_ai::now_ms() + (e * 1000.0) as i64,
        )),
        _ => Err(format!(
            "OpenAI Codex token {operation} response missing fields: {json}"
        )),
    }
}

/// The ChatGPT account id in a Codex access token (a JWT claim); upstream stores it as
/// `accountId` and refuses a token without one.
pub fn codex_entry(
    access: &str,
    refresh: &str,
    expires: i64,
) -> Result<Map<String, Value>, String> {
    use base64::Engine;
    let account = access
        .split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p.trim_end_matches('='))
                .ok()
        })
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|claims| {
            claims["https://api.openai.com/auth"]["chatgpt_account_id"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .ok_or_else(|| "Failed to extract accountId from token".to_string())?;
    let mut m = oauth_entry(access, refresh, expires);
    m.insert("accountId".into(), Value::String(account));
    Ok(m)
}

/// Exchanges an OpenAI Codex authorization code (browser or device-code sign-in) for the
/// `auth.json` entry: a form `POST` of `grant_type=authorization_code`, `client_id`, `code`,
/// `code_verifier` and `redirect_uri` (the one the code was issued for) to the token endpoint,
/// then [`codex_token_reply`] and [`codex_entry`] (upstream `openai-codex.ts`). Blocking.
pub fn exchange_codex_code(
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> Result<Map<String, Value>, String> {
    let reply = http::send(
        reqwest::Method::POST,
        &http::endpoint(CODEX_TOKEN_URL),
        &[],
        Body::Form(&[
            ("grant_type", "authorization_code"),
            ("client_id", CODEX_CLIENT_ID),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", redirect_uri),
        ]),
        Duration::from_secs(30),
    )?;
    let (access, refresh, expires) = codex_token_reply(&reply, "exchange")?;
    codex_entry(&access, &refresh, expires)
}

fn refresh_codex(refresh: &str) -> Result<Map<String, Value>, String> {
    let reply = http::send(
        reqwest::Method::POST,
        &http::endpoint(CODEX_TOKEN_URL),
        &[],
        Body::Form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", CODEX_CLIENT_ID),
        ]),
        REFRESH_TIMEOUT,
    )
    .map_err(|e| format!("OpenAI Codex token refresh error: {e}"))?;
    let (access, refresh, expires) = codex_token_reply(&reply, "refresh")?;
    codex_entry(&access, &refresh, expires)
}

/// The host name of a GitHub Enterprise URL or domain (`company.ghe.com`), as upstream
/// normalises it; `None` for blank or unparsable input.
pub fn normalize_domain(input: &str) -> Option<String> {
    let t = input.trim();
    if t.is_empty() {
        return None;
    }
    let rest = t.split_once("://").map_or(t, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit('@').next().unwrap_or_default();
    let host = host
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if host.is_empty() || host.contains(char::is_whitespace) {
        return None;
    }
    Some(host)
}

/// `fetchJson`'s error text: `<status> <reason>: <body>`.
fn status_error(reply: &Reply) -> String {
    format!("{} {}: {}", reply.status, reply.status_text, reply.body)
}

/// The Copilot API base URL for a token: its `proxy-ep=proxy.X` field as `https://api.X`, else
/// the enterprise or individual default.
pub fn copilot_base_url(token: &str, enterprise: Option<&str>) -> String {
    if let Some(ep) = token
        .split(';')
        .find_map(|part| part.strip_prefix("proxy-ep="))
        .filter(|s| !s.is_empty())
    {
        let host = ep
            .strip_prefix("proxy.")
            .map_or(ep.to_string(), |h| format!("api.{h}"));
        return format!("https://{host}");
    }
    match enterprise {
        Some(d) => format!("https://copilot-api.{d}"),
        None => "https://api.individual.githubcopilot.com".into(),
    }
}

/// Exchanges a GitHub access token (stored as `refresh`) for a Copilot token and, with
/// `models`, reads the account's model list into `availableModelIds` (upstream's refresh does
/// both and fails when either fails).
pub fn copilot_token(
    github_token: &str,
    enterprise: Option<&str>,
    models: bool,
) -> Result<Map<String, Value>, String> {
    let domain = enterprise.unwrap_or("github.com");
    let url = http::endpoint(&format!("https://api.{domain}/copilot_internal/v2/token"));
    let auth = format!("Bearer {github_token}");
    let mut headers = vec![
        ("Accept", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    headers.extend_from_slice(COPILOT_HEADERS);
    let reply = http::send(
        reqwest::Method::GET,
        &url,
        &headers,
        Body::None,
        REFRESH_TIMEOUT,
    )?;
    if !reply.ok() {
        return Err(status_error(&reply));
    }
    let raw = reply.json();
    if !raw.is_object() {
        return Err("Invalid Copilot token response".into());
    }
    let (Some(token), Some(expires_at)) = (
        raw.get("token").and_then(Value::as_str),
        raw.get("expires_at").and_then(Value::as_f64),
    ) else {
        return Err("Invalid Copilot token response fields".into());
    };
    let mut entry = oauth_entry(token, github_token, (expires_at * 1000.0) as i64 - SKEW_MS);
    if let Some(d) = enterprise {
        entry.insert("enterpriseUrl".into(), Value::String(d.to_string()));
    }
    if models {
        let ids = copilot_models(token, enterprise)?;
        entry.insert(
            "availableModelIds".into(),
            Value::Array(ids.into_iter().map(Value::String).collect()),
        );
    }
    Ok(entry)
}

/// The model ids the account may use (`GET <base>/models`): those enabled in the model picker
/// and not disabled by policy; on the individual endpoint, when none is, those whose policy
/// is enabled.
fn copilot_models(token: &str, enterprise: Option<&str>) -> Result<Vec<String>, String> {
    let base = copilot_base_url(token, enterprise);
    let individual = base == "https://api.individual.githubcopilot.com";
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Accept", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    headers.extend_from_slice(COPILOT_HEADERS);
    headers.push(("X-GitHub-Api-Version", "2026-06-01"));
    let reply = http::send(
        reqwest::Method::GET,
        &http::endpoint(&format!("{base}/models")),
        &headers,
        Body::None,
        Duration::from_secs(5),
    )?;
    if !reply.ok() {
        return Err(status_error(&reply));
    }
    let raw = reply.json();
    let Some(data) = raw.get("data").and_then(Value::as_array) else {
        return Err("Invalid Copilot models response".into());
    };
    let usable: Vec<&Value> = data
        .iter()
        .filter(|m| m.get("id").and_then(Value::as_str).is_some())
        .filter(|m| m["capabilities"]["supports"]["tool_calls"] != Value::Bool(false))
        .collect();
    let id = |m: &&Value| m["id"].as_str().unwrap_or_default().to_string();
    let picker: Vec<String> = usable
        .iter()
        .filter(|m| {
            m["model_picker_enabled"] == Value::Bool(true) && m["policy"]["state"] != "disabled"
        })
        .map(id)
        .collect();
    if !picker.is_empty() || !individual {
        return Ok(picker);
    }
    Ok(usable
        .iter()
        .filter(|m| m["policy"]["state"] == "enabled")
        .map(id)
        .collect())
}

/// Kimi Code's OAuth host: upstream's `KIMI_CODE_OAUTH_HOST` / `KIMI_OAUTH_HOST`, else
/// `https://auth.kimi.com`.
pub fn kimi_host() -> String {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    var("KIMI_CODE_OAUTH_HOST")
        .or_else(|| var("KIMI_OAUTH_HOST"))
        .unwrap_or_else(|| "https://auth.kimi.com".into())
        .trim_end_matches('/')
        .to_string()
}

/// Reads a Kimi token answer; `operation` is `poll` or `refresh`.
pub fn kimi_token(json: &Value, operation: &str) -> Result<Map<String, Value>, String> {
    let expires_in = json
        .get("expires_in")
        .and_then(Value::as_f64)
        .filter(|e| e.is_finite() && *e > 0.0);
    match (
        str_field(json, "access_token"),
        str_field(json, "refresh_token"),
        expires_in,
    ) {
        (Some(a), Some(r), Some(e)) => Ok(oauth_entry(a, r, pi_ai::now_ms() + (e * 1000.0) as i64)),
        _ => Err(format!(
            "Kimi Code token {operation} response missing fields: {json}"
        )),
    }
}

fn refresh_kimi(refresh: &str) -> Result<Map<String, Value>, String> {
    let url = format!("{}/api/oauth/token", kimi_host());
    let mut last = "Kimi Code token refresh failed".to_string();
    // Upstream retries transport errors, 429 and 5xx three times (1 s, 2 s, 4 s apart).
    for attempt in 0..=3u32 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(1000 << (attempt - 1)));
        }
        let reply = match http::send(
            reqwest::Method::POST,
            &url,
            &[("Accept", "application/json")],
            Body::Form(&[
                ("client_id", KIMI_CLIENT_ID),
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh),
            ]),
            Duration::from_secs(30).min(REFRESH_TIMEOUT),
        ) {
            Ok(r) => r,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let json = reply.json();
        if reply.ok() {
            return kimi_token(&json, "refresh");
        }
        if reply.status == 401 || reply.status == 403 || json["error"] == "invalid_grant" {
            let description = json["error_description"]
                .as_str()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            return Err(format!(
                "Kimi Code token refresh unauthorized (status {}){description}",
                reply.status
            ));
        }
        if (reply.status == 429 || reply.status >= 500) && attempt < 3 {
            last = format!(
                "Kimi Code token refresh failed with status {}",
                reply.status
            );
            continue;
        }
        return Err(format!(
            "Kimi Code token refresh failed with status {}: {json}",
            reply.status
        ));
    }
    Err(last)
}

/// `xAI OAuth <action> failed (HTTP <status>)[: error[: description]]`.
pub fn xai_failure(action: &str, reply: &Reply) -> String {
    let json = reply.json();
    let detail: Vec<&str> = ["error", "error_description"]
        .iter()
        .filter_map(|k| str_field(&json, k))
        .collect();
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(": {}", detail.join(": "))
    };
    format!("xAI OAuth {action} failed (HTTP {}){detail}", reply.status)
}

/// Reads an xAI token answer; a refresh answer may omit `refresh_token` (kept from `previous`)
/// and `expires_in` (one hour).
pub fn xai_token(json: &Value, previous: Option<&str>) -> Result<Map<String, Value>, String> {
    let field = |k: &str| format!("Invalid xAI OAuth response field: {k}");
    let access = str_field(json, "access_token").ok_or_else(|| field("access_token"))?;
    let refresh = match (json.get("refresh_token"), previous) {
        (None, Some(p)) => p,
        _ => str_field(json, "refresh_token").ok_or_else(|| field("refresh_token"))?,
    };
    let expires_in = match json.get("expires_in") {
        None => 3600.0,
        Some(v) => v
            .as_f64()
            .filter(|e| e.is_finite() && *e > 0.0)
            .ok_or_else(|| field("expires_in"))?,
    };
    Ok(oauth_entry(
        access,
        refresh,
        pi_ai::now_ms() + (expires_in * 1000.0) as i64 - SKEW_MS,
    ))
}

fn refresh_xai(refresh: &str) -> Result<Map<String, Value>, String> {
    let reply = http::send(
        reqwest::Method::POST,
        &http::endpoint(XAI_TOKEN_URL),
        &[("Accept", "application/json")],
        Body::Form(&[
            ("grant_type", "refresh_token"),
            ("client_id", XAI_CLIENT_ID),
            ("refresh_token", refresh),
        ]),
        REFRESH_TIMEOUT,
    )?;
    if !reply.ok() {
        return Err(xai_failure("token refresh", &reply));
    }
    if !reply.json().is_object() {
        return Err(format!(
            "xAI OAuth returned invalid JSON (HTTP {})",
            reply.status
        ));
    }
    xai_token(&reply.json(), Some(refresh))
}
