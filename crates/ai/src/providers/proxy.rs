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

/// Why no proxy could be chosen for a target (upstream `resolveHttpProxyUrlForTarget`'s
/// errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The proxy variable does not parse as a URL.
    #[error("Invalid proxy URL {0:?}")]
    Invalid(String),
    /// A SOCKS, PAC or other non-HTTP proxy URL.
    #[error("Unsupported proxy protocol. SOCKS and PAC proxy URLs are not supported; use an HTTP or HTTPS proxy URL. Got {0}:")]
    Unsupported(String),
}

/// The first non-empty of `name` in lower case then upper case.
fn proxy_env(name: &str) -> Option<String> {
    env_var(&[&name.to_ascii_lowercase(), &name.to_ascii_uppercase()])
}

fn strip_brackets(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// One `NO_PROXY` entry as (host, port; 0 = any port), upstream's reading: `[v6]:port`,
/// a bare IPv6 address, `host:port`, or `host`.
fn no_proxy_entry(entry: &str) -> Option<(String, u16)> {
    let e = entry.trim().to_ascii_lowercase();
    if e.is_empty() {
        return None;
    }
    if let Some(rest) = e.strip_prefix('[') {
        if let Some((host, after)) = rest.split_once(']') {
            let port = after
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            return Some((host.to_owned(), port));
        }
    }
    if e.matches(':').count() > 1 {
        return Some((e, 0));
    }
    if let Some((host, port)) = e.split_once(':') {
        if let Ok(port) = port.parse() {
            return Some((host.to_owned(), port));
        }
    }
    Some((e, 0))
}

/// Whether `NO_PROXY` (`no_proxy`) lets `host:port` be reached through a proxy: `*` exempts
/// everything; an entry exempts its host and its subdomains (`example.com`, `.example.com`,
/// `*.example.com`), on its port only when it names one.
fn should_proxy(host: &str, port: u16) -> bool {
    let Some(list) = proxy_env("no_proxy").map(|v| v.to_ascii_lowercase()) else {
        return true;
    };
    if list == "*" {
        return false;
    }
    let target = strip_brackets(&host.to_ascii_lowercase()).to_owned();
    list.split([',', ' ', '\t', '\n']).all(|entry| {
        let Some((host, entry_port)) = no_proxy_entry(entry) else {
            return true;
        };
        if entry_port != 0 && entry_port != port {
            return true;
        }
        let domain = strip_brackets(&host);
        let domain = domain
            .strip_prefix("*.")
            .or_else(|| domain.strip_prefix('.'))
            .or_else(|| domain.strip_prefix('*'))
            .unwrap_or(domain);
        domain.is_empty() || (target != domain && !target.ends_with(&format!(".{domain}")))
    })
}

/// The HTTP(S) proxy a connection to `target` (an `http:`/`https:` URL; a WebSocket URL is
/// passed with `ws:`/`wss:` turned into `http:`/`https:`) goes through, as upstream 1.6
/// `utils/node-http-proxy.ts` `resolveHttpProxyUrlForTarget` picks it: `NO_PROXY` first, then
/// `<scheme>_proxy` (lower case before upper case), then settings `httpProxy` (which upstream
/// applies as `HTTP_PROXY`/`HTTPS_PROXY` where those are unset), then `all_proxy`. A value
/// without `://` gets the target's scheme. `Ok(None)`: connect directly. `Err`: the value is
/// not a URL, or names a protocol other than `http`/`https`.
pub fn proxy_for_target(target: &str) -> Result<Option<reqwest::Url>, ProxyError> {
    let Ok(url) = reqwest::Url::parse(target) else {
        return Ok(None);
    };
    let Some(host) = url.host_str() else {
        return Ok(None);
    };
    let scheme = url.scheme().to_owned();
    let port = url.port_or_known_default().unwrap_or(0);
    if !should_proxy(host, port) {
        return Ok(None);
    }
    let chosen = proxy_env(&format!("{scheme}_proxy"))
        .or_else(|| HTTP_PROXY.get().cloned())
        .or_else(|| proxy_env("all_proxy"));
    let Some(mut proxy) = chosen else {
        return Ok(None);
    };
    if !proxy.contains("://") {
        proxy = format!("{scheme}://{proxy}");
    }
    let parsed = reqwest::Url::parse(&proxy).map_err(|_| ProxyError::Invalid(proxy.clone()))?;
    match parsed.scheme() {
        "http" | "https" => Ok(Some(parsed)),
        other => Err(ProxyError::Unsupported(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::no_proxy_entry;

    #[test]
    fn no_proxy_entries_read_as_upstream() {
        assert_eq!(
            no_proxy_entry(" Example.com "),
            Some(("example.com".into(), 0))
        );
        assert_eq!(no_proxy_entry("host:8080"), Some(("host".into(), 8080)));
        assert_eq!(no_proxy_entry("[::1]:443"), Some(("::1".into(), 443)));
        assert_eq!(no_proxy_entry("::1"), Some(("::1".into(), 0)));
        assert_eq!(no_proxy_entry("host:x"), Some(("host:x".into(), 0)));
        assert_eq!(no_proxy_entry(""), None);
    }
}
