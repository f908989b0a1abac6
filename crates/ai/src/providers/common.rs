//! Plumbing shared by the wire adapters: the event channel behind an [`AssistantStream`],
//! the shared HTTP client, request sending and SSE reading under cancellation, content-block
//! start/end events, usage totals, streaming-JSON repair, error texts and small model helpers.

use super::HttpOptions;
use crate::env_keys::env_api_key;
use crate::error::{parse_retry_after, ProviderError};
use crate::stream::{AssistantMessageEvent, AssistantStream, RequestHooks, StreamOptions};
use crate::types::{AssistantMessage, Content, Model, StopReason, ThinkingLevel, Usage};
use eventsource_stream::{Event, EventStreamError};
use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

/// Text of a request that was cancelled through [`StreamOptions::cancel`]
/// (golden `abort_mid_stream`).
pub(crate) const ABORTED_MESSAGE: &str = "Request was aborted";

/// Text upstream (Node/undici) reports when the server drops the connection mid-body
/// (golden `stream_disconnect_retry`). Matches the retry classifier (`terminated`,
/// `other side closed`).
pub(crate) const BODY_TERMINATED_MESSAGE: &str = "terminated: other side closed (UND_ERR_SOCKET)";

/// Text for a body that stayed silent longer than the idle timeout, worded as undici's body
/// timeout would surface through upstream's error formatting (inferred from
/// [`BODY_TERMINATED_MESSAGE`]'s shape). Matches the retry classifier (`timeout`,
/// `terminated`).
pub(crate) const BODY_TIMEOUT_MESSAGE: &str =
    "terminated: Body Timeout Error (UND_ERR_BODY_TIMEOUT)";

/// Start of the text for a stream that sent bytes but no SSE event for longer than the idle
/// timeout (only keep-alive comments); the limit in ms follows. Matches the retry classifier
/// (`timeout`).
pub(crate) const STREAM_IDLE_MESSAGE: &str = "Stream idle timeout: no event in ";

/// Extra ms the event-level idle timer waits beyond `idle_timeout_ms` (at most the limit
/// itself), so that a fully silent connection is reported by the byte-level timeout.
const IDLE_EVENT_GRACE_MS: u64 = 50;

/// Text of a request that never got a response (connection refused, DNS, TLS), as the upstream
/// SDKs word it.
pub(crate) const CONNECTION_ERROR_MESSAGE: &str = "Connection error.";

/// Text of a request that timed out before response headers arrived (connect or idle timeout),
/// as the upstream SDKs word it.
pub(crate) const REQUEST_TIMEOUT_MESSAGE: &str = "Request timed out.";

/// `user-agent` sent with every request.
pub(crate) const USER_AGENT: &str = concat!("pi/", env!("CARGO_PKG_VERSION"));

/// The process-wide HTTP client with the default [`HttpOptions`] (connection pooling across
/// requests); used by adapters built with `Default`.
pub(crate) fn http_client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| build_client(&HttpOptions::default()))
}

/// An HTTP client built on first use, so that start-up pays nothing for TLS roots and
/// connection pools until a request is made. Clones share one client.
#[derive(Debug, Clone)]
pub(crate) enum LazyClient {
    /// The process-wide client with the default options ([`http_client`]).
    Default,
    /// Built from these options on first use.
    Configured(HttpOptions, Arc<OnceLock<reqwest::Client>>),
    /// A client given by the caller.
    Ready(reqwest::Client),
}

impl LazyClient {
    /// A client with `options`, built on first use.
    pub(crate) fn configured(options: &HttpOptions) -> Self {
        LazyClient::Configured(*options, Arc::new(OnceLock::new()))
    }

    /// The options requests through this client follow (timeouts, provider-level retries);
    /// the defaults for [`LazyClient::Default`] and [`LazyClient::Ready`].
    pub(crate) fn options(&self) -> HttpOptions {
        match self {
            LazyClient::Configured(options, _) => *options,
            LazyClient::Default | LazyClient::Ready(_) => HttpOptions::default(),
        }
    }

    /// The client (built now if this is the first use).
    pub(crate) fn get(&self) -> reqwest::Client {
        match self {
            LazyClient::Default => http_client().clone(),
            LazyClient::Configured(options, cell) => {
                cell.get_or_init(|| build_client(options)).clone()
            }
            LazyClient::Ready(c) => c.clone(),
        }
    }
}

