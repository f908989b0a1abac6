//! `azure-openai-responses`: the OpenAI Responses API on Azure OpenAI, streaming
//! `POST {base}/responses?api-version={version}` with an `api-key` header.
//!
//! Source: upstream 1.6 `@earendil-works/pi-ai` `dist/api/azure-openai-responses.js` and
//! `azure-openai-config.js`, checked against what upstream 1.6 sent to the project's fake
//! server (`crates/coding-agent/tests/data/responses/azure_*.json`). Request conversion and
//! stream reading are those of [`super::openai_responses`].
//!
//! * Base URL: `AZURE_OPENAI_BASE_URL`, else `https://<AZURE_OPENAI_RESOURCE_NAME>.openai.azure.com/openai/v1`,
//!   else the model's `baseUrl`; an Azure host (`*.openai.azure.com`,
//!   `*.cognitiveservices.azure.com`, `*.ai.azure.com`) with an empty, `/openai` or
//!   `/openai/v1/responses` path gets the path `/openai/v1`.
//! * API version: `AZURE_OPENAI_API_VERSION`, default `v1`.
//! * Deployment (the body's `model`): the entry for the model id in
//!   `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` (`id=deployment,id2=deployment2`), else the model id.
//! * The key (`options.apiKey` or the provider's environment key) goes in `api-key`; without
//!   one the request fails with `No API key for provider: <provider>`.
//! * `supportsStrictMode` defaults to `true` (tools carry `strict: false`); `prompt_cache_key`
//!   is the session id unless compat `promptCacheKeyMode` is `disabled`.

use super::common::{self, apply_headers, event_stream, extra_headers, resolve_api_key, Emitter};
use super::openai_responses::{
    clamp_cache_key, convert_input, convert_tools, max_output_tokens, off_effort, reasoning_effort,
    run, Compat, Flavor, ResponsesRequest,
};
use super::HttpOptions;
use crate::error::ProviderError;
use crate::stream::{AssistantStream, Provider, RequestTuning, StreamOptions};
use crate::types::{AssistantMessage, Context, Model};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde_json::{json, Map, Value};
use std::time::Instant;

/// The `api` value of this adapter.
pub const API: &str = "azure-openai-responses";

/// Default `api-version` query value.
const DEFAULT_API_VERSION: &str = "v1";

/// Providers whose `call|item` tool-call ids keep their item part on replay.
const AZURE_TOOL_CALL_PROVIDERS: [&str; 4] = ["openai", "openai-codex", "opencode", "azure"];

/// The `azure-openai-responses` adapter (one HTTP request per [`Provider::stream`]).
#[derive(Debug, Clone)]
pub struct AzureOpenAiResponses {
    client: common::LazyClient,
    /// Environment lookup (`AZURE_OPENAI_*`); the process environment unless a test sets it.
    env: fn(&str) -> Option<String>,
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Default for AzureOpenAiResponses {
    fn default() -> Self {
        AzureOpenAiResponses {
            client: common::LazyClient::Default,
            env: process_env,
        }
    }
}

impl AzureOpenAiResponses {
    /// The adapter over a new HTTP client with `http`'s timeouts and retries.
    pub fn with_http(http: &HttpOptions) -> Self {
        Self::with_lazy(common::LazyClient::configured(http))
    }

    /// The adapter over a lazily built client shared with other adapters.
    pub(crate) fn with_lazy(client: common::LazyClient) -> Self {
        AzureOpenAiResponses {
            client,
            env: process_env,
        }
    }
}

/// The deployment for `model_id` in a `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` value
/// (`id=deployment` pairs separated by commas; blanks and malformed pairs skipped).
pub fn deployment_from_map(map: &str, model_id: &str) -> Option<String> {
    map.split(',').find_map(|entry| {
        let (id, dep) = entry.trim().split_once('=')?;
        let (id, dep) = (id.trim(), dep.trim());
        (!id.is_empty() && !dep.is_empty() && id == model_id).then(|| dep.to_owned())
    })
}

/// The normalized base URL (see the module docs), or upstream's error text.
pub fn azure_base_url(
    model_base_url: &str,
    base_url_env: Option<&str>,
    resource_env: Option<&str>,
) -> Result<String, String> {
    let chosen = base_url_env
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .or_else(|| resource_env.map(|r| format!("https://{r}.openai.azure.com/openai/v1")))
        .or_else(|| (!model_base_url.is_empty()).then(|| model_base_url.to_owned()))
        .ok_or_else(|| {
            "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or \
             AZURE_OPENAI_RESOURCE_NAME, or pass azureBaseUrl, azureResourceName, or model.baseUrl."
                .to_owned()
        })?;
    let trimmed = chosen.trim().trim_end_matches('/');
    let mut url = reqwest::Url::parse(trimmed)
        .map_err(|_| format!("Invalid Azure OpenAI base URL: {chosen}"))?;
    let host = url.host_str().unwrap_or("");
    let azure = [
        ".openai.azure.com",
        ".cognitiveservices.azure.com",
        ".ai.azure.com",
    ]
    .iter()
    .any(|h| host.ends_with(h));
    let path = url.path().trim_end_matches('/').to_owned();
    if azure && ["", "/", "/openai", "/openai/v1/responses"].contains(&path.as_str()) {
        url.set_path("/openai/v1");
        url.set_query(None);
    }
    Ok(url.to_string().trim_end_matches('/').to_owned())
}

impl Provider for AzureOpenAiResponses {
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
        let env = self.env;
        let prepared = prepare(&model, context, &options, env).map(|mut r| {
            r.hooks = tuning.hooks;
            r
        });
        let client = self.client.clone();
        event_stream(move |em| async move {
            match prepared {
                Ok(request) => run(em, client, model, request, options).await,
                Err(message) => fail_now(&em, &model, message),
            }
        })
    }
}

