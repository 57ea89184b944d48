//! Claude Code's control protocol (`--input-format stream-json`): the
//! lines the driver writes, and the requests it reads.

use serde_json::{Value, json};

use crate::{Decision, ToolPermission};

/// The handshake: no hooks, no in-process MCP servers.
pub(crate) fn initialize(request_id: &str) -> String {
    line(json!({
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": "initialize", "hooks": null},
    }))
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

/// A refusal of a request the driver does not serve (hook callbacks and
/// MCP messages: it registers neither), so the CLI does not wait for it.
pub(crate) fn refuse(request_id: &str, subtype: &str) -> String {
    line(json!({
        "type": "control_response",
        "response": {
            "subtype": "error",
            "request_id": request_id,
            "error": format!("weir-agents does not serve `{subtype}` requests"),
        },
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
