//! Checks tool arguments against the common subset of JSON Schema that tool
//! input schemas use, with a message that names the offending field.
//!
//! Supported: `type` (one or several), `properties`, `required`,
//! `additionalProperties: false`, `enum`, `const`, `minimum`, `maximum`,
//! `minLength`, `maxLength`, `items`, `minItems`, `maxItems`. Other keywords
//! are ignored (accepted), so a richer schema never rejects valid input.

use serde_json::Value;

/// `Ok` when `value` fits `schema`; else what is wrong, naming the field by
/// its path (e.g. `arguments.files[2].path`).
///
/// ```
/// use serde_json::json;
/// let schema = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer", "minimum": 1}}});
/// assert!(weir_core::check_arguments(&schema, &json!({"n": 3})).is_ok());
/// assert_eq!(
///     weir_core::check_arguments(&schema, &json!({"n": "3"})).unwrap_err(),
///     "arguments.n must be an integer, got a string"
/// );
/// ```
pub fn check_arguments(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "arguments")
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

fn article(name: &str) -> &'static str {
    if matches!(name, "integer" | "array" | "object") {
        "an"
    } else {
        "a"
    }
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(()); // `true`, or nothing to check
    };
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
        let wanted: Vec<String> = types
            .iter()
            .map(|t| format!("{} {t}", article(t)))
            .collect();
        return Err(format!(
            "{path} must be {}, got {}",
            wanted.join(" or "),
            type_name(value)
        ));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return Err(format!(
            "{path} must be one of {}, got {value}",
            list.join(", ")
        ));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        return Err(format!("{path} must be {expected}, got {value}"));
    }
    if let Some(number) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            return Err(format!("{path} must be at least {min}, got {value}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            return Err(format!("{path} must be at most {max}, got {value}"));
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            return Err(format!(
                "{path} must have at least {min} characters, got {length}"
            ));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            return Err(format!(
                "{path} must have at most {max} characters, got {length}"
            ));
        }
    }
    if let Some(items) = value.as_array() {
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            return Err(format!(
                "{path} must have at least {min} items, got {count}"
            ));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            return Err(format!("{path} must have at most {max} items, got {count}"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{i}]"))?;
            }
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = required.as_str()
                && !object.contains_key(name)
            {
                return Err(format!("{path}.{name} is required"));
            }
        }
        for (name, field) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(field_schema) => check(field_schema, field, &format!("{path}.{name}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    let known: Vec<&str> = properties
                        .into_iter()
                        .flat_map(|p| p.keys())
                        .map(String::as_str)
                        .collect();
                    return Err(format!(
                        "{path}.{name} is not a known field; known fields: {}",
                        known.join(", ")
                    ));
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// The output schema a server lists for a tool whose full result schema is
/// `schema`: what every result carries and nothing else. The required
/// top-level fields, each with its `type` (and `enum`); an array's items
/// by their type; no descriptions, bounds, optional fields or nested
/// fields.
///
/// A host pays for every byte of `tools/list` in its context window, and
/// a client relies only on the fields a result always has; the rest is
/// in the tool's description and its docs. Every keyword kept is one of
/// `schema`'s, so whatever fits `schema` fits the contract.
///
/// ```
/// use serde_json::json;
/// let full = json!({"type": "object", "properties": {
///     "exit_code": {"type": ["integer", "null"], "description": "null when a signal ended it."},
///     "usage": {"type": "object", "properties": {"tokens": {"type": "integer"}}},
///     "lines": {"type": "array", "items": {"type": "object", "required": ["n"]}},
/// }, "required": ["exit_code", "lines"]});
/// assert_eq!(weir_core::output_contract(&full), json!({"type": "object", "properties": {
///     "exit_code": {"type": ["integer", "null"]},
///     "lines": {"type": "array", "items": {"type": "object"}},
/// }, "required": ["exit_code", "lines"]}));
/// ```
pub fn output_contract(schema: &Value) -> Value {
    let mut contract = shape(schema);
    let required = schema.get("required").and_then(Value::as_array);
    let Some(required) = required.filter(|names| !names.is_empty()) else {
        return contract;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let fields: serde_json::Map<String, Value> = required
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|name| Some((name.to_owned(), shape(properties?.get(name)?))))
        .collect();
    contract["properties"] = Value::Object(fields);
    contract["required"] = Value::Array(required.clone());
    contract
}

/// A schema's `type` and `enum`, and its items' (an array's).
fn shape(schema: &Value) -> Value {
    let mut shape = serde_json::Map::new();
    for keyword in ["type", "enum"] {
        if let Some(value) = schema.get(keyword) {
            shape.insert(keyword.to_owned(), value.clone());
        }
    }
    if let Some(items) = schema.get("items") {
        shape.insert("items".to_owned(), self::shape(items));
    }
    Value::Object(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(schema: Value, value: Value) -> String {
        check_arguments(&schema, &value).unwrap_err()
    }

    #[test]
    fn names_the_field_and_what_was_wrong() {
        let schema = json!({
            "type": "object",
            "required": ["language", "code"],
            "additionalProperties": false,
            "properties": {
                "language": {"type": "string", "enum": ["python", "bash"]},
                "code": {"type": "string", "maxLength": 5},
                "timeout_s": {"type": "number", "minimum": 0, "maximum": 60},
                "files": {"type": "array", "items": {"type": "object", "required": ["path"]}}
            }
        });
        let ok = json!({"language": "bash", "code": "ls"});
        assert!(check_arguments(&schema, &ok).is_ok());
        assert_eq!(
            error(schema.clone(), json!({"code": "x"})),
            "arguments.language is required"
        );
        assert_eq!(
            error(schema.clone(), json!({"language": "ruby", "code": "x"})),
            r#"arguments.language must be one of "python", "bash", got "ruby""#
        );
        assert_eq!(
            error(
                schema.clone(),
                json!({"language": "bash", "code": "x", "timeout_s": 99})
            ),
            "arguments.timeout_s must be at most 60, got 99"
        );
        assert_eq!(
            error(
                schema.clone(),
                json!({"language": "bash", "code": "x", "files": [{"path": "a"}, {}]})
            ),
            "arguments.files[1].path is required"
        );
        assert!(
            error(
                schema.clone(),
                json!({"language": "bash", "code": "x", "bogus": 1})
            )
            .contains("bogus is not a known field")
        );
        assert_eq!(
            error(schema, json!([1])),
            "arguments must be an object, got an array"
        );
        assert_eq!(
            error(json!({"type": ["string", "null"]}), json!(1)),
            "arguments must be a string or a null, got an integer"
        );
    }

    #[test]
    fn unknown_keywords_never_reject() {
        let schema =
            json!({"type": "object", "properties": {"x": {"pattern": "^a", "format": "uri"}}});
        assert!(check_arguments(&schema, &json!({"x": "zzz"})).is_ok());
        assert!(check_arguments(&json!(true), &json!(null)).is_ok());
    }

    /// The contract only loosens the schema, and keeps what a client
    /// relies on: the required fields and their types.
    #[test]
    fn the_contract_accepts_what_the_schema_accepts_and_keeps_its_required_fields() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "n": {"type": "integer", "minimum": 1, "description": "A count."},
                "rows": {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}},
                "note": {"type": "string"}
            },
            "required": ["n", "rows"]
        });
        let contract = output_contract(&schema);
        for value in [
            json!({"n": 2, "rows": [{"id": "a"}]}),
            json!({"n": 2, "rows": [], "note": "x"}),
        ] {
            assert_eq!(check_arguments(&schema, &value), Ok(()));
            assert_eq!(check_arguments(&contract, &value), Ok(()));
        }
        assert_eq!(
            error(contract.clone(), json!({"rows": []})),
            "arguments.n is required"
        );
        assert_eq!(
            error(contract.clone(), json!({"n": "2", "rows": []})),
            "arguments.n must be an integer, got a string"
        );
        assert_eq!(
            error(contract.clone(), json!({"n": 2, "rows": [1]})),
            "arguments.rows[0] must be an object, got an integer"
        );
        // Bounds, optional fields and nested fields are the docs' to say.
        assert_eq!(
            check_arguments(&contract, &json!({"n": 0, "rows": [{}], "x": 1})),
            Ok(())
        );
        assert_eq!(
            output_contract(&json!({"type": "object"})),
            json!({"type": "object"})
        );
    }
}
