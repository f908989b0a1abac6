//! `bedrock-converse-stream`: Amazon Bedrock's ConverseStream API,
//! `POST {endpoint}/model/{model id, URL-encoded}/converse-stream`, answered in AWS
//! event-stream binary framing (see [`EventStreamDecoder`]).
//!
//! Source: upstream 1.6 `dist/api/bedrock-converse-stream.js` and `dist/providers/amazon-bedrock.js`
//! (facts only), the Bedrock Runtime API reference (Converse, ConverseStream), the AWS
//! event-stream encoding, and the recordings in
//! `crates/coding-agent/tests/fixtures/providers/upstream/bedrock*.json`.
//!
//! Credentials, as upstream resolves them ([`BedrockAuth::resolve`]): a bearer token
//! (`options.apiKey`, else `AWS_BEARER_TOKEN_BEDROCK`; `Authorization: Bearer`), else SigV4
//! (service `bedrock`) with `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`, else
//! the rest of the AWS SDK's default credential chain, in its order: the `AWS_PROFILE` (or
//! `default`) profile of `~/.aws/credentials` / `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`,
//! `AWS_CONFIG_FILE`) with assume-role, static keys, web identity, `credential_process` or
//! SSO; then `AWS_WEB_IDENTITY_TOKEN_FILE`; container credentials; EC2 instance metadata
//! (see [`super::aws_credentials`]). `AWS_BEDROCK_SKIP_AUTH=1` signs with dummy keys (proxies
//! that need no auth).
//!
//! Endpoint and region ([`resolve_endpoint`]): a model `baseUrl` that is not a standard
//! `bedrock-runtime.<region>.amazonaws.com` host (a proxy, the tests' fake) is always used; a
//! standard one only while neither `AWS_REGION`/`AWS_DEFAULT_REGION` nor `AWS_PROFILE` is set.
//! Otherwise the endpoint is `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL`, or
//! `https://bedrock-runtime.<region>.amazonaws.com`. Region: from an inference-profile ARN,
//! else the variables, else the standard `baseUrl`'s, else the profile's `region`, else
//! `us-east-1`.
//!
//! Requests that fail before streaming with a throttling error, HTTP 429/500/502/503/504 or no
//! response are retried as the AWS SDK's standard retry mode does (`AWS_MAX_ATTEMPTS`
//! attempts in all, default 3; full-jitter backoff from 100 ms, 500 ms for throttling, capped
//! at 20 s). Errors read `<prefix>: <message>` (`Throttling error`, `Validation error`,
//! `Internal server error`, `Model stream error`, `Service unavailable`, else the exception
//! name), which the retry and context-overflow classifiers match.
//!
//! Strict-tool-limit fallback (upstream 1.6 `strict-tool-limits.js`): when tools were sent
//! strict (`compat.supportsStrictMode` and a tool preferring strict sampling) and Bedrock
//! answers `ValidationException` with one of Claude's strict-limit messages ("Too many strict
//! tools (", "The compiled grammar is too large", "Schemas contains too many parameters with
//! union types ("), the request is sent once more with every tool non-strict, and the session
//! (`StreamOptions::session_id`) sends its tools non-strict from then on. Upstream also adds
//! a `bedrock_strict_tools_fallback` diagnostic to the assistant message; our messages carry no
//! diagnostics, so it is logged (`tracing`, info) instead.
//!
//! HTTP version: upstream's SDK client speaks HTTP/2 to Bedrock by default; with
//! `AWS_BEDROCK_FORCE_HTTP1=1` (exactly `1`) it switches to its HTTP/1.1 handler for endpoints
//! that cannot take HTTP/2. Ours negotiates `h2` or `http/1.1` through TLS ALPN (plain `http://`
//! endpoints always get HTTP/1.1); with the variable the Bedrock request goes through a client
//! that offers only HTTP/1.1 ([`force_http1`]). The credential calls are unaffected, as upstream.

use super::aws_credentials::{self, AwsCredentialsError};
use super::common::{
    self, aborted, end_event, extra_headers, finish_usage, parse_streaming_json, push_block,
    Emitter, CONNECTION_ERROR_MESSAGE, REQUEST_TIMEOUT_MESSAGE,
};
use super::strict_schema::{prefers_strict_sampling, strict_schema};
use super::HttpOptions;
use crate::env_keys::AUTHENTICATED_MARKER;
use crate::error::ProviderError;
use crate::stream::{
    AssistantMessageEvent, AssistantStream, CacheRetention, Provider, RequestTuning, StreamOptions,
    ThinkingBudgets,
};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Message, Model, StopReason, TextContent, ThinkingContent,
    ThinkingLevel, ToolCall, ToolResultMessage, UserContent,
};
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;

/// The `api` value of this adapter.
pub const API: &str = "bedrock-converse-stream";

/// Text sent for a block that must not be empty (upstream `EMPTY_TEXT_PLACEHOLDER`).
const EMPTY_TEXT: &str = "<empty>";

/// Thinking text shown for encrypted (redacted) reasoning.
const REDACTED_THINKING_TEXT: &str = "[Reasoning redacted]";

/// Beta of adaptive thinking's `block_binding`.
const BLOCK_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

/// Beta of thinking between tool calls (budget-based Claude).
const INTERLEAVED_BETA: &str = "interleaved-thinking-2025-05-14";

/// The tool-result text standing for an image moved after the tool results (Claude rejects
/// images inside error tool results).
const ERROR_TOOL_IMAGE_TEXT: &str = "(image attached after the tool results)";

/// Default region when nothing else names one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// SigV4 service name of the Bedrock runtime.
const SIGNING_SERVICE: &str = "bedrock";

/// Largest event-stream message accepted, in bytes (the format's own limit is 16 MiB).
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// The `bedrock-converse-stream` adapter over the HTTP client it was built with.
#[derive(Debug, Clone)]
pub struct BedrockConverseStream {
    client: common::LazyClient,
}

impl Default for BedrockConverseStream {
    fn default() -> Self {
        BedrockConverseStream {
            client: common::LazyClient::Default,
        }
    }
}

impl BedrockConverseStream {
    /// The adapter over a new HTTP client with `http`'s timeouts.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        BedrockConverseStream { client }
    }
}

impl Provider for BedrockConverseStream {
    fn api(&self) -> &'static str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: StreamOptions) -> AssistantStream {
        self.stream_tuned(model, context, options, RequestTuning::default())
    }

    fn stream_tuned(
        &self,
        model: &Model,
        context: &Context,
        options: StreamOptions,
        tuning: RequestTuning,
    ) -> AssistantStream {
        let model = model.clone();
        let env = AwsEnv::from_process();
        let body = build_request_body(&model, context, &options, &tuning, &env);
        // Upstream's strict-tool-limit fallback: the same request with every tool non-strict,
        // sent once if Bedrock rejects the strict tools for exceeding Claude's limits.
        let fallback = match tool_config(&model, context, strict_tools_disabled(&options)) {
            Some((_, true)) => tool_config(&model, context, true).map(|(config, _)| {
                let mut b = body.clone();
                b["toolConfig"] = config;
                b
            }),
            _ => None,
        };
        let client = self.client.clone();
        let bodies = Bodies {
            body,
            fallback,
            hooks: tuning.hooks,
        };
        common::event_stream(move |em| run(em, client, model, bodies, options, env))
    }
}

// ---------------------------------------------------------------------------------------------
// Environment, credentials, endpoint
// ---------------------------------------------------------------------------------------------

