//! Streamable HTTP at `/mcp` (both eras) and the run SSE API at
//! `/runs/{id}/events`, on axum.
//!
//! weir owns this layer (rather than rmcp's transport) so that every
//! notification of a tool call travels on that call's own response stream,
//! with SSE ids taken from the run log: `Last-Event-ID` resumes a dropped
//! call stream from the log, also long after the event was sent.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{EventKind, RunId, Seq};

use crate::follow::{FollowError, follow};
use crate::protocol::Era;
use crate::server::McpServer;
use crate::session::{Outgoing, Session};
use crate::transport::era_of;
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response};

/// Security settings of the HTTP transport.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// Origins allowed besides loopback ones (`http://localhost:*`,
    /// `http://127.0.0.1:*`, `http://[::1]:*`), e.g. `https://app.example`.
    pub allowed_origins: Vec<String>,
    /// Host names allowed in `Host` besides loopback (for a non-loopback bind).
    pub allowed_hosts: Vec<String>,
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

struct HttpState {
    server: McpServer,
    options: HttpOptions,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

const SESSION_HEADER: &str = "mcp-session-id";
/// A session unused this long is forgotten (its runs are not touched).
const SESSION_IDLE_MS: u64 = 60 * 60 * 1000;
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";

/// The axum router: `POST|GET|DELETE /mcp` and `GET /runs/{id}/events`.
pub fn router(server: McpServer, options: HttpOptions) -> Router {
    let limit = server.max_message_bytes();
    let state = Arc::new(HttpState {
        server,
        options,
        sessions: Mutex::default(),
    });
    Router::new()
        .route("/mcp", get(get_mcp).post(post_mcp).delete(delete_mcp))
        .route("/runs/{run_id}/events", get(run_events))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Binds `addr` and serves until the process ends. Calls `on_bound` with
/// the bound address (useful with port 0).
pub async fn serve_http(
    server: McpServer,
    addr: SocketAddr,
    options: HttpOptions,
    on_bound: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    on_bound(listener.local_addr()?);
    // No Nagle: a lone small SSE event must not wait for the peer's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, router(server, options)).await
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

fn is_loopback_host(host: &str) -> bool {
    // Strip a port: "localhost:8080", "[::1]:80", "127.0.0.1".
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

/// DNS-rebinding protection and the bearer token; `Err` is the refusal.
// A ready response as the error keeps handlers to one `?`-style early return;
// its size does not matter on this path.
#[allow(clippy::result_large_err)]
fn guard(state: &HttpState, headers: &HeaderMap) -> Result<(), Response> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(host) = text(header::HOST.as_str())
        && !is_loopback_host(host)
        && !state
            .options
            .allowed_hosts
            .iter()
            .any(|allowed| allowed == host)
    {
        return Err(plain_error(
            StatusCode::FORBIDDEN,
            &format!("host {host:?} is not allowed; start weir with --allow-host to permit it"),
        ));
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        let allowed =
            is_loopback_host(host) || state.options.allowed_origins.iter().any(|o| o == origin);
        if !allowed {
            return Err(plain_error(
                StatusCode::FORBIDDEN,
                &format!(
                    "origin {origin:?} is not allowed; start weir with --allow-origin to permit it"
                ),
            ));
        }
    }
    if let Some(token) = &state.options.token {
        let expected = format!("Bearer {token}");
        if text(header::AUTHORIZATION.as_str()) != Some(expected.as_str()) {
            let mut refusal = plain_error(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token: send Authorization: Bearer <token>",
            );
            refusal
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Err(refusal);
        }
    }
    Ok(())
}

#[allow(clippy::result_large_err)]
fn session_of(state: &HttpState, headers: &HeaderMap) -> Result<Arc<Session>, Response> {
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
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refusal) = guard(&state, &headers) {
        return refusal;
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !content_type.starts_with("application/json") {
        return plain_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
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
                (Era::Stateless, _) => Session::new(),
                (Era::Session, "initialize") => {
                    let session = Session::new();
                    let mut sessions = state.sessions.lock().expect("sessions lock");
                    sessions.retain(|_, old| old.idle_ms() < SESSION_IDLE_MS);
                    sessions.insert(session.id.clone(), session.clone());
                    session
                }
                (Era::Session, _) => match session_of(&state, &headers) {
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
                let (sink, _drain) = mpsc::channel(16);
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
            if let Ok(session) = session_of(&state, &headers) {
                state.server.notification(&session, &method, &params);
            }
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Response { id, outcome } => {
            if let Ok(session) = session_of(&state, &headers) {
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
    let (outbound, outgoing) = mpsc::channel::<Outgoing>(256);
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
fn sse_response(outgoing: mpsc::Receiver<Outgoing>) -> Response {
    let frames = futures_util::stream::unfold(outgoing, |mut outgoing| async move {
        let mut batch = Vec::new();
        if outgoing.recv_many(&mut batch, 256).await == 0 {
            return None;
        }
        let size = batch.iter().map(|o| o.message.len() + 48).sum();
        let mut frame = String::with_capacity(size);
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
        Some((Ok::<_, Infallible>(Bytes::from(frame)), outgoing))
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

/// GET `/mcp`: with `Last-Event-ID` from a call stream, resumes it from the
/// run log; weir sends nothing unsolicited, so there is no standalone stream.
async fn get_mcp(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = guard(&state, &headers) {
        return refusal;
    }
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let Some((run_id, seq)) = last.and_then(parse_event_id) else {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "POST, DELETE")],
        )
            .into_response();
    };
    let session = match session_of(&state, &headers) {
        Ok(session) => session,
        Err(refusal) => return refusal,
    };
    let Some((request_id, scope)) = session.stream(&run_id) else {
        return plain_error(
            StatusCode::NOT_FOUND,
            "no call stream with that Last-Event-ID in this session",
        );
    };
    let (outbound, outgoing) = mpsc::channel::<Outgoing>(256);
    let server = state.server.clone();
    tokio::spawn(async move {
        let followed = follow(&server.state, &run_id, Some(seq), scope, &outbound, None).await;
        let message = match followed {
            Ok(result) => weir_mcp_wire::jsonrpc::response(&request_id, result),
            Err(FollowError::Rpc(error)) => error_response(&request_id, &error),
            Err(FollowError::ClientGone) => return,
        };
        let _ = outbound.send(Outgoing::message(message)).await;
    });
    sse_response(outgoing)
}

/// `{run_id}.{seq}`.
fn parse_event_id(id: &str) -> Option<(RunId, Seq)> {
    let (run, seq) = id.rsplit_once('.')?;
    Some((RunId::parse(run).ok()?, seq.parse().ok()?))
}

async fn delete_mcp(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Err(refusal) = guard(&state, &headers) {
        return refusal;
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return plain_error(StatusCode::BAD_REQUEST, "missing Mcp-Session-Id header");
    };
    match state.sessions.lock().expect("sessions lock").remove(id) {
        Some(_) => StatusCode::OK.into_response(),
        None => plain_error(StatusCode::NOT_FOUND, "session not found"),
    }
}

#[derive(Deserialize)]
struct FromQuery {
    from: Option<Seq>,
}

/// GET `/runs/{id}/events`: the run as plain SSE, for EventSource clients.
async fn run_events(
    State(state): State<Arc<HttpState>>,
    Path(run_id): Path<String>,
    Query(query): Query<FromQuery>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = guard(&state, &headers) {
        return refusal;
    }
    let Ok(run_id) = RunId::parse(&run_id) else {
        return plain_error(StatusCode::BAD_REQUEST, "invalid run id");
    };
    let log = state.server.scheduler().log().clone();
    match log.get_run(&run_id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return plain_error(
                StatusCode::NOT_FOUND,
                "no such run; list runs with the runs_list tool",
            );
        }
        Err(error) => return plain_error(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|id| id.parse::<Seq>().ok())
        .map(|seq| seq + 1);
    let from = resume.or(query.from).unwrap_or(0);
    let subscription = log.subscribe_from(&run_id, from);
    Sse::new(run_event_stream(subscription))
        .keep_alive(
            KeepAlive::new()
                .interval(Duration::from_secs(15))
                .event(Event::default().event("heartbeat").data("{}")),
        )
        .into_response()
}

fn run_event_stream(
    subscription: weir_runtime::Subscription,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(subscription, |mut subscription| async move {
        let event = match subscription.next().await? {
            Ok(event) => event,
            Err(error) => {
                let data = json!({ "message": error.to_string() }).to_string();
                return Some((Ok(Event::default().event("error").data(data)), subscription));
            }
        };
        let name = match &event.kind {
            EventKind::Started(_) | EventKind::Meta(_) => "meta",
            EventKind::Partial(_) => "chunk",
            EventKind::Progress(_) => "progress",
            EventKind::Warning(_) => "warning",
            EventKind::Log(_) => "log",
            EventKind::Artifact(_) => "artifact",
            EventKind::Completed(_) => "done",
            EventKind::Failed(_) | EventKind::Canceled(_) => "error",
        };
        let sse = Event::default()
            .event(name)
            .id(event.seq.to_string())
            .data(serde_json::to_string(&*event).unwrap_or_default());
        Some((Ok(sse), subscription))
    })
}
