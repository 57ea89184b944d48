//! The run-state reducer: a run's state is a pure function of its log.

use serde::{Deserialize, Serialize};

use crate::event::{EventKind, RunEvent, RunId, Seq};

/// Where a run stands. `Pending` is the state of an empty log (a run accepted
/// and queued, not yet started).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, waiting for a worker; the log is empty.
    Pending,
    /// `started` has been written; no terminal event yet.
    Working,
    /// Working, and waiting for its caller to answer a question: after an
    /// `input_required` event, until `input_ended` or the terminal event.
    InputRequired,
    /// Ended with `completed`.
    Completed,
    /// Ended with `failed`.
    Failed,
    /// Ended with `canceled`.
    Canceled,
}

/// An event that cannot follow the log so far.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// Every log starts with `started`, and has only one.
    #[error("a run's log starts with exactly one `started` event; got `{got}` while {state}")]
    BadStart {
        /// The offending event type.
        got: &'static str,
        /// The state before it.
        state: RunState,
    },
    /// Nothing follows the terminal event.
    #[error("run is already {state}; nothing may follow its terminal event (got `{got}`)")]
    AfterTerminal {
        /// The offending event type.
        got: &'static str,
        /// The terminal state.
        state: RunState,
    },
    /// Sequence numbers are dense from 0.
    #[error("expected seq {expected}, got {got}: a run's seq is dense from 0")]
    SeqGap {
        /// The next seq the log expects.
        expected: Seq,
        /// The seq that arrived.
        got: Seq,
    },
    /// A wait for input begins only while working, and ends only a wait.
    #[error(
        "`{got}` cannot come while the run is {state}: a run waits for one answer at a time, `input_required` then `input_ended`"
    )]
    InputOutOfTurn {
        /// The offending event type.
        got: &'static str,
        /// The state before it.
        state: RunState,
    },
    /// An append mixed events of several runs.
    #[error("event for run {got} appended to run {expected}")]
    WrongRun {
        /// The run being appended to.
        expected: RunId,
        /// The run the event names.
        got: RunId,
    },
}

impl RunState {
    /// Whether the run has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Canceled
        )
    }

    /// The state after `kind`, or why `kind` cannot come next.
    ///
    /// ```
    /// use weir_core::{Canceled, EventKind, RunState};
    /// let canceled = EventKind::Canceled(Canceled { reason: "user".into() });
    /// assert!(RunState::Pending.apply(&canceled).is_err()); // `started` comes first
    /// assert_eq!(RunState::Working.apply(&canceled), Ok(RunState::Canceled));
    /// ```
    pub fn apply(self, kind: &EventKind) -> Result<RunState, Violation> {
        let got = kind.type_name();
        match (self, kind) {
            (state, _) if state.is_terminal() => Err(Violation::AfterTerminal { got, state }),
            (RunState::Pending, EventKind::Started(_)) => Ok(RunState::Working),
            (state @ RunState::Pending, _) | (state, EventKind::Started(_)) => {
                Err(Violation::BadStart { got, state })
            }
            (_, EventKind::Completed(_)) => Ok(RunState::Completed),
            (_, EventKind::Failed(_)) => Ok(RunState::Failed),
            (_, EventKind::Canceled(_)) => Ok(RunState::Canceled),
            (RunState::Working, EventKind::InputRequired(_)) => Ok(RunState::InputRequired),
            (RunState::InputRequired, EventKind::InputEnded(_)) => Ok(RunState::Working),
            (state, EventKind::InputRequired(_) | EventKind::InputEnded(_)) => {
                Err(Violation::InputOutOfTurn { got, state })
            }
            (state, _) => Ok(state),
        }
    }

    /// Folds a whole log into its state.
    pub fn reduce<'a>(
        kinds: impl IntoIterator<Item = &'a EventKind>,
    ) -> Result<RunState, Violation> {
        kinds
            .into_iter()
            .try_fold(RunState::Pending, |state, kind| state.apply(kind))
    }

    /// The lowercase name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Working => "working",
            RunState::InputRequired => "input_required",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Canceled => "canceled",
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RunState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "pending" => RunState::Pending,
            "working" => RunState::Working,
            "input_required" => RunState::InputRequired,
            "completed" => RunState::Completed,
            "failed" => RunState::Failed,
            "canceled" => RunState::Canceled,
            other => {
                return Err(format!(
                    "unknown run state {other:?}: use pending, working, input_required, completed, failed or canceled"
                ));
            }
        })
    }
}

