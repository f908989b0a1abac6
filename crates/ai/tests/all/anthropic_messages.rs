//! `anthropic-messages` adapter against a scripted local server (shapes from the upstream 1.6
//! recordings in `shared/conformance/golden`).

use crate::common::*;
use futures::StreamExt;
use pi_ai::providers::AnthropicMessages;
use pi_ai::{
    AssistantMessageEvent, CacheRetention, Content, Context, ImageContent, Message, Provider,
    RequestTuning, StopReason, StreamOptions, ThinkingLevel, ToolDefinition, ToolResultMessage,
    UserContent, UserMessage,
};
use serde_json::{json, Value};
use std::time::Duration;

fn read_tool() -> ToolDefinition {
    ToolDefinition {
        name: "read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "required": ["path"],
            "properties": {"path": {"type": "string", "description": "p"}}}),
    }
}

fn ctx(prompt: &str) -> Context {
    Context {
        system_prompt: "You are helpful.".into(),
        messages: vec![Message::user_text(prompt)],
        tools: vec![read_tool()],
    }
}

fn opts() -> StreamOptions {
    StreamOptions {
        api_key: Some("fake-anthropic-key".into()),
        ..Default::default()
    }
}

fn message_start(id: &str, input: u64, cache_read: u64, cache_write: u64) -> String {
    sse_event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": "m", "content": [], "stop_reason": null,
            "usage": {"input_tokens": input, "output_tokens": 1,
                      "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": cache_write}}}),
    )
}

fn block_start(index: usize, block: Value) -> String {
    sse_event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn block_delta(index: usize, delta: Value) -> String {
    sse_event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> String {
    sse_event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

fn message_end(stop: &str, output: u64) -> Vec<String> {
    vec![
        sse_event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": output}}),
        ),
        sse_event("message_stop", &json!({"type": "message_stop"})),
    ]
}

fn thinking_turn(id: &str, thinking: &str, sig: &str, text: &str) -> Vec<String> {
    let mut ev = vec![
        message_start(id, 400, 0, 0),
        sse_event("ping", &json!({"type": "ping"})),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
    ];
    for p in pieces(thinking, 8) {
        ev.push(block_delta(
            0,
            json!({"type": "thinking_delta", "thinking": p}),
        ));
    }
    ev.push(block_delta(
        0,
        json!({"type": "signature_delta", "signature": sig}),
    ));
    ev.push(block_stop(0));
    ev.push(block_start(1, json!({"type": "text", "text": ""})));
    for p in pieces(text, 8) {
        ev.push(block_delta(1, json!({"type": "text_delta", "text": p})));
    }
    ev.push(block_stop(1));
    ev.extend(message_end("end_turn", 60));
    ev
}

#[tokio::test]
async fn thinking_turn_events_usage_headers_and_replay() {
    let server = FakeServer::start(vec![
        Reply::sse(thinking_turn(
            "msg_1",
            "I should greet the user politely.",
            "c2lnbmF0dXJlLW9uZQ==",
            "Good day to you!",
        )),
        Reply::sse(thinking_turn("msg_2", "Short.", "c2ln", "Yes.")),
    ])
    .await;
    let model = model(
        "anthropic-messages",
        "fake-anthropic",
        "fake-claude",
        server.url(""),
        true,
    );
    let mut options = opts();
    options.reasoning = Some(ThinkingLevel::Medium);
    let context = ctx("Greet me");
    let (events, msg) =
        collect(AnthropicMessages::default().stream(&model, &context, options.clone())).await;

    let types: Vec<String> = event_json(&events)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect();
    let expected: Vec<&str> = [
        vec!["start", "thinking_start"],
        vec!["thinking_delta"; 5],
        vec![
            "thinking_end",
            "text_start",
            "text_delta",
            "text_delta",
            "text_end",
            "done",
        ],
    ]
    .concat();
    assert_eq!(types, expected);

    let v = serde_json::to_value(&msg).expect("json");
    assert_eq!(
        v["content"],
        json!([{"type": "thinking", "thinking": "I should greet the user politely.",
                "thinkingSignature": "c2lnbmF0dXJlLW9uZQ=="},
               {"type": "text", "text": "Good day to you!"}])
    );
    assert_eq!(v["stopReason"], "stop");
    assert_eq!(v["rawStopReason"], "end_turn");
    assert_eq!(v["responseId"], "msg_1");
    assert_eq!(v["usage"]["input"], 400);
    assert_eq!(v["usage"]["output"], 60);
    assert_eq!(v["usage"]["totalTokens"], 460);
    assert_eq!(v["usage"]["cacheWrite1h"], 0);
    assert!(v["usage"].get("reasoning").is_none());
    assert_eq!(v["usage"]["cost"]["totalFromProvider"], false);
    assert!((msg.usage.cost.total - 0.0021).abs() < 1e-12);

    let r = &server.requests()[0];
    assert_eq!(r.path_and_query, "/v1/messages?beta=true");
    assert_eq!(r.header("x-api-key"), Some("fake-anthropic-key"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        r.header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14")
    );
    assert_eq!(
        r.header("anthropic-dangerous-direct-browser-access"),
        Some("true")
    );
    assert_eq!(r.header("accept"), Some("application/json"));
    assert_eq!(r.header("content-type"), Some("application/json"));
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
            "max_tokens",
            "stream",
            "system",
            "tools",
            "thinking"
        ]
    );
    assert_eq!(r.body["max_tokens"], 32000);
    assert_eq!(
        r.body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192, "display": "summarized"})
    );
    assert_eq!(
        r.body["system"],
        json!([{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        r.body["tools"],
        json!([{"name": "read", "description": "Read a file", "eager_input_streaming": true,
                "input_schema": {"type": "object",
                    "properties": {"path": {"type": "string", "description": "p"}},
                    "required": ["path"]},
                "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        r.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Greet me",
                "cache_control": {"type": "ephemeral"}}]}])
    );

    let mut context2 = context.clone();
    context2.messages.push(Message::Assistant(msg));
    context2.messages.push(Message::user_text("Is that all?"));
    let _ = collect(AnthropicMessages::default().stream(&model, &context2, options)).await;
    let r = &server.requests()[1];
    assert_eq!(
        r.body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Greet me"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should greet the user politely.",
                 "signature": "c2lnbmF0dXJlLW9uZQ=="},
                {"type": "text", "text": "Good day to you!"}]},
            {"role": "user", "content": [{"type": "text", "text": "Is that all?",
                "cache_control": {"type": "ephemeral"}}]},
        ])
    );
}

