//! What the protocol renderers share with the server: the request being
//! answered, and the answer as JSON or as SSE frames.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use serde_json::Value;

use crate::script::Streaming;

/// A request being answered, as the protocol renderers see it.
pub(crate) struct Request {
    /// Its number among all requests (from 0): ids derive from it.
    pub(crate) seq: usize,
    /// The model asked for (from the body, or Gemini's path).
    pub(crate) model: String,
    /// Whether the client asked for a stream.
    pub(crate) stream: bool,
    /// A made-up count: about one token per four bytes of body.
    pub(crate) input_tokens: u64,
    pub(crate) body: Value,
}

/// What an endpoint answers.
pub(crate) enum Answer {
    Json {
        status: StatusCode,
        body: Value,
    },
    Sse {
        frames: Vec<Frame>,
        streaming: Streaming,
    },
}

impl Answer {
    pub(crate) fn json(body: Value) -> Answer {
        Answer::Json {
            status: StatusCode::OK,
            body,
        }
    }
}

/// One step of an SSE answer.
pub(crate) enum Frame {
    /// An event (or several lines) that is not a delta.
    Event(String),
    /// An event carrying a delta: paced by `delay_ms`, counted by
    /// `drop_after`.
    Delta(String),
    /// A pause of `delay_ms` (Chat Completions' late `finish_reason`).
    Pause,
}

/// One SSE event: an optional `event:` line, one `data:` line, a blank line.
pub(crate) fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

pub(crate) fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
