//! weir's code execution pack: `execute_code`, `validate_code`,
//! `list_languages`.
//!
//! **For:** running a caller's program under limits (and bubblewrap where it
//! works here), its output streamed line by line as `partial` events.
//! **Not for:** protocols. The pack reports through its `RunContext` and
//! returns a result; it never knows whether its caller speaks MCP, SSE or
//! nothing at all. It depends on `weir-core`, `weir-runtime` and `weir-proc`,
//! never on an MCP crate, a store or another pack.
//!
//! **What a run does.** The code goes into a fresh working directory (with
//! the caller's `files`), and the language's interpreter — found on this
//! machine at start, never assumed — runs it there, with a minimal
//! environment (nothing of the server's; the caller's `env` reaches the
//! program and nothing else, and variables that steer the dynamic loader or
//! the C library, `LD_PRELOAD` and its kin, are refused), an unbuffered
//! stdout where the interpreter allows it, and these limits:
//!
//! | limit | how | default |
//! |---|---|---|
//! | wall clock | `timeout_s`: SIGTERM to every process of the run, SIGKILL after [`ExecConfig::kill_grace`] | 30 s (at most 10 min) |
//! | output | shown up to [`ExecConfig::max_output_bytes`]; the rest is counted, not kept, after a notice | 16 MiB |
//! | memory of the run | a cgroup of its own (v2, or the v1 memory hierarchy on hybrid machines) where weir may create one; else not capped per run, and the pack says so | 1 GiB |
//! | memory of a process | `RLIMIT_DATA` | 512 MiB |
//! | processes | the run's pids cgroup; else `RLIMIT_NPROC` (per run when weir is root: see below) | 64 |
//! | file size | `RLIMIT_FSIZE` per file | 64 MiB |
//! | working directory | sandboxed: a tmpfs of its own of this size (not capped without the sandbox) | 256 MiB |
//! | `/tmp`, `/dev/shm` | sandboxed: a tmpfs of its own each (the host's without the sandbox) | 64 MiB each |
//! | CPU time | `RLIMIT_CPU`, only a backstop for the wall clock | — |
//!
//! `meta` and `list_languages` state each limit with what it applies to
//! (`"per": "run"`, `"process"`, `"file"`, `"user"`, or `"none"` with
//! `"why"`). The program leads a new session; when it ends, whatever it
//! left running is killed (and the result says so), and so is everything
//! when the run is cancelled (the runtime drops the run's future; the
//! guard's `Drop` sends SIGKILL at once). Only what is still alive a moment
//! after the program ended counts as left running: a process on its way
//! out is not, and in the sandbox nothing is, since the sandbox ends with
//! the program.
//!
//! **Output.** stdout and stderr become `partial` events with group
//! `"stdout"` or `"stderr"`, each holding whole lines (as many as were read
//! together, up to [`ExecConfig::chunk_bytes`]) in the order read: a line
//! reaches the log as soon as it is written, and lines written faster than
//! a couple of milliseconds apart travel together (a million lines make a
//! few hundred events, not a million). A line longer than a chunk is split
//! between characters; a line without its end is sent after
//! [`ExecConfig::idle_flush`], or as soon as the other stream speaks. Past
//! the output cap, one `partial` of group `"weir"` (and a `warning`) says
//! so, and the rest is only counted. Order *across* the two streams is the order weir read them,
//! exact when the writes are more than a read apart (two pipes carry no
//! common clock). Invalid UTF-8 is replaced (with one warning per stream),
//! or `output_encoding: "base64"` sends the exact bytes: each stream's
//! chunks are cut on 3-byte boundaries, so that joined they are the base64
//! of the whole stream (the last 1 or 2 bytes of a chunk wait for the
//! stream's next one). `meta` comes first: language, interpreter, version,
//! the sandbox, the limits, and that progress counts lines.
//!
//! **Progress.** With the partials, `progress` events (`RunContext::milestone`):
//! the lines written so far, the newest as the message, at most one report
//! every 50 ms; phase `running`, then `timed out` and `killed` as the
//! timeout stops the program. Lines are counted as the MCP server counts
//! streamed text when it makes progress of partials itself, so a client
//! sees one count throughout.
//!
//! **Result.** The text content is the summary (exit code or signal,
//! duration, timeout, truncation, the sandbox); the MCP server puts the
//! streamed output before it. The structured result has the exit code,
//! signal, duration, byte counts, whether the output passed the cap
//! (`truncated`) and, where memory is capped per run, the run's peak memory
//! and how many of its processes the kernel killed at the cap; the tool
//! declares `stdout` and `stderr` as text fields
//! (`ToolInfo::with_text_fields`), so the server adds the output itself,
//! within its result limit, for hosts that show their model only the
//! structured result.
//!
//! **A program that fails is a failed run.** When it exits non-zero, is
//! killed by a signal or times out, the run ends `failed` (code
//! `tool_error`, or `timeout`) with its whole result kept
//! (`RunError::with_result`): an MCP result marked `isError: true` that
//! still has the output, the summary and every structured field; a plan
//! step that failed, so it is retried and branched on. A model, a host or
//! a plan never takes it for a success.
//!
//! **Sandbox.** With [`SandboxMode::Auto`] (the default) the pack tries
//! bubblewrap at start — it runs a real sandboxed command as the run user —
//! and uses it when that works: new user, PID, network, IPC and UTS
//! namespaces (so no network but loopback, and every process of the run dies
//! with it); of the host, only system directories, read-only (so not the
//! data directory, home directories, the host's temporary directories or
//! other runs; [`ExecConfig::hidden`] paths are masked even inside those);
//! private, sized `/tmp`, `/dev/shm` and working directory. bubblewrap
//! itself runs with an empty environment. When it does not work, runs get
//! limits only, and `meta`, `list_languages`, the tools' descriptions and
//! [`ExecPack::unsandboxed_reason`] say so and why.
//!
//! **Users.** When weir runs as root, each run executes as a uid of its own
//! from [`ExecConfig::run_uids`] (leased through lock files in one directory
//! for the whole machine, so several servers never share one): root-only
//! files stay unreadable, the process limit holds per run (the kernel does
//! not apply it to root), and every process of the run — even one that left
//! its session — is killed at the end with one `kill(-1)` from that uid.
//! Otherwise runs execute as weir's own user; then the process limit counts
//! all that user's processes (unless a pids cgroup caps the run), and
//! without the sandbox a process that leaves its session and parent can
//! outlive the run (unless the run's cgroup holds it).
//!
//! **After a crash.** A sandboxed run's directory lives only in its mount
//! namespace, so it ends with the run however weir ends. Without the
//! sandbox run directories are on the host, in a directory of this server's
//! own that it keeps locked; the next server to start removes the
//! directories (and cgroups) of every server whose lock is free, and never
//! a live server's.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//! use serde_json::json;
//! use weir_core::EventKind;
//! use weir_runtime::{EventLog, MemoryLog, Pack, RunOptions, Scheduler, SchedulerConfig};
//! use weir_pack_exec::{ExecConfig, ExecPack};
//!
//! let pack = ExecPack::detect(ExecConfig::default()).await.unwrap();
//! let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
//! let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default()).await.unwrap();
//! let run = scheduler
//!     .submit("execute_code", json!({"language": "sh", "code": "echo hello; sleep 0.2; echo oops >&2"}), RunOptions::default())
//!     .await
//!     .unwrap();
//! let run_id = run.run_id().clone();
//! run.finished().await.unwrap();
//! let mut lines = Vec::new();
//! for event in log.read(&run_id, 0, 100).await.unwrap() {
//!     if let EventKind::Partial(partial) = event.kind {
//!         lines.push(format!("{}: {:?}", partial.group.unwrap(), partial.content[0]));
//!     }
//! }
//! assert_eq!(lines, [r#"stdout: Text { text: "hello\n" }"#, r#"stderr: Text { text: "oops\n" }"#]);
//! # }
//! ```
#![warn(missing_docs)]

