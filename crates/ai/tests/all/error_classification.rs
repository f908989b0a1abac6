//! Retry / overflow classification (spec agent-loop.md §6.1, §7) with real provider error
//! bodies and the `errorMessage` texts the adapters derive from them, both with the typed
//! [`ProviderError`] and, as for messages read back from a session file, from the text alone.

use pi_ai::{
    classify, is_context_overflow, is_retryable, AssistantMessage, ErrorClass, Model,
    ProviderError, StopReason,
};
use serde_json::{json, Value};

/// An `error` message as the Anthropic adapter words a non-2xx response
/// (`<status> <compact JSON body>`), with its typed error.
fn anthropic_http(status: u16, body: Value) -> AssistantMessage {
    let body = body.to_string();
    http_message(status, body.clone(), format!("{status} {body}"))
}

/// An `error` message as the OpenAI adapter words a non-2xx response
/// (`<status>: <compact JSON of body.error>`), with its typed error.
fn openai_http(status: u16, body: Value) -> AssistantMessage {
    let message = format!("{status}: {}", body["error"]);
    http_message(status, body.to_string(), message)
}

fn http_message(status: u16, body: String, message: String) -> AssistantMessage {
    with_error(ProviderError::Http {
        status,
        retry_after_ms: None,
        body,
        message,
    })
}

fn with_error(error: ProviderError) -> AssistantMessage {
    let mut m = AssistantMessage::empty(&Model::unknown());
    m.stop_reason = if error.is_aborted() {
        StopReason::Aborted
    } else {
        StopReason::Error
    };
    m.error_message = Some(error.to_string());
    m.error = Some(Box::new(error));
    m
}

/// The same message after a trip through session JSON: the typed error is gone.
fn reloaded(m: &AssistantMessage) -> AssistantMessage {
    let text = serde_json::to_string(m).expect("serialize");
    assert!(!text.contains("\"error\":"), "typed error leaked: {text}");
    let back: AssistantMessage = serde_json::from_str(&text).expect("deserialize");
    assert!(back.error.is_none());
    back
}

/// Asserts `class` with the typed error and the same `class` from the text alone.
fn assert_class(m: &AssistantMessage, class: ErrorClass) {
    assert_eq!(classify(m, 200_000), class, "typed: {:?}", m.error_message);
    assert_eq!(
        classify(&reloaded(m), 200_000),
        class,
        "text only: {:?}",
        m.error_message
    );
}

fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn openai_error(message: &str, kind: &str, code: Value) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[test]
fn anthropic_rate_limit_overload_and_server_errors_are_retryable() {
    let rate = anthropic_http(
        429,
        anthropic_error(
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50,000 input \
             tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        ),
    );
    assert_class(&rate, ErrorClass::Retryable);
    let overloaded = anthropic_http(529, anthropic_error("overloaded_error", "Overloaded"));
    assert_eq!(
        overloaded.error_message.as_deref(),
        Some(r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
    );
    assert_class(&overloaded, ErrorClass::Retryable);
    let internal = anthropic_http(500, anthropic_error("api_error", "Internal server error"));
    assert_class(&internal, ErrorClass::Retryable);
    assert!(is_retryable(&internal));
}

#[test]
fn openai_rate_limit_and_500_are_retryable_but_quota_is_not() {
    let rate = openai_http(
        429,
        openai_error(
            "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): \
             Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
            "tokens",
            json!("rate_limit_exceeded"),
        ),
    );
    assert_class(&rate, ErrorClass::Retryable);
    let server = openai_http(
        500,
        openai_error(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            Value::Null,
        ),
    );
    assert_class(&server, ErrorClass::Retryable);
    let quota = openai_http(
        429,
        openai_error(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            json!("insufficient_quota"),
        ),
    );
    assert_class(&quota, ErrorClass::Fatal);
    assert!(!quota.error.as_ref().is_some_and(|e| e.is_retryable()));
    let gateway_quota = with_error(ProviderError::Stream {
        message: "429 Quota exceeded for this key, try again later".into(),
    });
    assert_class(&gateway_quota, ErrorClass::Fatal);
}

#[test]
fn client_errors_are_fatal() {
    let auth = openai_http(
        401,
        openai_error(
            "Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            json!("invalid_api_key"),
        ),
    );
    assert_class(&auth, ErrorClass::Fatal);
    let bad = anthropic_http(
        400,
        anthropic_error("invalid_request_error", "messages: roles must alternate"),
    );
    assert_class(&bad, ErrorClass::Fatal);
}

#[test]
fn context_length_errors_are_overflow_not_retryable() {
    let openai = openai_http(
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages \
             resulted in 135000 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            json!("context_length_exceeded"),
        ),
    );
    assert_class(&openai, ErrorClass::ContextOverflow);
    assert!(!is_retryable(&openai));
    let anthropic = anthropic_http(
        400,
        anthropic_error(
            "invalid_request_error",
            "prompt is too long: 213462 tokens > 200000 maximum",
        ),
    );
    assert_class(&anthropic, ErrorClass::ContextOverflow);
    assert!(is_context_overflow(&anthropic, 0));
    let too_large = anthropic_http(
        413,
        anthropic_error("request_too_large", "Request exceeds the maximum size"),
    );
    assert_class(&too_large, ErrorClass::ContextOverflow);
    let responses = openai_http(
        400,
        openai_error(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "invalid_request_error",
            json!("context_length_exceeded"),
        ),
    );
    assert_class(&responses, ErrorClass::ContextOverflow);
    // Cerebras: a bare 400 without a body.
    let bare = http_message(400, String::new(), "400 status code (no body)".into());
    assert_class(&bare, ErrorClass::ContextOverflow);
}

