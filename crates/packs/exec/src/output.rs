//! A program's output, cut and decoded for `partial` events: whole lines in
//! chunks of bounded size, long lines split without breaking a character,
//! invalid UTF-8 made visible, a cap per run. Pure: bytes in, chunks out.

use base64::Engine as _;

/// One of a program's two output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The name used as the `partial` event's group.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// How output bytes become text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8; invalid sequences become U+FFFD (and the run gets a warning).
    #[default]
    Utf8,
    /// The exact bytes, base64-encoded, chunk by chunk.
    Base64,
}

/// Cuts one stream's bytes into chunks: as many whole lines as fit in
/// `limit` bytes, and a line longer than that in pieces of at most `limit`
/// bytes that never split a UTF-8 character.
#[derive(Debug)]
pub(crate) struct LineCutter {
    pending: Vec<u8>,
    limit: usize,
}

impl LineCutter {
    /// A cutter making chunks of at most `limit` bytes (at least 4, so a
    /// chunk always holds a whole character).
    pub(crate) fn new(limit: usize) -> LineCutter {
        LineCutter {
            pending: Vec::new(),
            limit: limit.max(4),
        }
    }

    /// Adds bytes read from the stream; returns the chunks now complete.
    /// What is left (the start of a line) waits for more, and is never more
    /// than `limit` bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < self.pending.len() {
            let rest = &self.pending[start..];
            let window = &rest[..rest.len().min(self.limit)];
            let cut = match window.iter().rposition(|&b| b == b'\n') {
                Some(newline) => newline + 1,
                None if rest.len() >= self.limit => complete_prefix(window).max(1),
                None => break,
            };
            chunks.push(rest[..cut].to_vec());
            start += cut;
        }
        self.pending.drain(..start);
        chunks
    }

    /// Whether the start of a line is waiting for its end.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The waiting start of a line, up to its last complete character: sent
    /// after a pause, or before the other stream's output so that the order
    /// of the two is kept.
    pub(crate) fn take_pending(&mut self) -> Option<Vec<u8>> {
        let cut = complete_prefix(&self.pending);
        (cut > 0).then(|| self.pending.drain(..cut).collect())
    }

    /// Everything left, at the end of the stream.
    pub(crate) fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.pending.is_empty()).then(|| std::mem::take(&mut self.pending))
    }
}

/// The length of the longest prefix of `bytes` that does not end inside a
/// UTF-8 character: `bytes.len()` unless it ends with the first 1 to 3 bytes
/// of a multi-byte sequence. Bytes that are not UTF-8 at all count as whole.
pub(crate) fn complete_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: the start is further back
        }
        let needed = match byte {
            0b1100_0000..=0b1101_1111 => 2,
            0b1110_0000..=0b1110_1111 => 3,
            0b1111_0000..=0b1111_0111 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// A chunk as text, and whether it held invalid UTF-8 (replaced by U+FFFD).
pub(crate) fn decode(chunk: Vec<u8>, encoding: Encoding) -> (String, bool) {
    match encoding {
        Encoding::Base64 => (
            base64::engine::general_purpose::STANDARD.encode(chunk),
            false,
        ),
        Encoding::Utf8 => match String::from_utf8(chunk) {
            Ok(text) => (text, false),
            Err(error) => (String::from_utf8_lossy(error.as_bytes()).into_owned(), true),
        },
    }
}

/// The output cap of one run: how many bytes of output are shown; the rest
/// is counted and dropped.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: u64,
    shown: u64,
}

impl Budget {
    pub(crate) fn new(limit: u64) -> Budget {
        Budget { limit, shown: 0 }
    }

    /// Cuts `chunk` to what may still be shown (never inside a character)
    /// and counts it. Returns `None` once nothing more may be.
    pub(crate) fn admit(&mut self, mut chunk: Vec<u8>) -> Option<Vec<u8>> {
        let left = self.limit.saturating_sub(self.shown);
        if (chunk.len() as u64) > left {
            chunk.truncate(left as usize);
            chunk.truncate(complete_prefix(&chunk));
        }
        self.shown += chunk.len() as u64;
        (!chunk.is_empty()).then_some(chunk)
    }

