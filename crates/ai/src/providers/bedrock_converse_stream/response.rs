//! Reading the ConverseStream events into assistant-message events ([`State`]), and the
//! request loop with retries and the strict-tool-limit fallback ([`run`]).

use super::env::{converse_stream_url, resolve_endpoint, AwsEnv, BedrockAuth};
use super::eventstream::EventStreamDecoder;
use super::request::{is_strict_tool_limit_error, mark_strict_limits_exceeded};
use super::send::{
    bedrock_error_message, force_http1, request_headers, sdk_backoff, sdk_retryable, send_once,
};
use super::REDACTED_THINKING_TEXT;
use crate::error::ProviderError;
use crate::providers::common::{
    self, aborted, end_event, extra_headers, finish_usage, parse_streaming_json, push_block,
    Emitter,
};
use crate::stream::{AssistantMessageEvent, StreamOptions};
use crate::types::{
    AssistantMessage, Content, Model, StopReason, TextContent, ThinkingContent, ToolCall,
};
use futures::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A block opened by the stream, keyed by Bedrock's `contentBlockIndex`.
pub(super) struct OpenBlock {
    content_index: usize,
    /// Tool calls: the input JSON text so far.
    args: Option<String>,
    /// Redacted reasoning: the base64 chunks so far, joined at the block's end.
    redacted: Option<String>,
}

#[derive(Default)]
pub(super) struct State {
    open: HashMap<u64, OpenBlock>,
    error_message: Option<String>,
}

