//! plan_run on a real scheduler and store: steps as child runs, branches,
//! retries, time limits, templates, failure and cancellation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, EventKind, FailureCode, RunError, RunEvent, RunId, RunState};
use weir_pack_plan::PlanPack;
use weir_runtime::log::RunFilter;
use weir_runtime::{
    EventLog, MemoryLog, Pack, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo,
};

/// Returns its arguments, as text and as its structured result.
struct Echo;

#[async_trait]
impl Tool for Echo {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("echo", "echoes", json!({"type": "object"}))
    }
    async fn run(&self, _ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        Ok(Completed {
            content: vec![Content::text(args.to_string())],
            structured: Some(args),
        })
    }
}

/// Fails its first `fails` runs with the same `key`, then completes with
/// `{count: runs so far}`.
#[derive(Default)]
struct Flaky(Mutex<HashMap<String, u64>>);

#[async_trait]
impl Tool for Flaky {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("flaky", "fails, then works", json!({"type": "object"}))
    }
    async fn run(&self, _ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let key = args["key"].as_str().unwrap_or("").to_owned();
        let count = {
            let mut counts = self.0.lock().unwrap();
            let count = counts.entry(key).or_default();
            *count += 1;
            *count
        };
        if count <= args["fails"].as_u64().unwrap_or(0) {
            return Err(RunError::new(
                FailureCode::ToolError,
                format!("flaked on run {count}"),
            ));
        }
        Ok(Completed {
            structured: Some(json!({ "count": count })),
            ..Completed::default()
        })
    }
}

/// Always fails.
struct Fail;

#[async_trait]
impl Tool for Fail {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("fail", "fails", json!({"type": "object"}))
    }
    async fn run(&self, _ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
        Err(RunError::new(FailureCode::ToolError, "broken on purpose"))
    }
}

/// Like a program that exits 2: prints a line (streamed, as `stdout`),
/// then fails with its result still in hand (`RunError::with_result`).
struct Exits;

#[async_trait]
impl Tool for Exits {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("exits", "exits 2", json!({"type": "object"})).with_text_fields(&["stdout"])
    }
    async fn run(&self, ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
        let line = weir_core::Partial {
            content: vec![Content::text("make: *** no rule\n")],
            group: Some("stdout".into()),
            ..Default::default()
        };
        ctx.emit(line).await.unwrap();
        Err(
            RunError::new(FailureCode::ToolError, "the program exited with code 2").with_result(
                Completed {
                    content: vec![Content::text("[exit code 2]")],
                    structured: Some(json!({ "exit_code": 2 })),
                },
            ),
        )
    }
}

/// Never ends by itself.
struct Hang;

#[async_trait]
impl Tool for Hang {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("hang", "hangs", json!({"type": "object"}))
    }
    async fn run(&self, _ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
        std::future::pending().await
    }
}

/// Takes a secret `key` (marked in its schema) and says how long it is.
struct Secret;

#[async_trait]
impl Tool for Secret {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            "secret",
            "takes a key",
            json!({"type": "object", "properties": {"key": {"type": "string", "writeOnly": true}, "note": {"type": "string"}}}),
        )
    }
    async fn run(&self, _ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let length = args["key"].as_str().map_or(0, str::len);
        Ok(Completed {
            structured: Some(json!({ "length": length })),
            ..Completed::default()
        })
    }
}

async fn scheduler() -> (Arc<dyn EventLog>, Scheduler) {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(Secret),
        Arc::new(Echo),
        Arc::new(Flaky::default()),
        Arc::new(Fail),
        Arc::new(Exits),
        Arc::new(Hang),
    ];
    tools.extend(PlanPack::new(None).tools());
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::start(log.clone(), tools, config).await.unwrap();
    (log, scheduler)
}

async fn run_plan(scheduler: &Scheduler, plan: &str) -> (RunId, RunEvent) {
    let run = scheduler
        .submit("plan_run", json!({ "plan": plan }), RunOptions::default())
        .await
        .unwrap();
    let id = run.run_id().clone();
    (id, run.finished().await.unwrap())
}

