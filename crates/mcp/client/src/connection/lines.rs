//! Lines read from a server with a bound on their length: a server that
//! never ends a line must not take the client's memory with it.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// A line, its `\n` included (the last one may have none).
    Line,
    /// The end of the stream, nothing read.
    End,
    /// A line longer than the bound: what was read of it is dropped, and
    /// the rest stays unread (the stream is of no further use).
    TooLong,
}

/// Reads one line into `line` (cleared first), at most `max` bytes. Read
/// through tokio's `read_until` (it finds the line's end with `memchr`: a
/// wrapped upstream's notifications and final results pass here).
pub(crate) async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<LineRead> {
    line.clear();
    let bound = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    if reader.take(bound).read_until(b'\n', line).await? == 0 {
        return Ok(LineRead::End);
    }
    if line.len() > max {
        line.clear();
        return Ok(LineRead::TooLong);
    }
    Ok(LineRead::Line)
}

/// Reads one line and keeps its first `keep` bytes in `line` (cleared
/// first), reading past the rest: for a server's stderr, of which only the
/// start of each line is worth keeping. `false` at the end of the stream.
pub(crate) async fn read_line_start(
    reader: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    keep: usize,
) -> io::Result<bool> {
    line.clear();
    let mut read_any = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(read_any);
        }
        read_any = true;
        let (taken, ended) = match available.iter().position(|&byte| byte == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let room = keep.saturating_sub(line.len()).min(taken);
        line.extend_from_slice(&available[..room]);
        reader.consume(taken);
        if ended {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    #[tokio::test]
    async fn lines_up_to_the_bound_are_read_and_a_longer_one_is_refused_unkept() {
        let input: &[u8] = b"short\nexactly10\nthis one is far too long\nnever";
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut line, 10).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"short\n");
        assert_eq!(
            read_line(&mut reader, &mut line, 10).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"exactly10\n");
        assert_eq!(
            read_line(&mut reader, &mut line, 10).await.unwrap(),
            LineRead::TooLong
        );
        assert!(line.is_empty(), "nothing of the long line is kept");
    }

    #[tokio::test]
    async fn the_last_line_may_have_no_newline_and_then_the_stream_ends() {
        let input: &[u8] = b"one\ntwo";
        let mut reader = BufReader::with_capacity(2, input);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut line, 64).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(
            read_line(&mut reader, &mut line, 64).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"two");
        assert_eq!(
            read_line(&mut reader, &mut line, 64).await.unwrap(),
            LineRead::End
        );
    }

    #[tokio::test]
    async fn a_stderr_line_keeps_its_start_and_the_next_line_is_whole() {
        let long = format!("{}\nnext\n", "x".repeat(10_000));
        let mut reader = BufReader::with_capacity(64, long.as_bytes());
        let mut line = Vec::new();
        assert!(read_line_start(&mut reader, &mut line, 16).await.unwrap());
        assert_eq!(line, b"xxxxxxxxxxxxxxxx");
        assert!(read_line_start(&mut reader, &mut line, 16).await.unwrap());
        assert_eq!(line, b"next\n");
        assert!(!read_line_start(&mut reader, &mut line, 16).await.unwrap());
    }
}
