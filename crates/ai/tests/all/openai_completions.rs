//! `openai-completions` adapter against a scripted local server (shapes from the upstream 1.6
//! recordings in `shared/conformance/golden`).

use crate::common::*;
use pi_ai::providers::OpenAiCompletions;
use pi_ai::{
    AssistantMessage, AssistantMessageEvent, Content, Context, Message, Provider, StopReason,
    StreamOptions, TextContent, ThinkingContent, ThinkingLevel, ToolCall, ToolDefinition,
    ToolResultMessage,
};
use serde_json::{json, Value};
use std::time::Duration;

fn bash_tool() -> ToolDefinition {
    ToolDefinition {
        name: "bash".into(),
        description: "Run a command".into(),
        parameters: json!({"type": "object", "required": ["command"],
            "properties": {"command": {"type": "string", "description": "cmd"}}}),
    }
}

fn ctx(prompt: &str) -> Context {
    Context {
        system_prompt: "You are helpful.".into(),
        messages: vec![Message::user_text(prompt)],
        tools: vec![bash_tool()],
    }
}

fn opts() -> StreamOptions {
    StreamOptions {
        api_key: Some("fake-openai-key".into()),
        ..Default::default()
    }
}

fn text_then_tool_events(id: &str) -> Vec<String> {
    let mut ev = vec![oa_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for p in pieces("I'll run it.", 8) {
        ev.push(oa_chunk(id, json!({"content": p}), None));
    }
    ev.push(oa_chunk(
        id,
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "bash", "arguments": ""}}]}),
        None,
    ));
    for p in pieces("{\"command\": \"echo hi\"}", 8) {
        ev.push(oa_chunk(
            id,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
            None,
        ));
    }
    ev.push(oa_chunk(id, json!({}), Some("tool_calls")));
    ev.push(oa_usage(id, 10, 5, 0, 0));
    ev.push("data: [DONE]\n\n".into());
    ev
}

#[tokio::test]
async fn text_and_tool_call_stream_in_upstream_order() {
    let server = FakeServer::start(vec![Reply::sse(text_then_tool_events("chatcmpl-1"))]).await;
    let model = model(
        "openai-completions",
        "fake-openai",
        "fake-gpt-mini",
        server.url("/v1"),
        false,
    );
    let (events, msg) =
        collect(OpenAiCompletions::default().stream(&model, &ctx("Run echo hi"), opts())).await;

    assert!(matches!(events[0], AssistantMessageEvent::Start { .. }));
    let kinds: Vec<Value> = event_json(&events[1..events.len() - 1]);
    assert_eq!(
        kinds,
        vec![
            json!({"type": "text_start", "contentIndex": 0}),
            json!({"type": "text_delta", "contentIndex": 0, "delta": "I'll run"}),
            json!({"type": "text_delta", "contentIndex": 0, "delta": " it."}),
            json!({"type": "toolcall_start", "contentIndex": 1, "id": "call_1", "toolName": "bash"}),
            json!({"type": "toolcall_delta", "contentIndex": 1, "delta": ""}),
            json!({"type": "toolcall_delta", "contentIndex": 1, "delta": "{\"comman"}),
            json!({"type": "toolcall_delta", "contentIndex": 1, "delta": "d\": \"ech"}),
            json!({"type": "toolcall_delta", "contentIndex": 1, "delta": "o hi\"}"}),
            json!({"type": "text_end", "contentIndex": 0, "content": "I'll run it."}),
            json!({"type": "toolcall_end", "contentIndex": 1, "toolCall":
                {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "echo hi"}}}),
        ]
    );
    assert!(matches!(
        events.last(),
        Some(AssistantMessageEvent::Done {
            reason: StopReason::ToolUse,
            ..
        })
    ));

    let v = serde_json::to_value(&msg).expect("json");
    assert_eq!(v["stopReason"], "toolUse");
    assert_eq!(v["rawStopReason"], "tool_calls");
    assert_eq!(v["responseId"], "chatcmpl-1");
    assert_eq!(v["api"], "openai-completions");
    assert!(v["durationMs"].is_u64());
    let mut usage = v["usage"].clone();
    let cost = usage
        .as_object_mut()
        .and_then(|u| u.remove("cost"))
        .expect("cost");
    assert_eq!(
        usage,
        json!({"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "reasoning": 0,
               "totalTokens": 15})
    );
    assert_eq!(cost["totalFromProvider"], false);
    assert_eq!(cost["cacheRead"], 0);
    assert!((msg.usage.cost.total - 0.000105).abs() < 1e-15);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path_and_query, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer fake-openai-key"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("accept"), Some("application/json"));
    let keys: Vec<&str> = r
        .body
        .as_object()
        .expect("obj")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "messages",
            "stream",
            "stream_options",
            "store",
            "max_completion_tokens",
            "tools"
        ]
    );
    assert_eq!(r.body["max_completion_tokens"], 32000);
    assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(r.body["store"], false);
    assert_eq!(
        r.body["messages"],
        json!([{"role": "system", "content": "You are helpful."},
               {"role": "user", "content": [{"type": "text", "text": "Run echo hi"}]}])
    );
    assert_eq!(
        r.body["tools"][0],
        json!({"type": "function", "function": {"name": "bash", "description": "Run a command",
            "parameters": {"type": "object", "required": ["command"],
                "properties": {"command": {"type": "string", "description": "cmd"}}}}})
    );
}

