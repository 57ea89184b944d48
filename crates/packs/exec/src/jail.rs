//! Where programs run: a fresh directory and (when weir is root) a uid of
//! their own per run, resource limits, the sandbox when there is one, and a
//! guard that kills every process of the run when it is dropped.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::output::Stream;
use super::sandbox::Isolation;
use weir_proc::{self as process, Wanted};

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
    pub(crate) fn new(
        range: Option<std::ops::Range<u32>>,
        locks: PathBuf,
    ) -> Result<Users, JailError> {
        let uid = rustix::process::getuid().as_raw();
        let Some(range) = range.filter(|range| uid == 0 && !range.is_empty()) else {
            return Ok(Users::Own { uid });
        };
        let unusable = |message: String| JailError::LeaseDir {
            path: locks.clone(),
            message,
        };
        match std::fs::DirBuilder::new().mode(0o700).create(&locks) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(unusable(error.to_string())),
        }
        let meta = std::fs::symlink_metadata(&locks).map_err(|e| unusable(e.to_string()))?;
        use std::os::unix::fs::MetadataExt;
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

    fn lease(&self) -> Result<RunUser, JailError> {
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
                    process::signal_uid(uid, Signal::KILL);
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

/// The uid a run executes as; holding it holds the lease.
#[derive(Debug)]
struct RunUser {
    uid: u32,
    /// weir's own uid, shared with weir itself: never swept.
    own: bool,
    _lease: Option<File>,
}

/// A run's working directory, removed when dropped, and its user.
#[derive(Debug)]
pub(crate) struct Cell {
    dir: PathBuf,
    user: RunUser,
}

impl Cell {
    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `bytes` to `relative` (already checked to stay inside),
    /// making its directories.
    pub(crate) fn write(&self, relative: &Path, bytes: &[u8]) -> Result<(), JailError> {
        let path = self.dir.join(relative);
        let prepare = |source| JailError::Prepare {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(prepare)?;
        }
        std::fs::write(&path, bytes).map_err(prepare)
    }

    /// Gives the directory and all in it to the run's user.
    fn hand_over(&self) -> Result<(), JailError> {
        if self.user.own {
            return Ok(());
        }
        fn walk(path: &Path, uid: u32) -> std::io::Result<()> {
            std::os::unix::fs::lchown(path, Some(uid), Some(uid))?;
            if std::fs::symlink_metadata(path)?.is_dir() {
                for entry in std::fs::read_dir(path)? {
                    walk(&entry?.path(), uid)?;
                }
            }
            Ok(())
        }
        walk(&self.dir, self.user.uid).map_err(|source| JailError::Prepare {
            path: self.dir.clone(),
            source,
        })
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        if remove_tree(&self.dir, self.user.own).is_err() {
            // Processes killed a moment ago may still be writing: retry a
            // little later, off this thread.
            let dir = self.dir.clone();
            let own = self.user.own;
            std::thread::spawn(move || {
                for _ in 0..50 {
                    std::thread::sleep(Duration::from_millis(100));
                    if remove_tree(&dir, own).is_ok() {
                        return;
                    }
                }
                tracing::warn!(dir = %dir.display(), "could not remove a run's directory; remove it by hand");
            });
        }
    }
}

/// Removes `dir`. When the run shared weir's uid it may have taken its own
/// permissions away; those are given back first (nothing to gain by a race:
/// the run could change them itself).
fn remove_tree(dir: &Path, own: bool) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) if own => {
            fn open_up(path: &Path) {
                let Ok(meta) = std::fs::symlink_metadata(path) else {
                    return;
                };
                if meta.is_dir() {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
                    if let Ok(entries) = std::fs::read_dir(path) {
                        for entry in entries.flatten() {
                            open_up(&entry.path());
                        }
                    }
                }
            }
            open_up(dir);
            std::fs::remove_dir_all(dir)
        }
        Err(error) => Err(error),
    }
}

/// A program to start.
#[derive(Debug)]
pub(crate) struct Launch {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    /// Added to (and overriding) the run's base environment.
    pub(crate) env: Vec<(String, String)>,
    /// Written to its stdin, which is then closed; `/dev/null` when `None`.
    pub(crate) stdin: Option<Vec<u8>>,
}

/// Runs programs. Cheap to share; one per pack.
#[derive(Debug)]
pub(crate) struct Jail {
    isolation: Isolation,
    users: Users,
    work_root: PathBuf,
    limits: Limits,
}

