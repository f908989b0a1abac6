//! Strict JSON-schema tool parameters (upstream 1.6 `constrained-sampling.js`
//! `makeStrictJsonSchema`, facts only), for the adapters whose models validate tool arguments
//! against the schema: Gemini 3+ and Mistral with `compat.supportsStrictMode`.

use serde_json::Value;

/// Tools that ask for strict JSON-schema sampling when the model supports it: upstream 1.6's
/// built-in `read`, `bash`, `edit` and `write` declare `constrainedSampling: {type:
/// "json_schema", strict: "prefer"}`. (Keyed by name until [`crate::types::ToolDefinition`]
/// carries that setting.)
pub(crate) fn prefers_strict_sampling(tool: &crate::types::ToolDefinition) -> bool {
    matches!(tool.name.as_str(), "read" | "bash" | "edit" | "write")
}

/// The strict form of a tool's parameters (upstream `makeStrictJsonSchema`), `None` when it
/// cannot be made strict: the one conversion of
/// [`super::openai_responses::strict_schema`], whose error says why.
pub(crate) fn strict_schema(schema: &Value) -> Option<Value> {
    super::openai_responses::strict_schema(schema).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn optional_properties_become_nullable_and_required() {
        let schema = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}, "limit": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}});
        assert_eq!(
            strict_schema(&schema),
            Some(
                json!({"type": "object", "required": ["path", "limit", "tags"], "properties": {
                "path": {"type": "string"},
                "limit": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                "tags": {"anyOf": [{"type": "array", "items": {"type": "object",
                    "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                    "required": ["a"], "additionalProperties": false}}, {"type": "null"}]}},
                "additionalProperties": false})
            )
        );
        assert_eq!(strict_schema(&json!({"type": "object", "oneOf": []})), None);
        assert_eq!(strict_schema(&json!({"type": "string"})), None);
    }
}
