//! The pack kit: what every tool pack needs to read its arguments and
//! report its failures the same way, so that a caller sees one error shape
//! whichever pack refused it.
//!
//! - [`invalid`]: the invalid-arguments error every parser returns;
//! - [`parse_object`] and [`Object`]: serde parsing that reads a struct
//!   from a JSON object only (serde's derive would also read one from an
//!   array of its fields in order, which no tool's schema takes);
//! - [`object_args`]: the same rule for a tool that reads its arguments
//!   field by field;
//! - `From<EmitError> for RunError`: a run whose log refused an event ends
//!   `failed` (internal) with the log's reason, in every pack alike.
//!
//! With the `tool-contract` feature, `weir_runtime::tool_contract` checks that a
//! tool's input schema and its parser agree.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use weir_core::{FailureCode, RunError};

use crate::EmitError;

/// An invalid-arguments error saying `message` (add a remediation with
/// [`RunError::with_remediation`] where the pack has one).
///
/// ```
/// use weir_core::FailureCode;
/// let error = weir_runtime::kit::invalid("`path` must be a non-empty string");
/// assert_eq!(error.code, FailureCode::InvalidArguments);
/// ```
pub fn invalid(message: impl Into<String>) -> RunError {
    RunError::new(FailureCode::InvalidArguments, message)
}

/// Parses `arguments`, which must be a JSON object, into `T`; on failure an
/// [`invalid`] error `arguments: ` and serde's message (which names the
/// field and what it expected).
///
/// ```
/// #[derive(Debug, serde::Deserialize)]
/// struct Args { n: u32 }
/// use serde_json::json;
/// use weir_runtime::kit::parse_object;
/// assert_eq!(parse_object::<Args>(json!({"n": 3})).unwrap().n, 3);
/// let refused = parse_object::<Args>(json!([3])).unwrap_err();
/// assert_eq!(refused.message, "arguments: invalid type: sequence, expected a map");
/// ```
///
/// A whole number written with a fraction (`50.0`) reads as the integer
/// it is: JSON Schema's `integer` admits it, so the scheduler's schema
/// check passes it, and serde alone would refuse it for an integer field.
pub fn parse_object<T: DeserializeOwned>(mut arguments: Value) -> Result<T, RunError> {
    whole_numbers_as_integers(&mut arguments);
    serde_json::from_value(arguments)
        .map(|Object(parsed)| parsed)
        .map_err(|error| invalid(format!("arguments: {error}")))
}

/// Every number in `value` that is a whole float (`50.0`) made the same
/// integer; other numbers as they are (a float field reads an integer too).
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(number) => {
            let whole = number
                .as_f64()
                .filter(|float| !number.is_i64() && !number.is_u64() && float.fract() == 0.0);
            if let Some(float) = whole {
                if float >= 0.0 && float <= u64::MAX as f64 {
                    *value = Value::from(float as u64);
                } else if float >= i64::MIN as f64 && float < 0.0 {
                    *value = Value::from(float as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// The arguments as an object, for a tool that reads them field by field;
/// anything else is refused as [`invalid`].
///
/// ```
/// use serde_json::json;
/// use weir_runtime::kit::object_args;
/// assert!(object_args(&json!({"path": "."})).is_ok());
/// assert_eq!(object_args(&json!("x")).unwrap_err().message, "arguments must be an object, not a string");
/// ```
pub fn object_args(arguments: &Value) -> Result<&Map<String, Value>, RunError> {
    arguments.as_object().ok_or_else(|| {
        let got = match arguments {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        };
        invalid(format!("arguments must be an object, not {got}"))
    })
}

/// A `T` read from a JSON object only: for a struct nested in arguments
/// (an item of an array of objects), as [`parse_object`] is for the whole.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let object = Map::<String, Value>::deserialize(deserializer)?;
        serde_json::from_value(Value::Object(object))
            .map(Object)
            .map_err(serde::de::Error::custom)
    }
}

/// A run whose log refused an event cannot go on reporting: it fails as
/// internal, saying why the log refused.
impl From<EmitError> for RunError {
    fn from(error: EmitError) -> RunError {
        RunError::new(
            FailureCode::Internal,
            format!("the run's log refused an event: {error}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Args {
        #[allow(dead_code)]
        path: String,
    }

    #[test]
    fn only_an_object_is_read() {
        assert!(parse_object::<Args>(json!({"path": "."})).is_ok());
        for refused in [json!(["."]), json!("."), json!(null)] {
            let error = parse_object::<Args>(refused.clone()).unwrap_err();
            assert_eq!(error.code, FailureCode::InvalidArguments, "{refused}");
            assert!(error.message.starts_with("arguments: "), "{error}");
        }
        let unknown = parse_object::<Args>(json!({"path": ".", "x": 1})).unwrap_err();
        assert!(unknown.message.contains("unknown field `x`"), "{unknown}");
    }

    #[test]
    fn a_whole_number_written_as_a_float_reads_as_an_integer() {
        #[derive(Debug, Deserialize)]
        struct Limits {
            limit: u32,
            offset: i64,
            ratio: f64,
            sizes: Vec<u8>,
        }
        let read: Limits =
            parse_object(json!({"limit": 50.0, "offset": -2.0, "ratio": 1.0, "sizes": [1.0, 2]}))
                .unwrap();
        assert_eq!(
            (read.limit, read.offset, read.ratio, read.sizes),
            (50, -2, 1.0, vec![1, 2])
        );
        let fraction =
            parse_object::<Limits>(json!({"limit": 50.5, "offset": 0, "ratio": 1, "sizes": []}))
                .unwrap_err();
        assert!(fraction.message.contains("50.5"), "{fraction}");
    }

    #[test]
    fn an_emit_error_fails_the_run_as_internal() {
        let error = RunError::from(EmitError::TerminalReserved("completed"));
        assert_eq!(error.code, FailureCode::Internal);
        assert!(
            error
                .message
                .starts_with("the run's log refused an event: ")
        );
    }
}
