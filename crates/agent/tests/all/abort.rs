//! Abort while the reply streams and while a tool runs (agent-loop.md §5).

use crate::support::*;
use pi_agent::{AgentEvent, AgentTool};
use pi_ai::{Content, Message, StopReason};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn abort_mid_stream_ends_with_an_aborted_message() {
    let provider = ScriptedProvider::new(vec![stalled_reply("partial ans"), text_reply("never")]);
    let hooks = Hooks::new(provider.clone(), vec![]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    // Abort as soon as the first text delta has been delivered.
    let run = run_with(&hooks, "hi", &cancel, move |e| {
        if let AgentEvent::MessageUpdate { .. } = e {
            if crate::support::summary(e) == "message_update:text_delta" {
                trigger.cancel();
            }
        }
    })
    .await;
    let last = run.last_assistant();
    assert_eq!(last.stop_reason, StopReason::Aborted);
    assert_eq!(last.error_message.as_deref(), Some("Request was aborted"));
    assert_eq!(last.text(), "partial ans", "streamed content is kept");
    assert_eq!(
        run.summary(),
        [
            "agent_start",
            "turn_start",
            "message_start:user:hi",
            "message_end:user:hi",
            "message_start:assistant",
            "message_update:text_start",
            "message_update:text_delta",
            "message_end:assistant",
            "turn_end",
            "agent_end",
        ]
    );
    // No further LLM call after the abort.
    assert_eq!(provider.contexts().len(), 1);
}

#[tokio::test]
async fn abort_during_a_tool_call_errors_the_tool_and_ends_the_run() {
    // The tool waits for a gate nobody opens: only the abort can end it.
    let never = Arc::new(Notify::new());
    let tools: Vec<Arc<dyn AgentTool>> = vec![Arc::new(GateTool {
        name: "wait",
        wait: Some(never),
        then: None,
    })];
    // After the tools, the loop asks the model again with the aborted token; the stalled
    // reply then ends at once as aborted.
    let provider = ScriptedProvider::new(vec![
        tool_reply(&[("call_1", "wait", json!({}))]),
        stalled_reply(""),
    ]);
    let hooks = Hooks::new(provider.clone(), tools);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let run = run_with(&hooks, "hi", &cancel, move |e| {
        if let AgentEvent::ToolExecutionStart { .. } = e {
            trigger.cancel();
        }
    })
    .await;
    let result = run
        .created
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a tool result");
    assert!(result.is_error);
    assert_eq!(
        result
            .content
            .iter()
            .filter_map(Content::as_text)
            .collect::<String>(),
        "Operation aborted"
    );
    assert_eq!(run.last_assistant().stop_reason, StopReason::Aborted);
    assert_eq!(provider.contexts().len(), 2);
    let s = run.summary();
    assert_eq!(
        s[s.len() - 3..],
        ["message_end:assistant", "turn_end", "agent_end"]
    );
}
