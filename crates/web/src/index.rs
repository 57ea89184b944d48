//! `GET /api/runs/live`: the run index as it changes — a run created, its
//! state or event count changed, a run ended — as SSE `run` events, each a
//! [`RunView`].
//!
//! The source is the log itself, polled: the scheduler and the stores have
//! no feed of run-level changes (the live hub is per run), and asking the
//! store for the runs that are going is cheap — they are few, whatever the
//! number of finished runs. One poller per server, started by the first
//! watcher and idle while nobody watches, compares each tick's active runs
//! (and the newest few, to catch a run that started and ended between two
//! ticks) with the previous tick's and fans the changes out to every
//! watcher, each of whom gets only what its identity may see.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::broadcast;
use weir_core::{RunId, RunState, Seq};
use weir_runtime::log::{RunFilter, RunSummary};
use weir_runtime::{EventLog, Principal, Scheduler};

use crate::Web;
use crate::api::RunView;

/// How often the poller looks: a new run reaches the page well within 1 s.
const TICK: Duration = Duration::from_millis(250);
/// How many of the newest runs each tick looks at besides the active ones.
const NEWEST: usize = 20;
/// Changes buffered per watcher; one that falls further behind reloads.
const BACKLOG: usize = 1024;

/// A change, with the owner kept to decide who may see it.
#[derive(Clone)]
pub(crate) struct Change {
    summary: Arc<RunSummary>,
    view: Arc<RunView>,
}

/// The poller's handle: where watchers subscribe.
pub(crate) struct Index {
    changes: broadcast::Sender<Change>,
}

impl Index {
    /// Starts the poller on the current runtime.
    pub(crate) fn start(scheduler: Scheduler) -> Index {
        let (changes, _) = broadcast::channel(BACKLOG);
        tokio::spawn(poll(scheduler, changes.clone()));
        Index { changes }
    }
}

async fn poll(scheduler: Scheduler, changes: broadcast::Sender<Change>) {
    let log = scheduler.log().clone();
    // Each run's last state and event count, for the runs of the last tick.
    let mut seen: HashMap<RunId, (RunState, Seq)> = HashMap::new();
    let mut watched = false;
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if changes.receiver_count() == 0 {
            watched = false;
            continue;
        }
        let Some(now) = snapshot(log.as_ref()).await else {
            continue;
        };
        let mut next = HashMap::with_capacity(now.len());
        for run in now {
            let key = (run.state, run.events);
            // The first tick with a watcher only learns what is there: the
            // page read the list itself, after it started watching.
            if watched && seen.get(&run.run_id) != Some(&key) {
                send(log.as_ref(), &changes, run.clone()).await;
            }
            seen.remove(&run.run_id);
            next.insert(run.run_id, key);
        }
        // Active at the last tick, gone from the snapshot: it ended.
        for run_id in seen.keys() {
            if let Ok(Some(run)) = log.get_run(run_id).await
                && watched
            {
                send(log.as_ref(), &changes, run).await;
            }
        }
        seen = next;
        watched = true;
    }
}

/// The active runs and the newest few.
async fn snapshot(log: &dyn EventLog) -> Option<Vec<RunSummary>> {
    let active = RunFilter {
        states: vec![
            RunState::Pending,
            RunState::Working,
            RunState::InputRequired,
        ],
        ..RunFilter::default()
    };
    let newest = RunFilter {
        limit: Some(NEWEST),
        ..RunFilter::default()
    };
    let mut runs = log.list_runs(&active).await.ok()?;
    for run in log.list_runs(&newest).await.ok()? {
        if !runs.iter().any(|r| r.run_id == run.run_id) {
            runs.push(run);
        }
    }
    Some(runs)
}

async fn send(log: &dyn EventLog, changes: &broadcast::Sender<Change>, run: RunSummary) {
    let view = RunView::of(log, run.clone()).await;
    let _ = changes.send(Change {
        summary: Arc::new(run),
        view: Arc::new(view),
    });
}

/// GET `/api/runs/live`.
pub(crate) async fn live(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
) -> Response {
    let receiver = web.index().changes.subscribe();
    Sse::new(watch(receiver, identity))
        .keep_alive(
            KeepAlive::new()
                .interval(Duration::from_secs(15))
                .event(Event::default().event("heartbeat").data("{}")),
        )
        .into_response()
}

fn watch(
    receiver: broadcast::Receiver<Change>,
    identity: Principal,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(
        (receiver, identity),
        |(mut receiver, identity)| async move {
            loop {
                let event = match receiver.recv().await {
                    Ok(change) if identity.sees(&change.summary) => Event::default()
                        .event("run")
                        .data(serde_json::to_string(&*change.view).unwrap_or_default()),
                    Ok(_) => continue,
                    // Changes were missed: the page reads the list again.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        Event::default().event("reload").data("{}")
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                return Some((Ok(event), (receiver, identity)));
            }
        },
    )
}
