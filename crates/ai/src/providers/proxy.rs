//! Settings `httpProxy` (upstream 1.6 `docs/settings.md`: the proxy URL applied as
//! `HTTP_PROXY` and `HTTPS_PROXY` for pi's HTTP clients; agent-directory settings only).
//!
//! Upstream sets the two variables only where they are unset, so the environment wins over the
//! setting, and `NO_PROXY` still exempts hosts. This port does the same without touching the
//! process environment: [`set_http_proxy`] records the setting once, before the first request,
//! and every client built afterwards uses it.

use std::sync::OnceLock;

static HTTP_PROXY: OnceLock<String> = OnceLock::new();

/// Records settings `httpProxy` for every HTTP client built from now on (the first non-empty
/// value wins; an empty or absent value changes nothing, and clients keep reqwest's reading of
/// `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY`).
pub fn set_http_proxy(url: Option<&str>) {
    if let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) {
        let _ = HTTP_PROXY.set(url.to_owned());
    }
}

fn env_var(names: &[&str]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok())
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty())
}

/// `builder` with the `httpProxy` setting applied: `http://` requests go through
/// `HTTP_PROXY` (or `http_proxy`), else the setting; `https://` through `HTTPS_PROXY` (or
/// `https_proxy`), else the setting; hosts in `NO_PROXY` connect directly. Unchanged without
/// the setting. An unusable URL is a warning, and the client keeps the environment's proxies.
pub(crate) fn apply(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    let Some(setting) = HTTP_PROXY.get() else {
        return builder;
    };
    let http = env_var(&["HTTP_PROXY", "http_proxy"]).unwrap_or_else(|| setting.clone());
    let https = env_var(&["HTTPS_PROXY", "https_proxy"]).unwrap_or_else(|| setting.clone());
    let proxies = reqwest::Proxy::http(&http).and_then(|h| {
        reqwest::Proxy::https(&https).map(|s| {
            (
                h.no_proxy(reqwest::NoProxy::from_env()),
                s.no_proxy(reqwest::NoProxy::from_env()),
            )
        })
    });
    match proxies {
        Ok((h, s)) => builder.proxy(h).proxy(s),
        Err(e) => {
            tracing::warn!("httpProxy {setting:?} is not a usable proxy URL ({e}); ignored");
            builder
        }
    }
}
