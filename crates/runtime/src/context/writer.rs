//! The one writer of a run's log: a task that takes what a [`RunContext`]
//! sends, numbers it densely, passes it through the [`CompletionGuard`] and
//! appends it in batches.
//!
//! [`RunContext`]: crate::RunContext

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use weir_core::{CompletionGuard, EventKind, RunEvent, RunId, Seq};

use crate::context::now_ms;
use crate::log::{Batch, EventLog, LogError};

/// Most events the writer appends in one batch.
const MAX_BATCH: usize = 512;

/// Most events in the writer's first batch; each batch after may hold twice
/// as many as the one before, up to [`MAX_BATCH`]. A durable store makes
/// every event of a batch wait for the batch's commit, so a first batch of
/// 512 items of 1 KB held the run's first item back for the whole commit
/// (milliseconds on SQLite); starting small delivers it after a commit of
/// a few events, and the batches reach full size within ten appends.
const FIRST_BATCH: usize = 2;

/// What a [`RunContext`] sends its writer.
pub(crate) enum Command {
    /// An event the runtime writes (`started`, the terminal event, a wait).
    Emit(EventKind),
    /// An event a tool emitted, holding its place among the node's events
    /// emitted and not yet stored (see `BACKLOG` in the scheduler) until
    /// the writer has appended it.
    Emitted(EventKind, OwnedSemaphorePermit),
    Flush(oneshot::Sender<Result<(), LogError>>),
}

/// How a run's events reach its writer: the writer's channel, and the
/// node's places for events emitted and not yet stored (`None` outside a
/// scheduler), which a tool's emit takes one of.
pub(crate) struct Inlet {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) backlog: Option<Arc<Semaphore>>,
}

/// Appends a batch, retrying a failing store a few times before giving up.
async fn append_patiently(log: &dyn EventLog, events: Batch) -> Result<(), LogError> {
    let mut delay = Duration::from_millis(10);
    loop {
        match log.append(events.clone()).await {
            Err(LogError::Storage { .. }) if delay < Duration::from_secs(1) => {
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
            other => return other,
        }
    }
}

/// The one writer of a run's log. Numbers events densely from `next_seq`,
/// passes each through the [`CompletionGuard`], appends in batches, and
/// stops after the terminal event. If every sender goes away first, it writes
/// the `failed` event the guard says is owed. Returns the terminal event it
/// wrote, or `None` if the store would not take it (start-up recovery closes
/// such a run later).
pub(crate) async fn write_run(
    log: Arc<dyn EventLog>,
    run_id: RunId,
    mut next_seq: Seq,
    mut commands: mpsc::Receiver<Command>,
    cancel: CancellationToken,
) -> Option<RunEvent> {
    let mut guard = CompletionGuard::new();
    let mut received = Vec::with_capacity(MAX_BATCH);
    let mut limit = FIRST_BATCH;
    loop {
        if commands.recv_many(&mut received, limit).await == 0 {
            break; // every sender is gone
        }
        limit = (limit * 2).min(MAX_BATCH);
        let mut batch = Vec::with_capacity(received.len());
        let mut flushes = Vec::new();
        // Given back, all at once, when this batch is appended.
        let mut places: Option<OwnedSemaphorePermit> = None;
        for command in received.drain(..) {
            let kind = match command {
                Command::Emit(kind) => kind,
                Command::Emitted(kind, place) => {
                    match &mut places {
                        Some(places) => places.merge(place),
                        None => places = Some(place),
                    }
                    kind
                }
                Command::Flush(ack) => {
                    flushes.push(ack);
                    continue;
                }
            };
            // Refused only after the terminal event; such stragglers are dropped.
            if guard.admit(&kind).is_ok() {
                batch.push(RunEvent {
                    run_id: run_id.clone(),
                    seq: next_seq + batch.len() as Seq,
                    ts: now_ms(),
                    kind,
                });
            }
        }
        let appended = batch.len() as Seq;
        let terminal = batch
            .last()
            .filter(|event| event.kind.is_terminal())
            .cloned();
        let result = append_patiently(&*log, batch.into()).await;
        drop(places);
        let failure = result.as_ref().err().map(ToString::to_string);
        for ack in flushes {
            let _ = ack.send(match &failure {
                None => Ok(()),
                Some(message) => Err(LogError::Storage {
                    doing: "appending events",
                    message: message.clone(),
                }),
            });
        }
        match result {
            Ok(()) if terminal.is_some() => return terminal,
            Ok(()) => {
                next_seq += appended;
                // The append woke the run's live subscribers, and tokio runs
                // a task woken this way only once the waker's task yields
                // (its LIFO slot cannot be stolen). Without this, a tool that
                // emits flat out kept its first item from the client until
                // the writer had drained its buffer (5-8 ms at 20,000 items);
                // once per batch, the yield costs nothing measurable.
                tokio::task::yield_now().await;
            }
            Err(error) => {
                // The store is failing: stop the tool and try to close the run.
                cancel.cancel();
                commands.close();
                let failed = weir_core::RunError::new(
                    weir_core::FailureCode::Internal,
                    format!("the event log could not be written: {error}"),
                )
                .with_remediation("check the data directory's disk space and permissions, then call the tool again");
                let event = RunEvent {
                    run_id,
                    seq: next_seq,
                    ts: now_ms(),
                    kind: weir_core::Failed { error: failed }.into(),
                };
                return log
                    .append(Arc::new([event.clone()]))
                    .await
                    .ok()
                    .map(|()| event);
            }
        }
    }
    commands.close();
    let owed = guard.on_writer_exit()?;
    let event = RunEvent {
        run_id,
        seq: next_seq,
        ts: now_ms(),
        kind: owed,
    };
    append_patiently(&*log, Arc::new([event.clone()]))
        .await
        .ok()
        .map(|()| event)
}

#[cfg(test)]
mod tests {
    use crate::context::tests::{spawn_writer, started_run};
    use weir_core::Warning;

    /// A tool emitting flat out, its writer and a live subscriber on one
    /// thread: the subscriber gets the run's first events after the
    /// writer's first append, not after the writer drained the buffer.
    #[tokio::test(flavor = "current_thread")]
    async fn a_live_subscriber_is_not_kept_waiting_while_the_writer_drains_a_flat_out_tool() {
        let (log, run_id, ctx, receiver) = started_run("flat-out", 1024, None).await;
        let writer = spawn_writer(&log, &run_id, receiver);
        tokio::task::yield_now().await; // the writer has stored `started`
        let mut subscription = log.subscribe_from(&run_id, 0);
        let producer = tokio::spawn(async move {
            for index in 0..2_000 {
                let warning = Warning {
                    message: format!("item {index}"),
                };
                ctx.emit(warning).await.unwrap();
            }
        });
        let started = subscription.next().await.unwrap().unwrap();
        assert_eq!(started.seq, 0);
        let first_item = subscription.next().await.unwrap().unwrap();
        assert_eq!(first_item.seq, 1);
        let stored = log.read(&run_id, 0, 10_000).await.unwrap().len();
        assert!(
            stored < 32,
            "the subscriber got the first item only after {stored} events were stored"
        );
        producer.await.unwrap();
        drop(subscription);
        writer.abort();
    }
}
