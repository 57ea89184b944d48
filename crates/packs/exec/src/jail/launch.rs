//! Starting a program in a run's cell: its command line (inside the
//! sandbox or not), environment, user, limits and cgroup, and its output
//! pipes.
//!
//! **The environment.** The caller's `env` is the program's and nobody
//! else's. Without the sandbox the interpreter *is* the program, and gets
//! the run's environment. With it, bubblewrap is started with an empty
//! environment and told the program's with `--setenv`, read from a
//! descriptor (`--args`) rather than its command line, which every user of
//! the host may read: the caller's variables exist only inside the sandbox,
//! in the process that runs the caller's code. A variable that changes what
//! the dynamic loader or the C library does before a program starts
//! ([`refused_variable`]) is refused outright, in every mode.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::mpsc;
use weir_proc::{Chunk, Handover, Wanted};

use super::super::output::Stream;
use super::super::sandbox::{Isolation, SANDBOX_WORKDIR};
use super::{Cell, Jail, JailError, Running, Users};

/// A program to start.
#[derive(Debug)]
pub(crate) struct Launch {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    /// Added to (and overriding) the run's base environment. Never holds a
    /// [`refused_variable`]: the caller's arguments are checked first.
    pub(crate) env: Vec<(String, String)>,
    /// Written to its stdin, which is then closed; `/dev/null` when `None`.
    pub(crate) stdin: Option<Vec<u8>>,
}

