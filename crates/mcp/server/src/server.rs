//! The MCP server: sessions, method dispatch, and the surface beside tools.
//!
//! Transport-neutral: a transport parses a message, finds its [`Session`],
//! and calls [`McpServer::request`] with a channel for the messages the
//! request produces before its response (notifications of a tool call).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use weir_core::{LogLevel, RunId};
use weir_runtime::{Scheduler, now_ms};

use crate::catalog::{Catalog, CatalogError};
use crate::protocol::{
    Era, LATEST_SESSION_VERSION, SUPPORTED_VERSIONS, Scope, meta_key, stamp_result,
};
use weir_mcp_wire::jsonrpc::{RpcError, code, error_response, response};

/// A message a request produces, as JSON text (serialized by the request's
/// task, not by the transport's single writer), with the SSE event id that
/// lets a client resume after it (HTTP, session era).
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) event_id: Option<EventId>,
    pub(crate) message: String,
}

impl Outgoing {
    /// A message with no SSE id (it cannot be resumed after).
    pub(crate) fn message(message: Value) -> Outgoing {
        Outgoing {
            event_id: None,
            message: crate::wire::to_json(&message),
        }
    }
}

/// The SSE id of a run's event, `{run_id}.{seq}`; formatted only by the
/// transports that send ids.
#[derive(Debug, Clone)]
pub(crate) struct EventId {
    pub(crate) run_id: Arc<str>,
    pub(crate) seq: weir_core::Seq,
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.run_id, self.seq)
    }
}

/// Where a request's notifications go.
pub(crate) type Outbound = mpsc::Sender<Outgoing>;

/// Settings of an [`McpServer`].
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// Most bytes of content a final `CallToolResult` carries before it is
    /// truncated with a link to the run (well under the 1 MiB SSE event limit
    /// of some clients).
    pub result_limit: usize,
    /// Most bytes in one incoming message.
    pub max_message_bytes: usize,
    /// Where the data lives, for `get_status`.
    pub store: String,
    /// `instructions` for clients.
    pub instructions: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            name: "weir".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            result_limit: 512 * 1024,
            max_message_bytes: 4 * 1024 * 1024,
            store: "memory".into(),
            instructions: None,
        }
    }
}

/// The MCP server. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) scheduler: Scheduler,
    pub(crate) catalog: Arc<dyn Catalog>,
    pub(crate) config: ServerConfig,
}

/// What a client set up with `initialize` (session era), or a stand-in for
/// one request (stateless era). Holds the calls that `notifications/cancelled`
/// can reach and the parameters a resumed stream needs.
pub(crate) struct Session {
    pub(crate) id: String,
    state: Mutex<SessionState>,
    /// When the client last used this session (Unix ms), for idle expiry.
    last_seen: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct SessionState {
    capabilities: Value,
    log_level: Option<LogLevel>,
    /// Request id (as JSON text) → the run it started.
    calls: HashMap<String, RunId>,
    /// Calls the client cancelled: they are owed no response.
    cancelled: std::collections::HashSet<String>,
    /// Run → how its call is projected, for `Last-Event-ID` resumes.
    streams: HashMap<RunId, (Value, Scope)>,
    /// Requests weir sent the client, by id, waiting for its response.
    pending: HashMap<String, tokio::sync::oneshot::Sender<Result<Value, Value>>>,
    next_request: u64,
}

impl Session {
    pub(crate) fn new() -> Arc<Session> {
        Arc::new(Session {
            id: uuid::Uuid::now_v7().simple().to_string(),
            state: Mutex::default(),
            last_seen: std::sync::atomic::AtomicU64::new(now_ms()),
        })
    }

