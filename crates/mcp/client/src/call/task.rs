//! A call run as a task, in either design: 2025-11-25 (`params.task`, then
//! `tasks/get` until it ends and `tasks/result`) and the 2026-07-28
//! extension (the server answers with a task; `tasks/get` inlines the
//! outcome). Polling honours the server's `pollInterval`/`pollIntervalMs`
//! (without one: 250 ms, doubling to 5 s) and rides out a dropped
//! connection, backing off, which is how a 2026-07-28 call survives one.

use std::time::Duration;

use serde_json::{Value, json};

use super::relay::{Relay, result_event};
use super::request::{Answered, Call, Shape};
use super::stop::{StopSignal, cancel_task};
use crate::connection::{Exchange, Inbound, Message};
use crate::error::ClientError;
use crate::events::{CallEvent, TaskStatus, clip, task_from_wire, task_status_from_wire};
use crate::retry::backoff;

/// Consecutive failed polls (connection errors) before giving up.
const POLL_ATTEMPTS: u32 = 10;
/// The wait between polls when the server gives no interval: the first…
const FIRST_POLL: Duration = Duration::from_millis(250);
/// …and the longest.
const LONGEST_POLL: Duration = Duration::from_secs(5);
/// The wait after the first failed poll, doubling up to [`LONGEST_POLL`].
const FIRST_RETRY: Duration = Duration::from_millis(100);

/// Calls the tool as a task and follows the task to its end.
pub(super) async fn run(call: &Call, signal: &mut StopSignal) -> CallEvent {
    let Answered {
        outcome,
        exchange,
        relay,
    } = match call.request(signal, Shape::Task).await {
        Ok(answered) => answered,
        Err(event) => return event,
    };
    let answer: Value = match outcome.map(|answer| serde_json::from_str(answer.get())) {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            return CallEvent::Error(ClientError::Protocol(format!(
                "a tools/call answer: {error}"
            )));
        }
        Err(error) => return CallEvent::Error(ClientError::rpc("tools/call", &error)),
    };
    // The server may have answered at once, without a task.
    let created = match answer.get("task") {
        Some(task) if !call.server.is_stateless() => task.clone(),
        _ if answer.get("resultType").and_then(Value::as_str) == Some("task") => answer,
        _ => return result_event(answer),
    };
    follow(call, signal, created, Some((exchange, relay))).await
}

/// Follows a created task (its JSON: the Task fields) to its end. Over
/// stdio the call's exchange, when given, still carries progress.
pub(super) async fn follow(
    call: &Call,
    signal: &mut StopSignal,
    created: Value,
    mut progress: Option<(Exchange, Relay)>,
) -> CallEvent {
    let server = &call.server;
    let Some(task_id) = created
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return CallEvent::Error(ClientError::Protocol(format!(
            "the server created a task without a taskId: {}",
            clip(&created)
        )));
    };
    let interval = poll_interval(&created);
    let mut delay = interval.unwrap_or(FIRST_POLL);
    let mut task = created;
    let mut shown = Shown::default();
    let mut failures = 0;
    loop {
        let Some(event) = task_from_wire(&task) else {
            return CallEvent::Error(ClientError::Protocol(format!(
                "task {task_id} has no known status: {}",
                clip(&task)
            )));
        };
        let CallEvent::Task { status, .. } = event else {
            unreachable!("task_from_wire makes task events")
        };
        if shown.fresh(&event) {
            call.emit(event).await;
        }
        if status.is_terminal() || status == TaskStatus::InputRequired {
            break;
        }
        // Wait, relaying progress meanwhile; stop if asked to.
        let wait = tokio::time::sleep(delay);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                biased;
                stop = signal.stopped() => return cancel_task(server, &task_id, stop).await,
                () = &mut wait => break,
                item = next_message(&mut progress) => match item {
                    Some(Ok(Message::Notification { method, params })) => {
                        let relay = &mut progress.as_mut().expect("a message came from it").1;
                        // A pushed status is shown once, like a polled one;
                        // another task's is not this call's.
                        let event = relay.event(&method, &params).filter(|event| match event {
                            CallEvent::Task { task_id: pushed, .. } => *pushed == task_id,
                            _ => true,
                        });
                        if let Some(event) = event.filter(|event| shown.fresh(event)) {
                            call.emit(event).await;
                        }
                    }
                    Some(Ok(_)) => {}
                    // That stream is over (HTTP): polling goes on.
                    Some(Err(_)) | None => progress = None,
                },
            }
        }
        let polled = tokio::select! {
            biased;
            stop = signal.stopped() => return cancel_task(server, &task_id, stop).await,
            polled = server.roundtrip("tasks/get", json!({ "taskId": task_id })) => polled,
        };
        match polled {
            Ok(answer) => {
                failures = 0;
                task = answer;
                delay = interval.unwrap_or((delay * 2).min(LONGEST_POLL));
            }
            Err(error) if error.is_transient() && failures < POLL_ATTEMPTS => {
                failures += 1;
                delay = backoff(failures, FIRST_RETRY, LONGEST_POLL);
            }
            Err(error) if error.is_transient() => return lost(&task_id, &error),
            Err(error) => return CallEvent::Error(error),
        }
    }
    outcome(call, signal, &task_id, &task).await
}

