//! The writer thread. It owns the one write connection and commits
//! whatever is queued in one transaction (group commit), so many small
//! appends cost one commit; each operation runs in a savepoint of its own,
//! so one refused append does not sink its neighbours. Stored batches are
//! published live only once their transaction has committed.

use std::sync::{Arc, mpsc};

use rusqlite::Connection;
use tokio::sync::oneshot;
use weir_core::{ArtifactRef, RunId};
use weir_runtime::LogError;
use weir_runtime::log::{Batch, LiveHub, NewRun};

use crate::checkpoint::WalSize;
use crate::connection::db;
use crate::segments::Appender;
use crate::writes::{self, Tails};

/// Most events the writer puts in one transaction.
const MAX_GROUP_EVENTS: usize = 4096;

/// Where an operation's result goes.
pub(crate) type Ack<T> = oneshot::Sender<Result<T, LogError>>;

/// What the writer thread is asked to do.
pub(crate) enum WriteOp {
    CreateRun(NewRun, Ack<()>),
    /// An append; with a run, its first, which registers it.
    Append(Option<NewRun>, Batch, Ack<()>),
    PutArtifact {
        run_id: RunId,
        name: String,
        mime: String,
        data: Vec<u8>,
        ack: Ack<ArtifactRef>,
    },
    DeleteFinishedBefore(u64, Ack<usize>),
}

impl WriteOp {
    /// Answers an operation that never ran: its transaction could not begin.
    fn refuse(self, message: &str) {
        fn send<T>(ack: Ack<T>, message: &str) {
            let _ = ack.send(Err(LogError::Storage {
                doing: "taking the log's write lock",
                message: message.to_owned(),
            }));
        }
        match self {
            WriteOp::CreateRun(_, ack) | WriteOp::Append(_, _, ack) => send(ack, message),
            WriteOp::PutArtifact { ack, .. } => send(ack, message),
            WriteOp::DeleteFinishedBefore(_, ack) => send(ack, message),
        }
    }
}

/// The queue to the writer thread; the thread stops when it is dropped.
pub(crate) struct Writer {
    ops: mpsc::Sender<WriteOp>,
}

