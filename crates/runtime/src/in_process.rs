//! The seam through which a tool offers tools of this server to a client
//! it runs itself, in process (a coding agent its run drives): the mirror
//! of [`RemoteCaller`](crate::RemoteCaller), which lets a tool reach
//! other servers. The binary implements it with its MCP server's own
//! handlers, so that a pack offers tools without speaking MCP and MCP's
//! shapes are written in one place.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::ToolInfo;
use crate::context::RunContext;

/// Serves tools of this server to one client of a run, in process. The
/// binary implements it and hands it to the packs that need it.
pub trait InProcessServer: Send + Sync + 'static {
    /// A server offering `tools` — some of `ctx`'s
    /// [`callable_tools`](RunContext::callable_tools), as listed there —
    /// to one client: it lists them as this server's clients see them, and
    /// each call of one is a child run of `ctx`'s run
    /// ([`RunContext::call`]), so the caller's scope holds for it and it
    /// ends with that run; a tool not among `tools` is refused. `None`
    /// when this program has no server to serve them with.
    fn serve(&self, ctx: RunContext, tools: Vec<ToolInfo>) -> Option<Arc<dyn InProcessSession>>;
}

/// One client's server ([`InProcessServer::serve`]).
#[async_trait]
pub trait InProcessSession: Send + Sync {
    /// Answers one message from the client: the response to a request,
    /// `None` for a notification or a response. The messages are opaque
    /// here; what they mean is the implementing server's business.
    async fn handle(&self, message: Value) -> Option<Value>;
}
