//! Running a checked plan as one parent run: a step starts when every step
//! it follows has ended (its terminal event arrived), runs as a child run
//! (or a call to another server), is retried after a failure within its
//! bounds, and is reported as it starts and ends.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{Completed, Content, EventKind, FailureCode, Meta, Milestone, Partial, RunError};
use weir_runtime::{ChildEnd, RemoteCaller, RunContext};

use crate::plan::{Check, Checked, Outcome, Step, Test};
use crate::template::{self, Field, Reference};

/// The `partial` group a plan's step reports go to.
pub(crate) const GROUP: &str = "steps";

/// How a step went: one per step, in the plan's final result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepReport {
    /// The step's id.
    pub id: String,
    /// The tool it called.
    pub tool: String,
    /// The other server it called it on, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// Attempts made (0 when skipped, or when its arguments could not be
    /// made).
    pub attempts: u32,
    /// The runs of its attempts on this server, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_ids: Vec<String>,
    /// The structured result of its last attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The text content of its last attempt.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Why its last attempt failed or was cancelled, or why it was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From its first attempt's start to its end.
    pub duration_ms: u64,
}

/// Runs `checked` to its end; the result summarizes every step.
pub(crate) async fn run(
    ctx: &RunContext,
    remote: Option<&Arc<dyn RemoteCaller>>,
    checked: Checked,
) -> Result<Completed, RunError> {
    let Checked { plan, checks } = checked;
    let steps = &plan.steps;
    let total = steps.len() as u64;
    ctx.milestone(Milestone::new("steps").progress(0, total))
        .await?;
    let mut reports: Vec<Option<StepReport>> = vec![None; steps.len()];
    let mut begun = vec![false; steps.len()];
    let mut running = FuturesUnordered::new();
    let mut ended = 0;
    loop {
        // Start (or skip) every step whose `after`s have all ended; a skip
        // may make others ready, so look again until nothing changes.
        let mut changed = true;
        while changed {
            changed = false;
            for (index, step) in steps.iter().enumerate() {
                let ready = !begun[index]
                    && step
                        .after
                        .iter()
                        .all(|after| report_of(steps, &reports, after).is_some());
                if !ready {
                    continue;
                }
                begun[index] = true;
                changed = true;
                let known = known(steps, &reports);
                let decided = decide(step, &checks[index], &known).and_then(|()| {
                    template::render(&step.args, &|reference| lookup(&known, reference))
                        .map_err(Stop::Arguments)
                });
                match decided {
                    Ok(arguments) => {
                        running.push(run_step(
                            ctx.clone(),
                            remote.cloned(),
                            index,
                            step.clone(),
                            arguments,
                        ));
                    }
                    Err(stop) => {
                        let report = stop.report(step);
                        ended += 1;
                        announce_end(ctx, &report, ended, total).await?;
                        reports[index] = Some(report);
                    }
                }
            }
        }
        let Some((index, report)) = running.next().await else {
            break;
        };
        ended += 1;
        announce_end(ctx, &report, ended, total).await?;
        reports[index] = Some(report);
    }
    let reports: Vec<StepReport> = reports.into_iter().flatten().collect();
    let unhandled: Vec<&StepReport> = reports
        .iter()
        .filter(|report| matches!(report.outcome, Outcome::Failed | Outcome::Canceled))
        .filter(|report| !handled(&checks, &report.id))
        .collect();
    let outcome = if unhandled.is_empty() {
        "completed"
    } else {
        "failed"
    };
    let text = summary(plan.name.as_deref(), outcome, &reports);
    let structured = json!({ "name": plan.name, "outcome": outcome, "steps": reports });
    if unhandled.is_empty() {
        return Ok(Completed {
            content: vec![Content::text(text)],
            structured: Some(structured),
        });
    }
    // A failed run's terminal event carries only its error: the summary
    // goes to the log just before it.
    ctx.emit(Partial {
        content: vec![Content::text(text)],
        items: vec![structured],
        group: Some("summary".into()),
    })
    .await?;
    let failures: Vec<String> = unhandled
        .iter()
        .map(|report| {
            format!(
                "step {} {}: {}",
                report.id,
                report.outcome.as_str(),
                report.error.as_deref().unwrap_or("no reason given")
            )
        })
        .collect();
    Err(RunError::new(
        FailureCode::ToolError,
        format!("the plan failed: {}", failures.join("; ")),
    )
    .with_remediation(
        "see each step's run for what happened; to go on after a step fails, give a step `if: {step: ID, outcome: failed}`",
    ))
}

