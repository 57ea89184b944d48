//! weir's run engine: where a tool call becomes a run.
//!
//! **For:** the [`Tool`] trait and the [`RunContext`] a tool reports through
//! (events, artifacts, and milestones with an estimate of the time left:
//! [`RunContext::milestone`]);
//! the [`Scheduler`] (concurrency limits, a bounded queue, timeouts,
//! cancellation, panic capture, crash recovery, retention); and the
//! [`EventLog`] trait with the in-memory store, [`MemoryLog`], plus
//! [`Subscription`], the replay-then-live reader every delivery is built on;
//! and tools calling tools: [`RunContext::call`] starts another tool as a
//! child run (cancelled with its parent, never outliving it), and
//! [`RemoteCaller`] is how the binary lets a pack call other MCP servers,
//! and [`InProcessServer`] how it lets a pack offer this server's tools to
//! a client the pack runs (a coding agent), each call a child run;
//! [`Principal`] is who calls (a credential's name, admin or not, the tools
//! it may call), the one type the HTTP guard and the MCP server share.
//! Durable stores are sibling crates (`weir-store-sqlite`) built on
//! [`log::kit`]; with the `store-contract` feature this crate exports the
//! test suite every store must pass. Packs share [`kit`]: one invalid-arguments
//! error, object-only argument parsing, `EmitError` into `RunError`.
//!
//! **Not for:** protocols. Nothing here knows MCP, HTTP or SSE; `weir-mcp`
//! projects the log onto those. Tool packs depend on this crate and on
//! `weir-core`, never on `weir-mcp`. No store here touches a disk: durable
//! stores, and their formats, live in crates of their own.
//!
//! The runtime, not the tool, keeps the log's invariants: seq dense from 0,
//! `started` first, exactly one terminal event and nothing after it, also
//! when the tool panics, times out, is cancelled or the process dies (the
//! next start closes such runs as `failed`/`interrupted`).
//!
//! | Feature | Default | Adds |
//! |---|---|---|
//! | `store-contract` | off | `weir_runtime::store_contract` and `store_contract_tests!`: the [`EventLog`] contract as a test suite, one `#[test]` per check, for a store crate's tests (brings `proptest`) |
//! | `tool-contract` | off | `weir_runtime::tool_contract`: the check that a tool's input schema and its argument parser agree, for every pack's tests |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use serde_json::{Value, json};
//! use weir_core::{Completed, EventKind, Partial, Content, RunError};
//! use weir_runtime::{EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
//!
//! struct Lines;
//! #[async_trait]
//! impl Tool for Lines {
//!     fn info(&self) -> ToolInfo { ToolInfo::new("lines", "Emits three lines.", json!({"type": "object"})) }
//!     async fn run(&self, ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
//!         for i in 0..3 {
//!             let _ = ctx.emit(Partial { content: vec![Content::text(format!("line {i}"))], ..Default::default() }).await;
//!         }
//!         Ok(Completed::default())
//!     }
//! }
//!
//! let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
//! let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Lines)], SchedulerConfig::default()).await.unwrap();
//! let run = scheduler.submit("lines", json!({}), RunOptions::default()).await.unwrap();
//! let mut events = log.subscribe_from(run.run_id(), 0);
//! let mut types = Vec::new();
//! while let Some(event) = events.next().await {
//!     types.push(event.unwrap().kind.type_name());
//! }
//! assert_eq!(types, ["started", "partial", "partial", "partial", "completed"]);
//! # }
//! ```
#![warn(missing_docs)]

mod caller;
mod context;
mod handle;
mod heartbeat;
mod in_process;
mod input;
pub mod kit;
pub mod log;
mod principal;
mod roots;
mod scheduler;
#[cfg(feature = "store-contract")]
pub mod store_contract;
mod tool;
#[cfg(feature = "tool-contract")]
pub mod tool_contract;

pub use caller::{CallError, ChildEnd, ChildRun, RemoteCaller, upstream_grant};
pub use context::{EmitError, RunContext, now_ms};
pub use heartbeat::Heartbeat;
pub use in_process::{InProcessServer, InProcessSession};
pub use input::{AskError, DEFAULT_ASK_TIMEOUT, InputKind, InputRequest};
pub use log::{EventLog, LogError, MemoryLog, SharedEvent, Subscription};
pub use principal::Principal;
pub use roots::{PrivatePaths, Roots, RootsError, open_beneath};
pub use scheduler::{
    Offer, Peers, RunHandle, RunOptions, Scheduler, SchedulerConfig, StartError, SubmitError,
    recover_interrupted,
};
pub use tool::{
    Hints, OUTPUT_TRUNCATED, OUTPUT_URI, Pack, REDACTED, Redactor, SECRET_KEYWORD, Tool, ToolInfo,
    redact_value, with_streamed_fields,
};
