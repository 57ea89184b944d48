//! Streamable HTTP, client side: one POST per message; a request's answer
//! is JSON or an SSE stream of its notifications and then its response.
//!
//! In a 2025-11-25 session a dropped stream is resumed with `GET` and
//! `Last-Event-ID` (waiting as long as the server's `retry:` asks, backing
//! off on failures) until the response arrives. In 2026-07-28 there is no
//! resume: the server cancels a call whose stream closes, which is also how
//! this client cancels one (it drops the stream). What a server says unasked
//! comes on the session's own stream (`listen.rs`).

mod listen;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use weir_mcp_wire::revision::meta_key;

use super::exchange::{Delivery, Exchange, Message, Parsed, answer_server_request, parse};
use crate::MAX_MESSAGE_BYTES;
use crate::error::ClientError;
use crate::retry::backoff;
use crate::sse;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Consecutive failed attempts to resume a dropped stream before giving up.
const RESUME_ATTEMPTS: u32 = 10;
/// The wait before the first attempt to resume, doubling up to…
const FIRST_RESUME: Duration = Duration::from_millis(50);
/// …this.
const LONGEST_RESUME: Duration = Duration::from_secs(2);

/// An HTTP client for MCP and weir's SSE endpoints: connect timeout, no
/// overall timeout (streams last as long as their calls).
pub(crate) fn http_client() -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .build()
        .map_err(|error| ClientError::Unreachable {
            url: String::new(),
            reason: format!("could not set up HTTP: {}", root_cause(&error)),
        })
}

/// The server's root, from its MCP endpoint URL (`…/mcp` → `…`).
pub(crate) fn base_url(url: &str) -> &str {
    let url = url.trim_end_matches('/');
    url.strip_suffix("/mcp").unwrap_or(url)
}