/// The report of the step named `id`, if it has ended.
fn report_of<'a>(
    steps: &[Step],
    reports: &'a [Option<StepReport>],
    id: &str,
) -> Option<&'a StepReport> {
    let index = steps.iter().position(|step| step.id == id)?;
    reports[index].as_ref()
}

/// The steps that have ended, by id.
fn known<'a>(
    steps: &'a [Step],
    reports: &'a [Option<StepReport>],
) -> BTreeMap<&'a str, &'a StepReport> {
    steps
        .iter()
        .zip(reports)
        .filter_map(|(step, report)| Some((step.id.as_str(), report.as_ref()?)))
        .collect()
}

/// Whether some step branches on how step `id` ended: then its failure is
/// expected, not the plan's.
fn handled(checks: &[Vec<Check>], id: &str) -> bool {
    checks.iter().flatten().any(|check| match check {
        Check::Outcome { step, .. } => step == id,
        Check::Value { .. } => false,
    })
}

/// Why a step does not run.
enum Stop {
    Skipped(String),
    Arguments(String),
}

impl Stop {
    fn report(self, step: &Step) -> StepReport {
        let (outcome, error) = match self {
            Stop::Skipped(why) => (Outcome::Skipped, why),
            Stop::Arguments(why) => (
                Outcome::Failed,
                format!("its arguments could not be made: {why}"),
            ),
        };
        StepReport {
            id: step.id.clone(),
            tool: step.tool.clone(),
            server: step.server.clone(),
            outcome,
            attempts: 0,
            run_ids: Vec::new(),
            result: None,
            text: String::new(),
            error: Some(error),
            duration_ms: 0,
        }
    }
}

/// Whether `step` runs. Without conditions: when none of the steps it
/// follows failed or was cancelled, and not all of them were skipped. With
/// conditions: when they all hold, however the steps before it ended.
fn decide(step: &Step, checks: &[Check], known: &BTreeMap<&str, &StepReport>) -> Result<(), Stop> {
    if checks.is_empty() {
        let before: Vec<&StepReport> = step
            .after
            .iter()
            .filter_map(|id| known.get(id.as_str()).copied())
            .collect();
        if let Some(bad) = before
            .iter()
            .find(|report| matches!(report.outcome, Outcome::Failed | Outcome::Canceled))
        {
            return Err(Stop::Skipped(format!(
                "step {} {} (give this step an `if` to run anyway)",
                bad.id,
                bad.outcome.as_str()
            )));
        }
        if !before.is_empty()
            && before
                .iter()
                .all(|report| report.outcome == Outcome::Skipped)
        {
            return Err(Stop::Skipped("every step it runs after was skipped".into()));
        }
        return Ok(());
    }
    for check in checks {
        let (holds, what) = match check {
            Check::Outcome { step, outcomes } => {
                let outcome = known.get(step.as_str()).map(|report| report.outcome);
                let names: Vec<&str> = outcomes.iter().map(|o| o.as_str()).collect();
                (
                    outcome.is_some_and(|outcome| outcomes.contains(&outcome)),
                    format!(
                        "step {step} {} (not {})",
                        outcome.map_or("did not run", Outcome::as_str),
                        names.join(" or ")
                    ),
                )
            }
            Check::Value { reference, test } => {
                let value = lookup(known, reference);
                let holds = match (test, &value) {
                    (Test::Exists(wanted), value) => {
                        *wanted == value.as_ref().is_ok_and(|value| !value.is_null())
                    }
                    (Test::Equals(wanted), Ok(value)) => same(wanted, value),
                    (Test::NotEquals(wanted), Ok(value)) => !same(wanted, value),
                    (_, Err(_)) => false,
                };
                let shown = value.map_or_else(|why| why, |value| value.to_string());
                (holds, format!("{} is {shown}", reference.written()))
            }
        };
        if !holds {
            return Err(Stop::Skipped(format!(
                "its condition does not hold: {what}"
            )));
        }
    }
    Ok(())
}

/// Equality with numbers compared by value (`1` and `1.0` are the same).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

