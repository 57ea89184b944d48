//! The Gemini API as the Gemini CLI speaks it.
//! The events, in order: [`crate::Protocol::Gemini`].

use serde_json::{Map, Value, json};

use crate::answer::{Answer, Frame, Request, sse};
use crate::script::{Block, Reply, Streaming};

/// How `:streamGenerateContent` was asked to stream.
pub(crate) enum Shape {
    /// `?alt=sse`: SSE `data:` lines.
    Sse,
    /// Without it: one JSON array of the chunks.
    Array,
    /// `:generateContent`: one response.
    Whole,
}

pub(crate) fn render(
    reply: &Reply,
    streaming: &Streaming,
    request: &Request,
    shape: Shape,
) -> Answer {
    let seq = request.seq;
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        let mut chunk = json!({
            "candidates": [],
            "modelVersion": request.model,
            "responseId": format!("fake{seq:04}"),
        });
        if last {
            candidate["finishReason"] = json!("STOP");
            chunk["usageMetadata"] = usage(request.input_tokens, reply.output_tokens());
        }
        chunk["candidates"] = json!([candidate]);
        chunk
    };
    let call = |name: &str, input: &Value, index: usize| {
        json!({"functionCall": {
            "id": format!("call_fake{seq:04}_{index}"), "name": name, "args": input,
        }})
    };

    if let Shape::Whole = shape {
        let parts = reply
            .blocks
            .iter()
            .enumerate()
            .map(|(index, block)| match block {
                Block::Text(pieces) => json!({"text": pieces.concat()}),
                Block::Thinking(pieces) => json!({"text": pieces.concat(), "thought": true}),
                Block::ToolCall { name, input, .. } => call(name, input, index),
            })
            .collect();
        return Answer::json(chunk(parts, true));
    }

    // (is a delta, chunk)
    let mut chunks: Vec<(bool, Value)> = Vec::new();
    for (index, block) in reply.blocks.iter().enumerate() {
        match block {
            Block::Text(pieces) => chunks.extend(
                pieces
                    .iter()
                    .map(|piece| (true, chunk(vec![json!({"text": piece})], false))),
            ),
            Block::Thinking(pieces) => chunks.extend(pieces.iter().map(|piece| {
                (
                    true,
                    chunk(vec![json!({"text": piece, "thought": true})], false),
                )
            })),
            Block::ToolCall { name, input, .. } => {
                chunks.push((true, chunk(vec![call(name, input, index)], false)));
            }
        }
    }
    // The finish in a chunk of its own, so that a stream cut after its last
    // delta (`drop_after`) lacks it, as with the other protocols.
    chunks.push((false, chunk(Vec::new(), true)));

    match shape {
        Shape::Array => Answer::json(Value::Array(
            chunks.into_iter().map(|(_, chunk)| chunk).collect(),
        )),
        _ => Answer::Sse {
            frames: chunks
                .into_iter()
                .map(|(delta, chunk)| {
                    let text = sse(None, &chunk);
                    if delta {
                        Frame::Delta(text)
                    } else {
                        Frame::Event(text)
                    }
                })
                .collect(),
            streaming: streaming.clone(),
        },
    }
}

fn usage(prompt: u64, candidates: u64) -> Value {
    json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates,
    })
}

/// The JSON schema of a request that asks for JSON (the model router's), if
/// it is one.
pub(crate) fn json_schema(body: &Value) -> Option<&Value> {
    let config = &body["generationConfig"];
    if config["responseMimeType"] != "application/json" {
        return None;
    }
    config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
}

/// The answer to a request for JSON (see [`json_schema`]): an object valid
/// for its schema, as text, in a whole response.
pub(crate) fn schema_answer(request: &Request) -> Answer {
    let text = json_schema(&request.body)
        .map_or_else(|| json!({}), instance)
        .to_string();
    Answer::json(json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": usage(request.input_tokens, 1),
        "modelVersion": request.model,
    }))
}

/// A value valid for `schema` (Gemini's OpenAPI subset, with upper-case
/// types, or JSON Schema): every property, the first of an `enum`, the
/// `minimum` of a number, `minItems` items of an array.
fn instance(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|values| values.first()) {
        return first.clone();
    }
    let kind = match &schema["type"] {
        Value::String(kind) => kind.to_ascii_lowercase(),
        // ["string", "null"]: the first that is not null.
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| !kind.eq_ignore_ascii_case("null"))
            .unwrap_or("null")
            .to_ascii_lowercase(),
        _ if schema.get("properties").is_some() => "object".to_owned(),
        _ => "string".to_owned(),
    };
    match kind.as_str() {
        "object" => Value::Object(
            schema["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, property)| (name.clone(), instance(property)))
                .collect::<Map<_, _>>(),
        ),
        "array" => {
            let count = schema["minItems"].as_u64().unwrap_or(0);
            Value::Array((0..count).map(|_| instance(&schema["items"])).collect())
        }
        "integer" => json!(schema["minimum"].as_i64().unwrap_or(1)),
        "number" => json!(schema["minimum"].as_f64().unwrap_or(1.0)),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => json!("scripted"),
    }
}

/// The API's error body: `{"error":{"code","message","status"}}`.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let name = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    json!({"error": {"code": status, "message": message, "status": name}})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::instance;

    #[test]
    fn instances_follow_the_schema() {
        // The Gemini CLI's router schema (upper-case types).
        let router = json!({"type": "OBJECT", "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER", "minimum": 1, "maximum": 100},
        }, "required": ["complexity_reasoning", "complexity_score"]});
        assert_eq!(
            instance(&router),
            json!({"complexity_reasoning": "scripted", "complexity_score": 1})
        );
        let other = json!({"type": "object", "properties": {
            "model": {"type": "string", "enum": ["flash", "pro"]},
            "tags": {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
            "note": {"type": ["null", "string"]},
            "ratio": {"type": "number"},
        }});
        assert_eq!(
            instance(&other),
            json!({"model": "flash", "tags": [false, false], "note": "scripted", "ratio": 1.0})
        );
    }
}
