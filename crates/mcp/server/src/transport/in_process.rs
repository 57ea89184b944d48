//! An MCP server in process for one client of a run: the tools a tool
//! offers the client it runs itself (a coding agent `agent_run` drives),
//! answered by this crate's own handlers — `initialize`, `ping`,
//! `tools/list` and `tools/call` — with messages as JSON values rather
//! than lines or HTTP bodies. Each call is a child run of the offering
//! run; its result is the one `/mcp` gives for a call of that tool. This
//! is how the binary fills weir-runtime's [`InProcessServer`] seam.
//!
//! [`InProcessServer`]: weir_runtime::InProcessServer

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response, response};
use weir_runtime::{InProcessSession, RunContext, ToolInfo};

use crate::McpServer;
use crate::handlers::{lifecycle, tools};
use crate::state::ServerState;

/// One client's in-process server ([`McpServer::in_process`]).
pub struct InProcess {
    state: Arc<ServerState>,
    /// The run whose client this is: each call is a child run of it.
    ctx: RunContext,
    /// The tools offered, as the scheduler describes them.
    offered: Vec<ToolInfo>,
}

impl McpServer {
    /// An in-process server for one client of `ctx`'s run, offering
    /// `offered` (some of [`RunContext::callable_tools`]): listed as
    /// `tools/list` lists them, each call a child run of `ctx`'s run
    /// answered as `tools/call` answers; any other tool is unknown to it.
    pub fn in_process(&self, ctx: RunContext, offered: Vec<ToolInfo>) -> InProcess {
        InProcess {
            state: self.state.clone(),
            ctx,
            offered,
        }
    }
}

impl InProcess {
    /// Answers one request.
    async fn request(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => Ok(lifecycle::initialize_offered(&self.state, params)),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(tools::list_offered(&self.offered)),
            "tools/call" => {
                tools::call_offered(&self.state, &self.ctx, &self.offered, params).await
            }
            other => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("unknown method {other:?}; this server offers tools only (tools/list)"),
            )),
        }
    }
}

#[async_trait]
impl InProcessSession for InProcess {
    async fn handle(&self, message: Value) -> Option<Value> {
        let bytes = serde_json::to_vec(&message).ok()?;
        match Incoming::parse(&bytes) {
            Ok(Incoming::Request { id, method, params }) => {
                Some(match self.request(&method, &params).await {
                    Ok(result) => response(&id, result),
                    Err(error) => error_response(&id, &error),
                })
            }
            // Notifications (initialized, cancelled) and responses want no
            // answer; a call the client gives up on ends with the run.
            Ok(_) => None,
            Err((id, error)) => Some(error_response(&id, &error)),
        }
    }
}
