//! Sending a request under cancellation: the request hooks (payload, headers, response),
//! provider-level retries with their delays, and one attempt with its timeouts.

use super::emit::aborted;
use super::{CONNECTION_ERROR_MESSAGE, REQUEST_TIMEOUT_MESSAGE};
use crate::error::{parse_retry_after, ProviderError};
use crate::providers::HttpOptions;
use crate::stream::{RequestHooks, StreamOptions};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

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
pub(super) fn provider_retryable(error: &ProviderError) -> bool {
    match error {
        ProviderError::Http { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
        ProviderError::Transport { .. } | ProviderError::Timeout { .. } => true,
        _ => false,
    }
}

/// The wait before provider-level retry `retry_index` (0-based): the server's delay when it
/// sent one (an error if above `max_delay_ms`, `0` = no limit), else `min(0.5 s · 2^i, 8 s)`
/// less up to 25 % jitter.
pub(super) fn provider_retry_delay(
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
pub(super) async fn send_once(
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
