//! Streamable HTTP at `/mcp` (both eras), on axum: [`routes`], which the
//! binary composes with weir-web's (`/runs/{id}/events`, the dashboard and
//! its API) behind weir-web's one guard (`Host`, `Origin`, the bearer
//! token), the guard's [`Principal`] of each request `/mcp`'s caller.
//!
//! weir owns this layer (rather than rmcp's transport) so that every
//! notification of a tool call travels on that call's own response stream,
//! with SSE ids taken from the run log: `Last-Event-ID` resumes a dropped
//! call stream from the log, also long after the event was sent.

// The header parsers live in weir-core, shared with weir-web's guard;
// their old path stays, for the tests and the fuzz targets.
pub use weir_core::headers;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;
use weir_core::{RunId, Seq};
use weir_runtime::LogError;
use weir_runtime::Principal;

use crate::follow::{FollowError, follow_asking};
use crate::protocol::Era;
use crate::server::McpServer;
use crate::session::{Delivery, Outgoing, Session, StreamRecord, outbound};
use crate::transport::burst::Connections;
use crate::transport::era_of;
use headers::{parse_media_type, parse_seq};
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response};

struct HttpState {
    server: McpServer,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

const SESSION_HEADER: &str = "mcp-session-id";
/// A session unused this long is forgotten (its runs are not touched).
const SESSION_IDLE_MS: u64 = 60 * 60 * 1000;
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const LAST_EVENT_ID: &str = "last-event-id";

/// `POST|GET|DELETE /mcp`, each request's [`Principal`] taken from its
/// extensions, where whatever admitted the request put it (a request
/// without one is refused, never served as another's), and a body at most
/// [`McpServer::max_message_bytes`].
pub fn routes(server: McpServer) -> Router {
    let limit = server.max_message_bytes();
    let state = Arc::new(HttpState {
        server,
        sessions: Mutex::default(),
    });
    Router::new()
        .route("/mcp", get(get_mcp).post(post_mcp).delete(delete_mcp))
        .with_state(state)
        .layer(DefaultBodyLimit::max(limit))
}

/// Binds `addr` and serves `app` until the process ends. Calls `on_bound`
/// with the bound address (useful with port 0).
pub async fn serve(
    app: Router,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    on_bound(listener.local_addr()?);
    axum::serve(Connections(listener), app).await
}

fn json_error(status: StatusCode, id: &Value, error: &RpcError) -> Response {
    (status, axum::Json(error_response(id, error))).into_response()
}

fn plain_error(status: StatusCode, message: &str) -> Response {
    json_error(
        status,
        &Value::Null,
        &RpcError::new(code::INVALID_REQUEST, message),
    )
}

/// The session the request names. A session is its creator's: to another
/// caller it does not exist, so its streams cannot be resumed, its calls
/// cancelled or its questions answered by anyone else.
#[allow(clippy::result_large_err)]
fn session_of(
    state: &HttpState,
    caller: &Principal,
    headers: &HeaderMap,
) -> Result<Arc<Session>, Response> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(plain_error(
            StatusCode::BAD_REQUEST,
            "missing Mcp-Session-Id header: send initialize first, or use protocol version 2026-07-28 (stateless)",
        ));
    };
    let session = state
        .sessions
        .lock()
        .expect("sessions lock")
        .get(id)
        .filter(|session| session.caller == *caller)
        .cloned();
    session.inspect(|session| session.touch()).ok_or_else(|| {
        json_error(
            StatusCode::NOT_FOUND,
            &Value::Null,
            &RpcError::new(
                code::SESSION_NOT_FOUND,
                "session not found (ended or never existed): initialize a new one",
            ),
        )
    })
}

