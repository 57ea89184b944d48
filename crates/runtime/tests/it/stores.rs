//! The EventLog contract, checked on every store alike.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use weir_core::{Canceled, Completed, EventKind, RunState, Violation};
use weir_runtime::log::{NewRun, RunFilter, SqliteOptions};
use weir_runtime::{EventLog, LogError, SqliteLog};

use crate::support::*;

const STORES: [StoreKind; 2] = [StoreKind::Memory, StoreKind::Sqlite];

fn done() -> EventKind {
    EventKind::Completed(Completed::default())
}

#[tokio::test]
async fn appends_that_break_the_log_are_refused_and_change_nothing() {
    for kind in STORES {
        let (log, _dir) = store(kind, 16);
        let run = run_id("r");
        let not_started = log
            .append(events(&run, 0, vec![body_event(0, 0)]).into())
            .await;
        assert!(
            matches!(not_started, Err(LogError::NotStarted(_))),
            "{kind:?}: {not_started:?}"
        );

        log.append(events(&run, 0, vec![started("t"), body_event(1, 1)]).into())
            .await
            .unwrap();
        let gap = log
            .append(events(&run, 3, vec![body_event(1, 3)]).into())
            .await;
        assert!(
            matches!(
                gap,
                Err(LogError::Invalid {
                    violation: Violation::SeqGap {
                        expected: 2,
                        got: 3
                    },
                    ..
                })
            ),
            "{kind:?}: {gap:?}"
        );
        let restart = log.append(events(&run, 2, vec![started("t")]).into()).await;
        assert!(matches!(
            restart,
            Err(LogError::Invalid {
                violation: Violation::BadStart { .. },
                ..
            })
        ));
        // All or nothing: a valid event followed by an invalid one writes neither.
        let mut mixed = events(&run, 2, vec![body_event(2, 2)]);
        mixed.extend(events(&run, 9, vec![body_event(2, 9)]));
        assert!(log.append(mixed.into()).await.is_err());
        assert_eq!(read_all(&*log, &run).await.len(), 2, "{kind:?}");

        log.append(events(&run, 2, vec![done()]).into())
            .await
            .unwrap();
        let after = log
            .append(events(&run, 3, vec![body_event(0, 3)]).into())
            .await;
        assert!(matches!(
            after,
            Err(LogError::Invalid {
                violation: Violation::AfterTerminal { .. },
                ..
            })
        ));
        let summary = log.get_run(&run).await.unwrap().unwrap();
        assert_eq!(
            (summary.state, summary.events),
            (RunState::Completed, 3),
            "{kind:?}"
        );
        assert!(summary.finished_ts.is_some());
    }
}

#[tokio::test]
async fn reads_page_through_a_log() {
    for kind in STORES {
        let (log, _dir) = store(kind, 16);
        let run = run_id("p");
        let mut kinds = vec![started("t")];
        kinds.extend((1..100).map(|i| body_event(i as u8, i)));
        // Appended in uneven batches, read in other uneven pages.
        let all = events(&run, 0, kinds);
        for chunk in all.chunks(7) {
            log.append(chunk.to_vec().into()).await.unwrap();
        }
        for (from, limit) in [(0, 5), (3, 11), (50, 1000), (99, 1), (100, 10), (200, 1)] {
            let page = log.read(&run, from, limit).await.unwrap();
            let expected: Vec<_> = all
                .iter()
                .skip(from as usize)
                .take(limit)
                .cloned()
                .collect();
            assert_eq!(page, expected, "{kind:?} from {from} limit {limit}");
        }
        let unknown = log.read(&run_id("nope"), 0, 10).await;
        assert!(matches!(unknown, Err(LogError::UnknownRun(_))), "{kind:?}");
    }
}

