//! Many keep-alive HTTP connections read by one thread with epoll, so that
//! 10,000 concurrent calls cost the client a prefix compare per item and a
//! system call per burst, not a thread (or a Python object) each.
//!
//! Each connection carries one [`Job`] at a time: a request is written, its
//! response is read as it arrives ([`ResponseReader`]) and, once it has
//! ended (or failed), the job is handed back to the caller, who may give
//! the connection its next request.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::call::Call;
use crate::http::{Head, Sse};
use crate::push::{Piece, ResponseReader};

/// What a connection is waiting for.
pub enum Job {
    /// A response whose body is read whole (`initialize`, a page of the
    /// runs API).
    Reply { head: Option<Head>, body: Vec<u8> },
    /// A `tools/call` answered on an SSE stream, counted and checked item
    /// by item as it arrives.
    Call {
        call: Box<Call>,
        sse: Sse,
        /// The head, once it came: a refusal's body is kept for the report.
        head: Option<Head>,
        refused: Vec<u8>,
    },
}

impl Job {
    pub fn reply() -> Job {
        Job::Reply {
            head: None,
            body: Vec::new(),
        }
    }

    pub fn call(call: Call) -> Job {
        Job::Call {
            call: Box::new(call),
            sse: Sse::default(),
            head: None,
            refused: Vec::new(),
        }
    }

    fn take(&mut self, piece: Piece) -> Result<(), String> {
        match (self, piece) {
            (Job::Reply { head, .. }, Piece::Head(h)) => *head = Some(h),
            (Job::Reply { body, .. }, Piece::Body(bytes)) => body.extend_from_slice(bytes),
            (Job::Call { head, .. }, Piece::Head(h)) => *head = Some(h),
            (
                Job::Call {
                    call,
                    sse,
                    head,
                    refused,
                },
                Piece::Body(bytes),
            ) => {
                if head.as_ref().is_some_and(is_event_stream) {
                    sse.feed(bytes, |data| call.take(data))?;
                } else if refused.len() < 4096 {
                    refused.extend_from_slice(bytes);
                }
            }
            (_, Piece::End) => {}
        }
        Ok(())
    }

    /// At the end of the response: whether it was what the job expected.
    fn check_end(&self) -> Result<(), String> {
        match self {
            Job::Reply { .. } => Ok(()),
            Job::Call { head, refused, .. } if !head.as_ref().is_some_and(is_event_stream) => {
                Err(format!(
                    "tools/call: HTTP {}: {}",
                    head.as_ref().map_or(0, |h| h.status),
                    String::from_utf8_lossy(refused)
                ))
            }
            Job::Call { .. } => Ok(()),
        }
    }
}

fn is_event_stream(head: &Head) -> bool {
    head.status == 200
        && head
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
}

struct Conn {
    stream: TcpStream,
    reader: ResponseReader,
    /// Request bytes the socket has not taken yet.
    outbox: Vec<u8>,
    job: Option<Job>,
    /// Closed (by the server, or after an error): takes no more jobs.
    dead: bool,
}

/// A job that has ended: which connection carried it, and its error if it
/// failed.
pub struct Done {
    pub conn: usize,
    pub job: Job,
    pub error: Option<String>,
}

pub struct Pool {
    epoll: libc::c_int,
    conns: Vec<Conn>,
    host: String,
    /// One read buffer for every connection: each read is handed on at once.
    buffer: Vec<u8>,
    busy: usize,
}

/// How long the pool waits without a byte on any busy connection before it
/// gives up on them.
const STALL: Duration = Duration::from_secs(120);

