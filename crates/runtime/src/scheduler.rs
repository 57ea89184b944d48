//! The scheduler: turns tool calls into runs and sees each one to exactly one
//! terminal event, whatever the tool does.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weir_core::{
    Canceled, EventKind, Failed, FailureCode, RunError, RunEvent, RunId, RunState, Started,
};

use crate::context::{Command, RunContext, now_ms, write_run};
use crate::input::{InputRequest, InputSlot};
use crate::log::{EventLog, LogError, NewRun, RunFilter};
use crate::tool::{Tool, ToolInfo};

/// Events a run may have queued for its writer before `emit` waits: the bound
/// that keeps a fast tool's memory flat when the store is slower.
const EMIT_BUFFER: usize = 1024;

/// How the scheduler runs things.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// This node's name, written into `started` and used to find the runs
    /// this node must close after a crash.
    pub node: String,
    /// Most runs executing at once, over all tools.
    pub max_concurrent: usize,
    /// Most runs of one tool at once, unless the tool sets its own limit.
    pub max_per_tool: usize,
    /// Most runs waiting for a slot; beyond it `submit` answers
    /// [`SubmitError::Busy`].
    pub max_queue: usize,
    /// Time limit of a run when neither the call nor the tool sets one.
    pub default_timeout: Duration,
    /// How long finished runs (and their artifacts) are kept; forever when
    /// `None`.
    pub retention: Option<Duration>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            node: "local".into(),
            max_concurrent: 16,
            max_per_tool: 16,
            max_queue: 256,
            default_timeout: Duration::from_secs(30 * 60),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
        }
    }
}

/// Per-call settings.
#[derive(Debug, Default)]
pub struct RunOptions {
    /// Time limit of this run, counted from when it starts executing.
    pub timeout: Option<Duration>,
    /// Use this id instead of a fresh one.
    pub run_id: Option<RunId>,
    /// Where the run's questions to its caller go (`RunContext::ask`);
    /// without it, the tool's questions fail with `AskError::NoResponder`.
    pub input_requests: Option<mpsc::Sender<InputRequest>>,
}

/// Why a call did not become a run.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// No tool of that name is registered.
    #[error("unknown tool {name:?}; available tools: {available}")]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The names that exist, comma-separated.
        available: String,
    },
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for tool {tool:?}: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The queue is full.
    #[error(
        "weir is busy: {queued} runs are already waiting (the queue limit); retry in about {}s, or raise the queue limit",
        retry_after.as_secs().max(1)
    )]
    Busy {
        /// Runs waiting now.
        queued: usize,
        /// A reasonable time to wait before retrying.
        retry_after: Duration,
    },
    /// The store refused to register the run.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Why the scheduler could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Two tools share a name.
    #[error("two tools are named {0:?}; tool names must be unique")]
    DuplicateTool(String),
    /// Recovery of interrupted runs failed.
    #[error("could not close the runs a previous stop interrupted: {0}")]
    Recovery(#[from] LogError),
}

/// A submitted run.
#[derive(Debug)]
pub struct RunHandle {
    run_id: RunId,
    finished: JoinHandle<Option<RunEvent>>,
}

impl RunHandle {
    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Waits for the run to end; returns its terminal event, or `None` if the
    /// store would not take it (start-up recovery will close the run).
    /// Dropping the handle instead leaves the run going.
    pub async fn finished(self) -> Option<RunEvent> {
        self.finished.await.ok().flatten()
    }
}

/// Executes tools as runs. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    log: Arc<dyn EventLog>,
    tools: BTreeMap<String, Registered>,
    all_slots: Arc<Semaphore>,
    queued: AtomicUsize,
    config: SchedulerConfig,
    active: Mutex<HashMap<RunId, Cancel>>,
}

struct Registered {
    tool: Arc<dyn Tool>,
    info: ToolInfo,
    slots: Arc<Semaphore>,
}

/// A run's cancellation: the token and who pulled it; and where its
/// questions to the caller go.
#[derive(Clone, Default)]
struct Cancel {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    inputs: InputSlot,
}