impl State {
    fn handle(
        &mut self,
        event_type: &str,
        payload: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
    ) -> Result<(), ProviderError> {
        let index = payload
            .get("contentBlockIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match event_type {
            "messageStart" if payload.get("role").and_then(Value::as_str) != Some("assistant") => {
                return Err(ProviderError::Protocol {
                    message:
                        "Unexpected assistant message start but got user message start instead"
                            .to_owned(),
                });
            }
            "contentBlockStart" => {
                if let Some(tool) = payload.pointer("/start/toolUse") {
                    let str_of =
                        |k: &str| tool.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    let ci = push_block(
                        out,
                        em,
                        Content::ToolCall(ToolCall {
                            id: str_of("toolUseId"),
                            name: str_of("name"),
                            arguments: json!({}),
                            thought_signature: None,
                            extra: Default::default(),
                        }),
                    );
                    self.open.insert(
                        index,
                        OpenBlock {
                            content_index: ci,
                            args: Some(String::new()),
                            redacted: None,
                        },
                    );
                }
            }
            "contentBlockDelta" => self.delta(index, payload.get("delta"), out, em),
            "contentBlockStop" => self.stop(index, out, em),
            "messageStop" => {
                let reason = payload
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                out.raw_stop_reason = Some(reason.to_owned());
                out.stop_reason = match reason {
                    "end_turn" | "stop_sequence" => StopReason::Stop,
                    "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                    "tool_use" => StopReason::ToolUse,
                    "" => StopReason::Error,
                    other => {
                        self.error_message = Some(format!("Provider stopped with: {other}"));
                        StopReason::Error
                    }
                };
            }
            "metadata" => {
                if let Some(u) = payload.get("usage").filter(|u| u.is_object()) {
                    let n = |k: &str| common::json_u64(u.get(k)).unwrap_or(0);
                    out.usage.input = n("inputTokens");
                    out.usage.output = n("outputTokens");
                    out.usage.cache_read = n("cacheReadInputTokens");
                    out.usage.cache_write = n("cacheWriteInputTokens");
                    out.usage.cache_write_1h =
                        u.get("cacheDetails").and_then(Value::as_array).map(|d| {
                            d.iter()
                                .filter(|x| x.get("ttl").and_then(Value::as_str) == Some("1h"))
                                .filter_map(|x| common::json_u64(x.get("inputTokens")))
                                .sum()
                        });
                    let total = n("totalTokens");
                    finish_usage(&mut out.usage, model);
                    out.usage.total_tokens = if total > 0 {
                        total
                    } else {
                        out.usage.input + out.usage.output
                    };
                    em.usage(&out.usage);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        delta: Option<&Value>,
        out: &mut AssistantMessage,
        em: &Emitter,
    ) {
        let Some(delta) = delta else { return };
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            let ci = match self.open.get(&index) {
                Some(o) => o.content_index,
                None => {
                    let ci = push_block(
                        out,
                        em,
                        Content::Text(TextContent {
                            text: String::new(),
                            text_signature: None,
                            extra: Default::default(),
                        }),
                    );
                    self.open.insert(
                        index,
                        OpenBlock {
                            content_index: ci,
                            args: None,
                            redacted: None,
                        },
                    );
                    ci
                }
            };
            if let Some(Content::Text(t)) = out.content.get_mut(ci) {
                t.text.push_str(text);
                em.emit(AssistantMessageEvent::TextDelta {
                    content_index: ci,
                    delta: text.to_owned(),
                });
            }
        } else if let Some(tool) = delta.get("toolUse") {
            let Some(open) = self.open.get_mut(&index) else {
                return;
            };
            let Some(args) = open.args.as_mut() else {
                return;
            };
            let piece = tool.get("input").and_then(Value::as_str).unwrap_or("");
            args.push_str(piece);
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                tc.arguments = parse_streaming_json(args);
            }
            em.emit(AssistantMessageEvent::ToolCallDelta {
                content_index: open.content_index,
                delta: piece.to_owned(),
            });
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            let ci = match self.open.get(&index) {
                Some(o) => o.content_index,
                None => {
                    let ci = push_block(
                        out,
                        em,
                        Content::Thinking(ThinkingContent {
                            thinking: String::new(),
                            thinking_signature: Some(String::new()),
                            redacted: None,
                            extra: Default::default(),
                        }),
                    );
                    self.open.insert(
                        index,
                        OpenBlock {
                            content_index: ci,
                            args: None,
                            redacted: None,
                        },
                    );
                    ci
                }
            };
            let Some(Content::Thinking(t)) = out.content.get_mut(ci) else {
                return;
            };
            if let Some(text) = reasoning
                .get("text")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                t.thinking.push_str(text);
                em.emit(AssistantMessageEvent::ThinkingDelta {
                    content_index: ci,
                    delta: text.to_owned(),
                });
            }
            if let Some(sig) = reasoning
                .get("signature")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                if t.redacted != Some(true) {
                    t.thinking_signature
                        .get_or_insert_with(String::new)
                        .push_str(sig);
                }
            }
            if let Some(data) = reasoning
                .get("redactedContent")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                if t.redacted != Some(true) {
                    t.redacted = Some(true);
                    t.thinking_signature = Some(String::new());
                    t.thinking.push_str(REDACTED_THINKING_TEXT);
                    em.emit(AssistantMessageEvent::ThinkingDelta {
                        content_index: ci,
                        delta: REDACTED_THINKING_TEXT.to_owned(),
                    });
                }
                if let Some(open) = self.open.get_mut(&index) {
                    open.redacted.get_or_insert_with(String::new).push_str(data);
                }
            }
        }
    }

    /// Join buffered redacted chunks (base64 each) into the block's signature.
    fn flush_redacted(open: &mut OpenBlock, out: &mut AssistantMessage) {
        let Some(chunks) = open.redacted.take() else {
            return;
        };
        if let Some(Content::Thinking(t)) = out.content.get_mut(open.content_index) {
            t.thinking_signature = Some(rejoin_base64(&chunks));
        }
    }

    fn stop(&mut self, index: u64, out: &mut AssistantMessage, em: &Emitter) {
        let Some(mut open) = self.open.remove(&index) else {
            return;
        };
        Self::flush_redacted(&mut open, out);
        if let Some(args) = &open.args {
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                tc.arguments = parse_streaming_json(args);
            }
        }
        if let Some(e) = out
            .content
            .get(open.content_index)
            .and_then(|b| end_event(open.content_index, b))
        {
            em.emit(e);
        }
    }

    /// Settle blocks the stream left open (no end events, as upstream).
    fn flush(&mut self, out: &mut AssistantMessage) {
        for (_, mut open) in self.open.drain() {
            Self::flush_redacted(&mut open, out);
            if let Some(args) = &open.args {
                if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                    tc.arguments = parse_streaming_json(args);
                }
            }
        }
    }
}

