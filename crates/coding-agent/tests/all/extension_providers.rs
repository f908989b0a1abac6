//! Extension providers (issue 22; upstream docs/custom-provider.md, docs/extensions.md
//! "pi.registerProvider"): providers an extension registers take part in startup model
//! selection, `--list-models`, `get_available_models` and `set_model`; a redirect keeps a
//! built-in provider's models; unregistering restores; a `streamSimple` provider streams from
//! the extension (no network), with abort reaching the extension's `signal`.

use crate::common::*;
use pi_fakellm::{Block, Script, Turn};
use serde_json::{json, Value};
use std::process::{Command, Stdio};

/// Registers provider `x` (one `openai-completions` model `y` on the fake at `PORT`, key
/// from `$X_KEY`, a header), and commands that add provider `late` and drop `x` later.
const ENDPOINT_EXT: &str = r#"
export default function (pi) {
  const endpoint = (name, id) => ({
    name: "Ext " + name,
    baseUrl: "http://127.0.0.1:PORT/v1",
    apiKey: "$X_KEY",
    api: "openai-completions",
    headers: { "X-Ext-Header": "from-" + name },
    models: [{ id, name: "Model " + id, reasoning: false, input: ["text"],
               cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
               contextWindow: 64000, maxTokens: 2048 }],
  });
  pi.registerProvider("x", endpoint("x", "y"));
  pi.registerCommand("add-late", { handler: async () => pi.registerProvider("late", endpoint("late", "z")) });
  pi.registerCommand("drop-x", { handler: async () => pi.unregisterProvider("x") });
}
"#;

fn endpoint_root(script: Script) -> (pi_fakellm::FakeLlm, RunRoot) {
    let (fake, root) = setup(script, DEFAULT_MODEL);
    root.write_cwd_file(
        "ext/endpoint.js",
        &ENDPOINT_EXT.replace("PORT", &fake.port().to_string()),
    );
    (fake, root)
}

/// `provider/id` of every model `get_available_models` lists, in its order.
pub(crate) fn model_ids(agent: &mut RpcAgent, id: &str) -> Vec<String> {
    let r = agent.request(json!({"id": id, "type": "get_available_models"}));
    r["data"]["models"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["provider"].as_str().unwrap(),
                m["id"].as_str().unwrap()
            )
        })
        .collect()
}

/// Runs an extension command (`/name`): handled, answered once its handler returned.
fn command(agent: &mut RpcAgent, id: &str, text: &str) {
    let r = agent.request(json!({"id": id, "type": "prompt", "message": text}));
    assert_eq!(r["data"]["disposition"], "handled", "{r}");
}

fn prompt_and_settle(agent: &mut RpcAgent, id: &str, text: &str) {
    agent.prompt_settled(id, text);
}

#[test]
fn a_registered_provider_serves_startup_selection_with_its_key_and_headers() {
    let (fake, root) = endpoint_root(Script::new([Turn::text("hi from x")]));
    let mut agent = root.spawn_with_env(
        false,
        &["-e", "ext/endpoint.js", "--provider", "x", "--model", "y"],
        &[("X_KEY", "secret-x")],
    );
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["provider"], "x", "{}", agent.dump());
    assert_eq!(state["data"]["model"]["id"], "y");
    assert_eq!(state["data"]["model"]["name"], "Model y");
    assert_eq!(state["data"]["model"]["contextWindow"], 64000);
    prompt_and_settle(&mut agent, "p", "hello");
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 1, "{}", agent.dump());
    assert_eq!(reqs[0].path_only(), "/v1/chat/completions");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer secret-x"));
    assert_eq!(reqs[0].header("x-ext-header"), Some("from-x"));
    assert_eq!(reqs[0].body["model"], "y");
    let end = agent.wait_event("agent_end");
    assert!(end.to_string().contains("hi from x"), "{end}");
}

