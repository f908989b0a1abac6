//! OAuth credentials against fake token and device endpoints on 127.0.0.1 (real HTTP):
//! expired `auth.json` entries refreshed before the request (once, however many processes
//! race), upstream's error text when the refresh fails, `print-bearer-token`/`check`
//! refreshing, the device-code sign-ins of `pi auth login` (interval, `authorization_pending`,
//! `slow_down`, `expired_token`), `logout`, and `ANTHROPIC_AUTH_TOKEN` sent as a bearer token.
//!
//! Kimi Code's endpoints are moved with upstream's own `KIMI_CODE_OAUTH_HOST`; the others with
//! the test-only `PI_TEST_OAUTH_ORIGIN`.

use crate::common::{RunRoot, LIVENESS};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use pi_fakellm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One scripted answer of the fake OAuth server.
#[derive(Clone)]
struct Answer {
    status: u16,
    body: Value,
    delay_ms: u64,
}

fn ok(body: Value) -> Answer {
    Answer {
        status: 200,
        body,
        delay_ms: 0,
    }
}

fn status(status: u16, body: Value) -> Answer {
    Answer {
        status,
        body,
        delay_ms: 0,
    }
}

/// A request the fake OAuth server received.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: String,
}

#[derive(Default)]
struct OAuthState {
    /// Answers per path, served in order; the last one repeats.
    routes: HashMap<String, Vec<Answer>>,
    seen: Vec<Seen>,
}

/// A fake OAuth server: scripted JSON answers per path, every request recorded.
struct FakeOAuth {
    port: u16,
    state: Arc<Mutex<OAuthState>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

async fn serve(
    State(state): State<Arc<Mutex<OAuthState>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let answer = {
        let mut st = state.lock().unwrap();
        st.seen.push(Seen {
            at: Instant::now(),
            method: method.to_string(),
            path: uri.path().to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                .collect(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        match st.routes.get_mut(uri.path()) {
            Some(list) if list.len() > 1 => Some(list.remove(0)),
            Some(list) => list.first().cloned(),
            None => None,
        }
    };
    let answer = answer.unwrap_or_else(|| status(404, json!({"error": "not_found"})));
    if answer.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(answer.delay_ms)).await;
    }
    (
        axum::http::StatusCode::from_u16(answer.status).unwrap(),
        [("content-type", "application/json")],
        answer.body.to_string(),
    )
        .into_response()
}

impl FakeOAuth {
    fn start(routes: Vec<(&str, Vec<Answer>)>) -> FakeOAuth {
        let state = Arc::new(Mutex::new(OAuthState {
            routes: routes
                .into_iter()
                .map(|(p, a)| (p.to_string(), a))
                .collect(),
            seen: Vec::new(),
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(state.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = rx => {}
                }
            });
        });
        FakeOAuth {
            port,
            state,
            _shutdown: tx,
        }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self, path: &str) -> Vec<Seen> {
        let st = self.state.lock().unwrap();
        st.seen.iter().filter(|s| s.path == path).cloned().collect()
    }
}

fn pi_bin() -> std::path::PathBuf {
    std::env::var_os("PI_TEST_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into())
}

/// Runs `pi <args>` to completion with `stdin`; (exit code, stdout, stderr).
fn run(root: &RunRoot, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut child = Command::new(pi_bin())
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pi");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_auth(root: &RunRoot) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.agent_dir.join("auth.json")).unwrap())
        .unwrap()
}

fn auth_mode(root: &RunRoot) -> u32 {
    std::fs::metadata(root.agent_dir.join("auth.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// A run root whose default model is `kimi-coding/fake-kimi`, served by `fake`, with an
/// expired Kimi Code OAuth entry and an unrelated API key entry.
fn kimi_root(fake: &FakeLlm) -> RunRoot {
    let root = RunRoot::with_model(fake.port(), "kimi-coding/fake-kimi");
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"kimi-coding": {
            "api": "openai-completions",
            "baseUrl": format!("http://127.0.0.1:{}/v1", fake.port()),
            "models": [{"id": "fake-kimi", "name": "Fake Kimi"}]}}}),
    );
    root.write_agent_file(
        "auth.json",
        &json!({
            "kimi-coding": {"type": "oauth", "access": "old-access", "refresh": "old-refresh", "expires": 1000},
            "openai": {"type": "api_key", "key": "sk-keep"}
        }),
    );
    root
}

#[test]
fn two_processes_racing_an_expired_token_refresh_once_and_both_use_the_new_token() {
    let fake = FakeLlm::spawn(Script::new([Turn::text("one"), Turn::text("two")])).unwrap();
    // The token endpoint answers slowly, so the second process waits on the lock while the
    // first refreshes.
    let oauth = FakeOAuth::start(vec![(
        "/api/oauth/token",
        vec![Answer {
            delay_ms: 700,
            ..ok(
                json!({"access_token": "new-access", "refresh_token": "new-refresh", "expires_in": 3600}),
            )
        }],
    )]);
    let root = kimi_root(&fake);
    let host = oauth.origin();
    let spawn = || {
        Command::new(pi_bin())
            .args(["--no-session", "-p", "hi"])
            .current_dir(&root.cwd)
            .env_clear()
            .envs(root.env())
            .env("KIMI_CODE_OAUTH_HOST", &host)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pi")
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for out in [&a, &b] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let refreshes = oauth.seen("/api/oauth/token");
    assert_eq!(refreshes.len(), 1, "{refreshes:?}");
    let body = &refreshes[0].body;
    assert!(body.contains("grant_type=refresh_token"), "{body}");
    assert!(body.contains("refresh_token=old-refresh"), "{body}");
    assert!(
        body.contains("client_id=17e5f671-d194-4dfb-9706-5516cb48c098"),
        "{body}"
    );
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.header("authorization"), Some("Bearer new-access"));
    }
    let auth = read_auth(&root);
    assert_eq!(auth["kimi-coding"]["access"], "new-access");
    assert_eq!(auth["kimi-coding"]["refresh"], "new-refresh");
    let expires = auth["kimi-coding"]["expires"].as_i64().unwrap();
    let now = pi_ai::now_ms();
    assert!(
        expires > now + 3_000_000 && expires <= now + 3_600_000,
        "{expires}"
    );
    assert_eq!(auth["openai"], json!({"type": "api_key", "key": "sk-keep"}));
    assert_eq!(auth_mode(&root), 0o600);
}

