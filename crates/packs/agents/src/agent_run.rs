//! `agent_run`: one coding agent on one prompt, its normalized events
//! streamed as partials.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_agents::{AgentEvent, AgentOptions, CliKind, Decision, Ending, ToolPermission, Transport};
use weir_core::{Completed, Content, FailureCode, Meta, Milestone, Partial, RunError};
use weir_runtime::kit::invalid;
use weir_runtime::{Hints, RunContext, Tool, ToolInfo};

use crate::Shared;
use crate::args::{self, AgentRunArgs};
use crate::weir_tools;

/// `agent_run`.
pub(crate) struct AgentRun(pub(crate) Arc<Shared>);

/// Offers `tools` of this server to the agent as the in-process MCP
/// server `weir` (control mode). The agent may call them without asking;
/// any other tool that needs permission is refused, as in light mode,
/// where the CLI refuses it itself.
fn offer_weir_tools(
    shared: &Shared,
    ctx: &RunContext,
    options: &mut AgentOptions,
    tools: Vec<String>,
) -> Result<(), RunError> {
    let callable = ctx.callable_tools();
    if let Some(unknown) = tools
        .iter()
        .find(|name| !callable.iter().any(|tool| &tool.name == *name))
    {
        let names: Vec<&str> = callable.iter().map(|tool| tool.name.as_str()).collect();
        return Err(invalid(format!(
            "weir_tools: this server has no tool {unknown:?}; it has: {}",
            names.join(", ")
        )));
    }
    let tools = callable
        .into_iter()
        .filter(|tool| tools.contains(&tool.name))
        .collect();
    let server = shared
        .in_process
        .as_deref()
        .and_then(|server| weir_tools::offer(server, ctx, tools))
        .ok_or_else(|| {
            RunError::new(
                FailureCode::ToolError,
                "weir_tools: this weir has no server to offer its tools in process; call agent_run without weir_tools",
            )
        })?;
    let prefix = format!("mcp__{}__", weir_tools::SERVER);
    options.transport = Transport::Auto;
    options.permission = Some(Arc::new(move |asked: &ToolPermission| {
        if asked.tool_name.starts_with(&prefix) {
            Decision::Allow {
                updated_input: None,
            }
        } else {
            Decision::Deny {
                message: format!(
                    "agent_run allows only the weir tools it offered ({prefix}*), not {}",
                    asked.tool_name
                ),
            }
        }
    }));
    options.mcp_servers = vec![server];
    Ok(())
}

#[async_trait]
impl Tool for AgentRun {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "agent_run",
            "Runs one coding-agent CLI (claude, codex or gemini) on a prompt and streams what it does as partial results: text as it is typed (group \"text\"), and each other normalized event — session start, tool use and result, permission request, message, result, error — as a structured item (group \"events\"). With weir_tools (claude only), the agent may call those tools of this server as mcp__weir__TOOL, each call a child run of this run; its other tools that need permission are refused. The agent works in cwd, a directory inside the server's roots (else the first root). The result is the agent's last message with its usage, cost and session id; a failed agent fails the call, saying why.",
            args::agent_run_schema(),
        );
        info.output_schema = Some(weir_core::output_contract(&json!({
            "type": "object",
            "properties": {
                "cli": {"type": "string"},
                "model": {"type": ["string", "null"]},
                "text": {"type": "string", "description": "The last message (else all the text streamed)."},
                "is_error": {"type": "boolean"},
                "subtype": {"type": ["string", "null"]},
                "usage": {"type": ["object", "null"], "properties": {"input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}}},
                "cost_usd": {"type": ["number", "null"]},
                "duration_ms": {"type": ["integer", "null"]},
                "session_id": {"type": ["string", "null"]},
                "exit_code": {"type": ["integer", "null"]}
            },
            "required": ["cli", "text", "is_error"]
        })));
        info.streams = true;
        info.timeout = Some(self.0.config.agent_timeout + Duration::from_secs(30));
        // The agent talks to its model's service (open world) and is there
        // to change files.
        info.with_hints(Hints {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        })
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let shared = &self.0;
        let call = AgentRunArgs::parse(arguments, &shared.roots)?;
        let model = call
            .model
            .clone()
            .or_else(|| shared.config.models.get(&call.cli).cloned());
        let mut options = AgentOptions::new(
            CliKind::from_name(&call.cli).expect("checked by the arguments"),
            call.prompt,
        );
        options.model = model.clone();
        // Inside a root (checked by the arguments), else the default one.
        options.cwd = call
            .work_dir
            .clone()
            .unwrap_or_else(|| shared.work_dir.clone());
        let what = if call.work_dir.is_some() {
            "cwd"
        } else {
            crate::DEFAULT_DIR
        };
        shared.check_work_dir(what, &options.cwd)?;
        options.env = shared.config.env.clone();
        options.transport = Transport::Light;
        options.timeout = Some(shared.config.agent_timeout);
        if !call.weir_tools.is_empty() {
            offer_weir_tools(shared, &ctx, &mut options, call.weir_tools.clone())?;
        }
        ctx.emit(Meta {
            backends: vec![call.cli.clone()],
            info: json!({"cli": call.cli, "model": model, "cwd": options.cwd}),
            ..Meta::default()
        })
        .await?;
        // A missing CLI's error names where it was looked for and how to
        // install it.
        let mut session = weir_agents::start(options)
            .await
            .map_err(|error| RunError::new(FailureCode::ToolError, error.to_string()))?;
        ctx.milestone(Milestone::new("running").message(format!("{} spawned", call.cli)))
            .await?;

        while let Some(event) = session.next().await {
            let partial = match &event {
                AgentEvent::TextDelta { text } => Partial {
                    content: vec![Content::text(text.clone())],
                    group: Some("text".into()),
                    ..Partial::default()
                },
                other => Partial {
                    items: vec![serde_json::to_value(other).unwrap_or(Value::Null)],
                    group: Some("events".into()),
                    ..Partial::default()
                },
            };
            ctx.emit(partial).await?;
        }
        completed(&call.cli, model, session.finish().await)
    }
}

