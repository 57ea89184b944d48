//! The dashboard's JSON API under `/api/runs`: a page of runs, one run, a
//! page of its events, an artifact, and cancel. Each answer is narrowed to
//! what the request's identity may see; another's run is a 404, exactly like
//! a run that does not exist.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weir_core::{EventKind, Progress, RunId, RunState, Seq};
use weir_runtime::log::{FindRunError, RunFilter, RunSummary, find_run};
use weir_runtime::{EventLog, Principal};

use crate::Web;
use crate::guard::refusal;

/// Runs per page when the page does not say.
const DEFAULT_PAGE: usize = 50;
/// Most runs per page.
const MAX_PAGE: usize = 500;
/// Most events per page.
const MAX_EVENTS: usize = 1000;
/// How far back from a run's end to look for its latest progress.
const PROGRESS_LOOKBACK: u64 = 64;
/// Bytes of an artifact read per round trip while sending it.
const ARTIFACT_CHUNK: u64 = 1 << 20;
/// The reason a run cancelled from the dashboard ends with, unless the
/// request gives one.
const CANCEL_REASON: &str = "cancelled from the dashboard";

/// A run as the list shows it: the summary without its arguments (which
/// can be large), and its latest progress while it is going.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RunView {
    pub(crate) run_id: RunId,
    pub(crate) tool: String,
    pub(crate) state: RunState,
    pub(crate) events: Seq,
    pub(crate) created_ts: u64,
    pub(crate) updated_ts: u64,
    pub(crate) finished_ts: Option<u64>,
    pub(crate) owner: Option<String>,
    /// What the program that asked for it called itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) client: Option<String>,
    /// The run that started it (a plan's step: its plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<RunId>,
    pub(crate) node: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) progress: Option<Progress>,
}

impl RunView {
    pub(crate) async fn of(log: &dyn EventLog, run: RunSummary) -> RunView {
        let progress = if run.state.is_terminal() {
            None
        } else {
            latest_progress(log, &run).await
        };
        RunView {
            run_id: run.run_id,
            tool: run.tool,
            state: run.state,
            events: run.events,
            created_ts: run.created_ts,
            updated_ts: run.updated_ts,
            finished_ts: run.finished_ts,
            owner: run.owner,
            client: run.client,
            parent: run.parent,
            node: run.node,
            progress,
        }
    }
}

