//! Opening a connection the way every connection of the log is opened
//! (WAL, the durability's `synchronous`, a busy timeout), and naming what a
//! database error interrupted.

use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use rusqlite::Connection;
use weir_runtime::LogError;

use crate::Durability;

/// Creates the log's directory (0700, when this creates it) and file (0600),
/// and takes group and other access away from an existing file and its WAL
/// and shared-memory files. The log holds every run's arguments (the
/// values of fields a tool declares secret are redacted before they get
/// here, but others may be sensitive) and output; SQLite gives the `-wal` and `-shm` files it creates the mode of
/// the database file, so making that file private makes all three private.
pub(crate) fn make_private(path: &Path) -> Result<(), LogError> {
    let failed = |doing: &'static str, at: &Path| {
        let at = at.display().to_string();
        move |error: std::io::Error| LogError::Storage {
            doing,
            message: format!("{at}: {error}"),
        }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(failed("creating the data directory", parent))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(failed("creating the event log", path))?;
    for suffix in ["", "-wal", "-shm", "-segments"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        let Ok(metadata) = std::fs::metadata(&file) else {
            continue;
        };
        let mode = metadata.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode & 0o700))
                .map_err(failed("making the event log private", &file))?;
        }
    }
    Ok(())
}

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
