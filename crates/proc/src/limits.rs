//! Resource limits, set in the child between fork and exec.

use std::os::fd::OwnedFd;

use rustix::io::FdFlags;
use rustix::process::{Resource, Rlimit, Signal};

/// Resource limits for a child, as (resource, soft, hard), already clamped
/// to what this process may set.
pub type Rlimits = [(Resource, u64, u64); 6];

/// The limits a run asks for, before clamping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// `RLIMIT_DATA`, bytes.
    pub memory_bytes: u64,
    /// `RLIMIT_NPROC`: tasks of the real uid.
    pub processes: u64,
    /// `RLIMIT_FSIZE`, bytes per file.
    pub file_bytes: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: u64,
}

/// `wanted` as rlimits this process may give a child: never above its own
/// hard limits (only a privileged process may raise those).
/// `RLIMIT_DATA` bounds memory (heap and private mappings, not the address
/// space reservations runtimes such as V8 make); `RLIMIT_NPROC` counts every
/// task of the child's real uid.
pub fn clamp(wanted: Wanted) -> Rlimits {
    let clamped = |resource: Resource, value: u64| {
        let hard = rustix::process::getrlimit(resource)
            .maximum
            .unwrap_or(u64::MAX);
        (resource, value.min(hard), value.min(hard))
    };
    let cpu = clamped(Resource::Cpu, wanted.cpu_seconds);
    [
        clamped(Resource::Data, wanted.memory_bytes),
        clamped(Resource::Nproc, wanted.processes),
        clamped(Resource::Fsize, wanted.file_bytes),
        clamped(Resource::Nofile, wanted.open_files),
        clamped(Resource::Core, 0),
        // SIGXCPU at the soft limit, SIGKILL one second later.
        (cpu.0, cpu.1.saturating_sub(1).max(1), cpu.2),
    ]
}

/// What a child takes with it between fork and exec, besides its limits.
#[derive(Debug, Default)]
pub struct Handover {
    /// Open `cgroup.procs` files of the groups the child joins, one per
    /// cgroup hierarchy (see [`Group::join`](crate::Group::join)). The child
    /// writes itself into each before its program runs, so every process it
    /// starts is born inside them: a process moved in after the spawn could
    /// have forked already.
    pub cgroups: Vec<OwnedFd>,
    /// Descriptors the child keeps across exec, at their numbers. Open them
    /// close-on-exec: only this child then inherits them, never another
    /// spawned at the same moment.
    pub keep: Vec<OwnedFd>,
}

/// Makes `command`'s child the leader of a new session (so of a new process
/// group whose id is its pid), killed when the thread that spawned it dies,
/// a member of `handover`'s cgroups, holding its descriptors, and bound by
/// `limits`.
///
/// The one `unsafe` in weir: limits and cgroups must be in place before the
/// child's program runs its first instruction, so they are set between fork
/// and exec, which only `pre_exec` allows. The hook runs after the child
/// took its uid: the cgroup files were opened by this process, and the
/// kernel checks a write to them against the credentials of whoever opened
/// them.
#[allow(unsafe_code)]
pub fn limit_child(command: &mut tokio::process::Command, limits: Rlimits, handover: Handover) {
    let hook = move || -> std::io::Result<()> {
        rustix::process::setsid()?;
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        for procs in &handover.cgroups {
            // "0" is the writer itself.
            rustix::io::write(procs, b"0")?;
        }
        for fd in &handover.keep {
            rustix::io::fcntl_setfd(fd, FdFlags::empty())?;
        }
        for (resource, soft, hard) in limits {
            rustix::process::setrlimit(
                resource,
                Rlimit {
                    current: Some(soft),
                    maximum: Some(hard),
                },
            )?;
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec, where only
    // async-signal-safe work is sound. It makes raw system calls (setsid,
    // prctl, write, fcntl, setrlimit; rustix's linux_raw backend, no libc
    // state), reads only what it owns (`limits`, a Copy array, and
    // `handover`'s descriptors, opened before the fork), allocates nothing
    // (an error converts to io::Error from its raw errno) and takes no locks.
    unsafe {
        command.pre_exec(hook);
    }
}
