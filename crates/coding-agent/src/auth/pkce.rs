//! Browser (PKCE, RFC 7636 S256) sign-ins of `pi auth login`, run headless: the authorize URL is
//! printed (no browser is opened), a one-shot loopback server waits for the redirect, and a
//! pasted redirect URL or bare code on standard input is accepted instead (upstream 1.6
//! `@earendil-works/pi-ai` `auth/oauth/openrouter.ts`, `callback-server.ts`, `pkce.ts`).
//!
//! OpenRouter: authorize at `https://openrouter.ai/auth?callback_url=…&code_challenge=…&
//! code_challenge_method=S256`; the callback listens on `PI_OAUTH_CALLBACK_HOST` (default
//! `127.0.0.1`), an ephemeral port and the path `/oauth/callback/<random uuid>` (OpenRouter sends
//! no `state`, so the random path is what refuses stray requests: any other path gets 404). The
//! code is exchanged by `POST https://openrouter.ai/api/v1/auth/keys` with JSON
//! `{code, code_verifier, code_challenge_method: "S256"}`; the reply's `key` is stored as
//! `{"type":"oauth","access":key,"refresh":"","expires":9007199254740991}` (a permanent key).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::Digest;

use super::device::Interaction;
use super::http::{self, Body};

const OPENROUTER_AUTHORIZE_URL: &str = "https://openrouter.ai/auth";
const OPENROUTER_KEYS_URL: &str = "https://openrouter.ai/api/v1/auth/keys";
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);
/// JavaScript's `Number.MAX_SAFE_INTEGER`, upstream's "never expires".
const NEVER_EXPIRES: i64 = 9_007_199_254_740_991;

/// A PKCE pair: `verifier` is 32 random bytes, base64url without padding; `challenge` is the
/// base64url SHA-256 of the verifier (S256).
pub struct Pkce {
    /// The secret sent with the code exchange.
    pub verifier: String,
    /// The value sent with the authorize URL.
    pub challenge: String,
}

/// A fresh [`Pkce`] pair.
pub fn generate() -> Pkce {
    let bytes: [u8; 32] = rand::random();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let verifier = b64.encode(bytes);
    let challenge = b64.encode(sha2::Sha256::digest(verifier.as_bytes()));
    Pkce {
        verifier,
        challenge,
    }
}

/// The browser sign-in of `provider`, if this build offers one: `Err(None)` when it does not,
/// `Err(Some(text))` when the sign-in failed.
pub fn login(
    provider: &str,
    ui: &mut dyn Interaction,
) -> Result<Map<String, Value>, Option<String>> {
    match provider {
        "openrouter" => openrouter(ui).map_err(Some),
        _ => Err(None),
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(&format!("http://query.invalid/?{query}")).ok()?;
    let found = parsed.query_pairs().find(|(k, _)| k == key);
    found.map(|(_, v)| v.into_owned())
}

/// The code in a pasted answer: a redirect URL, a `code=…` query, or the bare code.
fn parse_pasted(input: &str) -> Option<String> {
    let value = input.trim();
    if value.is_empty() {
        return None;
    }
    if let Ok(u) = reqwest::Url::parse(value) {
        return u.query().and_then(|q| query_param(q, "code"));
    }
    if value.contains("code=") {
        return query_param(value.trim_start_matches('?'), "code");
    }
    Some(value.to_string())
}

enum Callback {
    Code(String),
    Failed(String),
}

/// Answers one loopback request: `Some` when it was the callback.
fn handle(stream: TcpStream, path: &str, provider_name: &str) -> Option<Callback> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(&stream);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    let target = first.split_whitespace().nth(1).unwrap_or("");
    let (req_path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, text, result) = if req_path != path {
        ("404 Not Found", "Not found.".to_string(), None)
    } else if let Some(err) = query_param(query, "error") {
        let desc = query_param(query, "error_description").unwrap_or(err);
        let msg = format!("{provider_name} authorization failed: {desc}");
        ("400 Bad Request", msg.clone(), Some(Callback::Failed(msg)))
    } else if let Some(code) = query_param(query, "code").filter(|c| !c.is_empty()) {
        (
            "200 OK",
            format!("{provider_name} sign-in complete. You can close this window."),
            Some(Callback::Code(code)),
        )
    } else {
        (
            "400 Bad Request",
            "Missing authorization code.".to_string(),
            None,
        )
    };
    let body = format!("<!doctype html><html><body><p>{text}</p></body></html>");
    let mut out = &stream;
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    result
}

