//! The Responses wire APIs (issue 14): `openai-responses`, `azure-openai-responses` and
//! `openai-codex-responses`, end to end through `pi --mode rpc` against the fake server.
//!
//! `tests/data/responses/<api>.json` holds what upstream 1.6 sent for one scripted
//! conversation (a text answer, a thinking answer, a tool call and its result, an image
//! prompt, a length stop, an HTTP 500 and a context-overflow 400), recorded with
//! `tests/data/responses/record.py`. The tests replay the same script and commands through our
//! `pi` and compare every request field for field after masking prose (system prompt, tool
//! descriptions and schemas) and the session id, and the assistant messages' stop reasons,
//! error texts, usage and signatures.

use crate::common::*;
use pi_fakellm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};

/// `tests/data/responses/<name>.json`.
pub(crate) fn recording(name: &str) -> Value {
    let path = format!(
        "{}/tests/data/responses/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).expect("recording")).expect("json")
}

/// A run root whose models.json has the recording's provider (`fake-resp/fake-gpt5`) on
/// `fake`, with compaction and auto-retry off as in the recording.
pub(crate) fn root_for(provider: &Value, fake: &FakeLlm) -> RunRoot {
    let root = RunRoot::with_model(fake.port(), "fake-resp/fake-gpt5");
    let mut provider = provider.clone();
    let base = provider["baseUrl"]
        .as_str()
        .unwrap()
        .replace("{port}", &fake.port().to_string());
    provider["baseUrl"] = json!(base);
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"fake-resp": provider}}),
    );
    root.merge_settings(json!({
        "defaultThinkingLevel": "off",
        "compaction": {"enabled": false},
        "retry": {"enabled": false}
    }));
    root
}

/// Drive `commands` as record.py does: each command waits for its response, a prompt also
/// for `agent_end` (and our `agent_settled`). Ids are `<prefix><n>`. Returns the assistant
/// `message_end` messages.
pub(crate) fn drive(agent: &mut RpcAgent, commands: &[Value], prefix: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    for (i, cmd) in commands.iter().enumerate() {
        let mut cmd = cmd.clone();
        cmd["id"] = json!(format!("{prefix}{i}"));
        let from = agent.len();
        let r = agent.request(cmd.clone());
        assert_eq!(r["success"], true, "{r}");
        if cmd["type"] == "prompt" {
            let (end, _) = agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_end");
            agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
            for rec in agent.records().iter().skip(from).take(end + 1 - from) {
                if let Some(v) = &rec.value {
                    if kind(v) == "message_end" && v["message"]["role"] == "assistant" {
                        messages.push(v["message"].clone());
                    }
                }
            }
        }
    }
    messages
}

/// `schema` with every `description` string replaced by `<prose>` (record.py `mask_schema`).
fn mask_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = if k == "description" && v.is_string() {
                        json!("<prose>")
                    } else {
                        mask_schema(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(mask_schema).collect()),
        other => other.clone(),
    }
}

/// Prose and per-run values replaced by placeholders, as record.py stores upstream's requests:
/// the system/developer prompt text, tool descriptions (the schemas keep their structure, their
/// `description`s masked), and `prompt_cache_key`.
pub(crate) fn mask_body(body: &Value) -> Value {
    let mut b = body.clone();
    if let Some(input) = b.get_mut("input").and_then(Value::as_array_mut) {
        for item in input {
            if matches!(item["role"].as_str(), Some("developer" | "system")) {
                item["content"] = json!("<system prompt>");
            }
        }
    }
    if let Some(tools) = b.get_mut("tools").and_then(Value::as_array_mut) {
        for t in tools {
            t["description"] = json!("<prose>");
            t["parameters"] = mask_schema(&t["parameters"]);
        }
    }
    if b.get("prompt_cache_key").is_some() {
        b["prompt_cache_key"] = json!("<session id>");
    }
    b
}

/// The `names` headers of a recorded request's `headers` object, the session ids masked.
pub(crate) fn masked_headers(headers: &Value, names: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for &name in names {
        if let Some(v) = headers.get(name) {
            let v = if name.ends_with("session-id") || name == "x-client-request-id" {
                json!("<session id>")
            } else {
                v.clone()
            };
            out.insert(name.to_owned(), v);
        }
    }
    Value::Object(out)
}

/// The request headers that carry meaning for these APIs (session ids masked).
pub(crate) fn key_headers(req: &Value) -> Value {
    masked_headers(
        &req["headers"],
        &[
            "authorization",
            "api-key",
            "chatgpt-account-id",
            "openai-beta",
            "originator",
            "accept",
            "content-type",
            "session-id",
            "x-client-request-id",
        ],
    )
}

