//! weir's MCP server: every tool call is a run, delivered to every client.
//!
//! **For:** serving a [`weir_runtime::Scheduler`]'s tools over MCP — both the
//! 2025-11-25 revision (initialize, sessions, resumable SSE, tasks) and the
//! stateless 2026-07-28 revision (`server/discover`, the tasks extension) —
//! on stdio ([`transport::stdio`]) and Streamable HTTP ([`transport::http`],
//! which also serves `GET /runs/{id}/events` as plain SSE). Each call's log is
//! projected onto progress notifications, SEP-2998 partial results, logging
//! notifications and a final `CallToolResult` that is complete up to a size
//! limit ([`ServerConfig::result_limit`]).
//!
//! **Not for:** executing tools (weir-runtime does) or defining them (tool
//! packs do, without knowing this crate), nor calling other servers (that is
//! `weir-client`). MCP's result shapes stay inside this crate; the JSON-RPC
//! framing and revision names it shares with the client are `weir-mcp-wire`;
//! rmcp provides model types for the catalog.
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
mod projection;
mod protocol;
mod runs_tools;
mod server;
mod tasks;
pub mod transport;
mod wire;

pub use server::{McpServer, ServerConfig};
pub use weir_mcp_wire::revision::SUPPORTED_VERSIONS;
