//! The scheduler: turns tool calls into runs and sees each one to exactly one
//! terminal event, whatever the tool does.
//!
//! `mod.rs` holds the [`Scheduler`], its settings and errors; `submit.rs`
//! admits a call (arguments, slots, the bounded queue); `run.rs` is a run's
//! task, from its queue place to its terminal event (timeout, cancel, panic
//! capture); `recovery.rs` closes the runs a stopped node left open, and
//! `retention.rs` deletes old ones. `peers.rs` is the seam to other nodes
//! sharing the store (a cancel for a run executing elsewhere); a single
//! node has none.

mod peers;
mod recovery;
mod retention;
mod run;
mod slots;
mod submit;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use weir_core::RunId;

pub use crate::handle::{RunHandle, SubmitError};
use crate::input::{InputRequest, InputSlot};
use crate::log::{EventLog, LogError};
use crate::tool::{Tool, ToolInfo};

pub use peers::{Offer, Peers};
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
    /// `None` when the server has no credentials. A child run
    /// (`RunContext::call`) has its parent's, whatever this says.
    pub owner: Option<String>,
    /// The program that asks for the run, as it names itself (MCP's
    /// `clientInfo`), kept in its summary for people to read. A child run
    /// has its parent's, whatever this says.
    pub client: Option<String>,
    /// Stored with the run for the front end that accepted it
    /// ([`NewRun::resume_record`](crate::log::NewRun::resume_record)); a
    /// child run has none.
    pub resume_record: Option<String>,
    /// The tools the caller may run (its credential's scope); `None`: every
    /// registered tool. A tool outside it is refused exactly as an unknown
    /// one ([`SubmitError::UnknownTool`], naming only the allowed tools).
    /// A child run (`RunContext::call`) has its parent's, whatever this
    /// says, so a scoped caller reaches no more through a tool that calls
    /// tools (a plan, an agent) than it does directly.
    pub allowed_tools: Option<Arc<BTreeSet<String>>>,
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

/// Executes tools as runs. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    log: Arc<dyn EventLog>,
    /// Fixed at start but for [`Scheduler::replace_tools`]; a run holds
    /// its tool's entry from admission to its end.
    tools: std::sync::RwLock<BTreeMap<String, Arc<Registered>>>,
    all_slots: Arc<Semaphore>,
    /// Places for events emitted and not yet stored, every run's together
    /// ([`run::BACKLOG`]).
    backlog: Arc<Semaphore>,
    queued: AtomicUsize,
    config: SchedulerConfig,
    active: Mutex<HashMap<RunId, Cancel>>,
    /// The other nodes sharing the store, when there are any.
    peers: OnceLock<Arc<dyn Peers>>,
}

struct Registered {
    tool: Arc<dyn Tool>,
    info: ToolInfo,
    slots: Arc<Semaphore>,
}

impl Registered {
    /// `tool`, with `slots`, or its own (its `max_concurrent`, else
    /// `max_per_tool`).
    fn new(tool: Arc<dyn Tool>, max_per_tool: usize, slots: Option<Arc<Semaphore>>) -> Registered {
        let info = tool.info();
        let limit = info.max_concurrent.unwrap_or(max_per_tool).max(1);
        Registered {
            tool,
            info,
            slots: slots.unwrap_or_else(|| Arc::new(Semaphore::new(limit))),
        }
    }
}

impl Inner {
    /// The tool registered as `name` now.
    fn tool(&self, name: &str) -> Option<Arc<Registered>> {
        self.registry().get(name).cloned()
    }

