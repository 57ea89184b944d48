//! The OpenAI Responses API as codex speaks it, its tool search and
//! namespaced calls included.
//! The events, in order: [`crate::Protocol::OpenAiResponses`].

use serde_json::{Value, json};

use crate::answer::{Answer, Frame, Request, sse, unix_seconds};
use crate::script::{Block, CallForm, Reply, Streaming};

pub(crate) fn render(reply: &Reply, streaming: &Streaming, request: &Request) -> Answer {
    let seq = request.seq;
    let output_tokens = reply.output_tokens();
    let response = |status: &str, output: Vec<Value>, usage: Value| {
        json!({
            "id": format!("resp_fake{seq:04}"),
            "object": "response",
            "created_at": unix_seconds(),
            "status": status,
            "model": request.model,
            "output": output,
            "usage": usage,
        })
    };
    // One item per block: (its id, its completed form).
    let items: Vec<(String, Value)> = reply
        .blocks
        .iter()
        .enumerate()
        .map(|(index, block)| match block {
            Block::Text(pieces) => {
                let id = format!("msg_fake{seq:04}_{index}");
                let item = json!({
                    "id": id, "type": "message", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": pieces.concat(), "annotations": []}],
                });
                (id, item)
            }
            Block::Thinking(pieces) => {
                let id = format!("rs_fake{seq:04}_{index}");
                let item = json!({
                    "id": id, "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": pieces.concat()}],
                });
                (id, item)
            }
            Block::ToolCall {
                form: CallForm::ToolSearch,
                input,
                ..
            } => {
                let id = format!("tsc_fake{seq:04}_{index}");
                let item = json!({
                    "id": id, "type": "tool_search_call", "status": "completed",
                    "execution": "client", "call_id": format!("call_fake{seq:04}_{index}"),
                    "arguments": input,
                });
                (id, item)
            }
            Block::ToolCall {
                name,
                input: Value::String(input),
                ..
            } => {
                let id = format!("ctc_fake{seq:04}_{index}");
                let item = json!({
                    "id": id, "type": "custom_tool_call", "status": "completed",
                    "call_id": format!("call_fake{seq:04}_{index}"), "name": name, "input": input,
                });
                (id, item)
            }
            Block::ToolCall {
                name, pieces, form, ..
            } => {
                let id = format!("fc_fake{seq:04}_{index}");
                let mut item = json!({
                    "id": id, "type": "function_call", "status": "completed",
                    "call_id": format!("call_fake{seq:04}_{index}"), "name": name,
                    "arguments": pieces.concat(),
                });
                if let CallForm::InNamespace { namespace, name } = form {
                    item["namespace"] = json!(namespace);
                    item["name"] = json!(name);
                }
                (id, item)
            }
        })
        .collect();
    let usage = json!({
        "input_tokens": request.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": request.input_tokens + output_tokens,
    });
    let completed = response(
        "completed",
        items.iter().map(|(_, item)| item.clone()).collect(),
        usage,
    );
    if !request.stream {
        return Answer::json(completed);
    }

    let mut sequence_number = 0;
    let mut event = |mut data: Value| {
        data["sequence_number"] = json!(sequence_number);
        sequence_number += 1;
        let name = data["type"].as_str().unwrap_or_default().to_owned();
        sse(Some(&name), &data)
    };
    let in_progress = response("in_progress", Vec::new(), Value::Null);
    let mut frames = vec![
        Frame::Event(event(
            json!({"type": "response.created", "response": in_progress}),
        )),
        Frame::Event(event(
            json!({"type": "response.in_progress", "response": in_progress}),
        )),
    ];
    for (output_index, (block, (id, done))) in reply.blocks.iter().zip(&items).enumerate() {
        // The item as it starts: the done item, emptied.
        let mut added = done.clone();
        match block {
            Block::Text(_) => {
                added["status"] = json!("in_progress");
                added["content"] = json!([]);
            }
            Block::Thinking(_) => added["summary"] = json!([]),
            // Its arguments are an object, sent whole.
            Block::ToolCall {
                form: CallForm::ToolSearch,
                ..
            } => added["status"] = json!("in_progress"),
            Block::ToolCall { .. } => {
                added["status"] = json!("in_progress");
                let field = if done["type"] == "custom_tool_call" {
                    "input"
                } else {
                    "arguments"
                };
                added[field] = json!("");
            }
        }
        frames.push(Frame::Event(event(json!({
            "type": "response.output_item.added", "output_index": output_index, "item": added,
        }))));
        let at = json!({"item_id": id, "output_index": output_index});
        let with = |mut fields: Value| {
            for (key, value) in at.as_object().into_iter().flatten() {
                fields[key] = value.clone();
            }
            fields
        };
        match block {
            Block::Text(pieces) => {
                let text = pieces.concat();
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                frames.push(Frame::Event(event(with(json!({
                    "type": "response.content_part.added", "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                })))));
                for piece in pieces {
                    frames.push(Frame::Delta(event(with(json!({
                        "type": "response.output_text.delta", "content_index": 0, "delta": piece,
                    })))));
                }
                frames.push(Frame::Event(event(with(json!({
                    "type": "response.output_text.done", "content_index": 0, "text": text,
                })))));
                frames.push(Frame::Event(event(with(json!({
                    "type": "response.content_part.done", "content_index": 0, "part": part,
                })))));
            }
            Block::Thinking(pieces) => {
                let text = pieces.concat();
                frames.push(Frame::Event(event(with(json!({
                    "type": "response.reasoning_summary_part.added", "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                })))));
                for piece in pieces {
                    frames.push(Frame::Delta(event(with(json!({
                        "type": "response.reasoning_summary_text.delta", "summary_index": 0,
                        "delta": piece,
                    })))));
                }
                frames.push(Frame::Event(event(with(json!({
                    "type": "response.reasoning_summary_text.done", "summary_index": 0,
                    "text": text,
                })))));
                frames.push(Frame::Event(event(with(json!({
                    "type": "response.reasoning_summary_part.done", "summary_index": 0,
                    "part": {"type": "summary_text", "text": text},
                })))));
            }
            Block::ToolCall {
                form: CallForm::ToolSearch,
                ..
            } => {}
            Block::ToolCall { pieces, .. } => {
                let (delta, done_type, field) = if done["type"] == "custom_tool_call" {
                    (
                        "response.custom_tool_call_input.delta",
                        "response.custom_tool_call_input.done",
                        "input",
                    )
                } else {
                    (
                        "response.function_call_arguments.delta",
                        "response.function_call_arguments.done",
                        "arguments",
                    )
                };
                for piece in pieces {
                    frames.push(Frame::Delta(event(with(
                        json!({"type": delta, "delta": piece}),
                    ))));
                }
                frames.push(Frame::Event(event(with(
                    json!({"type": done_type, field: pieces.concat()}),
                ))));
            }
        }
        frames.push(Frame::Event(event(json!({
            "type": "response.output_item.done", "output_index": output_index, "item": done,
        }))));
    }
    frames.push(Frame::Event(event(
        json!({"type": "response.completed", "response": completed}),
    )));
    Answer::Sse {
        frames,
        streaming: streaming.clone(),
    }
}

/// OpenAI's error body, shared by the Responses and Chat Completions APIs:
/// `{"error":{"message","type","code"}}`.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        401 => "authentication_error",
        429 => "rate_limit_exceeded",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "code": null}})
}
