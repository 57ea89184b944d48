//! A run's directory and user, both given back when it is dropped.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::JailError;
use super::users::RunUser;

/// Makes run directories' names unique within this process.
static CELLS: AtomicU64 = AtomicU64::new(0);

/// A run's working directory, removed when dropped, and its user.
#[derive(Debug)]
pub(crate) struct Cell {
    dir: PathBuf,
    user: RunUser,
}

impl Cell {
    /// Makes a fresh directory under `root` for a run of `user`.
    pub(super) fn create(root: &Path, name: &str, user: RunUser) -> Result<Cell, JailError> {
        let n = CELLS.fetch_add(1, Ordering::Relaxed);
        let dir = root.join(format!("weir-exec-{name}-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|source| JailError::Prepare {
                path: dir.clone(),
                source,
            })?;
        Ok(Cell { dir, user })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Who the run executes as.
    pub(super) fn user(&self) -> &RunUser {
        &self.user
    }

    /// Writes `bytes` to `relative` (already checked to stay inside),
    /// making its directories.
    pub(crate) fn write(&self, relative: &Path, bytes: &[u8]) -> Result<(), JailError> {
        let path = self.dir.join(relative);
        let prepare = |source| JailError::Prepare {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(prepare)?;
        }
        std::fs::write(&path, bytes).map_err(prepare)
    }

    /// Gives the directory and all in it to the run's user.
    pub(super) fn hand_over(&self) -> Result<(), JailError> {
        let Some(uid) = self.user.dedicated() else {
            return Ok(());
        };
        fn walk(path: &Path, uid: u32) -> std::io::Result<()> {
            std::os::unix::fs::lchown(path, Some(uid), Some(uid))?;
            if std::fs::symlink_metadata(path)?.is_dir() {
                for entry in std::fs::read_dir(path)? {
                    walk(&entry?.path(), uid)?;
                }
            }
            Ok(())
        }
        walk(&self.dir, uid).map_err(|source| JailError::Prepare {
            path: self.dir.clone(),
            source,
        })
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        let own = self.user.dedicated().is_none();
        if remove_tree(&self.dir, own).is_err() {
            // Processes killed a moment ago may still be writing: retry a
            // little later, off this thread.
            let dir = self.dir.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    std::thread::sleep(Duration::from_millis(100));
                    if remove_tree(&dir, own).is_ok() {
                        return;
                    }
                }
                tracing::warn!(dir = %dir.display(), "could not remove a run's directory; remove it by hand");
            });
        }
    }
}

/// Removes `dir`. When the run shared weir's uid it may have taken its own
/// permissions away; those are given back first (nothing to gain by a race:
/// the run could change them itself).
fn remove_tree(dir: &Path, own: bool) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) if own => {
            fn open_up(path: &Path) {
                let Ok(meta) = std::fs::symlink_metadata(path) else {
                    return;
                };
                if meta.is_dir() {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
                    if let Ok(entries) = std::fs::read_dir(path) {
                        for entry in entries.flatten() {
                            open_up(&entry.path());
                        }
                    }
                }
            }
            open_up(dir);
            std::fs::remove_dir_all(dir)
        }
        Err(error) => Err(error),
    }
}
