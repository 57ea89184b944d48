//! The read pool: read-only connections, used on tokio's blocking pool so a
//! query never stalls the runtime, and kept for the next read. In WAL mode
//! they read while the writer writes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use weir_runtime::LogError;

use crate::Durability;
use crate::connection::{self, db};

/// Idle read-only connections to one file; one more is opened whenever all
/// are busy.
pub(crate) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(crate) fn new(path: PathBuf) -> Readers {
        Readers {
            path,
            idle: Mutex::default(),
        }
    }

    /// Runs `query` on a pooled connection, on the blocking pool.
    pub(crate) async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        query: impl FnOnce(&Connection) -> Result<T, LogError> + Send + 'static,
    ) -> Result<T, LogError> {
        let readers = self.clone();
        tokio::task::spawn_blocking(move || {
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