impl Cancel {
    fn reason(&self) -> String {
        self.reason
            .lock()
            .expect("cancel reason lock")
            .clone()
            .unwrap_or_else(|| "canceled".into())
    }
}

/// A slot for the run's tool and one of the global slots.
struct Slots {
    _tool: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

impl Scheduler {
    /// Registers `tools`, closes the runs this node left open when it last
    /// stopped (see [`recover_interrupted`]) and starts the retention sweep.
    pub async fn start(
        log: Arc<dyn EventLog>,
        tools: Vec<Arc<dyn Tool>>,
        config: SchedulerConfig,
    ) -> Result<Scheduler, StartError> {
        let mut registry = BTreeMap::new();
        for tool in tools {
            let info = tool.info();
            let limit = info.max_concurrent.unwrap_or(config.max_per_tool).max(1);
            let name = info.name.clone();
            let registered = Registered {
                tool,
                info,
                slots: Arc::new(Semaphore::new(limit)),
            };
            if registry.insert(name.clone(), registered).is_some() {
                return Err(StartError::DuplicateTool(name));
            }
        }
        recover_interrupted(&*log, &config.node).await?;
        let inner = Arc::new(Inner {
            log,
            tools: registry,
            all_slots: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            queued: AtomicUsize::new(0),
            config,
            active: Mutex::default(),
        });
        if let Some(retention) = inner.config.retention {
            spawn_retention(Arc::downgrade(&inner), retention);
        }
        Ok(Scheduler { inner })
    }

    /// The registered tools, by name.
    pub fn tools(&self) -> impl Iterator<Item = &ToolInfo> {
        self.inner.tools.values().map(|registered| &registered.info)
    }

    /// The event log runs are written to.
    pub fn log(&self) -> &Arc<dyn EventLog> {
        &self.inner.log
    }

    /// How long finished runs are kept (`None`: forever).
    pub fn retention(&self) -> Option<Duration> {
        self.inner.config.retention
    }

    /// Runs waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.inner.queued.load(Ordering::SeqCst)
    }

    /// Accepts a call as a run: checks its arguments against the tool's input
    /// schema, registers it (pending), then executes it as soon as a slot is
    /// free. Fails at once, never hangs, when the queue is
    /// full.
    pub async fn submit(
        &self,
        tool: &str,
        arguments: Value,
        options: RunOptions,
    ) -> Result<RunHandle, SubmitError> {
        let inner = &self.inner;
        let registered = inner
            .tools
            .get(tool)
            .ok_or_else(|| SubmitError::UnknownTool {
                name: tool.to_owned(),
                available: inner.tools.keys().cloned().collect::<Vec<_>>().join(", "),
            })?;
        weir_core::check_arguments(&registered.info.input_schema, &arguments).map_err(
            |message| SubmitError::InvalidArguments {
                tool: tool.to_owned(),
                message,
            },
        )?;
        let slots = match try_take_slots(&registered.slots, &inner.all_slots) {
            Some(slots) => Some(slots),
            None => {
                let max = inner.config.max_queue;
                inner
                    .queued
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                        (queued < max).then_some(queued + 1)
                    })
                    .map_err(|queued| SubmitError::Busy {
                        queued,
                        retry_after: Duration::from_secs(1),
                    })?;
                None
            }
        };
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let created = inner
            .log
            .create_run(NewRun {
                run_id: run_id.clone(),
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                node: inner.config.node.clone(),
                ts: now_ms(),
            })
            .await;
        if let Err(error) = created {
            if slots.is_none() {
                inner.queued.fetch_sub(1, Ordering::SeqCst);
            }
            return Err(error.into());
        }
        let cancel = Cancel::default();
        *cancel.inputs.lock().expect("input slot lock") = options.input_requests;
        inner
            .active
            .lock()
            .expect("active runs lock")
            .insert(run_id.clone(), cancel.clone());
        let timeout = options
            .timeout
            .or(registered.info.timeout)
            .unwrap_or(inner.config.default_timeout);
        let inner = self.inner.clone();
        let id = run_id.clone();
        let tool = tool.to_owned();
        let finished = tokio::spawn(async move {
            let terminal = execute(&inner, &id, &tool, arguments, timeout, &cancel, slots).await;
            inner.active.lock().expect("active runs lock").remove(&id);
            terminal
        });
        Ok(RunHandle { run_id, finished })
    }

    /// Cancels a run executing or queued on this node. Returns `false` when
    /// no such run is active here (unknown, or already ended).
    pub fn cancel(&self, run_id: &RunId, reason: &str) -> bool {
        let active = self.inner.active.lock().expect("active runs lock");
        let Some(cancel) = active.get(run_id) else {
            return false;
        };
        cancel
            .reason
            .lock()
            .expect("cancel reason lock")
            .get_or_insert_with(|| reason.to_owned());
        cancel.token.cancel();
        true
    }

    /// Stops this node cleanly: cancels every active run with `reason` and
    /// waits up to `grace` for their terminal events to be written. Runs
    /// still open after that are closed as `interrupted` at the next start.
    /// Returns how many runs were still active when it gave up waiting.
    pub async fn shutdown(&self, reason: &str, grace: Duration) -> usize {
        let active: Vec<RunId> = self
            .inner
            .active
            .lock()
            .expect("active runs lock")
            .keys()
            .cloned()
            .collect();
        for run_id in &active {
            self.cancel(run_id, reason);
        }
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let left = self.inner.active.lock().expect("active runs lock").len();
            if left == 0 || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Deletes the finished runs older than the retention period now.
    pub async fn sweep_expired(&self) -> Result<usize, LogError> {
        sweep(&self.inner).await
    }
}

