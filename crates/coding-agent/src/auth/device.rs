//! Device-code sign-ins (RFC 8628) of `pi auth login` for the providers upstream 1.6 offers
//! them for: GitHub Copilot, Kimi Code, xAI, and OpenAI Codex's headless method (upstream
//! `auth/oauth/device-code.ts` and the providers' flows). Each asks its device endpoint for a
//! user code, tells the user where to enter it, then polls the token endpoint: every
//! `interval` seconds (5 when absent, at least 1), waiting before the first poll where upstream
//! does; `authorization_pending` polls again, `slow_down` takes the server's new `interval` or
//! adds 5 s, any other error (e.g. `expired_token`) ends the sign-in, and so does the code's
//! `expires_in`.

use super::http::{self, Body};
use super::oauth::{self, CODEX_CLIENT_ID, COPILOT_CLIENT_ID, KIMI_CLIENT_ID, XAI_CLIENT_ID};
use serde_json::{Map, Value};
use std::time::{Duration, Instant};

const MINIMUM_INTERVAL_MS: u64 = 1000;
const DEFAULT_INTERVAL_S: f64 = 5.0;
const SLOW_DOWN_INCREMENT_MS: u64 = 5000;
const CODE_TIMEOUT_S: f64 = 15.0 * 60.0;
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The terminal side of a sign-in.
pub trait Interaction {
    /// Asks `message` and returns the answer line; `None` = cancelled (end of input).
    fn question(&mut self, message: &str) -> Option<String>;
    /// Shows one line of progress.
    fn write(&mut self, line: &str);
}

/// One poll's outcome.
pub enum Poll<T> {
    /// Signed in.
    Complete(T),
    /// `authorization_pending`: ask again after the interval.
    Pending,
    /// `slow_down`, with the server's new interval in seconds if it sent one.
    SlowDown(Option<f64>),
    /// Any other answer: the sign-in fails with this text.
    Failed(String),
}

/// Polls until `poll` completes, fails, or `expires_in_s` passes (upstream
/// `pollOAuthDeviceCodeFlow`; texts `Device flow timed out` and the clock-drift variant after
/// a `slow_down`).
pub fn poll_device_flow<T>(
    interval_s: Option<f64>,
    expires_in_s: Option<f64>,
    wait_before_first: bool,
    mut poll: impl FnMut() -> Result<Poll<T>, String>,
) -> Result<T, String> {
    let deadline = expires_in_s.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let remaining = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let ms = |s: f64| (s * 1000.0).floor().max(0.0) as u64;
    let mut interval = ms(interval_s.unwrap_or(DEFAULT_INTERVAL_S)).max(MINIMUM_INTERVAL_MS);
    let mut slow_downs = 0;
    let sleep = |interval: u64| {
        let want = Duration::from_millis(interval);
        std::thread::sleep(remaining().map_or(want, |r| r.min(want)));
    };
    if wait_before_first && remaining().is_none_or(|r| !r.is_zero()) {
        sleep(interval);
    }
    while remaining().is_none_or(|r| !r.is_zero()) {
        match poll()? {
            Poll::Complete(v) => return Ok(v),
            Poll::Failed(message) => return Err(message),
            Poll::Pending => {}
            Poll::SlowDown(server) => {
                slow_downs += 1;
                interval = match server.filter(|s| s.is_finite() && *s > 0.0) {
                    Some(s) => ms(s).max(MINIMUM_INTERVAL_MS),
                    None => (interval + SLOW_DOWN_INCREMENT_MS).max(MINIMUM_INTERVAL_MS),
                };
            }
        }
        if remaining().is_some_and(|r| r.is_zero()) {
            break;
        }
        sleep(interval);
    }
    Err(if slow_downs > 0 {
        "Device flow timed out after one or more slow_down responses. This is often caused by clock drift in WSL or VM environments. Please sync or restart the VM clock and try again.".into()
    } else {
        "Device flow timed out".into()
    })
}

/// A server-sent URL, kept only if it is `http:` or `https:` (it is shown for the user to
/// open).
fn trusted_url(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    (s.starts_with("https://") || s.starts_with("http://")).then(|| s.to_string())
}

fn show_code(ui: &mut dyn Interaction, url: &str, code: &str) {
    ui.write(&format!("Open {url} and enter code: {code}"));
    ui.write("Waiting for authentication...");
}

