//! The AWS default credential chain for Amazon Bedrock's SigV4 requests, without the AWS SDK:
//! the small STS, SSO portal, container and instance-metadata calls are made on our own
//! reqwest client ([`resolve_chain`]).
//!
//! Order (the JavaScript SDK v3 `defaultProvider` of `@aws-sdk/credential-provider-node`
//! 3.972, which upstream pi 1.6 uses; read from its `dist-cjs`, facts only). The environment keys
//! (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`) come first and are handled by the caller
//! ([`super::bedrock_converse_stream::BedrockAuth::resolve_chain`]); upstream passes them to the
//! client explicitly, so they win even when `AWS_PROFILE` is set. Then:
//!
//! 1. The selected profile (`AWS_PROFILE`, else `default`) of `~/.aws/config` and
//!    `~/.aws/credentials` (merged; the credentials file wins key by key), resolved in the
//!    SDK's `fromIni` order:
//!    1. assume-role: `role_arn` with `source_profile` (resolved recursively; static keys of a
//!       source profile are used as they are) or `credential_source` (`Environment`,
//!       `EcsContainer`, `Ec2InstanceMetadata`): STS `AssumeRole`, signed with the source keys;
//!    2. static keys (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`);
//!    3. web identity: `web_identity_token_file` with `role_arn`: STS
//!       `AssumeRoleWithWebIdentity` (unsigned);
//!    4. `credential_process`: run through `sh -c`, its stdout JSON (`Version` 1);
//!    5. SSO: `sso_session` (with its `[sso-session <name>]` section) or the legacy
//!       `sso_start_url`/`sso_region`, plus `sso_account_id`/`sso_role_name`: the portal's
//!       `GetRoleCredentials` with the token cached by `aws sso login` in
//!       `~/.aws/sso/cache/<sha1 of the session name or start URL>.json`. An `sso_session`
//!       token within five minutes of its `expiresAt` is refreshed (the SDK's `fromSso` of
//!       `@aws-sdk/token-providers`): SSO OIDC `CreateToken` with the `refresh_token` grant
//!       and the file's `clientId`/`clientSecret`/`refreshToken`, the new `accessToken`,
//!       `expiresAt` and `refreshToken` written back into the file (2-space JSON, other keys
//!       kept); a failed refresh keeps the old token while it lasts, else the error says to
//!       run `aws sso login`. Legacy (`sso_start_url`) tokens are not refreshed.
//!
//!    A profile that is absent, or has none of these, passes on to the next link; one that is
//!    configured but fails ends the chain with an error naming the profile.
//! 2. Web identity from the environment: `AWS_WEB_IDENTITY_TOKEN_FILE` with `AWS_ROLE_ARN`
//!    (`AWS_ROLE_SESSION_NAME`).
//! 3. Container credentials: `AWS_CONTAINER_CREDENTIALS_FULL_URI`, or
//!    `http://169.254.170.2` + `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, with
//!    `Authorization` from `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` or
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
//! 4. EC2 instance metadata (IMDSv2: `PUT /latest/api/token`, then the role name and its
//!    credentials under `/latest/meta-data/iam/security-credentials/`), at
//!    `AWS_EC2_METADATA_SERVICE_ENDPOINT` (default `http://169.254.169.254`), unless
//!    `AWS_EC2_METADATA_DISABLED` is set to anything but `false`. Any failure here means
//!    "no credentials".
//!
//! Endpoints: `AWS_ENDPOINT_URL_STS` / `AWS_ENDPOINT_URL_SSO` / `AWS_ENDPOINT_URL_SSO_OIDC`,
//! else `AWS_ENDPOINT_URL`, else `https://sts.<region>.amazonaws.com` (region: the profile's
//! `region`, `AWS_REGION`, `AWS_DEFAULT_REGION`, `us-east-1`),
//! `https://portal.sso.<sso_region>.amazonaws.com` and `https://oidc.<sso_region>.amazonaws.com`.
//!
//! Temporary credentials (those with an expiration) are cached in-process per source until
//! five minutes before they expire (the SDK's `credentialsTreatedAsExpired`), then fetched
//! anew.
//!
//! MFA: an assume-role profile with `mfa_serial` is an error naming the profile, as upstream:
//! the SDK asks an `mfaCodeProvider` callback for the code, and pi 1.6 passes none, in RPC or
//! any other mode.
//!
//! Not done: `login_session` profiles, IMDSv1 fallback.

use super::bedrock_converse_stream::{AwsEnv, AwsKeys};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why the chain found no credentials, or which configured source failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AwsCredentialsError {
    /// No link of the chain had credentials (the SDK's words).
    #[error("Could not load credentials from any providers")]
    NoCredentials,
    /// A configured profile could not give credentials.
    #[error("Could not load credentials for AWS profile [{profile}]: {message}")]
    Profile {
        /// The profile's name.
        profile: String,
        /// What failed.
        message: String,
    },
    /// A configured environment source (web identity, container) failed.
    #[error("Could not load AWS credentials from {source_name}: {message}")]
    Source {
        /// `web identity (AWS_WEB_IDENTITY_TOKEN_FILE)` or `the container endpoint`.
        source_name: &'static str,
        /// What failed.
        message: String,
    },
}

