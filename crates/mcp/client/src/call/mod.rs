//! One call: a task that drives it and a [`CallStream`] that the caller
//! reads. The driver decides between an inline call and a task, maps what
//! the server sends to [`CallEvent`]s, and cancels on the server when the
//! caller asks, times out, or drops the stream.
//!
//! Each job has its file, and each file uses only those below it:
//! `relay` (the server's messages as events) and `stop` (stop signals and
//! cancelling on the server), then `request` (a `tools/call` sent, relayed,
//! answered), then `inline` and `task`, which this module chooses between.

mod inline;
mod relay;
mod request;
mod stop;
mod task;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::ClientError;
use crate::events::{CallEvent, TaskSupport};
use crate::options::{CallOptions, TaskMode};
use crate::server::Server;
use inline::Inline;
use request::Call;
use stop::{DROPPED, StopHandle, StopSignal};

/// The events of one call, ending with its result or error. Dropping it
/// before the end cancels the call on the server.
pub struct CallStream {
    events: mpsc::Receiver<CallEvent>,
    stop: StopHandle,
    ended: bool,
}

impl CallStream {
    /// Asks for the call to be cancelled on the server (for the given
    /// reason). The stream goes on to its end, which is then
    /// [`ClientError::Canceled`] — or the result, if it won the race.
    pub fn cancel(&self, reason: &str) {
        self.stop.cancel(reason);
    }

    /// The next event; `None` after the last one.
    pub async fn next(&mut self) -> Option<CallEvent> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }
}

impl Stream for CallStream {
    type Item = CallEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CallEvent>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let polled = self.events.poll_recv(cx);
        if let Poll::Ready(event) = &polled {
            self.ended = event.as_ref().is_none_or(CallEvent::is_terminal);
        }
        polled
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        if !self.ended {
            self.cancel(DROPPED);
        }
    }
}

/// Starts driving a call; its events come through the returned stream.
pub(crate) fn start(
    server: Arc<Server>,
    tool: String,
    arguments: Value,
    options: CallOptions,
) -> CallStream {
    let (events, receiver) = mpsc::channel(256);
    let (stop, mut signal) = stop::channel(options.timeout);
    let call = Call {
        server,
        tool,
        arguments,
        events,
    };
    tokio::spawn(async move {
        let last = drive(&call, &mut signal, options.task).await;
        let _ = call.events.send(last).await;
    });
    CallStream {
        events: receiver,
        stop,
        ended: false,
    }
}

async fn drive(call: &Call, signal: &mut StopSignal, mode: TaskMode) -> CallEvent {
    let as_task = match wants_task(call, mode).await {
        Ok(as_task) => as_task,
        Err(error) => return CallEvent::Error(error),
    };
    if as_task {
        return task::run(call, signal).await;
    }
    match inline::run(call, signal).await {
        Inline::Done(event) => event,
        Inline::Task(created) => task::follow(call, signal, created, None).await,
        Inline::NeedsTask => task::run(call, signal).await,
    }
}

/// Whether to run the call as a task: when asked (and allowed), or when a
/// session-era tool requires it. A 2026-07-28 server decides itself.
async fn wants_task(call: &Call, mode: TaskMode) -> Result<bool, ClientError> {
    let server = &call.server;
    let tasks = server.supports_tasks();
    match mode {
        TaskMode::Always if !tasks => Err(ClientError::TasksUnsupported),
        TaskMode::Always if server.is_stateless() => Ok(true),
        TaskMode::Always => match server.tool(&call.tool).await? {
            Some(tool) if tool.task_support == TaskSupport::Forbidden => {
                Err(ClientError::TaskForbidden {
                    tool: call.tool.clone(),
                })
            }
            _ => Ok(true),
        },
        TaskMode::WhenRequired if !tasks || server.is_stateless() => Ok(false),
        // If the list cannot be read, call inline and let the server say.
        TaskMode::WhenRequired => Ok(matches!(
            server.tool(&call.tool).await,
            Ok(Some(tool)) if tool.task_support == TaskSupport::Required
        )),
    }
}
