//! A scripted OpenAI-compatible chat server on a loopback port: each
//! request gets the next reply of the script (the last one repeats),
//! written byte for byte as told — chunked SSE with pauses, a dropped
//! connection, an HTTP error, a connection held open — so every quirk a
//! real server has can be played on a real socket.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// One step of a streamed reply.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Bytes, as one HTTP chunk.
    Send(String),
    /// A pause.
    Sleep(u64),
    /// Close the socket without ending the chunked body.
    Drop,
    /// Keep the connection open, sending nothing, until the client leaves.
    Hold,
}

/// One reply.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// An HTTP error with this body.
    Status(u16, &'static str),
    /// `200`, `text/event-stream`, chunked; ends with the last chunk
    /// unless a step drops or holds.
    Stream(Vec<Step>),
}

/// `data: {chunk}` with a content delta (and a finish reason).
pub(crate) fn token(text: &str) -> Step {
    chunk(json!({"content": text}), Value::Null)
}

pub(crate) fn chunk(delta: Value, finish: Value) -> Step {
    let chunk = json!({
        "id": "chatcmpl-script", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Step::Send(format!("data: {chunk}\n\n"))
}

pub(crate) fn finish(reason: &str) -> Step {
    chunk(json!({}), json!(reason))
}

pub(crate) fn done() -> Step {
    Step::Send("data: [DONE]\n\n".into())
}

/// A whole well-behaved answer: the tokens, `stop`, `[DONE]`.
pub(crate) fn answer(tokens: &[&str]) -> Reply {
    let mut steps: Vec<Step> = tokens.iter().map(|t| token(t)).collect();
    steps.push(finish("stop"));
    steps.push(done());
    Reply::Stream(steps)
}

/// What the server saw.
#[derive(Default)]
pub(crate) struct Seen {
    /// Each request's JSON body, in order.
    pub(crate) requests: Vec<Value>,
    /// Held connections the client closed.
    pub(crate) closed_by_client: usize,
}

pub(crate) struct Scripted {
    pub(crate) url: String,
    pub(crate) seen: Arc<Mutex<Seen>>,
    /// Notified when a held connection is closed by the client.
    pub(crate) client_left: Arc<Notify>,
}

impl Scripted {
    pub(crate) async fn start(replies: Vec<Reply>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let client_left = Arc::new(Notify::new());
        let replies = Arc::new(replies);
        let (seen2, left2) = (seen.clone(), client_left.clone());
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(socket, replies.clone(), seen2.clone(), left2.clone()));
            }
        });
        Scripted {
            url,
            seen,
            client_left,
        }
    }

    pub(crate) fn requests(&self) -> usize {
        self.seen.lock().unwrap().requests.len()
    }
}

/// One request's body, or `None` when the client closed the connection.
async fn read_request(socket: &mut TcpStream) -> Option<Value> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |value| value.trim().parse().unwrap());
    while data.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    serde_json::from_slice(&data[head_end..head_end + length]).ok()
}

async fn serve(
    mut socket: TcpStream,
    replies: Arc<Vec<Reply>>,
    seen: Arc<Mutex<Seen>>,
    left: Arc<Notify>,
) {
    socket.set_nodelay(true).unwrap();
    while let Some(request) = read_request(&mut socket).await {
        let index = {
            let mut seen = seen.lock().unwrap();
            seen.requests.push(request);
            seen.requests.len() - 1
        };
        let reply = replies[index.min(replies.len() - 1)].clone();
        match reply {
            Reply::Status(status, body) => {
                let head = format!(
                    "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
            }
            Reply::Stream(steps) => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for step in steps {
                    match step {
                        Step::Send(text) => {
                            let piece = format!("{:x}\r\n{text}\r\n", text.len());
                            if socket.write_all(piece.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                        Step::Drop => return,
                        Step::Hold => {
                            // Whatever the client sends (nothing) until it closes.
                            let mut buf = [0u8; 64];
                            while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                            seen.lock().unwrap().closed_by_client += 1;
                            left.notify_one();
                            return;
                        }
                    }
                }
                if socket.write_all(b"0\r\n\r\n").await.is_err() {
                    return;
                }
            }
        }
    }
}
