//! weir-client: an MCP client that streams a tool call as it happens.
//!
//! **For:** calling tools on any MCP server — weir or not — over stdio (a
//! spawned command) or Streamable HTTP, and watching each call as one stream
//! of typed [`CallEvent`]s: progress, SEP-2998 partial results (asked for
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

mod call;
mod connection;
mod error;
mod events;
mod options;
mod runs;
mod sse;
mod task;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};

pub use call::CallStream;
pub use error::ClientError;
pub use events::{CallEvent, CallResult, TaskStatus, TaskSupport, ToolDescription};
pub use options::{CallOptions, ClientOptions, Revision, StdioCommand, Target, TaskMode};
pub use runs::{RunEvents, follow_run};

use connection::{Connection, Negotiated};
use weir_mcp_wire::jsonrpc::Incoming;
use weir_mcp_wire::revision::{
    LATEST_SESSION_VERSION, SESSION_VERSIONS, STATELESS_VERSION, TASKS_EXTENSION, meta_key,
};

/// Most pages of `tools/list` read.
const TOOL_PAGES: usize = 100;
/// How long a server has to answer the handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A connection to one MCP server, negotiated. Calls share it; each call is
/// its own [`CallStream`].
pub struct Client {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    connection: Connection,
    options: ClientOptions,
    negotiated: Negotiated,
    server_capabilities: Value,
    server_info: Value,
    next_id: AtomicU64,
    tools: tokio::sync::Mutex<Option<Vec<ToolDescription>>>,
}

impl Client {
    /// Spawns or reaches the server and negotiates the protocol revision
    /// (giving up when the server has not answered within 30 s).
    pub async fn connect(target: Target, options: ClientOptions) -> Result<Client, ClientError> {
        let where_ = match &target {
            Target::Stdio(command) => command.display(),
            Target::Http { url, .. } => url.clone(),
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, Client::handshake(target, options))
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Unreachable {
                    url: where_,
                    reason: format!(
                        "no answer to the MCP handshake within {}s; is it an MCP server?",
                        HANDSHAKE_TIMEOUT.as_secs()
                    ),
                })
            })
    }

    async fn handshake(target: Target, options: ClientOptions) -> Result<Client, ClientError> {
        let probe = match options.revision {
            Revision::Negotiate => matches!(target, Target::Http { .. }),
            Revision::Stateless => true,
            Revision::Sessions => false,
        };
        let mut inner = Inner {
            connection: Connection::open(&target).await?,
            negotiated: Negotiated::Stateless,
            options,
            server_capabilities: json!({}),
            server_info: json!({}),
            next_id: AtomicU64::new(1),
            tools: tokio::sync::Mutex::default(),
        };
        if probe {
            match inner.discover().await {
                Ok(()) => return Ok(Client::from(inner)),
                Err(error) if error.is_unreachable() => return Err(error),
                Err(error) if inner.options.revision == Revision::Stateless => {
                    return Err(ClientError::NotStateless {
                        reason: error.to_string(),
                    });
                }
                Err(_) => {} // a session-era server: initialize below
            }
        }
        inner.initialize().await?;
        Ok(Client::from(inner))
    }

    /// The protocol revision in use, e.g. `2026-07-28`.
    pub fn protocol_version(&self) -> &str {
        match &self.inner.negotiated {
            Negotiated::Session(version) => version,
            Negotiated::Stateless => STATELESS_VERSION,
        }
    }

    /// The server's `serverInfo.name`, if it gave one.
    pub fn server_name(&self) -> Option<&str> {
        self.inner.server_info.get("name").and_then(Value::as_str)
    }

    /// Whether the server runs tool calls as tasks.
    pub fn supports_tasks(&self) -> bool {
        self.inner.supports_tasks()
    }

    /// Every tool the server offers (all pages of `tools/list`).
    pub async fn list_tools(&self) -> Result<Vec<ToolDescription>, ClientError> {
        self.inner.list_tools().await
    }

    /// Calls `tool` with `arguments` (a JSON object); the stream yields what
    /// happens, ending with the result or an error. Dropping the stream
    /// before its end cancels the call on the server.
    pub fn call_stream(&self, tool: &str, arguments: Value, options: CallOptions) -> CallStream {
        call::start(self.inner.clone(), tool.to_owned(), arguments, options)
    }

    /// Ends the connection: closes the server's stdin and waits for it to
    /// exit (stdio), or ends the HTTP session.
    pub async fn close(self) {
        self.inner.connection.close().await;
    }
}

impl From<Inner> for Client {
    fn from(inner: Inner) -> Client {
        Client {
            inner: Arc::new(inner),
        }
    }
}

/// A JSON-RPC error object as a [`ClientError`].
pub(crate) fn rpc_error(method: &str, error: &Value) -> ClientError {
    ClientError::Rpc {
        method: method.to_owned(),
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .to_owned(),
        data: error.get("data").cloned(),
    }
}

impl Inner {
    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn is_stateless(&self) -> bool {
        self.negotiated == Negotiated::Stateless
    }

    pub(crate) fn supports_tasks(&self) -> bool {
        let capabilities = &self.server_capabilities;
        match self.negotiated {
            Negotiated::Session(_) => capabilities.pointer("/tasks/requests/tools/call").is_some(),
            Negotiated::Stateless => capabilities
                .get("extensions")
                .and_then(|extensions| extensions.get(TASKS_EXTENSION))
                .is_some(),
        }
    }

