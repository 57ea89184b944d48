//! One SSE event of a chat completion stream, read: pure, no IO.
//!
//! OpenAI-compatible servers agree on `data: {chat.completion.chunk}` and
//! little else. This reads what they send without trusting its shape:
//! `choices` may be empty (a usage chunk), `delta.content` null or absent,
//! `finish_reason` on the last token's chunk, on a chunk of its own, after
//! the usage, or never; an error may arrive as `{"error": …}` in the middle
//! of a stream; and some servers forget the blank line between events, so
//! one event's data holds several JSON documents, one per line.

use serde_json::Value;

/// What an event says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ChunkEvent {
    /// Text of the answer.
    Token(String),
    /// Why the model stopped (`stop`, `length`, …): advisory, since it may
    /// come late or never; the stream's end is the end.
    Finish(String),
    /// `data: [DONE]`: the explicit end.
    Done,
    /// The server reported an error in the stream.
    Error(String),
    /// Data that is not a chunk at all.
    Unreadable(String),
}

/// The events in one SSE event's data, in order (usually one or none).
pub(crate) fn decode(data: &str) -> Vec<ChunkEvent> {
    let data = data.trim();
    if data == "[DONE]" {
        return vec![ChunkEvent::Done];
    }
    match serde_json::from_str::<Value>(data) {
        Ok(value) => decode_value(&value),
        // Several events run together without their blank lines.
        Err(_) if data.contains('\n') => data.lines().flat_map(decode).collect(),
        Err(error) => vec![ChunkEvent::Unreadable(format!(
            "{error} in {:?}",
            shorten(data)
        ))],
    }
}

/// The events of one chunk, or of a whole (non-streamed) completion from a
/// server that ignored `stream: true`.
pub(crate) fn decode_value(value: &Value) -> Vec<ChunkEvent> {
    if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_owned);
        return vec![ChunkEvent::Error(message)];
    }
    let Some(choices) = value.get("choices").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut events = Vec::new();
    // One answer asked for: the first choice (index 0) is it.
    if let Some(choice) = choices
        .iter()
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
    {
        let text = choice
            .get("delta")
            .or_else(|| choice.get("message"))
            .and_then(|delta| delta.get("content"))
            .and_then(Value::as_str)
            .or_else(|| choice.get("text").and_then(Value::as_str));
        if let Some(text) = text.filter(|text| !text.is_empty()) {
            events.push(ChunkEvent::Token(text.to_owned()));
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            events.push(ChunkEvent::Finish(reason.to_owned()));
        }
    }
    events
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::ChunkEvent::*;
    use super::*;

    #[test]
    fn chunks_as_servers_send_them() {
        let cases: &[(&str, Vec<ChunkEvent>)] = &[
            ("[DONE]", vec![Done]),
            (" [DONE] ", vec![Done]),
            (
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
                vec![],
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
                vec![Token("Hi".into())],
            ),
            (
                r#"{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}"#,
                vec![Token("!".into()), Finish("stop".into())],
            ),
            (
                r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
                vec![Finish("length".into())],
            ),
            (r#"{"choices":[],"usage":{"completion_tokens":3}}"#, vec![]),
            (
                r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
                vec![Error("overloaded".into())],
            ),
            (
                r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}"#,
                vec![Token("whole".into()), Finish("stop".into())],
            ),
            (
                "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n{\"choices\":[{\"delta\":{\"content\":\"b\"}}]}",
                vec![Token("a".into()), Token("b".into())],
            ),
        ];
        for (data, expected) in cases {
            assert_eq!(&decode(data), expected, "{data}");
        }
        assert!(matches!(&decode("{oops")[..], [Unreadable(why)] if why.contains("oops")));
    }
}
