//! A started program: feeding its stdin, waiting for it, stopping it,
//! finding what it left running, and killing it all when dropped.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use weir_proc::Signal;

use super::Cell;

/// A started program and everything it starts. Dropping it kills them all
/// (SIGKILL, at once) and removes the run's directory: that is how a
/// cancelled or timed-out run, whose future the runtime drops, is cleaned up.
#[derive(Debug)]
pub(crate) struct Running {
    stdin: Option<(ChildStdin, Vec<u8>)>,
    child: Child,
    /// Also the id of its process group and session.
    pid: i32,
    reaped: bool,
    sandboxed: bool,
    /// Dropped after the processes are killed.
    cell: Cell,
}

impl Running {
    /// The guard of `child`, just started in `cell` (leading a session of
    /// its own), with the bytes for its stdin when it has one.
    pub(super) fn new(
        child: Child,
        stdin: Option<(ChildStdin, Vec<u8>)>,
        sandboxed: bool,
        cell: Cell,
    ) -> Running {
        Running {
            stdin,
            pid: child.id().map_or(0, |id| id as i32),
            child,
            reaped: false,
            sandboxed,
            cell,
        }
    }

    /// Writes the run's stdin (from a task of its own, so a program that
    /// does not read it cannot block the run), then closes it.
    pub(crate) fn feed_stdin(&mut self) {
        if let Some((mut stdin, bytes)) = self.stdin.take() {
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
            });
        }
    }

    /// Waits for the started process to end (cancel-safe).
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.reaped = true;
        Ok(status)
    }

    /// How the program ended: exit code or signal. bubblewrap reports a
    /// program killed by signal N as exit code 128 + N, as shells do; that
    /// is read back as the signal.
    pub(crate) fn outcome(&self, status: ExitStatus) -> (Option<i32>, Option<i32>) {
        match (status.code(), status.signal()) {
            (Some(code), _) if self.sandboxed && (129..=128 + 64).contains(&code) => {
                (None, Some(code - 128))
            }
            (code, signal) => (code, signal),
        }
    }

    /// Asks the program to stop: SIGTERM to each of its processes (inside
    /// the sandbox, not to bubblewrap itself, which would end everything
    /// with SIGKILL at once).
    pub(crate) fn terminate(&self) {
        if self.sandboxed {
            if !self.reaped {
                for (pid, depth) in weir_proc::descendants(self.pid) {
                    if depth >= 2 {
                        weir_proc::signal(pid, Signal::TERM);
                    }
                }
            }
        } else if let Some(uid) = self.cell.user().dedicated() {
            weir_proc::signal_uid(uid, Signal::TERM);
        } else {
            if !self.reaped {
                for (pid, _) in weir_proc::descendants(self.pid) {
                    weir_proc::signal(pid, Signal::TERM);
                }
            }
            weir_proc::signal_group(self.pid, Signal::TERM);
        }
    }

    /// Kills every process of the run: SIGKILL to its cgroup, the process
    /// tree, its process group and (with a uid of its own) every process of
    /// that uid. In the sandbox, the death of bubblewrap ends its PID
    /// namespace and so everything in it.
    pub(crate) fn kill(&self) {
        if let Some(group) = self.cell.cgroup() {
            group.kill();
        }
        if !self.reaped {
            for (pid, _) in weir_proc::descendants(self.pid) {
                weir_proc::signal(pid, Signal::KILL);
            }
            weir_proc::signal(self.pid, Signal::KILL);
        }
        // A group's id is not reused while the group has members.
        weir_proc::signal_group(self.pid, Signal::KILL);
        if let Some(uid) = self.cell.user().dedicated() {
            weir_proc::signal_uid(uid, Signal::KILL);
        }
    }

    /// Whether a process of the run is still alive (zombies, dead but not
    /// yet reaped by whoever inherited them, do not count): a member of its
    /// cgroup or process group, or a process of its uid. A process on its
    /// way out counts until it is a zombie: see [`Running::left_running`].
    pub(crate) fn leftovers(&self) -> bool {
        self.cell.cgroup().is_some_and(|group| !group.is_empty())
            || weir_proc::group_alive(self.pid)
            || self
                .cell
                .user()
                .dedicated()
                .is_some_and(|uid| !weir_proc::pids_of(uid).is_empty())
    }

    /// Whether, the program having ended, something of the run is still
    /// alive after `settle` (looked for every `poll`): what goes by itself
    /// within it was on its way out, not left running. In the sandbox that
    /// is everything: its PID namespace ends with the program, which takes
    /// the kernel a moment; outside it, a process that is exiting, or whose
    /// parent is reaping it.
    pub(crate) async fn left_running(&self, settle: Duration, poll: Duration) -> bool {
        let until = tokio::time::Instant::now() + settle;
        loop {
            if !self.leftovers() {
                return false;
            }
            if tokio::time::Instant::now() >= until {
                return true;
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// How the run's memory went, when its cgroup caps it: the most it held
    /// at once, and how many of its processes the kernel killed for
    /// reaching the cap.
    pub(crate) fn memory(&self) -> MemoryReport {
        let group = self.cell.cgroup();
        MemoryReport {
            peak_bytes: group.and_then(|group| group.peak_memory()),
            oom_kills: group.and_then(|group| group.oom_kills()),
        }
    }

    /// What to call the program in an error, once its path is out of reach.
    pub(super) fn program_name(&self) -> PathBuf {
        PathBuf::from(format!("process {}", self.pid))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A run's memory, from its cgroup; `None` where memory is not capped per
/// run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemoryReport {
    pub(crate) peak_bytes: Option<u64>,
    pub(crate) oom_kills: Option<u64>,
}

/// `exit code 3`, `killed by SIGKILL`.
pub(crate) fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {}", weir_proc::signal_name(signal)),
        _ => status.to_string(),
    }
}
