//! Argument validation against the real tool schemas (spec tools.md §0.2, golden tool_errors).

use crate::tools_common::*;
use pi_agent::validate::validate_tool_arguments;
use serde_json::json;

#[test]
fn read_missing_path_matches_golden() {
    let dir = tempfile::tempdir().unwrap();
    let schema = tool(dir.path(), "read").definition().parameters;
    let err = validate_tool_arguments("read", &schema, &json!({"file":"a.txt"})).unwrap_err();
    assert_eq!(
        err,
        "Validation failed for tool \"read\":\n  - path: missing\n\nReceived arguments:\n{\n  \"file\": \"a.txt\"\n}"
    );
}

#[test]
fn coercion_of_string_numbers_and_booleans() {
    let dir = tempfile::tempdir().unwrap();
    let schema = tool(dir.path(), "grep").definition().parameters;
    let out = validate_tool_arguments(
        "grep",
        &schema,
        &json!({"pattern":"x","limit":"10","ignoreCase":"true"}),
    )
    .unwrap();
    assert_eq!(out, json!({"pattern":"x","limit":10,"ignoreCase":true}));
}

#[test]
fn edit_nested_errors() {
    let dir = tempfile::tempdir().unwrap();
    let schema = tool(dir.path(), "edit").definition().parameters;
    let err = validate_tool_arguments(
        "edit",
        &schema,
        &json!({"path":"a","edits":[{"oldText":"x"}]}),
    )
    .unwrap_err();
    assert!(err.starts_with("Validation failed for tool \"edit\":\n  - edits.0.newText: missing\n\nReceived arguments:\n"), "{err}");
    let err = validate_tool_arguments("edit", &schema, &json!({"edits":"nope"})).unwrap_err();
    assert!(err.contains("  - path: missing\n"), "{err}");
    assert!(
        err.contains("  - edits: expected array, got string"),
        "{err}"
    );
}
