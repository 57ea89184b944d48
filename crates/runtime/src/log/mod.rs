//! The event log: one trait, several stores.
//!
//! Every store keeps the same promises, which the contract suite (feature
//! `store-contract`) checks on each of them:
//! - an append is all-or-nothing, checked against the run's [`LogTail`]
//!   (dense seq, `started` first, nothing after the terminal event), and
//!   durable (as far as the store goes) when it returns;
//! - appended events reach live subscribers only after they are stored, so a
//!   subscriber can always fall back to reading the store;
//! - [`Subscription`] replays from any seq and then follows live, with no gap
//!   and no duplicate at the seam, and re-reads the store when it falls behind.

pub mod kit;
mod live;
mod memory;
mod prefix;
mod subscription;
#[cfg(test)]
mod tests;

use std::ops::Range;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use weir_core::{ArtifactRef, LogTail, RunEvent, RunId, RunState, Seq, Violation};

pub use live::{Batch, LIVE_RUN_BYTES, LIVE_TOTAL_BYTES, LiveHub, SharedEvent};
pub use memory::MemoryLog;
pub use prefix::{FindRunError, MIN_RUN_PREFIX, find_run};
pub use subscription::Subscription;

/// A run registered before it starts: it is listed as `pending` with an empty
/// log until its `started` event is appended.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// The id it will have.
    pub run_id: RunId,
    /// The tool it will execute.
    pub tool: String,
    /// Its arguments, as they may be read back: with the values of the
    /// tool's secret fields redacted ([`ToolInfo::with_secret_fields`]).
    ///
    /// [`ToolInfo::with_secret_fields`]: crate::ToolInfo::with_secret_fields
    pub arguments: Value,
    /// The node that accepted it and will execute it.
    pub node: String,
    /// When it was accepted, Unix milliseconds.
    pub ts: u64,
    /// Who started it: the name of the credential its caller presented;
    /// `None` when the server has no credentials (a local client, or HTTP
    /// without tokens). Servers show a run only to its owner and to admins.
    pub owner: Option<String>,
    /// The program that asked for it, as it named itself (MCP's
    /// `clientInfo`: `name/version`); `None` when it did not say. Shown to
    /// people, never trusted: unlike the owner, a client names itself. A
    /// child run has its parent's.
    pub client: Option<String>,
    /// The run that started this one through its
    /// [`RunContext::call`](crate::RunContext::call) (a child run: it
    /// inherits its parent's owner and ends when its parent does); `None`
    /// for a run a client started.
    pub parent: Option<RunId>,
    /// What the front end that accepted the run needs to serve its caller
    /// again from another node, as text the store keeps and hands back
    /// ([`EventLog::resume_record`]) but never reads; `None` when there is
    /// nothing to resume. The MCP server keeps here which session and
    /// request a 2025-11-25 call stream belongs to, so that any node can
    /// resume it from `Last-Event-ID`, not only the one holding the session.
    pub resume_record: Option<String>,
}

/// What a store knows about a run without reading its events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    /// The run.
    pub run_id: RunId,
    /// The tool it executes.
    pub tool: String,
    /// The arguments it was called with.
    pub arguments: Value,
    /// The node executing it.
    pub node: String,
    /// Its reduced state.
    pub state: RunState,
    /// Number of events in its log (the next seq).
    pub events: Seq,
    /// When it was accepted, Unix milliseconds.
    pub created_ts: u64,
    /// When its last event was written.
    pub updated_ts: u64,
    /// When its terminal event was written.
    pub finished_ts: Option<u64>,
    /// Who started it (see [`NewRun::owner`]); left out of its JSON when
    /// it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The program that asked for it (see [`NewRun::client`]); left out of
    /// its JSON when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The run that started it (see [`NewRun::parent`]); left out of its
    /// JSON when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<RunId>,
}

impl RunSummary {
    /// The tail of this run's log.
    pub fn tail(&self) -> LogTail {
        LogTail {
            next_seq: self.events,
            state: self.state,
        }
    }
}

/// Which runs to list, newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFilter {
    /// Only runs in one of these states (all when empty).
    pub states: Vec<RunState>,
    /// Only runs of this tool.
    pub tool: Option<String>,
    /// Only runs executed by this node.
    pub node: Option<String>,
    /// Only runs started by this owner (runs without one never match).
    pub owner: Option<String>,
    /// At most this many (all when `None`).
    pub limit: Option<usize>,
}

impl RunFilter {
    /// Whether `run` passes.
    pub fn matches(&self, run: &RunSummary) -> bool {
        (self.states.is_empty() || self.states.contains(&run.state))
            && self.tool.as_ref().is_none_or(|tool| *tool == run.tool)
            && self.node.as_ref().is_none_or(|node| *node == run.node)
            && self
                .owner
                .as_ref()
                .is_none_or(|owner| run.owner.as_ref() == Some(owner))
    }
}