fn form_post(url: &str, fields: &[(&str, &str)]) -> Result<http::Reply, String> {
    http::send(
        reqwest::Method::POST,
        url,
        &[("Accept", "application/json")],
        Body::Form(fields),
        REQUEST_TIMEOUT,
    )
}

/// The device-code sign-in of `provider`, if upstream offers one, returning the new
/// `auth.json` entry. `no_browser` picks OpenAI Codex's headless method (its default, the
/// browser sign-in, is [`super::pkce::login`]'s: `Err(None)` here). `Err(Some(text))`: the
/// sign-in failed.
pub fn login(
    provider: &str,
    no_browser: bool,
    ui: &mut dyn Interaction,
) -> Result<Map<String, Value>, Option<String>> {
    match provider {
        "github-copilot" => copilot(ui).map_err(Some),
        "kimi-coding" => kimi(ui).map_err(Some),
        "xai" => xai(ui).map_err(Some),
        "openai-codex" if no_browser => {
            ui.write("Select OpenAI Codex login method: Device code login (headless)");
            codex(ui).map_err(Some)
        }
        _ => Err(None),
    }
}

fn copilot(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let input = ui
        .question("GitHub Enterprise URL/domain (blank for github.com) (company.ghe.com): ")
        .ok_or("Login cancelled")?;
    let enterprise = oauth::normalize_domain(&input);
    if !input.trim().is_empty() && enterprise.is_none() {
        return Err("Invalid GitHub Enterprise URL/domain".into());
    }
    let domain = enterprise.clone().unwrap_or_else(|| "github.com".into());
    let ua = [
        ("Accept", "application/json"),
        ("User-Agent", "GitHubCopilotChat/0.35.0"),
    ];
    let post = |path: &str, fields: &[(&str, &str)]| -> Result<Value, String> {
        let reply = http::send(
            reqwest::Method::POST,
            &http::endpoint(&format!("https://{domain}{path}")),
            &ua,
            Body::Form(fields),
            REQUEST_TIMEOUT,
        )?;
        if !reply.ok() {
            return Err(format!(
                "{} {}: {}",
                reply.status, reply.status_text, reply.body
            ));
        }
        Ok(reply.json())
    };
    let data = post(
        "/login/device/code",
        &[("client_id", COPILOT_CLIENT_ID), ("scope", "read:user")],
    )?;
    if !data.is_object() {
        return Err("Invalid device code response".into());
    }
    let interval = data.get("interval");
    let (Some(device_code), Some(user_code), Some(_), Some(expires_in)) = (
        data["device_code"].as_str(),
        data["user_code"].as_str(),
        data["verification_uri"].as_str(),
        data["expires_in"].as_f64(),
    ) else {
        return Err("Invalid device code response fields".into());
    };
    if interval.is_some_and(|i| !i.is_number()) {
        return Err("Invalid device code response fields".into());
    }
    let uri = trusted_url(data.get("verification_uri"))
        .ok_or("Untrusted verification_uri in device code response")?;
    show_code(ui, &uri, user_code);
    let github_token = poll_device_flow(
        interval.and_then(Value::as_f64),
        Some(expires_in),
        true,
        || {
            let raw = post(
                "/login/oauth/access_token",
                &[
                    ("client_id", COPILOT_CLIENT_ID),
                    ("device_code", device_code),
                    ("grant_type", DEVICE_GRANT),
                ],
            )?;
            if let Some(t) = raw["access_token"].as_str() {
                return Ok(Poll::Complete(t.to_string()));
            }
            let Some(error) = raw["error"].as_str() else {
                return Ok(Poll::Failed("Invalid device token response".into()));
            };
            Ok(match error {
                "authorization_pending" => Poll::Pending,
                "slow_down" => Poll::SlowDown(raw["interval"].as_f64()),
                _ => {
                    let suffix = raw["error_description"]
                        .as_str()
                        .filter(|d| !d.is_empty())
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default();
                    Poll::Failed(format!("Device flow failed: {error}{suffix}"))
                }
            })
        },
    )?;
    oauth::copilot_token(&github_token, enterprise.as_deref(), true)
}