/// Credentials with their expiration (`None`: long-lived).
#[derive(Clone)]
struct Timed {
    keys: AwsKeys,
    expires: Option<SystemTime>,
}

/// Keys are refreshed this long before they expire.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);
/// Timeout of the container and instance-metadata calls (the SDK's is 1 s).
const METADATA_TIMEOUT: Duration = Duration::from_secs(1);
/// Timeout of the STS and SSO calls.
const SERVICE_TIMEOUT: Duration = Duration::from_secs(30);
/// An `sso-session` token is refreshed once it is this close to `expiresAt` (the SDK's
/// `EXPIRE_WINDOW_MS`).
const SSO_REFRESH_WINDOW: Duration = Duration::from_secs(300);
/// At most one refresh attempt per SSO session in this long (the SDK's throttle).
const SSO_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// When a refresh of each SSO session was last tried.
fn refresh_attempts() -> &'static Mutex<HashMap<String, std::time::Instant>> {
    static LAST: OnceLock<Mutex<HashMap<String, std::time::Instant>>> = OnceLock::new();
    LAST.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether a refresh of SSO session `id` was tried less than [`SSO_REFRESH_INTERVAL`] ago.
fn refresh_throttled(id: &str) -> bool {
    refresh_attempts().lock().is_ok_and(|last| {
        last.get(id)
            .is_some_and(|t| t.elapsed() < SSO_REFRESH_INTERVAL)
    })
}

fn record_refresh_attempt(id: &str) {
    if let Ok(mut last) = refresh_attempts().lock() {
        last.insert(id.to_owned(), std::time::Instant::now());
    }
}

/// The SSO token cache entry to read for a profile.
struct SsoToken<'a> {
    /// The profile's name (for the `aws sso login` hint).
    profile: &'a str,
    /// The `sso-session` name, or the legacy profile's start URL.
    id: &'a str,
    /// `sso_region`, where SSO OIDC is called.
    region: &'a str,
    /// `sso-session` tokens are refreshed; legacy ones are not.
    refreshable: bool,
}

/// A token from SSO OIDC `CreateToken`.
struct FreshToken {
    access: String,
    expires: SystemTime,
    refresh: Option<String>,
}

fn login_hint(profile: &str) -> String {
    format!("To refresh it, run `aws sso login --profile {profile}`.")
}

fn cache() -> &'static Mutex<HashMap<String, Timed>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Timed>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn cached(key: &str) -> Option<AwsKeys> {
    let guard = cache().lock().ok()?;
    let entry = guard.get(key)?;
    let expires = entry.expires?;
    (SystemTime::now() + REFRESH_MARGIN < expires).then(|| entry.keys.clone())
}

fn remember(key: String, timed: &Timed) {
    if timed.expires.is_none() {
        return;
    }
    if let Ok(mut guard) = cache().lock() {
        guard.insert(key, timed.clone());
    }
}

/// Run `fetch` unless `key` has unexpired cached credentials.
async fn with_cache<F>(key: String, fetch: F) -> Result<Timed, String>
where
    F: Future<Output = Result<Timed, String>>,
{
    if let Some(keys) = cached(&key) {
        return Ok(Timed {
            keys,
            expires: None,
        });
    }
    let timed = fetch.await?;
    remember(key, &timed);
    Ok(timed)
}

/// The credentials of the chain after the environment keys (see the module docs).
///
/// # Errors
/// [`AwsCredentialsError::NoCredentials`] when no source has any; `Profile`/`Source` when a
/// configured source fails (STS/SSO error answers, an expired SSO token, a failing
/// `credential_process`, a missing token file …).
pub async fn resolve_chain(
    env: &AwsEnv,
    http: &reqwest::Client,
) -> Result<AwsKeys, AwsCredentialsError> {
    let profiles = load_profiles(env);
    let name = env.profile_name().to_owned();
    let ctx = Ctx {
        env,
        http,
        profiles: &profiles,
    };
    if profiles.contains_key(&name) {
        match ctx.profile(&name, Vec::new()).await {
            Ok(Some(t)) => return Ok(t.keys),
            Ok(None) => {}
            Err(message) => {
                return Err(AwsCredentialsError::Profile {
                    profile: name,
                    message,
                })
            }
        }
    }
    if let (Some(file), Some(role)) = (
        env.get("AWS_WEB_IDENTITY_TOKEN_FILE"),
        env.get("AWS_ROLE_ARN"),
    ) {
        let session = env.get("AWS_ROLE_SESSION_NAME");
        let region = env.configured_region().map(str::to_owned);
        return ctx
            .web_identity(file, role, session, region.as_deref())
            .await
            .map(|t| t.keys)
            .map_err(|message| AwsCredentialsError::Source {
                source_name: "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)",
                message,
            });
    }
    if container_configured(env) {
        return ctx.container().await.map(|t| t.keys).map_err(|message| {
            AwsCredentialsError::Source {
                source_name: "the container endpoint",
                message,
            }
        });
    }
    if imds_disabled(env) {
        return Err(AwsCredentialsError::NoCredentials);
    }
    ctx.imds()
        .await
        .map(|t| t.keys)
        .map_err(|_| AwsCredentialsError::NoCredentials)
}