    /// What this client declares: partial results always; the tasks
    /// extension (2026-07-28) when it wants tasks.
    fn capabilities(task: bool) -> Value {
        let mut capabilities = json!({ "partialResults": {} });
        if task {
            capabilities["extensions"] = json!({ TASKS_EXTENSION: {} });
        }
        capabilities
    }

    /// A request, with the 2026-07-28 `_meta` envelope when stateless.
    fn request(&self, id: u64, method: &str, params: Value, capabilities: Value) -> Value {
        let mut params = match params {
            Value::Object(params) => params,
            _ => Map::new(),
        };
        if self.is_stateless() {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("_meta is an object");
            meta.insert(meta_key::PROTOCOL_VERSION.into(), STATELESS_VERSION.into());
            meta.insert(meta_key::CLIENT_CAPABILITIES.into(), capabilities);
            meta.insert(
                meta_key::CLIENT_INFO.into(),
                json!({ "name": self.options.name, "version": self.options.version }),
            );
            if let Some(level) = self.options.log_level {
                meta.insert(meta_key::LOG_LEVEL.into(), json!(level));
            }
        }
        json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
    }

    /// One request, one answer (notifications about it are not asked for).
    pub(crate) async fn roundtrip(
        &self,
        method: &str,
        params: Value,
    ) -> Result<Value, ClientError> {
        let message = self.request(self.next_id(), method, params, Inner::capabilities(true));
        let mut exchange = self.connection.request(message, Vec::new()).await?;
        loop {
            match exchange.next().await {
                Some(Ok(Incoming::Response { outcome, .. })) => {
                    return outcome.map_err(|error| rpc_error(method, &error));
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => return Err(error),
                None => {
                    return Err(ClientError::StreamLost {
                        reason: format!(
                            "the server closed the stream of {method} without answering"
                        ),
                    });
                }
            }
        }
    }

    /// 2026-07-28: `server/discover`, which must list that revision.
    async fn discover(&mut self) -> Result<(), ClientError> {
        self.negotiated = Negotiated::Stateless;
        let result = self.roundtrip("server/discover", json!({})).await?;
        let versions: Vec<&str> = result
            .get("supportedVersions")
            .and_then(Value::as_array)
            .map(|versions| versions.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !versions.contains(&STATELESS_VERSION) {
            return Err(ClientError::UnsupportedVersion {
                offered: versions.join(", "),
                supported: STATELESS_VERSION.into(),
            });
        }
        self.server_capabilities = result.get("capabilities").cloned().unwrap_or_default();
        self.server_info = result
            .get("serverInfo")
            .or_else(|| result.pointer("/_meta/io.modelcontextprotocol~1serverInfo"))
            .cloned()
            .unwrap_or_default();
        self.connection.settle(&self.negotiated);
        Ok(())
    }

    /// 2025-11-25 and before: `initialize`, then `notifications/initialized`
    /// (and `logging/setLevel` when asked for and offered).
    async fn initialize(&mut self) -> Result<(), ClientError> {
        self.negotiated = Negotiated::Session(LATEST_SESSION_VERSION.into());
        let params = json!({
            "protocolVersion": LATEST_SESSION_VERSION,
            "capabilities": Inner::capabilities(false),
            "clientInfo": { "name": self.options.name, "version": self.options.version },
        });
        let result = self.roundtrip("initialize", params).await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !SESSION_VERSIONS.contains(&version) {
            return Err(ClientError::UnsupportedVersion {
                offered: version.into(),
                supported: SESSION_VERSIONS.join(", "),
            });
        }
        self.negotiated = Negotiated::Session(version.to_owned());
        self.server_capabilities = result.get("capabilities").cloned().unwrap_or_default();
        self.server_info = result.get("serverInfo").cloned().unwrap_or_default();
        self.connection.settle(&self.negotiated);
        self.connection
            .notify(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await?;
        if let Some(level) = self.options.log_level
            && self.server_capabilities.get("logging").is_some()
        {
            // Best effort: a server that refuses still serves the call.
            let _ = self
                .roundtrip("logging/setLevel", json!({ "level": level }))
                .await;
        }
        Ok(())
    }

    pub(crate) async fn list_tools(&self) -> Result<Vec<ToolDescription>, ClientError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..TOOL_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let page = self.roundtrip("tools/list", params).await?;
            let listed = page.get("tools").and_then(Value::as_array).ok_or_else(|| {
                ClientError::Protocol(format!(
                    "tools/list answered without a tools list: {}",
                    events::clip(&page)
                ))
            })?;
            tools.extend(listed.iter().filter_map(events::tool_from_wire));
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// The tool named `name`, from a `tools/list` read once per client.
    pub(crate) async fn tool(&self, name: &str) -> Result<Option<ToolDescription>, ClientError> {
        let mut cached = self.tools.lock().await;
        if cached.is_none() {
            *cached = Some(self.list_tools().await?);
        }
        Ok(cached
            .as_ref()
            .and_then(|tools| tools.iter().find(|tool| tool.name == name))
            .cloned())
    }
}
