//! Streamable HTTP, hand-written HTTP/1.1 over one keep-alive connection:
//! requests with `Content-Length`, responses with `Content-Length` or
//! chunked bodies, SSE as weir writes it (`id:` and one `data:` line per
//! event, `\n` line ends, events ended by a blank line).
//!
//! Hand-written because both ends are ours and the point is the server's
//! cost: a general client library would add its own per-event work to
//! every figure.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Transport;
use crate::call::Call;
use crate::lines::Buffer;

/// The protocol revisions the reader speaks over HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize`, then every request in its session.
    Session,
    /// 2026-07-28: no `initialize`; each request carries its revision and
    /// capabilities in `_meta`.
    Stateless,
}

pub const STATELESS_VERSION: &str = "2026-07-28";

pub struct HttpClient {
    stream: TcpStream,
    buffer: Buffer,
    host: String,
    era: Era,
    session: Option<String>,
    next_id: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A `POST /mcp` carrying `message`, with the headers of `era` (and of
/// the session, once there is one).
pub fn post_bytes(host: &str, era: Era, session: Option<&str>, message: &Value) -> Vec<u8> {
    let body = serde_json::to_vec(message).expect("a Value serializes");
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    match (era, session) {
        (Era::Session, Some(session)) => {
            request.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: {}\r\n",
                crate::SESSION_VERSION
            ));
        }
        (Era::Session, None) => {}
        (Era::Stateless, _) => {
            request.push_str(&format!("MCP-Protocol-Version: {STATELESS_VERSION}\r\n"));
            if let Some(method) = message["method"].as_str() {
                request.push_str(&format!("Mcp-Method: {method}\r\n"));
            }
        }
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// What a `tools/call`'s `_meta` carries besides its tokens: nothing in a
/// session; the revision, capabilities and client of a stateless request.
pub fn call_meta(era: Era) -> Value {
    match era {
        Era::Session => json!({}),
        Era::Stateless => json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
            "io.modelcontextprotocol/clientCapabilities": { "partialResults": {} },
            "io.modelcontextprotocol/clientInfo": crate::client_info(),
        }),
    }
}

impl HttpClient {
    pub fn connect(port: u16, era: Era) -> Result<HttpClient, String> {
        let address = format!("127.0.0.1:{port}");
        // The port is printed just before the server accepts: retry briefly.
        let mut tries = 0;
        let stream = loop {
            match TcpStream::connect(&address) {
                Ok(stream) => break stream,
                Err(_) if tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(format!("connecting to {address}: {e}")),
            }
        };
        // As the server does: a lone small request must not wait for an ACK.
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(600)))
            .map_err(|e| e.to_string())?;
        Ok(HttpClient {
            stream,
            buffer: Buffer::new(),
            host: address,
            era,
            session: None,
            next_id: 1,
        })
    }

    fn post(&mut self, message: &Value) -> Result<(), String> {
        let bytes = post_bytes(&self.host, self.era, self.session.as_deref(), message);
        self.stream
            .write_all(&bytes)
            .map_err(|e| format!("sending a request: {e}"))
    }

    fn fill(&mut self) -> Result<(), String> {
        match self.buffer.fill(&mut self.stream) {
            Ok(0) => Err("the server closed the connection".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("reading the response: {e}")),
        }
    }

    fn read_head(&mut self) -> Result<Head, String> {
        let end = loop {
            if let Some(at) = memchr::memmem::find(self.buffer.available(), b"\r\n\r\n") {
                break at;
            }
            self.fill()?;
        };
        let text = String::from_utf8_lossy(&self.buffer.available()[..end]).into_owned();
        self.buffer.consume(end + 4);
        let mut lines = text.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| format!("not an HTTP response: {text:?}"))?;
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        Ok(Head { status, headers })
    }

    /// Hands the body to `each` in the pieces it arrives in (chunked
    /// encoding removed), until its end.
    fn read_body(
        &mut self,
        head: &Head,
        mut each: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        if !chunked {
            let length: usize = match head.header("content-length") {
                Some(length) => length.parse().map_err(|_| "bad Content-Length")?,
                None => 0, // weir answers a notification with an empty 202
            };
            return self.read_exactly(length, &mut each);
        }
        loop {
            let line_end = loop {
                if let Some(at) = memchr::memmem::find(self.buffer.available(), b"\r\n") {
                    break at;
                }
                self.fill()?;
            };
            let size_text = String::from_utf8_lossy(&self.buffer.available()[..line_end]);
            let size_text = size_text.split(';').next().unwrap_or("").trim().to_owned();
            let size = usize::from_str_radix(&size_text, 16)
                .map_err(|_| format!("bad chunk size {size_text:?}"))?;
            self.buffer.consume(line_end + 2);
            if size == 0 {
                // Trailers, if any, up to the blank line.
                loop {
                    let line_end = loop {
                        if let Some(at) = memchr::memmem::find(self.buffer.available(), b"\r\n") {
                            break at;
                        }
                        self.fill()?;
                    };
                    self.buffer.consume(line_end + 2);
                    if line_end == 0 {
                        return Ok(());
                    }
                }
            }
            self.read_exactly(size, &mut each)?;
            while self.buffer.available().len() < 2 {
                self.fill()?;
            }
            if &self.buffer.available()[..2] != b"\r\n" {
                return Err("a chunk does not end with CRLF".into());
            }
            self.buffer.consume(2);
        }
    }

    fn read_exactly(
        &mut self,
        mut left: usize,
        each: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        while left > 0 {
            if self.buffer.available().is_empty() {
                self.fill()?;
            }
            let n = left.min(self.buffer.available().len());
            each(&self.buffer.available()[..n])?;
            self.buffer.consume(n);
            left -= n;
        }
        Ok(())
    }

    /// A request whose answer is one JSON body (or an SSE stream holding
    /// the response): the response.
    fn request(&mut self, method: &str, params: Value) -> Result<(Head, Value), String> {
        let id = self.next_id;
        self.next_id += 1;
        self.post(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        let head = self.read_head()?;
        let mut body = Vec::new();
        self.read_body(&head, |piece| {
            body.extend_from_slice(piece);
            Ok(())
        })?;
        if head.status != 200 {
            return Err(format!(
                "{method}: HTTP {}: {}",
                head.status,
                String::from_utf8_lossy(&body)
            ));
        }
        let mut messages = Vec::new();
        if head
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            Sse::default().feed(&body, |data| {
                messages.push(serde_json::from_slice::<Value>(data).map_err(|e| e.to_string())?);
                Ok(false)
            })?;
        } else {
            messages.push(serde_json::from_slice(&body).map_err(|e| e.to_string())?);
        }
        let reply = messages
            .into_iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .ok_or_else(|| format!("{method}: no response in the body"))?;
        Ok((head, reply))
    }
}

