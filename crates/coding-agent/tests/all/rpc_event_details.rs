//! Event details clients read (issue 10): `message_update.usage` is the usage known so far,
//! Anthropic assistant messages carry `responseId`, and the bash tool's first
//! `tool_execution_update` is the empty one upstream 1.6 sends.

use crate::common::*;
use pi_fakellm::{Script, Turn, Usage};
use serde_json::{json, Value};

fn run(agent: &mut RpcAgent) -> Vec<Value> {
    let r = agent.request(json!({"id": "p1", "type": "prompt", "message": "go"}));
    assert_eq!(r["success"], true, "{r}");
    agent.wait_event("agent_settled");
    agent.events()
}

#[test]
fn anthropic_message_updates_carry_the_usage_known_so_far() {
    let script = Script::new([Turn::text("Hello there, friend.").usage(Usage::new(42, 7))]);
    let (_fake, root) = setup(script, "fake-anthropic/fake-claude-haiku");
    let mut agent = root.spawn();
    let events = run(&mut agent);
    let updates: Vec<&Value> = events
        .iter()
        .filter(|v| kind(v) == "message_update")
        .collect();
    assert!(!updates.is_empty());
    // message_start reports the input tokens, so every update already has them.
    for u in &updates {
        assert_eq!(u["usage"]["input"], 42, "{u}");
        assert!(u["usage"]["cost"]["input"].as_f64().unwrap() > 0.0, "{u}");
    }
    let end = events
        .iter()
        .find(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["usage"]["output"], 7);
    assert!(end["message"]["responseId"]
        .as_str()
        .is_some_and(|id| id.starts_with("msg_")));
}

#[test]
fn openai_message_updates_after_the_usage_chunk_carry_it() {
    let script = Script::new([Turn::text("Hi!").usage(Usage::new(10, 5))]);
    let (_fake, root) = setup(script, DEFAULT_MODEL);
    let mut agent = root.spawn();
    let events = run(&mut agent);
    let text_end = events
        .iter()
        .find(|v| kind(v) == "message_update" && v["assistantMessageEvent"]["type"] == "text_end")
        .unwrap();
    assert_eq!(text_end["usage"]["input"], 10, "{text_end}");
    assert_eq!(text_end["usage"]["totalTokens"], 15, "{text_end}");
}

#[test]
fn bash_sends_an_empty_update_first() {
    let script = Script::new([
        Turn::tool_call("bash", json!({"command": "echo hi"})),
        Turn::text("done"),
    ]);
    let (_fake, root) = setup(script, DEFAULT_MODEL);
    let mut agent = root.spawn();
    let events = run(&mut agent);
    let updates: Vec<&Value> = events
        .iter()
        .filter(|v| kind(v) == "tool_execution_update")
        .collect();
    assert!(updates.len() >= 2, "{updates:?}");
    assert_eq!(updates[0]["partialResult"], json!({"content": []}));
    assert_eq!(
        updates.last().unwrap()["partialResult"],
        json!({"content": [{"type": "text", "text": "hi\n"}], "details": {}})
    );
}
