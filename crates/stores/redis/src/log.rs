//! `EventLog` on Redis: what each operation asks the server.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::streams::StreamRangeReply;
use weir_core::{ArtifactRef, LogTail, RunEvent, RunId, Seq};
use weir_runtime::log::kit::{
    append_target, check_artifact_name, clamp_range, run_started_by, sha256_hex,
};
use weir_runtime::log::{
    Batch, EventLog, LiveHub, LogError, NewRun, RunFilter, RunSummary, Subscription,
};

use crate::bell::Writing;
use crate::check::Kind;
use crate::codec::{
    Entry, entries, entry_events, entry_id, failed, next_entry_id, parse_state, state_name, summary,
};
use crate::follow::FollowedLog;
use crate::scripts;
use crate::{Core, RedisLog};

/// How often an append may find that another writer moved the log first
/// before giving up; each retry re-checks the events against the new tail,
/// so in practice the second try either succeeds or is refused.
const MAX_RACES: usize = 32;

/// Runs listed per round trip.
const LIST_PAGE: isize = 256;

/// Most events a read makes room for before it has them.
const READ_AHEAD: usize = 1024;

/// The entries a read of `limit` events asks for first: enough for full
/// entries of a batch, and one more for the entry it starts inside; a
/// log of smaller entries (a slow run, or one stored before entries held
/// batches) is read on in further round trips.
fn first_count(limit: usize) -> usize {
    (limit.div_ceil(crate::codec::ENTRY_EVENTS) + 1).min(limit)
}

/// One append as the script is asked it.
struct Appended<'a> {
    run_id: &'a RunId,
    events: &'a [RunEvent],
    entries: &'a [Entry],
    /// The tail it continues; `None`: the run does not exist yet.
    before: Option<LogTail>,
    after: LogTail,
    /// The run its `started` event creates, when `before` is `None`.
    created: Option<NewRun>,
}

