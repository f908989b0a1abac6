//! settings.json loading, merging, accessors and writes, with real files in temp dirs.

use pi_ai::ThinkingLevel;
use pi_coding_agent::config::settings::deep_merge;
use pi_coding_agent::config::{QueueMode, Settings};
use serde_json::{json, Value};
use std::path::Path;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn defaults_without_files() {
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let s = Settings::load(agent.path(), cwd.path());
    assert!(s.raw().is_empty());
    assert!(s.errors().is_empty());
    assert_eq!(s.default_provider(), None);
    assert_eq!(s.default_thinking_level(), None);
    assert_eq!(s.steering_mode(), QueueMode::OneAtATime);
    assert_eq!(s.follow_up_mode(), QueueMode::OneAtATime);
    let r = s.retry();
    assert!(r.enabled);
    assert_eq!(
        (r.max_retries, r.base_delay_ms, r.max_agent_delay_ms),
        (3, 2000, 60_000)
    );
    assert_eq!(
        (
            r.provider_timeout_ms,
            r.provider_max_retries,
            r.provider_max_retry_delay_ms
        ),
        (None, 0, 60_000)
    );
    let c = s.compaction();
    assert!(c.enabled);
    assert_eq!((c.reserve_tokens, c.keep_recent_tokens), (16_384, 20_000));
    assert_eq!(s.branch_summary_reserve_tokens(), 16_384);
    assert!(s.images_auto_resize());
    assert!(!s.images_block_images());
}

#[test]
fn global_and_project_merge_nested_project_wins() {
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    write(
        &agent.path().join("settings.json"),
        r#"{"defaultProvider": "openai", "defaultModel": "gpt", "defaultThinkingLevel": "high",
            "retry": {"enabled": true, "maxRetries": 7, "provider": {"timeoutMs": 5, "maxRetries": 1}},
            "compaction": {"reserveTokens": 1000},
            "enabledModels": ["a", "b"], "shellPath": "/bin/zsh"}"#,
    );
    write(
        &cwd.path().join(".pi").join("settings.json"),
        r#"{"defaultModel": "gpt-mini", "steeringMode": "all",
            "retry": {"enabled": false, "provider": {"timeoutMs": 9}},
            "compaction": {"keepRecentTokens": 42}, "enabledModels": ["c"]}"#,
    );
    let s = Settings::load(agent.path(), cwd.path());
    assert_eq!(s.default_provider(), Some("openai"));
    assert_eq!(s.default_model(), Some("gpt-mini"));
    assert_eq!(s.default_thinking_level(), Some(ThinkingLevel::High));
    assert_eq!(s.steering_mode(), QueueMode::All);
    let r = s.retry();
    assert!(!r.enabled);
    assert_eq!(r.max_retries, 7);
    assert_eq!(
        s.get_path(&["retry", "provider"]),
        Some(&json!({"timeoutMs": 9, "maxRetries": 1}))
    );
    let c = s.compaction();
    assert_eq!((c.reserve_tokens, c.keep_recent_tokens), (1000, 42));
    assert_eq!(s.enabled_models(), Some(vec!["c".to_string()]));
    assert_eq!(s.shell_path(), Some("/bin/zsh"));
}

#[test]
fn deep_merge_replaces_arrays_and_scalars() {
    let base = json!({"a": {"x": 1, "y": [1, 2]}, "b": 1, "c": {"k": 1}});
    let over = json!({"a": {"y": [3]}, "b": {"now": "object"}, "c": 5, "d": true});
    let merged = deep_merge(base.as_object().unwrap(), over.as_object().unwrap());
    assert_eq!(
        Value::Object(merged),
        json!({"a": {"x": 1, "y": [3]}, "b": {"now": "object"}, "c": 5, "d": true})
    );
}

#[test]
fn bad_json_warns_and_uses_defaults() {
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    write(&agent.path().join("settings.json"), "{\"defaultModel\": ");
    write(&cwd.path().join(".pi").join("settings.json"), "[1, 2]");
    let mut s = Settings::load(agent.path(), cwd.path());
    assert_eq!(s.errors().len(), 2);
    assert_eq!(s.default_model(), None);
    // A broken global file is never overwritten.
    s.set_global(&["steeringMode"], json!("all")).unwrap();
    assert_eq!(s.steering_mode(), QueueMode::All);
    assert_eq!(
        std::fs::read_to_string(agent.path().join("settings.json")).unwrap(),
        "{\"defaultModel\": "
    );
}

