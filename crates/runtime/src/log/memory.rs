//! The in-memory store: for tests and runs nobody needs after exit.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use weir_core::{ArtifactRef, LogTail, RunEvent, RunId, Seq};

use super::kit::{
    append_target, check_artifact_name, check_start, clamp_range, run_started_by, sha256_hex,
};
use super::{Batch, EventLog, LiveHub, LogError, NewRun, RunFilter, RunSummary, Subscription};

/// Keeps every run in memory. Holds the appended batches themselves (the
/// same `Arc`s the live subscribers get), so an append copies nothing.
#[derive(Clone)]
pub struct MemoryLog {
    inner: Arc<Inner>,
}

struct Inner {
    runs: Mutex<HashMap<RunId, MemoryRun>>,
    hub: LiveHub,
}

struct MemoryRun {
    summary: RunSummary,
    /// See [`NewRun::resume_record`].
    resume_record: Option<String>,
    /// Appended batches in order; `batches[i][0].seq` increases with `i`.
    batches: Vec<Batch>,
    artifacts: HashMap<String, (ArtifactRef, Arc<[u8]>)>,
}

impl MemoryLog {
    /// An empty log whose live channels keep 256 batches per run.
    pub fn new() -> MemoryLog {
        MemoryLog::with_live_capacity(256)
    }

    /// An empty log whose live channels keep `capacity` batches per run.
    pub fn with_live_capacity(capacity: usize) -> MemoryLog {
        MemoryLog::with_live_hub(LiveHub::new(capacity))
    }

    /// An empty log publishing to `hub`.
    pub fn with_live_hub(hub: LiveHub) -> MemoryLog {
        MemoryLog {
            inner: Arc::new(Inner {
                runs: Mutex::default(),
                hub,
            }),
        }
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, MemoryRun>> {
        self.inner.runs.lock().expect("memory log lock")
    }

    /// Appends `events`, first registering `starting` (or, for an unknown
    /// run, the run its `started` event describes); nothing changes if any
    /// of it is refused.
    fn append_or_start(&self, starting: Option<NewRun>, events: Batch) -> Result<(), LogError> {
        let Some(run_id) = append_target(&events).cloned() else {
            return Ok(());
        };
        let mut runs = self.runs();
        let new = match (runs.contains_key(&run_id), starting) {
            (true, Some(run)) => return Err(LogError::RunExists(run.run_id)),
            (true, None) => None,
            (false, Some(run)) => {
                check_start(&run, &events)?;
                Some(new_run(run))
            }
            (false, None) => Some(new_run(run_started_by(&events)?)),
        };
        let before = new
            .as_ref()
            .or_else(|| runs.get(&run_id))
            .expect("known or new")
            .summary
            .tail();
        let tail = before
            .advance(&run_id, &events)
            .map_err(|violation| LogError::Invalid {
                run_id: run_id.clone(),
                violation,
            })?;
        let run = match new {
            Some(new) => runs.entry(run_id).or_insert(new),
            None => runs.get_mut(&run_id).expect("known"),
        };
        let ts = events.last().expect("not empty").ts;
        run.summary.events = tail.next_seq;
        run.summary.state = tail.state;
        run.summary.updated_ts = ts;
        if tail.state.is_terminal() {
            run.summary.finished_ts = Some(ts);
        }
        run.batches.push(events.clone());
        // Under the lock, so batches of one run are published in order.
        self.inner.hub.publish(events);
        Ok(())
    }
}

impl Default for MemoryLog {
    fn default() -> Self {
        MemoryLog::new()
    }
}

fn new_run(run: NewRun) -> MemoryRun {
    MemoryRun {
        summary: RunSummary {
            run_id: run.run_id,
            tool: run.tool,
            arguments: run.arguments,
            node: run.node,
            state: LogTail::EMPTY.state,
            events: 0,
            created_ts: run.ts,
            updated_ts: run.ts,
            finished_ts: None,
            owner: run.owner,
            client: run.client,
            parent: run.parent,
        },
        resume_record: run.resume_record,
        batches: Vec::new(),
        artifacts: HashMap::new(),
    }
}

#[async_trait]
impl EventLog for MemoryLog {
    async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        let mut runs = self.runs();
        if runs.contains_key(&run.run_id) {
            return Err(LogError::RunExists(run.run_id));
        }
        runs.insert(run.run_id.clone(), new_run(run));
        Ok(())
    }

