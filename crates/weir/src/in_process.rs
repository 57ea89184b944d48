//! weir-runtime's `InProcessServer` seam, filled with weir-mcp's own
//! server: the tools `agent_run` offers its agent (`weir_tools`) are
//! listed and called by the very handlers that answer `/mcp` and stdio,
//! each call a child run of the agent's run. The packs are built before
//! the scheduler, and the server over it after, so the seam is handed to
//! them empty and filled once the node's scheduler runs (`node.rs`).

use std::sync::{Arc, OnceLock};

use weir_mcp::McpServer;
use weir_runtime::{InProcessServer, InProcessSession, RunContext, ToolInfo};

/// The node's MCP server, for the in-process servers of its runs.
#[derive(Default)]
pub(crate) struct InProcessTools(OnceLock<McpServer>);

impl InProcessTools {
    /// Serves from `server` from now on (the first server set stays).
    pub(crate) fn fill(&self, server: McpServer) {
        let _ = self.0.set(server);
    }
}

impl InProcessServer for InProcessTools {
    fn serve(&self, ctx: RunContext, tools: Vec<ToolInfo>) -> Option<Arc<dyn InProcessSession>> {
        let server = self.0.get()?;
        Some(Arc::new(server.in_process(ctx, tools)))
    }
}
