//! The file's schema: a newer one is refused, an older one migrated, and a
//! run's arguments written once.

use std::path::Path;

use serde_json::{Value, json};
use weir_core::{Completed, Content, EventKind, Partial, RunEvent, Started};
use weir_runtime::EventLog;
use weir_runtime::log::{NewRun, RunFilter, RunSummary};
use weir_runtime::store_contract::support::{body_event, events, run_id, started};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

fn done() -> EventKind {
    EventKind::Completed(Completed::default())
}

fn started_with(arguments: Value) -> EventKind {
    EventKind::Started(Started {
        tool: "t".into(),
        arguments,
        node: "test".into(),
    })
}

fn registered(name: &str, arguments: Value) -> NewRun {
    NewRun {
        run_id: run_id(name),
        tool: "t".into(),
        arguments,
        node: "test".into(),
        ts: 10,
        owner: None,
        client: None,
        parent: None,
        resume_record: None,
    }
}

/// Runs in every way a run's arguments can reach the log: registered, then
/// started with the same arguments (what the scheduler does); registered
/// only (pending); started without being registered; registered, then
/// started with other arguments (the registered ones are its arguments).
async fn write_runs_of_every_kind(log: &SqliteLog) {
    log.create_run(registered("scheduled", json!({"n": 1, "code": "print(1)"})))
        .await
        .unwrap();
    let scheduled = vec![
        started_with(json!({"n": 1, "code": "print(1)"})),
        body_event(1, 1),
        done(),
    ];
    log.append(events(&run_id("scheduled"), 0, scheduled).into())
        .await
        .unwrap();
    log.create_run(registered("pending", json!({"n": 2})))
        .await
        .unwrap();
    log.append(
        events(
            &run_id("appended"),
            0,
            vec![started_with(json!({"n": 3})), done()],
        )
        .into(),
    )
    .await
    .unwrap();
    log.create_run(registered("renamed", json!({"n": 4})))
        .await
        .unwrap();
    log.append(events(&run_id("renamed"), 0, vec![started_with(json!({"n": 5}))]).into())
        .await
        .unwrap();
}

/// Each run's `runs.arguments`, by run id: `None` where the `started` event
/// keeps the only copy.
/// A log at `path` with [`write_runs_of_every_kind`], closed again: its
/// summaries and each run's events, as the current schema gives them.
async fn runs_of_every_kind_written(path: &Path) -> (Vec<RunSummary>, Vec<Vec<RunEvent>>) {
    let log = SqliteLog::open(path, SqliteOptions::default()).unwrap();
    write_runs_of_every_kind(&log).await;
    let summaries = log.list_runs(&RunFilter::default()).await.unwrap();
    let mut logs = Vec::new();
    for summary in &summaries {
        logs.push(log.read(&summary.run_id, 0, 100).await.unwrap());
    }
    (summaries, logs)
}

fn stored_arguments(path: &Path) -> Vec<(String, Option<String>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT run_id, arguments FROM runs ORDER BY run_id")
        .unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The schema this weir writes.
const CURRENT_SCHEMA: i64 = 9;

fn user_version(path: &Path) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap()
}

/// Puts the runs table back the way schema 6 laid it out: no clients.
fn runs_back_to_schema_6(path: &Path) {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch("ALTER TABLE runs DROP COLUMN client; PRAGMA user_version = 6;")
        .unwrap();
}

/// Puts the runs table back the way schema 5 laid it out: no resume records.
fn runs_back_to_schema_5(path: &Path) {
    runs_back_to_schema_6(path);
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch("ALTER TABLE runs DROP COLUMN resume_record; PRAGMA user_version = 5;")
        .unwrap();
}

/// Puts the runs table back the way schema 4 laid it out: no parents.
fn runs_back_to_schema_4(path: &Path) {
    runs_back_to_schema_5(path);
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch("ALTER TABLE runs DROP COLUMN parent; PRAGMA user_version = 4;")
        .unwrap();
}

