//! The read pool: read-only connections, used on tokio's blocking pool so a
//! query never stalls the runtime, and kept for the next read. In WAL mode
//! they read while the writer writes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::Semaphore;
use weir_runtime::LogError;

use crate::Durability;
use crate::connection::{self, db};

/// Most reads at once. Each holds a blocking thread and a connection with
/// its own page cache; unbounded, 10,000 calls starting at once (each
/// subscription reads the store before it goes live) grew tokio's blocking
/// pool to its 512 threads and as many connections, 3.4 GiB, all queued on
/// SQLite's allocator mutex. A few connections keep two cores busy; the
/// other reads wait their turn without a thread.
const MAX_READERS: usize = 8;

/// Idle read-only connections to one file; one more is opened whenever all
/// are busy, up to [`MAX_READERS`].
pub(crate) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    slots: Arc<Semaphore>,
}

impl Readers {
    pub(crate) fn new(path: PathBuf) -> Readers {
        Readers {
            path,
            idle: Mutex::default(),
            slots: Arc::new(Semaphore::new(MAX_READERS)),
        }
    }

    /// Runs `query` on a pooled connection, on the blocking pool.
    pub(crate) async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        query: impl FnOnce(&Connection) -> Result<T, LogError> + Send + 'static,
    ) -> Result<T, LogError> {
        // Owned by the blocking task: a caller that stops waiting does not
        // free the slot of a read still running.
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("the reader semaphore is never closed");
        let readers = self.clone();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let pooled = readers.idle.lock().expect("reader pool lock").pop();
            let conn = match pooled {
                Some(conn) => conn,
                None => {
                    // Readers never write, so `synchronous` is moot for them.
                    let conn = connection::open(&readers.path, Durability::default())?;
                    conn.pragma_update(None, "query_only", true)
                        .map_err(db("opening a reader"))?;
                    conn
                }
            };
            let result = query(&conn);
            readers.idle.lock().expect("reader pool lock").push(conn);
            result
        })
        .await
        .map_err(|error| LogError::Storage {
            doing: "reading",
            message: error.to_string(),
        })?
    }
}