/// The AWS settings read from the environment (and the shared config files) for one request.
#[derive(Debug, Clone, Default)]
pub struct AwsEnv {
    vars: HashMap<String, String>,
    home: Option<PathBuf>,
}

/// Variables an [`AwsEnv`] reads.
const AWS_VARS: &[&str] = &[
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

    fn max_attempts(&self) -> u32 {
        self.get("AWS_MAX_ATTEMPTS")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(3)
    }

    fn cache_retention(&self, requested: CacheRetention) -> CacheRetention {
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
fn ini_section(text: &str, section: &str) -> Option<HashMap<String, String>> {
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
fn standard_endpoint_region(base_url: &str) -> Option<String> {
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
fn arn_region(model_id: &str) -> Option<String> {
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

// ---------------------------------------------------------------------------------------------
// Model families
// ---------------------------------------------------------------------------------------------

/// Lower-cased id and name, each also with runs of space, `_`, `.`, `:` turned into `-`.
fn match_candidates(model: &Model) -> Vec<String> {
    let mut values = vec![model.id.as_str()];
    if !model.name.is_empty() {
        values.push(model.name.as_str());
    }
    let mut out = Vec::new();
    for v in values {
        let lower = v.to_lowercase();
        let mut dashed = String::with_capacity(lower.len());
        let mut in_run = false;
        for c in lower.chars() {
            if matches!(c, ' ' | '\t' | '\n' | '_' | '.' | ':') {
                if !in_run {
                    dashed.push('-');
                }
                in_run = true;
            } else {
                dashed.push(c);
                in_run = false;
            }
        }
        out.push(lower);
        out.push(dashed);
    }
    out
}

fn any_candidate(model: &Model, needles: &[&str]) -> bool {
    match_candidates(model)
        .iter()
        .any(|c| needles.iter().any(|n| c.contains(n)))
}

/// An Anthropic Claude model on Bedrock (by id, or by a name mentioning Claude).
fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude")
        || id.contains("anthropic/claude")
        || name.contains("anthropic.claude")
        || name.contains("anthropic/claude")
        || name.contains("claude")
}

const ADAPTIVE: &[&str] = &[
    "opus-4-6",
    "opus-4-7",
    "opus-4-8",
    "opus-5",
    "sonnet-4-6",
    "sonnet-5",
    "haiku-5",
    "fable-5",
];

const NATIVE_XHIGH: &[&str] = &[
    "opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5",
];

fn supports_adaptive(model: &Model) -> bool {
    any_candidate(model, ADAPTIVE)
}

/// Prompt caching: Claude 3.5 Haiku, 3.7 Sonnet, 4.x and 5 (or `AWS_BEDROCK_FORCE_CACHE=1`
/// for models whose id and name do not say Claude).
fn supports_caching(model: &Model, env: &AwsEnv) -> bool {
    if !any_candidate(model, &["claude"]) {
        return env.get("AWS_BEDROCK_FORCE_CACHE") == Some("1");
    }
    any_candidate(
        model,
        &[
            "fable-5",
            "opus-5",
            "sonnet-5",
            "haiku-5",
            "-4-",
            "claude-3-7-sonnet",
            "claude-3-5-haiku",
        ],
    )
}

fn is_gov_cloud(model: &Model, env: &AwsEnv) -> bool {
    if env
        .configured_region()
        .is_some_and(|r| r.to_lowercase().starts_with("us-gov-"))
    {
        return true;
    }
    let id = model.id.to_lowercase();
    id.starts_with("us-gov.") || id.starts_with("arn:aws-us-gov:")
}

// ---------------------------------------------------------------------------------------------
// Request body
// ---------------------------------------------------------------------------------------------

/// Budget thinking's default budget per level, in tokens.
fn default_budget(level: ThinkingLevel) -> u64 {
    match level {
        ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        _ => 16384,
    }
}

fn configured_budget(level: ThinkingLevel, budgets: Option<&ThinkingBudgets>) -> u64 {
    let b = budgets.copied().unwrap_or_default();
    let custom = match level {
        ThinkingLevel::Minimal => b.minimal,
        ThinkingLevel::Low => b.low,
        ThinkingLevel::Medium => b.medium,
        _ => b.high,
    };
    custom.unwrap_or_else(|| default_budget(level))
}

/// `(maxTokens, budget)` for the request: the context-clamped cap, raised by the thinking
/// budget for budget-based Claude thinking (bounded by the model's `maxTokens`, clamped to
/// the context again, keeping 1024 tokens for the answer).
fn plan_tokens(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    level: Option<ThinkingLevel>,
) -> (u64, Option<u64>) {
    let base = common::clamp_max_tokens_to_context(model, context, options);
    let Some(level) = level.filter(|_| is_claude(model) && !supports_adaptive(model)) else {
        return (base, None);
    };
    let mut budget = configured_budget(level, tuning.thinking_budgets.as_ref());
    let model_max = if model.max_tokens == 0 {
        u64::MAX
    } else {
        model.max_tokens
    };
    let adjusted = base.saturating_add(budget).min(model_max);
    if adjusted <= budget {
        budget = budget.min(adjusted.saturating_sub(1024));
    }
    let refit = StreamOptions {
        max_tokens: Some(adjusted),
        ..options.clone()
    };
    let max_tokens = common::clamp_max_tokens_to_context(model, context, &refit);
    (
        max_tokens,
        Some(budget.min(max_tokens.saturating_sub(1024))),
    )
}

fn adaptive_effort(model: &Model, level: ThinkingLevel) -> String {
    if level == ThinkingLevel::Xhigh && any_candidate(model, NATIVE_XHIGH) {
        return "xhigh".into();
    }
    if let Some(m) = common::mapped_level(model, level) {
        return m;
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .into()
}

/// `additionalModelRequestFields` for thinking (see upstream's per-family rules): Claude
/// adaptive (`thinking.type: adaptive`, `output_config.effort`, block binding on the newest
/// models) or budget (`thinking.type: enabled`, `budget_tokens`, the interleaved-thinking
/// beta); OpenAI gpt-oss `reasoning_effort`; other GPT `reasoning.effort`; `None` otherwise.
fn additional_fields(
    model: &Model,
    level: Option<ThinkingLevel>,
    budget: Option<u64>,
    env: &AwsEnv,
) -> Option<Value> {
    let level = level?;
    if is_claude(model) {
        let gov = is_gov_cloud(model, env);
        let mut thinking = Map::new();
        let mut out = Map::new();
        if supports_adaptive(model) {
            let binding = !gov && any_candidate(model, NATIVE_XHIGH);
            thinking.insert("type".into(), json!("adaptive"));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            if binding {
                thinking.insert(
                    "block_binding".into(),
                    json!({"prefix_mismatch_behavior": "drop_block"}),
                );
            }
            out.insert("thinking".into(), Value::Object(thinking));
            out.insert(
                "output_config".into(),
                json!({"effort": adaptive_effort(model, level)}),
            );
            if binding {
                out.insert("anthropic_beta".into(), json!([BLOCK_BINDING_BETA]));
            }
        } else {
            thinking.insert("type".into(), json!("enabled"));
            thinking.insert(
                "budget_tokens".into(),
                json!(budget.unwrap_or_else(|| default_budget(level))),
            );
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            out.insert("thinking".into(), Value::Object(thinking));
            out.insert("anthropic_beta".into(), json!([INTERLEAVED_BETA]));
        }
        return Some(Value::Object(out));
    }
    if any_candidate(model, &["gpt-oss"]) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return Some(json!({ "reasoning_effort": effort }));
    }
    if any_candidate(model, &["gpt-"]) {
        let effort = common::mapped_level(model, level).unwrap_or_else(|| {
            match level {
                ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
                ThinkingLevel::Medium => "medium",
                ThinkingLevel::Xhigh => "xhigh",
                ThinkingLevel::Max => "max",
                _ => "high",
            }
            .to_owned()
        });
        return Some(json!({"reasoning": {"effort": effort}}));
    }
    None
}

/// A Bedrock tool-use id: characters outside `[A-Za-z0-9_-]` become `_`, at most 64.
fn normalize_tool_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({ "text": text }))
}

fn image_block(mime: &str, data: &str) -> Value {
    let format = match mime {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "png",
    };
    json!({"image": {"format": format, "source": {"bytes": data}}})
}

/// Drop empty-named keys from a tool call's arguments, at any depth (Bedrock rejects them).
fn sanitize_document(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(sanitize_document).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.clone(), sanitize_document(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn tool_result_content(content: &[Content]) -> Vec<Value> {
    let mut out: Vec<Value> = content
        .iter()
        .filter_map(|c| match c {
            Content::Image(i) => Some(image_block(&i.mime_type, &i.data)),
            Content::Text(t) => text_block(&t.text),
            _ => None,
        })
        .collect();
    if out.is_empty() {
        out.push(json!({ "text": EMPTY_TEXT }));
    }
    out
}

/// Claude: an error tool result's images replaced by one placeholder text per run, and the
/// caption + images to send after all tool results of the turn.
fn split_error_images(tr: &ToolResultMessage) -> Option<(Vec<Content>, Vec<Value>)> {
    if !tr.is_error || !tr.content.iter().any(|c| matches!(c, Content::Image(_))) {
        return None;
    }
    let mut content = Vec::new();
    let mut after = vec![json!({"text": format!(
        "Images from the error result of tool call {} ({}):",
        tr.tool_call_id, tr.tool_name
    )})];
    let mut previous_placeholder = false;
    for c in &tr.content {
        if let Content::Image(i) = c {
            if !previous_placeholder {
                content.push(Content::Text(TextContent {
                    text: ERROR_TOOL_IMAGE_TEXT.to_owned(),
                    text_signature: None,
                    extra: Default::default(),
                }));
            }
            previous_placeholder = true;
            after.push(image_block(&i.mime_type, &i.data));
            continue;
        }
        previous_placeholder = matches!(c, Content::Text(t) if t.text == ERROR_TOOL_IMAGE_TEXT);
        content.push(c.clone());
    }
    Some((content, after))
}

fn convert_messages(messages: &[Message], model: &Model, cache: Option<Value>) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_id(id);
    let messages = transform_messages(messages, model, Some(&normalize));
    let claude = is_claude(model);
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::User(u) => {
                let mut content = Vec::new();
                match &u.content {
                    UserContent::Text(s) => {
                        content.push(text_block(s).unwrap_or_else(|| json!({"text": EMPTY_TEXT})))
                    }
                    UserContent::Blocks(blocks) => {
                        for b in blocks {
                            match b {
                                Content::Text(t) => content.extend(text_block(&t.text)),
                                Content::Image(img) => {
                                    content.push(image_block(&img.mime_type, &img.data))
                                }
                                _ => {}
                            }
                        }
                        if content.is_empty() {
                            content.push(json!({ "text": EMPTY_TEXT }));
                        }
                    }
                }
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                let mut blocks = Vec::new();
                for c in &a.content {
                    match c {
                        Content::Text(t) => blocks.extend(text_block(&t.text)),
                        Content::ToolCall(tc) => blocks.push(json!({"toolUse": {
                            "toolUseId": tc.id, "name": tc.name,
                            "input": sanitize_document(&tc.arguments)}})),
                        Content::Thinking(t) => {
                            let signature = t.thinking_signature.as_deref().unwrap_or("");
                            if t.redacted == Some(true) {
                                if !signature.is_empty() && is_base64(signature) {
                                    blocks.push(json!({"reasoningContent": {
                                        "redactedContent": signature}}));
                                }
                                continue;
                            }
                            if t.thinking.trim().is_empty() {
                                continue;
                            }
                            if !claude {
                                blocks.push(json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking}}}));
                            } else if signature.trim().is_empty() {
                                blocks.push(json!({ "text": t.thinking }));
                            } else {
                                blocks.push(json!({"reasoningContent": {"reasoningText": {
                                    "text": t.thinking, "signature": signature}}}));
                            }
                        }
                        Content::Image(_) => {}
                    }
                }
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::ToolResult(_) => {
                let mut results = Vec::new();
                let mut after = Vec::new();
                while let Some(Message::ToolResult(tr)) = messages.get(i) {
                    let split = if claude { split_error_images(tr) } else { None };
                    let content = match &split {
                        Some((content, _)) => tool_result_content(content),
                        None => tool_result_content(&tr.content),
                    };
                    results.push(json!({"toolResult": {
                        "toolUseId": tr.tool_call_id,
                        "content": content,
                        "status": if tr.is_error { "error" } else { "success" }}}));
                    if let Some((_, images)) = split {
                        after.extend(images);
                    }
                    i += 1;
                }
                results.extend(after);
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(point) = cache {
        if let Some(last) = out.last_mut() {
            if last.get("role").and_then(Value::as_str) == Some("user") {
                if let Some(content) = last.get_mut("content").and_then(Value::as_array_mut) {
                    content.push(point);
                }
            }
        }
    }
    out
}

fn is_base64(s: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).is_ok()
}

