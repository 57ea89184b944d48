//! What can go wrong talking to a server, each kind saying what to do next.

use std::time::Duration;

use serde_json::Value;

/// An error of the MCP client. Cheap to clone, so one failure can end every
/// call that shared the connection.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ClientError {
    /// The server command could not be started.
    #[error("could not start `{command}`: {reason}; check that it is installed and on PATH")]
    Spawn {
        /// The command line.
        command: String,
        /// Why, from the operating system.
        reason: String,
    },
    /// The server process ended (or closed its stdout) while the client still
    /// needed it.
    #[error("the server process exited ({status}){}", stderr_tail(.stderr))]
    ServerExited {
        /// How it exited, when known.
        status: String,
        /// The last lines it wrote to stderr.
        stderr: String,
    },
    /// No HTTP connection could be made, or it broke before an answer.
    #[error(
        "could not reach {url}: {reason}; check that the server is running and the URL is right"
    )]
    Unreachable {
        /// Where.
        url: String,
        /// Why.
        reason: String,
    },
    /// The server answered with an HTTP error status.
    #[error("{url} answered HTTP {status}: {message}{}", http_advice(*.status))]
    Http {
        /// Where.
        url: String,
        /// The status code.
        status: u16,
        /// The server's explanation (its JSON-RPC error message, or the body).
        message: String,
    },
    /// The server answered a request with a JSON-RPC error.
    #[error("the server refused {method}: {message} (JSON-RPC error {code})")]
    Rpc {
        /// The method of the refused request.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
    /// The server sent something the protocol does not allow.
    #[error("the server broke the MCP protocol: {0}; report this to the server's authors")]
    Protocol(String),
    /// The server speaks no protocol revision this client knows.
    #[error("the server speaks MCP {offered}, which this client does not; it supports {supported}")]
    UnsupportedVersion {
        /// What the server offered.
        offered: String,
        /// What this client speaks.
        supported: String,
    },
    /// The 2026-07-28 revision was asked for, but the server does not
    /// answer `server/discover`.
    #[error(
        "the server does not speak MCP 2026-07-28 (server/discover failed: {reason}); let the client negotiate the revision instead"
    )]
    NotStateless {
        /// How `server/discover` failed.
        reason: String,
    },
    /// A call's stream dropped and could not be resumed.
    #[error("the connection dropped mid-call and could not be resumed: {reason}")]
    StreamLost {
        /// Why resuming was not possible, and what to do.
        reason: String,
    },
    /// Task mode was asked for, but the server does not run tools as tasks.
    #[error("the server does not run tool calls as tasks; call without task mode")]
    TasksUnsupported,
    /// Task mode was asked for, but the tool forbids it.
    #[error(
        "tool {tool:?} cannot run as a task (its taskSupport is \"forbidden\"); call it without task mode"
    )]
    TaskForbidden {
        /// The tool.
        tool: String,
    },
    /// A task waits for input (elicitation, sampling) that this client cannot give.
    #[error(
        "task {task_id} needs input this client cannot give; answer it from a client that supports elicitation, or cancel it"
    )]
    InputRequired {
        /// The task.
        task_id: String,
    },
    /// The call was cancelled, by the caller or by the server.
    #[error("canceled: {reason}")]
    Canceled {
        /// Why.
        reason: String,
    },
    /// The call ran past its timeout; it was cancelled on the server.
    #[error("no result within {}; the call was cancelled on the server (allow more time, or run it as a task)", seconds(*.after))]
    Timeout {
        /// The timeout.
        after: Duration,
    },
    /// The client was closed while the request was pending.
    #[error("the client was closed")]
    Closed,
    /// The server sent a message longer than the client reads
    /// ([`crate::MAX_MESSAGE_BYTES`]); its connection (or stream) was closed.
    #[error(
        "the server sent a message of more than {} MiB, the most this client reads from one; the connection was closed (a server returning that much should page its result or put it in a resource)",
        .limit >> 20
    )]
    MessageTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

fn stderr_tail(stderr: &str) -> String {
    match stderr.trim() {
        "" => "; it wrote nothing to stderr: run the server command by hand to see why".into(),
        tail => format!(
            "; its stderr ended with: {}; check the command (run it by hand to see all it says)",
            tail.replace('\n', " ⏎ ")
        ),
    }
}

fn http_advice(status: u16) -> &'static str {
    match status {
        401 => " (pass the server's bearer token: --token or WEIR_TOKEN)",
        403 => " (the server refused this origin or host)",
        404 => " (check the URL: MCP servers usually serve at …/mcp)",
        405 | 406 | 415 => " (is this an MCP Streamable HTTP endpoint?)",
        500..=599 => " (a server-side failure: check the server's logs)",
        _ => "",
    }
}

fn seconds(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

impl ClientError {
    /// A JSON-RPC error object, the server's answer to `method`.
    pub(crate) fn rpc(method: &str, error: &Value) -> ClientError {
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

    /// Whether trying again later may succeed: the network failed or the
    /// server had a passing failure (5xx).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } | ClientError::StreamLost { .. } => true,
            ClientError::Http { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// Whether the server could not be started or reached at all.
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(
            self,
            ClientError::Unreachable { .. }
                | ClientError::Spawn { .. }
                | ClientError::ServerExited { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do_next() {
        let http = ClientError::Http {
            url: "http://x/mcp".into(),
            status: 401,
            message: "missing token".into(),
        };
        assert_eq!(
            http.to_string(),
            "http://x/mcp answered HTTP 401: missing token (pass the server's bearer token: --token or WEIR_TOKEN)"
        );
        let exited = ClientError::ServerExited {
            status: "exit status: 1".into(),
            stderr: "boom\nbang".into(),
        };
        assert_eq!(
            exited.to_string(),
            "the server process exited (exit status: 1); its stderr ended with: boom ⏎ bang; check the command (run it by hand to see all it says)"
        );
        let timeout = ClientError::Timeout {
            after: Duration::from_millis(1500),
        };
        assert!(timeout.to_string().starts_with("no result within 1.5s;"));
    }
}
