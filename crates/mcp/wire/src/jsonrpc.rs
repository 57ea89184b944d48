//! JSON-RPC 2.0 framing: what arrives, what leaves, and the error codes.
//!
//! Messages stay `serde_json::Value` at this layer; methods parse their own
//! params, so an unknown method or a malformed param gets a precise error
//! instead of a generic parse failure.

use serde_json::{Map, Value, json};

/// Standard and MCP error codes.
pub mod code {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad params (including unknown tools and bad arguments).
    pub const INVALID_PARAMS: i64 = -32602;
    /// weir failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2025-11-25: resource not found.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// Streamable HTTP: unknown `Mcp-Session-Id` (sent with HTTP 404).
    pub const SESSION_NOT_FOUND: i64 = -32001;
    /// 2026-07-28: `MCP-Protocol-Version` header and `_meta` disagree.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the request needs a client capability it did not declare
    /// (`data.requiredCapabilities` names it).
    pub const MISSING_CAPABILITY: i64 = -32021;
    /// 2026-07-28: unsupported protocol version.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

/// An error answer, before it is framed.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code ([`code`]).
    pub code: i64,
    /// One line: what went wrong and what to do.
    pub message: String,
    /// Anything more, as the `data` member.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with no `data`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error, with `data`.
    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    /// [`code::INVALID_PARAMS`] with `message`.
    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }

    /// [`code::INTERNAL_ERROR`] with `message`.
    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INTERNAL_ERROR, message)
    }
}

/// One parsed message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// Expects an answer.
    Request {
        /// Its id, echoed in the answer.
        id: Value,
        /// The method called.
        method: String,
        /// Its params (`{}` when absent).
        params: Value,
    },
    /// Expects none.
    Notification {
        /// The method.
        method: String,
        /// Its params (`{}` when absent).
        params: Value,
    },
    /// An answer to a request weir sent (sampling, elicitation).
    Response {
        /// The id of the request it answers.
        id: Value,
        /// The `result`, or the `error` object.
        outcome: Result<Value, Value>,
    },
}

impl Incoming {
    /// Reads one message. Errors carry the id when one could be read, so the
    /// answer can still be correlated.
    pub fn parse(bytes: &[u8]) -> Result<Incoming, (Value, RpcError)> {
        let value: Value = serde_json::from_slice(bytes).map_err(|error| {
            (
                Value::Null,
                RpcError::new(code::PARSE_ERROR, format!("invalid JSON: {error}")),
            )
        })?;
        Incoming::from_value(value)
    }

    /// Reads one message already parsed as JSON.
    pub fn from_value(value: Value) -> Result<Incoming, (Value, RpcError)> {
        let Value::Object(mut object) = value else {
            let kind = if value.is_array() {
                "a batch (JSON-RPC batches are not supported since MCP 2025-06-18; send one message per request)"
            } else {
                "not an object"
            };
            return Err((
                Value::Null,
                RpcError::new(code::INVALID_REQUEST, format!("invalid message: {kind}")),
            ));
        };
        let id = object.remove("id");
        let invalid = |id: Option<Value>, why: &str| {
            Err((
                // Not an id at all (1.5, an object): JSON-RPC answers null.
                id.filter(|id| id.is_string() || id.is_i64() || id.is_u64())
                    .unwrap_or(Value::Null),
                RpcError::new(code::INVALID_REQUEST, format!("invalid request: {why}")),
            ))
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return invalid(id, "\"jsonrpc\" must be \"2.0\"");
        }
        if let Some(id) = &id
            && !(id.is_string() || id.is_i64() || id.is_u64())
        {
            return invalid(None, "\"id\" must be a string or an integer");
        }
        match object.remove("method") {
            Some(Value::String(method)) => {
                let params = object.remove("params").unwrap_or(Value::Object(Map::new()));
                if !params.is_object() {
                    return invalid(id, "\"params\" must be an object");
                }
                Ok(match id {
                    Some(id) => Incoming::Request { id, method, params },
                    None => Incoming::Notification { method, params },
                })
            }
            Some(_) => invalid(id, "\"method\" must be a string"),
            None if id.is_some()
                && (object.contains_key("result") || object.contains_key("error")) =>
            {
                let outcome = match object.remove("error") {
                    Some(error) => Err(error),
                    None => Ok(object.remove("result").unwrap_or_default()),
                };
                Ok(Incoming::Response {
                    id: id.unwrap_or_default(),
                    outcome,
                })
            }
            None => invalid(id, "no \"method\""),
        }
    }
}

/// A success answer.
pub fn response(id: &Value, result: Value) -> Value {
    // Moved in: `json!` would copy the result, which can be large.
    let message = [
        ("jsonrpc".to_owned(), Value::from("2.0")),
        ("id".to_owned(), id.clone()),
        ("result".to_owned(), result),
    ];
    Value::Object(message.into_iter().collect())
}

/// An error answer.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    let mut body = json!({ "code": error.code, "message": error.message });
    if let Some(data) = &error.data {
        body["data"] = data.clone();
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": body })
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Incoming, (Value, RpcError)> {
        Incoming::parse(text.as_bytes())
    }

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::Request { method, .. }) if method == "ping"
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Incoming::Response {
                id: json!("a"),
                outcome: Ok(json!({}))
            })
        );
    }

    #[test]
    fn malformed_input_gets_a_precise_error_and_keeps_the_id() {
        let code_of = |text| parse(text).unwrap_err().1.code;
        assert_eq!(code_of("{not json"), code::PARSE_ERROR);
        assert_eq!(code_of("[]"), code::INVALID_REQUEST);
        assert_eq!(
            code_of(r#"{"id":1,"method":"ping"}"#),
            code::INVALID_REQUEST
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            code::INVALID_REQUEST
        );
        let (id, error) =
            parse(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!((id, error.code), (json!(7), code::INVALID_REQUEST));
        assert!(error.message.contains("params"));
    }
}
