//! `google-generative-ai`, `google-vertex` and `mistral-conversations` end to end (issue 14):
//! `pi --mode rpc` plays the conversations of `fixtures/providers/cases.json` against the fake
//! (text, thinking, a tool call and its result, an image, a provider error, a context overflow
//! followed by compaction), and the request bodies must equal, field for field after masking
//! prose and ids, what upstream pi 1.6 sent for the same conversations
//! (`fixtures/providers/upstream/<case>.json`, recorded with `fixtures/providers/record.py`).

use crate::common::*;
use crate::provider_cases::{self, read_json, subst, Played};
use pi_fakellm::{FakeLlm, Script};
use serde_json::{json, Value};

const HEADERS: &[&str] = &[
    "authorization",
    "x-goog-api-key",
    "content-type",
    "accept",
    "x-affinity",
];

fn play(name: &str) -> Played {
    provider_cases::play(name, HEADERS)
}

/// Replace prose and generated values with markers so that upstream's and our bodies can be
/// compared: system prompts, tool and parameter descriptions, compaction prompts (user text
/// of a request that has no tools), tool-call ids synthesised from the clock, session ids.
fn mask(v: &mut Value, key: Option<&str>, in_tools: bool) {
    match v {
        Value::Object(m) => {
            let tools_here = in_tools
                || m.contains_key("functionDeclarations")
                || (m.get("type") == Some(&json!("function")) && m.contains_key("function"));
            for (k, child) in m.iter_mut() {
                mask(child, Some(k), tools_here);
            }
        }
        Value::Array(items) => {
            for item in items {
                mask(item, key, in_tools);
            }
        }
        Value::String(s) => {
            let masked = match key {
                Some("description") if in_tools => Some("<description>"),
                Some("prompt_cache_key") | Some("x-affinity") => Some("<session>"),
                Some("id") | Some("tool_call_id") => {
                    // Gemini 2.x calls get `<name>_<unix ms>_<n>` ids, different in each run.
                    let parts: Vec<&str> = s.rsplitn(3, '_').collect();
                    (parts.len() == 3
                        && parts[0].chars().all(|c| c.is_ascii_digit())
                        && parts[1].len() >= 12
                        && parts[1].chars().all(|c| c.is_ascii_digit()))
                    .then_some("<clock id>")
                }
                _ => None,
            };
            if let Some(m) = masked {
                *s = m.to_owned();
            }
        }
        _ => {}
    }
}

/// The request body with its prose masked: the system instruction / system message, and the
/// prompt text of compaction requests (they carry no tools).
fn masked_body(request: &Value) -> Value {
    let mut body = request["body"].clone();
    if let Some(si) = body.get_mut("systemInstruction") {
        *si = json!("<system prompt>");
    }
    let compaction = body.get("tools").is_none();
    if let Some(msgs) = body.get_mut("messages").and_then(Value::as_array_mut) {
        for m in msgs.iter_mut() {
            if m["role"] == "system" {
                m["content"] = json!("<system prompt>");
            }
        }
        if compaction {
            if let Some(last) = msgs.last_mut() {
                last["content"] = json!("<compaction prompt>");
            }
        }
    }
    if compaction {
        if let Some(last) = body
            .get_mut("contents")
            .and_then(Value::as_array_mut)
            .and_then(|c| c.last_mut())
        {
            last["parts"] = json!("<compaction prompt>");
        }
    }
    mask(&mut body, None, false);
    body
}

