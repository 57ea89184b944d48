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
//! **What a run does.** The code goes into a fresh directory (with the
//! caller's `files`), and the language's interpreter — found on this machine
//! at start, never assumed — runs it there, with a minimal environment
//! (nothing of the server's), an unbuffered stdout where the interpreter
//! allows it, and these limits:
//!
//! | limit | how | default |
//! |---|---|---|
//! | wall clock | `timeout_s`: SIGTERM to every process of the run, SIGKILL after [`ExecConfig::kill_grace`] | 30 s (at most 10 min) |
//! | output | shown up to [`ExecConfig::max_output_bytes`]; the rest is counted, not kept, after a notice | 16 MiB |
//! | memory | `RLIMIT_DATA` per process | 512 MiB |
//! | processes | `RLIMIT_NPROC` (per run when weir is root: see below) | 64 |
//! | file size | `RLIMIT_FSIZE` per file; also the size of the sandbox's `/tmp` | 64 MiB |
//! | CPU time | `RLIMIT_CPU`, only a backstop for the wall clock | — |
//!
//! The program leads a new session; when it ends, whatever it left running
//! is killed, and so is everything when the run is cancelled (the runtime
//! drops the run's future; the guard's `Drop` sends SIGKILL at once).
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
//! or `output_encoding: "base64"` sends the exact bytes. `meta` comes
//! first: language, interpreter, version, the sandbox and the limits. The
//! result's `structuredContent` has the exit code, signal, duration, byte
//! counts and whether the output was truncated.
//!
//! **Sandbox.** With [`SandboxMode::Auto`] (the default) the pack tries
//! bubblewrap at start — it runs a real sandboxed command as the run user —
//! and uses it when that works: new user, PID, network, IPC and UTS
//! namespaces (so no network but loopback, and every process of the run dies
//! with it), the root read-only, private `/tmp` and `/dev`, the run's
//! directory the only writable place that outlives it. When it does not
//! work, runs get limits only, and `meta`, `list_languages`, the tools'
//! descriptions and [`ExecPack::unsandboxed_reason`] say so and why.
//!
//! **Users.** When weir runs as root, each run executes as a uid of its own
//! from [`ExecConfig::run_uids`] (leased through lock files, so several
//! servers on one machine never share one): root-only files stay
//! unreadable, the process limit holds per run (the kernel does not apply
//! it to root), and every process of the run — even one that left its
//! session — is killed at the end with one `kill(-1)` from that uid.
//! Otherwise runs execute as weir's own user; then the process limit counts
//! all that user's processes, and without the sandbox a process that leaves
//! its session and parent can outlive the run.
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

use jail::{Jail, Limits, Users};
use language::Language;
use sandbox::{Bubblewrap, Isolation};

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
    /// Most processes (threads count) of a run.
    pub max_processes: u64,
    /// `RLIMIT_FSIZE`: the largest file a run may write; also the size of
    /// the sandbox's private `/tmp`.
    pub max_file_bytes: u64,
    /// Most runs of each tool at once.
    pub max_concurrent: usize,
    /// When weir runs as root: the uids runs execute as, one per concurrent
    /// run. `None` runs them as root (not recommended: no process limit).
    pub run_uids: Option<Range<u32>>,
    /// Where run directories (and the uid lease locks) go.
    pub work_dir: PathBuf,
    /// Where interpreters and bubblewrap are looked for (a `PATH` value).
    pub path: Option<OsString>,
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
            max_processes: 64,
            max_file_bytes: 64 << 20,
            max_concurrent: 8,
            run_uids: Some(1_900_000_000..1_900_000_256),
            work_dir: std::env::temp_dir(),
            path: std::env::var_os("PATH"),
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

    /// That programs run without a sandbox, and why, when they do.
    fn warning(&self) -> Option<String> {
        self.unsandboxed_reason()
            .map(|reason| format!("execute_code runs programs WITHOUT a sandbox: {reason}"))
    }
}

impl ExecPack {
    /// Finds bubblewrap (and tries it) and the interpreters, running each
    /// as runs will run it. Takes a fraction of a second.
    pub async fn detect(config: ExecConfig) -> Result<ExecPack, DetectError> {
        let limits = Limits {
            memory_bytes: config.memory_bytes,
            processes: config.max_processes,
            file_bytes: config.max_file_bytes,
            open_files: 1024,
        };
        let users = || {
            Users::new(
                config.run_uids.clone(),
                config.work_dir.join("weir-exec-uids"),
            )
            .map_err(|error| DetectError::Setup(error.to_string()))
        };
        let jail = |isolation| -> Result<Jail, DetectError> {
            Ok(Jail::new(
                isolation,
                users()?,
                config.work_dir.clone(),
                limits,
            ))
        };
        let path = config.path.as_deref();
        let jail = match config.sandbox {
            SandboxMode::Off => jail(Isolation::None {
                reason: "the sandbox is turned off in the configuration (--exec-sandbox off)"
                    .into(),
            })?,
            SandboxMode::Auto | SandboxMode::Require => {
                let tried = match Bubblewrap::find(path).await {
                    Ok(bwrap) => {
                        let version = bwrap.version.clone();
                        let sandboxed = jail(Isolation::Bubblewrap(bwrap))?;
                        match try_sandbox(&sandboxed).await {
                            Ok(()) => Ok(sandboxed),
                            Err(why) => Err(format!(
                                "bubblewrap {version} is installed but cannot create a sandbox here ({why}); user namespaces may be disabled (see kernel.unprivileged_userns_clone or the container's seccomp profile)"
                            )),
                        }
                    }
                    Err(why) => Err(why),
                };
                match (tried, config.sandbox) {
                    (Ok(jail), _) => jail,
                    (Err(why), SandboxMode::Require) => {
                        return Err(DetectError::SandboxUnavailable(why));
                    }
                    (Err(why), _) => jail(Isolation::None { reason: why })?,
                }
            }
        };
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

/// Runs a trivial command in the sandbox, as a run would.
async fn try_sandbox(jail: &Jail) -> Result<(), String> {
    let launch = jail::Launch {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "exit 0".into()],
        env: Vec::new(),
        stdin: None,
    };
    let collected = jail
        .run_collected("sandbox-probe", launch, &[], Duration::from_secs(10), 4096)
        .await
        .map_err(|error| error.to_string())?;
    if collected.status.success() {
        Ok(())
    } else {
        let said = String::from_utf8_lossy(&collected.output);
        Err(format!(
            "{}: {}",
            jail::describe_status(collected.status),
            said.trim()
        ))
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
