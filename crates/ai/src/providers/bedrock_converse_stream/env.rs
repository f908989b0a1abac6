//! The AWS environment the adapter reads (variables and `~/.aws` profiles), the credentials it
//! resolves from it ([`BedrockAuth`]), and the endpoint and region ([`resolve_endpoint`]).

use super::DEFAULT_REGION;
use crate::env_keys::AUTHENTICATED_MARKER;
use crate::providers::aws_credentials::{self, AwsCredentialsError};
use crate::stream::CacheRetention;
use crate::types::Model;
use std::collections::HashMap;
use std::path::PathBuf;

/// The AWS settings read from the environment (and the shared config files) for one request.
#[derive(Debug, Clone, Default)]
pub struct AwsEnv {
    vars: HashMap<String, String>,
    home: Option<PathBuf>,
}

/// Variables an [`AwsEnv`] reads.
pub(super) const AWS_VARS: &[&str] = &[
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_BEDROCK_SKIP_AUTH",
    "AWS_BEDROCK_FORCE_CACHE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_ENDPOINT_URL",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_MAX_ATTEMPTS",
    "PI_CACHE_RETENTION",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_SSO",
    "AWS_ENDPOINT_URL_SSO_OIDC",
    "AWS_BEDROCK_FORCE_HTTP1",
];

impl AwsEnv {
    /// The current process's variables (empty values count as unset) and `HOME`.
    pub fn from_process() -> Self {
        let vars = AWS_VARS
            .iter()
            .filter_map(|k| {
                std::env::var(k)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .map(|v| ((*k).to_owned(), v))
            })
            .collect();
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        AwsEnv { vars, home }
    }

    /// An environment from explicit pairs (tests).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        AwsEnv {
            vars: pairs
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            home: None,
        }
    }

    /// The value of one of the variables read (`None` when unset or empty).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// `HOME`, where `~/.aws` lives.
    pub(crate) fn home(&self) -> Option<&std::path::Path> {
        self.home.as_deref()
    }

    pub(crate) fn configured_region(&self) -> Option<&str> {
        self.get("AWS_REGION")
            .or_else(|| self.get("AWS_DEFAULT_REGION"))
    }

    pub(crate) fn profile_name(&self) -> &str {
        self.get("AWS_PROFILE").unwrap_or("default")
    }

    pub(crate) fn shared_file(&self, var: &str, default: &str) -> Option<PathBuf> {
        match self.get(var) {
            Some(p) => Some(PathBuf::from(p)),
            None => self.home.as_ref().map(|h| h.join(".aws").join(default)),
        }
    }

    /// The keys of the selected profile: `~/.aws/credentials` `[name]`, then `~/.aws/config`
    /// `[profile name]` (`[default]` for the default profile).
    fn profile_section(&self, config: bool) -> Option<HashMap<String, String>> {
        let name = self.profile_name();
        let (path, section) = if config {
            let section = if name == "default" {
                "default".to_owned()
            } else {
                format!("profile {name}")
            };
            (self.shared_file("AWS_CONFIG_FILE", "config")?, section)
        } else {
            (
                self.shared_file("AWS_SHARED_CREDENTIALS_FILE", "credentials")?,
                name.to_owned(),
            )
        };
        let text = std::fs::read_to_string(path).ok()?;
        ini_section(&text, &section)
    }

    fn profile_region(&self) -> Option<String> {
        self.profile_section(true)?
            .get("region")
            .filter(|r| !r.is_empty())
            .cloned()
    }

    pub(super) fn max_attempts(&self) -> u32 {
        self.get("AWS_MAX_ATTEMPTS")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(3)
    }

    pub(super) fn cache_retention(&self, requested: CacheRetention) -> CacheRetention {
        match requested {
            CacheRetention::Short if self.get("PI_CACHE_RETENTION") == Some("long") => {
                CacheRetention::Long
            }
            other => other,
        }
    }
}

/// The `key = value` pairs of `[section]` in an INI text (AWS shared config syntax: `#`/`;`
/// comments, keys lower-cased); `None` when the section is absent.
pub(super) fn ini_section(text: &str, section: &str) -> Option<HashMap<String, String>> {
    let mut found = None::<HashMap<String, String>>;
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            if inside && found.is_none() {
                found = Some(HashMap::new());
            }
            continue;
        }
        if !inside {
            continue;
        }
        if let (Some(map), Some((k, v))) = (found.as_mut(), line.split_once('=')) {
            map.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    found
}

/// Static AWS keys for SigV4.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    /// `AWS_ACCESS_KEY_ID` / `aws_access_key_id`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY` / `aws_secret_access_key`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN` / `aws_session_token`, sent as `x-amz-security-token`.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsKeys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// How a request authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BedrockAuth {
    /// `Authorization: Bearer <token>` (Bedrock API keys).
    Bearer(String),
    /// SigV4 with these keys.
    SigV4(AwsKeys),
}

