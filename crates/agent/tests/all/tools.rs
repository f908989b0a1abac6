//! Tool execution: start/end order, results in call order, parallel completion order, error
//! results for unknown tools, invalid arguments, failures and panics (agent-loop.md §3).

use crate::support::*;
use pi_agent::{AgentEvent, AgentTool, ToolError};
use pi_ai::{Content, Message, StopReason};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Notify;

fn tool_results(run: &Run) -> Vec<(String, bool, String)> {
    run.created
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((
                r.tool_call_id.clone(),
                r.is_error,
                r.content.iter().filter_map(Content::as_text).collect(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn one_tool_call_then_a_final_answer() {
    let provider = ScriptedProvider::new(vec![
        tool_reply(&[("call_1", "echo", json!({"text": "pong"}))]),
        text_reply("done"),
    ]);
    let tools: Vec<Arc<dyn AgentTool>> = vec![Arc::new(EchoTool { name: "echo" })];
    let hooks = Hooks::new(provider.clone(), tools);
    let run = run(&hooks, "ping").await;
    assert_eq!(
        run.summary(),
        [
            "agent_start",
            "turn_start",
            "message_start:user:ping",
            "message_end:user:ping",
            "message_start:assistant",
            "message_update:toolcall_start",
            "message_update:toolcall_end",
            "message_end:assistant",
            "tool_execution_start:call_1",
            "tool_execution_end:call_1",
            "message_start:toolResult:call_1",
            "message_end:toolResult:call_1",
            "turn_end",
            "turn_start",
            "message_start:assistant",
            "message_update:text_start",
            "message_update:text_delta",
            "message_update:text_end",
            "message_end:assistant",
            "turn_end",
            "agent_end",
        ]
    );
    assert_eq!(
        tool_results(&run),
        [("call_1".to_owned(), false, "pong".to_owned())]
    );
    // The second request carries the call and its result.
    let second = &provider.contexts()[1];
    assert!(matches!(
        second.messages.last(),
        Some(Message::ToolResult(r)) if r.tool_call_id == "call_1"
    ));
    // turn_end of the first turn lists the result.
    let first_turn_end = run
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::TurnEnd { tool_results, .. } => Some(tool_results.clone()),
            _ => None,
        })
        .expect("turn_end");
    assert_eq!(first_turn_end.len(), 1);
    assert_eq!(first_turn_end[0].tool_call_id, "call_1");
}

#[tokio::test]
async fn parallel_tools_end_in_completion_order_results_in_call_order() {
    // `slow` (called first) can only finish after `fast` (called second) has finished.
    let gate = Arc::new(Notify::new());
    let tools: Vec<Arc<dyn AgentTool>> = vec![
        Arc::new(GateTool {
            name: "slow",
            wait: Some(gate.clone()),
            then: None,
        }),
        Arc::new(GateTool {
            name: "fast",
            wait: None,
            then: Some(gate),
        }),
    ];
    let provider = ScriptedProvider::new(vec![
        tool_reply(&[("call_1", "slow", json!({})), ("call_2", "fast", json!({}))]),
        text_reply("both done"),
    ]);
    let hooks = Hooks::new(provider, tools);
    let run = run(&hooks, "go").await;
    let tool_events: Vec<String> = run
        .summary()
        .into_iter()
        .filter(|s| s.starts_with("tool_execution") || s.contains("toolResult"))
        .collect();
    assert_eq!(
        tool_events,
        [
            "tool_execution_start:call_1",
            "tool_execution_start:call_2",
            "tool_execution_end:call_2",
            "tool_execution_end:call_1",
            "message_start:toolResult:call_1",
            "message_end:toolResult:call_1",
            "message_start:toolResult:call_2",
            "message_end:toolResult:call_2",
        ]
    );
    assert_eq!(
        tool_results(&run),
        [
            ("call_1".to_owned(), false, "slow done".to_owned()),
            ("call_2".to_owned(), false, "fast done".to_owned()),
        ]
    );
    assert_eq!(run.last_assistant().text(), "both done");
}

#[tokio::test]
async fn unknown_tools_invalid_arguments_and_failures_become_error_results() {
    let tools: Vec<Arc<dyn AgentTool>> = vec![
        Arc::new(EchoTool { name: "echo" }),
        Arc::new(FailTool {
            error: ToolError::Failed("disk full".into()),
        }),
    ];
    let provider = ScriptedProvider::new(vec![
        tool_reply(&[
            ("call_1", "nope", json!({})),
            ("call_2", "echo", json!({})),
            ("call_3", "fail", json!({})),
        ]),
        text_reply("ok"),
    ]);
    let hooks = Hooks::new(provider, tools);
    let run = run(&hooks, "go").await;
    let results = tool_results(&run);
    assert_eq!(
        results[0],
        ("call_1".into(), true, "Tool nope not found".into())
    );
    assert!(results[1].1, "missing required argument is an error");
    assert!(
        results[1].2.contains("text"),
        "validation text names the argument: {}",
        results[1].2
    );
    assert_eq!(results[2], ("call_3".into(), true, "disk full".into()));
    // Each end event agrees with its result message.
    let ends: Vec<(String, bool)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                is_error,
                ..
            } => Some((tool_call_id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 3);
    assert!(ends.iter().all(|(_, e)| *e));
    assert_eq!(run.last_assistant().stop_reason, StopReason::Stop);
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result_and_the_run_goes_on() {
    let tools: Vec<Arc<dyn AgentTool>> = vec![
        Arc::new(PanicTool {
            message: "tool blew up",
        }),
        Arc::new(EchoTool { name: "echo" }),
    ];
    let provider = ScriptedProvider::new(vec![
        tool_reply(&[
            ("call_1", "explode", json!({})),
            ("call_2", "echo", json!({"text": "still here"})),
        ]),
        text_reply("recovered"),
    ]);
    let hooks = Hooks::new(provider.clone(), tools);
    let run = run(&hooks, "go").await;
    assert_eq!(
        tool_results(&run),
        [
            (
                "call_1".to_owned(),
                true,
                "Tool execution panicked: tool blew up".to_owned()
            ),
            ("call_2".to_owned(), false, "still here".to_owned()),
        ]
    );
    let end = run
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } if tool_call_id == "call_1" => Some((output_text(result), *is_error)),
            _ => None,
        })
        .expect("tool_execution_end for the panicking call");
    assert_eq!(end, ("Tool execution panicked: tool blew up".into(), true));
    // The loop made its next LLM call and ended normally.
    assert_eq!(provider.contexts().len(), 2);
    assert_eq!(run.last_assistant().text(), "recovered");
    assert!(matches!(
        run.events.last(),
        Some(AgentEvent::AgentEnd { .. })
    ));
}
