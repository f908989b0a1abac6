//! Browser (PKCE, RFC 7636 S256) sign-ins of `pi auth login`, run headless: the authorize URL is
//! printed (no browser is opened), a one-shot loopback server waits for the redirect, and a
//! pasted redirect URL or code on standard input is accepted instead (upstream 1.6
//! `@earendil-works/pi-ai` `auth/oauth/{openrouter,anthropic,openai-codex}.ts`,
//! `callback-server.ts`, `pkce.ts`). One flow ([`CallbackServer`], `wait_for_code`) with
//! per-provider parameters:
//!
//! | provider | callback (host `PI_OAUTH_CALLBACK_HOST`, default `127.0.0.1`) | redirect URI | `state` |
//! |---|---|---|---|
//! | `openrouter` | any free port, `/oauth/callback/<uuid>` | `http://<host>:<port><path>` | none (the random path refuses strays) |
//! | `anthropic` | port 53692, else any free port, `/callback` | `http://localhost:<port>/callback` | the PKCE verifier |
//! | `openai-codex` | port 1455 only (else paste only), `/auth/callback` | always `http://localhost:1455/auth/callback` | 16 random bytes, hex |
//!
//! The callback answers 404 on another path or method, 400 `State mismatch.` on a wrong
//! `state` (the sign-in goes on waiting), 400 and fails on `error=…`, 400 on a missing `code`,
//! 200 with the code. A pasted answer may be the redirect URL, a `code=…&state=…` query,
//! `code#state` (Anthropic, Codex) or the bare code; a pasted `state` that differs fails the
//! sign-in (`OAuth state mismatch` for Anthropic, `State mismatch` for Codex).
//!
//! - OpenRouter: authorize at `https://openrouter.ai/auth?callback_url=…&code_challenge=…&
//!   code_challenge_method=S256`; exchanged by `POST https://openrouter.ai/api/v1/auth/keys`
//!   with JSON `{code, code_verifier, code_challenge_method: "S256"}`; the reply's `key` is
//!   stored as `{"type":"oauth","access":key,"refresh":"","expires":9007199254740991}`.
//! - Anthropic: authorize at `https://claude.ai/oauth/authorize?code=true&client_id&
//!   response_type=code&redirect_uri&scope&code_challenge&code_challenge_method=S256&state`;
//!   `--no-browser` is the "copy code" method (redirect URI
//!   `https://platform.claude.com/oauth/code/callback`, the user pastes `code#state`). Exchanged
//!   by a JSON `POST` of `{grant_type: "authorization_code", client_id, code, state,
//!   redirect_uri, code_verifier}` to the token endpoint; stored as `{type, refresh, access,
//!   expires}` ([`super::oauth::anthropic_token`]).
//! - OpenAI Codex: authorize at `https://auth.openai.com/oauth/authorize?response_type=code&
//!   client_id&redirect_uri&scope=openid profile email offline_access&code_challenge&
//!   code_challenge_method=S256&state&id_token_add_organizations=true&
//!   codex_cli_simplified_flow=true&originator=pi`; exchanged and stored with the account id
//!   by [`super::oauth::exchange_codex_code`]. `--no-browser` is the device-code method
//!   ([`super::device`]).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::Digest;

use super::device::Interaction;
use super::http::{self, Body};
use super::oauth;

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

/// The browser sign-in of `provider`, if this build offers one: `Err(None)` when it does not
/// (or, with `no_browser`, when the provider's other method lives elsewhere: OpenAI Codex's
/// device code), `Err(Some(text))` when the sign-in failed. With `no_browser` Anthropic uses
/// its copy-code method; OpenRouter has only the browser method and uses it.
pub fn login(
    provider: &str,
    no_browser: bool,
    ui: &mut dyn Interaction,
) -> Result<Map<String, Value>, Option<String>> {
    match provider {
        "openrouter" => openrouter(ui).map_err(Some),
        "anthropic" if no_browser => {
            ui.write(&format!(
                "Select Anthropic login method: {ANTHROPIC_COPY_CODE_LABEL}"
            ));
            anthropic_copy_code(ui).map_err(Some)
        }
        "anthropic" => anthropic(ui).map_err(Some),
        "openai-codex" if !no_browser => codex(ui).map_err(Some),
        _ => Err(None),
    }
}

