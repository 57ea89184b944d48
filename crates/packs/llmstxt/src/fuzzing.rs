//! Hooks for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off by
//! default): the model client's decoders of what an endpoint sends — the
//! SSE parser and the chat-completion chunk reader — which are private
//! otherwise. Not an API: hidden from the docs, and nothing but the fuzz
//! targets may use it.

use crate::llm::chunk::{self, ChunkEvent};
use crate::llm::sse::{SseItem, SseParser};

/// What a stream fed in `pieces` to a parser bounded at `limit` bytes
/// gave: the data of each event (`None` for a comment), in order, the
/// event the stream's end dispatched last; or `Err(events before the
/// overflow)` once a line or an event passed the limit.
pub fn sse_events<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    limit: usize,
) -> Result<Vec<Option<String>>, usize> {
    let mut parser = SseParser::new(limit);
    let mut events = Vec::new();
    let data = |item: SseItem| match item {
        SseItem::Data(data) => Some(data),
        SseItem::Comment => None,
    };
    for piece in pieces {
        match parser.push(piece) {
            Ok(items) => events.extend(items.into_iter().map(data)),
            Err(_) => return Err(events.len()),
        }
    }
    match parser.finish() {
        Ok(last) => events.extend(last.map(data)),
        Err(_) => return Err(events.len()),
    }
    Ok(events)
}

/// One event of a chunk, as the fuzz target checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chunk {
    /// Text of the answer.
    Token(String),
    /// A finish reason.
    Finish(String),
    /// `[DONE]`.
    Done,
    /// An error the server reported.
    Error(String),
    /// Data that is not a chunk.
    Unreadable(String),
}

/// The chunk events of one event's data.
pub fn decode(data: &str) -> Vec<Chunk> {
    chunk::decode(data)
        .into_iter()
        .map(|event| match event {
            ChunkEvent::Token(text) => Chunk::Token(text),
            ChunkEvent::Finish(reason) => Chunk::Finish(reason),
            ChunkEvent::Done => Chunk::Done,
            ChunkEvent::Error(message) => Chunk::Error(message),
            ChunkEvent::Unreadable(why) => Chunk::Unreadable(why),
        })
        .collect()
}
