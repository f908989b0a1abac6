//! The browser sign-in: a loopback callback listener, PKCE, and the authorization-code flow.

use super::{
    client, discover, normalise_url, parse_challenge, post, refresh, same_issuer, store_tokens,
    token_request, AuthStore, OAuthError, OAuthSettings,
};

use serde_json::{json, Value};
use std::time::Duration;

/// How the browser step reaches the user: the authorization URL to open.
pub type ShowUrl = Box<dyn Fn(&str) + Send + Sync>;

pub(super) struct Callback {
    pub(super) listener: tokio::net::TcpListener,
    pub(super) redirect: String,
    pub(super) path: String,
}

pub(super) async fn listen(settings: &OAuthSettings) -> Result<Callback, OAuthError> {
    let fail = |e: String| {
        OAuthError::Authorization(format!("cannot listen for the sign-in callback: {e}"))
    };
    let (host, port, path) = match &settings.callback_url {
        Some(u) => {
            let url = reqwest013::Url::parse(u).map_err(|e| fail(e.to_string()))?;
            let host = url.host_str().unwrap_or("127.0.0.1").to_string();
            if url.scheme() != "http"
                || !matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
            {
                return Err(OAuthError::Authorization(
                    "oauth.callbackUrl must use http on localhost, 127.0.0.1 or [::1]".into(),
                ));
            }
            (
                host,
                url.port().or(settings.callback_port),
                url.path().to_string(),
            )
        }
        None => (
            "127.0.0.1".to_string(),
            settings.callback_port,
            "/callback".to_string(),
        ),
    };
    let bind_host = if host == "localhost" {
        "127.0.0.1".to_string()
    } else {
        host.trim_matches(['[', ']']).to_string()
    };
    let listener = tokio::net::TcpListener::bind((bind_host.as_str(), port.unwrap_or(0)))
        .await
        .map_err(|e| fail(e.to_string()))?;
    let bound = listener
        .local_addr()
        .map_err(|e| fail(e.to_string()))?
        .port();
    let redirect = match &settings.callback_url {
        Some(u)
            if port.is_some()
                && reqwest013::Url::parse(u)
                    .ok()
                    .and_then(|x| x.port())
                    .is_some() =>
        {
            u.clone()
        }
        Some(u) => {
            let mut url = reqwest013::Url::parse(u).map_err(|e| fail(e.to_string()))?;
            let _ = url.set_port(Some(bound));
            url.to_string()
        }
        None => format!("http://127.0.0.1:{bound}/callback"),
    };
    Ok(Callback {
        listener,
        redirect,
        path,
    })
}

pub(super) const PAGE_OK: &str = "<!doctype html><meta charset=utf-8><title>pi</title><p>Signed in to the MCP server. This page can be closed.</p>";

pub(super) fn page_error(msg: &str) -> String {
    let esc = msg
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!("<!doctype html><meta charset=utf-8><title>pi</title><p>Sign-in failed: {esc}</p>")
}

/// Serves the loopback callback until a request to its path carries our `state`: the query
/// parameters of that request.
pub(super) async fn wait_for_callback(
    cb: &Callback,
    state: &str,
    limit: Duration,
) -> Result<Vec<(String, String)>, OAuthError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let (mut sock, _) = tokio::time::timeout_at(deadline, cb.listener.accept())
            .await
            .map_err(|_| OAuthError::Authorization("no sign-in callback arrived in time".into()))?
            .map_err(|e| OAuthError::Authorization(e.to_string()))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 2048];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16384 {
            match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        let head = String::from_utf8_lossy(&buf).into_owned();
        let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let url = reqwest013::Url::parse(&format!("http://127.0.0.1{target}")).ok();
        let respond = |status: &str, body: &str| {
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        };
        let Some(url) = url.filter(|u| u.path() == cb.path) else {
            let _ = sock
                .write_all(respond("404 Not Found", "").as_bytes())
                .await;
            continue;
        };
        let params: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if get("state").as_deref() != Some(state) {
            let _ = sock
                .write_all(respond("400 Bad Request", &page_error("unexpected state")).as_bytes())
                .await;
            continue;
        }
        if let Some(err) = get("error") {
            let what = get("error_description").unwrap_or(err);
            let _ = sock
                .write_all(respond("200 OK", &page_error(&what)).as_bytes())
                .await;
            return Err(OAuthError::Authorization(format!(
                "authorization denied: {what}"
            )));
        }
        let _ = sock.write_all(respond("200 OK", PAGE_OK).as_bytes()).await;
        let _ = sock.shutdown().await;
        return Ok(params);
    }
}

