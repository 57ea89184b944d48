//! One call: a driver and a [`CallStream`] that the caller reads. The
//! driver decides between an inline call and a task, maps what the server
//! sends to [`CallEvent`]s, and cancels on the server when the caller
//! asks, times out, or drops the stream. It runs in the caller's task, as
//! the stream is read (a stream of partials is thousands of events a
//! second: a task of its own cost a wake-up and a hand-over for each);
//! a stream dropped before its end hands its driver to a task of its own,
//! which cancels the call on the server.
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

use std::future::Future;
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
    /// The call, driven as the stream is polled; `None` once it has sent
    /// its last event.
    driver: Option<Driver>,
    stop: StopHandle,
    ended: bool,
}

type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

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
        // Events already made go first; the driver makes more when there
        // are none (it stops when the channel is full, and this task is
        // woken when there is room again).
        let mut polled = self.events.poll_recv(cx);
        if polled.is_pending()
            && let Some(driver) = self.driver.as_mut()
        {
            if driver.as_mut().poll(cx).is_ready() {
                self.driver = None;
            }
            polled = self.events.poll_recv(cx);
        }
        if let Poll::Ready(event) = &polled {
            self.ended = event.as_ref().is_none_or(CallEvent::is_terminal);
        }
        polled
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        self.cancel(DROPPED);
        // The driver sends the cancellation on its own now (outside a
        // runtime there is nothing to send it with: the connection goes
        // with the runtime).
        if let Some(driver) = self.driver.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(driver);
        }
    }
}

/// A call, driven as the returned stream is read; its events come through
/// it.
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
    let driver = Box::pin(async move {
        let last = drive(&call, &mut signal, options.task).await;
        let _ = call.events.send(last).await;
    });
    CallStream {
        events: receiver,
        driver: Some(driver),
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
