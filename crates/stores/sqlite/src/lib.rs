//! weir's SQLite event log: the embedded default store. One file holds every
//! run's events, summary and artifacts, and survives restarts and crashes.
//!
//! **For:** [`SqliteLog`], an [`EventLog`] in one SQLite file, opened with
//! [`SqliteLog::open`] and [`SqliteOptions`] (live channel size,
//! [`Durability`]). An acknowledged append survives a crash of the process
//! (or power loss, with [`Durability::PowerLoss`]); a newer weir's file is
//! refused and an older one migrated when opened. Several handles, and
//! several processes, may open one file: a subscriber in one follows a run
//! another one writes.
//!
//! **Not for:** sharing a log between machines (a networked store implements
//! the same trait), or for anyone to read the tables: SQL stays inside this
//! crate, and everything else sees the log only through [`EventLog`].
//!
//! Inside: one writer thread owns the write connection and commits whatever
//! is queued in one transaction (group commit, `writer.rs`; what each write
//! does is in `writes.rs`); a checkpoint thread copies the write-ahead log
//! into the database so no append waits for it (`checkpoint.rs`); reads run
//! on a pool of read-only connections on tokio's blocking pool (`read.rs`,
//! `queries.rs`). `schema.rs` holds the tables (a run's arguments are
//! written once: in its row while pending, then in its `started` event) and
//! their migrations; `body.rs` how events are stored in rows (several
//! events in a row, a partial result of text blocks as a compact BLOB, any
//! other event as JSON) and `segments.rs` the files beside the database
//! that hold the bytes of rows of several events. The
//! rules every store shares (artifact names, digests, which run an append
//! creates) come from [`weir_runtime::log::kit`], and the crate's tests run
//! the contract suite every store passes (`weir_runtime::store_contract`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), weir_runtime::LogError> {
//! use weir_core::{Completed, EventKind, RunEvent, RunId, RunState, Started};
//! use weir_runtime::EventLog;
//! use weir_store_sqlite::{SqliteLog, SqliteOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("weir.db");
//! let run_id = RunId::parse("demo").unwrap();
//! let event = |seq, kind: EventKind| RunEvent { run_id: run_id.clone(), seq, ts: 1_000 + seq, kind };
//!
//! let log = SqliteLog::open(&path, SqliteOptions::default())?;
//! let started = Started { tool: "demo".into(), arguments: serde_json::json!({}), node: "here".into() };
//! log.append(vec![event(0, started.into()), event(1, Completed::default().into())].into()).await?;
//! drop(log);
//!
//! // As after a restart: the file still holds the whole run.
//! let log = SqliteLog::open(&path, SqliteOptions::default())?;
//! assert_eq!(log.get_run(&run_id).await?.unwrap().state, RunState::Completed);
//! assert_eq!(log.read(&run_id, 0, 100).await?.len(), 2);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod body;
mod checkpoint;
mod connection;
mod queries;
mod read;
mod schema;
mod segments;
mod writer;
mod writes;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use weir_core::{ArtifactRef, RunEvent, RunId, Seq};
use weir_runtime::log::kit::{check_artifact_name, check_start};
use weir_runtime::log::{
    Batch, EventLog, LiveHub, LogError, NewRun, RunFilter, RunSummary, Subscription,
};

use crate::read::Readers;
use crate::segments::{Appender, Segments};
use crate::writer::{WriteOp, Writer};

/// How an append is made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Survives a crash of the process (WAL with `synchronous=NORMAL`): an
    /// acknowledged event is in the OS's hands. The default.
    #[default]
    ProcessCrash,
    /// Survives power loss too (`synchronous=FULL`): every commit waits for
    /// the disk. Much slower.
    PowerLoss,
}

/// Settings of a [`SqliteLog`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Unread batches each live channel keeps before a subscriber is sent
    /// back to the store.
    pub live_capacity: usize,
    /// See [`Durability`].
    pub durability: Durability,
    /// The size at which the next segment file is started. The bytes of a
    /// stream's events are kept in segment files beside the database
    /// (`<file>-segments/`), and a segment's space comes back when no run
    /// stored in it is left; smaller segments give space back sooner, in
    /// more files.
    pub segment_bytes: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            live_capacity: 256,
            durability: Durability::default(),
            segment_bytes: 64 << 20,
        }
    }
}

