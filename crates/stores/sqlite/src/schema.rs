//! The tables, their version, and the migrations from older versions.

use std::path::Path;

use rusqlite::Connection;
use weir_runtime::LogError;

use crate::connection::db;
use crate::queries::started_arguments;

/// Bump when the schema changes; a newer file is refused, not misread, and
/// an older one is migrated when opened.
const SCHEMA_VERSION: i64 = 9;

/// `runs.arguments` is NULL when the run's arguments are those of its
/// `started` event (seq 0), which then keeps the only copy: a run's
/// arguments, often its largest field, are written once. A pending run has
/// no `started` event yet, so its row keeps them until it starts.
///
/// `runs.owner` is the name of the credential that started the run, NULL
/// when the server had none (schema 4). `runs.parent` is the id of the run
/// that started it as a child run, NULL for a run a client started
/// (schema 5). `runs.resume_record` is the text the front end that accepted
/// the run keeps to serve its caller again from another process
/// (`NewRun::resume_record`), NULL when it has none (schema 6).
/// `runs.client` is what the program that asked for the run called itself
/// (`NewRun::client`), NULL when it did not say (schema 7).
///
/// `events.body` is the event's JSON text, or (schema 8) a BLOB in the
/// compact form of `body.rs` for a partial result of text blocks. A schema 7
/// file needs no rewriting: its bodies are all JSON text, which still reads;
/// the version goes up so that an older weir refuses a file it would misread.
///
/// A row of `events` holds the event at its seq and (schema 9) may hold the
/// events after it too, up to the next row's seq, in the form `body.rs`
/// describes; such a row's bytes are in the segment file `events.segment`
/// names, `body` points there, and `segments` lists the segments
/// (`segments.rs`). A row with no segment holds its body
/// itself, so a schema 8 file's rows, one event each, read as they did.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_key     INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL UNIQUE,
    tool        TEXT NOT NULL,
    arguments   TEXT,
    node        TEXT NOT NULL,
    state       TEXT NOT NULL,
    next_seq    INTEGER NOT NULL,
    created_ts  INTEGER NOT NULL,
    updated_ts  INTEGER NOT NULL,
    finished_ts INTEGER,
    owner       TEXT,
    parent      TEXT,
    resume_record TEXT,
    client      TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_ts);
CREATE INDEX IF NOT EXISTS runs_by_state ON runs (state);
CREATE INDEX IF NOT EXISTS runs_by_finished ON runs (finished_ts) WHERE finished_ts IS NOT NULL;
CREATE TABLE IF NOT EXISTS events (
    run_key INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    ts      INTEGER NOT NULL,
    body    TEXT NOT NULL,
    segment INTEGER,
    PRIMARY KEY (run_key, seq)
);
CREATE INDEX IF NOT EXISTS events_by_segment ON events (segment) WHERE segment IS NOT NULL;
CREATE TABLE IF NOT EXISTS segments (
    id INTEGER PRIMARY KEY
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

/// Brings the file at `path` (open as `conn`) to the current schema: creates
/// it when empty, migrates it when older, refuses it when newer.
pub(crate) fn prepare(conn: &mut Connection, path: &Path) -> Result<(), LogError> {
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
        migrate_from_1(conn).map_err(db("moving the events table to schema 2"))?;
    }
    if version == 1 || version == 2 {
        migrate_from_2(conn).map_err(db("moving the runs table to schema 3"))?;
    }
    if (1..=3).contains(&version) {
        migrate_from_3(conn).map_err(db("adding run owners (schema 4)"))?;
    }
    if (1..=4).contains(&version) {
        migrate_from_4(conn).map_err(db("adding run parents (schema 5)"))?;
    }
    if (1..=5).contains(&version) {
        migrate_from_5(conn).map_err(db("adding run resume records (schema 6)"))?;
    }
    if (1..=6).contains(&version) {
        migrate_from_6(conn).map_err(db("adding run clients (schema 7)"))?;
    }
    if (1..=8).contains(&version) {
        migrate_from_8(conn).map_err(db("adding event segments (schema 9)"))?;
    }
    conn.execute_batch(SCHEMA)
        .and_then(|()| conn.pragma_update(None, "user_version", SCHEMA_VERSION))
        .map_err(db("creating the schema"))
}

/// Moves a schema 1 log to schema 2 (the events table; its runs table is
/// schema 2's). Schema 1 kept events in a `WITHOUT
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

