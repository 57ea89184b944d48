//! A run's task, from its place in the queue to its terminal event: the tool
//! runs in a task of its own, so a panic is caught, and its future is
//! dropped on cancel or timeout before the terminal event is written.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use weir_core::{Canceled, EventKind, Failed, FailureCode, RunError, RunEvent, Started};

use super::slots::{Seat, Slots, take_slots};
use super::{Cancel, Inner, Lineage, Registered};
use crate::context::{Command, Inlet, Registration, RunContext, write_run};
use crate::tool::Tool;

/// Events a run may have queued for its writer before `emit` waits: the bound
/// that keeps a fast tool's memory flat when the store is slower.
const EMIT_BUFFER: usize = 1024;

/// Events the node's runs may hold emitted and not yet stored, all runs
/// together; a tool's `emit` waits beyond it. Without it, 10,000 runs
/// producing faster than SQLite stored each held their own buffer, and the
/// node peaked at 1.16 GiB (`bench/reader/run --concurrent 10000 --sqlite`);
/// with it, 0.94 GiB. Smaller costs throughput there (64 buffers: a third
/// fewer items/s, as each run's appends shrink); 128 full buffers, one run
/// never meets it.
pub(super) const BACKLOG: usize = 128 * EMIT_BUFFER;

/// A run's arguments: as the caller gave them, for the tool, and as the
/// log keeps them (secrets redacted), for `started`.
pub(super) struct Arguments {
    pub(super) given: Value,
    pub(super) stored: Value,
}

/// Where a run stands as its task begins: the slots it holds (`None`: it
/// waits for them in the queue), and, when its writer registers it with
/// its first events, the registration (see `Scheduler::submit`).
pub(super) struct Admission {
    pub(super) slots: Option<Slots>,
    pub(super) registration: Option<Registration>,
}

/// One run from queue to terminal event.
pub(super) async fn execute(
    inner: &Arc<Inner>,
    tool: &str,
    registered: &Registered,
    arguments: Arguments,
    timeout: Duration,
    lineage: Lineage,
    admission: Admission,
) -> Option<RunEvent> {
    let Admission {
        slots,
        registration,
    } = admission;
    let run_id = &lineage.run_id.clone();
    let cancel = &lineage.cancel.clone();
    let slots = match slots {
        Some(slots) => Some(slots),
        None => {
            let waited = tokio::select! {
                slots = take_slots(&registered.slots, match &lineage.parent_lane {
                    Some(lane) => Seat::Child(lane),
                    None => Seat::Root(&inner.all_slots),
                }) => Some(slots),
                () = cancel.token.cancelled() => None,
            };
            inner.queued.fetch_sub(1, Ordering::SeqCst);
            waited
        }
    };
    let (commands, receiver) = mpsc::channel(EMIT_BUFFER);
    let writer = tokio::spawn(write_run(
        inner.log.clone(),
        run_id.clone(),
        0,
        receiver,
        cancel.token.clone(),
        registration,
    ));
    let Arguments { given, stored } = arguments;
    let started = Started {
        tool: tool.to_owned(),
        arguments: stored,
        node: inner.config.node.clone(),
    };
    // The receiver lives until the writer ends, which needs a terminal event.
    let _ = commands.send(Command::Emit(started.into())).await;
    let terminal = match slots {
        // Cancelled while queued: the log still gets `started` first.
        None => Canceled {
            reason: cancel.reason(),
        }
        .into(),
        Some(_slots) => {
            let ctx = RunContext::new(
                run_id.clone(),
                Inlet {
                    commands: commands.clone(),
                    backlog: Some(inner.backlog.clone()),
                },
                cancel.token.clone(),
                Some(tokio::time::Instant::now() + timeout),
                inner.log.clone(),
                cancel.inputs.clone(),
                Some(Arc::new(lineage)),
            );
            run_tool(registered.tool.clone(), ctx, given, timeout, cancel).await
        }
    };
    // Children the tool left running end first: the parent's terminal
    // event is the last word on the whole tree.
    cancel
        .end_children(&format!("its parent run {run_id} ended"))
        .await;
    let _ = commands.send(Command::Emit(terminal)).await;
    drop(commands);
    writer.await.ok().flatten()
}

/// Executes the tool in a task of its own (so a panic is caught) and decides
/// the terminal event: its result, a panic, the deadline or a cancel.
async fn run_tool(
    tool: Arc<dyn Tool>,
    ctx: RunContext,
    arguments: Value,
    timeout: Duration,
    cancel: &Cancel,
) -> EventKind {
    let mut work = tokio::spawn(async move { tool.run(ctx, arguments).await });
    tokio::select! {
        biased;
        joined = &mut work => match joined {
            Ok(Ok(completed)) => completed.into(),
            Ok(Err(error)) => Failed { error }.into(),
            Err(join_error) => Failed { error: panic_error(join_error) }.into(),
        },
        () = cancel.token.cancelled() => {
            work.abort();
            let _ = work.await; // the tool's future is dropped: its cleanup has run
            Canceled { reason: cancel.reason() }.into()
        }
        () = tokio::time::sleep(timeout) => {
            cancel.token.cancel(); // tasks the tool spawned see it too
            work.abort();
            let _ = work.await;
            Failed {
                error: RunError::new(
                    FailureCode::Timeout,
                    format!("the run exceeded its time limit of {}", weir_core::human_duration(timeout.as_millis() as u64)),
                )
                .with_remediation("call again with a larger timeout, or ask for less work per call"),
            }
            .into()
        }
    }
}

fn panic_error(join_error: tokio::task::JoinError) -> RunError {
    let message = match join_error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-text panic payload".into()),
        Err(join_error) => join_error.to_string(),
    };
    RunError::new(
        FailureCode::Panicked,
        format!("the tool panicked: {message}"),
    )
    .with_remediation("this is a bug in the tool; report it with the arguments that caused it")
}