/// The operations, as they run on the store's IO runtime.
impl Core {
    pub(crate) async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        let keys = &self.keys;
        let arguments = serde_json::to_string(&run.arguments).expect("JSON values serialize");
        let mut script = scripts::CREATE.prepare_invoke();
        script
            .key(keys.run(&run.run_id))
            .key(keys.runs())
            .key(keys.open())
            .arg(run.run_id.as_str())
            .arg(&run.tool)
            .arg(arguments)
            .arg(&run.node)
            .arg(run.ts)
            .arg(run.owner.as_deref().unwrap_or(""))
            .arg(run.parent.as_ref().map_or("", RunId::as_str))
            .arg(run.client.as_deref().unwrap_or(""));
        if let Some(record) = &run.resume_record {
            script.arg(record);
        }
        let answer: String = match script.invoke_async(&mut self.conn()).await {
            Ok(answer) => answer,
            Err(error) => {
                let touched = [
                    (keys.run(&run.run_id), Kind::Run),
                    (keys.runs(), Kind::RunIndex),
                    (keys.open(), Kind::OpenIndex),
                ];
                return Err(self.explained("registering a run", error, &touched).await);
            }
        };
        match answer.as_str() {
            "ok" => Ok(()),
            _ => Err(LogError::RunExists(run.run_id)),
        }
    }

    /// Appends; the caller publishes to its hub after.
    pub(crate) async fn append(&self, events: Batch) -> Result<(), LogError> {
        let Some(run_id) = append_target(&events).cloned() else {
            return Ok(());
        };
        let entries = entries(&events);
        for _ in 0..MAX_RACES {
            // The tail this node last wrote saves a round trip; the script
            // checks it, and only a tail read now may refuse the events.
            let cached = self.tails.lock().expect("tails lock").get(&run_id).copied();
            let current = match cached {
                Some(written) => Some(written),
                None => self.tail(&run_id).await?,
            };
            let created = match current {
                Some(_) => None,
                None => Some(run_started_by(&events)?),
            };
            let before = current.unwrap_or(LogTail::EMPTY);
            if self.stored_already(&run_id, before, &events).await? {
                return Ok(());
            }
            let after = match before.advance(&run_id, &events) {
                Ok(after) => after,
                Err(_) if cached.is_some() => {
                    self.forget_tail(&run_id);
                    continue;
                }
                Err(violation) => {
                    self.forget_tail(&run_id);
                    return Err(LogError::Invalid {
                        run_id: run_id.clone(),
                        violation,
                    });
                }
            };
            let appended = Appended {
                run_id: &run_id,
                events: &events,
                entries: &entries,
                before: current,
                after,
                created,
            };
            match self.append_once(&appended).await? {
                true => {
                    match after.state.is_terminal() {
                        true => self.drop_tail(&run_id, Writing::Ended),
                        false => self.remember_tail(&run_id, after),
                    }
                    return Ok(());
                }
                false => self.forget_tail(&run_id),
            }
        }
        self.forget_tail(&run_id);
        Err(LogError::Storage {
            doing: "appending events",
            message: format!(
                "run {run_id} kept changing under this append ({MAX_RACES} tries); retry"
            ),
        })
    }

    /// One try of the append script: `false` when another writer moved the
    /// log first.
    async fn append_once(&self, appended: &Appended<'_>) -> Result<bool, LogError> {
        let keys = &self.keys;
        let run_id = appended.run_id;
        let events = appended.events;
        let after = appended.after;
        let ts = events.last().expect("not empty").ts;
        let mut script = scripts::APPEND.prepare_invoke();
        script
            .key(keys.run(run_id))
            .key(keys.events(run_id))
            .key(keys.runs())
            .key(keys.open())
            .key(keys.finished())
            .arg(match appended.before {
                Some(tail) => tail.next_seq.to_string(),
                None => String::new(),
            })
            .arg(after.next_seq)
            .arg(state_name(after.state))
            .arg(ts)
            .arg(match after.state.is_terminal() {
                true => ts.to_string(),
                false => String::new(),
            })
            .arg(keys.run_channel(run_id))
            .arg(&self.origin);
        match &appended.created {
            Some(run) => script
                .arg(&run.tool)
                .arg(serde_json::to_string(&run.arguments).expect("JSON values serialize"))
                .arg(&run.node)
                .arg(run.ts),
            None => script.arg("").arg("").arg("").arg(""),
        };
        script.arg(run_id.as_str());
        for entry in appended.entries {
            script.arg(&entry.id).arg(&entry.lines);
        }
        let answer: String = match script.invoke_async(&mut self.conn()).await {
            Ok(answer) => answer,
            Err(error) => {
                let touched = [
                    (keys.run(run_id), Kind::Run),
                    (keys.events(run_id), Kind::Events),
                    (keys.runs(), Kind::RunIndex),
                    (keys.open(), Kind::OpenIndex),
                    (keys.finished(), Kind::FinishedIndex),
                ];
                return Err(self.explained("appending events", error, &touched).await);
            }
        };
        Ok(answer == "ok")
    }

    pub(crate) async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        const DOING: &str = "reading events";
        let keys = &self.keys;
        let exists = async {
            let exists: bool = self
                .conn()
                .exists(keys.run(run_id))
                .await
                .map_err(failed(DOING))?;
            match exists {
                true => Ok(Vec::new()),
                false => Err(LogError::UnknownRun(run_id.clone())),
            }
        };
        let Some(start) = entry_id(from) else {
            return exists.await;
        };
        if limit == 0 {
            return exists.await;
        }
        let mut found = Vec::with_capacity(limit.min(READ_AHEAD));
        let mut start = start;
        let (mut count, mut entries_read) = (first_count(limit), 0);
        loop {
            let reply: StreamRangeReply = match self
                .conn()
                .xrange_count(keys.events(run_id), &start, "+", count)
                .await
            {
                Ok(reply) => reply,
                Err(error) => {
                    let touched = [(keys.events(run_id), Kind::Events)];
                    return Err(self.explained(DOING, error, &touched).await);
                }
            };
            for entry in &reply.ids {
                entry_events(run_id, entry, from, limit - found.len(), &mut found)?;
            }
            entries_read += reply.ids.len();
            let next = reply.ids.last().and_then(|entry| next_entry_id(&entry.id));
            match next {
                Some(next) if found.len() < limit && reply.ids.len() == count => start = next,
                _ => break,
            }
            // As many entries as the remaining events need at the sizes
            // seen so far, and one more.
            let per_entry = (found.len() / entries_read).max(1);
            let left = limit - found.len();
            count = (left.div_ceil(per_entry) + 1).min(left);
        }
        if found.is_empty() {
            return exists.await;
        }
        Ok(found)
    }

    /// The run's `resume_record` field: one round trip for both whether the
    /// run exists and its record.
    pub(crate) async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
        const DOING: &str = "reading a run's resume record";
        let key = self.keys.run(run_id);
        let (exists, record): (bool, Option<String>) = redis::pipe()
            .exists(&key)
            .hget(&key, "resume_record")
            .query_async(&mut self.conn())
            .await
            .map_err(failed(DOING))?;
        match exists {
            true => Ok(record),
            false => Err(LogError::UnknownRun(run_id.clone())),
        }
    }

    pub(crate) async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        const DOING: &str = "reading a run";
        let key = self.keys.run(run_id);
        let hash: HashMap<String, String> = match self.conn().hgetall(&key).await {
            Ok(hash) => hash,
            Err(error) => return Err(self.explained(DOING, error, &[(key, Kind::Run)]).await),
        };
        summary(run_id, hash)
    }

    pub(crate) async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        const DOING: &str = "listing runs";
        let keys = &self.keys;
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut found = Vec::new();
        let mut offset: isize = 0;
        while found.len() < limit {
            // Newest first; runs accepted in the same millisecond by run id,
            // descending, as every store lists them.
            let page = self
                .conn()
                .zrevrange(keys.runs(), offset, offset + LIST_PAGE - 1)
                .await;
            let ids: Vec<String> = match page {
                Ok(ids) => ids,
                Err(error) => {
                    let touched = [(keys.runs(), Kind::RunIndex)];
                    return Err(self.explained(DOING, error, &touched).await);
                }
            };
            if ids.is_empty() {
                break;
            }
            offset += LIST_PAGE;
            let mut run_ids = Vec::with_capacity(ids.len());
            for id in &ids {
                match RunId::parse(id) {
                    Ok(run_id) => run_ids.push(run_id),
                    Err(_) => self.report_skipped(
                        &format!("{}[{id:?}]", keys.runs()),
                        "the run index names a run id that is not one",
                    ),
                }
            }
            let mut pipe = redis::pipe();
            for run_id in &run_ids {
                pipe.hgetall(keys.run(run_id));
            }
            // Each record on its own: one that is not a hash (WRONGTYPE)
            // or not a run is skipped and reported, never the listing's
            // failure — a listing serves every client of every node.
            let hashes: Vec<redis::Value> = pipe
                .ignore_errors()
                .query_async(&mut self.conn())
                .await
                .map_err(failed(DOING))?;
            for (run_id, hash) in run_ids.iter().zip(hashes) {
                let read = match hash {
                    redis::Value::ServerError(error) => Err(error.to_string()),
                    hash => redis::from_redis_value::<HashMap<String, String>>(hash)
                        .map_err(|error| error.to_string())
                        .and_then(|hash| summary(run_id, hash).map_err(|error| error.to_string())),
                };
                match read {
                    // Deleted between the two reads: not listed.
                    Ok(None) => {}
                    Ok(Some(run)) => {
                        if filter.matches(&run) {
                            found.push(run);
                        }
                    }
                    Err(problem) => self.report_skipped(&keys.run(run_id), &problem),
                }
            }
        }
        found.truncate(limit);
        Ok(found)
    }

    pub(crate) async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError> {
        check_artifact_name(name)?;
        let keys = &self.keys;
        let artifact = ArtifactRef {
            name: name.to_owned(),
            uri: ArtifactRef::uri_for(run_id, name),
            mime: mime.to_owned(),
            bytes: data.len() as u64,
            sha256: sha256_hex(&data),
        };
        let description = serde_json::to_string(&artifact).expect("artifacts serialize");
        let stored = scripts::PUT_ARTIFACT
            .key(keys.run(run_id))
            .key(keys.artifacts(run_id))
            .key(keys.artifact_data(run_id, name))
            .arg(name)
            .arg(description)
            .arg(data)
            .invoke_async(&mut self.conn())
            .await;
        let answer: String = match stored {
            Ok(answer) => answer,
            Err(error) => {
                let touched = [
                    (keys.run(run_id), Kind::Run),
                    (keys.artifacts(run_id), Kind::Artifacts),
                    (keys.artifact_data(run_id, name), Kind::ArtifactData),
                ];
                return Err(self.explained("storing an artifact", error, &touched).await);
            }
        };
        match answer.as_str() {
            "ok" => Ok(artifact),
            "unknown" => Err(LogError::UnknownRun(run_id.clone())),
            _ => Err(LogError::ArtifactExists {
                run_id: run_id.clone(),
                name: name.to_owned(),
            }),
        }
    }

    pub(crate) async fn artifact(
        &self,
        run_id: &RunId,
        name: &str,
    ) -> Result<ArtifactRef, LogError> {
        const DOING: &str = "reading an artifact";
        let keys = &self.keys;
        let read = redis::pipe()
            .exists(keys.run(run_id))
            .hget(keys.artifacts(run_id), name)
            .query_async(&mut self.conn())
            .await;
        let (exists, description): (bool, Option<String>) = match read {
            Ok(read) => read,
            Err(error) => {
                let touched = [(keys.artifacts(run_id), Kind::Artifacts)];
                return Err(self.explained(DOING, error, &touched).await);
            }
        };
        match (exists, description) {
            (false, _) => Err(LogError::UnknownRun(run_id.clone())),
            (true, None) => Err(LogError::UnknownArtifact {
                run_id: run_id.clone(),
                name: name.to_owned(),
            }),
            (true, Some(description)) => {
                serde_json::from_str(&description).map_err(|error| LogError::Storage {
                    doing: DOING,
                    message: format!("artifact {name:?} of run {run_id} is not valid: {error}"),
                })
            }
        }
    }

    pub(crate) async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError> {
        let artifact = self.artifact(run_id, name).await?;
        let range = clamp_range(range, artifact.bytes);
        if range.is_empty() {
            return Ok(Vec::new());
        }
        // GETRANGE's end is inclusive.
        self.conn()
            .getrange(
                self.keys.artifact_data(run_id, name),
                range.start as isize,
                range.end as isize - 1,
            )
            .await
            .map_err(failed("reading an artifact"))
    }

    pub(crate) async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        let keys = &self.keys;
        scripts::DELETE_FINISHED
            .key(keys.finished())
            .key(keys.runs())
            .arg(keys.prefix())
            .arg(ts)
            .invoke_async(&mut self.conn())
            .await
            .map_err(failed("deleting old runs"))
    }
}

