//! weir's plan pack: `plan_run` runs a plan of tool calls as one run.
//!
//! **For:** chaining tools without polling (the observe–decide–act loop of
//! docs/design.md, "Tool packs"). A plan is a list of steps, each a tool
//! call — of this server, as a child run
//! ([`RunContext::call`](weir_runtime::RunContext::call)), or of an
//! upstream MCP server the operator declared by name, through the
//! [`RemoteCaller`] the binary plugs in — that
//! starts when the terminal events of the steps it follows (`after`) have
//! arrived. A step can branch on how an earlier one ended or on a value of
//! its result (`if`), retry within bounds with a doubling backoff
//! (`retry`), have a time limit per attempt (`timeout_ms`), and take
//! arguments from earlier results (`${steps.ID.result.path}`, see
//! [`template`]). The plan is checked whole before anything runs
//! ([`Plan::check`]: unknown steps and tools, cycles, references to steps
//! that will not have ended, malformed conditions, servers the operator
//! did not declare), every problem listed.
//!
//! **Bounds.** A plan names no address and no command: `server: NAME` is
//! an upstream the operator declared (`weir serve --upstream NAME=URL`),
//! with its own credential; weir's is never sent. A plan is at most
//! [`MAX_PLAN_BYTES`] (refused unparsed) and [`MAX_STEPS`] steps, and plans
//! nest at most [`MAX_DEPTH`] deep. Secrets in a step's `args` are stored
//! redacted by the schema of the step's tool ([`Tool::redact`]); a step on
//! an upstream, whose schema weir does not know, has every argument value
//! stored redacted.
//!
//! A step *fails* when its run fails, and a run that failed with a result
//! (`RunError::with_result`: `execute_code` when the program exits
//! non-zero, is killed by a signal or times out) keeps it: such a step is
//! retried, branched on as `failed`, and its `result` and `text` stay
//! readable (`${steps.build.result.exit_code}`).
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
//!     server: chat        # declared by the operator: weir serve --upstream chat=http://127.0.0.1:9000/mcp
//!     after: [build]
//!     if: {step: build, outcome: [failed, canceled]}
//!     args: {text: "build failed after ${steps.build.attempts} attempts: ${steps.build.error}"}
//! ```
//!
//! ```
//! use std::collections::BTreeSet;
//! use weir_pack_plan::{Plan, PlanError, Problem};
//! let plan = Plan::parse("steps:\n  - {id: a, tool: t, after: [b]}\n  - {id: b, tool: t, after: [a]}\n").unwrap();
//! let tools = BTreeSet::from(["t".to_owned()]);
//! let servers = BTreeSet::new();
//! let Err(PlanError::Invalid(problems)) = plan.check(&tools, &servers) else { panic!() };
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
use weir_runtime::{Hints, Pack, Redactor, RemoteCaller, RunContext, Tool, ToolInfo};

pub use plan::{
    Check, Checked, Condition, Conditions, MAX_ATTEMPTS, MAX_BACKOFF_MS, MAX_DEPTH, MAX_PLAN_BYTES,
    MAX_STEPS, OneOrMany, Outcome, Plan, PlanError, Problem, Retry, Step, Test,
};
pub use run::StepReport;

/// The plan pack: `plan_run`.
pub struct PlanPack {
    remote: Option<Arc<dyn RemoteCaller>>,
}

