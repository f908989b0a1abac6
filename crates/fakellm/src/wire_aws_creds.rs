//! A fake of the AWS credential endpoints the Bedrock adapter's credential chain calls, on one
//! loopback port, each under its own path prefix ([`AwsCredsServer`]):
//!
//! * `/sts/` — STS query API (POST, form body): `Action=AssumeRole` (must be SigV4-signed:
//!   `Authorization: AWS4-HMAC-SHA256 …`, else HTTP 403 `InvalidClientTokenId`) answers access
//!   key [`STS_ROLE_KEY`]; `Action=AssumeRoleWithWebIdentity` (unsigned, `WebIdentityToken`
//!   required) answers [`WEB_IDENTITY_KEY`]. A `RoleArn` containing `denied` answers HTTP 403
//!   `AccessDenied`. Answers are STS's XML (`<…Result><Credentials><AccessKeyId>…`).
//! * `/sso/federation/credentials?account_id=…&role_name=…` — SSO portal
//!   `GetRoleCredentials`: `x-amz-sso_bearer_token` must be [`SSO_ACCESS_TOKEN`] (else HTTP 401);
//!   answers `{"roleCredentials": {"accessKeyId": SSO_KEY, …, "expiration": <epoch ms>}}`.
//! * `/oidc/token` — SSO OIDC `CreateToken` (POST, JSON): `grantType` `refresh_token` with
//!   [`SSO_CLIENT_ID`], [`SSO_CLIENT_SECRET`] and [`SSO_REFRESH_TOKEN`] answers
//!   `{"accessToken": SSO_REFRESHED_ACCESS_TOKEN, "expiresIn": 28800, "refreshToken":
//!   SSO_NEW_REFRESH_TOKEN, "tokenType": "Bearer"}`; anything else HTTP 400
//!   `{"error": "invalid_grant", …}` (`x-amzn-errortype: InvalidGrantException`). The portal
//!   accepts the refreshed token too.
//! * `/ecs/creds` — container credentials: `Authorization` must be [`ECS_AUTH_TOKEN`] (else
//!   HTTP 401); answers `{"AccessKeyId": ECS_KEY, "SecretAccessKey", "Token", "Expiration"}`.
//! * `/imds/latest/api/token` (PUT, IMDSv2 token [`IMDS_TOKEN`]) and
//!   `/imds/latest/meta-data/iam/security-credentials/` (role `pi-role`) and `…/pi-role`
//!   (JSON with [`IMDS_KEY`]); the GETs need `x-aws-ec2-metadata-token`.
//!
//! Every temporary credential's session token is `token-<access key>` and it expires
//! `expires_in` seconds after the answer ([`AwsCredsServer::spawn`]). Requests are recorded.
//! Shapes follow the STS, IAM Identity Center portal and OIDC, ECS task-role and EC2
//! instance-metadata documentation.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Access key of `AssumeRole` answers.
pub const STS_ROLE_KEY: &str = "ASIAFAKESTSROLE";
/// Access key of `AssumeRoleWithWebIdentity` answers.
pub const WEB_IDENTITY_KEY: &str = "ASIAFAKEWEBIDENTITY";
/// Access key of SSO `GetRoleCredentials` answers.
pub const SSO_KEY: &str = "ASIAFAKESSO";
/// Access key of container answers.
pub const ECS_KEY: &str = "ASIAFAKEECS";
/// Access key of instance-metadata answers.
pub const IMDS_KEY: &str = "ASIAFAKEIMDS";
/// The SSO access token the portal accepts.
pub const SSO_ACCESS_TOKEN: &str = "fake-sso-access-token";
/// The SSO access token [`SSO_REFRESH_TOKEN`] is exchanged for.
pub const SSO_REFRESHED_ACCESS_TOKEN: &str = "fake-sso-refreshed-access-token";
/// The registered SSO OIDC client's id that `CreateToken` accepts.
pub const SSO_CLIENT_ID: &str = "fake-sso-client-id";
/// The registered SSO OIDC client's secret that `CreateToken` accepts.
pub const SSO_CLIENT_SECRET: &str = "fake-sso-client-secret";
/// The refresh token `CreateToken` accepts.
pub const SSO_REFRESH_TOKEN: &str = "fake-sso-refresh-token";
/// The refresh token `CreateToken` hands out in exchange.
pub const SSO_NEW_REFRESH_TOKEN: &str = "fake-sso-new-refresh-token";
/// The container authorization token accepted.
pub const ECS_AUTH_TOKEN: &str = "fake-ecs-auth-token";
/// The IMDSv2 session token handed out and required.
pub const IMDS_TOKEN: &str = "fake-imds-token";

/// One request the credential fake received.
#[derive(Clone, Debug)]
pub struct AwsCredsRequest {
    /// HTTP method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body as text.
    pub body: String,
}

struct Shared {
    expires_in: i64,
    requests: Mutex<Vec<AwsCredsRequest>>,
}