/// The last `progress` among the run's latest events. A run that reported
/// none lately shows none: the list never scans a whole log.
async fn latest_progress(log: &dyn EventLog, run: &RunSummary) -> Option<Progress> {
    let from = run.events.saturating_sub(PROGRESS_LOOKBACK);
    let events = log
        .read(&run.run_id, from, PROGRESS_LOOKBACK as usize)
        .await
        .ok()?;
    events.into_iter().rev().find_map(|event| match event.kind {
        EventKind::Progress(progress) => Some(progress),
        _ => None,
    })
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    /// States, comma-separated.
    state: Option<String>,
    tool: Option<String>,
    /// Only the runs this run started (a plan's steps).
    parent: Option<String>,
    limit: Option<usize>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// Where a page starts: after the run created at `ts` with id `run_id`, in
/// the list's order (newest first, then run id descending).
struct Cursor {
    ts: u64,
    run_id: String,
}

impl Cursor {
    fn parse(text: &str) -> Option<Cursor> {
        let (ts, run_id) = text.split_once('.')?;
        Some(Cursor {
            ts: ts.parse().ok()?,
            run_id: run_id.to_owned(),
        })
    }

    fn of(run: &RunSummary) -> String {
        format!("{}.{}", run.created_ts, run.run_id)
    }

    /// Whether `run` comes after the cursor.
    fn before(&self, run: &RunSummary) -> bool {
        (run.created_ts, run.run_id.as_str()) < (self.ts, self.run_id.as_str())
    }
}

/// GET `/api/runs?state=working,failed&tool=NAME&parent=ID&limit=N&cursor=C`:
/// a page of runs, newest first, and the cursor of the next page (`null` at
/// the end). `parent` (a whole run id) keeps the runs that run started.
pub(crate) async fn list(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
    Query(query): Query<ListQuery>,
) -> Response {
    let mut states = Vec::new();
    for name in query.state.iter().flat_map(|s| s.split(',')) {
        match name.trim().parse::<RunState>() {
            Ok(state) => states.push(state),
            Err(_) if name.trim().is_empty() => {}
            Err(_) => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "unknown state {name:?}: use pending, working, input_required, completed, failed or canceled"
                    ),
                );
            }
        }
    }
    let cursor = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => match Cursor::parse(text) {
            Some(cursor) => Some(cursor),
            None => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    "invalid cursor: pass next_cursor of the previous page as it came",
                );
            }
        },
    };
    let parent = query.parent.filter(|parent| !parent.is_empty());
    let limit = query.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    // The store lists newest first but cannot start after a cursor (nor
    // pick a parent's runs): a first page asks it for one more than the
    // page (to know whether there is a next), a later one (or one of a
    // parent's runs) reads the list and skips to what it wants.
    let filter = identity.narrow(RunFilter {
        states,
        tool: query.tool.filter(|tool| !tool.is_empty()),
        limit: (cursor.is_none() && parent.is_none()).then_some(limit + 1),
        ..RunFilter::default()
    });
    let log = web.scheduler.log();
    let runs = match log.list_runs(&filter).await {
        Ok(runs) => runs,
        Err(error) => return refusal(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    };
    let mut page: Vec<RunSummary> = runs
        .into_iter()
        .filter(|run| cursor.as_ref().is_none_or(|cursor| cursor.before(run)))
        .filter(|run| {
            parent
                .as_deref()
                .is_none_or(|parent| run.parent.as_ref().is_some_and(|id| id.as_str() == parent))
        })
        .take(limit + 1)
        .collect();
    let next_cursor = (page.len() > limit).then(|| {
        page.truncate(limit);
        page.last().map(Cursor::of)
    });
    let mut views = Vec::with_capacity(page.len());
    for run in page {
        views.push(RunView::of(log.as_ref(), run).await);
    }
    Json(json!({ "runs": views, "next_cursor": next_cursor.flatten() })).into_response()
}

/// The run `id` names — its id, or the unique start of one (at least
/// `MIN_RUN_PREFIX` characters) — if `identity` may see it; else the
/// answer to send. Runs it may not see are neither matched nor named.
#[allow(clippy::result_large_err)]
async fn visible(web: &Web, identity: &Principal, id: &str) -> Result<RunSummary, Response> {
    let log = web.scheduler.log();
    match find_run(log.as_ref(), id, |run| identity.sees(run)).await {
        Ok(run) => Ok(run),
        Err(FindRunError::Invalid(_)) => Err(refusal(StatusCode::BAD_REQUEST, "invalid run id")),
        Err(FindRunError::NotFound(_)) => Err(refusal(StatusCode::NOT_FOUND, "no such run")),
        Err(error @ FindRunError::TooShort(_)) => {
            Err(refusal(StatusCode::BAD_REQUEST, &error.to_string()))
        }
        Err(error @ FindRunError::Ambiguous { .. }) => {
            Err(refusal(StatusCode::CONFLICT, &error.to_string()))
        }
        Err(FindRunError::Log(error)) => Err(refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            &error.to_string(),
        )),
    }
}

/// GET `/api/runs/{id}`: the run's summary with its arguments (secret ones
/// as stored: redacted) and its latest progress.
pub(crate) async fn detail(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    let run = match visible(&web, &identity, &id).await {
        Ok(run) => run,
        Err(answer) => return answer,
    };
    let arguments = run.arguments.clone();
    let view = RunView::of(web.scheduler.log().as_ref(), run).await;
    Json(json!({ "run": view, "arguments": arguments })).into_response()
}

#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    from: Option<Seq>,
    limit: Option<usize>,
}