/// The JSON body upstream 1.6 sends for this conversation (the model id goes in the path):
/// `messages`, `system` (with a `cachePoint` when caching), `inferenceConfig.maxTokens`,
/// `toolConfig.tools` (strict where the model's `compat.supportsStrictMode` and the tool allow)
/// and `additionalModelRequestFields` for thinking.
pub fn build_request_body(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    tuning: &RequestTuning,
    env: &AwsEnv,
) -> Value {
    let retention = env.cache_retention(tuning.cache_retention);
    let cache_point = (retention != CacheRetention::None && supports_caching(model, env)).then(
        || match retention {
            CacheRetention::Long => json!({"cachePoint": {"type": "default", "ttl": "1h"}}),
            _ => json!({"cachePoint": {"type": "default"}}),
        },
    );
    let level = common::requested_reasoning(model, options);
    let (max_tokens, budget) = plan_tokens(model, context, options, tuning, level);
    let mut body = Map::new();
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(
            &context.messages,
            model,
            cache_point.clone(),
        )),
    );
    if !context.system_prompt.is_empty() {
        let mut system = vec![json!({"text": context.system_prompt})];
        system.extend(cache_point);
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("inferenceConfig".into(), json!({ "maxTokens": max_tokens }));
    if let Some((config, _)) = tool_config(model, context, strict_tools_disabled(options)) {
        body.insert("toolConfig".into(), config);
    }
    if let Some(fields) = additional_fields(model, level, budget, env) {
        body.insert("additionalModelRequestFields".into(), fields);
    }
    Value::Object(body)
}