/// The text of the plan's `steps` partials, in order.
async fn step_lines(log: &Arc<dyn EventLog>, plan: &RunId) -> Vec<String> {
    log.read(plan, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::Partial(partial) if partial.group.as_deref() == Some("steps") => {
                match &partial.content[0] {
                    Content::Text { text } => Some(text.trim_end().to_owned()),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

async fn children(log: &Arc<dyn EventLog>, plan: &RunId) -> Vec<weir_runtime::log::RunSummary> {
    let runs = log.list_runs(&RunFilter::default()).await.unwrap();
    runs.into_iter()
        .filter(|run| run.parent.as_ref() == Some(plan))
        .collect()
}

const BRANCHY: &str = r#"
name: branchy
steps:
  - id: flaky
    tool: flaky
    args: {key: k, fails: 2}
    retry: {attempts: 3, backoff_ms: 10}
  - id: use
    tool: echo
    after: [flaky]
    args: {n: "${steps.flaky.result.count}", line: "after ${steps.flaky.attempts} attempts"}
  - id: broken
    tool: fail
    after: [flaky]
  - id: recover
    tool: echo
    after: [broken]
    if: {step: broken, outcome: failed}
    args: {why: "${steps.broken.error}"}
  - id: celebrate
    tool: echo
    after: [broken]
"#;

/// Every step is a child run of the plan; the flaky step is retried until
/// it completes; its result feeds the next step's arguments; the failing
/// step's branch runs and the step that needed it to complete is skipped;
/// the plan completes with every step in its summary.
#[tokio::test]
async fn a_plan_runs_its_steps_as_children_with_a_branch_a_retry_and_templates() {
    let (log, scheduler) = scheduler().await;
    let (plan, terminal) = run_plan(&scheduler, BRANCHY).await;
    let EventKind::Completed(done) = terminal.kind else {
        panic!("{terminal:?}")
    };
    let summary = done.structured.unwrap();
    assert_eq!(summary["outcome"], "completed");
    let outcomes: Vec<(&str, &str, u64)> = summary["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            (
                step["id"].as_str().unwrap(),
                step["outcome"].as_str().unwrap(),
                step["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut sorted = outcomes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            ("broken", "failed", 1),
            ("celebrate", "skipped", 0),
            ("flaky", "completed", 3),
            ("recover", "completed", 1),
            ("use", "completed", 1),
        ]
    );
    let step = |id: &str| {
        summary["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|step| step["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(
        step("use")["result"],
        json!({"n": 3, "line": "after 3 attempts"})
    );
    assert_eq!(
        step("recover")["result"],
        json!({"why": "broken on purpose"})
    );
    assert_eq!(step("flaky")["run_ids"].as_array().unwrap().len(), 3);
    assert!(
        step("celebrate")["error"]
            .as_str()
            .unwrap()
            .starts_with("step broken failed"),
        "{}",
        step("celebrate")
    );
    let Content::Text { text } = &done.content[0] else {
        panic!()
    };
    assert!(
        text.starts_with(
            "plan \"branchy\" completed: 5 steps, 3 completed, 1 failed, 0 canceled, 1 skipped\n"
        ),
        "{text}"
    );

    // Six child runs (three attempts of flaky), each naming the plan.
    let runs = children(&log, &plan).await;
    assert_eq!(runs.len(), 6);
    assert!(runs.iter().all(|run| run.state.is_terminal()));
    // The log reports each attempt as it starts, with its run, then each end.
    let lines = step_lines(&log, &plan).await;
    let first = &step("flaky")["run_ids"][0];
    assert_eq!(
        lines[0],
        format!(
            "step flaky: attempt 1 runs flaky as run {}",
            first.as_str().unwrap()
        )
    );
    assert!(
        lines[1].starts_with("step flaky: attempt 1 failed (flaked on run 1); attempt 2 of 3 in"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("step flaky: completed after 3 attempts (run "))
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("step celebrate: skipped: step broken failed"))
    );
    // Milestones count the steps that ended, to 5 of 5.
    let progress: Vec<f64> = log
        .read(&plan, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::Progress(progress) => Some(progress.progress),
            _ => None,
        })
        .collect();
    assert_eq!(progress, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

/// A step whose tool fails with a result (a program that exited non-zero)
/// is a failed step: retried, its failure branch runs, its success branch
/// does not, and its result and output stay readable.
#[tokio::test]
async fn a_step_that_fails_with_a_result_is_retried_and_branched_on() {
    let (log, scheduler) = scheduler().await;
    let plan = r#"
steps:
  - {id: build, tool: exits, retry: {attempts: 3, backoff_ms: 1}}
  - id: report
    tool: echo
    after: [build]
    if: {path: steps.build.result.exit_code, equals: 0}
  - id: alert
    tool: echo
    after: [build]
    if: {step: build, outcome: [failed, canceled]}
    args: {code: "${steps.build.result.exit_code}", why: "${steps.build.error}", text: "${steps.build.text}"}
"#;
    let (plan, terminal) = run_plan(&scheduler, plan).await;
    let EventKind::Completed(done) = terminal.kind else {
        panic!("{terminal:?}")
    };
    let summary = done.structured.unwrap();
    let step = |id: &str| {
        summary["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|step| step["id"] == id)
            .unwrap()
            .clone()
    };
    let build = step("build");
    assert_eq!(build["outcome"], "failed", "{build}");
    assert_eq!(build["attempts"], 3, "{build}");
    assert_eq!(build["result"]["exit_code"], 2, "{build}");
    assert_eq!(build["result"]["stdout"], "make: *** no rule\n", "{build}");
    assert_eq!(step("report")["outcome"], "skipped");
    let alert = step("alert");
    assert_eq!(alert["outcome"], "completed", "{alert}");
    assert_eq!(alert["result"]["code"], 2);
    assert_eq!(alert["result"]["why"], "the program exited with code 2");
    assert_eq!(alert["result"]["text"], "make: *** no rule\n[exit code 2]");
    assert_eq!(children(&log, &plan).await.len(), 4);
}

/// A step that fails with nobody branching on it fails the plan; the
/// summary of every step comes just before the terminal event.
#[tokio::test]
async fn an_unhandled_failure_fails_the_plan_after_its_summary() {
    let (log, scheduler) = scheduler().await;
    let plan = "steps:\n  - {id: a, tool: echo}\n  - {id: b, tool: fail, after: [a], retry: {attempts: 2, backoff_ms: 1}}\n  - {id: c, tool: echo, after: [b]}\n";
    let (plan, terminal) = run_plan(&scheduler, plan).await;
    let EventKind::Failed(failed) = &terminal.kind else {
        panic!("{terminal:?}")
    };
    assert_eq!(failed.error.code, FailureCode::ToolError);
    assert_eq!(
        failed.error.message,
        "the plan failed: step b failed: broken on purpose"
    );
    let events = log.read(&plan, 0, 1000).await.unwrap();
    let EventKind::Partial(summary) = &events[events.len() - 2].kind else {
        panic!("{:?}", events[events.len() - 2])
    };
    assert_eq!(summary.group.as_deref(), Some("summary"));
    assert_eq!(summary.items[0]["outcome"], "failed");
    assert_eq!(summary.items[0]["steps"][1]["attempts"], 2);
    assert_eq!(summary.items[0]["steps"][2]["outcome"], "skipped");
}

/// A step's time limit applies to each attempt; the timed-out step is
/// retried, then its branch runs.
#[tokio::test]
async fn a_step_that_times_out_is_retried_then_handled() {
    let (log, scheduler) = scheduler().await;
    let plan = r#"
steps:
  - {id: slow, tool: hang, timeout_ms: 100, retry: {attempts: 2, backoff_ms: 10}}
  - {id: late, tool: echo, after: [slow], if: {step: slow, outcome: failed}, args: {e: "${steps.slow.error}"}}
"#;
    let (plan, terminal) = run_plan(&scheduler, plan).await;
    let EventKind::Completed(done) = terminal.kind else {
        panic!("{terminal:?}")
    };
    let steps = &done.structured.unwrap()["steps"];
    assert_eq!(steps[0]["attempts"], 2);
    assert!(
        steps[1]["result"]["e"]
            .as_str()
            .unwrap()
            .starts_with("the run exceeded its time limit of 100ms"),
        "{steps}"
    );
    let runs = children(&log, &plan).await;
    let failed = runs
        .iter()
        .filter(|run| run.state == RunState::Failed)
        .count();
    assert_eq!(failed, 2);
}

/// Cancelling a plan cancels the steps that run; none is left working, and
/// the steps not yet started never start.
#[tokio::test]
async fn cancelling_a_plan_leaves_no_step_running() {
    let (log, scheduler) = scheduler().await;
    let plan = "steps:\n  - {id: a, tool: hang}\n  - {id: b, tool: hang}\n  - {id: c, tool: echo, after: [a, b]}\n";
    let run = scheduler
        .submit("plan_run", json!({ "plan": plan }), RunOptions::default())
        .await
        .unwrap();
    let plan = run.run_id().clone();
    while children(&log, &plan).await.len() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(scheduler.cancel(&plan, "enough"));
    let terminal = run.finished().await.unwrap();
    assert!(
        matches!(terminal.kind, EventKind::Canceled(_)),
        "{terminal:?}"
    );
    let runs = children(&log, &plan).await;
    assert_eq!(runs.len(), 2, "step c started");
    for run in runs {
        assert_eq!(run.state, RunState::Canceled, "{run:?}");
        assert!(run.finished_ts.unwrap() <= terminal.ts);
    }
}

/// A plan that is not valid fails before any step runs, listing every
/// problem.
#[tokio::test]
async fn an_invalid_plan_fails_before_anything_runs() {
    let (log, scheduler) = scheduler().await;
    let plan = "steps:\n  - {id: a, tool: nope}\n  - {id: b, tool: echo, after: [c]}\n";
    let (plan, terminal) = run_plan(&scheduler, plan).await;
    let EventKind::Failed(failed) = &terminal.kind else {
        panic!("{terminal:?}")
    };
    assert_eq!(failed.error.code, FailureCode::InvalidArguments);
    assert!(
        failed.error.message.contains("calls tool \"nope\""),
        "{}",
        failed.error.message
    );
    assert!(
        failed.error.message.contains("runs after \"c\""),
        "{}",
        failed.error.message
    );
    assert!(children(&log, &plan).await.is_empty());
}

/// Everything the log holds, as text: every run's summary and events.
async fn everything(log: &Arc<dyn EventLog>) -> String {
    let mut text = String::new();
    for run in log.list_runs(&RunFilter::default()).await.unwrap() {
        text.push_str(&format!("{run:?}\n"));
        for event in log.read(&run.run_id, 0, 10_000).await.unwrap() {
            text.push_str(&serde_json::to_string(&event).unwrap());
        }
    }
    text
}

/// Issue 22, finding 8: a step's secret (a field its tool's schema marks
/// `writeOnly`) reaches the tool but is stored redacted, in the plan's
/// arguments (given as YAML or as an object, nested plans included) and
/// in the step's own run.
#[tokio::test]
async fn secrets_in_a_steps_args_are_stored_redacted_at_every_depth() {
    let (log, scheduler) = scheduler().await;
    let plan = r#"
steps:
  - {id: direct, tool: secret, args: {key: s3cret-direct, note: kept}}
  - id: nested
    tool: plan_run
    args:
      plan:
        steps:
          - {id: inner, tool: secret, args: {key: s3cret-inner, note: kept}}
"#;
    let (id, end) = run_plan(&scheduler, plan).await;
    let EventKind::Completed(done) = end.kind else {
        panic!("{end:?}")
    };
    assert_eq!(done.structured.unwrap()["steps"][0]["result"]["length"], 13);
    let stored = log.get_run(&id).await.unwrap().unwrap().arguments;
    assert_eq!(
        stored["plan"]["steps"][0]["args"],
        json!({"key": "[redacted]", "note": "kept"})
    );
    assert_eq!(
        stored["plan"]["steps"][1]["args"]["plan"]["steps"][0]["args"],
        json!({"key": "[redacted]", "note": "kept"})
    );
    let all = everything(&log).await;
    assert!(!all.contains("s3cret"), "{all}");
    assert!(all.contains("[redacted]"));
}

/// Issue 22, finding 7: plans nest at most 8 deep; the 9th plan_run is
/// refused, saying so, and every plan above it ends (none waits forever).
#[tokio::test]
async fn plans_nest_at_most_eight_deep() {
    let (log, scheduler) = scheduler().await;
    let mut plan = json!({"steps": [{"id": "leaf", "tool": "echo"}]});
    for _ in 0..12 {
        plan = json!({"steps": [{"id": "inner", "tool": "plan_run", "args": {"plan": plan}}]});
    }
    let run = scheduler
        .submit("plan_run", json!({ "plan": plan }), RunOptions::default())
        .await
        .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(20), run.finished())
        .await
        .expect("nested plans ended")
        .unwrap();
    let EventKind::Failed(failed) = end.kind else {
        panic!("{end:?}")
    };
    assert!(
        failed.error.message.contains("plans nest at most 8 deep"),
        "{}",
        failed.error.message
    );
    let plans = log
        .list_runs(&RunFilter::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|run| run.tool == "plan_run")
        .count();
    assert_eq!(plans, 9);
}
