//! How an event's body is stored (`events.body`): a partial result made only
//! of text blocks, what a streaming tool writes once per item, as a compact
//! BLOB; every other event as its JSON text (schema 8; before, every body
//! was JSON text, and such rows read as they always did).
//!
//! Why: serde_json scans every byte of a string for characters to escape
//! when it writes it, and again when it reads it back. Streaming 1 KB items
//! into SQLite, writing each body as JSON was 13% of the server's CPU
//! samples (`perf`), the escape scan alone 11%. The blob copies the text.
//!
//! The blob: one byte saying its form ([`TEXT_PARTIAL`]), then each block as
//! its length (4 bytes, little-endian) and its UTF-8 bytes. It decodes to
//! the same [`EventKind`] the JSON would.

use rusqlite::types::ValueRef;
use weir_core::{Content, EventKind, Partial};

/// The form byte of a partial result made only of text blocks, with no
/// structured items and no group.
const TEXT_PARTIAL: u8 = 1;

/// An event's body, encoded into a buffer kept between events.
pub(crate) enum Body<'a> {
    /// JSON text: every event the compact form does not cover.
    Json(&'a str),
    /// The compact form.
    Compact(&'a [u8]),
}

impl rusqlite::ToSql for Body<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match self {
            Body::Json(text) => ValueRef::Text(text.as_bytes()),
            Body::Compact(bytes) => ValueRef::Blob(bytes),
        }))
    }
}

/// Encodes `kind` into `buffer` (cleared first).
pub(crate) fn encode<'a>(kind: &EventKind, buffer: &'a mut Vec<u8>) -> Body<'a> {
    buffer.clear();
    if let Some(texts) = text_blocks(kind) {
        buffer.push(TEXT_PARTIAL);
        for text in texts {
            // A block over 4 GiB is not a block a log holds; JSON it is.
            let Ok(len) = u32::try_from(text.len()) else {
                return json(kind, buffer);
            };
            buffer.extend_from_slice(&len.to_le_bytes());
            buffer.extend_from_slice(text.as_bytes());
        }
        return Body::Compact(buffer);
    }
    json(kind, buffer)
}

fn json<'a>(kind: &EventKind, buffer: &'a mut Vec<u8>) -> Body<'a> {
    buffer.clear();
    serde_json::to_writer(&mut *buffer, kind).expect("events serialize");
    Body::Json(std::str::from_utf8(buffer).expect("JSON is UTF-8"))
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

/// Decodes a stored body, JSON text or compact BLOB.
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

    use super::{Body, decode, encode};

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
            Body::Compact(blob) => (true, decode(ValueRef::Blob(blob))),
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
}