/// What a pasted answer carries.
#[derive(Debug, Default, PartialEq, Eq)]
struct Pasted {
    code: Option<String>,
    state: Option<String>,
}

fn query_param(query: &str, key: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(&format!("http://query.invalid/?{query}")).ok()?;
    let found = parsed.query_pairs().find(|(k, _)| k == key);
    found.map(|(_, v)| v.into_owned())
}

/// Reads a pasted answer: a redirect URL (its `code` and `state`), `code#state` when
/// `hash_state`, a `code=…&state=…` query, or the bare code.
fn parse_pasted(input: &str, hash_state: bool) -> Pasted {
    let value = input.trim();
    if value.is_empty() {
        return Pasted::default();
    }
    let from_query = |q: &str| Pasted {
        code: query_param(q, "code"),
        state: query_param(q, "state"),
    };
    if let Ok(u) = reqwest::Url::parse(value) {
        return from_query(u.query().unwrap_or(""));
    }
    if hash_state && value.contains('#') {
        let mut parts = value.split('#');
        return Pasted {
            code: parts.next().map(str::to_string),
            state: parts.next().map(str::to_string),
        };
    }
    if value.contains("code=") {
        return from_query(value.trim_start_matches('?'));
    }
    Pasted {
        code: Some(value.to_string()),
        state: None,
    }
}

