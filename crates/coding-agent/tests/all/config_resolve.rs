//! Default model selection, pattern resolution and thinking levels, against the conformance
//! harness's models.json (golden get_state_fresh, models_set_cycle, thinking_levels,
//! prompt_no_model).

use pi_ai::{Model, ThinkingLevel as L};
use pi_coding_agent::config::{
    clamp_thinking_level, cycle_thinking_level, find_initial_model, no_api_key_message,
    parse_model_pattern, resolve_cli_model, resolve_model_scope, thinking_level_for_model_change,
    AuthStorage, InitialModelOptions, ModelRegistry, ModelsConfig, Settings,
};
use serde_json::json;
use std::path::Path;

fn harness_models() -> serde_json::Value {
    json!({"providers": {
        "fake-openai": {"api": "openai-completions", "apiKey": "fake-openai-key", "baseUrl": "http://127.0.0.1:1/v1",
            "models": [
                {"id": "fake-gpt", "name": "Fake GPT", "reasoning": true, "input": ["text", "image"],
                 "contextWindow": 128000, "maxTokens": 16384,
                 "cost": {"input": 1.0, "output": 4.0, "cacheRead": 0.1, "cacheWrite": 1.25}},
                {"id": "fake-gpt-mini", "name": "Fake GPT Mini", "reasoning": false, "input": ["text"],
                 "contextWindow": 32000, "maxTokens": 4096,
                 "cost": {"input": 0.5, "output": 1.5, "cacheRead": 0.05, "cacheWrite": 0}}]},
        "fake-anthropic": {"api": "anthropic-messages", "apiKey": "fake-anthropic-key", "baseUrl": "http://127.0.0.1:1",
            "models": [
                {"id": "fake-claude", "name": "Fake Claude", "reasoning": true, "input": ["text", "image"],
                 "contextWindow": 200000, "maxTokens": 32000,
                 "cost": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}},
                {"id": "fake-claude-haiku", "name": "Fake Claude Haiku", "reasoning": false, "input": ["text"],
                 "contextWindow": 200000, "maxTokens": 8192,
                 "cost": {"input": 1.0, "output": 5.0, "cacheRead": 0.1, "cacheWrite": 1.25}}]}
    }})
}

fn setup(
    models: serde_json::Value,
    settings: serde_json::Value,
) -> (tempfile::TempDir, ModelRegistry, Settings) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("models.json"), models.to_string()).unwrap();
    std::fs::write(dir.path().join("settings.json"), settings.to_string()).unwrap();
    // Only the models.json models (no built-in catalogue), so results do not depend on the
    // catalogue or on provider keys in the test environment.
    let config = ModelsConfig::load(&dir.path().join("models.json"))
        .unwrap()
        .unwrap_or_default();
    let reg = ModelRegistry::from_parts(Vec::new(), config, AuthStorage::load(dir.path()));
    let cwd = dir.path().join("cwd");
    let s = Settings::load(dir.path(), &cwd);
    (dir, reg, s)
}

fn opts_from(s: &Settings) -> InitialModelOptions {
    InitialModelOptions {
        default_provider: s.default_provider().map(str::to_string),
        default_model: s.default_model().map(str::to_string),
        default_thinking_level: s.default_thinking_level(),
        ..Default::default()
    }
}

fn key(m: &Model) -> String {
    format!("{}/{}", m.provider, m.id)
}

#[test]
fn settings_default_model_non_reasoning_starts_off() {
    let (_d, reg, s) = setup(
        harness_models(),
        json!({"defaultProvider": "fake-openai", "defaultModel": "fake-gpt-mini"}),
    );
    let init = find_initial_model(&opts_from(&s), &reg).unwrap();
    assert_eq!(
        key(init.model.as_ref().unwrap()),
        "fake-openai/fake-gpt-mini"
    );
    assert_eq!(init.thinking_level, L::Off);
}

#[test]
fn settings_default_reasoning_model_starts_medium() {
    let (_d, reg, s) = setup(
        harness_models(),
        json!({"defaultProvider": "fake-openai", "defaultModel": "fake-gpt"}),
    );
    let init = find_initial_model(&opts_from(&s), &reg).unwrap();
    assert_eq!(key(init.model.as_ref().unwrap()), "fake-openai/fake-gpt");
    assert_eq!(init.thinking_level, L::Medium);
}