#[tokio::test]
async fn runs_are_listed_newest_first_and_filtered() {
    for kind in STORES {
        let (log, _dir) = store(kind, 16);
        for (i, (name, tool, node)) in [("a", "x", "n1"), ("b", "y", "n1"), ("c", "x", "n2")]
            .into_iter()
            .enumerate()
        {
            log.create_run(NewRun {
                run_id: run_id(name),
                tool: tool.into(),
                arguments: json!({ "i": i }),
                node: node.into(),
                ts: 100 + i as u64,
            })
            .await
            .unwrap();
        }
        let again = log
            .create_run(NewRun {
                run_id: run_id("a"),
                tool: "x".into(),
                arguments: json!({}),
                node: "n1".into(),
                ts: 1,
            })
            .await;
        assert!(matches!(again, Err(LogError::RunExists(_))));
        log.append(events(&run_id("b"), 0, vec![started("y")]).into())
            .await
            .unwrap();

        let ids = |runs: Vec<weir_runtime::log::RunSummary>| {
            runs.into_iter()
                .map(|r| r.run_id.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(log.list_runs(&RunFilter::default()).await.unwrap()),
            ["c", "b", "a"]
        );
        let pending = RunFilter {
            states: vec![RunState::Pending],
            ..RunFilter::default()
        };
        assert_eq!(
            ids(log.list_runs(&pending).await.unwrap()),
            ["c", "a"],
            "{kind:?}"
        );
        let tool_x_on_n1 = RunFilter {
            tool: Some("x".into()),
            node: Some("n1".into()),
            ..RunFilter::default()
        };
        assert_eq!(ids(log.list_runs(&tool_x_on_n1).await.unwrap()), ["a"]);
        let limited = RunFilter {
            limit: Some(1),
            ..RunFilter::default()
        };
        assert_eq!(ids(log.list_runs(&limited).await.unwrap()), ["c"]);
        let a = log.get_run(&run_id("a")).await.unwrap().unwrap();
        assert_eq!(
            (a.state, a.events, a.arguments),
            (RunState::Pending, 0, json!({ "i": 0 }))
        );
    }
}

#[tokio::test]
async fn artifacts_are_write_once_hashed_and_read_by_range() {
    for kind in STORES {
        let (log, _dir) = store(kind, 16);
        let run = run_id("art");
        log.append(events(&run, 0, vec![started("t")]).into())
            .await
            .unwrap();
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let artifact = log
            .put_artifact(&run, "out.bin", "application/octet-stream", data.clone())
            .await
            .unwrap();
        assert_eq!(artifact.bytes, 10_000);
        assert_eq!(artifact.uri, "weir://runs/art/artifacts/out.bin");
        // sha256 of that byte pattern, computed independently.
        assert_eq!(artifact.sha256.len(), 64);
        assert_eq!(
            log.artifact(&run, "out.bin").await.unwrap(),
            artifact,
            "{kind:?}"
        );
        for range in [0..10, 5000..5100, 9990..20_000, 20_000..30_000, 7..7] {
            let got = log
                .read_artifact(&run, "out.bin", range.clone())
                .await
                .unwrap();
            let start = (range.start as usize).min(data.len());
            let end = (range.end as usize).min(data.len()).max(start);
            assert_eq!(got, &data[start..end], "{kind:?} {range:?}");
        }
        let twice = log
            .put_artifact(&run, "out.bin", "text/plain", vec![1])
            .await;
        assert!(
            matches!(twice, Err(LogError::ArtifactExists { .. })),
            "{kind:?}"
        );
        for bad in ["", "../x", "a/b", ".hidden", &"x".repeat(129)] {
            let refused = log.put_artifact(&run, bad, "text/plain", vec![]).await;
            assert!(
                matches!(refused, Err(LogError::InvalidArtifactName(_))),
                "{kind:?} {bad:?}"
            );
        }
        assert!(matches!(
            log.artifact(&run, "nope").await,
            Err(LogError::UnknownArtifact { .. })
        ));
        assert!(matches!(
            log.artifact(&run_id("nope"), "x").await,
            Err(LogError::UnknownRun(_))
        ));
        let empty = log
            .put_artifact(&run, "empty", "text/plain", vec![])
            .await
            .unwrap();
        assert_eq!(
            empty.sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}

#[tokio::test]
async fn retention_deletes_finished_runs_and_their_artifacts_only() {
    for kind in STORES {
        let (log, _dir) = store(kind, 16);
        let (old, open) = (run_id("old"), run_id("open"));
        log.append(events(&old, 0, vec![started("t"), done()]).into())
            .await
            .unwrap();
        log.put_artifact(&old, "a", "text/plain", vec![1, 2])
            .await
            .unwrap();
        log.append(events(&open, 0, vec![started("t")]).into())
            .await
            .unwrap();
        // `events` stamps ts 1000 + seq: `old` finished at 1001.
        assert_eq!(
            log.delete_finished_before(1001).await.unwrap(),
            0,
            "{kind:?}"
        );
        assert_eq!(
            log.delete_finished_before(1002).await.unwrap(),
            1,
            "{kind:?}"
        );
        assert!(log.get_run(&old).await.unwrap().is_none());
        assert!(matches!(
            log.artifact(&old, "a").await,
            Err(LogError::UnknownRun(_))
        ));
        assert!(log.get_run(&open).await.unwrap().is_some());
    }
}

/// A subscriber far slower than the producer, on a live channel of one batch:
/// it lags, re-reads the store, and still gets every event once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_subscriber_catches_up_from_the_store() {
    for kind in STORES {
        let (log, _dir) = store(kind, 1);
        let run = run_id("lag");
        log.append(events(&run, 0, vec![started("t")]).into())
            .await
            .unwrap();
        let reader = {
            let (log, run) = (log.clone(), run.clone());
            tokio::spawn(
                async move { follow(&log, &run, 0, None, Duration::from_micros(200)).await },
            )
        };
        let mut next = 1;
        for round in 0..200u64 {
            let batch = events(
                &run,
                next,
                (0..5).map(|i| body_event(i as u8, round)).collect(),
            );
            next += 5;
            log.append(batch.into()).await.unwrap();
        }
        log.append(
            events(
                &run,
                next,
                vec![EventKind::Canceled(Canceled {
                    reason: "end".into(),
                })],
            )
            .into(),
        )
        .await
        .unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got, read_all(&*log, &run).await, "{kind:?}");
        assert_eq!(got.len(), 1002);
    }
}

/// Two processes (here: two handles with separate hubs) on one SQLite file:
/// a subscriber in one follows a run written by the other.
#[tokio::test]
async fn a_subscriber_follows_a_run_written_by_another_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let writer = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let reader: Arc<dyn EventLog> =
        Arc::new(SqliteLog::open(&path, SqliteOptions::default()).unwrap());
    let run = run_id("x");
    writer
        .append(events(&run, 0, vec![started("t")]).into())
        .await
        .unwrap();
    let follower = {
        let (reader, run) = (reader.clone(), run.clone());
        tokio::spawn(async move { follow(&reader, &run, 0, None, Duration::ZERO).await })
    };
    for i in 1..20 {
        writer
            .append(events(&run, i, vec![body_event(i as u8, i)]).into())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    writer
        .append(events(&run, 20, vec![done()]).into())
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), follower)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 21);
    check_log(&got);
}

