//! The scheduler's promises: limits, a queue that says "busy" instead of
//! hanging, timeouts, cancellation, panics, recovery after a crash.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use weir_core::{EventKind, FailureCode, RunState};
use weir_runtime::log::NewRun;
use weir_runtime::{
    EventLog, MemoryLog, RunOptions, Scheduler, SchedulerConfig, SubmitError, Tool,
};

use weir_runtime::store_contract::support::*;

fn hang(name: &str) -> Arc<dyn Tool> {
    Arc::new(Scripted {
        name: name.into(),
        steps: vec![],
        end: End::Hang,
    })
}

fn config(max_concurrent: usize, max_queue: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_concurrent,
        max_per_tool: max_concurrent,
        max_queue,
        retention: None,
        ..SchedulerConfig::default()
    }
}

async fn state(log: &Arc<dyn EventLog>, run: &weir_core::RunId) -> RunState {
    log.get_run(run).await.unwrap().unwrap().state
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_answers_busy_at_once_and_frees_up() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), vec![hang("hang")], config(1, 2))
        .await
        .unwrap();
    let running = scheduler
        .submit("hang", json!({}), RunOptions::default())
        .await
        .unwrap();
    let queued: Vec<_> = futures_collect(&scheduler, 2).await;
    assert_eq!(scheduler.queued(), 2);
    let busy = scheduler
        .submit("hang", json!({}), RunOptions::default())
        .await
        .unwrap_err();
    let message = busy.to_string();
    assert!(
        matches!(busy, SubmitError::Busy { queued: 2, .. }),
        "{message}"
    );
    assert!(message.contains("retry in about 1s"), "{message}");
    tokio::task::yield_now().await;
    assert_eq!(state(&log, running.run_id()).await, RunState::Working);
    assert_eq!(state(&log, queued[0].run_id()).await, RunState::Pending);

    // Cancelling a queued run ends it without ever running it...
    assert!(scheduler.cancel(queued[1].run_id(), "changed my mind"));
    let terminal = queued.into_iter().nth(1).unwrap().finished().await.unwrap();
    let EventKind::Canceled(canceled) = &terminal.kind else {
        panic!("{terminal:?}")
    };
    assert_eq!(canceled.reason, "changed my mind");
    assert_eq!(terminal.seq, 1, "started, then canceled");
    // ...and frees its queue place.
    assert_eq!(scheduler.queued(), 1);
    scheduler
        .submit("hang", json!({}), RunOptions::default())
        .await
        .unwrap();
}

async fn futures_collect(scheduler: &Scheduler, n: usize) -> Vec<weir_runtime::RunHandle> {
    let mut handles = Vec::new();
    for _ in 0..n {
        handles.push(
            scheduler
                .submit("hang", json!({}), RunOptions::default())
                .await
                .unwrap(),
        );
    }
    handles
}

#[tokio::test(start_paused = true)]
async fn per_tool_limits_do_not_block_other_tools() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let mut slow = Scripted {
        name: "slow".into(),
        steps: vec![],
        end: End::Hang,
    };
    slow.steps.push(Step::Sleep(1));
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(slow), hang("other")];
    let mut config = config(4, 8);
    config.max_per_tool = 1;
    let scheduler = Scheduler::start(log.clone(), tools, config).await.unwrap();
    let first = scheduler
        .submit("slow", json!({}), RunOptions::default())
        .await
        .unwrap();
    let second = scheduler
        .submit("slow", json!({}), RunOptions::default())
        .await
        .unwrap();
    let other = scheduler
        .submit("other", json!({}), RunOptions::default())
        .await
        .unwrap();
    tokio::task::yield_now().await;
    assert_eq!(state(&log, first.run_id()).await, RunState::Working);
    assert_eq!(state(&log, second.run_id()).await, RunState::Pending);
    assert_eq!(state(&log, other.run_id()).await, RunState::Working);
    scheduler.cancel(first.run_id(), "next");
    first.finished().await.unwrap();
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
    assert_eq!(state(&log, second.run_id()).await, RunState::Working);
}