/// A new HTTP client with `options`' connect and idle (read) timeouts; `0` disables either.
/// Should the configured builder fail (TLS backend initialisation), a warning is logged and a
/// plain client is used.
pub(crate) fn build_client(options: &HttpOptions) -> reqwest::Client {
    build_client_with(options, false)
}

/// A client like [`build_client`]'s that speaks only HTTP/1.1 (no `h2` in TLS ALPN), built
/// once per `options` and then shared; for `AWS_BEDROCK_FORCE_HTTP1` endpoints that cannot
/// take HTTP/2.
pub(crate) fn http1_client(options: &HttpOptions) -> reqwest::Client {
    static CLIENTS: OnceLock<std::sync::Mutex<Vec<(HttpOptions, reqwest::Client)>>> =
        OnceLock::new();
    let clients = CLIENTS.get_or_init(|| std::sync::Mutex::new(Vec::new()));
    let Ok(mut clients) = clients.lock() else {
        return build_client_with(options, true);
    };
    if let Some((_, c)) = clients.iter().find(|(o, _)| o == options) {
        return c.clone();
    }
    let client = build_client_with(options, true);
    clients.push((*options, client.clone()));
    client
}

fn build_client_with(options: &HttpOptions, http1_only: bool) -> reqwest::Client {
    let mut builder = super::proxy::apply(reqwest::Client::builder().user_agent(USER_AGENT));
    if http1_only {
        builder = builder.http1_only();
    }
    if options.connect_timeout_ms > 0 {
        builder = builder.connect_timeout(Duration::from_millis(options.connect_timeout_ms));
    }
    if options.idle_timeout_ms > 0 {
        builder = builder.read_timeout(Duration::from_millis(options.idle_timeout_ms));
    }
    builder.build().unwrap_or_else(|e| {
        tracing::warn!("could not build the configured HTTP client ({e}); using defaults");
        reqwest::Client::new()
    })
}

/// Sends events into the stream returned by [`event_stream`]. Send failures (consumer gone)
/// are ignored.
pub(crate) struct Emitter {
    tx: UnboundedSender<AssistantMessageEvent>,
}

impl Emitter {
    /// Push one event.
    pub(crate) fn emit(&self, event: AssistantMessageEvent) {
        let _ = self.tx.unbounded_send(event);
    }

    /// Push `Usage` with the usage known so far.
    pub(crate) fn usage(&self, usage: &Usage) {
        self.emit(AssistantMessageEvent::Usage {
            usage: usage.clone(),
        });
    }

    /// Push `Start` with a snapshot of the (empty) partial message.
    pub(crate) fn start(&self, partial: &AssistantMessage) {
        self.emit(AssistantMessageEvent::Start {
            partial: Box::new(partial.clone()),
        });
    }

    /// Finish successfully: stamp `durationMs` and push `Done`.
    pub(crate) fn done(&self, mut message: AssistantMessage, started: Instant) {
        message.duration_ms = Some(elapsed_ms(started));
        self.emit(AssistantMessageEvent::Done {
            reason: message.stop_reason,
            message: Box::new(message),
        });
    }