#[tokio::test]
async fn tool_use_stream_and_tool_result_request() {
    let mut ev = vec![
        message_start("msg_t", 100, 50, 10),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
        ),
    ];
    for p in pieces("{\"path\": \"hello.txt\"}", 8) {
        ev.push(block_delta(
            0,
            json!({"type": "input_json_delta", "partial_json": p}),
        ));
    }
    ev.push(block_stop(0));
    ev.extend(message_end("tool_use", 15));
    let server = FakeServer::start(vec![
        Reply::sse(ev),
        Reply::sse(thinking_turn("m", "t", "s", "done")),
    ])
    .await;
    let model = model(
        "anthropic-messages",
        "fake-anthropic",
        "fake-claude-haiku",
        server.url(""),
        false,
    );
    let context = ctx("Read hello.txt");
    let (events, msg) =
        collect(AnthropicMessages::default().stream(&model, &context, opts())).await;
    let json = event_json(&events);
    assert_eq!(
        json[1],
        json!({"type": "toolcall_start", "contentIndex": 0, "id": "toolu_1", "toolName": "read"})
    );
    assert_eq!(
        json[json.len() - 2],
        json!({"type": "toolcall_end", "contentIndex": 0, "toolCall": {"type": "toolCall",
            "id": "toolu_1", "name": "read", "arguments": {"path": "hello.txt"}}})
    );
    assert_eq!(msg.stop_reason, StopReason::ToolUse);
    let u = &msg.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write),
        (100, 15, 50, 10)
    );
    assert_eq!(u.total_tokens, 175);
    assert!(server.requests()[0].body.get("thinking").is_none());
    assert!(server.requests()[0].header("anthropic-beta").is_none());

    let mut context2 = context.clone();
    context2.messages.push(Message::Assistant(msg));
    context2
        .messages
        .push(Message::ToolResult(ToolResultMessage {
            tool_call_id: "toolu_1".into(),
            tool_name: "read".into(),
            content: vec![Content::text("line one\n")],
            details: None,
            is_error: false,
            duration_ms: None,
            nested_calls: None,
            timestamp: 0,
            extra: Default::default(),
        }));
    let _ = collect(AnthropicMessages::default().stream(&model, &context2, opts())).await;
    let body = &server.requests()[1].body;
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Read hello.txt"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                "name": "read", "input": {"path": "hello.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                "content": "line one\n", "is_error": false, "cache_control": {"type": "ephemeral"}}]},
        ])
    );
}

