//! Appends to a SQLite event log forever, printing `ack N` after each append
//! returns: the victim of the SIGKILL crash test (`tests/it/crash.rs`).
//!
//! Usage: `crash_writer PATH/weir.db`

use std::io::Write;

use weir_core::{EventKind, Log, LogLevel, LogStream, RunEvent, RunId, Started};
use weir_runtime::EventLog;
use weir_store_sqlite::{SqliteLog, SqliteOptions};

/// The event the writer puts at `seq` (> 0); the test expects exactly this.
fn event_at(run_id: &RunId, seq: u64) -> RunEvent {
    RunEvent {
        run_id: run_id.clone(),
        seq,
        ts: seq,
        kind: EventKind::Log(Log {
            level: LogLevel::Info,
            stream: LogStream::Stdout,
            text: format!("line {seq}"),
        }),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::env::args().nth(1).expect("usage: crash_writer PATH");
    let log = SqliteLog::open(&path, SqliteOptions::default()).expect("open the log");
    let run_id = RunId::parse("crash").expect("valid id");
    let started = RunEvent {
        run_id: run_id.clone(),
        seq: 0,
        ts: 0,
        kind: EventKind::Started(Started {
            tool: "writer".into(),
            arguments: serde_json::json!({}),
            node: "test".into(),
        }),
    };
    log.append(vec![started].into()).await.expect("append");
    let mut stdout = std::io::stdout().lock();
    let mut next = 1u64;
    loop {
        let size = 1 + next % 37;
        let batch: Vec<RunEvent> = (next..next + size)
            .map(|seq| event_at(&run_id, seq))
            .collect();
        next += size;
        log.append(batch.into()).await.expect("append");
        writeln!(stdout, "ack {}", next - 1)
            .and_then(|()| stdout.flush())
            .expect("stdout");
    }
}
