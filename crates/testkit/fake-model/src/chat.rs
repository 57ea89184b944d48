//! The OpenAI Chat Completions API, as OpenAI-compatible servers speak it.
//! The events, in order: [`crate::Protocol::OpenAiChat`].

use serde_json::{Value, json};

use crate::answer::{Answer, Frame, Request, sse, unix_seconds};
use crate::script::{Block, FinishReason, Reply, Streaming};

pub(crate) fn render(reply: &Reply, streaming: &Streaming, request: &Request) -> Answer {
    let seq = request.seq;
    let finish = if reply.has_tool_call() {
        "tool_calls"
    } else {
        "stop"
    };
    let output_tokens = reply.output_tokens();
    let usage = json!({
        "prompt_tokens": request.input_tokens,
        "completion_tokens": output_tokens,
        "total_tokens": request.input_tokens + output_tokens,
    });
    let call_id = |index: usize| format!("call_fake{seq:04}_{index}");
    let base = |object: &str| {
        json!({
            "id": format!("chatcmpl-fake{seq:04}"),
            "object": object,
            "created": unix_seconds(),
            "model": request.model,
        })
    };

    if !request.stream {
        let mut message = json!({"role": "assistant", "content": null});
        let mut calls = Vec::new();
        for (index, block) in reply.blocks.iter().enumerate() {
            match block {
                Block::Text(pieces) => message["content"] = json!(pieces.concat()),
                Block::Thinking(pieces) => message["reasoning_content"] = json!(pieces.concat()),
                Block::ToolCall { name, pieces, .. } => calls.push(json!({
                    "id": call_id(index), "type": "function",
                    "function": {"name": name, "arguments": pieces.concat()},
                })),
            }
        }
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        let mut completion = base("chat.completion");
        completion["choices"] = json!([{"index": 0, "message": message, "finish_reason": finish}]);
        completion["usage"] = usage;
        return Answer::json(completion);
    }

    let chunk = |delta: Value, finish_reason: Value| {
        let mut chunk = base("chat.completion.chunk");
        chunk["choices"] = json!([{"index": 0, "delta": delta, "finish_reason": finish_reason}]);
        chunk
    };
    // (is a delta, chunk)
    let mut chunks = vec![(
        false,
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    // Tool calls are numbered among themselves, as `tool_calls[].index`.
    let mut call_index = 0;
    for (index, block) in reply.blocks.iter().enumerate() {
        match block {
            Block::Text(pieces) => chunks.extend(
                pieces
                    .iter()
                    .map(|piece| (true, chunk(json!({"content": piece}), Value::Null))),
            ),
            Block::Thinking(pieces) => chunks.extend(pieces.iter().map(|piece| {
                (
                    true,
                    chunk(json!({"reasoning_content": piece}), Value::Null),
                )
            })),
            Block::ToolCall { name, pieces, .. } => {
                chunks.push((
                    false,
                    chunk(
                        json!({"tool_calls": [{
                            "index": call_index, "id": call_id(index), "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }]}),
                        Value::Null,
                    ),
                ));
                chunks.extend(pieces.iter().map(|piece| {
                    (
                        true,
                        chunk(
                            json!({"tool_calls": [{
                                "index": call_index, "function": {"arguments": piece},
                            }]}),
                            Value::Null,
                        ),
                    )
                }));
                call_index += 1;
            }
        }
    }
    let usage_chunk = (request.body["stream_options"]["include_usage"] == true).then(|| {
        let mut chunk = base("chat.completion.chunk");
        chunk["choices"] = json!([]);
        chunk["usage"] = usage;
        chunk
    });

    let mut frames: Vec<Frame> = Vec::new();
    let push = |frames: &mut Vec<Frame>, (delta, chunk): (bool, Value)| {
        let text = sse(None, &chunk);
        frames.push(if delta {
            Frame::Delta(text)
        } else {
            Frame::Event(text)
        });
    };
    if streaming.finish_reason == FinishReason::WithLastDelta
        && let Some((_, last)) = chunks.iter_mut().rev().find(|(delta, _)| *delta)
    {
        last["choices"][0]["finish_reason"] = json!(finish);
    }
    for chunk in chunks {
        push(&mut frames, chunk);
    }
    let finish_chunk = (false, chunk(json!({}), json!(finish)));
    match streaming.finish_reason {
        FinishReason::Separate => push(&mut frames, finish_chunk),
        FinishReason::WithLastDelta | FinishReason::Never => {}
        FinishReason::Late => {
            if let Some(usage) = usage_chunk.clone() {
                push(&mut frames, (false, usage));
            }
            frames.push(Frame::Pause);
            push(&mut frames, finish_chunk);
        }
    }
    if let (Some(usage), false) = (usage_chunk, streaming.finish_reason == FinishReason::Late) {
        push(&mut frames, (false, usage));
    }
    if streaming.done {
        frames.push(Frame::Event("data: [DONE]\n\n".to_owned()));
    }
    Answer::Sse {
        frames,
        streaming: streaming.clone(),
    }
}
