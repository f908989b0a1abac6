//! `models.json` and the model registry (spec config.md §4–§5; messages-and-models.md §7;
//! upstream `core/model-config.ts`, `core/model-registry.ts`).
//!
//! ```json
//! {"providers": {"<name>": {
//!   "name"?, "baseUrl"?, "api"?, "apiKey"?, "headers"?: {"k": "v"}, "authHeader"?: bool,
//!   "compat"?: {…},
//!   "models"?: [{"id", "name"?, "api"?, "baseUrl"?, "reasoning"?, "thinkingLevelMap"?,
//!                "input"?, "cost"?, "contextWindow"?, "maxTokens"?, "headers"?, "compat"?,
//!                "path"?}],
//!   "modelOverrides"?: {"<built-in id>": {"name"?, "reasoning"?, "thinkingLevelMap"?, "input"?,
//!                "cost"? (partial), "contextWindow"?, "maxTokens"?, "headers"?, "compat"?}}}}}
//! ```
//!
//! Registry order = built-in catalogue order, then custom models in file order (a custom model
//! with the id of a built-in model of the same provider replaces it and moves to the end), then
//! the local GGUF models found in `<agent dir>/models/` (provider [`LOCAL_PROVIDER`], issue 3;
//! only with the `local` cargo feature), skipping any whose provider/id is already listed.
//!
//! Local GGUF models (api [`LOCAL_API`], `"local-gguf"`) run in-process and need no
//! credentials: they always count as available. In `models.json` such a model names its file by
//! `path` (or `baseUrl`, a plain path or `file://` URL; the model's value wins over the
//! provider's); `~` is expanded and a relative path is relative to the agent directory. Without
//! either, the file is `<agent dir>/models/<id>.gguf`. Defaults for such models: `contextWindow`
//! from the file's metadata (`<arch>.context_length`, at most 32768; 8192 when unknown),
//! `maxTokens` = min(contextWindow, 4096).
//! Any problem with the file leaves only the built-in catalogue, with the error kept in
//! [`ModelRegistry::error`] and warned about on stderr.
//!
//! Credentials for a provider, first hit wins (spec config.md §5.3): runtime key (`--api-key`),
//! `auth.json` (`api_key`, then an unexpired OAuth token), the provider's `models.json`
//! `apiKey`, environment variables ([`env_api_key`]). Keys and header values are resolved at
//! request time ([`ModelRegistry::request_auth`]); `!command` results of `auth.json` are cached
//! for the process lifetime, those of `models.json` are not.

use super::auth::AuthStorage;
use super::value::{resolve_config_value_uncached, resolve_headers};
use super::{read_json_file, warn, JsonFile};
use pi_ai::{Model, ModelCost};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Finds the adapter for a model's `api` (built by the composition root from `crate::ai`'s
/// adapters and the extension providers; `None`: no adapter for that API).
pub type ProviderResolver =
    std::sync::Arc<dyn Fn(&Model) -> Option<std::sync::Arc<dyn pi_ai::Provider>> + Send + Sync>;

/// Defaults for custom models (spec config.md §4).
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Default `maxTokens` of a custom model.
pub const DEFAULT_MAX_TOKENS: u64 = 16_384;

/// The `api` of in-process GGUF models (`pi_local::API`, issue 3). Models with this api need no
/// credentials.
pub const LOCAL_API: &str = "local-gguf";

/// The provider of the GGUF files discovered in `<agent dir>/models/` (`pi_local::PROVIDER`).
pub const LOCAL_PROVIDER: &str = "local";

/// Context window of a local GGUF model when neither `models.json` nor the file states one, in
/// tokens (`pi_local::DEFAULT_CONTEXT_WINDOW`).
pub const LOCAL_DEFAULT_CONTEXT_WINDOW: u64 = 8192;

/// Upper bound on the default context window of a local GGUF model, in tokens
/// (`pi_local::MAX_CONTEXT_WINDOW`; the KV cache is allocated for the whole window).
pub const LOCAL_MAX_CONTEXT_WINDOW: u64 = 32_768;

/// Upper bound on the default `maxTokens` of a local GGUF model (`pi_local::MAX_OUTPUT_TOKENS`).
pub const LOCAL_MAX_OUTPUT_TOKENS: u64 = 4096;

/// Whether `model` runs in-process (api [`LOCAL_API`]) and therefore needs no credentials.
pub fn is_keyless(model: &Model) -> bool {
    model.api == LOCAL_API
}

/// The `api` of virtual models (upstream 1.6 `core/virtual-models.js` `VIRTUAL_MODEL_API`):
/// catalog entries that a router maps to a physical model per request.
pub const VIRTUAL_API: &str = "pi-virtual";

/// Whether `model` is a virtual model ([`VIRTUAL_API`]).
pub fn is_virtual(model: &Model) -> bool {
    model.api == VIRTUAL_API
}

/// Upstream's thinking levels, in order (the keys of a virtual model's `thinkingLevelMap`).
const VIRTUAL_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The catalog entry of a virtual model (upstream `createVirtualModel`): api `pi-virtual`,
/// empty `baseUrl`, `reasoning` when a level other than `off` is offered, a `thinkingLevelMap`
/// naming the offered levels (others `null`), input default text and images, zero cost,
/// limits 0 when unset.
pub fn virtual_model(
    provider: &str,
    id: &str,
    name: Option<&str>,
    levels: Option<&[String]>,
    context_window: Option<f64>,
    max_tokens: Option<f64>,
    input: Option<&[String]>,
) -> Model {
    let off = ["off".to_string()];
    let levels = levels.unwrap_or(&off);
    let map: Map<String, Value> = VIRTUAL_LEVELS
        .iter()
        .map(|l| {
            let v = if levels.iter().any(|x| x == l) {
                Value::String((*l).to_string())
            } else {
                Value::Null
            };
            ((*l).to_string(), v)
        })
        .collect();
    let mut m = Model::unknown();
    m.id = id.to_string();
    m.name = name.unwrap_or(id).to_string();
    m.api = VIRTUAL_API.to_string();
    m.provider = provider.to_string();
    m.base_url = String::new();
    m.reasoning = levels.iter().any(|l| l != "off");
    m.thinking_level_map = Some(map);
    m.input = input
        .map(<[String]>::to_vec)
        .unwrap_or_else(|| vec!["text".into(), "image".into()]);
    m.cost = Default::default();
    m.context_window = context_window
        .filter(|n| n.is_finite() && *n > 0.0)
        .map_or(0, |n| n as u64);
    m.max_tokens = max_tokens
        .filter(|n| n.is_finite() && *n > 0.0)
        .map_or(0, |n| n as u64);
    m.headers = None;
    m.compat = None;
    m.input_limits = None;
    m.extra = Map::new();
    m
}

/// The local GGUF models in `models_dir` (`pi_local::discover_models`: every `*.gguf`, sorted
/// by file name, provider [`LOCAL_PROVIDER`], id = file stem, `baseUrl` = the file's path).
/// Always empty when built without the `local` cargo feature.
pub fn discover_local_models(models_dir: &Path) -> Vec<Model> {
    #[cfg(feature = "local")]
    {
        pi_local::discover_models(models_dir)
    }
    #[cfg(not(feature = "local"))]
    {
        let _ = models_dir;
        Vec::new()
    }
}