/// `toolConfig` for the context's tools (`None` without tools), and whether any tool was sent
/// strict because it prefers strict sampling (upstream's `hasPreferredStrictTools`). Tools are
/// strict where the model's `compat.supportsStrictMode` allows it and the tool prefers it,
/// unless `disable_strict`.
fn tool_config(model: &Model, context: &Context, disable_strict: bool) -> Option<(Value, bool)> {
    if context.tools.is_empty() {
        return None;
    }
    let strict_ok =
        !disable_strict && common::compat_bool(model, "supportsStrictMode").unwrap_or(false);
    let mut any_strict = false;
    let tools: Vec<Value> = context
        .tools
        .iter()
        .map(|t| {
            let strict = (strict_ok && prefers_strict_sampling(t))
                .then(|| strict_schema(&t.parameters))
                .flatten();
            let mut spec = Map::new();
            spec.insert("name".into(), json!(t.name));
            spec.insert("description".into(), json!(t.description));
            let is_strict = strict.is_some();
            any_strict |= is_strict;
            let schema = strict.unwrap_or_else(|| t.parameters.clone());
            spec.insert("inputSchema".into(), json!({ "json": schema }));
            if is_strict {
                spec.insert("strict".into(), json!(true));
            }
            json!({ "toolSpec": spec })
        })
        .collect();
    Some((json!({ "tools": tools }), any_strict))
}

// ---------------------------------------------------------------------------------------------
// Strict-tool-limit fallback
// ---------------------------------------------------------------------------------------------

/// What Claude answers (on Bedrock as on the Anthropic API) when a request's strict tools
/// exceed its limits (upstream 1.6 `strict-tool-limits.js`: about 20 strict tools, 16 optional
/// or union-typed parameters across them).
const STRICT_TOOL_LIMIT_MESSAGES: &[&str] = &[
    "The compiled grammar is too large",
    "Too many strict tools (",
    "Schemas contains too many parameters with union types (",
];

/// Sessions kept in [`sessions_over_strict_limits`] at most (the oldest is dropped).
const MAX_SESSIONS_OVER_STRICT_LIMITS: usize = 10_000;

/// Session ids whose strict tools were rejected for exceeding the limits, oldest first: their
/// later requests send every tool non-strict from the start (the tool set rarely changes, and
/// switching back would only repeat the rejection and rewrite the cached prompt prefix).
fn sessions_over_strict_limits() -> &'static std::sync::Mutex<std::collections::VecDeque<String>> {
    static SET: std::sync::OnceLock<std::sync::Mutex<std::collections::VecDeque<String>>> =
        std::sync::OnceLock::new();
    SET.get_or_init(Default::default)
}

fn strict_tools_disabled(options: &StreamOptions) -> bool {
    let Some(id) = options.session_id.as_deref() else {
        return false;
    };
    sessions_over_strict_limits()
        .lock()
        .map(|set| set.iter().any(|s| s == id))
        .unwrap_or(false)
}

fn mark_strict_limits_exceeded(options: &StreamOptions) {
    let Some(id) = options.session_id.as_deref() else {
        return;
    };
    if let Ok(mut set) = sessions_over_strict_limits().lock() {
        if !set.iter().any(|s| s == id) {
            set.push_back(id.to_owned());
            if set.len() > MAX_SESSIONS_OVER_STRICT_LIMITS {
                set.pop_front();
            }
        }
    }
}

/// Whether a failed request is Bedrock rejecting strict tools for their number or size: a
/// `ValidationException` whose message (else whole body) holds one of
/// [`STRICT_TOOL_LIMIT_MESSAGES`].
fn is_strict_tool_limit_error(error: &ProviderError, answer: Option<&ErrorAnswer>) -> bool {
    let (ProviderError::Http { body, .. }, Some(answer)) = (error, answer) else {
        return false;
    };
    if answer.name.as_deref() != Some("ValidationException") {
        return false;
    }
    let message = answer.message.as_deref().unwrap_or(body);
    STRICT_TOOL_LIMIT_MESSAGES
        .iter()
        .any(|m| message.contains(m))
}

// ---------------------------------------------------------------------------------------------
// Event-stream framing
// ---------------------------------------------------------------------------------------------

/// One decoded event-stream message: its string headers and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Headers with string values (type 7), in wire order; other value types are skipped.
    pub headers: Vec<(String, String)>,
    /// The payload bytes (JSON for Bedrock).
    pub payload: Vec<u8>,
}

impl Frame {
    /// A string header by exact name (e.g. `:event-type`).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why the event stream could not be decoded.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The prelude CRC did not match.
    #[error("Event stream prelude checksum mismatch")]
    PreludeCrc,
    /// The message CRC did not match.
    #[error("Event stream message checksum mismatch")]
    MessageCrc,
    /// Lengths that cannot describe a message (too short, too long, headers past the end).
    #[error("Invalid event stream message length")]
    Length,
    /// A header that runs past its section or has an unknown value type.
    #[error("Invalid event stream header")]
    Header,
}

