//! Segment files: the bytes of rows of several events, beside the database.

use std::path::{Path, PathBuf};

use weir_core::{Completed, Content, EventKind, Partial, RunEvent, RunId};
use weir_runtime::EventLog;
use weir_runtime::store_contract::support::{body_event, events, run_id, started};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

fn item(text: &str) -> EventKind {
    Partial {
        content: vec![Content::text(text)],
        ..Partial::default()
    }
    .into()
}

/// `run`'s events as a fast stream's writer appends them: `started`, then
/// `batches` appends of `per_batch` items of `size` bytes (a log line in
/// each batch too), then `completed`, at timestamps from `ts`.
fn stream(run: &RunId, batches: u64, per_batch: u64, size: usize, ts: u64) -> Vec<Vec<RunEvent>> {
    let mut appends = vec![events(run, 0, vec![started("t")])];
    let mut seq = 1;
    for batch in 0..batches {
        let kinds: Vec<EventKind> = (0..per_batch)
            .map(|i| match i {
                7 => body_event(2, seq + i),
                _ => item(&format!("{:08}:{}", seq + i, "x".repeat(size))),
            })
            .collect();
        appends.push(events(run, seq, kinds));
        seq += per_batch;
        let _ = batch;
    }
    appends.push(events(
        run,
        seq,
        vec![EventKind::Completed(Completed::default())],
    ));
    for event in appends.iter_mut().flatten() {
        event.ts = ts + event.seq;
    }
    appends
}

async fn append_all(log: &SqliteLog, appends: &[Vec<RunEvent>]) {
    for batch in appends {
        log.append(batch.clone().into()).await.unwrap();
    }
}

fn segments_dir(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-segments", path.display()))
}