#[test]
fn an_unexpired_token_is_used_without_refreshing() {
    let fake = FakeLlm::spawn(Script::new([Turn::text("one")])).unwrap();
    let oauth = FakeOAuth::start(vec![]);
    let root = kimi_root(&fake);
    let far = pi_ai::now_ms() + 3_600_000;
    root.write_agent_file(
        "auth.json",
        &json!({"kimi-coding": {"type": "oauth", "access": "live", "refresh": "r", "expires": far}}),
    );
    let (rc, _, stderr) = run(
        &root,
        &["--no-session", "-p", "hi"],
        "",
        &[("KIMI_CODE_OAUTH_HOST", &oauth.origin())],
    );
    assert_eq!(rc, 0, "{stderr}");
    assert!(oauth.seen("/api/oauth/token").is_empty());
    assert_eq!(
        fake.llm_requests()[0].header("authorization"),
        Some("Bearer live")
    );
}

#[test]
fn a_failed_refresh_ends_the_turn_with_upstreams_error_text() {
    let fake = FakeLlm::spawn(Script::new([Turn::text("never")])).unwrap();
    let oauth = FakeOAuth::start(vec![(
        "/api/oauth/token",
        vec![status(
            400,
            json!({"error": "invalid_request", "error_description": "bad"}),
        )],
    )]);
    let root = kimi_root(&fake);
    let host = oauth.origin();
    let mut agent = root.spawn_with_env(false, &[], &[("KIMI_CODE_OAUTH_HOST", &host)]);
    let resp = agent.request(json!({"id": "1", "type": "prompt", "message": "hi"}));
    assert_eq!(resp["success"], true, "{resp}");
    let end = agent.wait_for(
        |e| e["type"] == "message_end" && e["message"]["role"] == "assistant",
        LIVENESS,
    );
    assert_eq!(end["message"]["stopReason"], "error");
    assert_eq!(
        end["message"]["errorMessage"],
        "OAuth refresh failed for kimi-coding: Kimi Code token refresh failed with status 400: {\"error\":\"invalid_request\",\"error_description\":\"bad\"}"
    );
    agent.wait_event("agent_settled");
    assert!(fake.llm_requests().is_empty());
    assert_eq!(read_auth(&root)["kimi-coding"]["access"], "old-access");
}

/// A bare run root (no models.json) with `auth` as auth.json.
fn auth_root(auth: Value) -> RunRoot {
    let root = RunRoot::new(1);
    std::fs::remove_file(root.agent_dir.join("models.json")).unwrap();
    root.write_agent_file("settings.json", &json!({}));
    root.write_agent_file("auth.json", &auth);
    root
}

/// A JWT-shaped token carrying ChatGPT account id `acct-1`.
fn codex_jwt() -> String {
    use base64::Engine;
    let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-1"}});
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.sig",
        b.encode(br#"{"alg":"none"}"#),
        b.encode(claims.to_string())
    )
}

