//! The `weir` MCP server that `agent_run` offers Claude Code in process
//! (`weir_tools`): its tools are tools of this weir server, and each call
//! is a child run of the agent's run. The pack speaks the little MCP it
//! needs itself (initialize, ping, tools/list, tools/call), so that it
//! depends on no MCP crate; weir-agents carries the messages.

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_agents::SdkMcpServer;
use weir_core::{Completed, Content, EventKind};
use weir_runtime::{ChildEnd, RunContext, ToolInfo};

/// The server's name: the model sees its tools as `mcp__weir__TOOL`.
pub(crate) const SERVER: &str = "weir";

/// The protocol version answered when the client names none.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// Most bytes of a child's streamed text passed back to the agent.
const MAX_TEXT: usize = 64 * 1024;

/// The tools of this server one agent may call, as child runs of `ctx`'s.
pub(crate) struct WeirTools {
    pub(crate) ctx: RunContext,
    /// The offered tools (callable ones, as the scheduler describes them).
    pub(crate) tools: Vec<ToolInfo>,
}

/// A JSON-RPC error: its code and message.
type RpcError = (i64, String);

#[async_trait]
impl SdkMcpServer for WeirTools {
    fn name(&self) -> &str {
        SERVER
    }

    async fn handle(&self, message: Value) -> Option<Value> {
        // Notifications (no id) and responses (no method) want no answer.
        let id = message.get("id")?.clone();
        let method = message.get("method")?.as_str().unwrap_or_default();
        let params = &message["params"];
        let result = match method {
            "initialize" => Ok(json!({
                "protocolVersion": params["protocolVersion"].as_str().unwrap_or(PROTOCOL_VERSION),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": SERVER, "version": env!("CARGO_PKG_VERSION")},
            })),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(self.list()),
            "tools/call" => self.call(params).await,
            other => Err((-32601, format!("method not found: {other}"))),
        };
        Some(match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        })
    }
}

impl WeirTools {
    fn list(&self) -> Value {
        listing(&self.tools)
    }

    /// `tools/call`: the tool as a child run, followed to its end. What
    /// it streamed comes first in the content (a streaming tool leaves it
    /// out of its final content).
    async fn call(&self, params: &Value) -> Result<Value, RpcError> {
        let name = params["name"].as_str().unwrap_or_default();
        if !self.tools.iter().any(|tool| tool.name == name) {
            return Err((
                -32602,
                format!(
                    "unknown tool {name:?}; this server offers: {}",
                    self.tools
                        .iter()
                        .map(|tool| tool.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let arguments = match &params["arguments"] {
            Value::Null => json!({}),
            arguments => arguments.clone(),
        };
        let child = match self.ctx.call(name, arguments, None).await {
            Ok(child) => child,
            Err(error) => return Ok(tool_error(&error.to_string(), None)),
        };
        let run_id = child.run_id().to_string();
        let (streamed, terminal) = match child.follow(MAX_TEXT).await {
            Ok(ChildEnd { streamed, terminal }) => (streamed, Some(terminal)),
            Err(_) => (String::new(), None),
        };
        // A result, with the output streamed before it; a failed run's
        // (a program that exited non-zero) is an error that still has it.
        let result = |done: Completed, error: Option<&str>| {
            let mut content: Vec<Value> = Vec::new();
            if !streamed.is_empty() {
                content.push(json!({"type": "text", "text": streamed}));
            }
            content.extend(done.content.iter().map(mcp_content));
            content.extend(error.map(|error| json!({"type": "text", "text": error})));
            let mut result = json!({
                "content": content,
                "isError": error.is_some(),
                "_meta": {"weir/run_id": run_id},
            });
            if let Some(structured) = done.structured {
                result["structuredContent"] = structured;
            }
            result
        };
        Ok(match terminal {
            Some(EventKind::Completed(done)) => result(done, None),
            Some(EventKind::Failed(failed)) => match failed.error.result {
                Some(done) => result(*done, Some(&failed.error.message)),
                None => tool_error(&failed.error.message, Some(&run_id)),
            },
            Some(EventKind::Canceled(canceled)) => tool_error(
                &format!("run {run_id} was cancelled: {}", canceled.reason),
                Some(&run_id),
            ),
            other => tool_error(
                &format!(
                    "run {run_id} ended without a result ({})",
                    other.map_or("no terminal event", |kind| kind.type_name())
                ),
                Some(&run_id),
            ),
        })
    }
}

/// `tools/list`'s result: the tools as weir's own clients see them, so
/// the model knows their arguments (the child run checks them again).
fn listing(tools: &[ToolInfo]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let mut listed = json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.input_schema,
            });
            if let Some(schema) = &tool.output_schema {
                listed["outputSchema"] = schema.clone();
            }
            listed
        })
        .collect();
    json!({ "tools": tools })
}

/// A tool's failure, as MCP gives it to the model: a result with
/// `isError`, so the model reads why.
fn tool_error(message: &str, run_id: Option<&str>) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": message}],
        "isError": true,
    });
    if let Some(run_id) = run_id {
        result["_meta"] = json!({"weir/run_id": run_id});
    }
    result
}

/// A content block in MCP's form (camelCase `mimeType`, a resource
/// nested), from weir's protocol-neutral one.
fn mcp_content(block: &Content) -> Value {
    match block {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { data, mime_type } => {
            json!({"type": "image", "data": data, "mimeType": mime_type})
        }
        Content::Audio { data, mime_type } => {
            json!({"type": "audio", "data": data, "mimeType": mime_type})
        }
        Content::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            let mut resource = json!({"uri": uri});
            for (key, value) in [("mimeType", mime_type), ("text", text), ("blob", blob)] {
                if let Some(value) = value {
                    resource[key] = json!(value);
                }
            }
            json!({"type": "resource", "resource": resource})
        }
        Content::ResourceLink {
            uri,
            name,
            mime_type,
        } => {
            let mut link = json!({"type": "resource_link", "uri": uri, "name": name});
            if let Some(mime_type) = mime_type {
                link["mimeType"] = json!(mime_type);
            }
            link
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_listed_with_their_descriptions_and_schemas() {
        let schema = json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]});
        let mut info = ToolInfo::new("execute_code", "Runs code.", schema.clone());
        info.output_schema = Some(json!({"type": "object"}));
        let plain = ToolInfo::new("critique_status", "Breakers.", json!({"type": "object"}));
        assert_eq!(
            listing(&[info, plain]),
            json!({"tools": [
                {"name": "execute_code", "description": "Runs code.", "inputSchema": schema, "outputSchema": {"type": "object"}},
                {"name": "critique_status", "description": "Breakers.", "inputSchema": {"type": "object"}},
            ]})
        );
    }

    #[test]
    fn content_blocks_take_mcp_field_names() {
        let image = Content::Image {
            data: "AA==".into(),
            mime_type: "image/png".into(),
        };
        assert_eq!(
            mcp_content(&image),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"})
        );
        let resource = Content::Resource {
            uri: "weir://x".into(),
            mime_type: Some("text/plain".into()),
            text: Some("hi".into()),
            blob: None,
        };
        assert_eq!(
            mcp_content(&resource),
            json!({"type": "resource", "resource": {"uri": "weir://x", "mimeType": "text/plain", "text": "hi"}})
        );
    }
}