mod args;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod jail;
mod language;
mod output;
mod run;
mod sandbox;
#[cfg(test)]
mod schema_agreement;
mod tools;

use std::ffi::OsString;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use weir_core::RunError;
use weir_runtime::{Pack, Tool};

use jail::{Base, Jail, Limits, Users};
use language::Language;
use sandbox::{Bubblewrap, Isolation};
use weir_proc::Cgroups;

/// Whether runs use the bubblewrap sandbox.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// Use it when it works here; otherwise run with limits only, and say so.
    #[default]
    Auto,
    /// Use it; refuse to start without it.
    Require,
    /// Do not use it: limits only.
    Off,
}

impl std::str::FromStr for SandboxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(SandboxMode::Auto),
            "require" => Ok(SandboxMode::Require),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode {other:?}: use auto, require or off"
            )),
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Require => "require",
            SandboxMode::Off => "off",
        })
    }
}

/// How the pack runs programs. Plain data; [`Default`] reads `PATH` and the
/// temporary directory from the environment.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// Whether to use the sandbox.
    pub sandbox: SandboxMode,
    /// Time limit when the call sets none.
    pub default_timeout: Duration,
    /// Largest `timeout_s` a call may ask for.
    pub max_timeout: Duration,
    /// Between SIGTERM and SIGKILL when a run times out.
    pub kill_grace: Duration,
    /// Bytes of output (stdout and stderr together) shown per run.
    pub max_output_bytes: u64,
    /// Largest `partial` chunk of output, in bytes.
    pub chunk_bytes: usize,
    /// How long the start of a line waits for its end before it is sent.
    pub idle_flush: Duration,
    /// `RLIMIT_DATA` of each process.
    pub memory_bytes: u64,
    /// Memory of a whole run: all its processes, and its files in the
    /// sandbox's tmpfs, together. Needs a cgroup weir may create groups in;
    /// without one, only [`ExecConfig::memory_bytes`] per process holds,
    /// and the pack says so.
    pub run_memory_bytes: u64,
    /// Most processes (threads count) of a run.
    pub max_processes: u64,
    /// `RLIMIT_FSIZE`: the largest file a run may write; also the size of
    /// the sandbox's private `/tmp` and `/dev/shm`.
    pub max_file_bytes: u64,
    /// The size of a sandboxed run's working directory (a tmpfs, which
    /// holds its `files` too).
    pub workdir_bytes: u64,
    /// Most runs of each tool at once.
    pub max_concurrent: usize,
    /// When weir runs as root: the uids runs execute as, one per concurrent
    /// run. `None` runs them as root (not recommended: no process limit).
    pub run_uids: Option<Range<u32>>,
    /// Where run directories go when runs are not sandboxed (in a
    /// `weir-exec-<uid>` directory; when runs execute as uids of their own
    /// and cannot pass through it, under `/var/tmp` or `/tmp` instead).
    pub work_dir: PathBuf,
    /// Where interpreters and bubblewrap are looked for (a `PATH` value).
    pub path: Option<OsString>,
    /// Paths a sandboxed run must never see, such as the data directory and
    /// configuration files. The sandbox shows only system directories; these
    /// are masked when they lie inside one.
    pub hidden: Vec<PathBuf>,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            sandbox: SandboxMode::Auto,
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(600),
            kill_grace: Duration::from_secs(2),
            max_output_bytes: 16 << 20,
            chunk_bytes: 16 * 1024,
            idle_flush: Duration::from_millis(50),
            memory_bytes: 512 << 20,
            run_memory_bytes: 1 << 30,
            max_processes: 64,
            max_file_bytes: 64 << 20,
            workdir_bytes: 256 << 20,
            max_concurrent: 8,
            run_uids: Some(1_900_000_000..1_900_000_256),
            work_dir: std::env::temp_dir(),
            path: std::env::var_os("PATH"),
            hidden: Vec::new(),
        }
    }
}