fn kimi(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let host = oauth::kimi_host();
    let reply = form_post(
        &format!("{host}/api/oauth/device_authorization"),
        &[("client_id", KIMI_CLIENT_ID)],
    )?;
    if !reply.ok() {
        let body = if reply.body.is_empty() {
            String::new()
        } else {
            format!(": {}", reply.body)
        };
        return Err(format!(
            "Kimi Code device authorization failed with status {}{body}",
            reply.status
        ));
    }
    let json = reply.json();
    let (Some(device_code), Some(user_code), Some(_), Some(complete)) = (
        json["device_code"].as_str(),
        json["user_code"].as_str(),
        trusted_url(json.get("verification_uri")),
        trusted_url(json.get("verification_uri_complete")),
    ) else {
        return Err(format!(
            "Invalid Kimi Code device authorization response: {json}"
        ));
    };
    let positive = |k: &str| json[k].as_f64().filter(|v| v.is_finite() && *v > 0.0);
    show_code(ui, &complete, user_code);
    poll_device_flow(
        Some(positive("interval").unwrap_or(DEFAULT_INTERVAL_S)),
        Some(positive("expires_in").unwrap_or(CODE_TIMEOUT_S)),
        true,
        || {
            let reply = form_post(
                &format!("{host}/api/oauth/token"),
                &[
                    ("client_id", KIMI_CLIENT_ID),
                    ("device_code", device_code),
                    ("grant_type", DEVICE_GRANT),
                ],
            )?;
            if reply.status >= 500 {
                let body = if reply.body.is_empty() {
                    String::new()
                } else {
                    format!(": {}", reply.body)
                };
                return Ok(Poll::Failed(format!(
                    "Kimi Code device token request failed with status {}{body}",
                    reply.status
                )));
            }
            let json = reply.json();
            if reply.ok() && json["access_token"].is_string() {
                return Ok(match oauth::kimi_token(&json, "poll") {
                    Ok(entry) => Poll::Complete(entry),
                    Err(e) => Poll::Failed(e),
                });
            }
            let description = json["error_description"]
                .as_str()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            Ok(match json["error"].as_str() {
                Some("authorization_pending") => Poll::Pending,
                Some("slow_down") => Poll::SlowDown(json["interval"].as_f64().filter(|i| *i > 0.0)),
                Some("expired_token") => Poll::Failed(
                    "Kimi Code device authorization expired. Please restart login.".into(),
                ),
                Some("access_denied") => Poll::Failed("Kimi Code login was denied.".into()),
                other => Poll::Failed(format!(
                    "Kimi Code device token request failed (status {}){}",
                    reply.status,
                    other
                        .map(|e| format!(": {e}{description}"))
                        .unwrap_or_default()
                )),
            })
        },
    )
}

fn xai(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let reply = form_post(
        &http::endpoint("https://auth.x.ai/oauth2/device/code"),
        &[
            ("client_id", XAI_CLIENT_ID),
            (
                "scope",
                "openid profile email offline_access grok-cli:access api:access",
            ),
            ("referrer", "pi"),
        ],
    )?;
    if !reply.ok() {
        return Err(oauth::xai_failure("device authorization", &reply));
    }
    let body = reply.json();
    let field = |k: &str| format!("Invalid xAI OAuth response field: {k}");
    let https = |v: &str| -> Result<String, String> {
        // Upstream insists on https here; the test origin may be plain http.
        let test = std::env::var(http::TEST_ORIGIN_ENV).is_ok_and(|o| !o.is_empty());
        if v.starts_with("https://") || (test && v.starts_with("http://")) {
            Ok(v.to_string())
        } else {
            Err("Untrusted verification URI in xAI OAuth response".into())
        }
    };
    let device_code = body["device_code"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| field("device_code"))?;
    let user_code = body["user_code"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| field("user_code"))?;
    let uri = https(
        body["verification_uri"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| field("verification_uri"))?,
    )?;
    let complete = match body["verification_uri_complete"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        Some(c) => Some(https(c)?),
        None => None,
    };
    let expires_in = body["expires_in"]
        .as_f64()
        .filter(|e| e.is_finite() && *e > 0.0)
        .ok_or_else(|| field("expires_in"))?;
    let interval = body["interval"]
        .as_f64()
        .filter(|i| i.is_finite() && *i > 0.0);
    show_code(ui, complete.as_deref().unwrap_or(&uri), user_code);
    poll_device_flow(interval, Some(expires_in), true, || {
        let reply = form_post(
            &http::endpoint(oauth::XAI_TOKEN_URL),
            &[
                ("grant_type", DEVICE_GRANT),
                ("client_id", XAI_CLIENT_ID),
                ("device_code", device_code),
            ],
        )?;
        let json = reply.json();
        if reply.ok() {
            return Ok(match oauth::xai_token(&json, None) {
                Ok(e) => Poll::Complete(e),
                Err(e) => Poll::Failed(e),
            });
        }
        Ok(match json["error"].as_str() {
            Some("authorization_pending") => Poll::Pending,
            Some("slow_down") => Poll::SlowDown(json["interval"].as_f64()),
            Some("access_denied" | "authorization_denied") => {
                Poll::Failed("xAI device authorization was denied".into())
            }
            Some("expired_token") => Poll::Failed("xAI device code expired".into()),
            _ => Poll::Failed(oauth::xai_failure("device token polling", &reply)),
        })
    })
}

