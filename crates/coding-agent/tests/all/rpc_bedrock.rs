//! `bedrock-converse-stream` end to end (issue 14): `pi --mode rpc` plays the Bedrock
//! conversations of `fixtures/providers/cases.json` against the fake's ConverseStream wire
//! (AWS event-stream framing): text, budget and adaptive thinking with signatures, GPT
//! reasoning, a tool call and its result, an image, HTTP and in-stream exceptions, a context
//! overflow, SigV4 and bearer-token authentication. The request bodies must equal, field for
//! field after masking prose, what upstream pi 1.6 sent for the same conversations
//! (`fixtures/providers/upstream/bedrock*.json`, recorded with `fixtures/providers/record.py`),
//! and so must the assistant messages' stop reasons, error texts and usage.

use crate::common::*;
use crate::provider_cases::{self, read_json, Played};
use pi_fakellm::{FakeLlm, Script};
use serde_json::{json, Value};

const HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
];

fn play(name: &str) -> Played {
    provider_cases::play(name, HEADERS)
}

/// Replace tool descriptions (prose) inside `toolSpec`s with a marker.
fn mask_tools(v: &mut Value) {
    if let Some(tools) = v
        .pointer_mut("/toolConfig/tools")
        .and_then(Value::as_array_mut)
    {
        for t in tools {
            if let Some(spec) = t.get_mut("toolSpec") {
                spec["description"] = json!("<description>");
                mask_param_descriptions(&mut spec["inputSchema"]);
            }
        }
    }
}

fn mask_param_descriptions(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "description" && child.is_string() {
                    *child = json!("<description>");
                } else {
                    mask_param_descriptions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_param_descriptions),
        _ => {}
    }
}

/// The request body with its prose masked: the system prompt text, tool descriptions, and the
/// prompt text of compaction requests (they carry no tools).
fn masked_body(request: &Value) -> Value {
    let mut body = request["body"].clone();
    if let Some(first) = body.pointer_mut("/system/0/text") {
        *first = json!("<system prompt>");
    }
    mask_tools(&mut body);
    if body.get("toolConfig").is_none() {
        if let Some(last) = body
            .get_mut("messages")
            .and_then(Value::as_array_mut)
            .and_then(|m| m.last_mut())
        {
            last["content"] = json!("<compaction prompt>");
        }
    }
    body
}

/// Compares our requests with upstream's recording, request by request and field by field.
fn assert_same_requests(case: &str, ours: &Played) -> Vec<Value> {
    let upstream = read_json(&format!("upstream/{case}.json"));
    let theirs = upstream["requests"].as_array().unwrap().clone();
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
    assert_eq!(
        paths(&ours.requests),
        paths(&theirs),
        "{case}: request paths"
    );
    for (i, (a, b)) in ours.requests.iter().zip(&theirs).enumerate() {
        let (ma, mb) = (masked_body(a), masked_body(b));
        assert_eq!(
            ma,
            mb,
            "{case}: request {i} body differs\nours:     {}\nupstream: {}",
            serde_json::to_string_pretty(&ma).unwrap(),
            serde_json::to_string_pretty(&mb).unwrap()
        );
    }
    theirs
}

