//! models.json / auth.json / credential resolution, with real files in temp dirs.

use pi_ai::{Model, ModelCost};
use pi_coding_agent::config::{AuthStorage, ModelRegistry, ModelsConfig};
use serde_json::{json, Value};
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

fn builtin(provider: &str, id: &str) -> Model {
    Model {
        id: id.into(),
        name: id.to_uppercase(),
        api: "openai-responses".into(),
        provider: provider.into(),
        base_url: "https://api.example.com".into(),
        reasoning: true,
        thinking_level_map: None,
        input: vec!["text".into()],
        input_limits: None,
        cost: ModelCost {
            input: 1.0,
            output: 2.0,
            cache_read: 0.1,
            cache_write: 0.2,
            tiers: None,
        },
        context_window: 100_000,
        max_tokens: 10_000,
        headers: None,
        compat: None,
        extra: Default::default(),
    }
}

#[test]
fn api_key_forms_literal_env_and_command() {
    let dir = tempfile::tempdir().unwrap();
    // 1.6 rules (config.md §5.2): `$NAME` reads the environment, a bare name is literal.
    let path_var = std::env::var("PATH").unwrap();
    write(
        dir.path(),
        "models.json",
        r#"{
          // comments are allowed
          "providers": {
            "lit": {"baseUrl": "http://a", "api": "openai-completions", "apiKey": "literal-key",
                    "models": [{"id": "m1"}]},
            "env": {"baseUrl": "http://b", "api": "openai-completions", "apiKey": "$PATH",
                    "models": [{"id": "m2"}]},
            "bare": {"baseUrl": "http://b", "api": "openai-completions", "apiKey": "PATH",
                    "models": [{"id": "m2b"}]},
            "cmd": {"baseUrl": "http://c", "api": "anthropic-messages", "apiKey": "!printf ' cmd-key \\n'",
                    "models": [{"id": "m3"}]},
            "failing": {"baseUrl": "http://d", "api": "anthropic-messages", "apiKey": "!exit 3",
                    "models": [{"id": "m4"}]},
            "nokey": {"baseUrl": "http://e", "api": "openai-completions", "models": [{"id": "m5"}]}
          }
        }"#,
    );
    let reg = ModelRegistry::load(dir.path());
    assert_eq!(reg.error(), None);
    assert_eq!(reg.api_key("lit").as_deref(), Some("literal-key"));
    assert_eq!(reg.api_key("env").as_deref(), Some(path_var.as_str()));
    assert_eq!(reg.api_key("bare").as_deref(), Some("PATH"));
    assert_eq!(reg.api_key("cmd").as_deref(), Some("cmd-key"));
    assert_eq!(reg.api_key("failing"), None);
    assert_eq!(reg.api_key("nokey"), None);
    // Availability only looks at whether a key source is configured.
    let custom = ["lit", "env", "bare", "cmd", "failing", "nokey"];
    let ids: Vec<String> = reg
        .available()
        .into_iter()
        .filter(|m| custom.contains(&m.provider.as_str()))
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, ["m1", "m2", "m2b", "m3", "m4"]);
    // Custom models come after the built-in catalogue.
    let all = reg.all();
    assert_eq!(all.len(), pi_ai::models::builtin_models().len() + 6);
    assert_eq!(all[all.len() - 6].id, "m1");
}

#[test]
fn custom_model_defaults_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        &json!({"providers": {"p": {
        "baseUrl": "http://p/v1", "api": "openai-completions", "apiKey": "k",
        "compat": {"supportsStore": false, "openRouterRouting": {"only": ["a"]}},
        "models": [
            {"id": "bare"},
            {"id": "full", "name": "Full", "api": "anthropic-messages", "baseUrl": "http://q",
             "reasoning": true, "input": ["text", "image"],
             "thinkingLevelMap": {"xhigh": "xhigh", "off": null},
             "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
             "contextWindow": 200000, "maxTokens": 32000,
             "compat": {"openRouterRouting": {"order": ["b"]}}}
        ]}}})
        .to_string(),
    );
    let reg = ModelRegistry::load(dir.path());
    let bare = reg.find("p", "bare").unwrap();
    assert_eq!(bare.name, "bare");
    assert_eq!(bare.api, "openai-completions");
    assert_eq!(bare.base_url, "http://p/v1");
    assert!(!bare.reasoning);
    assert_eq!(bare.input, ["text"]);
    assert_eq!(bare.cost, ModelCost::default());
    assert_eq!((bare.context_window, bare.max_tokens), (128_000, 16_384));

    let full = reg.find("p", "full").unwrap();
    assert_eq!(full.name, "Full");
    assert_eq!(full.api, "anthropic-messages");
    assert_eq!(full.base_url, "http://q");
    assert_eq!(full.cost.cache_write, 3.75);
    assert_eq!((full.context_window, full.max_tokens), (200_000, 32_000));
    let levels: Vec<&str> = full
        .supported_thinking_levels()
        .iter()
        .map(|l| l.as_str())
        .collect();
    assert_eq!(levels, ["minimal", "low", "medium", "high", "xhigh"]);
    let compat = full.compat.as_ref().unwrap();
    assert_eq!(compat["supportsStore"], json!(false));
    assert_eq!(
        compat["openRouterRouting"],
        json!({"only": ["a"], "order": ["b"]})
    );
}

