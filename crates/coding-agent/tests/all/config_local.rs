//! Local GGUF models in the registry (issue 3): `models.json` entries with api `local-gguf`,
//! discovered models after everything else, keyless availability, and the default model when
//! nothing else has credentials. No model file is needed: discovered models are synthesized.

use pi_ai::{Model, ModelCost};
use pi_coding_agent::config::{
    find_initial_model, get_a_model_guidance, is_keyless, no_api_key_message, AuthStorage,
    InitialModelOptions, ModelRegistry, ModelsConfig, LOCAL_API, LOCAL_PROVIDER,
};
use serde_json::{json, Value};
use std::path::Path;

/// A model as `pi_local::discover_models` lists it.
fn discovered(id: &str) -> Model {
    Model {
        id: id.into(),
        name: id.into(),
        api: LOCAL_API.into(),
        provider: LOCAL_PROVIDER.into(),
        base_url: format!("/models/{id}.gguf"),
        reasoning: false,
        thinking_level_map: None,
        input: vec!["text".into()],
        input_limits: None,
        cost: ModelCost::default(),
        context_window: 8192,
        max_tokens: 4096,
        headers: None,
        compat: None,
        extra: Default::default(),
    }
}

fn registry(models: Value, local: &[&str]) -> ModelRegistry {
    let config = ModelsConfig::from_value(&models).expect("valid models.json");
    let mut reg = ModelRegistry::from_parts(Vec::new(), config, AuthStorage::default());
    reg.add_local_models(local.iter().map(|id| discovered(id)).collect());
    reg
}

fn ids(models: &[Model]) -> Vec<String> {
    models
        .iter()
        .map(|m| format!("{}/{}", m.provider, m.id))
        .collect()
}

fn hosted() -> Value {
    json!({"providers": {
        "keyed": {"api": "openai-completions", "apiKey": "k", "baseUrl": "http://127.0.0.1:1/v1",
                  "models": [{"id": "hosted"}]},
        "keyless-hosted": {"api": "openai-completions", "baseUrl": "http://127.0.0.1:1/v1",
                  "models": [{"id": "nokey"}]}
    }})
}

#[test]
fn discovered_models_come_last_and_need_no_key() {
    let reg = registry(hosted(), &["b-model", "a-model"]);
    assert_eq!(
        ids(reg.all()),
        [
            "keyed/hosted",
            "keyless-hosted/nokey",
            "local/b-model",
            "local/a-model"
        ]
    );
    assert_eq!(
        ids(&reg.available()),
        ["keyed/hosted", "local/b-model", "local/a-model"]
    );
    assert!(reg.has_auth(LOCAL_PROVIDER));
    assert!(!reg.has_auth("keyless-hosted"));
    let local = reg.find(LOCAL_PROVIDER, "a-model").unwrap();
    assert!(is_keyless(local));
    let auth = reg.request_auth(local).unwrap();
    assert!(auth.keyless);
    assert_eq!(auth.api_key, None);
    assert!(
        !reg.request_auth(reg.find("keyed", "hosted").unwrap())
            .unwrap()
            .keyless
    );
}

#[test]
fn models_json_entry_wins_over_a_discovered_file_of_the_same_id() {
    let reg = registry(
        json!({"providers": {"local": {"api": "local-gguf",
            "models": [{"id": "a-model", "contextWindow": 1024, "maxTokens": 100}]}}}),
        &["a-model", "z-model"],
    );
    assert_eq!(ids(reg.all()), ["local/a-model", "local/z-model"]);
    let m = reg.find("local", "a-model").unwrap();
    assert_eq!((m.context_window, m.max_tokens), (1024, 100));
}

