//! A real `redis-server` for the tests: one per test process, on a free
//! loopback port, its files in a temporary directory, stopped when the
//! process exits (a shell watchdog waits on a pipe from it). Each store gets
//! a key prefix of its own, so the checks share the server but never a key.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use weir_runtime::EventLog;
use weir_store_redis::{RedisLog, RedisOptions};

/// A running server; killed when dropped, or when this process exits.
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
    /// The watchdog's stdin: when this process exits, however it exits,
    /// the pipe closes and the watchdog stops the server. (Statics are
    /// never dropped, and nextest runs each test in a process of its own.)
    lifeline: Option<ChildStdin>,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts `redis-server` from PATH on a free port, under a small shell
    /// watchdog, and waits until it accepts connections.
    pub(crate) fn start() -> RedisServer {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut child = Command::new("sh")
            .args([
                "-c",
                "command -v redis-server >/dev/null || exit 127; \
                 redis-server \"$@\" & server=$!; read _; kill $server; wait $server",
                "watchdog",
            ])
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lifeline = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let ready = stdout
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("Ready to accept connections"));
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "could not start redis-server: the Redis store's tests need it on PATH; \
                 install it with `apt-get install redis-server` (scripts/test does when root)"
            );
        }
        RedisServer {
            child,
            port,
            lifeline: Some(lifeline),
            _dir: dir,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Closing the lifeline makes the watchdog stop the server and exit.
        drop(self.lifeline.take());
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The binary's one server, started on first use. Statics are never
/// dropped: the watchdog stops the server when the process exits.
pub(crate) fn shared() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

/// A fresh, empty store: a new key prefix on the shared server.
pub(crate) fn fresh_store(live_capacity: usize) -> Arc<RedisLog> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = format!("t{}:", NEXT.fetch_add(1, Ordering::Relaxed));
    let log = RedisLog::open(
        &shared().url(),
        RedisOptions {
            prefix,
            live_capacity,
        },
    )
    .unwrap();
    Arc::new(log)
}

/// The contract suite's factory.
pub(crate) fn redis(live_capacity: usize) -> (Arc<dyn EventLog>, ()) {
    (fresh_store(live_capacity), ())
}
