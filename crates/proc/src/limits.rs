//! Resource limits, set in the child between fork and exec.

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

/// Makes `command`'s child the leader of a new session (so of a new process
/// group whose id is its pid), killed when the thread that spawned it dies,
/// and bound by `limits`.
///
/// The one `unsafe` in weir: limits must be in place before the
/// child's program runs its first instruction, so they are set between fork
/// and exec, which only `pre_exec` allows.
#[allow(unsafe_code)]
pub fn limit_child(command: &mut tokio::process::Command, limits: Rlimits) {
    let hook = move || -> std::io::Result<()> {
        rustix::process::setsid()?;
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
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
    // async-signal-safe work is sound. It makes four kinds of raw system
    // call (setsid, prctl, setrlimit; rustix's linux_raw backend, no libc
    // state), reads only `limits`, a Copy array captured before the fork,
    // allocates nothing (an error converts to io::Error from its raw errno)
    // and takes no locks.
    unsafe {
        command.pre_exec(hook);
    }
}
