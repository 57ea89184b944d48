//! The upstreams' resources and prompts, for weir's MCP server to pass
//! through (`weir_mcp::catalog::UpstreamSource`): each request goes to the
//! upstream over its one connection (`ClientCaller::request`), and its
//! refusal comes back as the upstream gave it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use weir_client::ClientError;
use weir_mcp::catalog::{PassThrough, RpcError, UpstreamSource};
use weir_runtime::RemoteCaller;

use crate::remote_caller::ClientCaller;

struct Source(Arc<ClientCaller>);

#[async_trait]
impl UpstreamSource for Source {
    fn names(&self) -> Vec<String> {
        self.0.servers()
    }

    async fn request(
        &self,
        upstream: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, RpcError> {
        self.0
            .request(upstream, method, params)
            .await
            .map_err(|error| match error {
                ClientError::Rpc {
                    code,
                    message,
                    data,
                    ..
                } => RpcError {
                    code,
                    message,
                    data,
                },
                other => RpcError::internal(format!(
                    "the upstream {upstream} did not answer {method}: {other}"
                )),
            })
    }
}

/// The pass-through of `caller`'s upstreams, when there are any; their
/// prompts named `NAME__prompt` when `prefixed`, as their tools are.
pub(crate) fn pass_through(caller: &Arc<ClientCaller>, prefixed: bool) -> Option<PassThrough> {
    if caller.servers().is_empty() {
        return None;
    }
    Some(PassThrough {
        source: Arc::new(Source(caller.clone())),
        prefixed,
    })
}
