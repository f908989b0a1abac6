//! Talking to the authorization server: discovery of its metadata, client authentication and
//! token requests.

use super::{OAuthError, OAuthSettings, OAuthState, Tokens, AS_TIMEOUT};

use serde_json::{json, Value};

pub(super) fn client() -> Result<reqwest013::Client, OAuthError> {
    crate::mcp::client::http_client().map_err(OAuthError::Discovery)
}

pub(super) async fn get_json(
    http: &reqwest013::Client,
    url: &str,
) -> Result<Option<Value>, String> {
    let resp = tokio::time::timeout(
        AS_TIMEOUT,
        http.get(url).header("accept", "application/json").send(),
    )
    .await
    .map_err(|_| format!("{url}: timed out"))?
    .map_err(|e| format!("{url}: {e}"))?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    let bytes = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    Ok(serde_json::from_slice(&bytes).ok())
}

/// `application/x-www-form-urlencoded` encoding of one value (the `form_urlencoded` crate:
/// `*-._` and alphanumerics kept, space as `+`, the rest `%XX`), as RFC 6749 §2.3.1 asks of
/// a client id and secret in Basic credentials.
pub(super) fn form_encode(v: &str) -> String {
    form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

/// An `application/x-www-form-urlencoded` body of `pairs`.
pub(super) fn form(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().copied())
        .finish()
}

pub(super) async fn post(
    http: &reqwest013::Client,
    url: &str,
    content_type: &str,
    body: String,
    basic: Option<(&str, &str)>,
) -> Result<(u16, Value), String> {
    let mut req = http
        .post(url)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(body);
    if let Some((id, secret)) = basic {
        use base64::Engine;
        let creds = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_encode(id),
            form_encode(secret)
        ));
        req = req.header("authorization", format!("Basic {creds}"));
    }
    let resp = tokio::time::timeout(AS_TIMEOUT, req.send())
        .await
        .map_err(|_| format!("{url}: timed out"))?
        .map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, v))
}

/// The `resource_metadata` and `scope` parameters of a `WWW-Authenticate: Bearer …` challenge.
pub fn parse_challenge(header: &str) -> (Option<String>, Option<String>) {
    let param = |name: &str| {
        let lower = header.to_ascii_lowercase();
        let mut from = 0;
        while let Some(i) = lower[from..].find(name) {
            let at = from + i;
            let before_ok = at == 0 || matches!(lower.as_bytes()[at - 1], b' ' | b',' | b'\t');
            let rest = &header[at + name.len()..];
            if before_ok && rest.starts_with('=') {
                let v = &rest[1..];
                return Some(if let Some(q) = v.strip_prefix('"') {
                    q.split('"').next().unwrap_or("").to_string()
                } else {
                    v.split([',', ' ']).next().unwrap_or("").to_string()
                });
            }
            from = at + name.len();
        }
        None
    };
    (param("resource_metadata"), param("scope"))
}

/// The discovered authorization server.
#[derive(Debug, Clone)]
pub(super) struct Discovery {
    pub(super) as_url: String,
    pub(super) metadata: Value,
    pub(super) resource_metadata: Option<Value>,
    pub(super) resource_metadata_url: Option<String>,
}