#[test]
fn unknown_values_fall_back() {
    let s = Settings::from_values(
        json!({"steeringMode": "bogus", "defaultThinkingLevel": "huge", "retry": {"maxRetries": -1}}),
        json!(null),
    );
    assert_eq!(s.steering_mode(), QueueMode::OneAtATime);
    assert_eq!(s.get("steeringMode"), Some(&json!("bogus")));
    assert_eq!(s.default_thinking_level(), None);
    assert_eq!(s.retry().max_retries, 3);
}

#[test]
fn http_idle_timeout_follows_upstream_parsing() {
    let idle = |v: serde_json::Value| {
        Settings::from_values(json!({"httpIdleTimeoutMs": v}), json!({})).http_idle_timeout_ms()
    };
    assert_eq!(
        Settings::from_values(json!({}), json!({})).http_idle_timeout_ms(),
        300_000
    );
    assert_eq!(idle(json!(30000)), 30_000);
    assert_eq!(idle(json!(1500.7)), 1500);
    assert_eq!(idle(json!(0)), 0);
    assert_eq!(idle(json!("disabled")), 0);
    assert_eq!(idle(json!(" 60000 ")), 60_000);
    assert_eq!(idle(json!(-5)), 300_000);
    assert_eq!(idle(json!("soon")), 300_000);
    // The project file wins, as for every key.
    let s = Settings::from_values(
        json!({"httpIdleTimeoutMs": 1000}),
        json!({"httpIdleTimeoutMs": 2000}),
    );
    assert_eq!(s.http_idle_timeout_ms(), 2000);
}

#[test]
fn legacy_keys_are_migrated() {
    let s = Settings::from_values(
        json!({"queueMode": "all", "websockets": true,
               "skills": {"enableSkillCommands": false, "customDirectories": ["/x"]}}),
        json!({}),
    );
    assert_eq!(s.steering_mode(), QueueMode::All);
    assert_eq!(s.transport(), Some("websocket"));
    assert!(!s.enable_skill_commands());
    assert_eq!(s.resource_paths("skills"), ["/x"]);
}

#[test]
fn set_global_merges_into_file_pretty_without_newline() {
    let agent = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let file = agent.path().join("settings.json");
    write(
        &file,
        r#"{"defaultProvider": "fake-openai", "defaultModel": "fake-gpt-mini"}"#,
    );
    let mut s = Settings::load(agent.path(), cwd.path());
    s.set_global(&["steeringMode"], json!("all")).unwrap();
    s.set_global(&["followUpMode"], json!("all")).unwrap();
    s.set_global(&["steeringMode"], json!("bogus")).unwrap();
    s.set_global(&["compaction", "enabled"], json!(false))
        .unwrap();
    s.set_global(&["retry", "enabled"], json!(false)).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    // Same bytes upstream 1.6 leaves (golden queue_modes_and_toggles: 208 bytes).
    let expected = "{\n  \"defaultProvider\": \"fake-openai\",\n  \"defaultModel\": \"fake-gpt-mini\",\n  \"steeringMode\": \"bogus\",\n  \"followUpMode\": \"all\",\n  \"compaction\": {\n    \"enabled\": false\n  },\n  \"retry\": {\n    \"enabled\": false\n  }\n}";
    assert_eq!(text, expected);
    assert_eq!(text.len(), 208);
    assert!(!s.compaction().enabled);
    assert!(!s.retry().enabled);
}

#[test]
fn agent_dir_from_env_and_home() {
    // Pure function of the two variables: the test binary's environment is shared by every
    // test and must not be changed.
    use pi_coding_agent::config::agent_dir_with;
    let dir = tempfile::tempdir().unwrap();
    let home = Path::new("/home/tester");
    let d = dir.path().to_string_lossy().into_owned();
    assert_eq!(agent_dir_with(Some(&d), Some(home)), dir.path());
    assert_eq!(
        agent_dir_with(Some("~/custom"), Some(home)),
        Path::new("/home/tester/custom")
    );
    assert_eq!(
        agent_dir_with(None, Some(home)),
        Path::new("/home/tester/.pi/agent")
    );
    assert_eq!(agent_dir_with(Some(""), None), Path::new("./.pi/agent"));
}
