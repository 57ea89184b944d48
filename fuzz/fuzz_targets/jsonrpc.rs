//! JSON-RPC framing: `Incoming::parse`, as the stdio and HTTP transports
//! call it on every line or body a client sends.
//!
//! Properties: an error is a parse error exactly when the bytes are not
//! JSON, and echoes only an id an answer may carry (null, a string or an
//! integer); a message that parses says what the bytes said, and written
//! back as JSON it reads as the same message; the line's end (stdio keeps
//! the newline) changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::{Incoming, code, error_response, response};

fuzz_target!(|data: &[u8]| {
    let parsed = Incoming::parse(data);
    let json = serde_json::from_slice::<Value>(data);
    match &parsed {
        Err((id, error)) => {
            assert!(
                id.is_null() || id.is_string() || id.is_i64() || id.is_u64(),
                "an error would echo the id {id}, which no answer may carry"
            );
            assert!(
                [code::PARSE_ERROR, code::INVALID_REQUEST].contains(&error.code),
                "unexpected code {}",
                error.code
            );
            assert_eq!(
                error.code == code::PARSE_ERROR,
                json.is_err(),
                "a parse error must mean exactly that the bytes are not JSON"
            );
            // The answer is one line: stdio frames by newlines.
            let answer = serde_json::to_string(&error_response(id, error)).unwrap();
            assert!(!answer.contains('\n'));
        }
        Ok(message) => {
            let value = json.expect("what parses as a message is JSON");
            assert_eq!(value["jsonrpc"], "2.0");
            let written = match message {
                Incoming::Request { id, method, params } => {
                    assert!(
                        id.is_string() || id.is_i64() || id.is_u64(),
                        "request id {id}"
                    );
                    assert!(params.is_object());
                    assert_eq!(value["method"], method.as_str());
                    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
                }
                Incoming::Notification { method, params } => {
                    assert!(value.get("id").is_none());
                    assert!(params.is_object());
                    assert_eq!(value["method"], method.as_str());
                    json!({"jsonrpc": "2.0", "method": method, "params": params})
                }
                Incoming::Response { id, outcome } => {
                    assert!(
                        id.is_string() || id.is_i64() || id.is_u64(),
                        "response id {id}"
                    );
                    assert!(value.get("method").is_none());
                    match outcome {
                        Ok(result) => response(id, result.clone()),
                        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
                    }
                }
            };
            assert_eq!(
                Incoming::from_value(written).as_ref(),
                Ok(message),
                "a message written back reads differently"
            );
        }
    }
    for framed in [[data, b"\n"].concat(), [data, b"\r\n"].concat()] {
        let again = Incoming::parse(&framed);
        match (&parsed, &again) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err((id_a, a)), Err((id_b, b))) => assert_eq!((id_a, a.code), (id_b, b.code)),
            _ => panic!("a line's end changed the verdict: {parsed:?} vs {again:?}"),
        }
    }
});