/// Why the pack could not start.
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// [`SandboxMode::Require`], and the sandbox does not work here.
    #[error("the exec sandbox is required but cannot be used here: {0}")]
    SandboxUnavailable(String),
    /// Runs cannot be set up at all (e.g. the work directory is unusable).
    #[error("the exec tools cannot run programs here: {0}")]
    Setup(String),
}

/// The pack, with what it found at start. Cheap to clone.
#[derive(Clone)]
pub struct ExecPack {
    pack: Arc<Shared>,
}

/// What the tools share.
struct Shared {
    jail: Jail,
    languages: Vec<Language>,
    config: ExecConfig,
}

impl Pack for ExecPack {
    fn name(&self) -> &'static str {
        "exec"
    }

    /// `execute_code`, `validate_code` and `list_languages`, to register.
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(tools::ExecuteCode(self.pack.clone())),
            Arc::new(tools::ValidateCode(self.pack.clone())),
            Arc::new(tools::ListLanguages(self.pack.clone())),
        ]
    }

    /// What an operator must know at start: that programs run without a
    /// sandbox, that memory or processes are not capped per run, that no
    /// language is available — each with why.
    fn warning(&self) -> Option<String> {
        let pack = &self.pack;
        let mut said = Vec::new();
        if let Some(reason) = self.unsandboxed_reason() {
            said.push(format!(
                "execute_code runs programs WITHOUT a sandbox: {reason}"
            ));
        }
        // Memory capped only per process, or processes not at all (a
        // per-user process cap is a cap, and `list_languages` says so).
        let limits = pack.jail.describe_limits();
        for (name, what) in [("run_memory", "memory"), ("processes", "processes")] {
            if limits[name]["per"] == "none"
                && let Some(why) = limits[name]["why"].as_str()
            {
                said.push(format!("execute_code does not cap {what} per run: {why}"));
            }
        }
        if let Some(why) = pack.unavailable_reason() {
            said.push(format!("execute_code can run no language: {why}"));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }
}