#[tokio::test(start_paused = true)]
async fn timeouts_panics_and_failures_end_in_failed_with_a_reason() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let tools: Vec<Arc<dyn Tool>> = vec![
        hang("hang"),
        Arc::new(Scripted {
            name: "panic".into(),
            steps: vec![Step::Emit(0)],
            end: End::Panic,
        }),
        Arc::new(Scripted {
            name: "fail".into(),
            steps: vec![],
            end: End::Fail,
        }),
    ];
    quiet_scripted_panics();
    let scheduler = Scheduler::start(log.clone(), tools, config(4, 4))
        .await
        .unwrap();
    let timeout = || RunOptions {
        timeout: Some(Duration::from_millis(1500)),
        ..RunOptions::default()
    };
    for (tool, code, fragment) in [
        ("hang", FailureCode::Timeout, "time limit of 1.5s"),
        (
            "panic",
            FailureCode::Panicked,
            "the tool panicked: scripted panic",
        ),
        ("fail", FailureCode::ToolError, "scripted failure"),
    ] {
        let handle = scheduler.submit(tool, json!({}), timeout()).await.unwrap();
        let run = handle.run_id().clone();
        let terminal = handle.finished().await.unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{tool}: {terminal:?}")
        };
        assert_eq!(failed.error.code, code, "{tool}");
        assert!(
            failed.error.message.contains(fragment),
            "{tool}: {}",
            failed.error.message
        );
        check_log(&read_all(&*log, &run).await);
    }
}

#[tokio::test]
async fn unknown_tools_are_named_with_the_alternatives() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log, vec![hang("a"), hang("b")], config(1, 1))
        .await
        .unwrap();
    let error = scheduler
        .submit("c", json!({}), RunOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"unknown tool "c"; available tools: a, b"#
    );
}

#[tokio::test]
async fn duplicate_tool_names_are_refused() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let error = Scheduler::start(log, vec![hang("a"), hang("a")], config(1, 1))
        .await
        .err()
        .unwrap();
    assert!(error.to_string().contains(r#"two tools are named "a""#));
}

#[tokio::test]
async fn start_closes_the_runs_this_node_left_open() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let (working, queued, elsewhere) = (run_id("working"), run_id("queued"), run_id("elsewhere"));
    log.append(events(&working, 0, vec![started("t"), body_event(0, 1)]).into())
        .await
        .unwrap();
    for (run, node) in [(&queued, "local"), (&elsewhere, "other-node")] {
        log.create_run(NewRun {
            run_id: run.clone(),
            tool: "t".into(),
            arguments: json!({"a": 1}),
            node: node.into(),
            ts: 5,
            owner: None,
            client: None,
            parent: None,
            resume_record: None,
        })
        .await
        .unwrap();
    }
    // `started` in `events` says node "test".
    let scheduler_config = SchedulerConfig {
        node: "test".into(),
        ..config(1, 1)
    };
    Scheduler::start(log.clone(), vec![], scheduler_config)
        .await
        .unwrap();
    let closed = read_all(&*log, &working).await;
    assert_eq!(check_log(&closed), RunState::Failed);
    let EventKind::Failed(failed) = &closed[2].kind else {
        panic!()
    };
    assert_eq!(failed.error.code, FailureCode::Interrupted);
    assert!(failed.error.message.contains("while it was running"));
    // Runs of other nodes are theirs to close.
    assert_eq!(state(&log, &queued).await, RunState::Pending);
    Scheduler::start(log.clone(), vec![], config(1, 1))
        .await
        .unwrap();
    let closed = read_all(&*log, &queued).await;
    check_log(&closed);
    let EventKind::Started(started) = &closed[0].kind else {
        panic!()
    };
    assert_eq!(started.arguments, json!({"a": 1}));
    assert_eq!(state(&log, &elsewhere).await, RunState::Pending);
}

#[tokio::test]
async fn retention_sweeps_old_runs() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let quick: Arc<dyn Tool> = Arc::new(Scripted {
        name: "quick".into(),
        steps: vec![],
        end: End::Return,
    });
    let scheduler = Scheduler::start(
        log.clone(),
        vec![quick],
        SchedulerConfig {
            retention: Some(Duration::from_millis(50)),
            ..config(1, 1)
        },
    )
    .await
    .unwrap();
    let handle = scheduler
        .submit("quick", json!({}), RunOptions::default())
        .await
        .unwrap();
    let run = handle.run_id().clone();
    handle.finished().await.unwrap();
    assert_eq!(scheduler.sweep_expired().await.unwrap(), 0, "too young");
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(scheduler.sweep_expired().await.unwrap(), 1);
    assert!(log.get_run(&run).await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn tools_cannot_write_terminal_events_themselves() {
    use async_trait::async_trait;
    use weir_core::{Completed, RunError};
    use weir_runtime::{EmitError, RunContext, ToolInfo};
    struct Cheater;
    #[async_trait]
    impl Tool for Cheater {
        fn info(&self) -> ToolInfo {
            ToolInfo::new("cheat", "tries to end its own run", json!({}))
        }
        async fn run(&self, ctx: RunContext, _: serde_json::Value) -> Result<Completed, RunError> {
            let refused = ctx.emit(Completed::default()).await;
            assert!(matches!(
                refused,
                Err(EmitError::TerminalReserved("completed"))
            ));
            Ok(Completed::default())
        }
    }
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Cheater)], config(1, 1))
        .await
        .unwrap();
    let handle = scheduler
        .submit("cheat", json!({}), RunOptions::default())
        .await
        .unwrap();
    let run = handle.run_id().clone();
    handle.finished().await.unwrap();
    assert_eq!(check_log(&read_all(&*log, &run).await), RunState::Completed);
}