async fn post_mcp(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Principal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // The whole media type, parameters included: `application/jsonx` is
    // another type, and two Content-Type headers are no type at all.
    let mut content_types = headers.get_all(header::CONTENT_TYPE).iter();
    let json = match (content_types.next(), content_types.next()) {
        (Some(value), None) => parse_media_type(value.as_bytes()).is_ok_and(|m| m.is_json()),
        _ => false,
    };
    if !json {
        return plain_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json (charset utf-8, if one is named)",
        );
    }
    let message = match Incoming::parse(&body) {
        Ok(message) => message,
        Err((id, error)) => return json_error(StatusCode::BAD_REQUEST, &id, &error),
    };
    let version_header = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    match message {
        Incoming::Request { id, method, params } => {
            let era = match era_of(&params, version_header) {
                Ok(era) => era,
                Err(error) => return json_error(StatusCode::BAD_REQUEST, &id, &error),
            };
            if era == Era::Stateless
                && let Some(named) = headers.get(METHOD_HEADER).and_then(|v| v.to_str().ok())
                && named != method
            {
                let error = RpcError::new(
                    code::HEADER_MISMATCH,
                    format!("Mcp-Method header {named:?} does not match method {method:?}"),
                );
                return json_error(StatusCode::BAD_REQUEST, &id, &error);
            }
            let session = match (era, method.as_str()) {
                (Era::Stateless, _) => Session::new(caller),
                (Era::Session, "initialize") => {
                    let session = Session::over_http(caller);
                    let mut sessions = state.sessions.lock().expect("sessions lock");
                    sessions.retain(|_, old| old.idle_ms() < SESSION_IDLE_MS);
                    sessions.insert(session.id.clone(), session.clone());
                    session
                }
                (Era::Session, _) => match session_of(&state, &caller, &headers) {
                    Ok(session) => session,
                    Err(refusal) => return refusal,
                },
            };
            let streams = matches!(method.as_str(), "tools/call" | "tasks/result");
            let mut response = if streams {
                respond_streaming(
                    state.server.clone(),
                    session.clone(),
                    era,
                    id,
                    method,
                    params,
                )
            } else {
                let (sink, _drain) = outbound(16);
                match state
                    .server
                    .request(&session, era, &id, &method, params, &sink)
                    .await
                {
                    // 2026-07-28: an unknown method is also an HTTP 404.
                    Some(message)
                        if era == Era::Stateless
                            && message["error"]["code"] == code::METHOD_NOT_FOUND =>
                    {
                        (StatusCode::NOT_FOUND, axum::Json(message)).into_response()
                    }
                    Some(message) => axum::Json(message).into_response(),
                    None => StatusCode::ACCEPTED.into_response(),
                }
            };
            if era == Era::Session
                && let Ok(value) = HeaderValue::from_str(&session.id)
            {
                response.headers_mut().insert(SESSION_HEADER, value);
            }
            response
        }
        Incoming::Notification { method, params } => {
            if let Ok(session) = session_of(&state, &caller, &headers) {
                state.server.notification(&session, &method, &params);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Response { id, outcome } => {
            if let Ok(session) = session_of(&state, &caller, &headers) {
                session.resolve(&id, outcome);
            }
            StatusCode::ACCEPTED.into_response()
        }
    }
}

/// Answers a request on an SSE stream: its notifications as they happen,
/// then its response.
fn respond_streaming(
    server: McpServer,
    session: Arc<Session>,
    era: Era,
    id: Value,
    method: String,
    params: Value,
) -> Response {
    let (outbound, outgoing) = outbound(256);
    tokio::spawn(async move {
        let reply = server
            .request(&session, era, &id, &method, params, &outbound)
            .await;
        if let Some(message) = reply {
            let _ = outbound.send(Outgoing::message(message)).await;
        }
    });
    sse_response(outgoing)
}

/// The request's messages as an SSE body. Whatever is queued goes out as
/// one frame: under load that is one chunk (and one write) per batch rather
/// than per message.
fn sse_response(outgoing: Delivery) -> Response {
    let frames = futures_util::stream::unfold(outgoing, |mut outgoing| async move {
        let mut batch = Vec::new();
        if outgoing.recv_many(&mut batch, 256).await == 0 {
            return None;
        }
        Some((Ok::<_, Infallible>(Bytes::from(sse_frame(batch))), outgoing))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        axum::body::Body::from_stream(frames),
    )
        .into_response()
}

/// `batch` as SSE events, in a buffer of exactly their size: a frame of 256
/// items of 1 KB that outgrew its guess was copied to a buffer twice its
/// size, fresh pages from the kernel (a tenth of the server's CPU streaming
/// 1 KB items over HTTP, `perf`).
fn sse_frame(batch: Vec<Outgoing>) -> String {
    let mut frame = String::with_capacity(batch.iter().map(sse_len).sum());
    for Outgoing { event_id, message } in batch {
        use std::fmt::Write;
        if let Some(id) = event_id {
            let _ = writeln!(frame, "id: {id}");
        }
        // One line: compact JSON escapes every newline.
        frame.push_str("data: ");
        frame.push_str(&message);
        frame.push_str("\n\n");
    }
    frame
}

/// The bytes `outgoing` takes in an SSE body as [`sse_frame`] writes it.
fn sse_len(outgoing: &Outgoing) -> usize {
    let id = outgoing.event_id.as_ref().map_or(0, |id| {
        "id: ".len() + id.run_id.len() + ".".len() + decimal_digits(id.seq) + "\n".len()
    });
    id + "data: ".len() + outgoing.message.len() + "\n\n".len()
}

fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// GET `/mcp`: with `Last-Event-ID` from a call stream, resumes it from the
/// run log, asking again the questions the run waits on. Without it, a
/// session's standalone stream when the tool list may change
/// ([`ServerConfig::tools_list_changes`](crate::ServerConfig)); otherwise
/// weir sends nothing unsolicited, and there is none.
///
/// Any node sharing the store resumes it: one that does not hold the
/// session finds the call's [`StreamRecord`] with its run, and serves the
/// stream if the record names the session the request does and the run is
/// the caller's own. It cannot ask the run's questions (the session's
/// node keeps them, and takes the answers), so its stream carries the
/// run's notifications and its response only.
async fn get_mcp(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Principal>,
    headers: HeaderMap,
) -> Response {
    let Some(last) = headers.get(LAST_EVENT_ID) else {
        if state.server.state.config.tools_list_changes {
            return match session_of(&state, &caller, &headers) {
                Ok(_) => standalone_stream(&state.server),
                Err(refusal) => refusal,
            };
        }
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "POST, DELETE")],
        )
            .into_response();
    };
    let Some((run_id, seq)) = parse_event_id(last.as_bytes()) else {
        return plain_error(
            StatusCode::BAD_REQUEST,
            &format!(
                "Last-Event-ID {:?} is not an event id of this server (RUN_ID.SEQ): send the id of the last event received",
                String::from_utf8_lossy(last.as_bytes())
            ),
        );
    };
    let local = session_of(&state, &caller, &headers);
    let stream = match &local {
        Ok(session) => session
            .stream(&run_id)
            .map(|(request_id, scope)| (request_id, scope, Some(session.clone()))),
        Err(_) => None,
    };
    let stream = match stream {
        Some(stream) => Some(stream),
        None => match recorded_stream(&state, &caller, &headers, &run_id).await {
            Ok(recorded) => recorded.map(|(request_id, scope)| (request_id, scope, None)),
            // Not a 404: the client must not give up on its session.
            Err(error) => {
                return plain_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("could not look up the call stream to resume: {error}; try again"),
                );
            }
        },
    };
    let Some((request_id, scope, session)) = stream else {
        return match local {
            Ok(_) => plain_error(
                StatusCode::NOT_FOUND,
                "no call stream with that Last-Event-ID in this session",
            ),
            Err(refusal) => refusal,
        };
    };
    let (outbound, outgoing) = outbound(256);
    let server = state.server.clone();
    tokio::spawn(async move {
        // Questions only where the session is: see above.
        let asked = session.and_then(|session| session.questions(&run_id));
        let followed =
            follow_asking(&server.state, &run_id, Some(seq), scope, &outbound, asked).await;
        let message = match followed {
            Ok(result) => weir_mcp_wire::jsonrpc::response(&request_id, result),
            Err(FollowError::Rpc(error)) => error_response(&request_id, &error),
            Err(FollowError::ClientGone) => return,
        };
        let _ = outbound.send(Outgoing::message(message)).await;
    });
    sse_response(outgoing)
}