pub(super) fn pkce() -> (String, String) {
    use base64::Engine;
    use sha2::Digest;
    let verifier = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// What a sign-in needs besides the store.
pub struct SignIn<'a> {
    /// Server name (the store key).
    pub name: &'a str,
    /// Server URL.
    pub url: &'a str,
    /// Its `oauth` settings.
    pub settings: OAuthSettings,
    /// The server's last `WWW-Authenticate` challenge, if any.
    pub challenge: Option<String>,
    /// Shows the authorization URL to the user (and may open a browser).
    pub show_url: ShowUrl,
    /// How long to wait for the browser step.
    pub wait: Duration,
}

/// Signs in to the server (see the module docs) and saves the tokens. When a stored refresh
/// token still works, no browser step is needed.
pub async fn sign_in(store: &AuthStore, s: SignIn<'_>) -> Result<(), OAuthError> {
    if refresh(store, s.name, s.url, None).await.is_ok() {
        return Ok(());
    }
    let http = client()?;
    let (challenge_md, challenge_scope) = s
        .challenge
        .as_deref()
        .map(parse_challenge)
        .unwrap_or((None, None));
    let discovery = discover(&http, s.url, &s.settings, challenge_md.as_deref()).await?;
    let cb = listen(&s.settings).await?;
    let mut state = store.load(s.name, s.url).await?.unwrap_or_default();
    state.server_url = s.url.to_string();
    // The client: configured, registered before with this redirect URI, or registered now.
    let client_info = if let Some(id) = &s.settings.client_id {
        let mut c = json!({"client_id": id, "redirect_uris": [cb.redirect]});
        if let Some(secret) = &s.settings.client_secret {
            c["client_secret"] = json!(secret);
        }
        c
    } else if let Some(c) = state.client_information.clone().filter(|c| {
        c.get("redirect_uris")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|u| u.as_str() == Some(cb.redirect.as_str())))
    }) {
        c
    } else {
        let endpoint = discovery.endpoint("registration_endpoint").map_err(|_| {
            OAuthError::Registration(
                "the authorization server offers no dynamic client registration; set oauth.clientId".into(),
            )
        })?;
        let body = json!({
            "redirect_uris": [cb.redirect],
            "client_name": s.settings.client_name.as_deref().unwrap_or("pi"),
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        let (status, reg) = post(&http, &endpoint, "application/json", body.to_string(), None)
            .await
            .map_err(OAuthError::Registration)?;
        if !(200..300).contains(&status) || reg.get("client_id").is_none() {
            return Err(OAuthError::Registration(format!("HTTP {status}: {reg}")));
        }
        reg
    };
    state.client_information = Some(client_info.clone());
    state.discovery = Some(discovery.to_value());
    // Scope: configured (plus what the challenge asked), else the challenge's, else advertised.
    let advertised = discovery
        .resource_metadata
        .as_ref()
        .and_then(|m| m.get("scopes_supported"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|s| !s.is_empty());
    let scope = match (&s.settings.scope, &challenge_scope) {
        (Some(c), Some(extra)) => Some(format!("{c} {extra}")),
        (Some(c), None) => Some(c.clone()),
        (None, Some(extra)) => Some(extra.clone()),
        (None, None) => advertised,
    };
    let (verifier, challenge) = pkce();
    let oauth_state = uuid::Uuid::new_v4().simple().to_string();
    let resource = normalise_url(s.url);
    let client_id = client_info
        .get("client_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut auth_url = reqwest013::Url::parse(&discovery.endpoint("authorization_endpoint")?)
        .map_err(|e| OAuthError::Discovery(format!("authorization_endpoint: {e}")))?;
    {
        let mut q = auth_url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client_id)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("redirect_uri", &cb.redirect)
            .append_pair("state", &oauth_state)
            .append_pair("resource", &resource);
        if let Some(sc) = &scope {
            q.append_pair("scope", sc);
        }
    }
    (s.show_url)(auth_url.as_str());
    let params = wait_for_callback(&cb, &oauth_state, s.wait).await?;
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    // RFC 9207: an `iss` must name our authorization server.
    if let Some(iss) = get("iss") {
        if !same_issuer(&iss, &discovery.as_url) {
            return Err(OAuthError::Authorization(format!(
                "the authorization response came from issuer \"{iss}\", expected \"{}\"",
                discovery.as_url
            )));
        }
    }
    let code = get("code")
        .ok_or_else(|| OAuthError::Authorization("the callback carried no code".into()))?;
    let tokens = token_request(
        &http,
        &discovery,
        &client_info,
        vec![
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &cb.redirect),
            ("code_verifier", &verifier),
            ("resource", &resource),
        ],
    )
    .await?;
    store_tokens(&mut state, tokens, scope.as_deref());
    store.save(s.name, s.url, &state).await
}
