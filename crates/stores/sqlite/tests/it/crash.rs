//! A process writing a SQLite log is killed with SIGKILL mid-run: every
//! acknowledged event survives, and recovery closes the run.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use weir_core::{EventKind, FailureCode, RunState};
use weir_runtime::store_contract::support::{check_log, read_all, run_id};
use weir_runtime::{EventLog, recover_interrupted};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

/// `examples/crash_writer`, which `cargo test` and `cargo nextest` build
/// beside this test binary.
fn crash_writer() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let path = deps.parent().unwrap().join("examples").join("crash_writer");
    assert!(
        path.exists(),
        "{} is missing: run the tests with cargo test or cargo nextest, which build examples",
        path.display()
    );
    path
}

#[test]
fn sigkill_mid_run_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let mut child = Command::new(crash_writer())
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = 0u64;
    while acked < 20_000 {
        let line = lines.next().expect("writer ended early").unwrap();
        acked = line
            .strip_prefix("ack ")
            .expect("ack line")
            .parse()
            .unwrap();
    }
    // SIGKILL: no destructor, no flush, no goodbye.
    child.kill().unwrap();
    child.wait().unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let log = SqliteLog::open(&path, SqliteOptions::default()).unwrap();
        let run = run_id("crash");
        let stored = read_all(&log, &run).await;
        assert!(
            stored.len() as u64 > acked,
            "acknowledged up to {acked}, found {}",
            stored.len()
        );
        for (i, event) in stored.iter().enumerate().skip(1) {
            assert_eq!(event.seq, i as u64);
            let EventKind::Log(line) = &event.kind else {
                panic!("{event:?}")
            };
            assert_eq!(line.text, format!("line {i}"));
        }
        assert_eq!(
            log.get_run(&run).await.unwrap().unwrap().state,
            RunState::Working
        );

        assert_eq!(recover_interrupted(&log, "test").await.unwrap(), 1);
        let closed = read_all(&log, &run).await;
        assert_eq!(check_log(&closed), RunState::Failed);
        let EventKind::Failed(failed) = &closed.last().unwrap().kind else {
            panic!()
        };
        assert_eq!(failed.error.code, FailureCode::Interrupted);
        assert_eq!(closed[..stored.len()], stored[..]);
        // A second recovery finds nothing left to close.
        assert_eq!(recover_interrupted(&log, "test").await.unwrap(), 0);
    });
}
