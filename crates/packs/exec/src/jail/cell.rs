//! A run's working directory, user and cgroup, all given back when it is
//! dropped.
//!
//! Sandboxed, the working directory is a tmpfs inside the sandbox, sized,
//! which bubblewrap fills with the run's files (kept here until then): it
//! exists nowhere on the host, and ends with the run's mount namespace even
//! when weir is killed. Without the sandbox it is a directory on the host,
//! in this server's own directory of the base (`base.rs`), so that a crash
//! leaves nothing the next start cannot sweep.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use weir_proc::Group;

use super::super::sandbox::SANDBOX_WORKDIR;
use super::JailError;
use super::users::RunUser;

/// Where a run's files are.
#[derive(Debug)]
enum Place {
    /// A directory on the host: files are written into it at once.
    Host(PathBuf),
    /// The sandbox's own tmpfs: files wait here for bubblewrap.
    Sandbox { files: Vec<(PathBuf, Vec<u8>)> },
}

/// A run's working directory, removed when dropped; its user; its cgroup.
#[derive(Debug)]
pub(crate) struct Cell {
    place: Place,
    /// Removed when dropped, once its processes are gone.
    cgroup: Option<Group>,
    /// Declared last: the uid is given back only after the rest.
    user: RunUser,
}

impl Cell {
    /// A cell whose directory is `dir` on the host (made here, 0700).
    pub(super) fn on_host(
        dir: PathBuf,
        user: RunUser,
        cgroup: Option<Group>,
    ) -> Result<Cell, JailError> {
        if let Err(source) = std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            if let Some(group) = &cgroup {
                let _ = group.remove();
            }
            return Err(JailError::Prepare { path: dir, source });
        }
        Ok(Cell {
            place: Place::Host(dir),
            cgroup,
            user,
        })
    }

    /// A cell whose directory is the sandbox's working directory.
    pub(super) fn in_sandbox(user: RunUser, cgroup: Option<Group>) -> Cell {
        Cell {
            place: Place::Sandbox { files: Vec::new() },
            cgroup,
            user,
        }
    }

    /// The working directory, as the program sees it.
    pub(crate) fn workdir(&self) -> &Path {
        match &self.place {
            Place::Host(dir) => dir,
            Place::Sandbox { .. } => Path::new(SANDBOX_WORKDIR),
        }
    }

    /// Who the run executes as.
    pub(super) fn user(&self) -> &RunUser {
        &self.user
    }

    /// The run's cgroup, when runs get one.
    pub(crate) fn cgroup(&self) -> Option<&Group> {
        self.cgroup.as_ref()
    }

    /// The files bubblewrap puts in the sandbox's working directory.
    pub(super) fn staged(&self) -> &[(PathBuf, Vec<u8>)] {
        match &self.place {
            Place::Host(_) => &[],
            Place::Sandbox { files } => files,
        }
    }

    /// Puts `bytes` at `relative` (already checked to stay inside), making
    /// its directories.
    pub(crate) fn write(&mut self, relative: &Path, bytes: &[u8]) -> Result<(), JailError> {
        let dir = match &mut self.place {
            Place::Sandbox { files } => {
                files.push((relative.to_owned(), bytes.to_owned()));
                return Ok(());
            }
            Place::Host(dir) => dir,
        };
        let path = dir.join(relative);
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
        let (Place::Host(dir), Some(uid)) = (&self.place, self.user.dedicated()) else {
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
        walk(dir, uid).map_err(|source| JailError::Prepare {
            path: dir.clone(),
            source,
        })
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        let own = self.user.dedicated().is_none();
        let dir = match &self.place {
            Place::Host(dir) => Some(dir.clone()),
            Place::Sandbox { .. } => None,
        };
        let cgroup = self.cgroup.take();
        let done = move |dir: &Option<PathBuf>, cgroup: &Option<Group>| {
            let dir_gone = dir
                .as_deref()
                .is_none_or(|dir| remove_tree(dir, own).is_ok());
            let group_gone = cgroup.as_ref().is_none_or(|group| group.remove().is_ok());
            dir_gone && group_gone
        };
        if !done(&dir, &cgroup) {
            // Processes killed a moment ago may still be writing, or still
            // be leaving their cgroup: retry a little later, off this thread.
            std::thread::spawn(move || {
                for _ in 0..50 {
                    std::thread::sleep(Duration::from_millis(100));
                    if done(&dir, &cgroup) {
                        return;
                    }
                }
                tracing::warn!(dir = ?dir, cgroup = ?cgroup, "could not remove a run's directory or cgroup; the next start of weir sweeps them");
            });
        }
    }
}

/// Removes `dir`. When the run shared weir's uid it may have taken its own
/// permissions away; those are given back first (nothing to gain by a race:
/// the run could change them itself).
pub(super) fn remove_tree(dir: &Path, own: bool) -> std::io::Result<()> {
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
