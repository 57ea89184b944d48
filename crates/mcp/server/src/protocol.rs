//! Protocol revisions, and what each request says about itself.
//!
//! Two eras share one endpoint (versioning "dual-era" rules): a request that
//! names 2026-07-28 in its `_meta` is served statelessly; anything else
//! belongs to the session (HTTP) or process (stdio) that `initialize` set up.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weir_core::LogLevel;

pub(crate) use weir_mcp_wire::revision::{
    LATEST_SESSION_VERSION, STATELESS_VERSION, SUPPORTED_VERSIONS, meta_key, named_version,
    request_meta,
};

/// How a request is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Era {
    /// 2025-11-25 and before: `initialize`, sessions, resumable streams.
    Session,
    /// 2026-07-28: everything in the request; the stream is the request.
    Stateless,
}

/// What one request carries about itself, resolved against its session.
/// Serialized into a call's [`StreamRecord`](crate::session::StreamRecord),
/// so that another node projects a resumed stream exactly as this one did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Scope {
    pub(crate) era: Era,
    /// The client's capabilities for this request.
    pub(crate) client_capabilities: Value,
    pub(crate) progress_token: Option<Value>,
    /// Set only when the client declared `partialResults` (SEP-2998 draft).
    pub(crate) partial_token: Option<Value>,
    /// Logging notifications at or above this level, if any.
    pub(crate) log_level: Option<LogLevel>,
    /// The request asked to be told its run (`_meta["io.weir/run"]`):
    /// a `notifications/weir/run` when it starts, how it ended on the
    /// result.
    pub(crate) run_notices: bool,
}

impl Scope {
    /// Resolves a request: its own `_meta` first, then the session's
    /// capabilities and log level (session era only).
    pub(crate) fn resolve(
        era: Era,
        params: &Value,
        session_capabilities: &Value,
        session_log_level: Option<LogLevel>,
    ) -> Scope {
        let meta = request_meta(params);
        let client_capabilities = match era {
            Era::Stateless => meta
                .and_then(|m| m.get(meta_key::CLIENT_CAPABILITIES))
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
            Era::Session => session_capabilities.clone(),
        };
        let progress_token = meta.and_then(|m| m.get("progressToken")).cloned();
        let declares_partials = |caps: &Value| {
            caps.get("partialResults").is_some()
                || caps.pointer("/experimental/partialResults").is_some()
        };
        let per_call_caps = meta.and_then(|m| m.get(meta_key::CLIENT_CAPABILITIES));
        let partials =
            declares_partials(&client_capabilities) || per_call_caps.is_some_and(declares_partials);
        let partial_token = meta
            .and_then(|m| m.get("partialResultToken"))
            .filter(|_| partials)
            .cloned();
        let log_level = match era {
            Era::Stateless => meta
                .and_then(|m| m.get(meta_key::LOG_LEVEL))
                .and_then(|level| serde_json::from_value(level.clone()).ok()),
            Era::Session => session_log_level,
        };
        let run_notices = meta.is_some_and(|m| m.contains_key(meta_key::WEIR_RUN));
        Scope {
            era,
            client_capabilities,
            progress_token,
            partial_token,
            log_level,
            run_notices,
        }
    }
}

/// Adds what the 2026-07-28 schema requires of every result: `resultType`,
/// and for cacheable results `ttlMs` and `cacheScope`.
pub(crate) fn stamp_result(era: Era, method: &str, result: &mut Value) {
    if era != Era::Stateless {
        return;
    }
    let Some(object) = result.as_object_mut() else {
        return;
    };
    object
        .entry("resultType")
        .or_insert_with(|| Value::from("complete"));
    let cacheable = matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "server/discover"
    );
    if cacheable {
        object.entry("ttlMs").or_insert_with(|| Value::from(0));
        object
            .entry("cacheScope")
            .or_insert_with(|| Value::from("private"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn partial_tokens_need_the_declared_capability() {
        let params = json!({"_meta": {"partialResultToken": "p", "progressToken": 3}});
        let without = Scope::resolve(Era::Session, &params, &json!({}), None);
        assert_eq!(without.partial_token, None);
        assert_eq!(without.progress_token, Some(json!(3)));
        let with = Scope::resolve(Era::Session, &params, &json!({"partialResults": {}}), None);
        assert_eq!(with.partial_token, Some(json!("p")));
        let stateless = json!({"_meta": {
            "partialResultToken": "p",
            "io.modelcontextprotocol/clientCapabilities": {"partialResults": {}},
            "io.modelcontextprotocol/logLevel": "info"
        }});
        let scope = Scope::resolve(Era::Stateless, &stateless, &json!({}), None);
        assert_eq!(scope.partial_token, Some(json!("p")));
        assert_eq!(scope.log_level, Some(LogLevel::Info));
    }

    #[test]
    fn stateless_results_are_stamped() {
        let mut listed = json!({"tools": []});
        stamp_result(Era::Stateless, "tools/list", &mut listed);
        assert_eq!(
            listed,
            json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let mut legacy = json!({});
        stamp_result(Era::Session, "ping", &mut legacy);
        assert_eq!(legacy, json!({}));
    }
}