/// The value a reference names, from the steps that have ended.
fn lookup(known: &BTreeMap<&str, &StepReport>, reference: &Reference) -> Result<Value, String> {
    let written = reference.written();
    let report = known
        .get(reference.step.as_str())
        .ok_or_else(|| format!("{written}: step {} has not ended", reference.step))?;
    let ended = report.outcome.as_str();
    Ok(match reference.field {
        Field::Outcome => json!(ended),
        Field::Attempts => json!(report.attempts),
        Field::RunId => json!(
            report
                .run_ids
                .last()
                .ok_or_else(|| format!("{written}: step {} started no run here", report.id))?
        ),
        Field::Error => json!(
            report
                .error
                .as_deref()
                .ok_or_else(|| format!("{written}: step {} has no error: it {ended}", report.id))?
        ),
        Field::Text => json!(report.text),
        Field::Result => {
            let result = report.result.as_ref().ok_or_else(|| {
                format!(
                    "{written}: step {} has no structured result (it {ended})",
                    report.id
                )
            })?;
            reference.walk(result)?.clone()
        }
    })
}

/// One step, attempt after attempt, to its report.
async fn run_step(
    ctx: RunContext,
    remote: Option<Arc<dyn RemoteCaller>>,
    index: usize,
    step: Step,
    arguments: Value,
) -> (usize, StepReport) {
    let began = Instant::now();
    let attempts = step.retry.map_or(1, |retry| retry.attempts);
    let timeout = step.timeout_ms.map(Duration::from_millis);
    let mut run_ids = Vec::new();
    let mut attempt = 1;
    let ended = loop {
        let ended = match (step.server.as_deref(), &remote) {
            (None, _) => {
                local(
                    &ctx,
                    &step,
                    arguments.clone(),
                    timeout,
                    attempt,
                    &mut run_ids,
                )
                .await
            }
            (Some(server), Some(remote)) => {
                let info =
                    json!({ "remote": { "step": step.id, "server": server, "tool": step.tool } });
                let _ = ctx
                    .emit(Meta {
                        info,
                        ..Meta::default()
                    })
                    .await;
                say(&ctx, format!("step {}: attempt {attempt} calls {} on {server}", step.id, step.tool), json!({"step": step.id, "event": "started", "attempt": attempt, "server": server})).await;
                let (events, mut reported) = mpsc::channel(64);
                let call = remote.call(server, &step.tool, arguments.clone(), timeout, events);
                tokio::pin!(call);
                // What the remote call reports is drained, not kept: the
                // other server keeps its own log.
                let result = loop {
                    tokio::select! {
                        result = &mut call => break result,
                        Some(_) = reported.recv() => {}
                    }
                };
                match result {
                    Ok(done) => Ended::Completed(done),
                    Err(error) => {
                        let result = error.result.clone().map(|result| *result);
                        Ended::Failed(error.to_string(), result)
                    }
                }
            }
            (Some(_), None) => Ended::Failed("this server cannot call other servers".into(), None),
        };
        let retry = match (&ended, step.retry) {
            (Ended::Failed(..), Some(retry)) if attempt < attempts => retry,
            _ => break ended,
        };
        attempt += 1;
        let wait = retry.backoff(attempt);
        say(
            &ctx,
            format!(
                "step {}: attempt {} failed ({}); attempt {attempt} of {attempts} in {}",
                step.id,
                attempt - 1,
                ended.reason().unwrap_or_default(),
                weir_core::human_duration(wait.as_millis() as u64)
            ),
            json!({"step": step.id, "event": "retry", "attempt": attempt, "backoff_ms": wait.as_millis() as u64}),
        )
        .await;
        tokio::time::sleep(wait).await;
    };
    let (outcome, result, text, error) = match ended {
        Ended::Completed(done) => (
            Outcome::Completed,
            done.structured,
            Content::text_of(&done.content),
            None,
        ),
        // A step that failed with a result (a program that exited
        // non-zero) keeps it: `steps.ID.result.exit_code` and `.text`.
        Ended::Failed(why, result) => {
            let (structured, text) = result.map_or((None, String::new()), |result| {
                (result.structured, Content::text_of(&result.content))
            });
            (Outcome::Failed, structured, text, Some(why))
        }
        Ended::Canceled(why) => (Outcome::Canceled, None, String::new(), Some(why)),
    };
    let report = StepReport {
        id: step.id.clone(),
        tool: step.tool.clone(),
        server: step.server.clone(),
        outcome,
        attempts: attempt,
        run_ids,
        result,
        text,
        error,
        duration_ms: began.elapsed().as_millis() as u64,
    };
    (index, report)
}

/// How one attempt ended.
enum Ended {
    Completed(Completed),
    /// Why, and the result it still produced, if any.
    Failed(String, Option<Completed>),
    Canceled(String),
}

impl Ended {
    fn reason(&self) -> Option<&str> {
        match self {
            Ended::Completed(_) => None,
            Ended::Failed(why, _) | Ended::Canceled(why) => Some(why),
        }
    }
}

