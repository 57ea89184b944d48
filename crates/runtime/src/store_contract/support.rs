//! What the checks are built from, public so that a store's own tests (and
//! the scheduler's) use the same pieces: events and logs to append, a
//! subscriber that reconnects and lags on demand, a tool that plays a
//! script, and the log's invariants as one assertion.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{
    Completed, Content, EventKind, FailureCode, Log, LogLevel, LogStream, Meta, Partial, Progress,
    ProgressUnit, RunError, RunEvent, RunId, RunState, Seq, Started, Warning,
};

use crate::{EventLog, RunContext, Tool, ToolInfo};

/// A run id from a short test name; panics if the name is not a valid id.
pub fn run_id(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}

/// A `started` event of `tool`, with empty arguments, on node `test`.
pub fn started(tool: &str) -> EventKind {
    EventKind::Started(Started {
        tool: tool.into(),
        arguments: json!({}),
        node: "test".into(),
    })
}

/// A non-terminal event chosen by `selector`, labelled `i`.
pub fn body_event(selector: u8, i: u64) -> EventKind {
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
        // Every other one names a unit, so that stores keep the field.
        4 => Meta {
            total: Some(i),
            progress_unit: i.is_multiple_of(2).then_some(ProgressUnit::Lines),
            ..Meta::default()
        }
        .into(),
        _ => Warning {
            message: format!("warning {i}"),
        }
        .into(),
    }
}

/// `kinds` as events of `run` from seq `from` on, stamped `1000 + seq`.
pub fn events(run: &RunId, from: Seq, kinds: Vec<EventKind>) -> Vec<RunEvent> {
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
pub async fn read_all(log: &dyn EventLog, run: &RunId) -> Vec<RunEvent> {
    log.read(run, 0, usize::MAX).await.unwrap()
}

/// Collects a subscription to its end, optionally dropping and resuming it
/// after every `reconnect_every` events and sleeping `pause` between events.
pub async fn follow(
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

/// Asserts the log's invariants (ARCHITECTURE.md, "Invariants", 1 and 2) on
/// a complete log: seq dense from 0, `started` first, exactly one terminal
/// event, last, and a state that reduces to that ending. Returns the state.
pub fn check_log(log: &[RunEvent]) -> RunState {
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

/// A short name for how a run ended: `completed`, `canceled`, or `failed:`
/// and the failure's code.
pub fn ending(event: &RunEvent) -> String {
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

/// One step of a [`Scripted`] tool.
#[derive(Clone, Debug)]
pub enum Step {
    /// Emit [`body_event`]`(selector, step index)`.
    Emit(u8),
    /// Sleep this many milliseconds.
    Sleep(u64),
    /// Spawn a task that emits `count` events after `delay_ms`, possibly after
    /// the run has ended.
    Spawn {
        /// Events the task emits.
        count: u64,
        /// How long it waits first, in milliseconds.
        delay_ms: u64,
    },
    /// Flush what was emitted.
    Flush,
    /// Store an artifact.
    Artifact,
}

/// How a [`Scripted`] tool ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Returns a result.
    Return,
    /// Returns a `tool_error`.
    Fail,
    /// Panics with [`SCRIPTED_PANIC`].
    Panic,
    /// Never ends by itself.
    Hang,
}

/// A tool that plays a script.
pub struct Scripted {
    /// The tool's name.
    pub name: String,
    /// What it does, in order.
    pub steps: Vec<Step>,
    /// How it ends after the last step.
    pub end: End,
}

/// The payload of a [`Scripted`] tool's panic.
pub const SCRIPTED_PANIC: &str = "scripted panic";

/// Keeps scripted panics out of the test output; other panics print as usual.
pub fn quiet_scripted_panics() {
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