/// Compare the assistant messages with upstream's: stop reasons, error texts, usage and cost,
/// content block types and thinking signatures.
fn assert_same_outcomes(case: &str, ours: &Played) {
    let upstream = read_json(&format!("upstream/{case}.json"));
    let summary = |ms: Vec<&Value>| -> Vec<Value> {
        ms.iter()
            .map(|m| {
                let kinds: Vec<Value> = m["content"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .map(|b| json!([b["type"], b["thinkingSignature"]]))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut usage = m["usage"].clone();
                if let Some(cost) = usage.get_mut("cost").and_then(Value::as_object_mut) {
                    // Rounded: the two sides sum the same figures in different orders.
                    for v in cost.values_mut() {
                        if let Some(f) = v.as_f64() {
                            *v = json!((f * 1e12).round() / 1e12);
                        }
                    }
                }
                json!({"stopReason": m["stopReason"], "errorMessage": m["errorMessage"],
                       "content": kinds, "usage": usage, "model": m["model"], "api": m["api"]})
            })
            .collect()
    };
    let assistants = |ms: &[Value]| -> Vec<Value> {
        ms.iter()
            .filter(|m| m["role"] == "assistant")
            .cloned()
            .collect()
    };
    let theirs = assistants(upstream["messages"].as_array().unwrap());
    let mine = assistants(&ours.messages);
    assert_eq!(
        summary(mine.iter().collect()),
        summary(theirs.iter().collect()),
        "{case}: assistant messages"
    );
}

/// `AWS4-HMAC-SHA256 Credential=<key>/<yyyymmdd>/<region>/bedrock/aws4_request,
/// SignedHeaders=<…>, Signature=<64 hex>`.
fn assert_sigv4(header: &str, key: &str, region: &str, session: bool) {
    let rest = header
        .strip_prefix("AWS4-HMAC-SHA256 Credential=")
        .unwrap_or_else(|| panic!("not SigV4: {header}"));
    let (credential, rest) = rest.split_once(", SignedHeaders=").expect(header);
    let parts: Vec<&str> = credential.split('/').collect();
    assert_eq!(parts.len(), 5, "{header}");
    assert_eq!(parts[0], key, "{header}");
    assert!(
        parts[1].len() == 8 && parts[1].chars().all(|c| c.is_ascii_digit()),
        "{header}"
    );
    assert_eq!(&parts[2..], [region, "bedrock", "aws4_request"], "{header}");
    let (signed, signature) = rest.split_once(", Signature=").expect(header);
    let signed: Vec<&str> = signed.split(';').collect();
    for h in ["host", "x-amz-content-sha256", "x-amz-date"] {
        assert!(signed.contains(&h), "{h} not signed: {header}");
    }
    assert_eq!(
        signed.contains(&"x-amz-security-token"),
        session,
        "{header}"
    );
    assert!(
        signature.len() == 64 && signature.chars().all(|c| c.is_ascii_hexdigit()),
        "{header}"
    );
}

#[test]
fn bedrock_converse_stream_matches_upstream() {
    let played = play("bedrock");
    let theirs = assert_same_requests("bedrock", &played);
    assert_same_outcomes("bedrock", &played);
    for (a, b) in played.requests.iter().zip(&theirs) {
        let auth = a["headers"]["authorization"].as_str().unwrap_or("");
        assert_sigv4(auth, "AKIDFAKEBEDROCK", "us-west-2", true);
        assert_sigv4(
            b["headers"]["authorization"].as_str().unwrap(),
            "AKIDFAKEBEDROCK",
            "us-west-2",
            true,
        );
        assert_eq!(
            a["headers"]["x-amz-security-token"],
            b["headers"]["x-amz-security-token"]
        );
        let date = a["headers"]["x-amz-date"].as_str().unwrap_or("");
        assert!(
            date.len() == 16 && date.ends_with('Z') && date.as_bytes()[8] == b'T',
            "{date}"
        );
        let sha = a["headers"]["x-amz-content-sha256"].as_str().unwrap_or("");
        assert_eq!(sha.len(), 64, "{sha}");
        assert_eq!(a["headers"]["content-type"], "application/json");
    }
    // Usage with cache reads and writes priced from the catalogue.
    let first = played
        .messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(first["usage"]["cacheRead"], 40, "{first}");
    assert_eq!(first["usage"]["cacheWrite"], 12, "{first}");
    assert_eq!(first["usage"]["totalTokens"], 157, "{first}");
}

#[test]
fn bedrock_adaptive_and_gpt_reasoning_match_upstream() {
    let played = play("bedrock_adaptive");
    assert_same_requests("bedrock_adaptive", &played);
    assert_same_outcomes("bedrock_adaptive", &played);
}

#[test]
fn bedrock_errors_match_upstream() {
    let played = play("bedrock_errors");
    assert_same_requests("bedrock_errors", &played);
    assert_same_outcomes("bedrock_errors", &played);
    for r in &played.requests {
        // No session token in this case: not signed, not sent.
        assert_sigv4(
            r["headers"]["authorization"].as_str().unwrap_or(""),
            "AKIDFAKEBEDROCK",
            "eu-central-1",
            false,
        );
        assert!(r["headers"].get("x-amz-security-token").is_none(), "{r}");
    }
}

#[test]
fn bedrock_bearer_token_and_default_model_match_upstream() {
    // Only AWS_BEARER_TOKEN_BEDROCK set, no model configured: the default Bedrock model.
    let played = play("bedrock_bearer");
    let theirs = assert_same_requests("bedrock_bearer", &played);
    assert_same_outcomes("bedrock_bearer", &played);
    assert_eq!(
        played.requests[0]["headers"]["authorization"],
        theirs[0]["headers"]["authorization"]
    );
    assert_eq!(
        played.requests[0]["headers"]["authorization"],
        "Bearer fake-bedrock-bearer"
    );
}

/// A run root on `fake` with the built-in Bedrock provider pointed at it.
fn bedrock_root(fake: &FakeLlm, settings: Value) -> RunRoot {
    let root = RunRoot::new(fake.port());
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"amazon-bedrock": {
            "baseUrl": format!("http://127.0.0.1:{}/bedrock", fake.port())}}}),
    );
    root.write_agent_file("settings.json", &settings);
    root
}

