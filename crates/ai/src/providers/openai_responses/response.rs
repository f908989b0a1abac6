//! Sending a Responses request and reading its answer: service-tier pricing, argument
//! replacement, HTTP error texts, the request loop, and the end of the stream.

use super::events::{str_of, Slot, StreamState};
use super::request::{zstd_body, Flavor, ResponsesRequest};
use crate::error::ProviderError;
use crate::providers::common;
use crate::providers::common::{compact, next_sse_event, parse_streaming_json, Emitter, StreamEnd};
use crate::stream::{AssistantMessageEvent, StreamOptions};
use crate::types::{AssistantMessage, Content, Model, StopReason};
use eventsource_stream::Eventsource;
use serde_json::Value;
use std::time::Instant;

/// Cost factor of the service tier a response reports (upstream `applyServiceTierPricing`):
/// `flex` 0.5, `priority` (and for OpenAI `fast`) 2, or 2.5 for `gpt-5.5`; Azure prices every
/// tier alike.
pub(super) fn service_tier_multiplier(flavor: &Flavor, model_id: &str, tier: &str) -> f64 {
    let priority = if model_id == "gpt-5.5" { 2.5 } else { 2.0 };
    match (flavor, tier) {
        (Flavor::Azure, _) => 1.0,
        (_, "flex") => 0.5,
        (_, "priority") | (Flavor::OpenAi { .. }, "fast") => priority,
        _ => 1.0,
    }
}

/// JavaScript's `${value}` of an event field (`undefined` when absent).
pub(super) fn js_text(v: Option<&Value>) -> String {
    match v {
        None => "undefined".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) => "null".to_owned(),
        Some(other) => compact(other),
    }
}

/// `function_call_arguments.done`: the complete text replaces the streamed one; when it
/// extends what was streamed, the missing tail is emitted as a `toolcall_delta`.
pub(super) fn replace_arguments(
    slot: &mut Slot,
    full: &str,
    out: &mut AssistantMessage,
    em: &Emitter,
) {
    if full == slot.arguments {
        return;
    }
    let tail = full
        .strip_prefix(slot.arguments.as_str())
        .map(str::to_owned);
    slot.arguments = full.to_owned();
    if let Some(Content::ToolCall(tc)) = out.content.get_mut(slot.content_index) {
        tc.arguments = parse_streaming_json(&slot.arguments);
    }
    if let Some(delta) = tail.filter(|t| !t.is_empty()) {
        em.emit(AssistantMessageEvent::ToolCallDelta {
            content_index: slot.content_index,
            delta,
        });
    }
}

/// `errorMessage` of a non-2xx response for `flavor` (see [`Flavor`]).
pub(super) fn http_error_text(flavor: &Flavor, status: u16, body: &str) -> String {
    let trimmed = body.trim();
    let parsed = serde_json::from_str::<Value>(trimmed).ok();
    match flavor {
        Flavor::OpenAi { .. } | Flavor::Azure => {
            let prefix = match flavor {
                Flavor::OpenAi { prefix } => prefix.as_str(),
                _ => "Azure OpenAI API error",
            };
            // The OpenAI SDK reads `body.error` (else the body itself) and upstream prints it
            // as JSON; an unreadable or empty body leaves the SDK's status sentence.
            let detail = match &parsed {
                Some(v) => {
                    let inner = match v.get("error") {
                        Some(e) if !e.is_null() => e,
                        _ => v,
                    };
                    match inner {
                        Value::Object(m) if !m.is_empty() => compact(inner),
                        Value::String(s) => format!("{status} {s}"),
                        _ => format!("{status} status code (no body)"),
                    }
                }
                None if trimmed.is_empty() => format!("{status} status code (no body)"),
                None => format!("{status} {trimmed}"),
            };
            format!("{prefix} ({status}): {detail}")
        }
        Flavor::Codex => {
            let err = parsed
                .as_ref()
                .and_then(|v| v.get("error"))
                .filter(|e| e.is_object());
            let Some(err) = err else {
                return if trimmed.is_empty() {
                    "Request failed".to_owned()
                } else {
                    body.to_owned()
                };
            };
            let code = str_of(err, "code")
                .or_else(|| str_of(err, "type"))
                .unwrap_or("");
            let lower = code.to_ascii_lowercase();
            let friendly = (status == 429
                || [
                    "usage_limit_reached",
                    "usage_not_included",
                    "rate_limit_exceeded",
                ]
                .iter()
                .any(|c| lower.contains(c)))
            .then(|| {
                let plan = str_of(err, "plan_type")
                    .map(|p| format!(" ({} plan)", p.to_lowercase()))
                    .unwrap_or_default();
                format!("You have hit your ChatGPT usage limit{plan}.")
            });
            match friendly {
                Some(f) => f,
                None => str_of(err, "message")
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| body.to_owned()),
            }
        }
    }
}

/// Placeholder error text for [`send_streaming_request`]; [`run`] rewrites it per flavor.
pub(super) fn raw_http_error(status: u16, _body: &str) -> String {
    format!("{status}")
}

