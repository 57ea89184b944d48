//! A call's `tools/call` request, in either of its two forms: sent, its
//! notifications relayed to the caller, up to the server's answer. What
//! the answer means is for the inline and task paths to say.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_mcp_wire::revision::meta_key;

use super::relay::{Relay, Tokens};
use super::stop::{DROPPED, Stop, StopSignal, cancel_request};
use crate::connection::{Exchange, Message};
use crate::error::ClientError;
use crate::events::CallEvent;
use crate::server::Server;

/// What a call needs while it runs.
pub(super) struct Call {
    pub(super) server: Arc<Server>,
    pub(super) tool: String,
    pub(super) arguments: Value,
    /// Where its events go: the caller's [`super::CallStream`].
    pub(super) events: mpsc::Sender<CallEvent>,
}

/// How a `tools/call` asks to be run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// On its own request: notifications as they come, then the result.
    Inline,
    /// As a task: the server answers with the task it created (or, if it
    /// chooses, with the result).
    Task,
}

/// A `tools/call` the server answered.
pub(super) struct Answered {
    /// The result as the server wrote it, or the JSON-RPC error object.
    pub(super) outcome: Result<Box<RawValue>, Value>,
    /// The request's exchange and the relay of its notifications: over
    /// stdio they still carry a task's progress.
    pub(super) exchange: Exchange,
    pub(super) relay: Relay,
}

impl Call {
    /// Hands an event to the caller; `false` when the caller is gone.
    pub(super) async fn emit(&self, event: CallEvent) -> bool {
        self.events.send(event).await.is_ok()
    }

    /// Sends the call's `tools/call` in `shape` and relays its notifications
    /// until the server answers. `Err` is the call's terminal event: it was
    /// stopped (and cancelled on the server), or no answer came.
    pub(super) async fn request(
        &self,
        signal: &mut StopSignal,
        shape: Shape,
    ) -> Result<Answered, CallEvent> {
        let server = &self.server;
        let id = server.next_id();
        let tokens = Tokens::new(id);
        let mut params = json!({ "name": self.tool, "arguments": self.arguments });
        let (routes, unanswered) = match shape {
            Shape::Inline => {
                // `io.weir/run`: a weir server names the run behind the
                // call, and says how it ended; other servers ignore it.
                params["_meta"] = json!({
                    "progressToken": tokens.progress,
                    "partialResultToken": tokens.partial,
                    meta_key::WEIR_RUN: {},
                });
                (
                    tokens.routes(),
                    "the server closed the call's stream without a result",
                )
            }
            // 2026-07-28: the capability asks for a task; tokens would make
            // weir answer inline. 2025-11-25: `task` asks; progress stays on
            // the token.
            Shape::Task if server.is_stateless() => (
                Vec::new(),
                "the server closed the stream before it created the task",
            ),
            Shape::Task => {
                params["task"] = json!({});
                params["_meta"] = json!({ "progressToken": tokens.progress });
                (
                    tokens.routes(),
                    "the server closed the stream before it created the task",
                )
            }
        };
        let capabilities = Server::capabilities(shape == Shape::Task);
        let message = server.request(id, "tools/call", params, capabilities);
        let sent = tokio::select! {
            biased;
            stop = signal.stopped() => return Err(cancel_request(server, id, stop, None).await),
            sent = server.connection.request(message, routes) => sent,
        };
        let mut exchange = sent.map_err(CallEvent::Error)?;
        let mut relay = Relay::new(tokens);
        loop {
            // A message already here is taken without setting up the wait
            // for one (a stream of partials mostly has the next one ready),
            // unless the call is to stop.
            let ready = match signal.stopping() {
                false => exchange.ready(),
                true => None,
            };
            let item = match ready {
                Some(item) => Some(item),
                None => tokio::select! {
                    biased;
                    stop = signal.stopped() => {
                        return Err(cancel_request(server, id, stop, Some(exchange)).await);
                    }
                    item = exchange.next() => item,
                },
            };
            match item {
                Some(Ok(Message::Notification { method, params })) => {
                    if let Some(event) = relay.event(&method, &params)
                        && !self.emit(event).await
                    {
                        let stop = Stop::Canceled(DROPPED.into());
                        return Err(cancel_request(server, id, stop, Some(exchange)).await);
                    }
                }
                Some(Ok(Message::Response { outcome, .. })) => {
                    return Ok(Answered {
                        outcome,
                        exchange,
                        relay,
                    });
                }
                Some(Err(error)) => return Err(CallEvent::Error(error)),
                None => {
                    return Err(CallEvent::Error(ClientError::StreamLost {
                        reason: unanswered.into(),
                    }));
                }
            }
        }
    }
}
