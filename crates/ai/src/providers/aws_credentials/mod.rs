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

mod metadata;
mod profiles;
mod sso;
mod wire;

use super::bedrock_converse_stream::{AwsEnv, AwsKeys};
use profiles::{load_profiles, Section};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

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

struct Ctx<'a> {
    env: &'a AwsEnv,
    http: &'a reqwest::Client,
    profiles: &'a HashMap<String, Section>,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'a> Ctx<'a> {
    /// `var`, else `AWS_ENDPOINT_URL`, without a trailing `/`.
    fn endpoint(&self, var: &str) -> Option<String> {
        self.env
            .get(var)
            .or_else(|| self.env.get("AWS_ENDPOINT_URL"))
            .map(|e| e.trim_end_matches('/').to_owned())
    }
}

#[cfg(test)]
mod tests;