#[test]
fn bedrock_throttling_is_retried_by_the_sdk_rules_then_by_the_agent() {
    // Two HTTP 429s are retried inside the request (AWS_MAX_ATTEMPTS 3, as the SDK's
    // standard mode); a throttling exception inside the stream is left to the agent's
    // auto-retry, which classifies `Throttling error: …` as retryable.
    let script = Script::new([
        pi_fakellm::Turn::error(429),
        pi_fakellm::Turn::error(429),
        pi_fakellm::Turn {
            exception: Some(pi_fakellm::ExceptionSpec {
                kind: "throttlingException".into(),
                message: "Too many requests, please wait before trying again.".into(),
            }),
            ..pi_fakellm::Turn::text("Partial")
        },
        pi_fakellm::Turn::text("After the retry."),
    ]);
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = bedrock_root(
        &fake,
        json!({"defaultProvider": "amazon-bedrock",
               "defaultModel": "anthropic.claude-sonnet-4-5-20250929-v1:0",
               "defaultThinkingLevel": "off",
               "retry": {"enabled": true, "baseDelayMs": 10}}),
    );
    let mut agent = root.spawn_with_env(
        false,
        &[],
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDX"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "us-east-2"),
        ],
    );
    agent.prompt_settled("p", "Hello?");
    let starts: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|e| kind(e) == "auto_retry_start")
        .collect();
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(
        starts[0]["errorMessage"],
        "Throttling error: Too many requests, please wait before trying again."
    );
    let r = agent.request(json!({"id": "t", "type": "get_last_assistant_text"}));
    assert_eq!(r["data"]["text"], "After the retry.", "{r}");
    assert_eq!(fake.llm_requests().len(), 4);
}

#[test]
fn bedrock_profile_credentials_and_region_from_the_shared_files() {
    let script = Script::new([pi_fakellm::Turn::text("From the profile.")]);
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = bedrock_root(
        &fake,
        json!({"defaultProvider": "amazon-bedrock",
               "defaultModel": "amazon.nova-lite-v1:0", "retry": {"enabled": false}}),
    );
    let aws = root.path().join("aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = x\n\n\
         [dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = y\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile dev]\nregion = ap-northeast-1\n",
    )
    .unwrap();
    let creds = aws.join("credentials").to_string_lossy().into_owned();
    let config = aws.join("config").to_string_lossy().into_owned();
    let mut agent = root.spawn_with_env(
        false,
        &[],
        &[
            ("AWS_PROFILE", "dev"),
            ("AWS_SHARED_CREDENTIALS_FILE", &creds),
            ("AWS_CONFIG_FILE", &config),
        ],
    );
    agent.prompt_settled("p", "Hello?");
    let r = agent.request(json!({"id": "t", "type": "get_last_assistant_text"}));
    assert_eq!(r["data"]["text"], "From the profile.", "{r}");
    let reqs = fake.llm_requests();
    assert_eq!(
        reqs[0].path_only(),
        "/bedrock/model/amazon.nova-lite-v1%3A0/converse-stream"
    );
    assert_sigv4(
        reqs[0].header("authorization").unwrap_or(""),
        "AKIDDEV",
        "ap-northeast-1",
        false,
    );
}