/// Incremental decoder of AWS event-stream messages: a 12-byte prelude (total length and
/// headers length, u32 big-endian, then the CRC32 of those 8 bytes), headers, payload and the
/// CRC32 of the whole message before it. Feed bytes with [`EventStreamDecoder::push`] and take
/// messages with [`EventStreamDecoder::next_frame`].
#[derive(Debug, Default)]
pub struct EventStreamDecoder {
    buf: Vec<u8>,
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl EventStreamDecoder {
    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether bytes of an incomplete message are buffered.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The next complete message, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.buf.len() < 12 {
            return Ok(None);
        }
        let total = be_u32(&self.buf[0..4]) as usize;
        let headers_len = be_u32(&self.buf[4..8]) as usize;
        if crc32fast::hash(&self.buf[0..8]) != be_u32(&self.buf[8..12]) {
            return Err(FrameError::PreludeCrc);
        }
        if !(16..=MAX_FRAME_BYTES).contains(&total) || headers_len > total - 16 {
            return Err(FrameError::Length);
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        let msg: Vec<u8> = self.buf.drain(..total).collect();
        if crc32fast::hash(&msg[..total - 4]) != be_u32(&msg[total - 4..]) {
            return Err(FrameError::MessageCrc);
        }
        let headers = parse_headers(&msg[12..12 + headers_len])?;
        Ok(Some(Frame {
            headers,
            payload: msg[12 + headers_len..total - 4].to_vec(),
        }))
    }
}

fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, String)>, FrameError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let name_len = usize::from(b[0]);
        let name = b.get(1..1 + name_len).ok_or(FrameError::Header)?;
        let name = String::from_utf8_lossy(name).into_owned();
        b = &b[1 + name_len..];
        let kind = *b.first().ok_or(FrameError::Header)?;
        b = &b[1..];
        let fixed = match kind {
            0 | 1 => Some(0),
            2 => Some(1),
            3 => Some(2),
            4 => Some(4),
            5 | 8 => Some(8),
            9 => Some(16),
            6 | 7 => None,
            _ => return Err(FrameError::Header),
        };
        match fixed {
            Some(n) => {
                if b.len() < n {
                    return Err(FrameError::Header);
                }
                b = &b[n..];
            }
            None => {
                let len = b.get(0..2).ok_or(FrameError::Header)?;
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                let value = b.get(2..2 + len).ok_or(FrameError::Header)?;
                if kind == 7 {
                    out.push((name, String::from_utf8_lossy(value).into_owned()));
                }
                b = &b[2 + len..];
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// The readable prefix of a Bedrock exception name (upstream's wording, which the retry and
/// overflow classifiers match); other names stand for themselves.
fn error_prefix(name: &str) -> &str {
    match name {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    }
}

/// Upstream's link for data-retention-mode rejections.
const DATA_RETENTION_DOCS: &str =
    "https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html";

/// `errorMessage` for a Bedrock exception `name` (`ThrottlingException`) with `message`.
pub fn bedrock_error_message(name: &str, message: &str) -> String {
    let hint = if message.to_lowercase().contains("data retention mode") {
        format!(" See {DATA_RETENTION_DOCS} for supported data retention modes.")
    } else {
        String::new()
    };
    format!("{}: {message}{hint}", error_prefix(name))
}

/// An exception name from `x-amzn-errortype` / a body's `__type` or `code`
/// (`ThrottlingException:http://…` or `com.amazon…#ThrottlingException` → `ThrottlingException`).
fn sanitize_error_code(raw: &str) -> String {
    let s = raw.split(':').next().unwrap_or(raw);
    let s = s.rsplit('#').next().unwrap_or(s);
    s.trim().to_owned()
}

/// A non-2xx Bedrock answer, its JSON body parsed once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ErrorAnswer {
    /// The exception name of the `x-amzn-errortype` header alone (what the SDK's retry
    /// classifier reads), sanitized.
    header_name: Option<String>,
    /// The exception name: the header's, else the body's `__type` or `code`, sanitized.
    name: Option<String>,
    /// The body's `message` (or `Message`).
    message: Option<String>,
}

impl ErrorAnswer {
    /// Reads the `x-amzn-errortype` header value `error_type` and the response `body`.
    fn parse(error_type: Option<&str>, body: &str) -> Self {
        let parsed: Option<Value> = serde_json::from_str(body.trim()).ok();
        let field = |k: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let header_name = error_type
            .map(sanitize_error_code)
            .filter(|n| !n.is_empty());
        let name = header_name.clone().or_else(|| {
            field("__type")
                .or_else(|| field("code"))
                .map(|c| sanitize_error_code(&c))
        });
        ErrorAnswer {
            header_name,
            name,
            message: field("message").or_else(|| field("Message")),
        }
    }
}

/// `errorMessage` of a non-2xx answer: `<prefix>: <message>` from the exception name (header
/// or body) and the body's `message`; without a name, `<status>: <body>`.
fn http_error_message(status: u16, answer: &ErrorAnswer, body: &str) -> String {
    match (&answer.name, &answer.message) {
        (Some(name), Some(message)) => bedrock_error_message(name, message),
        (Some(name), None) => bedrock_error_message(name, "UnknownError"),
        (None, _) if body.trim().is_empty() => format!("{status}: Unknown error"),
        (None, _) => format!("{status}: {}", body.trim()),
    }
}

/// Whether the AWS SDK's standard retry mode retries this failure, and whether it is
/// throttling (longer backoff).
fn sdk_retryable(error: &ProviderError, answer: Option<&ErrorAnswer>) -> Option<bool> {
    const THROTTLING: &[&str] = &[
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "BandwidthLimitExceeded",
        "EC2ThrottledException",
        "PriorRequestNotComplete",
        "RequestThrottled",
    ];
    match error {
        ProviderError::Http { status, .. } => {
            let name = answer.and_then(|a| a.header_name.as_deref());
            let throttling = *status == 429 || name.is_some_and(|n| THROTTLING.contains(&n));
            if throttling {
                Some(true)
            } else if matches!(status, 500 | 502 | 503 | 504) {
                Some(false)
            } else {
                None
            }
        }
        ProviderError::Transport { .. } | ProviderError::Timeout { .. } => Some(false),
        _ => None,
    }
}

/// Full-jitter backoff of SDK retry `attempt` (1-based): up to `base · 2^(attempt-1)` ms,
/// capped at 20 s (`base` 500 ms for throttling, else 100 ms).
fn sdk_backoff(attempt: u32, throttling: bool) -> Duration {
    let base: u64 = if throttling { 500 } else { 100 };
    let cap = (base << attempt.saturating_sub(1).min(10)).min(20_000);
    let noise = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos() % 1000))
        .unwrap_or(500);
    Duration::from_millis(cap * noise / 1000)
}

// ---------------------------------------------------------------------------------------------
// Sending
// ---------------------------------------------------------------------------------------------

/// Headers of one signed attempt (SigV4 signs the date, so every attempt is signed anew).
fn request_headers(
    url: &str,
    payload: &[u8],
    auth: &BedrockAuth,
    region: &str,
    extra: &[(String, Option<String>)],
) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    // Caller headers (then the headers hook's changes, `None` removing), except those SigV4
    // and the bearer scheme own (upstream ignores them silently).
    let allowed: Vec<(String, Option<String>)> = extra
        .iter()
        .filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            !(k.starts_with("x-amz-") || k == "authorization" || k == "host")
        })
        .cloned()
        .collect();
    common::apply_header_changes(&mut headers, &allowed);
    match auth {
        BedrockAuth::Bearer(token) => {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                ProviderError::Protocol {
                    message: "Invalid Amazon Bedrock bearer token".to_owned(),
                }
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        BedrockAuth::SigV4(keys) => sign_sigv4(
            &mut headers,
            "POST",
            url,
            payload,
            keys,
            region,
            SIGNING_SERVICE,
        )?,
    }
    Ok(headers)
}

/// Add SigV4 `authorization`, `x-amz-date`, `x-amz-content-sha256` and (with a session
/// token) `x-amz-security-token` to `headers`, signing `host` and the headers present, for
/// `service` (`bedrock`, `sts`) in `region`.
pub(crate) fn sign_sigv4(
    headers: &mut HeaderMap,
    method: &str,
    url: &str,
    payload: &[u8],
    keys: &AwsKeys,
    region: &str,
    service: &str,
) -> Result<(), ProviderError> {
    use aws_sigv4::http_request::{
        sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings,
    };
    use aws_sigv4::sign::v4;
    let fail = |what: &str| ProviderError::Protocol {
        message: format!("Could not sign the AWS {service} request: {what}"),
    };
    let identity = aws_credential_types::Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.clone(),
        keys.session_token.clone(),
        None,
        "pi",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| fail(&e.to_string()))?
        .into();
    let pairs: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let signable = SignableRequest::new(
        method,
        url,
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(payload),
    )
    .map_err(|e| fail(&e.to_string()))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| fail(&e.to_string()))?
        .into_parts();
    let (signed, _) = instructions.into_parts();
    for header in signed {
        if let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(header.name().as_bytes()),
            HeaderValue::from_str(header.value()),
        ) {
            headers.insert(name, value);
        }
    }
    Ok(())
}

