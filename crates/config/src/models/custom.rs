//! Models built from `models.json` entries: custom models (remote and local GGUF), built-in
//! defaults they inherit, and `modelOverrides` applied to built-in models.

use super::{
    gguf_context_length, merge_maps, to_u64, ModelConfig, ProviderConfig, DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_TOKENS, LOCAL_API, LOCAL_DEFAULT_CONTEXT_WINDOW, LOCAL_MAX_CONTEXT_WINDOW,
    LOCAL_MAX_OUTPUT_TOKENS,
};
use pi_ai::{Model, ModelCost};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// What a custom model of a built-in provider takes when neither it nor its provider entry
/// names an `api` or `baseUrl` (upstream 1.6 `provider-composer.js` `findModelDefaults`): those
/// of the provider's built-in model with the same id, else of one with the same api, else of
/// its first `openai-completions` model, else of its first model; `None` for a provider that
/// is not built in. Returns `(api, base_url)`.
pub(super) fn builtin_defaults(
    provider: &str,
    id: &str,
    api: Option<&str>,
) -> Option<(String, String)> {
    let models = pi_ai::models::provider_models(provider);
    models
        .iter()
        .find(|m| m.id == id)
        .or_else(|| api.and_then(|a| models.iter().find(|m| m.api == a)))
        .or_else(|| models.iter().find(|m| m.api == "openai-completions"))
        .or_else(|| models.first())
        .map(|m| (m.api.clone(), m.base_url.clone()))
}

pub(super) fn custom_model(
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
pub(super) fn local_custom_model(
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
pub(super) fn custom_model_fields(provider: &str, p: &ProviderConfig, m: &ModelConfig) -> Model {
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
pub(super) fn local_file_path(file: &str, agent_dir: Option<&Path>) -> PathBuf {
    let file = file.strip_prefix("file://").unwrap_or(file);
    let path = crate::expand_home(file);
    match agent_dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path,
    }
}

pub(super) fn apply_override(model: &mut Model, o: &ModelConfig) {
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
pub(super) fn merge_input_limits(base: Option<&Value>, over: &Value) -> Value {
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