impl Core {
    /// Keeps the tail this handle left the run at; while it has one, this
    /// handle writes the run, and its followers here need no doorbell.
    fn remember_tail(&self, run_id: &RunId, tail: LogTail) {
        let new = self
            .tails
            .lock()
            .expect("tails lock")
            .insert(run_id.clone(), tail)
            .is_none();
        if new {
            self.bell.set_writing(run_id, Writing::Started);
        }
    }

    /// Forgets the tail: another writer moved the log.
    fn forget_tail(&self, run_id: &RunId) {
        self.drop_tail(run_id, Writing::Stopped);
    }

    fn drop_tail(&self, run_id: &RunId, why: Writing) {
        let had = self
            .tails
            .lock()
            .expect("tails lock")
            .remove(run_id)
            .is_some();
        if had {
            self.bell.set_writing(run_id, why);
        }
    }

    /// Whether `events` are in the log already, exactly: the retry of an
    /// append whose answer was lost with the connection (the script ran,
    /// the reply never came). Such a retry succeeds instead of being
    /// refused, so a writer that retries on a storage error neither fails
    /// its run nor stores anything twice.
    async fn stored_already(
        &self,
        run_id: &RunId,
        tail: LogTail,
        events: &[RunEvent],
    ) -> Result<bool, LogError> {
        let (first, last) = (events[0].seq, events[events.len() - 1].seq);
        if last >= tail.next_seq {
            return Ok(false);
        }
        let stored = self.read(run_id, first, events.len()).await?;
        Ok(stored == events)
    }

