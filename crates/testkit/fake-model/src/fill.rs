//! Arguments taken from the previous tool result: a script is fixed before
//! the run, so a call that needs a value only the run makes (a run id, a
//! file name) names where to find it instead. An object
//! `{"$from_result": {...}}` anywhere in a tool call's input is replaced by
//! a value read from the text of the last tool result in the request:
//!
//! - `{"pointer": "/run_id"}`: the text parsed as JSON, at this JSON
//!   pointer (the value as it is);
//! - `{"after": "Run ", "before": " "}`: the text between the first `after`
//!   and the next `before` (to the end when `before` is absent), a string.

use serde_json::Value;

use crate::script::Turn;
use crate::server::Protocol;

/// The key of a placeholder object.
const KEY: &str = "$from_result";

/// `turn` with its placeholders filled from the last tool result of
/// `body`, or why one could not be. `None` when it has none (most turns).
pub(crate) fn fill(turn: &Turn, protocol: Protocol, body: &Value) -> Option<Result<Turn, String>> {
    let input = match turn {
        Turn::ToolCall { input, .. } | Turn::NamespacedCall { input, .. } => input,
        _ => return None,
    };
    if !has_placeholder(input) {
        return None;
    }
    let Some(text) = last_tool_result(protocol, body) else {
        return Some(Err(format!(
            "weir-fake-model: the turn's input takes a value from the previous tool result ({KEY}), and the request carries no tool result"
        )));
    };
    let mut filled = turn.clone();
    let (Turn::ToolCall { input, .. } | Turn::NamespacedCall { input, .. }) = &mut filled else {
        unreachable!("matched above");
    };
    Some(replace(input, &text).map(|()| filled))
}

fn has_placeholder(value: &Value) -> bool {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key(KEY) => true,
        Value::Object(map) => map.values().any(has_placeholder),
        Value::Array(items) => items.iter().any(has_placeholder),
        _ => false,
    }
}

fn replace(value: &mut Value, text: &str) -> Result<(), String> {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key(KEY) => {
            *value = extract(&map[KEY], text)?;
            Ok(())
        }
        Value::Object(map) => map.values_mut().try_for_each(|value| replace(value, text)),
        Value::Array(items) => items.iter_mut().try_for_each(|value| replace(value, text)),
        _ => Ok(()),
    }
}

/// The value `spec` names in `text`.
fn extract(spec: &Value, text: &str) -> Result<Value, String> {
    let not_found = |what: String| {
        format!("weir-fake-model: {KEY} {spec} found no {what} in the previous tool result: {text}")
    };
    if let Some(pointer) = spec["pointer"].as_str() {
        let json: Value = serde_json::from_str(text).map_err(|_| not_found("JSON".to_owned()))?;
        return json
            .pointer(pointer)
            .cloned()
            .ok_or_else(|| not_found(format!("value at {pointer}")));
    }
    if let Some(after) = spec["after"].as_str() {
        let start = text
            .find(after)
            .map(|at| at + after.len())
            .ok_or_else(|| not_found(format!("{after:?}")))?;
        let rest = &text[start..];
        let end = match spec["before"].as_str() {
            Some(before) => rest
                .find(before)
                .ok_or_else(|| not_found(format!("{before:?} after {after:?}")))?,
            None => rest.len(),
        };
        return Ok(Value::String(rest[..end].to_owned()));
    }
    Err(format!(
        "weir-fake-model: {KEY} takes {{\"pointer\": \"/a/b\"}} or {{\"after\": \"…\", \"before\": \"…\"}}, not {spec}"
    ))
}

/// The text of the last tool result in a request, in each protocol's shape.
fn last_tool_result(protocol: Protocol, body: &Value) -> Option<String> {
    let items = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    match protocol {
        Protocol::Anthropic => items("messages")
            .iter()
            .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
            .rfind(|block| block["type"] == "tool_result")
            .map(|block| text_of(&block["content"])),
        Protocol::OpenAiChat => items("messages")
            .iter()
            .rfind(|message| message["role"] == "tool")
            .map(|message| text_of(&message["content"])),
        Protocol::OpenAiResponses => items("input")
            .iter()
            .rfind(|item| {
                item["type"] == "function_call_output" || item["type"] == "custom_tool_call_output"
            })
            .map(|item| text_of(&item["output"])),
        Protocol::Gemini => items("contents")
            .iter()
            .flat_map(|content| content["parts"].as_array().cloned().unwrap_or_default())
            .filter_map(|part| part.get("functionResponse").cloned())
            .next_back()
            .map(|response| text_of(&response["response"])),
    }
}

/// A tool result's text: a string, the text of its parts, or its JSON.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(input: Value) -> Turn {
        Turn::tool_call("wait", input)
    }

    #[test]
    fn a_turn_without_placeholders_is_left_alone() {
        let body = json!({"messages": []});
        assert!(fill(&call(json!({"a": 1})), Protocol::Anthropic, &body).is_none());
        assert!(fill(&Turn::text("hi"), Protocol::Anthropic, &body).is_none());
    }

    #[test]
    fn text_between_markers_and_json_pointers_fill_the_input() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "old"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b",
              "content": [{"type": "text", "text": "Run r-42 is still working"}]}]},
        ]});
        let turn = call(
            json!({"run_id": {KEY: {"after": "Run ", "before": " "}}, "n": [{KEY: {"after": "is "}}]}),
        );
        let filled = fill(&turn, Protocol::Anthropic, &body).unwrap().unwrap();
        assert_eq!(
            filled,
            call(json!({"run_id": "r-42", "n": ["still working"]}))
        );

        let body = json!({"messages": [{"role": "tool", "content": "{\"id\": {\"n\": 7}}"}]});
        let turn = call(json!({"n": {KEY: {"pointer": "/id/n"}}}));
        let filled = fill(&turn, Protocol::OpenAiChat, &body).unwrap().unwrap();
        assert_eq!(filled, call(json!({"n": 7})));
    }

    #[test]
    fn a_value_not_found_says_where_it_looked() {
        let body = json!({"input": [{"type": "function_call_output", "output": "nothing here"}]});
        let turn = call(json!({"id": {KEY: {"after": "Run "}}}));
        let error = fill(&turn, Protocol::OpenAiResponses, &body)
            .unwrap()
            .unwrap_err();
        assert!(error.contains("nothing here"), "{error}");
        let error = fill(&turn, Protocol::Gemini, &json!({}))
            .unwrap()
            .unwrap_err();
        assert!(error.contains("no tool result"), "{error}");
    }
}
