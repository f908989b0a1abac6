//! The `models.json` file: its shape ([`ModelsConfig`]) and validation (spec config.md §4).

use super::{builtin_defaults, LOCAL_API};
use crate::{read_json_file, JsonFile};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

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
        let mut limit_errors = Vec::new();
        for (name, raw) in providers {
            input_limits_errors(name, raw, &mut limit_errors);
        }
        if !limit_errors.is_empty() {
            return Err(format!(
                "Invalid models.json schema:\n  - {}",
                limit_errors.join("\n  - ")
            ));
        }
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

/// The `inputLimits` schema errors of one provider entry (its `models[i]` and its
/// `modelOverrides[id]`), worded as upstream 1.6's models.json schema reports them
/// (`providers.<p>.models.<i>.inputLimits.<field>: must be integer` / `must be >= 1` /
/// `must be <= 100` / `must be object`; pi-ai `ModelInputLimitsSchema`). Upstream refuses the
/// whole file for any of them; unknown keys are allowed, as there.
fn input_limits_errors(provider: &str, raw: &Value, errors: &mut Vec<String>) {
    let models = raw.get("models").and_then(Value::as_array);
    for (i, m) in models.into_iter().flatten().enumerate() {
        if let Some(limits) = m.get("inputLimits") {
            let at = format!("providers.{provider}.models.{i}.inputLimits");
            check_input_limits(&at, limits, errors);
        }
    }
    let overrides = raw.get("modelOverrides").and_then(Value::as_object);
    for (id, o) in overrides.into_iter().flatten() {
        if let Some(limits) = o.get("inputLimits") {
            let at = format!("providers.{provider}.modelOverrides.{id}.inputLimits");
            check_input_limits(&at, limits, errors);
        }
    }
}

/// `{maxRequestBytes?, images?: {resize?: {maxWidth?, maxHeight?, maxBytes?, jpegQuality?},
/// maxPerMessage?, maxPerRequest?}}`: every number an integer >= 1 (`jpegQuality` <= 100),
/// every level an object. The limits are declared only: like upstream 1.6, pi neither drops
/// nor refuses images or requests by `maxPerMessage`, `maxPerRequest` or `maxRequestBytes`
/// (upstream docs/models.md); only `images.resize` changes what is sent.
fn check_input_limits(at: &str, limits: &Value, errors: &mut Vec<String>) {
    let Some(limits) = object_at(at, limits, errors) else {
        return;
    };
    check_int(at, limits, "maxRequestBytes", None, errors);
    let Some(images) = limits.get("images") else {
        return;
    };
    let at = format!("{at}.images");
    let Some(images) = object_at(&at, images, errors) else {
        return;
    };
    if let Some(resize) = images.get("resize") {
        let at = format!("{at}.resize");
        if let Some(resize) = object_at(&at, resize, errors) {
            for key in ["maxWidth", "maxHeight", "maxBytes"] {
                check_int(&at, resize, key, None, errors);
            }
            check_int(&at, resize, "jpegQuality", Some(100.0), errors);
        }
    }
    check_int(&at, images, "maxPerMessage", None, errors);
    check_int(&at, images, "maxPerRequest", None, errors);
}

fn object_at<'a>(
    at: &str,
    v: &'a Value,
    errors: &mut Vec<String>,
) -> Option<&'a Map<String, Value>> {
    let o = v.as_object();
    if o.is_none() {
        errors.push(format!("{at}: must be object"));
    }
    o
}

/// `obj[key]`, when present, must be an integer (a JSON number without a fraction) from 1 to
/// `max`.
fn check_int(
    at: &str,
    obj: &Map<String, Value>,
    key: &str,
    max: Option<f64>,
    errors: &mut Vec<String>,
) {
    let Some(v) = obj.get(key) else {
        return;
    };
    let Some(n) = v.as_f64().filter(|n| n.is_finite() && n.fract() == 0.0) else {
        errors.push(format!("{at}.{key}: must be integer"));
        return;
    };
    if n < 1.0 {
        errors.push(format!("{at}.{key}: must be >= 1"));
    } else if let Some(m) = max.filter(|m| n > *m) {
        errors.push(format!("{at}.{key}: must be <= {m}"));
    }
}

pub(super) fn validate_provider(name: &str, p: &ProviderConfig, problems: &mut Vec<String>) {
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

pub(super) fn check_positive(
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

pub(super) fn to_u64(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    }
}

/// Shallow object merge: `over`'s keys win.
pub(super) fn merge_maps(
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
