//! Closing the runs a stopped node left open, so every log still ends in
//! exactly one terminal event after a crash.

use weir_core::{EventKind, Failed, FailureCode, RunError, RunEvent, RunState, Started};

use crate::context::now_ms;
use crate::log::{EventLog, LogError, RunFilter};

/// Closes the runs `node` left open when it stopped: each gets `failed` with
/// code `interrupted` (and a `started` first if it never got one). Returns how
/// many. The scheduler calls it at start, before accepting runs.
pub async fn recover_interrupted(log: &dyn EventLog, node: &str) -> Result<usize, LogError> {
    let open = log
        .list_runs(&RunFilter {
            states: vec![
                RunState::Pending,
                RunState::Working,
                RunState::InputRequired,
            ],
            node: Some(node.to_owned()),
            ..RunFilter::default()
        })
        .await?;
    for run in &open {
        let ts = now_ms();
        let mut kinds: Vec<EventKind> = Vec::with_capacity(2);
        let when = if run.state == RunState::Pending {
            kinds.push(
                Started {
                    tool: run.tool.clone(),
                    arguments: run.arguments.clone(),
                    node: run.node.clone(),
                }
                .into(),
            );
            "while it was queued"
        } else {
            "while it was running"
        };
        kinds.push(
            Failed {
                error: RunError::new(
                    FailureCode::Interrupted,
                    // The code says `interrupted`; whoever shows the
                    // failure names it, so the message does not repeat it.
                    format!("the server stopped {when}"),
                )
                .with_remediation(
                    "call the tool again; the events written before the stop are kept",
                ),
            }
            .into(),
        );
        let events: Vec<RunEvent> = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| RunEvent {
                run_id: run.run_id.clone(),
                seq: run.events + i as u64,
                ts,
                kind,
            })
            .collect();
        log.append(events.into()).await?;
    }
    Ok(open.len())
}