/// The end of a task that stopped running.
async fn outcome(call: &Call, signal: &mut StopSignal, task_id: &str, task: &Value) -> CallEvent {
    let status = task
        .get("status")
        .and_then(Value::as_str)
        .and_then(task_status_from_wire);
    let message = task.get("statusMessage").and_then(Value::as_str);
    if status == Some(TaskStatus::Cancelled) {
        return CallEvent::Error(ClientError::Canceled {
            reason: message
                .map(str::to_owned)
                .unwrap_or_else(|| format!("task {task_id} was cancelled on the server")),
        });
    }
    let server = &call.server;
    if server.is_stateless() {
        // The extension inlines the outcome in tasks/get.
        return match (status, task.get("result"), task.get("error")) {
            (Some(TaskStatus::InputRequired), ..) => CallEvent::Error(ClientError::InputRequired {
                task_id: task_id.to_owned(),
            }),
            (_, Some(result), _) => result_event(result.clone()),
            (_, None, Some(error)) => CallEvent::Error(ClientError::rpc("tools/call", error)),
            _ => CallEvent::Error(ClientError::Protocol(format!(
                "task {task_id} ended without a result or an error"
            ))),
        };
    }
    // 2025-11-25: tasks/result has the outcome (and, for input_required,
    // carries the server's questions, which the transport refuses).
    let mut failures = 0;
    loop {
        let fetched = tokio::select! {
            biased;
            stop = signal.stopped() => return cancel_task(server, task_id, stop).await,
            fetched = server.roundtrip("tasks/result", json!({ "taskId": task_id })) => fetched,
        };
        match fetched {
            Ok(result) => return result_event(result),
            Err(error) if error.is_transient() && failures < POLL_ATTEMPTS => {
                failures += 1;
                tokio::time::sleep(backoff(failures, FIRST_RETRY, LONGEST_POLL)).await;
            }
            Err(error) if error.is_transient() => return lost(task_id, &error),
            Err(error) => return CallEvent::Error(error),
        }
    }
}

fn lost(task_id: &str, error: &ClientError) -> CallEvent {
    CallEvent::Error(ClientError::StreamLost {
        reason: format!(
            "lost the server while following task {task_id} ({error}); the task may still be \
             running there: poll it with tasks/get once the server is back"
        ),
    })
}

async fn next_message(progress: &mut Option<(Exchange, Relay)>) -> Option<Inbound> {
    match progress {
        Some((exchange, _)) => exchange.next().await,
        None => std::future::pending().await,
    }
}

/// The task status last shown, so that each is shown once whether polled
/// or pushed.
#[derive(Default)]
struct Shown(Option<(TaskStatus, Option<String>)>);

impl Shown {
    /// Whether `event` should be shown: any non-status event, or a status
    /// (with its message) not shown yet — which it now is.
    fn fresh(&mut self, event: &CallEvent) -> bool {
        let CallEvent::Task {
            status, message, ..
        } = event
        else {
            return true;
        };
        let now = Some((*status, message.clone()));
        let fresh = self.0 != now;
        self.0 = now;
        fresh
    }
}

/// The server's poll interval, in either design's field name.
fn poll_interval(task: &Value) -> Option<Duration> {
    ["pollInterval", "pollIntervalMs"]
        .iter()
        .find_map(|key| task.get(*key).and_then(Value::as_u64))
        .map(|ms| Duration::from_millis(ms.clamp(10, 60_000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_intervals_come_from_either_design() {
        assert_eq!(
            poll_interval(&json!({"pollInterval": 500})),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            poll_interval(&json!({"pollIntervalMs": 2000})),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            poll_interval(&json!({"pollInterval": 0})),
            Some(Duration::from_millis(10))
        );
        assert_eq!(poll_interval(&json!({})), None);
        let waits: Vec<u64> = (1..=8)
            .map(|n| backoff(n, FIRST_RETRY, LONGEST_POLL).as_millis() as u64)
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
    }
}
