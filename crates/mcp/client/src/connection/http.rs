//! Streamable HTTP, client side: one POST per message; a request's answer
//! is JSON or an SSE stream of its notifications and then its response.
//!
//! In a 2025-11-25 session a dropped stream is resumed with `GET` and
//! `Last-Event-ID` (waiting as long as the server's `retry:` asks, backing
//! off on failures) until the response arrives. In 2026-07-28 there is no
//! resume: the server cancels a call whose stream closes, which is also how
//! this client cancels one (it drops the stream).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Exchange, Guard, Inbound, Negotiated, answer_server_request};
use crate::ClientError;
use crate::sse::SseParser;
use weir_mcp_wire::jsonrpc::Incoming;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Consecutive failed attempts to resume a dropped stream before giving up.
const RESUME_ATTEMPTS: u32 = 10;

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
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A Streamable HTTP endpoint.
pub(crate) struct HttpConnection {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    state: Mutex<State>,
}

#[derive(Clone, Default)]
struct State {
    session_id: Option<String>,
    /// The negotiated session-era version, sent as a header.
    version: Option<String>,
    stateless: bool,
}

impl HttpConnection {
    pub(crate) fn new(url: String, token: Option<String>) -> Result<HttpConnection, ClientError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ClientError::Unreachable {
                url,
                reason: "not an http:// or https:// URL".into(),
            });
        }
        Ok(HttpConnection {
            inner: Arc::new(Inner {
                http: http_client()?,
                url,
                token,
                state: Mutex::default(),
            }),
        })
    }

    pub(crate) fn settle(&self, negotiated: &Negotiated) {
        let mut state = self.inner.state();
        match negotiated {
            Negotiated::Session(version) => state.version = Some(version.clone()),
            Negotiated::Stateless => state.stateless = true,
        }
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
            return Ok(Exchange {
                messages,
                _guard: Guard::Http(AbortOnDrop(reader)),
            });
        }
        if !content_type.starts_with("application/json") {
            return Err(ClientError::Protocol(format!(
                "{} answered a request with HTTP {} and content type {content_type:?}, neither JSON nor an SSE stream",
                self.inner.url,
                response.status().as_u16()
            )));
        }
        let body = response
            .bytes()
            .await
            .map_err(|error| self.inner.unreachable(&error))?;
        let answer = serde_json::from_slice::<Value>(&body)
            .map_err(|error| ClientError::Protocol(format!("its answer is not JSON: {error}")))
            .and_then(|value| {
                Incoming::from_value(value).map_err(|(_, error)| {
                    ClientError::Protocol(format!("its answer is not JSON-RPC: {}", error.message))
                })
            });
        Ok(Exchange::answered(answer))
    }

    pub(crate) async fn notify(&self, message: Value) -> Result<(), ClientError> {
        self.inner.post(&message).await.map(drop)
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
        let named = message.and_then(|m| {
            m.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
                .and_then(Value::as_str)
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

    /// POSTs one message; an HTTP error status becomes an error.
    async fn post(&self, message: &Value) -> Result<reqwest::Response, ClientError> {
        let request = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(message.to_string());
        let response = self
            .decorate(request, Some(message))
            .send()
            .await
            .map_err(|error| self.unreachable(&error))?;
        self.check(response).await
    }

    /// GETs the rest of a dropped stream.
    async fn resume(&self, last_event_id: &str) -> Result<reqwest::Response, ClientError> {
        let request = self
            .http
            .get(&self.url)
            .header(ACCEPT, "text/event-stream")
            .header("last-event-id", last_event_id);
        let response = self
            .decorate(request, None)
            .send()
            .await
            .map_err(|error| self.unreachable(&error))?;
        self.check(response).await
    }

    async fn check(&self, response: reqwest::Response) -> Result<reqwest::Response, ClientError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
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
            url: self.url.clone(),
            status: status.as_u16(),
            message,
        })
    }

    fn unreachable(&self, error: &reqwest::Error) -> ClientError {
        ClientError::Unreachable {
            url: self.url.clone(),
            reason: root_cause(error),
        }
    }
}