#[tokio::test]
async fn reasoning_content_becomes_thinking_and_is_replayed() {
    let id = "chatcmpl-t";
    let mut ev = vec![oa_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for p in pieces("The user wants a greeting.", 8) {
        ev.push(oa_chunk(id, json!({"reasoning_content": p}), None));
    }
    ev.push(oa_chunk(id, json!({"content": "Hi there!"}), None));
    ev.push(oa_chunk(id, json!({}), Some("stop")));
    ev.push(oa_usage(id, 300, 40, 0, 0));
    ev.push("data: [DONE]\n\n".into());
    let server =
        FakeServer::start(vec![Reply::sse(ev), Reply::sse(text_then_tool_events("x"))]).await;
    let mut model = model(
        "openai-completions",
        "fake-openai",
        "fake-gpt",
        server.url("/v1"),
        true,
    );
    model.max_tokens = 16384;
    let mut options = opts();
    options.reasoning = Some(ThinkingLevel::Medium);
    let context = ctx("Greet me");
    let (events, msg) =
        collect(OpenAiCompletions::default().stream(&model, &context, options.clone())).await;

    let types: Vec<String> = event_json(&events[1..])
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("thinking_start"));
    let tail: Vec<&str> = types.iter().rev().take(3).map(String::as_str).collect();
    assert_eq!(tail, ["done", "text_end", "thinking_end"]);
    assert_eq!(
        msg.content[0],
        Content::Thinking(ThinkingContent {
            thinking: "The user wants a greeting.".into(),
            thinking_signature: Some("reasoning_content".into()),
            redacted: None,
            extra: Default::default(),
        })
    );
    assert_eq!(msg.stop_reason, StopReason::Stop);

    let req = &server.requests()[0];
    assert_eq!(req.body["reasoning_effort"], "medium");
    assert_eq!(req.body["max_completion_tokens"], 16384);
    assert_eq!(req.body["messages"][0]["role"], "system");

    // Second turn replays the thinking in the field it arrived in.
    let mut context2 = context.clone();
    context2.messages.push(Message::Assistant(msg));
    context2
        .messages
        .push(Message::user_text("What is the answer?"));
    let _ = collect(OpenAiCompletions::default().stream(&model, &context2, options)).await;
    let req = &server.requests()[1];
    assert_eq!(
        req.body["messages"][2],
        json!({"role": "assistant", "content": "Hi there!",
               "reasoning_content": "The user wants a greeting."})
    );
}

