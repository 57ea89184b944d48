//! weir's tool packs: tools that do real work, written against the runtime.
//!
//! **For:** implementations of [`weir_runtime::Tool`], one folder per pack.
//! Today: [`exec`], which runs code (`execute_code`, `validate_code`,
//! `list_languages`) — interpreters found at start, output streamed line by
//! line as `partial` events, hard limits, bubblewrap when it works here.
//!
//! **Not for:** protocols. A pack reports through its `RunContext` and
//! returns a result; it never knows whether its caller speaks MCP, SSE or
//! nothing at all. This crate depends on `weir-core` and `weir-runtime`,
//! never on `weir-mcp`.
//!
//! | pack | module | tools | needs on the machine |
//! |---|---|---|---|
//! | code execution | [`exec`] | `execute_code`, `validate_code`, `list_languages` | interpreters (python3, node, bash, sh, ruby, perl: any); bubblewrap for the sandbox; Linux |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//! use serde_json::json;
//! use weir_core::EventKind;
//! use weir_runtime::{EventLog, MemoryLog, RunOptions, Scheduler, SchedulerConfig};
//! use weir_tools::exec::{ExecConfig, ExecPack};
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

pub mod exec;
