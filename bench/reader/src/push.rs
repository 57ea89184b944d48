//! HTTP/1.1 responses read from bytes pushed in as they arrive, for the
//! many-connection mode: a socket read hands its bytes to its connection's
//! [`ResponseReader`], which hands back the head, the body (chunked
//! encoding removed) in the pieces it came in, and the end of the response.
//!
//! The one-connection client (`http.rs`) pulls from a blocking socket
//! instead; this one cannot block, so every partial line (a head, a chunk
//! size) waits in `pending` until its end arrives.

use crate::http::Head;

/// What a response is made of, in order: one `Head`, any number of `Body`
/// pieces, one `End`.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    Head(Head),
    Body(&'a [u8]),
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading the status line and headers, up to the blank line.
    Head,
    /// A `Content-Length` body: bytes left.
    Length(usize),
    /// The line with the next chunk's size.
    ChunkSize,
    /// Inside a chunk: bytes left.
    ChunkData(usize),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// After the last chunk: trailer lines up to the blank one.
    Trailers,
}

/// One connection's responses, one after the other (keep-alive).
pub struct ResponseReader {
    state: State,
    /// The start of a line (head, chunk size, trailer) whose end has not
    /// come yet.
    pending: Vec<u8>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader {
            state: State::Head,
            pending: Vec::new(),
        }
    }
}

impl ResponseReader {
    /// Whether a response has begun and not ended.
    pub fn mid_response(&self) -> bool {
        self.state != State::Head || !self.pending.is_empty()
    }

    /// Takes the bytes that just arrived and hands every piece they
    /// complete to `each`.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        each: &mut impl FnMut(Piece) -> Result<(), String>,
    ) -> Result<(), String> {
        while !input.is_empty() {
            input = match self.state {
                State::Head => {
                    let Some((head, rest)) = self.take_until(input, b"\r\n\r\n") else {
                        return Ok(());
                    };
                    let head = parse_head(&head)?;
                    self.state = body_state(&head)?;
                    each(Piece::Head(head))?;
                    if self.state == State::Length(0) {
                        self.end(each)?;
                    }
                    rest
                }
                State::Length(left) | State::ChunkData(left) => {
                    let n = left.min(input.len());
                    each(Piece::Body(&input[..n]))?;
                    self.state = match self.state {
                        State::Length(_) if n == left => {
                            self.end(each)?;
                            State::Head
                        }
                        State::Length(_) => State::Length(left - n),
                        _ if n == left => State::ChunkEnd,
                        _ => State::ChunkData(left - n),
                    };
                    &input[n..]
                }
                State::ChunkSize => {
                    let Some((line, rest)) = self.take_until(input, b"\r\n") else {
                        return Ok(());
                    };
                    let text = String::from_utf8_lossy(&line);
                    let size = text.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size, 16)
                        .map_err(|_| format!("bad chunk size {text:?}"))?;
                    self.state = if size == 0 {
                        State::Trailers
                    } else {
                        State::ChunkData(size)
                    };
                    rest
                }
                State::ChunkEnd => {
                    let Some((line, rest)) = self.take_until(input, b"\r\n") else {
                        return Ok(());
                    };
                    if !line.is_empty() {
                        return Err("a chunk does not end with CRLF".into());
                    }
                    self.state = State::ChunkSize;
                    rest
                }
                State::Trailers => {
                    let Some((line, rest)) = self.take_until(input, b"\r\n") else {
                        return Ok(());
                    };
                    if line.is_empty() {
                        self.end(each)?;
                    }
                    rest
                }
            };
        }
        Ok(())
    }

    fn end(&mut self, each: &mut impl FnMut(Piece) -> Result<(), String>) -> Result<(), String> {
        self.state = State::Head;
        each(Piece::End)
    }

    /// The bytes up to `delimiter` (with what was pending before them), and
    /// what follows it; or `None`, with `input` kept until more comes.
    fn take_until<'a>(&mut self, input: &'a [u8], delimiter: &[u8]) -> Option<(Vec<u8>, &'a [u8])> {
        // The delimiter may straddle the pending bytes and the input.
        let overlap = self.pending.len().min(delimiter.len() - 1);
        let from = self.pending.len() - overlap;
        self.pending.extend_from_slice(input);
        match memchr::memmem::find(&self.pending[from..], delimiter) {
            Some(at) => {
                let end = from + at;
                let used = end + delimiter.len() - (self.pending.len() - input.len());
                let mut line = std::mem::take(&mut self.pending);
                line.truncate(end);
                Some((line, &input[used..]))
            }
            None => None,
        }
    }
}

