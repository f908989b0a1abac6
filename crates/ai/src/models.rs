//! The built-in model catalogue: every provider and chat model of upstream pi 1.6
//! (`@earendil-works/pi-ai` 1.6.0, `dist/providers/data/*.json` as its provider objects list
//! them), kept as data in `crates/ai/data/models/` and regenerated with
//! `scripts/gen-model-catalogue.sh` — never edited by hand.
//!
//! Files: `providers.json` = `{source, defaultOrder: [provider id], providers: [{id, name,
//! baseUrl, envVars: [name], oauth: bool, defaultModel: id|null, models: count}]}` in upstream's
//! registry order; `<provider>.json` = that provider's chat models, each a [`Model`] in wire
//! form (prices in US dollars per million tokens, `contextWindow`/`maxTokens` in tokens; spec
//! messages-and-models.md §7). The files are embedded in the binary and each is parsed on first
//! use only ([`provider_models`]), so start-up pays only for the providers it looks at.
//!
//! The built-in models' `api` is upstream's even where this port has no adapter for it yet
//! ([`crate::provider_for_api`] answers `None`; such a model fails at request time).

use crate::types::{Model, ThinkingLevel};
use serde::Deserialize;
use std::sync::OnceLock;

#[rustfmt::skip]
#[path = "catalogue_data.rs"]
mod catalogue_data;

/// Base URL of the Anthropic API.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// Base URL of the OpenAI API.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// One built-in provider (an entry of `providers.json`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuiltinProvider {
    /// Provider id, e.g. `openai` (spec messages-and-models.md §7.3).
    pub id: String,
    /// Display name, e.g. `OpenAI`.
    pub name: String,
    /// The provider's base URL; empty when it has none of its own (per-model or from the
    /// environment, e.g. `azure`, `amazon-bedrock`).
    #[serde(default)]
    pub base_url: String,
    /// The environment variables upstream's API-key resolution reads for this provider, in
    /// the order it reads them with nothing set (for most providers: the key variables; for
    /// `anthropic`, `amazon-bedrock`, `google-vertex`, `cloudflare-*` also the variables of
    /// their other credential forms; see [`crate::env_keys`]).
    #[serde(default)]
    pub env_vars: Vec<String>,
    /// Whether upstream offers an OAuth (subscription) login for it.
    #[serde(default)]
    pub oauth: bool,
    /// Upstream's default model id for the provider (`defaultModelPerProvider`), if any.
    #[serde(default)]
    pub default_model: Option<String>,
    /// Number of chat models in its catalogue file.
    #[serde(default)]
    pub models: usize,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    #[serde(default)]
    default_order: Vec<String>,
    #[serde(default)]
    providers: Vec<BuiltinProvider>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    // The embedded data is checked by the crate's tests; a broken file reads as empty.
    INDEX.get_or_init(|| serde_json::from_str(catalogue_data::PROVIDERS_JSON).unwrap_or_default())
}

/// Every built-in provider, in upstream's registry order (`builtinProviders()`), including
/// those without chat models (`typesafe`).
pub fn builtin_providers() -> &'static [BuiltinProvider] {
    &index().providers
}

/// The built-in provider `id`, if any.
pub fn builtin_provider(id: &str) -> Option<&'static BuiltinProvider> {
    builtin_providers().iter().find(|p| p.id == id)
}

/// Upstream's default model id for `provider` (pi-coding-agent `defaultModelPerProvider`).
pub fn default_model_id(provider: &str) -> Option<&'static str> {
    builtin_provider(provider)?.default_model.as_deref()
}

/// The providers in the order upstream tries their default models when picking the initial
/// model (the key order of `defaultModelPerProvider`).
pub fn default_model_order() -> &'static [String] {
    &index().default_order
}

/// The chat models of built-in provider `provider` in catalogue order, parsed on first use and
/// then shared; empty for other providers.
pub fn provider_models(provider: &str) -> &'static [Model] {
    static PARSED: OnceLock<Vec<OnceLock<Vec<Model>>>> = OnceLock::new();
    let files = catalogue_data::MODEL_FILES;
    let slots = PARSED.get_or_init(|| files.iter().map(|_| OnceLock::new()).collect());
    let Some(pos) = files.iter().position(|(id, _)| *id == provider) else {
        return &[];
    };
    match slots.get(pos) {
        Some(slot) => slot.get_or_init(|| serde_json::from_str(files[pos].1).unwrap_or_default()),
        None => &[],
    }
}

