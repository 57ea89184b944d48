//! A program's output, cut and decoded for `partial` events: whole lines in
//! chunks of bounded size, long lines split without breaking a character,
//! invalid UTF-8 made visible or the exact bytes in base64, a cap per run;
//! and the lines counted for progress. Pure: bytes in, chunks out.

use base64::Engine as _;

/// One of a program's two output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout = 0,
    Stderr = 1,
}

impl Stream {
    /// Its place in per-stream arrays: stdout first.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

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
    /// The exact bytes, base64-encoded: each stream encoded as one whole,
    /// chunk by chunk on 3-byte boundaries ([`Base64Stream`]).
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
pub(crate) fn decode(chunk: Vec<u8>) -> (String, bool) {
    match String::from_utf8(chunk) {
        Ok(text) => (text, false),
        Err(error) => (String::from_utf8_lossy(error.as_bytes()).into_owned(), true),
    }
}

/// One stream's bytes as base64, encoded chunk by chunk on 3-byte
/// boundaries: the 1 or 2 bytes past a chunk's last boundary wait for the
/// stream's next chunk. So the chunks' texts, joined (as the final result
/// joins a stream's partials, in one block and in its text field), are the
/// base64 of the whole stream, with padding only at its very end; and each
/// chunk decodes on its own too.
#[derive(Debug, Default)]
pub(crate) struct Base64Stream {
    carry: Vec<u8>,
}

impl Base64Stream {
    /// The base64 of the carried bytes and `bytes`, up to their last 3-byte
    /// boundary (`""` when that is less than 3 bytes); the rest is carried.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.carry.extend_from_slice(bytes);
        let whole = self.carry.len() - self.carry.len() % 3;
        let text = base64::engine::general_purpose::STANDARD.encode(&self.carry[..whole]);
        self.carry.drain(..whole);
        text
    }

    /// The carried bytes, padded: the end of the stream.
    pub(crate) fn finish(&mut self) -> Option<String> {
        (!self.carry.is_empty()).then(|| {
            base64::engine::general_purpose::STANDARD.encode(std::mem::take(&mut self.carry))
        })
    }
}

/// Counts a program's lines for progress by the rule the MCP server counts
/// a stream's text by when it turns partials into progress itself: a
/// chunk's lines are its newlines, plus one for an unfinished last line,
/// less one when it continues a line its stream left unfinished. Counting
/// alike, the server's count and the tool's own join without a jump when
/// the tool's first report takes over from the server's counting.
#[derive(Debug, Default)]
pub(crate) struct LineCount {
    /// Whether each stream (stdout, stderr) left a line unfinished.
    open: [bool; 2],
    total: u64,
}

impl LineCount {
    /// Counts `bytes`, the next output of `stream`; returns the lines it
    /// adds.
    pub(crate) fn add(&mut self, stream: Stream, bytes: &[u8]) -> u64 {
        let Some(&last) = bytes.last() else {
            return 0;
        };
        let newlines = bytes.iter().filter(|&&byte| byte == b'\n').count() as u64;
        let ends_open = last != b'\n';
        let open = &mut self.open[stream.index()];
        let added = newlines + u64::from(ends_open) - u64::from(*open);
        *open = ends_open;
        self.total += added;
        added
    }

    /// Lines so far.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}

/// The last line of `bytes` that is not blank, as a one-line status: lossy
/// UTF-8, trimmed, at most `max_chars` characters (a longer one is cut and
/// ends with `…`). Reads at most what those characters can take of the
/// line, however long it is.
pub(crate) fn last_line(bytes: &[u8], max_chars: usize) -> Option<String> {
    let line = bytes
        .split(|&byte| byte == b'\n')
        .rev()
        .find(|line| line.iter().any(|byte| !byte.is_ascii_whitespace()))?
        .trim_ascii_start();
    // A character is at most 4 bytes (an invalid byte becomes one U+FFFD):
    // this holds one more character than is shown, when there is one.
    let window = &line[..line.len().min(4 * (max_chars + 1))];
    let text = String::from_utf8_lossy(window);
    let text = text.trim_end();
    Some(match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some(_) => {
            let (cut, _) = text
                .char_indices()
                .nth(max_chars.saturating_sub(1))
                .unwrap_or((0, ' '));
            format!("{}…", &text[..cut])
        }
    })
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
    fn invalid_utf8_is_replaced_and_reported() {
        assert_eq!(decode(b"ok\n".to_vec()), ("ok\n".into(), false));
        assert_eq!(
            decode(vec![b'a', 0xff, b'\n']),
            ("a\u{fffd}\n".into(), true)
        );
    }

