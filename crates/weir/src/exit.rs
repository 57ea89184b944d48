//! How a command ended, and the one mapping from that to an exit code.
//!
//! Commands return an [`Outcome`]; only [`Outcome::code`] knows the numbers,
//! which docs/calling.md documents: 0 completed, 1 failed, 3 canceled (or timed
//! out), 4 the server could not be reached or refused the protocol.

use weir_core::RunState;

/// How a command (or the run it followed) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The run completed, or the command succeeded.
    Completed,
    /// The run failed, or the command did.
    Failed,
    /// The run was canceled, or the wait for it timed out or was interrupted.
    Canceled,
    /// The server could not be reached, or broke or refused the protocol.
    Unreachable,
}

impl Outcome {
    /// The process exit code.
    pub(crate) fn code(self) -> u8 {
        match self {
            Outcome::Completed => 0,
            Outcome::Failed => 1,
            Outcome::Canceled => 3,
            Outcome::Unreachable => 4,
        }
    }
}

impl From<RunState> for Outcome {
    /// A finished run's state; a run that is not finished counts as failed
    /// (the command could not see it end).
    fn from(state: RunState) -> Outcome {
        match state {
            RunState::Completed => Outcome::Completed,
            RunState::Canceled => Outcome::Canceled,
            RunState::Failed | RunState::Pending | RunState::Working | RunState::InputRequired => {
                Outcome::Failed
            }
        }
    }
}