fn openrouter(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let pkce = generate();
    let host = std::env::var("PI_OAUTH_CALLBACK_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "127.0.0.1".into());
    let listener = TcpListener::bind((host.as_str(), 0)).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let path = format!("/oauth/callback/{}", uuid::Uuid::new_v4());
    let redirect = format!("http://{host}:{port}{path}");
    let mut authorize = reqwest::Url::parse(&http::endpoint(OPENROUTER_AUTHORIZE_URL))
        .map_err(|e| e.to_string())?;
    authorize
        .query_pairs_mut()
        .append_pair("callback_url", &redirect)
        .append_pair("code_challenge", &pkce.challenge)
        .append_pair("code_challenge_method", "S256");
    ui.write(&format!(
        "Listening for OpenRouter OAuth callback on {redirect}"
    ));
    ui.write(&format!("Open this URL to sign in: {authorize}"));
    ui.write("Complete sign-in in your browser. If the browser is on another machine, paste the final redirect URL here.");
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    // Stdin is read on a helper thread so the callback and a pasted answer race, as upstream's do.
    let (tx, rx) = mpsc::channel::<Option<String>>();
    let prompt =
        "Complete sign-in in your browser, or paste the authorization code / redirect URL here: ";
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    std::thread::spawn(move || {
        let mut line = String::new();
        let answer = match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        };
        let _ = tx.send(answer);
    });
    let started = Instant::now();
    let mut stdin_open = true;
    let code = loop {
        if started.elapsed() > LOGIN_TIMEOUT {
            return Err("OpenRouter sign-in timed out".into());
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                match handle(stream, &path, "OpenRouter") {
                    Some(Callback::Code(code)) => break code,
                    Some(Callback::Failed(msg)) => return Err(msg),
                    None => {}
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.to_string()),
        }
        if stdin_open {
            match rx.try_recv() {
                Ok(Some(line)) => {
                    let code = parse_pasted(&line).ok_or("Missing authorization code")?;
                    ui.write("Exchanging authorization code for an API key...");
                    break code;
                }
                // End of input: keep waiting for the browser.
                Ok(None) | Err(mpsc::TryRecvError::Disconnected) => stdin_open = false,
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    exchange_openrouter(&code, &pkce.verifier)
}

fn exchange_openrouter(code: &str, verifier: &str) -> Result<Map<String, Value>, String> {
    let body = json!({"code": code, "code_verifier": verifier, "code_challenge_method": "S256"});
    let reply = http::send(
        reqwest::Method::POST,
        &http::endpoint(OPENROUTER_KEYS_URL),
        &[("Accept", "application/json")],
        Body::Json(&body),
        EXCHANGE_TIMEOUT,
    )?;
    let data = reply.json();
    if !reply.ok() {
        let detail = data["error_description"]
            .as_str()
            .or(data["message"].as_str())
            .or(data["error"].as_str())
            .or(data["error"]["message"].as_str());
        let suffix = detail.map(|d| format!(": {d}")).unwrap_or_default();
        return Err(format!(
            "OpenRouter OAuth key exchange failed (HTTP {}){suffix}",
            reply.status
        ));
    }
    let Some(key) = data["key"].as_str().filter(|k| !k.is_empty()) else {
        return Err("OpenRouter OAuth response carries no \"key\"".into());
    };
    let Value::Object(m) =
        json!({"type": "oauth", "access": key, "refresh": "", "expires": NEVER_EXPIRES})
    else {
        return Err("internal: entry is not an object".into());
    };
    Ok(m)
}