#[test]
fn bad_models_json_keeps_builtins_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "models.json", "{ not json");
    let reg = ModelRegistry::load(dir.path());
    let err = reg.error().unwrap();
    assert!(err.starts_with("Failed to parse models.json:"), "{err}");
    assert!(err.ends_with(&format!(
        "File: {}",
        dir.path().join("models.json").display()
    )));

    let schema =
        ModelsConfig::from_value(&json!({"providers": {"p": {"models": "nope"}}})).unwrap_err();
    assert!(
        schema.starts_with("Invalid models.json schema:"),
        "{schema}"
    );
    let missing_api = ModelsConfig::from_value(
        &json!({"providers": {"p": {"baseUrl": "x", "models": [{"id": "a"}]}}}),
    )
    .unwrap_err();
    assert!(missing_api.contains("\"api\""), "{missing_api}");
    let zero = ModelsConfig::from_value(
        &json!({"providers": {"p": {"baseUrl": "x", "api": "y", "models": [{"id": "a", "contextWindow": 0}]}}}),
    )
    .unwrap_err();
    assert!(zero.contains("contextWindow"), "{zero}");
    let empty = ModelsConfig::from_value(&json!({"providers": {"p": {}}})).unwrap_err();
    assert!(empty.contains("\"p\""), "{empty}");
}

#[test]
fn provider_overrides_and_model_overrides_patch_builtins() {
    let config = ModelsConfig::from_value(&json!({"providers": {
        "acme": {"baseUrl": "http://proxy", "apiKey": "k", "headers": {"X-Team": "t"},
                 "modelOverrides": {"a1": {"name": "Renamed", "cost": {"input": 9},
                                           "contextWindow": 5, "headers": {"X-Model": "m"}}},
                 "models": [{"id": "a2", "api": "openai-completions", "name": "Custom A2"}]}
    }}))
    .unwrap();
    let reg = ModelRegistry::from_parts(
        vec![
            builtin("acme", "a1"),
            builtin("acme", "a2"),
            builtin("other", "o1"),
        ],
        config,
        AuthStorage::default(),
    );
    let ids: Vec<(&str, &str)> = reg
        .all()
        .iter()
        .map(|m| (m.provider.as_str(), m.id.as_str()))
        .collect();
    // A custom model with a built-in id replaces it and moves behind the catalogue.
    assert_eq!(ids, [("acme", "a1"), ("other", "o1"), ("acme", "a2")]);
    let a1 = reg.find("acme", "a1").unwrap();
    assert_eq!(a1.name, "Renamed");
    assert_eq!(a1.base_url, "http://proxy");
    assert_eq!(a1.cost.input, 9.0);
    assert_eq!(a1.cost.output, 2.0);
    assert_eq!(a1.context_window, 5);
    assert_eq!(reg.find("acme", "a2").unwrap().name, "Custom A2");
    assert_eq!(reg.find("acme", "a2").unwrap().base_url, "http://proxy");

    let auth = reg.request_auth(a1).unwrap();
    assert_eq!(auth.api_key.as_deref(), Some("k"));
    assert_eq!(auth.headers["X-Team"], "t");
    assert_eq!(auth.headers["X-Model"], "m");
    // "other" has no credentials at all.
    assert!(!reg.has_auth("other"));
    assert_eq!(reg.available().len(), 2);
}