/// GET `/api/runs/{id}/events?from=SEQ&limit=N`: a page of the run's log,
/// for a view that shows an older part of a long run (the live part comes
/// from `GET /runs/{id}/events`).
pub(crate) async fn events(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
) -> Response {
    let run = match visible(&web, &identity, &id).await {
        Ok(run) => run,
        Err(answer) => return answer,
    };
    let from = query.from.unwrap_or(0);
    let limit = query.limit.unwrap_or(200).clamp(1, MAX_EVENTS);
    match web.scheduler.log().read(&run.run_id, from, limit).await {
        Ok(events) => {
            let next_seq = events.last().map_or(from, |e| e.seq.saturating_add(1));
            Json(json!({ "events": events, "next_seq": next_seq })).into_response()
        }
        Err(error) => refusal(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
}

/// GET `/api/runs/{id}/artifacts/{name}`: the artifact's bytes, as a
/// download, read from the store a chunk at a time.
pub(crate) async fn artifact(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
    Path((id, name)): Path<(String, String)>,
) -> Response {
    let run = match visible(&web, &identity, &id).await {
        Ok(run) => run,
        Err(answer) => return answer,
    };
    let log = web.scheduler.log().clone();
    let found = match log.artifact(&run.run_id, &name).await {
        Ok(found) => found,
        Err(error) => return refusal(StatusCode::NOT_FOUND, &error.to_string()),
    };
    let run_id = run.run_id;
    let size = found.bytes;
    let chunks = futures_util::stream::unfold(0u64, move |offset| {
        let log = log.clone();
        let run_id = run_id.clone();
        let name = name.clone();
        async move {
            if offset >= size {
                return None;
            }
            let end = (offset + ARTIFACT_CHUNK).min(size);
            let read = log.read_artifact(&run_id, &name, offset..end).await;
            Some((read.map_err(std::io::Error::other), end))
        }
    });
    // The name is one the store accepted (no quotes, no separators), but a
    // download name is only a hint: anything odd becomes `_`.
    let file: String = found
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    (
        [
            (header::CONTENT_TYPE, found.mime.clone()),
            (header::CONTENT_LENGTH, size.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
            // A page's own scripts never run from an artifact.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; sandbox".to_owned(),
            ),
        ],
        Body::from_stream(chunks),
    )
        .into_response()
}

#[derive(Deserialize)]
pub(crate) struct CancelQuery {
    /// What the run's canceled event says (`weir runs cancel --reason`).
    reason: Option<String>,
}

/// POST `/api/runs/{id}/cancel?reason=TEXT`: the `runs_cancel` tool's path —
/// a run that has ended is refused (409), else the scheduler cancels it and
/// the run ends as canceled. The guard has checked that the page's own
/// origin asks.
pub(crate) async fn cancel(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
    Path(id): Path<String>,
    Query(query): Query<CancelQuery>,
) -> Response {
    let run = match visible(&web, &identity, &id).await {
        Ok(run) => run,
        Err(answer) => return answer,
    };
    if run.state.is_terminal() {
        return refusal(
            StatusCode::CONFLICT,
            &format!("run {} has already ended ({})", run.run_id, run.state),
        );
    }
    let reason = query.reason.filter(|reason| !reason.is_empty());
    let cancelled = web
        .scheduler
        .cancel(&run.run_id, reason.as_deref().unwrap_or(CANCEL_REASON));
    Json(json!({ "run_id": run.run_id, "cancelled": cancelled })).into_response()
}

/// GET `/api/tools`: the names of the tools this server runs, for the
/// list's filter.
pub(crate) async fn tools(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
) -> Response {
    // The tools it may call: the same list as its `tools/list`.
    let names: Vec<Value> = web
        .scheduler
        .tools()
        .filter(|tool| identity.may_call(&tool.name))
        .map(|tool| Value::from(tool.name.clone()))
        .collect();
    Json(json!({ "tools": names })).into_response()
}
