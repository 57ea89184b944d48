//! Streamable HTTP at `/mcp` (both eras) and the run SSE API at
//! `/runs/{id}/events`, on axum.
//!
//! weir owns this layer (rather than rmcp's transport) so that every
//! notification of a tool call travels on that call's own response stream,
//! with SSE ids taken from the run log: `Last-Event-ID` resumes a dropped
//! call stream from the log, also long after the event was sent.

pub mod credentials;
pub mod headers;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use weir_core::{EventKind, RunId, Seq};
use weir_runtime::{EventLog, LogError, Subscription};

use crate::caller::Caller;
use crate::follow::{FollowError, follow_asking};
use crate::protocol::Era;
use crate::server::McpServer;
use crate::session::{Delivery, Outgoing, Session, outbound};
use crate::transport::era_of;
use credentials::Credentials;
use headers::{bearer_token, parse_authority, parse_media_type, parse_origin, parse_seq};
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response};

/// Security settings of the HTTP transport.
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// Origins allowed besides loopback ones (`http(s)://localhost:*`,
    /// `http(s)://127.0.0.0/8:*`, `http(s)://[::1]:*`), as
    /// `scheme://host[:port]`, e.g. `https://app.example`; compared as
    /// origins (case, default ports), not as text.
    pub allowed_origins: Vec<String>,
    /// Hosts allowed in `Host` besides loopback (for a non-loopback bind):
    /// `host` (any port) or `host:port`, e.g. `weir.internal:8765`.
    pub allowed_hosts: Vec<String>,
    /// When there are any, every request needs `Authorization: Bearer
    /// <token>` with one of their tokens, and is served as the caller that
    /// token names: a caller that is not an admin sees only its own runs.
    pub credentials: Credentials,
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
const LAST_EVENT_ID: &str = "last-event-id";

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
        .layer(middleware::from_fn_with_state(state.clone(), guard))
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
    check_options(&options)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    on_bound(listener.local_addr()?);
    // No Nagle: a lone small SSE event must not wait for the peer's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, router(server, options)).await
}

/// Refuses allowed hosts and origins that could never match a request, so a
/// typo is found at start rather than as a 403 later.
fn check_options(options: &HttpOptions) -> std::io::Result<()> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, message);
    for host in &options.allowed_hosts {
        parse_authority(host.as_bytes()).map_err(|error| {
            invalid(format!(
                "allowed host {host:?} is not host[:port] ({error}); write e.g. example.com or example.com:8765"
            ))
        })?;
    }
    for origin in &options.allowed_origins {
        parse_origin(origin.as_bytes()).map_err(|error| {
            invalid(format!(
                "allowed origin {origin:?} is not scheme://host[:port] ({error}); write e.g. https://app.example"
            ))
        })?;
    }
    Ok(())
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

/// Every route's gate: DNS-rebinding protection (`Host`, `Origin`) and the
/// bearer token, checked before any handler runs (SECURITY.md, "The HTTP
/// server"). The caller the token names goes to the handler as a request
/// extension.
async fn guard(State(state): State<Arc<HttpState>>, mut request: Request, next: Next) -> Response {
    match admit(&state.options, request.uri(), request.headers()) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => refusal,
    }
}