/// A header value: as is when it is visible ASCII, else the 2026-07-28
/// sentinel `=?base64?…?=`.
fn header_text(text: &str) -> String {
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) && text.trim() == text {
        text.to_owned()
    } else {
        format!("=?base64?{}?=", base64(text.as_bytes()))
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Wait before resume attempt `n` (from 1): 50 ms, doubling, at most 2 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64 << attempt.saturating_sub(1).min(6)).min(Duration::from_secs(2))
}

/// Reads a request's SSE stream into its exchange, up to the response;
/// resumes it when it drops (session era).
async fn read_stream(
    inner: Arc<Inner>,
    response: reqwest::Response,
    request_id: Value,
    exchange: mpsc::Sender<Inbound>,
    resumable: bool,
) {
    let mut body = response.bytes_stream().boxed();
    let mut parser = SseParser::default();
    let mut last_id: Option<String> = None;
    let mut retry: Option<Duration> = None;
    let mut failures = 0u32;
    loop {
        let reason = match body.next().await {
            Some(Ok(chunk)) => {
                for event in parser.feed(&chunk) {
                    if event.id.is_some() {
                        last_id = event.id.clone();
                        failures = 0;
                    }
                    if let Some(ms) = event.retry_ms {
                        retry = Some(Duration::from_millis(ms));
                    }
                    // Data that is not JSON-RPC (a priming event) is skipped.
                    let Ok(value) = serde_json::from_str::<Value>(&event.data) else {
                        continue;
                    };
                    match Incoming::from_value(value) {
                        Ok(Incoming::Request { id, method, .. }) => {
                            let inner = inner.clone();
                            tokio::spawn(async move {
                                let _ = inner.post(&answer_server_request(&id, &method)).await;
                            });
                        }
                        Ok(message) => {
                            let done = matches!(&message, Incoming::Response { id, .. } if *id == request_id);
                            if exchange.send(Ok(message)).await.is_err() || done {
                                return;
                            }
                        }
                        Err(_) => {}
                    }
                }
                continue;
            }
            Some(Err(error)) => root_cause(&error),
            None => "the server ended the stream before the response".to_owned(),
        };
        let lost = |reason: String| Err(ClientError::StreamLost { reason });
        if !resumable {
            let _ = exchange
                .send(lost(format!(
                    "{reason}; in MCP 2026-07-28 a server cancels a call whose stream closes and \
                     there is no resume: call again, as a task to survive disconnects"
                )))
                .await;
            return;
        }
        let Some(resume_from) = last_id.clone() else {
            let _ = exchange
                .send(lost(format!(
                    "{reason}, and the server had sent no event id to resume from"
                )))
                .await;
            return;
        };
        parser.reset();
        loop {
            failures += 1;
            if failures > RESUME_ATTEMPTS {
                let _ = exchange
                    .send(lost(format!(
                        "{reason}; {RESUME_ATTEMPTS} attempts to resume it with Last-Event-ID failed"
                    )))
                    .await;
                return;
            }
            tokio::time::sleep(retry.unwrap_or_default().max(backoff(failures))).await;
            match inner.resume(&resume_from).await {
                Ok(response) if content_type(&response).starts_with("text/event-stream") => {
                    body = response.bytes_stream().boxed();
                    break;
                }
                Ok(response) => {
                    let _ = exchange
                        .send(lost(format!(
                            "{reason}; resuming it answered {:?} instead of an SSE stream",
                            content_type(&response)
                        )))
                        .await;
                    return;
                }
                // Refused outright (unknown stream, no session): no point retrying.
                Err(ClientError::Http {
                    status, message, ..
                }) if status < 500 => {
                    let _ = exchange
                        .send(lost(format!(
                            "{reason}; resuming it was refused (HTTP {status}: {message})"
                        )))
                        .await;
                    return;
                }
                Err(_) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(header_text("tools/call"), "tools/call");
        assert_eq!(header_text("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn backoff_grows_to_two_seconds() {
        let waits: Vec<u64> = (1..=8).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
    }

    #[test]
    fn the_base_url_drops_the_mcp_path() {
        assert_eq!(base_url("http://h:1/mcp"), "http://h:1");
        assert_eq!(base_url("http://h:1/mcp/"), "http://h:1");
        assert_eq!(base_url("http://h:1"), "http://h:1");
    }
}