/// Concatenated base64 chunks (each padded on its own) as one base64 text of all their bytes.
pub(super) fn rejoin_base64(chunks: &str) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut bytes = Vec::new();
    // Chunks end at padding; split after each run of `=`.
    let mut piece = String::new();
    let mut chars = chunks.chars().peekable();
    while let Some(c) = chars.next() {
        piece.push(c);
        if c == '=' && chars.peek() != Some(&'=') {
            match engine.decode(&piece) {
                Ok(b) => bytes.extend(b),
                Err(_) => return chunks.to_owned(),
            }
            piece.clear();
        }
    }
    if !piece.is_empty() {
        match engine.decode(&piece) {
            Ok(b) => bytes.extend(b),
            Err(_) => return chunks.to_owned(),
        }
    }
    engine.encode(bytes)
}

/// The name of a stream exception (`throttlingException` → `ThrottlingException`).
pub(super) fn exception_name(kind: &str) -> String {
    let mut c = kind.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => "UnknownError".to_owned(),
    }
}

pub(super) enum End {
    Finished,
    Aborted,
    Failed(ProviderError),
}

/// The body of one request, its non-strict fallback and the extensions' hooks around it.
pub(super) struct Bodies {
    /// The ConverseStream body.
    pub(super) body: Value,
    /// The same body with every tool non-strict (sent once if Bedrock rejects strict tools).
    pub(super) fallback: Option<Value>,
    /// `before_provider_headers` / `before_provider_request` / `after_provider_response`.
    pub(super) hooks: Option<crate::stream::RequestHooks>,
}

