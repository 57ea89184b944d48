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
use weir_core::{FailureCode, InputEnded, InputOutcome, InputRequired, RunError};

use crate::context::RunContext;

pub use weir_core::InputKind;

/// How long a question waits for its answer unless the tool says otherwise
/// ([`RunContext::ask_within`]): long enough for a person to read and fill
/// in a form, short enough that a client that went away does not hold a
/// run (and its slot) for the rest of its time limit.
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

/// [`RunContext::ask_within`]: records the wait, sends `kind`/`params`
/// through `slot`, and waits for the answer, at most `timeout` and no longer
/// than the run. `turn` lets one question of the run wait at a time.
pub(crate) async fn ask(
    ctx: &RunContext,
    slot: &InputSlot,
    turn: &tokio::sync::Mutex<()>,
    kind: InputKind,
    params: Value,
    timeout: Duration,
) -> Result<Value, AskError> {
    let responder = slot
        .lock()
        .expect("input slot lock")
        .clone()
        .ok_or(AskError::NoResponder(kind))?;
    let _turn = turn.lock().await;
    let waiting = InputRequired {
        input: kind,
        message: match kind {
            InputKind::Elicitation => params["message"].as_str().map(str::to_owned),
            InputKind::Sampling => None,
        },
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    };
    // Stored before the question leaves, so that whoever gets it and then
    // reads the run (tasks/get) sees it waiting.
    let unrecorded = |error: crate::EmitError| AskError::Unrecorded(error.to_string());
    ctx.record(waiting.into()).await.map_err(unrecorded)?;
    ctx.flush().await.map_err(unrecorded)?;
    let (reply, answer) = oneshot::channel();
    let asked = InputRequest {
        kind,
        params,
        reply,
    };
    let answer = match responder.send(asked).await {
        Err(_) => Err(AskError::NoResponder(kind)),
        Ok(()) => tokio::select! {
            answer = answer => answer.unwrap_or(Err(AskError::Gone)),
            () = tokio::time::sleep(timeout) => Err(AskError::TimedOut { kind, waited: timeout }),
            // The scheduler drops the tool's future when the run is
            // cancelled or times out, which withdraws its question; a task
            // the tool spawned to ask is told once the run has ended — not
            // at the cancel itself, where an error returned through the
            // tool could race the scheduler and end the run as `failed`.
            () = ctx.over() => Err(AskError::RunEnded),
        },
    };
    let outcome = match &answer {
        Ok(_) => InputOutcome::Answered,
        Err(AskError::NoResponder(_) | AskError::Refused(_)) => InputOutcome::Refused,
        Err(AskError::TimedOut { .. }) => InputOutcome::TimedOut,
        Err(AskError::Gone) => InputOutcome::Gone,
        // The terminal event ends the wait.
        Err(AskError::RunEnded | AskError::Unrecorded(_)) => return answer,
    };
    // A run that is ending cannot take it; its terminal event ends the wait.
    let _ = ctx.record(InputEnded { outcome }.into()).await;
    answer
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::json;
    use weir_core::{Completed, Content, EventKind, RunId, RunState, Warning};

    use super::*;
    use crate::{EmitError, EventLog, MemoryLog, RunOptions, Scheduler, SchedulerConfig, Tool};

    /// Asks for an elicitation with the time limit `timeout_ms`; `"handle"`
    /// says what it does when the ask fails: go on without an answer, or
    /// pass the error on with `?`. With `"twice"`, asks twice at once.
    struct Asker;

    #[async_trait]
    impl Tool for Asker {
        fn info(&self) -> crate::ToolInfo {
            crate::ToolInfo::new("asker", "asks", json!({"type": "object"}))
        }
        async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
            let timeout = Duration::from_millis(args["timeout_ms"].as_u64().unwrap_or(1_000));
            let question = json!({"message": "who are you?", "requestedSchema": {}});
            if args["fake"] == true {
                let faked = ctx.emit(InputEnded {
                    outcome: InputOutcome::Answered,
                });
                let refused = match faked.await {
                    Err(EmitError::InputReserved(kind)) => kind,
                    other => panic!("emit took a wait's end: {other:?}"),
                };
                ctx.emit(Warning {
                    message: refused.into(),
                })
                .await
                .unwrap();
                return Ok(Completed::default());
            }
            if args["twice"] == true {
                let (a, b) = tokio::join!(
                    ctx.ask_within(InputKind::Elicitation, question.clone(), timeout),
                    ctx.ask_within(InputKind::Elicitation, question, timeout),
                );
                return Ok(Completed {
                    structured: Some(json!([a?, b?])),
                    ..Completed::default()
                });
            }
            let answer = match ctx
                .ask_within(InputKind::Elicitation, question, timeout)
                .await
            {
                Err(AskError::TimedOut { .. }) if args["handle"] == true => json!("nobody"),
                answer => answer?,
            };
            Ok(Completed {
                content: vec![Content::text(answer.to_string())],
                structured: None,
            })
        }
    }

    /// A scheduler of [`Asker`] over a memory log.
    async fn scheduler() -> (Arc<dyn EventLog>, Scheduler) {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let config = SchedulerConfig {
            retention: None,
            ..SchedulerConfig::default()
        };
        let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Asker)], config)
            .await
            .unwrap();
        (log, scheduler)
    }

    /// Starts an `asker` run whose questions come out of the receiver.
    async fn ask(
        scheduler: &Scheduler,
        args: Value,
    ) -> (crate::RunHandle, mpsc::Receiver<InputRequest>) {
        let (questions, asked) = mpsc::channel(4);
        let options = RunOptions {
            input_requests: Some(questions),
            ..RunOptions::default()
        };
        let run = scheduler.submit("asker", args, options).await.unwrap();
        (run, asked)
    }

    async fn kinds(log: &Arc<dyn EventLog>, run_id: &RunId) -> Vec<&'static str> {
        let events = log.read(run_id, 0, 100).await.unwrap();
        events.iter().map(|event| event.kind.type_name()).collect()
    }

    /// A question nobody answers ends at its time limit with an error the
    /// tool can handle; the question is withdrawn (its reply closed), and
    /// the log shows the wait and how it ended.
    #[tokio::test(start_paused = true)]
    async fn an_unanswered_question_times_out_and_the_tool_can_go_on() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({"handle": true})).await;
        let run_id = run.run_id().clone();
        let question = asked.recv().await.unwrap();
        assert_eq!(question.kind, InputKind::Elicitation);
        let summary = log.get_run(&run_id).await.unwrap().unwrap();
        assert_eq!(summary.state, RunState::InputRequired);
        let terminal = run.finished().await.unwrap();
        assert!(question.reply.is_closed(), "the question was not withdrawn");
        let EventKind::Completed(completed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(completed.content, vec![Content::text("\"nobody\"")]);
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "input_required", "input_ended", "completed"]
        );
        let events = log.read(&run_id, 1, 2).await.unwrap();
        let EventKind::InputRequired(waiting) = &events[0].kind else {
            panic!("{events:?}")
        };
        assert_eq!(
            (
                waiting.input,
                waiting.message.as_deref(),
                waiting.timeout_ms
            ),
            (InputKind::Elicitation, Some("who are you?"), 1_000)
        );
        assert_eq!(
            events[1].kind,
            EventKind::InputEnded(InputEnded {
                outcome: InputOutcome::TimedOut
            })
        );
    }

    /// A tool that passes the timeout on fails the run, saying that the
    /// client did not answer in time.
    #[tokio::test(start_paused = true)]
    async fn a_timeout_the_tool_passes_on_fails_the_run_with_the_reason() {
        let (_log, scheduler) = scheduler().await;
        let (run, _asked) = ask(&scheduler, json!({"timeout_ms": 1_500})).await;
        let terminal = run.finished().await.unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(failed.error.code, FailureCode::Timeout);
        assert_eq!(
            failed.error.message,
            "the client did not answer the Elicitation request within 1.5s"
        );
        assert!(failed.error.remediation.is_some());
    }

    /// An answer ends the wait: the run is working again, and the tool has
    /// the answer.
    #[tokio::test(start_paused = true)]
    async fn an_answer_ends_the_wait() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({})).await;
        let run_id = run.run_id().clone();
        let question = asked.recv().await.unwrap();
        question
            .reply
            .send(Ok(json!({"action": "decline"})))
            .unwrap();
        let terminal = run.finished().await.unwrap();
        assert!(terminal.kind.is_terminal());
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "input_required", "input_ended", "completed"]
        );
        let ended = &log.read(&run_id, 2, 1).await.unwrap()[0];
        assert_eq!(
            ended.kind,
            EventKind::InputEnded(InputEnded {
                outcome: InputOutcome::Answered
            })
        );
    }

    /// Cancelling a run that waits for its caller ends it at once; its
    /// terminal event ends the wait.
    #[tokio::test(start_paused = true)]
    async fn a_cancel_reaches_a_run_that_waits_for_an_answer() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({"timeout_ms": 3_600_000})).await;
        let run_id = run.run_id().clone();
        let question = asked.recv().await.unwrap();
        assert!(scheduler.cancel(&run_id, "stop"));
        let terminal = run.finished().await.unwrap();
        assert!(
            matches!(terminal.kind, EventKind::Canceled(_)),
            "{terminal:?}"
        );
        assert!(question.reply.is_closed());
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "input_required", "canceled"]
        );
    }

    /// Two questions at once take turns, so the log's waits never overlap.
    #[tokio::test(start_paused = true)]
    async fn questions_of_one_run_take_turns() {
        let (log, scheduler) = scheduler().await;
        let (run, mut asked) = ask(&scheduler, json!({"twice": true})).await;
        let run_id = run.run_id().clone();
        for answer in ["a", "b"] {
            let question = asked.recv().await.unwrap();
            // The other one waits for its turn, unasked.
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(asked.try_recv().is_err());
            question.reply.send(Ok(json!(answer))).unwrap();
        }
        let terminal = run.finished().await.unwrap();
        assert!(
            matches!(terminal.kind, EventKind::Completed(_)),
            "{terminal:?}"
        );
        assert_eq!(
            kinds(&log, &run_id).await,
            [
                "started",
                "input_required",
                "input_ended",
                "input_required",
                "input_ended",
                "completed"
            ]
        );
    }

    /// Without anyone to answer, the ask fails at once and the log shows no
    /// wait; a tool cannot write the waits itself.
    #[tokio::test(start_paused = true)]
    async fn no_responder_fails_at_once_and_tools_cannot_fake_a_wait() {
        let (log, scheduler) = scheduler().await;
        let run = scheduler
            .submit("asker", json!({}), RunOptions::default())
            .await
            .unwrap();
        let run_id = run.run_id().clone();
        let terminal = run.finished().await.unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert!(
            failed.error.message.contains("no client can answer"),
            "{failed:?}"
        );
        assert_eq!(kinds(&log, &run_id).await, ["started", "failed"]);

        let (run, _asked) = ask(&scheduler, json!({"fake": true})).await;
        let run_id = run.run_id().clone();
        run.finished().await.unwrap();
        assert_eq!(
            kinds(&log, &run_id).await,
            ["started", "warning", "completed"]
        );
        let refused = &log.read(&run_id, 1, 1).await.unwrap()[0];
        assert_eq!(
            refused.kind,
            EventKind::Warning(Warning {
                message: "input_ended".into()
            })
        );
    }
}