    /// Finish with a failure: `stopReason` becomes `aborted` for [`ProviderError::Aborted`]
    /// else `error`, `errorMessage` is the error's text and [`AssistantMessage::error`] the
    /// error itself; content streamed so far is kept.
    pub(crate) fn fail(
        &self,
        mut message: AssistantMessage,
        error: ProviderError,
        started: Instant,
    ) {
        message.stop_reason = if error.is_aborted() {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        message.error_message = Some(error.to_string());
        message.error = Some(Box::new(error));
        message.duration_ms = Some(elapsed_ms(started));
        self.emit(AssistantMessageEvent::Error {
            reason: message.stop_reason,
            message: Box::new(message),
        });
    }
}

/// [`ProviderError::Aborted`] with [`ABORTED_MESSAGE`].
pub(crate) fn aborted() -> ProviderError {
    ProviderError::Aborted {
        message: ABORTED_MESSAGE.to_owned(),
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Build an [`AssistantStream`] driven by `producer`. The producer runs only while the stream
/// is polled (no task is spawned, so calling this never needs a runtime) and is dropped, which
/// cancels its HTTP request, when the consumer drops the stream.
pub(crate) fn event_stream<F, Fut>(producer: F) -> AssistantStream
where
    F: FnOnce(Emitter) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = unbounded();
    let driver = futures::stream::once(producer(Emitter { tx }))
        .filter_map(|()| futures::future::ready(None::<AssistantMessageEvent>));
    Box::pin(futures::stream::select(rx, driver))
}

/// Send `request` and wait for the response headers, racing `cancel`, with the provider-level
/// retries of `http` (see [`HttpOptions`]; none by default). A 2xx response is returned unread
/// so its body can be streamed. Otherwise the error of the last attempt is returned (see
/// [`send_once`]); a server-requested delay above `http.max_retry_delay_ms` ends the retries
/// at once with `Server requested <n>s retry delay (max: <m>s). <error>` as the text, keeping
/// the status, body and delay.
pub(crate) async fn send_streaming_request(
    request: reqwest::RequestBuilder,
    cancel: &CancellationToken,
    http_error: fn(u16, &str) -> String,
    http: &HttpOptions,
) -> Result<reqwest::Response, ProviderError> {
    send_hooked_request(request, cancel, http_error, http, None).await
}

/// The body to send after the `payload` hook of `hooks` (unchanged without hooks).
pub(crate) async fn hooked_payload(hooks: Option<&RequestHooks>, body: Value) -> Value {
    match hooks {
        Some(h) => h.0.payload(body).await,
        None => body,
    }
}

/// The caller headers of a request as the `headers` hook sees them (upstream 1.6 passes
/// `transformHeaders` only the headers the caller gives the provider: models.json provider
/// headers, `authHeader`'s `Authorization`, per-request headers; never the adapter's own
/// defaults or its API-key header): [`StreamOptions::headers`], a repeated name
/// (case-insensitive) keeping its last value at its first position.
pub(crate) fn caller_headers(options: &StreamOptions) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in &options.headers {
        match out.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(k)) {
            Some(slot) => slot.1 = v.clone(),
            None => out.push((k.clone(), v.clone())),
        }
    }
    out
}

/// The changes the `headers` hook of `hooks` makes to the caller headers of `options`
/// ([`caller_headers`]): `(name, Some(value))` sets or overrides, `(name, None)` removes,
/// also a default header of the adapter (upstream: a `null` value suppresses a provider
/// default of the same name). Empty without hooks. Called once per request: retries reuse
/// the result.
pub(crate) async fn header_changes(
    hooks: Option<&RequestHooks>,
    options: &StreamOptions,
) -> Vec<(String, Option<String>)> {
    match hooks {
        Some(h) => h.0.headers(caller_headers(options)).await,
        None => vec![],
    }
}

/// Applies hook `changes` ([`header_changes`]) to `headers`: a change to a value that is not
/// a valid header name or value is ignored.
pub(crate) fn apply_header_changes(headers: &mut HeaderMap, changes: &[(String, Option<String>)]) {
    for (name, value) in changes {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        match value {
            Some(v) => {
                if let Ok(v) = HeaderValue::from_str(v) {
                    headers.insert(name, v);
                }
            }
            None => {
                headers.remove(name);
            }
        }
    }
}

/// [`header_changes`] applied to `headers` (the assembled request headers).
pub(crate) async fn hooked_headers(
    hooks: Option<&RequestHooks>,
    options: &StreamOptions,
    headers: &mut HeaderMap,
) {
    let changes = header_changes(hooks, options).await;
    apply_header_changes(headers, &changes);
}

/// The response headers as a `fetch` `Headers` object lists them (what upstream's
/// `after_provider_response` handlers see): lower-case names in sorted order, the values of a
/// repeated header joined with `", "`; a value that is not visible ASCII is left out.
pub(crate) fn response_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    let mut out: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for (k, v) in headers {
        let Ok(v) = v.to_str() else {
            continue;
        };
        out.entry(k.as_str().to_owned())
            .and_modify(|cur| {
                cur.push_str(", ");
                cur.push_str(v);
            })
            .or_insert_with(|| v.to_owned());
    }
    out.into_iter().collect()
}

/// [`send_streaming_request`] calling the `response` hook of `hooks` for every response
/// (each attempt's, errors included) before its body is read.
pub(crate) async fn send_hooked_request(
    request: reqwest::RequestBuilder,
    cancel: &CancellationToken,
    http_error: fn(u16, &str) -> String,
    http: &HttpOptions,
    hooks: Option<&RequestHooks>,
) -> Result<reqwest::Response, ProviderError> {
    let mut retry_index: u32 = 0;
    let mut next = Some(request);
    while let Some(request) = next.take() {
        // A body that cannot be cloned (never the case for our JSON bodies) is sent once.
        next = request.try_clone();
        let sent = send_once(request, cancel, http_error, http.request_timeout_ms, hooks).await;
        let error = match sent {
            Ok(response) => return Ok(response),
            Err(error) => error,
        };
        if next.is_none() || retry_index >= http.max_retries || !provider_retryable(&error) {
            return Err(error);
        }
        let delay = provider_retry_delay(error, retry_index, http.max_retry_delay_ms)?;
        retry_index += 1;
        tokio::select! {
            _ = cancel.cancelled() => return Err(aborted()),
            _ = tokio::time::sleep(delay) => {}
        }
    }
    Err(aborted())
}