#[tokio::test]
async fn image_prompt_with_thinking_off_on_reasoning_model() {
    let server = FakeServer::start(vec![Reply::sse(thinking_turn("m", "t", "s", "A dot."))]).await;
    let model = model(
        "anthropic-messages",
        "fake-anthropic",
        "fake-claude",
        server.url(""),
        true,
    );
    let context = Context {
        system_prompt: "sys".into(),
        messages: vec![Message::User(UserMessage {
            content: UserContent::Blocks(vec![
                Content::text("What is in this image?"),
                Content::Image(ImageContent {
                    data: "iVBORw0KGgo=".into(),
                    mime_type: "image/png".into(),
                    extra: Default::default(),
                }),
            ]),
            timestamp: 0,
            extra: Default::default(),
        })],
        tools: vec![],
    };
    let _ = collect(AnthropicMessages::default().stream(&model, &context, opts())).await;
    let r = &server.requests()[0];
    assert_eq!(r.body["thinking"], json!({"type": "disabled"}));
    assert!(r.header("anthropic-beta").is_none());
    assert_eq!(
        r.body["messages"][0]["content"],
        json!([{"type": "text", "text": "What is in this image?"},
               {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": "iVBORw0KGgo="}, "cache_control": {"type": "ephemeral"}}])
    );
}

#[tokio::test]
async fn no_cache_markers_when_retention_is_none() {
    let server = FakeServer::start(vec![Reply::sse(thinking_turn("m", "t", "s", "x"))]).await;
    let model = model("anthropic-messages", "p", "haiku", server.url(""), false);
    let mut context = ctx("Summarize");
    context.tools.clear();
    let tuning = RequestTuning {
        cache_retention: CacheRetention::None,
        ..Default::default()
    };
    let _ =
        collect(AnthropicMessages::default().stream_tuned(&model, &context, opts(), tuning)).await;
    let body = &server.requests()[0].body;
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are helpful."}])
    );
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Summarize"}]}])
    );
    assert!(body.get("tools").is_none());
}

#[tokio::test]
async fn http_errors_use_sdk_wording() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let too_long = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 250000 tokens > 200000 maximum"}});
    let server = FakeServer::start(vec![
        Reply::Error {
            status: 529,
            body: overloaded.to_string(),
        },
        Reply::Error {
            status: 400,
            body: too_long.to_string(),
        },
    ])
    .await;
    let model = model("anthropic-messages", "p", "m", server.url(""), false);
    let (events, msg) =
        collect(AnthropicMessages::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(events.len(), 1);
    assert_eq!(
        msg.error_message.as_deref(),
        Some(r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
    );
    assert!(msg.content.is_empty());
    let (_, msg) = collect(AnthropicMessages::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some(
            r#"400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#
        )
    );
}

#[tokio::test]
async fn abort_keeps_partial_text_without_block_end() {
    let mut ev = vec![
        message_start("msg_a", 10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
    ];
    for p in pieces("Long story here", 5) {
        ev.push(block_delta(0, json!({"type": "text_delta", "text": p})));
    }
    let server = FakeServer::start(vec![Reply::Sse {
        events: ev,
        disconnect_after: None,
        stall_after: Some(4),
    }])
    .await;
    let model = model("anthropic-messages", "p", "m", server.url(""), false);
    let options = opts();
    let cancel = options.cancel.clone();
    let mut stream = AnthropicMessages::default().stream(&model, &ctx("x"), options);
    let mut events = Vec::new();
    while let Some(ev) = stream.next().await {
        let second =
            matches!(&ev, AssistantMessageEvent::TextDelta { delta, .. } if delta == "story");
        if matches!(ev, AssistantMessageEvent::Usage { .. }) {
            continue;
        }
        events.push(ev);
        if second {
            tokio::time::sleep(Duration::from_millis(20)).await;
            cancel.cancel();
        }
    }
    let types: Vec<String> = event_json(&events)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        types,
        ["start", "text_start", "text_delta", "text_delta", "error"]
    );
    let Some(AssistantMessageEvent::Error { message, .. }) = events.last() else {
        panic!("error expected")
    };
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert_eq!(
        message.error_message.as_deref(),
        Some("Request was aborted")
    );
    assert_eq!(message.text(), "Long story");
    assert_eq!(message.usage.input, 10);
}

#[tokio::test]
async fn disconnect_and_missing_message_stop() {
    let mut ev = vec![
        message_start("msg_d", 10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "partial"})),
    ];
    ev.push(block_delta(
        0,
        json!({"type": "text_delta", "text": " more"}),
    ));
    let server = FakeServer::start(vec![
        Reply::Sse {
            events: ev.clone(),
            disconnect_after: Some(3),
            stall_after: None,
        },
        Reply::sse(ev),
    ])
    .await;
    let model = model("anthropic-messages", "p", "m", server.url(""), false);
    let (_, msg) = collect(AnthropicMessages::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(
        msg.error_message.as_deref(),
        Some("terminated: other side closed (UND_ERR_SOCKET)")
    );
    assert_eq!(msg.text(), "partial");
    let (_, msg) = collect(AnthropicMessages::default().stream(&model, &ctx("x"), opts())).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Anthropic stream ended before message_stop")
    );
}

