//! The SQLite store: the embedded default, one file, survives restarts.
//!
//! One writer thread owns the write connection and commits whatever is
//! queued in one transaction (group commit), so many small appends cost one
//! commit; readers use a small pool of read-only connections on the blocking
//! pool. WAL mode lets them read while the writer writes.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tokio::sync::oneshot;
use weir_core::{ArtifactRef, EventKind, LogTail, RunEvent, RunId, RunState, Seq};

use weir_runtime::log::kit::{
    append_target, check_artifact_name, clamp_range, run_started_by, sha256_hex,
};
use weir_runtime::log::{
    Batch, EventLog, LiveHub, LogError, NewRun, RunFilter, RunSummary, Subscription,
};

/// Bump when the schema changes; a newer file is refused, not misread, and
/// an older one is migrated when opened.
const SCHEMA_VERSION: i64 = 2;

/// Most events the writer puts in one transaction.
const MAX_GROUP_EVENTS: usize = 4096;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_key     INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL UNIQUE,
    tool        TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    node        TEXT NOT NULL,
    state       TEXT NOT NULL,
    next_seq    INTEGER NOT NULL,
    created_ts  INTEGER NOT NULL,
    updated_ts  INTEGER NOT NULL,
    finished_ts INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_ts);
CREATE INDEX IF NOT EXISTS runs_by_state ON runs (state);
CREATE INDEX IF NOT EXISTS runs_by_finished ON runs (finished_ts) WHERE finished_ts IS NOT NULL;
CREATE TABLE IF NOT EXISTS events (
    run_key INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    ts      INTEGER NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (run_key, seq)
);
CREATE TABLE IF NOT EXISTS artifacts (
    run_key INTEGER NOT NULL,
    name    TEXT NOT NULL,
    mime    TEXT NOT NULL,
    bytes   INTEGER NOT NULL,
    sha256  TEXT NOT NULL,
    data    BLOB NOT NULL,
    UNIQUE (run_key, name)
);
";

/// Moves a schema 1 log to schema 2. Schema 1 kept events in a `WITHOUT
/// ROWID` table, whose rows live in the primary key's b-tree: a body over
/// about 1 KB spilled into overflow pages, and streaming 1 KB items wrote
/// each row three to four times over. Schema 2 keeps them in rowid order
/// with a small index beside them. One transaction: if it is interrupted,
/// schema 1 stays as it was.
fn migrate_from_1(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute_batch("ALTER TABLE events RENAME TO events_schema_1;")?;
    tx.execute_batch(SCHEMA)?;
    tx.execute_batch(
        "INSERT INTO events (run_key, seq, ts, body)
             SELECT run_key, seq, ts, body FROM events_schema_1 ORDER BY run_key, seq;
         DROP TABLE events_schema_1;
         PRAGMA user_version = 2;",
    )?;
    tx.commit()
}

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
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            live_capacity: 256,
            durability: Durability::default(),
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
    writer: mpsc::Sender<WriteOp>,
    readers: Mutex<Vec<Connection>>,
    hub: Arc<LiveHub>,
}

type Ack<T> = oneshot::Sender<Result<T, LogError>>;

enum WriteOp {
    CreateRun(NewRun, Ack<()>),
    Append(Batch, Ack<()>),
    PutArtifact {
        run_id: RunId,
        name: String,
        mime: String,
        data: Vec<u8>,
        ack: Ack<ArtifactRef>,
    },
    DeleteFinishedBefore(u64, Ack<usize>),
}

