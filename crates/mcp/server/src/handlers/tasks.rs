//! Tasks, both designs, over the same runs: 2025-11-25 (`params.task`,
//! `tasks/get|result|list|cancel`) and the 2026-07-28 extension
//! `io.modelcontextprotocol/tasks` (`tasks/get` with the outcome inlined,
//! `tasks/update`, `tasks/cancel`). A task id is a run id, so tasks survive a
//! restart exactly as runs do, and a task's partials stay readable.

use serde_json::{Value, json};
use weir_core::{RunId, RunState};
use weir_mcp_wire::jsonrpc::{RpcError, code};
use weir_mcp_wire::revision::TASKS_EXTENSION;
use weir_runtime::Principal;
use weir_runtime::log::{RunFilter, RunSummary};

use crate::errors::{internal, required_str};
use crate::follow::{FollowError, final_result, follow_asking};
use crate::protocol::{Era, Scope, meta_key};
use crate::session::{Outbound, Session};
use crate::state::ServerState;

/// How often clients should poll.
const POLL_INTERVAL_MS: u64 = 500;

/// Whether the request's client capabilities include the tasks extension.
pub(crate) fn client_accepts_tasks(scope: &Scope) -> bool {
    scope
        .client_capabilities
        .pointer(&format!(
            "/extensions/{}",
            TASKS_EXTENSION.replace('/', "~1")
        ))
        .is_some()
}

fn status(state: RunState, era: Era) -> &'static str {
    match state {
        RunState::Pending | RunState::Working => "working",
        // 2025-11-25: the task's questions come on its `tasks/result`
        // stream. The extension's `input_required` promises `inputRequests`
        // to answer with `tasks/update`, which weir does not offer: to a
        // stateless client the run is working (its question times out).
        RunState::InputRequired if era == Era::Session => "input_required",
        RunState::InputRequired => "working",
        RunState::Completed => "completed",
        // A failed run answers with a result marked isError. 2025-11-25 calls
        // that task `failed`; the extension calls it `completed` and inlines
        // the result (its `failed` is for JSON-RPC errors only).
        RunState::Failed if era == Era::Stateless => "completed",
        RunState::Failed => "failed",
        RunState::Canceled => "cancelled",
    }
}

fn retention_ms(state: &ServerState) -> Value {
    // Runs are kept for the scheduler's retention period; null = forever.
    match state.scheduler.retention() {
        Some(retention) => json!(retention.as_millis() as u64),
        None => Value::Null,
    }
}

/// The Task object (flat fields) of a run, in the era's field names.
fn task_json(state: &ServerState, run: &RunSummary, era: Era) -> Value {
    let mut task = json!({
        "taskId": run.run_id,
        "status": status(run.state, era),
        "createdAt": weir_core::iso8601(run.created_ts),
        "lastUpdatedAt": weir_core::iso8601(run.updated_ts),
    });
    match era {
        Era::Session => {
            task["ttl"] = retention_ms(state);
            task["pollInterval"] = POLL_INTERVAL_MS.into();
        }
        Era::Stateless => {
            task["ttlMs"] = retention_ms(state);
            task["pollIntervalMs"] = POLL_INTERVAL_MS.into();
        }
    }
    task
}

/// An unknown task id: not a run id, or no run of that id.
fn unknown_task(task_id: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "unknown task {task_id:?}: list runs with the runs_list tool"
    ))
}

/// The run of a task `caller` may see: another's is an unknown task too.
async fn run_summary(
    state: &ServerState,
    caller: &Principal,
    task_id: &str,
) -> Result<RunSummary, RpcError> {
    let run_id = RunId::parse(task_id).map_err(|_| unknown_task(task_id))?;
    state
        .scheduler
        .log()
        .get_run(&run_id)
        .await
        .map_err(internal)?
        .filter(|run| caller.sees(run))
        .ok_or_else(|| unknown_task(task_id))
}