/// `<arch>.context_length` of the GGUF file at `path`, when it is readable (`local` feature
/// only; `None` otherwise).
fn gguf_context_length(path: &Path) -> Option<u64> {
    #[cfg(feature = "local")]
    {
        pi_local::GgufInfo::read(path)?.context_length
    }
    #[cfg(not(feature = "local"))]
    {
        let _ = path;
        None
    }
}

/// The whole built-in model catalogue (`pi_ai::models::builtin_models`: every provider's file
/// parsed), in catalogue order.
pub fn builtin_catalogue() -> Vec<Model> {
    pi_ai::models::builtin_models()
}

/// The API key a provider gets from the environment (spec config.md §2.2;
/// `pi_ai::env_keys::env_api_key`).
pub fn env_api_key(provider: &str) -> Option<String> {
    pi_ai::env_keys::env_api_key(provider)
}

/// Per-model cost as written in `models.json` (every rate optional; missing = 0 for custom
/// models, unchanged for overrides).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostConfig {
    /// $ per million input tokens.
    pub input: Option<f64>,
    /// $ per million output tokens.
    pub output: Option<f64>,
    /// $ per million cache-read tokens.
    pub cache_read: Option<f64>,
    /// $ per million cache-write tokens.
    pub cache_write: Option<f64>,
}

/// One entry of a provider's `models` array, or (without `id`/`api`/`baseUrl`) of its
/// `modelOverrides` map.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelConfig {
    /// Model id (required in `models`, ignored in `modelOverrides`).
    #[serde(default)]
    pub id: String,
    /// Display name (default: the id).
    pub name: Option<String>,
    /// Wire API (default: the provider's).
    pub api: Option<String>,
    /// Endpoint (default: the provider's).
    pub base_url: Option<String>,
    /// Supports thinking (default false).
    pub reasoning: Option<bool>,
    /// Level → provider value, `null` = unsupported (messages-and-models.md §8.1).
    pub thinking_level_map: Option<Map<String, Value>>,
    /// `"text"` / `"image"` (default `["text"]`).
    pub input: Option<Vec<String>>,
    /// `inputLimits` (upstream 1.6 `ModelInputLimits`; image resize limits), kept opaque; an
    /// override merges it over the built-in value (`images` and `images.resize` key by key).
    pub input_limits: Option<Value>,
    /// Prices.
    pub cost: Option<CostConfig>,
    /// Context window in tokens (default 128000; must be > 0).
    pub context_window: Option<f64>,
    /// Max output tokens (default 16384; must be > 0).
    pub max_tokens: Option<f64>,
    /// Extra request headers (values resolved at request time).
    pub headers: Option<Map<String, Value>>,
    /// API compatibility knobs, merged over the provider's.
    pub compat: Option<Map<String, Value>>,
    /// For api `"local-gguf"` models: the GGUF file (absolute, `~/…`, or relative to the agent
    /// directory); takes precedence over `baseUrl`. Ignored for other apis.
    pub path: Option<String>,
}

/// One provider entry of `models.json`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfig {
    /// Display name (newer key).
    pub name: Option<String>,
    /// Endpoint for its models (also overrides built-in models of this provider).
    pub base_url: Option<String>,
    /// Default wire API of its models.
    pub api: Option<String>,
    /// Key source: literal, env var name or `!command`.
    pub api_key: Option<String>,
    /// Extra request headers for all its models (values resolved at request time).
    pub headers: Option<Map<String, Value>>,
    /// Adds `Authorization: Bearer <key>`; a request without a key then fails.
    #[serde(default)]
    pub auth_header: bool,
    /// API compatibility knobs for all its models.
    pub compat: Option<Map<String, Value>>,
    /// Custom models.
    pub models: Option<Vec<ModelConfig>>,
    /// Patches of built-in models, by id.
    pub model_overrides: Option<Map<String, Value>>,
}

/// A parsed and validated `models.json` (provider order preserved).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelsConfig {
    /// `(provider name, config)` in file order.
    pub providers: Vec<(String, ProviderConfig)>,
}

impl ModelsConfig {
    /// Reads and validates `path`. `Ok(None)` when the file does not exist; `Err` carries the
    /// user-facing error (`Failed to parse models.json: …` / `Invalid models.json schema: …` /
    /// `Invalid models.json: …`, each followed by `\n\nFile: <path>`).
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        match read_json_file(path) {
            JsonFile::Missing => Ok(None),
            JsonFile::Invalid(e) => Err(format!(
                "Failed to parse models.json: {e}\n\nFile: {}",
                path.display()
            )),
            JsonFile::Parsed(v) => Self::from_value(&v)
                .map(Some)
                .map_err(|e| format!("{e}\n\nFile: {}", path.display())),
        }
    }

    /// Validates a parsed document (errors without the `File:` trailer).
    pub fn from_value(v: &Value) -> Result<Self, String> {
        let schema_err = |msg: String| format!("Invalid models.json schema:\n  - {msg}");
        let providers = v
            .as_object()
            .and_then(|o| o.get("providers"))
            .ok_or_else(|| schema_err("providers: required object".into()))?
            .as_object()
            .ok_or_else(|| schema_err("providers: must be an object".into()))?;
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for (name, raw) in providers {
            let cfg: ProviderConfig = serde_json::from_value(raw.clone())
                .map_err(|e| schema_err(format!("providers.{name}: {e}")))?;
            validate_provider(name, &cfg, &mut problems);
            out.push((name.clone(), cfg));
        }
        if !problems.is_empty() {
            return Err(format!(
                "Invalid models.json:\n  - {}",
                problems.join("\n  - ")
            ));
        }
        Ok(ModelsConfig { providers: out })
    }

    /// The config of provider `name`.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }
}

fn validate_provider(name: &str, p: &ProviderConfig, problems: &mut Vec<String>) {
    let configures_something = p.models.is_some()
        || p.base_url.is_some()
        || p.compat.is_some()
        || p.model_overrides.is_some()
        || p.api_key.is_some()
        || p.headers.is_some();
    if !configures_something {
        problems.push(format!(
            "provider \"{name}\" configures nothing: give it models, baseUrl, apiKey, headers, compat or modelOverrides"
        ));
    }
    for m in p.models.iter().flatten() {
        if m.id.is_empty() {
            problems.push(format!("provider \"{name}\": a model has no \"id\""));
            continue;
        }
        let local = m.api.as_deref().or(p.api.as_deref()) == Some(LOCAL_API);
        let defaults = builtin_defaults(name, &m.id, m.api.as_deref().or(p.api.as_deref()));
        if !local && m.base_url.is_none() && p.base_url.is_none() && defaults.is_none() {
            problems.push(format!(
                "provider \"{name}\", model \"{}\": no \"baseUrl\" on the model or the provider",
                m.id
            ));
        }
        if m.api.is_none() && p.api.is_none() && defaults.is_none() {
            problems.push(format!(
                "provider \"{name}\", model \"{}\": no \"api\" on the model or the provider",
                m.id
            ));
        }
        check_positive(name, &m.id, "contextWindow", m.context_window, problems);
        check_positive(name, &m.id, "maxTokens", m.max_tokens, problems);
    }
    for (id, raw) in p.model_overrides.iter().flatten() {
        if let Err(e) = serde_json::from_value::<ModelConfig>(raw.clone()) {
            problems.push(format!("provider \"{name}\", modelOverrides.{id}: {e}"));
        }
    }
}