/// Maps a database error to a [`LogError::Storage`] saying what we were doing.
fn db(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> LogError {
    move |error| LogError::Storage {
        doing,
        message: error.to_string(),
    }
}

impl SqliteLog {
    /// Opens (creating if needed) the log at `path`, and its parent folder.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteLog, LogError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|error| LogError::Storage {
                doing: "creating the data directory",
                message: format!("{}: {error}", parent.display()),
            })?;
        }
        let mut conn = open_connection(&path, options.durability)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(db("reading the schema version"))?;
        if version > SCHEMA_VERSION {
            return Err(LogError::Storage {
                doing: "opening the event log",
                message: format!(
                    "{} was written by a newer weir (schema {version}, this one knows {SCHEMA_VERSION}); upgrade weir or use another --data-dir",
                    path.display()
                ),
            });
        }
        if version == 1 {
            migrate_from_1(&mut conn).map_err(db("moving the events table to schema 2"))?;
        }
        conn.execute_batch(SCHEMA)
            .and_then(|()| conn.pragma_update(None, "user_version", SCHEMA_VERSION))
            .map_err(db("creating the schema"))?;

        start_checkpointer(&mut conn, &path, options.durability)?;
        let hub = Arc::new(LiveHub::new(options.live_capacity));
        let (writer, ops) = mpsc::channel();
        let writer_hub = hub.clone();
        std::thread::Builder::new()
            .name("weir-sqlite-writer".into())
            .spawn(move || write_loop(conn, ops, &writer_hub))
            .map_err(|error| LogError::Storage {
                doing: "starting the writer thread",
                message: error.to_string(),
            })?;
        Ok(SqliteLog {
            inner: Arc::new(Inner {
                path,
                writer,
                readers: Mutex::default(),
                hub,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn write<T>(&self, op: impl FnOnce(Ack<T>) -> WriteOp) -> Result<T, LogError> {
        let (ack, done) = oneshot::channel();
        let stopped = || LogError::Storage {
            doing: "writing",
            message: "the writer thread has stopped".into(),
        };
        self.inner.writer.send(op(ack)).map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }

    async fn read_with<T: Send + 'static>(
        &self,
        query: impl FnOnce(&Connection) -> Result<T, LogError> + Send + 'static,
    ) -> Result<T, LogError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = inner.readers.lock().expect("reader pool lock").pop();
            let conn = match pooled {
                Some(conn) => conn,
                None => {
                    let conn = open_connection(&inner.path, Durability::default())?;
                    conn.pragma_update(None, "query_only", true)
                        .map_err(db("opening a reader"))?;
                    conn
                }
            };
            let result = query(&conn);
            inner.readers.lock().expect("reader pool lock").push(conn);
            result
        })
        .await
        .map_err(|error| LogError::Storage {
            doing: "reading",
            message: error.to_string(),
        })?
    }
}

fn open_connection(path: &Path, durability: Durability) -> Result<Connection, LogError> {
    let conn = Connection::open(path).map_err(|error| LogError::Storage {
        doing: "opening the event log",
        message: format!("{}: {error}", path.display()),
    })?;
    let synchronous = match durability {
        Durability::ProcessCrash => "NORMAL",
        Durability::PowerLoss => "FULL",
    };
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .and_then(|()| conn.pragma_update(None, "journal_mode", "WAL"))
        .and_then(|()| conn.pragma_update(None, "synchronous", synchronous))
        .map_err(db("configuring the connection"))?;
    Ok(conn)
}