/// Whether a provider-level retry applies (upstream `isRetryableProviderError`, mirroring the
/// OpenAI/Anthropic SDKs): no response at all, a timeout, or HTTP 408, 409, 429 or 5xx.
fn provider_retryable(error: &ProviderError) -> bool {
    match error {
        ProviderError::Http { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
        ProviderError::Transport { .. } | ProviderError::Timeout { .. } => true,
        _ => false,
    }
}

/// The wait before provider-level retry `retry_index` (0-based): the server's delay when it
/// sent one (an error if above `max_delay_ms`, `0` = no limit), else `min(0.5 s · 2^i, 8 s)`
/// less up to 25 % jitter.
fn provider_retry_delay(
    error: ProviderError,
    retry_index: u32,
    max_delay_ms: u64,
) -> Result<Duration, ProviderError> {
    if let Some(ms) = error.retry_after_ms() {
        if max_delay_ms > 0 && ms > max_delay_ms {
            return Err(retry_delay_exceeded(error, ms, max_delay_ms));
        }
        return Ok(Duration::from_millis(ms));
    }
    let base_ms = (500u64 << retry_index.min(4)).min(8_000);
    // Jitter without a random-number crate: the sub-second clock is noise enough here.
    let noise = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() % 1000)
        .unwrap_or(0);
    Ok(Duration::from_millis(
        base_ms - base_ms * u64::from(noise) / 4000,
    ))
}

/// `error` reworded as upstream's provider retry cap failure (`Server requested 120s retry
/// delay (max: 60s). <error text>`); an HTTP error keeps its status, body and delay.
pub(crate) fn retry_delay_exceeded(
    error: ProviderError,
    delay_ms: u64,
    max_ms: u64,
) -> ProviderError {
    let message = format!(
        "Server requested {}s retry delay (max: {}s). {}",
        delay_ms.div_ceil(1000),
        max_ms.div_ceil(1000),
        error.message()
    );
    match error {
        ProviderError::Http {
            status,
            retry_after_ms,
            body,
            ..
        } => ProviderError::Http {
            status,
            retry_after_ms,
            body,
            message,
        },
        _ => ProviderError::Transport { message },
    }
}