#[test]
fn print_bearer_token_refreshes_each_provider_as_upstream_does() {
    let jwt = codex_jwt();
    let oauth = FakeOAuth::start(vec![
        (
            "/v1/oauth/token",
            vec![ok(
                json!({"access_token": "sk-ant-oat-new", "refresh_token": "ant-r2", "expires_in": 28800}),
            )],
        ),
        (
            "/oauth/token",
            vec![ok(
                json!({"access_token": jwt, "refresh_token": "codex-r2", "expires_in": 864000}),
            )],
        ),
        (
            "/oauth2/token",
            // xAI may leave the refresh token out when it does not rotate it.
            vec![ok(json!({"access_token": "xai-new", "expires_in": 7200}))],
        ),
        (
            "/copilot_internal/v2/token",
            vec![ok(
                json!({"token": "tid=1;exp=9;proxy-ep=proxy.enterprise.githubcopilot.com;", "expires_at": 4102444800u64}),
            )],
        ),
        (
            "/models",
            vec![ok(json!({"data": [
                {"id": "gpt-x", "model_picker_enabled": true, "policy": {"state": "enabled"}},
                {"id": "off", "model_picker_enabled": true, "policy": {"state": "disabled"}},
                {"id": "no-tools", "model_picker_enabled": true, "capabilities": {"supports": {"tool_calls": false}}}
            ]}))],
        ),
    ]);
    let expired =
        |r: &str| json!({"type": "oauth", "access": "old", "refresh": r, "expires": 1000});
    let root = auth_root(json!({
        "anthropic": expired("ant-r1"),
        "openai-codex": expired("codex-r1"),
        "xai": expired("xai-r1"),
        "github-copilot": expired("gh-token"),
    }));
    let env = [("PI_TEST_OAUTH_ORIGIN", oauth.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let print = |p: &str| {
        run(
            &root,
            &["auth", "print-bearer-token", "--provider", p],
            "",
            &env,
        )
    };
    assert_eq!(
        print("anthropic"),
        (0, "sk-ant-oat-new\n".into(), String::new())
    );
    assert_eq!(
        print("openai-codex"),
        (0, format!("{jwt}\n"), String::new())
    );
    assert_eq!(print("xai"), (0, "xai-new\n".into(), String::new()));
    assert_eq!(
        print("github-copilot"),
        (
            0,
            "tid=1;exp=9;proxy-ep=proxy.enterprise.githubcopilot.com;\n".into(),
            String::new()
        )
    );

    let ant = &oauth.seen("/v1/oauth/token")[0];
    assert_eq!(ant.method, "POST");
    let body: Value = serde_json::from_str(&ant.body).unwrap();
    assert_eq!(
        body,
        json!({"grant_type": "refresh_token", "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e", "refresh_token": "ant-r1"})
    );
    let codex = &oauth.seen("/oauth/token")[0];
    assert_eq!(
        codex.body,
        "grant_type=refresh_token&refresh_token=codex-r1&client_id=app_EMoamEEZ73f0CkXaXp7hrann"
    );
    let xai = &oauth.seen("/oauth2/token")[0];
    assert_eq!(
        xai.body,
        "grant_type=refresh_token&client_id=b1a00492-073a-47ea-816f-4c329264a828&refresh_token=xai-r1"
    );
    let gh = &oauth.seen("/copilot_internal/v2/token")[0];
    assert_eq!(gh.method, "GET");
    assert_eq!(gh.headers["authorization"], "Bearer gh-token");
    assert_eq!(gh.headers["editor-version"], "vscode/1.107.0");
    let models = &oauth.seen("/models")[0];
    assert_eq!(
        models.headers["authorization"],
        "Bearer tid=1;exp=9;proxy-ep=proxy.enterprise.githubcopilot.com;"
    );

    let auth = read_auth(&root);
    let now = pi_ai::now_ms();
    let near = |v: &Value, ms: i64| {
        let e = v.as_i64().unwrap();
        (e - (now + ms)).abs() < 120_000
    };
    assert_eq!(auth["anthropic"]["refresh"], "ant-r2");
    assert!(near(&auth["anthropic"]["expires"], 28_800_000 - 300_000));
    assert_eq!(auth["openai-codex"]["accountId"], "acct-1");
    assert_eq!(auth["openai-codex"]["refresh"], "codex-r2");
    assert!(near(&auth["openai-codex"]["expires"], 864_000_000));
    assert_eq!(auth["xai"]["refresh"], "xai-r1");
    assert!(near(&auth["xai"]["expires"], 7_200_000 - 300_000));
    assert_eq!(auth["github-copilot"]["refresh"], "gh-token");
    assert_eq!(
        auth["github-copilot"]["expires"],
        json!(4102444800i64 * 1000 - 300_000)
    );
    assert_eq!(
        auth["github-copilot"]["availableModelIds"],
        json!(["gpt-x"])
    );
    assert_eq!(auth_mode(&root), 0o600);

    // Now fresh: printed without another refresh.
    assert_eq!(print("anthropic").0, 0);
    assert_eq!(oauth.seen("/v1/oauth/token").len(), 1);
}

#[test]
fn failed_refreshes_in_auth_commands_answer_as_upstream() {
    let oauth = FakeOAuth::start(vec![(
        "/api/oauth/token",
        vec![status(400, json!({"error": "invalid_request"}))],
    )]);
    let entry =
        json!({"kimi-coding": {"type": "oauth", "access": "old", "refresh": "r", "expires": 1000}});
    let root = auth_root(entry);
    let env = [("KIMI_CODE_OAUTH_HOST", oauth.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = |a: &str| -> Vec<String> { a.split(' ').map(str::to_string).collect() };
    let go = |a: &str| {
        let a = args(a);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run(&root, &a, "", &env)
    };
    assert_eq!(
        go("auth print-bearer-token --provider kimi-coding"),
        (
            1,
            String::new(),
            "Error: Failed to resolve credential\n".into()
        )
    );
    assert_eq!(
        go("auth check --provider kimi-coding --json"),
        (
            2,
            "{\"status\":\"invalid\",\"provider\":\"kimi-coding\",\"reason\":\"invalid_state\"}\n"
                .into(),
            String::new()
        )
    );
    assert_eq!(
        go("auth check --provider kimi-coding --json --no-refresh --credentials"),
        (
            0,
            "{\"status\":\"ready\",\"provider\":\"kimi-coding\",\"authType\":\"oauth\",\"credentials\":\"old\"}\n".into(),
            String::new()
        )
    );
    // A refreshed token that still has less than --min-expiry left is refused.
    let short = FakeOAuth::start(vec![(
        "/api/oauth/token",
        vec![ok(
            json!({"access_token": "a2", "refresh_token": "r2", "expires_in": 3600}),
        )],
    )]);
    let (rc, out, err) = run(
        &root,
        &[
            "auth",
            "print-bearer-token",
            "--provider",
            "kimi-coding",
            "--min-expiry",
            "2h",
        ],
        "",
        &[("KIMI_CODE_OAUTH_HOST", &short.origin())],
    );
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (1, "", "Error: Failed to resolve credential\n")
    );
    assert_eq!(short.seen("/api/oauth/token").len(), 1);
}

#[test]
fn copilot_device_login_polls_as_told_and_stores_the_entry() {
    let oauth = FakeOAuth::start(vec![
        (
            "/login/device/code",
            vec![ok(json!({"device_code": "dev-1", "user_code": "ABCD-1234",
                "verification_uri": "https://github.com/login/device", "interval": 1, "expires_in": 60}))],
        ),
        (
            "/login/oauth/access_token",
            vec![
                ok(json!({"error": "authorization_pending"})),
                ok(json!({"error": "slow_down", "interval": 2})),
                ok(json!({"access_token": "gho_user", "token_type": "bearer"})),
            ],
        ),
        (
            "/copilot_internal/v2/token",
            vec![ok(
                json!({"token": "tid=9;exp=1", "expires_at": 4102444800u64}),
            )],
        ),
        (
            "/models",
            vec![ok(
                json!({"data": [{"id": "m1", "model_picker_enabled": true}]}),
            )],
        ),
    ]);
    let root = auth_root(json!({"anthropic": {"type": "api_key", "key": "sk-ant-keep"}}));
    let start = Instant::now();
    let (rc, stdout, stderr) = run(
        &root,
        &["auth", "login", "github-copilot"],
        "\n",
        &[("PI_TEST_OAUTH_ORIGIN", &oauth.origin())],
    );
    assert_eq!(rc, 0, "{stderr}");
    let path = root.agent_dir.join("auth.json");
    assert_eq!(
        stdout,
        format!(
            "Open https://github.com/login/device and enter code: ABCD-1234\nWaiting for authentication...\nLogged in to GitHub Copilot. Credentials saved to {}\n",
            path.display()
        )
    );
    assert!(
        stderr
            .starts_with("GitHub Enterprise URL/domain (blank for github.com) (company.ghe.com): "),
        "{stderr}"
    );
    let code = &oauth.seen("/login/device/code")[0];
    assert_eq!(
        code.body,
        "client_id=Iv1.b507a08c87ecfe98&scope=read%3Auser"
    );
    let polls = oauth.seen("/login/oauth/access_token");
    assert_eq!(polls.len(), 3);
    assert_eq!(
        polls[0].body,
        "client_id=Iv1.b507a08c87ecfe98&device_code=dev-1&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code"
    );
    // Waits `interval` before the first poll and between polls; `slow_down` sets 2 s.
    let gap = |a: Instant, b: Instant| b.duration_since(a);
    assert!(gap(code.at, polls[0].at) >= Duration::from_millis(950));
    assert!(gap(polls[0].at, polls[1].at) >= Duration::from_millis(950));
    assert!(gap(polls[1].at, polls[2].at) >= Duration::from_millis(1950));
    assert!(start.elapsed() < LIVENESS);
    let auth = read_auth(&root);
    assert_eq!(auth["github-copilot"]["type"], "oauth");
    assert_eq!(auth["github-copilot"]["access"], "tid=9;exp=1");
    assert_eq!(auth["github-copilot"]["refresh"], "gho_user");
    assert_eq!(auth["github-copilot"]["availableModelIds"], json!(["m1"]));
    assert_eq!(auth["anthropic"]["key"], "sk-ant-keep");
    assert_eq!(auth_mode(&root), 0o600);

    // logout removes that one entry and keeps the other.
    let (rc, stdout, _) = run(&root, &["auth", "logout", "github-copilot"], "", &[]);
    assert_eq!(
        (rc, stdout.as_str()),
        (0, "Logged out of GitHub Copilot.\n")
    );
    let auth = read_auth(&root);
    assert!(auth.get("github-copilot").is_none());
    assert_eq!(auth["anthropic"]["key"], "sk-ant-keep");
}

#[test]
fn an_expired_device_code_fails_the_login_and_stores_nothing() {
    let oauth = FakeOAuth::start(vec![
        (
            "/login/device/code",
            vec![ok(json!({"device_code": "d", "user_code": "U-1",
                "verification_uri": "https://github.com/login/device", "interval": 1, "expires_in": 60}))],
        ),
        (
            "/login/oauth/access_token",
            vec![ok(
                json!({"error": "expired_token", "error_description": "The device code has expired."}),
            )],
        ),
    ]);
    let root = auth_root(json!({}));
    let (rc, _, stderr) = run(
        &root,
        &["auth", "login", "github-copilot"],
        "\n",
        &[("PI_TEST_OAUTH_ORIGIN", &oauth.origin())],
    );
    assert_eq!(rc, 1);
    assert!(
        stderr.ends_with("Failed to log in to GitHub Copilot: Device flow failed: expired_token: The device code has expired.\n"),
        "{stderr}"
    );
    assert_eq!(read_auth(&root), json!({}));
}

#[test]
fn kimi_device_login_uses_upstreams_host_variable() {
    let oauth = FakeOAuth::start(vec![
        (
            "/api/oauth/device_authorization",
            vec![ok(json!({"device_code": "kd", "user_code": "KIMI-1",
                "verification_uri": "https://www.kimi.com/code/authorize_device",
                "verification_uri_complete": "https://www.kimi.com/code/authorize_device?user_code=KIMI-1",
                "interval": 1, "expires_in": 60}))],
        ),
        (
            "/api/oauth/token",
            vec![
                ok(json!({"error": "authorization_pending"})),
                ok(json!({"access_token": "kimi-a", "refresh_token": "kimi-r", "expires_in": 900})),
            ],
        ),
    ]);
    let root = auth_root(json!({}));
    let (rc, stdout, stderr) = run(
        &root,
        &["auth", "login", "kimi-coding"],
        "",
        &[("KIMI_CODE_OAUTH_HOST", &oauth.origin())],
    );
    assert_eq!(rc, 0, "{stderr}");
    assert!(
        stdout.starts_with("Open https://www.kimi.com/code/authorize_device?user_code=KIMI-1 and enter code: KIMI-1\nWaiting for authentication...\nLogged in to Kimi For Coding."),
        "{stdout}"
    );
    let auth = read_auth(&root);
    assert_eq!(auth["kimi-coding"]["access"], "kimi-a");
    assert_eq!(auth["kimi-coding"]["refresh"], "kimi-r");
    assert_eq!(oauth.seen("/api/oauth/token").len(), 2);
}

#[test]
fn login_arguments_answer_as_upstream() {
    let root = auth_root(json!({}));
    let go = |args: &[&str]| run(&root, args, "", &[]);
    let usage = "Usage: pi auth login <provider> [--api-key] [--no-browser]\n";
    assert_eq!(go(&["auth", "login"]), (1, String::new(), usage.into()));
    assert_eq!(
        go(&["auth", "login", "a", "b"]),
        (1, String::new(), usage.into())
    );
    assert_eq!(
        go(&["auth", "login", "xai", "--bogus"]),
        (1, String::new(), usage.into())
    );
    assert_eq!(
        go(&["auth", "login", "xai", "--api-key", "--no-browser"]),
        (
            1,
            String::new(),
            "--no-browser only applies to account sign-in; omit it with --api-key.\n".into()
        )
    );
    assert_eq!(
        go(&["auth", "login", "openai-codex", "--api-key"]),
        (
            1,
            String::new(),
            "OpenAI Codex has no API key login. Omit --api-key to sign in.\n".into()
        )
    );
}

#[test]
fn anthropic_auth_token_goes_out_as_a_bearer_token() {
    let fake = FakeLlm::spawn(Script::new([Turn::text("one"), Turn::text("two")])).unwrap();
    let root = RunRoot::with_model(fake.port(), "anthropic/fake-claude-x");
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"anthropic": {
            "api": "anthropic-messages",
            "baseUrl": format!("http://127.0.0.1:{}", fake.port()),
            "models": [{"id": "fake-claude-x", "name": "Fake Claude X"}]}}}),
    );
    let (rc, _, stderr) = run(
        &root,
        &["--no-session", "-p", "hi"],
        "",
        &[
            ("ANTHROPIC_AUTH_TOKEN", "tok-123"),
            ("ANTHROPIC_API_KEY", "sk-ant-api-ignored"),
        ],
    );
    assert_eq!(rc, 0, "{stderr}");
    let req = &fake.llm_requests()[0];
    assert_eq!(req.header("authorization"), Some("Bearer tok-123"));
    assert_eq!(req.header("x-api-key"), None);
    // A stored key owns the provider: the variable is not used then.
    root.write_agent_file(
        "auth.json",
        &json!({"anthropic": {"type": "api_key", "key": "sk-ant-stored"}}),
    );
    let (rc, _, stderr) = run(
        &root,
        &["--no-session", "-p", "hi"],
        "",
        &[("ANTHROPIC_AUTH_TOKEN", "tok-123")],
    );
    assert_eq!(rc, 0, "{stderr}");
    let req = &fake.llm_requests()[1];
    assert_eq!(req.header("x-api-key"), Some("sk-ant-stored"));
    assert_eq!(req.header("authorization"), None);
}

