//! The log as one subscription sees it: the same [`RedisLog`], except that
//! while the subscription lives its node follows the run on the doorbell
//! (`bell.rs`), so another node's appends reach it live. It starts
//! following when the subscription has caught up with the stream (its
//! first read that gets less than it asked for), then reads again, so
//! nothing announced after that read is missed; a subscription that reads
//! a finished run to its end, or is dropped first (a resume that wanted
//! one event), never listens. It stops when the subscription is dropped.

use std::ops::Range;

use async_trait::async_trait;
use tokio::sync::OnceCell;
use weir_core::{ArtifactRef, RunEvent, RunId, Seq};
use weir_runtime::log::{
    Batch, EventLog, LiveHub, LogError, NewRun, RunFilter, RunSummary, Subscription,
};

use crate::RedisLog;
use crate::bell::Following;

/// A [`RedisLog`] that follows one run while it lives.
pub(crate) struct FollowedLog {
    log: RedisLog,
    run_id: RunId,
    following: OnceCell<Following>,
}

impl FollowedLog {
    pub(crate) fn new(log: RedisLog, run_id: RunId) -> FollowedLog {
        FollowedLog {
            log,
            run_id,
            following: OnceCell::new(),
        }
    }
}

#[async_trait]
impl EventLog for FollowedLog {
    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        let page = self.log.read(run_id, from, limit).await?;
        // A page shorter than asked is all the store has now: the
        // subscription has caught up and waits for live events next (it
        // goes live after such a page without another read). A page that
        // ends the run needs nothing more.
        let caught_up =
            page.len() < limit && !page.last().is_some_and(|event| event.kind.is_terminal());
        if !caught_up || *run_id != self.run_id || self.following.initialized() {
            return Ok(page);
        }
        // Listen first, then read again, so that nothing announced after
        // this read is missed.
        let bell = self.log.bell();
        self.following
            .get_or_init(|| bell.follow(&self.run_id))
            .await;
        self.log.read(run_id, from, limit).await
    }

    // The rest is the log's own.

    async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        self.log.create_run(run).await
    }

    async fn append(&self, events: Batch) -> Result<(), LogError> {
        self.log.append(events).await
    }

    async fn start_run(&self, run: NewRun, events: Batch) -> Result<(), LogError> {
        self.log.start_run(run, events).await
    }

    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
        self.log.subscribe_from(run_id, from)
    }

    async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
        self.log.resume_record(run_id).await
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        self.log.get_run(run_id).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        self.log.list_runs(filter).await
    }

    async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError> {
        self.log.put_artifact(run_id, name, mime, data).await
    }

    async fn artifact(&self, run_id: &RunId, name: &str) -> Result<ArtifactRef, LogError> {
        self.log.artifact(run_id, name).await
    }

    async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError> {
        self.log.read_artifact(run_id, name, range).await
    }

    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        self.log.delete_finished_before(ts).await
    }

    fn live(&self) -> &LiveHub {
        self.log.live()
    }
}
