//! What both transports hand back for a request, and what they answer
//! when the server asks the client something.

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response, response};

use crate::error::ClientError;

/// A message about a request, or why no more will come.
pub(crate) type Inbound = Result<Incoming, ClientError>;

/// The tokens a request's notifications carry (`progressToken`,
/// `partialResultToken`): how a stdio connection routes them.
pub(crate) type Tokens = Vec<String>;

/// The messages about one request: notifications routed to it, then its
/// response. Dropping it stops the routing (and, over HTTP, closes the
/// request's stream).
pub(crate) struct Exchange {
    messages: mpsc::Receiver<Inbound>,
    /// Held only to be dropped with the exchange, which is what ends the
    /// transport's part (a stdio route, an HTTP stream's reader); boxed so
    /// that an exchange need not know either transport.
    _guard: Option<Box<dyn Send + Sync>>,
}

impl Exchange {
    /// The exchange of `messages`, which `guard` keeps coming until dropped.
    pub(crate) fn new(
        messages: mpsc::Receiver<Inbound>,
        guard: impl Send + Sync + 'static,
    ) -> Exchange {
        Exchange {
            messages,
            _guard: Some(Box::new(guard)),
        }
    }

    /// An exchange that already holds its one answer (a JSON response).
    pub(crate) fn answered(message: Inbound) -> Exchange {
        let (sender, messages) = mpsc::channel(1);
        let _ = sender.try_send(message);
        Exchange {
            messages,
            _guard: None,
        }
    }

    /// The next message; `None` once the transport has nothing more.
    pub(crate) async fn next(&mut self) -> Option<Inbound> {
        self.messages.recv().await
    }
}

/// The answer to a request the server sent: this client only answers
/// `ping` (and lists no roots); anything else is refused, so the server
/// can carry on without it.
pub(crate) fn answer_server_request(id: &Value, method: &str) -> Value {
    match method {
        "ping" => response(id, json!({})),
        "roots/list" => response(id, json!({ "roots": [] })),
        other => error_response(
            id,
            &RpcError::new(
                code::METHOD_NOT_FOUND,
                format!("weir's MCP client does not handle {other}"),
            ),
        ),
    }
}