#[test]
fn registered_providers_are_listed_and_selectable_and_register_and_unregister_at_once() {
    let (fake, root) = endpoint_root(Script::new([Turn::text("via y"), Turn::text("via z")]));
    let mut agent =
        root.spawn_with_env(false, &["-e", "ext/endpoint.js"], &[("X_KEY", "secret-x")]);
    let ids = model_ids(&mut agent, "m1");
    assert!(ids.contains(&"x/y".to_string()), "{ids:?}");
    assert!(!ids.contains(&"late/z".to_string()), "{ids:?}");
    // The default model stays the settings' one.
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(state["data"]["model"]["provider"], "fake-openai");

    let set =
        agent.request(json!({"id": "sm", "type": "set_model", "provider": "x", "modelId": "y"}));
    assert_eq!(set["success"], true, "{set}");
    assert_eq!(set["data"]["provider"], "x", "{set}");
    prompt_and_settle(&mut agent, "p1", "one");

    // Registered from a command handler: usable at once, no reload.
    command(&mut agent, "c1", "/add-late");
    let ids = model_ids(&mut agent, "m2");
    assert!(ids.contains(&"late/z".to_string()), "{ids:?}");
    let set = agent
        .request(json!({"id": "sm2", "type": "set_model", "provider": "late", "modelId": "z"}));
    assert_eq!(set["success"], true, "{set}");
    prompt_and_settle(&mut agent, "p2", "two");

    command(&mut agent, "c2", "/drop-x");
    let ids = model_ids(&mut agent, "m3");
    assert!(!ids.contains(&"x/y".to_string()), "{ids:?}");
    assert!(ids.contains(&"late/z".to_string()), "{ids:?}");
    let set =
        agent.request(json!({"id": "sm3", "type": "set_model", "provider": "x", "modelId": "y"}));
    assert_eq!(set["success"], false, "{set}");

    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2, "{}", agent.dump());
    assert_eq!(reqs[0].body["model"], "y");
    assert_eq!(reqs[0].header("x-ext-header"), Some("from-x"));
    assert_eq!(reqs[1].body["model"], "z");
    assert_eq!(reqs[1].header("x-ext-header"), Some("from-late"));
}