/// The running fake; stops when dropped.
pub struct AwsCredsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AwsCredsServer {
    /// Serve on a free loopback port; credentials expire `expires_in` seconds after each
    /// answer (may be small or negative to exercise refreshing).
    ///
    /// # Errors
    /// If no loopback port can be bound or the runtime cannot start.
    pub fn spawn(expires_in: i64) -> std::io::Result<AwsCredsServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            expires_in,
            requests: Mutex::new(Vec::new()),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name("fake-aws-creds".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = rx => {}
                    }
                });
            })?;
        Ok(AwsCredsServer {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>`; the endpoints are this plus `/sts`, `/sso`, `/oidc`,
    /// `/ecs/creds`, `/imds`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<AwsCredsRequest> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }
}

impl Drop for AwsCredsServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch.
fn iso8601(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(0))
        .unwrap_or(0)
}

fn form(body: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

fn xml(status: StatusCode, text: String) -> Response {
    (status, [("content-type", "text/xml")], text).into_response()
}

fn json(status: StatusCode, v: serde_json::Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn sts_error(code: &str, message: &str) -> Response {
    xml(
        StatusCode::FORBIDDEN,
        format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>\
             <Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
             <RequestId>fake</RequestId></ErrorResponse>"
        ),
    )
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    let header_map: BTreeMap<String, String> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    if let Ok(mut r) = shared.requests.lock() {
        r.push(AwsCredsRequest {
            method: method.to_string(),
            path,
            headers: header_map.clone(),
            body: body.clone(),
        });
    }
    let expires = now_secs() + shared.expires_in;
    let header = |k: &str| header_map.get(k).map(String::as_str);
    let only = uri.path();
    if only.starts_with("/sts") && method == Method::POST {
        let params = form(&body);
        let action = params.get("Action").map(String::as_str).unwrap_or("");
        let role = params.get("RoleArn").cloned().unwrap_or_default();
        if role.contains("denied") {
            return sts_error(
                "AccessDenied",
                &format!("User is not authorized to perform: sts:{action} on resource: {role}"),
            );
        }
        let key = match action {
            "AssumeRole" => {
                if !header("authorization").is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 ")) {
                    return sts_error(
                        "InvalidClientTokenId",
                        "The security token included in the request is invalid.",
                    );
                }
                STS_ROLE_KEY
            }
            "AssumeRoleWithWebIdentity" => {
                if params.get("WebIdentityToken").is_none_or(String::is_empty) {
                    return sts_error("InvalidIdentityToken", "No web identity token");
                }
                WEB_IDENTITY_KEY
            }
            _ => return sts_error("InvalidAction", "Unknown action"),
        };
        return xml(
            StatusCode::OK,
            format!(
                "<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
                 <{action}Result><Credentials><AccessKeyId>{key}</AccessKeyId>\
                 <SecretAccessKey>secret-{key}</SecretAccessKey>\
                 <SessionToken>token-{key}</SessionToken>\
                 <Expiration>{}</Expiration></Credentials></{action}Result>\
                 </{action}Response>",
                iso8601(expires)
            ),
        );
    }
    if only == "/oidc/token" && method == Method::POST {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
        if field("grantType") != Some("refresh_token")
            || field("clientId") != Some(SSO_CLIENT_ID)
            || field("clientSecret") != Some(SSO_CLIENT_SECRET)
            || field("refreshToken") != Some(SSO_REFRESH_TOKEN)
        {
            return (
                StatusCode::BAD_REQUEST,
                [
                    ("content-type", "application/json"),
                    ("x-amzn-errortype", "InvalidGrantException"),
                ],
                serde_json::json!({"error": "invalid_grant",
                    "error_description": "Invalid refresh token provided"})
                .to_string(),
            )
                .into_response();
        }
        return json(
            StatusCode::OK,
            serde_json::json!({"accessToken": SSO_REFRESHED_ACCESS_TOKEN, "expiresIn": 28800,
                "refreshToken": SSO_NEW_REFRESH_TOKEN, "tokenType": "Bearer"}),
        );
    }
    if only == "/sso/federation/credentials" {
        let bearer = header("x-amz-sso_bearer_token");
        if bearer != Some(SSO_ACCESS_TOKEN) && bearer != Some(SSO_REFRESHED_ACCESS_TOKEN) {
            return json(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({"message": "Session token not found or invalid"}),
            );
        }
        return json(
            StatusCode::OK,
            serde_json::json!({"roleCredentials": {
                "accessKeyId": SSO_KEY, "secretAccessKey": format!("secret-{SSO_KEY}"),
                "sessionToken": format!("token-{SSO_KEY}"), "expiration": expires * 1000}}),
        );
    }
    let creds = |key: &str| {
        serde_json::json!({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": key,
            "SecretAccessKey": format!("secret-{key}"), "Token": format!("token-{key}"),
            "Expiration": iso8601(expires)})
    };
    if only == "/ecs/creds" {
        if header("authorization") != Some(ECS_AUTH_TOKEN) {
            return json(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({"message": "bad token"}),
            );
        }
        return json(StatusCode::OK, creds(ECS_KEY));
    }
    if only == "/imds/latest/api/token" && method == Method::PUT {
        return (StatusCode::OK, IMDS_TOKEN).into_response();
    }
    if let Some(rest) = only.strip_prefix("/imds/latest/meta-data/iam/security-credentials/") {
        if header("x-aws-ec2-metadata-token") != Some(IMDS_TOKEN) {
            return (StatusCode::UNAUTHORIZED, "").into_response();
        }
        return match rest {
            "" => (StatusCode::OK, "pi-role\n").into_response(),
            "pi-role" => json(StatusCode::OK, creds(IMDS_KEY)),
            _ => (StatusCode::NOT_FOUND, "").into_response(),
        };
    }
    (StatusCode::NOT_FOUND, "").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_forms() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_000_000_000), "2001-09-09T01:46:40Z");
        let f = form("Action=AssumeRole&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx+y");
        assert_eq!(f["RoleArn"], "arn:aws:iam::1:role/x y");
    }
}
