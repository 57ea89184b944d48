//! MCP over stdio: one JSON-RPC message per line on stdin and stdout.
//!
//! Requests are served concurrently; one writer task owns stdout, so lines
//! never interleave. The process is one session (2025-11-25); requests that
//! carry 2026-07-28 `_meta` are served statelessly beside it.

use std::io;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::server::McpServer;
use crate::session::{Outgoing, Session};
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
    let (outbound, mut outgoing) = mpsc::channel::<Outgoing>(1024);
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
        }
        output.flush().await
    });
    let session = Session::new();
    let max = server.max_message_bytes();
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(max as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            break; // stdin closed: the client is gone
        }
        if line.len() > max && !line.ends_with(b"\n") {
            // Oversized: answer once, then skip the rest of the line.
            let error = RpcError::new(
                code::INVALID_REQUEST,
                format!("message larger than {max} bytes; send smaller messages"),
            );
            let _ = outbound
                .send(Outgoing::message(error_response(&Value::Null, &error)))
                .await;
            let mut rest = Vec::new();
            input.read_until(b'\n', &mut rest).await?;
            continue;
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
    drop(outbound);
    // Requests still running keep their clones of the channel; stop waiting
    // for them once stdin is gone and what was produced has been written.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), writer).await;
    Ok(())
}
