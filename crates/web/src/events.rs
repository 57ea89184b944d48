//! `GET /runs/{id}/events`: one run's log as plain SSE, for EventSource
//! clients and the dashboard, resumable with `Last-Event-ID`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::json;
use weir_core::{EventKind, RunId, Seq};
use weir_runtime::{EventLog, LogError, Principal, Subscription};

use crate::Web;
use crate::guard::refusal;
use crate::headers::parse_seq;

const LAST_EVENT_ID: &str = "last-event-id";

#[derive(Deserialize)]
pub(crate) struct FromQuery {
    from: Option<Seq>,
}

/// GET `/runs/{id}/events`: the run as plain SSE, from `Last-Event-ID` + 1,
/// else `?from=`, else 0. It ends after the run's terminal event (`done` or
/// `error`); started past the end of a run that is over, it sends one `end`
/// event, `{run_id, state, next_seq}`, instead.
pub(crate) async fn run_events(
    State(web): State<Arc<Web>>,
    Extension(identity): Extension<Principal>,
    Path(run_id): Path<String>,
    Query(query): Query<FromQuery>,
    headers: HeaderMap,
) -> Response {
    let Ok(run_id) = RunId::parse(&run_id) else {
        return refusal(StatusCode::BAD_REQUEST, "invalid run id");
    };
    let log = web.scheduler.log().clone();
    // Another's run is answered as no run at all.
    match log.get_run(&run_id).await {
        Ok(Some(run)) if identity.sees(&run) => {}
        Ok(_) => {
            return refusal(
                StatusCode::NOT_FOUND,
                "no such run; list runs with the runs_list tool",
            );
        }
        Err(error) => return refusal(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
    let resume = match headers.get(LAST_EVENT_ID) {
        None => None,
        // The event after the one received. After `Seq::MAX` there is none:
        // `Seq::MAX` is past the end of every run (stores hold seqs below
        // 2^63), so the stream ends with the run rather than wrapping to 0.
        Some(last) => match parse_seq(last.as_bytes()) {
            Some(seq) => Some(seq.saturating_add(1)),
            None => {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "Last-Event-ID {:?} is not a seq: send the id of the last event received (decimal digits), or leave it out and pass ?from=SEQ",
                        String::from_utf8_lossy(last.as_bytes())
                    ),
                );
            }
        },
    };
    let from = resume.or(query.from).unwrap_or(0);
    let subscription = log.subscribe_from(&run_id, from);
    Sse::new(run_event_stream(RunStream {
        run_id,
        log,
        subscription,
        closed: false,
    }))
    .keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(15))
            .event(Event::default().event("heartbeat").data("{}")),
    )
    .into_response()
}

/// One run's SSE stream: its events, then nothing once the client has been
/// told the stream is over.
struct RunStream {
    run_id: RunId,
    log: Arc<dyn EventLog>,
    subscription: Subscription,
    /// The last event sent ends the stream for the client: a terminal event,
    /// a read failure, or `end`.
    closed: bool,
}

fn run_event_stream(stream: RunStream) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(stream, |mut stream| async move {
        if stream.closed {
            return None;
        }
        stream.closed = true;
        let event = match stream.subscription.next().await {
            Some(Ok(event)) => event,
            Some(Err(error)) => return Some((Ok(read_failure(&error)), stream)),
            // Over with no terminal event sent: the stream started past the
            // end of a run that has ended. Saying how it ended spares the
            // client reconnecting to learn that nothing more will come.
            None => {
                let end = match stream.log.get_run(&stream.run_id).await {
                    Ok(Some(run)) => Event::default().event("end").data(
                        json!({ "run_id": run.run_id, "state": run.state, "next_seq": run.events })
                            .to_string(),
                    ),
                    Ok(None) => read_failure(&LogError::UnknownRun(stream.run_id.clone())),
                    Err(error) => read_failure(&error),
                };
                return Some((Ok(end), stream));
            }
        };
        stream.closed = event.kind.is_terminal();
        let name = match &event.kind {
            EventKind::Started(_) | EventKind::Meta(_) => "meta",
            EventKind::Partial(_) => "chunk",
            EventKind::Progress(_) => "progress",
            EventKind::Warning(_) => "warning",
            EventKind::Log(_) => "log",
            EventKind::InputRequired(_) | EventKind::InputEnded(_) => "input",
            EventKind::Artifact(_) => "artifact",
            EventKind::Completed(_) => "done",
            EventKind::Failed(_) | EventKind::Canceled(_) => "error",
        };
        let sse = Event::default()
            .event(name)
            .id(event.seq.to_string())
            .data(serde_json::to_string(&*event).unwrap_or_default());
        Some((Ok(sse), stream))
    })
}

/// An `error` event that is not a run's: the store could not be read.
fn read_failure(error: &LogError) -> Event {
    let data = json!({ "message": error.to_string() }).to_string();
    Event::default().event("error").data(data)
}
