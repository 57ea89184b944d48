//! Following a run's log: the one loop behind a `tools/call` stream, a
//! `Last-Event-ID` resume, and every task result.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{RunId, Seq};
use weir_mcp_wire::jsonrpc::RpcError;
use weir_runtime::{AskError, InputKind, InputRequest};

use crate::errors::internal;
use crate::projection::{Projector, ResultBuilder};
use crate::protocol::{Era, Scope};
use crate::session::{EventId, Outbound, Outgoing, Session};
use crate::state::ServerState;

/// Why following a run stopped early.
#[derive(Debug)]
pub(crate) enum FollowError {
    /// The client's stream is gone.
    ClientGone,
    /// Reading the log failed.
    Rpc(RpcError),
}

/// The questions a run asks (`RunContext::ask`), and the session whose
/// client answers them.
pub(crate) type Questions = (mpsc::Receiver<InputRequest>, Arc<Session>);

/// Streams run `run_id`'s notifications to `out` (those after seq
/// `resume_after`, when resuming) and returns its final `CallToolResult`.
/// With `questions`, the run's questions go to the client as requests on
/// `out` too.
pub(crate) async fn follow(
    state: &ServerState,
    run_id: &RunId,
    resume_after: Option<Seq>,
    scope: Scope,
    out: &Outbound,
    mut questions: Option<Questions>,
) -> Result<Value, FollowError> {
    let log = state.scheduler.log();
    let capabilities = scope.client_capabilities.clone();
    let mut projector = Projector::new(scope);
    let mut result = ResultBuilder::new(run_id.clone(), state.config.result_limit);
    let mut events = log.subscribe_from(run_id, 0);
    let id_prefix: Arc<str> = run_id.as_str().into();
    loop {
        let asked = async {
            match questions.as_mut() {
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
                let session = &questions.as_ref().expect("asked through it").1;
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
pub(crate) async fn final_result(state: &ServerState, run_id: &RunId) -> Result<Value, RpcError> {
    let (sink, _drain) = mpsc::channel(1);
    let quiet = Scope {
        era: Era::Session,
        client_capabilities: json!({}),
        progress_token: None,
        partial_token: None,
        log_level: None,
    };
    match follow(state, run_id, None, quiet, &sink, None).await {
        Ok(result) => Ok(result),
        Err(FollowError::Rpc(error)) => Err(error),
        Err(FollowError::ClientGone) => Err(RpcError::internal("lost the result stream")),
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
