//! `tools/list` and `tools/call`: a call becomes a run; its log becomes the
//! call's notifications and its final result.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{RunId, Seq};
use weir_runtime::{AskError, InputKind, InputRequest, RunOptions, SubmitError, ToolInfo};

use crate::projection::{Projector, ResultBuilder};
use crate::protocol::{Era, Scope, meta_key};
use crate::server::{EventId, McpServer, Outbound, Outgoing, Session, internal, meta_with};
use weir_mcp_wire::jsonrpc::{RpcError, code};

/// How a client learns that a tool streams (SEP-2998 draft annotation).
fn tool_json(info: &ToolInfo) -> Value {
    let mut tool = json!({
        "name": info.name,
        "description": info.description,
        "inputSchema": info.input_schema,
        "execution": { "taskSupport": "optional" },
    });
    if let Some(output) = &info.output_schema {
        tool["outputSchema"] = output.clone();
    }
    if info.streams {
        tool["annotations"] = json!({ "streamingHint": true });
    }
    tool
}

impl McpServer {
    pub(crate) fn tool_list(&self) -> Vec<Value> {
        let mut tools: Vec<Value> = self.inner.scheduler.tools().map(tool_json).collect();
        tools.extend(crate::runs_tools::run_tool_list());
        tools
    }

    /// `tools/call`. Returns `None` when the client cancelled the call (no
    /// response is owed then).
    pub(crate) async fn call_tool(
        &self,
        session: &Arc<Session>,
        scope: &Scope,
        request_id: &Value,
        params: Value,
        out: &Outbound,
    ) -> Result<Option<Value>, RpcError> {
        let name = crate::server::required_str(&params, "name")?.to_owned();
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(object @ Value::Object(_)) => object.clone(),
            Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be an object")),
        };
        if let Some(result) = crate::runs_tools::call(self, &name, &arguments).await {
            return result.map(Some);
        }
        let legacy_task = scope.era == Era::Session && params.get("task").is_some();
        let stateless_task = scope.era == Era::Stateless
            && crate::tasks::client_accepts_tasks(scope)
            && scope.progress_token.is_none()
            && scope.partial_token.is_none();
        // Questions the tool asks (sampling, elicitation) go to this client on
        // this call's stream; a task or a stateless call has no one to ask.
        let (questions, asked) = mpsc::channel(8);
        let answering = scope.era == Era::Session && !legacy_task;
        let options = RunOptions {
            input_requests: answering.then_some(questions),
            ..RunOptions::default()
        };
        let submitted = self.inner.scheduler.submit(&name, arguments, options).await;
        let handle = match submitted {
            Ok(handle) => handle,
            // A model can correct its arguments: report them as a tool error.
            Err(SubmitError::InvalidArguments { message, .. }) => {
                return Ok(Some(json!({
                    "content": [{ "type": "text", "text": format!("invalid arguments: {message}") }],
                    "isError": true,
                })));
            }
            Err(error @ SubmitError::UnknownTool { .. }) => {
                return Err(RpcError::invalid_params(error.to_string()));
            }
            Err(error @ SubmitError::Busy { retry_after, .. }) => {
                return Err(RpcError::internal(error.to_string())
                    .with_data(json!({ "retryAfterMs": retry_after.as_millis() as u64 })));
            }
            Err(error) => return Err(internal(error)),
        };
        let run_id = handle.run_id().clone();
        if legacy_task || stateless_task {
            return self.task_created(scope.era, &run_id).await.map(Some);
        }
        session.track_call(request_id, &run_id, scope);
        let inputs = answering.then(|| (asked, session.clone()));
        let followed = self
            .follow_answering(&run_id, None, scope.clone(), out, inputs)
            .await;
        let cancelled_by_client = session.finish_call(request_id);
        match followed {
            Ok(_) if cancelled_by_client => Ok(None),
            Ok(result) => Ok(Some(result)),
            Err(FollowError::ClientGone) => {
                if scope.era == Era::Stateless {
                    // 2026-07-28: closing the response stream cancels the request.
                    self.inner
                        .scheduler
                        .cancel(&run_id, "the client closed the response stream");
                }
                Ok(None)
            }
            Err(FollowError::Rpc(error)) => Err(error),
        }
    }

    /// Streams run `run_id`'s notifications to `out` (those after seq
    /// `resume_after`, when resuming) and returns its final `CallToolResult`.
    pub(crate) async fn follow(
        &self,
        run_id: &RunId,
        resume_after: Option<Seq>,
        scope: Scope,
        out: &Outbound,
    ) -> Result<Value, FollowError> {
        self.follow_answering(run_id, resume_after, scope, out, None)
            .await
    }

    /// [`McpServer::follow`], also relaying the run's questions to the
    /// client of `session` as requests on `out`.
    async fn follow_answering(
        &self,
        run_id: &RunId,
        resume_after: Option<Seq>,
        scope: Scope,
        out: &Outbound,
        mut inputs: Option<(mpsc::Receiver<InputRequest>, Arc<Session>)>,
    ) -> Result<Value, FollowError> {
        let log = self.inner.scheduler.log();
        let capabilities = scope.client_capabilities.clone();
        let mut projector = Projector::new(scope);
        let mut result = ResultBuilder::new(run_id.clone(), self.inner.config.result_limit);
        let mut events = log.subscribe_from(run_id, 0);
        let id_prefix: Arc<str> = run_id.as_str().into();
        loop {
            let asked = async {
                match inputs.as_mut() {
                    Some((receiver, _)) => receiver.recv().await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                event = events.next() => event,
                // The client left (2026-07-28: that cancels the call) even
                // if this call has nothing to send it.
                () = out.closed() => return Err(FollowError::ClientGone),
                Some(asked) = asked => {
                    let session = &inputs.as_ref().expect("asked through it").1;
                    relay_question(session, &capabilities, asked, out).await?;
                    continue;
                }
            };
            let Some(event) = event else { break };
            let event = event.map_err(|error| FollowError::Rpc(internal(error)))?;
            result.add(&event);
            let fresh = resume_after.is_none_or(|after| event.seq > after);
            for message in projector.project(&event) {
                if fresh {
                    let outgoing = Outgoing {
                        event_id: Some(EventId {
                            run_id: id_prefix.clone(),
                            seq: event.seq,
                        }),
                        message,
                    };
                    out.send(outgoing)
                        .await
                        .map_err(|_| FollowError::ClientGone)?;
                }
            }
        }
        Ok(result.finish())
    }

    /// The final result of a finished (or finishing) run, without notifications.
    pub(crate) async fn final_result(&self, run_id: &RunId) -> Result<Value, RpcError> {
        let (sink, _drain) = tokio::sync::mpsc::channel(1);
        let quiet = Scope {
            era: Era::Session,
            client_capabilities: json!({}),
            progress_token: None,
            partial_token: None,
            log_level: None,
        };
        match self.follow(run_id, None, quiet, &sink).await {
            Ok(result) => Ok(result),
            Err(FollowError::Rpc(error)) => Err(error),
            Err(FollowError::ClientGone) => Err(RpcError::internal("lost the result stream")),
        }
    }
}

