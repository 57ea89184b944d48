//! weir's Redis store: one run log shared by several `weir serve` nodes, on
//! Redis Streams, and what the nodes need to share the work: leases on
//! their runs and cancellation wherever it is asked.
//!
//! **For:** [`RedisLog`], an [`EventLog`] on one Redis server (standalone or
//! a primary with replicas; not Redis Cluster), opened with
//! [`RedisLog::open`] and [`RedisOptions`]. Each run is one stream of a
//! few entries per append (up to 64 events each, its id derived from its
//! last event's dense seq, `<seq + 1>-0`), its summary a hash, the run
//! index sorted sets. Every append is one Lua script that
//! checks the run's tail has not moved since the writer checked the events
//! against it, so writers on several nodes never break a log: exactly one
//! terminal event wins; a writer keeps its runs' tails, so an append is one
//! round trip. Each append is announced with its events on the run's own
//! pub/sub channel, to the nodes that follow the run, so a subscriber on
//! node B follows node A's run live and a node decodes only the runs it
//! follows (`bell.rs`, `follow.rs`); the stream is the truth and fills any
//! gap. [`Node`] holds a
//! node's lease, closes the runs of nodes whose lease lapsed, carries
//! cancellation between nodes (`node.rs`) and takes the calls busy nodes
//! offer from the shared queue (`queue.rs`). Redis IO runs on a thread of
//! the store's own; while Redis is unreachable an operation is tried again
//! with backoff for up to [`OUTAGE`], then fails with a clear error.
//! Whoever can write to the Redis can plant keys: [`RedisLog::ping`] fails
//! naming a shared key that holds another type than weir keeps there, a
//! write that meets one names it too, and a run record that cannot be read
//! is skipped by listings and reported once, never their failure
//! (`check.rs`).
//!
//! **Not for:** durability beyond what the server is configured for (see
//! docs/operations.md, "What each setting guarantees": AOF `everysec` or `always`), or
//! Redis Cluster (scripts touch a run's keys and the shared indexes
//! together).
//! Redis entries stay inside this crate; everything else sees the log only
//! through [`EventLog`].
//!
//! [`EventLog`]: weir_runtime::EventLog
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), weir_runtime::LogError> {
//! use weir_runtime::EventLog;
//! use weir_store_redis::{RedisLog, RedisOptions};
//!
//! let log = RedisLog::open("redis://127.0.0.1:6379/0", RedisOptions::default())?;
//! log.ping().await?; // fails with a clear error when Redis is unreachable
//! let runs = log.list_runs(&Default::default()).await?;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod bell;
mod check;
mod codec;
mod follow;
mod keys;
mod log;
mod node;
mod queue;
mod scripts;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::IntoConnectionInfo;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::io::tcp::TcpSettings;
use tokio::runtime::Handle;
use weir_core::{LogTail, RunId};
use weir_runtime::log::{LiveHub, LogError};

use crate::bell::Bell;
use crate::keys::Keys;

pub use node::{Node, NodeError, NodeOptions};

/// How long an operation waits for an unreachable Redis to come back (a
/// restart, a failover) before it fails.
pub const OUTAGE: Duration = Duration::from_secs(10);

/// Settings of a [`RedisLog`].
#[derive(Clone, Debug)]
pub struct RedisOptions {
    /// What every key starts with, so that several deployments share one
    /// server (default `weir:`).
    pub prefix: String,
    /// Unread batches each live channel keeps before a subscriber is sent
    /// back to the store.
    pub live_capacity: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "weir:".into(),
            live_capacity: 256,
        }
    }
}

/// The Redis event log. Cheap to clone; its IO thread (and the listener
/// of other nodes' appends on it) stops when the last clone is dropped.
///
/// Every Redis operation runs on a small runtime of the store's own, on a
/// thread of its own, so the log works from any tokio runtime, including
/// one without an IO driver, as the SQLite store's threads do.
#[derive(Clone)]
pub struct RedisLog {
    inner: Arc<Inner>,
}

struct Inner {
    core: Arc<Core>,
    hub: Arc<LiveHub>,
    io: Handle,
    /// Dropped with the last clone: the IO thread then ends its runtime.
    _stop: std::sync::mpsc::SyncSender<()>,
}

/// What the operations need, owned by the IO runtime's tasks.
pub(crate) struct Core {
    client: redis::Client,
    /// Which runs this handle follows and writes, for the doorbell.
    bell: Arc<Bell>,
    conn: ConnectionManager,
    keys: Keys,
    /// This handle's name in announcements, so it skips its own.
    origin: String,
    url: String,
    /// Each open run this handle appended to last, as it left it: the
    /// expected tail of its next append. Entries go at the run's terminal
    /// event, or when the tail proves stale.
    tails: Mutex<HashMap<RunId, LogTail>>,
    /// The keys of unreadable run records already reported (`check.rs`).
    reported: Mutex<HashSet<String>>,
}

