//! weir's plan pack: `plan_run` runs a plan of tool calls as one run.
//!
//! **For:** chaining tools without polling (the observe–decide–act loop of
//! docs/design.md, "Tool packs"). A plan is a list of steps, each a tool
//! call — of this server, as a child run
//! ([`RunContext::call`](weir_runtime::RunContext::call)), or of another
//! MCP server through the [`RemoteCaller`] the binary plugs in — that
//! starts when the terminal events of the steps it follows (`after`) have
//! arrived. A step can branch on how an earlier one ended or on a value of
//! its result (`if`), retry within bounds with a doubling backoff
//! (`retry`), have a time limit per attempt (`timeout_ms`), and take
//! arguments from earlier results (`${steps.ID.result.path}`, see
//! [`template`]). The plan is checked whole before anything runs
//! ([`Plan::check`]: unknown steps and tools, cycles, references to steps
//! that will not have ended, malformed conditions), every problem listed.
//!
//! The plan's run reports each step as it starts (its child run's id) and
//! ends, as `partial` lines of group `steps` (with a structured item each),
//! and counts steps ended as milestones; its log's `meta` events name every
//! child run. It ends with exactly one terminal event: `completed` with a
//! summary of every step in its content and `structuredContent`
//! (`{name, outcome, steps: [StepReport…]}`), or `failed` when a step
//! failed that no other step branches on (the same summary just before it,
//! as a `partial` of group `summary`). Cancelling the plan cancels its
//! running steps; the runtime ends them before the plan.
//!
//! **Not for:** protocols. It depends on `weir-core` and `weir-runtime`
//! only: other servers are reached through [`RemoteCaller`], which the
//! binary implements over its MCP client.
//!
//! ```yaml
//! name: build and report
//! steps:
//!   - id: build
//!     tool: execute_code
//!     args: {language: sh, code: "make"}
//!     retry: {attempts: 3, backoff_ms: 500}   # 3 attempts in all: waits 0.5 s, then 1 s
//!     timeout_ms: 60000                       # each attempt
//!   - id: report
//!     tool: execute_code
//!     after: [build]
//!     if: {path: steps.build.result.exit_code, equals: 0}
//!     args: {language: sh, code: "echo built in ${steps.build.result.duration_ms} ms"}
//!   - id: alert
//!     tool: notify
//!     server: {url: "http://127.0.0.1:9000/mcp"}   # or {command: "other-server --stdio"}
//!     after: [build]
//!     if: {step: build, outcome: [failed, canceled]}
//! ```
//!
//! ```
//! use std::collections::BTreeSet;
//! use weir_pack_plan::{Plan, PlanError, Problem};
//! let plan = Plan::parse("steps:\n  - {id: a, tool: t, after: [b]}\n  - {id: b, tool: t, after: [a]}\n").unwrap();
//! let tools = BTreeSet::from(["t".to_owned()]);
//! let Err(PlanError::Invalid(problems)) = plan.check(&tools, false) else { panic!() };
//! assert_eq!(problems, [Problem::Cycle(vec!["a".into(), "b".into(), "a".into()])]);
//! ```
#![warn(missing_docs)]

mod plan;
mod run;
pub mod template;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, FailureCode, RunError};
use weir_runtime::{Pack, RemoteCaller, RunContext, Tool, ToolInfo};

pub use plan::{
    Check, Checked, Condition, Conditions, MAX_ATTEMPTS, MAX_BACKOFF_MS, OneOrMany, Outcome, Plan,
    PlanError, Problem, Retry, Server, Step, Test,
};
pub use run::StepReport;

/// The plan pack: `plan_run`.
pub struct PlanPack {
    remote: Option<Arc<dyn RemoteCaller>>,
}

impl PlanPack {
    /// The pack; steps may call other servers when `remote` is given.
    pub fn new(remote: Option<Arc<dyn RemoteCaller>>) -> PlanPack {
        PlanPack { remote }
    }
}

impl Pack for PlanPack {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(PlanRun {
            remote: self.remote.clone(),
        })]
    }
}

/// `plan_run {plan}`.
struct PlanRun {
    remote: Option<Arc<dyn RemoteCaller>>,
}

#[async_trait]
impl Tool for PlanRun {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "plan_run",
            "Runs a plan of tool calls as one run: each step starts when the steps it follows (`after`) have ended, \
             can branch on how they ended or on a value of their result (`if`), retries within bounds (`retry`), \
             has a time limit per attempt (`timeout_ms`), and takes arguments from earlier results (${steps.ID.result.path}). \
             Steps are reported as they start and end; the result summarizes every step.",
            json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": ["object", "string"],
                        "description": "The plan: {name?, steps: [{id, tool, server?: {url}|{command}, args?, after?: [ID], if?: {step, outcome}|{path, equals|not_equals|exists} or a list, retry?: {attempts, backoff_ms?}, timeout_ms?}]}, as an object or as YAML text."
                    }
                },
                "required": ["plan"]
            }),
        );
        info.output_schema = Some(json!({
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"]},
                "outcome": {"type": "string", "enum": ["completed", "failed"]},
                "steps": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "tool": {"type": "string"},
                        "server": {"type": "string"},
                        "outcome": {"type": "string", "enum": ["completed", "failed", "canceled", "skipped"]},
                        "attempts": {"type": "integer"},
                        "run_ids": {"type": "array", "items": {"type": "string"}},
                        "result": {},
                        "text": {"type": "string"},
                        "error": {"type": "string"},
                        "duration_ms": {"type": "integer"}
                    },
                    "required": ["id", "tool", "outcome", "attempts", "duration_ms"]
                }}
            },
            "required": ["name", "outcome", "steps"]
        }));
        info.streams = true;
        info
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let tools: BTreeSet<String> = ctx
            .callable_tools()
            .into_iter()
            .map(|tool| tool.name)
            .collect();
        let checked = Plan::from_value(arguments["plan"].clone())
            .and_then(|plan| plan.check(&tools, self.remote.is_some()))
            .map_err(|error| {
                RunError::new(FailureCode::InvalidArguments, error.to_string())
                    .with_remediation("fix the plan and run it again; nothing of it ran")
            })?;
        run::run(&ctx, self.remote.as_ref(), checked).await
    }
}
