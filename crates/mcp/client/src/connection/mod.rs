//! Transports, client side: how a request reaches the server and how the
//! messages about it come back. Both hand each request an [`Exchange`]: the
//! notifications that belong to it, then its response. Requests the server
//! sends the client (`ping`, `roots/list`, …) are answered here, so callers
//! never see them.

mod http;
mod stdio;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ClientError;
use super::options::Target;
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response, response};

pub(crate) use http::{HttpConnection, base_url, http_client, root_cause};
pub(crate) use stdio::StdioConnection;

/// A message about a request, or why no more will come.
pub(crate) type Inbound = Result<Incoming, ClientError>;

/// A connection to one server.
pub(crate) enum Connection {
    Stdio(StdioConnection),
    Http(HttpConnection),
}

/// How the connection's protocol state was settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Negotiated {
    /// 2025-11-25 and before: this version, in a session (HTTP) or process.
    Session(String),
    /// 2026-07-28: everything in each request.
    Stateless,
}

/// The messages about one request: notifications routed to it, then its
/// response. Dropping it stops the routing (and, over HTTP, closes the
/// request's stream).
pub(crate) struct Exchange {
    messages: mpsc::Receiver<Inbound>,
    _guard: Guard,
}

/// What an exchange holds only for its `Drop`.
#[allow(dead_code)] // never read: dropping it is the point
enum Guard {
    Stdio(stdio::Registration),
    Http(http::AbortOnDrop),
    None,
}

impl Exchange {
    /// The next message; `None` once the transport has nothing more.
    pub(crate) async fn next(&mut self) -> Option<Inbound> {
        self.messages.recv().await
    }

    /// An exchange that already holds its one answer (a JSON response).
    fn answered(message: Inbound) -> Exchange {
        let (sender, messages) = mpsc::channel(1);
        let _ = sender.try_send(message);
        Exchange {
            messages,
            _guard: Guard::None,
        }
    }
}

/// The tokens a request's notifications carry (`progressToken`,
/// `partialResultToken`): how a stdio connection routes them.
pub(crate) type Tokens = Vec<String>;

impl Connection {
    /// Spawns or reaches the server.
    pub(crate) async fn open(target: &Target) -> Result<Connection, ClientError> {
        Ok(match target {
            Target::Stdio(command) => Connection::Stdio(StdioConnection::spawn(command)?),
            Target::Http { url, token } => {
                Connection::Http(HttpConnection::new(url.clone(), token.clone())?)
            }
        })
    }

    /// Sends a request (`message` has its `id`); the exchange yields what
    /// comes back about it.
    pub(crate) async fn request(
        &self,
        message: Value,
        tokens: Tokens,
    ) -> Result<Exchange, ClientError> {
        match self {
            Connection::Stdio(stdio) => stdio.request(message, tokens).await,
            Connection::Http(http) => http.request(message).await,
        }
    }

    /// Sends a notification.
    pub(crate) async fn notify(&self, message: Value) -> Result<(), ClientError> {
        match self {
            Connection::Stdio(stdio) => stdio.send(message).await,
            Connection::Http(http) => http.notify(message).await,
        }
    }

    /// Records the outcome of negotiation (HTTP sends it as headers).
    pub(crate) fn settle(&self, negotiated: &Negotiated) {
        if let Connection::Http(http) = self {
            http.settle(negotiated);
        }
    }

    /// Whether this is a spawned process (stdio).
    pub(crate) fn is_stdio(&self) -> bool {
        matches!(self, Connection::Stdio(_))
    }

    /// Ends the session: closes the server's stdin and waits for it to exit
    /// (stdio), or deletes the HTTP session.
    pub(crate) async fn close(&self) {
        match self {
            Connection::Stdio(stdio) => stdio.close().await,
            Connection::Http(http) => http.close().await,
        }
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
