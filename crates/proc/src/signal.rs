//! Signals to a process, a process group, or every process of a uid.

use std::os::unix::process::CommandExt as _;
use std::process::Stdio;

use rustix::process::{Pid, Signal};

use crate::pids_of;

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
    fn signals_have_their_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(40), "signal 40");
    }
}
