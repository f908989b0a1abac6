//! Typed [`ProviderError`]s from both adapters against real 127.0.0.1 servers: HTTP errors with
//! `retry-after` headers, connection failures, disconnects, aborts, and the connect/idle
//! timeouts of [`HttpOptions`] (settings `httpIdleTimeoutMs`).

use crate::common::*;
use pi_ai::providers::{AnthropicMessages, BuiltinProviders, HttpOptions, OpenAiCompletions};
use pi_ai::{
    classify, AssistantMessage, AssistantMessageEvent, Context, ErrorClass, Message, Provider,
    ProviderError, StopReason, StreamOptions,
};
use serde_json::json;
use std::time::Duration;

/// Generous bound for a request that must end by itself (liveness only, not a speed check).
const LIVENESS: Duration = Duration::from_secs(60);

fn ctx() -> Context {
    Context {
        system_prompt: "sys".into(),
        messages: vec![Message::user_text("hi")],
        tools: vec![],
    }
}

fn opts() -> StreamOptions {
    StreamOptions {
        api_key: Some("key".into()),
        ..Default::default()
    }
}

fn openai_model(base: String) -> pi_ai::Model {
    model("openai-completions", "p", "m", base, false)
}

fn anthropic_model(base: String) -> pi_ai::Model {
    model("anthropic-messages", "anthropic", "claude", base, false)
}

async fn run(
    provider: &dyn Provider,
    model: &pi_ai::Model,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    tokio::time::timeout(LIVENESS, collect(provider.stream(model, &ctx(), opts())))
        .await
        .expect("the request ended")
}

fn short_idle() -> HttpOptions {
    HttpOptions {
        connect_timeout_ms: 5_000,
        idle_timeout_ms: 300,
        ..HttpOptions::default()
    }
}

#[tokio::test]
async fn openai_429_keeps_status_body_and_retry_after_ms() {
    let body = json!({"error": {"message": "Rate limit reached for requests", "type": "requests",
        "param": null, "code": "rate_limit_exceeded"}})
    .to_string();
    let server = FakeServer::start(vec![Reply::ErrorWithHeaders {
        status: 429,
        body: body.clone(),
        headers: vec![
            ("retry-after-ms", "1500".into()),
            ("retry-after", "2".into()),
        ],
    }])
    .await;
    let (_, msg) = run(
        &OpenAiCompletions::default(),
        &openai_model(server.url("/v1")),
    )
    .await;
    assert_eq!(msg.stop_reason, StopReason::Error);
    let error = *msg.error.clone().expect("typed error");
    assert_eq!(
        error,
        ProviderError::Http {
            status: 429,
            retry_after_ms: Some(1500),
            body,
            message: r#"429: {"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}"#.into(),
        }
    );
    assert_eq!(msg.error_message.as_deref(), Some(error.message()));
    assert!(error.is_retryable());
    assert_eq!(classify(&msg, 200_000), ErrorClass::Retryable);
    // The typed error is not part of the wire form.
    let v = serde_json::to_value(&msg).expect("json");
    assert!(v.get("error").is_none());
}

#[tokio::test]
async fn anthropic_529_retry_after_seconds_and_overflow_400() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string();
    let too_long = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 213462 tokens > 200000 maximum"}})
    .to_string();
    let server = FakeServer::start(vec![
        Reply::ErrorWithHeaders {
            status: 529,
            body: overloaded,
            headers: vec![("retry-after", "3".into())],
        },
        Reply::Error {
            status: 400,
            body: too_long,
        },
    ])
    .await;
    let model = anthropic_model(server.url(""));
    let provider = AnthropicMessages::default();
    let (_, msg) = run(&provider, &model).await;
    let error = *msg.error.clone().expect("typed error");
    assert_eq!(error.status(), Some(529));
    assert_eq!(error.retry_after_ms(), Some(3000));
    assert_eq!(classify(&msg, model.context_window), ErrorClass::Retryable);

    let (_, msg) = run(&provider, &model).await;
    let error = *msg.error.clone().expect("typed error");
    assert_eq!(error.status(), Some(400));
    assert_eq!(error.retry_after_ms(), None);
    assert!(error.is_context_overflow());
    assert!(!error.is_retryable());
    assert_eq!(
        classify(&msg, model.context_window),
        ErrorClass::ContextOverflow
    );
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let model = openai_model(format!("http://127.0.0.1:{port}/v1"));
    let (_, msg) = run(&OpenAiCompletions::default(), &model).await;
    assert_eq!(
        msg.error.as_deref(),
        Some(&ProviderError::Transport {
            message: "Connection error.".into()
        })
    );
    assert_eq!(classify(&msg, 0), ErrorClass::Retryable);
}

