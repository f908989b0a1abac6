//! Bedrock error messages and the SDK's retry classification and backoff, the request headers
//! and SigV4 signing, and sending one attempt.

use super::env::{AwsEnv, AwsKeys, BedrockAuth};
use super::SIGNING_SERVICE;
use crate::error::ProviderError;
use crate::providers::common::{self, aborted, CONNECTION_ERROR_MESSAGE, REQUEST_TIMEOUT_MESSAGE};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// The readable prefix of a Bedrock exception name (upstream's wording, which the retry and
/// overflow classifiers match); other names stand for themselves.
pub(super) fn error_prefix(name: &str) -> &str {
    match name {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    }
}

/// Upstream's link for data-retention-mode rejections.
pub(super) const DATA_RETENTION_DOCS: &str =
    "https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html";

/// `errorMessage` for a Bedrock exception `name` (`ThrottlingException`) with `message`.
pub fn bedrock_error_message(name: &str, message: &str) -> String {
    let hint = if message.to_lowercase().contains("data retention mode") {
        format!(" See {DATA_RETENTION_DOCS} for supported data retention modes.")
    } else {
        String::new()
    };
    format!("{}: {message}{hint}", error_prefix(name))
}

/// An exception name from `x-amzn-errortype` / a body's `__type` or `code`
/// (`ThrottlingException:http://…` or `com.amazon…#ThrottlingException` → `ThrottlingException`).
pub(super) fn sanitize_error_code(raw: &str) -> String {
    let s = raw.split(':').next().unwrap_or(raw);
    let s = s.rsplit('#').next().unwrap_or(s);
    s.trim().to_owned()
}

/// A non-2xx Bedrock answer, its JSON body parsed once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ErrorAnswer {
    /// The exception name of the `x-amzn-errortype` header alone (what the SDK's retry
    /// classifier reads), sanitized.
    header_name: Option<String>,
    /// The exception name: the header's, else the body's `__type` or `code`, sanitized.
    pub(super) name: Option<String>,
    /// The body's `message` (or `Message`).
    pub(super) message: Option<String>,
}

impl ErrorAnswer {
    /// Reads the `x-amzn-errortype` header value `error_type` and the response `body`.
    pub(super) fn parse(error_type: Option<&str>, body: &str) -> Self {
        let parsed: Option<Value> = serde_json::from_str(body.trim()).ok();
        let field = |k: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let header_name = error_type
            .map(sanitize_error_code)
            .filter(|n| !n.is_empty());
        let name = header_name.clone().or_else(|| {
            field("__type")
                .or_else(|| field("code"))
                .map(|c| sanitize_error_code(&c))
        });
        ErrorAnswer {
            header_name,
            name,
            message: field("message").or_else(|| field("Message")),
        }
    }
}

/// `errorMessage` of a non-2xx answer: `<prefix>: <message>` from the exception name (header
/// or body) and the body's `message`; without a name, `<status>: <body>`.
pub(super) fn http_error_message(status: u16, answer: &ErrorAnswer, body: &str) -> String {
    match (&answer.name, &answer.message) {
        (Some(name), Some(message)) => bedrock_error_message(name, message),
        (Some(name), None) => bedrock_error_message(name, "UnknownError"),
        (None, _) if body.trim().is_empty() => format!("{status}: Unknown error"),
        (None, _) => format!("{status}: {}", body.trim()),
    }
}

/// Whether the AWS SDK's standard retry mode retries this failure, and whether it is
/// throttling (longer backoff).
pub(super) fn sdk_retryable(error: &ProviderError, answer: Option<&ErrorAnswer>) -> Option<bool> {
    const THROTTLING: &[&str] = &[
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "BandwidthLimitExceeded",
        "EC2ThrottledException",
        "PriorRequestNotComplete",
        "RequestThrottled",
    ];
    match error {
        ProviderError::Http { status, .. } => {
            let name = answer.and_then(|a| a.header_name.as_deref());
            let throttling = *status == 429 || name.is_some_and(|n| THROTTLING.contains(&n));
            if throttling {
                Some(true)
            } else if matches!(status, 500 | 502 | 503 | 504) {
                Some(false)
            } else {
                None
            }
        }
        ProviderError::Transport { .. } | ProviderError::Timeout { .. } => Some(false),
        _ => None,
    }
}

/// Full-jitter backoff of SDK retry `attempt` (1-based): up to `base · 2^(attempt-1)` ms,
/// capped at 20 s (`base` 500 ms for throttling, else 100 ms).
pub(super) fn sdk_backoff(attempt: u32, throttling: bool) -> Duration {
    let base: u64 = if throttling { 500 } else { 100 };
    let cap = (base << attempt.saturating_sub(1).min(10)).min(20_000);
    let noise = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos() % 1000))
        .unwrap_or(500);
    Duration::from_millis(cap * noise / 1000)
}

// ---------------------------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------------------------

