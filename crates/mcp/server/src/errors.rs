//! Failures every handler shares, as JSON-RPC errors.

use serde_json::Value;
use weir_mcp_wire::jsonrpc::RpcError;

use crate::catalog::CatalogError;

/// The string `field` of a request's params, or the error naming it.
pub(crate) fn required_str<'a>(params: &'a Value, field: &str) -> Result<&'a str, RpcError> {
    params.get(field).and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("missing string field \"{field}\" in params"))
    })
}

/// A failure of weir itself (the log, serialization): the client cannot fix
/// it, so it is an internal error carrying the failure's message.
pub(crate) fn internal(error: impl std::fmt::Display) -> RpcError {
    RpcError::internal(error.to_string())
}

/// A catalog refuses what the client asked for: the client can fix that.
impl From<CatalogError> for RpcError {
    fn from(error: CatalogError) -> RpcError {
        RpcError::invalid_params(error.to_string())
    }
}