/// One attempt: send and wait for the headers, racing `cancel` and the headers timeout. A
/// non-2xx answer becomes [`ProviderError::Http`] (with its parsed [`ErrorAnswer`] beside it).
async fn send_once(
    request: reqwest::RequestBuilder,
    cancel: &CancellationToken,
    headers_timeout_ms: u64,
    hooks: Option<&crate::stream::RequestHooks>,
) -> Result<reqwest::Response, (ProviderError, Option<ErrorAnswer>)> {
    let timed_out = || ProviderError::Timeout {
        message: REQUEST_TIMEOUT_MESSAGE.to_owned(),
    };
    let deadline = async {
        if headers_timeout_ms > 0 {
            tokio::time::sleep(Duration::from_millis(headers_timeout_ms)).await
        } else {
            std::future::pending::<()>().await
        }
    };
    let response = tokio::select! {
        _ = cancel.cancelled() => return Err((aborted(), None)),
        _ = deadline => return Err((timed_out(), None)),
        r = request.send() => r,
    };
    let response = response.map_err(|e| {
        let error = if e.is_timeout() {
            timed_out()
        } else {
            ProviderError::Transport {
                message: CONNECTION_ERROR_MESSAGE.to_owned(),
            }
        };
        (error, None)
    })?;
    let status = response.status();
    if let Some(h) = hooks {
        let headers = common::response_headers(response.headers());
        tokio::select! {
            _ = cancel.cancelled() => return Err((aborted(), None)),
            () = h.0.response(status.as_u16(), headers) => {}
        }
    }
    if status.is_success() {
        return Ok(response);
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let error_type = header("x-amzn-errortype");
    let retry_after_ms = crate::error::parse_retry_after(
        header("retry-after-ms").as_deref(),
        header("retry-after").as_deref(),
        SystemTime::now(),
    );
    let body = tokio::select! {
        _ = cancel.cancelled() => return Err((aborted(), None)),
        t = response.text() => t.unwrap_or_default(),
    };
    let status = status.as_u16();
    let answer = ErrorAnswer::parse(error_type.as_deref(), &body);
    let message = http_error_message(status, &answer, &body);
    Err((
        ProviderError::Http {
            status,
            retry_after_ms,
            body,
            message,
        },
        Some(answer),
    ))
}

/// Whether `AWS_BEDROCK_FORCE_HTTP1` is `1`: the Bedrock request is sent over HTTP/1.1 only
/// (upstream 1.6 `bedrock-converse-stream.js` then uses the SDK's `NodeHttpHandler` instead of
/// its HTTP/2 one). Other values are ignored, as upstream.
pub fn force_http1(env: &AwsEnv) -> bool {
    env.get("AWS_BEDROCK_FORCE_HTTP1") == Some("1")
}

// ---------------------------------------------------------------------------------------------
// Stream handling
// ---------------------------------------------------------------------------------------------

/// A block opened by the stream, keyed by Bedrock's `contentBlockIndex`.
struct OpenBlock {
    content_index: usize,
    /// Tool calls: the input JSON text so far.
    args: Option<String>,
    /// Redacted reasoning: the base64 chunks so far, joined at the block's end.
    redacted: Option<String>,
}

#[derive(Default)]
struct State {
    open: HashMap<u64, OpenBlock>,
    error_message: Option<String>,
}

impl State {
    fn handle(
        &mut self,
        event_type: &str,
        payload: &Value,
        out: &mut AssistantMessage,
        em: &Emitter,
        model: &Model,
    ) -> Result<(), ProviderError> {
        let index = payload
            .get("contentBlockIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match event_type {
            "messageStart" if payload.get("role").and_then(Value::as_str) != Some("assistant") => {
                return Err(ProviderError::Protocol {
                    message:
                        "Unexpected assistant message start but got user message start instead"
                            .to_owned(),
                });
            }
            "contentBlockStart" => {
                if let Some(tool) = payload.pointer("/start/toolUse") {
                    let str_of =
                        |k: &str| tool.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    let ci = push_block(
                        out,
                        em,
                        Content::ToolCall(ToolCall {
                            id: str_of("toolUseId"),
                            name: str_of("name"),
                            arguments: json!({}),
                            thought_signature: None,
                            extra: Default::default(),
                        }),
                    );
                    self.open.insert(
                        index,
                        OpenBlock {
                            content_index: ci,
                            args: Some(String::new()),
                            redacted: None,
                        },
                    );
                }
            }
            "contentBlockDelta" => self.delta(index, payload.get("delta"), out, em),
            "contentBlockStop" => self.stop(index, out, em),
            "messageStop" => {
                let reason = payload
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                out.raw_stop_reason = Some(reason.to_owned());
                out.stop_reason = match reason {
                    "end_turn" | "stop_sequence" => StopReason::Stop,
                    "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                    "tool_use" => StopReason::ToolUse,
                    "" => StopReason::Error,
                    other => {
                        self.error_message = Some(format!("Provider stopped with: {other}"));
                        StopReason::Error
                    }
                };
            }
            "metadata" => {
                if let Some(u) = payload.get("usage").filter(|u| u.is_object()) {
                    let n = |k: &str| common::json_u64(u.get(k)).unwrap_or(0);
                    out.usage.input = n("inputTokens");
                    out.usage.output = n("outputTokens");
                    out.usage.cache_read = n("cacheReadInputTokens");
                    out.usage.cache_write = n("cacheWriteInputTokens");
                    out.usage.cache_write_1h =
                        u.get("cacheDetails").and_then(Value::as_array).map(|d| {
                            d.iter()
                                .filter(|x| x.get("ttl").and_then(Value::as_str) == Some("1h"))
                                .filter_map(|x| common::json_u64(x.get("inputTokens")))
                                .sum()
                        });
                    let total = n("totalTokens");
                    finish_usage(&mut out.usage, model);
                    out.usage.total_tokens = if total > 0 {
                        total
                    } else {
                        out.usage.input + out.usage.output
                    };
                    em.usage(&out.usage);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn delta(
        &mut self,
        index: u64,
        delta: Option<&Value>,
        out: &mut AssistantMessage,
        em: &Emitter,
    ) {
        let Some(delta) = delta else { return };
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            let ci = match self.open.get(&index) {
                Some(o) => o.content_index,
                None => {
                    let ci = push_block(
                        out,
                        em,
                        Content::Text(TextContent {
                            text: String::new(),
                            text_signature: None,
                            extra: Default::default(),
                        }),
                    );
                    self.open.insert(
                        index,
                        OpenBlock {
                            content_index: ci,
                            args: None,
                            redacted: None,
                        },
                    );
                    ci
                }
            };
            if let Some(Content::Text(t)) = out.content.get_mut(ci) {
                t.text.push_str(text);
                em.emit(AssistantMessageEvent::TextDelta {
                    content_index: ci,
                    delta: text.to_owned(),
                });
            }
        } else if let Some(tool) = delta.get("toolUse") {
            let Some(open) = self.open.get_mut(&index) else {
                return;
            };
            let Some(args) = open.args.as_mut() else {
                return;
            };
            let piece = tool.get("input").and_then(Value::as_str).unwrap_or("");
            args.push_str(piece);
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                tc.arguments = parse_streaming_json(args);
            }
            em.emit(AssistantMessageEvent::ToolCallDelta {
                content_index: open.content_index,
                delta: piece.to_owned(),
            });
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            let ci = match self.open.get(&index) {
                Some(o) => o.content_index,
                None => {
                    let ci = push_block(
                        out,
                        em,
                        Content::Thinking(ThinkingContent {
                            thinking: String::new(),
                            thinking_signature: Some(String::new()),
                            redacted: None,
                            extra: Default::default(),
                        }),
                    );
                    self.open.insert(
                        index,
                        OpenBlock {
                            content_index: ci,
                            args: None,
                            redacted: None,
                        },
                    );
                    ci
                }
            };
            let Some(Content::Thinking(t)) = out.content.get_mut(ci) else {
                return;
            };
            if let Some(text) = reasoning
                .get("text")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                t.thinking.push_str(text);
                em.emit(AssistantMessageEvent::ThinkingDelta {
                    content_index: ci,
                    delta: text.to_owned(),
                });
            }
            if let Some(sig) = reasoning
                .get("signature")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                if t.redacted != Some(true) {
                    t.thinking_signature
                        .get_or_insert_with(String::new)
                        .push_str(sig);
                }
            }
            if let Some(data) = reasoning
                .get("redactedContent")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                if t.redacted != Some(true) {
                    t.redacted = Some(true);
                    t.thinking_signature = Some(String::new());
                    t.thinking.push_str(REDACTED_THINKING_TEXT);
                    em.emit(AssistantMessageEvent::ThinkingDelta {
                        content_index: ci,
                        delta: REDACTED_THINKING_TEXT.to_owned(),
                    });
                }
                if let Some(open) = self.open.get_mut(&index) {
                    open.redacted.get_or_insert_with(String::new).push_str(data);
                }
            }
        }
    }

    /// Join buffered redacted chunks (base64 each) into the block's signature.
    fn flush_redacted(open: &mut OpenBlock, out: &mut AssistantMessage) {
        let Some(chunks) = open.redacted.take() else {
            return;
        };
        if let Some(Content::Thinking(t)) = out.content.get_mut(open.content_index) {
            t.thinking_signature = Some(rejoin_base64(&chunks));
        }
    }

    fn stop(&mut self, index: u64, out: &mut AssistantMessage, em: &Emitter) {
        let Some(mut open) = self.open.remove(&index) else {
            return;
        };
        Self::flush_redacted(&mut open, out);
        if let Some(args) = &open.args {
            if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                tc.arguments = parse_streaming_json(args);
            }
        }
        if let Some(e) = out
            .content
            .get(open.content_index)
            .and_then(|b| end_event(open.content_index, b))
        {
            em.emit(e);
        }
    }

    /// Settle blocks the stream left open (no end events, as upstream).
    fn flush(&mut self, out: &mut AssistantMessage) {
        for (_, mut open) in self.open.drain() {
            Self::flush_redacted(&mut open, out);
            if let Some(args) = &open.args {
                if let Some(Content::ToolCall(tc)) = out.content.get_mut(open.content_index) {
                    tc.arguments = parse_streaming_json(args);
                }
            }
        }
    }
}