#[test]
fn a_device_code_that_runs_out_while_pending_times_out() {
    let oauth = FakeOAuth::start(vec![
        (
            "/api/oauth/device_authorization",
            vec![ok(json!({"device_code": "kd", "user_code": "K-2",
                "verification_uri": "https://www.kimi.com/d",
                "verification_uri_complete": "https://www.kimi.com/d?c=K-2",
                "interval": 1, "expires_in": 2}))],
        ),
        (
            "/api/oauth/token",
            vec![ok(json!({"error": "authorization_pending"}))],
        ),
    ]);
    let root = auth_root(json!({}));
    let (rc, _, stderr) = run(
        &root,
        &["auth", "login", "kimi-coding"],
        "",
        &[("KIMI_CODE_OAUTH_HOST", &oauth.origin())],
    );
    assert_eq!(rc, 1);
    assert_eq!(
        stderr,
        "Failed to log in to Kimi For Coding: Device flow timed out\n"
    );
    let polls = oauth.seen("/api/oauth/token").len();
    assert!((1..=2).contains(&polls), "{polls} polls");
    assert_eq!(read_auth(&root), json!({}));
}

/// Plays the browser: one raw GET to the loopback callback; (status line, body).
fn browser_get(url: &str) -> (String, String) {
    use std::io::Read;
    let rest = url.strip_prefix("http://").unwrap();
    let (hostport, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(hostport).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

fn query_of(url: &str, key: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// A started `pi auth login …`: the child, its stdout reader, what it printed up to and with the
/// authorize URL, and the URL.
struct Login {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    printed: String,
    url: String,
}

impl Login {
    /// Starts `pi auth login <args>` against `oauth` and reads up to the authorize URL (the
    /// line after `Open this URL to sign in:`).
    fn start(root: &RunRoot, oauth: &FakeOAuth, args: &[&str]) -> Login {
        use std::io::BufRead;
        let mut child = Command::new(pi_bin())
            .args(["auth", "login"])
            .args(args)
            .current_dir(&root.cwd)
            .env_clear()
            .envs(root.env())
            .env("PI_TEST_OAUTH_ORIGIN", oauth.origin())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pi");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut printed = String::new();
        let mut next = false;
        let url = loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("no authorize URL in {printed:?}; stderr {err:?}");
            }
            printed.push_str(&line);
            if next {
                break line.trim().to_string();
            }
            next = line.trim_end() == "Open this URL to sign in:";
        };
        Login {
            child,
            out,
            printed,
            url,
        }
    }

    fn param(&self, key: &str) -> Option<String> {
        query_of(&self.url, key)
    }

    fn paste(&mut self, line: &str) {
        let mut stdin = self.child.stdin.take().unwrap();
        writeln!(stdin, "{line}").unwrap();
    }

    /// Waits for the exit; (success, rest of stdout, stderr).
    fn finish(mut self) -> (bool, String, String) {
        use std::io::Read;
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let mut err = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status.success(), rest, err)
    }
}