fn codex(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let base = "https://auth.openai.com";
    let reply = http::send(
        reqwest::Method::POST,
        &http::endpoint(&format!("{base}/api/accounts/deviceauth/usercode")),
        &[],
        Body::Json(&serde_json::json!({"client_id": CODEX_CLIENT_ID})),
        REQUEST_TIMEOUT,
    )?;
    if !reply.ok() {
        if reply.status == 404 {
            return Err("OpenAI Codex device code login is not enabled for this server. Use browser login or verify the server URL.".into());
        }
        let body = if reply.body.is_empty() {
            String::new()
        } else {
            format!(": {}", reply.body)
        };
        return Err(format!(
            "OpenAI Codex device code request failed with status {}{body}",
            reply.status
        ));
    }
    let json = reply.json();
    let interval = match &json["interval"] {
        Value::String(s) => s.trim().parse::<f64>().ok(),
        v => v.as_f64(),
    }
    .filter(|i| i.is_finite() && *i >= 0.0);
    let (Some(auth_id), Some(user_code), Some(interval)) = (
        json["device_auth_id"].as_str().filter(|s| !s.is_empty()),
        json["user_code"].as_str().filter(|s| !s.is_empty()),
        interval,
    ) else {
        return Err(format!("Invalid OpenAI Codex device code response: {json}"));
    };
    show_code(ui, &format!("{base}/codex/device"), user_code);
    let (code, verifier) = poll_device_flow(Some(interval), Some(CODE_TIMEOUT_S), false, || {
        let reply = http::send(
            reqwest::Method::POST,
            &http::endpoint(&format!("{base}/api/accounts/deviceauth/token")),
            &[],
            Body::Json(&serde_json::json!({"device_auth_id": auth_id, "user_code": user_code})),
            REQUEST_TIMEOUT,
        )?;
        if reply.ok() {
            let json = reply.json();
            return Ok(
                match (
                    json["authorization_code"]
                        .as_str()
                        .filter(|s| !s.is_empty()),
                    json["code_verifier"].as_str().filter(|s| !s.is_empty()),
                ) {
                    (Some(c), Some(v)) => Poll::Complete((c.to_string(), v.to_string())),
                    _ => Poll::Failed(format!(
                        "Invalid OpenAI Codex device auth token response: {json}"
                    )),
                },
            );
        }
        if reply.status == 403 || reply.status == 404 {
            return Ok(Poll::Pending);
        }
        let parsed: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
        let code = match &parsed["error"] {
            Value::Object(o) => o.get("code").and_then(Value::as_str).map(str::to_string),
            Value::String(s) => Some(s.clone()),
            _ => None,
        };
        Ok(match code.as_deref() {
            Some("deviceauth_authorization_pending") => Poll::Pending,
            Some("slow_down") => Poll::SlowDown(None),
            _ => {
                let body = if reply.body.is_empty() {
                    String::new()
                } else {
                    format!(": {}", reply.body)
                };
                Poll::Failed(format!(
                    "OpenAI Codex device auth failed with status {}{body}",
                    reply.status
                ))
            }
        })
    })?;
    oauth::exchange_codex_code(&code, &verifier, &format!("{base}/deviceauth/callback"))
}
