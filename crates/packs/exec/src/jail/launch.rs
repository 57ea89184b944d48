//! Starting a program in a run's cell: its command line (inside the
//! sandbox or not), environment, user and limits, and its output pipes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::mpsc;
use weir_proc::{Chunk, Wanted};

use super::super::output::Stream;
use super::super::sandbox::Isolation;
use super::{Cell, Jail, JailError, Running, Users};

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

impl Jail {
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
    ) -> Result<(Running, mpsc::Receiver<Chunk<Stream>>), JailError> {
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
            Users::Own { uid } => weir_proc::tasks_of(uid) + self.limits.processes + overhead,
        };
        if let Some(uid) = cell.user().dedicated() {
            command.uid(uid).gid(uid);
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        weir_proc::limit_child(
            &mut command,
            weir_proc::clamp(Wanted {
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
        let stdin = child.stdin.take().zip(launch.stdin);
        let (chunks, output) = mpsc::channel(16);
        for (pipe, stream) in [(stdout, Stream::Stdout), (stderr, Stream::Stderr)] {
            if let Err(error) = weir_proc::read_pipe(pipe, stream, chunks.clone()) {
                tracing::warn!(%error, "could not start a thread to read a program's output");
            }
        }
        Ok((Running::new(child, stdin, sandboxed, cell), output))
    }
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
