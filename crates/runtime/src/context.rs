//! A run's side of the runtime: [`RunContext`] for the tool. The writer
//! task that turns what it emits into dense, guarded log entries is in
//! [`writer`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use weir_core::{ArtifactRef, EventKind, Milestone, Progress, ProgressTracker, RunId};

use crate::handle::Spawn;
use crate::input::{AskError, InputKind, InputRequest, InputSlot};
use crate::log::{EventLog, LogError};

mod writer;
pub(crate) use writer::{Command, Inlet, Registration, write_run};

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
    /// The runtime records a run's waits for its caller; tools ask.
    #[error(
        "`{0}` events are written by the runtime when a tool asks its caller: call RunContext::ask instead of emitting them"
    )]
    InputReserved(&'static str),
    /// The store refused or failed.
    #[error(transparent)]
    Log(#[from] LogError),
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
    /// Held while a question waits for its answer: a run asks one at a
    /// time, so its log's waits never overlap.
    asking: tokio::sync::Mutex<()>,
    /// The run's milestones so far, and when the context was made: the
    /// clock their pace is measured on. An async lock, held while the
    /// report is emitted, so that reports from several tasks reach the
    /// log in the order their counts were clamped in.
    milestones: tokio::sync::Mutex<ProgressTracker>,
    began: tokio::time::Instant,
    /// How this run starts children ([`RunContext::call`]); `None` for a
    /// context made outside a scheduler.
    children: Option<Arc<dyn Spawn>>,
    /// The node's places for events emitted and not yet stored, shared by
    /// every run; `None` for a context made outside a scheduler.
    backlog: Option<Arc<Semaphore>>,
    /// Whether the log is known to have the run: a run the scheduler
    /// starts at once is registered with its first events, after its tool
    /// has begun (see `Scheduler::submit`).
    in_log: AtomicBool,
}

impl RunContext {
    pub(crate) fn new(
        run_id: RunId,
        Inlet { commands, backlog }: Inlet,
        cancel: CancellationToken,
        deadline: Option<tokio::time::Instant>,
        log: Arc<dyn EventLog>,
        inputs: InputSlot,
        children: Option<Arc<dyn Spawn>>,
    ) -> RunContext {
        RunContext {
            shared: Arc::new(Shared {
                run_id,
                commands,
                cancel,
                deadline,
                log,
                inputs,
                asking: tokio::sync::Mutex::new(()),
                milestones: tokio::sync::Mutex::new(ProgressTracker::new(0)),
                began: tokio::time::Instant::now(),
                children,
                backlog,
                in_log: AtomicBool::new(false),
            }),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.shared.run_id
    }

    /// Who started the run, as its summary keeps it
    /// ([`RunSummary::owner`](crate::log::RunSummary::owner): the name of
    /// the credential its caller presented; a child run's parent's);
    /// `None` without credentials, or when the log cannot say.
    pub async fn owner(&self) -> Option<String> {
        // A run the scheduler executes knows its caller, and no store read
        // is needed: its tool may start before the log has the run (see
        // `Scheduler::submit`).
        if let Some(lineage) = &self.shared.children {
            return lineage.owner();
        }
        let run = self.shared.log.get_run(&self.shared.run_id).await;
        run.ok().flatten()?.owner
    }

    /// Adds an event (`meta`, `progress`, `log`, `partial`, `artifact`,
    /// `warning`) to the log. Returns once the writer has it, waiting only
    /// when the run's bounded buffer is full or the node holds its most
    /// events not yet stored; [`RunContext::flush`] waits until it is
    /// stored.
    pub async fn emit(&self, kind: impl Into<EventKind>) -> Result<(), EmitError> {
        let kind = kind.into();
        if kind.is_terminal() || matches!(kind, EventKind::Started(_)) {
            return Err(EmitError::TerminalReserved(kind.type_name()));
        }
        if matches!(kind, EventKind::InputRequired(_) | EventKind::InputEnded(_)) {
            return Err(EmitError::InputReserved(kind.type_name()));
        }
        let Some(backlog) = &self.shared.backlog else {
            return self.send(Command::Emit(kind)).await;
        };
        // Waits while the node holds its most events not yet stored, so
        // thousands of runs producing faster than the store writes hold a
        // bounded number of events between them, not each its own buffer.
        let place = match backlog.clone().try_acquire_owned() {
            Ok(place) => place,
            Err(_) => backlog
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| self.ended())?,
        };
        self.send(Command::Emitted(kind, place)).await
    }

    /// Adds an event the runtime writes on the tool's behalf (the waits of
    /// [`RunContext::ask`]), which [`RunContext::emit`] refuses.
    pub(crate) async fn record(&self, kind: EventKind) -> Result<(), EmitError> {
        self.send(Command::Emit(kind)).await
    }

    /// Completes once the run's log takes nothing more: its terminal event
    /// is written (or the writer gave up).
    pub(crate) async fn over(&self) {
        self.shared.commands.closed().await
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

    /// Reports a milestone: emits the `progress` event it makes and returns
    /// it. The one way for a pack to say where a run stands.
    ///
    /// The context keeps the run's milestones in one [`ProgressTracker`]
    /// shared by all its clones, on the runtime's monotonic clock (tokio's,
    /// so tests can pause time), which gives each report:
    ///
    /// - **a count that never goes back** — clamped, not refused: a late
    ///   or repeated count (agents finishing in parallel) reports the
    ///   highest so far again, and a milestone without a count keeps it,
    ///   so a phase or message is never lost;
    /// - **the total** given last (by [`Milestone::progress`]);
    /// - **`eta_ms`** from the real durations of this phase's steps so far
    ///   (units left × time per unit), when there is a total; a new phase
    ///   is measured from its own start.
    ///
    /// MCP's `notifications/progress` must increase strictly, so a
    /// milestone that does not raise the count reaches the log (and SSE,
    /// `runs_events`, `weir runs tail`) but not a progress-only client: a
    /// pack whose phases should show there counts them as steps. The
    /// server shows `phase: message` and the estimate as the
    /// notification's `message`. Report milestones at their own pace (a
    /// step done, a phase begun), not per item: the log keeps every one.
    /// Reports made here and `progress` emitted directly do not see each
    /// other; use one or the other.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// # use std::sync::Arc;
    /// # use async_trait::async_trait;
    /// # use serde_json::{Value, json};
    /// use std::time::Duration;
    /// use weir_core::{Completed, EventKind, FailureCode, Milestone, RunError};
    /// use weir_runtime::{EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
    ///
    /// /// Asks five agents, one after another, two seconds each.
    /// struct Critique;
    /// #[async_trait]
    /// impl Tool for Critique {
    ///     fn info(&self) -> ToolInfo { ToolInfo::new("critique", "Asks five agents.", json!({"type": "object"})) }
    ///     async fn run(&self, ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
    ///         let stopped = |e| RunError::new(FailureCode::Internal, format!("{e}"));
    ///         ctx.milestone(Milestone::new("agents").progress(0, 5)).await.map_err(stopped)?;
    ///         for done in 1..=5 {
    ///             tokio::time::sleep(Duration::from_secs(2)).await;
    ///             let report = ctx
    ///                 .milestone(Milestone::new("agents").message(format!("{done} of 5 agents done")).done(done))
    ///                 .await
    ///                 .map_err(stopped)?;
    ///             assert_eq!(report.eta_ms, Some((5 - done) * 2_000));
    ///         }
    ///         ctx.milestone(Milestone::new("synthesizing")).await.map_err(stopped)?;
    ///         Ok(Completed::default())
    ///     }
    /// }
    ///
    /// let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    /// let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Critique)], SchedulerConfig::default()).await.unwrap();
    /// let run = scheduler.submit("critique", json!({}), RunOptions::default()).await.unwrap();
    /// let run_id = run.run_id().clone();
    /// run.finished().await;
    /// let events = log.read(&run_id, 0, 100).await.unwrap();
    /// let EventKind::Progress(third) = &events[4].kind else { panic!() };
    /// assert_eq!(third.progress, 3.0);
    /// assert_eq!(third.total, Some(5.0));
    /// assert_eq!(third.phase.as_deref(), Some("agents"));
    /// assert_eq!(third.message.as_deref(), Some("3 of 5 agents done"));
    /// assert_eq!(third.eta_ms, Some(4_000));
    /// # }
    /// ```
    pub async fn milestone(&self, milestone: Milestone) -> Result<Progress, EmitError> {
        let mut tracker = self.shared.milestones.lock().await;
        let now_ms = self.shared.began.elapsed().as_millis() as u64;
        let report = tracker.milestone(milestone, now_ms);
        self.emit(report.clone()).await?;
        Ok(report)
    }

    /// Stores `data` as artifact `name` and emits the `artifact` event.
    pub async fn artifact(
        &self,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, EmitError> {
        // An artifact belongs to a run the log has: the first waits until
        // the run's first events are stored, which registers it.
        if !self.shared.in_log.load(Ordering::Acquire) {
            self.flush().await?;
            self.shared.in_log.store(true, Ordering::Release);
        }
        let artifact = self
            .shared
            .log
            .put_artifact(&self.shared.run_id, name, mime, data)
            .await?;
        self.emit(artifact.clone()).await?;
        Ok(artifact)
    }

    /// Asks the caller for input (a model completion, or structured input
    /// from the user) and waits for the answer, at most
    /// [`DEFAULT_ASK_TIMEOUT`](crate::DEFAULT_ASK_TIMEOUT). Fails at once
    /// when nobody who can answer follows the run. See
    /// [`RunContext::ask_within`].
    pub async fn ask(
        &self,
        kind: InputKind,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, AskError> {
        self.ask_within(kind, params, crate::DEFAULT_ASK_TIMEOUT)
            .await
    }

    /// Asks the caller for input and waits for the answer, at most
    /// `timeout`: after that the question is withdrawn and the ask fails
    /// with [`AskError::TimedOut`], which the tool may handle (ask again,
    /// go on without) or pass on with `?`, failing the run with a
    /// [`RunError`](weir_core::RunError) that says the client did not
    /// answer in time. It also ends with the run (cancelled, timed out).
    ///
    /// The log records the wait (`input_required`, then `input_ended`), so
    /// the run's state is `input_required` meanwhile. Questions of one run
    /// take turns: a second one waits for the first to end, and its time
    /// limit starts when it is asked.
    pub async fn ask_within(
        &self,
        kind: InputKind,
        params: serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, AskError> {
        use tokio::sync::oneshot;
        use weir_core::{InputEnded, InputOutcome, InputRequired};

        let shared = &*self.shared;
        let responder = shared
            .inputs
            .lock()
            .expect("input slot lock")
            .clone()
            .ok_or(AskError::NoResponder(kind))?;
        let _turn = shared.asking.lock().await;
        let waiting = InputRequired {
            input: kind,
            message: match kind {
                InputKind::Elicitation => params["message"].as_str().map(str::to_owned),
                InputKind::Sampling => None,
            },
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        // Stored before the question leaves, so that whoever gets it and then
        // reads the run (tasks/get) sees it waiting.
        let unrecorded = |error: crate::EmitError| AskError::Unrecorded(error.to_string());
        self.record(waiting.into()).await.map_err(unrecorded)?;
        self.flush().await.map_err(unrecorded)?;
        let (reply, answer) = oneshot::channel();
        let asked = InputRequest {
            kind,
            params,
            reply,
        };
        let answer = match responder.send(asked).await {
            Err(_) => Err(AskError::NoResponder(kind)),
            Ok(()) => tokio::select! {
                answer = answer => answer.unwrap_or(Err(AskError::Gone)),
                () = tokio::time::sleep(timeout) => Err(AskError::TimedOut { kind, waited: timeout }),
                // The scheduler drops the tool's future when the run is
                // cancelled or times out, which withdraws its question; a task
                // the tool spawned to ask is told once the run has ended — not
                // at the cancel itself, where an error returned through the
                // tool could race the scheduler and end the run as `failed`.
                () = self.over() => Err(AskError::RunEnded),
            },
        };
        let outcome = match &answer {
            Ok(_) => InputOutcome::Answered,
            Err(AskError::NoResponder(_) | AskError::Refused(_)) => InputOutcome::Refused,
            Err(AskError::TimedOut { .. }) => InputOutcome::TimedOut,
            Err(AskError::Gone) => InputOutcome::Gone,
            // The terminal event ends the wait.
            Err(AskError::RunEnded | AskError::Unrecorded(_)) => return answer,
        };
        // A run that is ending cannot take it; its terminal event ends the wait.
        let _ = self.record(InputEnded { outcome }.into()).await;
        answer
    }

    /// How this run starts children, if it can.
    pub(crate) fn children(&self) -> Option<&Arc<dyn Spawn>> {
        self.shared.children.as_ref()
    }

    /// The event log the run writes to (a child's events are read there).
    pub(crate) fn log(&self) -> &Arc<dyn EventLog> {
        &self.shared.log
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryLog;
    use weir_core::{FailureCode, RunEvent, RunState, Started, Warning};

    /// A fresh run in a memory log, `started` queued for its writer, and
    /// the tool's context on a channel of `capacity`. The writer is the
    /// caller's to start ([`spawn_writer`]), so a test may hold it back.
    pub(super) async fn started_run(
        name: &str,
        capacity: usize,
        backlog: Option<Arc<Semaphore>>,
    ) -> (
        Arc<dyn EventLog>,
        RunId,
        RunContext,
        mpsc::Receiver<Command>,
    ) {
        started_run_in(Arc::new(MemoryLog::new()), name, capacity, backlog).await
    }

    /// [`started_run`] in `log`.
    pub(super) async fn started_run_in(
        log: Arc<dyn EventLog>,
        name: &str,
        capacity: usize,
        backlog: Option<Arc<Semaphore>>,
    ) -> (
        Arc<dyn EventLog>,
        RunId,
        RunContext,
        mpsc::Receiver<Command>,
    ) {
        let run_id = RunId::parse(name).unwrap();
        let (commands, receiver) = mpsc::channel(capacity);
        let started = Started {
            tool: "t".into(),
            arguments: serde_json::Value::Null,
            node: "n".into(),
        };
        commands.send(Command::Emit(started.into())).await.unwrap();
        let ctx = RunContext::new(
            run_id.clone(),
            Inlet { commands, backlog },
            CancellationToken::new(),
            None,
            log.clone(),
            InputSlot::default(),
            None,
        );
        (log, run_id, ctx, receiver)
    }

    /// Starts the run's writer on what [`started_run`] queued.
    pub(super) fn spawn_writer(
        log: &Arc<dyn EventLog>,
        run_id: &RunId,
        receiver: mpsc::Receiver<Command>,
    ) -> tokio::task::JoinHandle<Option<RunEvent>> {
        tokio::spawn(write_run(
            log.clone(),
            run_id.clone(),
            0,
            receiver,
            CancellationToken::new(),
            None,
        ))
    }

    /// A writer for a fresh run in a memory log, `started` already sent.
    async fn started_writer(
        name: &str,
    ) -> (
        Arc<dyn EventLog>,
        RunId,
        RunContext,
        tokio::task::JoinHandle<Option<RunEvent>>,
    ) {
        let (log, run_id, ctx, receiver) = started_run(name, 8, None).await;
        let writer = spawn_writer(&log, &run_id, receiver);
        (log, run_id, ctx, writer)
    }

    /// A tool's emits take places from the node's backlog: past its
    /// limit they wait, and the writer gives the places back once it has
    /// appended their events.
    #[tokio::test]
    async fn emits_wait_beyond_the_nodes_backlog_until_the_writer_stores_them() {
        let backlog = Arc::new(Semaphore::new(10));
        let (log, run_id, ctx, receiver) =
            started_run("backlogged", 1024, Some(backlog.clone())).await;
        let warning = |index: usize| Warning {
            message: format!("item {index}"),
        };
        // No writer yet: ten emits take the ten places, the eleventh waits.
        for index in 0..10 {
            ctx.emit(warning(index)).await.unwrap();
        }
        assert_eq!(backlog.available_permits(), 0);
        let waiting = tokio::time::timeout(Duration::from_millis(100), ctx.emit(warning(10)));
        assert!(waiting.await.is_err(), "the eleventh emit did not wait");
        let writer = spawn_writer(&log, &run_id, receiver);
        for index in 10..30 {
            ctx.emit(warning(index)).await.unwrap();
        }
        ctx.flush().await.unwrap();
        assert_eq!(backlog.available_permits(), 10, "every place given back");
        let stored = log.read(&run_id, 0, 100).await.unwrap();
        assert_eq!(stored.len(), 31, "started and 30 warnings");
        drop(ctx);
        writer.await.unwrap();
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

    /// Milestones on the runtime's clock (paused here, so durations are
    /// exact): the estimate comes from how long the steps really took; a
    /// count that arrives late, from another clone, is clamped to the
    /// highest so far (not refused); the log holds the reports in the
    /// order they were made, so its progress never goes back.
    #[tokio::test(start_paused = true)]
    async fn milestones_are_timed_by_the_runtime_and_clamped() {
        let (log, run_id, ctx, writer) = started_writer("milestones").await;
        let milestone = |done: u64| {
            Milestone::new("files")
                .message(format!("file {done}"))
                .done(done)
        };
        let first = ctx
            .milestone(Milestone::new("files").progress(0, 4))
            .await
            .unwrap();
        assert_eq!((first.progress, first.eta_ms), (0.0, None));
        tokio::time::advance(Duration::from_secs(3)).await;
        let other = ctx.clone();
        let second = other.milestone(milestone(2)).await.unwrap();
        assert_eq!(second.eta_ms, Some(3_000)); // 1.5 s a file, 2 to go
        tokio::time::advance(Duration::from_secs(3)).await;
        let late = ctx.milestone(milestone(1)).await.unwrap();
        assert_eq!(late.progress, 2.0);
        assert_eq!(late.message.as_deref(), Some("file 1"));
        assert_eq!(late.eta_ms, Some(6_000)); // no further in 6 s: 3 s a file
        let last = other.milestone(milestone(4)).await.unwrap();
        assert_eq!(
            (last.progress, last.total, last.eta_ms),
            (4.0, Some(4.0), Some(0))
        );
        drop((ctx, other));
        writer.await.unwrap();
        let logged: Vec<f64> = log
            .read(&run_id, 0, 10)
            .await
            .unwrap()
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Progress(progress) => Some(progress.progress),
                _ => None,
            })
            .collect();
        assert_eq!(logged, [0.0, 2.0, 2.0, 4.0]);
    }
}

/// The ask path: questions, their time limits, and their record in the log.
#[cfg(test)]
mod ask_tests {
    use async_trait::async_trait;
    use serde_json::json;
    use weir_core::{Completed, Content, EventKind, RunId, RunState, Warning};

    use super::*;
    use serde_json::Value;
    use weir_core::{FailureCode, RunError};

    use crate::input::{AskError, InputKind, InputRequest};
    use crate::{EmitError, EventLog, MemoryLog, RunOptions, Scheduler, SchedulerConfig, Tool};
    use weir_core::{InputEnded, InputOutcome};

    /// Asks for an elicitation with the time limit `timeout_ms`; `"handle"`
    /// says what it does when the ask fails: go on without an answer, or
    /// pass the error on with `?`. With `"twice"`, asks twice at once.
    struct Asker;

    #[async_trait]
    impl Tool for Asker {
        fn info(&self) -> crate::ToolInfo {
            crate::ToolInfo::new("asker", "asks", json!({"type": "object"}))
        }
        async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
            let timeout = Duration::from_millis(args["timeout_ms"].as_u64().unwrap_or(1_000));
            let question = json!({"message": "who are you?", "requestedSchema": {}});
            if args["fake"] == true {
                let faked = ctx.emit(InputEnded {
                    outcome: InputOutcome::Answered,
                });
                let refused = match faked.await {
                    Err(EmitError::InputReserved(kind)) => kind,
                    other => panic!("emit took a wait's end: {other:?}"),
                };
                ctx.emit(Warning {
                    message: refused.into(),
                })
                .await
                .unwrap();
                return Ok(Completed::default());
            }
            if args["twice"] == true {
                let (a, b) = tokio::join!(
                    ctx.ask_within(InputKind::Elicitation, question.clone(), timeout),
                    ctx.ask_within(InputKind::Elicitation, question, timeout),
                );
                return Ok(Completed {
                    structured: Some(json!([a?, b?])),
                    ..Completed::default()
                });
            }
            let answer = match ctx
                .ask_within(InputKind::Elicitation, question, timeout)
                .await
            {
                Err(AskError::TimedOut { .. }) if args["handle"] == true => json!("nobody"),
                answer => answer?,
            };
            Ok(Completed {
                content: vec![Content::text(answer.to_string())],
                structured: None,
            })
        }
    }

    /// A scheduler of [`Asker`] over a memory log.
    async fn scheduler() -> (Arc<dyn EventLog>, Scheduler) {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let config = SchedulerConfig {
            retention: None,
            ..SchedulerConfig::default()
        };
        let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Asker)], config)
            .await
            .unwrap();
        (log, scheduler)
    }

    /// Starts an `asker` run whose questions come out of the receiver.
    async fn ask(
        scheduler: &Scheduler,
        args: Value,
    ) -> (crate::RunHandle, mpsc::Receiver<InputRequest>) {
        let (questions, asked) = mpsc::channel(4);
        let options = RunOptions {
            input_requests: Some(questions),
            ..RunOptions::default()
        };
        let run = scheduler.submit("asker", args, options).await.unwrap();
        (run, asked)
    }

    async fn kinds(log: &Arc<dyn EventLog>, run_id: &RunId) -> Vec<&'static str> {
        let events = log.read(run_id, 0, 100).await.unwrap();
        events.iter().map(|event| event.kind.type_name()).collect()
    }

    /// A question nobody answers ends at its time limit with an error the
    /// tool can handle; the question is withdrawn (its reply closed), and
    /// the log shows the wait and how it ended.
    #[tokio::test(start_paused = true)]
    async fn an_unanswered_question_times_out_and_the_tool_can_go_on() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({"handle": true})).await;
        let run_id = run.run_id().clone();
        let question = asked.recv().await.unwrap();
        assert_eq!(question.kind, InputKind::Elicitation);
        let summary = log.get_run(&run_id).await.unwrap().unwrap();
        assert_eq!(summary.state, RunState::InputRequired);
        let terminal = run.finished().await.unwrap();
        assert!(question.reply.is_closed(), "the question was not withdrawn");
        let EventKind::Completed(completed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(completed.content, vec![Content::text("\"nobody\"")]);
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "input_required", "input_ended", "completed"]
        );
        let events = log.read(&run_id, 1, 2).await.unwrap();
        let EventKind::InputRequired(waiting) = &events[0].kind else {
            panic!("{events:?}")
        };
        assert_eq!(
            (
                waiting.input,
                waiting.message.as_deref(),
                waiting.timeout_ms
            ),
            (InputKind::Elicitation, Some("who are you?"), 1_000)
        );
        assert_eq!(
            events[1].kind,
            EventKind::InputEnded(InputEnded {
                outcome: InputOutcome::TimedOut
            })
        );
    }

    /// A tool that passes the timeout on fails the run, saying that the
    /// client did not answer in time.
    #[tokio::test(start_paused = true)]
    async fn a_timeout_the_tool_passes_on_fails_the_run_with_the_reason() {
        let (_log, scheduler) = scheduler().await;
        let (run, _asked) = ask(&scheduler, json!({"timeout_ms": 1_500})).await;
        let terminal = run.finished().await.unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(failed.error.code, FailureCode::Timeout);
        assert_eq!(
            failed.error.message,
            "the client did not answer the Elicitation request within 1.5s"
        );
        assert!(failed.error.remediation.is_some());
    }

    /// An answer ends the wait: the run is working again, and the tool has
    /// the answer.
    #[tokio::test(start_paused = true)]
    async fn an_answer_ends_the_wait() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({})).await;
        let run_id = run.run_id().clone();
        let question = asked.recv().await.unwrap();
        question
            .reply
            .send(Ok(json!({"action": "decline"})))
            .unwrap();
        let terminal = run.finished().await.unwrap();
        assert!(terminal.kind.is_terminal());
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "input_required", "input_ended", "completed"]
        );
        let ended = &log.read(&run_id, 2, 1).await.unwrap()[0];
        assert_eq!(
            ended.kind,
            EventKind::InputEnded(InputEnded {
                outcome: InputOutcome::Answered
            })
        );
    }

    /// Cancelling a run that waits for its caller ends it at once; its
    /// terminal event ends the wait.
    #[tokio::test(start_paused = true)]
    async fn a_cancel_reaches_a_run_that_waits_for_an_answer() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({"timeout_ms": 3_600_000})).await;
        let run_id = run.run_id().clone();
        let question = asked.recv().await.unwrap();
        assert!(scheduler.cancel(&run_id, "stop"));
        let terminal = run.finished().await.unwrap();
        assert!(
            matches!(terminal.kind, EventKind::Canceled(_)),
            "{terminal:?}"
        );
        assert!(question.reply.is_closed());
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "input_required", "canceled"]
        );
    }

    /// Two questions at once take turns, so the log's waits never overlap.
    #[tokio::test(start_paused = true)]
    async fn questions_of_one_run_take_turns() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({"twice": true})).await;
        let run_id = run.run_id().clone();
        for answer in ["a", "b"] {
            let question = asked.recv().await.unwrap();
            // The other one waits for its turn, unasked.
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(asked.try_recv().is_err());
            question.reply.send(Ok(json!(answer))).unwrap();
        }
        let terminal = run.finished().await.unwrap();
        assert!(
            matches!(terminal.kind, EventKind::Completed(_)),
            "{terminal:?}"
        );
        assert_eq!(
            kinds(&log, &run_id).await,
            [
                "started",
                "input_required",
                "input_ended",
                "input_required",
                "input_ended",
                "completed"
            ]
        );
    }

    /// Without anyone to answer, the ask fails at once and the log shows no
    /// wait; a tool cannot write the waits itself.
    #[tokio::test(start_paused = true)]
    async fn no_responder_fails_at_once_and_tools_cannot_fake_a_wait() {
        let (log, scheduler) = scheduler().await;
        let run = scheduler
            .submit("asker", json!({}), RunOptions::default())
            .await
            .unwrap();
        let run_id = run.run_id().clone();
        let terminal = run.finished().await.unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert!(
            failed.error.message.contains("no client can answer"),
            "{failed:?}"
        );
        assert_eq!(kinds(&log, &run_id).await, ["started", "failed"]);

        let (run, _asked) = ask(&scheduler, json!({"fake": true})).await;
        let run_id = run.run_id().clone();
        run.finished().await.unwrap();
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "warning", "completed"]
        );
        let refused = &log.read(&run_id, 1, 1).await.unwrap()[0];
        assert_eq!(
            refused.kind,
            EventKind::Warning(Warning {
                message: "input_ended".into()
            })
        );
    }
}
