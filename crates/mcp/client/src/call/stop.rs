//! Stopping a call early: the caller's cancel requests (asked for, or the
//! stream dropped) and the call's deadline, and what stopping does on the
//! server for an inline call and for a task.

use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::connection::Exchange;
use crate::error::ClientError;
use crate::events::CallEvent;
use crate::server::Server;

/// How long a cancellation may take to reach the server: the call ends
/// either way, but a caller should not wait on a server that is gone.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// The reason a dropped stream gives.
pub(super) const DROPPED: &str = "the caller dropped the call";

/// The caller's end: asks the call to stop.
pub(super) struct StopHandle(watch::Sender<Option<String>>);

/// The call's end: the caller's cancel requests and the call's deadline.
pub(super) struct StopSignal {
    requests: watch::Receiver<Option<String>>,
    deadline: Option<(Instant, Duration)>,
}

/// The two ends for a call that times out after `timeout`, if given.
pub(super) fn channel(timeout: Option<Duration>) -> (StopHandle, StopSignal) {
    let (handle, requests) = watch::channel(None);
    let signal = StopSignal {
        requests,
        deadline: timeout.map(|after| (Instant::now() + after, after)),
    };
    (StopHandle(handle), signal)
}

impl StopHandle {
    /// Asks the call to stop; the first reason given is the one reported.
    pub(super) fn cancel(&self, reason: &str) {
        self.0.send_if_modified(|current| match current {
            Some(_) => false,
            None => {
                *current = Some(reason.to_owned());
                true
            }
        });
    }
}

/// Why a call is being stopped early.
pub(super) enum Stop {
    Canceled(String),
    TimedOut(Duration),
}

impl Stop {
    fn reason(&self) -> String {
        match self {
            Stop::Canceled(reason) => reason.clone(),
            Stop::TimedOut(after) => format!("timed out after {:.1}s", after.as_secs_f64()),
        }
    }

    fn into_error(self) -> ClientError {
        match self {
            Stop::Canceled(reason) => ClientError::Canceled { reason },
            Stop::TimedOut(after) => ClientError::Timeout { after },
        }
    }
}

impl StopSignal {
    /// Whether the call should stop now ([`StopSignal::stopped`] would
    /// resolve at once), without waiting.
    pub(super) fn stopping(&self) -> bool {
        self.requests.borrow().is_some()
            || self.requests.has_changed().is_err()
            || self.deadline.is_some_and(|(at, _)| Instant::now() >= at)
    }

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
                    return DROPPED.to_owned();
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

/// Cancels request `id` on the server: `notifications/cancelled` (stdio,
/// and 2025-11-25 HTTP), then dropping its exchange, which closes its
/// stream (the cancellation itself in 2026-07-28 HTTP). Returns the
/// terminal event for why.
pub(super) async fn cancel_request(
    server: &Server,
    id: u64,
    stop: Stop,
    exchange: Option<Exchange>,
) -> CallEvent {
    if server.connection.is_stdio() || !server.is_stateless() {
        let notice = json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": { "requestId": id, "reason": stop.reason() },
        });
        let _ = tokio::time::timeout(CANCEL_GRACE, server.connection.notify(notice)).await;
    }
    drop(exchange);
    CallEvent::Error(stop.into_error())
}

/// Cancels task `task_id` on the server (`tasks/cancel`); returns the
/// terminal event for why.
pub(super) async fn cancel_task(server: &Server, task_id: &str, stop: Stop) -> CallEvent {
    let cancel = server.roundtrip("tasks/cancel", json!({ "taskId": task_id }));
    // A task that already ended refuses; either way the call is over.
    let _ = tokio::time::timeout(CANCEL_GRACE, cancel).await;
    CallEvent::Error(stop.into_error())
}
