//! Event order of plain runs (agent-loop.md §1, §2.2, §2.3).

use crate::support::*;
use pi_agent::AgentEvent;
use pi_ai::{Message, ProviderError, StopReason};

#[tokio::test]
async fn text_only_reply_event_order() {
    let provider = ScriptedProvider::new(vec![text_reply("Hello!")]);
    let hooks = Hooks::new(provider.clone(), vec![]);
    let run = run(&hooks, "hi").await;
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
            "message_update:text_end",
            "message_end:assistant",
            "turn_end",
            "agent_end",
        ]
    );
    // message_start carries the empty partial, message_end the final message.
    match &run.events[4] {
        AgentEvent::MessageStart {
            message: Message::Assistant(a),
        } => {
            assert_eq!(a.stop_reason, StopReason::Pending);
            assert!(a.content.is_empty());
        }
        other => panic!("expected the assistant message_start, got {other:?}"),
    }
    let last = run.last_assistant();
    assert_eq!(last.stop_reason, StopReason::Stop);
    assert_eq!(last.text(), "Hello!");
    // agent_end lists exactly the created messages, which are also the transcript.
    match run.events.last() {
        Some(AgentEvent::AgentEnd { messages }) => assert_eq!(messages, &run.created),
        other => panic!("expected agent_end, got {other:?}"),
    }
    assert_eq!(run.transcript, run.created);
    assert_eq!(run.created.len(), 2);
    assert_eq!(provider.contexts().len(), 1);
    assert_eq!(provider.contexts()[0].system_prompt, "You are a test.");
}

#[tokio::test]
async fn a_stream_without_final_message_is_a_typed_early_end() {
    let provider = ScriptedProvider::new(vec![truncated_reply()]);
    let hooks = Hooks::new(provider, vec![]);
    let run = run(&hooks, "hi").await;
    let last = run.last_assistant();
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(
        last.error.as_deref(),
        Some(&ProviderError::StreamEndedEarly {
            message: "Stream ended without a final message".into()
        })
    );
    assert_eq!(
        run.summary()[run.events.len() - 3..],
        ["message_end:assistant", "turn_end", "agent_end"]
    );
}

#[tokio::test]
async fn provider_errors_end_the_run_after_one_call() {
    // An empty script answers with an error message.
    let provider = ScriptedProvider::new(vec![]);
    let hooks = Hooks::new(provider.clone(), vec![]);
    let run = run(&hooks, "hi").await;
    let last = run.last_assistant();
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(last.error_message.as_deref(), Some("script exhausted"));
    assert_eq!(provider.contexts().len(), 1);
    assert_eq!(
        run.summary(),
        [
            "agent_start",
            "turn_start",
            "message_start:user:hi",
            "message_end:user:hi",
            "message_start:assistant",
            "message_end:assistant",
            "turn_end",
            "agent_end",
        ]
    );
}