/// Sends a tool's question to the client as a JSON-RPC request, and hands
/// the client's response back to the tool when it arrives.
async fn relay_question(
    session: &Arc<Session>,
    capabilities: &Value,
    asked: InputRequest,
    out: &Outbound,
) -> Result<(), FollowError> {
    let (method, capability) = match asked.kind {
        InputKind::Sampling => ("sampling/createMessage", "sampling"),
        InputKind::Elicitation => ("elicitation/create", "elicitation"),
    };
    if capabilities.get(capability).is_none() {
        let _ = asked.reply.send(Err(AskError::NoResponder(asked.kind)));
        return Ok(());
    }
    let (id, answer) = session.expect_response();
    let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": asked.params });
    out.send(Outgoing::message(request))
        .await
        .map_err(|_| FollowError::ClientGone)?;
    tokio::spawn(async move {
        let answer = match answer.await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(AskError::Refused(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_owned(),
            )),
            Err(_) => Err(AskError::Gone),
        };
        let _ = asked.reply.send(answer);
    });
    Ok(())
}

/// Why following a run stopped early.
#[derive(Debug)]
pub(crate) enum FollowError {
    /// The client's stream is gone.
    ClientGone,
    /// Reading the log failed.
    Rpc(RpcError),
}

/// `_meta` marking a message as related to a task.
pub(crate) fn related_task(run_id: &RunId) -> Value {
    meta_with(meta_key::RELATED_TASK, json!({ "taskId": run_id }))
}

/// A resource-not-found style error for an unknown run or task.
pub(crate) fn unknown_run(what: &str, id: &str) -> RpcError {
    RpcError::new(
        code::INVALID_PARAMS,
        format!("unknown {what} {id:?}: list runs with the runs_list tool"),
    )
}