/// The parts of an assistant message that must match upstream.
pub(crate) fn key_message(m: &Value) -> Value {
    let content: Vec<Value> = m["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|b| {
                    json!({"type": b["type"], "text": b["text"], "thinking": b["thinking"],
                       "thinkingSignature": b["thinkingSignature"], "textSignature": b["textSignature"],
                       "id": b["id"], "name": b["name"], "arguments": b["arguments"]})
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "api": m["api"], "provider": m["provider"], "model": m["model"],
        "stopReason": m["stopReason"], "errorMessage": m["errorMessage"],
        "responseId": m["responseId"], "content": content,
        "usage": {"input": m["usage"]["input"], "output": m["usage"]["output"],
                  "cacheRead": m["usage"]["cacheRead"], "cacheWrite": m["usage"]["cacheWrite"],
                  "totalTokens": m["usage"]["totalTokens"], "cost": m["usage"]["cost"]["total"]},
    })
}

/// The paths where `ours` and `theirs` differ, with both values.
pub(crate) fn json_diff(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let (x, y) = (
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                );
                if a.contains_key(k) != b.contains_key(k) {
                    out.push(format!(
                        "{path}/{k}: ours {x} | upstream {y} (key missing on one side)"
                    ));
                } else {
                    json_diff(&format!("{path}/{k}"), x, y, out);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                json_diff(&format!("{path}/{i}"), x, y, out);
            }
        }
        _ if ours != theirs => out.push(format!("{path}: ours {ours} | upstream {theirs}")),
        _ => {}
    }
}

/// Replays the recording of `api` through our `pi` and compares requests and messages.
fn matches_upstream(api: &str) {
    let rec = recording(api);
    let script = Script::from_value(rec["script"].clone()).unwrap();
    let fake = FakeLlm::spawn(script).unwrap();
    let root = root_for(&rec["provider"], &fake);
    let env: Vec<(String, String)> = rec["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut agent = root.spawn_with_env(false, &[], &env);
    let messages = drive(&mut agent, rec["commands"].as_array().unwrap(), "c");

    let theirs: Vec<Value> = rec["assistant_messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(key_message)
        .collect();
    let ours: Vec<Value> = messages.iter().map(key_message).collect();
    assert_eq!(ours.len(), theirs.len(), "assistant message count");
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o, t, "assistant message {i}");
    }
    let theirs: Vec<&Value> = rec["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["api"] == "responses")
        .collect();
    let ours = fake.llm_requests();
    assert_eq!(ours.len(), theirs.len(), "request count");
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o.path, t["path"].as_str().unwrap(), "request {i}: path");
        let o_json = serde_json::to_value(o).unwrap();
        assert_eq!(key_headers(&o_json), key_headers(t), "request {i}: headers");
        let (ob, tb) = (mask_body(&o.body), mask_body(&t["body"]));
        let mut diffs = Vec::new();
        json_diff("", &ob, &tb, &mut diffs);
        assert!(
            diffs.is_empty(),
            "request {i}: body differs (ours vs upstream):\n{}",
            diffs.join("\n")
        );
    }
}

#[test]
fn openai_responses_matches_upstream() {
    matches_upstream("openai-responses");
}

#[test]
fn azure_openai_responses_matches_upstream() {
    matches_upstream("azure-openai-responses");
}

#[test]
fn openai_codex_responses_matches_upstream() {
    matches_upstream("openai-codex-responses");
}

fn responses_root(fake: &FakeLlm) -> RunRoot {
    root_for(&recording("openai-responses")["provider"], fake)
}

fn prompt_and_settle(agent: &mut RpcAgent, id: &str, text: &str) -> Vec<Value> {
    drive(agent, &[json!({"type": "prompt", "message": text})], id)
}

#[test]
fn stream_error_events_end_the_message_with_upstreams_text() {
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n";
    let error = "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}\n\n";
    let cut = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r3\"}}\n\n";
    let mut t1 = Turn::text("");
    t1.raw_sse = Some(vec![failed.into()]);
    let mut t2 = Turn::text("");
    t2.raw_sse = Some(vec![error.into()]);
    let mut t3 = Turn::text("");
    t3.raw_sse = Some(vec![cut.into()]);
    let fake = FakeLlm::spawn(Script::new([t1, t2, t3])).unwrap();
    let root = responses_root(&fake);
    let mut agent = root.spawn();
    let m = prompt_and_settle(&mut agent, "p1", "a");
    assert_eq!(m[0]["stopReason"], "error");
    assert_eq!(m[0]["errorMessage"], "server_error: boom");
    let m = prompt_and_settle(&mut agent, "p2", "b");
    assert_eq!(
        m[0]["errorMessage"],
        "Error Code rate_limit_exceeded: slow down"
    );
    let m = prompt_and_settle(&mut agent, "p3", "c");
    assert_eq!(
        m[0]["errorMessage"],
        "OpenAI Responses stream ended before a terminal response event"
    );
}

