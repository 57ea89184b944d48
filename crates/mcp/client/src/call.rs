//! One call: a task that drives it and a [`CallStream`] that the caller
//! reads. The driver decides between an inline call and a task, maps what
//! the server sends to [`CallEvent`]s, and cancels on the server when the
//! caller asks, times out, or drops the stream.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::connection::Exchange;
use super::events::{
    CallEvent, TaskSupport, log_from_wire, partial_from_wire, progress_from_wire, result_from_wire,
};
use super::options::{CallOptions, TaskMode};
use super::{ClientError, Inner, rpc_error, task};
use weir_mcp_wire::jsonrpc::Incoming;

/// The events of one call, ending with its result or error. Dropping it
/// before the end cancels the call on the server.
pub struct CallStream {
    events: mpsc::Receiver<CallEvent>,
    stop: watch::Sender<Option<String>>,
    ended: bool,
}

impl CallStream {
    /// Asks for the call to be cancelled on the server (for the given
    /// reason). The stream goes on to its end, which is then
    /// [`ClientError::Canceled`] — or the result, if it won the race.
    pub fn cancel(&self, reason: &str) {
        self.stop.send_if_modified(|current| match current {
            Some(_) => false,
            None => {
                *current = Some(reason.to_owned());
                true
            }
        });
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
            self.cancel("the caller dropped the call");
        }
    }
}

/// What a call needs while it runs.
pub(super) struct Call {
    pub(super) inner: Arc<Inner>,
    pub(super) tool: String,
    pub(super) arguments: Value,
    events: mpsc::Sender<CallEvent>,
}

/// Why a call is being stopped early.
pub(super) enum Stop {
    Canceled(String),
    TimedOut(Duration),
}

impl Stop {
    pub(super) fn reason(&self) -> String {
        match self {
            Stop::Canceled(reason) => reason.clone(),
            Stop::TimedOut(after) => format!("timed out after {:.1}s", after.as_secs_f64()),
        }
    }

    pub(super) fn into_error(self) -> ClientError {
        match self {
            Stop::Canceled(reason) => ClientError::Canceled { reason },
            Stop::TimedOut(after) => ClientError::Timeout { after },
        }
    }
}

/// The caller's cancel requests and the call's deadline.
pub(super) struct StopSignal {
    requests: watch::Receiver<Option<String>>,
    deadline: Option<(Instant, Duration)>,
}

