//! Server-sent events, parsed incrementally from a byte stream (the
//! WHATWG "event stream interpretation", minus what MCP never uses).

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `id:` field of this event, if it had one.
    pub(crate) id: Option<String>,
    /// The `event:` field (`message` when absent).
    pub(crate) event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub(crate) data: String,
    /// A `retry:` field: how long to wait before reconnecting, in ms.
    pub(crate) retry_ms: Option<u64>,
}

/// Feeds bytes in, takes complete events out. Holds at most one incomplete
/// line and one incomplete event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a following `\n` belongs to it.
    after_cr: bool,
    pending: SseEvent,
    /// Whether `pending` has any field yet.
    started: bool,
    has_data: bool,
}

impl SseParser {
    /// Parses `bytes`, returning the events they complete.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line) {
                        events.push(event);
                    }
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    /// Forgets a half-received event, e.g. when the connection dropped.
    pub(crate) fn reset(&mut self) {
        *self = SseParser::default();
    }

    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            // A blank line dispatches the event, if it has any field.
            let started = std::mem::take(&mut self.started);
            self.has_data = false;
            let event = std::mem::take(&mut self.pending);
            return started.then_some(event);
        }
        if line[0] == b':' {
            return None; // a comment (keep-alive)
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_owned()),
            "event" => self.pending.event = Some(value.to_owned()),
            "retry" => match value.parse() {
                Ok(ms) => self.pending.retry_ms = Some(ms),
                Err(_) => return None,
            },
            _ => return None,
        }
        self.started = true;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(text: &str, piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        for chunk in text.as_bytes().chunks(piece) {
            events.extend(parser.feed(chunk));
        }
        events
    }

    #[test]
    fn events_are_the_same_however_the_bytes_are_cut() {
        let text = ": keep-alive\r\n\r\nid: r.1\r\ndata: {\"a\":1}\r\n\r\nevent: done\ndata: x\ndata:y\n\nretry: 1500\nid: 7\ndata:\n\n";
        let expected = vec![
            SseEvent {
                id: Some("r.1".into()),
                data: "{\"a\":1}".into(),
                ..SseEvent::default()
            },
            SseEvent {
                event: Some("done".into()),
                data: "x\ny".into(),
                ..SseEvent::default()
            },
            SseEvent {
                id: Some("7".into()),
                retry_ms: Some(1500),
                ..SseEvent::default()
            },
        ];
        for piece in 1..text.len() {
            assert_eq!(parse_in_pieces(text, piece), expected, "pieces of {piece}");
        }
    }

    #[test]
    fn a_reset_drops_the_half_received_event() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b"id: 1\ndata: {\"half\":").is_empty());
        parser.reset();
        let events = parser.feed(b"id: 2\ndata: {}\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].id.as_deref(), Some("2"));
        assert_eq!(events[0].data, "{}");
    }
}