impl ExecPack {
    /// Finds bubblewrap and the cgroups runs may have (and tries them),
    /// sweeps what servers that are gone left behind, then finds the
    /// interpreters, running each as runs will run it. Takes a fraction of
    /// a second.
    pub async fn detect(config: ExecConfig) -> Result<ExecPack, DetectError> {
        let setup = |error: jail::JailError| DetectError::Setup(error.to_string());
        let limits = Limits {
            memory_bytes: config.memory_bytes,
            run_memory_bytes: config.run_memory_bytes,
            processes: config.max_processes,
            file_bytes: config.max_file_bytes,
            workdir_bytes: config.workdir_bytes,
            open_files: 1024,
        };
        let leases = jail::lease_dir(config.work_dir.join("weir-exec-uids"));
        let users = Users::new(config.run_uids.clone(), leases.clone()).map_err(setup)?;
        let other_uids = matches!(users, Users::Pool { .. });
        let base = Base::open(&config.work_dir, other_uids).map_err(setup)?;
        let cgroups = Cgroups::find(base.name());
        let mut hidden = config.hidden.clone();
        hidden.extend([base.root().to_owned(), leases]);
        let path = config.path.as_deref();
        let isolation = match config.sandbox {
            SandboxMode::Off => Isolation::None {
                reason: "the sandbox is turned off in the configuration (--exec-sandbox off)"
                    .into(),
            },
            SandboxMode::Auto | SandboxMode::Require => {
                match Bubblewrap::find(path, &hidden).await {
                    Ok(bwrap) => Isolation::Bubblewrap(bwrap),
                    Err(why) if config.sandbox == SandboxMode::Require => {
                        return Err(DetectError::SandboxUnavailable(why));
                    }
                    Err(why) => Isolation::None { reason: why },
                }
            }
        };
        let mut jail = Jail::new(isolation, users, base, cgroups, limits);
        let swept = jail.sweep();
        if swept > 0 {
            tracing::info!(
                swept,
                "removed run directories and cgroups of servers that are gone"
            );
        }
        if let Isolation::Bubblewrap(bwrap) = jail.isolation() {
            let version = bwrap.version.clone();
            if let Err(failure) = settle(&mut jail).await {
                let why = failure.of_bubblewrap(&version);
                if config.sandbox == SandboxMode::Require {
                    return Err(DetectError::SandboxUnavailable(why));
                }
                jail.give_up_sandbox(why);
            }
        }
        if matches!(jail.isolation(), Isolation::None { .. })
            && let Err(failure) = settle(&mut jail).await
        {
            return Err(DetectError::Setup(format!(
                "a trivial program could not be run as runs would run it: {failure}"
            )));
        }
        let languages = language::detect(&jail, path).await;
        Ok(ExecPack {
            pack: Arc::new(Shared {
                jail,
                languages,
                config,
            }),
        })
    }

    /// Why runs are not sandboxed, when they are not.
    pub fn unsandboxed_reason(&self) -> Option<&str> {
        match self.pack.jail.isolation() {
            Isolation::Bubblewrap(_) => None,
            Isolation::None { reason } => Some(reason),
        }
    }

    /// One line: the languages found and the sandbox, e.g.
    /// `python 3.11.2, javascript 20.1.0, sh; sandbox: bubblewrap 0.8.0`.
    pub fn summary(&self) -> String {
        let sandbox = match self.pack.jail.isolation() {
            Isolation::Bubblewrap(bwrap) => format!("bubblewrap {}", bwrap.version),
            Isolation::None { .. } => "none (limits only)".into(),
        };
        format!("{}; sandbox: {sandbox}", self.pack.available_summary())
    }
}