#[tokio::test]
async fn subscribing_to_an_unknown_run_is_an_error() {
    for kind in STORES {
        let (log, _dir) = store(kind, 4);
        let mut subscription = log.subscribe_from(&run_id("ghost"), 0);
        assert!(
            matches!(
                subscription.next().await,
                Some(Err(LogError::UnknownRun(_)))
            ),
            "{kind:?}"
        );
        assert!(subscription.next().await.is_none());
    }
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
        log.append(written.clone().into()).await.unwrap();
    }
    // Put the file back the way schema 1 laid it out.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "ALTER TABLE events RENAME TO events_now;
         CREATE TABLE events (run_key INTEGER NOT NULL, seq INTEGER NOT NULL,
             ts INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_key, seq)) WITHOUT ROWID;
         INSERT INTO events SELECT * FROM events_now;
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
    assert_eq!((version, without_rowid), (2, 0));
}

/// Checkpoints happen off the writer thread: a few megabytes of appends end
/// up in the database file itself, not only in its write-ahead log.
#[tokio::test]
async fn the_write_ahead_log_is_checkpointed_into_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let run = run_id("big");
    log.append(events(&run, 0, vec![started("t")]).into())
        .await
        .unwrap();
    let text = "x".repeat(2_000);
    let mut seq = 1;
    for _ in 0..40 {
        let kinds = (0..100)
            .map(|_| {
                weir_core::Partial {
                    content: vec![weir_core::Content::text(text.clone())],
                    ..weir_core::Partial::default()
                }
                .into()
            })
            .collect();
        log.append(events(&run, seq, kinds).into()).await.unwrap();
        seq += 100;
    }
    // 8 MB appended; SQLite's threshold is 1,000 pages (4 MB).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let size = || std::fs::metadata(&path).unwrap().len();
    while size() < 4_000_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "database file still {} bytes: nothing was checkpointed",
            size()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(log.read(&run, 3_990, 100).await.unwrap().len(), 11);
}
