//! How events are stored in `events` rows: one event per row, or (schema 9)
//! a run of consecutive events in one row.
//!
//! One event's body is a partial result made only of text blocks, what a
//! streaming tool writes once per item, as a compact BLOB; every other
//! event as its JSON text (schema 8; before, every body was JSON text, and
//! such rows read as they always did). Why: serde_json scans every byte of
//! a string for characters to escape when it writes it, and again when it
//! reads it back. Streaming 1 KB items into SQLite, writing each body as
//! JSON was 13% of the server's CPU samples (`perf`), the escape scan alone
//! 11%. The blob copies the text: one byte saying its form
//! ([`TEXT_PARTIAL`]), then each block as its length (4 bytes,
//! little-endian) and its UTF-8 bytes.
//!
//! Why several events in a row: each row costs SQLite a b-tree insert into
//! the table and another into its `(run_key, seq)` index, and a row's cell
//! its header, whatever the row holds; at 100-byte items that was most of
//! the store's CPU. An append now stores its batch as rows of up to
//! [`ROW_EVENTS`] events and about [`ROW_BYTES`] bytes ([`RUN_OF_EVENTS`]
//! form), so a read from the middle of a batch (a resume) decodes little it
//! does not need. Such a row's bytes live in a segment file, the row points
//! there (`segments.rs`). A run's `started` event (seq 0) is always a row
//! of its own, JSON text: a run's summary reads its arguments from there.

use rusqlite::types::ValueRef;
use weir_core::{Content, EventKind, Partial, RunEvent, RunId, Seq};

/// The form byte of a partial result made only of text blocks, with no
/// structured items and no group.
const TEXT_PARTIAL: u8 = 1;

/// The form byte of a row holding consecutive events, the first at the
/// row's seq: each as its ts (8 bytes, little-endian), whether its body is
/// JSON ([`JSON_BODY`]) or compact ([`COMPACT_BODY`]), its body's length (4
/// bytes, little-endian) and its body.
const RUN_OF_EVENTS: u8 = 2;
const JSON_BODY: u8 = 0;
const COMPACT_BODY: u8 = 1;

/// Most events in one row.
pub(crate) const ROW_EVENTS: usize = 64;

/// About the most bytes in one row of several events (an event larger than
/// this is a row of its own).
pub(crate) const ROW_BYTES: usize = 32 * 1024;