/// The extension provider hooks in the Bedrock adapter (upstream 1.6
/// `api/bedrock-converse-stream.js`: `onPayload` on the command input, the caller headers
/// before SigV4 signs them, `onResponse` with the HTTP status): `before_provider_headers`
/// sees the models.json headers and its changes are sent (signed), `before_provider_request`'s
/// return value is the body sent, and `after_provider_response` fires once with 200.
#[test]
fn bedrock_runs_the_extension_provider_hooks() {
    let ext = r#"import * as fs from "node:fs";
    export default function (pi) {
      const log = (x) => fs.appendFileSync("hooks.log", JSON.stringify(x) + "\n");
      pi.on("before_provider_headers", (event) => {
        log({ ev: "headers", headers: { ...event.headers } });
        event.headers["x-extra"] = "yes";
        event.headers["x-drop"] = null;
      });
      pi.on("before_provider_request", (event) => {
        log({ ev: "request", model: event.payload.modelId ?? null, messages: event.payload.messages.length });
        return { ...event.payload, inferenceConfig: { ...event.payload.inferenceConfig, temperature: 0.25 } };
      });
      pi.on("after_provider_response", (event) => log({ ev: "response", status: event.status }));
    }"#;
    let fake = FakeLlm::spawn(Script::new([pi_fakellm::Turn::text("hello")])).expect("fake");
    let root = RunRoot::new(fake.port());
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"amazon-bedrock": {
            "baseUrl": format!("http://127.0.0.1:{}/bedrock", fake.port()),
            "headers": {"x-drop": "1", "x-keep": "2"}}}}),
    );
    root.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "amazon-bedrock",
               "defaultModel": "anthropic.claude-sonnet-4-5-20250929-v1:0",
               "defaultThinkingLevel": "off"}),
    );
    root.write_cwd_file("h.js", ext);
    let mut agent = root.spawn_with_env(
        false,
        &["-e", "h.js"],
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDX"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "us-east-2"),
        ],
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "hi"}));
    agent.wait_event("agent_settled");
    let r = agent.request(json!({"id": "t", "type": "get_last_assistant_text"}));
    assert_eq!(r["data"]["text"], "hello", "{}", agent.dump());
    let requests = fake.llm_requests();
    assert_eq!(requests.len(), 1, "{}", agent.dump());
    let q = &requests[0];
    assert_eq!(q.body["inferenceConfig"]["temperature"], 0.25, "{}", q.body);
    assert_eq!(q.header("x-extra"), Some("yes"));
    assert_eq!(q.header("x-drop"), None);
    assert_eq!(q.header("x-keep"), Some("2"));
    // The changed headers are signed with the request.
    let auth = q.header("authorization").unwrap_or_default();
    assert!(auth.contains("x-extra"), "{auth}");
    assert!(!auth.contains("x-drop"), "{auth}");
    let log = std::fs::read_to_string(root.cwd.join("hooks.log")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        json!({"ev": "headers", "headers": {"x-drop": "1", "x-keep": "2"}})
    );
    assert_eq!(lines[1]["ev"], "request", "{log}");
    assert_eq!(lines[1]["messages"], 1, "{log}");
    let responses: Vec<&Value> = lines.iter().filter(|l| l["ev"] == "response").collect();
    assert_eq!(
        responses,
        [&json!({"ev": "response", "status": 200})],
        "{log}"
    );
}
