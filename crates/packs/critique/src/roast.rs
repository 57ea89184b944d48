//! `roast`: agents in parallel on one brief, streamed, then a report.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_agents::{
    AgentError, AgentEvent, AgentOptions, AgentResult, CliKind, Ending, Exit, Transport,
};
use weir_core::{Admission, Completed, Content, FailureCode, Meta, Milestone, Partial, RunError};
use weir_runtime::{RunContext, Tool, ToolInfo};

use crate::Shared;
use crate::args::{self, Defaults, Request, RunRequest};
use crate::cache::canonical_hash;
use crate::findings;
use crate::report::{self, AgentFinding, AgentOutcome, Report, Shape, Status};

/// Most bytes of an earlier report put into a resumed critique's prompt.
const MAX_PREVIOUS_BYTES: usize = 64 * 1024;

/// The `roast` tool.
pub(crate) struct Roast(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for Roast {
    fn info(&self) -> ToolInfo {
        let config = &self.0.config;
        let mut info = ToolInfo::new(
            "roast",
            format!(
                "Brutally honest critique of a path (target) or text (content) by several coding-agent CLIs in parallel (here: {}); brief picks the reviewer. Each agent's text streams as it is typed. The result: each agent's outcome, the findings (severity, file:line), a page of the report (page on with cursor; follow up with context_id + resume + content). An agent that fails leaves the others' answers; isError when none answered, saying what to set up per agent. Cached {} s per identical call.",
                config.clis.join(", "),
                config.cache_ttl.as_secs(),
            ),
            args::roast_schema(),
        );
        info.output_schema = Some(weir_core::output_contract(&report::output_schema()));
        info.streams = true;
        // Each agent is killed at its own limit; with max_parallel 1 the
        // (at most three) agents run one after another.
        info.timeout =
            Some(config.agent_timeout * args::KNOWN_CLIS.len() as u32 + Duration::from_secs(60));
        info
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let shared = &self.0;
        let defaults = Defaults {
            clis: &shared.config.clis,
            page_bytes: shared.config.page_bytes,
            roots: &shared.roots,
        };
        match args::parse(arguments, &defaults)? {
            Request::Page {
                context_id,
                offset,
                limit,
            } => {
                let report = stored(shared, &context_id)?;
                Ok(report::result(&report, offset, limit, false, Shape::Page))
            }
            Request::Run(request) => self.critique(&ctx, request).await,
        }
    }
}

/// The report stored under `context_id`, or an error saying why not.
fn stored(shared: &Shared, context_id: &str) -> Result<Arc<Report>, RunError> {
    let now = shared.now_ms();
    shared
        .reports
        .lock()
        .expect("reports lock")
        .get(context_id, now)
        .ok_or_else(|| {
            RunError::new(
                FailureCode::ToolError,
                format!("no report with context_id {context_id:?} on this server"),
            )
            .with_remediation(format!(
                "reports are kept in memory for {} s after their critique; run the critique again",
                shared.config.cache_ttl.as_secs()
            ))
        })
}

/// Steps of a roast's progress: three per agent, one for the synthesis.
struct Steps {
    /// Held while a step is reported, so that counts reach the log in
    /// order and each is a step up (none is clamped away).
    done: tokio::sync::Mutex<u64>,
    total: u64,
}

impl Steps {
    async fn step(&self, ctx: &RunContext, phase: &str, message: String) -> Result<(), RunError> {
        let mut done = self.done.lock().await;
        *done += 1;
        ctx.milestone(
            Milestone::new(phase)
                .message(message)
                .progress(*done, self.total),
        )
        .await?;
        Ok(())
    }
}

impl Roast {
    async fn critique(&self, ctx: &RunContext, request: RunRequest) -> Result<Completed, RunError> {
        let shared = &self.0;
        let previous = match &request.resume {
            Some(context_id) => Some(stored(shared, context_id)?),
            None => None,
        };
        let agents: Vec<(String, Option<String>)> = request
            .agents
            .iter()
            .map(|(cli, model)| {
                let model = model
                    .clone()
                    .or_else(|| shared.config.models.get(cli).cloned());
                (cli.clone(), model)
            })
            .collect();
        let cache_key = canonical_hash(&json!({
            "brief": request.preset.name(),
            "target": request.target,
            "content": request.content,
            "context": request.context,
            "agents": agents,
        }));
        let cacheable = previous.is_none();
        if cacheable
            && !request.refresh
            && let Some(result) = cached(shared, ctx, &cache_key, request.limit).await?
        {
            return Ok(result);
        }

        let cwd = working_dir(request.target.as_deref(), &shared.work_dir);
        match &request.target {
            Some(target) => {
                shared.check_work_dir("target", target)?;
                shared.check_work_dir("target", &cwd)?;
            }
            None => shared.check_work_dir(crate::DEFAULT_DIR, &cwd)?,
        }
        let prompt = prompt(&request, previous.as_deref());
        let parallel = request
            .max_parallel
            .unwrap_or(shared.config.max_parallel)
            .min(shared.config.max_parallel)
            .max(1);
        ctx.emit(Meta {
            backends: agents.iter().map(|(cli, _)| cli.clone()).collect(),
            info: json!({
                "agents": agents.iter().map(|(cli, model)| json!({
                    "cli": cli,
                    "model": model,
                    "breaker": shared.breaker_snapshot(cli),
                })).collect::<Vec<_>>(),
                "max_parallel": parallel,
                "cwd": cwd,
                "resumes": request.resume,
                "cached": false,
            }),
            ..Meta::default()
        })
        .await?;

        let steps = Steps {
            done: tokio::sync::Mutex::new(0),
            total: agents.len() as u64 * 3 + 1,
        };
        let finished = AtomicU64::new(0);
        let permits = tokio::sync::Semaphore::new(parallel);
        let runs = agents.iter().map(|(cli, model)| {
            let agent = Agent {
                shared,
                ctx,
                steps: &steps,
                finished: &finished,
                of: agents.len(),
                cli,
                model: model.as_deref(),
            };
            let (prompt, cwd, permits) = (&prompt, &cwd, &permits);
            async move {
                let _permit = permits.acquire().await.expect("never closed");
                agent.run(prompt, cwd).await
            }
        });
        // In this task, not spawned: dropping the run's future (cancel,
        // timeout) drops every session, which kills its process group.
        let outcomes = futures_util::future::join_all(runs).await;

        steps
            .step(ctx, "synthesizing", "extracting findings".to_owned())
            .await?;
        let outcomes: Vec<AgentRun> = outcomes.into_iter().collect::<Result<_, _>>()?;
        let report = Arc::new(assemble(
            previous.as_deref(),
            request.content.as_deref(),
            outcomes,
        ));
        let now = shared.now_ms();
        shared.reports.lock().expect("reports lock").put(
            report.context_id.clone(),
            report.clone(),
            now,
        );
        // Only a critique where some agent answered is worth repeating.
        if cacheable && report.agents.iter().any(|agent| agent.status == Status::Ok) {
            shared
                .cache
                .lock()
                .expect("cache lock")
                .put(cache_key, report.clone(), now);
        }
        let result = report::result(&report, 0, request.limit, false, Shape::Critique);
        match nobody_answered(&report.agents) {
            Some(error) => Err(error.with_result(result)),
            None => Ok(result),
        }
    }
}

/// The cached result of an identical critique, if one is kept: said in
/// `meta`, and kept as long again under its id, since it was asked for.
async fn cached(
    shared: &Shared,
    ctx: &RunContext,
    cache_key: &str,
    limit: usize,
) -> Result<Option<Completed>, RunError> {
    let now = shared.now_ms();
    let hit = shared.cache.lock().expect("cache lock").get(cache_key, now);
    let Some(report) = hit else {
        return Ok(None);
    };
    ctx.emit(Meta {
        info: json!({"cached": true, "context_id": report.context_id}),
        ..Meta::default()
    })
    .await?;
    shared.reports.lock().expect("reports lock").put(
        report.context_id.clone(),
        report.clone(),
        now,
    );
    Ok(Some(report::result(
        &report,
        0,
        limit,
        true,
        Shape::Critique,
    )))
}

/// The report of a round: the agents' sections after the previous
/// rounds' text (a follow-up says its `content`), the findings of every
/// round sorted, one context id across the rounds.
fn assemble(previous: Option<&Report>, content: Option<&str>, outcomes: Vec<AgentRun>) -> Report {
    let mut outcomes_only = Vec::with_capacity(outcomes.len());
    let mut new_findings = Vec::new();
    let mut text = String::new();
    if let Some(previous) = previous {
        text.push_str(&previous.text);
        text.push_str(&format!(
            "---\n\n# Follow-up {}: {}\n\n",
            previous.rounds + 1,
            content.unwrap_or("")
        ));
    }
    for (outcome, output, found) in outcomes {
        text.push_str(&report::section(&outcome, &output));
        new_findings.extend(found.into_iter().map(|finding| AgentFinding {
            agent: outcome.cli.clone(),
            finding,
        }));
        outcomes_only.push(outcome);
    }
    let mut all_findings = previous
        .map(|previous| previous.findings.clone())
        .unwrap_or_default();
    all_findings.extend(new_findings);
    report::sort_findings(&mut all_findings);
    Report {
        context_id: previous
            .map(|previous| previous.context_id.clone())
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        text,
        findings: all_findings,
        agents: outcomes_only,
        rounds: previous.map_or(1, |previous| previous.rounds + 1),
    }
}

/// A roast where no agent answered has failed, whatever the reason each
/// had: the error says, per agent, what to set up (its result, kept with
/// it, has the details).
fn nobody_answered(agents: &[AgentOutcome]) -> Option<RunError> {
    if agents.iter().any(|agent| agent.status == Status::Ok) {
        return None;
    }
    let each = |agent: &AgentOutcome| {
        format!(
            "{}: {}",
            agent.cli,
            agent.setup.as_deref().unwrap_or("see its error")
        )
    };
    Some(
        RunError::new(
            FailureCode::ToolError,
            format!("no agent answered (0 of {})", agents.len()),
        )
        .with_remediation(agents.iter().map(each).collect::<Vec<_>>().join("; ")),
    )
}

/// Where the agents run: the target directory, a target file's directory,
/// else the configured one.
fn working_dir(target: Option<&Path>, default: &Path) -> PathBuf {
    match target {
        Some(target) if target.is_dir() => target.to_owned(),
        Some(target) => target
            .parent()
            .filter(|parent| parent.is_dir())
            .map_or_else(|| default.to_owned(), Path::to_owned),
        None => default.to_owned(),
    }
}

/// The agents' prompt: the preset's brief, how to write findings, then the
/// context, the earlier report (when resuming) and the work.
fn prompt(request: &RunRequest, previous: Option<&Report>) -> String {
    let mut prompt = String::new();
    prompt.push_str(request.preset.brief());
    prompt.push_str(
        "\n\nDo not modify any file. Report every problem as a markdown list item, one per finding, in this form:\n\
         - [SEVERITY] (category) path/to/file:line — what is wrong and why it matters\n\
         where SEVERITY is CRITICAL, HIGH, MEDIUM, LOW or INFO; leave out path/to/file:line when it does not apply. Worst first.\n",
    );
    if let Some(context) = &request.context {
        prompt.push_str(&format!("\nContext from the requester:\n{context}\n"));
    }
    if let Some(previous) = previous {
        let mut cut = previous.text.len().min(MAX_PREVIOUS_BYTES);
        while !previous.text.is_char_boundary(cut) {
            cut -= 1;
        }
        prompt.push_str(&format!(
            "\nThis continues an earlier critique. Its report:\n<previous_report>\n{}\n</previous_report>\n",
            &previous.text[..cut]
        ));
    }
    if let Some(target) = &request.target {
        let kind = if target.is_dir() { "directory" } else { "file" };
        prompt.push_str(&format!(
            "\nReview the {kind} {} (your working directory is {}).\n",
            target.display(),
            working_dir(Some(target), Path::new(".")).display()
        ));
    }
    if let Some(content) = &request.content {
        let label = if previous.is_some() {
            "The follow-up"
        } else {
            "The work to critique"
        };
        prompt.push_str(&format!("\n{label}:\n<content>\n{content}\n</content>\n"));
    }
    prompt
}

/// One agent of a roast.
struct Agent<'a> {
    shared: &'a Shared,
    ctx: &'a RunContext,
    steps: &'a Steps,
    finished: &'a AtomicU64,
    of: usize,
    cli: &'a str,
    model: Option<&'a str>,
}