/// A row's body, encoded into a buffer kept between rows.
pub(crate) enum Body<'a> {
    /// JSON text: one event the compact form does not cover.
    Json(&'a str),
    /// One event in the compact form, or a pointer into a segment.
    Compact(&'a [u8]),
    /// Several events: kept in a segment (`segments.rs`), the row points
    /// there.
    Several(&'a [u8]),
}

impl rusqlite::ToSql for Body<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match self {
            Body::Json(text) => ValueRef::Text(text.as_bytes()),
            Body::Compact(bytes) | Body::Several(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

/// Encodes the next row of `events` (not empty) into `buffer` (cleared
/// first): returns how many events it holds and its body.
pub(crate) fn encode_row<'a>(events: &[RunEvent], buffer: &'a mut Vec<u8>) -> (usize, Body<'a>) {
    let first = &events[0];
    if first.seq == 0 || events.len() == 1 {
        return (1, encode(&first.kind, buffer));
    }
    buffer.clear();
    buffer.push(RUN_OF_EVENTS);
    let mut taken = 0;
    for event in events.iter().take(ROW_EVENTS) {
        if taken > 0 && buffer.len() >= ROW_BYTES {
            break;
        }
        buffer.extend_from_slice(&event.ts.to_le_bytes());
        let header = buffer.len();
        buffer.extend_from_slice(&[0; 5]);
        let compact = encode_into(&event.kind, buffer);
        let len = u32::try_from(buffer.len() - header - 5).expect("an event under 4 GiB");
        buffer[header] = if compact { COMPACT_BODY } else { JSON_BODY };
        buffer[header + 1..header + 5].copy_from_slice(&len.to_le_bytes());
        taken += 1;
    }
    (taken, Body::Several(buffer))
}

/// Encodes one event's body into `buffer` (cleared first).
pub(crate) fn encode<'a>(kind: &EventKind, buffer: &'a mut Vec<u8>) -> Body<'a> {
    buffer.clear();
    if encode_into(kind, buffer) {
        Body::Compact(buffer)
    } else {
        Body::Json(std::str::from_utf8(buffer).expect("JSON is UTF-8"))
    }
}

/// Appends one event's body to `buffer`: compact when it can be (returns
/// true), else JSON text.
fn encode_into(kind: &EventKind, buffer: &mut Vec<u8>) -> bool {
    let start = buffer.len();
    if let Some(texts) = text_blocks(kind) {
        buffer.push(TEXT_PARTIAL);
        let mut fits = true;
        for text in texts {
            // A block over 4 GiB is not a block a log holds; JSON it is.
            let Ok(len) = u32::try_from(text.len()) else {
                fits = false;
                break;
            };
            buffer.extend_from_slice(&len.to_le_bytes());
            buffer.extend_from_slice(text.as_bytes());
        }
        if fits {
            return true;
        }
        buffer.truncate(start);
    }
    serde_json::to_writer(&mut *buffer, kind).expect("events serialize");
    false
}

/// The texts of a partial result made only of text blocks (at least one),
/// with no items and no group: what the compact form holds.
fn text_blocks(kind: &EventKind) -> Option<impl Iterator<Item = &str>> {
    let EventKind::Partial(partial) = kind else {
        return None;
    };
    // Every field named, so a field added to `Partial` fails to compile
    // here rather than vanish from stored items.
    let Partial {
        content,
        items,
        group,
    } = partial;
    let only_text = !content.is_empty()
        && items.is_empty()
        && group.is_none()
        && content
            .iter()
            .all(|block| matches!(block, Content::Text { .. }));
    only_text.then(|| {
        content.iter().map(|block| match block {
            Content::Text { text } => text.as_str(),
            _ => unreachable!("checked above"),
        })
    })
}

/// What a read wants: `run_id`'s events from seq `from` on, `limit` of them.
pub(crate) struct Wanted<'a> {
    pub(crate) run_id: &'a RunId,
    pub(crate) from: Seq,
    pub(crate) limit: usize,
}

/// Decodes the events of the row at `seq` (stamped `ts`) that `wanted`
/// asks for into `events`, until it holds `wanted.limit`. Returns the seq
/// after the row's last event, or `None` once `events` is full. Events
/// before `wanted.from` are skipped undecoded.
pub(crate) fn decode_row(
    seq: Seq,
    ts: u64,
    body: ValueRef<'_>,
    wanted: &Wanted<'_>,
    events: &mut Vec<RunEvent>,
) -> Result<Option<Seq>, String> {
    let mut keep = |seq, ts, kind| {
        events.push(RunEvent {
            run_id: wanted.run_id.clone(),
            seq,
            ts,
            kind,
        });
        events.len() < wanted.limit
    };
    let from = wanted.from;
    let ValueRef::Blob([RUN_OF_EVENTS, packed @ ..]) = body else {
        if seq >= from && !keep(seq, ts, decode(body)?) {
            return Ok(None);
        }
        return Ok(Some(seq + 1));
    };
    let (mut next, mut rest) = (seq, packed);
    while !rest.is_empty() {
        let (ts, after) = rest
            .split_first_chunk::<8>()
            .ok_or("an event's ts is cut short")?;
        let Some((&[form, l0, l1, l2, l3], after)) = after.split_first_chunk::<5>() else {
            return Err("an event's header is cut short".into());
        };
        let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
        if after.len() < len {
            return Err(format!("event {next} is cut short"));
        }
        let (bytes, after) = after.split_at(len);
        if next >= from {
            let kind = match form {
                JSON_BODY => decode(ValueRef::Text(bytes)),
                COMPACT_BODY => decode(ValueRef::Blob(bytes)),
                other => Err(format!("a body of unknown form {other}")),
            }
            .map_err(|error| format!("event {next}: {error}"))?;
            if !keep(next, u64::from_le_bytes(*ts), kind) {
                return Ok(None);
            }
        }
        next += 1;
        rest = after;
    }
    if next == seq {
        return Err("a row of events that holds none".into());
    }
    Ok(Some(next))
}

/// Decodes one stored event's body, JSON text or compact BLOB.
pub(crate) fn decode(body: ValueRef<'_>) -> Result<EventKind, String> {
    match body {
        ValueRef::Text(json) => serde_json::from_slice(json).map_err(|error| error.to_string()),
        ValueRef::Blob(blob) => decode_compact(blob),
        other => Err(format!("a body of type {}", other.data_type())),
    }
}