/// Why a trivial program did not run.
#[derive(Debug)]
enum TryFailure {
    /// It could not be set up or started.
    Setup(jail::JailError),
    /// It ran and failed: how, and what it said.
    Failed(String),
}

impl std::fmt::Display for TryFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TryFailure::Setup(error) => error.fmt(f),
            TryFailure::Failed(said) => f.write_str(said),
        }
    }
}

impl TryFailure {
    /// Why bubblewrap `version` cannot be used, naming the cause: user
    /// namespaces only when bubblewrap itself says a namespace failed.
    fn of_bubblewrap(&self, version: &str) -> String {
        match self {
            TryFailure::Setup(error) => {
                format!("bubblewrap {version} could not be started to try it: {error}")
            }
            TryFailure::Failed(said) if said.contains("namespace") || said.contains("uid map") => {
                format!(
                    "bubblewrap {version} is installed but cannot create a sandbox here ({said}); user namespaces may be disabled (see kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns or the container's seccomp profile)"
                )
            }
            TryFailure::Failed(said) => {
                format!("bubblewrap {version} is installed but its sandbox failed here: {said}")
            }
        }
    }
}

/// Tries `jail` with a trivial program. When that fails and runs have
/// cgroups, tries again without: if that works, the cgroups are the cause,
/// and runs go without them (saying why); if not, the failure is someone
/// else's, and the cgroups stay.
async fn settle(jail: &mut Jail) -> Result<(), TryFailure> {
    let Err(failure) = try_jail(jail).await else {
        return Ok(());
    };
    if !jail.cgroups().in_use() {
        return Err(failure);
    }
    let cgroups = jail.swap_cgroups(Cgroups::none("being tried without"));
    match try_jail(jail).await {
        Ok(()) => {
            jail.swap_cgroups(cgroups);
            jail.give_up_cgroups(&format!(
                "a program could not be started in a cgroup of its own here ({failure})"
            ));
            Ok(())
        }
        Err(other) => {
            jail.swap_cgroups(cgroups);
            Err(other)
        }
    }
}

/// Runs a trivial program exactly as a run would: same user, cgroup,
/// sandbox and limits.
async fn try_jail(jail: &Jail) -> Result<(), TryFailure> {
    let launch = jail::Launch {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "exit 0".into()],
        env: Vec::new(),
        stdin: None,
    };
    let collected = jail
        .run_collected("probe", launch, &[], Duration::from_secs(10), 4096)
        .await
        .map_err(TryFailure::Setup)?;
    if collected.status.success() {
        Ok(())
    } else {
        let said = String::from_utf8_lossy(&collected.output);
        Err(TryFailure::Failed(format!(
            "{}: {}",
            jail::describe_status(collected.status),
            said.trim()
        )))
    }
}

impl Shared {
    /// The language called `name`, if weir knows it.
    fn language(&self, name: &str) -> Result<&Language, RunError> {
        self.languages
            .iter()
            .find(|language| language.answers_to(name))
            .ok_or_else(|| {
                args::invalid(format!(
                    "unknown language {name:?}; languages here: {}",
                    self.available_summary()
                ))
            })
    }

    /// The names (and aliases) of the languages available here.
    fn accepted_names(&self) -> Vec<String> {
        self.languages
            .iter()
            .filter(|language| language.found.is_ok())
            .flat_map(|language| {
                std::iter::once(language.spec.name)
                    .chain(language.spec.aliases.iter().copied())
                    .map(str::to_owned)
            })
            .collect()
    }

    /// Why no language is available, when none is: each one's reason.
    fn unavailable_reason(&self) -> Option<String> {
        let reasons: Vec<String> = self
            .languages
            .iter()
            .map(|language| match &language.found {
                Ok(_) => None,
                Err(reason) => Some(format!("{}: {reason}", language.spec.name)),
            })
            .collect::<Option<_>>()?;
        Some(reasons.join("; "))
    }

    /// `python 3.11.2, javascript 20.1.0, sh`.
    fn available_summary(&self) -> String {
        let found: Vec<String> = self
            .languages
            .iter()
            .filter_map(|language| {
                let interpreter = language.found.as_ref().ok()?;
                Some(match &interpreter.version {
                    Some(version) => format!("{} {version}", language.spec.name),
                    None => language.spec.name.to_owned(),
                })
            })
            .collect();
        if found.is_empty() {
            "none (no interpreter found)".into()
        } else {
            found.join(", ")
        }
    }
}
