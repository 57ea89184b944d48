//! What each read asks the tables: a run's events, its summary, the runs
//! passing a filter, artifacts; and how a row becomes a [`RunSummary`].

use std::ops::Range;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use weir_core::{ArtifactRef, EventKind, RunEvent, RunId, RunState, Seq};
use weir_runtime::LogError;
use weir_runtime::log::kit::clamp_range;
use weir_runtime::log::{RunFilter, RunSummary};

use crate::body;
use crate::connection::db;
use crate::segments::Segments;

/// Up to `limit` events of `run_id` from seq `from` on.
pub(crate) fn events(
    conn: &Connection,
    segments: &Segments,
    run_id: &RunId,
    from: Seq,
    limit: usize,
) -> Result<Vec<RunEvent>, LogError> {
    let doing = "reading events";
    let run_key: i64 = conn
        .prepare_cached("SELECT run_key FROM runs WHERE run_id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([run_id.as_str()], |row| row.get(0))
                .optional()
        })
        .map_err(db(doing))?
        .ok_or_else(|| LogError::UnknownRun(run_id.clone()))?;
    // Seqs are SQLite integers (i64). A `from` past i64::MAX is past every
    // event a log can hold; cast, it would turn negative and match them all.
    let from_key = i64::try_from(from).unwrap_or(i64::MAX);
    // From the row holding `from` (a row holds its seq and the events after
    // it, up to the next row's): each row holds at least one event, so
    // `limit` rows after it are all a read can need.
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, ts, body, segment FROM events WHERE run_key = ?1 AND seq >= coalesce(
                 (SELECT max(seq) FROM events WHERE run_key = ?1 AND seq <= ?2), 0)
             ORDER BY seq LIMIT ?3",
        )
        .map_err(db(doing))?;
    let rows_wanted = i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1);
    let mut rows = stmt
        .query(params![run_key, from_key, rows_wanted])
        .map_err(db(doing))?;
    let mut events = Vec::new();
    let mut expected = None;
    let mut reader = segments.reader();
    let wanted = body::Wanted {
        run_id,
        from,
        limit,
    };
    while events.len() < limit {
        let Some(row) = rows.next().map_err(db(doing))? else {
            break;
        };
        let seq = row.get::<_, i64>(0).map_err(db(doing))? as Seq;
        let ts = row.get::<_, i64>(1).map_err(db(doing))? as u64;
        let unreadable = |message: String| LogError::Storage {
            doing,
            message: format!("events from {seq} of run {run_id} cannot be read: {message}"),
        };
        if expected.is_some_and(|expected| expected != seq) {
            return Err(unreadable(format!(
                "the row before ends at {}",
                expected.unwrap_or_default()
            )));
        }
        let mut body = row.get_ref(2).map_err(db(doing))?;
        if let Some(segment) = row.get::<_, Option<i64>>(3).map_err(db(doing))? {
            let pointer = body
                .as_blob()
                .map_err(|error| unreadable(error.to_string()))?;
            body = ValueRef::Blob(reader.read(segment, pointer).map_err(unreadable)?);
        }
        expected = body::decode_row(seq, ts, body, &wanted, &mut events).map_err(unreadable)?;
    }
    Ok(events)
}

/// Runs passing `filter`, newest first.
pub(crate) fn list_runs(
    conn: &Connection,
    filter: &RunFilter,
) -> Result<Vec<RunSummary>, LogError> {
    let mut sql = format!("{SELECT_SUMMARY} WHERE 1 = 1");
    let mut args: Vec<String> = Vec::new();
    if !filter.states.is_empty() {
        let marks = vec!["?"; filter.states.len()].join(", ");
        sql.push_str(&format!(" AND r.state IN ({marks})"));
        args.extend(filter.states.iter().map(|s| s.as_str().to_owned()));
    }
    for (column, value) in [
        ("tool", &filter.tool),
        ("node", &filter.node),
        ("owner", &filter.owner),
    ] {
        if let Some(value) = value {
            sql.push_str(&format!(" AND r.{column} = ?"));
            args.push(value.clone());
        }
    }
    sql.push_str(" ORDER BY r.created_ts DESC, r.run_id DESC");
    if let Some(limit) = filter.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    let doing = "listing runs";
    let mut stmt = conn.prepare(&sql).map_err(db(doing))?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), summary_from_row)
        .map_err(db(doing))?;
    rows.map(|row| row.map_err(db(doing))?).collect()
}