/// The innermost cause of an error: "Connection refused (os error 111)"
/// rather than "error sending request".
pub(crate) fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Aborts a task when dropped (which drops the response body it reads, and
/// so closes its connection).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A Streamable HTTP endpoint.
pub(crate) struct HttpConnection {
    inner: Arc<Inner>,
    /// Reads the session's own stream once someone asks what it says
    /// ([`HttpConnection::tools_changed`]); ends with the connection.
    listener: Mutex<Option<AbortOnDrop>>,
}

struct Inner {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    /// Sent with every request (`ClientOptions::headers`).
    headers: Vec<(HeaderName, HeaderValue)>,
    state: Mutex<State>,
    /// Counts the server's `notifications/tools/list_changed`, whichever
    /// stream they come on.
    tools_changed: watch::Sender<u64>,
}

#[derive(Clone, Default)]
struct State {
    session_id: Option<String>,
    /// The negotiated session-era version, sent as a header.
    version: Option<String>,
    stateless: bool,
}

impl HttpConnection {
    pub(crate) fn new(
        url: String,
        token: Option<String>,
        headers: Vec<(String, String)>,
    ) -> Result<HttpConnection, ClientError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ClientError::Unreachable {
                url,
                reason: "not an http:// or https:// URL".into(),
            });
        }
        let mut parsed = Vec::new();
        for (name, value) in headers {
            match (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value),
            ) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    parsed.push((name, value));
                }
                _ => {
                    return Err(ClientError::Unreachable {
                        url,
                        reason: format!("header {name:?} is not a valid HTTP header"),
                    });
                }
            }
        }
        Ok(HttpConnection {
            inner: Arc::new(Inner {
                http: http_client()?,
                url,
                token,
                headers: parsed,
                state: Mutex::default(),
                tools_changed: watch::Sender::new(0),
            }),
            listener: Mutex::default(),
        })
    }

    /// A 2025-11-25 session: every request names `version` in a header.
    pub(crate) fn settle_session(&self, version: &str) {
        self.inner.state().version = Some(version.to_owned());
    }

    /// 2026-07-28: requests carry their revision; streams are not resumed.
    pub(crate) fn settle_stateless(&self) {
        self.inner.state().stateless = true;
    }

    pub(crate) async fn request(&self, message: Value) -> Result<Exchange, ClientError> {
        let response = self.inner.post(&message).await?;
        if message["method"] == "initialize"
            && let Some(session) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            self.inner.state().session_id = Some(session.to_owned());
        }
        let content_type = content_type(&response);
        if content_type.starts_with("text/event-stream") {
            let (sender, messages) = mpsc::channel(256);
            let resumable = !self.inner.state().stateless;
            let reader = tokio::spawn(read_stream(
                self.inner.clone(),
                response,
                message["id"].clone(),
                sender,
                resumable,
            ));
            return Ok(Exchange::new(messages, AbortOnDrop(reader)));
        }
        if !content_type.starts_with("application/json") {
            return Err(ClientError::Protocol(format!(
                "{} answered a request with HTTP {} and content type {content_type:?}, neither JSON nor an SSE stream",
                self.inner.url,
                response.status().as_u16()
            )));
        }
        let body = body_up_to(response, MAX_MESSAGE_BYTES)
            .await
            .map_err(|error| self.inner.unreachable(&error))?
            .ok_or(ClientError::MessageTooLarge {
                limit: MAX_MESSAGE_BYTES,
            })?;
        let answer = match parse(&body) {
            Some(Parsed::Message(message)) => Ok(message),
            _ => Err(answer_refused(&body)),
        };
        Ok(Exchange::answered(answer))
    }

    pub(crate) async fn notify(&self, message: Value) -> Result<(), ClientError> {
        self.inner.post(&message).await.map(drop)
    }

    /// Counts the server's `notifications/tools/list_changed`: those on a
    /// request's stream, and those it sends unasked on the session's own
    /// stream, opened here at the first look from within a tokio runtime
    /// (outside one, only the former). `None` in 2026-07-28, where a server
    /// has no stream for what it says unasked.
    pub(crate) fn tools_changed(&self) -> Option<watch::Receiver<u64>> {
        if self.inner.state().stateless {
            return None;
        }
        let mut listener = self.listener.lock().unwrap_or_else(PoisonError::into_inner);
        if listener.is_none()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let listening = runtime.spawn(listen::listen(self.inner.clone()));
            *listener = Some(AbortOnDrop(listening));
        }
        Some(self.inner.tools_changed.subscribe())
    }

    /// Ends the session (2025-11-25); servers may refuse, which is fine.
    pub(crate) async fn close(&self) {
        let session = self.inner.state().session_id.clone();
        if let Some(session) = session {
            let request = self
                .inner
                .decorate(self.inner.http.delete(&self.inner.url), None)
                .header(SESSION_HEADER, session);
            let _ = tokio::time::timeout(Duration::from_secs(2), request.send()).await;
        }
    }
}

