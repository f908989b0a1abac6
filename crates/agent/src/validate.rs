//! Tool-argument validation and coercion (spec tools.md §0.2).
//!
//! Arguments are coerced towards the schema first (numeric and boolean strings, numbers and
//! booleans to strings, `null` to the type's zero value, recursively through objects, arrays and
//! `anyOf`/`oneOf`/`allOf`), then checked. The failure text is upstream's:
//!
//! ```text
//! Validation failed for tool "read":
//!   - path: missing
//!
//! Received arguments:
//! {
//!   "file": "a.txt"
//! }
//! ```
//!
//! Paths are dot-separated (`edits.0.oldText`), `root` for the arguments themselves.

use serde_json::{Map, Value};

/// Validates `args` against the JSON-Schema `schema` of tool `tool_name`, returning the coerced
/// arguments or the formatted failure text. Never panics on any input.
pub fn validate_tool_arguments(
    tool_name: &str,
    schema: &Value,
    args: &Value,
) -> Result<Value, String> {
    let mut value = args.clone();
    coerce(schema, &mut value);
    let mut errors = Vec::new();
    check(schema, &value, "", &mut errors);
    if errors.is_empty() {
        return Ok(value);
    }
    let details = errors
        .iter()
        .map(|(path, msg)| {
            let p = if path.is_empty() { "root" } else { path };
            format!("  - {p}: {msg}")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let received = serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string());
    Err(format!(
        "Validation failed for tool \"{tool_name}\":\n{details}\n\nReceived arguments:\n{received}"
    ))
}

fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn matches_type(value: &Value, ty: &str) -> bool {
    match ty {
        "number" => value.is_number(),
        "integer" => value
            .as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.is_finite()),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

/// A JSON number written as JavaScript's `JSON.stringify` would: integral values below 9e15 in
/// magnitude without a fraction (`0`, not `0.0`), other finite values as `f64`; `NaN` and
/// `±Infinity` (which JSON cannot hold) become `null`.
///
/// Also used by the coding agent's tools for `details` numbers.
pub fn json_number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// Formats a number exactly as JavaScript's `String(n)` (`Number.prototype.toString()`,
/// ECMA-262 §6.1.6.1.20) does, by the `ryu-js` crate: `2` (not `2.0`), `0.5`, `1e+21`,
/// `1e-7`, `-0` as `0`, `NaN`, `Infinity`, `-Infinity`.
///
/// Also used by the coding agent's tools for numbers in their texts.
pub fn js_number(n: f64) -> String {
    ryu_js::Buffer::new().format(n).to_string()
}

/// JavaScript's `String(number)` for a JSON number ([`js_number`] of its `f64` value).
fn js_number_string(n: &serde_json::Number) -> String {
    n.as_f64().map_or_else(|| n.to_string(), js_number)
}

/// The value converted to `ty`, if a conversion applies.
fn coerce_primitive(value: &Value, ty: &str) -> Option<Value> {
    match ty {
        "number" | "integer" => match value {
            Value::Null => Some(Value::from(0)),
            Value::String(s) if !s.trim().is_empty() => {
                let f: f64 = s.trim().parse().ok()?;
                if !f.is_finite() || (ty == "integer" && f.fract() != 0.0) {
                    return None;
                }
                Some(json_number(f))
            }
            Value::Bool(b) => Some(Value::from(u8::from(*b))),
            _ => None,
        },
        "boolean" => match value {
            Value::Null => Some(Value::Bool(false)),
            Value::String(s) if s == "true" => Some(Value::Bool(true)),
            Value::String(s) if s == "false" => Some(Value::Bool(false)),
            Value::Number(n) if n.as_f64() == Some(1.0) => Some(Value::Bool(true)),
            Value::Number(n) if n.as_f64() == Some(0.0) => Some(Value::Bool(false)),
            _ => None,
        },
        "string" => match value {
            Value::Null => Some(Value::String(String::new())),
            Value::Number(n) => Some(Value::String(js_number_string(n))),
            Value::Bool(b) => Some(Value::String(b.to_string())),
            _ => None,
        },
        "null" => match value {
            Value::String(s) if s.is_empty() => Some(Value::Null),
            Value::Bool(false) => Some(Value::Null),
            Value::Number(n) if n.as_f64() == Some(0.0) => Some(Value::Null),
            _ => None,
        },
        _ => None,
    }
}

fn coerce_union(value: &mut Value, branches: &[Value]) {
    for branch in branches {
        let mut candidate = value.clone();
        coerce(branch, &mut candidate);
        let mut errs = Vec::new();
        check(branch, &candidate, "", &mut errs);
        if errs.is_empty() {
            *value = candidate;
            return;
        }
    }
}

/// Coerces `value` in place towards `schema`.
fn coerce(schema: &Value, value: &mut Value) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for s in all {
            coerce(s, value);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = obj.get(key) {
            coerce_union(value, branches);
        }
    }
    let types = schema_types(schema);
    let matches_member = types.len() > 1 && types.iter().any(|t| matches_type(value, t));
    if !types.is_empty() && !matches_member && !types.iter().any(|t| matches_type(value, t)) {
        for t in &types {
            if let Some(v) = coerce_primitive(value, t) {
                *value = v;
                break;
            }
        }
    }
    if types.contains(&"object") {
        if let Value::Object(map) = value {
            let props = obj.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                for (k, s) in props {
                    if let Some(v) = map.get_mut(k) {
                        coerce(s, v);
                    }
                }
            }
            if let Some(extra @ Value::Object(_)) = obj.get("additionalProperties") {
                for (k, v) in map.iter_mut() {
                    if props.is_some_and(|p| p.contains_key(k)) {
                        continue;
                    }
                    coerce(extra, v);
                }
            }
        }
    }
    if types.contains(&"array") {
        if let Value::Array(items) = value {
            match obj.get("items") {
                Some(Value::Array(tuple)) => {
                    for (v, s) in items.iter_mut().zip(tuple) {
                        coerce(s, v);
                    }
                }
                Some(s @ Value::Object(_)) => {
                    for v in items.iter_mut() {
                        coerce(s, v);
                    }
                }
                _ => {}
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `values` as upstream's validator lists them: JSON, at most 20, then `, ... and N more]`.
fn list_values(values: &[Value]) -> String {
    const LISTED: usize = 20;
    let text = |v: &[Value]| serde_json::to_string(v).unwrap_or_default();
    if values.len() <= LISTED {
        return text(values);
    }
    let listed = text(&values[..LISTED]);
    format!(
        "{}, ... and {} more]",
        listed.strip_suffix(']').unwrap_or(&listed),
        values.len() - LISTED
    )
}

/// A value's type as upstream's validator names it (`integer` for integral numbers).
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Appends `(path, message)` for every violation of `schema` by `value`.
fn check(schema: &Value, value: &Value, path: &str, errors: &mut Vec<(String, String)>) {
    let Some(obj) = schema.as_object() else {
        return;
    };
    let types = schema_types(schema);
    if !types.is_empty() && !types.iter().any(|t| matches_type(value, t)) {
        errors.push((
            path.to_string(),
            format!("expected {}, got {}", types.join(" or "), type_name(value)),
        ));
        return;
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for s in all {
            check(s, value, path, errors);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = obj.get(key) {
            let ok = branches.iter().filter(|b| {
                let mut e = Vec::new();
                check(b, value, path, &mut e);
                e.is_empty()
            });
            let n = ok.count();
            if n == 0 || (key == "oneOf" && n > 1) {
                errors.push((
                    path.to_string(),
                    "must match a schema in anyOf".replace("anyOf", key),
                ));
            }
        }
    }
    if let Some(Value::Array(allowed)) = obj.get("enum") {
        if !allowed.contains(value) {
            errors.push((
                path.to_string(),
                format!("expected one of {}", list_values(allowed)),
            ));
        }
    }
    if let Some(c) = obj.get("const") {
        if c != value {
            errors.push((path.to_string(), format!("expected {c}")));
        }
    }
    match value {
        Value::Object(map) => check_object(obj, map, path, errors),
        Value::Array(items) => {
            if let Some(min) = obj.get("minItems").and_then(Value::as_u64) {
                if (items.len() as u64) < min {
                    errors.push((
                        path.to_string(),
                        format!("must NOT have fewer than {min} items"),
                    ));
                }
            }
            if let Some(max) = obj.get("maxItems").and_then(Value::as_u64) {
                if (items.len() as u64) > max {
                    errors.push((
                        path.to_string(),
                        format!("must NOT have more than {max} items"),
                    ));
                }
            }
            match obj.get("items") {
                Some(Value::Array(tuple)) => {
                    for (i, (v, s)) in items.iter().zip(tuple).enumerate() {
                        check(s, v, &join(path, &i.to_string()), errors);
                    }
                }
                Some(s @ Value::Object(_)) => {
                    for (i, v) in items.iter().enumerate() {
                        check(s, v, &join(path, &i.to_string()), errors);
                    }
                }
                _ => {}
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(min) = obj.get("minLength").and_then(Value::as_u64) {
                if len < min {
                    errors.push((
                        path.to_string(),
                        format!("must NOT have fewer than {min} characters"),
                    ));
                }
            }
            if let Some(max) = obj.get("maxLength").and_then(Value::as_u64) {
                if len > max {
                    errors.push((
                        path.to_string(),
                        format!("must NOT have more than {max} characters"),
                    ));
                }
            }
        }
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            let bound = |k: &str| obj.get(k).and_then(Value::as_f64);
            if let Some(m) = bound("minimum").filter(|m| f < *m) {
                errors.push((path.to_string(), format!("must be >= {m}")));
            }
            if let Some(m) = bound("maximum").filter(|m| f > *m) {
                errors.push((path.to_string(), format!("must be <= {m}")));
            }
            if let Some(m) = bound("exclusiveMinimum").filter(|m| f <= *m) {
                errors.push((path.to_string(), format!("must be > {m}")));
            }
            if let Some(m) = bound("exclusiveMaximum").filter(|m| f >= *m) {
                errors.push((path.to_string(), format!("must be < {m}")));
            }
        }
        _ => {}
    }
}

fn check_object(
    schema: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<(String, String)>,
) {
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                errors.push((join(path, key), "missing".into()));
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        for (k, s) in props {
            if let Some(v) = map.get(k) {
                check(s, v, &join(path, k), errors);
            }
        }
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            for k in map.keys() {
                if !props.is_some_and(|p| p.contains_key(k)) {
                    errors.push((join(path, k), "must NOT have additional properties".into()));
                }
            }
        }
        Some(extra @ Value::Object(_)) => {
            for (k, v) in map {
                if !props.is_some_and(|p| p.contains_key(k)) {
                    check(extra, v, &join(path, k), errors);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn js_number_is_javascripts_string_of_a_number() {
        // Node 20: String(x) for each.
        for (n, js) in [
            (2.0, "2"),
            (0.5, "0.5"),
            (-3.0, "-3"),
            (-0.0, "0"),
            (1e21, "1e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (1.5e300, "1.5e+300"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(js_number(n), js, "{n:?}");
        }
    }

    fn read_schema() -> Value {
        json!({"type":"object","required":["path"],"properties":{
            "path":{"type":"string"},"offset":{"type":"number"},"limit":{"type":"number"}}})
    }

    #[test]
    fn golden_missing_path() {
        let err =
            validate_tool_arguments("read", &read_schema(), &json!({"file": "a.txt"})).unwrap_err();
        assert_eq!(
            err,
            "Validation failed for tool \"read\":\n  - path: missing\n\nReceived arguments:\n{\n  \"file\": \"a.txt\"\n}"
        );
    }

    #[test]
    fn coerces_numbers_and_booleans() {
        let schema = json!({"type":"object","properties":{
            "n":{"type":"number"},"b":{"type":"boolean"},"s":{"type":"string"}}});
        let out =
            validate_tool_arguments("t", &schema, &json!({"n":"10","b":"true","s":5})).unwrap();
        assert_eq!(out, json!({"n":10,"b":true,"s":"5"}));
    }

    #[test]
    fn nested_paths_and_type_errors() {
        let schema = json!({"type":"object","required":["edits"],"properties":{
            "edits":{"type":"array","items":{"type":"object","required":["oldText","newText"],
            "properties":{"oldText":{"type":"string"},"newText":{"type":"string"}}}}}});
        let err = validate_tool_arguments(
            "edit",
            &schema,
            &json!({"edits":[{"oldText":"a"},{"oldText":[1],"newText":"b"}]}),
        )
        .unwrap_err();
        assert!(err.contains("  - edits.0.newText: missing\n"), "{err}");
        assert!(
            err.contains("  - edits.1.oldText: expected string, got array"),
            "{err}"
        );
    }

    #[test]
    fn non_object_root() {
        let err = validate_tool_arguments("read", &read_schema(), &json!("x")).unwrap_err();
        assert!(err.contains("  - root: expected object, got "), "{err}");
    }
}