impl Writer {
    /// Starts the writer thread on `conn`, publishing what it stores to `hub`.
    pub(crate) fn start(
        conn: Connection,
        hub: Arc<LiveHub>,
        wal: WalSize,
        appender: Appender,
    ) -> Result<Writer, LogError> {
        let (ops, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("weir-sqlite-writer".into())
            .spawn(move || write_loop(conn, queue, &hub, &wal, appender))
            .map_err(|error| LogError::Storage {
                doing: "starting the writer thread",
                message: error.to_string(),
            })?;
        Ok(Writer { ops })
    }

    /// Queues `op` and waits until the transaction holding it has committed.
    pub(crate) async fn write<T>(&self, op: impl FnOnce(Ack<T>) -> WriteOp) -> Result<T, LogError> {
        let (ack, done) = oneshot::channel();
        let stopped = || LogError::Storage {
            doing: "writing",
            message: "the writer thread has stopped".into(),
        };
        self.ops.send(op(ack)).map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }
}

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

fn write_loop(
    conn: Connection,
    ops: mpsc::Receiver<WriteOp>,
    hub: &LiveHub,
    wal: &WalSize,
    mut appender: Appender,
) {
    // Room for every statement the writer prepares (its transaction's own,
    // each write's), so none is parsed again for each group.
    conn.set_prepared_statement_cache_capacity(64);
    let mut tails = Tails::new();
    while let Ok(first) = ops.recv() {
        let mut group = vec![first];
        let mut events = 0;
        while events < MAX_GROUP_EVENTS {
            match ops.try_recv() {
                Ok(op) => {
                    events += match &op {
                        WriteOp::Append(_, batch, _) => batch.len(),
                        _ => 1,
                    };
                    group.push(op);
                }
                Err(_) => break,
            }
        }
        commit_group(&conn, &mut tails, &mut appender, hub, group);
        wal.bound(&conn);
    }
}

/// Applies `group` in one transaction, each operation in a savepoint of its
/// own so one refused append does not sink its neighbours. The transaction
/// takes the write lock as it begins: where the next segment bytes go is
/// read in it, and no other process may write there meanwhile.
fn commit_group(
    conn: &Connection,
    tails: &mut Tails,
    appender: &mut Appender,
    hub: &LiveHub,
    group: Vec<WriteOp>,
) {
    if let Err(error) = statement(conn, "BEGIN IMMEDIATE") {
        // Another process held the write lock past the busy timeout: none
        // of the group ran, and each caller hears why (an append is retried).
        let message = error.to_string();
        for op in group {
            op.refuse(&message);
        }
        return;
    }
    let mut replies: Vec<Reply> = Vec::with_capacity(group.len());
    let mut published: Vec<Batch> = Vec::new();
    appender.begin();
    for op in group {
        replies.push(apply(conn, tails, appender, op, &mut published));
    }
    let committed = appender
        .finish()
        .map_err(|error| error.to_string())
        .and_then(|()| statement(conn, "COMMIT").map_err(|error| error.to_string()));
    if committed.is_err() && !conn.is_autocommit() {
        let _ = statement(conn, "ROLLBACK");
    }
    match committed {
        Ok(()) => {
            for batch in published {
                hub.publish(batch);
            }
            for reply in replies {
                reply(None);
            }
        }
        Err(message) => {
            // The cached tails may describe writes that were rolled back.
            tails.clear();
            for reply in replies {
                reply(Some(&message));
            }
        }
    }
}

fn apply(
    tx: &Connection,
    tails: &mut Tails,
    appender: &mut Appender,
    op: WriteOp,
    published: &mut Vec<Batch>,
) -> Reply {
    match op {
        WriteOp::CreateRun(run, ack) => reply(
            ack,
            in_savepoint(tx, |tx| writes::create_run(tx, &run).map(drop)),
        ),
        WriteOp::Append(starting, events, ack) => {
            let result = in_savepoint(tx, |tx| {
                writes::append(tx, tails, appender, starting.as_ref(), events)
            });
            if result.is_err() {
                appender.rolled_back();
            }
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
            in_savepoint(tx, |tx| {
                writes::put_artifact(tx, &run_id, &name, &mime, &data)
            }),
        ),
        WriteOp::DeleteFinishedBefore(ts, ack) => {
            let result = in_savepoint(tx, |tx| writes::delete_finished_before(tx, ts));
            let (result, unused) = match result {
                Ok((deleted, unused)) => (Ok(deleted), unused),
                Err(error) => (Err(error), Vec::new()),
            };
            let segments = appender.segments().clone();
            let reply = reply(ack, result);
            Box::new(move |commit_error| {
                // Their rows are gone only once this has committed.
                if commit_error.is_none() {
                    segments.remove(&unused);
                }
                reply(commit_error);
            })
        }
    }
}

/// Runs `work` in a savepoint of the open transaction: rolled back if it
/// fails, so its neighbours in the group still commit.
fn in_savepoint<T>(
    tx: &Connection,
    work: impl FnOnce(&Connection) -> Result<T, LogError>,
) -> Result<T, LogError> {
    statement(tx, "SAVEPOINT op").map_err(db("opening a savepoint"))?;
    let result = work(tx);
    let closed = match result {
        Ok(_) => statement(tx, "RELEASE op"),
        Err(_) => statement(tx, "ROLLBACK TO op").and_then(|()| statement(tx, "RELEASE op")),
    };
    closed.map_err(db("closing a savepoint"))?;
    result
}

/// Runs one of the transaction's own statements, prepared once: parsing
/// `BEGIN`, `COMMIT` and a savepoint's two statements anew for every group
/// showed in the writer's profile.
fn statement(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}
