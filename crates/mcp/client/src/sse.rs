//! How the client reads server-sent events (Streamable HTTP answers, run
//! event streams): weir-core's parser ([`weir_core::sse`]), with the
//! client's bound.

use weir_core::sse::Overflow;
pub(crate) use weir_core::sse::SseParser;

use crate::error::ClientError;

/// Most bytes of one SSE line or event: no bound, as for the client's JSON
/// answers and stdio lines — the client trusts a server it chose to call
/// with its memory (as it did before its parser moved to weir-core).
const MAX_EVENT_BYTES: usize = usize::MAX;

/// A parser for one stream.
pub(crate) fn parser() -> SseParser {
    SseParser::new(MAX_EVENT_BYTES)
}

/// A stream whose line or event passed the bound.
pub(crate) fn overflowed(overflow: Overflow) -> ClientError {
    ClientError::Protocol(overflow.to_string())
}
