//! Steering and follow-up delivery (agent-loop.md §2.2, §3 "newer", §4.2).

use crate::support::*;
use pi_agent::AgentTool;
use pi_ai::Message;
use serde_json::json;
use std::sync::Arc;

fn position(summary: &[String], label: &str) -> usize {
    summary
        .iter()
        .position(|s| s == label)
        .unwrap_or_else(|| panic!("{label} not in {summary:#?}"))
}

#[tokio::test]
async fn steering_is_delivered_after_all_tool_calls_of_the_turn() {
    let steering = Queue::default();
    let tools: Vec<Arc<dyn AgentTool>> = vec![
        Arc::new(SteerTool {
            queue: steering.clone(),
            text: "change of plan",
        }),
        Arc::new(EchoTool { name: "echo" }),
    ];
    let provider = ScriptedProvider::new(vec![
        tool_reply(&[
            ("call_1", "steer", json!({})),
            ("call_2", "echo", json!({"text": "second"})),
        ]),
        text_reply("ok, new plan"),
    ]);
    let mut hooks = Hooks::new(provider.clone(), tools);
    hooks.steering = steering;
    let run = run(&hooks, "start").await;
    let s = run.summary();
    let steer = position(&s, "message_start:user:change of plan");
    // Neither call was skipped: both results precede the steering message …
    assert!(position(&s, "message_end:toolResult:call_1") < steer);
    assert!(position(&s, "message_end:toolResult:call_2") < steer);
    // … which opens the next turn, before the next assistant message.
    assert_eq!(s[steer - 2], "turn_end");
    assert_eq!(s[steer - 1], "turn_start");
    assert_eq!(s[steer + 1], "message_end:user:change of plan");
    assert_eq!(s[steer + 2], "message_start:assistant");
    assert!(run.created.iter().all(|m| match m {
        Message::ToolResult(r) => !r.is_error,
        _ => true,
    }));
    // The second request ends with the steering message.
    let contexts = provider.contexts();
    assert_eq!(contexts.len(), 2);
    match contexts[1].messages.last() {
        Some(Message::User(u)) => assert_eq!(u.content.joined_text(), "change of plan"),
        other => panic!("expected the steering message last, got {other:?}"),
    }
    assert_eq!(s.last().map(String::as_str), Some("agent_end"));
}

#[tokio::test]
async fn a_follow_up_starts_another_turn_when_the_run_would_end() {
    let provider = ScriptedProvider::new(vec![text_reply("first"), text_reply("second")]);
    let hooks = Hooks::new(provider.clone(), vec![]);
    hooks
        .follow_up
        .lock()
        .unwrap()
        .push_back(Message::user_text("one more thing"));
    let run = run(&hooks, "hi").await;
    let s = run.summary();
    let follow = position(&s, "message_start:user:one more thing");
    // Delivered only after the first reply ended the turn.
    assert_eq!(
        s[..follow],
        [
            "agent_start",
            "turn_start",
            "message_start:user:hi",
            "message_end:user:hi",
            "message_start:assistant",
            "message_update:text_start",
            "message_update:text_delta",
            "message_update:text_end",
            "message_end:assistant",
            "turn_end",
            "turn_start",
        ]
    );
    assert_eq!(
        s[follow + 1..],
        [
            "message_end:user:one more thing",
            "message_start:assistant",
            "message_update:text_start",
            "message_update:text_delta",
            "message_update:text_end",
            "message_end:assistant",
            "turn_end",
            "agent_end",
        ]
    );
    assert_eq!(provider.contexts().len(), 2);
    assert_eq!(run.last_assistant().text(), "second");
    // One run: a single agent_start/agent_end pair.
    assert_eq!(s.iter().filter(|e| *e == "agent_start").count(), 1);
    assert!(hooks.follow_up.lock().unwrap().is_empty());
}
