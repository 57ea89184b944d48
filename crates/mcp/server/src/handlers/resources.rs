//! `resources/*`: the catalog's resources, then weir's own run resources
//! (`weir://runs/...`, answered by [`builtin`]).

use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::{RpcError, code};

use crate::caller::Caller;
use crate::errors::{internal, required_str};
use crate::handlers::builtin;
use crate::protocol::{Era, Scope};
use crate::state::ServerState;

/// `resources/list`.
pub(crate) fn list(state: &ServerState) -> Value {
    json!({ "resources": state.catalog.resources() })
}

/// `resources/templates/list`: the catalog's templates, then weir's.
pub(crate) fn templates(state: &ServerState) -> Result<Value, RpcError> {
    let mut templates =
        serde_json::to_value(state.catalog.resource_templates()).map_err(internal)?;
    if let Some(list) = templates.as_array_mut() {
        list.extend(builtin::run_resource_templates());
    }
    Ok(json!({ "resourceTemplates": templates }))
}

/// `resources/read`: a run resource, else the catalog's.
pub(crate) async fn read(
    state: &ServerState,
    caller: &Caller,
    scope: &Scope,
    params: &Value,
) -> Result<Value, RpcError> {
    let uri = required_str(params, "uri")?;
    let contents = match builtin::read_run_resource(state, caller, uri).await? {
        Some(contents) => contents,
        None => match state.catalog.read_resource(uri).await {
            Some(contents) => serde_json::to_value(contents).map_err(internal)?,
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
