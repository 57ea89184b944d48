//! Hooks for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off by
//! default): the model client's decoder of what an endpoint sends in each
//! server-sent event — the chat-completion chunk reader — which is private
//! otherwise (the SSE parser is weir-core's, public: [`weir_core::sse`]).
//! Not an API: hidden from the docs, and nothing but the fuzz targets may
//! use it.

use crate::llm::chunk::{self, ChunkEvent};

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