impl BedrockAuth {
    /// The credentials that need no lookup: `AWS_BEDROCK_SKIP_AUTH=1` (dummy keys), a bearer
    /// token (`api_key`, the request's `apiKey`, where the [`AUTHENTICATED_MARKER`] of ambient
    /// credentials counts as none, else `AWS_BEARER_TOKEN_BEDROCK`), or the environment keys.
    /// `None`: the rest of the chain ([`aws_credentials::resolve_chain`]) decides.
    pub fn resolve_direct(api_key: Option<&str>, env: &AwsEnv) -> Option<BedrockAuth> {
        if env.get("AWS_BEDROCK_SKIP_AUTH") == Some("1") {
            return Some(BedrockAuth::SigV4(AwsKeys {
                access_key_id: "dummy-access-key".into(),
                secret_access_key: "dummy-secret-key".into(),
                session_token: None,
            }));
        }
        let bearer = api_key
            .filter(|k| !k.is_empty() && *k != AUTHENTICATED_MARKER)
            .or_else(|| env.get("AWS_BEARER_TOKEN_BEDROCK"));
        if let Some(token) = bearer {
            return Some(BedrockAuth::Bearer(token.to_owned()));
        }
        match (
            env.get("AWS_ACCESS_KEY_ID"),
            env.get("AWS_SECRET_ACCESS_KEY"),
        ) {
            (Some(id), Some(secret)) => Some(BedrockAuth::SigV4(AwsKeys {
                access_key_id: id.to_owned(),
                secret_access_key: secret.to_owned(),
                session_token: env.get("AWS_SESSION_TOKEN").map(str::to_owned),
            })),
            _ => None,
        }
    }

    /// The credentials for a request: [`BedrockAuth::resolve_direct`], else the AWS default
    /// chain (profiles, web identity, container, instance metadata; see
    /// [`aws_credentials`]), whose calls go through `http`.
    ///
    /// # Errors
    /// [`AwsCredentialsError`] when no source has credentials or a configured one fails.
    pub async fn resolve_chain(
        api_key: Option<&str>,
        env: &AwsEnv,
        http: &reqwest::Client,
    ) -> Result<BedrockAuth, AwsCredentialsError> {
        if let Some(auth) = Self::resolve_direct(api_key, env) {
            return Ok(auth);
        }
        aws_credentials::resolve_chain(env, http)
            .await
            .map(BedrockAuth::SigV4)
    }
}

/// Where a request goes: `endpoint` (scheme, host and optional path prefix, no trailing `/`)
/// and the signing `region`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedrockEndpoint {
    /// Base URL the `/model/<id>/converse-stream` path is appended to.
    pub endpoint: String,
    /// SigV4 region (also the default endpoint's region).
    pub region: String,
}

/// The region of a standard Bedrock runtime URL (`https://bedrock-runtime[-fips].<region>.amazonaws.com[.cn]`).
pub(super) fn standard_endpoint_region(base_url: &str) -> Option<String> {
    let rest = base_url.trim().split_once("://")?.1;
    let host = rest.split(['/', '?', '#']).next()?;
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = host.split(':').next()?.to_ascii_lowercase();
    let host = host
        .strip_suffix(".amazonaws.com.cn")
        .or_else(|| host.strip_suffix(".amazonaws.com"))?;
    let region = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let ok = !region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    ok.then(|| region.to_owned())
}

/// The region of an inference-profile ARN model id (`arn:aws[-…]:bedrock:<region>:…`).
pub(super) fn arn_region(model_id: &str) -> Option<String> {
    let rest = model_id.strip_prefix("arn:aws")?;
    let rest = match rest.strip_prefix('-') {
        Some(partition) => partition.split_once(':')?.1,
        None => rest.strip_prefix(':')?,
    };
    let region = rest.strip_prefix("bedrock:")?.split(':').next()?;
    (!region.is_empty()).then(|| region.to_owned())
}

/// Endpoint and region for `model` (see the module docs).
pub fn resolve_endpoint(model: &Model, env: &AwsEnv) -> BedrockEndpoint {
    let base = model.base_url.trim().trim_end_matches('/');
    let configured = env.configured_region();
    let has_profile = env.get("AWS_PROFILE").is_some();
    let base_region = if base.is_empty() {
        None
    } else {
        standard_endpoint_region(base)
    };
    let explicit =
        !base.is_empty() && (base_region.is_none() || (configured.is_none() && !has_profile));
    let region = arn_region(&model.id)
        .or_else(|| configured.map(str::to_owned))
        .or_else(|| base_region.clone().filter(|_| explicit))
        .or_else(|| has_profile.then(|| env.profile_region()).flatten())
        .unwrap_or_else(|| DEFAULT_REGION.to_owned());
    let endpoint = if explicit {
        base.to_owned()
    } else if let Some(url) = env
        .get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
        .or_else(|| env.get("AWS_ENDPOINT_URL"))
    {
        url.trim().trim_end_matches('/').to_owned()
    } else {
        let suffix = if region.starts_with("cn-") {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        };
        format!("https://bedrock-runtime.{region}.{suffix}")
    };
    BedrockEndpoint { endpoint, region }
}

/// `s` percent-encoded as the AWS SDK encodes a path label: everything but `A–Z a–z 0–9 - _ . ~`.
pub(crate) fn encode_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The ConverseStream URL for `model_id` under `endpoint`.
pub fn converse_stream_url(endpoint: &str, model_id: &str) -> String {
    format!(
        "{}/model/{}/converse-stream",
        endpoint.trim_end_matches('/'),
        encode_label(model_id)
    )
}