/// The host the callback listens on: `PI_OAUTH_CALLBACK_HOST`, else `127.0.0.1`.
fn callback_host() -> String {
    std::env::var("PI_OAUTH_CALLBACK_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "127.0.0.1".into())
}

/// The one-shot loopback server a browser sign-in redirects to (upstream
/// `startOAuthCallbackServer`).
pub struct CallbackServer {
    listener: TcpListener,
    path: String,
    state: Option<String>,
    provider_name: &'static str,
    /// `http://<redirect host>:<bound port><path>` (IPv6 hosts in brackets).
    pub redirect_uri: String,
}

impl CallbackServer {
    /// Listens on `host` at the first of `ports` that can be bound (0 = a free port the system
    /// picks), for GET `path`; a callback must carry `state` when it is `Some`.
    /// `redirect_host` is the host written into [`Self::redirect_uri`] (default `host`).
    /// `provider_name` words the pages and errors. `Err`: no port could be bound (the last
    /// bind error).
    pub fn bind(
        provider_name: &'static str,
        host: &str,
        ports: &[u16],
        path: &str,
        redirect_host: Option<&str>,
        state: Option<String>,
    ) -> Result<Self, String> {
        let mut last = "no port to bind".to_string();
        for &port in ports {
            let listener = match TcpListener::bind((host, port)) {
                Ok(l) => l,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let bound = listener.local_addr().map_err(|e| e.to_string())?.port();
            listener.set_nonblocking(true).map_err(|e| e.to_string())?;
            let shown = redirect_host.unwrap_or(host);
            let shown = if shown.contains(':') {
                format!("[{shown}]")
            } else {
                shown.to_string()
            };
            return Ok(Self {
                listener,
                path: path.to_string(),
                state,
                provider_name,
                redirect_uri: format!("http://{shown}:{bound}{path}"),
            });
        }
        Err(last)
    }

    /// Answers one request: `Some` when it ends the wait (a code, or an `error=…`).
    fn handle(&self, stream: TcpStream) -> Option<Callback> {
        let _ = stream.set_nonblocking(false);
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
        let mut words = first.split_whitespace();
        let method = words.next().unwrap_or("");
        let target = words.next().unwrap_or("");
        let (req_path, query) = target.split_once('?').unwrap_or((target, ""));
        let name = self.provider_name;
        let (status, text, result) = if method != "GET" || req_path != self.path {
            (
                "404 Not Found",
                "Callback route not found.".to_string(),
                None,
            )
        } else if self
            .state
            .as_ref()
            .is_some_and(|want| query_param(query, "state").as_ref() != Some(want))
        {
            ("400 Bad Request", "State mismatch.".to_string(), None)
        } else if let Some(err) = query_param(query, "error") {
            let desc = query_param(query, "error_description").unwrap_or(err);
            let msg = format!("{name} authorization failed: {desc}");
            ("400 Bad Request", msg.clone(), Some(Callback::Failed(msg)))
        } else if let Some(code) = query_param(query, "code").filter(|c| !c.is_empty()) {
            (
                "200 OK",
                format!("{name} sign-in complete. You can close this window."),
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
}

enum Callback {
    Code(String),
    Failed(String),
}

/// How the wait for the authorization code ended.
enum Answer {
    /// The browser reached the callback with this code.
    Callback(String),
    /// The user pasted this line.
    Pasted(String),
}

/// Prints the authorize URL, the provider's instructions and, when the provider has another
/// method, how to pick it (upstream `auth-login.ts` `auth_url` notice).
fn show_authorize(
    ui: &mut dyn Interaction,
    url: &str,
    instructions: &str,
    other: Option<(&str, &str)>,
) {
    ui.write("Open this URL to sign in:");
    ui.write(&format!("  {url}"));
    ui.write(instructions);
    if let Some((provider, label)) = other {
        ui.write(&format!(
            "To use \"{label}\" instead, run \"pi auth login {provider} --no-browser\""
        ));
    }
}

/// Waits for the browser's callback on `server` or a line pasted on standard input, whichever
/// comes first (upstream `waitForCallbackOrManualInput`). `prompt` is shown on standard error
/// first. Without a server only the pasted line counts, and end of input cancels (`Login
/// cancelled`); with one, end of input leaves the browser to finish. `timeout`: upstream's
/// bound on the whole wait, if it has one (`<provider> sign-in timed out`).
fn wait_for_code(
    server: Option<&CallbackServer>,
    prompt: &str,
    timeout: Option<(Duration, &str)>,
) -> Result<Answer, String> {
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let Some(server) = server else {
        let mut line = String::new();
        return match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => Err("Login cancelled".into()),
            Ok(_) => Ok(Answer::Pasted(line)),
        };
    };
    // Stdin is read on a helper thread so the callback and a pasted answer race, as upstream's do.
    let (tx, rx) = mpsc::channel::<Option<String>>();
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
    loop {
        if let Some((limit, name)) = timeout {
            if started.elapsed() > limit {
                return Err(format!("{name} sign-in timed out"));
            }
        }
        match server.listener.accept() {
            Ok((stream, _)) => match server.handle(stream) {
                Some(Callback::Code(code)) => return Ok(Answer::Callback(code)),
                Some(Callback::Failed(msg)) => return Err(msg),
                None => {}
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.to_string()),
        }
        if stdin_open {
            match rx.try_recv() {
                Ok(Some(line)) => return Ok(Answer::Pasted(line)),
                // End of input: keep waiting for the browser.
                Ok(None) | Err(mpsc::TryRecvError::Disconnected) => stdin_open = false,
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn openrouter(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let pkce = generate();
    let path = format!("/oauth/callback/{}", uuid::Uuid::new_v4());
    let server = CallbackServer::bind("OpenRouter", &callback_host(), &[0], &path, None, None)?;
    let redirect = server.redirect_uri.clone();
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
    show_authorize(ui, authorize.as_str(), "Complete sign-in in your browser. If the browser is on another machine, paste the final redirect URL here.", None);
    let prompt = format!("Complete sign-in in your browser, or paste the authorization code / redirect URL here: ({redirect}): ");
    let code = match wait_for_code(Some(&server), &prompt, Some((LOGIN_TIMEOUT, "OpenRouter")))? {
        Answer::Callback(code) => code,
        Answer::Pasted(line) => {
            let code = parse_pasted(&line, false)
                .code
                .filter(|c| !c.is_empty())
                .ok_or("Missing authorization code")?;
            ui.write("Exchanging authorization code for an API key...");
            code
        }
    };
    exchange_openrouter(&code, &pkce.verifier)
}

const ANTHROPIC_AUTHORIZE_URL: &str = "https://claude.ai/oauth/authorize";
/// The preferred callback port (it can be forwarded into containers or over SSH); any loopback
/// port is accepted, so a free one is used when it is taken.
const ANTHROPIC_CALLBACK_PORT: u16 = 53692;
const ANTHROPIC_CALLBACK_PATH: &str = "/callback";
const ANTHROPIC_COPY_CODE_REDIRECT: &str = "https://platform.claude.com/oauth/code/callback";
const ANTHROPIC_SCOPES: &str = "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload";
const ANTHROPIC_COPY_CODE_LABEL: &str = "Copy code login (headless)";

fn anthropic_authorize_url(pkce: &Pkce, redirect: &str) -> Result<reqwest::Url, String> {
    let mut url =
        reqwest::Url::parse(&http::endpoint(ANTHROPIC_AUTHORIZE_URL)).map_err(|e| e.to_string())?;
    url.query_pairs_mut()
        .append_pair("code", "true")
        .append_pair("client_id", oauth::ANTHROPIC_CLIENT_ID)
        .append_pair("response_type", "code")
        .append_pair("redirect_uri", redirect)
        .append_pair("scope", ANTHROPIC_SCOPES)
        .append_pair("code_challenge", &pkce.challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", &pkce.verifier);
    Ok(url)
}

fn exchange_anthropic(
    ui: &mut dyn Interaction,
    code: &str,
    state: &str,
    verifier: &str,
    redirect: &str,
) -> Result<Map<String, Value>, String> {
    ui.write("Exchanging authorization code for tokens...");
    let url = oauth::ANTHROPIC_TOKEN_URL;
    let body = json!({
        "grant_type": "authorization_code",
        "client_id": oauth::ANTHROPIC_CLIENT_ID,
        "code": code,
        "state": state,
        "redirect_uri": redirect,
        "code_verifier": verifier,
    });
    oauth::anthropic_token(
        &body,
        &format!("Token exchange request failed. url={url}; redirect_uri={redirect}; response_type=authorization_code"),
        &format!("Token exchange returned invalid JSON. url={url}"),
        EXCHANGE_TIMEOUT,
    )
}

/// The code and `state` of a pasted Anthropic answer; a `state` other than the verifier fails.
fn anthropic_pasted(line: &str, verifier: &str) -> Result<(String, String), String> {
    let pasted = parse_pasted(line, true);
    if pasted
        .state
        .as_deref()
        .is_some_and(|s| !s.is_empty() && s != verifier)
    {
        return Err("OAuth state mismatch".into());
    }
    let code = pasted
        .code
        .filter(|c| !c.is_empty())
        .ok_or("Missing authorization code")?;
    Ok((code, pasted.state.unwrap_or_else(|| verifier.to_string())))
}

fn anthropic(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let pkce = generate();
    // Without a callback server the pasted redirect URL still completes the sign-in.
    let server = CallbackServer::bind(
        "Anthropic",
        &callback_host(),
        &[ANTHROPIC_CALLBACK_PORT, 0],
        ANTHROPIC_CALLBACK_PATH,
        Some("localhost"),
        Some(pkce.verifier.clone()),
    )
    .ok();
    let redirect = server.as_ref().map_or_else(
        || format!("http://localhost:{ANTHROPIC_CALLBACK_PORT}{ANTHROPIC_CALLBACK_PATH}"),
        |s| s.redirect_uri.clone(),
    );
    let url = anthropic_authorize_url(&pkce, &redirect)?;
    show_authorize(
        ui,
        url.as_str(),
        "Complete login in your browser. If the browser is on another machine, paste the final redirect URL here.",
        Some(("anthropic", ANTHROPIC_COPY_CODE_LABEL)),
    );
    let prompt = format!("Complete login in your browser, or paste the authorization code / redirect URL here: ({redirect}): ");
    let (code, state) = match wait_for_code(server.as_ref(), &prompt, None)? {
        Answer::Callback(code) => (code, pkce.verifier.clone()),
        Answer::Pasted(line) => anthropic_pasted(&line, &pkce.verifier)?,
    };
    drop(server);
    exchange_anthropic(ui, &code, &state, &pkce.verifier, &redirect)
}

fn anthropic_copy_code(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let pkce = generate();
    let url = anthropic_authorize_url(&pkce, ANTHROPIC_COPY_CODE_REDIRECT)?;
    show_authorize(
        ui,
        url.as_str(),
        "Complete login in your browser, then copy the code Anthropic shows and paste it here.",
        None,
    );
    let line = ui
        .question("Paste the code Anthropic shows after you sign in: (code#state): ")
        .ok_or("Login cancelled")?;
    let (code, state) = anthropic_pasted(&line, &pkce.verifier)?;
    exchange_anthropic(
        ui,
        &code,
        &state,
        &pkce.verifier,
        ANTHROPIC_COPY_CODE_REDIRECT,
    )
}

const CODEX_AUTHORIZE_URL: &str = "https://auth.openai.com/oauth/authorize";
/// Shared with the Codex CLI; when it is taken only a pasted redirect URL completes the sign-in.
const CODEX_CALLBACK_PORT: u16 = 1455;
const CODEX_CALLBACK_PATH: &str = "/auth/callback";
const CODEX_REDIRECT_URI: &str = "http://localhost:1455/auth/callback";
const CODEX_SCOPE: &str = "openid profile email offline_access";

fn codex(ui: &mut dyn Interaction) -> Result<Map<String, Value>, String> {
    let pkce = generate();
    let state: String = rand::random::<[u8; 16]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut url =
        reqwest::Url::parse(&http::endpoint(CODEX_AUTHORIZE_URL)).map_err(|e| e.to_string())?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", oauth::CODEX_CLIENT_ID)
        .append_pair("redirect_uri", CODEX_REDIRECT_URI)
        .append_pair("scope", CODEX_SCOPE)
        .append_pair("code_challenge", &pkce.challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", &state)
        .append_pair("id_token_add_organizations", "true")
        .append_pair("codex_cli_simplified_flow", "true")
        .append_pair("originator", "pi");
    let server = CallbackServer::bind(
        "OpenAI",
        &callback_host(),
        &[CODEX_CALLBACK_PORT],
        CODEX_CALLBACK_PATH,
        None,
        Some(state.clone()),
    )
    .ok();
    show_authorize(
        ui,
        url.as_str(),
        "A browser window should open. Complete login to finish.",
        Some(("openai-codex", "Device code login (headless)")),
    );
    let prompt = format!("Complete login in your browser, or paste the authorization code / redirect URL here: ({CODEX_REDIRECT_URI}): ");
    let code = match wait_for_code(server.as_ref(), &prompt, None)? {
        Answer::Callback(code) => code,
        Answer::Pasted(line) => {
            let pasted = parse_pasted(&line, true);
            if pasted
                .state
                .as_deref()
                .is_some_and(|s| !s.is_empty() && s != state)
            {
                return Err("State mismatch".into());
            }
            pasted
                .code
                .filter(|c| !c.is_empty())
                .ok_or("Missing authorization code")?
        }
    };
    drop(server);
    oauth::exchange_codex_code(&code, &pkce.verifier, CODEX_REDIRECT_URI)
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
