//! Behaviour of upstream 1.6's example extensions (`examples/extensions`, `PI_UPSTREAM_EXAMPLES`)
//! loaded unchanged, headless over RPC (issue 22). Each test asserts what upstream 1.6 does
//! with the same example, fake LLM and commands (`pi --mode rpc` of upstream's cli.js, run by
//! hand against the same scripts; noted per test), or, where upstream does worse, our better
//! behaviour (said so in the test's comment).

use crate::common::*;
use crate::extensions::{tool_end, ui_request, upstream_example, upstream_examples, upstream_sdk};
use pi_fakellm::{Api, Script, Turn};
use serde_json::{json, Value};
use std::time::Duration;

/// The events of `agent` of `type` `kind`.
fn events_of(agent: &RpcAgent, kind_: &str) -> Vec<Value> {
    agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == kind_)
        .collect()
}

/// The notify messages `agent` sent, in order.
fn notices(agent: &RpcAgent) -> Vec<String> {
    events_of(agent, "extension_ui_request")
        .into_iter()
        .filter(|v| v["method"] == "notify")
        .map(|v| v["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The names of the tools an OpenAI chat request offered.
fn openai_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the tools an Anthropic request offered.
fn anthropic_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The entries of the one session file of `root`.
fn session_entries(root: &RunRoot) -> Vec<Value> {
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    check_session_file(&files[0]).unwrap()
}

/// `provider-payload.ts`: every `before_provider_request` payload is appended to
/// `.pi/provider-payload.log` exactly as sent, then `[status] {headers}` of the response (the
/// headers as a fetch `Headers` object lists them: sorted lower-case names). Without a `.pi`
/// folder both handlers fail with ENOENT (one `extension_error` each, as upstream) and the
/// request is sent all the same.
#[test]
fn upstream_provider_payload_logs_the_request_as_sent() {
    let Some(ext) = upstream_example("provider-payload.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (fake, root) = setup(Script::new([Turn::text("hello")]), DEFAULT_MODEL);
    std::fs::create_dir_all(root.cwd.join(".pi")).unwrap();
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    assert!(
        events_of(&agent, "extension_error").is_empty(),
        "{}",
        agent.dump()
    );
    let log = std::fs::read_to_string(root.cwd.join(".pi/provider-payload.log")).unwrap();
    let blocks: Vec<&str> = log.split("\n\n").filter(|b| !b.trim().is_empty()).collect();
    assert_eq!(blocks.len(), 2, "{log}");
    let payload: Value = serde_json::from_str(blocks[0]).unwrap();
    assert_eq!(
        payload,
        fake.requests()[0].body,
        "the payload is the body sent"
    );
    let headers = blocks[1].strip_prefix("[200] ").expect("status first");
    let headers: serde_json::Map<String, Value> = serde_json::from_str(headers).unwrap();
    let names: Vec<&String> = headers.keys().collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "{headers:?}");
    assert_eq!(headers["x-request-id"], "req_fake_1");
    assert_eq!(headers["content-type"], "text/event-stream");
    agent.kill();

    // No `.pi` folder: both handlers fail, the reply still comes.
    let (fake, root) = setup(Script::new([Turn::text("hello")]), DEFAULT_MODEL);
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    let end = agent.wait_event("agent_end");
    assert_eq!(
        end["messages"].as_array().unwrap().last().unwrap()["content"][0]["text"],
        "hello"
    );
    let errors = events_of(&agent, "extension_error");
    let failed: Vec<&str> = errors
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        ["before_provider_request", "after_provider_response"],
        "{errors:?}"
    );
    assert!(
        errors[0]["error"].as_str().unwrap().starts_with("ENOENT"),
        "{errors:?}"
    );
    assert_eq!(fake.llm_requests().len(), 1);
}

/// The replacement `provider-payload.ts` shows commented out (`return {...event.payload,
/// temperature: 0}`) reaches the fake in the body, for OpenAI and Anthropic requests alike;
/// a `before_provider_headers` handler adds a header and drops one models.json set (both
/// seen as upstream 1.6 sends them).
#[test]
fn provider_hooks_change_the_body_and_headers_sent() {
    let ext = r#"export default function (pi) {
      pi.on("before_provider_headers", (event) => {
        event.headers["x-extra"] = "yes";
        if ("x-drop" in event.headers) event.headers["x-drop"] = null;
      });
      pi.on("before_provider_request", (event) => ({ ...event.payload, temperature: 0 }));
    }"#;
    for model in [DEFAULT_MODEL, "fake-anthropic/fake-claude-haiku"] {
        let (fake, root) = setup(Script::new([Turn::text("hello")]), model);
        let mut models = models_json(fake.port());
        for p in ["fake-openai", "fake-anthropic"] {
            models["providers"][p]["headers"] = json!({"x-drop": "1", "x-keep": "2"});
        }
        root.write_agent_file("models.json", &models);
        root.write_cwd_file("h.js", ext);
        let mut agent = root.spawn_with(false, &["-e", "h.js"]);
        agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
        agent.wait_event("agent_settled");
        let requests = fake.llm_requests();
        assert_eq!(requests.len(), 1, "{model}: {}", agent.dump());
        let q = &requests[0];
        assert_eq!(q.body["temperature"], 0, "{model}: {}", q.body);
        assert_eq!(
            q.body["messages"].as_array().unwrap().last().unwrap()["content"][0]["text"],
            "hi"
        );
        assert_eq!(q.header("x-extra"), Some("yes"), "{model}");
        assert_eq!(q.header("x-drop"), None, "{model}");
        assert_eq!(q.header("x-keep"), Some("2"), "{model}");
    }
}

/// `dynamic-resources/index.ts`: its `resources_discover` skill and prompt template are
/// listed by `get_commands` (source `extension:index`, as upstream), `/dynamic` sends the
/// template, the skill is in the system prompt and `/skill:dynamic-resources` expands it.
#[test]
fn upstream_dynamic_resources_adds_a_skill_and_a_prompt() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    let base = dir.join("dynamic-resources");
    let ext = base.join("index.ts");
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn_with(false, &["-e", ext.to_str().unwrap()]);
    let cmds = agent.request(json!({"id": "c", "type": "get_commands"}));
    let find = |name: &str| {
        cmds["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {cmds}"))
    };
    let prompt = find("dynamic");
    assert_eq!(prompt["source"], "prompt");
    assert_eq!(
        prompt["description"],
        "Example prompt template loaded from resources_discover"
    );
    assert_eq!(prompt["sourceInfo"]["source"], "extension:index");
    assert_eq!(
        prompt["sourceInfo"]["path"],
        base.join("dynamic.md").to_str().unwrap()
    );
    let skill = find("skill:dynamic-resources");
    assert_eq!(skill["source"], "skill");
    assert_eq!(skill["sourceInfo"]["source"], "extension:index");

    agent.send(json!({"id": "p", "type": "prompt", "message": "/dynamic"}));
    agent.wait_event("agent_settled");
    agent.send(json!({"id": "s", "type": "prompt", "message": "/skill:dynamic-resources go"}));
    agent.wait_event("agent_settled");
    let requests = fake.llm_requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body["messages"];
    let system = first[0]["content"].as_str().unwrap();
    let location = base.join("SKILL.md");
    assert!(
        system.contains(&format!(
            "<location>{}</location>",
            location.to_str().unwrap()
        )),
        "{system}"
    );
    let last = first.as_array().unwrap().last().unwrap();
    assert_eq!(
        last["content"][0]["text"],
        "Summarize the current repository structure and mention any build or test commands."
    );
    let second = requests[1].body["messages"].as_array().unwrap().clone();
    let text = second.last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.starts_with("<skill name=\"dynamic-resources\"")
            && text.contains("This skill is provided by the dynamic-resources extension.")
            && text.ends_with("</skill>\n\ngo"),
        "{text}"
    );
}