pub(super) async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    bodies: Bodies,
    options: StreamOptions,
    env: AwsEnv,
) {
    let Bodies {
        body,
        mut fallback,
        hooks,
    } = bodies;
    let http = client.options();
    let client = client.get();
    let started = Instant::now();
    let output = AssistantMessage::empty(&model);
    let cancel = options.cancel.clone();
    if cancel.is_cancelled() {
        em.fail(output, aborted(), started);
        return;
    }
    let api_key = options.api_key.clone().filter(|k| !k.is_empty());
    let auth = match BedrockAuth::resolve_chain(api_key.as_deref(), &env, &client).await {
        Ok(a) => a,
        Err(e) => {
            let error = ProviderError::Protocol {
                message: e.to_string(),
            };
            em.fail(output, error, started);
            return;
        }
    };
    let client = if force_http1(&env) {
        common::http1_client(&http)
    } else {
        client
    };
    let target = resolve_endpoint(&model, &env);
    let url = converse_stream_url(&target.endpoint, &model.id);
    // Upstream fires the headers hook once per request and the payload hook per body sent
    // (the strict fallback again); header changes go in before SigV4 signs them.
    let changes = common::header_changes(hooks.as_ref(), &options).await;
    let body = common::hooked_payload(hooks.as_ref(), body).await;
    let mut payload = serde_json::to_vec(&body).unwrap_or_default();
    let mut extra: Vec<(String, Option<String>)> = extra_headers(&model, &options)
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    extra.extend(changes);
    let max_attempts = env.max_attempts();
    let mut attempt = 1;
    let response = loop {
        let headers = match request_headers(&url, &payload, &auth, &target.region, &extra) {
            Ok(h) => h,
            Err(error) => {
                em.fail(output, error, started);
                return;
            }
        };
        let request = client.post(&url).headers(headers).body(payload.clone());
        match send_once(request, &cancel, http.request_timeout_ms, hooks.as_ref()).await {
            Ok(r) => break r,
            Err((error, answer)) => {
                // Bedrock checks the tool schemas before streaming, so resending repeats no
                // output; the retry budget restarts with the new body.
                if is_strict_tool_limit_error(&error, answer.as_ref()) && !cancel.is_cancelled() {
                    if let Some(next) = fallback.take() {
                        tracing::info!(
                            "bedrock: strict tools over the model's limits ({}); resending them non-strict",
                            error
                        );
                        mark_strict_limits_exceeded(&options);
                        let next = common::hooked_payload(hooks.as_ref(), next).await;
                        payload = serde_json::to_vec(&next).unwrap_or_default();
                        attempt = 1;
                        continue;
                    }
                }
                let retry = sdk_retryable(&error, answer.as_ref());
                match retry {
                    Some(throttling) if attempt < max_attempts => {
                        let delay = sdk_backoff(attempt, throttling);
                        attempt += 1;
                        tokio::select! {
                            _ = cancel.cancelled() => {
                                em.fail(output, aborted(), started);
                                return;
                            }
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                    _ => {
                        em.fail(output, error, started);
                        return;
                    }
                }
            }
        }
    };
    let mut output = output;
    let mut state = State::default();
    let mut decoder = EventStreamDecoder::default();
    let mut bytes = response.bytes_stream();
    let mut started_stream = false;
    let end = 'read: loop {
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    break 'read End::Failed(ProviderError::Protocol {
                        message: e.to_string(),
                    })
                }
            };
            let payload: Value =
                crate::json::parse_value(&frame.payload).unwrap_or(Value::Object(Map::new()));
            match frame.header(":message-type") {
                Some("event") => {
                    let event_type = frame.header(":event-type").unwrap_or("");
                    if event_type == "messageStart" && !started_stream {
                        started_stream = true;
                        em.start(&output);
                    }
                    if let Err(e) = state.handle(event_type, &payload, &mut output, &em, &model) {
                        break 'read End::Failed(e);
                    }
                }
                Some("exception") => {
                    let name = exception_name(frame.header(":exception-type").unwrap_or(""));
                    let message = payload
                        .get("message")
                        .or_else(|| payload.get("Message"))
                        .and_then(Value::as_str)
                        .unwrap_or("UnknownError");
                    break 'read End::Failed(ProviderError::Stream {
                        message: bedrock_error_message(&name, message),
                    });
                }
                Some("error") => {
                    let code = frame.header(":error-code").unwrap_or("UnknownError");
                    let message = frame.header(":error-message").unwrap_or("");
                    break 'read End::Failed(ProviderError::Stream {
                        message: bedrock_error_message(code, message),
                    });
                }
                _ => {}
            }
        }
        let idle = async {
            if http.idle_timeout_ms > 0 {
                tokio::time::sleep(Duration::from_millis(http.idle_timeout_ms)).await
            } else {
                std::future::pending::<()>().await
            }
        };
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => break End::Aborted,
            n = bytes.next() => n,
            _ = idle => {
                break End::Failed(ProviderError::Timeout {
                    message: common::BODY_TIMEOUT_MESSAGE.to_owned(),
                })
            }
        };
        match next {
            None if decoder.has_partial() => {
                break End::Failed(ProviderError::Disconnected {
                    message: common::BODY_TERMINATED_MESSAGE.to_owned(),
                })
            }
            None => break End::Finished,
            Some(Ok(chunk)) => decoder.push(&chunk),
            Some(Err(e)) if e.is_timeout() => {
                break End::Failed(ProviderError::Timeout {
                    message: common::BODY_TIMEOUT_MESSAGE.to_owned(),
                })
            }
            Some(Err(e)) => {
                break End::Failed(ProviderError::Disconnected {
                    message: common::body_broken_message(&e).to_owned(),
                })
            }
        }
    };
    state.flush(&mut output);
    match end {
        End::Aborted => em.fail(output, aborted(), started),
        End::Failed(error) => {
            let error = error.aborted_if(cancel.is_cancelled());
            em.fail(output, error, started)
        }
        End::Finished => {
            if cancel.is_cancelled() {
                em.fail(output, aborted(), started);
            } else if output.stop_reason == StopReason::Pending {
                let error = ProviderError::StreamEndedEarly {
                    message: "Bedrock stream ended without a stop reason".to_owned(),
                };
                em.fail(output, error, started);
            } else if matches!(output.stop_reason, StopReason::Error | StopReason::Aborted) {
                let message = state
                    .error_message
                    .take()
                    .unwrap_or_else(|| "An unknown error occurred".to_owned());
                em.fail(output, ProviderError::Stream { message }, started);
            } else {
                em.done(output, started);
            }
        }
    }
}
