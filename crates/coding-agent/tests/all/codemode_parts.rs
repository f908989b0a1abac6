//! The pieces of the `codemode` tool that need no process: the options line, JavaScript
//! identifiers, TypeScript declarations from JSON schemas, BM25 ranking and the store replay.

use pi_coding_agent::codemode::catalog::{bm25, js_identifier, namespace_matches, ts_type};
use pi_coding_agent::codemode::{parse_options, replay_store, DEFAULT_MAX_OUTPUT_TOKENS};
use serde_json::json;

#[test]
fn options_line_is_only_allowed_first() {
    let (o, body) =
        parse_options("// @options: {\"max_output_tokens\": 20, \"timeout_ms\": 5}\nreturn 1;")
            .unwrap();
    assert_eq!((o.max_output_tokens, o.timeout_ms), (20, Some(5)));
    assert_eq!(body, "return 1;");
    let (o, body) = parse_options("return 2;").unwrap();
    assert_eq!(
        (o.max_output_tokens, o.timeout_ms),
        (DEFAULT_MAX_OUTPUT_TOKENS, None)
    );
    assert_eq!(body, "return 2;");
    assert!(parse_options("x;\n  // @options: {}")
        .unwrap_err()
        .contains("line 2"));
    assert!(parse_options("// @options: {}\nx;\n// @options: {}")
        .unwrap_err()
        .contains("line 3"));
    assert!(parse_options("// @options: [1]").is_err());
    assert!(parse_options("// @options: {\"timeout_ms\": -1}").is_err());
    assert!(parse_options("// @options: {\"other\": 1}").is_err());
    assert!(parse_options("// @options: {nope").is_err());
}

#[test]
fn identifiers_and_namespaces() {
    assert_eq!(
        js_identifier("mcp__dev-radius__search"),
        "mcp__dev_radius__search"
    );
    assert_eq!(js_identifier("9lives"), "_9lives");
    assert_eq!(js_identifier(""), "_");
    for n in [
        "mcp__dev-radius",
        "mcp__dev_radius",
        "dev-radius",
        "dev_radius",
    ] {
        assert!(namespace_matches("mcp__dev-radius", "dev-radius", n), "{n}");
    }
    assert!(!namespace_matches(
        "mcp__dev-radius",
        "dev-radius",
        "radius"
    ));
}

#[test]
fn typescript_types_of_schemas() {
    let s = json!({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "number"}, "b": {"type": "array", "items": {"type": "string"}},
        "c": {"enum": ["x", "y"]}, "d-e": {"type": ["string", "null"]},
        "f": {"type": "object", "properties": {}, "additionalProperties": {}}
    }});
    assert_eq!(
        ts_type(&s),
        "{ a: number; b?: Array<string>; c?: \"x\" | \"y\"; \"d-e\"?: string | null; f?: { [key: string]: unknown; }; }"
    );
    assert_eq!(ts_type(&json!({})), "unknown");
    assert_eq!(
        ts_type(&json!({"anyOf": [{"type": "boolean"}, {"const": 3}]})),
        "boolean | 3"
    );
}

#[test]
fn bm25_ranks_matching_documents_only() {
    let docs: Vec<String> = [
        "mcp fake echo Echo the text back",
        "mcp fake add Add two numbers",
        "mcp fake big Return many bytes of text text",
    ]
    .iter()
    .map(std::string::ToString::to_string)
    .collect();
    assert_eq!(bm25(&docs, "echo", 8), vec![0]);
    assert_eq!(bm25(&docs, "text", 8), vec![2, 0]);
    assert_eq!(bm25(&docs, "text", 1), vec![2]);
    assert!(bm25(&docs, "nothing here", 8).is_empty());
    assert!(bm25(&docs, "", 8).is_empty());
}

#[test]
fn store_entries_replay_in_order() {
    let m = replay_store(&[
        json!({"set": {"a": 1, "b": 2}, "delete": []}),
        json!({"set": {"a": 3}, "delete": ["b"]}),
        json!("garbage"),
    ]);
    assert_eq!(serde_json::Value::Object(m), json!({"a": 3}));
}