fn container_configured(env: &AwsEnv) -> bool {
    env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some()
        || env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
}

fn imds_disabled(env: &AwsEnv) -> bool {
    env.get("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| !v.eq_ignore_ascii_case("false"))
}

type Section = HashMap<String, String>;

/// Profiles of the two shared files by name: `[name]` of the credentials file over
/// `[profile name]` (or `[default]`) of the config file, key by key; `sso-session <name>`
/// sections of the config file are kept under that full title.
fn load_profiles(env: &AwsEnv) -> HashMap<String, Section> {
    let mut out: HashMap<String, Section> = HashMap::new();
    let read = |var: &str, default: &str| {
        env.shared_file(var, default)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    for (title, section) in ini_sections(&read("AWS_CONFIG_FILE", "config")) {
        let name = if title == "default" {
            Some("default".to_owned())
        } else if let Some(n) = title.strip_prefix("profile ") {
            Some(n.trim().to_owned())
        } else if title.starts_with("sso-session ") {
            Some(title.clone())
        } else {
            None
        };
        if let Some(name) = name {
            out.entry(name).or_default().extend(section);
        }
    }
    for (title, section) in ini_sections(&read("AWS_SHARED_CREDENTIALS_FILE", "credentials")) {
        out.entry(title).or_default().extend(section);
    }
    out
}

/// Every `[title]` section of an AWS shared file with its `key = value` pairs (keys
/// lower-cased, `#`/`;` comment lines and indented sub-settings skipped).
fn ini_sections(text: &str) -> Vec<(String, Section)> {
    let mut out: Vec<(String, Section)> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(title) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.push((title.trim().to_owned(), Section::new()));
            continue;
        }
        if raw.starts_with(' ') || raw.starts_with('\t') {
            continue;
        }
        if let (Some((_, map)), Some((k, v))) = (out.last_mut(), line.split_once('=')) {
            map.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    out
}

struct Ctx<'a> {
    env: &'a AwsEnv,
    http: &'a reqwest::Client,
    profiles: &'a HashMap<String, Section>,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

fn non_empty<'s>(s: &'s Section, key: &str) -> Option<&'s str> {
    s.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

fn static_keys(s: &Section) -> Option<Timed> {
    Some(Timed {
        keys: AwsKeys {
            access_key_id: non_empty(s, "aws_access_key_id")?.to_owned(),
            secret_access_key: non_empty(s, "aws_secret_access_key")?.to_owned(),
            session_token: non_empty(s, "aws_session_token").map(str::to_owned),
        },
        expires: None,
    })
}

fn is_sso(s: &Section) -> bool {
    [
        "sso_start_url",
        "sso_account_id",
        "sso_session",
        "sso_region",
        "sso_role_name",
    ]
    .iter()
    .any(|k| s.contains_key(*k))
}

impl<'a> Ctx<'a> {
    /// The credentials of profile `name`; `visited` holds the source profiles followed so far
    /// (non-empty inside a `source_profile`). `Ok(None)`: the profile configures nothing.
    fn profile(
        &'a self,
        name: &'a str,
        visited: Vec<String>,
    ) -> BoxFuture<'a, Result<Option<Timed>, String>> {
        Box::pin(async move {
            let Some(data) = self.profiles.get(name) else {
                return Err(format!("source profile [{name}] was not found"));
            };
            let nested = !visited.is_empty();
            if nested {
                if let Some(t) = static_keys(data) {
                    return Ok(Some(t));
                }
            }
            let role_arn = non_empty(data, "role_arn");
            let source_profile = non_empty(data, "source_profile");
            let credential_source = non_empty(data, "credential_source");
            if nested && role_arn.is_none() && credential_source.is_some() {
                return self
                    .credential_source(credential_source, name)
                    .await
                    .map(Some);
            }
            if let Some(role_arn) = role_arn {
                if source_profile.is_some() != credential_source.is_some() {
                    return self
                        .assume_role(
                            name,
                            data,
                            role_arn,
                            source_profile,
                            credential_source,
                            visited,
                        )
                        .await
                        .map(Some);
                }
            }
            if let Some(t) = static_keys(data) {
                return Ok(Some(t));
            }
            if let (Some(file), Some(role)) = (non_empty(data, "web_identity_token_file"), role_arn)
            {
                let session = non_empty(data, "role_session_name");
                let region = non_empty(data, "region")
                    .or_else(|| self.env.configured_region())
                    .map(str::to_owned);
                return self
                    .web_identity(file, role, session, region.as_deref())
                    .await
                    .map(Some);
            }
            if let Some(command) = non_empty(data, "credential_process") {
                return self.process(command).await.map(Some);
            }
            if is_sso(data) {
                return self.sso(name, data).await.map(Some);
            }
            Ok(None)
        })
    }

    async fn credential_source(
        &self,
        source: Option<&str>,
        profile: &str,
    ) -> Result<Timed, String> {
        match source.unwrap_or("") {
            "Environment" => match (
                self.env.get("AWS_ACCESS_KEY_ID"),
                self.env.get("AWS_SECRET_ACCESS_KEY"),
            ) {
                (Some(id), Some(secret)) => Ok(Timed {
                    keys: AwsKeys {
                        access_key_id: id.to_owned(),
                        secret_access_key: secret.to_owned(),
                        session_token: self.env.get("AWS_SESSION_TOKEN").map(str::to_owned),
                    },
                    expires: None,
                }),
                _ => Err("credential_source Environment, but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set".to_owned()),
            },
            "EcsContainer" => self.container().await,
            "Ec2InstanceMetadata" => self.imds().await,
            other => Err(format!(
                "unsupported credential_source {other:?} in profile [{profile}] (expected EcsContainer, Ec2InstanceMetadata or Environment)"
            )),
        }
    }

    async fn assume_role(
        &'a self,
        name: &'a str,
        data: &'a Section,
        role_arn: &'a str,
        source_profile: Option<&'a str>,
        credential_source: Option<&'a str>,
        visited: Vec<String>,
    ) -> Result<Timed, String> {
        if let Some(serial) = non_empty(data, "mfa_serial") {
            // The SDK needs an MFA code callback here, and pi passes none (in any mode).
            return Err(format!(
                "the role {role_arn} requires multi-factor authentication (mfa_serial {serial}), but pi cannot ask for an MFA code; use credentials that need none (e.g. from `aws configure export-credentials` or a credential_process)"
            ));
        }
        let source = match source_profile {
            Some(src) => {
                if visited.iter().any(|v| v == src) {
                    return Err(format!(
                        "source profiles form a cycle: {} -> {src}",
                        visited.join(" -> ")
                    ));
                }
                let mut next = visited.clone();
                next.push(src.to_owned());
                match self.profile(src, next).await? {
                    Some(t) => t,
                    None => {
                        return Err(format!("source profile [{src}] has no credentials"));
                    }
                }
            }
            None => self.credential_source(credential_source, name).await?,
        };
        let region = non_empty(data, "region")
            .or_else(|| self.env.configured_region())
            .unwrap_or("us-east-1")
            .to_owned();
        let session = non_empty(data, "role_session_name")
            .map(str::to_owned)
            .unwrap_or_else(default_session_name);
        let duration = non_empty(data, "duration_seconds")
            .unwrap_or("3600")
            .to_owned();
        let key = format!(
            "assume-role\0{name}\0{role_arn}\0{}",
            source.keys.access_key_id
        );
        let mut params = vec![
            ("Action", "AssumeRole".to_owned()),
            ("Version", "2011-06-15".to_owned()),
            ("RoleArn", role_arn.to_owned()),
            ("RoleSessionName", session),
            ("DurationSeconds", duration),
        ];
        if let Some(id) = non_empty(data, "external_id") {
            params.push(("ExternalId", id.to_owned()));
        }
        with_cache(key, self.sts(&params, &region, Some(&source.keys)))
            .await
            .map_err(|e| format!("STS AssumeRole for {role_arn} failed: {e}"))
    }

    async fn web_identity(
        &self,
        file: &str,
        role_arn: &str,
        session: Option<&str>,
        region: Option<&str>,
    ) -> Result<Timed, String> {
        let key = format!("web-identity\0{file}\0{role_arn}");
        with_cache(key, async {
            let token = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read the web identity token file {file}: {e}"))?;
            let params = vec![
                ("Action", "AssumeRoleWithWebIdentity".to_owned()),
                ("Version", "2011-06-15".to_owned()),
                ("RoleArn", role_arn.to_owned()),
                (
                    "RoleSessionName",
                    session
                        .map(str::to_owned)
                        .unwrap_or_else(default_session_name),
                ),
                ("WebIdentityToken", token.trim().to_owned()),
            ];
            self.sts(&params, region.unwrap_or("us-east-1"), None)
                .await
                .map_err(|e| format!("STS AssumeRoleWithWebIdentity for {role_arn} failed: {e}"))
        })
        .await
    }

    /// One STS query-API call (POST, form body), SigV4-signed with `signer` when given; the
    /// `<Credentials>` of its XML answer.
    async fn sts(
        &self,
        params: &[(&str, String)],
        region: &str,
        signer: Option<&AwsKeys>,
    ) -> Result<Timed, String> {
        let endpoint = self
            .endpoint("AWS_ENDPOINT_URL_STS")
            .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
        let url = format!("{endpoint}/");
        let body = form_encode(params);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static(
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
        );
        if let Some(keys) = signer {
            super::bedrock_converse_stream::sign_sigv4(
                &mut headers,
                "POST",
                &url,
                body.as_bytes(),
                keys,
                region,
                "sts",
            )
            .map_err(|e| e.to_string())?;
        }
        let response = self
            .http
            .post(&url)
            .headers(headers)
            .body(body)
            .timeout(SERVICE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let code = xml_text(&text, "Code").unwrap_or_default();
            let message = xml_text(&text, "Message").unwrap_or_else(|| text.clone());
            return Err(format!("HTTP {}: {code}: {message}", status.as_u16()));
        }
        let creds = xml_text(&text, "Credentials")
            .ok_or_else(|| "the answer has no Credentials".to_owned())?;
        let field = |name: &str| {
            xml_text(&creds, name).ok_or_else(|| format!("the answer's Credentials lack {name}"))
        };
        Ok(Timed {
            keys: AwsKeys {
                access_key_id: field("AccessKeyId")?,
                secret_access_key: field("SecretAccessKey")?,
                session_token: Some(field("SessionToken")?),
            },
            expires: xml_text(&creds, "Expiration").and_then(|e| parse_iso8601(&e)),
        })
    }

    async fn process(&self, command: &str) -> Result<Timed, String> {
        with_cache(format!("process\0{command}"), self.run_process(command)).await
    }

    async fn run_process(&self, command: &str) -> Result<Timed, String> {
        let output = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("credential_process could not be started: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "credential_process exited with {}: {}",
                output.status,
                stderr.trim()
            ));
        }
        let v: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("credential_process printed no JSON: {e}"))?;
        if v.get("Version").and_then(Value::as_u64) != Some(1) {
            return Err("credential_process output must have \"Version\": 1".to_owned());
        }
        json_keys(&v, "SessionToken").map_err(|m| format!("credential_process output {m}"))
    }

    async fn sso(&self, name: &str, data: &Section) -> Result<Timed, String> {
        let (start_url, region, token_id, session) = match non_empty(data, "sso_session") {
            Some(session) => {
                let title = format!("sso-session {session}");
                let s = self
                    .profiles
                    .get(&title)
                    .ok_or_else(|| format!("the [{title}] section was not found"))?;
                let start = non_empty(s, "sso_start_url")
                    .ok_or_else(|| format!("[{title}] has no sso_start_url"))?;
                let region = non_empty(s, "sso_region")
                    .ok_or_else(|| format!("[{title}] has no sso_region"))?;
                (
                    start.to_owned(),
                    region.to_owned(),
                    session.to_owned(),
                    true,
                )
            }
            None => {
                let start = non_empty(data, "sso_start_url");
                let region = non_empty(data, "sso_region");
                match (start, region) {
                    (Some(s), Some(r)) => (s.to_owned(), r.to_owned(), s.to_owned(), false),
                    _ => {
                        return Err(
                            "SSO needs sso_session, or sso_start_url and sso_region".to_owned()
                        )
                    }
                }
            }
        };
        let (Some(account), Some(role)) = (
            non_empty(data, "sso_account_id"),
            non_empty(data, "sso_role_name"),
        ) else {
            return Err("SSO needs sso_account_id and sso_role_name".to_owned());
        };
        let key = format!("sso\0{start_url}\0{account}\0{role}");
        with_cache(key, async {
            let token = SsoToken {
                profile: name,
                id: &token_id,
                region: &region,
                refreshable: session,
            };
            let access = self.sso_access_token(&token).await?;
            self.role_credentials(name, &region, account, role, &access)
                .await
        })
        .await
    }

    /// The SSO portal's `GetRoleCredentials` for `account`/`role` with the bearer `access`.
    async fn role_credentials(
        &self,
        name: &str,
        region: &str,
        account: &str,
        role: &str,
        access: &str,
    ) -> Result<Timed, String> {
        let endpoint = self
            .endpoint("AWS_ENDPOINT_URL_SSO")
            .unwrap_or_else(|| format!("https://portal.sso.{region}.amazonaws.com"));
        let url = format!(
            "{endpoint}/federation/credentials?account_id={}&role_name={}",
            percent(account),
            percent(role)
        );
        let response = self
            .http
            .get(&url)
            .header("x-amz-sso_bearer_token", access)
            .timeout(SERVICE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("cannot reach the SSO portal {endpoint}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let message = v
                .get("message")
                .or_else(|| v.get("Message"))
                .and_then(Value::as_str)
                .unwrap_or(&text);
            let hint = if status.as_u16() == 401 {
                format!(" {}", login_hint(name))
            } else {
                String::new()
            };
            return Err(format!(
                "SSO GetRoleCredentials failed: HTTP {}: {message}{hint}",
                status.as_u16()
            ));
        }
        let rc = v
            .get("roleCredentials")
            .ok_or_else(|| "SSO returned no roleCredentials".to_owned())?;
        let get = |k: &str| {
            rc.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| format!("SSO returned invalid temporary credentials (no {k})"))
        };
        Ok(Timed {
            keys: AwsKeys {
                access_key_id: get("accessKeyId")?,
                secret_access_key: get("secretAccessKey")?,
                session_token: Some(get("sessionToken")?),
            },
            expires: rc
                .get("expiration")
                .and_then(Value::as_u64)
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        })
    }

    /// The access token of the SSO token cache file `aws sso login` wrote for `token.id`.
    ///
    /// A legacy profile's token (`refreshable` false) is used until it expires. An
    /// `sso-session` token within [`SSO_REFRESH_WINDOW`] of `expiresAt` is refreshed through
    /// SSO OIDC `CreateToken` with its `clientId`, `clientSecret` and `refreshToken`, and the
    /// new token is written back to the file; when that fails the old token is used while it
    /// lasts (the SDK's `fromSso`). A refresh is tried at most once per
    /// [`SSO_REFRESH_INTERVAL`] per session; a client registration past its
    /// `registrationExpiresAt` is not tried (the SDK sends it and is refused).
    async fn sso_access_token(&self, token: &SsoToken<'_>) -> Result<String, String> {
        let login = login_hint(token.profile);
        let path = self
            .sso_cache_file(token.id)
            .ok_or_else(|| format!("no SSO token cache (HOME is not set). {login}"))?;
        let text = std::fs::read_to_string(&path).map_err(|_| {
            format!(
                "the SSO session has no cached token ({}). {login}",
                path.display()
            )
        })?;
        let Ok(Value::Object(cached)) = serde_json::from_str::<Value>(&text) else {
            return Err(format!(
                "the cached SSO token {} is not a JSON object. {login}",
                path.display()
            ));
        };
        let field = |k: &str| cached.get(k).and_then(Value::as_str);
        let access = field("accessToken")
            .ok_or_else(|| format!("the cached SSO token has no accessToken. {login}"))?
            .to_owned();
        let expires = field("expiresAt").and_then(parse_iso8601);
        let now = SystemTime::now();
        let expired = || format!("the SSO session has expired. {login}");
        let Some(expires) = expires else {
            return Err(expired());
        };
        if !token.refreshable {
            return if expires > now {
                Ok(access)
            } else {
                Err(expired())
            };
        }
        if expires > now + SSO_REFRESH_WINDOW {
            return Ok(access);
        }
        // Inside the window: refresh, or keep the old token while it lasts.
        let keep = |why: String| {
            if expires > now {
                tracing::debug!("SSO token refresh failed ({why}); using the cached token");
                Ok(access.clone())
            } else {
                Err(format!(
                    "the SSO session has expired and could not be refreshed ({why}). {login}"
                ))
            }
        };
        if refresh_throttled(token.id) {
            return keep("a refresh was tried less than 30 s ago".to_owned());
        }
        let mut secrets = Vec::with_capacity(3);
        for k in ["clientId", "clientSecret", "refreshToken"] {
            match field(k) {
                Some(v) => secrets.push(v),
                None => {
                    let when = if expires > now {
                        "expires within five minutes"
                    } else {
                        "has expired"
                    };
                    return Err(format!(
                        "the SSO session {when}, and its cached token has no {k} to refresh it with. {login}"
                    ));
                }
            }
        }
        record_refresh_attempt(token.id);
        if let Some(reg) = field("registrationExpiresAt").and_then(parse_iso8601) {
            if reg <= now {
                return keep("the SSO client registration has expired".to_owned());
            }
        }
        let fresh = match self
            .create_token(token.region, secrets[0], secrets[1], secrets[2])
            .await
        {
            Ok(f) => f,
            Err(why) => return keep(why),
        };
        let mut written = cached.clone();
        written.insert("accessToken".into(), Value::String(fresh.access.clone()));
        written.insert(
            "expiresAt".into(),
            Value::String(iso8601_millis(fresh.expires)),
        );
        match fresh.refresh {
            Some(r) => written.insert("refreshToken".into(), Value::String(r)),
            None => written.remove("refreshToken"),
        };
        let pretty = serde_json::to_string_pretty(&Value::Object(written)).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, pretty) {
            tracing::debug!(
                "could not write the refreshed SSO token to {}: {e}",
                path.display()
            );
        }
        Ok(fresh.access)
    }

    /// SSO OIDC `CreateToken` with the `refresh_token` grant (`POST {endpoint}/token`, JSON,
    /// unsigned); endpoint `AWS_ENDPOINT_URL_SSO_OIDC`, `AWS_ENDPOINT_URL`, else
    /// `https://oidc.<sso_region>.amazonaws.com`.
    async fn create_token(
        &self,
        region: &str,
        client_id: &str,
        client_secret: &str,
        refresh_token: &str,
    ) -> Result<FreshToken, String> {
        let endpoint = self
            .endpoint("AWS_ENDPOINT_URL_SSO_OIDC")
            .unwrap_or_else(|| format!("https://oidc.{region}.amazonaws.com"));
        let body = serde_json::json!({
            "clientId": client_id,
            "clientSecret": client_secret,
            "grantType": "refresh_token",
            "refreshToken": refresh_token,
        });
        let response = self
            .http
            .post(format!("{endpoint}/token"))
            .json(&body)
            .timeout(SERVICE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("cannot reach SSO OIDC {endpoint}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let field = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        if !status.is_success() {
            let code = field("error").unwrap_or("");
            let message = field("error_description")
                .or_else(|| field("message"))
                .unwrap_or(text.trim());
            return Err(format!(
                "SSO OIDC CreateToken answered HTTP {}: {code}: {message}",
                status.as_u16()
            ));
        }
        let access = field("accessToken").ok_or("SSO OIDC CreateToken returned no accessToken")?;
        let expires_in = v
            .get("expiresIn")
            .and_then(Value::as_u64)
            .ok_or("SSO OIDC CreateToken returned no expiresIn")?;
        Ok(FreshToken {
            access: access.to_owned(),
            expires: SystemTime::now() + Duration::from_secs(expires_in),
            refresh: field("refreshToken").map(str::to_owned),
        })
    }

    /// `var`, else `AWS_ENDPOINT_URL`, without a trailing `/`.
    fn endpoint(&self, var: &str) -> Option<String> {
        self.env
            .get(var)
            .or_else(|| self.env.get("AWS_ENDPOINT_URL"))
            .map(|e| e.trim_end_matches('/').to_owned())
    }

    fn sso_cache_file(&self, id: &str) -> Option<PathBuf> {
        let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, id.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Some(
            self.env
                .home()?
                .join(".aws")
                .join("sso")
                .join("cache")
                .join(format!("{hex}.json")),
        )
    }

    async fn container(&self) -> Result<Timed, String> {
        let url = match (
            self.env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
            self.env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        ) {
            (Some(rel), _) => format!("http://169.254.170.2{rel}"),
            (None, Some(full)) => {
                check_container_uri(full)?;
                full.to_owned()
            }
            (None, None) => {
                return Err(
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI is not set".to_owned(),
                )
            }
        };
        with_cache(format!("container\0{url}"), self.fetch_container(&url)).await
    }

    async fn fetch_container(&self, url: &str) -> Result<Timed, String> {
        let auth = match self.env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .map_err(|e| {
                        format!("cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {file}: {e}")
                    })?
                    .trim()
                    .to_owned(),
            ),
            None => self
                .env
                .get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
                .map(str::to_owned),
        };
        let mut request = self.http.get(url).timeout(METADATA_TIMEOUT);
        if let Some(auth) = auth {
            request = request.header(reqwest::header::AUTHORIZATION, auth);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(format!(
                "{url} answered HTTP {}: {}",
                status.as_u16(),
                text.trim()
            ));
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{url} answered no JSON: {e}"))?;
        json_keys(&v, "Token").map_err(|m| format!("{url}: the answer {m}"))
    }

    async fn imds(&self) -> Result<Timed, String> {
        let base = self
            .env
            .get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .unwrap_or("http://169.254.169.254")
            .trim_end_matches('/')
            .to_owned();
        with_cache(format!("imds\0{base}"), self.fetch_imds(&base)).await
    }

    async fn fetch_imds(&self, base: &str) -> Result<Timed, String> {
        let send = |r: reqwest::RequestBuilder| async move {
            let response = r
                .timeout(METADATA_TIMEOUT)
                .send()
                .await
                .map_err(|e| format!("instance metadata: {e}"))?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if status.is_success() {
                Ok(text)
            } else {
                Err(format!(
                    "instance metadata answered HTTP {}",
                    status.as_u16()
                ))
            }
        };
        let token = send(
            self.http
                .put(format!("{base}/latest/api/token"))
                .header("x-aws-ec2-metadata-token-ttl-seconds", "21600"),
        )
        .await?;
        let token = token.trim().to_owned();
        let prefix = format!("{base}/latest/meta-data/iam/security-credentials/");
        let roles = send(
            self.http
                .get(&prefix)
                .header("x-aws-ec2-metadata-token", &token),
        )
        .await?;
        let role = roles
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .ok_or_else(|| "instance metadata lists no role".to_owned())?
            .to_owned();
        let text = send(
            self.http
                .get(format!("{prefix}{}", percent(&role)))
                .header("x-aws-ec2-metadata-token", &token),
        )
        .await?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("instance metadata: {e}"))?;
        json_keys(&v, "Token").map_err(|m| format!("instance metadata {m}"))
    }
}