fn parse_head(bytes: &[u8]) -> Result<Head, String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {text:?}"))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(Head { status, headers })
}

fn body_state(head: &Head) -> Result<State, String> {
    let chunked = head
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        return Ok(State::ChunkSize);
    }
    match head.header("content-length") {
        Some(length) => Ok(State::Length(
            length.parse().map_err(|_| "bad Content-Length")?,
        )),
        // Every response weir sends on a kept-alive connection has one or
        // the other; a body to the close is not something this reader waits for.
        None => Ok(State::Length(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the reader makes of `input` cut into the given pieces: each
    /// piece's kind, the body joined per response.
    fn read(pieces: &[&[u8]]) -> Result<Vec<(u16, Vec<u8>)>, String> {
        let mut reader = ResponseReader::default();
        let mut responses: Vec<(u16, Vec<u8>)> = Vec::new();
        let mut open = false;
        for piece in pieces {
            reader.feed(piece, &mut |p| {
                match p {
                    Piece::Head(head) => {
                        assert!(!open, "a head inside a response");
                        open = true;
                        responses.push((head.status, Vec::new()));
                    }
                    Piece::Body(bytes) => {
                        assert!(open, "a body outside a response");
                        responses.last_mut().unwrap().1.extend_from_slice(bytes)
                    }
                    Piece::End => {
                        assert!(open, "an end outside a response");
                        open = false;
                    }
                }
                Ok(())
            })?;
        }
        assert!(!open && !reader.mid_response(), "a response left open");
        Ok(responses)
    }

    const TWO: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
        transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=1\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n\
        HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";

    /// Keep-alive responses, chunked and not, cut at every byte and at
    /// every pair of bytes, come out the same.
    #[test]
    fn responses_split_anywhere_come_whole() {
        let want = vec![
            (200, b"hello, world".to_vec()),
            (202, Vec::new()),
            (200, b"body".to_vec()),
        ];
        assert_eq!(read(&[TWO]).unwrap(), want);
        for cut in 0..TWO.len() {
            assert_eq!(
                read(&[&TWO[..cut], &TWO[cut..]]).unwrap(),
                want,
                "cut at {cut}"
            );
        }
        for a in (0..TWO.len()).step_by(7) {
            for b in a..TWO.len() {
                let got = read(&[&TWO[..a], &TWO[a..b], &TWO[b..]]).unwrap();
                assert_eq!(got, want, "cuts at {a} and {b}");
            }
        }
        let bytes: Vec<&[u8]> = TWO.chunks(1).collect();
        assert_eq!(read(&bytes).unwrap(), want);
    }

    #[test]
    fn headers_are_read_in_lower_case() {
        let mut reader = ResponseReader::default();
        let mut session = None;
        reader
            .feed(
                b"HTTP/1.1 200 OK\r\nMcp-Session-Id: abc\r\nContent-Length: 0\r\n\r\n",
                &mut |p| {
                    if let Piece::Head(head) = p {
                        session = head.header("mcp-session-id").map(str::to_owned);
                    }
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(session.as_deref(), Some("abc"));
    }

    #[test]
    fn a_malformed_chunk_is_an_error() {
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n";
        assert!(read(&[bad]).is_err());
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(read(&[bad]).is_err());
        assert!(read(&[b"garbage\r\n\r\n"]).is_err());
    }
}