    async fn append(&self, events: Batch) -> Result<(), LogError> {
        self.append_or_start(None, events)
    }

    async fn start_run(&self, run: NewRun, events: Batch) -> Result<(), LogError> {
        self.append_or_start(Some(run), events)
    }

    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        let runs = self.runs();
        let run = runs
            .get(run_id)
            .ok_or_else(|| LogError::UnknownRun(run_id.clone()))?;
        // The batch holding `from`: the last one starting at or before it.
        let first = run.batches.partition_point(|batch| batch[0].seq <= from);
        Ok(run.batches[first.saturating_sub(1)..]
            .iter()
            .flat_map(|batch| batch.iter())
            .skip_while(|event| event.seq < from)
            .take(limit)
            .cloned()
            .collect())
    }

    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
        Subscription::new(Arc::new(self.clone()), run_id.clone(), from)
    }

    async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
        let runs = self.runs();
        let run = runs
            .get(run_id)
            .ok_or_else(|| LogError::UnknownRun(run_id.clone()))?;
        Ok(run.resume_record.clone())
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        Ok(self.runs().get(run_id).map(|run| run.summary.clone()))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        let mut found: Vec<RunSummary> = self
            .runs()
            .values()
            .map(|run| &run.summary)
            .filter(|summary| filter.matches(summary))
            .cloned()
            .collect();
        found.sort_by(|a, b| (b.created_ts, &b.run_id).cmp(&(a.created_ts, &a.run_id)));
        found.truncate(filter.limit.unwrap_or(usize::MAX));
        Ok(found)
    }

    async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError> {
        check_artifact_name(name)?;
        let mut runs = self.runs();
        let run = runs
            .get_mut(run_id)
            .ok_or_else(|| LogError::UnknownRun(run_id.clone()))?;
        if run.artifacts.contains_key(name) {
            return Err(LogError::ArtifactExists {
                run_id: run_id.clone(),
                name: name.to_owned(),
            });
        }
        let artifact = ArtifactRef {
            name: name.to_owned(),
            uri: ArtifactRef::uri_for(run_id, name),
            mime: mime.to_owned(),
            bytes: data.len() as u64,
            sha256: sha256_hex(&data),
        };
        run.artifacts
            .insert(name.to_owned(), (artifact.clone(), data.into()));
        Ok(artifact)
    }

    async fn artifact(&self, run_id: &RunId, name: &str) -> Result<ArtifactRef, LogError> {
        let runs = self.runs();
        find_artifact(&runs, run_id, name).map(|(artifact, _)| artifact.clone())
    }

    async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError> {
        let runs = self.runs();
        let (_, data) = find_artifact(&runs, run_id, name)?;
        Ok(data[clamp_range(range, data.len() as u64)].to_vec())
    }

    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        let mut runs = self.runs();
        let before = runs.len();
        runs.retain(|_, run| {
            run.summary
                .finished_ts
                .is_none_or(|finished| finished >= ts)
        });
        Ok(before - runs.len())
    }

    fn live(&self) -> &LiveHub {
        &self.inner.hub
    }
}

fn find_artifact<'a>(
    runs: &'a HashMap<RunId, MemoryRun>,
    run_id: &RunId,
    name: &str,
) -> Result<&'a (ArtifactRef, Arc<[u8]>), LogError> {
    runs.get(run_id)
        .ok_or_else(|| LogError::UnknownRun(run_id.clone()))?
        .artifacts
        .get(name)
        .ok_or_else(|| LogError::UnknownArtifact {
            run_id: run_id.clone(),
            name: name.to_owned(),
        })
}
