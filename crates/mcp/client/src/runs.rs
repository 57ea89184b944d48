//! weir's plain SSE API, client side: `GET /runs/{id}/events` followed to
//! the run's terminal event, reconnecting with `Last-Event-ID` (the event's
//! seq) when the connection drops, so no event is lost or repeated.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use tokio::sync::mpsc;
use weir_core::{RunEvent, RunState, Seq};

use crate::connection::{base_url, check_status, http_client, root_cause};
use crate::error::ClientError;
use crate::retry::backoff;
use crate::sse;

/// Consecutive failed reconnections before giving up.
const RECONNECTS: u32 = 10;
/// The wait before the first reconnection, doubling up to…
const FIRST_RECONNECT: Duration = Duration::from_millis(100);
/// …this (100 ms doubled five times).
const LONGEST_RECONNECT: Duration = Duration::from_millis(3200);

/// A run's events, from a seq to its terminal event; see [`follow_run`].
pub struct RunEvents {
    events: mpsc::Receiver<Item>,
    reader: tokio::task::JoinHandle<()>,
    ended: Option<RunState>,
}

/// What the reader hands over.
enum Item {
    Event(Result<RunEvent, ClientError>),
    /// The run had ended before the first seq asked for: no event will come.
    Ended(RunState),
}

impl RunEvents {
    /// The next event; `None` after the terminal event (or an error), or at
    /// once when the run ended before `from` (then see [`RunEvents::ended`]).
    pub async fn next(&mut self) -> Option<Result<RunEvent, ClientError>> {
        std::future::poll_fn(|cx| self.poll_item(cx)).await
    }

    /// How the run ended, when it had ended before the seq the stream was
    /// to start from, so that no event, not even the terminal one, came.
    pub fn ended(&self) -> Option<RunState> {
        self.ended
    }

    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<RunEvent, ClientError>>> {
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(Item::Event(event))) => Poll::Ready(Some(event)),
            Poll::Ready(Some(Item::Ended(state))) => {
                self.ended = Some(state);
                Poll::Ready(None)
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Stream for RunEvents {
    type Item = Result<RunEvent, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_item(cx)
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Follows run `run_id` on the weir server at `url` (its MCP endpoint, e.g.
/// `http://127.0.0.1:8765/mcp`, or its root), from event `from` on.
pub fn follow_run(url: &str, token: Option<String>, run_id: &str, from: Seq) -> RunEvents {
    let endpoint = format!("{}/runs/{run_id}/events", base_url(url));
    let (sender, events) = mpsc::channel(256);
    let reader = tokio::spawn(async move {
        if let Err(error) = read(&endpoint, token.as_deref(), from, &sender).await {
            let _ = sender.send(Item::Event(Err(error))).await;
        }
    });
    RunEvents {
        events,
        reader,
        ended: None,
    }
}

/// An SSE `error` event that is not a run event: the server failed to read.
#[derive(Deserialize)]
struct ReadFailure {
    message: String,
}

/// The SSE `end` event: the stream started past the end of a run that is
/// over, so it ends with no run event at all.
#[derive(Deserialize)]
struct End {
    state: RunState,
}

async fn read(
    endpoint: &str,
    token: Option<&str>,
    from: Seq,
    sender: &mpsc::Sender<Item>,
) -> Result<(), ClientError> {
    let http = http_client()?;
    let mut next: Seq = from;
    let mut failures = 0u32;
    let mut last_problem = String::new();
    loop {
        if failures > 0 {
            if failures > RECONNECTS {
                return Err(ClientError::StreamLost {
                    reason: format!(
                        "{last_problem}; {RECONNECTS} attempts to reconnect to {endpoint} failed"
                    ),
                });
            }
            tokio::time::sleep(backoff(failures, FIRST_RECONNECT, LONGEST_RECONNECT)).await;
        }
        let mut request = http
            .get(format!("{endpoint}?from={next}"))
            .header(ACCEPT, "text/event-stream");
        if next > 0 {
            request = request.header("last-event-id", (next - 1).to_string());
        }
        if let Some(token) = token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let response = match request.send().await {
            Ok(response) => check_status(endpoint, response).await?,
            Err(error) => {
                last_problem = root_cause(&error);
                if next == from && failures == 0 {
                    return Err(ClientError::Unreachable {
                        url: endpoint.to_owned(),
                        reason: last_problem,
                    });
                }
                failures += 1;
                continue;
            }
        };
        let mut body = response.bytes_stream();
        let mut parser = sse::parser();
        loop {
            let chunk = match body.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(error)) => {
                    last_problem = root_cause(&error);
                    break;
                }
                None => {
                    last_problem = "the server ended the stream before the run ended".into();
                    break;
                }
            };
            for event in parser.push(&chunk).map_err(sse::overflowed)? {
                if event.event.as_deref() == Some("heartbeat") || event.data.is_empty() {
                    continue;
                }
                if event.event.as_deref() == Some("end") {
                    let end = serde_json::from_str::<End>(&event.data).map_err(|error| {
                        ClientError::Protocol(format!(
                            "an end event that does not parse ({error}): {}",
                            event.data.chars().take(200).collect::<String>()
                        ))
                    })?;
                    let _ = sender.send(Item::Ended(end.state)).await;
                    return Ok(());
                }
                let run_event = match serde_json::from_str::<RunEvent>(&event.data) {
                    Ok(run_event) => run_event,
                    Err(error) => {
                        return Err(match serde_json::from_str::<ReadFailure>(&event.data) {
                            Ok(failure) => ClientError::StreamLost {
                                reason: format!(
                                    "the server could not read the run: {}",
                                    failure.message
                                ),
                            },
                            Err(_) => ClientError::Protocol(format!(
                                "a run event that does not parse ({error}): {}",
                                event.data.chars().take(200).collect::<String>()
                            )),
                        });
                    }
                };
                if run_event.seq < next {
                    continue; // already delivered before a reconnect
                }
                // No event can follow seq `u64::MAX`: it is the last one,
                // whatever it is, rather than a wrap back to 0.
                let last = run_event.kind.is_terminal() || run_event.seq == Seq::MAX;
                next = run_event.seq.saturating_add(1);
                failures = 0;
                if sender.send(Item::Event(Ok(run_event))).await.is_err() || last {
                    return Ok(());
                }
            }
        }
        failures += 1;
    }
}
