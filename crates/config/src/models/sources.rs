//! Where models come from besides `models.json`: the built-in catalogue, local GGUF files
//! (issue 3), virtual models, and the environment's API keys.

use pi_ai::Model;
use serde_json::{Map, Value};
use std::path::Path;

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
pub(super) const VIRTUAL_LEVELS: [&str; 7] =
    ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

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
pub(super) fn gguf_context_length(path: &Path) -> Option<u64> {
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