    /// The cap.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes shown so far.
    pub(crate) fn shown(&self) -> u64 {
        self.shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(chunks: Vec<Vec<u8>>) -> Vec<String> {
        chunks
            .into_iter()
            .map(|c| String::from_utf8(c).unwrap())
            .collect()
    }

    #[test]
    fn whole_lines_are_grouped_up_to_the_limit_and_the_rest_waits() {
        let mut cutter = LineCutter::new(8);
        assert_eq!(texts(cutter.push(b"ab\ncd\nef")), ["ab\ncd\n"]);
        assert!(cutter.has_pending());
        assert_eq!(texts(cutter.push(b"\n")), ["ef\n"]);
        assert!(!cutter.has_pending());
        // Three short lines that do not fit one chunk of 8 bytes.
        assert_eq!(
            texts(cutter.push(b"1234\n5678\n9\n")),
            ["1234\n", "5678\n9\n"]
        );
    }

    #[test]
    fn a_long_line_is_split_at_the_limit_never_inside_a_character() {
        let mut cutter = LineCutter::new(4);
        // "aé" is 3 bytes; "aéé" 5: the cut at 4 would split the second é.
        let chunks = cutter.push("aééb\n".as_bytes());
        assert_eq!(texts(chunks), ["aé", "éb\n"]);
        let mut cutter = LineCutter::new(5);
        assert_eq!(texts(cutter.push(b"abcdefghijk")), ["abcde", "fghij"]);
        assert_eq!(cutter.finish().unwrap(), b"k");
        assert_eq!(cutter.finish(), None);
    }

    #[test]
    fn a_character_split_across_reads_is_put_back_together() {
        let mut cutter = LineCutter::new(16);
        let bytes = "→x\n".as_bytes(); // → is 3 bytes
        assert!(cutter.push(&bytes[..1]).is_empty());
        assert_eq!(cutter.take_pending(), None, "only part of a character");
        assert!(cutter.push(&bytes[1..2]).is_empty());
        assert_eq!(texts(cutter.push(&bytes[2..])), ["→x\n"]);
    }

    #[test]
    fn a_pending_line_is_taken_up_to_its_last_whole_character() {
        let mut cutter = LineCutter::new(16);
        let bytes = "ab→".as_bytes();
        assert!(cutter.push(&bytes[..4]).is_empty());
        assert_eq!(cutter.take_pending().unwrap(), b"ab");
        assert!(cutter.has_pending());
        assert_eq!(texts(cutter.push(&bytes[4..])), Vec::<String>::new());
        assert_eq!(cutter.take_pending().unwrap(), "→".as_bytes());
    }

    #[test]
    fn complete_prefix_backs_off_only_an_unfinished_sequence() {
        assert_eq!(complete_prefix(b""), 0);
        assert_eq!(complete_prefix(b"abc"), 3);
        assert_eq!(complete_prefix("a€".as_bytes()), 4);
        assert_eq!(complete_prefix(&"a€".as_bytes()[..3]), 1);
        assert_eq!(complete_prefix(&"😀".as_bytes()[..3]), 0);
        // Not UTF-8 at all: stray continuation bytes count as whole.
        assert_eq!(complete_prefix(&[0x80, 0x80, 0x80, 0x80]), 4);
        assert_eq!(complete_prefix(&[0xff]), 1);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_reported_and_base64_keeps_the_bytes() {
        assert_eq!(
            decode(b"ok\n".to_vec(), Encoding::Utf8),
            ("ok\n".into(), false)
        );
        assert_eq!(
            decode(vec![b'a', 0xff, b'\n'], Encoding::Utf8),
            ("a\u{fffd}\n".into(), true)
        );
        assert_eq!(
            decode(vec![b'a', 0xff, b'\n'], Encoding::Base64),
            ("Yf8K".into(), false)
        );
    }

    #[test]
    fn the_budget_cuts_at_the_cap_without_splitting_a_character() {
        let mut budget = Budget::new(5);
        assert_eq!(budget.admit(b"abc".to_vec()).unwrap(), b"abc");
        // 2 bytes left; "é" is 2 bytes, "xé" would need 3.
        assert_eq!(budget.admit("xé".as_bytes().to_vec()).unwrap(), b"x");
        assert_eq!(budget.shown(), 4);
        assert_eq!(budget.admit(b"yz".to_vec()).unwrap(), b"y");
        assert_eq!(budget.admit(b"more".to_vec()), None);
    }
}
