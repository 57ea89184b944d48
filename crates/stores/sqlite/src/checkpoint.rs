//! The checkpoint thread: copies the write-ahead log into the database so
//! that no append waits for it.

use std::path::Path;
use std::sync::mpsc;

use rusqlite::Connection;
use weir_runtime::LogError;

use crate::Durability;
use crate::connection::{self, db};

/// WAL frames (pages) after which a commit asks for a checkpoint: SQLite's
/// own default for its automatic checkpoints.
const CHECKPOINT_PAGES: std::ffi::c_int = 1000;

/// Moves checkpoints off the writer. SQLite's automatic checkpoint runs
/// inside the commit that crosses the threshold, copying the WAL into the
/// database and syncing it while every append waits: streaming 1 KB items, a
/// quarter of the writer's time. Instead the writer's commits nudge a thread
/// of its own, whose passive checkpoints never block a writer. (Registering
/// the WAL hook turns the automatic checkpoint off.) The thread ends when the
/// writer's connection is dropped.
pub(crate) fn start(
    writer: &mut Connection,
    path: &Path,
    durability: Durability,
) -> Result<(), LogError> {
    let checkpointer = connection::open(path, durability)?;
    let (nudge, nudged) = mpsc::sync_channel::<()>(1);
    writer
        .wal_hook(Some(move |_: &mut _, pages| {
            if pages >= CHECKPOINT_PAGES {
                // Full means a checkpoint is already due.
                let _ = nudge.try_send(());
            }
            Ok(())
        }))
        .map_err(db("setting up checkpoints"))?;
    std::thread::Builder::new()
        .name("weir-sqlite-checkpoint".into())
        .spawn(move || {
            while nudged.recv().is_ok() {
                // Passive: does what it can without waiting; the next nudge
                // picks up the rest. A failure here loses nothing (the WAL
                // keeps every frame) and is tried again.
                let passive = rusqlite::wal::CheckpointMode::PASSIVE;
                if let Err(error) = checkpointer.wal_checkpoint_v2(None::<&str>, passive) {
                    tracing::warn!("SQLite checkpoint failed (will retry): {error}");
                }
            }
        })
        .map_err(|error| LogError::Storage {
            doing: "starting the checkpoint thread",
            message: error.to_string(),
        })?;
    Ok(())
}
