//! MCP's JSON forms of weir's data, serialized straight from the events.
//!
//! Why not build a `serde_json::Value` and serialize that: a streaming call
//! sends one partial result per item, and building a map per message (then
//! dropping it) cost more than everything else on the way to the client.
//! These borrow the event and write the bytes once. The partial result
//! notification, the one message sent per item, is written by hand, so that
//! text which needs no escaping (nearly all of it) is copied, not scanned
//! byte by byte.

use std::fmt::Write as _;
use std::io;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use weir_core::{Content, Partial};

/// A content block as MCP writes it (`mimeType`, a nested `resource`, ...).
pub(crate) struct McpContent<'a>(pub(crate) &'a Content);

impl Serialize for McpContent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            Content::Text { text } => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            Content::Image { data, mime_type } => {
                map.serialize_entry("type", "image")?;
                map.serialize_entry("data", data)?;
                map.serialize_entry("mimeType", mime_type)?;
            }
            Content::Audio { data, mime_type } => {
                map.serialize_entry("type", "audio")?;
                map.serialize_entry("data", data)?;
                map.serialize_entry("mimeType", mime_type)?;
            }
            Content::Resource {
                uri,
                mime_type,
                text,
                blob,
            } => {
                map.serialize_entry("type", "resource")?;
                // MCP's embedded resource holds either text or a blob, never
                // both; a resource without either is empty text.
                let resource = EmbeddedResource {
                    uri,
                    mime_type: mime_type.as_deref(),
                    text: blob.is_none().then(|| text.as_deref().unwrap_or_default()),
                    blob: blob.as_deref(),
                };
                map.serialize_entry("resource", &resource)?;
            }
            Content::ResourceLink {
                uri,
                name,
                mime_type,
            } => {
                map.serialize_entry("type", "resource_link")?;
                map.serialize_entry("uri", uri)?;
                map.serialize_entry("name", name)?;
                if let Some(mime_type) = mime_type {
                    map.serialize_entry("mimeType", mime_type)?;
                }
            }
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbeddedResource<'a> {
    uri: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mime_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blob: Option<&'a str>,
}

