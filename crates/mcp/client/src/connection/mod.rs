//! Transports, client side: how a request reaches the server and how the
//! messages about it come back. Both hand each request an [`Exchange`]: the
//! notifications that belong to it, then its response. Requests the server
//! sends the client (`ping`, `roots/list`, …) are answered here, so callers
//! never see them.

mod exchange;
mod http;
mod lines;
mod stdio;

use serde_json::Value;

use crate::error::ClientError;
use crate::options::Target;

pub(crate) use exchange::{Exchange, Inbound, Message};
pub(crate) use http::{base_url, check_status, http_client, root_cause};

use exchange::Tokens;
use http::HttpConnection;
use stdio::StdioConnection;

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

impl Connection {
    /// Spawns or reaches the server; over HTTP every request carries
    /// `headers` too.
    pub(crate) async fn open(
        target: &Target,
        headers: &[(String, String)],
    ) -> Result<Connection, ClientError> {
        Ok(match target {
            Target::Stdio(command) => Connection::Stdio(StdioConnection::spawn(command)?),
            Target::Http { url, token } => Connection::Http(HttpConnection::new(
                url.clone(),
                token.clone(),
                headers.to_vec(),
            )?),
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
        match (self, negotiated) {
            (Connection::Http(http), Negotiated::Session(version)) => http.settle_session(version),
            (Connection::Http(http), Negotiated::Stateless) => http.settle_stateless(),
            (Connection::Stdio(_), _) => {}
        }
    }

    /// Whether this is a spawned process (stdio).
    pub(crate) fn is_stdio(&self) -> bool {
        matches!(self, Connection::Stdio(_))
    }

    /// Counts the server's `notifications/tools/list_changed` (over HTTP
    /// in a 2025-11-25 session only).
    pub(crate) fn tools_changed(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            Connection::Stdio(stdio) => Some(stdio.tools_changed()),
            Connection::Http(http) => http.tools_changed(),
        }
    }

    /// Why the connection is known to be over: a stdio server that exited.
    /// `None` while it is not known to be (HTTP: until a request fails).
    pub(crate) fn gone(&self) -> Option<ClientError> {
        match self {
            Connection::Stdio(stdio) => stdio.gone(),
            Connection::Http(_) => None,
        }
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
