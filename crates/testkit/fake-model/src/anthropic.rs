//! The Anthropic Messages API as Claude Code speaks it.
//! The events, in order: [`crate::Protocol::Anthropic`].

use serde_json::{Value, json};

use crate::answer::{Answer, Frame, Request, sse};
use crate::script::{Block, Reply, Streaming};

pub(crate) fn render(reply: &Reply, streaming: &Streaming, request: &Request) -> Answer {
    let id = format!("msg_fake{:04}", request.seq);
    let stop_reason = if reply.has_tool_call() {
        "tool_use"
    } else {
        "end_turn"
    };
    let output_tokens = reply.output_tokens();
    let tool_id = |index: usize| format!("toolu_fake{:04}_{index}", request.seq);

    if !request.stream {
        let content: Vec<Value> = reply
            .blocks
            .iter()
            .enumerate()
            .map(|(index, block)| match block {
                Block::Text(pieces) => json!({"type": "text", "text": pieces.concat()}),
                Block::Thinking(pieces) => json!({
                    "type": "thinking", "thinking": pieces.concat(), "signature": SIGNATURE,
                }),
                Block::ToolCall { name, input, .. } => json!({
                    "type": "tool_use", "id": tool_id(index), "name": name, "input": input,
                }),
            })
            .collect();
        return Answer::json(json!({
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": request.input_tokens, "output_tokens": output_tokens},
        }));
    }

    let event = |data: Value| {
        let name = data["type"].as_str().unwrap_or_default().to_owned();
        sse(Some(&name), &data)
    };
    let mut frames = vec![Frame::Event(event(json!({
        "type": "message_start",
        "message": {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": request.input_tokens,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    })))];
    for (index, block) in reply.blocks.iter().enumerate() {
        let (start, pieces, delta): (Value, &[String], fn(&str) -> Value) = match block {
            Block::Text(pieces) => (
                json!({"type": "text", "text": ""}),
                pieces,
                |piece| json!({"type": "text_delta", "text": piece}),
            ),
            Block::Thinking(pieces) => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                pieces,
                |piece| json!({"type": "thinking_delta", "thinking": piece}),
            ),
            Block::ToolCall { name, pieces, .. } => (
                json!({"type": "tool_use", "id": tool_id(index), "name": name, "input": {}}),
                pieces,
                |piece| json!({"type": "input_json_delta", "partial_json": piece}),
            ),
        };
        frames.push(Frame::Event(event(json!({
            "type": "content_block_start", "index": index, "content_block": start,
        }))));
        frames.push(Frame::Event(event(json!({"type": "ping"}))));
        for piece in pieces {
            frames.push(Frame::Delta(event(json!({
                "type": "content_block_delta", "index": index, "delta": delta(piece),
            }))));
        }
        if let Block::Thinking(_) = block {
            // The signature that lets a client send the thinking back in its
            // next request; one delta after the thinking, as the API does.
            frames.push(Frame::Event(event(json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": SIGNATURE},
            }))));
        }
        frames.push(Frame::Event(event(json!({
            "type": "content_block_stop", "index": index,
        }))));
    }
    frames.push(Frame::Event(event(json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens},
    }))));
    frames.push(Frame::Event(event(json!({"type": "message_stop"}))));
    Answer::Sse {
        frames,
        streaming: streaming.clone(),
    }
}

const SIGNATURE: &str = "weir-fake-model-signature";

/// The API's error body: `{"type":"error","error":{"type","message"}}`.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