static CELLS: AtomicU64 = AtomicU64::new(0);

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
        let user = self.users.lease()?;
        let n = CELLS.fetch_add(1, Ordering::Relaxed);
        let dir = self
            .work_root
            .join(format!("weir-exec-{name}-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|source| JailError::Prepare {
                path: dir.clone(),
                source,
            })?;
        Ok(Cell { dir, user })
    }

    /// Starts `launch` in `cell` (which it then owns) with the run's limits,
    /// inside the sandbox when there is one. `timeout` sets the CPU-time
    /// backstop; the caller enforces the wall-clock limit. Returns the guard
    /// and the program's stdout and stderr, as read, in the order read, each
    /// ending with `None`.
    pub(crate) fn spawn(
        &self,
        cell: Cell,
        launch: Launch,
        timeout: Duration,
    ) -> Result<(Running, mpsc::Receiver<Chunk>), JailError> {
        cell.hand_over()?;
        let sandboxed = matches!(self.isolation, Isolation::Bubblewrap(_));
        let (program, args) = match &self.isolation {
            Isolation::Bubblewrap(bwrap) => {
                let mut args = bwrap.args(cell.dir(), self.limits.file_bytes);
                args.push(launch.program.clone().into());
                args.extend(launch.args);
                (bwrap.path.clone(), args)
            }
            Isolation::None { .. } => (launch.program.clone(), launch.args),
        };
        let spawn_failed = |source| JailError::Spawn {
            program: program.clone(),
            source,
        };
        let (stdout, stdout_writer) = std::io::pipe().map_err(spawn_failed)?;
        let (stderr, stderr_writer) = std::io::pipe().map_err(spawn_failed)?;
        let mut command = tokio::process::Command::new(&program);
        command
            .args(args)
            .env_clear()
            .envs(base_env(&launch.program, cell.dir(), sandboxed))
            .envs(launch.env)
            .current_dir(cell.dir())
            .stdin(if launch.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(stdout_writer)
            .stderr(stderr_writer)
            .kill_on_drop(true);
        // bubblewrap's own two processes count against the limit too.
        let overhead = if sandboxed { 2 } else { 0 };
        let processes = match self.users {
            Users::Pool { .. } => self.limits.processes + overhead,
            Users::Own { uid } => process::tasks_of(uid) + self.limits.processes + overhead,
        };
        if !cell.user.own {
            command.uid(cell.user.uid).gid(cell.user.uid);
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        process::limit_child(
            &mut command,
            process::clamp(Wanted {
                memory_bytes: self.limits.memory_bytes,
                processes,
                file_bytes: self.limits.file_bytes,
                open_files: self.limits.open_files,
                // Only a backstop for the wall-clock limit, which the caller
                // enforces: all cores busy for the whole time, and then some.
                cpu_seconds: (timeout.as_secs() + 10) * cores + 10,
            }),
        );
        let mut child = command.spawn().map_err(spawn_failed)?;
        drop(command); // its copies of the pipes' write ends: EOF needs them closed
        let pid = child.id().map_or(0, |id| id as i32);
        let stdin = child.stdin.take().zip(launch.stdin);
        let (chunks, output) = mpsc::channel(16);
        read_pipe(stdout, Stream::Stdout, chunks.clone());
        read_pipe(stderr, Stream::Stderr, chunks);
        let running = Running {
            stdin,
            child,
            pid,
            reaped: false,
            sandboxed,
            cell,
        };
        Ok((running, output))
    }

    /// Runs `launch` to its end in a fresh cell holding `files`, with both
    /// outputs merged and kept up to `max_bytes`; kills it after `timeout`.
    pub(crate) async fn run_collected(
        &self,
        name: &str,
        launch: Launch,
        files: &[(PathBuf, Vec<u8>)],
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Collected, JailError> {
        let cell = self.cell(name)?;
        for (path, bytes) in files {
            cell.write(path, bytes)?;
        }
        let (mut running, mut chunks) = self.spawn(cell, launch, timeout)?;
        running.feed_stdin();
        let mut output = Vec::new();
        let mut open = 2;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut timed_out = false;
        let status = loop {
            tokio::select! {
                chunk = chunks.recv(), if open > 0 => match chunk {
                    Some((_, Some(bytes))) => {
                        let room = max_bytes.saturating_sub(output.len());
                        output.extend_from_slice(&bytes[..bytes.len().min(room)]);
                    }
                    Some((_, None)) => open -= 1,
                    None => open = 0,
                },
                status = running.wait(), if open == 0 => break status,
                () = &mut deadline, if !timed_out => {
                    timed_out = true;
                    running.kill();
                }
            }
        };
        let status = status.map_err(|source| JailError::Spawn {
            program: running.program_name(),
            source,
        })?;
        running.kill(); // anything it left running
        Ok(Collected {
            status,
            output,
            timed_out,
        })
    }
}

/// One read of a program's output, or (`None`) the end of that stream.
pub(crate) type Chunk = (Stream, Option<Vec<u8>>);

/// Most bytes read from a pipe at once.
pub(crate) const READ_BYTES: usize = 64 * 1024;
/// How long output may gather in a pipe after a small read.
const GATHER: Duration = Duration::from_millis(2);

/// Reads `pipe` on a thread of its own into `chunks`, with plain blocking
/// reads. Why not the async reactor: a pipe someone polls wakes its poller
/// on *every* write, and a program printing a million short lines then
/// spends most of its time waking weir. A blocked reader is woken only by a
/// write to an empty pipe; after a small read the thread lets output gather
/// for [`GATHER`] before reading again, so a flood of lines becomes a few
/// large chunks at the cost of at most that much latency; a full read is
/// followed by the next at once. The thread ends at the end of the stream
/// (every process of the run dead or the pipe closed by them) or when
/// nobody takes chunks any more.
fn read_pipe(mut pipe: std::io::PipeReader, stream: Stream, chunks: mpsc::Sender<Chunk>) {
    let reader = move || {
        let mut buf = vec![0; READ_BYTES];
        loop {
            let n = match std::io::Read::read(&mut pipe, &mut buf) {
                Ok(n) => n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => 0,
            };
            if n == 0 {
                let _ = chunks.blocking_send((stream, None));
                return;
            }
            if chunks
                .blocking_send((stream, Some(buf[..n].to_vec())))
                .is_err()
            {
                return;
            }
            if n < READ_BYTES / 2 {
                std::thread::sleep(GATHER);
            }
        }
    };
    let spawned = std::thread::Builder::new()
        .name(format!("weir-exec-{}", stream.name()))
        .spawn(reader);
    if let Err(error) = spawned {
        tracing::warn!(%error, "could not start a thread to read a program's output");
    }
}

/// What a program run to its end produced.
#[derive(Debug)]
pub(crate) struct Collected {
    pub(crate) status: ExitStatus,
    /// stdout and stderr, merged in the order read, cut at the limit.
    pub(crate) output: Vec<u8>,
    pub(crate) timed_out: bool,
}

/// The environment every run starts from: nothing of weir's own (no tokens,
/// no paths), a `PATH` that finds the interpreter's siblings, `HOME` and the
/// temporary directory inside the run's reach, UTF-8.
fn base_env(program: &Path, dir: &Path, sandboxed: bool) -> Vec<(String, String)> {
    let mut path = String::new();
    if let Some(parent) = program.parent().and_then(Path::to_str) {
        path.push_str(parent);
        path.push(':');
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    let dir = dir.display().to_string();
    let tmp = if sandboxed {
        "/tmp".into()
    } else {
        dir.clone()
    };
    vec![
        ("PATH".into(), path),
        ("HOME".into(), dir),
        ("TMPDIR".into(), tmp),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

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
                for (pid, depth) in process::descendants(self.pid) {
                    if depth >= 2 {
                        process::signal(pid, Signal::TERM);
                    }
                }
            }
        } else if !self.cell.user.own {
            process::signal_uid(self.cell.user.uid, Signal::TERM);
        } else {
            if !self.reaped {
                for (pid, _) in process::descendants(self.pid) {
                    process::signal(pid, Signal::TERM);
                }
            }
            process::signal_group(self.pid, Signal::TERM);
        }
    }

    /// Kills every process of the run: SIGKILL to the process tree, its
    /// process group and (with a uid of its own) every process of that uid.
    /// In the sandbox, the death of bubblewrap ends its PID namespace and so
    /// everything in it.
    pub(crate) fn kill(&self) {
        if !self.reaped {
            for (pid, _) in process::descendants(self.pid) {
                process::signal(pid, Signal::KILL);
            }
            process::signal(self.pid, Signal::KILL);
        }
        // A group's id is not reused while the group has members.
        process::signal_group(self.pid, Signal::KILL);
        if !self.cell.user.own {
            process::signal_uid(self.cell.user.uid, Signal::KILL);
        }
    }

    /// Whether a process of the run is still alive (zombies, dead but not
    /// yet reaped by whoever inherited them, do not count): a member of its
    /// process group, or a process of its uid.
    pub(crate) fn leftovers(&self) -> bool {
        process::group_alive(self.pid)
            || (!self.cell.user.own && !process::pids_of(self.cell.user.uid).is_empty())
    }

    fn program_name(&self) -> PathBuf {
        PathBuf::from(format!("process {}", self.pid))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `exit code 3`, `killed by SIGKILL`.
pub(crate) fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {}", process::signal_name(signal)),
        _ => status.to_string(),
    }
}
