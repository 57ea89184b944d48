//! The `weir serve` process under measurement, and CPU clocks.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// A running `weir serve --fixtures --memory`, killed when dropped.
pub struct Server {
    child: Child,
    pub pid: u32,
    /// `--http`: the port it bound.
    pub port: Option<u16>,
    clock: libc::clockid_t,
    stderr: Arc<(Mutex<StderrTail>, Condvar)>,
}

#[derive(Default)]
struct StderrTail {
    lines: Vec<String>,
    port: Option<u16>,
    closed: bool,
}

impl Server {
    /// `stdio`: the server speaks on its stdin and stdout (take them with
    /// [`Server::pipes`]); otherwise it serves HTTP on a free loopback port.
    /// With `data_dir`, runs go to SQLite there (the default store) rather
    /// than memory.
    /// `extra`: more arguments to `serve` (its limits, for many calls).
    pub fn start(
        weir: &Path,
        stdio: bool,
        data_dir: Option<&Path>,
        extra: &[String],
    ) -> Result<Server, String> {
        let mut command = Command::new(weir);
        if let Some(dir) = data_dir {
            command.arg("--data-dir").arg(dir);
        }
        command.arg("serve");
        if stdio {
            command.arg("--stdio");
        } else {
            command.args(["--http", "127.0.0.1:0"]);
        }
        // The same server as bench/e2e measures.
        if data_dir.is_none() {
            command.arg("--memory");
        }
        command
            .arg("--fixtures")
            .args(extra)
            .env_remove("RUST_LOG")
            .stdin(if stdio { Stdio::piped() } else { Stdio::null() })
            .stdout(if stdio { Stdio::piped() } else { Stdio::null() })
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", weir.display()))?;
        let pid = child.id();
        let clock = process_clock(pid)?;
        let stderr = Arc::new((Mutex::new(StderrTail::default()), Condvar::new()));
        // Drained all along, so a chatty server never blocks on its stderr.
        let pipe = child.stderr.take().expect("stderr is piped");
        let tail = stderr.clone();
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let (lock, wake) = &*tail;
                let mut tail = lock.lock().unwrap();
                if tail.port.is_none() {
                    tail.port = bound_port(&line);
                }
                if tail.lines.len() == 50 {
                    tail.lines.remove(0);
                }
                tail.lines.push(line);
                wake.notify_all();
            }
            let (lock, wake) = &*tail;
            lock.lock().unwrap().closed = true;
            wake.notify_all();
        });
        let mut server = Server {
            child,
            pid,
            port: None,
            clock,
            stderr,
        };
        if !stdio {
            server.port = Some(server.wait_for_port()?);
        }
        Ok(server)
    }

    /// The server's stdin and stdout (stdio only; once).
    pub fn pipes(&mut self) -> (ChildStdin, ChildStdout) {
        (
            self.child.stdin.take().expect("stdin is piped"),
            self.child.stdout.take().expect("stdout is piped"),
        )
    }

    fn wait_for_port(&self) -> Result<u16, String> {
        let (lock, wake) = &*self.stderr;
        let tail = lock.lock().unwrap();
        let (tail, _) = wake
            .wait_timeout_while(tail, Duration::from_secs(60), |t| {
                t.port.is_none() && !t.closed
            })
            .unwrap();
        tail.port
            .ok_or_else(|| format!("weir did not start serving HTTP: {}", tail.lines.join("\n")))
    }

    /// The server's last lines on stderr, for an error report.
    pub fn stderr_tail(&self) -> String {
        self.stderr.0.lock().unwrap().lines.join("\n")
    }

    /// CPU time the server's threads have run, all of them, those that
    /// ended included, in nanoseconds: the scheduler's own count, the one
    /// `utime + stime` in /proc/PID/stat rounds to clock ticks.
    pub fn cpu_ns(&self) -> u64 {
        clock_ns(self.clock)
    }

    /// `utime + stime` from /proc/PID/stat, in clock ticks: a cross-check
    /// of [`Server::cpu_ns`] with the kernel's coarse figure.
    pub fn stat_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // Fields after the command name, which may hold spaces: utime and
        // stime are the 14th and 15th of the line, 12th and 13th after it.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        field(11) + field(12)
    }

    /// Peak resident memory (`VmHWM`), KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// Resident memory now (`VmRSS`), KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serving MCP at http://127.0.0.1:PORT/mcp`, as weir logs it.
fn bound_port(line: &str) -> Option<u16> {
    let (_, rest) = line.split_once("serving MCP at http://127.0.0.1:")?;
    rest.split_once("/mcp")?.0.parse().ok()
}

/// The CPU-time clock of process `pid` (every thread, past and present).
fn process_clock(pid: u32) -> Result<libc::clockid_t, String> {
    let mut clock: libc::clockid_t = 0;
    let pid = libc::pid_t::try_from(pid).map_err(|e| e.to_string())?;
    // SAFETY: clock_getcpuclockid writes one clockid_t through a valid pointer.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    if rc != 0 {
        return Err(format!("clock_getcpuclockid({pid}): error {rc}"));
    }
    Ok(clock)
}

/// This process's CPU time (all its threads), ns.
pub fn own_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; a
    // clock of a process that has exited reads as an error, left at 0.
    unsafe { libc::clock_gettime(clock, &mut time) };
    time.tv_sec as u64 * 1_000_000_000 + time.tv_nsec as u64
}

/// Clock ticks per second, for [`Server::stat_ticks`].
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_port_in_weirs_log_line() {
        let line = "2026-11-22T10:00:00Z  INFO weir: serving MCP at http://127.0.0.1:40123/mcp";
        assert_eq!(super::bound_port(line), Some(40123));
    }
}
