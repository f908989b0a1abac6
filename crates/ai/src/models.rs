//! Built-in model catalogue for the `anthropic` and `openai` providers and model helpers.
//!
//! Data from upstream `packages/ai/src/models.generated.ts` / `providers/anthropic.models.ts`
//! (a current subset). Prices are US dollars per million tokens; `contextWindow`/`maxTokens`
//! are tokens (spec messages-and-models.md §7). Upstream serves the `openai` models through
//! `openai-responses`; this port has no such adapter, so they use `openai-completions`
//! (the same models are served by `POST /v1/chat/completions`).

use crate::types::{Model, ModelCost, ThinkingLevel};
use serde_json::{Map, Value};

/// Base URL of the Anthropic API.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// Base URL of the OpenAI API.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Providers with built-in models, in registry order.
pub const BUILTIN_PROVIDERS: [&str; 2] = ["anthropic", "openai"];

struct Spec {
    id: &'static str,
    name: &'static str,
    reasoning: bool,
    image: bool,
    /// input, output, cacheRead, cacheWrite ($/M tokens).
    cost: [f64; 4],
    context: u64,
    max: u64,
    /// JSON object text of `thinkingLevelMap`, if any.
    levels: Option<&'static str>,
    /// JSON object text of `compat`, if any.
    compat: Option<&'static str>,
}