    /// The run's tail, `None` if it does not exist: two fields, not the
    /// whole summary, on every append.
    async fn tail(&self, run_id: &RunId) -> Result<Option<LogTail>, LogError> {
        const DOING: &str = "reading a run's tail";
        let key = self.keys.run(run_id);
        let read = redis::cmd("HMGET")
            .arg(&key)
            .arg("events")
            .arg("state")
            .query_async(&mut self.conn())
            .await;
        let (events, state): (Option<u64>, Option<String>) = match read {
            Ok(read) => read,
            Err(error) => return Err(self.explained(DOING, error, &[(key, Kind::Run)]).await),
        };
        match (events, state) {
            (Some(next_seq), Some(state)) => Ok(Some(LogTail {
                next_seq,
                state: parse_state(&state).ok_or_else(|| LogError::Storage {
                    doing: DOING,
                    message: format!("run {run_id} has an unknown state {state:?}"),
                })?,
            })),
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl EventLog for RedisLog {
    async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        self.io(move |core| {
            let run = run.clone();
            async move { core.create_run(run).await }
        })
        .await
    }

    async fn append(&self, events: Batch) -> Result<(), LogError> {
        if events.is_empty() {
            return Ok(());
        }
        let stored = events.clone();
        self.io(move |core| {
            let stored = stored.clone();
            async move { core.append(stored).await }
        })
        .await?;
        self.inner.hub.publish(events);
        Ok(())
    }

    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        let run_id = run_id.clone();
        self.io(move |core| {
            let run_id = run_id.clone();
            async move { core.read(&run_id, from, limit).await }
        })
        .await
    }

    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
        let followed = FollowedLog::new(self.clone(), run_id.clone());
        Subscription::new(Arc::new(followed), run_id.clone(), from)
    }

