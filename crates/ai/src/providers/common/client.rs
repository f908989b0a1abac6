//! The shared HTTP clients of the adapters (built once, with the proxy settings; an
//! HTTP/1.1-only variant).

use super::USER_AGENT;
use crate::providers::HttpOptions;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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

pub(super) fn build_client_with(options: &HttpOptions, http1_only: bool) -> reqwest::Client {
    let mut builder =
        crate::providers::proxy::apply(reqwest::Client::builder().user_agent(USER_AGENT));
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
