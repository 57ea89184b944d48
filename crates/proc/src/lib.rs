//! Processes, as the kernel sees them: resource limits set between fork and
//! exec, control groups that cap and kill a whole tree, a child's output
//! pipes read on threads of their own, process trees read from `/proc`, and
//! signals to whole trees and to every process of a uid.
//!
//! **For:** tool packs that run programs (exec today; the coding-agent
//! drivers next) and must bound them, read what they write as they write
//! it, and find and kill every process a run started.
//! **Not for:** deciding policy (which limits, which user, which sandbox,
//! when to give up on a program): that is the pack's. Nothing here knows a
//! run, an event or a tool. Linux only.
//!
//! | module | main items |
//! |---|---|
//! | limits | [`Wanted`], [`clamp`], [`limit_child`] (a new session, rlimits, death with the parent, cgroups and descriptors to take along: [`Handover`]) |
//! | control groups | [`Cgroups`] (found at start: v2, else v1 per controller), [`Group`] (a run's: memory and pids caps, kill all, OOM kills) |
//! | pipes | [`read_pipe`], [`Chunk`], [`READ_BYTES`] |
//! | process trees | [`descendants`], [`pids_of`], [`group_alive`], [`tasks_of`], [`start_time`] |
//! | signals | [`signal`], [`signal_group`], [`signal_uid`], [`signal_name`] |
//!
//! This crate holds the workspace's one `unsafe` block, the `pre_exec` hook
//! of [`limit_child`] (so its lints `deny` `unsafe_code` where the rest of
//! the workspace forbids it); everything else is safe calls through rustix.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::os::unix::process::ExitStatusExt as _;
//! use weir_proc::{Signal, Wanted};
//!
//! // A shell that prints a line and leaves a child running.
//! let (stdout, stdout_writer) = std::io::pipe().unwrap();
//! let mut command = tokio::process::Command::new("/bin/sh");
//! command
//!     .args(["-c", "echo started; sleep 60 & wait"])
//!     .stdin(std::process::Stdio::null())
//!     .stdout(stdout_writer);
//! let uid = rustix::process::getuid().as_raw();
//! weir_proc::limit_child(
//!     &mut command,
//!     weir_proc::clamp(Wanted {
//!         memory_bytes: 256 << 20,
//!         // RLIMIT_NPROC counts every task of the uid, this one's included.
//!         processes: weir_proc::tasks_of(uid) + 16,
//!         file_bytes: 1 << 20,
//!         open_files: 64,
//!         cpu_seconds: 10,
//!     }),
//!     weir_proc::Handover::default(),
//! );
//! let mut child = command.spawn().unwrap();
//! drop(command); // its copy of the pipe's write end: the end needs it closed
//!
//! let (sender, mut chunks) = tokio::sync::mpsc::channel(16);
//! weir_proc::read_pipe(stdout, "stdout", sender).unwrap();
//! assert_eq!(chunks.recv().await, Some(("stdout", Some(b"started\n".to_vec()))));
//!
//! // The child leads a process group of its own: one signal ends the shell
//! // and the `sleep` it started, and with them the pipe.
//! let pid = child.id().unwrap() as i32;
//! while weir_proc::descendants(pid).is_empty() {
//!     tokio::task::yield_now().await;
//! }
//! weir_proc::signal_group(pid, Signal::KILL);
//! let status = child.wait().await.unwrap();
//! assert_eq!(weir_proc::signal_name(status.signal().unwrap()), "SIGKILL");
//! assert_eq!(chunks.recv().await, Some(("stdout", None)));
//! # }
//! ```
#![warn(missing_docs)]

mod cgroup;
mod limits;
mod pipe;
mod signal;
mod tree;

pub use cgroup::{CgroupVersion, Cgroups, Group, GroupLimits};
pub use limits::{Handover, Rlimits, Wanted, clamp, limit_child};
pub use pipe::{Chunk, READ_BYTES, read_pipe};
/// The signals this crate sends, so that its callers need not name rustix.
pub use rustix::process::Signal;
pub use signal::{signal, signal_group, signal_name, signal_uid};
pub use tree::{descendants, group_alive, pids_of, start_time, tasks_of};
