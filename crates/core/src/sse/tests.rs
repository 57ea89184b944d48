//! The parser against the WHATWG examples, each rule on its own, and a
//! plain whole-stream reading of the spec as the oracle of a property
//! test that cuts the bytes anywhere.

use proptest::prelude::*;

use super::*;

/// Every event of `chunks`, fed in that order, then the stream's end as
/// WHATWG has it (an unfinished event is dropped).
fn parse(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut parser = SseParser::new(usize::MAX);
    chunks
        .iter()
        .flat_map(|chunk| parser.push(chunk).unwrap())
        .collect()
}

fn data(text: &str) -> SseEvent {
    SseEvent {
        data: text.into(),
        ..SseEvent::default()
    }
}

#[test]
fn the_whatwg_examples() {
    // Three data lines, one event.
    assert_eq!(
        parse(&[b"data: YHOO\ndata: +2\ndata: 10\n\n"]),
        [data("YHOO\n+2\n10")]
    );
    // A comment, then an event with an id, then one without: the id stays.
    let events = parse(&[b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"]);
    assert_eq!(
        events,
        [
            SseEvent {
                id: Some("1".into()),
                ..data("first event")
            },
            data("second event"),
            data(" third event"),
        ]
    );
    // `data` with no colon is an empty line of data; the last event,
    // without its blank line, is never dispatched.
    assert_eq!(
        parse(&[b"data\n\ndata\ndata\n\ndata:"]),
        [data(""), data("\n")]
    );
    // One space is stripped, not more.
    assert_eq!(
        parse(&[b"data:test\n\ndata: test\n\n"]),
        [data("test"), data("test")]
    );
}

#[test]
fn every_line_ending_and_a_crlf_cut_between_reads() {
    let stream: &[u8] = b"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d\r\n\n";
    let expected = [data("a"), data("b"), data("c"), data("d")];
    assert_eq!(parse(&[stream]), expected);
    for at in 0..=stream.len() {
        assert_eq!(
            parse(&[&stream[..at], &stream[at..]]),
            expected,
            "cut at {at}"
        );
    }
    // A CR at the end of a read and a LF at the start of the next are one
    // line end; a LF after anything else is a line end of its own.
    assert_eq!(
        parse(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]),
        [data("a"), data("b")]
    );
}

#[test]
fn comments_and_unknown_fields_are_ignored() {
    assert_eq!(
        parse(&[b": keep-alive\n\nfoo: bar\ndata: x\n:more\nDATA: no\ndata : no\n\n"]),
        [data("x")]
    );
}

#[test]
fn a_blank_line_without_data_dispatches_nothing_but_its_id_counts() {
    let mut parser = SseParser::new(usize::MAX);
    assert_eq!(
        parser.push(b"id: 7\nevent: ping\nretry: 1500\n\n").unwrap(),
        []
    );
    assert_eq!(parser.last_event_id(), Some("7"));
    assert_eq!(parser.retry_ms(), Some(1500));
    // The type was dropped with the empty event; the id was not.
    assert_eq!(
        parser.push(b"data: x\n\n").unwrap(),
        [SseEvent {
            id: Some("7".into()),
            ..data("x")
        }]
    );
}

#[test]
fn the_id_counts_from_the_blank_line_and_persists() {
    let mut parser = SseParser::new(usize::MAX);
    assert_eq!(parser.push(b"data: a\nid: 1\n").unwrap(), []);
    // Not until its event ends.
    assert_eq!(parser.last_event_id(), None);
    let events = parser
        .push(b"\ndata: b\n\nid: \0bad\ndata: c\n\nid\ndata: d\n\n")
        .unwrap();
    let ids: Vec<Option<&str>> = events.iter().map(|e| e.id.as_deref()).collect();
    // A NUL id is ignored; an empty one clears it.
    assert_eq!(ids, [Some("1"), Some("1"), Some("1"), None]);
    assert_eq!(parser.last_event_id(), None);
}

#[test]
fn the_type_belongs_to_one_event() {
    let events = parse(&[b"event: end\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n"]);
    let types: Vec<Option<&str>> = events.iter().map(|e| e.event.as_deref()).collect();
    assert_eq!(types, [Some("end"), None, None]);
}

#[test]
fn retry_takes_ascii_digits_only() {
    for (line, expected) in [
        ("retry: 250", Some(250)),
        ("retry:0", Some(0)),
        ("retry: +5", None),
        ("retry: 5s", None),
        ("retry: -1", None),
        ("retry:", None),
        ("retry: 99999999999999999999999", None),
        ("retry:  5", None),
    ] {
        let mut parser = SseParser::new(usize::MAX);
        parser.push(format!("{line}\n\n").as_bytes()).unwrap();
        assert_eq!(parser.retry_ms(), expected, "{line}");
    }
}

#[test]
fn one_byte_order_mark_at_the_start_is_skipped() {
    let stream = "\u{FEFF}data: a\n\n\u{FEFF}data: b\n\n".as_bytes();
    for at in 0..=stream.len() {
        // The second one is not at the start: that line is a field named
        // "\u{FEFF}data", and ignored.
        assert_eq!(
            parse(&[&stream[..at], &stream[at..]]),
            [data("a")],
            "cut at {at}"
        );
    }
    assert_eq!(parse(&["\u{FEFF}\u{FEFF}data: a\n\n".as_bytes()]), []);
}

#[test]
fn invalid_utf8_is_replaced() {
    assert_eq!(parse(&[b"data: a\xffb\n\n"]), [data("a\u{FFFD}b")]);
}

#[test]
fn finish_hands_out_an_event_without_its_blank_line() {
    let mut parser = SseParser::new(usize::MAX);
    assert_eq!(
        parser.push(b"data: a\n\ndata: [DONE]").unwrap(),
        [data("a")]
    );
    assert_eq!(parser.finish(), Ok(Some(data("[DONE]"))));
    let mut parser = SseParser::new(usize::MAX);
    assert_eq!(parser.push(b"data: a\n").unwrap(), []);
    assert_eq!(parser.finish(), Ok(Some(data("a"))));
    // Nothing pending, or no data: nothing.
    let mut parser = SseParser::new(usize::MAX);
    assert_eq!(parser.push(b"data: a\n\nid: 3").unwrap(), [data("a")]);
    assert_eq!(parser.finish(), Ok(None));
    assert_eq!(parser.last_event_id(), Some("3"));
}

#[test]
fn a_reset_forgets_the_half_received_event_but_not_the_id() {
    let mut parser = SseParser::new(usize::MAX);
    assert_eq!(
        parser
            .push(b"id: 1\ndata: a\nretry: 9\n\nid: 2\ndata: {\"half\":")
            .unwrap()
            .len(),
        1
    );
    parser.reset();
    assert_eq!(parser.last_event_id(), Some("1"));
    assert_eq!(parser.retry_ms(), Some(9));
    // A new stream: its events carry its own ids, as a fresh parser's do.
    assert_eq!(parser.push(b"data: {}\n\n").unwrap(), [data("{}")]);
    assert_eq!(parser.last_event_id(), None);
}

#[test]
fn a_line_or_an_event_past_the_limit_overflows() {
    let overflow = Err(Overflow { limit: 16 });
    let mut parser = SseParser::new(16);
    assert_eq!(parser.push(b"data: 0123456789\n").unwrap(), []);
    assert_eq!(parser.push(&[b'a'; 17]), overflow);
    // A line of exactly the limit, cut anywhere, is fine; one byte more is not.
    let mut parser = SseParser::new(16);
    assert!(parser.push(b"data: 012345").is_ok());
    assert!(parser.push(b"6789").is_ok());
    assert_eq!(parser.push(b"x"), overflow);
    // Short lines that add up to a long event.
    let mut parser = SseParser::new(16);
    assert!(parser.push(b"data: 0123456789\n").is_ok());
    assert_eq!(parser.push(b"data: 0123456789\n"), overflow);
    // The same at the stream's end.
    let mut parser = SseParser::new(16);
    assert!(parser.push(b"data: 0123456789\ndata: 01234567").is_ok());
    assert_eq!(parser.finish(), Err(Overflow { limit: 16 }));
    // Many short events are fine.
    let mut parser = SseParser::new(16);
    let mut events = Vec::new();
    for _ in 0..1000 {
        events.extend(parser.push(b"data: 0123456789\n\n").unwrap());
    }
    assert_eq!(events.len(), 1000);
}

/// The spec read plainly over the whole stream at once: split into lines,
/// then each line's steps, with the data buffer's trailing LF as the spec
/// keeps it. The oracle for the incremental parser.
fn reference(bytes: &[u8]) -> (Vec<SseEvent>, Option<String>, Option<u64>) {
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\r' || bytes[i] == b'\n' {
            lines.push(&bytes[start..i]);
            if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            start = i + 1;
        }
        i += 1;
    }
    // `bytes[start..]` never ended: not a line.
    let (mut events, mut data, mut kind, mut id, mut last_id, mut retry) = (
        Vec::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        None,
    );
    for line in lines {
        let line = String::from_utf8_lossy(line);
        if line.is_empty() {
            last_id.clone_from(&id);
            if data.is_empty() {
                kind.clear();
                continue;
            }
            data.pop();
            events.push(SseEvent {
                event: (!kind.is_empty()).then(|| std::mem::take(&mut kind)),
                data: std::mem::take(&mut data),
                id: (!last_id.is_empty()).then(|| last_id.clone()),
            });
            kind.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((&line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => {
                data.push_str(value);
                data.push('\n');
            }
            "event" => kind = value.to_owned(),
            "id" if !value.contains('\0') => id = value.to_owned(),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    retry = Some(ms);
                }
            }
            _ => {}
        }
    }
    (events, (!last_id.is_empty()).then_some(last_id), retry)
}