/// The immediate answer to a call served as a task.
pub(crate) async fn created(
    state: &ServerState,
    caller: &Principal,
    era: Era,
    run_id: &RunId,
) -> Result<Value, RpcError> {
    let run = run_summary(state, caller, run_id.as_str()).await?;
    let task = task_json(state, &run, era);
    Ok(match era {
        Era::Session => json!({ "task": task }),
        Era::Stateless => {
            let mut result = task;
            result["resultType"] = "task".into();
            result
        }
    })
}

/// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` and
/// `tasks/update`, each as the request's era defines it.
pub(crate) async fn request(
    state: &ServerState,
    caller: &Principal,
    scope: &Scope,
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    let era = scope.era;
    if method == "tasks/list" {
        if era == Era::Stateless {
            return Err(method_gone(method));
        }
        let runs = state
            .scheduler
            .log()
            .list_runs(&caller.narrow(RunFilter {
                limit: Some(100),
                ..RunFilter::default()
            }))
            .await
            .map_err(internal)?;
        let tasks: Vec<Value> = runs.iter().map(|run| task_json(state, run, era)).collect();
        return Ok(json!({ "tasks": tasks }));
    }
    let task_id = required_str(params, "taskId")?;
    let run = run_summary(state, caller, task_id).await?;
    match (method, era) {
        ("tasks/get", Era::Session) => Ok(task_json(state, &run, era)),
        ("tasks/get", Era::Stateless) => {
            let mut task = task_json(state, &run, era);
            if run.state.is_terminal() && run.state != RunState::Canceled {
                task["result"] = final_result(state, &run.run_id).await?;
            }
            Ok(task)
        }
        ("tasks/cancel", _) => {
            if run.state.is_terminal() && era == Era::Session {
                return Err(RpcError::invalid_params(format!(
                    "task {task_id} has already ended ({}); it cannot be cancelled",
                    run.state
                )));
            }
            state
                .scheduler
                .cancel(&run.run_id, "cancelled through tasks/cancel");
            match era {
                Era::Session => {
                    // Report the state once the cancel has landed in the log.
                    let _ = final_result(state, &run.run_id).await;
                    let run = run_summary(state, caller, task_id).await?;
                    Ok(task_json(state, &run, era))
                }
                Era::Stateless => Ok(json!({})),
            }
        }
        ("tasks/update", Era::Stateless) => Ok(json!({})),
        _ => Err(method_gone(method)),
    }
}

/// `tasks/result` in a session (2025-11-25): the task's result, once its
/// run has ended. Meanwhile the questions the run waits on (its task is
/// `input_required`) go to the client on this request's stream, each
/// naming the task (`related-task`): the requestor calls `tasks/result`
/// when it sees `input_required`, and answers them.
pub(crate) async fn result(
    state: &ServerState,
    session: &Session,
    params: &Value,
    out: &Outbound,
) -> Result<Value, RpcError> {
    let task_id = required_str(params, "taskId")?;
    let run = run_summary(state, &session.caller, task_id).await?;
    let quiet = Scope {
        era: Era::Session,
        client_capabilities: json!({}),
        progress_token: None,
        partial_token: None,
        log_level: None,
        run_notices: false,
    };
    let asked = session.questions(&run.run_id);
    // Blocks until the run ends: following the log waits for it.
    let mut result = match follow_asking(state, &run.run_id, None, quiet, out, asked).await {
        Ok(result) => result,
        Err(FollowError::Rpc(error)) => return Err(error),
        Err(FollowError::ClientGone) => return Err(RpcError::internal("lost the result stream")),
    };
    result["_meta"] = json!({ meta_key::RELATED_TASK: { "taskId": run.run_id } });
    Ok(result)
}

fn method_gone(method: &str) -> RpcError {
    RpcError::new(
        code::METHOD_NOT_FOUND,
        format!("{method} does not exist in this protocol revision"),
    )
}
