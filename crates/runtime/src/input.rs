//! Questions a tool asks its caller while it runs: an LLM completion
//! (sampling) or structured input from the user (elicitation).
//!
//! The runtime carries the question to whoever follows the run and can
//! answer (the MCP layer, for a client that declared the capability) and
//! carries the answer back. The parameters and the answer are in the
//! protocol's shape (MCP `sampling/createMessage`, `elicitation/create`).
//!
//! A question is never open-ended: it has a time limit
//! ([`DEFAULT_ASK_TIMEOUT`] unless the tool names one), it ends with the run
//! (cancelled, timed out), and the log records the wait — `input_required` when it
//! begins, `input_ended` (or the terminal event) when it ends — so that the
//! run's state says, to anyone who reads the log, that it waits for its
//! caller. A run asks one question at a time, which keeps those pairs from
//! overlapping and the state a plain function of the log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use weir_core::{FailureCode, RunError};

pub use weir_core::InputKind;

/// How long a question waits for its answer unless the tool says otherwise
/// ([`RunContext::ask_within`](crate::RunContext::ask_within)): long
/// enough for a person to read and fill in a form, short enough that a
/// client that went away does not hold a run (and its slot) for the rest
/// of its time limit.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A question on its way to the caller, with the way back.
#[derive(Debug)]
pub struct InputRequest {
    /// What is asked.
    pub kind: InputKind,
    /// The question, in the protocol's shape.
    pub params: Value,
    /// Where the answer goes. Closed when the run stops waiting (time
    /// limit, cancellation): whoever relays the question can withdraw it.
    pub reply: oneshot::Sender<Result<Value, AskError>>,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Nobody who can answer is following the run (a stateless call, or the
    /// client did not declare the capability).
    #[error(
        "no client can answer this run's {0:?} request: the client did not declare that capability, or the call is stateless"
    )]
    NoResponder(InputKind),
    /// The client answered with an error.
    #[error("the client refused the request: {0}")]
    Refused(String),
    /// The client went away before answering.
    #[error("the client went away before answering")]
    Gone,
    /// No answer came within the question's time limit.
    #[error(
        "the client did not answer the {kind:?} request within {}",
        weir_core::human_duration(u64::try_from(.waited.as_millis()).unwrap_or(u64::MAX))
    )]
    TimedOut {
        /// What was asked.
        kind: InputKind,
        /// The time limit that passed.
        waited: Duration,
    },
    /// The run ended (cancelled, timed out) while a task the tool spawned
    /// waited for the answer.
    #[error("the run ended while it waited for the client's answer")]
    RunEnded,
    /// The question could not be recorded in the run's log, so it was not
    /// asked (the run is ending, or its store failed).
    #[error("the question was not asked: the run's log did not take it ({0})")]
    Unrecorded(String),
}

/// A tool that does not handle a failed question (`ctx.ask(..).await?`)
/// fails with what happened and what to do next.
impl From<AskError> for RunError {
    fn from(error: AskError) -> RunError {
        let (code, remediation) = match &error {
            AskError::NoResponder(_) => (
                FailureCode::ToolError,
                "call this tool from a client that supports sampling and elicitation, in a session",
            ),
            AskError::TimedOut { .. } => (
                FailureCode::Timeout,
                "call the tool again and answer the client's question sooner",
            ),
            AskError::Refused(_) | AskError::Gone => (
                FailureCode::ToolError,
                "call the tool again, and answer its question to go on",
            ),
            AskError::RunEnded | AskError::Unrecorded(_) => (
                FailureCode::ToolError,
                "call the tool again if its result is still wanted",
            ),
        };
        RunError::new(code, error.to_string()).with_remediation(remediation)
    }
}

/// Where a run's questions go: empty until a follower offers to answer.
pub(crate) type InputSlot = Arc<Mutex<Option<mpsc::Sender<InputRequest>>>>;