/// Built-in models of `provider` (cloned); empty for providers without built-in models.
pub fn builtin_models_for(provider: &str) -> Vec<Model> {
    provider_models(provider).to_vec()
}

/// All built-in models, grouped by provider in registry order (parses every file).
pub fn builtin_models() -> Vec<Model> {
    builtin_providers()
        .iter()
        .flat_map(|p| provider_models(&p.id).iter().cloned())
        .collect()
}

/// The built-in model `provider`/`id`, if any.
pub fn find_builtin_model(provider: &str, id: &str) -> Option<Model> {
    provider_models(provider)
        .iter()
        .find(|m| m.id == id)
        .cloned()
}

/// Clamp `level` to what `model` supports (spec messages-and-models.md §8.2): the level itself
/// if supported, else the next supported level upward, else downward, else the first
/// supported level, else `off`.
pub fn clamp_thinking_level(model: &Model, level: ThinkingLevel) -> ThinkingLevel {
    let supported = model.supported_thinking_levels();
    if supported.contains(&level) {
        return level;
    }
    let all = ThinkingLevel::ALL;
    let pos = all.iter().position(|l| *l == level).unwrap_or(0);
    all[pos..]
        .iter()
        .find(|l| supported.contains(l))
        .or_else(|| all[..pos].iter().rev().find(|l| supported.contains(l)))
        .copied()
        .or_else(|| supported.first().copied())
        .unwrap_or(ThinkingLevel::Off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_parses_and_matches_the_index() {
        let providers = builtin_providers();
        assert_eq!(providers.len(), 43);
        assert_eq!(catalogue_data::MODEL_FILES.len(), providers.len());
        let mut total = 0;
        for p in providers {
            let models = provider_models(&p.id);
            assert_eq!(models.len(), p.models, "{}", p.id);
            total += models.len();
            for m in models {
                assert_eq!(m.provider, p.id);
                assert!(m.context_window > 0, "{}/{}", p.id, m.id);
            }
            if let Some(d) = &p.default_model {
                assert!(models.iter().any(|m| &m.id == d), "{}: {d}", p.id);
            }
        }
        assert_eq!(total, 1698);
        assert_eq!(default_model_id("openai"), Some("gpt-6.2-sol"));
        let opus = find_builtin_model("anthropic", "claude-opus-4-7").expect("opus");
        assert!(opus
            .supported_thinking_levels()
            .contains(&ThinkingLevel::Xhigh));
        let json = serde_json::to_value(&opus).expect("serialize");
        assert_eq!(json["baseUrl"], "https://api.anthropic.com");
        assert_eq!(json["cost"]["cacheWrite"], 6.25);
        assert_eq!(json["type"], "chat");
    }

    #[test]
    fn round_trips_the_data_verbatim() {
        for (id, text) in catalogue_data::MODEL_FILES {
            let raw: serde_json::Value = serde_json::from_str(text).expect("json");
            let ours = serde_json::to_value(provider_models(id)).expect("serialize");
            assert_eq!(raw, ours, "{id}");
        }
    }

    #[test]
    fn clamping() {
        let gpt = find_builtin_model("openai", "gpt-5").expect("gpt-5");
        let levels = gpt.supported_thinking_levels();
        assert_eq!(
            clamp_thinking_level(&gpt, ThinkingLevel::Max),
            *levels.last().expect("levels")
        );
        let plain = find_builtin_model("openai", "gpt-4o").expect("gpt-4o");
        assert_eq!(
            clamp_thinking_level(&plain, ThinkingLevel::High),
            ThinkingLevel::Off
        );
        let mut m = gpt;
        let mut map = serde_json::Map::new();
        map.insert("minimal".into(), serde_json::Value::Null);
        m.thinking_level_map = Some(map);
        assert_eq!(
            clamp_thinking_level(&m, ThinkingLevel::Minimal),
            ThinkingLevel::Low
        );
    }
}
