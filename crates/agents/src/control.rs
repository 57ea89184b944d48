//! Claude Code's control protocol (`--input-format stream-json`): the
//! lines the driver writes, and the requests it reads.

use serde_json::{Value, json};

use crate::{Decision, Hook, HookCall, ToolPermission};

/// The handshake: the hooks, each callback named by its index in `hooks`
/// (see [`hook_id`]), and the in-process MCP servers by name (each also
/// given with `--mcp-config`, see `command::args`).
pub(crate) fn initialize(request_id: &str, hooks: &[Hook], sdk_servers: &[String]) -> String {
    let mut request = json!({"subtype": "initialize", "hooks": null});
    if !hooks.is_empty() {
        // Grouped by event, one matcher per hook, as the SDKs send them.
        let mut by_event = serde_json::Map::new();
        for (index, hook) in hooks.iter().enumerate() {
            let matchers = by_event
                .entry(hook.event.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(matchers) = matchers {
                matchers
                    .push(json!({"matcher": hook.matcher, "hookCallbackIds": [hook_id(index)]}));
            }
        }
        request["hooks"] = Value::Object(by_event);
    }
    if !sdk_servers.is_empty() {
        request["sdkMcpServers"] = json!(sdk_servers);
    }
    line(json!({
        "type": "control_request",
        "request_id": request_id,
        "request": request,
    }))
}

/// The callback id of `hooks[index]`.
pub(crate) fn hook_id(index: usize) -> String {
    format!("hook_{index}")
}

/// The `--mcp-config` that declares in-process (`sdk`) servers: the CLI
/// then reaches them through `mcp_message` requests.
pub(crate) fn mcp_config(sdk_servers: &[String]) -> String {
    let servers: serde_json::Map<String, Value> = sdk_servers
        .iter()
        .map(|name| (name.clone(), json!({"type": "sdk", "name": name})))
        .collect();
    json!({ "mcpServers": servers }).to_string()
}

/// A turn's prompt.
pub(crate) fn user_message(prompt: &str) -> String {
    line(json!({
        "type": "user",
        "message": {"role": "user", "content": prompt},
        "parent_tool_use_id": null,
        "session_id": "default",
    }))
}

/// Stop the turn in progress.
pub(crate) fn interrupt(request_id: &str) -> String {
    line(json!({
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": "interrupt"},
    }))
}

/// The answer to a `can_use_tool` request. An allow must carry the input
/// to run with: the model's, unless the policy changed it.
pub(crate) fn permission(request_id: &str, decision: &Decision, asked: &ToolPermission) -> String {
    let response = match decision {
        Decision::Allow { updated_input } => json!({
            "behavior": "allow",
            "updatedInput": updated_input.as_ref().unwrap_or(&asked.input),
        }),
        Decision::Deny { message } => json!({"behavior": "deny", "message": message}),
    };
    success(request_id, response)
}

/// The answer to an `mcp_message` request: the server's JSON-RPC response
/// to a request; for a notification (`None`), the empty result the
/// CLI's own SDKs answer with.
pub(crate) fn mcp_response(request_id: &str, response: Option<Value>) -> String {
    let response = response.unwrap_or_else(|| json!({"jsonrpc": "2.0", "result": {}, "id": 0}));
    success(request_id, json!({ "mcp_response": response }))
}

/// The answer to a `hook_callback` request: the hook's output.
pub(crate) fn hook_output(request_id: &str, output: Value) -> String {
    success(request_id, output)
}

/// A request the driver cannot serve (an unknown subtype, server or
/// callback), refused so the CLI does not wait for it.
pub(crate) fn refuse(request_id: &str, error: &str) -> String {
    line(json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    }))
}

fn success(request_id: &str, response: Value) -> String {
    line(json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    }))
}

fn line(value: Value) -> String {
    let mut text = value.to_string();
    text.push('\n');
    text
}

/// A control line the CLI wrote.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// `can_use_tool`: may this tool run?
    CanUseTool {
        request_id: String,
        permission: ToolPermission,
    },
    /// `mcp_message`: a JSON-RPC message for an in-process MCP server.
    McpMessage {
        request_id: String,
        server_name: String,
        message: Value,
    },
    /// `hook_callback`: a registered hook fired.
    HookCallback {
        request_id: String,
        callback_id: String,
        call: HookCall,
    },
    /// Any other request.
    Other { request_id: String, subtype: String },
    /// The answer to one of the driver's requests.
    Response {
        request_id: String,
        error: Option<String>,
    },
    /// The CLI withdrew a request (nothing to do: its answer is ignored).
    Cancel,
}