impl StopSignal {
    /// Resolves when the call should stop.
    pub(super) async fn stopped(&mut self) -> Stop {
        let requests = &mut self.requests;
        let canceled = async {
            loop {
                if let Some(reason) = requests.borrow_and_update().clone() {
                    return reason;
                }
                if requests.changed().await.is_err() {
                    // The stream is gone without a word: treat as dropped.
                    return "the caller dropped the call".to_owned();
                }
            }
        };
        let deadline = self.deadline;
        let timed_out = async {
            match deadline {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            reason = canceled => Stop::Canceled(reason),
            () = timed_out => Stop::TimedOut(deadline.map(|(_, after)| after).unwrap_or_default()),
        }
    }
}

/// Starts driving a call; its events come through the returned stream.
pub(super) fn start(
    inner: Arc<Inner>,
    tool: String,
    arguments: Value,
    options: CallOptions,
) -> CallStream {
    let (events, receiver) = mpsc::channel(256);
    let (stop, requests) = watch::channel(None);
    let mut signal = StopSignal {
        requests,
        deadline: options.timeout.map(|after| (Instant::now() + after, after)),
    };
    let call = Call {
        inner,
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

/// What an inline call turned into.
enum Inline {
    Done(CallEvent),
    /// A 2026-07-28 server answered with a task.
    Task(Value),
    /// A 2026-07-28 server wants the call as a task.
    NeedsTask,
}

async fn drive(call: &Call, signal: &mut StopSignal, mode: TaskMode) -> CallEvent {
    let as_task = match wants_task(call, mode).await {
        Ok(as_task) => as_task,
        Err(error) => return CallEvent::Error(error),
    };
    if as_task {
        return task::run(call, signal).await;
    }
    match inline(call, signal).await {
        Inline::Done(event) => event,
        Inline::Task(created) => task::follow(call, signal, created, None).await,
        Inline::NeedsTask => task::run(call, signal).await,
    }
}

/// Whether to run the call as a task: when asked (and allowed), or when a
/// session-era tool requires it. A 2026-07-28 server decides itself.
async fn wants_task(call: &Call, mode: TaskMode) -> Result<bool, ClientError> {
    let inner = &call.inner;
    let tasks = inner.supports_tasks();
    match mode {
        TaskMode::Always if !tasks => Err(ClientError::TasksUnsupported),
        TaskMode::Always if inner.is_stateless() => Ok(true),
        TaskMode::Always => match inner.tool(&call.tool).await? {
            Some(tool) if tool.task_support == TaskSupport::Forbidden => {
                Err(ClientError::TaskForbidden {
                    tool: call.tool.clone(),
                })
            }
            _ => Ok(true),
        },
        TaskMode::WhenRequired if !tasks || inner.is_stateless() => Ok(false),
        // If the list cannot be read, call inline and let the server say.
        TaskMode::WhenRequired => Ok(matches!(
            inner.tool(&call.tool).await,
            Ok(Some(tool)) if tool.task_support == TaskSupport::Required
        )),
    }
}

/// The call on its own request: notifications as they come, then the
/// response.
async fn inline(call: &Call, signal: &mut StopSignal) -> Inline {
    let inner = &call.inner;
    let id = inner.next_id();
    let tokens = Tokens::new(id);
    let params = json!({
        "name": call.tool,
        "arguments": call.arguments,
        "_meta": { "progressToken": tokens.progress, "partialResultToken": tokens.partial },
    });
    let message = inner.request(id, "tools/call", params, Inner::capabilities(false));
    let sent = tokio::select! {
        biased;
        stop = signal.stopped() => return Inline::Done(call.cancel_request(id, stop, None).await),
        sent = inner.connection.request(message, tokens.routes()) => sent,
    };
    let mut exchange = match sent {
        Ok(exchange) => exchange,
        Err(error) => return Inline::Done(CallEvent::Error(error)),
    };
    let mut relay = Relay::new(tokens);
    loop {
        let item = tokio::select! {
            biased;
            stop = signal.stopped() => {
                return Inline::Done(call.cancel_request(id, stop, Some(exchange)).await);
            }
            item = exchange.next() => item,
        };
        match item {
            Some(Ok(Incoming::Notification { method, params })) => {
                if let Some(event) = relay.event(&method, &params)
                    && !call.emit(event).await
                {
                    let stop = Stop::Canceled("the caller dropped the call".into());
                    return Inline::Done(call.cancel_request(id, stop, Some(exchange)).await);
                }
            }
            Some(Ok(Incoming::Response {
                outcome: Ok(result),
                ..
            })) => {
                if result.get("resultType").and_then(Value::as_str) == Some("task") {
                    return Inline::Task(result);
                }
                return Inline::Done(result_event(&result));
            }
            Some(Ok(Incoming::Response {
                outcome: Err(error),
                ..
            })) => {
                if inner.is_stateless() && inner.supports_tasks() && asks_for_tasks(&error) {
                    return Inline::NeedsTask;
                }
                return Inline::Done(CallEvent::Error(rpc_error("tools/call", &error)));
            }
            Some(Ok(Incoming::Request { .. })) => {}
            Some(Err(error)) => return Inline::Done(CallEvent::Error(error)),
            None => {
                return Inline::Done(CallEvent::Error(ClientError::StreamLost {
                    reason: "the server closed the call's stream without a result".into(),
                }));
            }
        }
    }
}

/// A 2026-07-28 "missing required client capability" error naming the
/// tasks extension.
fn asks_for_tasks(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(-32021)
        && error
            .pointer("/data/requiredCapabilities/extensions")
            .and_then(|extensions| extensions.get(weir_mcp_wire::revision::TASKS_EXTENSION))
            .is_some()
}

/// The terminal event for a `CallToolResult`.
pub(super) fn result_event(result: &Value) -> CallEvent {
    match result_from_wire(result) {
        Ok(result) => CallEvent::Result(result),
        Err(error) => CallEvent::Error(error),
    }
}

impl Call {
    /// Hands an event to the caller; `false` when the caller is gone.
    pub(super) async fn emit(&self, event: CallEvent) -> bool {
        self.events.send(event).await.is_ok()
    }

    /// Cancels an inline call on the server: `notifications/cancelled`
    /// (stdio, and 2025-11-25 HTTP), and closing its stream (which is the
    /// cancellation in 2026-07-28 HTTP). Returns the terminal event.
    pub(super) async fn cancel_request(
        &self,
        id: u64,
        stop: Stop,
        exchange: Option<Exchange>,
    ) -> CallEvent {
        let inner = &self.inner;
        if inner.connection.is_stdio() || !inner.is_stateless() {
            let notice = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": { "requestId": id, "reason": stop.reason() },
            });
            let _ =
                tokio::time::timeout(Duration::from_secs(5), inner.connection.notify(notice)).await;
        }
        drop(exchange);
        CallEvent::Error(stop.into_error())
    }
}

/// The tokens of one call's notifications.
pub(super) struct Tokens {
    pub(super) progress: String,
    pub(super) partial: String,
}

impl Tokens {
    pub(super) fn new(id: u64) -> Tokens {
        let process = std::process::id();
        Tokens {
            progress: format!("weir-{process}-{id}-progress"),
            partial: format!("weir-{process}-{id}-partial"),
        }
    }

    pub(super) fn routes(&self) -> Vec<String> {
        vec![self.progress.clone(), self.partial.clone()]
    }
}

/// Turns a call's notifications into events: checks their tokens, and
/// keeps partial results in `seq` order, each once.
pub(super) struct Relay {
    tokens: Tokens,
    next_partial: u64,
}

impl Relay {
    pub(super) fn new(tokens: Tokens) -> Relay {
        Relay {
            tokens,
            next_partial: 0,
        }
    }

    pub(super) fn event(&mut self, method: &str, params: &Value) -> Option<CallEvent> {
        let token = |key: &str| params.get(key).and_then(Value::as_str);
        match method {
            "notifications/progress" if token("progressToken") == Some(&self.tokens.progress) => {
                progress_from_wire(params)
            }
            "notifications/tools/partial_result"
                if token("partialResultToken") == Some(&self.tokens.partial) =>
            {
                let event = partial_from_wire(params)?;
                if let CallEvent::Partial { seq, .. } = &event {
                    // Seen already (a replay): skip. A gap is tolerated:
                    // delivery is best effort, the result is complete.
                    if *seq < self.next_partial {
                        return None;
                    }
                    self.next_partial = seq + 1;
                }
                Some(event)
            }
            "notifications/message" => Some(log_from_wire(params)),
            "notifications/tasks/status" => task::status_event(params),
            _ => None,
        }
    }
}
