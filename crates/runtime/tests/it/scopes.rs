//! A caller held to some tools (`RunOptions::allowed_tools`) reaches no
//! more through a tool that calls tools: every child run, at any depth,
//! has its root's set, and a tool outside it is refused exactly as an
//! unknown one (issue 22, scopes per token).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, EventKind, FailureCode, RunError};
use weir_runtime::{
    CallError, EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig,
    SubmitError, Tool, ToolInfo,
};

/// Calls the tool `args.next` with `args.then` as its arguments (nothing
/// when absent) and answers with what it may call and how its child ended.
struct Relay;

#[async_trait]
impl Tool for Relay {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("relay", "Calls another tool.", json!({"type": "object"}))
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let callable: Vec<String> = ctx.callable_tools().into_iter().map(|t| t.name).collect();
        let mut answer = json!({"callable": callable});
        if let Some(next) = args["next"].as_str() {
            let then = args.get("then").cloned().unwrap_or_else(|| json!({}));
            answer["child"] = match ctx.call(next, then, None).await {
                Ok(child) => match child.finished().await {
                    Ok(event) => match event.kind {
                        EventKind::Completed(done) => done.structured.unwrap_or(json!("done")),
                        other => json!(other.type_name()),
                    },
                    Err(error) => json!(error.to_string()),
                },
                Err(CallError::Submit(refused @ SubmitError::UnknownTool { .. })) => {
                    json!({"refused": refused.to_string()})
                }
                Err(error) => return Err(RunError::new(FailureCode::ToolError, error.to_string())),
            };
        }
        Ok(Completed {
            content: vec![Content::text("relayed")],
            structured: Some(answer),
        })
    }
}

/// What a scoped caller must not reach.
struct Guarded;

#[async_trait]
impl Tool for Guarded {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("guarded", "Must not run.", json!({"type": "object"}))
    }

    async fn run(&self, _ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
        Ok(Completed {
            content: vec![Content::text("ran")],
            structured: Some(json!("guarded ran")),
        })
    }
}

async fn scheduler() -> (Scheduler, Arc<dyn EventLog>) {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Relay), Arc::new(Guarded)];
    let scheduler = Scheduler::start(log.clone(), tools, SchedulerConfig::default())
        .await
        .unwrap();
    (scheduler, log)
}

fn only(tools: &[&str]) -> Option<Arc<BTreeSet<String>>> {
    Some(Arc::new(tools.iter().map(|t| (*t).to_owned()).collect()))
}

async fn relay(
    scheduler: &Scheduler,
    args: Value,
    allowed: Option<Arc<BTreeSet<String>>>,
) -> Value {
    let options = RunOptions {
        allowed_tools: allowed,
        ..RunOptions::default()
    };
    let run = scheduler.submit("relay", args, options).await.unwrap();
    let EventKind::Completed(done) = run.finished().await.unwrap().kind else {
        panic!("relay did not complete");
    };
    done.structured.unwrap()
}

#[tokio::test]
async fn a_scoped_callers_children_and_grandchildren_reach_only_its_tools() {
    let (scheduler, log) = scheduler().await;
    // Directly: refused as an unknown tool, naming only what it may call.
    let options = RunOptions {
        allowed_tools: only(&["relay"]),
        ..RunOptions::default()
    };
    let refused = scheduler
        .submit("guarded", json!({}), options)
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "unknown tool \"guarded\"; available tools: relay"
    );
    // Through a child, and through a grandchild.
    let child = relay(&scheduler, json!({"next": "guarded"}), only(&["relay"])).await;
    assert_eq!(
        child,
        json!({"callable": ["relay"], "child": {"refused": "unknown tool \"guarded\"; available tools: relay"}})
    );
    let deeper = json!({"next": "relay", "then": {"next": "guarded"}});
    let grandchild = relay(&scheduler, deeper.clone(), only(&["relay"])).await;
    assert_eq!(
        grandchild["child"]["child"],
        json!({"refused": "unknown tool \"guarded\"; available tools: relay"})
    );
    assert_eq!(grandchild["child"]["callable"], json!(["relay"]));
    let runs = log.list_runs(&Default::default()).await.unwrap();
    assert!(runs.iter().all(|run| run.tool == "relay"), "{runs:?}");
    // A caller allowed both, or unscoped, reaches it.
    let allowed = relay(&scheduler, deeper.clone(), only(&["relay", "guarded"])).await;
    assert_eq!(allowed["child"]["child"], json!("guarded ran"));
    let unscoped = relay(&scheduler, deeper, None).await;
    assert_eq!(unscoped["child"]["child"], json!("guarded ran"));
    assert_eq!(unscoped["callable"], json!(["guarded", "relay"]));
}