/// The SQLite event log. Cheap to clone; the writer thread stops when the
/// last clone is dropped.
#[derive(Clone)]
pub struct SqliteLog {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Writer,
    readers: Arc<Readers>,
    segments: Arc<Segments>,
    hub: Arc<LiveHub>,
}

impl SqliteLog {
    /// Opens (creating if needed) the log at `path`, and its parent folder.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteLog, LogError> {
        let path = path.as_ref().to_path_buf();
        connection::make_private(&path)?;
        let mut conn = connection::open(&path, options.durability)?;
        schema::prepare(&mut conn, &path)?;
        let segments = Segments::beside(&path);
        segments.remove_orphans(&conn)?;
        let wal = checkpoint::start(&mut conn, &path, options.durability)?;
        let hub = Arc::new(LiveHub::new(options.live_capacity));
        let appender = Appender::new(segments.clone(), options.durability, options.segment_bytes);
        let writer = Writer::start(conn, hub.clone(), wal, appender)?;
        Ok(SqliteLog {
            inner: Arc::new(Inner {
                readers: Arc::new(Readers::new(path.clone())),
                segments: Arc::new(segments),
                path,
                writer,
                hub,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

#[async_trait]
impl EventLog for SqliteLog {
    async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        self.inner
            .writer
            .write(|ack| WriteOp::CreateRun(run, ack))
            .await
    }

    async fn append(&self, events: Batch) -> Result<(), LogError> {
        if events.is_empty() {
            return Ok(());
        }
        self.inner
            .writer
            .write(|ack| WriteOp::Append(None, events, ack))
            .await
    }

    /// In one write: the run's row and its first events commit together.
    async fn start_run(&self, run: NewRun, events: Batch) -> Result<(), LogError> {
        check_start(&run, &events)?;
        self.inner
            .writer
            .write(|ack| WriteOp::Append(Some(run), events, ack))
            .await
    }

    /// The one writer thread takes operations in the order they were sent,
    /// and `write` sends before it first waits.
    fn queues_appends_in_order(&self) -> bool {
        true
    }

    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        let run_id = run_id.clone();
        let segments = self.inner.segments.clone();
        self.inner
            .readers
            .read(move |conn| queries::events(conn, &segments, &run_id, from, limit))
            .await
    }

    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
        Subscription::new(Arc::new(self.clone()), run_id.clone(), from)
    }

    async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
        let run_id = run_id.clone();
        self.inner
            .readers
            .read(move |conn| queries::resume_record(conn, &run_id))
            .await
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        let run_id = run_id.clone();
        self.inner
            .readers
            .read(move |conn| queries::find_run(conn, &run_id))
            .await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        let filter = filter.clone();
        self.inner
            .readers
            .read(move |conn| queries::list_runs(conn, &filter))
            .await
    }

    async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError> {
        check_artifact_name(name)?;
        let (run_id, name, mime) = (run_id.clone(), name.to_owned(), mime.to_owned());
        self.inner
            .writer
            .write(|ack| WriteOp::PutArtifact {
                run_id,
                name,
                mime,
                data,
                ack,
            })
            .await
    }

    async fn artifact(&self, run_id: &RunId, name: &str) -> Result<ArtifactRef, LogError> {
        let (run_id, name) = (run_id.clone(), name.to_owned());
        self.inner
            .readers
            .read(move |conn| queries::artifact(conn, &run_id, &name))
            .await
    }

    async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError> {
        let (run_id, name) = (run_id.clone(), name.to_owned());
        self.inner
            .readers
            .read(move |conn| queries::artifact_bytes(conn, &run_id, &name, range))
            .await
    }

    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        self.inner
            .writer
            .write(|ack| WriteOp::DeleteFinishedBefore(ts, ack))
            .await
    }

    fn live(&self) -> &LiveHub {
        &self.inner.hub
    }
}
