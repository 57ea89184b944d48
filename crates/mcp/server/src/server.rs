//! The MCP server: method dispatch for a session.
//!
//! Transport-neutral: a transport parses a message, finds its [`Session`],
//! and calls [`McpServer::request`] with a channel for the messages the
//! request produces before its response (notifications of a tool call).
//! This module imports the handlers; they never import it.

use std::sync::Arc;

use serde_json::{Value, json};
use weir_mcp_wire::jsonrpc::{RpcError, code, error_response, response};
use weir_runtime::Scheduler;

use crate::catalog::Catalog;
use crate::handlers::{lifecycle, prompts, resources, tasks, tools};
use crate::protocol::{Era, Scope, meta_key, stamp_result};
use crate::session::{Outbound, Session};
use crate::state::{ServerConfig, ServerState};

/// The MCP server. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) state: Arc<ServerState>,
}

impl McpServer {
    /// A server executing tools through `scheduler` and serving `catalog`.
    pub fn new(scheduler: Scheduler, catalog: Arc<dyn Catalog>, config: ServerConfig) -> McpServer {
        McpServer {
            state: Arc::new(ServerState {
                scheduler,
                catalog,
                config,
                announcements: tokio::sync::broadcast::channel(16).0,
            }),
        }
    }

    /// Tells every connected client that the tool list changed
    /// (`notifications/tools/list_changed`): the stdio client, and each
    /// HTTP session with its standalone stream open (`GET /mcp`). A client
    /// that connects later reads the new list anyway.
    pub fn tools_changed(&self) {
        let notification = json!({
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
        });
        // No client connected: nobody to tell.
        let _ = self.state.announcements.send(notification);
    }

    /// The announcements to come ([`McpServer::tools_changed`]).
    pub(crate) fn announcements(&self) -> tokio::sync::broadcast::Receiver<Value> {
        self.state.announcements.subscribe()
    }

    /// The scheduler behind the server.
    pub fn scheduler(&self) -> &Scheduler {
        &self.state.scheduler
    }

    /// Most bytes in one incoming message.
    pub fn max_message_bytes(&self) -> usize {
        self.state.config.max_message_bytes
    }

    /// Answers one request. `None` means no response is owed (the client
    /// cancelled it).
    pub(crate) async fn request(
        &self,
        session: &Arc<Session>,
        era: Era,
        id: &Value,
        method: &str,
        params: Value,
        out: &Outbound,
    ) -> Option<Value> {
        let state = &*self.state;
        let scope = session.scope(era, &params);
        let removed_in_stateless = matches!(
            method,
            "initialize"
                | "ping"
                | "logging/setLevel"
                | "resources/subscribe"
                | "resources/unsubscribe"
        );
        let result = match method {
            _ if era == Era::Stateless && removed_in_stateless => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("{method} does not exist in protocol revision 2026-07-28"),
            )),
            "initialize" => Ok(Some(lifecycle::initialize(state, session, &params))),
            "tools/call" => tools::call(state, session, &scope, id, params, out).await,
            // Streams: the task's questions come on it.
            "tasks/result" if era == Era::Session => {
                tasks::result(state, session, &params, out).await.map(Some)
            }
            other => dispatch(state, session, &scope, other, &params)
                .await
                .map(Some),
        };
        match result {
            Ok(Some(mut result)) => {
                stamp_result(era, method, &mut result);
                if era == Era::Stateless {
                    result["_meta"][meta_key::SERVER_INFO] = state.server_info();
                }
                Some(response(id, result))
            }
            Ok(None) => None,
            Err(error) => Some(error_response(id, &error)),
        }
    }

    /// Handles a notification from the client.
    pub(crate) fn notification(&self, session: &Session, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            let Some(request_id) = params.get("requestId") else {
                return;
            };
            let reason = params
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("the client cancelled the request");
            if let Some(run) = session.cancel_call(request_id) {
                self.state.scheduler.cancel(&run, reason);
            }
        }
        // notifications/initialized and others need no action.
    }
}

/// The methods that answer with exactly one result: everything but
/// `initialize` and `tools/call`.
async fn dispatch(
    state: &ServerState,
    session: &Session,
    scope: &Scope,
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    match method {
        "ping" => Ok(json!({})),
        "server/discover" => Ok(lifecycle::discover(state)),
        "logging/setLevel" => lifecycle::set_log_level(session, params),
        "tools/list" => Ok(tools::list(state, &session.caller)),
        "resources/list" => resources::list(state, &session.caller).await,
        "resources/templates/list" => resources::templates(state, &session.caller).await,
        "resources/read" => resources::read(state, &session.caller, scope, params).await,
        "resources/subscribe" | "resources/unsubscribe" => resources::subscribe(params),
        "prompts/list" => prompts::list(state, &session.caller).await,
        "prompts/get" => prompts::get(state, &session.caller, params).await,
        "completion/complete" => prompts::complete(state, &session.caller, params).await,
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
            tasks::request(state, &session.caller, scope, method, params).await
        }
        other => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method {other:?}; see tools/list, resources/list and prompts/list for what this server offers"
            ),
        )),
    }
}
