//! weir's MCP layer: every tool call is a run, delivered to every client.
//!
//! **For:** serving a [`weir_runtime::Scheduler`]'s tools over MCP — both the
//! 2025-11-25 revision (initialize, sessions, resumable SSE, tasks) and the
//! stateless 2026-07-28 revision (`server/discover`, the tasks extension) —
//! on stdio ([`transport::stdio`]) and Streamable HTTP ([`transport::http`],
//! which also serves `GET /runs/{id}/events` as plain SSE). Each call's log is
//! projected onto progress notifications, SEP-2998 partial results, logging
//! notifications and a final `CallToolResult` that is complete up to a size
//! limit ([`ServerConfig::result_limit`]). And the other side: a streaming
//! MCP client ([`client`]) for any server, which `weir call` is built on.
//!
//! **Not for:** executing tools (weir-runtime does) or defining them (tool
//! packs do, without knowing this crate). JSON-RPC framing and MCP wire shapes
//! stay inside this crate; rmcp provides model types for the catalog.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use weir_mcp::{McpServer, ServerConfig, catalog::EmptyCatalog, transport};
//! use weir_runtime::{MemoryLog, Scheduler, SchedulerConfig};
//!
//! let scheduler = Scheduler::start(Arc::new(MemoryLog::new()), vec![], SchedulerConfig::default())
//!     .await
//!     .expect("scheduler");
//! let server = McpServer::new(scheduler, Arc::new(EmptyCatalog), ServerConfig::default());
//! transport::stdio::serve_stdio(server).await
//! # }
//! ```
#![warn(missing_docs)]

mod call;
pub mod catalog;
pub mod client;
pub mod fixtures;
mod jsonrpc;
mod projection;
mod protocol;
mod runs_tools;
mod server;
mod tasks;
pub mod transport;
mod wire;

pub use protocol::SUPPORTED_VERSIONS;
pub use server::{McpServer, ServerConfig};
