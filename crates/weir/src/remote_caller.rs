//! The runtime's [`RemoteCaller`] over weir's MCP client: how a pack (the
//! plan runner) calls a tool of another MCP server without depending on
//! an MCP crate. Each call connects, calls and closes; dropping it cancels
//! the call on the other server (the client's `CallStream` does that).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;
use weir_client::{
    CallEvent, CallOptions, Client, ClientError, ClientOptions, StdioCommand, Target,
};
use weir_core::{
    Completed, Content, EventKind, FailureCode, Log, LogLevel, LogStream, Partial, Progress,
    RunError,
};
use weir_runtime::{RemoteCaller, RemoteServer};

/// Calls other servers with weir's client. A server reached by URL gets
/// the bearer token of `WEIR_REMOTE_TOKEN`, when set.
pub(crate) struct ClientCaller;

#[async_trait]
impl RemoteCaller for ClientCaller {
    async fn call(
        &self,
        server: &RemoteServer,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
        events: mpsc::Sender<EventKind>,
    ) -> Result<Completed, RunError> {
        let target = match server {
            RemoteServer::Url(url) => Target::Http {
                url: url.clone(),
                token: std::env::var("WEIR_REMOTE_TOKEN")
                    .ok()
                    .filter(|t| !t.is_empty()),
            },
            RemoteServer::Command(command) => Target::Stdio(StdioCommand::shell(command)),
        };
        let options = ClientOptions {
            name: "weir-plan".into(),
            log_level: Some(LogLevel::Info),
            ..ClientOptions::default()
        };
        let client = Client::connect(target, options)
            .await
            .map_err(|error| failed(server, &error))?;
        let mut call = client.call_stream(
            tool,
            arguments,
            CallOptions {
                timeout,
                ..CallOptions::default()
            },
        );
        let ended = loop {
            let Some(event) = call.next().await else {
                break Err(failed(server, &ClientError::Closed));
            };
            let forwarded: EventKind = match event {
                CallEvent::Result(result) if result.is_error => {
                    let text = result
                        .content
                        .iter()
                        .filter_map(|block| match block {
                            Content::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    break Err(RunError::new(
                        FailureCode::ToolError,
                        format!("{tool} on {server} reported an error: {text}"),
                    ));
                }
                CallEvent::Result(result) => {
                    break Ok(Completed {
                        content: result.content,
                        structured: result.structured,
                    });
                }
                CallEvent::Error(ClientError::Timeout { .. }) => {
                    break Err(RunError::new(
                        FailureCode::Timeout,
                        format!(
                            "{tool} on {server} did not end within {}",
                            weir_core::human_duration(
                                timeout.unwrap_or_default().as_millis() as u64
                            )
                        ),
                    ));
                }
                CallEvent::Error(error) => break Err(failed(server, &error)),
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
                CallEvent::Task { .. } => continue,
            };
            // Best effort: a caller that stopped listening does not stop the call.
            let _ = events.try_send(forwarded);
        };
        drop(call);
        client.close().await;
        ended
    }
}

fn failed(server: &RemoteServer, error: &ClientError) -> RunError {
    RunError::new(FailureCode::ToolError, format!("calling {server}: {error}"))
}