const ANTHROPIC: &[Spec] = &[
    Spec {
        id: "claude-opus-4-8",
        name: "Claude Opus 4.8",
        reasoning: true,
        image: true,
        cost: [5.0, 25.0, 0.5, 6.25],
        context: 1_000_000,
        max: 128_000,
        levels: Some(r#"{"xhigh":"xhigh"}"#),
        compat: Some(
            r#"{"forceAdaptiveThinking":true,"supportsTemperature":false,"supportsStrictTools":true}"#,
        ),
    },
    Spec {
        id: "claude-opus-4-7",
        name: "Claude Opus 4.7",
        reasoning: true,
        image: true,
        cost: [5.0, 25.0, 0.5, 6.25],
        context: 1_000_000,
        max: 128_000,
        levels: Some(r#"{"xhigh":"xhigh"}"#),
        compat: Some(
            r#"{"forceAdaptiveThinking":true,"supportsTemperature":false,"supportsStrictTools":true}"#,
        ),
    },
    Spec {
        id: "claude-opus-4-6",
        name: "Claude Opus 4.6",
        reasoning: true,
        image: true,
        cost: [5.0, 25.0, 0.5, 6.25],
        context: 1_000_000,
        max: 128_000,
        levels: Some(r#"{"xhigh":"max"}"#),
        compat: Some(r#"{"forceAdaptiveThinking":true,"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-sonnet-4-6",
        name: "Claude Sonnet 4.6",
        reasoning: true,
        image: true,
        cost: [3.0, 15.0, 0.3, 3.75],
        context: 1_000_000,
        max: 64_000,
        levels: None,
        compat: Some(r#"{"forceAdaptiveThinking":true,"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-opus-4-5",
        name: "Claude Opus 4.5 (latest)",
        reasoning: true,
        image: true,
        cost: [5.0, 25.0, 0.5, 6.25],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: Some(r#"{"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5 (latest)",
        reasoning: true,
        image: true,
        cost: [3.0, 15.0, 0.3, 3.75],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: Some(r#"{"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-sonnet-4-5-20250929",
        name: "Claude Sonnet 4.5",
        reasoning: true,
        image: true,
        cost: [3.0, 15.0, 0.3, 3.75],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: Some(r#"{"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-haiku-4-5",
        name: "Claude Haiku 4.5 (latest)",
        reasoning: true,
        image: true,
        cost: [1.0, 5.0, 0.1, 1.25],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: Some(r#"{"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-haiku-4-5-20251001",
        name: "Claude Haiku 4.5",
        reasoning: true,
        image: true,
        cost: [1.0, 5.0, 0.1, 1.25],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: Some(r#"{"supportsStrictTools":true}"#),
    },
    Spec {
        id: "claude-opus-4-1",
        name: "Claude Opus 4.1 (latest)",
        reasoning: true,
        image: true,
        cost: [15.0, 75.0, 1.5, 18.75],
        context: 200_000,
        max: 32_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "claude-sonnet-4-0",
        name: "Claude Sonnet 4 (latest)",
        reasoning: true,
        image: true,
        cost: [3.0, 15.0, 0.3, 3.75],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "claude-3-7-sonnet-20250219",
        name: "Claude Sonnet 3.7",
        reasoning: true,
        image: true,
        cost: [3.0, 15.0, 0.3, 3.75],
        context: 200_000,
        max: 64_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "claude-3-5-haiku-20241022",
        name: "Claude Haiku 3.5",
        reasoning: false,
        image: true,
        cost: [0.8, 4.0, 0.08, 1.0],
        context: 200_000,
        max: 8_192,
        levels: None,
        compat: None,
    },
];

const OPENAI: &[Spec] = &[
    Spec {
        id: "gpt-5.4",
        name: "GPT-5.4",
        reasoning: true,
        image: true,
        cost: [2.5, 15.0, 0.25, 0.0],
        context: 272_000,
        max: 128_000,
        levels: Some(r#"{"xhigh":"xhigh"}"#),
        compat: None,
    },
    Spec {
        id: "gpt-5.3-codex",
        name: "GPT-5.3 Codex",
        reasoning: true,
        image: true,
        cost: [1.75, 14.0, 0.175, 0.0],
        context: 400_000,
        max: 128_000,
        levels: Some(r#"{"xhigh":"xhigh"}"#),
        compat: None,
    },
    Spec {
        id: "gpt-5.2",
        name: "GPT-5.2",
        reasoning: true,
        image: true,
        cost: [1.75, 14.0, 0.175, 0.0],
        context: 400_000,
        max: 128_000,
        levels: Some(r#"{"xhigh":"xhigh"}"#),
        compat: None,
    },
    Spec {
        id: "gpt-5.1",
        name: "GPT-5.1",
        reasoning: true,
        image: true,
        cost: [1.25, 10.0, 0.13, 0.0],
        context: 400_000,
        max: 128_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-5",
        name: "GPT-5",
        reasoning: true,
        image: true,
        cost: [1.25, 10.0, 0.125, 0.0],
        context: 400_000,
        max: 128_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-5-mini",
        name: "GPT-5 Mini",
        reasoning: true,
        image: true,
        cost: [0.25, 2.0, 0.025, 0.0],
        context: 400_000,
        max: 128_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-5-nano",
        name: "GPT-5 Nano",
        reasoning: true,
        image: true,
        cost: [0.05, 0.4, 0.005, 0.0],
        context: 400_000,
        max: 128_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-4.1",
        name: "GPT-4.1",
        reasoning: false,
        image: true,
        cost: [2.0, 8.0, 0.5, 0.0],
        context: 1_047_576,
        max: 32_768,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-4.1-mini",
        name: "GPT-4.1 mini",
        reasoning: false,
        image: true,
        cost: [0.4, 1.6, 0.1, 0.0],
        context: 1_047_576,
        max: 32_768,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-4o",
        name: "GPT-4o",
        reasoning: false,
        image: true,
        cost: [2.5, 10.0, 1.25, 0.0],
        context: 128_000,
        max: 16_384,
        levels: None,
        compat: None,
    },
    Spec {
        id: "gpt-4o-mini",
        name: "GPT-4o mini",
        reasoning: false,
        image: true,
        cost: [0.15, 0.6, 0.08, 0.0],
        context: 128_000,
        max: 16_384,
        levels: None,
        compat: None,
    },
    Spec {
        id: "o3",
        name: "o3",
        reasoning: true,
        image: true,
        cost: [2.0, 8.0, 0.5, 0.0],
        context: 200_000,
        max: 100_000,
        levels: None,
        compat: None,
    },
    Spec {
        id: "o4-mini",
        name: "o4-mini",
        reasoning: true,
        image: true,
        cost: [1.1, 4.4, 0.28, 0.0],
        context: 200_000,
        max: 100_000,
        levels: None,
        compat: None,
    },
];

fn json_object(text: Option<&str>) -> Option<Map<String, Value>> {
    match serde_json::from_str(text?) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn build(spec: &Spec, provider: &str, api: &str, base_url: &str) -> Model {
    let mut input = vec!["text".to_owned()];
    if spec.image {
        input.push("image".to_owned());
    }
    Model {
        id: spec.id.to_owned(),
        name: spec.name.to_owned(),
        api: api.to_owned(),
        provider: provider.to_owned(),
        base_url: base_url.to_owned(),
        reasoning: spec.reasoning,
        thinking_level_map: json_object(spec.levels),
        input,
        input_limits: None,
        cost: ModelCost {
            input: spec.cost[0],
            output: spec.cost[1],
            cache_read: spec.cost[2],
            cache_write: spec.cost[3],
        },
        context_window: spec.context,
        max_tokens: spec.max,
        headers: None,
        compat: json_object(spec.compat),
    }
}

/// Built-in models of `provider` (`anthropic` or `openai`); empty for other providers.
pub fn builtin_models_for(provider: &str) -> Vec<Model> {
    match provider {
        "anthropic" => ANTHROPIC
            .iter()
            .map(|s| build(s, "anthropic", "anthropic-messages", ANTHROPIC_BASE_URL))
            .collect(),
        "openai" => OPENAI
            .iter()
            .map(|s| build(s, "openai", "openai-completions", OPENAI_BASE_URL))
            .collect(),
        _ => Vec::new(),
    }
}

/// All built-in models, grouped by provider in [`BUILTIN_PROVIDERS`] order.
pub fn builtin_models() -> Vec<Model> {
    BUILTIN_PROVIDERS
        .iter()
        .flat_map(|p| builtin_models_for(p))
        .collect()
}

/// The built-in model `provider`/`id`, if any.
pub fn find_builtin_model(provider: &str, id: &str) -> Option<Model> {
    builtin_models_for(provider)
        .into_iter()
        .find(|m| m.id == id)
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
    fn catalogue_is_consistent() {
        let all = builtin_models();
        assert!(all.len() >= 20);
        for m in &all {
            assert!(m.context_window > 0 && m.max_tokens > 0, "{}", m.id);
            assert!(crate::providers::provider_for_api(&m.api).is_some());
        }
        let opus = find_builtin_model("anthropic", "claude-opus-4-7").expect("opus");
        assert!(opus
            .supported_thinking_levels()
            .contains(&ThinkingLevel::Xhigh));
        let json = serde_json::to_value(&opus).expect("serialize");
        assert_eq!(json["baseUrl"], "https://api.anthropic.com");
        assert_eq!(json["cost"]["cacheWrite"], 6.25);
    }

    #[test]
    fn clamping() {
        let gpt = find_builtin_model("openai", "gpt-5").expect("gpt-5");
        assert_eq!(
            clamp_thinking_level(&gpt, ThinkingLevel::Xhigh),
            ThinkingLevel::High
        );
        let mini = find_builtin_model("openai", "gpt-4o").expect("gpt-4o");
        assert_eq!(
            clamp_thinking_level(&mini, ThinkingLevel::High),
            ThinkingLevel::Off
        );
        let mut m = gpt.clone();
        m.thinking_level_map = json_object(Some(r#"{"minimal":null}"#));
        assert_eq!(
            clamp_thinking_level(&m, ThinkingLevel::Minimal),
            ThinkingLevel::Low
        );
    }
}