/// SEP-2998's `notifications/tools/partial_result` for one `partial` event:
/// the call's `seq`-th, under `token`, as JSON text.
pub(crate) fn partial_result_notification(token: &Value, seq: u64, partial: &Partial) -> String {
    let blocks: usize = partial.content.iter().map(block_size_hint).sum();
    let mut out = String::with_capacity(160 + blocks);
    out.push_str(
        r#"{"jsonrpc":"2.0","method":"notifications/tools/partial_result","params":{"partialResultToken":"#,
    );
    write_value(&mut out, token);
    out.push_str(r#","seq":"#);
    let _ = write!(out, "{seq}"); // writing to a String cannot fail
    out.push_str(r#","content":["#);
    for (index, block) in partial.content.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        match block {
            Content::Text { text } => {
                out.push_str(r#"{"type":"text","text":"#);
                write_json_str(&mut out, text);
                out.push('}');
            }
            other => write_json(&mut out, &McpContent(other)),
        }
    }
    out.push(']');
    if !partial.items.is_empty() || partial.group.is_some() {
        out.push_str(r#","structuredContent":"#);
        let structured = PartialStructured {
            items: &partial.items,
            group: partial.group.as_deref(),
        };
        write_json(&mut out, &structured);
    }
    out.push_str("}}");
    out
}

/// About how many bytes `block` takes as JSON, for sizing a buffer.
fn block_size_hint(block: &Content) -> usize {
    match block {
        Content::Text { text } => text.len() + 32,
        _ => 128,
    }
}

/// The structured part of a partial: its items and its group. The group
/// goes out also without items, so that a client can tell, say, a program's
/// stderr from its stdout.
#[derive(serde::Serialize)]
struct PartialStructured<'a> {
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    items: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
}

fn write_json(out: &mut String, value: &impl Serialize) {
    out.push_str(
        &serde_json::to_string(value).expect("MCP messages serialize: their maps have string keys"),
    );
}

/// `text` as a JSON string, exactly as serde_json writes it: copied whole
/// when nothing in it needs escaping, else escaped by serde_json.
fn write_json_str(out: &mut String, text: &str) {
    if needs_escape(text.as_bytes()) {
        write_json(out, &text);
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

/// Whether `bytes` hold a quote, a backslash or a control character (what
/// JSON strings must escape). Branch-free within each chunk, so that the
/// compiler checks a chunk at a time.
fn needs_escape(bytes: &[u8]) -> bool {
    bytes.chunks(32).any(|chunk| {
        chunk.iter().fold(false, |hit, &b| {
            hit | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    })
}

/// JSON text of `value`, as serde_json writes it, with the same fast path
/// for strings as partial results (a final result can hold 512 KiB of text).
pub(crate) fn to_json(value: &Value) -> String {
    // Sized up front: a final result can be half a megabyte, and growing
    // to it by doubling copies it again and touches fresh pages each time.
    let mut out = String::with_capacity(size_hint(value));
    write_value(&mut out, value);
    out
}

/// About how many bytes `value` takes as JSON (exact for plain strings and
/// short numbers), without writing it.
fn size_hint(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(values) => 2 + values.iter().map(|v| size_hint(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(key, v)| key.len() + 4 + size_hint(v))
                .sum::<usize>()
        }
        _ => 8,
    }
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::String(text) => write_json_str(out, text),
        Value::Array(values) => {
            out.push('[');
            for (index, value) in values.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(out, value);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (index, (key, value)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_json_str(out, key);
                out.push(':');
                write_value(out, value);
            }
            out.push('}');
        }
        scalar => write_json(out, scalar),
    }
}

/// How many bytes a text block takes as JSON besides its text:
/// `{"type":"text","text":""}`.
pub(crate) const TEXT_BLOCK_LEN: usize = 25;

/// How many bytes `block` takes as JSON (what [`McpContent`] writes).
pub(crate) fn content_len(block: &Content) -> usize {
    match block {
        Content::Text { text } => TEXT_BLOCK_LEN + text_json_len(text),
        other => json_len(&McpContent(other)),
    }
}

/// How many bytes `text` takes inside a JSON string (escaped, without the
/// quotes). JSON escapes character by character, so the length of two
/// texts joined is the sum of their lengths.
pub(crate) fn text_json_len(text: &str) -> usize {
    if needs_escape(text.as_bytes()) {
        json_len(&text) - 2
    } else {
        text.len()
    }
}

/// How many bytes `value` takes as JSON, without keeping them.
pub(crate) fn json_len(value: &impl Serialize) -> usize {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value)
        .expect("MCP messages serialize: their maps have string keys");
    counter.0
}

/// The first `max` bytes (about) of `value` as compact JSON, without
/// writing the rest: a one-line preview of a structured item that may be
/// a megabyte long. A character cut at the end shows as U+FFFD.
pub(crate) fn json_prefix(value: &Value, max: usize) -> String {
    struct Prefix {
        bytes: Vec<u8>,
        max: usize,
    }
    impl io::Write for Prefix {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let room = self.max - self.bytes.len();
            self.bytes
                .extend_from_slice(&bytes[..bytes.len().min(room)]);
            if bytes.len() > room {
                // Stops serde_json: the rest would be thrown away.
                return Err(io::ErrorKind::WriteZero.into());
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut prefix = Prefix {
        bytes: Vec::with_capacity(max.min(1024)),
        max,
    };
    let _ = serde_json::to_writer(&mut prefix, value); // cut short on purpose
    String::from_utf8_lossy(&prefix.bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_prefix_stops_at_its_length() {
        let item = json!(["a.rs", 3, "x".repeat(10_000)]);
        assert_eq!(json_prefix(&item, 16), r#"["a.rs",3,"xxxxx"#);
        assert_eq!(json_prefix(&json!([1, "é"]), 100), r#"[1,"é"]"#);
    }

    #[test]
    fn content_blocks_take_mcp_field_names() {
        let blocks = [
            Content::text("hi"),
            Content::Image {
                data: "iVBO".into(),
                mime_type: "image/png".into(),
            },
            Content::Resource {
                uri: "file:///a".into(),
                mime_type: None,
                text: None,
                blob: None,
            },
            Content::Resource {
                uri: "file:///b".into(),
                mime_type: Some("application/octet-stream".into()),
                text: Some("ignored".into()),
                blob: Some("AAE=".into()),
            },
            Content::ResourceLink {
                uri: "weir://runs/r".into(),
                name: "run r".into(),
                mime_type: None,
            },
        ];
        let json: Vec<Value> = blocks
            .iter()
            .map(|block| serde_json::to_value(McpContent(block)).unwrap())
            .collect();
        assert_eq!(
            Value::from(json),
            json!([
                { "type": "text", "text": "hi" },
                { "type": "image", "data": "iVBO", "mimeType": "image/png" },
                { "type": "resource", "resource": { "uri": "file:///a", "text": "" } },
                { "type": "resource", "resource": {
                    "uri": "file:///b", "mimeType": "application/octet-stream", "blob": "AAE=" } },
                { "type": "resource_link", "uri": "weir://runs/r", "name": "run r" },
            ])
        );
    }

    #[test]
    fn a_partial_carries_structure_only_when_it_has_some() {
        let token = json!("t");
        let plain = Partial {
            content: vec![Content::text("a")],
            ..Partial::default()
        };
        let grouped = Partial {
            group: Some("stderr".into()),
            ..plain.clone()
        };
        let json = |partial: &Partial| -> Value {
            serde_json::from_str(&partial_result_notification(&token, 7, partial)).unwrap()
        };
        assert_eq!(
            json(&plain),
            json!({
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": { "partialResultToken": "t", "seq": 7,
                            "content": [{ "type": "text", "text": "a" }] },
            })
        );
        assert_eq!(
            json(&grouped)["params"]["structuredContent"],
            json!({ "group": "stderr" })
        );
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let long_plain = "x".repeat(100);
        let long_quoted = format!("{}\"{}", "x".repeat(40), "y".repeat(40));
        for text in [
            "",
            "plain ascii",
            "é ü 中文 🙂",
            "quote \" here",
            "back\\slash",
            "new\nline\ttab\r",
            "\u{0}\u{1f}\u{7f}",
            &long_plain,
            &long_quoted,
        ] {
            let mut out = String::new();
            write_json_str(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    proptest::proptest! {
        /// Any text, also with escapes at chunk edges, comes out as serde_json's.
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(text in "(\\PC|[\\x00-\\x1f\"\\\\]){0,80}") {
            let mut out = String::new();
            write_json_str(&mut out, &text);
            proptest::prop_assert_eq!(
                out,
                serde_json::to_string(&text).unwrap()
            );
        }
    }

    #[test]
    fn a_partial_with_every_kind_of_content_round_trips() {
        let partial = Partial {
            content: vec![
                Content::text("line \"one\"\n"),
                Content::Audio {
                    data: "UklG".into(),
                    mime_type: "audio/wav".into(),
                },
            ],
            items: vec![json!({ "path": "a.rs", "line": 3 })],
            group: None,
        };
        let json: Value =
            serde_json::from_str(&partial_result_notification(&json!(42), 0, &partial)).unwrap();
        assert_eq!(
            json["params"],
            json!({
                "partialResultToken": 42,
                "seq": 0,
                "content": [
                    { "type": "text", "text": "line \"one\"\n" },
                    { "type": "audio", "data": "UklG", "mimeType": "audio/wav" },
                ],
                "structuredContent": { "items": [{ "path": "a.rs", "line": 3 }] },
            })
        );
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let value = json!({
            "text": "é\n\"", "plain": "abc", "n": [1, -2.5, 1e300, null, true, false],
            "nested": { "a\u{1}": [[], {}], "": "" },
        });
        assert_eq!(to_json(&value), serde_json::to_string(&value).unwrap());
        assert_eq!(json_len(&value), to_json(&value).len());
    }

    #[test]
    fn content_len_is_the_length_of_the_block_as_json() {
        for block in [
            Content::text(""),
            Content::text("plain"),
            Content::text("needs \"escaping\"\n"),
            Content::ResourceLink {
                uri: "weir://runs/r".into(),
                name: "r".into(),
                mime_type: Some("application/json".into()),
            },
        ] {
            let json = serde_json::to_string(&McpContent(&block)).unwrap();
            assert_eq!(content_len(&block), json.len(), "{json}");
        }
        let (a, b) = ("tab\there ", "\"quoted\" é\n");
        assert_eq!(
            text_json_len(a) + text_json_len(b),
            serde_json::to_string(&format!("{a}{b}")).unwrap().len() - 2
        );
    }
}
