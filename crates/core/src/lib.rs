//! weir's pure core: the vocabulary every other crate speaks.
//!
//! **For:** the run event contract ([`RunEvent`], [`EventKind`], docs/design.md),
//! the run-state reducer ([`RunState::apply`], [`LogTail`]), the exactly-once
//! completion guard ([`CompletionGuard`]), the chunker that cuts item streams
//! into `partial` events ([`Chunker`]) and the monotonic progress helper
//! ([`ProgressTracker`], which also turns a [`Milestone`] into a progress
//! report with an estimate of the time left), the circuit breaker of a
//! service that keeps failing ([`CircuitBreaker`]), and argument checks
//! against a tool's input schema ([`check_arguments`]) and the output schema
//! a tool lists ([`output_contract`]). Time helpers format timestamps ([`iso8601`]).
//! [`headers`] parses the HTTP request headers the web edge and the MCP
//! transport both check (pure functions over a header's bytes); [`sse`] is
//! the one server-sent events parser (WHATWG rules, a bound per line and
//! event), for the MCP client and the packs' model clients alike.
//!
//! **Not for:** IO of any kind. This crate has no async runtime, no database
//! and no protocol; time comes in as arguments. Stores, schedulers and MCP
//! live in `weir-runtime` and `weir-mcp`, which build on these types.
//!
//! ```
//! use weir_core::{EventKind, LogTail, RunEvent, RunId, RunState, Started, Completed};
//! let run = RunId::parse("demo").unwrap();
//! let log = vec![
//!     RunEvent { run_id: run.clone(), seq: 0, ts: 0, kind: EventKind::Started(Started {
//!         tool: "echo".into(), arguments: serde_json::json!({}), node: "local".into() }) },
//!     RunEvent { run_id: run.clone(), seq: 1, ts: 5, kind: EventKind::Completed(Completed::default()) },
//! ];
//! let tail = LogTail::EMPTY.advance(&run, &log).unwrap();
//! assert_eq!(tail.state, RunState::Completed);
//! assert_eq!(tail.next_seq, 2);
//! ```
#![warn(missing_docs)]

pub mod headers;
pub mod sse;

mod breaker;
mod chunker;
mod event;
mod guard;
mod progress;
mod schema;
mod state;
mod time;

pub use breaker::{Admission, BreakerConfig, BreakerSnapshot, BreakerState, CircuitBreaker};
pub use chunker::{Chunk, ChunkLimits, Chunker};
pub use event::{
    ArtifactRef, Canceled, Completed, Content, EventKind, Failed, FailureCode, InputEnded,
    InputKind, InputOutcome, InputRequired, InvalidRunId, Log, LogLevel, LogStream, Meta, Partial,
    Progress, ProgressUnit, RunError, RunEvent, RunId, Seq, Started, Warning,
};
pub use guard::{AlreadyTerminated, CompletionGuard};
pub use progress::{Milestone, ProgressTracker};
pub use schema::{check_arguments, output_contract};
pub use state::{LogTail, RunState, Violation};
pub use time::{human_duration, iso8601, utc_display};