/// Streams made of the pieces SSE is made of, in any order.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let pieces: Vec<&[u8]> = vec![
        b"data",
        b"data: ",
        b"id:",
        b"id: 7",
        b"event:",
        b"event: end",
        b"retry:",
        b"retry: 15",
        b":",
        b" ",
        b"\r",
        b"\n",
        b"\r\n",
        b"\n\n",
        b"x",
        b"42",
        b"\0",
        "é".as_bytes(),
        BOM,
        b"\xff",
        b"{\"a\":1}",
    ];
    proptest::collection::vec(proptest::sample::select(pieces), 0..60)
        .prop_map(|pieces| pieces.concat())
}

/// `bytes` cut at `cuts` (indexes into it).
fn cut<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for point in points {
        pieces.push(&bytes[from..point]);
        from = point;
    }
    pieces.push(&bytes[from..]);
    pieces
}

proptest! {
    /// Wherever the network cuts the bytes, the same events come out: the
    /// ones the spec, read over the whole stream, gives.
    #[test]
    fn cuts_do_not_change_the_events(
        bytes in stream(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut parser = SseParser::new(usize::MAX);
        let mut events = Vec::new();
        for piece in cut(&bytes, &cuts) {
            events.extend(parser.push(piece).unwrap());
        }
        let (expected, last_id, retry) = reference(&bytes);
        prop_assert_eq!(events, expected);
        prop_assert_eq!(parser.last_event_id().map(str::to_owned), last_id);
        prop_assert_eq!(parser.retry_ms(), retry);
    }

    /// A limit gives the same outcome however the bytes are cut: the same
    /// events, or an overflow either way; and no event is past it.
    #[test]
    fn cuts_do_not_change_an_overflow(
        bytes in stream(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        limit in 4usize..40,
    ) {
        let run = |pieces: &[&[u8]]| -> Result<Vec<SseEvent>, Overflow> {
            let mut parser = SseParser::new(limit);
            let mut events = Vec::new();
            for piece in pieces {
                events.extend(parser.push(piece)?);
            }
            events.extend(parser.finish()?);
            Ok(events)
        };
        let whole = run(&[&bytes]);
        prop_assert_eq!(&run(&cut(&bytes, &cuts)), &whole);
        if let Ok(events) = whole {
            prop_assert!(events.iter().all(|event| event.data.len() <= limit));
        }
    }
}