#[test]
fn list_models_shows_extension_providers() {
    let (_fake, root) = endpoint_root(Script::new([]));
    let list = |key: Option<&str>| {
        let bin = std::env::var_os("PI_TEST_BIN")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_pi")));
        let mut cmd = Command::new(bin);
        cmd.args(["-e", "ext/endpoint.js", "--list-models"])
            .current_dir(&root.cwd)
            .env_clear()
            .envs(root.env())
            .stdin(Stdio::null());
        if let Some(k) = key {
            cmd.env("X_KEY", k);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    // `apiKey: "$X_KEY"` with the variable unset: no credentials, not listed (as upstream).
    let without = list(None);
    assert!(!without.lines().any(|l| l.starts_with("x ")), "{without}");
    let stdout = list(Some("secret-x"));
    let row = stdout
        .lines()
        .find(|l| l.split_whitespace().take(2).collect::<Vec<_>>() == ["x", "y"])
        .unwrap_or_else(|| panic!("no x/y row:\n{stdout}"));
    assert!(row.contains("64K"), "{row}");
    assert!(
        stdout.lines().any(|l| l.starts_with("fake-openai")),
        "{stdout}"
    );
}

/// Redirects the built-in `anthropic` provider to the fake (base URL and a header only), and a
/// command that unregisters the redirect.
const REDIRECT_EXT: &str = r#"
export default function (pi) {
  pi.registerProvider("anthropic", { baseUrl: "http://127.0.0.1:PORT", headers: { "X-Gateway": "gw-1" } });
  pi.registerCommand("undo", { handler: async () => pi.unregisterProvider("anthropic") });
}
"#;

fn anthropic_models(agent: &mut RpcAgent, id: &str) -> Vec<(String, String)> {
    let r = agent.request(json!({"id": id, "type": "get_available_models"}));
    r["data"]["models"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter(|m| m["provider"] == "anthropic")
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["baseUrl"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_redirect_of_a_built_in_provider_keeps_its_models_and_unregister_restores() {
    let (fake, root) = setup(
        Script::new([Turn::text("through the gateway")]),
        DEFAULT_MODEL,
    );
    let env = [("ANTHROPIC_API_KEY", "sk-ant-test")];
    // The built-in list, without the extension.
    let mut plain = root.spawn_with_env(false, &[], &env);
    let builtin = anthropic_models(&mut plain, "b");
    drop(plain);
    assert!(builtin.len() > 3, "{builtin:?}");
    assert!(
        builtin
            .iter()
            .all(|(_, u)| u == "https://api.anthropic.com"),
        "{builtin:?}"
    );

    root.write_cwd_file(
        "ext/redirect.js",
        &REDIRECT_EXT.replace("PORT", &fake.port().to_string()),
    );
    let model = builtin[0].0.clone();
    let mut agent = root.spawn_with_env(
        false,
        &[
            "-e",
            "ext/redirect.js",
            "--provider",
            "anthropic",
            "--model",
            &model,
        ],
        &env,
    );
    let redirected = anthropic_models(&mut agent, "r");
    let ids = |l: &[(String, String)]| l.iter().map(|(i, _)| i.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&redirected), ids(&builtin), "{}", agent.dump());
    let gateway = format!("http://127.0.0.1:{}", fake.port());
    assert!(
        redirected.iter().all(|(_, u)| *u == gateway),
        "{redirected:?}"
    );

    prompt_and_settle(&mut agent, "p", "hello");
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 1, "{}", agent.dump());
    assert_eq!(reqs[0].path_only(), "/v1/messages");
    assert_eq!(reqs[0].header("x-gateway"), Some("gw-1"));
    assert_eq!(reqs[0].header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(reqs[0].body["model"], model.as_str());

    command(&mut agent, "u", "/undo");
    assert_eq!(anthropic_models(&mut agent, "after"), builtin);
    // The session's model is the registry's again (upstream refreshes it).
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(
        state["data"]["model"]["baseUrl"], "https://api.anthropic.com",
        "{state}"
    );
}

/// A provider whose `streamSimple` (an async generator, no network) answers from the
/// context it gets: first text and a `bash` call, then, after the tool result, the tool
/// output it read from `context.messages`. Writes what it saw of the context to `seen.json`.
const STREAM_EXT: &str = r#"
import { writeFileSync } from "node:fs";
const usage = (o) => ({ input: 10, output: o, cacheRead: 0, cacheWrite: 0, totalTokens: 10 + o,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } });
export default function (pi) {
  pi.registerProvider("js", {
    baseUrl: "http://js.invalid",
    apiKey: "js-key",
    api: "js-api",
    models: [{ id: "m", name: "JS", reasoning: false, input: ["text"],
               cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 100000, maxTokens: 1000 }],
    streamSimple: async function* (model, context, options) {
      const msgs = context.messages;
      const last = msgs[msgs.length - 1];
      const seen = { roles: msgs.map((m) => m.role), system: msgs[0].role === "system" ? msgs[0].content.slice(0, 40) : null,
        tools: (msgs[0].toolsAdded || []).map((t) => t.name), apiKey: options.apiKey, hasSignal: options.signal instanceof AbortSignal,
        model: model.id, provider: model.provider };
      writeFileSync("seen-" + msgs.length + ".json", JSON.stringify(seen));
      const out = { role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id,
        usage: usage(0), stopReason: "pending", timestamp: Date.now() };
      yield { type: "start", partial: out };
      if (last.role === "toolResult") {
        const text = "saw: " + last.content.map((c) => c.text).join("");
        out.content.push({ type: "text", text: "" });
        yield { type: "text_start", contentIndex: 0, partial: out };
        out.content[0].text = text;
        yield { type: "text_delta", contentIndex: 0, delta: text, partial: out };
        yield { type: "text_end", contentIndex: 0, content: text, partial: out };
        out.stopReason = "stop"; out.usage = usage(3);
        yield { type: "done", reason: "stop", message: out };
        return;
      }
      out.content.push({ type: "text", text: "" });
      yield { type: "text_start", contentIndex: 0, partial: out };
      for (const d of ["Let me ", "check."]) {
        out.content[0].text += d;
        yield { type: "text_delta", contentIndex: 0, delta: d, partial: out };
      }
      yield { type: "text_end", contentIndex: 0, content: out.content[0].text, partial: out };
      const call = { type: "toolCall", id: "call_js_1", name: "bash", arguments: {} };
      out.content.push(call);
      yield { type: "toolcall_start", contentIndex: 1, partial: out };
      const args = JSON.stringify({ command: "echo hi" });
      yield { type: "toolcall_delta", contentIndex: 1, delta: args, partial: out };
      call.arguments = JSON.parse(args);
      yield { type: "toolcall_end", contentIndex: 1, toolCall: call, partial: out };
      out.stopReason = "toolUse"; out.usage = usage(5);
      yield { type: "done", reason: "toolUse", message: out };
    },
  });
}
"#;

/// The shape of a run's events: types in order, `message_update`s by their event type with
/// repeats collapsed (delta splits differ between providers), and the final messages' content.
fn run_shape(agent: &RpcAgent, from: usize) -> (Vec<String>, Vec<Value>) {
    let mut kinds: Vec<String> = vec![];
    let mut finals = vec![];
    for v in agent.events().into_iter().skip(from) {
        let k = match kind(&v) {
            "message_update" => format!(
                "message_update:{}",
                v["assistantMessageEvent"]["type"].as_str().unwrap_or("")
            ),
            "response" | "extension_ui_request" => continue,
            k => k.to_string(),
        };
        if kinds.last() != Some(&k) {
            kinds.push(k);
        }
        if kind(&v) == "message_end" {
            let m = &v["message"];
            let content: Vec<Value> = m["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut c| {
                    if let Some(o) = c.as_object_mut() {
                        o.remove("id");
                        o.remove("toolCallId");
                    }
                    c
                })
                .collect();
            finals.push(
                json!({"role": m["role"], "content": content, "stopReason": m["stopReason"]}),
            );
        }
        if kind(&v) == "agent_end" {
            break;
        }
    }
    (kinds, finals)
}

#[test]
fn a_stream_simple_provider_streams_like_a_built_in_one() {
    // The same two turns from the built-in anthropic-messages adapter against the fake.
    let (_fake, root) = setup(
        Script::new([
            Turn::blocks([
                Block::text("Let me check."),
                Block::tool_call_with_id("bash", json!({"command": "echo hi"}), "call_js_1"),
            ]),
            Turn::text("saw: hi\n"),
        ]),
        "fake-anthropic/fake-claude-haiku",
    );
    let mut builtin = root.spawn();
    let from = builtin.len();
    prompt_and_settle(&mut builtin, "p", "go");
    let (want_kinds, want_finals) = run_shape(&builtin, from);
    drop(builtin);

    root.write_cwd_file("ext/stream.js", STREAM_EXT);
    let mut agent = root.spawn_with(
        false,
        &["-e", "ext/stream.js", "--provider", "js", "--model", "m"],
    );
    let from = agent.len();
    prompt_and_settle(&mut agent, "p", "go");
    let (kinds, finals) = run_shape(&agent, from);
    assert_eq!(kinds, want_kinds, "{}", agent.dump());
    assert_eq!(finals, want_finals, "{}", agent.dump());
    let end = agent
        .events()
        .into_iter()
        .rfind(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["provider"], "js");
    assert_eq!(end["message"]["api"], "js-api");
    assert_eq!(end["message"]["usage"]["output"], 3);

    // The context the extension got: upstream's TranscriptContext.
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(root.cwd.join("seen-2.json")).unwrap())
            .unwrap();
    assert_eq!(seen["roles"], json!(["system", "user"]), "{seen}");
    assert!(seen["system"].as_str().unwrap().len() > 10, "{seen}");
    assert!(
        seen["tools"].as_array().unwrap().contains(&json!("bash")),
        "{seen}"
    );
    assert_eq!(seen["apiKey"], "js-key");
    assert_eq!(seen["hasSignal"], true);
    assert_eq!(seen["model"], "m");
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(root.cwd.join("seen-4.json")).unwrap())
            .unwrap();
    assert_eq!(
        seen["roles"],
        json!(["system", "user", "assistant", "toolResult"]),
        "{seen}"
    );
}