/// One attempt of [`send_streaming_request`]: send and wait for the headers, racing `cancel`
/// (unbiased) and `headers_timeout_ms` (`0` = none beyond the client's idle timeout). Errors:
/// [`ProviderError::Aborted`] when `cancel` fired first; [`ProviderError::Timeout`]
/// ([`REQUEST_TIMEOUT_MESSAGE`]) when the connect, idle or headers timeout ran out;
/// [`ProviderError::Transport`] ([`CONNECTION_ERROR_MESSAGE`]) for any other failure to get a
/// response; and for a non-2xx status [`ProviderError::Http`] with the body (read first, still
/// racing `cancel`), the `retry-after-ms`/`retry-after` delay and `http_error(status, body)`
/// as the text (the adapter's formatter: [`anthropic_http_error`], [`openai_http_error`]).
async fn send_once(
    request: reqwest::RequestBuilder,
    cancel: &CancellationToken,
    http_error: fn(u16, &str) -> String,
    headers_timeout_ms: u64,
    hooks: Option<&RequestHooks>,
) -> Result<reqwest::Response, ProviderError> {
    let timed_out = || ProviderError::Timeout {
        message: REQUEST_TIMEOUT_MESSAGE.to_owned(),
    };
    let headers_deadline = async {
        if headers_timeout_ms > 0 {
            tokio::time::sleep(Duration::from_millis(headers_timeout_ms)).await
        } else {
            std::future::pending::<()>().await
        }
    };
    let response = tokio::select! {
        _ = cancel.cancelled() => return Err(aborted()),
        _ = headers_deadline => return Err(timed_out()),
        r = request.send() => r,
    };
    let response = response.map_err(|e| {
        if e.is_timeout() {
            timed_out()
        } else {
            ProviderError::Transport {
                message: CONNECTION_ERROR_MESSAGE.to_owned(),
            }
        }
    })?;
    let status = response.status();
    if let Some(h) = hooks {
        let headers = response_headers(response.headers());
        tokio::select! {
            _ = cancel.cancelled() => return Err(aborted()),
            () = h.0.response(status.as_u16(), headers) => {}
        }
    }
    if status.is_success() {
        return Ok(response);
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after_ms = parse_retry_after(
        header("retry-after-ms").as_deref(),
        header("retry-after").as_deref(),
        SystemTime::now(),
    );
    let body = tokio::select! {
        _ = cancel.cancelled() => return Err(aborted()),
        t = response.text() => t.unwrap_or_default(),
    };
    let status = status.as_u16();
    Err(ProviderError::Http {
        status,
        retry_after_ms,
        message: http_error(status, &body),
        body,
    })
}

/// How reading a streamed (SSE) response body ended.
#[derive(Debug)]
pub(crate) enum StreamEnd {
    /// The body (or the adapter's end marker) was reached.
    Finished,
    /// The cancel token fired.
    Aborted,
    /// The stream broke or carried an error.
    Failed(ProviderError),
}

/// The next SSE event of `events`, racing `cancel` (checked first) and the idle timeout
/// `idle_timeout_ms` (`0` = none), or how the stream ended: [`StreamEnd::Aborted`] on cancel,
/// [`StreamEnd::Finished`] at the end of the body, and [`StreamEnd::Failed`] with
/// [`ProviderError::Timeout`] — [`BODY_TIMEOUT_MESSAGE`] when no byte arrived within the
/// client's idle timeout, `Stream idle timeout: no event in <n> ms` when bytes (keep-alive
/// comments, which the SSE parser drops) but no event arrived within `idle_timeout_ms` —,
/// [`ProviderError::Disconnected`] ([`BODY_TERMINATED_MESSAGE`]) when the connection broke,
/// or [`ProviderError::Protocol`] with the parser's error text for malformed UTF-8/SSE.
pub(crate) async fn next_sse_event<S>(
    events: &mut S,
    cancel: &CancellationToken,
    idle_timeout_ms: u64,
) -> Result<Event, StreamEnd>
where
    S: Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Unpin,
{
    let idle = async {
        if idle_timeout_ms > 0 {
            // The grace lets the client's byte-level idle timeout (started at the last read,
            // before this event was parsed) report a silent connection first.
            let grace = IDLE_EVENT_GRACE_MS.min(idle_timeout_ms);
            tokio::time::sleep(Duration::from_millis(idle_timeout_ms + grace)).await
        } else {
            std::future::pending::<()>().await
        }
    };
    let next = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(StreamEnd::Aborted),
        n = events.next() => n,
        _ = idle => {
            return Err(StreamEnd::Failed(ProviderError::Timeout {
                message: format!("{STREAM_IDLE_MESSAGE}{idle_timeout_ms} ms"),
            }))
        }
    };
    match next {
        None => Err(StreamEnd::Finished),
        Some(Err(EventStreamError::Transport(e))) if e.is_timeout() => {
            Err(StreamEnd::Failed(ProviderError::Timeout {
                message: BODY_TIMEOUT_MESSAGE.to_owned(),
            }))
        }
        Some(Err(EventStreamError::Transport(_))) => {
            Err(StreamEnd::Failed(ProviderError::Disconnected {
                message: BODY_TERMINATED_MESSAGE.to_owned(),
            }))
        }
        Some(Err(e)) => Err(StreamEnd::Failed(ProviderError::Protocol {
            message: e.to_string(),
        })),
        Some(Ok(event)) => Ok(event),
    }
}

/// The `*_start` event announcing `block` at `content_index` (`text_start`, `thinking_start`,
/// or `toolcall_start` with the call's id and name); `None` for images, which are never
/// streamed.
pub(crate) fn start_event(content_index: usize, block: &Content) -> Option<AssistantMessageEvent> {
    Some(match block {
        Content::Text(_) => AssistantMessageEvent::TextStart { content_index },
        Content::Thinking(_) => AssistantMessageEvent::ThinkingStart { content_index },
        Content::ToolCall(tc) => AssistantMessageEvent::ToolCallStart {
            content_index,
            id: tc.id.clone(),
            tool_name: tc.name.clone(),
        },
        Content::Image(_) => return None,
    })
}