/// The caller when the request may be served; `Err` is the refusal.
// A ready response as the error keeps the gate to one early return; its size
// does not matter on this path.
#[allow(clippy::result_large_err)]
fn admit(options: &HttpOptions, uri: &Uri, headers: &HeaderMap) -> Result<Caller, Response> {
    // RFC 9112 §3.2: a request without a Host, with two, or with one that is
    // not an authority is a bad request. An absolute-form target names a
    // host too; both must pass.
    let mut hosts: Vec<&[u8]> = headers
        .get_all(header::HOST)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    if hosts.len() > 1 {
        return Err(plain_error(
            StatusCode::BAD_REQUEST,
            "more than one Host header: send exactly one",
        ));
    }
    hosts.extend(
        uri.authority()
            .map(|authority| authority.as_str().as_bytes()),
    );
    if hosts.is_empty() {
        return Err(plain_error(
            StatusCode::BAD_REQUEST,
            "no Host header: send Host with the address you connect to",
        ));
    }
    for value in hosts {
        let host = parse_authority(value).map_err(|error| {
            plain_error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "Host {:?} is not host[:port]: {error}; send the address you connect to",
                    String::from_utf8_lossy(value)
                ),
            )
        })?;
        let allowed = host.host.is_loopback()
            || options.allowed_hosts.iter().any(|allowed| {
                parse_authority(allowed.as_bytes()).is_ok_and(|allowed| {
                    allowed.host.same(&host.host)
                        && allowed.port.is_none_or(|port| host.port == Some(port))
                })
            });
        if !allowed {
            return Err(plain_error(
                StatusCode::FORBIDDEN,
                &format!(
                    "host {:?} is not allowed; start weir with --allow-host {} to permit it",
                    String::from_utf8_lossy(value),
                    host.host
                ),
            ));
        }
    }
    // Browsers send Origin on every cross-origin request (and on POSTs); a
    // client that sends none is not a page that DNS rebinding could drive.
    let mut origins = headers.get_all(header::ORIGIN).iter();
    if let Some(value) = origins.next() {
        let refused = |reason: String| {
            plain_error(
                StatusCode::FORBIDDEN,
                &format!(
                    "origin {:?} is not allowed: {reason}",
                    String::from_utf8_lossy(value.as_bytes())
                ),
            )
        };
        if origins.next().is_some() {
            return Err(refused("more than one Origin header".into()));
        }
        let origin = parse_origin(value.as_bytes()).map_err(|error| refused(error.to_string()))?;
        let allowed = origin.is_loopback()
            || options.allowed_origins.iter().any(|allowed| {
                parse_origin(allowed.as_bytes()).is_ok_and(|allowed| allowed.same(&origin))
            });
        if !allowed {
            return Err(refused(format!(
                "start weir with --allow-origin {origin} to permit it"
            )));
        }
    }
    if options.credentials.is_empty() {
        return Ok(Caller::local());
    }
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let presented = match (values.next(), values.next()) {
        (Some(value), None) => bearer_token(value.as_bytes()),
        _ => None,
    };
    match presented.and_then(|presented| options.credentials.identify(presented)) {
        Some(caller) => Ok(caller),
        None => {
            let mut refusal = plain_error(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token: send Authorization: Bearer <token>",
            );
            refusal
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            Err(refusal)
        }
    }
}

/// The session the request names. A session is its creator's: to another
/// caller it does not exist, so its streams cannot be resumed, its calls
/// cancelled or its questions answered by anyone else.
#[allow(clippy::result_large_err)]
fn session_of(
    state: &HttpState,
    caller: &Caller,
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
    Extension(caller): Extension<Caller>,
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
                    let session = Session::new(caller);
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
/// run log, asking again the questions the run waits on; weir sends
/// nothing unsolicited, so there is no standalone stream.
async fn get_mcp(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Response {
    let Some(last) = headers.get(LAST_EVENT_ID) else {
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
    let session = match session_of(&state, &caller, &headers) {
        Ok(session) => session,
        Err(refusal) => return refusal,
    };
    let Some((request_id, scope)) = session.stream(&run_id) else {
        return plain_error(
            StatusCode::NOT_FOUND,
            "no call stream with that Last-Event-ID in this session",
        );
    };
    let (outbound, outgoing) = outbound(256);
    let server = state.server.clone();
    tokio::spawn(async move {
        let asked = session.questions(&run_id);
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

/// `{run_id}.{seq}`.
fn parse_event_id(id: &[u8]) -> Option<(RunId, Seq)> {
    let (run, seq) = std::str::from_utf8(id).ok()?.rsplit_once('.')?;
    Some((RunId::parse(run).ok()?, parse_seq(seq.as_bytes())?))
}

async fn delete_mcp(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Caller>,
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

#[derive(Deserialize)]
struct FromQuery {
    from: Option<Seq>,
}

/// GET `/runs/{id}/events`: the run as plain SSE, for EventSource clients,
/// from `Last-Event-ID` + 1, else `?from=`, else 0. It ends after the run's
/// terminal event (`done` or `error`); started past the end of a run that is
/// over, it sends one `end` event, `{run_id, state, next_seq}`, instead.
async fn run_events(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Caller>,
    Path(run_id): Path<String>,
    Query(query): Query<FromQuery>,
    headers: HeaderMap,
) -> Response {
    let Ok(run_id) = RunId::parse(&run_id) else {
        return plain_error(StatusCode::BAD_REQUEST, "invalid run id");
    };
    let log = state.server.scheduler().log().clone();
    // Another caller's run is answered as no run at all.
    match log.get_run(&run_id).await {
        Ok(Some(run)) if caller.sees(&run) => {}
        Ok(_) => {
            return plain_error(
                StatusCode::NOT_FOUND,
                "no such run; list runs with the runs_list tool",
            );
        }
        Err(error) => return plain_error(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
    let resume = match headers.get(LAST_EVENT_ID) {
        None => None,
        // The event after the one received. After `Seq::MAX` there is none:
        // `Seq::MAX` is past the end of every run (stores hold seqs below
        // 2^63), so the stream ends with the run rather than wrapping to 0.
        Some(last) => match parse_seq(last.as_bytes()) {
            Some(seq) => Some(seq.saturating_add(1)),
            None => {
                return plain_error(
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
