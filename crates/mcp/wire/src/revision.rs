//! Protocol revisions, and the names they give things in `_meta` and in
//! capabilities.

use serde_json::{Map, Value};

/// The stateless revision.
pub const STATELESS_VERSION: &str = "2026-07-28";
/// The newest revision with `initialize` and sessions.
pub const LATEST_SESSION_VERSION: &str = "2025-11-25";
/// Every revision weir answers, newest first.
pub const SUPPORTED_VERSIONS: [&str; 5] = [
    STATELESS_VERSION,
    LATEST_SESSION_VERSION,
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];
/// The revisions that negotiate with `initialize` (all but the stateless
/// one), newest first.
pub const SESSION_VERSIONS: &[&str] = SUPPORTED_VERSIONS.split_at(1).1;

/// The tasks extension of 2026-07-28 (SEP-2663), as named in capabilities.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `_meta` keys of the 2026-07-28 revision.
pub mod meta_key {
    /// The revision a request is written in.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities, per request.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The client's `clientInfo`, per request.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// The lowest level of logging notifications wanted, per request.
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// The server's `serverInfo`, on results.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The task a message belongs to.
    pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
    /// weir's own: on a `tools/call` request, asks a weir server to name
    /// the run behind the call (a `notifications/weir/run` when it starts)
    /// and to say on the result how it ended; on the result, what it says.
    pub const WEIR_RUN: &str = "io.weir/run";
}

/// The request's `_meta`, if any.
pub fn request_meta(params: &Value) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

/// The revision a request names in its `_meta` (2026-07-28 style).
pub fn named_version(params: &Value) -> Option<&str> {
    request_meta(params)?
        .get(meta_key::PROTOCOL_VERSION)
        .and_then(Value::as_str)
}