#[test]
fn auth_header_and_precedence() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models.json",
        &json!({"providers": {
            "bearer": {"baseUrl": "http://b", "api": "openai-completions", "authHeader": true,
                       "apiKey": "from-models", "models": [{"id": "b1"}]},
            "keyless": {"baseUrl": "http://k", "api": "openai-completions", "authHeader": true,
                        "models": [{"id": "k1"}]}
        }})
        .to_string(),
    );
    write(
        dir.path(),
        "auth.json",
        r#"{"bearer": {"type": "api_key", "key": "from-auth"},
            "oauthy": {"type": "oauth", "access": "tok", "refresh": "r", "expires": 1}}"#,
    );
    let mut reg = ModelRegistry::load(dir.path());
    let b1 = reg.find("bearer", "b1").unwrap().clone();
    let auth = reg.request_auth(&b1).unwrap();
    assert_eq!(auth.api_key.as_deref(), Some("from-auth"));
    assert_eq!(auth.headers["Authorization"], "Bearer from-auth");
    let k1 = reg.find("keyless", "k1").unwrap().clone();
    assert_eq!(
        reg.request_auth(&k1).unwrap_err(),
        "No API key found for \"keyless\""
    );
    assert!(!reg.has_auth("keyless"));
    // Expired OAuth tokens are recognised but give no key (no refresh).
    assert!(reg.has_auth("oauthy"));
    assert_eq!(reg.api_key("oauthy"), None);
    // Runtime keys win over everything.
    reg.set_runtime_api_key("bearer", "runtime");
    assert_eq!(reg.api_key("bearer").as_deref(), Some("runtime"));
}

#[test]
fn auth_json_key_is_resolved_and_bad_auth_json_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "auth.json",
        r#"{"a": {"type": "api_key", "key": "${PI_TEST_AUTH_ONLY}-k", "env": {"PI_TEST_AUTH_ONLY": "env-secret"}},
            "b": {"type": "api_key", "key": "!echo run"},
            "c": {"type": "api_key", "key": "PATH"}}"#,
    );
    let auth = AuthStorage::load(dir.path());
    assert_eq!(auth.stored_api_key("a").as_deref(), Some("env-secret-k"));
    assert_eq!(auth.stored_api_key("c").as_deref(), Some("PATH"));
    assert_eq!(auth.stored_api_key("b").as_deref(), Some("run"));
    write(dir.path(), "auth.json", "[1,");
    let broken = AuthStorage::load(dir.path());
    assert!(!broken.has_entry("a"));
}

#[test]
fn ensure_agent_files_creates_empty_auth_and_store() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    pi_coding_agent::config::ensure_agent_files(&agent);
    assert_eq!(
        std::fs::read_to_string(agent.join("auth.json")).unwrap(),
        "{}"
    );
    assert_eq!(
        std::fs::read_to_string(agent.join("models-store.json")).unwrap(),
        "{}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(agent.join("auth.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Existing files are left alone.
    std::fs::write(agent.join("auth.json"), "{\"x\":1}").unwrap();
    pi_coding_agent::config::ensure_agent_files(&agent);
    assert_eq!(
        std::fs::read_to_string(agent.join("auth.json")).unwrap(),
        "{\"x\":1}"
    );
}

/// `inputLimits` is checked as upstream 1.6's models.json schema checks it (pi-ai
/// `ModelInputLimitsSchema`), with its messages; each expectation below was recorded from
/// upstream's `ModelConfig.load` on the same file (unknown keys pass there too).
#[test]
fn input_limits_follow_upstream_schema() {
    let check = |limits: Value| {
        ModelsConfig::from_value(&json!({"providers": {"p": {
            "api": "openai-completions", "baseUrl": "http://x", "apiKey": "k",
            "models": [{"id": "a", "inputLimits": limits}]}}}))
        .err()
    };
    let at = "Invalid models.json schema:\n  - providers.p.models.0.inputLimits";
    assert_eq!(
        check(json!({"maxRequestBytes": 0})).unwrap(),
        format!("{at}.maxRequestBytes: must be >= 1")
    );
    assert_eq!(
        check(json!({"images": {"maxPerMessage": 2.5}})).unwrap(),
        format!("{at}.images.maxPerMessage: must be integer")
    );
    assert_eq!(
        check(json!({"images": {"maxPerRequest": "3"}})).unwrap(),
        format!("{at}.images.maxPerRequest: must be integer")
    );
    assert_eq!(
        check(json!({"images": {"resize": {"jpegQuality": 101}}})).unwrap(),
        format!("{at}.images.resize.jpegQuality: must be <= 100")
    );
    assert_eq!(check(json!("x")).unwrap(), format!("{at}: must be object"));
    assert_eq!(
        check(json!({"images": 3})).unwrap(),
        format!("{at}.images: must be object")
    );
    for ok in [
        json!({"images": {"maxPerMessage": 1, "maxPerRequest": 1}, "maxRequestBytes": 1}),
        json!({"images": {"extra": 1}}),
        json!({"other": 1}),
    ] {
        assert_eq!(check(ok.clone()), None, "{ok}");
    }
    let over = ModelsConfig::from_value(&json!({"providers": {"anthropic": {
        "modelOverrides": {"claude-x": {"inputLimits": {"images": {"maxPerRequest": 0}}}}}}}))
    .unwrap_err();
    assert_eq!(
        over,
        "Invalid models.json schema:\n  - providers.anthropic.modelOverrides.claude-x.inputLimits.images.maxPerRequest: must be >= 1"
    );
}
