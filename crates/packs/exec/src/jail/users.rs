//! Which uid a run executes as: weir's own, or (when weir is root) one of a
//! range leased per run through lock files.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use weir_proc::Signal;

use super::JailError;

/// Which uid runs execute as.
#[derive(Debug)]
pub(crate) enum Users {
    /// weir's own uid (it is not root, or has no uid range).
    Own { uid: u32 },
    /// A uid of its own per run, leased from a range through lock files, so
    /// that several weir processes on one machine never share one.
    Pool {
        first: u32,
        count: u32,
        locks: PathBuf,
        next: AtomicU32,
    },
}

impl Users {
    /// A uid per run from `range` when this process is root; else its own.
    /// `locks` is where leases are taken: one directory for every server
    /// of the machine (see [`lease_dir`]).
    pub(crate) fn new(
        range: Option<std::ops::Range<u32>>,
        locks: PathBuf,
    ) -> Result<Users, JailError> {
        let uid = rustix::process::getuid().as_raw();
        let Some(range) = range.filter(|range| uid == 0 && !range.is_empty()) else {
            return Ok(Users::Own { uid });
        };
        let unusable = |message: String| JailError::Unusable {
            path: locks.clone(),
            message,
        };
        match std::fs::DirBuilder::new().mode(0o700).create(&locks) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(unusable(error.to_string())),
        }
        let meta = std::fs::symlink_metadata(&locks).map_err(|e| unusable(e.to_string()))?;
        if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return Err(unusable(
                "it must be a directory owned by root and writable only by it".into(),
            ));
        }
        Ok(Users::Pool {
            first: range.start,
            count: range.end - range.start,
            locks,
            next: AtomicU32::new(std::process::id()),
        })
    }

    /// The user of one run: weir's own, or the next free uid of the pool,
    /// locked until the returned lease is dropped.
    pub(super) fn lease(&self) -> Result<RunUser, JailError> {
        let (first, count, locks, next) = match self {
            Users::Own { uid } => {
                return Ok(RunUser {
                    uid: *uid,
                    own: true,
                    _lease: None,
                });
            }
            Users::Pool {
                first,
                count,
                locks,
                next,
            } => (*first, *count, locks, next),
        };
        let start = next.fetch_add(1, Ordering::Relaxed);
        for i in 0..count {
            let uid = first + start.wrapping_add(i) % count;
            let path = locks.join(uid.to_string());
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&path)
                .map_err(|source| JailError::Prepare { path, source })?;
            match file.try_lock() {
                Ok(()) => {
                    // Whatever a run before a crash left behind goes first.
                    weir_proc::signal_uid(uid, Signal::KILL);
                    return Ok(RunUser {
                        uid,
                        own: false,
                        _lease: Some(file),
                    });
                }
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(JailError::Prepare {
                        path: locks.join(uid.to_string()),
                        source,
                    });
                }
            }
        }
        Err(JailError::NoFreeUid { first, count })
    }

    /// Who runs execute as, for people.
    pub(crate) fn describe(&self) -> String {
        match self {
            Users::Pool { first, count, .. } => format!(
                "a uid of its own per run (from {first} to {}), so the process limit is per run and every process of a run can be found and killed",
                first + count - 1
            ),
            Users::Own { uid: 0 } => "root, weir's own user: the process limit is NOT enforced for root (give weir a uid range)".into(),
            Users::Own { uid } => format!(
                "weir's own uid {uid}: the process limit counts all of that user's processes"
            ),
        }
    }
}

/// Where root servers lease run uids: one directory for the whole machine,
/// whatever each server's temporary directory, or two servers could lease
/// the same uid — and each kills every process of a uid it leases. `/run`
/// is root's, never private to a service, and emptied at boot, as leases
/// should be; where it is missing or read-only (some containers), `fallback`.
pub(crate) fn lease_dir(fallback: PathBuf) -> PathBuf {
    let machine = PathBuf::from("/run/weir-exec-uids");
    match std::fs::DirBuilder::new().mode(0o700).create(&machine) {
        Ok(()) => machine,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => machine,
        Err(_) => fallback,
    }
}

/// The uid a run executes as; holding it holds the lease.
#[derive(Debug)]
pub(super) struct RunUser {
    uid: u32,
    /// weir's own uid, shared with weir itself: never swept.
    own: bool,
    _lease: Option<File>,
}

impl RunUser {
    /// The uid when it is the run's alone (leased), so that its files may
    /// be given to it and every process of it killed; `None` when the run
    /// shares weir's own uid.
    pub(super) fn dedicated(&self) -> Option<u32> {
        (!self.own).then_some(self.uid)
    }
}
