//! The runtime's [`RemoteCaller`] over weir's MCP client: how a pack (the
//! plan runner) calls a tool of an upstream MCP server the operator
//! declared ([`Upstreams`]) without depending on an MCP crate. A caller
//! names the upstream; how it is reached and with which credential is the
//! declaration's (weir's own token is never sent). Each call connects,
//! calls and closes; dropping it cancels the call on the other server (the
//! client's `CallStream` does that).

use std::sync::Arc;

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
use weir_runtime::RemoteCaller;

use crate::upstreams::{Upstream, Upstreams};

/// Calls the declared upstreams with weir's client.
pub(crate) struct ClientCaller {
    upstreams: Arc<Upstreams>,
}

impl ClientCaller {
    pub(crate) fn new(upstreams: Upstreams) -> ClientCaller {
        ClientCaller {
            upstreams: Arc::new(upstreams),
        }
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
        let Some(upstream) = self.upstreams.get(server) else {
            return Err(RunError::new(
                FailureCode::InvalidArguments,
                format!(
                    "no upstream server {server:?} is declared; the declared ones are: {}",
                    self.upstreams.names().join(", ")
                ),
            ));
        };
        let mut options = ClientOptions {
            name: "weir-plan".into(),
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
                        format!("{tool} on the upstream {server} reported an error: {text}"),
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
                            "{tool} on the upstream {server} did not end within {}",
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
                CallEvent::Task { .. } | CallEvent::Run { .. } => continue,
            };
            // Best effort: a caller that stopped listening does not stop the call.
            let _ = events.try_send(forwarded);
        };
        drop(call);
        client.close().await;
        ended
    }
}

fn failed(server: &str, error: &ClientError) -> RunError {
    RunError::new(
        FailureCode::ToolError,
        format!("calling the upstream {server}: {error}"),
    )
}