/// Why a store refused or failed an operation.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// No run has this id.
    #[error("no run {0}: list runs with `weir runs list` to find its id")]
    UnknownRun(RunId),
    /// A run with this id exists already.
    #[error("run {0} exists already; run ids are unique")]
    RunExists(RunId),
    /// The append would break the log's invariants.
    #[error("append to run {run_id} refused: {violation}")]
    Invalid {
        /// The run.
        run_id: RunId,
        /// What was wrong.
        violation: Violation,
    },
    /// The first event of a run's log must be `started` (or the run be
    /// created with [`EventLog::create_run`] first).
    #[error("run {0} is unknown; its first append must start with a `started` event")]
    NotStarted(RunId),
    /// Artifacts are written once.
    #[error(
        "artifact {name:?} of run {run_id} exists already; artifacts are write-once, use a new name"
    )]
    ArtifactExists {
        /// The run.
        run_id: RunId,
        /// The artifact's name.
        name: String,
    },
    /// No such artifact.
    #[error("run {run_id} has no artifact {name:?}")]
    UnknownArtifact {
        /// The run.
        run_id: RunId,
        /// The artifact's name.
        name: String,
    },
    /// An artifact name that cannot be used.
    #[error(
        "invalid artifact name {0:?}: use 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' or '-', not starting with '.'"
    )]
    InvalidArtifactName(String),
    /// The store itself failed (disk, database, network).
    #[error("event log storage failed while {doing}: {message}")]
    Storage {
        /// What the store was doing.
        doing: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// A durable, replayable log of run events (docs/design.md, "Stores").
///
/// Implementations: [`MemoryLog`] for tests and ephemeral use, `SqliteLog`
/// (crate `weir-store-sqlite`) as the embedded default. A networked store
/// (Redis) implements the same trait and publishes what it reads into its
/// [`LiveHub`]. Every store passes the same contract suite
/// (`weir_runtime::store_contract`, feature `store-contract`).
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Registers a run that has not started yet (state `pending`).
    async fn create_run(&self, run: NewRun) -> Result<(), LogError>;

    /// Appends events of one run, all or nothing; they must continue its log
    /// densely. Appending `started` at seq 0 to an unknown run creates it.
    /// Returns once the events are stored, after publishing them live. A
    /// [`Batch`] is shared, not copied: the store keeps or forwards the same
    /// allocation its live subscribers get.
    async fn append(&self, events: Batch) -> Result<(), LogError>;

    /// Registers `run` and appends its first events (`started` at seq 0,
    /// then whatever followed it), all or nothing where the store can:
    /// a run whose tool starts at once is then stored in one write, not a
    /// registration and an append one after the other, and its first
    /// events reach subscribers a commit sooner. Refused like
    /// [`EventLog::create_run`] when the run exists, and like the first
    /// append of an unknown run when `events` do not start it
    /// ([`kit::check_start`]). The default registers, then appends.
    async fn start_run(&self, run: NewRun, events: Batch) -> Result<(), LogError> {
        kit::check_start(&run, &events)?;
        self.create_run(run).await?;
        self.append(events).await
    }

    /// Whether a run's writer may issue its next append while the last is
    /// pending: true only when `append` queues its batch before its future
    /// first waits, so appends issued one after another are applied in that
    /// order. If one fails, those issued after it must fail too (they do not
    /// follow the stored log), and the writer appends them again.
    fn queues_appends_in_order(&self) -> bool {
        false
    }

    /// Up to `limit` events of `run_id` from seq `from` on, in order.
    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError>;

    /// Events of `run_id` from seq `from`: replayed from the store, then live,
    /// ending after the terminal event.
    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription;

    /// The [`NewRun::resume_record`] run `run_id` was registered with:
    /// `None` when it had none (or was created by its `started` event),
    /// [`LogError::UnknownRun`] when there is no such run. Kept apart from
    /// [`RunSummary`] because it is for the front end that wrote it, not for
    /// everyone who may list runs: it names the caller's session.
    async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError>;

    /// The run's summary, if it exists.
    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError>;

    /// Runs passing `filter`, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError>;

    /// Stores `data` as artifact `name` of `run_id`, once.
    async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError>;

    /// An artifact's description.
    async fn artifact(&self, run_id: &RunId, name: &str) -> Result<ArtifactRef, LogError>;

    /// Bytes `range` of an artifact (clamped to its size).
    async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError>;

    /// Deletes runs that finished before `ts` (Unix ms), with their events
    /// and artifacts. Returns how many runs went.
    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError>;

    /// The in-process fan-out of newly stored events.
    fn live(&self) -> &LiveHub;
}
