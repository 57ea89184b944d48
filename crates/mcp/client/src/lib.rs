//! weir-client: an MCP client that streams a tool call as it happens.
//!
//! **For:** calling tools on any MCP server — weir or not — over stdio (a
//! spawned command) or Streamable HTTP, and watching each call as one stream
//! of typed [`CallEvent`]s: progress, partial results (SEP-2998: asked for
//! with `partialResults` and a `partialResultToken`), log messages, task
//! status, then exactly one final [`CallResult`] or [`ClientError`]. The
//! client negotiates the revision (2026-07-28 stateless when an HTTP server
//! answers `server/discover`, else 2025-11-25 through `initialize`), runs a
//! call as a task when asked or when the tool requires it (polling at the
//! server's `pollInterval`, backing off on failures), resumes a dropped HTTP
//! stream (`Last-Event-ID` in 2025-11-25; in 2026-07-28 a task survives the
//! drop and is followed by polling), and cancels a call when its stream is
//! dropped or [`CallStream::cancel`] is called (`notifications/cancelled`,
//! closing the 2026-07-28 stream, or `tasks/cancel`). [`follow_run`] reads
//! weir's `GET /runs/{id}/events`.
//!
//! **Not for:** answering a server's questions: sampling and elicitation
//! requests are refused (a task waiting for input ends the call with
//! [`ClientError::InputRequired`]); resources, prompts and subscriptions are
//! not wrapped. Servers that speak only the old HTTP+SSE transport
//! (2024-11-05) are not supported. It shares only the wire vocabulary
//! (`weir-mcp-wire`) with weir's server, never its code.
//!
//! # Main types
//!
//! - [`Client`]: one server, spawned or reached from a [`Target`] and
//!   negotiated with [`ClientOptions`] ([`Revision`] picks the protocol
//!   revision); [`Client::list_tools`] describes its tools
//!   ([`ToolDescription`], with their [`TaskSupport`]).
//! - [`CallStream`]: one call, from [`Client::call_stream`] with
//!   [`CallOptions`] ([`TaskMode`], a timeout). A `Stream` of [`CallEvent`]s
//!   (a task's status as a [`TaskStatus`]) whose last is the
//!   [`CallResult`] or the [`ClientError`]; cancelling or dropping it
//!   cancels the call on the server.
//! - [`ClientError`]: every way a call or a connection fails, each message
//!   saying what to do next.
//! - [`follow_run`]: a weir run's events ([`RunEvents`]), from any seq to
//!   the end, reconnecting without losing or repeating one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), weir_client::ClientError> {
//! use futures_util::StreamExt;
//! use serde_json::json;
//! use weir_client::{CallEvent, CallOptions, Client, ClientOptions, Target};
//!
//! let target = Target::Http { url: "http://127.0.0.1:8765/mcp".into(), token: None };
//! let client = Client::connect(target, ClientOptions::default()).await?;
//! let mut call = client.call_stream("stream", json!({"count": 3}), CallOptions::default());
//! while let Some(event) = call.next().await {
//!     match event {
//!         CallEvent::Progress { progress, total, .. } => eprintln!("{progress}/{total:?}"),
//!         CallEvent::Partial { content, .. } => println!("{content:?}"),
//!         CallEvent::Result(result) => println!("done: {:?}", result.content),
//!         CallEvent::Error(error) => eprintln!("{error}"),
//!         _ => {}
//!     }
//! }
//! client.close().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

// Each module uses only modules listed before it (a file never imports
// one that imports it back): error, events, options, sse, retry;
// connection (exchange, then http and stdio, then the `Connection` that
// picks one); server (the negotiated server every request goes through);
// call (relay and stop, then request, then inline and task, then the
// `CallStream` that picks one); runs; and this file, the public face.
mod call;
mod connection;
mod error;
mod events;
mod options;
mod retry;
mod runs;
mod server;
mod sse;

use std::sync::Arc;

