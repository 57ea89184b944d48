//! What to connect to and how to call: plain data, filled in by the caller.

use std::ffi::OsString;
use std::time::Duration;

use weir_core::LogLevel;

/// The server to talk to.
#[derive(Clone, Debug)]
pub enum Target {
    /// Spawn this command and speak MCP on its stdin and stdout.
    Stdio(StdioCommand),
    /// A Streamable HTTP endpoint, e.g. `http://127.0.0.1:8765/mcp`.
    Http {
        /// The endpoint URL.
        url: String,
        /// Sent as `Authorization: Bearer <token>` when set.
        token: Option<String>,
    },
}

/// A server command, spawned in its own process group (so a terminal's
/// Ctrl-C reaches the client, which then cancels properly, and not the
/// server directly).
#[derive(Clone, Debug)]
pub struct StdioCommand {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Its whole environment, when set: these variables and no others
    /// (none of the client's). `None`: the client's environment.
    pub env: Option<Vec<(OsString, OsString)>>,
}

impl StdioCommand {
    /// A command line run by `sh -c`, as a user would type it.
    pub fn shell(command_line: &str) -> StdioCommand {
        StdioCommand {
            program: "sh".into(),
            args: vec!["-c".into(), command_line.into()],
            env: None,
        }
    }

    /// The command line, for messages.
    pub(crate) fn display(&self) -> String {
        match (self.program.to_str(), self.args.as_slice()) {
            (Some("sh"), [flag, line]) if flag == "-c" => line.to_string_lossy().into_owned(),
            _ => std::iter::once(&self.program)
                .chain(&self.args)
                .map(|part| part.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Which protocol revision to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Revision {
    /// Over HTTP, 2026-07-28 when the server answers `server/discover`,
    /// else 2025-11-25; over stdio, 2025-11-25 (`initialize`).
    #[default]
    Negotiate,
    /// 2025-11-25: `initialize`, sessions, `Last-Event-ID` resume.
    Sessions,
    /// 2026-07-28: stateless; `server/discover` must succeed.
    Stateless,
}

/// How the client presents itself and what it asks of every request.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// `clientInfo.name`.
    pub name: String,
    /// `clientInfo.version`.
    pub version: String,
    /// The revision to speak.
    pub revision: Revision,
    /// Ask for logging notifications at this level and above.
    pub log_level: Option<LogLevel>,
    /// Headers sent with every HTTP request (a credential other than a
    /// bearer token, say); none by default. Not used over stdio.
    pub headers: Vec<(String, String)>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            name: "weir".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            revision: Revision::Negotiate,
            log_level: None,
            headers: Vec::new(),
        }
    }
}

/// When a call runs as a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskMode {
    /// Only when the tool requires it (`execution.taskSupport: "required"`,
    /// or a 2026-07-28 server asks for the tasks extension).
    #[default]
    WhenRequired,
    /// Always: the server returns a task at once, the client polls it.
    Always,
}

/// Options of one call.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// Whether to run the call as a task.
    pub task: TaskMode,
    /// Cancel the call (on the server too) when it has not ended by then.
    pub timeout: Option<Duration>,
}
