//! How the client reads server-sent events (Streamable HTTP answers, run
//! event streams): weir-core's parser ([`weir_core::sse`]), with the
//! client's bound.

use weir_core::sse::Overflow;
pub(crate) use weir_core::sse::SseParser;

use crate::error::ClientError;

/// A parser for one stream: a line or an event at most
/// [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES).
pub(crate) fn parser() -> SseParser {
    SseParser::new(crate::MAX_MESSAGE_BYTES)
}

/// A stream whose line or event passed the bound.
pub(crate) fn overflowed(overflow: Overflow) -> ClientError {
    ClientError::MessageTooLarge {
        limit: overflow.limit,
    }
}