#[test]
fn throttling_wording_is_not_overflow() {
    let bedrock = with_error(ProviderError::Stream {
        message: "Throttling error: Too many tokens, please wait before trying again.".into(),
    });
    assert_ne!(classify(&bedrock, 200_000), ErrorClass::ContextOverflow);
    assert_ne!(
        classify(&reloaded(&bedrock), 200_000),
        ErrorClass::ContextOverflow
    );
}

#[test]
fn typed_status_wins_over_misleading_text() {
    // A 429 that mentions tokens: the text alone reads as an overflow ("too many tokens"),
    // the typed status says throttling.
    let m = http_message(
        429,
        "Too many tokens per minute".into(),
        "429 Too many tokens per minute".into(),
    );
    assert_eq!(classify(&m, 200_000), ErrorClass::Retryable);
    assert_eq!(
        classify(&reloaded(&m), 200_000),
        ErrorClass::ContextOverflow
    );
    // A 503 with an HTML body and no helpful words is still retryable by status.
    let html = http_message(
        503,
        "<html>upstream</html>".into(),
        "<html>upstream</html>".into(),
    );
    assert_eq!(classify(&html, 200_000), ErrorClass::Retryable);
}

#[test]
fn transport_level_failures_are_retryable() {
    for error in [
        ProviderError::Transport {
            message: "Connection error.".into(),
        },
        ProviderError::Timeout {
            message: "Request timed out.".into(),
        },
        ProviderError::Timeout {
            message: "terminated: Body Timeout Error (UND_ERR_BODY_TIMEOUT)".into(),
        },
        ProviderError::Disconnected {
            message: "terminated: other side closed (UND_ERR_SOCKET)".into(),
        },
        ProviderError::StreamEndedEarly {
            message: "Anthropic stream ended before message_stop".into(),
        },
        ProviderError::StreamEndedEarly {
            message: "Stream ended without finish_reason".into(),
        },
        ProviderError::Stream {
            message:
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                    .into(),
        },
    ] {
        assert!(error.is_retryable(), "{error}");
        assert_class(&with_error(error), ErrorClass::Retryable);
    }
}

#[test]
fn aborts_are_their_own_class() {
    let m = with_error(ProviderError::Aborted {
        message: "Request was aborted".into(),
    });
    assert_eq!(m.stop_reason, StopReason::Aborted);
    assert_class(&m, ErrorClass::Aborted);
    assert!(!is_retryable(&m));
}

#[test]
fn text_only_errors_without_a_message_are_fatal() {
    let mut m = AssistantMessage::empty(&Model::unknown());
    m.stop_reason = StopReason::Error;
    assert_eq!(classify(&m, 200_000), ErrorClass::Fatal);
    m.error_message = Some(String::new());
    assert_eq!(classify(&m, 200_000), ErrorClass::Fatal);
    m.error_message = Some("No API provider registered for api: foo".into());
    assert_eq!(classify(&m, 200_000), ErrorClass::Fatal);
}

#[test]
fn silent_and_length_overflow_use_usage() {
    let mut m = AssistantMessage::empty(&Model::unknown());
    m.stop_reason = StopReason::Stop;
    m.usage.input = 150_000;
    m.usage.cache_read = 60_000;
    m.usage.output = 10;
    assert_eq!(classify(&m, 200_000), ErrorClass::ContextOverflow);
    assert_eq!(classify(&m, 0), ErrorClass::Ok, "unknown window: no check");
    assert_eq!(
        classify(&m, 210_000),
        ErrorClass::Ok,
        "input == window fits"
    );

    m.stop_reason = StopReason::Length;
    assert_eq!(classify(&m, 200_000), ErrorClass::Ok, "output > 0");
    m.usage.output = 0;
    m.usage.input = 138_100;
    assert_eq!(classify(&m, 200_000), ErrorClass::ContextOverflow);
    m.usage.input = 100_000;
    assert_eq!(classify(&m, 200_000), ErrorClass::Ok, "below 99 %");

    m.stop_reason = StopReason::ToolUse;
    m.usage.input = 500_000;
    assert_eq!(classify(&m, 200_000), ErrorClass::Ok);
}