    /// Marks the session used now.
    pub(crate) fn touch(&self) {
        self.last_seen
            .store(now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Milliseconds since the client last used the session.
    pub(crate) fn idle_ms(&self) -> u64 {
        now_ms().saturating_sub(self.last_seen.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().expect("session lock")
    }

    pub(crate) fn scope(&self, era: Era, params: &Value) -> Scope {
        let state = self.state();
        Scope::resolve(era, params, &state.capabilities, state.log_level)
    }

    pub(crate) fn track_call(&self, request_id: &Value, run_id: &RunId, scope: &Scope) {
        let mut state = self.state();
        state.calls.insert(request_id.to_string(), run_id.clone());
        state
            .streams
            .insert(run_id.clone(), (request_id.clone(), scope.clone()));
    }

    /// Forgets a finished call; returns whether the client had cancelled it.
    pub(crate) fn finish_call(&self, request_id: &Value) -> bool {
        let key = request_id.to_string();
        let mut state = self.state();
        state.calls.remove(&key);
        state.cancelled.remove(&key)
    }

    /// Registers a request to the client; returns its id and the answer.
    pub(crate) fn expect_response(
        &self,
    ) -> (String, tokio::sync::oneshot::Receiver<Result<Value, Value>>) {
        let mut state = self.state();
        state.next_request += 1;
        let id = format!("weir-{}", state.next_request);
        let (sender, answer) = tokio::sync::oneshot::channel();
        state.pending.insert(id.clone(), sender);
        (id, answer)
    }

    /// Delivers the client's response to a request weir sent.
    pub(crate) fn resolve(&self, id: &Value, outcome: Result<Value, Value>) {
        let Some(id) = id.as_str() else { return };
        if let Some(waiting) = self.state().pending.remove(id) {
            let _ = waiting.send(outcome);
        }
    }

    /// How to resume the stream of `run_id`: its request id and scope.
    pub(crate) fn stream(&self, run_id: &RunId) -> Option<(Value, Scope)> {
        self.state().streams.get(run_id).cloned()
    }
}

impl McpServer {
    /// A server executing tools through `scheduler` and serving `catalog`.
    pub fn new(scheduler: Scheduler, catalog: Arc<dyn Catalog>, config: ServerConfig) -> McpServer {
        McpServer {
            inner: Arc::new(Inner {
                scheduler,
                catalog,
                config,
            }),
        }
    }

    /// The scheduler behind the server.
    pub fn scheduler(&self) -> &Scheduler {
        &self.inner.scheduler
    }

    /// Most bytes in one incoming message.
    pub fn max_message_bytes(&self) -> usize {
        self.inner.config.max_message_bytes
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
            "initialize" => Ok(Some(self.initialize(session, &params))),
            "tools/call" => self.call_tool(session, &scope, id, params, out).await,
            other => self
                .simple_request(session, &scope, other, params)
                .await
                .map(Some),
        };
        match result {
            Ok(Some(mut result)) => {
                stamp_result(era, method, &mut result);
                if era == Era::Stateless {
                    result["_meta"][meta_key::SERVER_INFO] = self.server_info();
                }
                Some(response(id, result))
            }
            Ok(None) => None,
            Err(error) => Some(error_response(id, &error)),
        }
    }

    async fn simple_request(
        &self,
        session: &Arc<Session>,
        scope: &Scope,
        method: &str,
        params: Value,
    ) -> Result<Value, RpcError> {
        let catalog = &self.inner.catalog;
        match method {
            "ping" => Ok(json!({})),
            "server/discover" => {
                // serverInfo travels in `_meta` (see `request`); absent
                // instructions are left out, not null (the schema says string).
                let mut discovered = json!({
                    "supportedVersions": SUPPORTED_VERSIONS,
                    "capabilities": self.capabilities(Era::Stateless),
                });
                if let Some(instructions) = &self.inner.config.instructions {
                    discovered["instructions"] = instructions.clone().into();
                }
                Ok(discovered)
            }
            "tools/list" => Ok(json!({ "tools": self.tool_list() })),
            "resources/list" => Ok(json!({ "resources": catalog.resources() })),
            "resources/templates/list" => {
                let mut templates =
                    serde_json::to_value(catalog.resource_templates()).map_err(internal)?;
                if let Some(list) = templates.as_array_mut() {
                    list.extend(crate::runs_tools::run_resource_templates());
                }
                Ok(json!({ "resourceTemplates": templates }))
            }
            "resources/read" => self.read_resource(scope, &params).await,
            "resources/subscribe" | "resources/unsubscribe" => {
                required_str(&params, "uri")?;
                Ok(json!({}))
            }
            "prompts/list" => Ok(json!({ "prompts": catalog.prompts() })),
            "prompts/get" => {
                let name = required_str(&params, "name")?;
                let arguments = params
                    .get("arguments")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let prompt = catalog
                    .get_prompt(name, &arguments)
                    .await
                    .map_err(|error| RpcError::invalid_params(error.to_string()))?;
                serde_json::to_value(prompt).map_err(internal)
            }
            "completion/complete" => {
                let reference = params
                    .get("ref")
                    .ok_or_else(|| RpcError::invalid_params("completion/complete needs \"ref\""))?;
                let argument = params.get("argument").cloned().unwrap_or_default();
                let name = argument
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let value = argument
                    .get("value")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let values = catalog.complete(reference, name, value).await;
                Ok(
                    json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } }),
                )
            }
            "logging/setLevel" => {
                let level: LogLevel = params
                    .get("level")
                    .cloned()
                    .and_then(|level| serde_json::from_value(level).ok())
                    .ok_or_else(|| {
                        RpcError::invalid_params(
                            "logging/setLevel needs \"level\": one of debug, info, notice, warning, error, critical, alert, emergency",
                        )
                    })?;
                session.state().log_level = Some(level);
                Ok(json!({}))
            }
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
                self.task_request(scope, method, &params).await
            }
            other => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "unknown method {other:?}; see tools/list, resources/list and prompts/list for what this server offers"
                ),
            )),
        }
    }

    fn initialize(&self, session: &Arc<Session>, params: &Value) -> Value {
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // A session-era client gets its own revision if we speak it, else our newest session revision.
        let version = SUPPORTED_VERSIONS
            .iter()
            .skip(1)
            .find(|known| **known == asked)
            .copied()
            .unwrap_or(LATEST_SESSION_VERSION);
        let mut state = session.state();
        state.capabilities = params
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(Era::Session),
            "serverInfo": self.server_info(),
        });
        if let Some(instructions) = &self.inner.config.instructions {
            result["instructions"] = instructions.clone().into();
        }
        result
    }

    /// Handles a notification from the client.
    pub(crate) fn notification(&self, session: &Arc<Session>, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            let Some(request_id) = params.get("requestId") else {
                return;
            };
            let reason = params
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("the client cancelled the request");
            let run = {
                let mut state = session.state();
                let key = request_id.to_string();
                let run = state.calls.get(&key).cloned();
                if run.is_some() {
                    state.cancelled.insert(key);
                }
                run
            };
            if let Some(run) = run {
                self.inner.scheduler.cancel(&run, reason);
            }
        }
        // notifications/initialized and others need no action.
    }

    pub(crate) fn server_info(&self) -> Value {
        json!({ "name": self.inner.config.name, "version": self.inner.config.version })
    }

    fn capabilities(&self, era: Era) -> Value {
        let mut capabilities = json!({
            "tools": { "listChanged": false },
            "resources": { "subscribe": true, "listChanged": false },
            "prompts": { "listChanged": false },
            "completions": {},
            "logging": {},
        });
        match era {
            Era::Session => {
                capabilities["tasks"] =
                    json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } });
            }
            Era::Stateless => {
                capabilities["extensions"] =
                    json!({ weir_mcp_wire::revision::TASKS_EXTENSION: {} });
            }
        }
        capabilities
    }

    async fn read_resource(&self, scope: &Scope, params: &Value) -> Result<Value, RpcError> {
        let uri = required_str(params, "uri")?;
        let contents = match crate::runs_tools::read_run_resource(self, uri).await? {
            Some(contents) => contents,
            None => match self.inner.catalog.read_resource(uri).await {
                Some(contents) => serde_json::to_value(contents).map_err(internal)?,
                None => {
                    let code = match scope.era {
                        Era::Session => code::RESOURCE_NOT_FOUND,
                        Era::Stateless => code::INVALID_PARAMS,
                    };
                    return Err(RpcError::new(code, format!("resource not found: {uri}"))
                        .with_data(json!({ "uri": uri })));
                }
            },
        };
        Ok(json!({ "contents": contents }))
    }
}

pub(crate) fn required_str<'a>(params: &'a Value, field: &str) -> Result<&'a str, RpcError> {
    params.get(field).and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params(format!("missing string field \"{field}\" in params"))
    })
}

pub(crate) fn internal(error: impl std::fmt::Display) -> RpcError {
    RpcError::internal(error.to_string())
}

impl From<CatalogError> for RpcError {
    fn from(error: CatalogError) -> RpcError {
        RpcError::invalid_params(error.to_string())
    }
}

/// `_meta` object with one entry.
pub(crate) fn meta_with(key: &str, value: Value) -> Value {
    let mut meta = Map::new();
    meta.insert(key.to_owned(), value);
    Value::Object(meta)
}
