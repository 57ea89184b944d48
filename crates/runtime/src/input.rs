//! Questions a tool asks its caller while it runs: an LLM completion
//! (sampling) or structured input from the user (elicitation).
//!
//! The runtime only carries the question to whoever follows the run and can
//! answer (the MCP layer, for a client that declared the capability) and
//! carries the answer back. The parameters and the answer are in the
//! protocol's shape (MCP `sampling/createMessage`, `elicitation/create`).

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// What kind of answer a tool wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A completion from the caller's model.
    Sampling,
    /// Structured input from the user.
    Elicitation,
}

/// A question on its way to the caller, with the way back.
#[derive(Debug)]
pub struct InputRequest {
    /// What is asked.
    pub kind: InputKind,
    /// The question, in the protocol's shape.
    pub params: Value,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<Value, AskError>>,
}

/// Why a question got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Nobody who can answer is following the run (it runs as a task, or the
    /// client did not declare the capability).
    #[error(
        "no client can answer this run's {0:?} request: call the tool from a client that declares that capability, without task mode"
    )]
    NoResponder(InputKind),
    /// The client answered with an error.
    #[error("the client refused the request: {0}")]
    Refused(String),
    /// The client went away before answering.
    #[error("the client went away before answering")]
    Gone,
}

/// Where a run's questions go: empty until a follower offers to answer.
pub(crate) type InputSlot = Arc<Mutex<Option<mpsc::Sender<InputRequest>>>>;

/// Sends `kind`/`params` through `slot` and waits for the answer.
pub(crate) async fn ask(
    slot: &InputSlot,
    kind: InputKind,
    params: Value,
) -> Result<Value, AskError> {
    let sender = slot
        .lock()
        .expect("input slot lock")
        .clone()
        .ok_or(AskError::NoResponder(kind))?;
    let (reply, answer) = oneshot::channel();
    sender
        .send(InputRequest {
            kind,
            params,
            reply,
        })
        .await
        .map_err(|_| AskError::NoResponder(kind))?;
    answer.await.map_err(|_| AskError::Gone)?
}
