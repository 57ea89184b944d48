//! MCP over stdio: one JSON-RPC message per line on stdin and stdout.
//!
//! Requests are served concurrently; one writer task owns stdout, so lines
//! never interleave. The process is one session (2025-11-25); requests that
//! carry 2026-07-28 `_meta` are served statelessly beside it.

use std::io;

use serde_json::Value;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use weir_runtime::Principal;

use crate::server::McpServer;
use crate::session::{Outgoing, Session, outbound};
use crate::transport::burst;
use crate::transport::era_of;
use weir_mcp_wire::jsonrpc::{Incoming, RpcError, code, error_response};

/// Serves MCP on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio(server: McpServer) -> io::Result<()> {
    widen_pipe(&io::stdout());
    match stdout_pipe() {
        Some(pipe) => serve_lines(server, tokio::io::stdin(), pipe).await,
        None => serve_lines(server, tokio::io::stdin(), tokio::io::stdout()).await,
    }
}

/// stdout as a non-blocking pipe written on the runtime itself, when it is
/// a pipe (as an MCP client makes it) that stderr does not share.
///
/// Why: `tokio::io::stdout` hands every write to the blocking pool, which
/// copies the batch and costs two thread switches each time; with the pipe
/// on the reactor a stream of 1 KB items took a fifth less CPU. The cost:
/// the pipe's write end becomes non-blocking, as Node makes it too, which
/// would surprise anything else writing to the same end, so a stderr on the
/// same pipe keeps the plain path. Anything but a pipe (a file, a terminal)
/// keeps it as well.
fn stdout_pipe() -> Option<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let identity = |fd: std::os::fd::BorrowedFd<'_>| {
        let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        let metadata = file.metadata().ok()?;
        Some((file, metadata))
    };
    let (stdout, out) = identity(io::stdout().as_fd())?;
    if !out.file_type().is_fifo() {
        return None;
    }
    let shared_with_stderr = identity(io::stderr().as_fd())
        .is_some_and(|(_, err)| (err.dev(), err.ino()) == (out.dev(), out.ino()));
    if shared_with_stderr {
        return None;
    }
    tokio::net::unix::pipe::Sender::from_file(stdout).ok()
}

/// Most bytes Linux lets an unprivileged process ask for a pipe to hold.
const PIPE_BYTES: usize = 1 << 20;

/// Lets a pipe hold up to 1 MiB rather than the usual 64 KiB, so a stream
/// of large messages goes to the client in a few big writes and reads, not
/// in a pipe-sized handoff after another. Not a pipe (a file, a terminal, a
/// socket), or not allowed: nothing changes.
fn widen_pipe(output: &impl std::os::fd::AsFd) {
    let _ = rustix::pipe::fcntl_setpipe_size(output, PIPE_BYTES);
}

