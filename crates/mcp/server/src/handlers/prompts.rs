//! `prompts/list`, `prompts/get` and `completion/complete`: answered by the
//! catalog and the upstreams ([`upstream`]).

use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::RpcError;
use weir_runtime::Principal;

use crate::errors::{internal, required_str};
use crate::handlers::upstream;
use crate::state::ServerState;

/// `prompts/list`: the catalog's, then the upstreams' `caller` sees.
pub(crate) async fn list(state: &ServerState, caller: &Principal) -> Result<Value, RpcError> {
    let mut prompts = serde_json::to_value(state.catalog.prompts()).map_err(internal)?;
    let passed = upstream::list(state, caller, "prompts/list", "prompts").await;
    if let Some(list) = prompts.as_array_mut() {
        list.extend(passed);
    }
    Ok(json!({ "prompts": prompts }))
}

/// `prompts/get`: an upstream's prompt, named as served, else the
/// catalog's.
pub(crate) async fn get(
    state: &ServerState,
    caller: &Principal,
    params: &Value,
) -> Result<Value, RpcError> {
    let name = required_str(params, "name")?;
    if let Some(answer) = upstream::get_prompt(state, caller, name, params).await {
        return answer;
    }
    let arguments = params
        .get("arguments")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let prompt = state.catalog.get_prompt(name, &arguments).await?;
    serde_json::to_value(prompt).map_err(internal)
}

/// `completion/complete`, for a prompt's or resource template's argument:
/// an upstream's, else the catalog's.
pub(crate) async fn complete(
    state: &ServerState,
    caller: &Principal,
    params: &Value,
) -> Result<Value, RpcError> {
    if let Some(answer) = upstream::complete(state, caller, params).await {
        return answer;
    }
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
