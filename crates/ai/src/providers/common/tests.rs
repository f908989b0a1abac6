//! Unit tests of the shared adapter plumbing.

use super::*;
use serde_json::json;

#[test]
fn streaming_json_repairs_truncation() {
    assert_eq!(parse_streaming_json(""), json!({}));
    assert_eq!(parse_streaming_json("{\"comman"), json!({}));
    assert_eq!(
        parse_streaming_json("{\"command\": \"ech"),
        json!({"command": "ech"})
    );
    assert_eq!(parse_streaming_json("{\"a\":1,\"b"), json!({"a": 1}));
    assert_eq!(parse_streaming_json("{\"a\":1,\"b\":"), json!({"a": 1}));
    assert_eq!(parse_streaming_json("{\"a\":[1,2"), json!({"a": [1, 2]}));
    assert_eq!(parse_streaming_json("{\"a\":\"x\\"), json!({"a": "x"}));
    assert_eq!(parse_streaming_json("{\"a\":tr"), json!({}));
    assert_eq!(parse_streaming_json("[1,2]"), json!({}));
    assert_eq!(
        parse_streaming_json("{\"a\":{\"b\":\"c\"}}"),
        json!({"a": {"b": "c"}})
    );
}

#[test]
fn http_error_texts() {
    let body =
        r#"{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}"#;
    assert_eq!(
        openai_http_error(500, body),
        r#"500: {"message":"boom","type":"server_error","param":null,"code":null}"#
    );
    let body =
        r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#;
    assert_eq!(
        anthropic_http_error(529, body),
        r#"529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
    );
    assert_eq!(anthropic_http_error(400, ""), "400 status code (no body)");
}
