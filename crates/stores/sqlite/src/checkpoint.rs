//! The checkpoint thread: copies the write-ahead log into the database so
//! that no append waits for it.

use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

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
) -> Result<WalSize, LogError> {
    let checkpointer = connection::open(path, durability)?;
    let (nudge, nudged) = mpsc::sync_channel::<()>(1);
    let size = WalSize::default();
    let seen = size.frames.clone();
    let turn = size.turn.clone();
    writer
        .wal_hook(Some(move |_: &mut _, pages| {
            seen.store(pages, Ordering::Relaxed);
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
                catch_up(&checkpointer, &turn);
            }
        })
        .map_err(|error| LogError::Storage {
            doing: "starting the checkpoint thread",
            message: error.to_string(),
        })?;
    Ok(size)
}

/// WAL frames past which the writer finishes the checkpoint itself.
const WRITER_CATCHES_UP_AT: std::ffi::c_int = 4 * CHECKPOINT_PAGES;

/// Frames in the WAL after the writer's last commit, and the turn the
/// checkpoint thread and the writer take to checkpoint (one pass at a time).
#[derive(Default)]
pub(crate) struct WalSize {
    frames: Arc<AtomicI32>,
    turn: Arc<Mutex<()>>,
}

impl WalSize {
    /// Called by the writer between transactions, after it has answered
    /// the last one's appends (so no subscriber waits for this): when the
    /// WAL has grown past [`WRITER_CATCHES_UP_AT`], copies whatever the
    /// checkpoint thread has not, so that the next commit starts the WAL
    /// over. The checkpoint thread alone rarely lets it: its pass ends just
    /// after the writer has committed again. Passive, like the thread's,
    /// but it waits for the thread's pass in progress to end rather than
    /// give up: giving up, a writer faster than the thread's passes (1 KB
    /// items, encoded without JSON) grew the WAL past 160 MB. No commit can
    /// land while the writer copies, so its pass copies every frame unless
    /// a reader holds an older snapshot.
    pub(crate) fn bound(&self, writer: &Connection) {
        if self.frames.load(Ordering::Relaxed) < WRITER_CATCHES_UP_AT {
            return;
        }
        let _turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let passive = rusqlite::wal::CheckpointMode::PASSIVE;
        if let Ok((frames, copied)) = writer.wal_checkpoint_v2(None::<&str>, passive)
            && copied >= frames
        {
            self.frames.store(0, Ordering::Relaxed);
        }
    }
}

/// Most passes one nudge makes; each copies what was committed when it began.
const MAX_PASSES: usize = 64;

/// Copies the WAL into the database until every frame is copied, a pass
/// gets no further, or [`MAX_PASSES`]. Only a WAL copied to its last frame
/// is started over by the writer's next commit; one pass behind a writer
/// that keeps committing never is, and the WAL then grows for as long as
/// the writer writes, every commit landing in fresh pages of the file (a
/// stream of 1 KB items grew it past 250 MB, and the page cache work for
/// the fresh pages was a fifth of the writer's time).
///
/// Passive: never waits, never blocks a writer. A failure loses nothing
/// (the WAL keeps every frame); the next nudge tries again.
fn catch_up(checkpointer: &Connection, turn: &Mutex<()>) {
    let passive = rusqlite::wal::CheckpointMode::PASSIVE;
    let mut last = None;
    for _ in 0..MAX_PASSES {
        let pass = {
            let _turn = turn.lock().unwrap_or_else(PoisonError::into_inner);
            checkpointer.wal_checkpoint_v2(None::<&str>, passive)
        };
        match pass {
            // (frames in the WAL, frames copied): all copied, or no further
            // than the last pass (a reader holds an older snapshot).
            Ok((frames, copied)) if copied >= frames || last == Some((frames, copied)) => return,
            Ok(progress) => last = Some(progress),
            // Another checkpoint is running (another handle's or process's
            // on the same file): it copies what this one would.
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                return;
            }
            Err(error) => {
                tracing::warn!("SQLite checkpoint failed (will retry): {error}");
                return;
            }
        }
    }
}