/// `custom-compaction.ts`: `compact` fires `session_before_compact`; the example summarizes
/// the whole history with `google/gemini-2.5-flash` through `ctx.modelRegistry.complete` and
/// its summary is what the session stores (`fromHook: true`, no file details), as upstream.
/// (Here models.json points that model at the fake.)
#[test]
fn upstream_custom_compaction_stores_the_extensions_summary() {
    let Some(ext) = upstream_example("custom-compaction.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (fake, root) = setup(
        Script::new([
            Turn::text("## Goals\nFULL SUMMARY").matching("You are a conversation summarizer"),
            Turn::text("one"),
            Turn::text("two"),
        ]),
        DEFAULT_MODEL,
    );
    let mut models = models_json(fake.port());
    models["providers"]["google"] = json!({
        "api": "openai-completions",
        "baseUrl": format!("http://127.0.0.1:{}/v1", fake.port()),
        "apiKey": "fake-google-key",
        "models": [{"id": "gemini-2.5-flash", "name": "Fake Flash", "reasoning": false,
                    "input": ["text"], "contextWindow": 100000, "maxTokens": 8192,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]
    });
    root.write_agent_file("models.json", &models);
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let mut agent = root.spawn_with(true, &["-e", &ext]);
    agent.send(json!({"id": "p1", "type": "prompt", "message": "first question"}));
    agent.wait_event("agent_settled");
    agent.send(json!({"id": "p2", "type": "prompt", "message": "Second question, long enough to exceed keepRecentTokens"}));
    agent.wait_event("agent_settled");
    let r = agent.request(json!({"id": "k", "type": "compact"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_eq!(r["data"]["summary"], "## Goals\nFULL SUMMARY");
    assert!(r["data"].get("details").is_none(), "{r}");
    let n = notices(&agent);
    assert_eq!(n[0], "Custom compaction extension triggered", "{n:?}");
    assert!(
        n[1].starts_with("Custom compaction: summarizing 2 messages (")
            && n[1].ends_with(" tokens) with gemini-2.5-flash..."),
        "{n:?}"
    );
    let summary_request = fake
        .llm_requests()
        .into_iter()
        .find(|q| q.body["model"] == "gemini-2.5-flash")
        .expect("a request to the extension's model");
    let text = summary_request.body_text();
    assert!(
        text.contains("first question") && text.contains("<conversation>"),
        "{text}"
    );
    assert_eq!(summary_request.body["max_completion_tokens"], 8192);
    let entries = session_entries(&root);
    let compaction = entries
        .iter()
        .find(|e| e["type"] == "compaction")
        .expect("a compaction entry");
    assert_eq!(compaction["summary"], "## Goals\nFULL SUMMARY");
    assert_eq!(compaction["fromHook"], true);
    assert_eq!(
        compaction["firstKeptEntryId"],
        r["data"]["firstKeptEntryId"]
    );
    assert!(compaction.get("details").is_none(), "{compaction}");
    assert_eq!(
        fake.llm_requests().len(),
        3,
        "pi's own summary is not asked for"
    );
}

/// A `session_before_compact` handler that cancels: `compact` fails with "Compaction
/// cancelled", `compaction_end` and `session_compact_failed` say aborted, nothing is written
/// (upstream agent-session `compact`); `session_compact` runs after a compaction pi
/// summarized itself.
#[test]
fn session_before_compact_can_cancel_and_session_compact_events_follow() {
    let ext = r#"export default function (pi) {
      let cancel = true;
      pi.on("session_before_compact", async (e) => {
        if (cancel) { cancel = false; return { cancel: true }; }
        pi.appendEntry("seen", { reason: e.reason, kept: e.preparation.firstKeptEntryId, n: e.branchEntries.length });
      });
      pi.on("session_compact_failed", async (e) => {
        pi.appendEntry("failed", { reason: e.reason, aborted: e.aborted, willRetry: e.willRetry, fromExtension: e.fromExtension, errorMessage: e.errorMessage ?? null });
      });
      pi.on("session_compact", async (e) => {
        pi.appendEntry("compacted", { fromExtension: e.fromExtension, summary: e.compactionEntry.summary });
      });
    }"#;
    let (_fake, root) = setup(
        Script::new([
            Turn::text("one"),
            Turn::text("two"),
            Turn::text("PI SUMMARY"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("c.js", ext);
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let mut agent = root.spawn_with(true, &["-e", "c.js"]);
    agent.send(json!({"id": "p1", "type": "prompt", "message": "first question"}));
    agent.wait_event("agent_settled");
    agent.send(json!({"id": "p2", "type": "prompt", "message": "Second question, long enough to exceed keepRecentTokens"}));
    agent.wait_event("agent_settled");
    let r = agent.request(json!({"id": "k1", "type": "compact"}));
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "Compaction cancelled");
    let end = agent.wait_for(|v| kind(v) == "compaction_end", LIVENESS);
    assert_eq!(end["aborted"], true, "{end}");
    let r = agent.request(json!({"id": "k2", "type": "compact"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert!(r["data"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("PI SUMMARY"));
    agent.request(json!({"id": "s", "type": "get_state"}));
    let entries = session_entries(&root);
    let custom = |t: &str| {
        entries
            .iter()
            .find(|e| e["type"] == "custom" && e["customType"] == t)
            .unwrap_or_else(|| panic!("no {t}: {entries:?}"))["data"]
            .clone()
    };
    assert_eq!(
        custom("failed"),
        json!({"reason": "manual", "aborted": true, "willRetry": false, "fromExtension": false, "errorMessage": null})
    );
    let seen = custom("seen");
    assert_eq!(seen["reason"], "manual");
    assert_eq!(seen["kept"], r["data"]["firstKeptEntryId"]);
    assert!(seen["n"].as_u64().unwrap() >= 4, "{seen}");
    let compacted = custom("compacted");
    assert_eq!(compacted["fromExtension"], false);
    assert_eq!(compacted["summary"], r["data"]["summary"]);
    assert_eq!(
        entries.iter().filter(|e| e["type"] == "compaction").count(),
        1
    );
}

/// `abort` during a `session_before_compact` handler fires the handler's `event.signal`
/// (upstream docs/extensions.md: the signal of the compaction's abort controller): the
/// handler, waiting on it, then supplies a compaction anyway; the compaction still ends
/// aborted ("Compaction cancelled", nothing written), and `session_compact_failed` says
/// `fromExtension: true` (the failed compaction was the extension's). A later compaction's
/// signal stays unaborted.
#[test]
fn abort_fires_the_session_before_compact_signal_and_failure_says_from_extension() {
    let ext = r#"export default function (pi) {
      let first = true;
      pi.on("session_before_compact", async (e, ctx) => {
        if (!first) {
          pi.appendEntry("second", { aborted: e.signal.aborted });
          return { compaction: { summary: "EXT SUMMARY 2" } };
        }
        first = false;
        const fired = new Promise((resolve) => e.signal.addEventListener("abort", resolve, { once: true }));
        ctx.ui.notify("waiting on the signal", "info");
        await fired;
        ctx.ui.notify("signal fired: " + e.signal.aborted, "info");
        return { compaction: { summary: "EXT SUMMARY" } };
      });
      pi.on("session_compact_failed", async (e) => {
        pi.appendEntry("failed", { reason: e.reason, aborted: e.aborted, willRetry: e.willRetry, fromExtension: e.fromExtension, errorMessage: e.errorMessage ?? null });
      });
    }"#;
    let (_fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("c.js", ext);
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let mut agent = root.spawn_with(true, &["-e", "c.js"]);
    agent.send(json!({"id": "p1", "type": "prompt", "message": "first question"}));
    agent.wait_event("agent_settled");
    agent.send(json!({"id": "p2", "type": "prompt", "message": "Second question, long enough to exceed keepRecentTokens"}));
    agent.wait_event("agent_settled");
    agent.send(json!({"id": "k1", "type": "compact"}));
    agent.wait_for(
        |v| kind(v) == "extension_ui_request" && v["message"] == "waiting on the signal",
        LIVENESS,
    );
    let r = agent.request(json!({"id": "a1", "type": "abort"}));
    assert_eq!(r["success"], true, "{r}");
    let r = agent.wait_response("k1");
    assert_eq!(r["success"], false, "{}", agent.dump());
    assert_eq!(r["error"], "Compaction cancelled");
    let end = agent.wait_for(|v| kind(v) == "compaction_end", LIVENESS);
    assert_eq!(end["aborted"], true, "{end}");
    assert!(
        notices(&agent).contains(&"signal fired: true".to_string()),
        "{}",
        agent.dump()
    );
    let r = agent.request(json!({"id": "k2", "type": "compact"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
    assert_eq!(r["data"]["summary"], "EXT SUMMARY 2");
    agent.request(json!({"id": "s", "type": "get_state"}));
    let entries = session_entries(&root);
    let custom = |t: &str| {
        entries
            .iter()
            .find(|e| e["type"] == "custom" && e["customType"] == t)
            .unwrap_or_else(|| panic!("no {t}: {entries:?}"))["data"]
            .clone()
    };
    assert_eq!(
        custom("failed"),
        json!({"reason": "manual", "aborted": true, "willRetry": false, "fromExtension": true, "errorMessage": null})
    );
    assert_eq!(custom("second"), json!({"aborted": false}));
    let compactions: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(compactions.len(), 1, "{compactions:?}");
    assert_eq!(compactions[0]["summary"], "EXT SUMMARY 2");
}

/// `handoff.ts`: `/handoff` needs the TUI; headless it says so (an error notice, as upstream
/// 1.6 over RPC) and asks the model nothing.
#[test]
fn upstream_handoff_says_it_needs_interactive_mode() {
    let Some(ext) = upstream_example("handoff.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (fake, root) = setup(Script::new([Turn::text("one")]), DEFAULT_MODEL);
    let mut agent = root.spawn_with(false, &["-e", &ext]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    let r = agent.request(json!({"id": "h", "type": "prompt", "message": "/handoff do the rest"}));
    assert_eq!(r["data"]["disposition"], "handled", "{}", agent.dump());
    let (_, n) = ui_request(&agent, 0, "notify");
    assert_eq!(n["message"], "handoff requires interactive mode");
    assert_eq!(n["notifyType"], "error");
    agent.wait_quiet(Duration::from_millis(300), LIVENESS);
    assert_eq!(fake.llm_requests().len(), 1);
}

/// `preset.ts`: `--preset plan` (from `.pi/presets.json`) switches model, thinking level and
/// tools at startup and appends its instructions to the system prompt; `/preset impl`
/// changes the tools again, which the session records as `toolsAdded`/`toolsRemoved` before
/// the next prompt; unknown names are reported. All as upstream 1.6 headless.
#[test]
fn upstream_preset_flag_and_command_switch_model_and_tools() {
    let Some(ext) = upstream_example("preset.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    let presets = json!({
        "plan": {"provider": "fake-anthropic", "model": "fake-claude", "thinkingLevel": "high",
                 "tools": ["read", "grep", "nope"], "instructions": "PRESET PLAN RULES"},
        "impl": {"tools": ["read", "bash", "edit", "write"], "instructions": "PRESET IMPL RULES"}
    });
    root.write_cwd_file(".pi/presets.json", &presets.to_string());
    let mut agent = root.spawn_with(true, &["-e", &ext, "--preset", "plan"]);
    let st = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(st["data"]["model"]["id"], "fake-claude", "{st}");
    assert_eq!(st["data"]["thinkingLevel"], "high");
    assert_eq!(
        notices(&agent),
        [
            "Preset \"plan\": Unknown tools: nope",
            "Preset \"plan\" activated"
        ]
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    let r = agent.request(json!({"id": "q", "type": "prompt", "message": "/preset impl"}));
    assert_eq!(r["data"]["disposition"], "handled");
    agent.send(json!({"id": "p2", "type": "prompt", "message": "again"}));
    agent.wait_event("agent_settled");
    agent.request(json!({"id": "u", "type": "prompt", "message": "/preset nope"}));
    let n = notices(&agent);
    assert_eq!(
        n[2..],
        [
            "Preset \"impl\" activated".to_string(),
            "Unknown preset \"nope\". Available: plan, impl".to_string()
        ]
    );

    let requests = fake.llm_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|q| q.api == "anthropic"));
    assert_eq!(anthropic_tools(&requests[0].body), ["read", "grep"]);
    assert_eq!(
        anthropic_tools(&requests[1].body),
        ["read", "bash", "edit", "write"]
    );
    let system = |i: usize| requests[i].body["system"].to_string();
    assert!(system(0).contains("PRESET PLAN RULES"), "{}", system(0));
    assert!(system(1).contains("PRESET IMPL RULES") && !system(1).contains("PRESET PLAN"));
    assert!(requests[0].body["thinking"].is_object(), "thinking high");

    let entries = session_entries(&root);
    let systems: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "system")
        .map(|e| &e["message"])
        .collect();
    assert_eq!(systems.len(), 2, "{systems:?}");
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|t| t["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(names(&systems[0]["toolsAdded"]), ["read", "grep"]);
    assert_eq!(names(&systems[1]["toolsAdded"]), ["bash", "edit", "write"]);
    assert_eq!(systems[1]["toolsRemoved"], json!([{"name": "grep"}]));
    assert!(
        entries
            .iter()
            .any(|e| e["customType"] == "preset-state" && e["data"]["name"] == "impl"),
        "{entries:?}"
    );
}

/// `plan-mode/index.ts`: `/plan` restricts the tools (no edit/write) and blocks a
/// non-allowlisted bash command; the plan the model writes is offered in a `select`; choosing
/// to execute restores the tools and runs the plan through two follow-up messages; the
/// `[DONE:n]` markers complete it and the "Plan Complete!" message (`nextTurn`) goes out with
/// the next prompt. Upstream 1.6 records the restored tools at the follow-up run but patches
/// the prompt sections one turn later (its request #3 still describes grep/find/ls); we record
/// both at once, so the model is told the tools it is offered.
#[test]
fn upstream_plan_mode_restricts_tools_then_executes_the_plan() {
    let Some(ext) = upstream_example("plan-mode/index.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "rm -rf x"})),
            Turn::text("Plan:\n1. Read the config file\n2. Fix the parser bug"),
            Turn::text("Did it. [DONE:1] [DONE:2]"),
            Turn::text("ack"),
            Turn::text("welcome"),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("x/keep", "k");
    let mut agent = root.spawn_with(true, &["-e", &ext]);
    let r = agent.request(json!({"id": "p0", "type": "prompt", "message": "/plan"}));
    assert_eq!(r["data"]["disposition"], "handled");
    agent.send(json!({"id": "p", "type": "prompt", "message": "make a plan"}));
    let (_, select) = ui_request(&agent, 0, "select");
    assert_eq!(select["title"], "Plan mode - what next?");
    assert_eq!(select["options"][0], "Execute the plan (track progress)");
    agent.send(json!({"type": "extension_ui_response", "id": select["id"], "value": "Execute the plan (track progress)"}));
    agent.wait_for(
        |v| {
            kind(v) == "entry_appended"
                && v["entry"]["data"]["executing"] == false
                && v["entry"]["data"]["todos"] == json!([])
        },
        LIVENESS,
    );
    agent.wait_event("agent_settled");
    let end = tool_end(&agent);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "Plan mode: command blocked (not allowlisted). Use /plan to disable plan mode first.\nCommand: rm -rf x"
    );
    assert!(root.cwd.join("x/keep").is_file());
    agent.send(json!({"id": "p3", "type": "prompt", "message": "thanks"}));
    agent.wait_event("agent_settled");

    let requests = fake.llm_requests();
    assert_eq!(requests.len(), 5, "{}", agent.dump());
    let plan_tools = ["read", "bash", "grep", "find", "ls"];
    assert_eq!(openai_tools(&requests[0].body), plan_tools);
    assert_eq!(openai_tools(&requests[1].body), plan_tools);
    let normal = ["read", "bash", "edit", "write"];
    for q in &requests[2..] {
        assert_eq!(openai_tools(&q.body), normal);
    }
    let texts = |i: usize| -> Vec<String> {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].to_string())
            .collect()
    };
    assert!(texts(0).iter().any(|t| t.contains("[PLAN MODE ACTIVE]")));
    // After plan mode the `context` handler drops its context message.
    assert!(!texts(2).iter().any(|t| t.contains("[PLAN MODE ACTIVE]")));
    assert!(texts(2).last().unwrap().contains("Plan Steps (2)"));
    assert!(texts(3).last().unwrap().contains("Execute the plan."));
    // Our system prompt is current at request #3 (upstream's still lists grep/find/ls).
    let system = requests[2].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("- edit:") && !system.contains("- grep:"),
        "{system}"
    );
    let last = texts(4);
    assert!(last[last.len() - 2].contains("thanks"));
    assert!(
        last[last.len() - 1].contains("**Plan Complete!**"),
        "{last:?}"
    );

    let entries = session_entries(&root);
    let kinds: Vec<String> = entries
        .iter()
        .filter(|e| e["type"] == "custom_message")
        .map(|e| e["customType"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "plan-mode-context",
            "plan-todo-list",
            "plan-mode-execute",
            "plan-complete"
        ]
    );
    let restored = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "system")
        .nth(1)
        .expect("a system message for the restored tools");
    let added: Vec<&str> = restored["message"]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["edit", "write"]);
    assert_eq!(
        restored["message"]["toolsRemoved"],
        json!([{"name": "grep"}, {"name": "find"}, {"name": "ls"}])
    );
}

/// `subagent/index.ts`: the `subagent` tool runs the user agent `scout` as a child
/// `pi --mode json -p --no-session --model … --tools read,ls --append-system-prompt …` found
/// on `PATH` (the extension spawns `pi` when its host is not upstream's cli.js; here PATH leads
/// to this build) and returns the child's final answer, as upstream does with its own cli.
#[test]
fn upstream_subagent_tool_runs_a_child_pi() {
    let Some(ext) = upstream_example("subagent/index.ts") else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call(
                "subagent",
                json!({"agent": "scout", "task": "find the config"}),
            )
            .api(Api::Openai),
            Turn::text("CONFIG IS IN a.toml")
                .api(Api::Anthropic)
                .matching("Task: find the config"),
            Turn::text("done").api(Api::Openai),
        ]),
        DEFAULT_MODEL,
    );
    let agent_md = "---\nname: scout\ndescription: Finds things\ntools: read, ls\nmodel: fake-anthropic/fake-claude-haiku\n---\n\nYou are a SCOUT. Answer briefly.\n";
    let agents = root.agent_dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("scout.md"), agent_md).unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let pi = std::env::var_os("PI_TEST_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    std::os::unix::fs::symlink(pi, bin.join("pi")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut agent = root.spawn_with_env(false, &["-e", &ext], &[("PATH", &path)]);
    agent.send(json!({"id": "p", "type": "prompt", "message": "delegate"}));
    agent.wait_for(|v| kind(v) == "agent_settled", Duration::from_secs(90));
    let end = tool_end(&agent);
    assert_eq!(end["isError"], false, "{}", agent.dump());
    assert_eq!(end["result"]["content"][0]["text"], "CONFIG IS IN a.toml");
    let result = &end["result"]["details"]["results"][0];
    assert_eq!(result["agent"], "scout");
    assert_eq!(result["exitCode"], 0);
    let requests = fake.llm_requests();
    assert_eq!(requests.len(), 3);
    let child = requests
        .iter()
        .find(|q| q.api == "anthropic")
        .expect("the child's request");
    assert_eq!(child.body["model"], "fake-claude-haiku");
    assert_eq!(anthropic_tools(&child.body), ["read", "ls"]);
    assert!(child.body["system"]
        .to_string()
        .contains("You are a SCOUT."));
    assert_eq!(
        child.body["messages"][0]["content"][0]["text"],
        "Task: find the config"
    );
}

/// `custom-provider-gitlab-duo` (a package folder): its provider is registered with its
/// models and `set_model` selects one (`api: gitlab-duo-api`). Its stream asks gitlab.com for
/// a token, which a test cannot reach; upstream and we both report `fetch failed` then.
#[test]
fn upstream_custom_provider_gitlab_duo_registers_its_models() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let ext = dir.join("custom-provider-gitlab-duo");
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn_with_env(
        false,
        &["-e", ext.to_str().unwrap()],
        &[("GITLAB_TOKEN", "glpat-fake")],
    );
    let models = agent.request(json!({"id": "m", "type": "get_available_models"}));
    let ids: Vec<&str> = models["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "gitlab-duo")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"claude-sonnet-4-5-20250929"), "{ids:?}");
    assert!(ids.len() >= 5, "{ids:?}");
    let r = agent.request(json!({"id": "s", "type": "set_model", "provider": "gitlab-duo", "modelId": "claude-sonnet-4-5-20250929"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["api"], "gitlab-duo-api");
    assert_eq!(r["data"]["baseUrl"], "https://cloud.gitlab.com");
}

/// `custom-provider-anthropic` (a package folder with its own dependency, `@anthropic-ai/sdk`,
/// which scripts/fetch-upstream-examples.sh installs): loads, registers `custom-anthropic`
/// with its two models (API key from `CUSTOM_ANTHROPIC_API_KEY`), `set_model` selects one.
/// Its base URL is the extension's own (models.json does not override an extension provider,
/// in upstream either), so no request is sent here.
#[test]
fn upstream_custom_provider_anthropic_registers_its_models() {
    let Some(dir) = upstream_examples() else {
        return;
    };
    if !upstream_sdk() {
        return;
    }
    let ext = dir.join("custom-provider-anthropic");
    assert!(
        ext.join("node_modules/@anthropic-ai/sdk").is_dir(),
        "run scripts/fetch-upstream-examples.sh: it installs custom-provider-anthropic's dependency"
    );
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut agent = root.spawn_with_env(
        false,
        &["-e", ext.to_str().unwrap()],
        &[("CUSTOM_ANTHROPIC_API_KEY", "sk-ant-fake")],
    );
    let models = agent.request(json!({"id": "m", "type": "get_available_models"}));
    let mut ids: Vec<&str> = models["data"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "custom-anthropic")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        ["claude-opus-4-5", "claude-sonnet-4-5"],
        "{}",
        agent.dump()
    );
    let r = agent.request(json!({"id": "s", "type": "set_model", "provider": "custom-anthropic", "modelId": "claude-sonnet-4-5"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["api"], "custom-anthropic-api");
    assert_eq!(r["data"]["name"], "Claude Sonnet 4.5 (Custom)");
    assert!(events_of(&agent, "extension_error").is_empty());
}

/// The provider hooks in the Google, Vertex and Mistral adapters (issue 22), as upstream 1.6
/// fires them (its cli.js run by hand against the same fake): `before_provider_headers` sees
/// only the caller headers (models.json provider headers, never the API-key header),
/// `before_provider_request`'s return value is the body sent, and `after_provider_response`
/// fires for Mistral but not for the Gemini wire (upstream's SDK exposes no response there).
#[test]
fn provider_hooks_in_the_google_and_mistral_adapters() {
    let ext = r#"import * as fs from "node:fs";
    export default function (pi) {
      const log = (x) => fs.appendFileSync("hooks.log", JSON.stringify(x) + "\n");
      pi.on("before_provider_headers", (event) => {
        log({ ev: "headers", headers: { ...event.headers } });
        event.headers["x-extra"] = "yes";
        event.headers["x-drop"] = null;
      });
      pi.on("before_provider_request", (event) => ({ ...event.payload, hooked: 1 }));
      pi.on("after_provider_response", (event) => log({ ev: "response", status: event.status }));
    }"#;
    let cases = [
        ("google-generative-ai", "/v1beta", false),
        ("google-vertex", "/vertex", false),
        ("mistral-conversations", "/mistral", true),
    ];
    for (api, prefix, responds) in cases {
        let (fake, root) = setup(Script::new([Turn::text("hello")]), "fake-x/m1");
        let models = json!({"providers": {"fake-x": {
            "api": api, "apiKey": "secret-key",
            "baseUrl": format!("http://127.0.0.1:{}{prefix}", fake.port()),
            "headers": {"x-drop": "1", "x-keep": "2"},
            "models": [{"id": "m1", "name": "M1", "reasoning": false, "input": ["text"],
                        "contextWindow": 32000, "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}});
        root.write_agent_file("models.json", &models);
        root.write_cwd_file("h.js", ext);
        let env = [
            ("GOOGLE_CLOUD_PROJECT", "fake-project"),
            ("GOOGLE_CLOUD_LOCATION", "us-central1"),
        ];
        let mut agent = root.spawn_with_env(false, &["-e", "h.js"], &env);
        agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
        agent.wait_event("agent_settled");
        let requests = fake.llm_requests();
        assert_eq!(requests.len(), 1, "{api}: {}", agent.dump());
        let q = &requests[0];
        assert_eq!(q.body["hooked"], 1, "{api}: {}", q.body);
        assert_eq!(q.header("x-extra"), Some("yes"), "{api}");
        assert_eq!(q.header("x-drop"), None, "{api}");
        assert_eq!(q.header("x-keep"), Some("2"), "{api}");
        let log = std::fs::read_to_string(root.cwd.join("hooks.log")).unwrap();
        let lines: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0],
            json!({"ev": "headers", "headers": {"x-drop": "1", "x-keep": "2"}}),
            "{api}"
        );
        let responses: Vec<&Value> = lines.iter().filter(|l| l["ev"] == "response").collect();
        if responds {
            assert_eq!(
                responses,
                [&json!({"ev": "response", "status": 200})],
                "{api}"
            );
        } else {
            assert!(responses.is_empty(), "{api}: {log}");
        }
        agent.kill();
    }
}
