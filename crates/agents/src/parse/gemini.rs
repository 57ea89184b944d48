//! The Gemini CLI's `--output-format stream-json` lines.

use serde_json::Value;

use super::{number, string};
use crate::{AgentEvent, AgentResult, Usage};

/// The Gemini CLI's stream: `init`, `message` (the user's prompt, then the
/// assistant's `delta: true` chunks), `tool_use`, `tool_result`, and
/// `result` with per-model stats. It prints no whole messages: the deltas
/// between two tool calls (or the result) are gathered into one
/// [`AgentEvent::Message`].
#[derive(Debug, Default)]
pub struct GeminiParser {
    session_id: Option<String>,
    gathered: String,
    last_message: Option<String>,
}

impl GeminiParser {
    pub(super) fn line(&mut self, line: Value) -> Vec<AgentEvent> {
        match line["type"].as_str().unwrap_or_default() {
            "init" => {
                self.session_id = string(&line, "session_id");
                vec![AgentEvent::SessionStarted {
                    session_id: self.session_id.clone(),
                    model: string(&line, "model"),
                }]
            }
            "message" if line["role"] == "assistant" => {
                let text = string(&line, "content").unwrap_or_default();
                if line["delta"] == true {
                    self.gathered.push_str(&text);
                    vec![AgentEvent::TextDelta { text }]
                } else {
                    let mut events = self.flush();
                    self.last_message = Some(text.clone());
                    events.push(AgentEvent::TextDelta { text: text.clone() });
                    events.push(AgentEvent::Message { text });
                    events
                }
            }
            "message" if line["role"] == "user" => Vec::new(),
            "tool_use" => {
                let mut events = self.flush();
                events.push(AgentEvent::ToolUse {
                    id: string(&line, "tool_id").unwrap_or_default(),
                    name: string(&line, "tool_name").unwrap_or_default(),
                    input: line["parameters"].clone(),
                });
                events
            }
            "tool_result" => {
                let is_error = line["status"] != "success";
                let content = string(&line, "output")
                    .filter(|output| !output.is_empty() || !is_error)
                    .or_else(|| string(&line["error"], "message"))
                    .unwrap_or_default();
                vec![AgentEvent::ToolResult {
                    id: string(&line, "tool_id").unwrap_or_default(),
                    content,
                    is_error,
                }]
            }
            "result" => {
                let mut events = self.flush();
                let is_error = line["status"] != "success";
                let stats = &line["stats"];
                events.push(AgentEvent::Result(AgentResult {
                    text: if is_error {
                        string(&line["error"], "message")
                    } else {
                        self.last_message.take()
                    },
                    is_error,
                    subtype: string(&line, "status"),
                    usage: stats.is_object().then(|| Usage {
                        input_tokens: number(stats, "input_tokens").unwrap_or_default(),
                        output_tokens: number(stats, "output_tokens").unwrap_or_default(),
                    }),
                    cost_usd: None,
                    duration_ms: number(stats, "duration_ms"),
                    session_id: self.session_id.clone(),
                }));
                events
            }
            "error" => vec![AgentEvent::Error {
                message: string(&line, "message").unwrap_or_else(|| line.to_string()),
            }],
            _ => vec![AgentEvent::Unknown { line }],
        }
    }

    /// The deltas gathered since the last message, as one message.
    fn flush(&mut self) -> Vec<AgentEvent> {
        if self.gathered.is_empty() {
            return Vec::new();
        }
        let text = std::mem::take(&mut self.gathered);
        self.last_message = Some(text.clone());
        vec![AgentEvent::Message { text }]
    }
}
