//! Processes, as the kernel sees them: resource limits set between fork and
//! exec, process trees read from `/proc`, and signals to whole trees and to
//! every process of a uid.
//!
//! **For:** tool packs that run programs (exec today; the coding-agent
//! drivers next) and must find and kill every process a run started.
//! **Not for:** deciding policy (which limits, which user, which sandbox):
//! that is the pack's. This crate holds the workspace's one `unsafe` block,
//! the `pre_exec` hook of [`limit_child`]; everything else is safe calls
//! through rustix. Linux only.
#![warn(missing_docs)]

use std::os::unix::process::CommandExt as _;
use std::process::Stdio;

use rustix::process::{Pid, Resource, Rlimit, Signal};

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

/// One process, from `/proc/<pid>/stat`.
#[derive(Clone, Copy, Debug)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    /// Dead, waiting to be reaped by its parent (or by init, which
    /// inherited it): it runs nothing and holds nothing but its pid.
    zombie: bool,
}

fn all_processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
            let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            let pgrp = fields.next()?.parse().ok()?;
            Some(Proc {
                pid,
                ppid,
                pgrp,
                zombie: state == "Z" || state == "X",
            })
        })
        .collect()
}

/// The processes below `root`, with their depth (children are 1).
pub fn descendants(root: i32) -> Vec<(i32, usize)> {
    let all = all_processes();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    let mut depth = 0;
    while !frontier.is_empty() && depth < 64 {
        depth += 1;
        let next: Vec<i32> = all
            .iter()
            .filter(|p| frontier.contains(&p.ppid))
            .map(|p| p.pid)
            .collect();
        found.extend(next.iter().map(|&pid| (pid, depth)));
        frontier = next;
    }
    found
}

/// The real uid of `pid`, from `/proc/<pid>/status`.
fn real_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The living (not zombie) processes whose real uid is `uid`.
pub fn pids_of(uid: u32) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|p| !p.zombie && real_uid(p.pid) == Some(uid))
        .map(|p| p.pid)
        .collect()
}

/// Whether process group `pgid` has a living (not zombie) member.
pub fn group_alive(pgid: i32) -> bool {
    all_processes().iter().any(|p| p.pgrp == pgid && !p.zombie)
}

/// How many tasks (threads included: that is what `RLIMIT_NPROC` counts)
/// `uid` has now.
pub fn tasks_of(uid: u32) -> u64 {
    all_processes()
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{}/status", p.pid)).ok())
        .filter(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(1))
                == Some(uid.to_string().as_str())
        })
        .filter_map(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Threads:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Sends `signal` to process `pid`; a process already gone is not an error.
pub fn signal(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Sends `signal` to process group `pgid`; a group already gone is not an error.
pub fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pgid) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pgid, signal);
    }
}

/// Sends `signal` to every process of `uid` at once, including those that
/// left their process group or session: a helper running as `uid` calls
/// `kill(-1, signal)`, which the kernel applies to all of them while
/// holding the task list, so none can fork past it. Only for a uid that
/// belongs to weir's runs alone, and only when weir is root.
pub fn signal_uid(uid: u32, signal: Signal) {
    if pids_of(uid).is_empty() {
        return;
    }
    let name = if signal == Signal::TERM {
        "TERM"
    } else {
        "KILL"
    };
    let swept = std::process::Command::new("/bin/sh")
        .args(["-c", &format!("kill -{name} -1")])
        .uid(uid)
        .gid(uid)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(error) = swept {
        tracing::warn!(uid, %error, "could not signal the processes of a run's uid");
    }
}

/// A signal's name, e.g. `SIGKILL`.
pub fn signal_name(number: i32) -> String {
    let name = match number {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return format!("signal {number}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_with_their_depth() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        let mut found = Vec::new();
        for _ in 0..100 {
            found = descendants(root);
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, 1);
        signal(found[0].0, Signal::KILL);
        child.wait().unwrap();
    }

    #[test]
    fn this_process_counts_as_a_task_of_its_uid() {
        let uid = rustix::process::getuid().as_raw();
        assert!(tasks_of(uid) >= 1);
        assert!(pids_of(uid).contains(&(std::process::id() as i32)));
    }

    #[test]
    fn signals_have_their_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(40), "signal 40");
    }
}