impl Discovery {
    pub(super) fn endpoint(&self, key: &str) -> Result<String, OAuthError> {
        self.metadata
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                OAuthError::Discovery(format!("authorization server metadata has no {key}"))
            })
    }

    pub(super) fn to_value(&self) -> Value {
        let mut v = json!({
            "authorizationServerUrl": self.as_url,
            "authorizationServerMetadata": self.metadata,
        });
        if let Some(r) = &self.resource_metadata {
            v["resourceMetadata"] = r.clone();
        }
        if let Some(u) = &self.resource_metadata_url {
            v["resourceMetadataUrl"] = json!(u);
        }
        v
    }

    pub(super) fn from_value(v: &Value) -> Option<Discovery> {
        Some(Discovery {
            as_url: v.get("authorizationServerUrl")?.as_str()?.to_string(),
            metadata: v.get("authorizationServerMetadata")?.clone(),
            resource_metadata: v.get("resourceMetadata").cloned(),
            resource_metadata_url: v
                .get("resourceMetadataUrl")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

pub(super) fn with_path(origin: &reqwest013::Url, prefix: &str, path: &str) -> String {
    let path = path.trim_end_matches('/');
    let mut u = origin.clone();
    u.set_path(&format!("{prefix}{path}"));
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

pub(super) fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

pub(super) async fn discover(
    http: &reqwest013::Client,
    server_url: &str,
    settings: &OAuthSettings,
    challenge_metadata: Option<&str>,
) -> Result<Discovery, OAuthError> {
    let server = reqwest013::Url::parse(server_url)
        .map_err(|e| OAuthError::Discovery(format!("{server_url}: {e}")))?;
    if let Some(url) = &settings.auth_server_metadata_url {
        let md = get_json(http, url)
            .await
            .map_err(OAuthError::Discovery)?
            .ok_or_else(|| OAuthError::Discovery(format!("no metadata at {url}")))?;
        let issuer = md
            .get("issuer")
            .and_then(Value::as_str)
            .unwrap_or(url)
            .to_string();
        return Ok(Discovery {
            as_url: issuer,
            metadata: md,
            resource_metadata: None,
            resource_metadata_url: None,
        });
    }
    // Protected resource metadata (RFC 9728).
    let mut candidates = Vec::new();
    if let Some(u) = challenge_metadata {
        candidates.push(u.to_string());
    }
    candidates.push(with_path(
        &server,
        "/.well-known/oauth-protected-resource",
        server.path(),
    ));
    candidates.push(with_path(
        &server,
        "/.well-known/oauth-protected-resource",
        "",
    ));
    let mut resource = None;
    for url in candidates {
        if let Ok(Some(md)) = get_json(http, &url).await {
            resource = Some((url, md));
            break;
        }
    }
    let as_url = resource
        .as_ref()
        .and_then(|(_, md)| md.get("authorization_servers"))
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| with_path(&server, "", ""));
    let issuer = reqwest013::Url::parse(&as_url)
        .map_err(|e| OAuthError::Discovery(format!("{as_url}: {e}")))?;
    let ipath = issuer.path().trim_end_matches('/').to_string();
    let mut urls = vec![
        with_path(&issuer, "/.well-known/oauth-authorization-server", &ipath),
        with_path(&issuer, "/.well-known/openid-configuration", &ipath),
    ];
    if !ipath.is_empty() {
        urls.push(with_path(
            &issuer,
            &format!("{ipath}/.well-known/openid-configuration"),
            "",
        ));
    }
    for url in urls {
        if let Ok(Some(md)) = get_json(http, &url).await {
            let got = md.get("issuer").and_then(Value::as_str).unwrap_or("");
            if !same_issuer(got, &as_url) {
                return Err(OAuthError::Discovery(format!(
                    "authorization server metadata at {url} names issuer \"{got}\", expected \"{as_url}\""
                )));
            }
            return Ok(Discovery {
                as_url,
                metadata: md,
                resource_metadata: resource.as_ref().map(|(_, m)| m.clone()),
                resource_metadata_url: resource.map(|(u, _)| u),
            });
        }
    }
    Err(OAuthError::Discovery(format!(
        "no authorization server metadata found for {as_url}"
    )))
}

/// How a token request authenticates the client: HTTP Basic `(id, secret)`, and form fields.
pub(super) type ClientAuth<'a> = (Option<(&'a str, &'a str)>, Vec<(&'static str, &'a str)>);

pub(super) fn client_auth<'a>(client: &'a Value, method_hint: Option<&str>) -> ClientAuth<'a> {
    let id = client
        .get("client_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let secret = client.get("client_secret").and_then(Value::as_str);
    let method = client
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .or(method_hint);
    match (secret, method) {
        (Some(s), Some("client_secret_basic")) => (Some((id, s)), vec![]),
        (Some(s), _) => (None, vec![("client_id", id), ("client_secret", s)]),
        (None, _) => (None, vec![("client_id", id)]),
    }
}

pub(super) async fn token_request(
    http: &reqwest013::Client,
    discovery: &Discovery,
    client: &Value,
    mut params: Vec<(&str, &str)>,
) -> Result<Tokens, OAuthError> {
    let endpoint = discovery.endpoint("token_endpoint")?;
    let (basic, extra) = client_auth(client, None);
    params.extend(extra);
    let (status, body) = post(
        http,
        &endpoint,
        "application/x-www-form-urlencoded",
        form(&params),
        basic,
    )
    .await
    .map_err(OAuthError::Token)?;
    if !(200..300).contains(&status) {
        let what = body
            .get("error_description")
            .or_else(|| body.get("error"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| body.to_string());
        return Err(OAuthError::Token(format!("HTTP {status}: {what}")));
    }
    serde_json::from_value(body)
        .map_err(|e| OAuthError::Token(format!("invalid token response: {e}")))
}

pub(super) fn store_tokens(state: &mut OAuthState, tokens: Tokens, scope: Option<&str>) {
    let mut tokens = tokens;
    if tokens.scope.is_none() {
        tokens.scope = scope.map(str::to_string);
    }
    state.tokens_expire_at = tokens
        .expires_in
        .map(|s| chrono::Utc::now().timestamp_millis() + (s as i64) * 1000);
    state.tokens = Some(tokens);
}