/// An artifact's description.
pub(crate) fn artifact(
    conn: &Connection,
    run_id: &RunId,
    name: &str,
) -> Result<ArtifactRef, LogError> {
    conn.query_row(
        "SELECT a.mime, a.bytes, a.sha256 FROM runs r JOIN artifacts a ON a.run_key = r.run_key
         WHERE r.run_id = ?1 AND a.name = ?2",
        params![run_id.as_str(), name],
        |row| {
            Ok(ArtifactRef {
                uri: ArtifactRef::uri_for(run_id, name),
                name: name.to_owned(),
                mime: row.get(0)?,
                bytes: row.get::<_, i64>(1)? as u64,
                sha256: row.get(2)?,
            })
        },
    )
    .optional()
    .map_err(db("reading an artifact"))?
    .ok_or_else(|| missing_artifact(conn, run_id, name))
}

/// Bytes `range` of an artifact, clamped to its size.
pub(crate) fn artifact_bytes(
    conn: &Connection,
    run_id: &RunId,
    name: &str,
    range: Range<u64>,
) -> Result<Vec<u8>, LogError> {
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
        return Err(missing_artifact(conn, run_id, name));
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
}

/// A run's summary: its row, and the body of its `started` event when the
/// row leaves the arguments to it (see the schema).
const SELECT_SUMMARY: &str = "SELECT r.run_id, r.tool, r.node, r.state, r.next_seq,
    r.created_ts, r.updated_ts, r.finished_ts, r.arguments, e.body, r.owner, r.parent, r.client
    FROM runs r LEFT JOIN events e
    ON r.arguments IS NULL AND e.run_key = r.run_key AND e.seq = 0";

fn summary_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<RunSummary, LogError>> {
    let run_id: String = row.get(0)?;
    let state: String = row.get(3)?;
    let arguments: Option<String> = row.get(8)?;
    let started: Option<String> = row.get(9)?;
    let parent: Option<String> = row.get(11)?;
    let parent = match parent.as_deref().map(RunId::parse).transpose() {
        Ok(parent) => parent,
        Err(error) => {
            return Ok(Err(LogError::Storage {
                doing: "reading a run",
                message: format!("its parent: {error}"),
            }));
        }
    };
    let decoded = RunId::parse(&run_id)
        .map_err(|error| error.to_string())
        .and_then(|run_id| Ok((run_id, state.parse::<RunState>()?)))
        .and_then(|(run_id, state)| {
            let arguments = match (arguments, started) {
                (Some(arguments), _) => {
                    serde_json::from_str(&arguments).map_err(|error| error.to_string())?
                }
                (None, Some(started)) => started_arguments(&started)?,
                (None, None) => {
                    return Err(format!(
                        "run {run_id} keeps its arguments in its started event, which is missing"
                    ));
                }
            };
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
        owner: row.get(10)?,
        client: row.get(12)?,
        parent,
    }))
}

/// The run's summary, if it exists.
pub(crate) fn find_run(conn: &Connection, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
    let doing = "reading a run";
    let mut stmt = conn
        .prepare_cached(&format!("{SELECT_SUMMARY} WHERE r.run_id = ?1"))
        .map_err(db(doing))?;
    stmt.query_row([run_id.as_str()], summary_from_row)
        .optional()
        .map_err(db(doing))?
        .transpose()
}

/// The resume record run `run_id` was registered with.
pub(crate) fn resume_record(conn: &Connection, run_id: &RunId) -> Result<Option<String>, LogError> {
    let doing = "reading a run's resume record";
    conn.prepare_cached("SELECT resume_record FROM runs WHERE run_id = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([run_id.as_str()], |row| row.get::<_, Option<String>>(0))
                .optional()
        })
        .map_err(db(doing))?
        .ok_or_else(|| LogError::UnknownRun(run_id.clone()))
}

/// The error for an artifact that is not there: its run may be missing too.
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

/// The arguments in the body of a `started` event.
pub(crate) fn started_arguments(body: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(body) {
        Ok(EventKind::Started(started)) => Ok(started.arguments),
        Ok(other) => Err(format!(
            "the first event is `{}`, not `started`",
            other.type_name()
        )),
        Err(error) => Err(format!("the started event is not valid JSON: {error}")),
    }
}