impl PlanPack {
    /// The pack; steps may call the upstream servers `remote` names, when
    /// it is given.
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
            "Runs a plan of tool calls as one run. A step calls a tool here or on a declared upstream (`server`), \
             after other steps (`after`), if they ended a way or their result holds a value (`if`), with retries \
             and a time limit, taking arguments from earlier results (${steps.ID.result.path}). The result summarizes every step.",
            json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": ["object", "string"],
                        "description": "{name?, steps: [{id, tool, server?, args?, after?: [ID], if?: {step, outcome}|{path, equals|not_equals|exists} or a list, retry?: {attempts, backoff_ms?}, timeout_ms?}]}, as an object or YAML text.",
                        "maxLength": MAX_PLAN_BYTES,
                        "properties": {
                            "steps": {"type": "array", "maxItems": MAX_STEPS}
                        }
                    }
                },
                "required": ["plan"]
            }),
        );
        info.output_schema = Some(weir_core::output_contract(&json!({
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
        })));
        info.streams = true;
        // Its steps may call any tool, here or upstream: it can do what
        // the most powerful of them does.
        info.with_hints(Hints {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        })
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let above = ctx.ancestors().iter().filter(|tool| *tool == NAME).count();
        if above >= MAX_DEPTH {
            return Err(RunError::new(
                FailureCode::InvalidArguments,
                format!(
                    "plans nest at most {MAX_DEPTH} deep; this plan_run has {above} plan_runs above it, so it does not start"
                ),
            )
            .with_remediation("run the inner plan's steps in an outer plan instead of nesting it"));
        }
        let tools: BTreeSet<String> = ctx
            .callable_tools()
            .into_iter()
            .map(|tool| tool.name)
            .collect();
        // The upstreams the caller was granted: another is refused as if
        // it were not declared, as a tool outside the scope is.
        let servers: BTreeSet<String> = self
            .remote
            .as_ref()
            .map(|remote| remote.servers())
            .unwrap_or_default()
            .into_iter()
            .filter(|server| ctx.may_reach_upstream(server))
            .collect();
        let checked = read_arguments(&arguments)?
            .check(&tools, &servers)
            .map_err(refused)?;
        run::run(&ctx, self.remote.as_ref(), checked).await
    }

    /// The plan as it may be stored: each step's `args` redacted by the
    /// rules of its tool (`tools`; a nested plan by these), every value
    /// of a step on an upstream server (whose schema is not known here);
    /// a plan given as YAML text is stored as the object it reads as. A
    /// plan that cannot be read, or is over the limits, is not stored at
    /// all: its run fails saying why.
    fn redact(&self, _info: &ToolInfo, arguments: &Value, tools: &dyn Redactor) -> Value {
        let mut stored = arguments.clone();
        stored["plan"] = redact_plan(&arguments["plan"], tools, 1);
        stored
    }
}

/// The tool's name.
const NAME: &str = "plan_run";

/// `plan_run`'s parser: the plan its arguments hold, read (checked
/// against this node's tools when it runs).
fn read_arguments(arguments: &Value) -> Result<Plan, RunError> {
    weir_runtime::kit::object_args(arguments)?;
    Plan::read(&arguments["plan"]).map_err(refused)
}

/// A plan that cannot run, refused before any of its steps.
fn refused(error: PlanError) -> RunError {
    weir_runtime::kit::invalid(error.to_string())
        .with_remediation("fix the plan and run it again; nothing of it ran")
}

/// A plan with its secrets redacted (see `PlanRun::redact`); `depth` is
/// how deep it is nested in the plan being stored.
fn redact_plan(plan: &Value, tools: &dyn Redactor, depth: usize) -> Value {
    let read = match Plan::read(plan) {
        // Past the depth limit the plan never runs: nothing of it is kept.
        Ok(_) if depth > MAX_DEPTH => Err("it nests too deep to run".to_owned()),
        Ok(read) if read.steps.len() > MAX_STEPS => Err("it has too many steps".to_owned()),
        Ok(read) => Ok(read),
        Err(PlanError::TooLarge) => Err("it is over the size limit".to_owned()),
        Err(_) => Err("it cannot be read".to_owned()),
    };
    let mut read = match read {
        Ok(read) => read,
        Err(why) => return Value::String(format!("[not stored: {why}]")),
    };
    for step in &mut read.steps {
        step.args = match (&step.server, step.tool.as_str()) {
            (Some(_), _) => {
                let mut args = step.args.clone();
                weir_runtime::redact_value(&mut args);
                args
            }
            (None, NAME) => {
                let mut args = step.args.clone();
                if let Some(inner) = step.args.get("plan") {
                    args["plan"] = redact_plan(inner, tools, depth + 1);
                }
                args
            }
            (None, tool) => tools.redact(tool, &step.args),
        };
    }
    serde_json::to_value(read).unwrap_or_else(|_| Value::String("[not stored]".into()))
}

#[cfg(test)]
mod tests {
    use weir_runtime::tool_contract::{ToolCheck, check_pack};

    use super::*;

    /// The tool's schema and parser agree (the check every pack runs), for
    /// a plan as an object and as YAML text.
    #[test]
    fn every_tool_s_schema_and_parser_agree() {
        let tool = PlanRun { remote: None };
        let parse = |arguments: Value| read_arguments(&arguments).map(drop);
        check_pack(
            &PlanPack::new(None),
            vec![
                ToolCheck::new(tool.info(), parse)
                    .sample("plan", json!({"steps": [{"id": "a", "tool": "echo"}]})),
                ToolCheck::new(tool.info(), parse)
                    .sample("plan", json!("steps: [{id: a, tool: echo}]")),
            ],
        );
    }
}