/// Moves a schema 2 log to schema 3. Schema 2 kept every run's arguments
/// twice, in its row and in its `started` event; schema 3 keeps the row's
/// copy only while it is the only one (see [`SCHEMA`]). SQLite cannot drop
/// a `NOT NULL`, so the runs table is rebuilt, keeping every `run_key` (the
/// events and artifacts refer to them). A row's copy goes only when it is
/// byte for byte the text of its `started` event's arguments, as appends
/// do. One transaction: if it is interrupted, schema 2 stays as it was.
fn migrate_from_2(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    tx.execute_batch(
        "ALTER TABLE runs RENAME TO runs_schema_2;
         DROP INDEX runs_by_created;
         DROP INDEX runs_by_state;
         DROP INDEX runs_by_finished;",
    )?;
    tx.execute_batch(SCHEMA)?;
    tx.execute_batch(
        "INSERT INTO runs (run_key, run_id, tool, arguments, node, state, next_seq,
                           created_ts, updated_ts, finished_ts)
             SELECT run_key, run_id, tool, arguments, node, state, next_seq,
                    created_ts, updated_ts, finished_ts FROM runs_schema_2;
         DROP TABLE runs_schema_2;",
    )?;
    let duplicated: Vec<i64> = {
        let mut started = tx.prepare(
            "SELECT r.run_key, r.arguments, e.body FROM runs r
             JOIN events e ON e.run_key = r.run_key AND e.seq = 0",
        )?;
        let rows = started.query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, String>(2)?,
            ))
        })?;
        let mut duplicated = Vec::new();
        for row in rows {
            let (run_key, arguments, body) = row?;
            // Compared as text, as appends compare them (`Value`'s own `==`
            // with a `String` asks whether the value is that JSON string). A
            // body that does not parse keeps its row's copy: nothing is lost.
            let same = match (arguments, started_arguments(&body)) {
                (Some(row), Ok(started)) => {
                    serde_json::to_string(&started).is_ok_and(|text| text == row)
                }
                _ => false,
            };
            if same {
                duplicated.push(run_key);
            }
        }
        duplicated
    };
    {
        let mut forget = tx.prepare("UPDATE runs SET arguments = NULL WHERE run_key = ?1")?;
        for run_key in duplicated {
            forget.execute([run_key])?;
        }
    }
    tx.execute_batch("PRAGMA user_version = 3;")?;
    tx.commit()
}

/// Moves a schema 3 log to schema 4: runs get an owner, NULL for every run
/// written before (they were started without credentials, or by a server
/// that did not record them). A log migrated from schema 2 just now has the
/// column already (its runs table was rebuilt from [`SCHEMA`]). One
/// transaction: if it is interrupted, schema 3 stays as it was.
fn migrate_from_3(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let has_owner: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('runs') WHERE name = 'owner'",
        [],
        |row| row.get(0),
    )?;
    if !has_owner {
        tx.execute_batch("ALTER TABLE runs ADD COLUMN owner TEXT;")?;
    }
    tx.execute_batch("PRAGMA user_version = 4;")?;
    tx.commit()
}

/// Moves a schema 4 log to schema 5: runs get a parent, NULL for every run
/// written before (child runs did not exist). A log migrated from schema 2
/// just now has the column already. One transaction: if it is interrupted,
/// schema 4 stays as it was.
fn migrate_from_4(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let has_parent: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('runs') WHERE name = 'parent'",
        [],
        |row| row.get(0),
    )?;
    if !has_parent {
        tx.execute_batch("ALTER TABLE runs ADD COLUMN parent TEXT;")?;
    }
    tx.execute_batch("PRAGMA user_version = 5;")?;
    tx.commit()
}

/// Moves a schema 5 log to schema 6: runs get a resume record, NULL for
/// every run written before (their call streams could be resumed only where
/// they were accepted). A log migrated from schema 2 just now has the
/// column already. One transaction: if it is interrupted, schema 5 stays as
/// it was.
fn migrate_from_5(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let has_record: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('runs') WHERE name = 'resume_record'",
        [],
        |row| row.get(0),
    )?;
    if !has_record {
        tx.execute_batch("ALTER TABLE runs ADD COLUMN resume_record TEXT;")?;
    }
    tx.execute_batch("PRAGMA user_version = 6;")?;
    tx.commit()
}

/// Moves a schema 6 log to schema 7: runs get a client, NULL for every run
/// written before (nobody asked the client's name). A log migrated from
/// schema 2 just now has the column already. One transaction: if it is
/// interrupted, schema 6 stays as it was.
fn migrate_from_6(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let has_client: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('runs') WHERE name = 'client'",
        [],
        |row| row.get(0),
    )?;
    if !has_client {
        tx.execute_batch("ALTER TABLE runs ADD COLUMN client TEXT;")?;
    }
    tx.execute_batch("PRAGMA user_version = 7;")?;
    tx.commit()
}

/// Moves a schema 7 or 8 log to schema 9: events get a segment, NULL for
/// every row written before (each holds its body itself). Schema 8 needs
/// nothing else: its compact bodies read as they did. One transaction: if
/// it is interrupted, the file stays as it was.
fn migrate_from_8(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let has_segment: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('events') WHERE name = 'segment'",
        [],
        |row| row.get(0),
    )?;
    if !has_segment {
        tx.execute_batch("ALTER TABLE events ADD COLUMN segment INTEGER;")?;
    }
    tx.execute_batch("PRAGMA user_version = 9;")?;
    tx.commit()
}
