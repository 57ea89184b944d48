//! A run's side of the runtime: [`RunContext`] for the tool, and the writer
//! task that turns what it emits into dense, guarded log entries.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use weir_core::{ArtifactRef, CompletionGuard, EventKind, RunEvent, RunId, Seq};

use crate::input::{AskError, InputKind, InputSlot};
use crate::log::{Batch, EventLog, LogError};

/// Most events the writer appends in one batch.
const MAX_BATCH: usize = 512;

/// Unix milliseconds now: the one wall clock of the runtime and the layers
/// above it (weir-core takes time as an argument).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Why an event was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// The run has ended (its terminal event is written, or the writer gave up).
    #[error("run {0} has ended; nothing more can be added to its log")]
    RunEnded(RunId),
    /// Tools return their result; the runtime writes terminal events.
    #[error(
        "terminal events are written by the runtime: return from Tool::run instead of emitting `{0}`"
    )]
    TerminalReserved(&'static str),
    /// The store refused or failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

pub(crate) enum Command {
    Emit(EventKind),
    Flush(oneshot::Sender<Result<(), LogError>>),
}

/// A tool's handle on its run: emit events, store artifacts, notice
/// cancellation. Cheap to clone; clones may emit from several tasks, and the
/// log keeps the order in which `emit` calls completed.
#[derive(Clone)]
pub struct RunContext {
    shared: Arc<Shared>,
}

struct Shared {
    run_id: RunId,
    commands: mpsc::Sender<Command>,
    cancel: CancellationToken,
    deadline: Option<tokio::time::Instant>,
    log: Arc<dyn EventLog>,
    inputs: InputSlot,
}

impl RunContext {
    pub(crate) fn new(
        run_id: RunId,
        commands: mpsc::Sender<Command>,
        cancel: CancellationToken,
        deadline: Option<tokio::time::Instant>,
        log: Arc<dyn EventLog>,
        inputs: InputSlot,
    ) -> RunContext {
        RunContext {
            shared: Arc::new(Shared {
                run_id,
                commands,
                cancel,
                deadline,
                log,
                inputs,
            }),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.shared.run_id
    }

    /// Adds an event (`meta`, `progress`, `log`, `partial`, `artifact`,
    /// `warning`) to the log. Returns once the writer has it, waiting only
    /// when the run's bounded buffer is full; [`RunContext::flush`] waits
    /// until it is stored.
    pub async fn emit(&self, kind: impl Into<EventKind>) -> Result<(), EmitError> {
        let kind = kind.into();
        if kind.is_terminal() || matches!(kind, EventKind::Started(_)) {
            return Err(EmitError::TerminalReserved(kind.type_name()));
        }
        self.send(Command::Emit(kind)).await
    }

    /// Waits until everything emitted before this call is stored.
    pub async fn flush(&self) -> Result<(), EmitError> {
        let (ack, stored) = oneshot::channel();
        self.send(Command::Flush(ack)).await?;
        stored
            .await
            .map_err(|_| self.ended())?
            .map_err(EmitError::from)
    }

    /// Stores `data` as artifact `name` and emits the `artifact` event.
    pub async fn artifact(
        &self,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, EmitError> {
        let artifact = self
            .shared
            .log
            .put_artifact(&self.shared.run_id, name, mime, data)
            .await?;
        self.emit(artifact.clone()).await?;
        Ok(artifact)
    }

    /// Asks the caller for input (a model completion, or structured input
    /// from the user) and waits for the answer. Fails at once when nobody who
    /// can answer follows the run.
    pub async fn ask(
        &self,
        kind: InputKind,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, AskError> {
        crate::input::ask(&self.shared.inputs, kind, params).await
    }

    /// Completes when the run is cancelled (or timed out).
    pub async fn cancelled(&self) {
        self.shared.cancel.cancelled().await
    }

    /// Whether the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancel.is_cancelled()
    }

    /// When the run will be stopped for taking too long, if ever.
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.shared.deadline
    }

    async fn send(&self, command: Command) -> Result<(), EmitError> {
        self.shared
            .commands
            .send(command)
            .await
            .map_err(|_| self.ended())
    }

    fn ended(&self) -> EmitError {
        EmitError::RunEnded(self.shared.run_id.clone())
    }
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
    loop {
        if commands.recv_many(&mut received, MAX_BATCH).await == 0 {
            break; // every sender is gone
        }
        let mut batch = Vec::with_capacity(received.len());
        let mut flushes = Vec::new();
        for command in received.drain(..) {
            match command {
                Command::Emit(kind) => {
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
                Command::Flush(ack) => flushes.push(ack),
            }
        }
        let appended = batch.len() as Seq;
        let terminal = batch
            .last()
            .filter(|event| event.kind.is_terminal())
            .cloned();
        let result = append_patiently(&*log, batch.into()).await;
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
            Ok(()) => next_seq += appended,
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
    use super::*;
    use crate::MemoryLog;
    use weir_core::{FailureCode, RunState, Started, Warning};

    /// A writer for a fresh run in a memory log, `started` already sent.
    async fn started_writer(
        name: &str,
    ) -> (
        Arc<dyn EventLog>,
        RunId,
        RunContext,
        tokio::task::JoinHandle<Option<RunEvent>>,
    ) {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let run_id = RunId::parse(name).unwrap();
        let (commands, receiver) = mpsc::channel(8);
        let writer = tokio::spawn(write_run(
            log.clone(),
            run_id.clone(),
            0,
            receiver,
            CancellationToken::new(),
        ));
        let started = Started {
            tool: "t".into(),
            arguments: serde_json::Value::Null,
            node: "n".into(),
        };
        commands.send(Command::Emit(started.into())).await.unwrap();
        let ctx = RunContext::new(
            run_id.clone(),
            commands,
            CancellationToken::new(),
            None,
            log.clone(),
            InputSlot::default(),
        );
        (log, run_id, ctx, writer)
    }

    /// Every sender gone without a terminal event: the writer writes the
    /// `failed` the guard says is owed, after what was emitted.
    #[tokio::test]
    async fn a_writer_left_without_a_terminal_event_closes_the_run() {
        let (log, run_id, ctx, writer) = started_writer("orphan").await;
        ctx.emit(Warning {
            message: "about to vanish".into(),
        })
        .await
        .unwrap();
        drop(ctx);
        let terminal = writer.await.unwrap().unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(failed.error.code, FailureCode::WorkerExited);
        assert_eq!(
            failed.error.message,
            "worker exited without a terminal event"
        );
        let all = log.read(&run_id, 0, 10).await.unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(
            log.get_run(&run_id).await.unwrap().unwrap().state,
            RunState::Failed
        );
    }

    /// After the terminal event, emits fail instead of vanishing silently.
    #[tokio::test]
    async fn emits_after_the_end_are_refused() {
        let (log, run_id, ctx, writer) = started_writer("ended").await;
        ctx.send(Command::Emit(weir_core::Completed::default().into()))
            .await
            .unwrap();
        writer.await.unwrap().unwrap();
        let late = ctx
            .emit(Warning {
                message: "too late".into(),
            })
            .await;
        assert!(matches!(late, Err(EmitError::RunEnded(_))), "{late:?}");
        assert!(matches!(ctx.flush().await, Err(EmitError::RunEnded(_))));
        assert_eq!(log.read(&run_id, 0, 10).await.unwrap().len(), 2);
    }
}
