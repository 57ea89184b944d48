//! The client's SSE decoder (`SseParser`, in weir-client; reached through
//! its `fuzzing` feature), as the HTTP transport and `follow_run` feed it:
//! whatever pieces the network cuts a stream into.
//!
//! The first two bytes pick where to cut; the rest is the stream.
//! Properties: the events are the same whether the stream comes in one
//! piece, byte by byte, or cut anywhere; a reset forgets what came before
//! it; no field holds a line break; an
//! id holds no NUL; each event had at least one field line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_client::fuzzing::{SseEvent, SseParser};

fn parse<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseEvent> {
    let mut parser = SseParser::default();
    pieces
        .into_iter()
        .flat_map(|piece| parser.feed(piece))
        .collect()
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
    // A reset (a dropped connection) forgets everything before it.
    let mut parser = SseParser::default();
    parser.feed(&stream[..at]);
    parser.reset();
    assert_eq!(
        parser.feed(&stream[at..]),
        parse([&stream[at..]]),
        "after a reset at {at}"
    );
    let lines = stream.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
    assert!(whole.len() <= lines, "more events than line ends");
    for event in &whole {
        for field in [event.id.as_deref(), event.event.as_deref()]
            .into_iter()
            .flatten()
        {
            assert!(!field.contains(['\n', '\r']), "{event:?}");
        }
        assert!(!event.data.contains('\r'), "{event:?}");
        assert!(
            !event.id.as_deref().is_some_and(|id| id.contains('\0')),
            "{event:?}"
        );
    }
});