#[tokio::test]
async fn arguments_are_checked_against_the_input_schema_before_a_run_exists() {
    use async_trait::async_trait;
    use weir_core::{Completed, RunError};
    use weir_runtime::{RunContext, ToolInfo};
    struct Typed;
    #[async_trait]
    impl Tool for Typed {
        fn info(&self) -> ToolInfo {
            ToolInfo::new(
                "typed",
                "needs n",
                json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}),
            )
        }
        async fn run(&self, _: RunContext, _: serde_json::Value) -> Result<Completed, RunError> {
            Ok(Completed::default())
        }
    }
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Typed)], config(1, 1))
        .await
        .unwrap();
    let error = scheduler
        .submit("typed", json!({"n": "three"}), RunOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"invalid arguments for tool "typed": arguments.n must be an integer, got a string"#
    );
    assert!(log.list_runs(&Default::default()).await.unwrap().is_empty());
    scheduler
        .submit("typed", json!({"n": 3}), RunOptions::default())
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_active_and_queued_runs_and_waits_for_their_end() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), vec![hang("hang")], config(1, 4))
        .await
        .unwrap();
    let running = scheduler
        .submit("hang", json!({}), RunOptions::default())
        .await
        .unwrap();
    let queued = scheduler
        .submit("hang", json!({}), RunOptions::default())
        .await
        .unwrap();
    tokio::task::yield_now().await;
    let left = scheduler
        .shutdown("server shutting down", Duration::from_secs(5))
        .await;
    assert_eq!(left, 0);
    for handle in [running, queued] {
        let terminal = handle.finished().await.unwrap();
        let EventKind::Canceled(canceled) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(canceled.reason, "server shutting down");
    }
}

/// A tool's secret fields reach the tool as given, but the log — the run's
/// summary and its `started` event — keeps them redacted; the run keeps
/// the owner it was submitted with.
#[tokio::test]
async fn secrets_reach_the_tool_but_never_the_log() {
    use async_trait::async_trait;
    use weir_core::{Completed, Content, RunError};
    use weir_runtime::{RunContext, ToolInfo};
    struct Echo;
    #[async_trait]
    impl Tool for Echo {
        fn info(&self) -> ToolInfo {
            ToolInfo::new(
                "echo",
                "says how long its key is",
                json!({"type": "object"}),
            )
            .with_secret_fields(&["env", "key"])
        }
        async fn run(&self, _: RunContext, args: serde_json::Value) -> Result<Completed, RunError> {
            let seen = format!(
                "{} {}",
                args["env"]["API_KEY"].as_str().unwrap_or_default().len(),
                args["key"].as_str().unwrap_or_default().len()
            );
            Ok(Completed {
                content: vec![Content::text(seen)],
                structured: None,
            })
        }
    }
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Echo)], config(1, 1))
        .await
        .unwrap();
    let given = json!({"code": "x", "env": {"API_KEY": "s3cret", "HOME": "/w"}, "key": "k3y!"});
    let handle = scheduler
        .submit(
            "echo",
            given,
            RunOptions {
                owner: Some("alice".into()),
                ..RunOptions::default()
            },
        )
        .await
        .unwrap();
    let run = handle.run_id().clone();
    let terminal = handle.finished().await.unwrap();
    let EventKind::Completed(completed) = &terminal.kind else {
        panic!("{terminal:?}")
    };
    assert_eq!(completed.content, [weir_core::Content::text("6 4")]);
    let stored = json!({"code": "x", "env": {"API_KEY": "[redacted]", "HOME": "[redacted]"}, "key": "[redacted]"});
    let summary = log.get_run(&run).await.unwrap().unwrap();
    assert_eq!(summary.arguments, stored);
    assert_eq!(summary.owner.as_deref(), Some("alice"));
    let events = read_all(&*log, &run).await;
    let EventKind::Started(started) = &events[0].kind else {
        panic!("{:?}", events[0])
    };
    assert_eq!(started.arguments, stored);
    let everything = serde_json::to_string(&events).unwrap();
    assert!(
        !everything.contains("s3cret") && !everything.contains("k3y!"),
        "{everything}"
    );
}