/// Why a program may not be given environment variable `name`, if it may
/// not.
///
/// The rule: a variable is refused when it makes the dynamic loader or the
/// C library load code, or read files, chosen by whoever sets it, before
/// the program's own code runs — glibc ignores these same variables for
/// set-user-ID programs for that reason. Inside the sandbox they would gain
/// a caller nothing (their code already runs there), but they are exactly
/// what turned a caller's `env` into code running *outside* it when the
/// environment reached bubblewrap; refusing them keeps any future leak of
/// the environment to a process weir starts from being an escape, in
/// every mode. `GLIBC_TUNABLES` has itself been a loader exploit.
///
/// Allowed on purpose: `TMPDIR` (weir sets it to the run's private
/// temporary directory; pointing it elsewhere only moves where the program
/// writes), `TZ`, `LANG`/`LC_*` values, and the interpreters' own startup
/// variables (`PYTHONPATH`, `NODE_OPTIONS`, `PERL5LIB`, `RUBYOPT`,
/// `BASH_ENV`…): they act inside the interpreter, which is the caller's
/// own program in the caller's own run, and are how callers use the files
/// they send (`PYTHONPATH=lib`). No weir process but the program ever sees
/// them (probes and syntax checks run with no caller environment).
pub(crate) fn refused_variable(name: &str) -> Option<&'static str> {
    const LOADER: &str =
        "it makes the dynamic loader load code or read files before the program starts";
    const LIBC: &str = "it makes the C library load code or read files chosen by the caller before the program runs";
    if name.starts_with("LD_") {
        return Some(LOADER);
    }
    if name.starts_with("MALLOC_") {
        return Some("it changes the C library's allocator, and can make it write files");
    }
    match name {
        "GLIBC_TUNABLES" => Some(
            "it tunes the dynamic loader and the C library before the program starts (and has been a loader exploit)",
        ),
        "GCONV_PATH" | "GETCONF_DIR" | "HOSTALIASES" | "LOCALDOMAIN" | "LOCPATH" | "NIS_PATH"
        | "NLSPATH" | "RESOLV_HOST_CONF" | "RES_OPTIONS" | "TZDIR" => Some(LIBC),
        _ => None,
    }
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
        debug_assert!(
            launch
                .env
                .iter()
                .all(|(name, _)| refused_variable(name).is_none())
        );
        cell.hand_over()?;
        let sandboxed = matches!(self.isolation, Isolation::Bubblewrap(_));
        let mut env = base_env(&launch.program, cell.workdir(), sandboxed);
        env.extend(launch.env);
        let spawn_failed = |program: &Path| {
            let program = program.to_owned();
            move |source| JailError::Spawn { program, source }
        };
        let mut keep = Vec::new();
        let mut command = match &self.isolation {
            Isolation::Bubblewrap(bwrap) => {
                let failed = spawn_failed(&bwrap.path);
                // The program's environment and files reach bubblewrap
                // through descriptors: nothing of them on its command line.
                let mut settings = Vec::new();
                for (name, value) in &env {
                    for word in ["--setenv", name, value] {
                        settings.extend_from_slice(word.as_bytes());
                        settings.push(0);
                    }
                }
                let settings = memfd(&settings).map_err(failed)?;
                let mut args: Vec<OsString> =
                    vec!["--args".into(), settings.as_raw_fd().to_string().into()];
                keep.push(settings);
                let limits = &self.limits;
                args.extend(bwrap.args(limits.workdir_bytes, limits.file_bytes));
                for (relative, bytes) in cell.staged() {
                    let fd = memfd(bytes).map_err(spawn_failed(&bwrap.path))?;
                    args.push("--file".into());
                    args.push(fd.as_raw_fd().to_string().into());
                    args.push(Path::new(SANDBOX_WORKDIR).join(relative).into());
                    keep.push(fd);
                }
                args.extend(bwrap.finish());
                args.push(launch.program.clone().into());
                args.extend(launch.args);
                let mut command = tokio::process::Command::new(&bwrap.path);
                // bubblewrap needs no environment of its own, and must
                // have none of the caller's.
                command.args(args).env_clear().current_dir("/");
                command
            }
            Isolation::None { .. } => {
                let mut command = tokio::process::Command::new(&launch.program);
                command
                    .args(launch.args)
                    .env_clear()
                    .envs(env)
                    .current_dir(cell.workdir());
                command
            }
        };
        let program = PathBuf::from(command.as_std().get_program());
        let (stdout, stdout_writer) = std::io::pipe().map_err(spawn_failed(&program))?;
        let (stderr, stderr_writer) = std::io::pipe().map_err(spawn_failed(&program))?;
        command
            .stdin(if launch.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(stdout_writer)
            .stderr(stderr_writer)
            .kill_on_drop(true);
        let processes = match self.users {
            Users::Pool { .. } => self.limits.processes + SANDBOX_OVERHEAD,
            Users::Own { uid } => {
                weir_proc::tasks_of(uid) + self.limits.processes + SANDBOX_OVERHEAD
            }
        };
        if let Some(uid) = cell.user().dedicated() {
            command.uid(uid).gid(uid);
        }
        let cgroups = match cell.cgroup() {
            Some(group) => group.join().map_err(|source| JailError::Cgroup {
                message: format!("could not open the run's cgroup to join it: {source}"),
            })?,
            None => Vec::new(),
        };
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
            Handover { cgroups, keep },
        );
        let mut child = command.spawn().map_err(|source| JailError::Start {
            program: program.clone(),
            uid: cell
                .user()
                .dedicated()
                .unwrap_or_else(|| rustix::process::getuid().as_raw()),
            dir: command
                .as_std()
                .get_current_dir()
                .map_or_else(PathBuf::new, Path::to_owned),
            source,
        })?;
        // Its copies of the pipes' write ends (EOF needs them closed) and of
        // the descriptors handed over.
        drop(command);
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

/// bubblewrap's own processes (the one weir starts, and the PID
/// namespace's first), counted against a run's process limits too.
pub(super) const SANDBOX_OVERHEAD: u64 = 2;

/// `bytes` in an anonymous file, close-on-exec, read from its start.
fn memfd(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create("weir-exec", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = File::from(fd);
    file.write_all(bytes)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(file.into())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_and_libc_variables_are_refused_and_the_rest_allowed() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "LD_ANYTHING_NEW",
            "GCONV_PATH",
            "GLIBC_TUNABLES",
            "MALLOC_TRACE",
            "HOSTALIASES",
            "LOCALDOMAIN",
            "LOCPATH",
            "NLSPATH",
            "RESOLV_HOST_CONF",
            "RES_OPTIONS",
            "GETCONF_DIR",
            "NIS_PATH",
            "TZDIR",
        ] {
            assert!(refused_variable(name).is_some(), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "TMPDIR",
            "TZ",
            "LANG",
            "PYTHONPATH",
            "NODE_OPTIONS",
            "API_KEY",
            "ld_preload",
            "OLD_PRELOAD",
        ] {
            assert!(refused_variable(name).is_none(), "{name}");
        }
    }
}
