//! What each write does to the tables, inside the writer's transaction:
//! register a run, append events (checked against the run's tail), store an
//! artifact, delete old runs.

use rusqlite::{Connection, OptionalExtension, params};
use weir_core::{ArtifactRef, EventKind, LogTail, RunId, RunState, Seq};
use weir_runtime::LogError;
use weir_runtime::log::kit::{append_target, run_started_by, sha256_hex};
use weir_runtime::log::{Batch, NewRun};

use crate::body::{self, Body};
use crate::connection::db;
use crate::segments::{Appender, Segments};

/// Per open run: its key in `runs` and its tail. Dropped at the terminal event.
pub(crate) type Tails = std::collections::HashMap<RunId, (i64, LogTail)>;

/// Registers a pending run, with its arguments: it has no `started` event
/// to keep them yet.
pub(crate) fn create_run(conn: &Connection, run: &NewRun) -> Result<i64, LogError> {
    insert_run(conn, run, Some(run.arguments.to_string()))
}

/// Inserts `run`'s row; `arguments` is `None` when they are kept only in
/// the run's `started` event (see the schema).
fn insert_run(conn: &Connection, run: &NewRun, arguments: Option<String>) -> Result<i64, LogError> {
    let inserted = conn
        .execute(
            "INSERT INTO runs (run_id, tool, arguments, node, state, next_seq, created_ts, updated_ts, owner, parent, resume_record, client)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (run_id) DO NOTHING",
            params![
                run.run_id.as_str(),
                run.tool,
                arguments,
                run.node,
                RunState::Pending.as_str(),
                run.ts as i64,
                run.owner,
                run.parent.as_ref().map(RunId::as_str),
                run.resume_record,
                run.client
            ],
        )
        .map_err(db("creating a run"))?;
    if inserted == 0 {
        return Err(LogError::RunExists(run.run_id.clone()));
    }
    Ok(conn.last_insert_rowid())
}

/// Writes one append, first registering `starting` (the run's
/// `EventLog::start_run`); returns the run's new cache entry and the batch
/// to publish.
pub(crate) fn append(
    conn: &Connection,
    tails: &Tails,
    appender: &mut Appender,
    starting: Option<&NewRun>,
    events: Batch,
) -> Result<(RunId, (i64, LogTail), Batch), LogError> {
    let run_id = append_target(&events)
        .expect("appends are not empty")
        .clone();
    let known = match tails.get(&run_id) {
        Some(&cached) => Some(cached),
        None => load_tail(conn, &run_id)?,
    };
    // The `started` event this append stores keeps a new run's arguments.
    let (run_key, before) = match (known, starting) {
        (Some(_), Some(run)) => return Err(LogError::RunExists(run.run_id.clone())),
        (Some(known), None) => known,
        // `SqliteLog::start_run` checked that the events start it.
        (None, Some(run)) => (insert_run(conn, run, None)?, LogTail::EMPTY),
        (None, None) => (
            insert_run(conn, &run_started_by(&events)?, None)?,
            LogTail::EMPTY,
        ),
    };
    let tail = before
        .advance(&run_id, &events)
        .map_err(|violation| LogError::Invalid {
            run_id: run_id.clone(),
            violation,
        })?;
    let doing = "appending events";
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO events (run_key, seq, ts, body, segment) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(db(doing))?;
    // A row per few events, keyed by its first (`body.rs`); the bytes of
    // several in a segment (`segments.rs`).
    let mut buffer = Vec::with_capacity(256);
    let mut rest = &events[..];
    while let [first, ..] = rest {
        let (held, body) = body::encode_row(rest, &mut buffer);
        let pointer;
        let (body, segment) = match body {
            Body::Several(bytes) => {
                let segment;
                (segment, pointer) = appender.write(conn, bytes)?;
                (Body::Compact(&pointer), Some(segment))
            }
            alone => (alone, None),
        };
        insert
            .execute(params![
                run_key,
                first.seq as i64,
                first.ts as i64,
                body,
                segment
            ])
            .map_err(db(doing))?;
        rest = &rest[held..];
    }
    // A pending run has just started (its tail checked that `started` comes
    // first). When `started` carries the arguments the run was registered
    // with, the row's copy goes and summaries read `started`'s; arguments
    // that differ stay in the row, as its summary reports them. Compared as
    // the row's text, so the copies are equal to the byte. Once per run.
    if let (Some((_, LogTail { next_seq: 0, .. })), EventKind::Started(started)) =
        (known, &events[0].kind)
    {
        conn.prepare_cached(
            "UPDATE runs SET arguments = NULL WHERE run_key = ?1 AND arguments = ?2",
        )
        .and_then(|mut forget| forget.execute(params![run_key, started.arguments.to_string()]))
        .map_err(db(doing))?;
    }
    let ts = events.last().expect("not empty").ts as i64;
    let updated = if tail.state == before.state {
        // Most appends: setting `state` and `finished_ts` to what they
        // were still rewrites their index entries, one more page for
        // every commit (5 WAL frames rather than 4 for an append).
        conn.prepare_cached("UPDATE runs SET next_seq = ?2, updated_ts = ?3 WHERE run_key = ?1")
            .and_then(|mut update| update.execute(params![run_key, tail.next_seq as i64, ts]))
    } else {
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
    };
    updated.map_err(db(doing))?;
    Ok((run_id, (run_key, tail), events))
}

fn load_tail(conn: &Connection, run_id: &RunId) -> Result<Option<(i64, LogTail)>, LogError> {
    let row: Option<(i64, i64, String)> = conn
        .prepare_cached("SELECT run_key, next_seq, state FROM runs WHERE run_id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([run_id.as_str()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .optional()
        })
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

pub(crate) fn put_artifact(
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

/// Deletes the runs finished before `ts`; returns how many, and the
/// segments no row points into any more, whose files go once this commits.
pub(crate) fn delete_finished_before(
    conn: &Connection,
    ts: u64,
) -> Result<(usize, Vec<i64>), LogError> {
    let doing = "deleting old runs";
    let old = "SELECT run_key FROM runs WHERE finished_ts < ?1";
    let deleted = conn
        .execute(
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
        .map_err(db(doing))?;
    Ok((deleted, Segments::unused(conn)?))
}