#[test]
fn models_json_names_a_gguf_by_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("models.json"),
        json!({"providers": {"mine": {
            "api": "local-gguf",
            "models": [
                {"id": "by-path", "path": "/opt/models/x.gguf", "contextWindow": 2048, "maxTokens": 256},
                {"id": "by-url", "baseUrl": "file:///opt/models/y.gguf"},
                {"id": "relative", "path": "weights/z.gguf"},
                {"id": "bare"}
            ]
        }}})
        .to_string(),
    )
    .unwrap();
    // `load` also searches <agent dir>/models/, which does not exist here.
    let reg = ModelRegistry::load(dir.path());
    assert_eq!(reg.error(), None);
    let get = |id: &str| reg.find("mine", id).unwrap().clone();

    let m = get("by-path");
    assert_eq!(m.api, "local-gguf");
    assert_eq!(m.base_url, "/opt/models/x.gguf");
    assert_eq!((m.context_window, m.max_tokens), (2048, 256));
    assert_eq!(m.cost, ModelCost::default());

    assert_eq!(get("by-url").base_url, "/opt/models/y.gguf");
    // Missing file, no contextWindow: the defaults of an unreadable GGUF.
    assert_eq!(
        (get("by-url").context_window, get("by-url").max_tokens),
        (8192, 4096)
    );
    assert_eq!(
        Path::new(&get("relative").base_url),
        dir.path().join("weights/z.gguf")
    );
    // No file named: the provider looks up <agent dir>/models/bare.gguf.
    assert_eq!(get("bare").base_url, "");
    assert_eq!(
        ids(&reg.available())
            .into_iter()
            .filter(|i| i.starts_with("mine/"))
            .count(),
        4
    );
}

#[test]
fn local_models_need_no_base_url_but_others_still_do() {
    let err = ModelsConfig::from_value(&json!({"providers": {"p": {
        "models": [{"id": "a", "api": "local-gguf"}, {"id": "b", "api": "openai-completions"}]
    }}}))
    .unwrap_err();
    assert!(err.contains("model \"b\": no \"baseUrl\""), "{err}");
    assert!(!err.contains("model \"a\""), "{err}");
}

#[test]
fn default_model_prefers_a_keyed_provider_then_the_first_local_model() {
    // A keyless models.json GGUF listed before a keyed hosted model: the hosted one wins.
    let reg = registry(
        json!({"providers": {
            "gguf": {"api": "local-gguf", "models": [{"id": "g", "path": "/g.gguf"}]},
            "keyed": {"api": "openai-completions", "apiKey": "k", "baseUrl": "http://h/v1",
                      "models": [{"id": "hosted"}]}
        }}),
        &["l1"],
    );
    let init = find_initial_model(&InitialModelOptions::default(), &reg).unwrap();
    assert_eq!(init.model.unwrap().id, "hosted");

    // Nothing keyed: the first local model in registry order.
    let reg = registry(
        json!({"providers": {"keyless-hosted": {"api": "openai-completions",
            "baseUrl": "http://h/v1", "models": [{"id": "nokey"}]}}}),
        &["l1", "l2"],
    );
    let init = find_initial_model(&InitialModelOptions::default(), &reg).unwrap();
    let m = init.model.unwrap();
    assert_eq!((m.provider.as_str(), m.id.as_str()), ("local", "l1"));

    // A settings default still wins over the local fallback.
    let reg = registry(hosted(), &["l1"]);
    let opts = InitialModelOptions {
        default_provider: Some("local".into()),
        default_model: Some("l1".into()),
        ..Default::default()
    };
    assert_eq!(
        find_initial_model(&opts, &reg).unwrap().model.unwrap().id,
        "l1"
    );
}

#[test]
fn no_model_message_keeps_upstream_first_line_and_says_how_to_get_one() {
    let msg = no_api_key_message(None);
    let mut lines = msg.lines();
    assert_eq!(
        lines.next(),
        Some("No API key found for the selected model.")
    );
    assert_eq!(lines.next(), Some(""));
    let guidance = get_a_model_guidance(Path::new("/agent"));
    assert!(guidance.contains("/agent/auth.json"), "{guidance}");
    if cfg!(feature = "local") {
        assert!(
            guidance.contains("scripts/fetch-default-model.sh"),
            "{guidance}"
        );
        assert!(guidance.contains("/agent/models"), "{guidance}");
        assert!(guidance.contains(".gguf"), "{guidance}");
    }
}