use serde_json::Value;
use weir_mcp_wire::revision::STATELESS_VERSION;

pub use call::CallStream;
pub use error::ClientError;
pub use events::{CallEvent, CallResult, RunEnd, TaskStatus, TaskSupport, ToolDescription};
pub use options::{CallOptions, ClientOptions, Revision, StdioCommand, Target, TaskMode};
pub use runs::{RunEvents, follow_run};

/// The most bytes of one message the client reads from a server: a stdio
/// line, an SSE event, a JSON answer (and of a stderr line it keeps the
/// start of). A server past it gets its connection closed with
/// [`ClientError::MessageTooLarge`]: a server that never ends a line must
/// not take the client's memory with it.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

use connection::Negotiated;
use server::Server;

/// A connection to one MCP server, negotiated. Calls share it; each call is
/// its own [`CallStream`].
pub struct Client {
    server: Arc<Server>,
}

impl Client {
    /// Spawns or reaches the server and negotiates the protocol revision
    /// (giving up when the server has not answered within 30 s).
    pub async fn connect(target: Target, options: ClientOptions) -> Result<Client, ClientError> {
        let server = Server::connect(target, options).await?;
        Ok(Client {
            server: Arc::new(server),
        })
    }

    /// The protocol revision in use, e.g. `2026-07-28`.
    pub fn protocol_version(&self) -> &str {
        match &self.server.negotiated {
            Negotiated::Session(version) => version,
            Negotiated::Stateless => STATELESS_VERSION,
        }
    }

    /// The server's `serverInfo.name`, if it gave one.
    pub fn server_name(&self) -> Option<&str> {
        self.server.server_info.get("name").and_then(Value::as_str)
    }

    /// Whether the server runs tool calls as tasks.
    pub fn supports_tasks(&self) -> bool {
        self.server.supports_tasks()
    }

    /// Every tool the server offers (all pages of `tools/list`).
    pub async fn list_tools(&self) -> Result<Vec<ToolDescription>, ClientError> {
        self.server.list_tools().await
    }

    /// Every tool the server offers as it described it, JSON as sent (all
    /// pages of `tools/list`; entries without a name left out): for a
    /// proxy that passes a description on whole, with fields
    /// [`ToolDescription`] does not type (`annotations`, `icons`, `_meta`).
    pub async fn list_tools_json(&self) -> Result<Vec<Value>, ClientError> {
        self.server.list_tools_json().await
    }

    /// Sends one request other than a tool call (`resources/read`,
    /// `prompts/get`, …) and returns its result as sent, or the server's
    /// refusal ([`ClientError::Rpc`]): for a proxy that passes it on.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.server.roundtrip(method, params).await
    }

    /// Calls `tool` with `arguments` (a JSON object); the stream yields what
    /// happens, ending with the result or an error. Dropping the stream
    /// before its end cancels the call on the server.
    pub fn call_stream(&self, tool: &str, arguments: Value, options: CallOptions) -> CallStream {
        call::start(self.server.clone(), tool.to_owned(), arguments, options)
    }

    /// A count that goes up at each `notifications/tools/list_changed` the
    /// server sends (wait on it with `changed()`), for a client that keeps
    /// the list. Over HTTP, asked once the connection is open and from
    /// within a tokio runtime, the first call opens the session's stream
    /// for what the server sends unasked; `None` for a 2026-07-28 server,
    /// which has none.
    pub fn tools_changed(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.server.connection.tools_changed()
    }

    /// Why the connection is known to be over, without a request: a stdio
    /// server that exited (with its status and the end of its stderr).
    /// `None` while it is not known to be (over HTTP, until a request fails).
    pub fn gone(&self) -> Option<ClientError> {
        self.server.connection.gone()
    }

    /// Ends the connection: closes the server's stdin and waits for it to
    /// exit (stdio), or ends the HTTP session.
    pub async fn close(self) {
        self.server.connection.close().await;
    }
}
