//! Where programs run: a fresh working directory, a cgroup and (when weir
//! is root) a uid of their own per run, resource limits, the sandbox when
//! there is one, and a guard that kills every process of the run when it is
//! dropped.
//!
//! [`Jail`] holds what was found at start: the isolation, the run users
//! (`users.rs`: weir's own uid, or one leased per run), this server's place
//! on the host (`base.rs`: its own directory, locked while it lives, and the
//! sweep of what dead servers left), the cgroups runs may have, the limits.
//! A run takes a [`Cell`] (`cell.rs`: its working directory, user and
//! cgroup, all given back on drop), starts a [`Launch`] in it (`launch.rs`:
//! command line, environment, user, limits, pipes) and holds the
//! [`Running`] program (`running.rs`: wait, stop, find what it left, kill
//! all on drop). `collect.rs` runs a short program to its end, for probes
//! and syntax checks.

mod base;
mod cell;
mod collect;
mod launch;
mod running;
mod users;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use weir_proc::{Cgroups, GroupLimits};

use super::sandbox::{Isolation, SANDBOX_WORKDIR};

pub(crate) use base::Base;
pub(crate) use cell::Cell;
pub(crate) use collect::Collected;
pub(crate) use launch::{Launch, refused_variable};
pub(crate) use running::{MemoryReport, Running, describe_status};
pub(crate) use users::{Users, lease_dir};

/// Makes cell names unique within this process.
static CELLS: AtomicU64 = AtomicU64::new(0);

/// Why a program could not be set up or started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JailError {
    /// The run's directory, or a file in it, could not be made.
    #[error("could not prepare {path} for the run: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Something the program needs could not be made, or it could not be
    /// waited for.
    #[error("could not start {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    /// The program (or bubblewrap) could not be started as the run user,
    /// in its directory.
    #[error(
        "could not start {program} as uid {uid} in {dir}: {source} (the run user must be able to reach both)"
    )]
    Start {
        program: PathBuf,
        uid: u32,
        dir: PathBuf,
        source: std::io::Error,
    },
    /// Every uid of the range is leased by a run.
    #[error(
        "all {count} run uids from {first} are in use by other runs; retry when one ends, or give weir a larger uid range"
    )]
    NoFreeUid { first: u32, count: u32 },
    /// A directory weir keeps (uid leases, run directories) is unusable.
    #[error("{path} is unusable: {message}")]
    Unusable { path: PathBuf, message: String },
    /// No directory the run uids can reach holds run directories.
    #[error(
        "no temporary directory lets the run uids reach their run directories ({message}); give weir a TMPDIR that others may pass through (mode 0711 or 01777)"
    )]
    Unreachable { message: String },
    /// The run's cgroup could not be made or joined.
    #[error("the run's cgroup: {message}")]
    Cgroup { message: String },
}

/// The resource limits of every run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `RLIMIT_DATA` of each process.
    pub(crate) memory_bytes: u64,
    /// Memory of the whole run, where cgroups allow.
    pub(crate) run_memory_bytes: u64,
    pub(crate) processes: u64,
    pub(crate) file_bytes: u64,
    /// The sandbox's working directory, a tmpfs.
    pub(crate) workdir_bytes: u64,
    pub(crate) open_files: u64,
}

/// Runs programs. Cheap to share; one per pack.
#[derive(Debug)]
pub(crate) struct Jail {
    isolation: Isolation,
    users: Users,
    cgroups: Cgroups,
    limits: Limits,
    /// Declared last: its directory goes once the rest is given back.
    base: Base,
}

impl Jail {
    pub(crate) fn new(
        isolation: Isolation,
        users: Users,
        base: Base,
        cgroups: Cgroups,
        limits: Limits,
    ) -> Jail {
        Jail {
            isolation,
            users,
            cgroups,
            limits,
            base,
        }
    }

    pub(crate) fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    pub(crate) fn users(&self) -> &Users {
        &self.users
    }