impl Transport for HttpClient {
    fn open(&mut self) -> Result<(), String> {
        if self.era == Era::Stateless {
            return Ok(()); // every request stands alone
        }
        let (head, reply) = self.request("initialize", crate::initialize_params())?;
        crate::check_initialized(&reply)?;
        self.session = Some(
            head.header("mcp-session-id")
                .ok_or("initialize: no Mcp-Session-Id")?
                .to_owned(),
        );
        self.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))?;
        let head = self.read_head()?;
        self.read_body(&head, |_| Ok(()))?;
        if head.status != 202 {
            return Err(format!("notifications/initialized: HTTP {}", head.status));
        }
        Ok(())
    }

    fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn stream(&mut self, call: &mut Call, id: u64) -> Result<(), String> {
        let meta = call_meta(self.era);
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call.params(meta) });
        call.sent_at = Some(Instant::now());
        self.post(&request)?;
        let head = self.read_head()?;
        if head.status != 200
            || !head
                .header("content-type")
                .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            let mut body = Vec::new();
            let _ = self.read_body(&head, |piece| {
                body.extend_from_slice(piece);
                Ok(())
            });
            return Err(format!(
                "tools/call: HTTP {}: {}",
                head.status,
                String::from_utf8_lossy(&body[..body.len().min(300)])
            ));
        }
        let mut sse = Sse::default();
        // To the end of the body: the server ends the stream after the
        // response, and the connection is then ready for the next request.
        self.read_body(&head, |piece| {
            sse.feed(piece, |data| call.take(data)).map(|_| ())
        })
    }
}

/// SSE events split out of a body that arrives in pieces.
#[derive(Default)]
pub struct Sse {
    /// The start of an event whose end has not arrived yet.
    pending: Vec<u8>,
    /// The first event id the stream carried (weir's are `RUN_ID.SEQ`).
    pub first_id: Option<String>,
}

impl Sse {
    /// Takes a piece of the body and hands each complete event's data to
    /// `each`; true once `each` has said so.
    pub fn feed(
        &mut self,
        piece: &[u8],
        mut each: impl FnMut(&[u8]) -> Result<bool, String>,
    ) -> Result<bool, String> {
        self.pending.extend_from_slice(piece);
        let mut done = false;
        let mut start = 0;
        while let Some(end) = memchr::memmem::find(&self.pending[start..], b"\n\n") {
            let event = &self.pending[start..start + end];
            start += end + 2;
            // weir writes one data line per event (compact JSON has no
            // newline); several are joined as SSE says.
            let mut data: Option<Vec<u8>> = None;
            let mut single: Option<&[u8]> = None;
            for line in event.split(|&b| b == b'\n') {
                if self.first_id.is_none()
                    && let Some(id) = line.strip_prefix(b"id:")
                {
                    let id = id.strip_prefix(b" ").unwrap_or(id);
                    self.first_id = Some(String::from_utf8_lossy(id).into_owned());
                }
                let Some(value) = line.strip_prefix(b"data:") else {
                    continue;
                };
                let value = value.strip_prefix(b" ").unwrap_or(value);
                match (&mut data, single) {
                    (None, None) => single = Some(value),
                    (None, Some(first)) => {
                        let mut joined = first.to_vec();
                        joined.push(b'\n');
                        joined.extend_from_slice(value);
                        data = Some(joined);
                    }
                    (Some(joined), _) => {
                        joined.push(b'\n');
                        joined.extend_from_slice(value);
                    }
                }
            }
            let data = data.as_deref().or(single);
            if let Some(data) = data {
                done |= each(data)?;
            }
        }
        self.pending.drain(..start);
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::Sse;

    /// Events split at every byte arrive whole, and only once.
    #[test]
    fn sse_events_split_anywhere() {
        let body = b"id: a.1\ndata: {\"x\":1}\n\n: comment\n\ndata: a\ndata: b\n\n";
        for cut in 0..body.len() {
            let mut sse = Sse::default();
            let mut got = Vec::new();
            for piece in [&body[..cut], &body[cut..]] {
                sse.feed(piece, |data| {
                    got.push(String::from_utf8(data.to_vec()).unwrap());
                    Ok(false)
                })
                .unwrap();
            }
            assert_eq!(got, ["{\"x\":1}", "a\nb"], "cut at {cut}");
            assert_eq!(sse.first_id.as_deref(), Some("a.1"), "cut at {cut}");
        }
    }
}
