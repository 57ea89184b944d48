//! The exactly-once completion guard.
//!
//! Whoever writes a run's events passes each one through the guard. It admits
//! events until the first terminal one, refuses everything after it, and when
//! the writer goes away without a terminal event it names the one to write:
//! `failed` with "worker exited without a terminal event". Pure state; the
//! runtime does the writing.

use crate::event::{EventKind, Failed, FailureCode, RunError};

/// Admits non-terminal events until exactly one terminal event has passed.
#[derive(Debug, Default)]
pub struct CompletionGuard {
    terminated: bool,
}

/// The guard refused an event because the run has already ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the run has already ended; its terminal event was written")]
pub struct AlreadyTerminated;

impl CompletionGuard {
    /// A guard for a run that has not ended.
    pub fn new() -> CompletionGuard {
        CompletionGuard::default()
    }

    /// Lets `kind` through, unless the run has already ended.
    ///
    /// ```
    /// use weir_core::{Canceled, CompletionGuard, EventKind};
    /// let cancel = || EventKind::Canceled(Canceled { reason: "user".into() });
    /// let mut guard = CompletionGuard::new();
    /// assert!(guard.admit(&cancel()).is_ok());
    /// assert!(guard.admit(&cancel()).is_err()); // exactly once
    /// assert_eq!(guard.on_writer_exit(), None);
    /// ```
    pub fn admit(&mut self, kind: &EventKind) -> Result<(), AlreadyTerminated> {
        if self.terminated {
            return Err(AlreadyTerminated);
        }
        self.terminated = kind.is_terminal();
        Ok(())
    }

    /// Whether the terminal event has passed.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// Consumes the guard when the writer stops. Returns the terminal event
    /// still owed, if the run has not ended.
    ///
    /// ```
    /// use weir_core::{CompletionGuard, EventKind, FailureCode};
    /// let owed = CompletionGuard::new().on_writer_exit();
    /// let Some(EventKind::Failed(failed)) = owed else { panic!() };
    /// assert_eq!(failed.error.code, FailureCode::WorkerExited);
    /// ```
    #[must_use = "the returned event must be written, or the run never ends"]
    pub fn on_writer_exit(self) -> Option<EventKind> {
        (!self.terminated).then(|| {
            EventKind::Failed(Failed {
                error: RunError {
                    code: FailureCode::WorkerExited,
                    message: "worker exited without a terminal event".into(),
                    remediation: Some(
                        "this is a bug in the tool or in weir; call the tool again, and report it if it repeats".into(),
                    ),
                    result: None,
                },
            })
        })
    }
}