/// Serves MCP over any line-oriented pair of streams.
pub async fn serve_lines(
    server: McpServer,
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin + Send + 'static,
) -> io::Result<()> {
    // The client's delivery queue: progress coalesces in it, the rest waits.
    let (outbound, mut outgoing) = outbound(1024);
    let writer = tokio::spawn(async move {
        // Everything queued goes out in one write: under load that is one
        // syscall (and one blocking-pool handoff for stdout) per batch.
        let mut batch = Vec::with_capacity(256);
        let mut bytes = Vec::with_capacity(64 * 1024);
        while outgoing.recv_many(&mut batch, 256).await > 0 {
            bytes.clear();
            for Outgoing { message, .. } in batch.drain(..) {
                bytes.extend_from_slice(message.as_bytes());
                bytes.push(b'\n');
            }
            output.write_all(&bytes).await?;
            output.flush().await?;
            // A call's first item, after a pause: see `burst`.
            burst::wrote();
        }
        output.flush().await
    });
    // What the server announces goes to the one client too.
    let mut announcements = server.announcements();
    let announce = {
        let outbound = outbound.clone();
        tokio::spawn(async move {
            loop {
                match announcements.recv().await {
                    Ok(message) => {
                        if outbound.send(Outgoing::message(message)).await.is_err() {
                            break;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        })
    };
    // One client, the process that spawned weir: it sees every run.
    let session = Session::new(Principal::local());
    let max = server.max_message_bytes();
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut input, &mut line, max).await? {
            Line::End => break, // stdin closed: the client is gone
            Line::Message => {}
            Line::Oversized => {
                let error = RpcError::new(
                    code::INVALID_REQUEST,
                    format!("message larger than {max} bytes; send smaller messages"),
                );
                let _ = outbound
                    .send(Outgoing::message(error_response(&Value::Null, &error)))
                    .await;
                continue;
            }
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Incoming::parse(&line) {
            Err((id, error)) => {
                let _ = outbound
                    .send(Outgoing::message(error_response(&id, &error)))
                    .await;
            }
            Ok(Incoming::Request { id, method, params }) => {
                let (server, session, outbound) =
                    (server.clone(), session.clone(), outbound.clone());
                tokio::spawn(async move {
                    let reply = match era_of(&params, None) {
                        Ok(era) => {
                            server
                                .request(&session, era, &id, &method, params, &outbound)
                                .await
                        }
                        Err(error) => Some(error_response(&id, &error)),
                    };
                    if let Some(message) = reply {
                        let _ = outbound.send(Outgoing::message(message)).await;
                    }
                });
            }
            Ok(Incoming::Notification { method, params }) => {
                server.notification(&session, &method, &params)
            }
            Ok(Incoming::Response { id, outcome }) => session.resolve(&id, outcome),
        }
    }
    announce.abort();
    drop(outbound);
    // Requests still running keep their clones of the channel; stop waiting
    // for them once stdin is gone and what was produced has been written.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), writer).await;
    Ok(())
}

/// What [`read_line`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line {
    /// A line of at most the limit (its newline, if any, included).
    Message,
    /// A line over the limit, now skipped up to and including its newline.
    Oversized,
    /// The input ended.
    End,
}

/// Reads one line into `line`, holding at most `max` bytes plus a newline:
/// a longer line is dropped as it arrives, up to its newline, so its size
/// costs time, never memory.
async fn read_line(
    input: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let read = (&mut *input).take(limit).read_until(b'\n', line).await?;
    if read == 0 {
        return Ok(Line::End);
    }
    if line.len() <= max || line.ends_with(b"\n") {
        return Ok(Line::Message);
    }
    // Over the limit: skip the rest of the line a buffer at a time.
    line.clear();
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(Line::Oversized); // the input ended inside the line
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(newline) => {
                input.consume(newline + 1);
                return Ok(Line::Oversized);
            }
            None => {
                let all = buffer.len();
                input.consume(all);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncWriteExt, BufReader};

    use super::{Line, read_line};

    /// Lines at, under and over the limit, in one stream.
    #[tokio::test]
    async fn lines_over_the_limit_are_skipped_whole() {
        let mut input = Vec::new();
        input.extend_from_slice(b"12345\n"); // at the limit
        input.extend(std::iter::repeat_n(b'x', 100_000)); // far over it
        input.extend_from_slice(b"\nabc\n123456\n"); // under, then one over
        input.extend_from_slice(b"tail"); // no newline at the end
        let mut reader = BufReader::with_capacity(64, input.as_slice());
        let mut got = Vec::new();
        loop {
            let mut line = Vec::new();
            let read = read_line(&mut reader, &mut line, 5).await.unwrap();
            assert!(line.capacity() <= 64, "held {} bytes", line.capacity());
            if read == Line::End {
                break;
            }
            got.push((read, String::from_utf8(line).unwrap()));
        }
        let message = |text: &str| (Line::Message, text.to_owned());
        let oversized = (Line::Oversized, String::new());
        assert_eq!(
            got,
            [
                message("12345\n"),
                oversized.clone(),
                message("abc\n"),
                oversized,
                message("tail"),
            ]
        );
    }

    /// A line over the limit that the input ends inside.
    #[tokio::test]
    async fn an_oversized_line_at_the_end_is_refused() {
        let (mut writer, reader) = tokio::io::duplex(16);
        let feed = tokio::spawn(async move {
            for _ in 0..1000 {
                writer.write_all(&[b'y'; 16]).await.unwrap();
            }
        });
        let mut reader = BufReader::with_capacity(16, reader);
        let mut line = Vec::new();
        let read = read_line(&mut reader, &mut line, 10).await.unwrap();
        assert_eq!(read, Line::Oversized);
        feed.await.unwrap();
        line.clear();
        let read = read_line(&mut reader, &mut line, 10).await.unwrap();
        assert_eq!(read, Line::End);
    }
}
