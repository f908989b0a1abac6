//! Extension providers beyond endpoints (issue 22; upstream docs/custom-provider.md,
//! docs/extensions.md "pi.registerProvider" / "pi.registerVirtualModel",
//! docs/virtual-models.md): an `oauth` login through `pi auth login`, its token refreshed by
//! the extension before a request once expired (the refresh reaches the fake token endpoint,
//! the new token lands in `auth.json`), `refreshModels` replacing the registration's models
//! with a `models-store.json` snapshot kept across runs, virtual models routed per request
//! with router state on the branch, and upstream's own `jev-router.ts` routing.

use crate::common::*;
use crate::extension_providers::model_ids;
use crate::extensions::upstream_examples;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// Provider `corp` (one `openai-completions` model `corp-1` on the fake at `PORT`) whose
/// `oauth` login asks for a code and trades it at the fake's token endpoint; the stored
/// credential starts expired, so the first request refreshes it. `getApiKey` shows which
/// credential it was given.
const OAUTH_EXT: &str = r#"
const TOKEN = "http://127.0.0.1:PORT/oauth/token";
async function token(body, signal) {
  const r = await fetch(TOKEN, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
  if (!r.ok) throw new Error("token endpoint " + r.status);
  return r.json();
}
export default function (pi) {
  pi.registerProvider("corp", {
    name: "Corp AI",
    baseUrl: "http://127.0.0.1:PORT/v1",
    api: "openai-completions",
    models: [{ id: "corp-1", name: "Corp One", reasoning: false, input: ["text"],
               cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 64000, maxTokens: 2048 }],
    oauth: {
      name: "Corp SSO",
      async login(callbacks) {
        callbacks.onAuth({ url: "http://127.0.0.1:PORT/authorize?client=pi", instructions: "Sign in, then paste the code" });
        callbacks.onProgress("Waiting for the code");
        const code = await callbacks.onPrompt({ message: "Paste the code" });
        const t = await token({ grant_type: "authorization_code", code });
        return { refresh: "refresh-" + code, access: t.access_token, expires: Date.now() - 1000, tenant: "acme" };
      },
      async refreshToken(credentials, signal) {
        if (!(signal instanceof AbortSignal)) throw new Error("no signal");
        const t = await token({ grant_type: "refresh_token", refresh_token: credentials.refresh }, signal);
        return { ...credentials, access: t.access_token, expires: Date.now() + t.expires_in * 1000 };
      },
      getApiKey: (credentials) => "corp:" + credentials.access + ":" + credentials.tenant,
    },
  });
}
"#;

/// `pi <args>` (not RPC) in `root`'s clean environment with `stdin`; (exit code, stdout,
/// stderr).
fn pi(root: &RunRoot, args: &[&str], stdin: &str) -> (i32, String, String) {
    let bin = std::env::var_os("PI_TEST_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_pi")));
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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

fn auth_entry(root: &RunRoot, provider: &str) -> Value {
    let text = std::fs::read_to_string(root.agent_dir.join("auth.json")).unwrap_or_default();
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    v[provider].clone()
}

