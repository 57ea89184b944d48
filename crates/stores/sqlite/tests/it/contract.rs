//! The EventLog contract suite (`weir_runtime::store_contract`) against
//! `SqliteLog`.

use std::sync::Arc;

use weir_runtime::EventLog;
use weir_store_sqlite::{SqliteLog, SqliteOptions};

/// A fresh log in a file of its own; the directory goes with the guard.
/// Segments of 16 KiB, so that the suite's streams span several.
/// (The writer and reader threads let a paused clock jump while they work,
/// so this store does not keep virtual time.)
fn sqlite(live_capacity: usize) -> (Arc<dyn EventLog>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let log = SqliteLog::open(
        dir.path().join("weir.db"),
        SqliteOptions {
            live_capacity,
            segment_bytes: 16 * 1024,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    (Arc::new(log), dir)
}

weir_runtime::store_contract_tests!(sqlite);
