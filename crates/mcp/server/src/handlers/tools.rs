//! `tools/list` and `tools/call`: a call becomes a run; its log becomes the
//! call's notifications and its final result.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_mcp_wire::jsonrpc::RpcError;
use weir_runtime::Principal;
use weir_runtime::{CallError, RunContext, RunOptions, SubmitError, ToolInfo};

use crate::errors::{internal, required_str};
use crate::follow::{FollowError, follow, relay_questions};
use crate::handlers::{builtin, tasks};
use crate::protocol::{Era, Scope};
use crate::session::{Outbound, Session};
use crate::state::ServerState;

/// A tool as `tools/list` shows it; `streamingHint` is how a client learns
/// that a tool streams (SEP-2998 draft annotation), added to the tool's own
/// annotations.
fn tool_json(info: &ToolInfo) -> Value {
    let mut tool = json!({
        "name": info.name,
        "description": info.description,
        "inputSchema": info.input_schema,
        "execution": { "taskSupport": "optional" },
    });
    if let Some(title) = &info.title {
        tool["title"] = title.clone().into();
    }
    if let Some(output) = &info.output_schema {
        tool["outputSchema"] = output.clone();
    }
    let mut annotations = match &info.annotations {
        Some(Value::Object(given)) => given.clone(),
        _ => serde_json::Map::new(),
    };
    if info.streams {
        annotations.insert("streamingHint".into(), true.into());
    }
    if !annotations.is_empty() {
        tool["annotations"] = Value::Object(annotations);
    }
    tool
}

/// `tools/list`: the scheduler's tools, then weir's own; of them, only the
/// ones `caller` may call.
pub(crate) fn list(state: &ServerState, caller: &Principal) -> Value {
    let mut tools: Vec<Value> = state
        .scheduler
        .tools()
        .filter(|info| caller.may_call(&info.name))
        .map(|info| tool_json(&info))
        .collect();
    tools.extend(
        builtin::TOOLS
            .iter()
            .filter(|tool| {
                tool["name"].as_str().is_some_and(|name| {
                    caller.may_call(name) && !state.config.hidden_tools.contains(name)
                })
            })
            .cloned(),
    );
    json!({ "tools": tools })
}

/// The names of weir's own tools (the `runs` pack of a tokens file's
/// `packs=`).
pub fn builtin_tool_names() -> Vec<String> {
    builtin::TOOLS
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

/// The refusal of a call of a tool `caller` may not call: the very error a
/// tool that does not exist gets, naming only the tools it may call, so a
/// caller learns nothing of the tools outside its scope.
fn not_callable(state: &ServerState, caller: &Principal, name: &str) -> RpcError {
    let available = state
        .scheduler
        .tools()
        .map(|info| info.name.clone())
        .filter(|tool| caller.may_call(tool))
        .collect::<Vec<_>>()
        .join(", ");
    let unknown = SubmitError::UnknownTool {
        name: name.to_owned(),
        available,
    };
    RpcError::invalid_params(unknown.to_string())
}

/// The answer to a call deferred by `defer_after`: the run is still
/// working, and how to get its outcome.
async fn deferred(state: &ServerState, run_id: &weir_core::RunId) -> Result<Value, RpcError> {
    let run = state
        .scheduler
        .log()
        .get_run(run_id)
        .await
        .map_err(internal)?;
    let run_state = run.map_or(weir_core::RunState::Working, |run| run.state);
    if run_state.is_terminal() {
        // It ended as the time ran out: its result is here.
        return crate::follow::final_result(state, run_id).await;
    }
    Ok(builtin::still_working(run_id, run_state))
}

/// A call's `arguments`: an object, `{}` when absent.
fn arguments_of(params: &Value) -> Result<Value, RpcError> {
    match params.get("arguments") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(object @ Value::Object(_)) => Ok(object.clone()),
        Some(_) => Err(RpcError::invalid_params("\"arguments\" must be an object")),
    }
}

/// The answer to a call the scheduler refused to start.
fn refused(error: SubmitError) -> Result<Value, RpcError> {
    match error {
        // A model can correct its arguments: report them as a tool error.
        SubmitError::InvalidArguments { message, .. } => Ok(json!({
            "content": [{ "type": "text", "text": format!("invalid arguments: {message}") }],
            "isError": true,
        })),
        error @ SubmitError::UnknownTool { .. } => Err(RpcError::invalid_params(error.to_string())),
        error @ SubmitError::Busy { retry_after, .. } => Err(RpcError::internal(error.to_string())
            .with_data(json!({ "retryAfterMs": retry_after.as_millis() as u64 }))),
        error => Err(internal(error)),
    }
}