/// The `*_end` event closing `block` at `content_index`, carrying the block's final text,
/// thinking, or tool call; `None` for images.
pub(crate) fn end_event(content_index: usize, block: &Content) -> Option<AssistantMessageEvent> {
    Some(match block {
        Content::Text(t) => AssistantMessageEvent::TextEnd {
            content_index,
            content: t.text.clone(),
        },
        Content::Thinking(t) => AssistantMessageEvent::ThinkingEnd {
            content_index,
            content: t.thinking.clone(),
        },
        Content::ToolCall(tc) => AssistantMessageEvent::ToolCallEnd {
            content_index,
            tool_call: tc.clone(),
        },
        Content::Image(_) => return None,
    })
}

/// Append `block` to `out.content`, emit its `*_start` event (see [`start_event`]) and return
/// its content index.
pub(crate) fn push_block(out: &mut AssistantMessage, em: &Emitter, block: Content) -> usize {
    let content_index = out.content.len();
    let start = start_event(content_index, &block);
    out.content.push(block);
    if let Some(event) = start {
        em.emit(event);
    }
    content_index
}

/// Finish usage counters read from the wire: `totalTokens` = input + output + cacheRead +
/// cacheWrite (tokens), `cost.totalFromProvider` = `false` unless already set, and the cost
/// (USD) recomputed from `model.cost` (per million tokens).
pub(crate) fn finish_usage(usage: &mut Usage, model: &Model) {
    usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
    if usage.cost.total_from_provider.is_none() {
        usage.cost.total_from_provider = Some(false);
    }
    usage.compute_cost(&model.cost);
}

/// A non-negative JSON number as `u64` (fractions truncated); `None` when absent, negative or
/// not a number.
pub(crate) fn json_u64(v: Option<&Value>) -> Option<u64> {
    match v {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        _ => None,
    }
}

/// API key for a request: the non-empty `options.apiKey`, else the provider's environment
/// variable (see [`env_api_key`]).
pub(crate) fn resolve_api_key(model: &Model, options: &StreamOptions) -> Option<String> {
    options
        .api_key
        .clone()
        .filter(|k| !k.is_empty())
        .or_else(|| env_api_key(&model.provider))
}

/// Output-token cap for a request: the caller's value, else `min(model.maxTokens, 32000)`
/// (agent-loop.md §2.3 point 4). A model without `maxTokens` gets 32000.
pub(crate) fn effective_max_tokens(model: &Model, options: &StreamOptions) -> u64 {
    match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens == 0 => 32_000,
        _ => model.max_tokens.min(32_000),
    }
}

/// Output-token cap as upstream 1.6's `clampMaxTokensToContext` computes it for the adapters
/// that follow it (Google, Mistral): the caller's value or the model's `maxTokens` (32000 when
/// unknown), fitted into the context window after an estimate of the input (the last
/// successful assistant message's `totalTokens` plus ≈3.5 characters per token for what
/// follows, images 4800 characters; without such a message, everything including the system
/// prompt) and a margin of max(4096, 15 % of the input), keeping the
/// 15 % margin only while at least 32768 tokens stay free. At least 1.
pub(crate) fn clamp_max_tokens_to_context(
    model: &Model,
    context: &crate::types::Context,
    options: &StreamOptions,
) -> u64 {
    let wanted = match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens == 0 => 32_000,
        _ => model.max_tokens,
    };
    if model.context_window == 0 {
        return wanted.max(1);
    }
    let input = estimate_context_tokens(context) as i64;
    let window = model.context_window as i64;
    let margin = 4096i64.max((input as f64 * 0.15).ceil() as i64);
    let mut room = window - input - margin;
    if room < 32_768 {
        room = 32_768i64.min(window - input - 4096);
    }
    wanted.min(room.max(1) as u64)
}

