//! Claude Code's `--output-format stream-json --verbose` lines.

use serde_json::Value;

use super::{number, string};
use crate::{AgentEvent, AgentResult, Usage};

/// Claude Code's stream. `system/init` starts a session (or a turn, in
/// control mode); `stream_event` lines wrap the model's SSE events (only
/// with `--include-partial-messages`); an `assistant` line holds one
/// complete content block; a `user` line carries tool results; `result`
/// ends the turn.
#[derive(Debug)]
pub struct ClaudeParser {
    partial: bool,
    report_denials: bool,
}

impl ClaudeParser {
    /// `partial`: `--include-partial-messages` is on, so text and thinking
    /// come as deltas and the `assistant` lines repeat them (not sent as
    /// deltas again). `report_denials`: the tools the result lists as
    /// denied become [`AgentEvent::PermissionRequest`]s (light mode, where
    /// nobody was asked).
    pub fn new(partial: bool, report_denials: bool) -> ClaudeParser {
        ClaudeParser {
            partial,
            report_denials,
        }
    }

    pub(super) fn line(&mut self, line: Value) -> Vec<AgentEvent> {
        match line["type"].as_str().unwrap_or_default() {
            "system" => match line["subtype"].as_str() {
                Some("init") => vec![AgentEvent::SessionStarted {
                    session_id: string(&line, "session_id"),
                    model: string(&line, "model"),
                }],
                Some("status" | "thinking_tokens") => Vec::new(),
                _ => vec![AgentEvent::Unknown { line }],
            },
            "stream_event" => self.stream_event(line),
            "assistant" => self.assistant(&line),
            "user" => user(&line),
            "result" => self.result(&line),
            _ => vec![AgentEvent::Unknown { line }],
        }
    }

    fn stream_event(&self, line: Value) -> Vec<AgentEvent> {
        let event = &line["event"];
        match event["type"].as_str().unwrap_or_default() {
            "content_block_delta" => {
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => vec![AgentEvent::TextDelta {
                        text: string(delta, "text").unwrap_or_default(),
                    }],
                    "thinking_delta" => vec![AgentEvent::ThinkingDelta {
                        text: string(delta, "thinking").unwrap_or_default(),
                    }],
                    "input_json_delta" => vec![AgentEvent::ToolInputDelta {
                        index: number(event, "index").unwrap_or_default(),
                        partial_json: string(delta, "partial_json").unwrap_or_default(),
                    }],
                    "signature_delta" => Vec::new(),
                    _ => vec![AgentEvent::Unknown { line }],
                }
            }
            "message_start"
            | "content_block_start"
            | "content_block_stop"
            | "message_delta"
            | "message_stop"
            | "ping" => Vec::new(),
            _ => vec![AgentEvent::Unknown { line }],
        }
    }

    fn assistant(&self, line: &Value) -> Vec<AgentEvent> {
        let mut events = Vec::new();
        for block in blocks(&line["message"]["content"]) {
            match block["type"].as_str().unwrap_or_default() {
                "text" => {
                    let text = string(block, "text").unwrap_or_default();
                    if !self.partial {
                        events.push(AgentEvent::TextDelta { text: text.clone() });
                    }
                    events.push(AgentEvent::Message { text });
                }
                "thinking" => {
                    if !self.partial {
                        events.push(AgentEvent::ThinkingDelta {
                            text: string(block, "thinking").unwrap_or_default(),
                        });
                    }
                }
                "tool_use" => events.push(AgentEvent::ToolUse {
                    id: string(block, "id").unwrap_or_default(),
                    name: string(block, "name").unwrap_or_default(),
                    input: block["input"].clone(),
                }),
                _ => events.push(AgentEvent::Unknown {
                    line: block.clone(),
                }),
            }
        }
        events
    }

    fn result(&self, line: &Value) -> Vec<AgentEvent> {
        let mut events = Vec::new();
        if self.report_denials {
            for denial in blocks(&line["permission_denials"]) {
                events.push(AgentEvent::PermissionRequest {
                    tool_name: string(denial, "tool_name").unwrap_or_default(),
                    input: denial["tool_input"].clone(),
                    tool_use_id: string(denial, "tool_use_id"),
                    allowed: false,
                });
            }
        }
        let usage = &line["usage"];
        events.push(AgentEvent::Result(AgentResult {
            text: string(line, "result"),
            // An API error is `subtype: success` with `is_error: true`.
            is_error: line["is_error"].as_bool().unwrap_or(false)
                || line["subtype"].as_str().is_some_and(|s| s != "success"),
            subtype: string(line, "subtype"),
            usage: usage.is_object().then(|| Usage {
                input_tokens: number(usage, "input_tokens").unwrap_or_default(),
                output_tokens: number(usage, "output_tokens").unwrap_or_default(),
            }),
            cost_usd: line["total_cost_usd"].as_f64(),
            duration_ms: number(line, "duration_ms"),
            session_id: string(line, "session_id"),
        }));
        events
    }
}

/// The tool results of a `user` line; its other content (the echo of an
/// interrupt) carries nothing for a reader.
fn user(line: &Value) -> Vec<AgentEvent> {
    blocks(&line["message"]["content"])
        .filter(|block| block["type"] == "tool_result")
        .map(|block| AgentEvent::ToolResult {
            id: string(block, "tool_use_id").unwrap_or_default(),
            content: text_of(&block["content"]),
            is_error: block["is_error"].as_bool().unwrap_or(false),
        })
        .collect()
}

fn blocks(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

/// A tool result's content: a string, or blocks whose text is joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
