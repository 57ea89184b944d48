//! The llms.txt pack's model client, as an OpenAI-compatible endpoint
//! feeds it: weir-core's SSE parser (`weir_core::sse`) bounded and with
//! the stream's end read as the pack reads it (`finish`: a last event
//! without its blank line counts), then the chat-completion chunk reader
//! (weir-pack-llmstxt, through its `fuzzing` feature), on whatever bytes
//! the endpoint sends, cut anywhere by the network.
//!
//! The first two bytes pick where to cut, the third the parser's limit
//! (16 to 271 bytes, so that the overflow path is reached); the rest is the
//! stream. Properties: the outcome is the same whether the stream comes in
//! one piece, byte by byte, or cut anywhere (the same events, or an
//! overflow either way); no event's data is longer than the limit; the
//! chunk reader never panics, hands out no empty token, reads `[DONE]` as
//! the end, and never makes more text than the bytes it was given could
//! (three bytes per byte at most: an invalid byte becomes U+FFFD).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_core::sse::SseParser;
use weir_pack_llmstxt::fuzzing::{Chunk, decode};

/// The data of each event a stream fed in `pieces` to a parser bounded at
/// `limit` bytes gave, the event the stream's end dispatched last; or
/// `Err(events before the overflow)` once a line or an event passed the
/// limit.
fn sse_events<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    limit: usize,
) -> Result<Vec<String>, usize> {
    let mut parser = SseParser::new(limit);
    let mut events = Vec::new();
    for piece in pieces {
        match parser.push(piece) {
            Ok(more) => events.extend(more.into_iter().map(|event| event.data)),
            Err(_) => return Err(events.len()),
        }
    }
    match parser.finish() {
        Ok(last) => events.extend(last.map(|event| event.data)),
        Err(_) => return Err(events.len()),
    }
    Ok(events)
}

fuzz_target!(|data: &[u8]| {
    let (cut, limit, stream) = match data {
        [a, b, c, rest @ ..] => (
            usize::from(u16::from_le_bytes([*a, *b])),
            16 + usize::from(*c),
            rest,
        ),
        _ => return,
    };
    let whole = sse_events([stream], limit);
    let same = |other: Result<Vec<String>, usize>, how: &str| match (&whole, &other) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{how}"),
        (Err(_), Err(_)) => {}
        _ => panic!("{how}: {whole:?} but {other:?}"),
    };
    same(sse_events(stream.chunks(1), limit), "byte by byte");
    same(
        sse_events(stream.chunks(1 + cut % 61), limit),
        &format!("in pieces of {}", 1 + cut % 61),
    );
    let at = cut % (stream.len() + 1);
    same(
        sse_events([&stream[..at], &stream[at..]], limit),
        &format!("cut at {at}"),
    );
    let Ok(events) = whole else { return };
    let mut text = 0;
    for data in &events {
        assert!(data.len() <= limit, "{} bytes of data past {limit}", data.len());
        let chunks = decode(data);
        if data.trim() == "[DONE]" {
            assert_eq!(chunks, [Chunk::Done]);
        }
        for chunk in chunks {
            if let Chunk::Token(token) = chunk {
                assert!(!token.is_empty(), "an empty token");
                text += token.len();
            }
        }
    }
    assert!(text <= 3 * stream.len(), "{text} bytes of text from {} bytes", stream.len());
});