/// The end of a run's log as a store sees it: the next seq and the state.
/// Stores check every append against it, so a log on disk can only ever hold
/// a valid history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogTail {
    /// The seq the next event must carry.
    pub next_seq: Seq,
    /// The state after the last event.
    pub state: RunState,
}

impl LogTail {
    /// The tail of an empty log.
    pub const EMPTY: LogTail = LogTail {
        next_seq: 0,
        state: RunState::Pending,
    };

    /// The tail after appending `events` to run `run_id`, or the first reason
    /// the append is invalid. All or nothing: on error, nothing should be
    /// written.
    pub fn advance(self, run_id: &RunId, events: &[RunEvent]) -> Result<LogTail, Violation> {
        events.iter().try_fold(self, |tail, event| {
            if &event.run_id != run_id {
                return Err(Violation::WrongRun {
                    expected: run_id.clone(),
                    got: event.run_id.clone(),
                });
            }
            if event.seq != tail.next_seq {
                return Err(Violation::SeqGap {
                    expected: tail.next_seq,
                    got: event.seq,
                });
            }
            Ok(LogTail {
                next_seq: tail.next_seq + 1,
                state: tail.state.apply(&event.kind)?,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;

    fn started() -> EventKind {
        EventKind::Started(Started {
            tool: "t".into(),
            arguments: serde_json::Value::Null,
            node: "n".into(),
        })
    }
    fn warning() -> EventKind {
        EventKind::Warning(Warning {
            message: "w".into(),
        })
    }
    fn done() -> EventKind {
        EventKind::Completed(Completed::default())
    }
    fn asked() -> EventKind {
        EventKind::InputRequired(InputRequired {
            input: InputKind::Elicitation,
            message: None,
            timeout_ms: 1,
        })
    }
    fn answered() -> EventKind {
        EventKind::InputEnded(InputEnded {
            outcome: InputOutcome::Answered,
        })
    }

    #[test]
    fn reducer_follows_the_contract() {
        let check = |log: &[EventKind], expected: Result<RunState, &str>| {
            let got = RunState::reduce(log).map_err(|v| v.to_string());
            match expected {
                Ok(state) => assert_eq!(got, Ok(state), "{log:?}"),
                Err(fragment) => assert!(got.unwrap_err().contains(fragment), "{log:?}"),
            }
        };
        check(&[], Ok(RunState::Pending));
        check(&[started()], Ok(RunState::Working));
        check(&[started(), warning(), done()], Ok(RunState::Completed));
        check(&[warning()], Err("starts with exactly one `started`"));
        check(
            &[started(), started()],
            Err("starts with exactly one `started`"),
        );
        check(&[started(), done(), warning()], Err("nothing may follow"));
        check(&[started(), done(), done()], Err("nothing may follow"));
        // A wait for input: begun while working, ended by `input_ended` or
        // by the terminal event; other events leave it waiting.
        check(&[started(), asked()], Ok(RunState::InputRequired));
        check(
            &[started(), asked(), warning()],
            Ok(RunState::InputRequired),
        );
        check(&[started(), asked(), answered()], Ok(RunState::Working));
        check(
            &[started(), asked(), answered(), asked()],
            Ok(RunState::InputRequired),
        );
        check(&[started(), asked(), done()], Ok(RunState::Completed));
        check(&[asked()], Err("starts with exactly one `started`"));
        check(&[started(), asked(), asked()], Err("one answer at a time"));
        check(&[started(), answered()], Err("one answer at a time"));
        check(&[started(), done(), asked()], Err("nothing may follow"));
    }

    #[test]
    fn tail_checks_density_and_run() {
        let run = RunId::parse("r").unwrap();
        let other = RunId::parse("o").unwrap();
        let ev = |run_id: &RunId, seq, kind| RunEvent {
            run_id: run_id.clone(),
            seq,
            ts: 0,
            kind,
        };
        let tail = LogTail::EMPTY
            .advance(&run, &[ev(&run, 0, started()), ev(&run, 1, warning())])
            .unwrap();
        assert_eq!(
            tail,
            LogTail {
                next_seq: 2,
                state: RunState::Working
            }
        );
        assert_eq!(
            tail.advance(&run, &[ev(&run, 3, warning())]),
            Err(Violation::SeqGap {
                expected: 2,
                got: 3
            })
        );
        assert!(matches!(
            tail.advance(&run, &[ev(&other, 2, warning())]),
            Err(Violation::WrongRun { .. })
        ));
    }
}