/// Why a JSON answer is not one: not JSON, or not a JSON-RPC answer.
fn answer_refused(body: &[u8]) -> ClientError {
    match serde_json::from_slice::<Value>(body) {
        Err(error) => ClientError::Protocol(format!("its answer is not JSON: {error}")),
        Ok(value) => ClientError::Protocol(format!(
            "its answer is not a JSON-RPC response: {}",
            crate::events::clip(&value)
        )),
    }
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds the token, and the session or the 2026-07-28 headers that
    /// `message` calls for.
    fn decorate(
        &self,
        mut request: reqwest::RequestBuilder,
        message: Option<&Value>,
    ) -> reqwest::RequestBuilder {
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        let named = message.and_then(|m| {
            m.pointer("/params/_meta")?
                .get(meta_key::PROTOCOL_VERSION)?
                .as_str()
        });
        if let (Some(version), Some(message)) = (named, message) {
            request = request.header(VERSION_HEADER, version);
            if let Some(method) = message["method"].as_str() {
                request = request.header("mcp-method", header_text(method));
            }
            let params = &message["params"];
            let name = ["name", "uri", "taskId"]
                .iter()
                .find_map(|key| params.get(*key).and_then(Value::as_str));
            if let Some(name) = name {
                request = request.header("mcp-name", header_text(name));
            }
            return request;
        }
        let state = self.state().clone();
        if let Some(session) = state.session_id {
            request = request.header(SESSION_HEADER, session);
        }
        if let Some(version) = state.version {
            request = request.header(VERSION_HEADER, version);
        }
        request
    }

    /// POSTs one message.
    async fn post(&self, message: &Value) -> Result<reqwest::Response, ClientError> {
        let request = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(message.to_string());
        self.send(request, Some(message)).await
    }

    /// GETs the rest of a dropped stream.
    async fn resume(&self, last_event_id: &str) -> Result<reqwest::Response, ClientError> {
        let request = self
            .http
            .get(&self.url)
            .header(ACCEPT, "text/event-stream")
            .header("last-event-id", last_event_id);
        self.send(request, None).await
    }

    /// Sends `request`, decorated for `message`; no connection or an HTTP
    /// error status is an error.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        message: Option<&Value>,
    ) -> Result<reqwest::Response, ClientError> {
        let response = self
            .decorate(request, message)
            .send()
            .await
            .map_err(|error| self.unreachable(&error))?;
        check_status(&self.url, response).await
    }

    /// Answers what the server asks on a stream, in a task of its own (the
    /// stream goes on meanwhile).
    fn answer(self: &Arc<Self>, id: Value, method: String) {
        let inner = self.clone();
        tokio::spawn(async move {
            let _ = inner.post(&answer_server_request(&id, &method)).await;
        });
    }

    /// Notes what a message tells the connection itself: a changed tool
    /// list.
    fn note(&self, message: &Message) {
        if let Message::Notification { method, .. } = message
            && method == "notifications/tools/list_changed"
        {
            self.tools_changed.send_modify(|count| *count += 1);
        }
    }

    fn unreachable(&self, error: &reqwest::Error) -> ClientError {
        ClientError::Unreachable {
            url: self.url.clone(),
            reason: root_cause(error),
        }
    }
}