#[test]
fn no_default_falls_back_to_first_available_in_registry_order() {
    let (_d, reg, s) = setup(harness_models(), json!({}));
    let order: Vec<String> = reg.available().iter().map(key).collect();
    assert_eq!(
        order,
        [
            "fake-openai/fake-gpt",
            "fake-openai/fake-gpt-mini",
            "fake-anthropic/fake-claude",
            "fake-anthropic/fake-claude-haiku"
        ]
    );
    let init = find_initial_model(&opts_from(&s), &reg).unwrap();
    assert_eq!(key(init.model.as_ref().unwrap()), "fake-openai/fake-gpt");
    // RPC shape of a plain custom model (golden get_available_models).
    let v = serde_json::to_value(init.model.unwrap()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "name",
            "api",
            "provider",
            "baseUrl",
            "reasoning",
            "input",
            "cost",
            "contextWindow",
            "maxTokens"
        ]
    );
}

#[test]
fn unknown_default_or_unauthenticated_default_falls_back() {
    let mut models = harness_models();
    models["providers"]["fake-openai"]
        .as_object_mut()
        .unwrap()
        .remove("apiKey");
    let (_d, reg, s) = setup(
        models,
        json!({"defaultProvider": "fake-openai", "defaultModel": "fake-gpt-mini"}),
    );
    let init = find_initial_model(&opts_from(&s), &reg).unwrap();
    assert_eq!(
        key(init.model.as_ref().unwrap()),
        "fake-anthropic/fake-claude"
    );
}

#[test]
fn nothing_available_gives_none_and_off() {
    let (_d, reg, s) = setup(json!({"providers": {}}), json!({}));
    assert!(reg.available().is_empty());
    let init = find_initial_model(&opts_from(&s), &reg).unwrap();
    assert_eq!(init.model, None);
    assert_eq!(init.thinking_level, L::Off);
    let msg = no_api_key_message(None);
    assert_eq!(
        msg.lines().next(),
        Some("No API key found for the selected model.")
    );
    assert_eq!(
        no_api_key_message(Some("unknown")).lines().next(),
        Some("No API key found for the selected model.")
    );
    assert_eq!(
        no_api_key_message(Some("openai")).lines().next(),
        Some("No API key found for openai.")
    );
}

#[test]
fn missing_models_json_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let reg = ModelRegistry::load(Path::new(dir.path()));
    assert_eq!(reg.error(), None);
}

#[test]
fn cli_model_forms() {
    let (_d, reg, _s) = setup(harness_models(), json!({}));
    let r = |p: Option<&str>, m: &str| resolve_cli_model(p, Some(m), None, &reg);
    let got = r(None, "fake-anthropic/fake-claude").unwrap().unwrap();
    assert_eq!(key(&got.model), "fake-anthropic/fake-claude");
    let got = r(None, "fake-claude:high").unwrap().unwrap();
    assert_eq!(key(&got.model), "fake-anthropic/fake-claude");
    assert_eq!(got.thinking_level, Some(L::High));
    let got = r(Some("FAKE-OPENAI"), "fake-openai/fake-gpt-mini")
        .unwrap()
        .unwrap();
    assert_eq!(key(&got.model), "fake-openai/fake-gpt-mini");
    // Fuzzy: "haiku" is contained in one id.
    let got = r(None, "haiku").unwrap().unwrap();
    assert_eq!(key(&got.model), "fake-anthropic/fake-claude-haiku");
    // Fuzzy by name, several matches: the greatest alias id wins.
    let got = r(None, "Fake GPT").unwrap().unwrap();
    assert_eq!(key(&got.model), "fake-openai/fake-gpt-mini");
    // Strict mode: an invalid suffix fails the pattern.
    assert!(r(None, "fake-claude:turbo").is_err());
    // Known provider, unknown id: a custom id cloned from the provider's first model.
    let got = r(Some("fake-openai"), "brand-new:low").unwrap().unwrap();
    assert_eq!(got.model.id, "brand-new");
    assert_eq!(got.model.base_url, "http://127.0.0.1:1/v1");
    assert!(got.model.reasoning);
    assert_eq!(got.thinking_level, Some(L::Low));
    assert!(got.warning.unwrap().contains("Using custom model id"));
    assert_eq!(
        r(Some("nope"), "x").unwrap_err(),
        "Unknown provider \"nope\". Use --list-models to see available providers/models."
    );
    assert_eq!(
        r(None, "zzz").unwrap_err(),
        "Model \"zzz\" not found. Use --list-models to see available models."
    );
    assert_eq!(resolve_cli_model(None, None, None, &reg).unwrap(), None);
}