#[tokio::test]
async fn budget_thinking_respects_model_cap_and_custom_budgets() {
    let server = FakeServer::start(vec![Reply::sse(thinking_turn("m", "t", "s", "x"))]).await;
    let mut model = model(
        "anthropic-messages",
        "anthropic",
        "claude-x",
        server.url(""),
        true,
    );
    model.max_tokens = 64_000;
    let mut options = opts();
    options.reasoning = Some(ThinkingLevel::Xhigh);
    options.max_tokens = Some(4_000);
    let tuning = RequestTuning {
        thinking_budgets: Some(pi_ai::ThinkingBudgets {
            high: Some(10_000),
            ..Default::default()
        }),
        ..Default::default()
    };
    let _ = collect(AnthropicMessages::default().stream_tuned(&model, &ctx("x"), options, tuning))
        .await;
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 14_000);
    assert_eq!(body["thinking"]["budget_tokens"], 10_000);
}

#[tokio::test]
async fn usage_updates_come_as_the_stream_reports_them() {
    let server = FakeServer::start(vec![Reply::sse(thinking_turn(
        "msg_u", "Hmm.", "c2ln", "Hi!",
    ))])
    .await;
    let model = model(
        "anthropic-messages",
        "fake-anthropic",
        "fake-claude",
        server.url(""),
        true,
    );
    let mut options = opts();
    options.reasoning = Some(ThinkingLevel::Low);
    let (events, msg) =
        collect_all(AnthropicMessages::default().stream(&model, &ctx("Hi"), options)).await;
    let usages: Vec<(usize, u64, u64)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            AssistantMessageEvent::Usage { usage } => Some((i, usage.input, usage.output)),
            _ => None,
        })
        .collect();
    assert_eq!(
        usages.len(),
        2,
        "message_start and message_delta: {usages:?}"
    );
    let first_block = events
        .iter()
        .position(|e| matches!(e, AssistantMessageEvent::ThinkingStart { .. }))
        .unwrap();
    assert!(
        usages[0].0 < first_block,
        "input usage before the first block"
    );
    assert!(usages[0].1 > 0);
    assert_eq!(
        (usages[1].1, usages[1].2),
        (msg.usage.input, msg.usage.output)
    );
    assert_eq!(msg.response_id.as_deref(), Some("msg_u"));
}
