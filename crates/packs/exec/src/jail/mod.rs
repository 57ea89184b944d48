//! Where programs run: a fresh directory and (when weir is root) a uid of
//! their own per run, resource limits, the sandbox when there is one, and a
//! guard that kills every process of the run when it is dropped.
//!
//! [`Jail`] holds what was found at start: the isolation, the run users
//! (`users.rs`: weir's own uid, or one leased per run), the limits. A run
//! takes a [`Cell`] (`cell.rs`: its directory and user, both given back on
//! drop), starts a [`Launch`] in it (`launch.rs`: command line, environment,
//! user, limits, pipes) and holds the [`Running`] program (`running.rs`:
//! wait, stop, find what it left, kill all on drop). `collect.rs` runs a
//! short program to its end, for probes and syntax checks.

mod cell;
mod collect;
mod launch;
mod running;
mod users;

use std::path::PathBuf;

use super::sandbox::Isolation;

pub(crate) use cell::Cell;
pub(crate) use collect::Collected;
pub(crate) use launch::Launch;
pub(crate) use running::{Running, describe_status};
pub(crate) use users::Users;

/// Why a program could not be set up or started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JailError {
    /// The run's directory, or a file in it, could not be made.
    #[error("could not prepare {path} for the run: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The program (or bubblewrap) could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    /// Every uid of the range is leased by a run.
    #[error(
        "all {count} run uids from {first} are in use by other runs; retry when one ends, or give weir a larger uid range"
    )]
    NoFreeUid { first: u32, count: u32 },
    /// The lock directory for uid leases is unusable.
    #[error("the uid lease directory {path} is unusable: {message}")]
    LeaseDir { path: PathBuf, message: String },
}

/// The resource limits of every run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) memory_bytes: u64,
    pub(crate) processes: u64,
    pub(crate) file_bytes: u64,
    pub(crate) open_files: u64,
}

/// Runs programs. Cheap to share; one per pack.
#[derive(Debug)]
pub(crate) struct Jail {
    isolation: Isolation,
    users: Users,
    work_root: PathBuf,
    limits: Limits,
}

impl Jail {
    pub(crate) fn new(
        isolation: Isolation,
        users: Users,
        work_root: PathBuf,
        limits: Limits,
    ) -> Jail {
        Jail {
            isolation,
            users,
            work_root,
            limits,
        }
    }

    pub(crate) fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    pub(crate) fn users(&self) -> &Users {
        &self.users
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// A fresh directory (and user) for one run.
    pub(crate) fn cell(&self, name: &str) -> Result<Cell, JailError> {
        Cell::create(&self.work_root, name, self.users.lease()?)
    }
}