/// The segment files, by name, with their sizes.
fn segment_files(path: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<_> = std::fs::read_dir(segments_dir(path))
        .map(|dir| {
            dir.map(|entry| {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                (name, entry.metadata().unwrap().len())
            })
            .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

/// Reads every event of `run` back, from seq 0 and from seqs in the
/// middle of rows, and checks them against what was appended.
async fn reads_back(log: &SqliteLog, run: &RunId, appended: &[Vec<RunEvent>]) {
    let all: Vec<RunEvent> = appended.iter().flatten().cloned().collect();
    assert_eq!(log.read(run, 0, usize::MAX).await.unwrap(), all);
    for from in [1, 2, 63, 64, 65, 100, all.len() as u64 - 1] {
        let want: Vec<_> = all.iter().skip(from as usize).take(50).cloned().collect();
        assert_eq!(log.read(run, from, 50).await.unwrap(), want, "from {from}");
    }
}

/// A fast stream's bytes are written once, to a segment file, not to the
/// database (where SQLite writes them twice: its write-ahead log, then the
/// database file); the database keeps small rows pointing there.
#[tokio::test]
async fn a_streams_bytes_go_to_a_segment_file_not_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let run = run_id("stream");
    // 20 MB: 80 appends of 256 items of 1 KB.
    let appends = stream(&run, 80, 256, 1_000, 1_000);
    append_all(&log, &appends).await;
    reads_back(&log, &run, &appends).await;
    let in_segments: u64 = segment_files(&path).iter().map(|(_, size)| size).sum();
    let in_database = file_size(&path) + file_size(&dir.path().join("weir.db-wal"));
    assert!(in_segments > 20_000_000, "{in_segments} bytes in segments");
    // The WAL keeps its largest size: a few pages per commit (the rows,
    // their index, the run's row, the segment's) over 80 commits.
    assert!(
        in_database < 5_000_000,
        "{in_database} bytes in the database and its WAL"
    );
    drop(log);
    // As after a restart.
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    reads_back(&log, &run, &appends).await;
}

/// Whether the filesystem under `dir` gives a file blocks past its end
/// (`fallocate`, keeping its size), as ext4, XFS, Btrfs and tmpfs do.
fn reserves_blocks(dir: &Path) -> bool {
    let probe = std::fs::File::create(dir.join("probe")).unwrap();
    let flags = rustix::fs::FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(&probe, flags, 0, 1 << 20).is_ok()
}

/// A segment's blocks are asked of the filesystem ahead of its bytes, up to
/// the segment's size and no further, and its length stays what was
/// written: the next append (this process's or another's) goes at its end.
#[tokio::test]
async fn a_segments_blocks_are_reserved_ahead_up_to_its_size() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let segment_bytes = 1 << 20;
    let options = SqliteOptions {
        segment_bytes,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(&path, options.clone()).unwrap();
    let run = run_id("reserved");
    // About 2.6 MB, appends of 32 KB: three segments, the last part full.
    let appends = stream(&run, 80, 32, 1_000, 1_000);
    append_all(&log, &appends).await;
    let files = segment_files(&path);
    assert_eq!(files.len(), 3, "{files:?}");
    let (_, newest_len) = files[2];
    assert!(newest_len < segment_bytes / 2, "{files:?}");
    assert!(
        reserves_blocks(dir.path()),
        "a filesystem that cannot reserve blocks"
    );
    for (name, len) in &files {
        let allocated = std::fs::metadata(segments_dir(&path).join(name))
            .unwrap()
            .blocks()
            * 512;
        // Every segment has its whole size's blocks, the newest too.
        assert!(
            allocated >= segment_bytes,
            "{name}: {len} bytes, {allocated} allocated"
        );
        // And not past it, but for the one row that did not fit (33 KB).
        assert!(
            allocated <= segment_bytes + 40_000,
            "{name}: {len} bytes, {allocated} allocated"
        );
    }
    reads_back(&log, &run, &appends).await;
    drop(log);
    // Reopened, appends go on at the newest's end, not at its reservation's.
    let log = SqliteLog::open(&path, options).unwrap();
    let more = run_id("more");
    let more_appends = stream(&more, 4, 32, 1_000, 2_000);
    append_all(&log, &more_appends).await;
    assert!(segment_files(&path)[2].1 > newest_len + 100_000);
    reads_back(&log, &run, &appends).await;
    reads_back(&log, &more, &more_appends).await;
}

/// Deleting old runs deletes the segments no run left points into, and
/// only those: the newest stays (appends go on there), and every event of
/// a run kept reads back.
#[tokio::test]
async fn deleting_old_runs_gives_back_their_segments_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let options = SqliteOptions {
        segment_bytes: 64 * 1024,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(&path, options.clone()).unwrap();
    let (old, kept) = (run_id("old"), run_id("kept"));
    let old_appends = stream(&old, 40, 16, 500, 1_000);
    let kept_appends = stream(&kept, 40, 16, 500, 1_000_000);
    // Interleaved, rows of 8 KB in segments of 64 KB: every segment holds
    // rows of both runs.
    for (a, b) in old_appends.iter().zip(&kept_appends) {
        log.append(a.clone().into()).await.unwrap();
        log.append(b.clone().into()).await.unwrap();
    }
    let before = segment_files(&path);
    assert!(before.len() > 8, "{before:?}");
    assert_eq!(log.delete_finished_before(500_000).await.unwrap(), 1);
    let after = segment_files(&path);
    // Both runs wrote into every segment: none is given back yet.
    assert_eq!(after, before);
    reads_back(&log, &kept, &kept_appends).await;

    // A run alone in its segments gives them all back but the newest.
    let alone = run_id("alone");
    let alone_appends = stream(&alone, 20, 64, 500, 2_000);
    append_all(&log, &alone_appends).await;
    let with_alone = segment_files(&path);
    assert!(with_alone.len() > after.len() + 5);
    assert_eq!(log.delete_finished_before(500_000).await.unwrap(), 1);
    let left = segment_files(&path);
    assert_eq!(left.len(), after.len() + 1, "{left:?}");
    assert_eq!(left[..after.len()], with_alone[..after.len()]);
    assert_eq!(left.last(), with_alone.last());
    reads_back(&log, &kept, &kept_appends).await;
    assert!(log.read(&alone, 0, 10).await.is_err());

    // A file the table no longer has (a process stopped between deleting
    // the rows and the file) goes when the log is next opened; a file
    // past the newest segment (another process making it) stays.
    drop(log);
    let orphan = segments_dir(&path).join(&with_alone[after.len()].0);
    std::fs::write(&orphan, b"left over").unwrap();
    let next = segments_dir(&path).join("9999999999");
    std::fs::write(&next, b"").unwrap();
    let log = SqliteLog::open(&path, options).unwrap();
    assert!(!orphan.exists());
    assert!(next.exists());
    reads_back(&log, &kept, &kept_appends).await;
}

/// Bytes that are not what was written (a power loss took them, or
/// someone wrote over them) are reported, not misread.
#[tokio::test]
async fn a_damaged_segment_is_reported_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let run = run_id("damaged");
    let appends = stream(&run, 2, 64, 100, 1_000);
    append_all(&log, &appends).await;
    let (name, _) = segment_files(&path).remove(0);
    let segment = segments_dir(&path).join(name);
    let mut bytes = std::fs::read(&segment).unwrap();
    let at = bytes.iter().position(|&b| b == b'x').unwrap();
    bytes[at] = b'y';
    std::fs::write(&segment, bytes).unwrap();
    let error = log.read(&run, 1, 10).await.unwrap_err().to_string();
    assert!(error.contains("do not hold what was written"), "{error}");
    // The row before, in the database itself, still reads.
    assert_eq!(log.read(&run, 0, 1).await.unwrap(), appends[0]);
}

/// Two processes (here two handles, each with its own writer) appending to
/// one log at once take turns at the segment: every run reads back whole.
#[tokio::test]
async fn two_writers_on_one_log_each_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let options = SqliteOptions {
        segment_bytes: 256 * 1024,
        ..SqliteOptions::default()
    };
    let logs = [
        SqliteLog::open(&path, options.clone()).unwrap(),
        SqliteLog::open(&path, options.clone()).unwrap(),
    ];
    let runs: Vec<(RunId, Vec<Vec<RunEvent>>)> = (0..8)
        .map(|i| {
            let run = run_id(&format!("run-{i}"));
            let appends = stream(&run, 30, 32, 300 + i * 50, 1_000);
            (run, appends)
        })
        .collect();
    let tasks: Vec<_> = runs
        .iter()
        .enumerate()
        .map(|(i, (_, appends))| {
            let (log, appends) = (logs[i % 2].clone(), appends.clone());
            tokio::spawn(async move { append_all(&log, &appends).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert!(segment_files(&path).len() > 4);
    let reader = SqliteLog::open(&path, options).unwrap();
    for (run, appends) in &runs {
        reads_back(&reader, run, appends).await;
    }
}

/// A new segment's bytes go after whatever its file already holds (bytes
/// of a writer whose transaction was taken back, which a row committed
/// beside them may point at), never over them.
#[tokio::test]
async fn a_new_segment_is_written_after_what_its_file_already_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let options = SqliteOptions {
        segment_bytes: 64 * 1024,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(&path, options).unwrap();
    let run = run_id("rolls-over");
    let appends = stream(&run, 1, 16, 500, 1_000);
    append_all(&log, &appends[..2]).await;
    assert_eq!(segment_files(&path).len(), 1);
    // The file the next segment will be, already holding bytes.
    let held = b"bytes a taken-back transaction left".repeat(10);
    std::fs::write(segments_dir(&path).join("0000000002"), &held).unwrap();
    let more = stream(&run, 30, 16, 500, 1_000);
    let more: Vec<Vec<RunEvent>> = more[1..more.len() - 1]
        .iter()
        .enumerate()
        .map(|(i, batch)| {
            let from = 17 + 16 * i as u64;
            batch
                .iter()
                .enumerate()
                .map(|(j, event)| RunEvent {
                    seq: from + j as u64,
                    ..event.clone()
                })
                .collect()
        })
        .collect();
    append_all(&log, &more).await;
    assert!(
        segment_files(&path).len() >= 3,
        "{:?}",
        segment_files(&path)
    );
    let second = std::fs::read(segments_dir(&path).join("0000000002")).unwrap();
    assert!(second.len() > held.len());
    assert!(
        second.starts_with(&held),
        "the bytes the file held were written over"
    );
    let all: Vec<RunEvent> = appends[..2]
        .iter()
        .chain(&more)
        .flatten()
        .cloned()
        .collect();
    assert_eq!(log.read(&run, 0, usize::MAX).await.unwrap(), all);
}

/// While another process holds the log's write lock past the busy
/// timeout, an append is refused saying so, and the next one, once the
/// lock is free, is stored.
#[tokio::test]
async fn an_append_refused_for_the_write_lock_says_so_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
    let run = run_id("locked-out");
    let appends = stream(&run, 1, 4, 10, 1_000);
    log.append(appends[0].clone().into()).await.unwrap();
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let error = log
        .append(appends[1].clone().into())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("write lock") && error.contains("locked"),
        "{error}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    log.append(appends[1].clone().into()).await.unwrap();
    assert_eq!(log.read(&run, 0, 10).await.unwrap().len(), 5);
}