/// Concatenated base64 chunks (each padded on its own) as one base64 text of all their bytes.
fn rejoin_base64(chunks: &str) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut bytes = Vec::new();
    // Chunks end at padding; split after each run of `=`.
    let mut piece = String::new();
    let mut chars = chunks.chars().peekable();
    while let Some(c) = chars.next() {
        piece.push(c);
        if c == '=' && chars.peek() != Some(&'=') {
            match engine.decode(&piece) {
                Ok(b) => bytes.extend(b),
                Err(_) => return chunks.to_owned(),
            }
            piece.clear();
        }
    }
    if !piece.is_empty() {
        match engine.decode(&piece) {
            Ok(b) => bytes.extend(b),
            Err(_) => return chunks.to_owned(),
        }
    }
    engine.encode(bytes)
}

/// The name of a stream exception (`throttlingException` → `ThrottlingException`).
fn exception_name(kind: &str) -> String {
    let mut c = kind.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => "UnknownError".to_owned(),
    }
}

enum End {
    Finished,
    Aborted,
    Failed(ProviderError),
}

/// The body of one request, its non-strict fallback and the extensions' hooks around it.
struct Bodies {
    /// The ConverseStream body.
    body: Value,
    /// The same body with every tool non-strict (sent once if Bedrock rejects strict tools).
    fallback: Option<Value>,
    /// `before_provider_headers` / `before_provider_request` / `after_provider_response`.
    hooks: Option<crate::stream::RequestHooks>,
}