fn token_requests(fake: &pi_fakellm::FakeLlm) -> Vec<String> {
    fake.requests()
        .into_iter()
        .filter(|r| r.api == "token")
        .map(|r| r.body_text())
        .collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The assistant `message_end` messages of one prompt, after its `agent_settled` (not
/// `agent_end`: a prompt sent between the two can meet the post-run checks still going and be
/// refused as "already processing").
fn prompt(agent: &mut RpcAgent, id: &str, text: &str) -> Vec<Value> {
    agent
        .prompt_settled(id, text)
        .iter()
        .filter(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| v["message"].clone())
        .collect()
}

#[test]
fn an_oauth_provider_logs_in_through_pi_auth_login_and_refreshes_before_a_request() {
    let (fake, root) = setup(
        Script::new([Turn::text("corp answers"), Turn::text("corp again")]),
        DEFAULT_MODEL,
    );
    let port = fake.port().to_string();
    // A global extension: `pi auth` loads the agent directory's extensions.
    std::fs::create_dir_all(root.agent_dir.join("extensions")).unwrap();
    std::fs::write(
        root.agent_dir.join("extensions/corp.js"),
        OAUTH_EXT.replace("PORT", &port),
    )
    .unwrap();

    // Upstream's legacy OAuth callbacks on the terminal: onAuth/onProgress printed, onPrompt
    // read from stdin.
    let (code, out, err) = pi(&root, &["auth", "login", "corp"], "code-123\n");
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(
        out.contains(&format!(
            "Open this URL to sign in:\n  http://127.0.0.1:{port}/authorize?client=pi\nSign in, then paste the code\nWaiting for the code\n"
        )),
        "{out}"
    );
    let auth_path = root.agent_dir.join("auth.json");
    assert!(
        out.contains(&format!(
            "Logged in to Corp AI. Credentials saved to {}",
            auth_path.display()
        )),
        "{out}"
    );
    assert!(err.contains("Paste the code: "), "{err}");
    let tokens = token_requests(&fake);
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    assert!(tokens[0].contains("\"code\":\"code-123\""), "{}", tokens[0]);
    // Stored as upstream stores it: the login's credentials plus `type: "oauth"`.
    let entry = auth_entry(&root, "corp");
    assert_eq!(entry["type"], "oauth", "{entry}");
    assert_eq!(entry["refresh"], "refresh-code-123");
    assert_eq!(entry["tenant"], "acme");
    let first_access = entry["access"].as_str().unwrap().to_string();
    assert!(first_access.starts_with("fake-access-token-"), "{entry}");
    assert!(entry["expires"].as_i64().unwrap() < now_ms());

    // `pi auth check` knows the provider too.
    let (code, out, err) = pi(
        &root,
        &[
            "auth",
            "check",
            "--provider",
            "corp",
            "--json",
            "--no-refresh",
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    let check: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        check,
        json!({"status": "ready", "provider": "corp", "authType": "oauth"})
    );

    // Without `--no-refresh` the check resolves the credential as a request would: the
    // extension refreshes it (the second token request), and it is ready.
    let (code, out, err) = pi(&root, &["auth", "check", "--provider", "corp"], "");
    assert_eq!((code, out.trim()), (0, "ready"), "{err}");
    assert_eq!(token_requests(&fake).len(), 2);
    assert!(auth_entry(&root, "corp")["expires"].as_i64().unwrap() > now_ms());
    // Expired again, so that the first request refreshes it.
    let mut expired = auth_entry(&root, "corp");
    expired["expires"] = json!(1000);
    root.write_agent_file("auth.json", &json!({"corp": expired}));
    let first_access = expired["access"].as_str().unwrap().to_string();

    // The expired credential is refreshed by the extension before the first request.
    let mut agent = root.spawn_with(false, &["--provider", "corp", "--model", "corp-1"]);
    let models = model_ids(&mut agent, "m");
    assert!(models.contains(&"corp/corp-1".to_string()), "{models:?}");
    let m = prompt(&mut agent, "p1", "hello corp");
    assert_eq!(m.len(), 1, "{}", agent.dump());
    assert_eq!(m[0]["provider"], "corp");
    assert_eq!(m[0]["stopReason"], "stop", "{}", m[0]);
    let tokens = token_requests(&fake);
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    assert!(
        tokens[2].contains("\"grant_type\":\"refresh_token\"")
            && tokens[2].contains("\"refresh_token\":\"refresh-code-123\""),
        "{}",
        tokens[2]
    );
    let entry = auth_entry(&root, "corp");
    let access = entry["access"].as_str().unwrap().to_string();
    assert_ne!(access, first_access, "{entry}");
    assert!(entry["expires"].as_i64().unwrap() > now_ms() + 3_000_000);
    assert_eq!(entry["type"], "oauth");
    assert_eq!(entry["tenant"], "acme");
    let llm = fake.llm_requests();
    assert_eq!(
        llm[0].header("authorization"),
        Some(format!("Bearer corp:{access}:acme").as_str()),
        "{:?}",
        llm[0].headers
    );
    // Fresh now: the next request sends the same key without another refresh.
    let m = prompt(&mut agent, "p2", "again");
    assert_eq!(m[0]["stopReason"], "stop", "{}", m[0]);
    assert_eq!(token_requests(&fake).len(), 3);
    assert_eq!(
        fake.llm_requests()[1].header("authorization"),
        Some(format!("Bearer corp:{access}:acme").as_str())
    );
    drop(agent);

    let (code, out, err) = pi(&root, &["auth", "logout", "corp"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Logged out of"), "{out}");
    assert_eq!(auth_entry(&root, "corp"), Value::Null);
}

#[test]
fn a_failed_extension_refresh_ends_the_request_with_upstreams_text() {
    let (fake, root) = setup(Script::new([Turn::text("never")]), DEFAULT_MODEL);
    root.write_cwd_file(
        "ext/corp.js",
        &OAUTH_EXT
            .replace("PORT", &fake.port().to_string())
            .replace("const t = await token({ grant_type: \"refresh_token\"", "throw new Error(\"refresh denied\"); const t = await token({ grant_type: \"refresh_token\""),
    );
    root.write_agent_file(
        "auth.json",
        &json!({"corp": {"type": "oauth", "refresh": "r", "access": "old", "expires": 1000}}),
    );
    let mut agent = root.spawn_with(
        false,
        &[
            "-e",
            "ext/corp.js",
            "--provider",
            "corp",
            "--model",
            "corp-1",
        ],
    );
    let m = prompt(&mut agent, "p", "hi");
    assert_eq!(m[0]["stopReason"], "error", "{}", agent.dump());
    assert_eq!(
        m[0]["errorMessage"],
        "OAuth refresh failed for corp: refresh denied"
    );
    assert!(fake.llm_requests().is_empty());
    assert_eq!(auth_entry(&root, "corp")["access"], "old");
}

/// Provider `dyn` whose `refreshModels` lists models named after its context (credential
/// key, the stored snapshot) and persists a snapshot with `context.publish({persist})`.
const REFRESH_EXT: &str = r#"
export default function (pi) {
  const model = (id, name) => ({ id, name, reasoning: false, input: ["text"],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 64000, maxTokens: 2048 });
  pi.registerProvider("dyn", {
    baseUrl: "http://127.0.0.1:PORT/v1",
    apiKey: "dyn-key",
    api: "openai-completions",
    models: [model("static-1", "Static")],
    async refreshModels(context) {
      if (!(context.signal instanceof AbortSignal)) throw new Error("no signal");
      const runs = (context.stored?.runs ?? 0) + 1;
      await context.publish({ persist: { runs, models: ["live-" + runs] } });
      return [model("live-" + runs, "Live key=" + context.credential?.key + " stored=" + JSON.stringify(context.stored ?? null))];
    },
  });
  pi.registerCommand("add-late", { handler: async () => pi.registerProvider("late", {
    baseUrl: "http://127.0.0.1:PORT/v1", apiKey: "late-key", api: "openai-completions",
    models: [model("late-static", "Late static")],
    refreshModels: async () => [model("late-live", "Late live")],
  }) });
}
"#;

#[test]
fn refresh_models_replaces_the_registrations_models_and_persists_its_snapshot() {
    let (fake, root) = setup(Script::new([Turn::text("live answer")]), DEFAULT_MODEL);
    root.write_cwd_file(
        "ext/dyn.js",
        &REFRESH_EXT.replace("PORT", &fake.port().to_string()),
    );
    let mut agent = root.spawn_with(false, &["-e", "ext/dyn.js"]);
    let r = agent.request(json!({"id": "m", "type": "get_available_models"}));
    let dyn_models: Vec<&Value> = r["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "dyn")
        .collect();
    assert_eq!(dyn_models.len(), 1, "{r}");
    assert_eq!(dyn_models[0]["id"], "live-1");
    assert_eq!(dyn_models[0]["name"], "Live key=dyn-key stored=null");
    let store: Value = serde_json::from_str(
        &std::fs::read_to_string(root.agent_dir.join("models-store.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(store, json!({"dyn": {"runs": 1, "models": ["live-1"]}}));
    let r = agent
        .request(json!({"id": "s", "type": "set_model", "provider": "dyn", "modelId": "live-1"}));
    assert_eq!(r["success"], true, "{r}");
    let m = prompt(&mut agent, "p", "hi");
    assert_eq!(m[0]["model"], "live-1", "{}", agent.dump());
    assert_eq!(fake.llm_requests()[0].body["model"], "live-1");
    // A registration made while the session runs is refreshed at once.
    let r = agent.request(json!({"id": "c", "type": "prompt", "message": "/add-late"}));
    assert_eq!(r["data"]["disposition"], "handled", "{r}");
    let deadline = std::time::Instant::now() + LIVENESS;
    let mut round = 0;
    let late = loop {
        round += 1;
        let late: Vec<String> = model_ids(&mut agent, &format!("ml{round}"))
            .into_iter()
            .filter(|m| m.starts_with("late/"))
            .collect();
        if late == ["late/late-live"] || std::time::Instant::now() > deadline {
            break late;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(late, vec!["late/late-live".to_string()]);
    drop(agent);

    // The next run's refresh sees the stored snapshot.
    let mut agent = root.spawn_with(false, &["-e", "ext/dyn.js"]);
    let r = agent.request(json!({"id": "m", "type": "get_available_models"}));
    let names: Vec<String> = r["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "dyn")
        .map(|m| {
            format!(
                "{}|{}",
                m["id"].as_str().unwrap(),
                m["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![r#"live-2|Live key=dyn-key stored={"runs":1,"models":["live-1"]}"#.to_string()]
    );
}

/// Provider `x` on the fake, and virtual models `router/auto` (routes to `x/y`, counting its
/// requests in router state, naming the reason) and `router/bad` (routes to a model without
/// credentials).
const VIRTUAL_EXT: &str = r#"
export default function (pi) {
  pi.registerProvider("x", {
    baseUrl: "http://127.0.0.1:PORT/v1", apiKey: "x-key", api: "openai-completions",
    models: [{ id: "y", name: "Y", reasoning: true, input: ["text"],
               cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 64000, maxTokens: 2048 }],
  });
  pi.registerVirtualModel({
    provider: "router", id: "auto", name: "Auto", thinkingLevels: ["low", "high"], contextWindow: 1000,
    route(request, ctx) {
      const n = (request.state?.n ?? 0) + 1;
      const model = ctx.modelRegistry.find("x", "y");
      return { model, thinkingLevel: "high", state: { n, reason: request.reason, selected: request.model.id + ":" + request.thinkingLevel, previous: request.previous?.model.id ?? null } };
    },
  });
  pi.registerVirtualModel({
    provider: "router", id: "bad", name: "Bad",
    route() { return { model: { provider: "nope", id: "none" }, thinkingLevel: "off" }; },
  });
}
"#;

#[test]
fn a_virtual_model_routes_each_request_and_keeps_router_state_on_the_branch() {
    let (fake, root) = setup(
        Script::new([
            Turn::text("routed one"),
            Turn::text("routed two"),
            Turn::text("the summary"),
            Turn::text("the summary"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file(
        "ext/router.js",
        &VIRTUAL_EXT.replace("PORT", &fake.port().to_string()),
    );
    // Automatic compaction off (the 1000-token window would start one after a prompt, racing
    // the manual `compact` below); a manual `compact` still runs.
    root.merge_settings(json!({"compaction": {"enabled": false, "keepRecentTokens": 10}}));
    let mut agent = root.spawn_with(true, &["-e", "ext/router.js", "--model", "router/auto"]);
    let r = agent.request(json!({"id": "m", "type": "get_available_models"}));
    let auto = r["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["provider"] == "router" && m["id"] == "auto")
        .cloned()
        .unwrap_or_else(|| panic!("{r}"));
    // Upstream's createVirtualModel entry.
    assert_eq!(
        auto,
        json!({"id": "auto", "name": "Auto", "api": "pi-virtual", "provider": "router", "baseUrl": "",
               "reasoning": true,
               "thinkingLevelMap": {"off": null, "minimal": null, "low": "low", "medium": null, "high": "high", "xhigh": null, "max": null},
               "input": ["text", "image"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
               "contextWindow": 1000, "maxTokens": 0})
    );
    let st = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(st["data"]["model"]["id"], "auto", "{st}");
    assert_eq!(st["data"]["thinkingLevel"], "high");

    let from = agent.len();
    let m = prompt(
        &mut agent,
        "p1",
        "first question, about how requests are routed today",
    );
    assert_eq!(m[0]["provider"], "x", "{}", agent.dump());
    assert_eq!(m[0]["model"], "y");
    assert_eq!(m[0]["api"], "openai-completions");
    let states: Vec<Value> = agent.events()[from..]
        .iter()
        .filter(|v| {
            kind(v) == "entry_appended" && v["entry"]["customType"] == "pi.virtual-model-state"
        })
        .map(|v| v["entry"]["data"].clone())
        .collect();
    assert_eq!(
        states,
        vec![json!({"provider": "router", "modelId": "auto",
                    "state": {"n": 1, "reason": "user", "selected": "auto:high", "previous": null}})]
    );
    let body = &fake.llm_requests()[0].body;
    assert_eq!(body["model"], "y");
    assert_eq!(body["reasoning_effort"], "high", "{body}");

    let from = agent.len();
    let m = prompt(
        &mut agent,
        "p2",
        "second question, about the state the router keeps",
    );
    assert_eq!(m[0]["model"], "y");
    let state = agent.events()[from..]
        .iter()
        .find(|v| kind(v) == "entry_appended")
        .map(|v| v["entry"]["data"]["state"].clone());
    assert_eq!(
        state,
        Some(json!({"n": 2, "reason": "user", "selected": "auto:high", "previous": "y"}))
    );
    // The selection stays virtual.
    let st = agent.request(json!({"id": "s2", "type": "get_state"}));
    assert_eq!(st["data"]["model"]["id"], "auto");

    // A compaction summary is a `direct` request: routed too, its state not stored.
    let from = agent.len();
    let r = agent.request(json!({"id": "c", "type": "compact"}));
    assert_eq!(r["success"], true, "{r}");
    // (One summary request, or two when the cut splits a turn.)
    assert!(
        r["data"]["summary"]
            .as_str()
            .unwrap()
            .contains("the summary"),
        "{r}"
    );
    let summaries = fake.llm_requests();
    assert!(summaries.len() >= 3, "{summaries:?}");
    assert!(summaries[2..].iter().all(|q| q.body["model"] == "y"));
    let sent = summaries.len();
    assert!(
        !agent.events()[from..]
            .iter()
            .any(|v| kind(v) == "entry_appended"
                && v["entry"]["customType"] == "pi.virtual-model-state"),
        "{}",
        agent.dump()
    );

    // A route to a model without credentials ends the request with upstream's text.
    let r = agent
        .request(json!({"id": "b", "type": "set_model", "provider": "router", "modelId": "bad"}));
    assert_eq!(r["success"], true, "{r}");
    let m = prompt(&mut agent, "p3", "third");
    assert_eq!(m[0]["stopReason"], "error");
    assert_eq!(
        m[0]["errorMessage"],
        "Virtual model router/bad routed to nope/none, which has no credentials."
    );
    assert_eq!(fake.llm_requests().len(), sent);
}

/// A Codex access token carrying an account id (as the `openai-codex-responses` recording).
const CODEX_JWT: &str = "eyJhbGciOiAibm9uZSJ9.eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOiB7ImNoYXRncHRfYWNjb3VudF9pZCI6ICJhY2N0LWZha2UtMSJ9fQ.sig";

/// Upstream's `jev-router.ts`, unchanged: without a Jev classifier it plans on
/// `openai-codex/gpt-5.6-terra` and records the phase as router state (as upstream 1.6 does
/// headless against the same fake).
#[test]
fn upstream_jev_router_loads_and_routes_to_its_planning_model() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let (fake, root) = setup(Script::new([Turn::text("a plan")]), DEFAULT_MODEL);
    let mut models = models_json(fake.port());
    models["providers"]["openai-codex"] = json!({
        "baseUrl": format!("http://127.0.0.1:{}/backend-api", fake.port()),
        "apiKey": CODEX_JWT,
    });
    root.write_agent_file("models.json", &models);
    let jev = dir.join("jev-router.ts");
    let mut agent = root.spawn_with(false, &["-e", jev.to_str().unwrap(), "--model", "jev/auto"]);
    let ids = model_ids(&mut agent, "m");
    assert!(ids.contains(&"jev/auto".to_string()), "{ids:?}");
    let st = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(st["data"]["model"]["provider"], "jev", "{st}");
    assert_eq!(st["data"]["model"]["contextWindow"], 272000);
    let from = agent.len();
    let m = prompt(&mut agent, "p", "plan the change");
    assert_eq!(m[0]["provider"], "openai-codex", "{}", agent.dump());
    assert_eq!(m[0]["model"], "gpt-5.6-terra");
    assert_eq!(m[0]["stopReason"], "stop", "{}", m[0]);
    let state = agent.events()[from..]
        .iter()
        .find(|v| {
            kind(v) == "entry_appended" && v["entry"]["customType"] == "pi.virtual-model-state"
        })
        .map(|v| v["entry"]["data"].clone());
    assert_eq!(
        state,
        Some(json!({"provider": "jev", "modelId": "auto",
                    "state": {"phase": "planning", "model": "gpt-5.6-terra"}}))
    );
    let req = &fake.llm_requests()[0];
    assert!(
        req.path_only().ends_with("/codex/responses"),
        "{}",
        req.path
    );
    assert_eq!(req.body["model"], "gpt-5.6-terra");
}

/// A complete provider object (the object form of `pi.registerProvider`): native `auth.oauth`
/// (`login(interaction)`, `refresh`, `toAuth`), a synchronous `getModels()` and a
/// `refreshModels` that publishes an update.
const OBJECT_EXT: &str = r#"
const model = (id) => ({ id, name: "Native " + id, api: "openai-completions", provider: "native",
  baseUrl: "http://127.0.0.1:PORT/v1", reasoning: false, input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 64000, maxTokens: 2048 });
let dynamic = [];
export default function (pi) {
  pi.registerProvider({
    id: "native",
    name: "Native AI",
    baseUrl: "http://127.0.0.1:PORT/v1",
    auth: {
      oauth: {
        name: "Native SSO",
        async login(interaction) {
          interaction.notify({ type: "auth_url", url: "http://127.0.0.1:PORT/native-login" });
          const code = await interaction.prompt({ type: "text", message: "Native code" });
          return { type: "oauth", access: "n-" + code, refresh: "nr", expires: Date.now() + 3600000 };
        },
        async refresh(credential) { return credential; },
        async toAuth(credential) { return { apiKey: "native:" + credential.access }; },
      },
    },
    getModels: () => [model("n1"), ...dynamic],
    async refreshModels(context) {
      await context.publish({ update: () => { dynamic = [model("n2")]; } });
    },
  });
}
"#;

#[test]
fn a_complete_provider_object_logs_in_lists_its_refreshed_models_and_serves_requests() {
    let (fake, root) = setup(Script::new([Turn::text("native answer")]), DEFAULT_MODEL);
    std::fs::create_dir_all(root.agent_dir.join("extensions")).unwrap();
    std::fs::write(
        root.agent_dir.join("extensions/native.js"),
        OBJECT_EXT.replace("PORT", &fake.port().to_string()),
    )
    .unwrap();
    let (code, out, err) = pi(&root, &["auth", "login", "native"], "abc\n");
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("/native-login"), "{out}");
    assert!(out.contains("Logged in to Native AI."), "{out}");
    assert!(err.contains("Native code: "), "{err}");
    let entry = auth_entry(&root, "native");
    assert_eq!(entry["type"], "oauth", "{entry}");
    assert_eq!(entry["access"], "n-abc");

    let mut agent = root.spawn_with(false, &["--provider", "native", "--model", "n2"]);
    let ids = model_ids(&mut agent, "m");
    assert!(
        ids.contains(&"native/n1".to_string()) && ids.contains(&"native/n2".to_string()),
        "{ids:?}"
    );
    let m = prompt(&mut agent, "p", "hi");
    assert_eq!(m[0]["model"], "n2", "{}", agent.dump());
    assert_eq!(m[0]["stopReason"], "stop", "{}", m[0]);
    assert_eq!(
        fake.llm_requests()[0].header("authorization"),
        Some("Bearer native:n-abc")
    );
}

#[test]
fn resuming_restores_a_virtual_selection_over_the_physical_model_that_answered() {
    let (fake, root) = setup(Script::new([Turn::text("routed")]), DEFAULT_MODEL);
    root.write_cwd_file(
        "ext/router.js",
        &VIRTUAL_EXT.replace("PORT", &fake.port().to_string()),
    );
    let mut agent = root.spawn_with(true, &["-e", "ext/router.js", "--model", "router/auto"]);
    let m = prompt(&mut agent, "p", "hi");
    assert_eq!(m[0]["model"], "y", "{}", agent.dump());
    drop(agent);
    let mut agent = root.spawn_with(true, &["-e", "ext/router.js", "--continue"]);
    let st = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(st["data"]["model"]["provider"], "router", "{st}");
    assert_eq!(st["data"]["model"]["id"], "auto");
    // Without the extension the virtual model is gone: the physical model that answered.
    drop(agent);
    let mut agent = root.spawn_with(true, &["--continue"]);
    let st = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_ne!(st["data"]["model"]["provider"], "router", "{st}");
}