/// The control message `line` is, if it is one.
pub(crate) fn incoming(line: &Value) -> Option<Incoming> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    match line["type"].as_str()? {
        "control_request" => {
            let request = &line["request"];
            let request_id = text(&line["request_id"]);
            Some(match request["subtype"].as_str() {
                Some("can_use_tool") => Incoming::CanUseTool {
                    request_id,
                    permission: ToolPermission {
                        tool_name: text(&request["tool_name"]),
                        input: request["input"].clone(),
                        tool_use_id: request["tool_use_id"].as_str().map(str::to_owned),
                        description: request["description"].as_str().map(str::to_owned),
                    },
                },
                Some("mcp_message") => Incoming::McpMessage {
                    request_id,
                    server_name: text(&request["server_name"]),
                    message: request["message"].clone(),
                },
                Some("hook_callback") => Incoming::HookCallback {
                    request_id,
                    callback_id: text(&request["callback_id"]),
                    call: HookCall {
                        event: text(&request["input"]["hook_event_name"]),
                        input: request["input"].clone(),
                        tool_use_id: request["tool_use_id"].as_str().map(str::to_owned),
                    },
                },
                other => Incoming::Other {
                    request_id,
                    subtype: other.unwrap_or("?").to_owned(),
                },
            })
        }
        "control_response" => {
            let response = &line["response"];
            Some(Incoming::Response {
                request_id: text(&response["request_id"]),
                error: (response["subtype"] == "error").then(|| text(&response["error"])),
            })
        }
        "control_cancel_request" => Some(Incoming::Cancel),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;

    fn parsed(line: &str) -> Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn initialize_registers_hooks_by_event_and_servers_by_name() {
        let hook = |event: &str, matcher: Option<&str>| {
            Hook::new(event, matcher, Arc::new(|_: &HookCall| json!({})))
        };
        let hooks = [
            hook("PreToolUse", Some("Bash")),
            hook("PostToolUse", None),
            hook("PreToolUse", Some("Edit|Write")),
        ];
        let line = parsed(&initialize("init", &hooks, &["weir".into()]));
        assert_eq!(
            line["request"],
            json!({
                "subtype": "initialize",
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hookCallbackIds": ["hook_0"]},
                        {"matcher": "Edit|Write", "hookCallbackIds": ["hook_2"]},
                    ],
                    "PostToolUse": [{"matcher": null, "hookCallbackIds": ["hook_1"]}],
                },
                "sdkMcpServers": ["weir"],
            })
        );
        // Without either, the handshake stays as before.
        let line = parsed(&initialize("init", &[], &[]));
        assert_eq!(
            line["request"],
            json!({"subtype": "initialize", "hooks": null})
        );
    }

    #[test]
    fn a_notification_is_acknowledged_with_an_empty_result() {
        let line = parsed(&mcp_response("r1", None));
        assert_eq!(
            line["response"],
            json!({"subtype": "success", "request_id": "r1", "response": {"mcp_response": {"jsonrpc": "2.0", "result": {}, "id": 0}}})
        );
    }

    #[test]
    fn mcp_messages_and_hook_callbacks_are_read() {
        let line = json!({"type": "control_request", "request_id": "r2", "request": {
            "subtype": "mcp_message", "server_name": "weir",
            "message": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        }});
        assert!(
            matches!(incoming(&line), Some(Incoming::McpMessage { request_id, server_name, message })
            if request_id == "r2" && server_name == "weir" && message["method"] == "tools/list")
        );
        let line = json!({"type": "control_request", "request_id": "r3", "request": {
            "subtype": "hook_callback", "callback_id": "hook_0", "tool_use_id": "toolu_1",
            "input": {"hook_event_name": "PreToolUse", "tool_name": "Bash"},
        }});
        assert!(
            matches!(incoming(&line), Some(Incoming::HookCallback { request_id, callback_id, call })
            if request_id == "r3" && callback_id == "hook_0" && call.event == "PreToolUse"
                && call.tool_use_id.as_deref() == Some("toolu_1"))
        );
    }
}