/// Compares our requests with upstream's recording `upstream/<recorded>.json`, request by
/// request and field by field (token requests aside; headers only when `headers`).
fn assert_same_requests(case: &str, recorded: &str, ours: &Played, headers: bool) {
    let upstream = read_json(&format!("upstream/{recorded}.json"));
    let theirs: Vec<Value> = upstream["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["api"] != "token")
        .cloned()
        .collect();
    let mine: Vec<Value> = ours
        .requests
        .iter()
        .filter(|r| r["api"] != "token")
        .cloned()
        .collect();
    let paths = |rs: &[Value]| -> Vec<String> {
        rs.iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["method"].as_str().unwrap_or(""),
                    r["path"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(paths(&mine), paths(&theirs), "{case}: request paths");
    for (i, (a, b)) in mine.iter().zip(&theirs).enumerate() {
        let (ma, mb) = (masked_body(a), masked_body(b));
        assert_eq!(
            ma,
            mb,
            "{case}: request {i} body differs\nours:     {}\nupstream: {}",
            serde_json::to_string_pretty(&ma).unwrap(),
            serde_json::to_string_pretty(&mb).unwrap()
        );
        if !headers {
            continue;
        }
        let mut ha = a["headers"].clone();
        let mut hb = b["headers"].clone();
        mask(&mut ha, None, false);
        mask(&mut hb, None, false);
        assert_eq!(ha, hb, "{case}: request {i} headers");
    }
}

fn assistant_messages(p: &Played) -> Vec<&Value> {
    p.messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect()
}

/// Compare the assistant messages with upstream's: stop reasons, error texts, usage, content
/// block types (the texts come from the same script).
fn assert_same_outcomes(case: &str, recorded: &str, ours: &Played) {
    let upstream = read_json(&format!("upstream/{recorded}.json"));
    let summary = |ms: Vec<&Value>| -> Vec<Value> {
        ms.iter()
            .map(|m| {
                let kinds: Vec<Value> = m["content"]
                    .as_array()
                    .map(|c| c.iter().map(|b| b["type"].clone()).collect())
                    .unwrap_or_default();
                let mut usage = m["usage"].clone();
                if let Some(u) = usage.as_object_mut() {
                    u.remove("cost");
                }
                json!({"stopReason": m["stopReason"], "errorMessage": m["errorMessage"],
                       "content": kinds, "usage": usage, "model": m["model"], "api": m["api"]})
            })
            .collect()
    };
    let theirs: Vec<&Value> = upstream["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(
        summary(assistant_messages(ours)),
        summary(theirs),
        "{case}: assistant messages"
    );
}

#[test]
fn google_generative_ai_matches_upstream() {
    let played = play("google");
    assert_same_requests("google", "google", &played, true);
    assert_same_outcomes("google", "google", &played);
    let msgs = assistant_messages(&played);
    // Usage with cached tokens, and its cost (0.3/2.5/0.03 per million).
    let first = msgs[0];
    assert_eq!(first["usage"]["input"], 100, "{first}");
    assert_eq!(first["usage"]["cacheRead"], 40, "{first}");
    let cost = first["usage"]["cost"]["total"].as_f64().unwrap();
    assert!(
        (cost - (100.0 * 0.3 + 5.0 * 2.5 + 40.0 * 0.03) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    // The thought signature is kept on the thinking block and replayed.
    let thinking = &msgs[1]["content"][0];
    assert_eq!(
        thinking["thinkingSignature"], "c2lnLWdvb2dsZS0x",
        "{thinking}"
    );
    // Gemini 3 keeps the server's function call id.
    assert!(played
        .messages
        .iter()
        .any(|m| m["role"] == "toolResult" && m["toolCallId"] == "call-g3-1"));
    // The 429 names its RetryInfo; the overflow is not retried (the request list above).
    assert!(msgs.last().unwrap()["errorMessage"]
        .as_str()
        .unwrap()
        .contains("RESOURCE_EXHAUSTED"));
    let _ = &played.events;
}

#[test]
fn google_vertex_with_service_account_matches_upstream() {
    // Upstream's google-auth-library posts to oauth2.googleapis.com whatever the key file
    // says (upstream/vertex_adc.json: no request reached the fake), so the bodies are compared
    // with the API-key recording of the same conversation; ours uses the key's token_uri.
    let played = play("vertex_adc");
    assert_same_requests("vertex_adc", "vertex_key", &played, false);
    assert_same_outcomes("vertex_adc", "vertex_key", &played);
    // One token exchange (a signed JWT at the key's token_uri), reused by the second request.
    let tokens: Vec<&Value> = played
        .requests
        .iter()
        .filter(|r| r["api"] == "token")
        .collect();
    assert_eq!(tokens.len(), 1, "{:?}", played.requests);
    let form = tokens[0]["body"].as_str().unwrap();
    assert!(
        form.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"),
        "{form}"
    );
    for r in played.requests.iter().filter(|r| r["api"] == "google") {
        assert_eq!(
            r["headers"]["authorization"], "Bearer fake-access-token-1",
            "{r}"
        );
    }
}

#[test]
fn google_vertex_with_api_key_matches_upstream() {
    let played = play("vertex_key");
    assert_same_requests("vertex_key", "vertex_key", &played, true);
    assert_same_outcomes("vertex_key", "vertex_key", &played);
}

#[test]
fn mistral_conversations_matches_upstream() {
    let played = play("mistral");
    assert_same_requests("mistral", "mistral", &played, true);
    assert_same_outcomes("mistral", "mistral", &played);
    let msgs = assistant_messages(&played);
    assert_eq!(msgs[0]["usage"]["cacheRead"], 40, "{}", msgs[0]);
    assert_eq!(msgs[4]["content"][0]["type"], "thinking", "{}", msgs[4]);
}

/// A run root on `fake` with the `fake-google` provider of cases.json selected, retries on
/// (10 ms base delay) and thinking off.
fn google_root(fake: &FakeLlm) -> RunRoot {
    let case = read_json("cases.json")["google"].clone();
    let root = RunRoot::new(fake.port());
    let root_dir = root.path().to_string_lossy().into_owned();
    root.write_agent_file(
        "models.json",
        &subst(&case["models"], fake.port(), &root_dir),
    );
    root.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "fake-google", "defaultModel": "gemini-2.5-flash",
                "defaultThinkingLevel": "off",
                "retry": {"enabled": true, "baseDelayMs": 10, "provider": {"maxRetries": 0}}}),
    );
    root
}

#[test]
fn google_retry_info_delay_is_waited_for() {
    let body = json!({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.3s"}]}});
    let script = Script::new([
        pi_fakellm::Turn::default().error_body(429, body),
        pi_fakellm::Turn::text("After the wait."),
    ]);
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = google_root(&fake);
    let mut agent = root.spawn();
    let from = agent.len();
    let r = agent.request(json!({"id": "p", "type": "prompt", "message": "Hello?"}));
    assert_eq!(r["success"], true, "{r}");
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    let start = agent
        .events()
        .into_iter()
        .find(|e| kind(e) == "auto_retry_start")
        .expect("auto_retry_start");
    assert_eq!(start["delayMs"], 300, "{start}");
    assert!(start["errorMessage"]
        .as_str()
        .unwrap_or("")
        .starts_with(r#"{"error":{"code":429"#));
    let r = agent.request(json!({"id": "t", "type": "get_last_assistant_text"}));
    assert_eq!(r["data"]["text"], "After the wait.", "{r}");
}

#[test]
fn gemini_safety_stop_and_a_stream_without_finish_reason_are_errors() {
    let script = Script::new([
        pi_fakellm::Turn::text("Partial").stop_reason("SAFETY"),
        pi_fakellm::Turn {
            raw_sse: Some(vec![
                "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"cut\"}]},\"index\":0}]}\r\n\r\n".into(),
            ]),
            ..Default::default()
        },
    ]);
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = google_root(&fake);
    root.merge_settings(json!({"retry": {"enabled": false}}));
    let mut agent = root.spawn();
    for id in ["a", "b"] {
        agent.prompt_settled(id, "Hello?");
    }
    let r = agent.request(json!({"id": "m", "type": "get_messages"}));
    let errors: Vec<&Value> = r["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| &m["errorMessage"])
        .collect();
    assert_eq!(
        errors,
        [
            &json!("Provider stopped with: SAFETY"),
            &json!("Google stream ended without a finish reason")
        ]
    );
}
