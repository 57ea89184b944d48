//! The runtime's [`RemoteCaller`] over weir's MCP client: how weir calls a
//! tool of an upstream MCP server the operator declared ([`Upstreams`]) —
//! for a plan step (`server: NAME`) and for the upstream tools weir serves
//! as its own (`upstream_tools`) — without a pack depending on an MCP
//! crate. A caller names the upstream; how it is reached and with which
//! credential is the declaration's (weir's own token is never sent).
//!
//! One connection per upstream, shared by every call (one server process
//! for a stdio upstream, one session for HTTP), made at the first need and
//! made again at the next call after it broke (the process died, the
//! session was lost): a call in flight when it breaks fails with the
//! client's message, once. Dropping a call cancels it on the other server
//! (the client's `CallStream` does that).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{Mutex, mpsc};
use weir_client::{
    CallEvent, CallOptions, Client, ClientError, ClientOptions, StdioCommand, Target,
};
use weir_core::{
    Completed, Content, EventKind, FailureCode, Log, LogLevel, LogStream, Partial, Progress,
    RunError,
};
use weir_runtime::RemoteCaller;

use crate::upstreams::{Upstream, Upstreams};

/// Calls the declared upstreams with weir's client.
pub(crate) struct ClientCaller {
    upstreams: Arc<Upstreams>,
    /// The open connection of each upstream, by name; `None` until needed
    /// or after it broke.
    connections: BTreeMap<String, Mutex<Option<Arc<Client>>>>,
}

impl ClientCaller {
    pub(crate) fn new(upstreams: Upstreams) -> ClientCaller {
        let connections = upstreams
            .names()
            .into_iter()
            .map(|name| (name, Mutex::new(None)))
            .collect();
        ClientCaller {
            upstreams: Arc::new(upstreams),
            connections,
        }
    }

    /// Every tool `server` offers, as it described it (`tools/list`).
    pub(crate) async fn list_tools(&self, server: &str) -> Result<Vec<Value>, RunError> {
        let client = self.client(server).await?;
        match client.list_tools_json().await {
            Ok(tools) => Ok(tools),
            Err(error) => {
                self.forget(server, &client, &error).await;
                Err(failed(server, &error))
            }
        }
    }

    /// Ends every open connection (a stdio upstream's process is asked to
    /// exit: stdin closed, then SIGTERM, then SIGKILL).
    pub(crate) async fn close(&self) {
        for slot in self.connections.values() {
            let client = slot.lock().await.take();
            if let Some(client) = client.and_then(Arc::into_inner) {
                client.close().await;
            }
        }
    }

    /// The open connection to `server`, connecting if there is none.
    async fn client(&self, server: &str) -> Result<Arc<Client>, RunError> {
        let (Some(upstream), Some(slot)) =
            (self.upstreams.get(server), self.connections.get(server))
        else {
            return Err(RunError::new(
                FailureCode::InvalidArguments,
                format!(
                    "no upstream server {server:?} is declared; the declared ones are: {}",
                    self.upstreams.names().join(", ")
                ),
            ));
        };
        // Held while connecting: calls that arrive meanwhile share the one
        // connection rather than each starting a server.
        let mut open = slot.lock().await;
        if let Some(client) = open.as_ref() {
            return Ok(client.clone());
        }
        let (target, options) = target(upstream);
        let client = Arc::new(
            Client::connect(target, options)
                .await
                .map_err(|error| failed(server, &error))?,
        );
        *open = Some(client.clone());
        Ok(client)
    }

    /// After `error` on `client`: when the connection itself is lost, the
    /// next call connects again (unless another call already did).
    async fn forget(&self, server: &str, client: &Arc<Client>, error: &ClientError) {
        if !connection_lost(error) {
            return;
        }
        if let Some(slot) = self.connections.get(server) {
            let mut open = slot.lock().await;
            if open.as_ref().is_some_and(|open| Arc::ptr_eq(open, client)) {
                *open = None;
            }
        }
    }
}

/// Where `upstream` is and how weir's client introduces itself to it.
fn target(upstream: &Upstream) -> (Target, ClientOptions) {
    let mut options = ClientOptions {
        name: "weir".into(),
        log_level: Some(LogLevel::Info),
        ..ClientOptions::default()
    };
    let target = match upstream {
        Upstream::Http { url, headers } => {
            options.headers = headers.clone();
            // The declaration's headers carry its credential, if any.
            Target::Http {
                url: url.clone(),
                token: None,
            }
        }
        Upstream::Stdio { program, args, env } => Target::Stdio(StdioCommand {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            env: Some(
                env.iter()
                    .map(|(key, value)| (key.into(), value.into()))
                    .collect(),
            ),
        }),
    };
    (target, options)
}

