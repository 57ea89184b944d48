//! Hooks for the fuzz targets in `fuzz/` (cargo feature `fuzzing`, off by
//! default): the SSE decoder, which is private otherwise. Not an API: hidden
//! from the docs, and nothing but the fuzz targets may use it.
//!
//! The stdio reader needs no hook: the `client_stdio` target drives it
//! through [`Client`](crate::Client) against a real child process.

/// The SSE decoder the HTTP transport and `follow_run` read with.
#[derive(Debug, Default)]
pub struct SseParser(crate::sse::SseParser);

/// One dispatched event, as [`SseParser::feed`] hands it out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `id:` field, if the event had one.
    pub id: Option<String>,
    /// The `event:` field.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `retry:` field, in ms.
    pub retry_ms: Option<u64>,
}

impl SseParser {
    /// Parses `bytes`, returning the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.0
            .feed(bytes)
            .into_iter()
            .map(|event| SseEvent {
                id: event.id,
                event: event.event,
                data: event.data,
                retry_ms: event.retry_ms,
            })
            .collect()
    }

    /// Forgets a half-received event.
    pub fn reset(&mut self) {
        self.0.reset();
    }
}
