//! Where each thing lives in Redis: every key of one deployment starts with
//! its prefix, so several deployments (or test stores) share one server.

use weir_core::RunId;

/// The key names of one deployment.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_owned(),
        }
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A hash: the run's summary fields, and its resume record.
    pub(crate) fn run(&self, run_id: &RunId) -> String {
        format!("{}run:{run_id}", self.prefix)
    }

    /// A stream: the run's events, a few per entry, each entry's id
    /// `<seq + 1>-0` of its last event (`codec::entries`).
    pub(crate) fn events(&self, run_id: &RunId) -> String {
        format!("{}events:{run_id}", self.prefix)
    }

    /// A hash: artifact name to its description (JSON).
    pub(crate) fn artifacts(&self, run_id: &RunId) -> String {
        format!("{}art:{run_id}", self.prefix)
    }

    /// A string: an artifact's bytes. Artifact names have no `:`, so the
    /// last one separates the run from the name.
    pub(crate) fn artifact_data(&self, run_id: &RunId, name: &str) -> String {
        format!("{}artdata:{run_id}:{name}", self.prefix)
    }

    /// A sorted set: every run, scored by when it was accepted.
    pub(crate) fn runs(&self) -> String {
        format!("{}runs", self.prefix)
    }

    /// A sorted set: runs without a terminal event, scored by acceptance.
    pub(crate) fn open(&self) -> String {
        format!("{}open", self.prefix)
    }

    /// A sorted set: ended runs, scored by when they ended (retention).
    pub(crate) fn finished(&self) -> String {
        format!("{}finished", self.prefix)
    }

    /// The pub/sub channel on which each append to the run is announced,
    /// with its events, to the nodes that follow the run (`bell.rs`).
    pub(crate) fn run_channel(&self, run_id: &RunId) -> String {
        format!("{}appends:{run_id}", self.prefix)
    }

    /// The pub/sub channel of cancellation requests between nodes.
    pub(crate) fn cancel_channel(&self) -> String {
        format!("{}cancel", self.prefix)
    }

    /// A string with a time to live: a cancellation asked for a run
    /// another node executes (its reason), kept so that the executing node
    /// finds it even when the pub/sub message was lost (`node.rs`).
    pub(crate) fn cancel_request(&self, run_id: &str) -> String {
        format!("{}cancelreq:{run_id}", self.prefix)
    }

    /// A stream read by a consumer group: runs a busy node offers to the
    /// others (`node.rs`).
    pub(crate) fn queue(&self) -> String {
        format!("{}queue", self.prefix)
    }

    /// A string with a time to live: a node's lease, held while it runs.
    pub(crate) fn node(&self, node: &str) -> String {
        format!("{}node:{node}", self.prefix)
    }
}
