//! Unit tests of the Responses adapter.

use super::input::normalize_tool_call_id;
use super::response::{http_error_text, service_tier_multiplier};
use super::*;
use serde_json::json;

#[test]
fn http_errors_read_as_upstream() {
    let body =
        r#"{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}"#;
    let f = Flavor::OpenAi {
        prefix: "OpenAI API error".into(),
    };
    assert_eq!(
        http_error_text(&f, 500, body),
        r#"OpenAI API error (500): {"message":"boom","type":"server_error","param":null,"code":null}"#
    );
    assert_eq!(
        http_error_text(&Flavor::Azure, 502, ""),
        "Azure OpenAI API error (502): 502 status code (no body)"
    );
    assert_eq!(http_error_text(&Flavor::Codex, 500, body), "boom");
    assert_eq!(
        http_error_text(
            &Flavor::Codex,
            429,
            r#"{"error":{"type":"usage_limit_reached","plan_type":"PLUS"}}"#
        ),
        "You have hit your ChatGPT usage limit (plus plan)."
    );
}

#[test]
fn service_tiers_scale_the_cost() {
    let f = Flavor::OpenAi {
        prefix: String::new(),
    };
    assert_eq!(service_tier_multiplier(&f, "gpt-5", "flex"), 0.5);
    assert_eq!(service_tier_multiplier(&f, "gpt-5", "fast"), 2.0);
    assert_eq!(service_tier_multiplier(&f, "gpt-5.5", "priority"), 2.5);
    assert_eq!(
        service_tier_multiplier(&Flavor::Codex, "gpt-5", "fast"),
        1.0
    );
    assert_eq!(
        service_tier_multiplier(&Flavor::Azure, "gpt-5", "flex"),
        1.0
    );
    assert_eq!(service_tier_multiplier(&f, "gpt-5", "default"), 1.0);
}

#[test]
fn strict_schemas_as_upstream() {
    let s = json!({"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string"}, "limit": {"type": "number"}}});
    assert_eq!(
        strict_schema(&s).unwrap(),
        json!({"type": "object", "required": ["path", "limit"], "properties": {
            "path": {"type": "string"},
            "limit": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
            "additionalProperties": false})
    );
    assert!(strict_schema(&json!({"type": "object", "properties": {"a": {}}})).is_err());
    assert!(strict_schema(&json!({"type": "string"})).is_err());
}

#[test]
fn tool_call_ids_normalize_as_upstream() {
    let mut m = Model::unknown();
    m.provider = "openai".into();
    assert_eq!(
        normalize_tool_call_id(&m, &OPENAI_TOOL_CALL_PROVIDERS, "call a|item.b"),
        "call_a|fc_item_b"
    );
    assert_eq!(
        normalize_tool_call_id(&m, &OPENAI_TOOL_CALL_PROVIDERS, "toolu_01:x"),
        "toolu_01_x"
    );
}