/// Puts the runs table back the way schema 3 laid it out: no owners.
fn runs_back_to_schema_3(path: &Path) {
    runs_back_to_schema_4(path);
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch("ALTER TABLE runs DROP COLUMN owner; PRAGMA user_version = 3;")
        .unwrap();
}

/// Puts the runs table back the way schemas 1 and 2 laid it out: every row
/// with its arguments (`NOT NULL`), copied from `started` where the current
/// schema left them there.
fn runs_back_to_schema_2(path: &Path) {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch(
            "ALTER TABLE runs RENAME TO runs_now;
             DROP INDEX runs_by_created;
             DROP INDEX runs_by_state;
             DROP INDEX runs_by_finished;
             CREATE TABLE runs (
                 run_key INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE,
                 tool TEXT NOT NULL, arguments TEXT NOT NULL, node TEXT NOT NULL,
                 state TEXT NOT NULL, next_seq INTEGER NOT NULL,
                 created_ts INTEGER NOT NULL, updated_ts INTEGER NOT NULL, finished_ts INTEGER);
             CREATE INDEX runs_by_created ON runs (created_ts);
             CREATE INDEX runs_by_state ON runs (state);
             CREATE INDEX runs_by_finished ON runs (finished_ts) WHERE finished_ts IS NOT NULL;
             INSERT INTO runs SELECT r.run_key, r.run_id, r.tool,
                 coalesce(r.arguments,
                     (SELECT e.body -> '$.arguments' FROM events e
                      WHERE e.run_key = r.run_key AND e.seq = 0)),
                 r.node, r.state, r.next_seq, r.created_ts, r.updated_ts, r.finished_ts
             FROM runs_now r;
             DROP TABLE runs_now;
             PRAGMA user_version = 2;",
        )
        .unwrap();
}

#[tokio::test]
async fn a_newer_schema_is_refused_with_advice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    drop(SqliteLog::open(&path, SqliteOptions::default()).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let error = SqliteLog::open(&path, SqliteOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("newer weir") && error.contains("--data-dir"),
        "{error}"
    );
}

/// A log written by schema 1 (events `WITHOUT ROWID`) opens with every
/// event intact, on the current schema, and takes new appends.
#[tokio::test]
async fn a_schema_1_log_is_migrated_with_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let run = run_id("old");
    let kinds = vec![started("t"), body_event(0, 1), body_event(1, 2)];
    let written = events(&run, 0, kinds);
    {
        let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
        // One event per append: a row each, as schema 1 kept them.
        for event in &written {
            log.append(vec![event.clone()].into()).await.unwrap();
        }
    }
    // Put the file back the way schema 1 laid it out.
    runs_back_to_schema_2(&path);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "ALTER TABLE events RENAME TO events_now;
         CREATE TABLE events (run_key INTEGER NOT NULL, seq INTEGER NOT NULL,
             ts INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_key, seq)) WITHOUT ROWID;
         INSERT INTO events SELECT run_key, seq, ts, body FROM events_now;
         DROP TABLE events_now;
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(log.read(&run, 0, 100).await.unwrap(), written);
    log.append(events(&run, 3, vec![done()]).into())
        .await
        .unwrap();
    assert_eq!(log.read(&run, 0, 100).await.unwrap().len(), 4);
    drop(log);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    let without_rowid: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'events' AND sql LIKE '%WITHOUT ROWID%'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!((version, without_rowid), (CURRENT_SCHEMA, 0));
}

