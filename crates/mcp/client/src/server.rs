//! The server as this client knows it once connected: its connection, the
//! revision negotiated, what it offers. Every request goes out through
//! here, so the 2026-07-28 `_meta` envelope is added in one place.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use weir_mcp_wire::revision::{
    LATEST_SESSION_VERSION, SESSION_VERSIONS, STATELESS_VERSION, TASKS_EXTENSION, meta_key,
};

use crate::connection::{Connection, Message, Negotiated};
use crate::error::ClientError;
use crate::events::{ToolDescription, clip, tool_from_wire};
use crate::options::{ClientOptions, Revision, Target};

/// Most pages of `tools/list` read.
const TOOL_PAGES: usize = 100;
/// How long a server has to answer the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// One negotiated server, shared by the calls made on it.
pub(crate) struct Server {
    pub(crate) connection: Connection,
    options: ClientOptions,
    pub(crate) negotiated: Negotiated,
    server_capabilities: Value,
    pub(crate) server_info: Value,
    next_id: AtomicU64,
    tools: tokio::sync::Mutex<Option<Vec<ToolDescription>>>,
}

impl Server {
    /// Spawns or reaches the server and negotiates the protocol revision
    /// (giving up when the server has not answered within 30 s).
    pub(crate) async fn connect(
        target: Target,
        options: ClientOptions,
    ) -> Result<Server, ClientError> {
        let where_ = match &target {
            Target::Stdio(command) => command.display(),
            Target::Http { url, .. } => url.clone(),
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, Server::handshake(target, options))
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

    async fn handshake(target: Target, options: ClientOptions) -> Result<Server, ClientError> {
        let probe = match options.revision {
            Revision::Negotiate => matches!(target, Target::Http { .. }),
            Revision::Stateless => true,
            Revision::Sessions => false,
        };
        let mut server = Server {
            connection: Connection::open(&target, &options.headers).await?,
            negotiated: Negotiated::Stateless,
            options,
            server_capabilities: json!({}),
            server_info: json!({}),
            next_id: AtomicU64::new(1),
            tools: tokio::sync::Mutex::default(),
        };
        if probe {
            match server.discover().await {
                Ok(()) => return Ok(server),
                Err(error) if error.is_unreachable() => return Err(error),
                Err(error) if server.options.revision == Revision::Stateless => {
                    return Err(ClientError::NotStateless {
                        reason: error.to_string(),
                    });
                }
                Err(_) => {} // a session-era server: initialize below
            }
        }
        server.initialize().await?;
        Ok(server)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_stateless(&self) -> bool {
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
    pub(crate) fn capabilities(task: bool) -> Value {
        let mut capabilities = json!({ "partialResults": {} });
        if task {
            capabilities["extensions"] = json!({ TASKS_EXTENSION: {} });
        }
        capabilities
    }

    /// A request, with the 2026-07-28 `_meta` envelope when stateless.
    pub(crate) fn request(
        &self,
        id: u64,
        method: &str,
        params: Value,
        capabilities: Value,
    ) -> Value {
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
        let message = self.request(self.next_id(), method, params, Server::capabilities(true));
        let mut exchange = self.connection.request(message, Vec::new()).await?;
        loop {
            match exchange.next().await {
                Some(Ok(Message::Response { outcome, .. })) => {
                    let result = outcome.map_err(|error| ClientError::rpc(method, &error))?;
                    return serde_json::from_str(result.get()).map_err(|error| {
                        ClientError::Protocol(format!("the answer to {method}: {error}"))
                    });
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
            .or_else(|| result.get("_meta")?.get(meta_key::SERVER_INFO))
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
            "capabilities": Server::capabilities(false),
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
        let listed = self.list_tools_json().await?;
        Ok(listed.iter().filter_map(tool_from_wire).collect())
    }

    /// Every tool the server offers, as it described it (all pages).
    pub(crate) async fn list_tools_json(&self) -> Result<Vec<Value>, ClientError> {
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
                    clip(&page)
                ))
            })?;
            tools.extend(
                listed
                    .iter()
                    .filter(|tool| tool_from_wire(tool).is_some())
                    .cloned(),
            );
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