    async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
        let run_id = run_id.clone();
        self.io(move |core| {
            let run_id = run_id.clone();
            async move { core.resume_record(&run_id).await }
        })
        .await
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        let run_id = run_id.clone();
        self.io(move |core| {
            let run_id = run_id.clone();
            async move { core.get_run(&run_id).await }
        })
        .await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        let filter = filter.clone();
        self.io(move |core| {
            let filter = filter.clone();
            async move { core.list_runs(&filter).await }
        })
        .await
    }

    async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError> {
        let (run_id, name, mime) = (run_id.clone(), name.to_owned(), mime.to_owned());
        self.io(move |core| {
            let (run_id, name, mime, data) =
                (run_id.clone(), name.clone(), mime.clone(), data.clone());
            async move { core.put_artifact(&run_id, &name, &mime, data).await }
        })
        .await
    }

    async fn artifact(&self, run_id: &RunId, name: &str) -> Result<ArtifactRef, LogError> {
        let (run_id, name) = (run_id.clone(), name.to_owned());
        self.io(move |core| {
            let (run_id, name) = (run_id.clone(), name.clone());
            async move { core.artifact(&run_id, &name).await }
        })
        .await
    }

    async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError> {
        let (run_id, name) = (run_id.clone(), name.to_owned());
        self.io(move |core| {
            let (run_id, name, range) = (run_id.clone(), name.clone(), range.clone());
            async move { core.read_artifact(&run_id, &name, range).await }
        })
        .await
    }

    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        self.io(move |core| async move { core.delete_finished_before(ts).await })
            .await
    }

    fn live(&self) -> &LiveHub {
        &self.inner.hub
    }
}