/// Send `request` and read its Responses stream into `em` (shared by the three variants).
pub(crate) async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    request: ResponsesRequest,
    options: StreamOptions,
) {
    let http = client.options();
    let client = client.get();
    let started = Instant::now();
    let mut output = AssistantMessage::empty(&model);
    let cancel = options.cancel.clone();
    if cancel.is_cancelled() {
        em.fail(output, common::aborted(), started);
        return;
    }
    let hooks = request.hooks;
    let mut headers = request.headers;
    common::hooked_headers(hooks.as_ref(), &options, &mut headers).await;
    let body = common::hooked_payload(hooks.as_ref(), request.body).await;
    let mut payload = serde_json::to_vec(&body).unwrap_or_default();
    if request.zstd {
        if let Some(compressed) = zstd_body(&payload) {
            payload = compressed;
            headers.insert(
                reqwest::header::CONTENT_ENCODING,
                reqwest::header::HeaderValue::from_static("zstd"),
            );
        }
    }
    let builder = client.post(&request.url).headers(headers).body(payload);
    let flavor = request.flavor;
    let sent =
        common::send_hooked_request(builder, &cancel, raw_http_error, &http, hooks.as_ref()).await;
    let response = match sent {
        Ok(r) => r,
        Err(mut error) => {
            if let ProviderError::Http {
                status,
                body,
                message,
                ..
            } = &mut error
            {
                let text = http_error_text(&flavor, *status, body);
                // Keep the provider-retry prefix (`Server requested …s retry delay …`).
                *message = match message.strip_suffix(&format!("{status}")) {
                    Some(lead) if !lead.is_empty() => format!("{lead}{text}"),
                    _ => text,
                };
            }
            em.fail(output, error, started);
            return;
        }
    };

    em.start(&output);
    let mut events = response.bytes_stream().eventsource();
    let mut state = StreamState::default();
    let end = loop {
        let event = match next_sse_event(&mut events, &cancel, http.idle_timeout_ms).await {
            Ok(event) => event,
            Err(end) => break end,
        };
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let value = match crate::json::parse_stream_chunk(data) {
            Ok(v) => v,
            Err(e) => {
                break StreamEnd::Failed(ProviderError::Protocol {
                    message: format!("Could not parse Responses stream event: {e}; data={data}"),
                })
            }
        };
        if let Err(text) = state.handle(&value, &mut output, &em, &model, &flavor) {
            break StreamEnd::Failed(ProviderError::Stream { message: text });
        }
        if matches!(flavor, Flavor::Codex) && state.terminal {
            break StreamEnd::Finished;
        }
    };

    finish_stream(&em, output, &state, end, &flavor, &cancel, started);
}

/// Reads Responses events (as JSON values, from SSE or the Codex WebSocket) into an
/// [`AssistantMessage`], emitting the stream events.
pub(crate) struct EventReader {
    state: StreamState,
    /// The message built so far.
    pub(crate) output: AssistantMessage,
}

impl EventReader {
    /// A reader for `model` with an empty message.
    pub(crate) fn new(model: &Model) -> Self {
        EventReader {
            state: StreamState::default(),
            output: AssistantMessage::empty(model),
        }
    }

    /// Handle one event; `Ok(true)` once a terminal event arrived. `Err` is the stream error
    /// text (an `error` / `response.failed` event).
    pub(crate) fn feed(
        &mut self,
        event: &Value,
        em: &Emitter,
        model: &Model,
        flavor: &Flavor,
    ) -> Result<bool, String> {
        self.state
            .handle(event, &mut self.output, em, model, flavor)?;
        Ok(self.state.terminal)
    }

    /// Emit the final `done` / `error` for how the stream ended (see [`finish_stream`]).
    pub(crate) fn finish(
        self,
        em: &Emitter,
        end: StreamEnd,
        flavor: &Flavor,
        cancel: &tokio_util::sync::CancellationToken,
        started: Instant,
    ) {
        finish_stream(em, self.output, &self.state, end, flavor, cancel, started);
    }
}

/// Emit `done` or `error` for a Responses stream that ended with `end`: errors and aborts as
/// they are, a stream without a terminal event, an `error` stop reason, and a tool call left
/// unfinished become errors.
pub(super) fn finish_stream(
    em: &Emitter,
    output: AssistantMessage,
    state: &StreamState,
    end: StreamEnd,
    flavor: &Flavor,
    cancel: &tokio_util::sync::CancellationToken,
    started: Instant,
) {
    match end {
        StreamEnd::Failed(error) => {
            em.fail(output, error.aborted_if(cancel.is_cancelled()), started)
        }
        StreamEnd::Aborted => em.fail(output, common::aborted(), started),
        StreamEnd::Finished => {
            if cancel.is_cancelled() {
                em.fail(output, common::aborted(), started);
            } else if !state.terminal {
                let message = match flavor {
                    Flavor::Codex => "Codex stream ended without a stop reason",
                    _ => "OpenAI Responses stream ended before a terminal response event",
                };
                let error = ProviderError::StreamEndedEarly {
                    message: message.to_owned(),
                };
                em.fail(output, error, started);
            } else if output.stop_reason == StopReason::Error {
                let message = output
                    .error_message
                    .clone()
                    .unwrap_or_else(|| "An unknown error occurred".to_owned());
                em.fail(output, ProviderError::Stream { message }, started);
            } else if output.stop_reason == StopReason::ToolUse && !state.unfinished.is_empty() {
                let names: Vec<String> = state
                    .unfinished
                    .iter()
                    .filter_map(|&ci| match output.content.get(ci) {
                        Some(Content::ToolCall(tc)) => Some(format!("{} ({})", tc.name, tc.id)),
                        _ => None,
                    })
                    .collect();
                let error = ProviderError::Stream {
                    message: format!(
                        "OpenAI Responses stream completed with an unfinished tool call: {}",
                        names.first().cloned().unwrap_or_default()
                    ),
                };
                em.fail(output, error, started);
            } else {
                em.done(output, started);
            }
        }
    }
}
