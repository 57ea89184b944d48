//! The scheduler: turns tool calls into runs and sees each one to exactly one
//! terminal event, whatever the tool does.
//!
//! `mod.rs` holds the [`Scheduler`], its settings and errors; `submit.rs`
//! admits a call (arguments, slots, the bounded queue); `run.rs` is a run's
//! task, from its queue place to its terminal event (timeout, cancel, panic
//! capture); `recovery.rs` closes the runs a stopped node left open, and
//! `retention.rs` deletes old ones.

mod recovery;
mod retention;
mod run;
mod slots;
mod submit;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use weir_core::{RunEvent, RunId};

use crate::input::{InputRequest, InputSlot};
use crate::log::{EventLog, LogError};
use crate::tool::{Tool, ToolInfo};

pub use recovery::recover_interrupted;

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
    /// Who starts the run (the caller's credential), kept in its summary;
    /// `None` when the server has no credentials.
    pub owner: Option<String>,
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
            retention::spawn(Arc::downgrade(&inner), retention);
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
        retention::sweep(&self.inner).await
    }
}
