//! What admitting a call gives: a [`RunHandle`], or the [`SubmitError`]
//! that says why there is no run; and [`Spawn`], the scheduler's side of a
//! run starting children, which a [`RunContext`](crate::RunContext) holds
//! without knowing the scheduler.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::task::JoinHandle;
use weir_core::{RunEvent, RunId};

use crate::ToolInfo;
use crate::log::LogError;

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

/// A submitted run.
#[derive(Debug)]
pub struct RunHandle {
    pub(crate) run_id: RunId,
    pub(crate) finished: JoinHandle<Option<RunEvent>>,
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

/// Starts children of one run (the scheduler implements it for each run it
/// executes).
#[async_trait]
pub(crate) trait Spawn: Send + Sync {
    /// Starts `tool` as a child; `None` when the scheduler has stopped.
    async fn spawn(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Option<Result<RunHandle, SubmitError>>;

    /// The tools a child may run, sorted by name (empty once the
    /// scheduler has stopped).
    fn tools(&self) -> Vec<ToolInfo>;

    /// The tools of the runs above this one, its parent's first.
    fn ancestors(&self) -> Vec<String>;

    /// Whether the run's caller was granted `entry`: a tool's name, or a
    /// grant that is no tool ([`upstream_grant`](crate::upstream_grant)).
    fn grants(&self, entry: &str) -> bool;

    /// Who started the run: the name of its caller's credential (a child
    /// run's parent's); `None` without credentials.
    fn owner(&self) -> Option<String>;
}