#[async_trait]
impl EventLog for SqliteLog {
    async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        self.write(|ack| WriteOp::CreateRun(run, ack)).await
    }

    async fn append(&self, events: Batch) -> Result<(), LogError> {
        if events.is_empty() {
            return Ok(());
        }
        self.write(|ack| WriteOp::Append(events, ack)).await
    }

    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        let run_id = run_id.clone();
        self.read_with(move |conn| {
            let doing = "reading events";
            let mut stmt = conn
                .prepare_cached(
                    "SELECT e.seq, e.ts, e.body FROM runs r JOIN events e ON e.run_key = r.run_key
                     WHERE r.run_id = ?1 AND e.seq >= ?2 ORDER BY e.seq LIMIT ?3",
                )
                .map_err(db(doing))?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt
                .query_map(params![run_id.as_str(), from as i64, limit], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .map_err(db(doing))?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, ts, body) = row.map_err(db(doing))?;
                let kind: EventKind =
                    serde_json::from_str(&body).map_err(|error| LogError::Storage {
                        doing,
                        message: format!("event {seq} of run {run_id} is not valid JSON: {error}"),
                    })?;
                events.push(RunEvent {
                    run_id: run_id.clone(),
                    seq: seq as Seq,
                    ts: ts as u64,
                    kind,
                });
            }
            if events.is_empty() && find_run(conn, &run_id)?.is_none() {
                return Err(LogError::UnknownRun(run_id));
            }
            Ok(events)
        })
        .await
    }

    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
        Subscription::new(Arc::new(self.clone()), run_id.clone(), from)
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        let run_id = run_id.clone();
        self.read_with(move |conn| find_run(conn, &run_id)).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        let filter = filter.clone();
        self.read_with(move |conn| {
            let mut sql = format!("SELECT {SUMMARY_COLUMNS} FROM runs WHERE 1 = 1");
            let mut args: Vec<String> = Vec::new();
            if !filter.states.is_empty() {
                let marks = vec!["?"; filter.states.len()].join(", ");
                sql.push_str(&format!(" AND state IN ({marks})"));
                args.extend(filter.states.iter().map(|s| s.as_str().to_owned()));
            }
            for (column, value) in [("tool", &filter.tool), ("node", &filter.node)] {
                if let Some(value) = value {
                    sql.push_str(&format!(" AND {column} = ?"));
                    args.push(value.clone());
                }
            }
            sql.push_str(" ORDER BY created_ts DESC, run_id DESC");
            if let Some(limit) = filter.limit {
                sql.push_str(&format!(" LIMIT {limit}"));
            }
            let doing = "listing runs";
            let mut stmt = conn.prepare(&sql).map_err(db(doing))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args), summary_from_row)
                .map_err(db(doing))?;
            rows.map(|row| row.map_err(db(doing))?).collect()
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
        check_artifact_name(name)?;
        let (run_id, name, mime) = (run_id.clone(), name.to_owned(), mime.to_owned());
        self.write(|ack| WriteOp::PutArtifact {
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
        self.read_with(move |conn| {
            conn.query_row(
                "SELECT a.mime, a.bytes, a.sha256 FROM runs r JOIN artifacts a ON a.run_key = r.run_key
                 WHERE r.run_id = ?1 AND a.name = ?2",
                params![run_id.as_str(), name],
                |row| {
                    Ok(ArtifactRef {
                        uri: ArtifactRef::uri_for(&run_id, &name),
                        name: name.clone(),
                        mime: row.get(0)?,
                        bytes: row.get::<_, i64>(1)? as u64,
                        sha256: row.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(db("reading an artifact"))?
            .ok_or_else(|| missing_artifact(conn, &run_id, &name))
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
        self.read_with(move |conn| {
            let doing = "reading an artifact";
            let bytes: Option<i64> = conn
                .query_row(
                    "SELECT a.bytes FROM runs r JOIN artifacts a ON a.run_key = r.run_key
                     WHERE r.run_id = ?1 AND a.name = ?2",
                    params![run_id.as_str(), name],
                    |row| row.get(0),
                )
                .optional()
                .map_err(db(doing))?;
            let Some(bytes) = bytes else {
                return Err(missing_artifact(conn, &run_id, &name));
            };
            let range = clamp_range(range, bytes as u64);
            // substr() on a BLOB counts bytes, from 1.
            conn.query_row(
                "SELECT substr(a.data, ?3, ?4) FROM runs r JOIN artifacts a ON a.run_key = r.run_key
                 WHERE r.run_id = ?1 AND a.name = ?2",
                params![
                    run_id.as_str(),
                    name,
                    range.start as i64 + 1,
                    range.len() as i64
                ],
                |row| row.get(0),
            )
            .map_err(db(doing))
        })
        .await
    }

    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        self.write(|ack| WriteOp::DeleteFinishedBefore(ts, ack))
            .await
    }

    fn live(&self) -> &LiveHub {
        &self.inner.hub
    }
}

const SUMMARY_COLUMNS: &str =
    "run_id, tool, node, state, next_seq, created_ts, updated_ts, finished_ts, arguments";

fn summary_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<RunSummary, LogError>> {
    let run_id: String = row.get(0)?;
    let state: String = row.get(3)?;
    let arguments: String = row.get(8)?;
    let decoded = RunId::parse(&run_id)
        .map_err(|error| error.to_string())
        .and_then(|run_id| Ok((run_id, state.parse::<RunState>()?)))
        .and_then(|(run_id, state)| {
            let arguments: serde_json::Value =
                serde_json::from_str(&arguments).map_err(|error| error.to_string())?;
            Ok((run_id, state, arguments))
        });
    let (run_id, state, arguments) = match decoded {
        Ok(decoded) => decoded,
        Err(message) => {
            return Ok(Err(LogError::Storage {
                doing: "reading a run",
                message,
            }));
        }
    };
    Ok(Ok(RunSummary {
        run_id,
        tool: row.get(1)?,
        arguments,
        node: row.get(2)?,
        state,
        events: row.get::<_, i64>(4)? as Seq,
        created_ts: row.get::<_, i64>(5)? as u64,
        updated_ts: row.get::<_, i64>(6)? as u64,
        finished_ts: row.get::<_, Option<i64>>(7)?.map(|ts| ts as u64),
    }))
}

fn find_run(conn: &Connection, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
    let doing = "reading a run";
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM runs WHERE run_id = ?1"
        ))
        .map_err(db(doing))?;
    stmt.query_row([run_id.as_str()], summary_from_row)
        .optional()
        .map_err(db(doing))?
        .transpose()
}

fn missing_artifact(conn: &Connection, run_id: &RunId, name: &str) -> LogError {
    match find_run(conn, run_id) {
        Ok(Some(_)) => LogError::UnknownArtifact {
            run_id: run_id.clone(),
            name: name.to_owned(),
        },
        Ok(None) => LogError::UnknownRun(run_id.clone()),
        Err(error) => error,
    }
}

// ---- the checkpointer thread ----

/// WAL frames (pages) after which a commit asks for a checkpoint: SQLite's
/// own default for its automatic checkpoints.
const CHECKPOINT_PAGES: std::ffi::c_int = 1000;

/// Moves checkpoints off the writer. SQLite's automatic checkpoint runs
/// inside the commit that crosses the threshold, copying the WAL into the
/// database and syncing it while every append waits: streaming 1 KB items, a
/// quarter of the writer's time. Instead the writer's commits nudge a thread
/// of its own, whose passive checkpoints never block a writer. (Registering
/// the WAL hook turns the automatic checkpoint off.) The thread ends when the
/// writer's connection is dropped.
fn start_checkpointer(
    writer: &mut Connection,
    path: &Path,
    durability: Durability,
) -> Result<(), LogError> {
    let checkpointer = open_connection(path, durability)?;
    let (nudge, nudged) = mpsc::sync_channel::<()>(1);
    writer
        .wal_hook(Some(move |_: &mut _, pages| {
            if pages >= CHECKPOINT_PAGES {
                // Full means a checkpoint is already due.
                let _ = nudge.try_send(());
            }
            Ok(())
        }))
        .map_err(db("setting up checkpoints"))?;
    std::thread::Builder::new()
        .name("weir-sqlite-checkpoint".into())
        .spawn(move || {
            while nudged.recv().is_ok() {
                // Passive: does what it can without waiting; the next nudge
                // picks up the rest. A failure here loses nothing (the WAL
                // keeps every frame) and is tried again.
                let passive = rusqlite::wal::CheckpointMode::PASSIVE;
                if let Err(error) = checkpointer.wal_checkpoint_v2(None::<&str>, passive) {
                    tracing::warn!("SQLite checkpoint failed (will retry): {error}");
                }
            }
        })
        .map_err(|error| LogError::Storage {
            doing: "starting the checkpoint thread",
            message: error.to_string(),
        })?;
    Ok(())
}

// ---- the writer thread ----

/// Per open run: its key in `runs` and its tail. Dropped at the terminal event.
type Tails = HashMap<RunId, (i64, LogTail)>;

/// Sends an operation's result once the transaction holding it has committed
/// (or failed to).
type Reply = Box<dyn FnOnce(Option<&str>) + Send>;

fn reply<T: Send + 'static>(ack: Ack<T>, result: Result<T, LogError>) -> Reply {
    Box::new(move |commit_error| {
        let result = match commit_error {
            None => result,
            Some(message) => Err(LogError::Storage {
                doing: "committing",
                message: message.to_owned(),
            }),
        };
        // The caller may have stopped waiting; nothing to do then.
        let _ = ack.send(result);
    })
}

fn write_loop(mut conn: Connection, ops: mpsc::Receiver<WriteOp>, hub: &LiveHub) {
    let mut tails = Tails::new();
    while let Ok(first) = ops.recv() {
        let mut group = vec![first];
        let mut events = 0;
        while events < MAX_GROUP_EVENTS {
            match ops.try_recv() {
                Ok(op) => {
                    events += match &op {
                        WriteOp::Append(batch, _) => batch.len(),
                        _ => 1,
                    };
                    group.push(op);
                }
                Err(_) => break,
            }
        }
        commit_group(&mut conn, &mut tails, hub, group);
    }
}

/// Applies `group` in one transaction, each operation in a savepoint of its
/// own so one refused append does not sink its neighbours.
fn commit_group(conn: &mut Connection, tails: &mut Tails, hub: &LiveHub, group: Vec<WriteOp>) {
    let mut replies: Vec<Reply> = Vec::with_capacity(group.len());
    let mut published: Vec<Batch> = Vec::new();
    let committed = (|| {
        let mut tx = conn.transaction()?;
        for op in group {
            replies.push(apply(&mut tx, tails, op, &mut published));
        }
        tx.commit()
    })();
    match committed {
        Ok(()) => {
            for batch in published {
                hub.publish(batch);
            }
            for reply in replies {
                reply(None);
            }
        }
        Err(error) => {
            // The cached tails may describe writes that were rolled back.
            tails.clear();
            let message = error.to_string();
            for reply in replies {
                reply(Some(&message));
            }
        }
    }
}

fn apply(
    tx: &mut Transaction<'_>,
    tails: &mut Tails,
    op: WriteOp,
    published: &mut Vec<Batch>,
) -> Reply {
    match op {
        WriteOp::CreateRun(run, ack) => {
            reply(ack, in_savepoint(tx, |tx| create_run(tx, &run).map(drop)))
        }
        WriteOp::Append(events, ack) => {
            let result = in_savepoint(tx, |tx| append(tx, tails, events));
            let result = result.map(|(run_id, tail, batch)| {
                if tail.1.state.is_terminal() {
                    tails.remove(&run_id);
                } else {
                    tails.insert(run_id, tail);
                }
                published.push(batch);
            });
            reply(ack, result)
        }
        WriteOp::PutArtifact {
            run_id,
            name,
            mime,
            data,
            ack,
        } => reply(
            ack,
            in_savepoint(tx, |tx| put_artifact(tx, &run_id, &name, &mime, &data)),
        ),
        WriteOp::DeleteFinishedBefore(ts, ack) => {
            reply(ack, in_savepoint(tx, |tx| delete_finished_before(tx, ts)))
        }
    }
}

fn in_savepoint<T>(
    tx: &mut Transaction<'_>,
    work: impl FnOnce(&Connection) -> Result<T, LogError>,
) -> Result<T, LogError> {
    let savepoint = tx.savepoint().map_err(db("opening a savepoint"))?;
    let value = work(&savepoint)?; // dropping the savepoint rolls it back
    savepoint.commit().map_err(db("releasing a savepoint"))?;
    Ok(value)
}

fn create_run(conn: &Connection, run: &NewRun) -> Result<i64, LogError> {
    let inserted = conn
        .execute(
            "INSERT INTO runs (run_id, tool, arguments, node, state, next_seq, created_ts, updated_ts)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6) ON CONFLICT (run_id) DO NOTHING",
            params![
                run.run_id.as_str(),
                run.tool,
                run.arguments.to_string(),
                run.node,
                RunState::Pending.as_str(),
                run.ts as i64
            ],
        )
        .map_err(db("creating a run"))?;
    if inserted == 0 {
        return Err(LogError::RunExists(run.run_id.clone()));
    }
    Ok(conn.last_insert_rowid())
}

/// Writes one append; returns the run's new cache entry and the batch to publish.
fn append(
    conn: &Connection,
    tails: &Tails,
    events: Batch,
) -> Result<(RunId, (i64, LogTail), Batch), LogError> {
    let run_id = append_target(&events)
        .expect("appends are not empty")
        .clone();
    let (run_key, tail) = match tails.get(&run_id) {
        Some(&cached) => cached,
        None => match load_tail(conn, &run_id)? {
            Some(loaded) => loaded,
            None => (create_run(conn, &run_started_by(&events)?)?, LogTail::EMPTY),
        },
    };
    let tail = tail
        .advance(&run_id, &events)
        .map_err(|violation| LogError::Invalid {
            run_id: run_id.clone(),
            violation,
        })?;
    let doing = "appending events";
    let mut insert = conn
        .prepare_cached("INSERT INTO events (run_key, seq, ts, body) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db(doing))?;
    let mut body = Vec::with_capacity(256);
    for event in events.iter() {
        body.clear();
        serde_json::to_writer(&mut body, &event.kind).expect("events serialize");
        let body = std::str::from_utf8(&body).expect("JSON is UTF-8");
        insert
            .execute(params![run_key, event.seq as i64, event.ts as i64, body])
            .map_err(db(doing))?;
    }
    let ts = events.last().expect("not empty").ts as i64;
    conn.prepare_cached(
        "UPDATE runs SET state = ?2, next_seq = ?3, updated_ts = ?4,
         finished_ts = CASE WHEN ?5 THEN ?4 ELSE NULL END WHERE run_key = ?1",
    )
    .and_then(|mut update| {
        update.execute(params![
            run_key,
            tail.state.as_str(),
            tail.next_seq as i64,
            ts,
            tail.state.is_terminal()
        ])
    })
    .map_err(db(doing))?;
    Ok((run_id, (run_key, tail), events))
}

fn load_tail(conn: &Connection, run_id: &RunId) -> Result<Option<(i64, LogTail)>, LogError> {
    let row: Option<(i64, i64, String)> = conn
        .query_row(
            "SELECT run_key, next_seq, state FROM runs WHERE run_id = ?1",
            [run_id.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()
        .map_err(db("reading a run's tail"))?;
    row.map(|(run_key, next_seq, state)| {
        let state = state.parse().map_err(|message| LogError::Storage {
            doing: "reading a run's tail",
            message,
        })?;
        Ok((
            run_key,
            LogTail {
                next_seq: next_seq as Seq,
                state,
            },
        ))
    })
    .transpose()
}

fn put_artifact(
    conn: &Connection,
    run_id: &RunId,
    name: &str,
    mime: &str,
    data: &[u8],
) -> Result<ArtifactRef, LogError> {
    let doing = "storing an artifact";
    let run_key: i64 = conn
        .query_row(
            "SELECT run_key FROM runs WHERE run_id = ?1",
            [run_id.as_str()],
            |row| row.get(0),
        )
        .optional()
        .map_err(db(doing))?
        .ok_or_else(|| LogError::UnknownRun(run_id.clone()))?;
    let artifact = ArtifactRef {
        name: name.to_owned(),
        uri: ArtifactRef::uri_for(run_id, name),
        mime: mime.to_owned(),
        bytes: data.len() as u64,
        sha256: sha256_hex(data),
    };
    let inserted = conn
        .execute(
            "INSERT INTO artifacts (run_key, name, mime, bytes, sha256, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (run_key, name) DO NOTHING",
            params![
                run_key,
                name,
                mime,
                data.len() as i64,
                artifact.sha256,
                data
            ],
        )
        .map_err(db(doing))?;
    if inserted == 0 {
        return Err(LogError::ArtifactExists {
            run_id: run_id.clone(),
            name: name.to_owned(),
        });
    }
    Ok(artifact)
}

fn delete_finished_before(conn: &Connection, ts: u64) -> Result<usize, LogError> {
    let doing = "deleting old runs";
    let old = "SELECT run_key FROM runs WHERE finished_ts < ?1";
    conn.execute(
        &format!("DELETE FROM events WHERE run_key IN ({old})"),
        [ts as i64],
    )
    .and_then(|_| {
        conn.execute(
            &format!("DELETE FROM artifacts WHERE run_key IN ({old})"),
            [ts as i64],
        )
    })
    .and_then(|_| conn.execute("DELETE FROM runs WHERE finished_ts < ?1", [ts as i64]))
    .map_err(db(doing))
}
