//! The SSE bodies the tests get from weir's HTTP endpoints, read with
//! weir-core's parser (the one weir's client reads them with) rather than
//! by picking out `data:` lines by hand.

use weir_core::sse::{SseEvent, SseParser};

/// Every event of a whole SSE body; an event whose blank line never came
/// is dropped, as WHATWG has it.
pub(crate) fn events(body: &str) -> Vec<SseEvent> {
    SseParser::new(usize::MAX)
        .push(body.as_bytes())
        .expect("no bound, no overflow")
}

/// The data of the body's last event: the JSON-RPC answer of a request
/// answered with a stream.
pub(crate) fn last_data(body: &str) -> Option<String> {
    events(body).pop().map(|event| event.data)
}