/// One attempt of a step on this server: a child run, to its terminal event.
async fn local(
    ctx: &RunContext,
    step: &Step,
    arguments: Value,
    timeout: Option<Duration>,
    attempt: u32,
    run_ids: &mut Vec<String>,
) -> Ended {
    let child = match ctx.call(&step.tool, arguments, timeout).await {
        Ok(child) => child,
        Err(error) => return Ended::Failed(error.to_string(), None),
    };
    let run_id = child.run_id().to_string();
    run_ids.push(run_id.clone());
    say(
        ctx,
        format!(
            "step {}: attempt {attempt} runs {} as run {run_id}",
            step.id, step.tool
        ),
        json!({"step": step.id, "event": "started", "attempt": attempt, "run_id": run_id}),
    )
    .await;
    // What the child streamed is part of its text (a tool that streams its
    // output leaves it out of its final content).
    let with_streamed = |mut done: Completed, streamed: String| {
        if !streamed.is_empty() {
            done.content.insert(0, Content::text(streamed));
        }
        done
    };
    match child.follow(MAX_TEXT).await {
        Ok(ChildEnd { streamed, terminal }) => match terminal {
            EventKind::Completed(done) => Ended::Completed(with_streamed(done, streamed)),
            // A child that failed with a result (a program that exited
            // non-zero) is a failed step that keeps it.
            EventKind::Failed(failed) => Ended::Failed(
                failed.error.message,
                failed
                    .error
                    .result
                    .map(|result| with_streamed(*result, streamed)),
            ),
            EventKind::Canceled(canceled) => Ended::Canceled(canceled.reason),
            other => Ended::Failed(
                format!("run {run_id} ended with {}", other.type_name()),
                None,
            ),
        },
        Err(error) => Ended::Failed(error.to_string(), None),
    }
}

/// Most bytes of a step's text kept in its report (and the plan's result).
const MAX_TEXT: usize = 64 * 1024;

/// A line about a step, and its structured form, as a partial of the plan.
/// Best effort: a plan that is ending cannot take it.
async fn say(ctx: &RunContext, line: String, item: Value) {
    let _ = ctx
        .emit(Partial {
            content: vec![Content::text(format!("{line}\n"))],
            items: vec![item],
            group: Some(GROUP.into()),
        })
        .await;
}

/// A step has ended: its line, and the plan's progress.
async fn announce_end(
    ctx: &RunContext,
    report: &StepReport,
    ended: u64,
    total: u64,
) -> Result<(), RunError> {
    let line = step_line(report);
    let item = json!({
        "step": report.id,
        "event": "ended",
        "outcome": report.outcome,
        "attempts": report.attempts,
        "run_id": report.run_ids.last(),
    });
    say(ctx, format!("step {line}"), item).await;
    ctx.milestone(
        Milestone::new("steps")
            .message(format!("{} {}", report.id, report.outcome.as_str()))
            .progress(ended, total),
    )
    .await?;
    Ok(())
}

fn step_line(report: &StepReport) -> String {
    let mut line = format!("{}: {}", report.id, report.outcome.as_str());
    if report.attempts > 1 {
        line.push_str(&format!(" after {} attempts", report.attempts));
    }
    if let Some(run_id) = report.run_ids.last() {
        line.push_str(&format!(" (run {run_id}"));
        line.push_str(&format!(
            ", {})",
            weir_core::human_duration(report.duration_ms)
        ));
    }
    if let Some(error) = &report.error {
        line.push_str(&format!(": {error}"));
    } else if let Some(first) = report.text.lines().map(str::trim).find(|l| !l.is_empty()) {
        let shown: String = first.chars().take(120).collect();
        let more = if shown.len() < first.len() { "…" } else { "" };
        line.push_str(&format!(": {shown}{more}"));
    }
    line
}

fn summary(name: Option<&str>, outcome: &str, reports: &[StepReport]) -> String {
    let count = |wanted: Outcome| reports.iter().filter(|r| r.outcome == wanted).count();
    let mut text = format!(
        "plan{} {outcome}: {} steps, {} completed, {} failed, {} canceled, {} skipped\n",
        name.map_or(String::new(), |name| format!(" {name:?}")),
        reports.len(),
        count(Outcome::Completed),
        count(Outcome::Failed),
        count(Outcome::Canceled),
        count(Outcome::Skipped),
    );
    for report in reports {
        text.push_str(&format!("- {}\n", step_line(report)));
    }
    text
}