/// Starts `pi auth login openrouter` against `oauth`; returns the child, its stdout reader and
/// the authorize URL it printed.
fn start_openrouter_login(
    root: &RunRoot,
    oauth: &FakeOAuth,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    String,
) {
    let login = Login::start(root, oauth, &["openrouter"]);
    assert!(
        login
            .printed
            .starts_with("Listening for OpenRouter OAuth callback on http://127.0.0.1:"),
        "{}",
        login.printed
    );
    (login.child, login.out, login.url)
}

fn challenge_of(verifier: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

#[test]
fn openrouter_browser_login_exchanges_the_callback_code_with_the_pkce_verifier() {
    use std::io::Read;
    let oauth = FakeOAuth::start(vec![(
        "/api/v1/auth/keys",
        vec![ok(json!({"key": "sk-or-v1-minted"}))],
    )]);
    let root = auth_root(json!({"anthropic": {"type": "api_key", "key": "sk-ant-keep"}}));
    let (mut child, mut out, url) = start_openrouter_login(&root, &oauth);
    assert!(
        url.starts_with(&format!("{}/auth?", oauth.origin())),
        "{url}"
    );
    assert_eq!(
        query_of(&url, "code_challenge_method").as_deref(),
        Some("S256")
    );
    let challenge = query_of(&url, "code_challenge").unwrap();
    let callback = query_of(&url, "callback_url").unwrap();
    assert!(callback.contains("/oauth/callback/"), "{callback}");
    // A request on another path (OpenRouter sends no `state`; the random path stands in) is
    // refused and the sign-in goes on waiting.
    let stray = callback.rsplit_once('/').unwrap().0.to_string() + "/not-the-one?code=stolen";
    let (line, _) = browser_get(&stray);
    assert!(line.contains("404"), "{line}");
    assert!(oauth.seen("/api/v1/auth/keys").is_empty());
    let (line, body) = browser_get(&format!("{callback}?code=code-123"));
    assert!(line.contains("200"), "{line}");
    assert!(body.contains("OpenRouter sign-in complete"), "{body}");
    let status = child.wait().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{err}");
    let path = root.agent_dir.join("auth.json");
    assert!(
        rest.ends_with(&format!(
            "Logged in to OpenRouter. Credentials saved to {}\n",
            path.display()
        )),
        "{rest}"
    );
    let seen = oauth.seen("/api/v1/auth/keys");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    let sent: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(sent["code"], "code-123");
    assert_eq!(sent["code_challenge_method"], "S256");
    assert_eq!(
        challenge_of(sent["code_verifier"].as_str().unwrap()),
        challenge
    );
    let auth = read_auth(&root);
    assert_eq!(
        auth["openrouter"],
        json!({"type": "oauth", "access": "sk-or-v1-minted", "refresh": "", "expires": 9007199254740991i64})
    );
    assert_eq!(auth["anthropic"]["key"], "sk-ant-keep");
    assert_eq!(auth_mode(&root), 0o600);
}

#[test]
fn openrouter_login_takes_a_pasted_redirect_url_and_reports_a_failed_exchange() {
    use std::io::Read;
    let oauth = FakeOAuth::start(vec![(
        "/api/v1/auth/keys",
        vec![status(
            403,
            json!({"error": {"message": "code_verifier mismatch"}}),
        )],
    )]);
    let root = auth_root(json!({}));
    let (mut child, _out, url) = start_openrouter_login(&root, &oauth);
    let callback = query_of(&url, "callback_url").unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{callback}?code=pasted-9").unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success());
    assert!(
        err.contains("Failed to log in to OpenRouter: OpenRouter OAuth key exchange failed (HTTP 403): code_verifier mismatch"),
        "{err}"
    );
    let seen = oauth.seen("/api/v1/auth/keys");
    assert_eq!(seen.len(), 1);
    let sent: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(sent["code"], "pasted-9");
    assert!(
        !root.agent_dir.join("auth.json").exists() || read_auth(&root).get("openrouter").is_none()
    );
}

/// Serialises the tests whose sign-in listens on a fixed port (Anthropic's 53692, Codex's
/// 1455).
static FIXED_PORTS: Mutex<()> = Mutex::new(());

fn fixed_ports() -> std::sync::MutexGuard<'static, ()> {
    FIXED_PORTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A field of a form-encoded request body.
fn form_of(body: &str, key: &str) -> Option<String> {
    query_of(&format!("http://form.invalid/?{body}"), key)
}

const ANTHROPIC_SCOPES: &str = "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload";

fn anthropic_token_answer() -> Answer {
    ok(json!({"access_token": "sk-ant-oat-1", "refresh_token": "sk-ant-ort-1", "expires_in": 3600}))
}

/// Checks the parameters of an Anthropic authorize URL; returns its `state` (the verifier).
fn check_anthropic_authorize(login: &Login, oauth: &FakeOAuth, redirect: &str) -> String {
    assert!(
        login
            .url
            .starts_with(&format!("{}/oauth/authorize?", oauth.origin())),
        "{}",
        login.url
    );
    assert_eq!(login.param("code").as_deref(), Some("true"));
    assert_eq!(
        login.param("client_id").as_deref(),
        Some("9d1c250a-e61b-44d9-88ed-5944d1962f5e")
    );
    assert_eq!(login.param("response_type").as_deref(), Some("code"));
    assert_eq!(login.param("redirect_uri").as_deref(), Some(redirect));
    assert_eq!(login.param("scope").as_deref(), Some(ANTHROPIC_SCOPES));
    assert_eq!(
        login.param("code_challenge_method").as_deref(),
        Some("S256")
    );
    let state = login.param("state").unwrap();
    // Upstream sends the PKCE verifier as the state.
    assert_eq!(challenge_of(&state), login.param("code_challenge").unwrap());
    state
}

/// Checks the one Anthropic code exchange the fake received and the stored entry.
fn check_anthropic_exchange(
    oauth: &FakeOAuth,
    root: &RunRoot,
    code: &str,
    state: &str,
    redirect: &str,
    started_ms: i64,
) {
    let seen = oauth.seen("/v1/oauth/token");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    let sent: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(
        sent,
        json!({"grant_type": "authorization_code",
            "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
            "code": code, "state": state, "redirect_uri": redirect, "code_verifier": state})
    );
    let auth = read_auth(root);
    let entry = &auth["anthropic"];
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["access"], "sk-ant-oat-1");
    assert_eq!(entry["refresh"], "sk-ant-ort-1");
    // One hour less upstream's five minutes of margin.
    let expires = entry["expires"].as_i64().unwrap();
    let lifetime = 3_600_000 - 300_000;
    assert!(
        (started_ms + lifetime..=pi_ai::now_ms() + lifetime).contains(&expires),
        "{expires}"
    );
    assert_eq!(auth_mode(root), 0o600);
}