/// End the stream at once with `message` (a request that could not be built).
pub(crate) fn fail_now(em: &Emitter, model: &Model, message: String) {
    em.fail(
        AssistantMessage::empty(model),
        ProviderError::Stream { message },
        Instant::now(),
    );
}

fn prepare(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    env: fn(&str) -> Option<String>,
) -> Result<ResponsesRequest, String> {
    let deployment = env("AZURE_OPENAI_DEPLOYMENT_NAME_MAP")
        .and_then(|m| deployment_from_map(&m, &model.id))
        .unwrap_or_else(|| model.id.clone());
    let key = resolve_api_key(model, options)
        .or_else(|| env("AZURE_OPENAI_API_KEY"))
        .ok_or_else(|| format!("No API key for provider: {}", model.provider))?;
    let base = azure_base_url(
        &model.base_url,
        env("AZURE_OPENAI_BASE_URL").as_deref(),
        env("AZURE_OPENAI_RESOURCE_NAME").as_deref(),
    )?;
    let version = env("AZURE_OPENAI_API_VERSION").unwrap_or_else(|| DEFAULT_API_VERSION.into());
    let url = format!("{base}/responses?api-version={version}");

    let compat = Compat::resolve(model, true);
    let mut body = Map::new();
    body.insert("model".into(), json!(deployment));
    body.insert(
        "input".into(),
        Value::Array(convert_input(
            model,
            context,
            &compat,
            &AZURE_TOOL_CALL_PROVIDERS,
        )),
    );
    body.insert("stream".into(), json!(true));
    if compat.prompt_cache_key {
        if let Some(session) = options.session_id.as_deref() {
            body.insert("prompt_cache_key".into(), json!(clamp_cache_key(session)));
        }
    }
    body.insert("store".into(), json!(false));
    body.insert(
        "max_output_tokens".into(),
        json!(max_output_tokens(model, options)),
    );
    if !context.tools.is_empty() {
        body.insert(
            "tools".into(),
            convert_tools(context, compat.supports_strict_mode, json!(false)),
        );
    }
    if model.reasoning {
        match reasoning_effort(model, options) {
            Some(effort) => {
                body.insert(
                    "reasoning".into(),
                    json!({"effort": effort, "summary": "auto"}),
                );
                body.insert("include".into(), json!(["reasoning.encrypted_content"]));
            }
            None => {
                if let Some(effort) = off_effort(model) {
                    body.insert("reasoning".into(), json!({"effort": effort}));
                }
            }
        }
    }

    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(&key) {
        headers.insert(HeaderName::from_static("api-key"), v);
    }
    apply_headers(&mut headers, extra_headers(model, options));
    Ok(ResponsesRequest {
        url,
        headers,
        body: Value::Object(body),
        flavor: Flavor::Azure,
        zstd: false,
        hooks: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_map_and_base_url() {
        let map = " gpt-5=prod-gpt5 , bad, o3=o3-dep";
        assert_eq!(deployment_from_map(map, "o3").as_deref(), Some("o3-dep"));
        assert_eq!(
            deployment_from_map(map, "gpt-5").as_deref(),
            Some("prod-gpt5")
        );
        assert_eq!(deployment_from_map(map, "x"), None);
        assert_eq!(
            azure_base_url("", None, Some("res")).unwrap(),
            "https://res.openai.azure.com/openai/v1"
        );
        assert_eq!(
            azure_base_url("", Some("https://x.openai.azure.com/"), None).unwrap(),
            "https://x.openai.azure.com/openai/v1"
        );
        assert_eq!(
            azure_base_url("http://127.0.0.1:9/v1", None, None).unwrap(),
            "http://127.0.0.1:9/v1"
        );
        assert!(azure_base_url("", None, None)
            .unwrap_err()
            .starts_with("Azure OpenAI base URL is required."));
    }
}
