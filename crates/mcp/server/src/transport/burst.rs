//! Giving a client a core at the start of a burst of writes, on stdio and
//! on every HTTP connection.
//!
//! The first write after a pause (a call's first item, its answer) wakes
//! the client, which then waits for a core while this process's threads
//! hold them: a tool emitting flat out, its writer and its follower kept a
//! client of two cores from its first item for 1-2 ms in one call of three,
//! the kernel letting the running thread finish its slice. Giving up the
//! writing thread's core once lets the client read at once (`bench/reader`,
//! stdio: 0.3-0.8 ms rather than 0.8-2.3 ms for 1 KB items). Within a
//! burst, no yield. The pause is the thread's, not a connection's: each
//! thread yields at most once a millisecond however many connections it
//! writes to, so a server busy with many clients pays next to nothing.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Writes further apart than this start a burst.
const PAUSE: Duration = Duration::from_millis(1);

thread_local! {
    /// When this thread last wrote to a client.
    static LAST_WRITE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Call after each write to a client: the first of a burst gives up the
/// thread's core once (`sched_yield`, which returns at once when nothing
/// else waits for it).
pub(crate) fn wrote() {
    let now = Instant::now();
    let last = LAST_WRITE.replace(Some(now));
    if last.is_none_or(|at| now.duration_since(at) >= PAUSE) {
        std::thread::yield_now();
    }
}

/// The HTTP server's connections: TCP without Nagle (a lone small SSE event
/// must not wait for the peer's delayed ACK), whose writes go through
/// [`wrote`].
pub(crate) struct Connections(pub(crate) TcpListener);

impl axum::serve::Listener for Connections {
    type Io = BurstWrites<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.0).await;
        let _ = stream.set_nodelay(true);
        (BurstWrites(stream), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// An IO whose successful writes go through [`wrote`].
pub(crate) struct BurstWrites<T>(T);

fn after(written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
    if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
        wrote();
    }
    written
}

impl<T: AsyncRead + Unpin> AsyncRead for BurstWrites<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for BurstWrites<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        after(Pin::new(&mut self.get_mut().0).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        after(Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
