//! Blocking HTTP for the OAuth endpoints: credentials are resolved by synchronous code (the
//! per-request key resolver, which the session runs on the blocking pool; `pi auth …`, before
//! any runtime exists), so each call runs on a thread of its own with a current-thread
//! runtime and the caller waits for it. Never call these from an async worker.

use serde_json::Value;
use std::time::Duration;

/// The test-only endpoint override (see the [module docs](super)).
pub const TEST_ORIGIN_ENV: &str = "PI_TEST_OAUTH_ORIGIN";

/// Runs `f` on a fresh OS thread and waits for it (the thread may build a runtime of its own
/// or block on the process's, which an async worker could not). Blocking: call it off the
/// async workers (`tokio::task::spawn_blocking`, or a command's main thread). A panic in `f`
/// becomes `Err`.
pub fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .map_err(|_| "credential thread panicked".to_string())
    })
}

/// `url` with its origin replaced by `PI_TEST_OAUTH_ORIGIN` when that is set.
pub fn endpoint(url: &str) -> String {
    match std::env::var(TEST_ORIGIN_ENV) {
        Ok(origin) if !origin.is_empty() => {
            let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
            let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
            format!("{}{path}", origin.trim_end_matches('/'))
        }
        _ => url.to_string(),
    }
}

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// The reason phrase of the status (`Bad Request`).
    pub status_text: String,
    /// The body as text.
    pub body: String,
}

impl Reply {
    /// 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A request body.
pub enum Body<'a> {
    /// No body (GET).
    None,
    /// `application/json`.
    Json(&'a Value),
    /// `application/x-www-form-urlencoded`.
    Form(&'a [(&'a str, &'a str)]),
}

/// Sends one request and reads the whole answer; must run off the async runtime (inside
/// [`blocking`]). `Err` is a transport failure (connect, timeout), worded by reqwest.
pub fn send(
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Body<'_>,
    timeout: Duration,
) -> Result<Reply, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| e.to_string())?;
        let mut req = client.request(method, url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("Content-Type", "application/json")
                .body(v.to_string()),
            Body::Form(fields) => req.form(fields),
        };
        let resp = req.send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| e.to_string())?;
        Ok(Reply {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or_default().to_string(),
            body,
        })
    })
}