fn decode_compact(blob: &[u8]) -> Result<EventKind, String> {
    let Some((&TEXT_PARTIAL, mut rest)) = blob.split_first() else {
        return Err(format!(
            "a body of unknown form {:?}",
            blob.first().copied()
        ));
    };
    let mut content = Vec::new();
    while !rest.is_empty() {
        let (len, after) = rest
            .split_first_chunk::<4>()
            .ok_or("a text block's length is cut short")?;
        let len = u32::from_le_bytes(*len) as usize;
        if after.len() < len {
            return Err("a text block is cut short".into());
        }
        let (text, after) = after.split_at(len);
        let text = String::from_utf8(text.to_vec()).map_err(|_| "a text block is not UTF-8")?;
        content.push(Content::Text { text });
        rest = after;
    }
    if content.is_empty() {
        return Err("a partial result with no blocks".into());
    }
    Ok(EventKind::Partial(Partial {
        content,
        ..Partial::default()
    }))
}

#[cfg(test)]
mod tests {
    use rusqlite::types::ValueRef;
    use serde_json::json;
    use weir_core::{Content, EventKind, Log, LogLevel, LogStream, Partial};

    use weir_core::{RunEvent, RunId};

    use super::{Body, ROW_BYTES, ROW_EVENTS, Wanted, decode, decode_row, encode, encode_row};

    fn text(t: &str) -> Content {
        Content::Text { text: t.into() }
    }

    fn partial(content: Vec<Content>) -> EventKind {
        EventKind::Partial(Partial {
            content,
            ..Partial::default()
        })
    }

    fn round_trip(kind: &EventKind) -> (bool, EventKind) {
        let mut buffer = Vec::new();
        let (compact, decoded) = match encode(kind, &mut buffer) {
            Body::Json(json) => (false, decode(ValueRef::Text(json.as_bytes()))),
            Body::Compact(blob) | Body::Several(blob) => (true, decode(ValueRef::Blob(blob))),
        };
        (compact, decoded.unwrap())
    }

    #[test]
    fn text_partials_are_compact_and_decode_to_what_was_written() {
        for content in [
            vec![text("00000042:xxxx")],
            vec![text(""), text("two blocks, é ü 😀")],
            vec![text("needs \"escaping\" in JSON\n\\ and \u{1}")],
        ] {
            let kind = partial(content);
            assert_eq!(round_trip(&kind), (true, kind));
        }
    }

    #[test]
    fn every_other_event_is_json() {
        let image = Content::Image {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        };
        let grouped = EventKind::Partial(Partial {
            content: vec![text("x")],
            group: Some("g".into()),
            ..Partial::default()
        });
        let with_items = EventKind::Partial(Partial {
            content: vec![text("x")],
            items: vec![json!({"a": 1})],
            ..Partial::default()
        });
        let log = EventKind::Log(Log {
            level: LogLevel::Info,
            stream: LogStream::Stdout,
            text: "a line".into(),
        });
        for kind in [
            partial(vec![]),
            partial(vec![text("x"), image]),
            grouped,
            with_items,
            log,
        ] {
            assert_eq!(round_trip(&kind), (false, kind));
        }
    }

    #[test]
    fn a_damaged_blob_is_an_error_not_a_panic() {
        for blob in [
            &b""[..],
            &[9, 0, 0, 0, 0][..],
            &[1][..],
            &[1, 5, 0, 0, 0, b'a'][..],
            &[1, 1, 0][..],
            &[1, 1, 0, 0, 0, 0xff][..],
        ] {
            assert!(decode(ValueRef::Blob(blob)).is_err(), "{blob:?}");
        }
    }

    fn stream(count: u64, size: usize) -> Vec<RunEvent> {
        let run_id = RunId::parse("r").unwrap();
        (0..count)
            .map(|seq| RunEvent {
                run_id: run_id.clone(),
                seq,
                ts: 1_000 + seq * 7,
                kind: if seq % 5 == 3 {
                    // A JSON event amid the compact ones.
                    EventKind::Log(Log {
                        level: LogLevel::Info,
                        stream: LogStream::Stderr,
                        text: format!("line {seq} \"quoted\""),
                    })
                } else {
                    partial(vec![text(&format!("{seq:08}:{}", "é".repeat(size / 2)))])
                },
            })
            .collect()
    }