/// A log written by schema 2 (every run's arguments in its row as well as in
/// its `started` event) opens on the current schema with every summary as
/// it was; the copies `started` holds are gone from the rows.
#[tokio::test]
async fn a_schema_2_log_is_migrated_with_every_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let (summaries, logs) = runs_of_every_kind_written(&path).await;
    runs_back_to_schema_2(&path);
    assert!(
        stored_arguments(&path)
            .iter()
            .all(|(_, arguments)| arguments.is_some()),
        "schema 2 keeps every run's arguments in its row"
    );

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(
        log.list_runs(&RunFilter::default()).await.unwrap(),
        summaries
    );
    for (summary, events) in summaries.iter().zip(&logs) {
        assert_eq!(&log.read(&summary.run_id, 0, 100).await.unwrap(), events);
        assert_eq!(
            log.get_run(&summary.run_id).await.unwrap().as_ref(),
            Some(summary)
        );
    }
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    assert_eq!(
        stored_arguments(&path),
        [
            ("appended".to_owned(), None),
            ("pending".to_owned(), Some(r#"{"n":2}"#.to_owned())),
            ("renamed".to_owned(), Some(r#"{"n":4}"#.to_owned())),
            ("scheduled".to_owned(), None),
        ]
    );
    // And the migrated file takes appends as a new one does.
    log.append(events(&run_id("pending"), 0, vec![started_with(json!({"n": 2}))]).into())
        .await
        .unwrap();
    let pending = log.get_run(&run_id("pending")).await.unwrap().unwrap();
    assert_eq!(pending.arguments, json!({"n": 2}));
    assert_eq!(stored_arguments(&path)[1], ("pending".to_owned(), None));
}

/// A log written by schema 3 (runs without owners) opens on the current schema with
/// every summary and event as it was, each run without an owner; the
/// migrated file keeps the owners of runs registered afterwards, and lists
/// by them.
#[tokio::test]
async fn a_schema_3_log_is_migrated_with_runs_that_have_no_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let (summaries, logs) = runs_of_every_kind_written(&path).await;
    runs_back_to_schema_3(&path);
    assert_eq!(user_version(&path), 3);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    let migrated = log.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(migrated, summaries);
    assert!(migrated.iter().all(|run| run.owner.is_none()));
    for (summary, events) in summaries.iter().zip(&logs) {
        assert_eq!(&log.read(&summary.run_id, 0, 100).await.unwrap(), events);
    }
    let mut owned = registered("owned", json!({}));
    owned.owner = Some("alice".into());
    log.create_run(owned).await.unwrap();
    log.append(events(&run_id("owned"), 0, vec![started_with(json!({})), done()]).into())
        .await
        .unwrap();
    drop(log);
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let alices = log
        .list_runs(&RunFilter {
            owner: Some("alice".into()),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(alices.len(), 1);
    assert_eq!(
        (alices[0].run_id.as_str(), alices[0].owner.as_deref()),
        ("owned", Some("alice"))
    );
}

/// A log written by schema 4 (runs without parents) opens on the current schema with
/// every summary and event as it was, each run without a parent; the
/// migrated file keeps the parents of runs registered afterwards, also
/// across a reopen.
#[tokio::test]
async fn a_schema_4_log_is_migrated_with_runs_that_have_no_parent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let (summaries, logs) = runs_of_every_kind_written(&path).await;
    runs_back_to_schema_4(&path);
    assert_eq!(user_version(&path), 4);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    let migrated = log.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(migrated, summaries);
    assert!(migrated.iter().all(|run| run.parent.is_none()));
    for (summary, events) in summaries.iter().zip(&logs) {
        assert_eq!(&log.read(&summary.run_id, 0, 100).await.unwrap(), events);
    }
    let mut child = registered("child", json!({}));
    child.parent = Some(run_id("scheduled"));
    log.create_run(child).await.unwrap();
    log.append(events(&run_id("child"), 0, vec![started_with(json!({})), done()]).into())
        .await
        .unwrap();
    drop(log);
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let child = log.get_run(&run_id("child")).await.unwrap().unwrap();
    assert_eq!(child.parent, Some(run_id("scheduled")));
}

/// A log written by schema 5 (runs without resume records) opens on the
/// current schema with every summary and event as it was, each run without a resume
/// record; the migrated file keeps the records of runs registered
/// afterwards, also across a reopen.
#[tokio::test]
async fn a_schema_5_log_is_migrated_with_runs_that_have_no_resume_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let (summaries, logs) = runs_of_every_kind_written(&path).await;
    runs_back_to_schema_5(&path);
    assert_eq!(user_version(&path), 5);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    let migrated = log.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(migrated, summaries);
    for (summary, events) in summaries.iter().zip(&logs) {
        assert_eq!(&log.read(&summary.run_id, 0, 100).await.unwrap(), events);
        assert_eq!(log.resume_record(&summary.run_id).await.unwrap(), None);
    }
    let mut resumable = registered("resumable", json!({}));
    resumable.resume_record = Some(r#"{"session":"s"}"#.into());
    log.create_run(resumable).await.unwrap();
    drop(log);
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(
        log.resume_record(&run_id("resumable")).await.unwrap(),
        Some(r#"{"session":"s"}"#.to_owned())
    );
}

/// A log written by schema 6 (runs without clients) opens on schema 7 with
/// every summary and event as it was, each run without a client; the
/// migrated file keeps the client of a run registered afterwards, also
/// across a reopen.
#[tokio::test]
async fn a_schema_6_log_is_migrated_with_runs_that_have_no_client() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let (summaries, logs) = runs_of_every_kind_written(&path).await;
    runs_back_to_schema_6(&path);
    assert_eq!(user_version(&path), 6);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    let migrated = log.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(migrated, summaries);
    assert!(migrated.iter().all(|run| run.client.is_none()));
    for (summary, events) in summaries.iter().zip(&logs) {
        assert_eq!(&log.read(&summary.run_id, 0, 100).await.unwrap(), events);
    }
    let mut named = registered("named", json!({}));
    named.client = Some("claude-code/2.1".into());
    log.create_run(named).await.unwrap();
    drop(log);
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let named = log.get_run(&run_id("named")).await.unwrap().unwrap();
    assert_eq!(named.client.as_deref(), Some("claude-code/2.1"));
}

fn text_partial(text: &str) -> EventKind {
    EventKind::Partial(Partial {
        content: vec![Content::text(text)],
        ..Partial::default()
    })
}

/// The SQLite type of each stored body of `run`, in seq order.
fn body_types(path: &Path, run: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT typeof(e.body) FROM events e JOIN runs r ON r.run_key = e.run_key
             WHERE r.run_id = ?1 ORDER BY e.seq",
        )
        .unwrap();
    stmt.query_map([run], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// An append is stored as few rows: `started` alone as JSON text, the
/// events after it in one row of several (a BLOB); an event appended alone
/// is a row of its own, a partial result of text blocks a compact BLOB and
/// every other event JSON text. All read back as written from any seq,
/// with text that JSON would escape.
#[tokio::test]
async fn an_append_is_stored_as_few_rows_and_reads_back_from_any_seq() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let run = run_id("mixed");
    let grouped = EventKind::Partial(Partial {
        content: vec![Content::text("in a group")],
        group: Some("g".into()),
        ..Partial::default()
    });
    let written = events(
        &run,
        0,
        vec![
            started("t"),
            text_partial("00000001:xxxx"),
            body_event(1, 2),
            text_partial("\"quoted\"\n\\ é 😀 \u{1}"),
            grouped,
            text_partial("alone"),
            body_event(3, 4),
            done(),
        ],
    );
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    log.append(written[..5].to_vec().into()).await.unwrap();
    for alone in &written[5..] {
        log.append(vec![alone.clone()].into()).await.unwrap();
    }
    assert_eq!(log.read(&run, 0, 100).await.unwrap(), written);
    for from in 0..written.len() {
        for limit in [1, 2, 100] {
            let want: Vec<_> = written.iter().skip(from).take(limit).cloned().collect();
            assert_eq!(log.read(&run, from as u64, limit).await.unwrap(), want);
        }
    }
    assert_eq!(log.read(&run, 99, 10).await.unwrap(), []);
    assert_eq!(
        body_types(&path, "mixed"),
        ["text", "blob", "blob", "text", "text"]
    );
}

/// A schema 8 log (one event per row, text partials as compact BLOBs)
/// opens on the current schema with every event as it was, and a run it
/// held goes on in rows of several events.
#[tokio::test]
async fn a_schema_8_log_is_migrated_with_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let run = run_id("streaming");
    let before = events(
        &run,
        0,
        vec![started("t"), text_partial("one"), text_partial("two \"2\"")],
    );
    {
        let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
        // One event per append: schema 8's layout, one row each.
        for event in &before {
            log.append(vec![event.clone()].into()).await.unwrap();
        }
    }
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 8;")
        .unwrap();
    assert_eq!(body_types(&path, "streaming"), ["text", "blob", "blob"]);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    assert_eq!(log.read(&run, 1, 100).await.unwrap(), before[1..]);
    let after = events(
        &run,
        3,
        vec![text_partial("three"), text_partial("four"), done()],
    );
    log.append(after.clone().into()).await.unwrap();
    let all: Vec<_> = before.into_iter().chain(after).collect();
    assert_eq!(log.read(&run, 0, 100).await.unwrap(), all);
    assert_eq!(log.read(&run, 2, 2).await.unwrap(), all[2..4]);
    assert_eq!(
        body_types(&path, "streaming"),
        ["text", "blob", "blob", "blob"]
    );
}

/// A schema 7 log (every body JSON text, as schema 7 wrote them) opens on
/// the current schema with every event as it was, and a run it held goes on
/// in a row of several events beside its JSON ones.
#[tokio::test]
async fn a_schema_7_log_is_migrated_with_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let (summaries, logs) = runs_of_every_kind_written(&path).await;
    let run = run_id("streaming");
    let before = events(
        &run,
        0,
        vec![started("t"), text_partial("one"), text_partial("two \"2\"")],
    );
    {
        // What schema 7 wrote: the JSON text of each event, text partials too.
        let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
        log.append(before[..1].to_vec().into()).await.unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let run_key: i64 = conn
        .query_row(
            "SELECT run_key FROM runs WHERE run_id = 'streaming'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    for event in &before[1..] {
        conn.execute(
            "INSERT INTO events (run_key, seq, ts, body) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                run_key,
                event.seq as i64,
                event.ts as i64,
                serde_json::to_string(&event.kind).unwrap()
            ],
        )
        .unwrap();
    }
    conn.execute_batch(
        "UPDATE runs SET state = 'working', next_seq = 3 WHERE run_id = 'streaming';
         PRAGMA user_version = 7;",
    )
    .unwrap();
    drop(conn);
    assert_eq!(body_types(&path, "streaming"), ["text", "text", "text"]);

    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    assert_eq!(user_version(&path), CURRENT_SCHEMA);
    for (summary, events) in summaries.iter().zip(&logs) {
        assert_eq!(&log.read(&summary.run_id, 0, 100).await.unwrap(), events);
    }
    assert_eq!(log.read(&run, 0, 100).await.unwrap(), before);
    let after = events(&run, 3, vec![text_partial("three"), done()]);
    log.append(after.clone().into()).await.unwrap();
    drop(log);
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let all: Vec<_> = before.into_iter().chain(after).collect();
    assert_eq!(log.read(&run, 0, 100).await.unwrap(), all);
    assert_eq!(
        body_types(&path, "streaming"),
        ["text", "text", "text", "blob"]
    );
}

/// A run's arguments are written once: in its row while it is pending, in
/// its `started` event once it has started with them. A run started with
/// arguments other than those it was registered with keeps both, and its
/// summary the registered ones.
#[tokio::test]
async fn a_runs_arguments_are_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    write_runs_of_every_kind(&log).await;
    assert_eq!(
        stored_arguments(&path),
        [
            ("appended".to_owned(), None),
            ("pending".to_owned(), Some(r#"{"n":2}"#.to_owned())),
            ("renamed".to_owned(), Some(r#"{"n":4}"#.to_owned())),
            ("scheduled".to_owned(), None),
        ]
    );
    let arguments = |name: &'static str| {
        let log = log.clone();
        async move { log.get_run(&run_id(name)).await.unwrap().unwrap().arguments }
    };
    assert_eq!(
        arguments("scheduled").await,
        json!({"n": 1, "code": "print(1)"})
    );
    assert_eq!(arguments("pending").await, json!({"n": 2}));
    assert_eq!(arguments("appended").await, json!({"n": 3}));
    assert_eq!(arguments("renamed").await, json!({"n": 4}));
}