impl RedisLog {
    /// A log on the Redis at `url` (`redis://HOST:PORT/DB`). Connects on
    /// first use, and reconnects with backoff whenever the connection is
    /// lost; meanwhile operations fail with [`LogError::Storage`]. Call
    /// [`RedisLog::ping`] to find out at once whether Redis answers.
    pub fn open(url: &str, options: RedisOptions) -> Result<RedisLog, LogError> {
        let invalid = |error: redis::RedisError| LogError::Storage {
            doing: "opening the Redis store",
            message: format!(
                "{url:?} is not a usable Redis URL ({error}); use redis://HOST:PORT/DB"
            ),
        };
        // Without TCP_NODELAY (the client's default is off) Nagle's
        // algorithm holds a small command back until the last is acked:
        // each round trip then costs milliseconds, not microseconds.
        let info = url
            .into_connection_info()
            .map_err(invalid)?
            .set_tcp_settings(TcpSettings::default().set_nodelay(true));
        let client = redis::Client::open(info).map_err(invalid)?;
        let (io, stop) = start_io()?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(2))
            .set_number_of_retries(6);
        // The manager's own tasks belong on the IO runtime.
        let conn = {
            let _entered = io.enter();
            ConnectionManager::new_lazy_with_config(client.clone(), config).map_err(invalid)?
        };
        let keys = Keys::new(&options.prefix);
        let hub = Arc::new(LiveHub::new(options.live_capacity));
        let origin = unique_name();
        let (bell, listener) = Bell::new();
        io.spawn(listener.listen_forever(
            client.clone(),
            keys.clone(),
            origin.clone(),
            hub.clone(),
        ));
        Ok(RedisLog {
            inner: Arc::new(Inner {
                core: Arc::new(Core {
                    client,
                    bell,
                    conn,
                    keys,
                    origin,
                    url: url.to_owned(),
                    tails: Mutex::default(),
                    reported: Mutex::default(),
                }),
                hub,
                io,
                _stop: stop,
            }),
        })
    }

    /// Whether Redis answers now, and holds weir's shared keys (the run
    /// indexes, the queue) with the types weir keeps there: a key of
    /// another type (say a string where the run index belongs) would fail
    /// every new run, so it fails here, naming the key.
    pub async fn ping(&self) -> Result<(), LogError> {
        self.io(|core| async move {
            redis::cmd("PING")
                .query_async::<String>(&mut core.conn())
                .await
                .map(drop)
                .map_err(|error| LogError::Storage {
                    doing: "connecting to Redis",
                    message: format!(
                        "{} does not answer ({error}); start Redis or fix --redis",
                        core.url
                    ),
                })?;
            let keys = &core.keys;
            let shared = [
                (keys.runs(), check::Kind::RunIndex),
                (keys.open(), check::Kind::OpenIndex),
                (keys.finished(), check::Kind::FinishedIndex),
                (keys.queue(), check::Kind::Queue),
            ];
            core.check_types("checking weir's keys in Redis", &shared)
                .await
        })
        .await
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.inner.core.url
    }

    /// The prefix of its keys.
    pub fn prefix(&self) -> &str {
        self.inner.core.keys.prefix()
    }

    /// Runs `operation` on the IO runtime and waits for it from whatever
    /// runtime the caller is on. While Redis is unreachable it tries again,
    /// backing off from 50 ms to 1 s, for up to [`OUTAGE`]; then the error
    /// is the caller's. (Appends are safe to try again: one whose answer
    /// was lost is recognized, not stored twice.)
    pub(crate) async fn io<T, F>(
        &self,
        operation: impl Fn(Arc<Core>) -> F + Send + 'static,
    ) -> Result<T, LogError>
    where
        F: Future<Output = Result<T, LogError>> + Send + 'static,
        T: Send + 'static,
    {
        let core = self.inner.core.clone();
        self.inner
            .io
            .spawn(async move {
                let give_up = tokio::time::Instant::now() + OUTAGE;
                let mut delay = Duration::from_millis(50);
                loop {
                    match operation(core.clone()).await {
                        Err(error)
                            if codec::is_unreachable(&error)
                                && tokio::time::Instant::now() + delay < give_up =>
                        {
                            tokio::time::sleep(delay).await;
                            delay = (delay * 2).min(Duration::from_secs(1));
                        }
                        done => return done,
                    }
                }
            })
            .await
            .map_err(|error| LogError::Storage {
                doing: "talking to Redis",
                message: format!("the store's IO task ended: {error}"),
            })?
    }

    /// The IO runtime, for the tasks of a [`Node`].
    pub(crate) fn io_handle(&self) -> &Handle {
        &self.inner.io
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.inner.core
    }

    pub(crate) fn bell(&self) -> &Arc<Bell> {
        &self.inner.core.bell
    }
}

impl Core {
    pub(crate) fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }
}

/// The IO thread: a current-thread runtime with IO and time, alive until
/// the returned sender is dropped.
fn start_io() -> Result<(Handle, std::sync::mpsc::SyncSender<()>), LogError> {
    let failed = |error: std::io::Error| LogError::Storage {
        doing: "starting the Redis store's IO thread",
        message: error.to_string(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = std::sync::mpsc::sync_channel::<()>(0);
    std::thread::Builder::new()
        .name("weir-redis-io".into())
        .spawn(move || {
            // Runs the spawned tasks until every handle of the log is gone.
            runtime.block_on(async move {
                let _ = tokio::task::spawn_blocking(move || stopped.recv()).await;
            });
        })
        .map_err(failed)?;
    Ok((handle, stop))
}

/// A name no other handle has, in any process: pid, a counter and the time.
fn unique_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_nanos())
        .unwrap_or_default();
    format!(
        "{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