    pub(crate) fn cgroups(&self) -> &Cgroups {
        &self.cgroups
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Puts `cgroups` in place of the jail's, and returns those.
    pub(crate) fn swap_cgroups(&mut self, cgroups: Cgroups) -> Cgroups {
        std::mem::replace(&mut self.cgroups, cgroups)
    }

    /// Runs go without cgroups from now on, because of `why`.
    pub(crate) fn give_up_cgroups(&mut self, why: &str) {
        self.swap_cgroups(Cgroups::none(why))
            .remove_owner(self.base.name());
    }

    /// Runs go without the sandbox from now on, because of `reason`.
    pub(crate) fn give_up_sandbox(&mut self, reason: String) {
        self.isolation = Isolation::None { reason };
    }

    /// A fresh working directory, user and cgroup for one run.
    pub(crate) fn cell(&self, name: &str) -> Result<Cell, JailError> {
        let user = self.users.lease()?;
        let unique = format!("{name}-{}", CELLS.fetch_add(1, Ordering::Relaxed));
        let cgroup = if self.cgroups.in_use() {
            let limits = GroupLimits {
                memory_bytes: self.limits.run_memory_bytes,
                pids: self.limits.processes + launch::SANDBOX_OVERHEAD,
            };
            let group =
                self.cgroups
                    .create(&unique, limits)
                    .map_err(|source| JailError::Cgroup {
                        message: format!("could not create it: {source}"),
                    })?;
            Some(group)
        } else {
            None
        };
        match &self.isolation {
            Isolation::Bubblewrap(_) => Ok(Cell::in_sandbox(user, cgroup)),
            Isolation::None { .. } => Cell::on_host(self.base.dir().join(unique), user, cgroup),
        }
    }

    /// Which limits are in force, how, and for what (`"per"`: `"run"`,
    /// `"process"`, `"file"`, `"user"`, or `"none"` with `"why"`): what
    /// `meta` and `list_languages` say.
    pub(crate) fn describe_limits(&self) -> Value {
        let limits = self.limits;
        let run_memory = match self.cgroups.memory() {
            Ok(version) => json!({
                "per": "run", "bytes": limits.run_memory_bytes,
                "how": format!("{version}: all the processes of the run together, with the files they write to memory (the sandbox's /tmp, /dev/shm and working directory) and the page cache they fill; past it the kernel kills a process of the run"),
            }),
            Err(why) => json!({
                "per": "none", "bytes": null,
                "why": format!("{why}; only process_memory holds, for each process"),
            }),
        };
        let processes = match (self.cgroups.pids(), &self.users) {
            (Ok(version), _) => json!({
                "per": "run", "count": limits.processes,
                "how": format!("{version} pids cap on the run's processes and threads"),
            }),
            (Err(_), Users::Pool { .. }) => json!({
                "per": "run", "count": limits.processes,
                "how": "RLIMIT_NPROC of the run's own uid",
            }),
            (Err(why), Users::Own { uid: 0 }) => json!({
                "per": "none", "count": null,
                "why": format!("runs execute as root, to which RLIMIT_NPROC does not apply, and there is no pids cgroup: {why}"),
            }),
            (Err(why), Users::Own { .. }) => json!({
                "per": "user", "count": limits.processes,
                "how": "RLIMIT_NPROC: at most this many more processes of weir's user (which runs share) than it had when the run started",
                "why": format!("no pids cgroup: {why}"),
            }),
        };
        let tmpfs = |bytes: u64, place: &str, host: &str| match &self.isolation {
            Isolation::Bubblewrap(bwrap) if bwrap.tmpfs_size => json!({
                "per": "run", "bytes": bytes,
                "how": format!("{place} is a tmpfs of the run's own, of this size"),
            }),
            Isolation::Bubblewrap(bwrap) => json!({
                "per": "none", "bytes": null,
                "why": format!("{place} is a tmpfs of the run's own, but bubblewrap {} cannot size it (0.5 or later can)", bwrap.version),
            }),
            Isolation::None { .. } => json!({"per": "none", "bytes": null, "why": host}),
        };
        let mut host_workdir = format!(
            "no sandbox: the working directory is on the host, under {}; only each file is capped (file)",
            self.base.root().display()
        );
        if let Some(moved) = self.base.moved() {
            host_workdir.push_str(&format!(" ({moved})"));
        }
        json!({
            "run_memory": run_memory,
            "process_memory": {
                "per": "process", "bytes": limits.memory_bytes,
                "how": "RLIMIT_DATA: each process's heap and private mappings",
            },
            "processes": processes,
            "file": {
                "per": "file", "bytes": limits.file_bytes,
                "how": "RLIMIT_FSIZE: each file a process writes",
            },
            "workdir": tmpfs(limits.workdir_bytes, &format!("the working directory {SANDBOX_WORKDIR}"), &host_workdir),
            "tmp": tmpfs(limits.file_bytes, "/tmp", "no sandbox: TMPDIR is the working directory, and /tmp is the host's"),
            "shm": tmpfs(limits.file_bytes, "/dev/shm", "no sandbox: /dev/shm is the host's, shared with everything on it"),
            "open_files": {
                "per": "process", "count": limits.open_files,
                "how": "RLIMIT_NOFILE",
            },
        })
    }

    /// The limits in one sentence, for tools' descriptions.
    pub(crate) fn limits_sentence(&self) -> String {
        let limits = self.describe_limits();
        let mib = |value: &Value| value.as_u64().map_or(0, |bytes| bytes >> 20);
        let mut parts = Vec::new();
        let memory = &limits["run_memory"];
        parts.push(if memory["per"] == "run" {
            format!(
                "{} MiB of memory per run and {} MiB per process",
                mib(&memory["bytes"]),
                mib(&limits["process_memory"]["bytes"])
            )
        } else {
            format!(
                "{} MiB of memory per process (NOT capped per run)",
                mib(&limits["process_memory"]["bytes"])
            )
        });
        let processes = &limits["processes"];
        parts.push(match processes["per"].as_str() {
            Some("run") => format!("{} processes per run", processes["count"]),
            Some("user") => format!(
                "{} processes (counted over weir's user, not per run)",
                processes["count"]
            ),
            _ => "no process limit".into(),
        });
        parts.push(format!("{} MiB per file", mib(&limits["file"]["bytes"])));
        let workdir = &limits["workdir"];
        parts.push(if workdir["per"] == "run" {
            format!(
                "a {} MiB working directory and {} MiB each of /tmp and /dev/shm",
                mib(&workdir["bytes"]),
                mib(&limits["tmp"]["bytes"])
            )
        } else {
            "a working directory NOT capped as a whole".into()
        });
        parts.join(", ")
    }

    /// What a run's working directory is, for people.
    pub(crate) fn describe_workdir(&self) -> String {
        match &self.isolation {
            Isolation::Bubblewrap(_) => format!(
                "{SANDBOX_WORKDIR}, a tmpfs of the run's own inside the sandbox, gone with it"
            ),
            Isolation::None { .. } => format!(
                "a directory of its own under {} on the host, removed afterwards (or at the next start after a crash)",
                self.base.root().display()
            ),
        }
    }

    /// Removes what servers that are gone left: their run directories and
    /// cgroups. A server's directory in the base is swept when its lock is
    /// free; a cgroup whose server has no directory in this base (it kept
    /// its runs elsewhere), when its name shows the server is gone. Returns
    /// how many servers' leftovers were swept.
    pub(crate) fn sweep(&self) -> usize {
        let swept = self.base.sweep(|dead| self.cgroups.remove_owner(dead));
        let orphans: Vec<String> = self
            .cgroups
            .owners(base::OWNER_PREFIX)
            .into_iter()
            .filter(|owner| base::gone(owner))
            .collect();
        for owner in &orphans {
            self.cgroups.remove_owner(owner);
        }
        swept + orphans.len()
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        self.cgroups.remove_owner(self.base.name());
    }
}