#[tokio::test]
async fn thinking_level_map_and_tool_history() {
    let server = FakeServer::start(vec![Reply::sse(text_then_tool_events("c"))]).await;
    let mut model = model(
        "openai-completions",
        "fake-openai",
        "fake-gpt-max",
        server.url("/v1"),
        true,
    );
    model.thinking_level_map =
        serde_json::from_value(json!({"minimal": null, "xhigh": "xhigh", "max": "max-effort"}))
            .ok();
    let m = model.clone();
    let mut assistant = AssistantMessage::empty(&m);
    assistant.stop_reason = StopReason::ToolUse;
    assistant.content = vec![
        Content::text("I'll run it."),
        Content::ToolCall(ToolCall {
            id: "call_a".into(),
            name: "bash".into(),
            arguments: json!({"command": "echo hi"}),
            thought_signature: None,
            extra: Default::default(),
        }),
    ];
    let mut orphan = AssistantMessage::empty(&m);
    orphan.stop_reason = StopReason::ToolUse;
    orphan.content = vec![Content::ToolCall(ToolCall {
        id: "call_b".into(),
        name: "bash".into(),
        arguments: json!({}),
        thought_signature: None,
        extra: Default::default(),
    })];
    let mut failed = AssistantMessage::empty(&m);
    failed.stop_reason = StopReason::Error;
    failed.content = vec![Content::text("partial")];
    let context = Context {
        system_prompt: String::new(),
        messages: vec![
            Message::user_text("Run echo hi"),
            Message::Assistant(assistant),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "call_a".into(),
                tool_name: "bash".into(),
                content: vec![Content::Text(TextContent {
                    text: "hi\n".into(),
                    text_signature: None,
                    extra: Default::default(),
                })],
                details: None,
                is_error: false,
                duration_ms: None,
                nested_calls: None,
                timestamp: 0,
                extra: Default::default(),
            }),
            Message::Assistant(orphan),
            Message::user_text("next"),
            Message::Assistant(failed),
        ],
        tools: vec![],
    };
    let mut options = opts();
    options.reasoning = Some(ThinkingLevel::Max);
    let _ = collect(OpenAiCompletions::default().stream(&model, &context, options)).await;
    let body = &server.requests()[0].body;
    assert_eq!(body["reasoning_effort"], "max-effort");
    assert_eq!(body["tools"], json!([]));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Run echo hi"}]},
            {"role": "assistant", "content": "I'll run it.", "tool_calls": [{"id": "call_a",
                "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"echo hi\"}"}}]},
            {"role": "tool", "content": "hi\n", "tool_call_id": "call_a"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_b",
                "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "content": "No result provided", "tool_call_id": "call_b"},
            {"role": "user", "content": [{"type": "text", "text": "next"}]},
        ])
    );
}

#[tokio::test]
async fn usage_with_cache_read_and_write() {
    let id = "c";
    let ev = vec![
        oa_chunk(id, json!({"content": "ok"}), None),
        oa_chunk(id, json!({}), Some("stop")),
        // prompt = input 1000 + cache_read 1100 + cache_write 100; cached_tokens = 1100.
        oa_usage(id, 2200, 20, 1100, 100),
        "data: [DONE]\n\n".into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(ev)]).await;
    let mut model = model("openai-completions", "p", "m", server.url("/v1"), false);
    model.cost = pi_ai::ModelCost {
        input: 1.0,
        output: 4.0,
        cache_read: 0.1,
        cache_write: 1.25,
        tiers: None,
    };
    let (_, msg) = collect(OpenAiCompletions::default().stream(&model, &ctx("x"), opts())).await;
    let u = &msg.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write),
        (1000, 20, 1100, 100)
    );
    assert_eq!(u.total_tokens, 2220);
    assert!((u.cost.total - 0.001315).abs() < 1e-12);
}

