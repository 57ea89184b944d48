//! `resources/*`: the catalog's resources, the upstreams' ([`upstream`]),
//! then weir's own run resources (`weir://runs/...`, answered by
//! [`builtin`]).

use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::{RpcError, code};
use weir_runtime::Principal;

use crate::errors::{internal, required_str};
use crate::handlers::{builtin, upstream};
use crate::protocol::{Era, Scope};
use crate::state::ServerState;

/// `resources/list`: the catalog's, then the upstreams' `caller` sees.
pub(crate) async fn list(state: &ServerState, caller: &Principal) -> Result<Value, RpcError> {
    let mut resources = serde_json::to_value(state.catalog.resources()).map_err(internal)?;
    let passed = upstream::list(state, caller, "resources/list", "resources").await;
    if let Some(list) = resources.as_array_mut() {
        list.extend(passed);
    }
    Ok(json!({ "resources": resources }))
}

/// `resources/templates/list`: the catalog's templates, the upstreams',
/// then weir's.
pub(crate) async fn templates(state: &ServerState, caller: &Principal) -> Result<Value, RpcError> {
    let mut templates =
        serde_json::to_value(state.catalog.resource_templates()).map_err(internal)?;
    let passed = upstream::list(
        state,
        caller,
        "resources/templates/list",
        "resourceTemplates",
    )
    .await;
    if let Some(list) = templates.as_array_mut() {
        list.extend(passed);
        list.extend(builtin::run_resource_templates());
    }
    Ok(json!({ "resourceTemplates": templates }))
}

/// `resources/read`: a run resource, else the catalog's, else an
/// upstream's (whose answer, `_meta` and all, is passed on as it is).
pub(crate) async fn read(
    state: &ServerState,
    caller: &Principal,
    scope: &Scope,
    params: &Value,
) -> Result<Value, RpcError> {
    let uri = required_str(params, "uri")?;
    let contents = match builtin::read_run_resource(state, caller, uri).await? {
        Some(contents) => contents,
        None => match state.catalog.read_resource(uri).await {
            Some(contents) => serde_json::to_value(contents).map_err(internal)?,
            None if let Some(answer) = upstream::read(state, caller, params).await => {
                return answer;
            }
            None => {
                let code = match scope.era {
                    Era::Session => code::RESOURCE_NOT_FOUND,
                    Era::Stateless => code::INVALID_PARAMS,
                };
                return Err(RpcError::new(code, format!("resource not found: {uri}"))
                    .with_data(json!({ "uri": uri })));
            }
        },
    };
    Ok(json!({ "contents": contents }))
}

/// `resources/subscribe` and `resources/unsubscribe` (session era): checked
/// and accepted; weir sends no update notifications, so there is nothing
/// to record.
pub(crate) fn subscribe(params: &Value) -> Result<Value, RpcError> {
    required_str(params, "uri")?;
    Ok(json!({}))
}
