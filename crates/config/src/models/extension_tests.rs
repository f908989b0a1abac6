//! Unit tests of extension providers and virtual models in the registry.

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
        serde_json::from_value(serde_json::json!([{"id": "live-1"}, {"id": "live-2"}])).unwrap();
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