    /// However a stream is cut into chunks, their base64 texts joined are
    /// the base64 of the whole stream, and each decodes on its own.
    #[test]
    fn base64_chunks_join_into_the_whole_streams_base64() {
        use base64::engine::general_purpose::STANDARD;
        let stream: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for cuts in [
            &[1usize, 1, 1, 7][..],
            &[2, 5, 11],
            &[3],
            &[999, 1],
            &[1000],
        ] {
            let mut encoder = Base64Stream::default();
            let mut texts = Vec::new();
            let mut rest = &stream[..];
            for &cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (chunk, after) = rest.split_at(cut.min(rest.len()));
                texts.push(encoder.push(chunk));
                rest = after;
            }
            texts.extend(encoder.finish());
            assert_eq!(texts.concat(), STANDARD.encode(&stream), "{cuts:?}");
            let decoded: Vec<u8> = texts
                .iter()
                .flat_map(|text| STANDARD.decode(text).unwrap())
                .collect();
            assert_eq!(decoded, stream, "{cuts:?}");
        }
        let mut encoder = Base64Stream::default();
        assert_eq!(encoder.push(b"ab"), "");
        assert_eq!(encoder.push(b"c\xff"), "YWJj");
        assert_eq!(encoder.finish().unwrap(), "/w==");
        assert_eq!(encoder.finish(), None);
    }

    /// The MCP server's rule for a group's text (`projection.rs`, `Counter`),
    /// spelled out: `str::lines`, less one when the group's last text ended
    /// inside a line.
    fn server_count(texts: &[(Stream, &str)]) -> u64 {
        let mut open = [false; 2];
        let mut total = 0;
        for (stream, text) in texts {
            if text.is_empty() {
                continue;
            }
            total += text.lines().count() as u64 - u64::from(open[stream.index()]);
            open[stream.index()] = !text.ends_with('\n');
        }
        total
    }

    #[test]
    fn lines_are_counted_as_the_server_counts_them() {
        use Stream::{Stderr, Stdout};
        let cases: &[&[(Stream, &str)]] = &[
            &[(Stdout, "a\nb\n")],
            &[(Stdout, "a"), (Stdout, "b"), (Stdout, "c\n")],
            &[(Stdout, "a"), (Stderr, "x\n"), (Stdout, "b\nc")],
            &[(Stdout, "\n\n"), (Stdout, ""), (Stdout, "a\r\nb\r")],
            &[(Stderr, "one"), (Stderr, "\n"), (Stderr, "two\nthree")],
        ];
        for texts in cases {
            let mut count = LineCount::default();
            let added: u64 = texts
                .iter()
                .map(|(stream, text)| count.add(*stream, text.as_bytes()))
                .sum();
            assert_eq!(count.total(), server_count(texts), "{texts:?}");
            assert_eq!(added, count.total());
        }
    }

    #[test]
    fn the_status_is_the_last_line_with_something_on_it() {
        assert_eq!(last_line(b"one\n  two  \n\n \n", 100).unwrap(), "two");
        assert_eq!(last_line(b"partial", 100).unwrap(), "partial");
        assert_eq!(last_line(b"\n \n", 100), None);
        assert_eq!(last_line("éééé\n".as_bytes(), 3).unwrap(), "éé…");
        assert_eq!(last_line("ééé".as_bytes(), 3).unwrap(), "ééé");
        assert_eq!(last_line(b"a\xffb", 10).unwrap(), "a\u{fffd}b");
        // Only the start of a long line is read; leading blanks do not
        // count against it.
        let long = format!("{}{}\n", " ".repeat(1000), "→".repeat(100_000));
        assert_eq!(
            last_line(long.as_bytes(), 5).unwrap(),
            format!("{}…", "→".repeat(4))
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