/// The SDK accepts a full container URI over HTTPS, or over HTTP only to a loopback address
/// or the ECS/EKS link-local hosts.
fn check_container_uri(uri: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(uri).map_err(|e| format!("{uri} is not a URL: {e}"))?;
    if parsed.scheme() == "https" {
        return Ok(());
    }
    let host = parsed.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let allowed = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            ip.is_loopback()
                || ip.octets() == [169, 254, 170, 2]
                || ip.octets() == [169, 254, 170, 23]
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23]
        }
        Err(_) => host == "localhost",
    };
    if parsed.scheme() == "http" && allowed {
        Ok(())
    } else {
        Err(format!(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI {uri} must use HTTPS, or HTTP to a loopback or the ECS/EKS container host"
        ))
    }
}

/// `AccessKeyId`, `SecretAccessKey`, the session token under `token_key` and `Expiration`
/// (ISO 8601) of a JSON credentials answer.
fn json_keys(v: &Value, token_key: &str) -> Result<Timed, String> {
    let get = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Ok(Timed {
        keys: AwsKeys {
            access_key_id: get("AccessKeyId").ok_or("lacks AccessKeyId")?,
            secret_access_key: get("SecretAccessKey").ok_or("lacks SecretAccessKey")?,
            session_token: get(token_key),
        },
        expires: get("Expiration").and_then(|e| parse_iso8601(&e)),
    })
}