    /// Stores `events` as `writes.rs` does: (first seq, ts, body) per row.
    fn rows_of(events: &[RunEvent]) -> Vec<(u64, u64, Vec<u8>, bool)> {
        let (mut rows, mut rest, mut buffer) = (Vec::new(), events, Vec::new());
        while let [first, ..] = rest {
            let (held, body) = encode_row(rest, &mut buffer);
            let (bytes, json) = match body {
                Body::Json(text) => (text.as_bytes().to_vec(), true),
                Body::Compact(blob) | Body::Several(blob) => (blob.to_vec(), false),
            };
            rows.push((first.seq, first.ts, bytes, json));
            rest = &rest[held..];
        }
        rows
    }

    /// Reads `rows` from seq `from`, up to `limit` events, as `queries.rs` does.
    fn read(rows: &[(u64, u64, Vec<u8>, bool)], from: u64, limit: usize) -> Vec<RunEvent> {
        let run_id = RunId::parse("r").unwrap();
        let mut events = Vec::new();
        let start = rows.iter().rposition(|row| row.0 <= from).unwrap_or(0);
        for (seq, ts, bytes, json) in &rows[start..] {
            let body = if *json {
                ValueRef::Text(bytes)
            } else {
                ValueRef::Blob(bytes)
            };
            let wanted = Wanted {
                run_id: &run_id,
                from,
                limit,
            };
            if decode_row(*seq, *ts, body, &wanted, &mut events)
                .unwrap()
                .is_none()
            {
                break;
            }
        }
        events
    }

    #[test]
    fn a_batch_is_a_few_rows_and_reads_from_any_seq_are_exact() {
        let events = stream(300, 100);
        let rows = rows_of(&events);
        // `started`'s place (seq 0) is a row of its own; then full rows.
        assert_eq!(rows[0].0, 0);
        assert_eq!(rows[1].0, 1);
        assert_eq!(rows[2].0, 1 + ROW_EVENTS as u64);
        assert_eq!(rows.len(), 1 + 299usize.div_ceil(ROW_EVENTS));
        for from in [0, 1, 2, 63, 64, 65, 200, 299, 300, 1_000] {
            for limit in [1, 7, 64, 1_000] {
                let want: Vec<_> = events
                    .iter()
                    .skip(from as usize)
                    .take(limit)
                    .cloned()
                    .collect();
                assert_eq!(read(&rows, from, limit), want, "from {from}, limit {limit}");
            }
        }
    }

    #[test]
    fn a_row_holds_about_row_bytes_and_a_large_event_alone() {
        let events = stream(200, 1_000);
        let rows = rows_of(&events);
        // Every row but `started`'s and the last is full: it reached the
        // row's bytes with its last event, not before.
        let full = &rows[1..rows.len() - 1];
        assert!(!full.is_empty());
        for row in full {
            assert!(
                (ROW_BYTES..ROW_BYTES + 1_100).contains(&row.2.len()),
                "{}",
                row.2.len()
            );
        }
        assert_eq!(read(&rows, 0, 1_000), events);

        let mut large = stream(4, 2 * ROW_BYTES);
        large.remove(0);
        let rows = rows_of(&large);
        assert_eq!(rows.len(), 3, "each over the row's bytes: a row each");
        assert_eq!(read(&rows, 0, 10), large);
    }

    #[test]
    fn a_damaged_row_of_events_is_an_error_not_a_panic() {
        let events = stream(4, 10);
        let rows = rows_of(&events[1..]);
        let whole = &rows[0].2;
        let run_id = RunId::parse("r").unwrap();
        let wanted = Wanted {
            run_id: &run_id,
            from: 0,
            limit: 100,
        };
        for cut in [1, 5, 9, 13, whole.len() - 1] {
            let blob = &whole[..cut];
            let result = decode_row(1, 0, ValueRef::Blob(blob), &wanted, &mut Vec::new());
            assert!(result.is_err(), "cut at {cut}: {result:?}");
        }
        let mut unknown = whole.clone();
        unknown[9] = 7;
        assert!(decode_row(1, 0, ValueRef::Blob(&unknown), &wanted, &mut Vec::new()).is_err());
    }
}
