//! The database file: shared by handles (as by processes), and its
//! write-ahead log checkpointed off the writer.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Completed, Content, EventKind, Partial, RunId};
use weir_runtime::EventLog;
use weir_runtime::store_contract::support::{
    body_event, check_log, events, follow, run_id, started,
};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

fn done() -> EventKind {
    EventKind::Completed(Completed::default())
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

/// Starts `runs` runs and appends to each, at once, `items` items of
/// `size` bytes of text, one per append: rows the database itself holds
/// (a row of several events keeps its bytes in a segment file instead), a
/// writer kept busy by many runs as by a server's. Returns the runs.
async fn append_items_alone(log: &SqliteLog, runs: usize, items: u64, size: usize) -> Vec<RunId> {
    let text = "x".repeat(size);
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let (log, text, run) = (log.clone(), text.clone(), run_id(&format!("run-{i}")));
            tokio::spawn(async move {
                log.append(events(&run, 0, vec![started("t")]).into())
                    .await
                    .unwrap();
                for seq in 1..=items {
                    let item = Partial {
                        content: vec![Content::text(text.clone())],
                        ..Partial::default()
                    };
                    log.append(events(&run, seq, vec![item.into()]).into())
                        .await
                        .unwrap();
                }
                run
            })
        })
        .collect();
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.unwrap());
    }
    done
}

/// Checkpoints happen off the writer thread: a few megabytes of appends end
/// up in the database file itself, not only in its write-ahead log.
#[tokio::test]
async fn the_write_ahead_log_is_checkpointed_into_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let runs = append_items_alone(&log, 4, 1_000, 2_000).await;
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
    assert_eq!(log.read(&runs[3], 990, 100).await.unwrap().len(), 11);
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The log holds every run's arguments, secrets included: its directory is
/// created 0700, and the database with its WAL and shared-memory files is
/// 0600 — also a file an older weir left readable to others.
#[tokio::test]
async fn the_log_and_its_directory_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = data.join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    log.append(events(&run_id("secret"), 0, vec![started("t")]).into())
        .await
        .unwrap();
    assert_eq!(mode(&data), 0o700);
    for file in ["weir.db", "weir.db-wal", "weir.db-shm"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    drop(log);

    let older = dir.path().join("older.db");
    drop(SqliteLog::open(&older, SqliteOptions::default()).unwrap());
    std::fs::set_permissions(&older, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(SqliteLog::open(&older, SqliteOptions::default()).unwrap());
    assert_eq!(mode(&older), 0o600);
}

/// The write-ahead log starts over while a writer keeps committing: its
/// file stays far below what was appended. A checkpoint that always ends
/// one commit behind never lets SQLite restart the WAL, which then grows
/// with everything written (a stream of 1 KB items grew it past 250 MB),
/// every commit landing in fresh pages.
#[tokio::test]
async fn the_write_ahead_log_stays_bounded_under_a_writer_that_never_pauses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    // 160 MB from 64 runs at once.
    let runs = append_items_alone(&log, 64, 2_500, 1_000).await;
    let wal = std::fs::metadata(dir.path().join("weir.db-wal"))
        .map(|meta| meta.len())
        .unwrap_or(0);
    eprintln!(
        "WAL file after 160 MB appended: {} MiB",
        wal / (1024 * 1024)
    );
    // The writer finishes a checkpoint past 4,000 frames (16 MiB of 4 KiB
    // pages); the file keeps its largest size, so allow several of those.
    assert!(
        wal < 100 * 1024 * 1024,
        "the WAL grew to {} MiB for 160 MB appended",
        wal / (1024 * 1024)
    );
    assert_eq!(log.read(&runs[0], 2_500, 10).await.unwrap().len(), 1);
}
