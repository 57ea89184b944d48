//! Opening a connection the way every connection of the log is opened
//! (WAL, the durability's `synchronous`, a busy timeout), and naming what a
//! database error interrupted.

use std::path::Path;

use rusqlite::Connection;
use weir_runtime::LogError;

use crate::Durability;

/// Opens `path` in WAL mode: readers read while the writer writes.
pub(crate) fn open(path: &Path, durability: Durability) -> Result<Connection, LogError> {
    let conn = Connection::open(path).map_err(|error| LogError::Storage {
        doing: "opening the event log",
        message: format!("{}: {error}", path.display()),
    })?;
    let synchronous = match durability {
        Durability::ProcessCrash => "NORMAL",
        Durability::PowerLoss => "FULL",
    };
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .and_then(|()| conn.pragma_update(None, "journal_mode", "WAL"))
        .and_then(|()| conn.pragma_update(None, "synchronous", synchronous))
        .map_err(db("configuring the connection"))?;
    Ok(conn)
}

/// Maps a database error to a [`LogError::Storage`] saying what we were doing.
pub(crate) fn db(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> LogError {
    move |error| LogError::Storage {
        doing,
        message: error.to_string(),
    }
}