/// `streamSimple` streams some text, then waits for its `signal` and ends aborted (writing
/// `aborted.txt`); the model `boom` throws instead.
const ABORT_EXT: &str = r#"
import { writeFileSync } from "node:fs";
const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
export default function (pi) {
  const m = (id) => ({ id, name: id, input: ["text"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 1000, maxTokens: 100 });
  pi.registerProvider("js", {
    baseUrl: "http://js.invalid", apiKey: "k", api: "js-api", models: [m("slow"), m("boom")],
    streamSimple: async function* (model, context, options) {
      if (model.id === "boom") throw new Error("boom: the service said no");
      const out = { role: "assistant", content: [{ type: "text", text: "" }], api: model.api, provider: model.provider,
        model: model.id, usage, stopReason: "pending", timestamp: Date.now() };
      yield { type: "start", partial: out };
      yield { type: "text_start", contentIndex: 0, partial: out };
      out.content[0].text = "partial";
      yield { type: "text_delta", contentIndex: 0, delta: "partial", partial: out };
      await new Promise((resolve) => options.signal.addEventListener("abort", resolve, { once: true }));
      writeFileSync("aborted.txt", "yes");
      out.stopReason = "aborted"; out.errorMessage = "Request was aborted";
      yield { type: "error", reason: "aborted", error: out };
    },
  });
}
"#;

#[test]
fn abort_reaches_a_stream_simple_provider_and_a_throw_is_an_error_message() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file("ext/abort.js", ABORT_EXT);
    let mut agent = root.spawn_with(
        false,
        &["-e", "ext/abort.js", "--provider", "js", "--model", "slow"],
    );
    let from = agent.len();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta"
    });
    agent.send(json!({"id": "a", "type": "abort"}));
    let (_, end) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "message_end" && v["message"]["role"] == "assistant"
    });
    assert_eq!(end["message"]["stopReason"], "aborted", "{}", agent.dump());
    assert_eq!(end["message"]["content"][0]["text"], "partial");
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_end");
    assert_eq!(
        std::fs::read_to_string(root.cwd.join("aborted.txt")).unwrap(),
        "yes"
    );

    let set = agent
        .request(json!({"id": "sm", "type": "set_model", "provider": "js", "modelId": "boom"}));
    assert_eq!(set["success"], true, "{set}");
    let from = agent.len();
    prompt_and_settle(&mut agent, "p2", "again");
    let (_, end) = agent.wait_from(from, LIVENESS, |v| {
        kind(v) == "message_end" && v["message"]["role"] == "assistant"
    });
    assert_eq!(end["message"]["stopReason"], "error", "{}", agent.dump());
    assert_eq!(end["message"]["errorMessage"], "boom: the service said no");
}

#[test]
fn a_registration_pi_cannot_compose_is_an_extension_error_and_pi_keeps_serving() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file(
        "ext/bad.js",
        r#"export default function (pi) { pi.registerProvider("bad", { models: [{ id: "q" }] }); }"#,
    );
    let mut agent = root.spawn_with(false, &["-e", "ext/bad.js"]);
    let (_, err) = agent.wait_from(0, LIVENESS, |v| kind(v) == "extension_error");
    assert_eq!(err["event"], "register_provider", "{err}");
    assert_eq!(
        err["error"],
        "Provider bad, model q: no \"api\" specified. Set it at model level or provider level."
    );
    assert!(err["extensionPath"]
        .as_str()
        .unwrap()
        .ends_with("ext/bad.js"));
    let ids = model_ids(&mut agent, "m");
    assert!(!ids.iter().any(|i| i.starts_with("bad/")), "{ids:?}");
    assert!(ids.contains(&DEFAULT_MODEL.to_string()));
}