fn check_positive(
    provider: &str,
    id: &str,
    field: &str,
    v: Option<f64>,
    problems: &mut Vec<String>,
) {
    if let Some(n) = v {
        if n.is_nan() || n <= 0.0 {
            problems.push(format!(
                "provider \"{provider}\", model \"{id}\": \"{field}\" must be greater than 0"
            ));
        }
    }
}

fn to_u64(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// Shallow object merge: `over`'s keys win.
fn merge_maps(
    base: Option<&Map<String, Value>>,
    over: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    match (base, over) {
        (None, None) => None,
        (Some(b), None) => Some(b.clone()),
        (None, Some(o)) => Some(o.clone()),
        (Some(b), Some(o)) => {
            let mut out = b.clone();
            for (k, v) in o {
                // Routing objects merge one level deeper (spec config.md §4).
                let merged = match (out.get(k), v) {
                    (Some(Value::Object(bv)), Value::Object(ov)) => {
                        let mut m = bv.clone();
                        m.extend(ov.clone());
                        Value::Object(m)
                    }
                    _ => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Some(out)
        }
    }
}

/// What a custom model of a built-in provider takes when neither it nor its provider entry
/// names an `api` or `baseUrl` (upstream 1.6 `provider-composer.js` `findModelDefaults`): those
/// of the provider's built-in model with the same id, else of one with the same api, else of
/// its first `openai-completions` model, else of its first model; `None` for a provider that
/// is not built in. Returns `(api, base_url)`.
fn builtin_defaults(provider: &str, id: &str, api: Option<&str>) -> Option<(String, String)> {
    let models = pi_ai::models::provider_models(provider);
    models
        .iter()
        .find(|m| m.id == id)
        .or_else(|| api.and_then(|a| models.iter().find(|m| m.api == a)))
        .or_else(|| models.iter().find(|m| m.api == "openai-completions"))
        .or_else(|| models.first())
        .map(|m| (m.api.clone(), m.base_url.clone()))
}

fn custom_model(
    provider: &str,
    p: &ProviderConfig,
    m: &ModelConfig,
    agent_dir: Option<&Path>,
) -> Model {
    let named_api = m.api.clone().or_else(|| p.api.clone());
    if named_api.as_deref() == Some(LOCAL_API) {
        return local_custom_model(provider, p, m, agent_dir);
    }
    let defaults = if named_api.is_none() || (m.base_url.is_none() && p.base_url.is_none()) {
        builtin_defaults(provider, &m.id, named_api.as_deref())
    } else {
        None
    };
    let mut model = custom_model_fields(provider, p, m);
    if model.api.is_empty() {
        model.api = defaults.as_ref().map(|d| d.0.clone()).unwrap_or_default();
    }
    model.base_url = m
        .base_url
        .clone()
        .or_else(|| p.base_url.clone())
        .or_else(|| defaults.map(|d| d.1))
        .unwrap_or_default();
    model.context_window = m.context_window.map_or(DEFAULT_CONTEXT_WINDOW, to_u64);
    model.max_tokens = m.max_tokens.map_or(DEFAULT_MAX_TOKENS, to_u64);
    model
}

/// A `models.json` model with api `"local-gguf"`: `baseUrl` becomes the GGUF file's path
/// (model `path`, model `baseUrl`, provider `baseUrl`, first set wins; empty = look up
/// `<models dir>/<id>.gguf` at request time), defaults as in the module docs.
fn local_custom_model(
    provider: &str,
    p: &ProviderConfig,
    m: &ModelConfig,
    agent_dir: Option<&Path>,
) -> Model {
    let mut model = custom_model_fields(provider, p, m);
    let file = m
        .path
        .as_deref()
        .or(m.base_url.as_deref())
        .or(p.base_url.as_deref())
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| local_file_path(f, agent_dir));
    model.base_url = file
        .as_ref()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let window = m.context_window.map(to_u64).unwrap_or_else(|| {
        file.as_deref()
            .and_then(gguf_context_length)
            .filter(|&n| n > 0)
            .map_or(LOCAL_DEFAULT_CONTEXT_WINDOW, |n| {
                n.min(LOCAL_MAX_CONTEXT_WINDOW)
            })
    });
    model.context_window = window;
    model.max_tokens = m
        .max_tokens
        .map_or(window.min(LOCAL_MAX_OUTPUT_TOKENS), to_u64);
    model
}

/// The fields of a custom model that do not depend on its api.
fn custom_model_fields(provider: &str, p: &ProviderConfig, m: &ModelConfig) -> Model {
    let cost = m.cost.clone().unwrap_or_default();
    Model {
        id: m.id.clone(),
        name: m.name.clone().unwrap_or_else(|| m.id.clone()),
        api: m.api.clone().or_else(|| p.api.clone()).unwrap_or_default(),
        provider: provider.to_string(),
        base_url: String::new(),
        reasoning: m.reasoning.unwrap_or(false),
        thinking_level_map: m.thinking_level_map.clone(),
        input: m.input.clone().unwrap_or_else(|| vec!["text".into()]),
        input_limits: m.input_limits.clone(),
        cost: ModelCost {
            input: cost.input.unwrap_or(0.0),
            output: cost.output.unwrap_or(0.0),
            cache_read: cost.cache_read.unwrap_or(0.0),
            cache_write: cost.cache_write.unwrap_or(0.0),
            tiers: None,
        },
        context_window: DEFAULT_CONTEXT_WINDOW,
        max_tokens: DEFAULT_MAX_TOKENS,
        headers: None,
        compat: merge_maps(p.compat.as_ref(), m.compat.as_ref()),
        extra: Map::new(),
    }
}

/// A GGUF file named in `models.json`: `file://` stripped, `~` expanded, a relative path joined
/// to the agent directory (when known).
fn local_file_path(file: &str, agent_dir: Option<&Path>) -> PathBuf {
    let file = file.strip_prefix("file://").unwrap_or(file);
    let path = super::expand_home(file);
    match agent_dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path,
    }
}

fn apply_override(model: &mut Model, o: &ModelConfig) {
    if let Some(n) = &o.name {
        model.name = n.clone();
    }
    if let Some(r) = o.reasoning {
        model.reasoning = r;
    }
    if let Some(map) = &o.thinking_level_map {
        model.thinking_level_map = merge_maps(model.thinking_level_map.as_ref(), Some(map));
    }
    if let Some(i) = &o.input {
        model.input = i.clone();
    }
    if let Some(c) = &o.cost {
        let t = &mut model.cost;
        t.input = c.input.unwrap_or(t.input);
        t.output = c.output.unwrap_or(t.output);
        t.cache_read = c.cache_read.unwrap_or(t.cache_read);
        t.cache_write = c.cache_write.unwrap_or(t.cache_write);
    }
    if let Some(n) = o.context_window {
        model.context_window = to_u64(n);
    }
    if let Some(n) = o.max_tokens {
        model.max_tokens = to_u64(n);
    }
    if o.compat.is_some() {
        model.compat = merge_maps(model.compat.as_ref(), o.compat.as_ref());
    }
    if let Some(limits) = &o.input_limits {
        model.input_limits = Some(merge_input_limits(model.input_limits.as_ref(), limits));
    }
}

/// Upstream's `mergeInputLimits`: top-level keys of `over` win, `images` merges key by key and
/// `images.resize` likewise.
fn merge_input_limits(base: Option<&Value>, over: &Value) -> Value {
    let (Some(Value::Object(base)), Value::Object(over)) = (base, over) else {
        return over.clone();
    };
    let mut out = base.clone();
    for (k, v) in over {
        let merged = match (k.as_str(), base.get(k), v) {
            ("images", Some(Value::Object(bi)), Value::Object(oi)) => {
                let mut images = bi.clone();
                for (ik, iv) in oi {
                    let merged = match (ik.as_str(), bi.get(ik), iv) {
                        ("resize", Some(Value::Object(br)), Value::Object(or)) => {
                            let mut r = br.clone();
                            r.extend(or.clone());
                            Value::Object(r)
                        }
                        _ => iv.clone(),
                    };
                    images.insert(ik.clone(), merged);
                }
                Value::Object(images)
            }
            _ => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Value::Object(out)
}

/// Key and headers for one request (spec config.md §4 headers, §5.3 key precedence).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestAuth {
    /// The resolved API key, if any source has one.
    pub api_key: Option<String>,
    /// Resolved extra headers: the model's catalogue headers, then the provider's `models.json`
    /// headers, then the model's (later wins), plus `Authorization` when `authHeader` is set.
    pub headers: Map<String, Value>,
    /// The model runs in-process ([`is_keyless`]) and needs neither key nor headers.
    pub keyless: bool,
    /// A base URL the credential implies for this request (GitHub Copilot OAuth tokens).
    pub base_url: Option<String>,
    /// Credentials are configured but could not be made usable for this request (an OAuth
    /// refresh failed): the request fails with this text, as upstream's assistant error.
    pub error: Option<String>,
}

/// Where a model sits in registry order: built-ins by provider rank then catalogue position,
/// then custom models in `models.json` order, then discovered local models.
type OrderKey = (u8, usize, usize);

/// One provider's models, assembled on first use.
#[derive(Debug, Clone, Default)]
struct Slot {
    provider: String,
    /// Whether the provider has built-in models (they are parsed only when the slot is).
    builtin: bool,
    models: std::sync::OnceLock<Vec<(OrderKey, Model)>>,
}

/// All known models with their credential sources.
///
/// Built-in models are assembled per provider on first use (the catalogue files are parsed
/// lazily, `pi_ai::models::provider_models`), so start-up pays only for the providers it
/// looks at: [`ModelRegistry::available`] assembles the providers with credentials,
/// [`ModelRegistry::find`] one provider, [`ModelRegistry::all`] everything.
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {
    /// Explicit built-in models ([`ModelRegistry::from_parts`]); `None` = the catalogue.
    explicit_builtin: Option<Vec<Model>>,
    slots: Vec<Slot>,
    all: std::sync::OnceLock<Vec<Model>>,
    local: Vec<Model>,
    agent_dir: Option<PathBuf>,
    config: ModelsConfig,
    /// Providers registered by extensions (`pi.registerProvider`, upstream
    /// docs/custom-provider.md), in registration order; a layer above `models.json`.
    extension: Vec<(String, ProviderConfig)>,
    /// The extension providers registered with `streamSimple` (their models of the
    /// provider's `api` stream from the extension).
    extension_streams: Vec<String>,
    /// The extension providers registered with an `oauth` login, with its display name.
    extension_oauth: Vec<(String, Option<String>)>,
    /// The extension providers registered with `refreshModels`.
    extension_refreshes: Vec<String>,
    /// Virtual models (`pi.registerVirtualModel`), in registration order.
    virtual_models: Vec<Model>,
    /// `models.json` and extension header configs of individual models, by (provider, id).
    model_headers: HashMap<(String, String), Map<String, Value>>,
    auth: AuthStorage,
    error: Option<String>,
    models_json: Option<PathBuf>,
}

impl ModelRegistry {
    /// Loads `<agent_dir>/models.json` and `<agent_dir>/auth.json` over the built-in catalogue,
    /// then appends the GGUF files of `<agent_dir>/models/` ([`discover_local_models`]).
    /// A `models.json` problem is warned about on stderr and leaves the built-ins (and the
    /// discovered local models) only.
    pub fn load(agent_dir: &Path) -> Self {
        let path = agent_dir.join("models.json");
        let (config, error) = match ModelsConfig::load(&path) {
            Ok(c) => (c.unwrap_or_default(), None),
            Err(e) => {
                warn(&e);
                (ModelsConfig::default(), Some(e))
            }
        };
        let mut reg = Self::build(None, config, AuthStorage::load(agent_dir), Some(agent_dir));
        reg.add_local_models(discover_local_models(&agent_dir.join("models")));
        reg.error = error;
        reg.models_json = Some(path);
        reg
    }

    /// A registry from explicit parts (tests, embedders). Relative local GGUF paths in `config`
    /// stay relative; no folder is searched for GGUF files (see [`ModelRegistry::add_local_models`]).
    pub fn from_parts(builtin: Vec<Model>, config: ModelsConfig, auth: AuthStorage) -> Self {
        Self::build(Some(builtin), config, auth, None)
    }

    /// Appends `local` (discovered GGUF models) after every other model, skipping those whose
    /// provider/id is already in the registry (a `models.json` entry wins).
    pub fn add_local_models(&mut self, local: Vec<Model>) {
        self.local.extend(local);
        self.rebuild_slots();
    }

    fn build(
        explicit_builtin: Option<Vec<Model>>,
        config: ModelsConfig,
        auth: AuthStorage,
        agent_dir: Option<&Path>,
    ) -> Self {
        let mut reg = ModelRegistry {
            explicit_builtin,
            slots: Vec::new(),
            all: std::sync::OnceLock::new(),
            local: Vec::new(),
            agent_dir: agent_dir.map(Path::to_path_buf),
            config,
            extension: Vec::new(),
            extension_streams: Vec::new(),
            extension_oauth: Vec::new(),
            extension_refreshes: Vec::new(),
            virtual_models: Vec::new(),
            model_headers: HashMap::new(),
            auth,
            error: None,
            models_json: None,
        };
        reg.collect_model_headers();
        reg.rebuild_slots();
        reg
    }

    /// The model-level header configs of `models.json` then of the extension providers (a
    /// later layer's entry for the same model replaces an earlier one).
    fn collect_model_headers(&mut self) {
        let mut model_headers = HashMap::new();
        for (provider, p) in self.config.providers.iter().chain(&self.extension) {
            for (id, raw) in p.model_overrides.iter().flatten() {
                if let Ok(ModelConfig {
                    headers: Some(h), ..
                }) = serde_json::from_value::<ModelConfig>(raw.clone())
                {
                    model_headers.insert((provider.clone(), id.clone()), h);
                }
            }
            for mc in p.models.iter().flatten() {
                match &mc.headers {
                    Some(h) => {
                        model_headers.insert((provider.clone(), mc.id.clone()), h.clone());
                    }
                    None => {
                        model_headers.remove(&(provider.clone(), mc.id.clone()));
                    }
                }
            }
        }
        self.model_headers = model_headers;
    }

    /// Registers (or replaces) the extension provider `name` (`pi.registerProvider(name,
    /// config)`, upstream docs/custom-provider.md, legacy `ProviderConfig` form): without
    /// `models` it redirects an existing provider (`baseUrl`, `headers`, `apiKey`, … apply to
    /// its models, which stay); with `models` those replace every model of the provider.
    /// Extension values win over `models.json` ones. `Err`: upstream's message for a config
    /// that cannot be composed (nothing configured, a model without `baseUrl`/`api`, a new
    /// provider without any authentication); the registry is then unchanged.
    pub fn register_extension_provider(
        &mut self,
        name: &str,
        config: ProviderConfig,
        streams: bool,
    ) -> Result<(), String> {
        self.check_extension_provider(name, &config, streams)?;
        match self.extension.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => *c = config,
            None => self.extension.push((name.to_string(), config)),
        }
        self.extension_streams.retain(|n| n != name);
        if streams {
            self.extension_streams.push(name.to_string());
        }
        self.collect_model_headers();
        self.rebuild_slots();
        Ok(())
    }

    /// [`ModelRegistry::register_extension_provider`] with what the registration carries besides
    /// its data: `oauth` = `Some(login name)` when it has an `oauth` login (it then counts as an
    /// authentication method, upstream `composeOAuthAuth`), `refreshes` when it has
    /// `refreshModels`.
    pub fn register_extension_provider_full(
        &mut self,
        name: &str,
        config: ProviderConfig,
        streams: bool,
        oauth: Option<Option<String>>,
        refreshes: bool,
    ) -> Result<(), String> {
        let previous = self.extension_oauth.clone();
        self.extension_oauth.retain(|(n, _)| n != name);
        if let Some(login) = oauth {
            self.extension_oauth.push((name.to_string(), login));
        }
        if let Err(e) = self.register_extension_provider(name, config, streams) {
            self.extension_oauth = previous;
            return Err(e);
        }
        self.extension_refreshes.retain(|n| n != name);
        if refreshes {
            self.extension_refreshes.push(name.to_string());
        }
        Ok(())
    }

    /// Replaces the models of extension provider `name` with `models` (what its
    /// `refreshModels` returned: upstream replaces that registration's live models). `Err`:
    /// upstream's message for a definition that cannot be composed (the registry is then
    /// unchanged), or no such registration.
    pub fn set_extension_models(
        &mut self,
        name: &str,
        models: Vec<ModelConfig>,
    ) -> Result<(), String> {
        let Some(config) = self
            .extension
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.clone())
        else {
            return Err(format!("Provider {name} is not registered."));
        };
        let streams = self.extension_streams.iter().any(|n| n == name);
        let next = ProviderConfig {
            models: Some(models),
            ..config
        };
        self.register_extension_provider(name, next, streams)
    }

    /// Whether extension provider `provider` has an `oauth` login.
    pub fn extension_oauth(&self, provider: &str) -> bool {
        self.extension_oauth.iter().any(|(n, _)| n == provider)
    }

    /// The display name of extension provider `provider`'s login: `oauth.name`, else the
    /// provider's `name`, else its id (upstream `composeModelProvider` `name`, with the OAuth
    /// name first as `/login` shows it).
    pub fn extension_login_name(&self, provider: &str) -> Option<String> {
        let (_, login) = self.extension_oauth.iter().find(|(n, _)| n == provider)?;
        let config_name = self
            .extension
            .iter()
            .find(|(n, _)| n == provider)
            .and_then(|(_, c)| c.name.clone());
        Some(
            config_name
                .or_else(|| login.clone())
                .unwrap_or_else(|| provider.to_string()),
        )
    }

    /// The extension providers with `refreshModels`, in registration order.
    pub fn extension_refreshes(&self) -> Vec<String> {
        self.extension_refreshes.clone()
    }

    /// Registers (or replaces) a virtual model (`pi.registerVirtualModel`, upstream
    /// `ModelRuntime.registerVirtualModel`). `Err`: upstream's message when `provider`/`id` is
    /// a physical model.
    pub fn register_virtual_model(&mut self, model: Model) -> Result<(), String> {
        if model.provider.trim().is_empty() || model.id.trim().is_empty() {
            return Err("Virtual model provider and id must not be empty.".into());
        }
        let physical = self
            .find(&model.provider, &model.id)
            .is_some_and(|m| !is_virtual(m));
        if physical {
            return Err(format!(
                "Virtual model {}/{} conflicts with a physical model.",
                model.provider, model.id
            ));
        }
        self.virtual_models
            .retain(|m| !(m.provider == model.provider && m.id == model.id));
        self.virtual_models.push(model);
        self.rebuild_slots();
        Ok(())
    }

    /// Removes a virtual model; `false` when there was none.
    pub fn unregister_virtual_model(&mut self, provider: &str, id: &str) -> bool {
        let before = self.virtual_models.len();
        self.virtual_models
            .retain(|m| !(m.provider == provider && m.id == id));
        let removed = before != self.virtual_models.len();
        if removed {
            self.rebuild_slots();
        }
        removed
    }

    /// The physical (non-virtual) model `provider`/`id`.
    pub fn find_physical(&self, provider: &str, id: &str) -> Option<&Model> {
        self.find(provider, id).filter(|m| !is_virtual(m))
    }

    /// Removes the extension provider `name` (`pi.unregisterProvider`): what it replaced
    /// (built-in models, `models.json` values) is back. `false` when none was registered.
    pub fn unregister_extension_provider(&mut self, name: &str) -> bool {
        let before = self.extension.len();
        self.extension.retain(|(n, _)| n != name);
        self.extension_streams.retain(|n| n != name);
        self.extension_oauth.retain(|(n, _)| n != name);
        self.extension_refreshes.retain(|n| n != name);
        let removed = self.extension.len() != before;
        if removed {
            self.collect_model_headers();
            self.rebuild_slots();
        }
        removed
    }

    /// Removes every extension provider (before the extensions are loaded again).
    pub fn clear_extension_providers(&mut self) {
        self.extension_oauth.clear();
        self.extension_refreshes.clear();
        if !self.virtual_models.is_empty() {
            self.virtual_models.clear();
            self.rebuild_slots();
        }
        if !self.extension.is_empty() {
            self.extension.clear();
            self.extension_streams.clear();
            self.collect_model_headers();
            self.rebuild_slots();
        }
    }

    /// Whether `model` streams from its extension provider's `streamSimple` (upstream
    /// `composeModelProvider`: the provider registered one and the model's `api` is the
    /// provider's `api`).
    pub fn extension_streams(&self, model: &Model) -> bool {
        self.extension_streams.contains(&model.provider)
            && self
                .extension
                .iter()
                .any(|(n, c)| *n == model.provider && c.api.as_deref() == Some(model.api.as_str()))
    }

    /// The names of the registered extension providers, in registration order.
    pub fn extension_providers(&self) -> Vec<String> {
        self.extension.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Upstream `validateExtensionProvider` / `composeModelProvider` checks, phrased as
    /// upstream 1.6 `core/provider-composer.js` phrases them.
    fn check_extension_provider(
        &self,
        name: &str,
        p: &ProviderConfig,
        streams: bool,
    ) -> Result<(), String> {
        if streams && p.api.is_none() {
            return Err(format!(
                "Provider {name}: \"api\" is required when registering streamSimple."
            ));
        }
        let configures_something = p.models.as_ref().is_some_and(|m| !m.is_empty())
            || p.base_url.is_some()
            || p.headers.is_some()
            || p.compat.is_some()
            || p.model_overrides.as_ref().is_some_and(|m| !m.is_empty())
            || p.api_key.is_some()
            || p.auth_header;
        if !configures_something {
            return Err(format!(
                "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
            ));
        }
        let builtin = !pi_ai::models::provider_models(name).is_empty();
        for m in p.models.iter().flatten() {
            let api = m.api.as_deref().or(p.api.as_deref());
            let defaults = builtin_defaults(name, &m.id, api);
            if api.is_none() && defaults.is_none() {
                return Err(format!(
                    "Provider {name}, model {}: no \"api\" specified. Set it at model level or provider level.",
                    m.id
                ));
            }
            if m.base_url.is_none() && p.base_url.is_none() && defaults.is_none() {
                return Err(format!(
                    "Provider {name}: \"baseUrl\" is required when defining custom models."
                ));
            }
            for (field, v) in [
                ("contextWindow", m.context_window),
                ("maxTokens", m.max_tokens),
            ] {
                if v.is_some_and(|n| n.is_nan() || n <= 0.0) {
                    return Err(format!("Provider {name}, model {}: invalid {field}", m.id));
                }
            }
        }
        let keyed = p.api_key.is_some()
            || self
                .config
                .provider(name)
                .is_some_and(|c| c.api_key.is_some());
        let oauth = self.extension_oauth.iter().any(|(n, _)| n == name);
        if !builtin
            && !keyed
            && !oauth
            && !self.auth.has_entry(name)
            && !pi_ai::env_has_credentials(name)
        {
            return Err(format!(
                "Provider {name}: no authentication method configured."
            ));
        }
        Ok(())
    }

    /// The `models.json` entry of `provider`, then its extension entry (the later wins).
    fn provider_layers<'a>(
        &'a self,
        provider: &'a str,
    ) -> impl Iterator<Item = &'a ProviderConfig> {
        self.config.provider(provider).into_iter().chain(
            self.extension
                .iter()
                .filter(move |(n, _)| n == provider)
                .map(|(_, c)| c),
        )
    }

    /// Whether a configured `apiKey` gives `provider` credentials: an extension's counts when
    /// it is a `!command` or every variable it names is set (upstream `composeApiKeyAuth`
    /// `check`); a `models.json` one counts as soon as it is there (as before).
    fn configured_key_counts(&self, provider: &str) -> bool {
        let extension_key = self
            .extension
            .iter()
            .filter(|(n, _)| n == provider)
            .find_map(|(_, c)| c.api_key.as_deref());
        match extension_key {
            Some(raw) => raw.starts_with('!') || super::value::expand_template(raw, None).is_some(),
            None => self
                .config
                .provider(provider)
                .is_some_and(|p| p.api_key.is_some()),
        }
    }

    /// The configured `apiKey` of `provider` (the extension's over `models.json`'s).
    fn configured_api_key<'a>(&'a self, provider: &'a str) -> Option<&'a str> {
        self.provider_layers(provider)
            .filter_map(|p| p.api_key.as_deref())
            .last()
    }

    /// One slot per provider: built-in providers in catalogue order, then the other providers
    /// of `models.json`, then those of local models.
    fn rebuild_slots(&mut self) {
        let mut slots: Vec<Slot> = Vec::new();
        let add = |provider: &str, builtin: bool, slots: &mut Vec<Slot>| match slots
            .iter_mut()
            .find(|s| s.provider == provider)
        {
            Some(s) => s.builtin |= builtin,
            None => slots.push(Slot {
                provider: provider.to_string(),
                builtin,
                models: std::sync::OnceLock::new(),
            }),
        };
        match &self.explicit_builtin {
            Some(models) => models
                .iter()
                .for_each(|m| add(&m.provider, true, &mut slots)),
            None => pi_ai::models::builtin_providers()
                .iter()
                .filter(|p| p.models > 0)
                .for_each(|p| add(&p.id, true, &mut slots)),
        }
        for (provider, _) in self.config.providers.iter().chain(&self.extension) {
            add(provider, false, &mut slots);
        }
        for m in &self.local {
            add(&m.provider, false, &mut slots);
        }
        for m in &self.virtual_models {
            add(&m.provider, false, &mut slots);
        }
        self.slots = slots;
        self.all = std::sync::OnceLock::new();
    }

    /// The models of slot `slot`, assembled now if needed (see [`OrderKey`]).
    fn slot_models<'a>(&'a self, slot: &'a Slot) -> &'a [(OrderKey, Model)] {
        slot.models.get_or_init(|| self.assemble(&slot.provider))
    }

    /// Built-ins of `provider` with `models.json` applied, its custom models, then its local
    /// models (skipping provider/ids already present).
    fn assemble(&self, provider: &str) -> Vec<(OrderKey, Model)> {
        let rank = self
            .slots
            .iter()
            .position(|s| s.provider == provider)
            .unwrap_or(usize::MAX);
        let mut models: Vec<(OrderKey, Model)> = match &self.explicit_builtin {
            // Explicit built-ins keep their list order, whatever it is.
            Some(list) => list
                .iter()
                .enumerate()
                .filter(|(_, m)| m.provider == provider)
                .map(|(i, m)| ((0, i, 0), m.clone()))
                .collect(),
            None => pi_ai::models::provider_models(provider)
                .iter()
                .enumerate()
                .map(|(i, m)| ((0, rank, i), m.clone()))
                .collect(),
        };
        let mut custom_pos = 0usize;
        let layers = self
            .config
            .providers
            .iter()
            .map(|e| (e, false))
            .chain(self.extension.iter().map(|e| (e, true)));
        for ((name, p), from_extension) in layers {
            if name != provider {
                custom_pos += p.models.as_ref().map_or(0, Vec::len);
                continue;
            }
            // An extension's `models` replace the provider's models (upstream
            // `applyExtension`); model-level values still win over the provider's.
            if from_extension && p.models.is_some() {
                models.clear();
            }
            // Provider-level settings apply to the built-in models of that provider.
            for (_, m) in models.iter_mut() {
                if let Some(url) = &p.base_url {
                    m.base_url = url.clone();
                }
                if p.compat.is_some() {
                    m.compat = merge_maps(m.compat.as_ref(), p.compat.as_ref());
                }
            }
            for (id, raw) in p.model_overrides.iter().flatten() {
                let Ok(o) = serde_json::from_value::<ModelConfig>(raw.clone()) else {
                    continue;
                };
                if let Some((_, m)) = models.iter_mut().find(|(_, m)| &m.id == id) {
                    apply_override(m, &o);
                }
            }
            for mc in p.models.iter().flatten() {
                models.retain(|(_, m)| m.id != mc.id);
                models.push((
                    (1, custom_pos, 0),
                    custom_model(provider, p, mc, self.agent_dir.as_deref()),
                ));
                custom_pos += 1;
            }
        }
        for (i, m) in self.local.iter().enumerate() {
            if m.provider == provider && !models.iter().any(|(_, e)| e.id == m.id) {
                models.push(((2, i, 0), m.clone()));
            }
        }
        // Virtual models follow the provider's physical ones and hide one of the same id
        // (upstream `withVirtualModels`).
        for (i, v) in self.virtual_models.iter().enumerate() {
            if v.provider == provider {
                models.retain(|(_, m)| m.id != v.id);
                models.push(((3, i, 0), v.clone()));
            }
        }
        models
    }

    /// The models of the providers `keep` accepts, in registry order.
    fn collect(&self, keep: impl Fn(&Slot) -> bool) -> Vec<&Model> {
        let mut out: Vec<&(OrderKey, Model)> = self
            .slots
            .iter()
            .filter(|s| keep(s))
            .flat_map(|s| self.slot_models(s).iter())
            .collect();
        out.sort_by_key(|(k, _)| *k);
        out.into_iter().map(|(_, m)| m).collect()
    }

    /// Re-reads `models.json` and `auth.json` (keeping runtime keys is the caller's job).
    pub fn reload(&mut self, agent_dir: &Path) {
        let extension = std::mem::take(&mut self.extension);
        let streams = std::mem::take(&mut self.extension_streams);
        let oauth = std::mem::take(&mut self.extension_oauth);
        let refreshes = std::mem::take(&mut self.extension_refreshes);
        let virtual_models = std::mem::take(&mut self.virtual_models);
        *self = Self::load(agent_dir);
        self.extension = extension;
        self.extension_streams = streams;
        self.extension_oauth = oauth;
        self.extension_refreshes = refreshes;
        self.virtual_models = virtual_models;
        self.collect_model_headers();
        self.rebuild_slots();
    }

    /// The agent directory this registry was loaded from (`None` for [`ModelRegistry::from_parts`]).
    pub fn agent_dir(&self) -> Option<&Path> {
        self.agent_dir.as_deref()
    }

    /// The `models.json` error of the last load, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The `models.json` path this registry was loaded from.
    pub fn models_json_path(&self) -> Option<&Path> {
        self.models_json.as_deref()
    }

    /// Every known model, in registry order (assembles every provider on first call).
    pub fn all(&self) -> &[Model] {
        self.all
            .get_or_init(|| self.collect(|_| true).into_iter().cloned().collect())
    }

    /// Models that can be used now ([`ModelRegistry::model_has_auth`]: their provider has
    /// credentials, or they run in-process), in registry order. Only the providers with
    /// credentials (and those of `models.json` and local models) are assembled.
    pub fn available(&self) -> Vec<Model> {
        self.collect(|s| !s.builtin || self.has_auth(&s.provider))
            .into_iter()
            .filter(|m| self.model_has_auth(m))
            .cloned()
            .collect()
    }

    /// Whether `model` can be used without asking for credentials: it is a local GGUF model
    /// ([`is_keyless`]) or its provider [`has_auth`](ModelRegistry::has_auth).
    pub fn model_has_auth(&self, model: &Model) -> bool {
        is_keyless(model)
            || self.has_auth(&model.provider)
            || (is_virtual(model) && self.virtual_only(&model.provider))
    }

    /// Whether every model of `provider` is virtual (a provider of only virtual models needs no
    /// credentials, upstream `withVirtualModels` without a provider).
    fn virtual_only(&self, provider: &str) -> bool {
        let own = self.provider_models(provider);
        !own.is_empty() && own.into_iter().all(is_virtual)
    }

    /// The model `provider`/`id` (exact, case-sensitive); assembles that provider only.
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        let slot = self.slots.iter().find(|s| s.provider == provider)?;
        self.slot_models(slot)
            .iter()
            .map(|(_, m)| m)
            .find(|m| m.id == id)
    }

    /// The models of `provider` in registry order; assembles that provider only.
    pub fn provider_models(&self, provider: &str) -> Vec<&Model> {
        self.collect(|s| s.provider == provider)
    }

    /// Provider ids in registry order, without duplicates (assembles every provider).
    pub fn providers(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in self.all() {
            if !out.contains(&m.provider) {
                out.push(m.provider.clone());
            }
        }
        out
    }

    /// The credential store.
    pub fn auth(&self) -> &AuthStorage {
        &self.auth
    }

    /// Sets a runtime (`--api-key`) key for `provider`.
    pub fn set_runtime_api_key(&mut self, provider: &str, key: impl Into<String>) {
        self.auth.set_runtime_api_key(provider, key);
    }

    /// Whether `provider` has credentials configured: a runtime key, an `auth.json` entry, an
    /// environment key or a `models.json` `apiKey` — or it has models and all of them are
    /// local GGUF models, which need none. Nothing is executed or refreshed.
    pub fn has_auth(&self, provider: &str) -> bool {
        let all_local = || {
            let own = self.provider_models(provider);
            !own.is_empty() && own.into_iter().all(is_keyless)
        };
        let customised = self
            .provider_layers(provider)
            .any(|p| p.models.as_ref().is_some_and(|m| !m.is_empty()))
            || self.local.iter().any(|m| m.provider == provider);
        self.auth.has_entry(provider)
            || pi_ai::env_has_credentials(provider)
            || self.configured_key_counts(provider)
            || (customised && all_local())
    }

    /// The API key for `provider`, resolved now (spec config.md §5.3, 1.6 order): the runtime
    /// key, `auth.json` (`api_key`, then an unexpired OAuth token), the provider's
    /// `models.json` `apiKey` (resolved uncached, so a `!command` runs per request), then the
    /// environment variables of the provider.
    pub fn api_key(&self, provider: &str) -> Option<String> {
        self.auth
            .stored_api_key(provider)
            .or_else(|| {
                self.configured_api_key(provider)
                    .and_then(resolve_config_value_uncached)
                    .filter(|k| !k.is_empty())
            })
            .or_else(|| env_api_key(provider))
    }

    /// Key and headers for a request to `model`. Fails with `No API key found for "<provider>"`
    /// when the provider sets `authHeader` but no key resolves (never for a local GGUF model).
    pub fn request_auth(&self, model: &Model) -> Result<RequestAuth, String> {
        self.request_auth_with(model, true)
    }

    /// [`ModelRegistry::request_auth`]; with `refresh` false a stored OAuth entry is taken as
    /// it is (expired or not) and nothing is refreshed — enough to tell whether a prompt can be
    /// admitted. With `refresh`, an OAuth entry of a provider upstream refreshes is refreshed
    /// first when it is about to expire ([`AuthStorage::oauth_access`]); a failed refresh
    /// gives `Ok` with [`RequestAuth::error`] set.
    pub fn request_auth_with(&self, model: &Model, refresh: bool) -> Result<RequestAuth, String> {
        self.request_auth_given(model, refresh, None)
    }

    /// [`ModelRegistry::request_auth_with`], with `oauth_key` (when given) as the key an
    /// extension provider's OAuth login resolved (`getApiKey` of the refreshed credential),
    /// used in place of the stored entry's access token. A virtual model needs no
    /// credentials itself (its route's model does): it counts as keyless.
    pub fn request_auth_given(
        &self,
        model: &Model,
        refresh: bool,
        oauth_key: Option<String>,
    ) -> Result<RequestAuth, String> {
        let keyless = is_keyless(model) || is_virtual(model);
        let mut api_key = self.api_key(&model.provider);
        let mut base_url = None;
        if let Some(key) = oauth_key {
            api_key = Some(key);
        } else if self.auth.is_oauth(&model.provider) {
            match self.auth.oauth_access(&model.provider, None, refresh) {
                Ok(Some(a)) => {
                    api_key = Some(a.access);
                    base_url = a.base_url;
                }
                Ok(None) => {}
                Err(e) => {
                    return Ok(RequestAuth {
                        keyless,
                        error: Some(e.to_string()),
                        ..Default::default()
                    })
                }
            }
        }
        let mut headers = model.headers.clone().unwrap_or_default();
        // `ANTHROPIC_AUTH_TOKEN` (upstream 1.6 anthropic auth): beats the key variables of the
        // environment, not a stored or models.json key, and goes out as a bearer token.
        let configured = self.auth.stored_api_key(&model.provider).is_some()
            || self.auth.is_oauth(&model.provider)
            || self.configured_api_key(&model.provider).is_some();
        if let (false, Some(token)) = (
            configured,
            pi_ai::env_keys::env_bearer_token(&model.provider),
        ) {
            headers.insert(
                "Authorization".into(),
                Value::String(format!("Bearer {token}")),
            );
            api_key = None;
        }
        for h in self
            .provider_layers(&model.provider)
            .filter_map(|p| p.headers.as_ref())
        {
            headers.extend(resolve_headers(h));
        }
        let auth_header = self.provider_layers(&model.provider).any(|p| p.auth_header);
        if let Some(h) = self
            .model_headers
            .get(&(model.provider.clone(), model.id.clone()))
        {
            headers.extend(resolve_headers(h));
        }
        if auth_header {
            let Some(key) = &api_key else {
                if keyless {
                    return Ok(RequestAuth {
                        api_key,
                        headers,
                        keyless,
                        base_url,
                        error: None,
                    });
                }
                return Err(format!("No API key found for \"{}\"", model.provider));
            };
            headers.insert(
                "Authorization".into(),
                Value::String(format!("Bearer {key}")),
            );
        }
        Ok(RequestAuth {
            api_key,
            headers,
            keyless,
            base_url,
            error: None,
        })
    }
}

