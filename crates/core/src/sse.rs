//! Server-sent events, parsed as the bytes arrive: the WHATWG "event stream
//! interpretation" (HTML, server-sent events), pure, no IO. The one SSE
//! parser in weir: the MCP client reads Streamable HTTP and run streams
//! with it, the llms.txt pack its model's answers.
//!
//! - Lines end at CRLF, LF or a lone CR, wherever the network cut the
//!   stream (a CR ending one read and the LF starting the next are one line
//!   end). One byte order mark at the very start is skipped.
//! - A line starting with `:` is a comment (a keep-alive) and is ignored.
//! - `field: value` — one space after the colon is stripped; a line with no
//!   colon is a field with an empty value. `data` appends a line to the
//!   event's data (lines joined by `\n`), `event` sets its type, `id` sets
//!   the last event ID (ignored if it holds NUL; it persists across events
//!   until the next `id`), `retry` sets the reconnection time (ASCII digits
//!   only, else ignored). Other fields are ignored.
//! - A blank line dispatches the event — unless it had no `data` line: then
//!   nothing is dispatched, but its `id` still counts.
//! - When the stream ends, an event whose blank line never came is
//!   discarded (WHATWG); [`SseParser::finish`] hands it out instead, for
//!   callers that accept servers closing right after their last `data:`.
//!
//! Bounded: the caller sets the most bytes of one line and of one event's
//! data; past it the parser stops with an [`Overflow`], so a server sending
//! one endless line (or an endless event) costs at most the limit in
//! memory.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type (`event:`); `None` for the default, `message` (no
    /// `event` field, or an empty one).
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last event ID when the event was dispatched (set by this event's
    /// `id:` or an earlier one of the same stream); `None` when empty.
    pub id: Option<String>,
}

/// A line, or an event's data, longer than the parser's limit. The parser
/// is of no further use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event line or event longer than {limit} bytes")]
pub struct Overflow {
    /// The limit, in bytes.
    pub limit: usize,
}

/// The byte order mark a stream may start with.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Bytes in, events out. Holds at most one incomplete line and one
/// incomplete event, each at most the limit.
#[derive(Clone, Debug)]
pub struct SseParser {
    /// Most bytes of a line, and of an event's data.
    limit: usize,
    /// The start of a line whose end has not arrived.
    line: Vec<u8>,
    /// The last byte seen was a CR: a LF right after it ends no new line.
    after_cr: bool,
    /// No line of this stream has ended yet (it may start with a BOM).
    first_line: bool,
    /// The event being read: its data so far, and whether it had a `data` line.
    data: String,
    has_data: bool,
    /// Its type so far.
    event: String,
    /// The ID the latest `id:` line of this stream set.
    id_buffer: String,
    /// The ID as of the last blank line (what a reconnection resumes from).
    last_event_id: String,
    retry_ms: Option<u64>,
}

impl SseParser {
    /// A parser that holds at most `limit` bytes of a line or of an event's
    /// data (`usize::MAX`: no bound).
    pub fn new(limit: usize) -> SseParser {
        SseParser {
            limit,
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: String::new(),
            has_data: false,
            event: String::new(),
            id_buffer: String::new(),
            last_event_id: String::new(),
            retry_ms: None,
        }
    }

    /// Feeds `bytes`; returns the events they completed, in order, or an
    /// [`Overflow`] once a line or an event grows past the limit.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, Overflow> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(&first) = rest.first() {
            if std::mem::take(&mut self.after_cr) && first == b'\n' {
                rest = &rest[1..];
                continue;
            }
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.extend_line(rest)?;
                break;
            };
            self.extend_line(&rest[..end])?;
            self.after_cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            let line = std::mem::take(&mut self.line);
            events.extend(self.line_ended(&line)?);
            // Keep the allocation for the next line.
            self.line = line;
            self.line.clear();
        }
        Ok(events)
    }

    /// The stream ended. Where WHATWG discards an event whose blank line
    /// never came, this dispatches it (its last line too, if that line had
    /// no line end), unless that makes it too long.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, Overflow> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.line_ended(&line)?;
        }
        Ok(self.dispatch())
    }

    /// The connection dropped and a new stream will follow: forgets the
    /// half-received line and event. The last event ID and the
    /// reconnection time stay, as an `EventSource`'s do.
    pub fn reset(&mut self) {
        *self = SseParser {
            last_event_id: std::mem::take(&mut self.last_event_id),
            retry_ms: self.retry_ms,
            ..SseParser::new(self.limit)
        };
    }

    /// The last event ID as of the last blank line: what to send as
    /// `Last-Event-ID` when reconnecting. `None` when empty.
    pub fn last_event_id(&self) -> Option<&str> {
        Some(self.last_event_id.as_str()).filter(|id| !id.is_empty())
    }

    /// The reconnection time the server last asked for (`retry:`), in ms.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    fn extend_line(&mut self, piece: &[u8]) -> Result<(), Overflow> {
        if piece.len() > self.limit - self.line.len() {
            return Err(self.overflow());
        }
        self.line.extend_from_slice(piece);
        Ok(())
    }

    fn overflow(&self) -> Overflow {
        Overflow { limit: self.limit }
    }

    /// A whole line, without its line end: the event it dispatched, if any.
    fn line_ended(&mut self, line: &[u8]) -> Result<Option<SseEvent>, Overflow> {
        let mut line = line;
        if std::mem::take(&mut self.first_line) {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        // Lines end at ASCII bytes, so a whole line never splits a UTF-8
        // character; invalid bytes are replaced, not fatal.
        let text = || String::from_utf8_lossy(value);
        match field {
            b"data" => {
                if std::mem::replace(&mut self.has_data, true) {
                    self.data.push('\n');
                }
                self.data.push_str(&text());
                if self.data.len() > self.limit {
                    return Err(self.overflow());
                }
            }
            b"event" => self.event = text().into_owned(),
            b"id" if !value.contains(&0) => self.id_buffer = text().into_owned(),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // More digits than a u64 holds: ignored, like any bad value.
                if let Ok(ms) = text().parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        Ok(None)
    }

    /// A blank line: the event, if it had data.
    fn dispatch(&mut self) -> Option<SseEvent> {
        self.last_event_id.clone_from(&self.id_buffer);
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: Some(event).filter(|event| !event.is_empty()),
            data: std::mem::take(&mut self.data),
            id: self.last_event_id().map(str::to_owned),
        })
    }
}

#[cfg(test)]
mod tests;