/// `tools/list` of an in-process server offering `offered` (a run's
/// client's: [`crate::transport::in_process`]): those tools, each as
/// [`list`] shows it.
pub(crate) fn list_offered(offered: &[ToolInfo]) -> Value {
    let tools: Vec<Value> = offered.iter().map(tool_json).collect();
    json!({ "tools": tools })
}

/// `tools/call` of an in-process server offering `offered` to a client
/// of `ctx`'s run: the tool as a child run of that run
/// ([`RunContext::call`], so the run's scope holds), its result the one
/// [`call`] gives, read from its log.
pub(crate) async fn call_offered(
    state: &ServerState,
    ctx: &RunContext,
    offered: &[ToolInfo],
    params: &Value,
) -> Result<Value, RpcError> {
    let name = required_str(params, "name")?;
    let arguments = arguments_of(params)?;
    if !offered.iter().any(|tool| tool.name == name) {
        let available: Vec<&str> = offered.iter().map(|tool| tool.name.as_str()).collect();
        return refused(SubmitError::UnknownTool {
            name: name.to_owned(),
            available: available.join(", "),
        });
    }
    let child = match ctx.call(name, arguments, None).await {
        Ok(child) => child,
        Err(CallError::Submit(error)) => return refused(error),
        Err(error) => return Err(internal(error)),
    };
    // Held until the result is read: the child is the agent's run's.
    let result = crate::follow::final_result(state, child.run_id()).await;
    drop(child);
    result
}

/// `tools/call`. Returns `None` when the client cancelled the call (no
/// response is owed then).
pub(crate) async fn call(
    state: &ServerState,
    session: &Arc<Session>,
    scope: &Scope,
    request_id: &Value,
    params: Value,
    out: &Outbound,
) -> Result<Option<Value>, RpcError> {
    let name = required_str(&params, "name")?.to_owned();
    let arguments = arguments_of(&params)?;
    if !session.caller.may_call(&name) || state.config.hidden_tools.contains(&name) {
        return Err(not_callable(state, &session.caller, &name));
    }
    if let Some(result) = builtin::call(state, &session.caller, &name, &arguments).await {
        return result.map(Some);
    }
    let legacy_task = scope.era == Era::Session && params.get("task").is_some();
    let stateless_task = scope.era == Era::Stateless
        && tasks::client_accepts_tasks(scope)
        && scope.progress_token.is_none()
        && scope.partial_token.is_none();
    // Questions the tool asks (sampling, elicitation) go to this client on
    // this call's stream (a task's: on its tasks/result stream); a
    // stateless call has no one to ask.
    let (questions, asked) = mpsc::channel(8);
    let answering = scope.era == Era::Session;
    // A call followed on its own stream (not a task) can be resumed on
    // any node: the run keeps which session and request it belongs to.
    let streamed = !legacy_task && !stateless_task;
    let options = RunOptions {
        input_requests: answering.then_some(questions),
        owner: session.caller.owner(),
        client: session.client(scope.era, &params),
        allowed_tools: session.caller.allowed_tools(),
        resume_record: streamed
            .then(|| session.stream_record(request_id, scope))
            .flatten(),
        ..RunOptions::default()
    };
    let submitted = state.scheduler.submit(&name, arguments, options).await;
    let handle = match submitted {
        Ok(handle) => handle,
        Err(error) => return refused(error).map(Some),
    };
    let run_id = handle.run_id().clone();
    if legacy_task || stateless_task {
        if legacy_task {
            let capabilities = &scope.client_capabilities;
            relay_questions(session, &run_id, asked, capabilities, Some(&run_id));
        }
        return tasks::created(state, &session.caller, scope.era, &run_id)
            .await
            .map(Some);
    }
    session.track_call(request_id, &run_id, scope);
    let questions = answering.then(|| (asked, session.clone()));
    let following = follow(state, &run_id, None, scope.clone(), out, questions);
    let followed = match state.config.defer_after {
        None => following.await,
        Some(after) => match tokio::time::timeout(after, following).await {
            Ok(followed) => followed,
            Err(_) => {
                // The call is answered; the run goes on, and is no longer
                // this request's to cancel.
                session.finish_call(request_id);
                return deferred(state, &run_id).await.map(Some);
            }
        },
    };
    let cancelled_by_client = session.finish_call(request_id);
    match followed {
        Ok(_) if cancelled_by_client => Ok(None),
        Ok(result) => Ok(Some(result)),
        Err(FollowError::ClientGone) => {
            if scope.era == Era::Stateless {
                // 2026-07-28: closing the response stream cancels the request.
                state
                    .scheduler
                    .cancel(&run_id, "the client closed the response stream");
            }
            Ok(None)
        }
        Err(FollowError::Rpc(error)) => Err(error),
    }
}