fn new_run_id() -> RunId {
    RunId::parse(&uuid::Uuid::now_v7().simple().to_string()).expect("a uuid is a valid run id")
}

fn try_take_slots(tool: &Arc<Semaphore>, global: &Arc<Semaphore>) -> Option<Slots> {
    let tool = tool.clone().try_acquire_owned().ok()?;
    let global = global.clone().try_acquire_owned().ok()?;
    Some(Slots {
        _tool: tool,
        _global: global,
    })
}

/// Waits for a slot of the tool first, then a global one, so a run blocked
/// on its own tool's limit does not hold a global slot others could use.
async fn take_slots(tool: &Arc<Semaphore>, global: &Arc<Semaphore>) -> Slots {
    let tool = tool.clone().acquire_owned().await.expect("never closed");
    let global = global.clone().acquire_owned().await.expect("never closed");
    Slots {
        _tool: tool,
        _global: global,
    }
}

/// One run from queue to terminal event.
async fn execute(
    inner: &Arc<Inner>,
    run_id: &RunId,
    tool: &str,
    arguments: Value,
    timeout: Duration,
    cancel: &Cancel,
    slots: Option<Slots>,
) -> Option<RunEvent> {
    let registered = &inner.tools[tool];
    let slots = match slots {
        Some(slots) => Some(slots),
        None => {
            let waited = tokio::select! {
                slots = take_slots(&registered.slots, &inner.all_slots) => Some(slots),
                () = cancel.token.cancelled() => None,
            };
            inner.queued.fetch_sub(1, Ordering::SeqCst);
            waited
        }
    };
    let (commands, receiver) = mpsc::channel(EMIT_BUFFER);
    let writer = tokio::spawn(write_run(
        inner.log.clone(),
        run_id.clone(),
        0,
        receiver,
        cancel.token.clone(),
    ));
    let started = Started {
        tool: tool.to_owned(),
        arguments: arguments.clone(),
        node: inner.config.node.clone(),
    };
    // The receiver lives until the writer ends, which needs a terminal event.
    let _ = commands.send(Command::Emit(started.into())).await;
    let terminal = match slots {
        // Cancelled while queued: the log still gets `started` first.
        None => Canceled {
            reason: cancel.reason(),
        }
        .into(),
        Some(_slots) => {
            let ctx = RunContext::new(
                run_id.clone(),
                commands.clone(),
                cancel.token.clone(),
                Some(tokio::time::Instant::now() + timeout),
                inner.log.clone(),
                cancel.inputs.clone(),
            );
            run_tool(registered.tool.clone(), ctx, arguments, timeout, cancel).await
        }
    };
    let _ = commands.send(Command::Emit(terminal)).await;
    drop(commands);
    writer.await.ok().flatten()
}