#[test]
fn retry_after_and_overflow_reach_retry_and_compaction() {
    // A 429 with retry-after-ms is retried by the agent after the server's delay; a
    // context-overflow 400 starts compaction.
    let overflow = json!({"error": {"message": "Your input exceeds the context window of this model.",
        "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}});
    let fake = FakeLlm::spawn(Script::new([
        Turn::error(429).error_header("retry-after-ms", "1200"),
        Turn::text("after retry"),
        Turn::text("second answer").usage(pi_fakellm::Usage::new(1000, 10)),
        Turn::text("").error_body(400, overflow),
    ]))
    .unwrap();
    let root = responses_root(&fake);
    root.merge_settings(json!({"retry": {"enabled": true, "maxRetries": 2, "baseDelayMs": 10, "provider": {"maxRetries": 0}},
                               "compaction": {"enabled": true, "keepRecentTokens": 10}}));
    let mut agent = root.spawn();
    let from = agent.len();
    agent.request(json!({"id": "p1", "type": "prompt", "message": "hi"}));
    let (_, start) = agent.wait_from(from, LIVENESS, |v| kind(v) == "auto_retry_start");
    assert_eq!(start["delayMs"], 1200, "{start}");
    let (_, end) = agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    let _ = end;
    prompt_and_settle(&mut agent, "p2-", "more");
    let from = agent.len();
    agent.request(json!({"id": "p3", "type": "prompt",
        "message": "A prompt long enough to exceed keepRecentTokens on its own"}));
    let (_, c) = agent.wait_from(from, LIVENESS, |v| kind(v) == "compaction_start");
    assert_eq!(c["reason"], "overflow", "{c}");
}

#[test]
fn incomplete_responses_map_to_upstreams_stop_reasons() {
    // `incomplete` for another reason than max_output_tokens is an error with upstream's text;
    // the fake's `content_filter` stop reason sends that.
    let fake = FakeLlm::spawn(Script::new([
        Turn::text("partial").stop_reason("content_filter")
    ]))
    .unwrap();
    let root = responses_root(&fake);
    let mut agent = root.spawn();
    let m = prompt_and_settle(&mut agent, "p", "a");
    assert_eq!(m[0]["stopReason"], "error", "{}", m[0]);
    assert_eq!(m[0]["errorMessage"], "Response incomplete: content_filter");
    assert_eq!(m[0]["content"][0]["text"], "partial");
}

#[test]
fn azure_base_url_comes_from_the_environment() {
    // AZURE_OPENAI_BASE_URL wins over the model's baseUrl; the default api-version is v1 and
    // the body's model is the model id without a deployment map. (The key of a custom provider
    // comes from models.json; AZURE_OPENAI_API_KEY belongs to the catalogue's `azure-openai-responses`
    // provider.)
    let fake = FakeLlm::spawn(Script::new([Turn::text("b")])).unwrap();
    let root = root_for(&recording("azure-openai-responses")["provider"], &fake);
    let base = format!("http://127.0.0.1:{}/custom/openai/v1/", fake.port());
    let mut agent = root.spawn_with_env(false, &[], &[("AZURE_OPENAI_BASE_URL", base.as_str())]);
    let m = prompt_and_settle(&mut agent, "q", "b");
    assert_eq!(m[0]["stopReason"], "stop", "{}", m[0]);
    let req = &fake.llm_requests()[0];
    assert_eq!(req.path, "/custom/openai/v1/responses?api-version=v1");
    assert_eq!(req.header("api-key"), Some("azure-fake-key"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.body["model"], "fake-gpt5");
}

#[test]
fn codex_needs_an_account_id_in_the_token() {
    let fake = FakeLlm::spawn(Script::new([Turn::text("a")])).unwrap();
    let mut provider = recording("openai-codex-responses")["provider"].clone();
    provider["apiKey"] = json!("not-a-jwt");
    let root = root_for(&provider, &fake);
    let mut agent = root.spawn();
    let m = prompt_and_settle(&mut agent, "p", "a");
    assert_eq!(
        m[0]["errorMessage"],
        "Failed to extract accountId from token"
    );
    assert!(fake.llm_requests().is_empty());
}
