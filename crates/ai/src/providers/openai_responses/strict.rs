//! Strict-mode JSON schemas for function tools (upstream's strict-schema conversion and its
//! [`UnsupportedStrictSchema`] error).

use serde_json::{json, Value};

/// Why a JSON schema has no strict form (upstream `UnsupportedStrictJsonSchemaError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnsupportedStrictSchema(&'static str);

/// Keywords OpenAI strict mode rejects.
pub(super) const UNSUPPORTED_STRICT_KEYS: [&str; 16] = [
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

/// The strict form of a tool's JSON schema, as OpenAI strict mode wants it (upstream
/// `makeStrictJsonSchema`): every object lists all its properties in `required` and gets
/// `additionalProperties: false`, and a property that was optional becomes
/// `{anyOf: [<schema>, {type: "null"}]}` unless it already allows `null`. Errors for schemas
/// strict mode cannot express (the keywords of `UNSUPPORTED_STRICT_KEYS`, untyped nodes,
/// object/array unions, tuples, open `additionalProperties`, a root that is not an object).
pub fn strict_schema(schema: &Value) -> Result<Value, UnsupportedStrictSchema> {
    let mut s = schema.clone();
    if !s.is_object() || s.get("type").and_then(Value::as_str) != Some("object") {
        return Err(UnsupportedStrictSchema("root schema must have type object"));
    }
    make_strict(&mut s)?;
    Ok(s)
}

pub(super) fn is_structured(v: &Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    types.contains(&"object")
        || types.contains(&"array")
        || m.contains_key("properties")
        || m.contains_key("items")
}

pub(super) fn allows_null(v: &Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    match m.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(a)) if a.iter().any(|t| t == "null") => return true,
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

pub(super) fn make_strict(node: &mut Value) -> Result<(), UnsupportedStrictSchema> {
    let Some(m) = node.as_object_mut() else {
        return Err(UnsupportedStrictSchema("boolean schemas are unsupported"));
    };
    if UNSUPPORTED_STRICT_KEYS.iter().any(|k| m.contains_key(*k)) {
        return Err(UnsupportedStrictSchema("unsupported keyword"));
    }
    if !m.contains_key("type") && !m.contains_key("anyOf") && !m.contains_key("enum") {
        return Err(UnsupportedStrictSchema(
            "schemas without a type are unsupported",
        ));
    }
    if let Some(any) = m.get_mut("anyOf") {
        let Some(variants) = any.as_array_mut().filter(|a| !a.is_empty()) else {
            return Err(UnsupportedStrictSchema(
                "anyOf must contain at least one schema",
            ));
        };
        for v in variants {
            if is_structured(v) {
                return Err(UnsupportedStrictSchema(
                    "object and array unions are unsupported",
                ));
            }
            make_strict(v)?;
        }
    }
    if let Some(items) = m.get_mut("items") {
        if items.is_array() {
            return Err(UnsupportedStrictSchema("tuple schemas are unsupported"));
        }
        make_strict(items)?;
    }
    let is_object = m.get("type").and_then(Value::as_str) == Some("object");
    if m.contains_key("properties") && !is_object {
        return Err(UnsupportedStrictSchema("properties require type object"));
    }
    if !is_object {
        return Ok(());
    }
    if m.get("additionalProperties")
        .is_some_and(|a| *a != Value::Bool(false))
    {
        return Err(UnsupportedStrictSchema(
            "schema-valued or true additionalProperties is unsupported",
        ));
    }
    let required: Vec<String> = match m.get("required") {
        None => Vec::new(),
        Some(Value::Array(r)) => r
            .iter()
            .map(|k| k.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(UnsupportedStrictSchema(
                "object required must be a string array",
            ))?,
        Some(_) => {
            return Err(UnsupportedStrictSchema(
                "object required must be a string array",
            ))
        }
    };
    let mut names = Vec::new();
    match m.get_mut("properties") {
        None => {}
        Some(Value::Object(props)) => {
            names = props.keys().cloned().collect();
            if required.iter().any(|k| !names.contains(k)) {
                return Err(UnsupportedStrictSchema(
                    "required contains an unknown property",
                ));
            }
            for (key, prop) in props.iter_mut() {
                make_strict(prop)?;
                if !required.contains(key) && !allows_null(prop) {
                    let inner = prop.take();
                    *prop = json!({"anyOf": [inner, {"type": "null"}]});
                }
            }
        }
        Some(_) => {
            return Err(UnsupportedStrictSchema(
                "object properties must be a schema map",
            ))
        }
    }
    m.insert("required".into(), json!(names));
    m.insert("additionalProperties".into(), json!(false));
    Ok(())
}