#[tokio::test]
async fn stop_length_maps_to_length() {
    let id = "c";
    let ev = vec![
        oa_chunk(id, json!({"content": "Essay"}), None),
        oa_chunk(id, json!({}), Some("length")),
        "data: [DONE]\n\n".into(),
    ];
    let server = FakeServer::start(vec![Reply::sse(ev)]).await;
    let model = model("openai-completions", "p", "m", server.url("/v1"), false);
    let (_, msg) = collect(OpenAiCompletions::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(msg.stop_reason, StopReason::Length);
    assert_eq!(msg.raw_stop_reason.as_deref(), Some("length"));
    // No usage chunk: usage was never reported.
    let v = serde_json::to_value(&msg.usage).expect("json");
    assert!(v.get("reasoning").is_none());
}

#[tokio::test]
async fn http_500_is_an_error_event_with_the_raw_body() {
    let body = json!({"error": {"message": "The server had an error while processing your request",
        "type": "server_error", "param": null, "code": null}});
    let server = FakeServer::start(vec![Reply::Error {
        status: 500,
        body: body.to_string(),
    }])
    .await;
    let model = model("openai-completions", "p", "m", server.url("/v1"), false);
    let (events, msg) =
        collect(OpenAiCompletions::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(events.len(), 1, "no start event on HTTP errors");
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(
        msg.error_message.as_deref(),
        Some(
            r#"500: {"message":"The server had an error while processing your request","type":"server_error","param":null,"code":null}"#
        )
    );
    let v = serde_json::to_value(&msg).expect("json");
    assert_eq!(
        v["usage"],
        json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
    );
    assert!(v["durationMs"].is_u64());
}

#[tokio::test]
async fn connection_refused_is_an_error_event() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let model = model(
        "openai-completions",
        "p",
        "m",
        format!("http://127.0.0.1:{port}/v1"),
        false,
    );
    let (_, msg) = collect(OpenAiCompletions::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(msg.error_message.as_deref(), Some("Connection error."));
}

#[tokio::test]
async fn disconnect_mid_stream_keeps_partial_text() {
    let id = "chatcmpl-d";
    let mut ev = vec![oa_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for p in pieces("This stream will be cut off.", 5) {
        ev.push(oa_chunk(id, json!({"content": p}), None));
    }
    let server = FakeServer::start(vec![Reply::Sse {
        events: ev,
        disconnect_after: Some(4),
        stall_after: None,
    }])
    .await;
    let model = model("openai-completions", "p", "m", server.url("/v1"), false);
    let (events, msg) =
        collect(OpenAiCompletions::default().stream(&model, &ctx("x"), opts())).await;
    let types: Vec<String> = event_json(&events)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        types,
        [
            "start",
            "text_start",
            "text_delta",
            "text_delta",
            "text_delta",
            "error"
        ]
    );
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(
        msg.error_message.as_deref(),
        Some("terminated: other side closed (UND_ERR_SOCKET)")
    );
    assert_eq!(msg.text(), "This stream wil");
    assert_eq!(msg.response_id.as_deref(), Some("chatcmpl-d"));
}

/// A connection reset mid-body (a TCP RST) reads as upstream's `terminated: read ECONNRESET`,
/// a close as `terminated: other side closed (UND_ERR_SOCKET)` (the test above): each cause
/// with upstream's text (issue 27).
#[tokio::test]
async fn a_reset_mid_stream_reads_as_upstreams_econnreset() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut seen = Vec::new();
        // The request: headers, then the body of its content-length.
        loop {
            let n = s.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text[..end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if seen.len() >= end + 4 + len {
                    break;
                }
            }
        }
        let chunk = oa_chunk(
            "chatcmpl-r",
            json!({"role": "assistant", "content": "Half"}),
            None,
        );
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
            chunk.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // SO_LINGER 0: closing sends a reset instead of a clean end.
        #[allow(deprecated)]
        s.set_linger(Some(Duration::ZERO)).unwrap();
        drop(s);
    });
    let url = format!("http://127.0.0.1:{port}/v1");
    let model = model("openai-completions", "p", "m", url, false);
    let (_, msg) = collect(OpenAiCompletions::default().stream(&model, &ctx("x"), opts())).await;
    server.await.unwrap();
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(
        msg.error_message.as_deref(),
        Some("terminated: read ECONNRESET")
    );
    assert_eq!(msg.text(), "Half");
}

#[tokio::test]
async fn abort_mid_stream_closes_blocks_then_errors() {
    let id = "chatcmpl-a";
    let mut ev = vec![oa_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for p in pieces("This response will be interrupted.", 6) {
        ev.push(oa_chunk(id, json!({"content": p}), None));
    }
    let server = FakeServer::start(vec![Reply::Sse {
        events: ev,
        disconnect_after: None,
        stall_after: Some(4),
    }])
    .await;
    let model = model("openai-completions", "p", "m", server.url("/v1"), false);
    let options = opts();
    let cancel = options.cancel.clone();
    let mut stream = OpenAiCompletions::default().stream(&model, &ctx("x"), options);
    let mut events = Vec::new();
    use futures::StreamExt;
    while let Some(ev) = stream.next().await {
        let is_third_delta =
            matches!(&ev, AssistantMessageEvent::TextDelta { delta, .. } if delta == "e will");
        events.push(ev);
        if is_third_delta {
            tokio::time::sleep(Duration::from_millis(20)).await;
            cancel.cancel();
        }
    }
    let json = event_json(&events);
    let n = json.len();
    assert_eq!(
        json[n - 2],
        json!({"type": "text_end", "contentIndex": 0, "content": "This response will"})
    );
    match events.last() {
        Some(AssistantMessageEvent::Error { reason, message }) => {
            assert_eq!(*reason, StopReason::Aborted);
            assert_eq!(message.stop_reason, StopReason::Aborted);
            assert_eq!(
                message.error_message.as_deref(),
                Some("Request was aborted")
            );
            assert_eq!(message.text(), "This response will");
        }
        other => panic!("expected aborted error, got {other:?}"),
    }
}

#[tokio::test]
async fn already_cancelled_sends_nothing() {
    let server = FakeServer::start(vec![]).await;
    let model = model("openai-completions", "p", "m", server.url("/v1"), false);
    let options = opts();
    options.cancel.cancel();
    let (events, msg) =
        collect(OpenAiCompletions::default().stream(&model, &ctx("x"), options)).await;
    assert_eq!(events.len(), 1);
    assert_eq!(msg.stop_reason, StopReason::Aborted);
    assert!(server.requests().is_empty());
}