/// Executes the tool in a task of its own (so a panic is caught) and decides
/// the terminal event: its result, a panic, the deadline or a cancel.
async fn run_tool(
    tool: Arc<dyn Tool>,
    ctx: RunContext,
    arguments: Value,
    timeout: Duration,
    cancel: &Cancel,
) -> EventKind {
    let mut work = tokio::spawn(async move { tool.run(ctx, arguments).await });
    tokio::select! {
        biased;
        joined = &mut work => match joined {
            Ok(Ok(completed)) => completed.into(),
            Ok(Err(error)) => Failed { error }.into(),
            Err(join_error) => Failed { error: panic_error(join_error) }.into(),
        },
        () = cancel.token.cancelled() => {
            work.abort();
            let _ = work.await; // the tool's future is dropped: its cleanup has run
            Canceled { reason: cancel.reason() }.into()
        }
        () = tokio::time::sleep(timeout) => {
            cancel.token.cancel(); // tasks the tool spawned see it too
            work.abort();
            let _ = work.await;
            Failed {
                error: RunError::new(
                    FailureCode::Timeout,
                    format!("the run exceeded its time limit of {}", weir_core::human_duration(timeout.as_millis() as u64)),
                )
                .with_remediation("call again with a larger timeout, or ask for less work per call"),
            }
            .into()
        }
    }
}

fn panic_error(join_error: tokio::task::JoinError) -> RunError {
    let message = match join_error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-text panic payload".into()),
        Err(join_error) => join_error.to_string(),
    };
    RunError::new(
        FailureCode::Panicked,
        format!("the tool panicked: {message}"),
    )
    .with_remediation("this is a bug in the tool; report it with the arguments that caused it")
}

/// Closes the runs `node` left open when it stopped: each gets `failed` with
/// code `interrupted` (and a `started` first if it never got one). Returns how
/// many. The scheduler calls it at start, before accepting runs.
pub async fn recover_interrupted(log: &dyn EventLog, node: &str) -> Result<usize, LogError> {
    let open = log
        .list_runs(&RunFilter {
            states: vec![RunState::Pending, RunState::Working],
            node: Some(node.to_owned()),
            ..RunFilter::default()
        })
        .await?;
    for run in &open {
        let ts = now_ms();
        let mut kinds: Vec<EventKind> = Vec::with_capacity(2);
        let when = if run.state == RunState::Pending {
            kinds.push(
                Started {
                    tool: run.tool.clone(),
                    arguments: run.arguments.clone(),
                    node: run.node.clone(),
                }
                .into(),
            );
            "while it was queued"
        } else {
            "while it was running"
        };
        kinds.push(
            Failed {
                error: RunError::new(
                    FailureCode::Interrupted,
                    format!("interrupted: the server stopped {when}"),
                )
                .with_remediation(
                    "call the tool again; the events written before the stop are kept",
                ),
            }
            .into(),
        );
        let events: Vec<RunEvent> = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| RunEvent {
                run_id: run.run_id.clone(),
                seq: run.events + i as u64,
                ts,
                kind,
            })
            .collect();
        log.append(events.into()).await?;
    }
    Ok(open.len())
}

async fn sweep(inner: &Inner) -> Result<usize, LogError> {
    let Some(retention) = inner.config.retention else {
        return Ok(0);
    };
    let cutoff = now_ms().saturating_sub(retention.as_millis() as u64);
    inner.log.delete_finished_before(cutoff).await
}

/// Sweeps every tenth of the retention period (between 1 s and 1 h) until
/// the scheduler is dropped.
fn spawn_retention(inner: Weak<Inner>, retention: Duration) {
    let every = (retention / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = inner.upgrade() else { break };
            if let Err(error) = sweep(&inner).await {
                tracing::warn!(%error, "retention sweep failed; will retry");
            }
        }
    });
}
