//! A CLI's process group: ended as a whole, so nothing it started is left.

use std::time::Duration;

use weir_proc::Signal;

/// How often a terminating group is checked for survivors.
const POLL: Duration = Duration::from_millis(20);

/// The process group a CLI leads, SIGKILLed whole when dropped: whatever the
/// CLI started (its tools, codex's native binary under a Node wrapper) dies
/// with it, on success, failure, timeout or a dropped session alike.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: i32,
}

impl ProcessGroup {
    /// The group `pgid` (a leader's pid, spawned with `process_group(0)`).
    pub fn new(pgid: u32) -> ProcessGroup {
        ProcessGroup {
            pgid: pgid.try_into().unwrap_or(i32::MAX),
        }
    }

    /// Its id.
    pub fn id(&self) -> i32 {
        self.pgid
    }

    /// Whether a process of the group is alive (zombies aside).
    pub fn alive(&self) -> bool {
        weir_proc::group_alive(self.pgid)
    }

    /// SIGTERM to the group, then SIGKILL to whatever is left after
    /// `grace`.
    pub async fn terminate(&self, grace: Duration) {
        weir_proc::signal_group(self.pgid, Signal::TERM);
        let until = tokio::time::Instant::now() + grace;
        while self.alive() && tokio::time::Instant::now() < until {
            tokio::time::sleep(POLL).await;
        }
        self.kill();
    }

    /// SIGKILL to the group; a group already gone is not an error.
    pub fn kill(&self) {
        weir_proc::signal_group(self.pgid, Signal::KILL);
    }

    /// SIGKILL to the group, then waits (at most `limit`) until none of it
    /// is left: a killed process takes a moment to die, and whoever is
    /// told the session ended may look for it at once.
    pub async fn kill_and_wait(&self, limit: Duration) {
        self.kill();
        let until = tokio::time::Instant::now() + limit;
        while self.alive() && tokio::time::Instant::now() < until {
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
