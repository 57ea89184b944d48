//! What every handler reads: the scheduler, the catalog and the settings.
//!
//! Handlers are free functions over a `&ServerState`; none of them knows the
//! [`McpServer`](crate::McpServer) that dispatches to it.

use std::sync::Arc;

use serde_json::{Value, json};
use weir_runtime::Scheduler;

use crate::catalog::Catalog;

/// Settings of an [`McpServer`](crate::McpServer).
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
    /// Answer a call that is not a task once its run has gone this long,
    /// with a result saying it is still working and how to wait for it
    /// (`runs_wait`); the run goes on. For hosts that give up on a call
    /// however much progress arrives. `None` (the default): never.
    pub defer_after: Option<std::time::Duration>,
    /// weir's own tools (`runs_*`, `get_status`) not served: absent from
    /// `tools/list`, and a call of one is answered as a call of a tool
    /// that does not exist. Empty by default.
    pub hidden_tools: std::collections::BTreeSet<String>,
    /// More of `get_status`'s answer, from the program that embeds the
    /// server (weir's binary: its upstreams' health), read at each call.
    /// Empty by default.
    pub status_parts: Vec<StatusPart>,
    /// The upstream servers whose resources and prompts are served beside
    /// the catalog's (`None` by default: none). A caller sees an upstream's
    /// when it may call `upstream:NAME` (a tokens file's
    /// `packs=upstream:NAME` grants it), as it sees its tools.
    pub upstreams: Option<crate::catalog::PassThrough>,
    /// The tool list may change while the server runs
    /// ([`McpServer::tools_changed`](crate::McpServer::tools_changed)):
    /// `initialize` declares `tools.listChanged`. `false` by default.
    pub tools_list_changes: bool,
}

/// One key of `get_status`'s answer that the embedding program reports:
/// `report` is called at each `get_status`, so it must not block.
#[derive(Clone)]
pub struct StatusPart {
    /// The key in `get_status`'s structured answer.
    pub key: String,
    /// Its value, now.
    pub report: Arc<dyn Fn() -> Value + Send + Sync>,
}

impl std::fmt::Debug for StatusPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusPart")
            .field("key", &self.key)
            .finish()
    }
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
            defer_after: None,
            hidden_tools: std::collections::BTreeSet::new(),
            status_parts: Vec::new(),
            upstreams: None,
            tools_list_changes: false,
        }
    }
}

/// The server's shared state, one per [`McpServer`](crate::McpServer). It
/// holds no run state: everything about a run is read from the log.
pub(crate) struct ServerState {
    pub(crate) scheduler: Scheduler,
    pub(crate) catalog: Arc<dyn Catalog>,
    pub(crate) config: ServerConfig,
    /// What every connected client is told unasked (a stdio client, an
    /// HTTP session's standalone stream): `notifications/tools/list_changed`.
    pub(crate) announcements: tokio::sync::broadcast::Sender<Value>,
}

impl ServerState {
    /// `serverInfo`: in `initialize`'s result, and in every 2026-07-28
    /// result's `_meta`.
    pub(crate) fn server_info(&self) -> Value {
        json!({ "name": self.config.name, "version": self.config.version })
    }
}