async fn run(
    em: Emitter,
    client: common::LazyClient,
    model: Model,
    bodies: Bodies,
    options: StreamOptions,
    env: AwsEnv,
) {
    let Bodies {
        body,
        mut fallback,
        hooks,
    } = bodies;
    let http = client.options();
    let client = client.get();
    let started = Instant::now();
    let output = AssistantMessage::empty(&model);
    let cancel = options.cancel.clone();
    if cancel.is_cancelled() {
        em.fail(output, aborted(), started);
        return;
    }
    let api_key = options.api_key.clone().filter(|k| !k.is_empty());
    let auth = match BedrockAuth::resolve_chain(api_key.as_deref(), &env, &client).await {
        Ok(a) => a,
        Err(e) => {
            let error = ProviderError::Protocol {
                message: e.to_string(),
            };
            em.fail(output, error, started);
            return;
        }
    };
    let client = if force_http1(&env) {
        common::http1_client(&http)
    } else {
        client
    };
    let target = resolve_endpoint(&model, &env);
    let url = converse_stream_url(&target.endpoint, &model.id);
    // Upstream fires the headers hook once per request and the payload hook per body sent
    // (the strict fallback again); header changes go in before SigV4 signs them.
    let changes = common::header_changes(hooks.as_ref(), &options).await;
    let body = common::hooked_payload(hooks.as_ref(), body).await;
    let mut payload = serde_json::to_vec(&body).unwrap_or_default();
    let mut extra: Vec<(String, Option<String>)> = extra_headers(&model, &options)
        .into_iter()
        .map(|(k, v)| (k, Some(v)))
        .collect();
    extra.extend(changes);
    let max_attempts = env.max_attempts();
    let mut attempt = 1;
    let response = loop {
        let headers = match request_headers(&url, &payload, &auth, &target.region, &extra) {
            Ok(h) => h,
            Err(error) => {
                em.fail(output, error, started);
                return;
            }
        };
        let request = client.post(&url).headers(headers).body(payload.clone());
        match send_once(request, &cancel, http.request_timeout_ms, hooks.as_ref()).await {
            Ok(r) => break r,
            Err((error, answer)) => {
                // Bedrock checks the tool schemas before streaming, so resending repeats no
                // output; the retry budget restarts with the new body.
                if is_strict_tool_limit_error(&error, answer.as_ref()) && !cancel.is_cancelled() {
                    if let Some(next) = fallback.take() {
                        tracing::info!(
                            "bedrock: strict tools over the model's limits ({}); resending them non-strict",
                            error
                        );
                        mark_strict_limits_exceeded(&options);
                        let next = common::hooked_payload(hooks.as_ref(), next).await;
                        payload = serde_json::to_vec(&next).unwrap_or_default();
                        attempt = 1;
                        continue;
                    }
                }
                let retry = sdk_retryable(&error, answer.as_ref());
                match retry {
                    Some(throttling) if attempt < max_attempts => {
                        let delay = sdk_backoff(attempt, throttling);
                        attempt += 1;
                        tokio::select! {
                            _ = cancel.cancelled() => {
                                em.fail(output, aborted(), started);
                                return;
                            }
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                    _ => {
                        em.fail(output, error, started);
                        return;
                    }
                }
            }
        }
    };
    let mut output = output;
    let mut state = State::default();
    let mut decoder = EventStreamDecoder::default();
    let mut bytes = response.bytes_stream();
    let mut started_stream = false;
    let end = 'read: loop {
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    break 'read End::Failed(ProviderError::Protocol {
                        message: e.to_string(),
                    })
                }
            };
            let payload: Value =
                crate::json::parse_value(&frame.payload).unwrap_or(Value::Object(Map::new()));
            match frame.header(":message-type") {
                Some("event") => {
                    let event_type = frame.header(":event-type").unwrap_or("");
                    if event_type == "messageStart" && !started_stream {
                        started_stream = true;
                        em.start(&output);
                    }
                    if let Err(e) = state.handle(event_type, &payload, &mut output, &em, &model) {
                        break 'read End::Failed(e);
                    }
                }
                Some("exception") => {
                    let name = exception_name(frame.header(":exception-type").unwrap_or(""));
                    let message = payload
                        .get("message")
                        .or_else(|| payload.get("Message"))
                        .and_then(Value::as_str)
                        .unwrap_or("UnknownError");
                    break 'read End::Failed(ProviderError::Stream {
                        message: bedrock_error_message(&name, message),
                    });
                }
                Some("error") => {
                    let code = frame.header(":error-code").unwrap_or("UnknownError");
                    let message = frame.header(":error-message").unwrap_or("");
                    break 'read End::Failed(ProviderError::Stream {
                        message: bedrock_error_message(code, message),
                    });
                }
                _ => {}
            }
        }
        let idle = async {
            if http.idle_timeout_ms > 0 {
                tokio::time::sleep(Duration::from_millis(http.idle_timeout_ms)).await
            } else {
                std::future::pending::<()>().await
            }
        };
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => break End::Aborted,
            n = bytes.next() => n,
            _ = idle => {
                break End::Failed(ProviderError::Timeout {
                    message: common::BODY_TIMEOUT_MESSAGE.to_owned(),
                })
            }
        };
        match next {
            None if decoder.has_partial() => {
                break End::Failed(ProviderError::Disconnected {
                    message: common::BODY_TERMINATED_MESSAGE.to_owned(),
                })
            }
            None => break End::Finished,
            Some(Ok(chunk)) => decoder.push(&chunk),
            Some(Err(e)) if e.is_timeout() => {
                break End::Failed(ProviderError::Timeout {
                    message: common::BODY_TIMEOUT_MESSAGE.to_owned(),
                })
            }
            Some(Err(_)) => {
                break End::Failed(ProviderError::Disconnected {
                    message: common::BODY_TERMINATED_MESSAGE.to_owned(),
                })
            }
        }
    };
    state.flush(&mut output);
    match end {
        End::Aborted => em.fail(output, aborted(), started),
        End::Failed(error) => {
            let error = error.aborted_if(cancel.is_cancelled());
            em.fail(output, error, started)
        }
        End::Finished => {
            if cancel.is_cancelled() {
                em.fail(output, aborted(), started);
            } else if output.stop_reason == StopReason::Pending {
                let error = ProviderError::StreamEndedEarly {
                    message: "Bedrock stream ended without a stop reason".to_owned(),
                };
                em.fail(output, error, started);
            } else if matches!(output.stop_reason, StopReason::Error | StopReason::Aborted) {
                let message = state
                    .error_message
                    .take()
                    .unwrap_or_else(|| "An unknown error occurred".to_owned());
                em.fail(output, ProviderError::Stream { message }, started);
            } else {
                em.done(output, started);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, base_url: &str) -> Model {
        let mut m = crate::models::builtin_models()
            .into_iter()
            .find(|m| m.provider == "amazon-bedrock")
            .unwrap_or_else(|| panic!("no bedrock model"));
        m.id = id.to_owned();
        m.name = String::new();
        m.base_url = base_url.to_owned();
        m
    }

    #[test]
    fn endpoints_and_regions() {
        let std_url = "https://bedrock-runtime.us-east-1.amazonaws.com";
        let env = AwsEnv::from_pairs([]);
        let e = resolve_endpoint(&model("a", std_url), &env);
        assert_eq!(
            (e.endpoint.as_str(), e.region.as_str()),
            (std_url, "us-east-1")
        );
        let env = AwsEnv::from_pairs([("AWS_REGION", "eu-west-1")]);
        let e = resolve_endpoint(&model("a", std_url), &env);
        assert_eq!(
            e.endpoint,
            "https://bedrock-runtime.eu-west-1.amazonaws.com"
        );
        let env = AwsEnv::from_pairs([
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9/x/"),
        ]);
        let e = resolve_endpoint(&model("a", std_url), &env);
        assert_eq!(e.endpoint, "http://127.0.0.1:9/x");
        let e = resolve_endpoint(&model("a", "http://127.0.0.1:9/bedrock"), &env);
        assert_eq!(
            (e.endpoint.as_str(), e.region.as_str()),
            ("http://127.0.0.1:9/bedrock", "eu-west-1")
        );
        let arn = "arn:aws:bedrock:ap-south-1:123:inference-profile/x";
        assert_eq!(
            resolve_endpoint(&model(arn, std_url), &env).region,
            "ap-south-1"
        );
        assert_eq!(
            converse_stream_url("http://h", "amazon.nova-lite-v1:0"),
            "http://h/model/amazon.nova-lite-v1%3A0/converse-stream"
        );
    }

    #[test]
    fn credentials_order() {
        let env = AwsEnv::from_pairs([
            ("AWS_BEARER_TOKEN_BEDROCK", "tok"),
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ]);
        assert_eq!(
            BedrockAuth::resolve_direct(Some(AUTHENTICATED_MARKER), &env),
            Some(BedrockAuth::Bearer("tok".into()))
        );
        let env = AwsEnv::from_pairs([("AWS_ACCESS_KEY_ID", "id"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        assert!(matches!(
            BedrockAuth::resolve_direct(None, &env),
            Some(BedrockAuth::SigV4(k)) if k.access_key_id == "id" && k.session_token.is_none()
        ));
        assert_eq!(
            BedrockAuth::resolve_direct(None, &AwsEnv::from_pairs([])),
            None
        );
        let ini = "[default]\naws_access_key_id = A\n\n[profile dev]\nregion = eu-north-1\n";
        let s = ini_section(ini, "profile dev").unwrap_or_default();
        assert_eq!(s.get("region").map(String::as_str), Some("eu-north-1"));
    }

    #[test]
    fn frames_roundtrip_and_crc() {
        // A message built by hand: one string header, payload `{}`.
        let mut head = vec![11u8];
        head.extend_from_slice(b":event-type");
        head.push(7);
        head.extend_from_slice(&4u16.to_be_bytes());
        head.extend_from_slice(b"ping");
        let payload = b"{}";
        let total = 12 + head.len() + payload.len() + 4;
        let mut msg = Vec::new();
        msg.extend_from_slice(&(total as u32).to_be_bytes());
        msg.extend_from_slice(&(head.len() as u32).to_be_bytes());
        let c = crc32fast::hash(&msg);
        msg.extend_from_slice(&c.to_be_bytes());
        msg.extend_from_slice(&head);
        msg.extend_from_slice(payload);
        let c = crc32fast::hash(&msg);
        msg.extend_from_slice(&c.to_be_bytes());
        let mut d = EventStreamDecoder::default();
        d.push(&msg[..10]);
        assert_eq!(d.next_frame(), Ok(None));
        d.push(&msg[10..]);
        let f = d
            .next_frame()
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("frame"));
        assert_eq!(f.header(":event-type"), Some("ping"));
        assert_eq!(f.payload, b"{}");
        let mut bad = msg.clone();
        let n = bad.len();
        bad[n - 6] ^= 1;
        let mut d = EventStreamDecoder::default();
        d.push(&bad);
        assert_eq!(d.next_frame(), Err(FrameError::MessageCrc));
    }

    #[test]
    fn error_texts() {
        let text = |status, error_type, body| {
            http_error_message(status, &ErrorAnswer::parse(error_type, body), body)
        };
        assert_eq!(
            text(
                429,
                Some("ThrottlingException:http://internal.amazon.com/"),
                r#"{"message":"Too many requests"}"#
            ),
            "Throttling error: Too many requests"
        );
        assert_eq!(
            text(403, Some("AccessDeniedException"), r#"{"message":"no"}"#),
            "AccessDeniedException: no"
        );
        assert_eq!(
            text(
                400,
                None,
                r#"{"__type":"com.amazon#ValidationException","Message":"m"}"#
            ),
            "Validation error: m"
        );
        assert_eq!(text(502, None, "bad gateway"), "502: bad gateway");
        let env = AwsEnv::from_pairs([("AWS_BEDROCK_FORCE_HTTP1", "1")]);
        assert!(force_http1(&env));
        assert!(!force_http1(&AwsEnv::from_pairs([(
            "AWS_BEDROCK_FORCE_HTTP1",
            "true"
        )])));
        assert_eq!(exception_name("validationException"), "ValidationException");
        assert_eq!(rejoin_base64("AAE=AgM="), "AAECAw==");
    }
}