/// A session's standalone stream: what the server announces unasked
/// (`notifications/tools/list_changed`), while the client keeps it open.
fn standalone_stream(server: &McpServer) -> Response {
    let (outbound, outgoing) = outbound(16);
    let mut announcements = server.announcements();
    tokio::spawn(async move {
        loop {
            let message = match announcements.recv().await {
                Ok(message) => message,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            // The client closed the stream: stop.
            if outbound.send(Outgoing::message(message)).await.is_err() {
                break;
            }
        }
    });
    sse_response(outgoing)
}

/// The request id and scope of run `run_id`'s call stream, from the record
/// its run keeps, when that stream is this request's to resume: the record
/// names the session in the request's `Mcp-Session-Id`, and the run is
/// the caller's own (the credential that started it; with no credentials,
/// as every run, no one's). An admin may see other callers' runs, but not
/// resume their sessions' streams. `None` otherwise, whatever the reason,
/// so that a refusal tells nothing about another's run; an error only when
/// the store could not be read.
async fn recorded_stream(
    state: &HttpState,
    caller: &Principal,
    headers: &HeaderMap,
    run_id: &RunId,
) -> Result<Option<(Value, crate::protocol::Scope)>, LogError> {
    let Some(session_id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    let log = state.server.scheduler().log();
    let Some(run) = log.get_run(run_id).await? else {
        return Ok(None);
    };
    if run.owner != caller.owner() || !caller.sees(&run) {
        return Ok(None);
    }
    let record = match log.resume_record(run_id).await {
        Ok(Some(text)) => StreamRecord::parse(&text),
        // Deleted (retention) since it was read just now.
        Ok(None) | Err(LogError::UnknownRun(_)) => None,
        Err(error) => return Err(error),
    };
    Ok(record
        .filter(|record| record.session == session_id && record.scope.era == Era::Session)
        .map(|record| (record.request_id, record.scope)))
}

/// `{run_id}.{seq}`.
fn parse_event_id(id: &[u8]) -> Option<(RunId, Seq)> {
    let (run, seq) = std::str::from_utf8(id).ok()?.rsplit_once('.')?;
    Some((RunId::parse(run).ok()?, parse_seq(seq.as_bytes())?))
}

async fn delete_mcp(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Principal>,
    headers: HeaderMap,
) -> Response {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain_error(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id header");
    };
    let removed = {
        let mut sessions = state.sessions.lock().expect("sessions lock");
        match sessions.get(id) {
            Some(session) if session.caller == caller => sessions.remove(id),
            _ => None,
        }
    };
    match removed {
        Some(session) => {
            session.end();
            StatusCode::OK.into_response()
        }
        None => plain_error(StatusCode::NOT_FOUND, "session not found"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Outgoing, sse_frame};
    use crate::session::EventId;

    /// The frame's buffer is sized exactly: never grown (and so copied)
    /// while it is written, whatever the ids' lengths.
    #[test]
    fn an_sse_frame_fills_exactly_the_buffer_it_starts_with() {
        let run_id: Arc<str> = Arc::from("019ac1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b");
        let batch: Vec<Outgoing> = [None, Some(0), Some(10), Some(123_456), Some(u64::MAX)]
            .into_iter()
            .map(|seq| Outgoing {
                event_id: seq.map(|seq| EventId {
                    run_id: run_id.clone(),
                    seq,
                }),
                message: "x".repeat(1_000),
            })
            .collect();
        let frame = sse_frame(batch);
        assert_eq!(frame.len(), frame.capacity());
        assert!(frame.starts_with(&format!(
            "data: {}\n\nid: {run_id}.0\ndata: x",
            "x".repeat(1_000)
        )));
        assert!(frame.contains(&format!("id: {run_id}.{}\n", u64::MAX)));
    }
}