/// Whether `error` means the connection is gone, not just this call.
fn connection_lost(error: &ClientError) -> bool {
    match error {
        ClientError::ServerExited { .. }
        | ClientError::Closed
        | ClientError::Unreachable { .. }
        | ClientError::StreamLost { .. }
        | ClientError::Spawn { .. } => true,
        // An HTTP session the server no longer knows.
        ClientError::Http { status, .. } => *status == 404,
        _ => false,
    }
}

#[async_trait]
impl RemoteCaller for ClientCaller {
    fn servers(&self) -> Vec<String> {
        self.upstreams.names()
    }

    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
        events: mpsc::Sender<EventKind>,
    ) -> Result<Completed, RunError> {
        let client = self.client(server).await?;
        let mut call = client.call_stream(
            tool,
            arguments,
            CallOptions {
                timeout,
                ..CallOptions::default()
            },
        );
        loop {
            let event = call
                .next()
                .await
                .unwrap_or(CallEvent::Error(ClientError::Closed));
            let forwarded = match event {
                CallEvent::Error(error) => {
                    self.forget(server, &client, &error).await;
                    return Err(call_failed(server, tool, timeout, &error));
                }
                CallEvent::Result(result) => return ended(server, tool, result),
                other => match reported(other) {
                    Some(kind) => kind,
                    None => continue,
                },
            };
            // A receiver that is gone does not stop the call.
            let _ = events.send(forwarded).await;
        }
    }
}

/// The upstream's result as the call's: `isError` fails it, keeping the
/// result.
fn ended(server: &str, tool: &str, result: weir_client::CallResult) -> Result<Completed, RunError> {
    let completed = Completed {
        content: result.content,
        structured: result.structured,
    };
    if !result.is_error {
        return Ok(completed);
    }
    let text = Content::text_of(&completed.content);
    Err(RunError::new(
        FailureCode::ToolError,
        format!("{tool} on the upstream {server} reported an error: {text}"),
    )
    .with_result(completed))
}

/// What the call reported meanwhile, as a run event; `None` for what is
/// not a report (a task's bare status, a weir server's run id).
fn reported(event: CallEvent) -> Option<EventKind> {
    Some(match event {
        CallEvent::Progress {
            progress,
            total,
            message,
        } => Progress {
            progress,
            total,
            message,
            ..Progress::default()
        }
        .into(),
        CallEvent::Partial {
            content,
            structured,
            ..
        } => Partial {
            content,
            items: structured.into_iter().collect(),
            group: None,
        }
        .into(),
        CallEvent::Log { level, data, .. } => Log {
            level,
            stream: LogStream::default(),
            text: data
                .as_str()
                .map_or_else(|| data.to_string(), str::to_owned),
        }
        .into(),
        // What a task says of itself is the nearest an upstream that runs
        // its call as a task comes to progress: kept as a log message.
        CallEvent::Task {
            status,
            message: Some(message),
            ..
        } => Log {
            level: LogLevel::Info,
            stream: LogStream::default(),
            text: format!("{}: {message}", status.as_str()),
        }
        .into(),
        CallEvent::Task { .. } | CallEvent::Run { .. } => return None,
        CallEvent::Result(_) | CallEvent::Error(_) => return None,
    })
}

fn call_failed(
    server: &str,
    tool: &str,
    timeout: Option<Duration>,
    error: &ClientError,
) -> RunError {
    match error {
        ClientError::Timeout { .. } => RunError::new(
            FailureCode::Timeout,
            format!(
                "{tool} on the upstream {server} did not end within {}",
                weir_core::human_duration(timeout.unwrap_or_default().as_millis() as u64)
            ),
        ),
        error => failed(server, error),
    }
}

fn failed(server: &str, error: &ClientError) -> RunError {
    let again = if connection_lost(error) {
        "; the next call connects to it again"
    } else {
        ""
    };
    RunError::new(
        FailureCode::ToolError,
        format!("calling the upstream {server}: {error}{again}"),
    )
}