type AgentRun = (AgentOutcome, String, Vec<findings::Finding>);

impl Agent<'_> {
    /// Runs the agent (unless its breaker is open) and says how it went;
    /// only a run that can no longer report fails.
    async fn run(&self, prompt: &str, cwd: &Path) -> Result<AgentRun, RunError> {
        let (cli, shared, ctx) = (self.cli, self.shared, self.ctx);
        let started = tokio::time::Instant::now();
        let admission = {
            let now = shared.now_ms();
            shared.with_breaker(cli, |breaker, last| (breaker.admit(now), last.clone()))
        };
        if let (Admission::Refused { retry_in_ms }, last) = admission {
            let failures = shared.breaker_snapshot(cli).consecutive_failures;
            let error = format!(
                "circuit breaker open after {failures} failures in a row{}; next try in {} s",
                last.map(|last| format!(" (last: {last})"))
                    .unwrap_or_default(),
                retry_in_ms.div_ceil(1000)
            );
            self.steps
                .step(ctx, "agents", format!("{cli} skipped: breaker open"))
                .await?;
            self.steps
                .step(ctx, "agents", format!("{cli}: no output"))
                .await?;
            return self
                .finish(
                    started,
                    Status::BreakerOpen,
                    Some(error),
                    String::new(),
                    None,
                )
                .await;
        }

        let mut options = AgentOptions::new(
            CliKind::from_name(cli).expect("checked by the arguments"),
            prompt,
        );
        options.model = self.model.map(str::to_owned);
        options.cwd = cwd.to_owned();
        options.env = shared.config.env.clone();
        options.transport = Transport::Light;
        options.timeout = Some(shared.config.agent_timeout);
        let mut session = match weir_agents::start(options).await {
            Ok(session) => session,
            Err(error) => {
                let status = match error {
                    AgentError::NotFound { .. } => Status::Missing,
                    _ => Status::Failed,
                };
                self.steps
                    .step(ctx, "agents", format!("{cli} could not start"))
                    .await?;
                self.steps
                    .step(ctx, "agents", format!("{cli}: no output"))
                    .await?;
                return self
                    .finish(
                        started,
                        status,
                        Some(error.to_string()),
                        String::new(),
                        None,
                    )
                    .await;
            }
        };
        self.steps
            .step(ctx, "agents", format!("{cli} spawned"))
            .await?;

        let mut first = true;
        while let Some(event) = session.next().await {
            match event {
                AgentEvent::TextDelta { text: delta } if !delta.is_empty() => {
                    if first {
                        first = false;
                        self.steps
                            .step(ctx, "agents", format!("{cli}: first output"))
                            .await?;
                    }
                    ctx.emit(Partial {
                        content: vec![Content::text(delta.clone())],
                        group: Some(cli.to_owned()),
                        ..Partial::default()
                    })
                    .await?;
                }
                _ => {}
            }
        }
        if first {
            self.steps
                .step(ctx, "agents", format!("{cli}: no output"))
                .await?;
        }
        let Ending {
            mut text,
            result,
            errors,
            exit,
            ..
        } = session.finish().await;
        if text.is_empty()
            && let Some(answer) = result.as_ref().and_then(|result| result.text.clone())
            && result.as_ref().is_some_and(|result| !result.is_error)
        {
            text = answer;
        }
        let timed_out = started.elapsed() >= shared.config.agent_timeout
            && exit.as_ref().is_some_and(|exit| exit.signal.is_some());
        let (status, error) = judge(result.as_ref(), &errors, exit.as_ref(), timed_out);
        self.finish(started, status, error, text, result).await
    }

    /// Records the outcome in the breaker, reports the step, extracts the
    /// findings.
    async fn finish(
        &self,
        started: tokio::time::Instant,
        status: Status,
        error: Option<String>,
        text: String,
        result: Option<AgentResult>,
    ) -> Result<AgentRun, RunError> {
        let (cli, shared) = (self.cli, self.shared);
        let now = shared.now_ms();
        match status {
            Status::Ok => shared.with_breaker(cli, |breaker, last| {
                breaker.succeeded(now);
                *last = None;
            }),
            Status::BreakerOpen => {}
            Status::Failed | Status::Missing | Status::TimedOut => {
                shared.with_breaker(cli, |breaker, last| {
                    breaker.failed(now);
                    *last = error.clone();
                })
            }
        }
        let found = findings::extract(&text);
        let k = self.finished.fetch_add(1, Ordering::SeqCst) + 1;
        let word = match status {
            Status::Ok => format!("{} findings", found.len()),
            Status::Failed => "failed".to_owned(),
            Status::Missing => "not installed".to_owned(),
            Status::TimedOut => "timed out".to_owned(),
            Status::BreakerOpen => "skipped".to_owned(),
        };
        self.steps
            .step(
                self.ctx,
                "agents",
                format!("{cli} done ({k}/{} agents): {word}", self.of),
            )
            .await?;
        let usage = result
            .as_ref()
            .and_then(|result| result.usage)
            .map_or(Value::Null, |usage| {
                json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens})
            });
        let outcome = AgentOutcome {
            cli: cli.to_owned(),
            model: self.model.map(str::to_owned),
            status,
            setup: crate::setup::advice(cli, status, error.as_deref()),
            error,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            output_bytes: text.len(),
            findings: found.len(),
            usage,
            cost_usd: result.as_ref().and_then(|result| result.cost_usd),
            session_id: result.and_then(|result| result.session_id),
            breaker: shared.breaker_snapshot(cli),
        };
        Ok((outcome, text, found))
    }
}