#[tokio::test]
async fn disconnect_is_retryable_and_early_end_is_typed() {
    let id = "chatcmpl-d";
    let mut events = vec![oa_chunk(
        id,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    events.push(oa_chunk(id, json!({"content": "partial"}), None));
    let server = FakeServer::start(vec![
        Reply::Sse {
            events: events.clone(),
            disconnect_after: Some(2),
            stall_after: None,
        },
        // A clean end of the body without any finish_reason.
        Reply::sse(events),
    ])
    .await;
    let model = openai_model(server.url("/v1"));
    let provider = OpenAiCompletions::default();
    let (_, msg) = run(&provider, &model).await;
    assert!(matches!(
        msg.error.as_deref(),
        Some(&ProviderError::Disconnected { .. })
    ));
    assert_eq!(classify(&msg, 0), ErrorClass::Retryable);
    let (_, msg) = run(&provider, &model).await;
    assert_eq!(
        msg.error.as_deref(),
        Some(&ProviderError::StreamEndedEarly {
            message: "Stream ended without finish_reason".into()
        })
    );
    assert_eq!(msg.text(), "partial");
    assert_eq!(classify(&msg, 0), ErrorClass::Retryable);
}

#[tokio::test]
async fn abort_is_typed_aborted() {
    let server = FakeServer::start(vec![]).await;
    let model = anthropic_model(server.url(""));
    let options = opts();
    options.cancel.cancel();
    let (_, msg) = collect(AnthropicMessages::default().stream(&model, &ctx(), options)).await;
    assert_eq!(msg.stop_reason, StopReason::Aborted);
    assert_eq!(
        msg.error.as_deref(),
        Some(&ProviderError::Aborted {
            message: "Request was aborted".into()
        })
    );
    assert_eq!(classify(&msg, 0), ErrorClass::Aborted);
}

#[tokio::test]
async fn openai_stream_stalled_past_idle_timeout_is_a_retryable_timeout() {
    let id = "chatcmpl-s";
    let events = vec![
        oa_chunk(id, json!({"role": "assistant", "content": ""}), None),
        oa_chunk(id, json!({"content": "Hello"}), None),
        oa_chunk(id, json!({"content": " never"}), None),
    ];
    let server = FakeServer::start(vec![Reply::Sse {
        events,
        disconnect_after: None,
        stall_after: Some(2),
    }])
    .await;
    let provider = OpenAiCompletions::with_http(&short_idle());
    let (events, msg) = run(&provider, &openai_model(server.url("/v1"))).await;
    assert!(matches!(
        events.last(),
        Some(AssistantMessageEvent::Error { .. })
    ));
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(
        msg.error_message.as_deref(),
        Some("terminated: Body Timeout Error (UND_ERR_BODY_TIMEOUT)")
    );
    let error = *msg.error.clone().expect("typed error");
    assert!(matches!(error, ProviderError::Timeout { .. }), "{error:?}");
    assert!(error.is_retryable());
    assert_eq!(msg.text(), "Hello", "partial content is kept");
    assert_eq!(classify(&msg, 0), ErrorClass::Retryable);
}

#[tokio::test]
async fn anthropic_stream_stalled_past_idle_timeout_is_a_retryable_timeout() {
    let start = sse_event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    );
    let server = FakeServer::start(vec![Reply::Sse {
        events: vec![start],
        disconnect_after: None,
        stall_after: Some(1),
    }])
    .await;
    let providers = BuiltinProviders::new(&short_idle());
    let provider = providers.for_api("anthropic-messages").expect("adapter");
    let (_, msg) = run(provider.as_ref(), &anthropic_model(server.url(""))).await;
    assert!(
        matches!(msg.error.as_deref(), Some(ProviderError::Timeout { .. })),
        "{:?}",
        msg.error
    );
    assert_eq!(classify(&msg, 0), ErrorClass::Retryable);
}

#[tokio::test]
async fn no_response_headers_within_idle_timeout_is_a_timeout() {
    let (port, holder) = start_silent_server().await;
    let model = openai_model(format!("http://127.0.0.1:{port}/v1"));
    let (events, msg) = run(&OpenAiCompletions::with_http(&short_idle()), &model).await;
    assert_eq!(events.len(), 1, "no start event without a response");
    assert_eq!(
        msg.error.as_deref(),
        Some(&ProviderError::Timeout {
            message: "Request timed out.".into()
        })
    );
    assert_eq!(msg.error_message.as_deref(), Some("Request timed out."));
    assert_eq!(classify(&msg, 0), ErrorClass::Retryable);
    holder.abort();
}

#[tokio::test]
async fn disabled_idle_timeout_waits_for_the_abort() {
    let (port, holder) = start_silent_server().await;
    let model = openai_model(format!("http://127.0.0.1:{port}/v1"));
    let provider = OpenAiCompletions::with_http(&HttpOptions {
        connect_timeout_ms: 0,
        idle_timeout_ms: 0,
        request_timeout_ms: 0,
        ..HttpOptions::default()
    });
    let options = opts();
    let cancel = options.cancel.clone();
    let stream = provider.stream(&model, &ctx(), options);
    let canceller = tokio::spawn(async move {
        // Long enough that a (wrongly) enabled short timeout would have fired first.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        cancel.cancel();
    });
    let (_, msg) = tokio::time::timeout(LIVENESS, collect(stream))
        .await
        .expect("the abort ended the request");
    assert_eq!(msg.stop_reason, StopReason::Aborted);
    assert!(matches!(
        msg.error.as_deref(),
        Some(ProviderError::Aborted { .. })
    ));
    canceller.await.expect("canceller");
    holder.abort();
}