#[test]
fn cli_model_wins_and_thinking_precedence() {
    let (_d, reg, s) = setup(
        harness_models(),
        json!({"defaultProvider": "fake-openai", "defaultModel": "fake-gpt-mini", "defaultThinkingLevel": "low"}),
    );
    let mut o = opts_from(&s);
    o.cli_model = Some("fake-claude:high".into());
    let init = find_initial_model(&o, &reg).unwrap();
    assert_eq!(
        key(init.model.as_ref().unwrap()),
        "fake-anthropic/fake-claude"
    );
    assert_eq!(init.thinking_level, L::High);
    o.cli_thinking = Some(L::Xhigh);
    // xhigh is opt-in: clamped down to high.
    assert_eq!(
        find_initial_model(&o, &reg).unwrap().thinking_level,
        L::High
    );
    o.cli_thinking = None;
    o.cli_model = Some("fake-gpt".into());
    assert_eq!(find_initial_model(&o, &reg).unwrap().thinking_level, L::Low);
    o.cli_model = Some("nothing-like-this".into());
    assert!(find_initial_model(&o, &reg).is_err());
}

#[test]
fn model_scope_globs_and_levels() {
    let (_d, reg, _s) = setup(harness_models(), json!({}));
    let avail = reg.available();
    let pats: Vec<String> = [
        "fake-anthropic/*:high",
        "fake-gpt",
        "*mini",
        "nomatch",
        "fake-gpt:bad",
    ]
    .iter()
    .map(std::string::ToString::to_string)
    .collect();
    let (scope, warnings) = resolve_model_scope(&pats, &avail);
    let got: Vec<(String, Option<L>)> = scope
        .iter()
        .map(|s| (key(&s.model), s.thinking_level))
        .collect();
    assert_eq!(
        got,
        [
            ("fake-anthropic/fake-claude".to_string(), Some(L::High)),
            (
                "fake-anthropic/fake-claude-haiku".to_string(),
                Some(L::High)
            ),
            ("fake-openai/fake-gpt".to_string(), None),
            ("fake-openai/fake-gpt-mini".to_string(), None),
        ]
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("nomatch"));
    assert!(warnings[1].contains("Invalid thinking level \"bad\""));
    let lenient = parse_model_pattern("fake-gpt:bad", &avail, false);
    assert_eq!(key(lenient.model.as_ref().unwrap()), "fake-openai/fake-gpt");
    assert!(parse_model_pattern("fake-gpt:bad", &avail, true)
        .model
        .is_none());
}

#[test]
fn thinking_levels_match_golden_sequences() {
    let (_d, reg, _s) = setup(harness_models(), json!({}));
    let gpt = reg.find("fake-openai", "fake-gpt").unwrap().clone();
    let mini = reg.find("fake-openai", "fake-gpt-mini").unwrap().clone();
    let claude = reg.find("fake-anthropic", "fake-claude").unwrap().clone();
    // thinking_levels: set high, then cycle 7 times.
    let mut level = clamp_thinking_level(Some(&gpt), L::High);
    let mut seen = Vec::new();
    for _ in 0..7 {
        level = cycle_thinking_level(Some(&gpt), level).unwrap();
        seen.push(level.as_str());
    }
    assert_eq!(
        seen,
        ["off", "minimal", "low", "medium", "high", "off", "minimal"]
    );
    assert_eq!(clamp_thinking_level(Some(&gpt), L::Xhigh), L::High);
    assert_eq!(clamp_thinking_level(Some(&mini), L::High), L::Off);
    assert_eq!(cycle_thinking_level(Some(&mini), L::Off), None);
    assert_eq!(cycle_thinking_level(None, L::Off), None);
    assert_eq!(clamp_thinking_level(None, L::Max), L::Max);
    assert_eq!(
        clamp_thinking_level(Some(&Model::unknown()), L::Medium),
        L::Off
    );
    // models_set_cycle: from a non-reasoning model (off) to a reasoning one stays off.
    assert_eq!(
        thinking_level_for_model_change(&claude, None, None, L::Off),
        L::Off
    );
    assert_eq!(
        thinking_level_for_model_change(&mini, None, None, L::Minimal),
        L::Off
    );
    assert_eq!(
        thinking_level_for_model_change(&claude, None, Some(L::Low), L::Off),
        L::Low
    );
    assert_eq!(
        thinking_level_for_model_change(&claude, Some(L::High), Some(L::Low), L::Off),
        L::High
    );
    // A model whose map forbids "off" moves up to minimal.
    let mut no_off = claude;
    no_off.thinking_level_map = Some(json!({"off": null}).as_object().unwrap().clone());
    assert_eq!(clamp_thinking_level(Some(&no_off), L::Off), L::Minimal);
}
