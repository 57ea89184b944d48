//! What a client learns about the server and sets for itself: `initialize`,
//! `server/discover` and `logging/setLevel`.

use serde_json::{Value, json};
use weir_core::LogLevel;
use weir_mcp_wire::jsonrpc::RpcError;
use weir_mcp_wire::revision::TASKS_EXTENSION;

use crate::protocol::{Era, LATEST_SESSION_VERSION, SUPPORTED_VERSIONS};
use crate::session::Session;
use crate::state::ServerState;

/// `initialize` (session era): agrees on a revision and records the
/// client's capabilities and name in `session`.
pub(crate) fn initialize(state: &ServerState, session: &Session, params: &Value) -> Value {
    let version = negotiated(params);
    session.set_capabilities(
        params
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    session.set_client(params.get("clientInfo"));
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities(state, Era::Session),
        "serverInfo": state.server_info(),
    });
    if let Some(instructions) = &state.config.instructions {
        result["instructions"] = instructions.clone().into();
    }
    result
}

/// The revision `initialize`'s `params` agree on: a session-era client
/// gets its own revision if we speak it, else our newest session revision.
fn negotiated(params: &Value) -> &'static str {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    SUPPORTED_VERSIONS
        .iter()
        .skip(1)
        .find(|known| **known == asked)
        .copied()
        .unwrap_or(LATEST_SESSION_VERSION)
}

/// `initialize` of an in-process server ([`crate::transport::in_process`]):
/// the revision as for any client, and tools as its one capability.
pub(crate) fn initialize_offered(state: &ServerState, params: &Value) -> Value {
    json!({
        "protocolVersion": negotiated(params),
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": state.server_info(),
    })
}

/// `server/discover` (2026-07-28).
pub(crate) fn discover(state: &ServerState) -> Value {
    // serverInfo travels in `_meta` (the dispatcher adds it); absent
    // instructions are left out, not null (the schema says string).
    let mut discovered = json!({
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": capabilities(state, Era::Stateless),
    });
    if let Some(instructions) = &state.config.instructions {
        discovered["instructions"] = instructions.clone().into();
    }
    discovered
}

/// `logging/setLevel` (session era): the level applies to the session's
/// later calls.
pub(crate) fn set_log_level(session: &Session, params: &Value) -> Result<Value, RpcError> {
    let level: LogLevel = params
        .get("level")
        .cloned()
        .and_then(|level| serde_json::from_value(level).ok())
        .ok_or_else(|| {
            RpcError::invalid_params(
                "logging/setLevel needs \"level\": one of debug, info, notice, warning, error, critical, alert, emergency",
            )
        })?;
    session.set_log_level(level);
    Ok(json!({}))
}

fn capabilities(state: &ServerState, era: Era) -> Value {
    // Only a session has a channel for what the server says unasked.
    let tools_change = state.config.tools_list_changes && era == Era::Session;
    let mut capabilities = json!({
        "tools": { "listChanged": tools_change },
        "resources": { "subscribe": true, "listChanged": false },
        "prompts": { "listChanged": false },
        "completions": {},
        "logging": {},
    });
    match era {
        Era::Session => {
            capabilities["tasks"] =
                json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } });
        }
        Era::Stateless => {
            capabilities["extensions"] = json!({ TASKS_EXTENSION: {} });
        }
    }
    capabilities
}