#[test]
fn anthropic_browser_login_refuses_a_wrong_state_and_exchanges_the_code_with_the_verifier() {
    let _ports = fixed_ports();
    let oauth = FakeOAuth::start(vec![("/v1/oauth/token", vec![anthropic_token_answer()])]);
    let root = auth_root(json!({"openrouter": {"type": "api_key", "key": "sk-or-keep"}}));
    let started = pi_ai::now_ms();
    let login = Login::start(&root, &oauth, &["anthropic"]);
    assert_eq!(
        login.printed,
        format!("Open this URL to sign in:\n  {}\n", login.url)
    );
    let redirect = "http://localhost:53692/callback";
    let state = check_anthropic_authorize(&login, &oauth, redirect);
    // The browser plays the redirect: another state is refused and the sign-in waits on.
    let (line, body) = browser_get(&format!("{redirect}?code=stolen&state=not-the-state"));
    assert!(line.contains("400"), "{line}");
    assert!(body.contains("State mismatch"), "{body}");
    let (line, _) = browser_get(&format!(
        "http://localhost:53692/elsewhere?code=x&state={state}"
    ));
    assert!(line.contains("404"), "{line}");
    assert!(oauth.seen("/v1/oauth/token").is_empty());
    let (line, _) = browser_get(&format!("{redirect}?code=ac-1&state={state}"));
    assert!(line.contains("200"), "{line}");
    let (ok, rest, err) = login.finish();
    assert!(ok, "{err}");
    assert_eq!(
        rest,
        format!(
            "Complete login in your browser. If the browser is on another machine, paste the final redirect URL here.\n\
             To use \"Copy code login (headless)\" instead, run \"pi auth login anthropic --no-browser\"\n\
             Exchanging authorization code for tokens...\n\
             Logged in to Anthropic. Credentials saved to {}\n",
            root.agent_dir.join("auth.json").display()
        )
    );
    check_anthropic_exchange(&oauth, &root, "ac-1", &state, redirect, started);
    assert_eq!(read_auth(&root)["openrouter"]["key"], "sk-or-keep");
}