#[cfg(test)]
mod extension_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn chat(provider: &str, id: &str) -> Model {
        let mut m = Model::unknown();
        m.provider = provider.into();
        m.id = id.into();
        m.api = "openai-completions".into();
        m
    }

    fn registry() -> ModelRegistry {
        ModelRegistry::from_parts(
            vec![chat("base", "b1")],
            ModelsConfig::default(),
            AuthStorage::from_entries(Map::new()),
        )
    }

    #[test]
    fn a_virtual_model_is_listed_under_its_provider_and_cannot_shadow_a_registered_physical_one() {
        let mut reg = registry();
        let v = virtual_model("router", "auto", Some("Auto"), None, None, None, None);
        assert!(!v.reasoning);
        assert_eq!(v.thinking_level_map.as_ref().unwrap()["off"], "off");
        reg.register_virtual_model(v).unwrap();
        // A provider of only virtual models needs no credentials.
        let available: Vec<String> = reg.available().iter().map(|m| m.id.clone()).collect();
        assert_eq!(available, vec!["auto".to_string()]);
        assert_eq!(reg.find("router", "auto").unwrap().api, VIRTUAL_API);
        assert!(reg.find_physical("router", "auto").is_none());
        let err = reg
            .register_virtual_model(virtual_model("base", "b1", None, None, None, None, None))
            .unwrap_err();
        assert_eq!(
            err,
            "Virtual model base/b1 conflicts with a physical model."
        );
        assert!(reg.unregister_virtual_model("router", "auto"));
        assert!(reg.find("router", "auto").is_none());
    }

    #[test]
    fn an_oauth_login_counts_as_authentication_and_refreshed_models_replace_the_registration() {
        let mut reg = registry();
        let config: ProviderConfig = serde_json::from_value(serde_json::json!({
            "baseUrl": "http://127.0.0.1:1/v1", "api": "openai-completions",
            "models": [{"id": "m1"}]
        }))
        .unwrap();
        let err = reg
            .register_extension_provider_full("corp", config.clone(), false, None, true)
            .unwrap_err();
        assert_eq!(err, "Provider corp: no authentication method configured.");
        assert!(!reg.extension_oauth("corp"));
        reg.register_extension_provider_full("corp", config, false, Some(Some("SSO".into())), true)
            .unwrap();
        assert!(reg.extension_oauth("corp"));
        assert_eq!(reg.extension_login_name("corp").as_deref(), Some("SSO"));
        assert_eq!(reg.extension_refreshes(), vec!["corp".to_string()]);
        // Without a stored credential it is not available (as upstream).
        assert!(!reg.has_auth("corp"));
        let live: Vec<ModelConfig> =
            serde_json::from_value(serde_json::json!([{"id": "live-1"}, {"id": "live-2"}]))
                .unwrap();
        reg.set_extension_models("corp", live).unwrap();
        let ids: Vec<&str> = reg
            .provider_models("corp")
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(ids, vec!["live-1", "live-2"]);
        assert!(reg.set_extension_models("none", Vec::new()).is_err());
        reg.unregister_extension_provider("corp");
        assert!(!reg.extension_oauth("corp"));
        assert!(reg.extension_refreshes().is_empty());
    }
}
