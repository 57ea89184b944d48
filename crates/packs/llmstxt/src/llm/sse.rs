//! Server-sent events, parsed as the bytes arrive: pure, no IO.
//!
//! Only what a chat completion stream needs: `data:` fields (several lines
//! of one event joined by `\n`), comments (`:` lines, the keep-alives some
//! servers send while the model thinks), and the three line endings of the
//! SSE spec (CRLF, LF, lone CR). A line split across two reads is held until
//! its end arrives, so the result never depends on where the network cut
//! the stream. Other fields (`event:`, `id:`, `retry:`) carry nothing a chat
//! stream needs and are skipped.
//!
//! Bounded: a line, or the data of one event, longer than the parser's
//! limit is an [`Overflow`], so a server sending one endless line (or an
//! endless event) costs at most the limit in memory.

/// What one dispatched event brought.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SseItem {
    /// An event's data: its `data:` lines, joined by `\n`.
    Data(String),
    /// A comment line (`: keep-alive`).
    Comment,
}

/// A line, or an event's data, longer than the parser's limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overflow {
    /// The limit, in bytes.
    pub(crate) limit: usize,
}

/// Bytes in, events out.
#[derive(Debug)]
pub(crate) struct SseParser {
    /// The start of a line whose end has not arrived.
    line: Vec<u8>,
    /// The event being read: its data lines so far.
    data: Option<String>,
    /// The last byte seen was a CR: a LF right after it ends no new line.
    after_cr: bool,
    /// Most bytes of a line, and of an event's data.
    limit: usize,
}

/// The default limit: 1 MiB.
impl Default for SseParser {
    fn default() -> SseParser {
        SseParser::new(1 << 20)
    }
}

impl SseParser {
    /// A parser that holds at most `limit` bytes of a line or an event.
    pub(crate) fn new(limit: usize) -> SseParser {
        SseParser {
            line: Vec::new(),
            data: None,
            after_cr: false,
            limit,
        }
    }

    /// Feeds `bytes`; returns the events they completed, in order, or an
    /// [`Overflow`] once a line or an event grows past the limit (the
    /// parser is then of no further use).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseItem>, Overflow> {
        let mut items = Vec::new();
        let overflow = Overflow { limit: self.limit };
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.line);
                    self.line_ended(&line, &mut items);
                    if self
                        .data
                        .as_ref()
                        .is_some_and(|data| data.len() > self.limit)
                    {
                        return Err(overflow);
                    }
                }
                _ if self.line.len() >= self.limit => return Err(overflow),
                _ => self.line.push(byte),
            }
        }
        Ok(items)
    }

    /// The stream ended: an event whose blank line never came is
    /// dispatched all the same (servers that close right after their last
    /// `data:` line), unless its last line made it too long.
    pub(crate) fn finish(&mut self) -> Result<Option<SseItem>, Overflow> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let mut items = Vec::new();
            self.line_ended(&line, &mut items);
            debug_assert!(items.iter().all(|item| *item == SseItem::Comment));
        }
        if self
            .data
            .as_ref()
            .is_some_and(|data| data.len() > self.limit)
        {
            return Err(Overflow { limit: self.limit });
        }
        Ok(self.data.take().map(SseItem::Data))
    }

    fn line_ended(&mut self, line: &[u8], items: &mut Vec<SseItem>) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                items.push(SseItem::Data(data));
            }
            return;
        }
        if line[0] == b':' {
            items.push(SseItem::Comment);
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field == b"data" {
            // Lines end at ASCII bytes, so a whole line never splits a
            // UTF-8 character; invalid bytes are replaced, not fatal.
            let value = String::from_utf8_lossy(value);
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.data = Some(value.into_owned()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseItem> {
        let mut parser = SseParser::default();
        let mut items: Vec<SseItem> = chunks
            .iter()
            .flat_map(|c| parser.push(c).unwrap())
            .collect();
        items.extend(parser.finish().unwrap());
        items
    }

    fn data(text: &str) -> SseItem {
        SseItem::Data(text.into())
    }

    #[test]
    fn events_comments_and_every_line_ending() {
        let stream = b"data: one\n\n: keep-alive\r\n\r\ndata: two\r\rdata:three\ndata: more\n\nevent: x\nid: 4\n\n";
        assert_eq!(
            parse_all(&[stream]),
            vec![
                data("one"),
                SseItem::Comment,
                data("two"),
                data("three\nmore")
            ]
        );
    }

    #[test]
    fn a_last_event_without_its_blank_line_is_kept() {
        assert_eq!(
            parse_all(&[b"data: a\n\ndata: [DONE]"]),
            vec![data("a"), data("[DONE]")]
        );
        assert_eq!(parse_all(&[b"data: a\n"]), vec![data("a")]);
    }

    #[test]
    fn a_crlf_split_between_reads_is_one_line_end() {
        assert_eq!(
            parse_all(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]),
            vec![data("a"), data("b")]
        );
    }

    #[test]
    fn a_line_or_an_event_past_the_limit_overflows() {
        let mut parser = SseParser::new(16);
        assert_eq!(parser.push(b"data: 0123456789\n").unwrap(), vec![]);
        assert_eq!(parser.push(&[b'a'; 17]), Err(Overflow { limit: 16 }));
        // Short lines that add up to a long event.
        let mut parser = SseParser::new(16);
        assert!(parser.push(b"data: 0123456789\n").is_ok());
        assert_eq!(
            parser.push(b"data: 0123456789\n"),
            Err(Overflow { limit: 16 })
        );
        // The same at the stream's end.
        let mut parser = SseParser::new(16);
        assert!(parser.push(b"data: 0123456789\ndata: 01234567").is_ok());
        assert_eq!(parser.finish(), Err(Overflow { limit: 16 }));
        // Exactly the limit is fine, and so are many short events.
        let mut parser = SseParser::new(16);
        let mut items = Vec::new();
        for _ in 0..1000 {
            items.extend(parser.push(b"data: 0123456789\n\n").unwrap());
        }
        assert_eq!(items.len(), 1000);
    }

    proptest! {
        /// Wherever the network cuts the bytes, the same events come out.
        #[test]
        fn cuts_do_not_change_the_events(
            events in proptest::collection::vec(("[a-z{}\":é ]{0,12}", 0usize..3, any::<bool>()), 0..12),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let endings = ["\n", "\r\n", "\r"];
            let mut stream = String::new();
            for (text, ending, comment) in &events {
                let end = endings[*ending];
                if *comment {
                    stream.push_str(&format!(": ping{end}"));
                }
                stream.push_str(&format!("data: {text}{end}{end}"));
            }
            let bytes = stream.as_bytes();
            let whole = parse_all(&[bytes]);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut from = 0;
            for point in points {
                pieces.push(&bytes[from..point]);
                from = point;
            }
            pieces.push(&bytes[from..]);
            prop_assert_eq!(&parse_all(&pieces), &whole);
            let datas: Vec<String> = whole.into_iter().filter_map(|item| match item {
                SseItem::Data(text) => Some(text),
                SseItem::Comment => None,
            }).collect();
            let expected: Vec<String> = events.iter().map(|(text, _, _)| text.clone()).collect();
            prop_assert_eq!(datas, expected);
        }
    }
}
