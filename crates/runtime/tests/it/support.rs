//! Helpers shared by the test modules: stores to test against, a tool driven
//! by a script, and log checks.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{
    Completed, Content, EventKind, FailureCode, Log, LogLevel, LogStream, Meta, Partial, Progress,
    RunError, RunEvent, RunId, RunState, Seq, Started, Warning,
};
use weir_runtime::log::SqliteOptions;
use weir_runtime::{EventLog, MemoryLog, RunContext, SqliteLog, Tool, ToolInfo};

/// Proptest cases per property: 1,000 unless `PROPTEST_CASES` says otherwise.
pub(crate) fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// Which store a test runs against.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StoreKind {
    Memory,
    Sqlite,
}

/// A fresh store of `kind`; the tempdir keeps a SQLite file alive.
pub(crate) fn store(
    kind: StoreKind,
    live_capacity: usize,
) -> (Arc<dyn EventLog>, Option<tempfile::TempDir>) {
    match kind {
        StoreKind::Memory => (Arc::new(MemoryLog::with_live_capacity(live_capacity)), None),
        StoreKind::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let log = SqliteLog::open(
                dir.path().join("weir.db"),
                SqliteOptions {
                    live_capacity,
                    ..SqliteOptions::default()
                },
            )
            .unwrap();
            (Arc::new(log), Some(dir))
        }
    }
}

pub(crate) fn run_id(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}

pub(crate) fn started(tool: &str) -> EventKind {
    EventKind::Started(Started {
        tool: tool.into(),
        arguments: json!({}),
        node: "test".into(),
    })
}

/// A non-terminal event chosen by `selector`, labelled `i`.
pub(crate) fn body_event(selector: u8, i: u64) -> EventKind {
    match selector % 6 {
        0 => Progress {
            progress: i as f64,
            total: Some(100.0),
            ..Progress::default()
        }
        .into(),
        1 => Log {
            level: LogLevel::Info,
            stream: LogStream::Stdout,
            text: format!("line {i}"),
        }
        .into(),
        2 => Partial {
            content: vec![Content::text(format!("part {i}"))],
            ..Partial::default()
        }
        .into(),
        3 => Partial {
            items: vec![json!({ "i": i })],
            group: Some(format!("g{}", i % 3)),
            ..Partial::default()
        }
        .into(),
        4 => Meta {
            total: Some(i),
            ..Meta::default()
        }
        .into(),
        _ => Warning {
            message: format!("warning {i}"),
        }
        .into(),
    }
}

pub(crate) fn events(run: &RunId, from: Seq, kinds: Vec<EventKind>) -> Vec<RunEvent> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| RunEvent {
            run_id: run.clone(),
            seq: from + i as Seq,
            ts: 1_000 + from + i as u64,
            kind,
        })
        .collect()
}

/// Reads a whole log.
pub(crate) async fn read_all(log: &dyn EventLog, run: &RunId) -> Vec<RunEvent> {
    log.read(run, 0, usize::MAX).await.unwrap()
}

/// Collects a subscription to its end, optionally dropping and resuming it
/// after every `reconnect_every` events and sleeping `pause` between events.
pub(crate) async fn follow(
    log: &Arc<dyn EventLog>,
    run: &RunId,
    from: Seq,
    reconnect_every: Option<usize>,
    pause: Duration,
) -> Vec<RunEvent> {
    let mut got = Vec::new();
    let mut subscription = log.subscribe_from(run, from);
    let mut since_connect = 0;
    while let Some(event) = subscription.next().await {
        got.push(event.expect("subscription error").to_event());
        since_connect += 1;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        if reconnect_every.is_some_and(|n| since_connect >= n.max(1)) {
            let position = subscription.position();
            drop(subscription);
            subscription = log.subscribe_from(run, position);
            since_connect = 0;
        }
    }
    got
}

/// Asserts the event contract's invariants 1 and 2 (docs/design.md) on a
/// complete log; returns the state.
pub(crate) fn check_log(log: &[RunEvent]) -> RunState {
    assert!(!log.is_empty(), "empty log");
    for (i, event) in log.iter().enumerate() {
        assert_eq!(event.seq, i as Seq, "seq not dense: {log:#?}");
    }
    assert!(
        matches!(log[0].kind, EventKind::Started(_)),
        "first is not started"
    );
    let terminals = log.iter().filter(|e| e.kind.is_terminal()).count();
    assert_eq!(terminals, 1, "terminal events: {terminals}");
    assert!(
        log.last().unwrap().kind.is_terminal(),
        "terminal is not last"
    );
    let state = RunState::reduce(log.iter().map(|e| &e.kind)).expect("log reduces");
    let expected = match &log.last().unwrap().kind {
        EventKind::Completed(_) => RunState::Completed,
        EventKind::Failed(_) => RunState::Failed,
        EventKind::Canceled(_) => RunState::Canceled,
        other => panic!("not terminal: {other:?}"),
    };
    assert_eq!(state, expected);
    state
}

/// A short name for how a run ended.
pub(crate) fn ending(event: &RunEvent) -> String {
    match &event.kind {
        EventKind::Failed(failed) => format!(
            "failed:{}",
            serde_json::to_value(failed.error.code)
                .unwrap()
                .as_str()
                .unwrap()
        ),
        other => other.type_name().to_owned(),
    }
}

/// One step of a scripted tool.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Emit(u8),
    Sleep(u64),
    /// Spawn a task that emits `count` events after `delay_ms`, possibly after
    /// the run has ended.
    Spawn {
        count: u64,
        delay_ms: u64,
    },
    Flush,
    Artifact,
}

/// How a scripted tool ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    Return,
    Fail,
    Panic,
    Hang,
}

/// A tool that plays a script.
pub(crate) struct Scripted {
    pub name: String,
    pub steps: Vec<Step>,
    pub end: End,
}

pub(crate) const SCRIPTED_PANIC: &str = "scripted panic";

/// Keeps scripted panics out of the test output; other panics print as usual.
pub(crate) fn quiet_scripted_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&SCRIPTED_PANIC) {
                default(info);
            }
        }));
    });
}

#[async_trait]
impl Tool for Scripted {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            self.name.clone(),
            "plays a script",
            json!({"type": "object"}),
        )
    }

    async fn run(&self, ctx: RunContext, _arguments: Value) -> Result<Completed, RunError> {
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Emit(selector) => {
                    let _ = ctx.emit(body_event(*selector, i as u64)).await;
                }
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
                Step::Spawn { count, delay_ms } => {
                    let (ctx, count, delay) =
                        (ctx.clone(), *count, Duration::from_millis(*delay_ms));
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        for j in 0..count {
                            let _ = ctx.emit(body_event(j as u8, j)).await;
                        }
                    });
                }
                Step::Flush => {
                    let _ = ctx.flush().await;
                }
                Step::Artifact => {
                    let _ = ctx
                        .artifact(&format!("out-{i}.txt"), "text/plain", vec![b'x'; i + 1])
                        .await;
                }
            }
        }
        match self.end {
            End::Return => Ok(Completed {
                content: vec![Content::text("done")],
                structured: Some(json!({ "steps": self.steps.len() })),
            }),
            End::Fail => Err(RunError::new(FailureCode::ToolError, "scripted failure")),
            End::Panic => std::panic::panic_any(SCRIPTED_PANIC),
            End::Hang => std::future::pending().await,
        }
    }
}
