//! Strict JSON-schema tool parameters (upstream 1.6 `constrained-sampling.js`
//! `makeStrictJsonSchema`, facts only), for the adapters whose models validate tool arguments
//! against the schema: Gemini 3+ and Mistral with `compat.supportsStrictMode`.

use serde_json::{json, Value};

/// Tools that ask for strict JSON-schema sampling when the model supports it: upstream 1.6's
/// built-in `read`, `bash`, `edit` and `write` declare `constrainedSampling: {type:
/// "json_schema", strict: "prefer"}`. (Keyed by name until [`crate::types::ToolDefinition`]
/// carries that setting.)
pub(crate) fn prefers_strict_sampling(tool: &crate::types::ToolDefinition) -> bool {
    matches!(tool.name.as_str(), "read" | "bash" | "edit" | "write")
}

/// Keywords strict constrained sampling cannot express.
const UNSUPPORTED_STRICT: [&str; 16] = [
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
];

fn is_structured(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    let has_type = |t: &str| match m.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(a)) => a.iter().any(|v| v == t),
        _ => false,
    };
    has_type("object")
        || has_type("array")
        || m.contains_key("properties")
        || m.contains_key("items")
}

fn allows_null(schema: &Value) -> bool {
    let Some(m) = schema.as_object() else {
        return false;
    };
    match m.get("type") {
        Some(Value::String(s)) if s == "null" => return true,
        Some(Value::Array(a)) if a.iter().any(|v| v == "null") => return true,
        _ => {}
    }
    if m.get("const") == Some(&Value::Null)
        || m.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.contains(&Value::Null))
    {
        return true;
    }
    m.get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(allows_null))
}

/// Upstream's `makeStrictJsonSchema` on one node, in place: every property required (optional
/// ones become `anyOf: [<schema>, {"type": "null"}]`), `additionalProperties: false` on
/// objects. `None` when the schema cannot be made strict.
fn strict_node(schema: &mut Value) -> Option<()> {
    let m = schema.as_object_mut()?;
    if UNSUPPORTED_STRICT.iter().any(|k| m.contains_key(*k)) {
        return None;
    }
    if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("enum") {
        return None;
    }
    if let Some(any) = m.get_mut("anyOf") {
        let variants = any.as_array_mut().filter(|a| !a.is_empty())?;
        for v in variants {
            if is_structured(v) {
                return None;
            }
            strict_node(v)?;
        }
    }
    if let Some(items) = m.get_mut("items") {
        if items.is_array() {
            return None;
        }
        strict_node(items)?;
    }
    let object = m.get("type").and_then(Value::as_str) == Some("object");
    if m.contains_key("properties") && !object {
        return None;
    }
    if !object {
        return Some(());
    }
    if m.get("additionalProperties")
        .is_some_and(|a| a != &Value::Bool(false))
    {
        return None;
    }
    let required: Vec<String> = match m.get("required") {
        None => Vec::new(),
        Some(Value::Array(r)) => r
            .iter()
            .map(|k| k.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()?,
        Some(_) => return None,
    };
    let mut names = Vec::new();
    if let Some(props) = m.get_mut("properties") {
        let props = props.as_object_mut()?;
        if required.iter().any(|k| !props.contains_key(k)) {
            return None;
        }
        for (k, p) in props.iter_mut() {
            strict_node(p)?;
            if !required.contains(k) && !allows_null(p) {
                *p = json!({"anyOf": [p.clone(), {"type": "null"}]});
            }
            names.push(Value::String(k.clone()));
        }
    } else if !required.is_empty() {
        return None;
    }
    m.insert("required".into(), Value::Array(names));
    m.insert("additionalProperties".into(), Value::Bool(false));
    Some(())
}

/// The strict form of a tool's parameters (upstream `makeStrictJsonSchema`), `None` when it
/// cannot be made strict.
pub(crate) fn strict_schema(schema: &Value) -> Option<Value> {
    let mut out = schema.clone();
    if out.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    strict_node(&mut out)?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
