//! The `weir` MCP server that `agent_run` offers Claude Code in process
//! (`weir_tools`): the binary's own MCP server answers it, through
//! weir-runtime's [`InProcessServer`] seam, so each call is a child run of
//! the agent's run and the pack speaks no MCP; this module only names the
//! server and hands weir-agents its messages.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use weir_agents::SdkMcpServer;
use weir_runtime::{InProcessServer, InProcessSession, RunContext, ToolInfo};

/// The server's name: the model sees its tools as `mcp__weir__TOOL`.
pub(crate) const SERVER: &str = "weir";

/// The tools of this server one agent may call.
struct WeirTools(Arc<dyn InProcessSession>);

#[async_trait]
impl SdkMcpServer for WeirTools {
    fn name(&self) -> &str {
        SERVER
    }

    async fn handle(&self, message: Value) -> Option<Value> {
        self.0.handle(message).await
    }
}

/// The server `weir` offering `tools` to the agent of `ctx`'s run, from
/// `server`; `None` when the program has none to serve them with.
pub(crate) fn offer(
    server: &dyn InProcessServer,
    ctx: &RunContext,
    tools: Vec<ToolInfo>,
) -> Option<Arc<dyn SdkMcpServer>> {
    let session = server.serve(ctx.clone(), tools)?;
    Some(Arc::new(WeirTools(session)))
}