/// Upstream's `estimateContextTokens`: the last non-error assistant usage's total plus
/// character estimates (3.5 per token, UTF-16 units) of the messages after it.
fn estimate_context_tokens(context: &crate::types::Context) -> u64 {
    use crate::types::Message;
    let chars = |c: &[Content]| -> usize {
        c.iter()
            .map(|b| match b {
                Content::Text(t) => t.text.encode_utf16().count(),
                Content::Thinking(t) => t.thinking.encode_utf16().count(),
                Content::ToolCall(tc) => {
                    tc.name.encode_utf16().count() + compact(&tc.arguments).encode_utf16().count()
                }
                Content::Image(_) => 4800,
            })
            .sum()
    };
    let tokens = |n: usize| (n as f64 / 3.5).ceil() as u64;
    let estimate = |m: &Message| -> u64 {
        match m {
            Message::User(u) => match &u.content {
                crate::types::UserContent::Text(s) => tokens(s.encode_utf16().count()),
                crate::types::UserContent::Blocks(b) => tokens(chars(b)),
            },
            Message::ToolResult(tr) => tokens(chars(&tr.content)),
            Message::Assistant(a) => tokens(chars(&a.content)),
            _ => 0,
        }
    };
    let last = context.messages.iter().rposition(|m| {
        matches!(m, Message::Assistant(a)
            if !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted)
                && (a.usage.total_tokens > 0
                    || a.usage.input + a.usage.output + a.usage.cache_read + a.usage.cache_write > 0))
    });
    match last {
        Some(i) => {
            let base = match &context.messages[i] {
                Message::Assistant(a) if a.usage.total_tokens > 0 => a.usage.total_tokens,
                Message::Assistant(a) => {
                    a.usage.input + a.usage.output + a.usage.cache_read + a.usage.cache_write
                }
                _ => 0,
            };
            base + context.messages[i + 1..].iter().map(estimate).sum::<u64>()
        }
        // The system prompt is upstream's first (system) message.
        None => {
            tokens(context.system_prompt.encode_utf16().count())
                + context.messages.iter().map(estimate).sum::<u64>()
        }
    }
}

/// Requested reasoning level after clamping to the model; `None` when thinking is off or the
/// model does not reason.
pub(crate) fn requested_reasoning(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    let level = options.reasoning?;
    if level == ThinkingLevel::Off || !model.reasoning {
        return None;
    }
    match crate::models::clamp_thinking_level(model, level) {
        ThinkingLevel::Off => None,
        l => Some(l),
    }
}

/// A string entry of `model.thinkingLevelMap` (the provider-native value for `level`).
pub(crate) fn mapped_level(model: &Model, level: ThinkingLevel) -> Option<String> {
    model
        .thinking_level_map
        .as_ref()?
        .get(level.as_str())?
        .as_str()
        .map(str::to_owned)
}

/// A boolean `model.compat` flag, if set.
pub(crate) fn compat_bool(model: &Model, key: &str) -> Option<bool> {
    model.compat.as_ref()?.get(key)?.as_bool()
}

/// A string `model.compat` value, if set.
pub(crate) fn compat_str<'a>(model: &'a Model, key: &str) -> Option<&'a str> {
    model.compat.as_ref()?.get(key)?.as_str()
}

/// Headers from `model.headers` (string values only) followed by the per-request headers, so
/// later entries override earlier ones when inserted in order.
pub(crate) fn extra_headers(model: &Model, options: &StreamOptions) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(h) = &model.headers {
        for (k, v) in h {
            if let Some(s) = v.as_str() {
                out.push((k.clone(), s.to_owned()));
            }
        }
    }
    out.extend(options.headers.iter().cloned());
    out
}

/// Insert headers into a request builder's header map, replacing same-named ones; invalid
/// names or values are skipped.
pub(crate) fn apply_headers(
    map: &mut reqwest::header::HeaderMap,
    headers: impl IntoIterator<Item = (String, String)>,
) {
    use reqwest::header::{HeaderName, HeaderValue};
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            map.insert(name, value);
        }
    }
}