/// The call's result from how the agent's session ended: its last
/// message (else all its text) with usage, cost and session id; an
/// error result, a non-zero exit or no result fails the run, saying why.
fn completed(cli: &str, model: Option<String>, ending: Ending) -> Result<Completed, RunError> {
    let Ending {
        text: streamed,
        last_message,
        result,
        errors,
        exit,
    } = ending;
    let exit_code = exit.as_ref().and_then(|exit| exit.code);
    let stderr = exit.map(|exit| exit.stderr_tail).unwrap_or_default();
    let is_error = result.as_ref().is_none_or(|result| result.is_error)
        || exit_code.is_some_and(|code| code != 0);
    let text = result
        .as_ref()
        .and_then(|result| result.text.clone())
        .or(last_message)
        .unwrap_or(streamed);
    if is_error {
        let mut reasons: Vec<String> = Vec::new();
        if !text.is_empty() && result.as_ref().is_some_and(|result| result.is_error) {
            reasons.push(text.clone());
        }
        reasons.extend(errors);
        if let Some(code) = exit_code.filter(|code| *code != 0) {
            reasons.push(format!("exited with code {code}"));
        }
        if reasons.is_empty() {
            let tail = stderr.trim();
            reasons.push(if tail.is_empty() {
                "the agent ended without a result".to_owned()
            } else {
                format!("the agent ended without a result: {tail}")
            });
        }
        return Err(RunError::new(
            FailureCode::ToolError,
            format!("{} failed: {}", cli, reasons.join("; ")),
        ));
    }
    let result = result.unwrap_or_default();
    let usage = result.usage.map(
        |usage| json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}),
    );
    let summary = format!(
        "[{}{}: {} input / {} output tokens{}{}]",
        cli,
        model
            .as_deref()
            .map(|model| format!(" ({model})"))
            .unwrap_or_default(),
        result.usage.map_or(0, |usage| usage.input_tokens),
        result.usage.map_or(0, |usage| usage.output_tokens),
        result
            .cost_usd
            .map(|cost| format!(", ${cost:.4}"))
            .unwrap_or_default(),
        result
            .session_id
            .as_deref()
            .map(|id| format!(", session {id}"))
            .unwrap_or_default(),
    );
    Ok(Completed {
        content: vec![Content::text(summary)],
        structured: Some(json!({
            "cli": cli,
            "model": model,
            "text": text,
            "is_error": false,
            "subtype": result.subtype,
            "usage": usage,
            "cost_usd": result.cost_usd,
            "duration_ms": result.duration_ms,
            "session_id": result.session_id,
            "exit_code": exit_code,
        })),
    })
}
