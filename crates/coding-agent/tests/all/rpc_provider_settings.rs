//! Settings passed through to the providers (issue 10): `thinkingBudgets` on the request,
//! `modelThinkingLevels` at start-up and on a model switch, `httpProxy` for the HTTP client.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

fn run_prompt(agent: &mut RpcAgent, id: &str) {
    agent.prompt_settled(id, "think");
}

#[test]
fn thinking_budgets_set_the_anthropic_budget() {
    let (fake, root) = setup(Script::new([Turn::text("a")]), "fake-anthropic/fake-claude");
    root.merge_settings(json!({"defaultThinkingLevel": "low", "thinkingBudgets": {"low": 3000}}));
    let mut agent = root.spawn();
    run_prompt(&mut agent, "p1");
    let body = &fake.llm_requests()[0].body;
    assert_eq!(body["thinking"]["type"], "enabled", "{body}");
    assert_eq!(body["thinking"]["budget_tokens"], 3000, "{body}");
}

#[test]
fn thinking_budgets_set_the_budget_field_of_openai_compatible_servers() {
    let (fake, root) = setup(
        Script::new([Turn::text("a"), Turn::text("b")]),
        "fake-openai/fake-gpt",
    );
    let mut models = models_json(fake.port());
    models["providers"]["fake-openai"]["models"][0]["compat"] =
        json!({"supportsThinkingTokenBudget": true});
    root.write_agent_file("models.json", &models);
    root.merge_settings(
        json!({"defaultThinkingLevel": "medium", "thinkingBudgets": {"medium": 5000}}),
    );
    let mut agent = root.spawn();
    run_prompt(&mut agent, "p1");
    let body = &fake.llm_requests()[0].body;
    assert_eq!(body["thinking_token_budget"], 5000, "{body}");

    // A named field, and the cap that leaves 1024 tokens for the answer (maxTokens 16384).
    models["providers"]["fake-openai"]["models"][0]["compat"] =
        json!({"thinkingTokenBudgetField": "max_thinking_tokens"});
    root.write_agent_file("models.json", &models);
    root.merge_settings(json!({"thinkingBudgets": {"medium": 99999}}));
    let mut agent = root.spawn();
    run_prompt(&mut agent, "p2");
    let body = &fake.llm_requests()[1].body;
    assert_eq!(body["max_thinking_tokens"], 16384 - 1024, "{body}");
    assert!(body.get("thinking_token_budget").is_none());
}

#[test]
fn model_thinking_levels_pick_the_level_at_start_and_on_a_switch() {
    let (_fake, root) = setup(Script::new([]), "fake-anthropic/fake-claude");
    root.merge_settings(json!({
        "defaultThinkingLevel": "low",
        "modelThinkingLevels": {"fake-anthropic/fake-claude": "high", "fake-claude": "minimal"}
    }));
    let mut agent = root.spawn();
    let state = agent.request(json!({"id": "s1", "type": "get_state"}));
    assert_eq!(state["data"]["thinkingLevel"], "high", "{state}");
    let r = agent.request(
        json!({"id": "m1", "type": "set_model", "provider": "fake-openai", "modelId": "fake-gpt"}),
    );
    assert_eq!(r["success"], true, "{r}");
    let state = agent.request(json!({"id": "s2", "type": "get_state"}));
    assert_eq!(
        state["data"]["thinkingLevel"], "low",
        "no entry: defaultThinkingLevel"
    );
    agent.request(json!({"id": "m2", "type": "set_model", "provider": "fake-anthropic", "modelId": "fake-claude"}));
    let state = agent.request(json!({"id": "s3", "type": "get_state"}));
    assert_eq!(state["data"]["thinkingLevel"], "high");
}

/// A minimal forward HTTP proxy on 127.0.0.1: records each request line, rewrites the
/// absolute-form target to origin form and relays the bytes both ways.
fn start_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || relay(client, log));
        }
    });
    (port, seen)
}

fn relay(mut client: TcpStream, log: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let (line, rest) = text.split_once("\r\n").unwrap();
    log.lock().unwrap().push(line.to_string());
    let mut parts = line.splitn(3, ' ');
    let (method, target, version) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let after_scheme = target.strip_prefix("http://").unwrap();
    let (authority, path) = after_scheme
        .split_once('/')
        .map_or((after_scheme, "/".to_string()), |(a, p)| {
            (a, format!("/{p}"))
        });
    let mut upstream = TcpStream::connect(authority).unwrap();
    upstream
        .write_all(format!("{method} {path} {version}\r\n{rest}").as_bytes())
        .unwrap();
    let mut up_read = upstream.try_clone().unwrap();
    let mut client_write = client.try_clone().unwrap();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_read, &mut client_write);
        let _ = client_write.shutdown(std::net::Shutdown::Both);
    });
    let _ = std::io::copy(&mut client, &mut upstream);
}

#[test]
fn http_proxy_setting_routes_provider_requests_through_the_proxy() {
    let (fake, root) = setup(Script::new([Turn::text("via proxy")]), DEFAULT_MODEL);
    let (proxy_port, seen) = start_proxy();
    root.merge_settings(json!({"httpProxy": format!("http://127.0.0.1:{proxy_port}")}));
    let mut agent = root.spawn();
    run_prompt(&mut agent, "p1");
    let end = agent
        .events()
        .into_iter()
        .rfind(|v| kind(v) == "message_end")
        .unwrap();
    assert_eq!(end["message"]["content"][0]["text"], "via proxy", "{end}");
    let lines: Vec<String> = seen.lock().unwrap().clone();
    let expected = format!(
        "POST http://127.0.0.1:{}/v1/chat/completions HTTP/1.1",
        fake.port()
    );
    assert!(lines.contains(&expected), "{lines:?}");
}
