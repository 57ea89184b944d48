//! Transports: how messages reach [`crate::McpServer`] and leave it.

mod burst;
pub mod http;
pub mod in_process;
pub mod stdio;

use serde_json::Value;

use crate::protocol::{Era, STATELESS_VERSION, SUPPORTED_VERSIONS, meta_key, named_version};
use weir_mcp_wire::jsonrpc::{RpcError, code};

/// The era a request belongs to, or why its revision is refused.
/// `header` is the HTTP `MCP-Protocol-Version`, if any.
pub(crate) fn era_of(params: &Value, header: Option<&str>) -> Result<Era, RpcError> {
    let named = named_version(params);
    if let (Some(header), Some(named)) = (header, named)
        && header != named
    {
        return Err(RpcError::new(
            code::HEADER_MISMATCH,
            format!(
                "MCP-Protocol-Version header {header:?} does not match _meta protocolVersion {named:?}"
            ),
        ));
    }
    match named.or(header.filter(|h| *h == STATELESS_VERSION)) {
        Some(STATELESS_VERSION) => {
            // Stateless requests carry everything about themselves.
            let meta = crate::protocol::request_meta(params);
            let missing: Vec<&str> = [meta_key::PROTOCOL_VERSION, meta_key::CLIENT_CAPABILITIES]
                .into_iter()
                .filter(|key| meta.is_none_or(|meta| !meta.contains_key(*key)))
                .collect();
            if !missing.is_empty() {
                return Err(RpcError::invalid_params(format!(
                    "a 2026-07-28 request must carry _meta {}; add them to params._meta",
                    missing.join(" and ")
                )));
            }
            Ok(Era::Stateless)
        }
        Some(other) if named.is_some() && !SUPPORTED_VERSIONS.contains(&other) => {
            Err(RpcError::new(
                code::UNSUPPORTED_VERSION,
                format!(
                    "protocol version {other:?} is not supported; supported: {}",
                    SUPPORTED_VERSIONS.join(", ")
                ),
            )
            .with_data(serde_json::json!({ "supported": SUPPORTED_VERSIONS, "requested": other })))
        }
        _ => Ok(Era::Session),
    }
}