/// How an agent's session went, from its result, errors and exit.
fn judge(
    result: Option<&AgentResult>,
    errors: &[String],
    exit: Option<&Exit>,
    timed_out: bool,
) -> (Status, Option<String>) {
    if timed_out {
        return (
            Status::TimedOut,
            Some("ran past the agent time limit and was killed".to_owned()),
        );
    }
    let exited_ok = exit.is_some_and(|exit| exit.code == Some(0));
    match result {
        Some(result) if !result.is_error && exited_ok => (Status::Ok, None),
        Some(result) if !result.is_error && exit.is_none() => (Status::Ok, None),
        _ => {
            let mut reasons: Vec<String> = Vec::new();
            if let Some(result) = result
                && result.is_error
            {
                reasons.push(
                    result
                        .text
                        .clone()
                        .or_else(|| result.subtype.clone())
                        .unwrap_or_else(|| "the agent reported an error".to_owned()),
                );
            }
            reasons.extend(errors.iter().cloned());
            match exit {
                Some(Exit {
                    code,
                    signal,
                    stderr_tail: stderr,
                }) => {
                    let how = match (code, signal) {
                        (Some(code), _) => format!("exited with code {code}"),
                        (None, Some(signal)) => format!("killed by signal {signal}"),
                        (None, None) => "ended".to_owned(),
                    };
                    if reasons.is_empty() {
                        let stderr = stderr.trim();
                        let tail: String = stderr
                            .lines()
                            .rev()
                            .take(3)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect::<Vec<_>>()
                            .join(" | ");
                        reasons.push(if tail.is_empty() {
                            how
                        } else {
                            format!("{how}: {tail}")
                        });
                    } else if !exited_ok {
                        reasons.push(how);
                    }
                }
                None => reasons.push("the session ended without an exit".to_owned()),
            }
            reasons.dedup();
            (Status::Failed, Some(reasons.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Preset;

    #[test]
    fn judging_outcomes() {
        let ok = AgentResult {
            text: Some("fine".into()),
            ..AgentResult::default()
        };
        let exit = |code| {
            Some(Exit {
                code: Some(code),
                ..Exit::default()
            })
        };
        assert_eq!(
            judge(Some(&ok), &[], exit(0).as_ref(), false),
            (Status::Ok, None)
        );
        let api = AgentResult {
            text: Some("API Error: 500 scripted".into()),
            is_error: true,
            ..AgentResult::default()
        };
        assert_eq!(
            judge(Some(&api), &[], exit(1).as_ref(), false),
            (
                Status::Failed,
                Some("API Error: 500 scripted; exited with code 1".into())
            )
        );
        let crashed = Some(Exit {
            code: Some(41),
            signal: None,
            stderr_tail: "noise\nInvalid auth method selected.".to_owned(),
        });
        assert_eq!(
            judge(None, &[], crashed.as_ref(), false).1.as_deref(),
            Some("exited with code 41: noise | Invalid auth method selected.")
        );
        assert_eq!(judge(None, &[], None, true).0, Status::TimedOut);
    }

    #[test]
    fn the_prompt_asks_for_the_finding_format_and_carries_the_work() {
        let request = RunRequest {
            preset: Preset::Idea,
            target: None,
            content: Some("a todo app on the blockchain".into()),
            context: Some("for a seed round".into()),
            agents: vec![("claude".into(), None)],
            max_parallel: None,
            resume: None,
            limit: 10,
            refresh: false,
        };
        let text = prompt(&request, None);
        assert!(text.starts_with("You are a skeptical investor"));
        assert!(text.contains("- [SEVERITY] (category) path/to/file:line"));
        assert!(text.contains("for a seed round"));
        assert!(text.contains("<content>\na todo app on the blockchain\n</content>"));
    }
}
