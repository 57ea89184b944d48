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
//! framing, error codes and revision names it shares with the client are
//! `weir-mcp-wire`; rmcp provides model types for the catalog.
//!
//! **Main types:** [`McpServer`] (cheap to clone) built from a scheduler, a
//! [`catalog::Catalog`] (resources, prompts, completions; [`catalog::EmptyCatalog`]
//! when there are none) and a [`ServerConfig`]; then handed to
//! [`transport::stdio::serve_stdio`] (or [`transport::stdio::serve_lines`]
//! for any pair of line streams) or [`transport::http::routes`] (`/mcp`,
//! to mount behind a guard that gives each request its
//! [`Principal`](weir_runtime::Principal); the
//! binary composes it with weir-web's) and [`transport::http::serve`].
//!
//! **Inside**, a module imports only from its own row or the rows below it,
//! and no import chain comes back to where it started:
//!
//! | layer | modules |
//! |---|---|
//! | transports | `transport::{stdio, http, in_process}`: messages in and out (`in_process`: the tools a run offers the client it runs, as values, each call a child run of that run: [`McpServer::in_process`], weir-runtime's `InProcessServer` seam) |
//! | dispatch | `server`: [`McpServer`], method → handler |
//! | handlers | `handlers::{lifecycle, tools, tasks, resources, prompts, builtin, upstream}`: free functions over the shared state, one module per group of methods (`builtin`: weir's own `runs_*` and `get_status` tools and `weir://runs/…` resources; `upstream`: the upstreams' resources and prompts, passed through) |
//! | following | `follow`: the one loop over a run's log, for calls, resumed streams and tasks |
//! | projection | `projection` (events → MCP messages and the final result), `session` (a client's session, outgoing messages) |
//! | ground | `state` (scheduler, catalog, settings), `errors`, `protocol` (the revision a request speaks), `wire` (MCP's JSON forms), `delivery` (the bounded per-client queue in which progress coalesces), [`catalog`] |
//!
//! ```
//! # #[tokio::main]
//! # async fn main() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//! use weir_mcp::{McpServer, ServerConfig, catalog::EmptyCatalog, transport};
//! use weir_runtime::{MemoryLog, Scheduler, SchedulerConfig};
//!
//! let scheduler = Scheduler::start(Arc::new(MemoryLog::new()), vec![], SchedulerConfig::default())
//!     .await
//!     .expect("scheduler");
//! let server = McpServer::new(scheduler, Arc::new(EmptyCatalog), ServerConfig::default());
//! // A real server runs `transport::stdio::serve_stdio(server)`; here the
//! // client is the other end of an in-memory pipe.
//! let (mut client, ours) = tokio::io::duplex(64 * 1024);
//! let (input, output) = tokio::io::split(ours);
//! tokio::spawn(transport::stdio::serve_lines(server, input, output));
//! client
//!     .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n")
//!     .await?;
//! let reply = BufReader::new(client).lines().next_line().await?.expect("a reply");
//! assert!(reply.contains("\"runs_list\""));
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod catalog;
mod delivery;
mod errors;
mod follow;
mod handlers;
mod projection;
mod protocol;
mod server;
mod session;
mod state;
pub mod transport;
mod wire;

pub use handlers::tools::builtin_tool_names;
pub use server::McpServer;
pub use state::{ServerConfig, StatusPart};
pub use weir_mcp_wire::revision::SUPPORTED_VERSIONS;