    fn registry(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Registered>>> {
        self.tools
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `arguments` of `tool` as the log keeps them: the tool's own
    /// [`Tool::redact`], which redacts the arguments of the tools it holds
    /// (a plan's steps) through this registry.
    fn redact_arguments(&self, tool: &str, arguments: &serde_json::Value) -> serde_json::Value {
        crate::tool::Redactor::redact(self, tool, arguments)
    }
}

impl crate::tool::Redactor for Inner {
    fn redact(&self, tool: &str, arguments: &serde_json::Value) -> serde_json::Value {
        match self.tool(tool) {
            Some(registered) => registered.tool.redact(&registered.info, arguments, self),
            None => {
                let mut stored = arguments.clone();
                crate::tool::redact_value(&mut stored);
                stored
            }
        }
    }
}

/// A run's cancellation: the token and who pulled it; where its questions
/// to the caller go; the child runs it started (`RunContext::call`), and
/// whether it has ended.
#[derive(Clone, Default)]
struct Cancel {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The reason a child run gives when its token fired because its
    /// parent's did (the parent was cancelled or timed out), which sets no
    /// reason of its own on the child.
    inherited: Option<Arc<str>>,
    inputs: InputSlot,
    children: Arc<Mutex<Vec<Cancel>>>,
    /// Cancelled once the run's terminal event is written (or the store
    /// refused it): what a parent waits for before it ends.
    ended: CancellationToken,
}

impl Cancel {
    fn reason(&self) -> String {
        self.reason
            .lock()
            .expect("cancel reason lock")
            .clone()
            .or_else(|| self.inherited.as_deref().map(str::to_owned))
            .unwrap_or_else(|| "canceled".into())
    }

    /// Cancels with `reason` unless a reason is set already.
    fn pull(&self, reason: &str) {
        self.reason
            .lock()
            .expect("cancel reason lock")
            .get_or_insert_with(|| reason.to_owned());
        self.token.cancel();
    }

    /// A child's cancellation: its token fires with this one's (a
    /// cancelled or timed-out parent stops its children).
    fn child(&self, parent: &RunId) -> Cancel {
        Cancel {
            token: self.token.child_token(),
            inherited: Some(format!("its parent run {parent} was stopped").into()),
            inputs: Arc::new(Mutex::new(
                self.inputs.lock().expect("input slot lock").clone(),
            )),
            ..Cancel::default()
        }
    }

    /// Stops the children still running (`reason`) and waits until each
    /// has written its terminal event: a parent never ends before its
    /// children.
    async fn end_children(&self, reason: &str) {
        let children = std::mem::take(&mut *self.children.lock().expect("children lock"));
        for child in &children {
            if !child.ended.is_cancelled() {
                child.pull(reason);
            }
        }
        for child in &children {
            child.ended.cancelled().await;
        }
    }
}

/// What a run needs to start children: the scheduler (weakly: a run must
/// not keep a stopped scheduler alive), its own cancellation, its owner and
/// the tools its caller may run.
/// Held by its [`RunContext`](crate::RunContext).
#[derive(Clone)]
pub(crate) struct Lineage {
    scheduler: std::sync::Weak<Inner>,
    run_id: RunId,
    cancel: Cancel,
    owner: Option<String>,
    client: Option<String>,
    /// Inherited by every child, as the owner is.
    allowed_tools: Option<Arc<BTreeSet<String>>>,
    /// This run's tool, then its ancestors', its parent's first.
    tools: Arc<[String]>,
    /// Lent to one of its children at a time (slots.rs).
    lane: Arc<Semaphore>,
    /// Its parent's lane, for a child.
    parent_lane: Option<Arc<Semaphore>>,
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
            let registered = Registered::new(tool, config.max_per_tool, None);
            let name = registered.info.name.clone();
            if registry
                .insert(name.clone(), Arc::new(registered))
                .is_some()
            {
                return Err(StartError::DuplicateTool(name));
            }
        }
        recover_interrupted(&*log, &config.node).await?;
        let inner = Arc::new(Inner {
            log,
            tools: std::sync::RwLock::new(registry),
            all_slots: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            backlog: Arc::new(Semaphore::new(run::BACKLOG)),
            queued: AtomicUsize::new(0),
            config,
            active: Mutex::default(),
            peers: OnceLock::new(),
        });
        if let Some(retention) = inner.config.retention {
            retention::spawn(Arc::downgrade(&inner), retention);
        }
        Ok(Scheduler { inner })
    }

    /// The registered tools now, by name.
    pub fn tools(&self) -> impl Iterator<Item = ToolInfo> + use<> {
        let registry = self.inner.registry();
        let infos: Vec<ToolInfo> = registry
            .values()
            .map(|registered| registered.info.clone())
            .collect();
        infos.into_iter()
    }

    /// The text fields of tool `name` ([`ToolInfo::text_fields`]), if it
    /// is registered: without cloning every tool's description, as
    /// [`Scheduler::tools`] does (schemas and all, once per call followed).
    pub fn text_fields(&self, name: &str) -> Option<Vec<String>> {
        let registry = self.inner.registry();
        registry
            .get(name)
            .map(|registered| registered.info.text_fields.clone())
    }

    /// Replaces the tools named `retired` with `tools` (an upstream server
    /// whose list changed): a call admitted from now on finds the new set;
    /// a run admitted before keeps the tool it was admitted with until it
    /// ends. A tool keeping its name keeps its slots (runs of it in flight
    /// still count). Returns the names of `tools` left out because another
    /// tool, not retired, has them.
    pub fn replace_tools(
        &self,
        retired: &BTreeSet<String>,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Vec<String> {
        let mut registry = self
            .inner
            .tools
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut old: BTreeMap<String, Arc<Registered>> = retired
            .iter()
            .filter_map(|name| registry.remove_entry(name))
            .collect();
        let mut taken = Vec::new();
        for tool in tools {
            let name = tool.info().name;
            if registry.contains_key(&name) {
                taken.push(name);
                continue;
            }
            let slots = old.remove(&name).map(|old| old.slots.clone());
            let registered = Registered::new(tool, self.inner.config.max_per_tool, slots);
            registry.insert(name, Arc::new(registered));
        }
        taken
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

    /// Cancels a run executing or queued on this node, or, when it is not
    /// active here and other nodes share the store ([`Scheduler::join_peers`]),
    /// asks them to. Returns `false` when no such run is active here and
    /// there is nobody else to ask (unknown, or already ended).
    pub fn cancel(&self, run_id: &RunId, reason: &str) -> bool {
        if self.cancel_here(run_id, reason) {
            return true;
        }
        match self.inner.peers.get() {
            Some(peers) => {
                peers.cancel_elsewhere(run_id, reason);
                true
            }
            None => false,
        }
    }

    /// Cancels a run executing or queued on this node only. Returns `false`
    /// when no such run is active here.
    pub fn cancel_here(&self, run_id: &RunId, reason: &str) -> bool {
        let active = self.inner.active.lock().expect("active runs lock");
        let Some(cancel) = active.get(run_id) else {
            return false;
        };
        cancel.pull(reason);
        true
    }

    /// Connects this node to the others sharing its store, once: from then
    /// on a cancel for a run that is not active here goes to them. A second
    /// call is ignored.
    pub fn join_peers(&self, peers: Arc<dyn Peers>) {
        let _ = self.inner.peers.set(peers);
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