/// `response`'s body if it holds at most `limit` bytes, else `None` (read
/// no further than the limit).
async fn body_up_to(
    response: reqwest::Response,
    limit: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Ok(None);
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// `response` if its status is a success, else the server's explanation as
/// an error: its JSON-RPC error message, its body, or the status's name.
pub(crate) async fn check_status(
    url: &str,
    response: reqwest::Response,
) -> Result<reqwest::Response, ClientError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    // Only its start is shown; a body past 64 KiB is not read at all.
    let body = body_up_to(response, 64 << 10)
        .await
        .ok()
        .flatten()
        .map(|body| String::from_utf8_lossy(&body).into_owned())
        .unwrap_or_default();
    let explained = serde_json::from_str::<Value>(&body).ok().and_then(|json| {
        json.pointer("/error/message")
            .or_else(|| json.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let message = explained
        .or_else(|| {
            let text = body.trim();
            (!text.is_empty()).then(|| text.chars().take(300).collect())
        })
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("no reason").to_owned());
    Err(ClientError::Http {
        url: url.to_owned(),
        status: status.as_u16(),
        message,
    })
}

/// A header value: as is when it is visible ASCII, else the 2026-07-28
/// sentinel `=?base64?…?=`.
fn header_text(text: &str) -> String {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) && text.trim() == text {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    }
}

/// Reads a request's SSE stream into its exchange, up to the response;
/// resumes it when it drops (session era).
async fn read_stream(
    inner: Arc<Inner>,
    response: reqwest::Response,
    request_id: Value,
    exchange: mpsc::Sender<Delivery>,
    resumable: bool,
) {
    let mut body = response.bytes_stream().boxed();
    let mut parser = sse::parser();
    let mut last_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut failures = 0u32;
    'read: loop {
        let reason = match body.next().await {
            Some(Ok(chunk)) => {
                let events = match parser.push(&chunk) {
                    Ok(events) => events,
                    Err(overflow) => {
                        let _ = exchange.send(Err(sse::overflowed(overflow)).into()).await;
                        return;
                    }
                };
                // A new event id is progress: resume from it, and count
                // failed resumes afresh.
                if let Some(id) = parser.last_event_id()
                    && last_id.as_deref() != Some(id)
                {
                    last_id = Some(id.to_owned());
                    failures = 0;
                }
                if let Some(ms) = parser.retry_ms() {
                    retry = Some(Duration::from_millis(ms));
                }
                for event in events {
                    // Data that is not JSON-RPC (a priming event) is skipped.
                    match parse(event.data.as_bytes()) {
                        Some(Parsed::Request { id, method }) => inner.answer(id, method),
                        Some(Parsed::Message(message)) => {
                            inner.note(&message);
                            let done = matches!(&message, Message::Response { id, .. } if *id == request_id);
                            if exchange.send(Ok(message).into()).await.is_err() || done {
                                return;
                            }
                        }
                        None => {}
                    }
                }
                continue;
            }
            Some(Err(error)) => root_cause(&error),
            None => "the server ended the stream before the response".to_owned(),
        };
        // Every way of giving up ends here, with why.
        let lost = 'lost: {
            if !resumable {
                break 'lost format!(
                    "{reason}; in MCP 2026-07-28 a server cancels a call whose stream closes and \
                     there is no resume: call again, as a task to survive disconnects"
                );
            }
            let Some(resume_from) = last_id.clone() else {
                break 'lost format!(
                    "{reason}, and the server had sent no event id to resume from"
                );
            };
            parser.reset();
            loop {
                failures += 1;
                if failures > RESUME_ATTEMPTS {
                    break 'lost format!(
                        "{reason}; {RESUME_ATTEMPTS} attempts to resume it with Last-Event-ID failed"
                    );
                }
                let wait = backoff(failures, FIRST_RESUME, LONGEST_RESUME);
                tokio::time::sleep(retry.unwrap_or_default().max(wait)).await;
                match inner.resume(&resume_from).await {
                    Ok(response) if content_type(&response).starts_with("text/event-stream") => {
                        body = response.bytes_stream().boxed();
                        continue 'read;
                    }
                    Ok(response) => {
                        break 'lost format!(
                            "{reason}; resuming it answered {:?} instead of an SSE stream",
                            content_type(&response)
                        );
                    }
                    // Refused outright (unknown stream, no session): no point retrying.
                    Err(ClientError::Http {
                        status, message, ..
                    }) if status < 500 => {
                        break 'lost format!(
                            "{reason}; resuming it was refused (HTTP {status}: {message})"
                        );
                    }
                    Err(_) => continue,
                }
            }
        };
        let _ = exchange
            .send(Err(ClientError::StreamLost { reason: lost }).into())
            .await;
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_text("tools/call"), "tools/call");
        assert_eq!(header_text("héllo"), "=?base64?aMOpbGxv?=");
        // Standard alphabet with padding: "\u{fb}\u{ff}" is c3 bb c3 bf.
        assert_eq!(header_text("\u{fb}\u{ff}"), "=?base64?w7vDvw==?=");
    }

    #[test]
    fn backoff_grows_to_two_seconds() {
        let waits: Vec<u64> = (1..=8)
            .map(|n| backoff(n, FIRST_RESUME, LONGEST_RESUME).as_millis() as u64)
            .collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
    }

    #[test]
    fn the_base_url_drops_the_mcp_path() {
        assert_eq!(base_url("http://h:1/mcp"), "http://h:1");
        assert_eq!(base_url("http://h:1/mcp/"), "http://h:1");
        assert_eq!(base_url("http://h:1"), "http://h:1");
    }
}