/// Headers of one signed attempt (SigV4 signs the date, so every attempt is signed anew).
pub(super) fn request_headers(
    url: &str,
    payload: &[u8],
    auth: &BedrockAuth,
    region: &str,
    extra: &[(String, Option<String>)],
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    // Caller headers (then the headers hook's changes, `None` removing), except those SigV4
    // and the bearer scheme own (upstream ignores them silently).
    let allowed: Vec<(String, Option<String>)> = extra
        .iter()
        .filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            !(k.starts_with("x-amz-") || k == "authorization" || k == "host")
        })
        .cloned()
        .collect();
    common::apply_header_changes(&mut headers, &allowed);
    match auth {
        BedrockAuth::Bearer(token) => {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ProviderError::Protocol {
                    message: "Invalid Amazon Bedrock bearer token".to_owned(),
                }
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        BedrockAuth::SigV4(keys) => sign_sigv4(
            &mut headers,
            "POST",
            url,
            payload,
            keys,
            region,
            SIGNING_SERVICE,
        )?,
    }
    Ok(headers)
}

/// Add SigV4 `authorization`, `x-amz-date`, `x-amz-content-sha256` and (with a session
/// token) `x-amz-security-token` to `headers`, signing `host` and the headers present, for
/// `service` (`bedrock`, `sts`) in `region`.
pub(crate) fn sign_sigv4(
    headers: &mut HeaderMap,
    method: &str,
    url: &str,
    payload: &[u8],
    keys: &AwsKeys,
    region: &str,
    service: &str,
) -> Result<(), ProviderError> {
    use aws_sigv4::http_request::{
        sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings,
    };
    use aws_sigv4::sign::v4;
    let fail = |what: &str| ProviderError::Protocol {
        message: format!("Could not sign the AWS {service} request: {what}"),
    };
    let identity = aws_credential_types::Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.clone(),
        keys.session_token.clone(),
        None,
        "pi",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| fail(&e.to_string()))?
        .into();
    let pairs: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let signable = SignableRequest::new(
        method,
        url,
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(payload),
    )
    .map_err(|e| fail(&e.to_string()))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| fail(&e.to_string()))?
        .into_parts();
    let (signed, _) = instructions.into_parts();
    for header in signed {
        if let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(header.name().as_bytes()),
            HeaderValue::from_str(header.value()),
        ) {
            headers.insert(name, value);
        }
    }
    Ok(())
}

/// One attempt: send and wait for the headers, racing `cancel` and the headers timeout. A
/// non-2xx answer becomes [`ProviderError::Http`] (with its parsed [`ErrorAnswer`] beside it).
pub(super) async fn send_once(
    request: reqwest::RequestBuilder,
    cancel: &CancellationToken,
    headers_timeout_ms: u64,
    hooks: Option<&crate::stream::RequestHooks>,
) -> Result<reqwest::Response, (ProviderError, Option<ErrorAnswer>)> {
    let timed_out = || ProviderError::Timeout {
        message: REQUEST_TIMEOUT_MESSAGE.to_owned(),
    };
    let deadline = async {
        if headers_timeout_ms > 0 {
            tokio::time::sleep(Duration::from_millis(headers_timeout_ms)).await
        } else {
            std::future::pending::<()>().await
        }
    };
    let response = tokio::select! {
        _ = cancel.cancelled() => return Err((aborted(), None)),
        _ = deadline => return Err((timed_out(), None)),
        r = request.send() => r,
    };
    let response = response.map_err(|e| {
        let error = if e.is_timeout() {
            timed_out()
        } else {
            ProviderError::Transport {
                message: CONNECTION_ERROR_MESSAGE.to_owned(),
            }
        };
        (error, None)
    })?;
    let status = response.status();
    if let Some(h) = hooks {
        let headers = common::response_headers(response.headers());
        tokio::select! {
            _ = cancel.cancelled() => return Err((aborted(), None)),
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
    let error_type = header("x-amzn-errortype");
    let retry_after_ms = crate::error::parse_retry_after(
        header("retry-after-ms").as_deref(),
        header("retry-after").as_deref(),
        SystemTime::now(),
    );
    let body = tokio::select! {
        _ = cancel.cancelled() => return Err((aborted(), None)),
        t = response.text() => t.unwrap_or_default(),
    };
    let status = status.as_u16();
    let answer = ErrorAnswer::parse(error_type.as_deref(), &body);
    let message = http_error_message(status, &answer, &body);
    Err((
        ProviderError::Http {
            status,
            retry_after_ms,
            body,
            message,
        },
        Some(answer),
    ))
}

/// Whether `AWS_BEDROCK_FORCE_HTTP1` is `1`: the Bedrock request is sent over HTTP/1.1 only
/// (upstream 1.6 `bedrock-converse-stream.js` then uses the SDK's `NodeHttpHandler` instead of
/// its HTTP/2 one). Other values are ignored, as upstream.
pub fn force_http1(env: &AwsEnv) -> bool {
    env.get("AWS_BEDROCK_FORCE_HTTP1") == Some("1")
}
