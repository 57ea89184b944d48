//! weir-core's SSE parser (`weir_core::sse`, the one every SSE reader in
//! weir uses), unbounded (the MCP client's HTTP transport and `follow_run`
//! bound it at 64 MiB, past any input here) as they feed it: whatever
//! pieces the network cuts a stream into.
//!
//! The first two bytes pick where to cut; the rest is the stream.
//! Properties: the events, the last event ID and the reconnection time are
//! the same whether the stream comes in one piece, byte by byte, or cut
//! anywhere; a reset forgets the half-received event (the events after it
//! are a fresh parser's) but keeps the last event ID; no field holds a line
//! break; no id holds a NUL; each event had a line end of its own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_core::sse::{SseEvent, SseParser};

/// The events of `pieces`, and the parser's state after them.
fn parse<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<SseEvent>, Option<String>, Option<u64>) {
    let mut parser = SseParser::new(usize::MAX);
    let events = pieces
        .into_iter()
        .flat_map(|piece| parser.push(piece).expect("unbounded"))
        .collect();
    let id = parser.last_event_id().map(str::to_owned);
    (events, id, parser.retry_ms())
}

fuzz_target!(|data: &[u8]| {
    let (cut, stream) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => return,
    };
    let whole = parse([stream]);
    assert_eq!(whole, parse(stream.chunks(1)), "byte by byte");
    // Pieces of a size picked by the input, and one cut at a place picked by it.
    assert_eq!(
        whole,
        parse(stream.chunks(1 + cut % 61)),
        "in pieces of {}",
        1 + cut % 61
    );
    let at = cut % (stream.len() + 1);
    assert_eq!(whole, parse([&stream[..at], &stream[at..]]), "cut at {at}");
    // A stream cut between `\r` and `\n` is the case the parser carries state for.
    if let Some(cr) = stream.iter().position(|&b| b == b'\r') {
        assert_eq!(
            whole,
            parse([&stream[..=cr], &stream[cr + 1..]]),
            "cut after \\r"
        );
    }
    // A reset (a dropped connection) forgets the event it cut, not the id.
    let mut parser = SseParser::new(usize::MAX);
    parser.push(&stream[..at]).expect("unbounded");
    let id_before = parser.last_event_id().map(str::to_owned);
    parser.reset();
    assert_eq!(parser.last_event_id().map(str::to_owned), id_before, "reset at {at}");
    assert_eq!(
        parser.push(&stream[at..]).expect("unbounded"),
        parse([&stream[at..]]).0,
        "after a reset at {at}"
    );
    let (events, id, _) = &whole;
    let lines = stream.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
    assert!(events.len() <= lines, "more events than line ends");
    for event in events {
        for field in [event.id.as_deref(), event.event.as_deref()]
            .into_iter()
            .flatten()
        {
            assert!(!field.contains(['\n', '\r']), "{event:?}");
            assert!(!field.is_empty(), "{event:?}");
        }
        assert!(!event.data.contains('\r'), "{event:?}");
    }
    for id in events.iter().filter_map(|e| e.id.as_deref()).chain(id.as_deref()) {
        assert!(!id.contains('\0'), "{id:?}");
    }
});