fn default_session_name() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("pi-{ms}")
}

/// RFC 3986 percent-encoding of everything but the unreserved characters (the same rule as a
/// Bedrock path label).
use super::bedrock_converse_stream::encode_label as percent;

/// `application/x-www-form-urlencoded` body of an STS query.
fn form_encode(params: &[(&str, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())))
        .finish()
}

/// The text inside the first `<tag>…</tag>` of `xml`, entities decoded.
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// An RFC 3339 time (`YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`) of an STS/SSO/container answer
/// or the SSO token cache; `None` when malformed.
fn parse_iso8601(s: &str) -> Option<SystemTime> {
    use aws_smithy_types::date_time::{DateTime, Format};
    let t = DateTime::from_str(s.trim(), Format::DateTimeWithOffset).ok()?;
    SystemTime::try_from(t).ok()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, the form the SDK writes `expiresAt` in (JavaScript's
/// `toISOString`).
fn iso8601_millis(t: SystemTime) -> String {
    use aws_smithy_types::date_time::{DateTime, Format};
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let whole = DateTime::from_secs(i64::try_from(since.as_secs()).unwrap_or(0))
        .fmt(Format::DateTime)
        .unwrap_or_default();
    format!(
        "{}.{:03}Z",
        whole.trim_end_matches('Z'),
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_and_xml() {
        assert_eq!(
            parse_iso8601("1970-01-02T00:00:01Z"),
            Some(UNIX_EPOCH + Duration::from_secs(86_401))
        );
        assert_eq!(
            parse_iso8601("2001-09-09T01:46:40.123+00:00"),
            Some(UNIX_EPOCH + Duration::from_millis(1_000_000_000_123))
        );
        assert_eq!(
            parse_iso8601("2001-09-09T03:46:40+02:00"),
            Some(UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        );
        assert_eq!(parse_iso8601("yesterday"), None);
        assert_eq!(
            iso8601_millis(UNIX_EPOCH + Duration::from_millis(1_000_000_000_007)),
            "2001-09-09T01:46:40.007Z"
        );
        let xml = "<R><Credentials><AccessKeyId>A&amp;B</AccessKeyId></Credentials></R>";
        assert_eq!(xml_text(xml, "AccessKeyId").as_deref(), Some("A&B"));
        assert_eq!(
            form_encode(&[("RoleArn", "arn:aws:iam::1:role/x y".into())]),
            "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx+y"
        );
    }

    #[test]
    fn shared_files_merge_and_container_uris() {
        let s = ini_sections(
            "[profile a]\nrole_arn = r\ns3 =\n  max = 1\n[sso-session s]\nsso_region = x\n",
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].1.get("role_arn").map(String::as_str), Some("r"));
        assert!(!s[0].1.contains_key("max"));
        assert!(check_container_uri("http://127.0.0.1:9/creds").is_ok());
        assert!(check_container_uri("https://example.com/creds").is_ok());
        assert!(check_container_uri("http://example.com/creds").is_err());
    }
}
