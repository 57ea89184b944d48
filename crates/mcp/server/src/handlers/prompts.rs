//! `prompts/list`, `prompts/get` and `completion/complete`: answered by the
//! catalog alone.

use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::RpcError;

use crate::errors::{internal, required_str};
use crate::state::ServerState;

/// `prompts/list`.
pub(crate) fn list(state: &ServerState) -> Value {
    json!({ "prompts": state.catalog.prompts() })
}

/// `prompts/get`.
pub(crate) async fn get(state: &ServerState, params: &Value) -> Result<Value, RpcError> {
    let name = required_str(params, "name")?;
    let arguments = params
        .get("arguments")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let prompt = state.catalog.get_prompt(name, &arguments).await?;
    serde_json::to_value(prompt).map_err(internal)
}

/// `completion/complete`, for a prompt's or resource template's argument.
pub(crate) async fn complete(state: &ServerState, params: &Value) -> Result<Value, RpcError> {
    let reference = params
        .get("ref")
        .ok_or_else(|| RpcError::invalid_params("completion/complete needs \"ref\""))?;
    let argument = params.get("argument").cloned().unwrap_or_default();
    let name = argument
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let value = argument
        .get("value")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let values = state.catalog.complete(reference, name, value).await;
    Ok(json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } }))
}