#[test]
fn anthropic_login_falls_back_to_a_free_port_when_53692_is_taken() {
    let _ports = fixed_ports();
    let _taken = std::net::TcpListener::bind("127.0.0.1:53692").unwrap();
    let oauth = FakeOAuth::start(vec![("/v1/oauth/token", vec![anthropic_token_answer()])]);
    let root = auth_root(json!({}));
    let started = pi_ai::now_ms();
    let login = Login::start(&root, &oauth, &["anthropic"]);
    let redirect = login.param("redirect_uri").unwrap();
    let port: u16 = redirect
        .strip_prefix("http://localhost:")
        .and_then(|r| r.strip_suffix("/callback"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{redirect}"));
    assert_ne!(port, 53692);
    let state = check_anthropic_authorize(&login, &oauth, &redirect);
    let (line, _) = browser_get(&format!("{redirect}?code=ac-2&state={state}"));
    assert!(line.contains("200"), "{line}");
    let (ok, _, err) = login.finish();
    assert!(ok, "{err}");
    check_anthropic_exchange(&oauth, &root, "ac-2", &state, &redirect, started);
}

#[test]
fn anthropic_login_takes_a_pasted_redirect_url_or_copied_code_and_refuses_another_state() {
    let _ports = fixed_ports();
    let oauth = FakeOAuth::start(vec![("/v1/oauth/token", vec![anthropic_token_answer()])]);
    // The browser method, the redirect URL pasted (the callback port does not matter here).
    let root = auth_root(json!({}));
    let started = pi_ai::now_ms();
    let mut login = Login::start(&root, &oauth, &["anthropic"]);
    let redirect = login.param("redirect_uri").unwrap();
    let state = check_anthropic_authorize(&login, &oauth, &redirect);
    login.paste(&format!("{redirect}?code=pasted-1&state={state}"));
    let (ok, _, err) = login.finish();
    assert!(ok, "{err}");
    check_anthropic_exchange(&oauth, &root, "pasted-1", &state, &redirect, started);

    // `--no-browser`: the copy-code method, `code#state` pasted.
    let oauth = FakeOAuth::start(vec![("/v1/oauth/token", vec![anthropic_token_answer()])]);
    let root = auth_root(json!({}));
    let mut login = Login::start(&root, &oauth, &["anthropic", "--no-browser"]);
    assert_eq!(
        login.printed,
        format!(
            "Select Anthropic login method: Copy code login (headless)\nOpen this URL to sign in:\n  {}\n",
            login.url
        )
    );
    let copy = "https://platform.claude.com/oauth/code/callback";
    let state = check_anthropic_authorize(&login, &oauth, copy);
    login.paste(&format!("copied-1#{state}"));
    let (ok, rest, err) = login.finish();
    assert!(ok, "{err}");
    assert!(
        rest.starts_with("Complete login in your browser, then copy the code Anthropic shows and paste it here.\nExchanging authorization code for tokens...\nLogged in to Anthropic."),
        "{rest}"
    );
    assert!(
        err.contains("Paste the code Anthropic shows after you sign in: (code#state): "),
        "{err}"
    );
    check_anthropic_exchange(&oauth, &root, "copied-1", &state, copy, started);

    // Another state is refused before any exchange.
    let oauth = FakeOAuth::start(vec![("/v1/oauth/token", vec![anthropic_token_answer()])]);
    let root = auth_root(json!({}));
    let mut login = Login::start(&root, &oauth, &["anthropic", "--no-browser"]);
    login.paste("copied-2#some-other-state");
    let (ok, _, err) = login.finish();
    assert!(!ok);
    assert!(
        err.ends_with("Failed to log in to Anthropic: OAuth state mismatch\n"),
        "{err}"
    );
    assert!(oauth.seen("/v1/oauth/token").is_empty());
    assert_eq!(read_auth(&root), json!({}));
}

const CODEX_REDIRECT: &str = "http://localhost:1455/auth/callback";

fn codex_token_answer() -> Answer {
    ok(json!({"access_token": codex_jwt(), "refresh_token": "cx-refresh", "expires_in": 864000}))
}

/// Checks the parameters of a Codex authorize URL; returns its `state`.
fn check_codex_authorize(login: &Login, oauth: &FakeOAuth) -> String {
    assert!(
        login
            .url
            .starts_with(&format!("{}/oauth/authorize?", oauth.origin())),
        "{}",
        login.url
    );
    for (k, v) in [
        ("response_type", "code"),
        ("client_id", "app_EMoamEEZ73f0CkXaXp7hrann"),
        ("redirect_uri", CODEX_REDIRECT),
        ("scope", "openid profile email offline_access"),
        ("code_challenge_method", "S256"),
        ("id_token_add_organizations", "true"),
        ("codex_cli_simplified_flow", "true"),
        ("originator", "pi"),
    ] {
        assert_eq!(login.param(k).as_deref(), Some(v), "{k} in {}", login.url);
    }
    let state = login.param("state").unwrap();
    assert!(
        state.len() == 32 && state.chars().all(|c| c.is_ascii_hexdigit()),
        "{state}"
    );
    state
}

/// Checks the one Codex code exchange the fake received against the authorize URL's challenge,
/// and the stored entry.
fn check_codex_exchange(oauth: &FakeOAuth, root: &RunRoot, code: &str, challenge: &str) {
    let seen = oauth.seen("/oauth/token");
    assert_eq!(seen.len(), 1);
    let body = &seen[0].body;
    assert_eq!(
        form_of(body, "grant_type").as_deref(),
        Some("authorization_code")
    );
    assert_eq!(
        form_of(body, "client_id").as_deref(),
        Some("app_EMoamEEZ73f0CkXaXp7hrann")
    );
    assert_eq!(form_of(body, "code").as_deref(), Some(code));
    assert_eq!(
        form_of(body, "redirect_uri").as_deref(),
        Some(CODEX_REDIRECT)
    );
    assert_eq!(
        challenge_of(&form_of(body, "code_verifier").unwrap()),
        challenge
    );
    let auth = read_auth(root);
    let entry = &auth["openai-codex"];
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["access"], codex_jwt());
    assert_eq!(entry["refresh"], "cx-refresh");
    assert_eq!(entry["accountId"], "acct-1");
    assert!(entry["expires"].as_i64().unwrap() > pi_ai::now_ms() + 863_000_000);
    assert_eq!(auth_mode(root), 0o600);
}

#[test]
fn codex_browser_login_sends_upstreams_parameters_and_stores_the_account() {
    let _ports = fixed_ports();
    let oauth = FakeOAuth::start(vec![("/oauth/token", vec![codex_token_answer()])]);
    let root = auth_root(json!({}));
    let login = Login::start(&root, &oauth, &["openai-codex"]);
    assert_eq!(
        login.printed,
        format!("Open this URL to sign in:\n  {}\n", login.url)
    );
    let state = check_codex_authorize(&login, &oauth);
    let (line, body) = browser_get(&format!("{CODEX_REDIRECT}?code=stolen&state=0000"));
    assert!(line.contains("400"), "{line}");
    assert!(body.contains("State mismatch"), "{body}");
    assert!(oauth.seen("/oauth/token").is_empty());
    let (line, _) = browser_get(&format!("{CODEX_REDIRECT}?code=cx-1&state={state}"));
    assert!(line.contains("200"), "{line}");
    let challenge = login.param("code_challenge").unwrap();
    let (ok, rest, err) = login.finish();
    assert!(ok, "{err}");
    assert_eq!(
        rest,
        format!(
            "A browser window should open. Complete login to finish.\n\
             To use \"Device code login (headless)\" instead, run \"pi auth login openai-codex --no-browser\"\n\
             Logged in to OpenAI Codex. Credentials saved to {}\n",
            root.agent_dir.join("auth.json").display()
        )
    );
    check_codex_exchange(&oauth, &root, "cx-1", &challenge);
}

#[test]
fn codex_login_with_port_1455_taken_takes_a_pasted_redirect_url_with_its_state() {
    let _ports = fixed_ports();
    let _taken = std::net::TcpListener::bind("127.0.0.1:1455").unwrap();
    let oauth = FakeOAuth::start(vec![("/oauth/token", vec![codex_token_answer()])]);
    let root = auth_root(json!({}));
    // Another state is refused before any exchange.
    let mut login = Login::start(&root, &oauth, &["openai-codex"]);
    check_codex_authorize(&login, &oauth);
    login.paste(&format!(
        "{CODEX_REDIRECT}?code=cx-2&state=0123456789abcdef0123456789abcdef"
    ));
    let (ok, _, err) = login.finish();
    assert!(!ok);
    assert!(
        err.ends_with("Failed to log in to OpenAI Codex: State mismatch\n"),
        "{err}"
    );
    assert!(oauth.seen("/oauth/token").is_empty());
    let mut login = Login::start(&root, &oauth, &["openai-codex"]);
    let state = check_codex_authorize(&login, &oauth);
    let challenge = login.param("code_challenge").unwrap();
    login.paste(&format!("{CODEX_REDIRECT}?code=cx-3&state={state}"));
    let (ok, _, err) = login.finish();
    assert!(ok, "{err}");
    check_codex_exchange(&oauth, &root, "cx-3", &challenge);
}
