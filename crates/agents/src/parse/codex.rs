//! `codex exec --json` lines.

use serde_json::Value;

use super::{number, string};
use crate::{AgentEvent, AgentResult, Usage};

/// Codex's stream: `thread.started`, `turn.started`, then `item.started` /
/// `item.completed` (agent messages, reasoning, commands, file changes,
/// MCP tool calls), then `turn.completed` with usage, or `error` and
/// `turn.failed`. Items come whole: an agent message is one delta.
#[derive(Debug, Default)]
pub struct CodexParser {
    thread_id: Option<String>,
    last_message: Option<String>,
}

impl CodexParser {
    pub(super) fn line(&mut self, line: Value) -> Vec<AgentEvent> {
        match line["type"].as_str().unwrap_or_default() {
            "thread.started" => {
                self.thread_id = string(&line, "thread_id");
                vec![AgentEvent::SessionStarted {
                    session_id: self.thread_id.clone(),
                    model: None,
                }]
            }
            "turn.started" => Vec::new(),
            "item.started" => started(&line["item"]).into_iter().collect(),
            "item.updated" => Vec::new(),
            "item.completed" => self.completed(line),
            "turn.completed" => {
                let usage = &line["usage"];
                vec![AgentEvent::Result(AgentResult {
                    text: self.last_message.take(),
                    is_error: false,
                    subtype: Some("turn.completed".into()),
                    usage: usage.is_object().then(|| Usage {
                        input_tokens: number(usage, "input_tokens").unwrap_or_default(),
                        output_tokens: number(usage, "output_tokens").unwrap_or_default(),
                    }),
                    cost_usd: None,
                    duration_ms: None,
                    session_id: self.thread_id.clone(),
                })]
            }
            "turn.failed" => vec![AgentEvent::Result(AgentResult {
                text: string(&line["error"], "message"),
                is_error: true,
                subtype: Some("turn.failed".into()),
                usage: None,
                cost_usd: None,
                duration_ms: None,
                session_id: self.thread_id.clone(),
            })],
            "error" => vec![AgentEvent::Error {
                message: string(&line, "message").unwrap_or_default(),
            }],
            _ => vec![AgentEvent::Unknown { line }],
        }
    }

    fn completed(&mut self, line: Value) -> Vec<AgentEvent> {
        let item = &line["item"];
        let id = string(item, "id").unwrap_or_default();
        let failed = item["status"] == "failed";
        match item["type"].as_str().unwrap_or_default() {
            "agent_message" => {
                let text = string(item, "text").unwrap_or_default();
                self.last_message = Some(text.clone());
                vec![
                    AgentEvent::TextDelta { text: text.clone() },
                    AgentEvent::Message { text },
                ]
            }
            "reasoning" => vec![AgentEvent::ThinkingDelta {
                text: string(item, "text").unwrap_or_default(),
            }],
            "command_execution" => vec![AgentEvent::ToolResult {
                id,
                content: string(item, "aggregated_output").unwrap_or_default(),
                is_error: failed || item["exit_code"].as_i64().is_some_and(|code| code != 0),
            }],
            "file_change" => vec![AgentEvent::ToolResult {
                id,
                content: item["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|change| {
                        format!(
                            "{} {}",
                            change["kind"].as_str().unwrap_or("change"),
                            change["path"].as_str().unwrap_or("?")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                is_error: failed,
            }],
            "mcp_tool_call" => vec![AgentEvent::ToolResult {
                id,
                content: item
                    .get("result")
                    .or_else(|| item.get("error"))
                    .map(Value::to_string)
                    .unwrap_or_default(),
                is_error: failed,
            }],
            // A warning, e.g. an unknown model's metadata.
            "error" => vec![AgentEvent::Error {
                message: string(item, "message").unwrap_or_default(),
            }],
            _ => vec![AgentEvent::Unknown { line }],
        }
    }
}

/// An item that starts a tool call: its [`AgentEvent::ToolUse`].
fn started(item: &Value) -> Option<AgentEvent> {
    let id = string(item, "id").unwrap_or_default();
    let (name, input) = match item["type"].as_str()? {
        "command_execution" => (
            "command_execution".to_owned(),
            serde_json::json!({"command": item["command"]}),
        ),
        "file_change" => (
            "file_change".to_owned(),
            serde_json::json!({"changes": item["changes"]}),
        ),
        "mcp_tool_call" => (
            format!(
                "{}/{}",
                item["server"].as_str().unwrap_or("?"),
                item["tool"].as_str().unwrap_or("?")
            ),
            item["arguments"].clone(),
        ),
        _ => return None,
    };
    Some(AgentEvent::ToolUse { id, name, input })
}
