//! The scheduler on a SQLite log: what a tool knows of its run before the
//! log has it, and what a caller sees when the store cannot take a run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, EventKind, FailureCode, RunError, Warning};
use weir_runtime::log::RunFilter;
use weir_runtime::{EventLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

/// Emits one event, then waits forever; says when its future is dropped.
struct Waits {
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Waits {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("waits", "emits once, then waits", json!({"type": "object"}))
    }

    async fn run(&self, ctx: RunContext, _arguments: Value) -> Result<Completed, RunError> {
        let _dropped = SetOnDrop(self.dropped.clone());
        let begun = Warning {
            message: "begun".into(),
        };
        let _ = ctx.emit(begun).await;
        std::future::pending().await
    }
}

/// Answers with the run's owner, as soon as it starts; with
/// `{"artifact": true}`, stores an artifact first.
struct WhoAmI;

#[async_trait]
impl Tool for WhoAmI {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            "whoami",
            "says who started the run",
            json!({"type": "object"}),
        )
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        if arguments["artifact"] == true {
            let stored = ctx.artifact("first.txt", "text/plain", b"first".to_vec());
            stored
                .await
                .map_err(|error| RunError::new(FailureCode::Internal, error.to_string()))?;
        }
        Ok(Completed {
            content: Vec::new(),
            structured: Some(json!({ "owner": ctx.owner().await })),
        })
    }
}

/// A run that starts at once is registered with its first events, so its
/// tool runs before the log has it: the owner it asks for at once is its
/// caller's all the same (per-caller upstreams choose their process by it),
/// and an artifact it stores at once is kept.
#[tokio::test]
async fn a_tool_knows_its_run_and_keeps_artifacts_before_the_log_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let log: Arc<dyn EventLog> =
        Arc::new(SqliteLog::open(dir.path().join("weir.db"), SqliteOptions::default()).unwrap());
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::start(log.clone(), vec![Arc::new(WhoAmI)], config)
        .await
        .unwrap();
    for (owner, artifact) in [("alice", false), ("bob", false), ("alice", true)] {
        let options = RunOptions {
            owner: Some(owner.into()),
            ..RunOptions::default()
        };
        let arguments = json!({ "artifact": artifact });
        let run = scheduler
            .submit("whoami", arguments, options)
            .await
            .unwrap();
        let run_id = run.run_id().clone();
        let terminal = run.finished().await.expect("a terminal event");
        let EventKind::Completed(done) = terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(done.structured, Some(json!({ "owner": owner })));
        if artifact {
            let bytes = log.read_artifact(&run_id, "first.txt", 0..100).await;
            assert_eq!(bytes.unwrap(), b"first");
        }
    }
}

/// A run that starts at once is registered with its first events; while
/// another process holds the write lock past the busy timeout, the call
/// fails saying so, its tool (already running) is stopped, and the log
/// keeps no trace of it. Once the lock is free, the next call runs.
#[tokio::test]
async fn a_call_the_store_cannot_register_fails_and_its_tool_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.db");
    let log: Arc<dyn EventLog> =
        Arc::new(SqliteLog::open(&path, SqliteOptions::default()).unwrap());
    let dropped = Arc::new(AtomicBool::new(false));
    let tool = Arc::new(Waits {
        dropped: dropped.clone(),
    });
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::start(log.clone(), vec![tool], config)
        .await
        .unwrap();

    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = match scheduler
        .submit("waits", json!({}), RunOptions::default())
        .await
    {
        Ok(_) => panic!("the call was accepted while the log was locked"),
        Err(error) => error.to_string(),
    };
    assert!(
        refused.contains("write lock") && refused.contains("locked"),
        "{refused}"
    );
    tokio::time::timeout(Duration::from_secs(5), async {
        while !dropped.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the tool is stopped");
    holder.execute_batch("ROLLBACK").unwrap();
    let runs = log.list_runs(&RunFilter::default()).await.unwrap();
    assert!(runs.is_empty(), "{runs:?}");
    assert_eq!(log.live().followed_runs(), 0, "the hub keeps nothing of it");

    dropped.store(false, Ordering::SeqCst);
    let run = scheduler
        .submit("waits", json!({}), RunOptions::default())
        .await
        .unwrap();
    let summary = log
        .get_run(run.run_id())
        .await
        .unwrap()
        .expect("registered");
    assert_eq!(summary.tool, "waits");
    assert!(scheduler.cancel(run.run_id(), "done"));
    run.finished().await.expect("a terminal event");
}