/// Compact JSON text of a value (as JavaScript `JSON.stringify` writes it).
pub(crate) fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Best-effort parse of possibly truncated JSON tool arguments into an object (upstream
/// `parseStreamingJson`). Unterminated strings and containers are closed; a dangling key,
/// `:` or `,` is cut back to the previous complete member. Anything that does not yield an
/// object gives `{}`.
pub fn parse_streaming_json(text: &str) -> Value {
    let t = text.trim();
    if t.is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(v) = crate::json::parse_str(t) {
        return object_or_empty(v);
    }
    // Positions outside strings where the text may be cut: just after `{`/`[`, or at `,`.
    let mut cuts = Vec::new();
    let mut scan = JsonScan::default();
    for (i, c) in t.char_indices() {
        if !scan.is_structural(c) {
            continue;
        }
        match c {
            '{' | '[' => cuts.push(i + 1),
            ',' => cuts.push(i),
            _ => {}
        }
    }
    if let Some(v) = try_complete(t) {
        return v;
    }
    for &cut in cuts.iter().rev().take(16) {
        if let Some(v) = try_complete(&t[..cut]) {
            return v;
        }
    }
    Value::Object(Map::new())
}

/// Character-by-character JSON lexer state: tracks whether the scan is inside a string
/// literal and whether the previous character was a backslash escape inside it.
#[derive(Default)]
struct JsonScan {
    in_str: bool,
    esc: bool,
}

impl JsonScan {
    /// Feed the next character; `true` when `c` lies outside string literals and is not a
    /// quote (so it may be a structural `{`, `[`, `}`, `]` or `,`).
    fn is_structural(&mut self, c: char) -> bool {
        if self.in_str {
            if self.esc {
                self.esc = false;
            } else if c == '\\' {
                self.esc = true;
            } else if c == '"' {
                self.in_str = false;
            }
            return false;
        }
        if c == '"' {
            self.in_str = true;
            return false;
        }
        true
    }
}

fn object_or_empty(v: Value) -> Value {
    match v {
        Value::Object(_) => v,
        _ => Value::Object(Map::new()),
    }
}

/// Close open strings and containers of `prefix` and parse it.
fn try_complete(prefix: &str) -> Option<Value> {
    let mut stack = Vec::new();
    let mut scan = JsonScan::default();
    for c in prefix.chars() {
        if !scan.is_structural(c) {
            continue;
        }
        match c {
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    let mut s = prefix.trim_end().to_owned();
    if scan.in_str {
        if scan.esc {
            s.pop();
        }
        s.push('"');
    }
    while let Some(c) = stack.pop() {
        s.push(c);
    }
    match crate::json::parse_str(&s) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

/// `errorMessage` for a non-2xx response of an OpenAI-compatible endpoint (golden
/// `auto_retry_exhausted`, 1.6 notes §12): `"<status>: <JSON of body.error, or the body>"`.
pub(crate) fn openai_http_error(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return format!("{status} status code (no body)");
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => {
            let inner = match v.get("error") {
                Some(e) if !e.is_null() => e,
                _ => &v,
            };
            format!("{status}: {}", compact(inner))
        }
        Err(_) => format!("{status}: {body}"),
    }
}

/// `errorMessage` for a non-2xx response of the Anthropic Messages API, as the Anthropic SDK
/// words it (golden `auto_retry_529`, `overflow_compaction`): `"<status> <compact JSON body>"`,
/// or `"<status> <message>"` when the body has a top-level string `message`.
pub(crate) fn anthropic_http_error(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return format!("{status} status code (no body)");
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match v.get("message").and_then(Value::as_str) {
            Some(m) => format!("{status} {m}"),
            None => format!("{status} {}", compact(&v)),
        },
        Err(_) => format!("{status} {body}"),
    }
}

/// Text blocks of `content` joined with `sep`.
pub(crate) fn joined_text(content: &[Content], sep: &str) -> String {
    content
        .iter()
        .filter_map(Content::as_text)
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streaming_json_repairs_truncation() {
        assert_eq!(parse_streaming_json(""), json!({}));
        assert_eq!(parse_streaming_json("{\"comman"), json!({}));
        assert_eq!(
            parse_streaming_json("{\"command\": \"ech"),
            json!({"command": "ech"})
        );
        assert_eq!(parse_streaming_json("{\"a\":1,\"b"), json!({"a": 1}));
        assert_eq!(parse_streaming_json("{\"a\":1,\"b\":"), json!({"a": 1}));
        assert_eq!(parse_streaming_json("{\"a\":[1,2"), json!({"a": [1, 2]}));
        assert_eq!(parse_streaming_json("{\"a\":\"x\\"), json!({"a": "x"}));
        assert_eq!(parse_streaming_json("{\"a\":tr"), json!({}));
        assert_eq!(parse_streaming_json("[1,2]"), json!({}));
        assert_eq!(
            parse_streaming_json("{\"a\":{\"b\":\"c\"}}"),
            json!({"a": {"b": "c"}})
        );
    }

    #[test]
    fn http_error_texts() {
        let body = r#"{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}"#;
        assert_eq!(
            openai_http_error(500, body),
            r#"500: {"message":"boom","type":"server_error","param":null,"code":null}"#
        );
        let body =
            r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#;
        assert_eq!(
            anthropic_http_error(529, body),
            r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        );
        assert_eq!(anthropic_http_error(400, ""), "400 status code (no body)");
    }
}