impl Pool {
    /// `n` connections to the server at `127.0.0.1:port`.
    pub fn connect(port: u16, n: usize) -> Result<Pool, String> {
        // SAFETY: epoll_create1 has no memory preconditions.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(format!("epoll_create1: {}", io::Error::last_os_error()));
        }
        let host = format!("127.0.0.1:{port}");
        let mut pool = Pool {
            epoll,
            conns: Vec::with_capacity(n),
            host,
            buffer: vec![0; 1 << 18],
            busy: 0,
        };
        for i in 0..n {
            let stream = connect(&pool.host)
                .map_err(|e| format!("connection {i} of {n} to {}: {e}", pool.host))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            pool.watch(i, stream.as_raw_fd(), libc::EPOLL_CTL_ADD, false)?;
            pool.conns.push(Conn {
                stream,
                reader: ResponseReader::default(),
                outbox: Vec::new(),
                job: None,
                dead: false,
            });
        }
        Ok(pool)
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    fn watch(&self, i: usize, fd: libc::c_int, op: libc::c_int, out: bool) -> Result<(), String> {
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | if out { libc::EPOLLOUT } else { 0 })
                as u32,
            u64: i as u64,
        };
        // SAFETY: a valid epoll fd, a socket fd we own, a valid event pointer.
        if unsafe { libc::epoll_ctl(self.epoll, op, fd, &mut event) } < 0 {
            return Err(format!("epoll_ctl: {}", io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Writes `request` on connection `i` and gives it `job` to read the
    /// response with. With a `Call` job, its `sent_at` is the write.
    pub fn send(&mut self, i: usize, request: Vec<u8>, mut job: Job) -> Result<(), String> {
        let conn = &mut self.conns[i];
        if conn.dead || conn.job.is_some() {
            return Err(format!("connection {i} cannot take a request"));
        }
        if let Job::Call { call, .. } = &mut job {
            call.sent_at = Some(Instant::now());
        }
        conn.job = Some(job);
        conn.outbox = request;
        self.busy += 1;
        self.flush(i)
    }

    /// Writes what the socket takes of connection `i`'s outbox; asks for
    /// EPOLLOUT while some is left.
    fn flush(&mut self, i: usize) -> Result<(), String> {
        let conn = &mut self.conns[i];
        let was_full = !conn.outbox.is_empty();
        while !conn.outbox.is_empty() {
            match conn.stream.write(&conn.outbox) {
                Ok(n) => {
                    conn.outbox.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("connection {i}: writing: {e}")),
            }
        }
        let fd = conn.stream.as_raw_fd();
        let left = !conn.outbox.is_empty();
        if was_full {
            self.watch(i, fd, libc::EPOLL_CTL_MOD, left)?;
        }
        Ok(())
    }

    /// Reads every busy connection until its job ends, handing each ended
    /// job to `done`, which may return the connection's next request.
    /// `tick` runs about every 100 ms (a sampler of the server's memory).
    pub fn run(
        &mut self,
        mut done: impl FnMut(Done) -> Option<(Vec<u8>, Job)>,
        mut tick: impl FnMut(),
    ) -> Result<(), String> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        let mut last_byte = Instant::now();
        let mut last_tick = Instant::now();
        while self.busy > 0 {
            // SAFETY: a valid epoll fd and a buffer of `events.len()` events.
            let ready = unsafe {
                libc::epoll_wait(self.epoll, events.as_mut_ptr(), events.len() as i32, 100)
            };
            if ready < 0 {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("epoll_wait: {error}"));
            }
            if last_tick.elapsed() >= Duration::from_millis(100) {
                last_tick = Instant::now();
                tick();
            }
            if ready == 0 {
                if last_byte.elapsed() > STALL {
                    self.fail_busy(&mut done, "nothing arrived for 120 s");
                    return Ok(());
                }
                continue;
            }
            last_byte = Instant::now();
            for event in &events[..ready as usize] {
                let i = event.u64 as usize;
                if event.events & libc::EPOLLOUT as u32 != 0
                    && let Err(error) = self.flush(i)
                {
                    self.fail(i, error, &mut done);
                    continue;
                }
                if event.events
                    & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32
                    != 0
                {
                    self.readable(i, &mut done);
                }
            }
        }
        Ok(())
    }

    /// Reads what connection `i` has, until the socket is empty.
    fn readable(&mut self, i: usize, done: &mut impl FnMut(Done) -> Option<(Vec<u8>, Job)>) {
        loop {
            let Pool { conns, buffer, .. } = self;
            let conn = &mut conns[i];
            if conn.dead {
                return;
            }
            let n = match conn.stream.read(buffer) {
                Ok(0) => {
                    let why = if conn.job.is_some() || conn.reader.mid_response() {
                        "the server closed the connection mid-response"
                    } else {
                        "the server closed an idle connection"
                    };
                    self.close(i);
                    if self.conns[i].job.is_some() {
                        self.fail(i, why.into(), done);
                    }
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.close(i);
                    self.fail(i, format!("reading: {e}"), done);
                    return;
                }
            };
            let mut ended = false;
            let Conn { reader, job, .. } = conn;
            let fed = reader.feed(&buffer[..n], &mut |piece| {
                let end = piece == Piece::End;
                match job.as_mut() {
                    Some(job) if !ended => job.take(piece)?,
                    _ => return Err("a response nobody asked for".into()),
                }
                ended |= end;
                Ok(())
            });
            if let Err(error) = fed {
                self.close(i);
                self.fail(i, error, done);
                return;
            }
            if ended {
                let job = self.conns[i].job.take().expect("a job ended");
                self.busy -= 1;
                let error = job.check_end().err();
                if let Some((request, next)) = done(Done {
                    conn: i,
                    job,
                    error,
                }) && let Err(error) = self.send(i, request, next)
                {
                    self.fail(i, error, done);
                }
            }
            if n < self.buffer.len() {
                return;
            }
        }
    }

    fn close(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if !conn.dead {
            conn.dead = true;
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            // SAFETY: a valid epoll fd; the socket is still open.
            unsafe {
                libc::epoll_ctl(
                    self.epoll,
                    libc::EPOLL_CTL_DEL,
                    conn.stream.as_raw_fd(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Ends connection `i`'s job, if any, with `error`.
    fn fail(
        &mut self,
        i: usize,
        error: String,
        done: &mut impl FnMut(Done) -> Option<(Vec<u8>, Job)>,
    ) {
        self.close(i);
        if let Some(job) = self.conns[i].job.take() {
            self.busy -= 1;
            // A dead connection takes no next request.
            let _ = done(Done {
                conn: i,
                job,
                error: Some(error),
            });
        }
    }

    fn fail_busy(&mut self, done: &mut impl FnMut(Done) -> Option<(Vec<u8>, Job)>, why: &str) {
        for i in 0..self.conns.len() {
            if self.conns[i].job.is_some() {
                self.fail(i, why.into(), done);
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: our own epoll fd, closed once.
        unsafe { libc::close(self.epoll) };
    }
}

/// A blocking connect, retried while the server's accept queue is full
/// (a SYN dropped is retried by the kernel after a second) or it is not yet
/// listening.
fn connect(host: &str) -> io::Result<TcpStream> {
    let mut tries = 0;
    loop {
        match TcpStream::connect(host) {
            Ok(stream) => return Ok(stream),
            Err(_) if tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A `GET` of `path` on `host`, kept alive.
pub fn get_bytes(host: &str, path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n").into_bytes()
}

/// Raises this process's open-file limit to its hard limit (children, the
/// server among them, inherit it); returns the limit now in force.
pub fn raise_fd_limit() -> libc::rlim_t {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit through a
    // valid pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}
