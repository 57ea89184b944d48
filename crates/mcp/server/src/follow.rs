//! Following a run's log: the one loop behind a `tools/call` stream, a
//! `Last-Event-ID` resume, and every task result.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use weir_core::{RunId, Seq};
use weir_mcp_wire::jsonrpc::RpcError;
use weir_runtime::log::Subscription;
use weir_runtime::{AskError, EventLog, InputKind, InputRequest};

use crate::delivery::{Key, TryPush};
use crate::errors::internal;
use crate::projection::{PROGRESS_INTERVAL_MS, Projected, Projector, ResultBuilder};
use crate::protocol::{Era, Scope};
use crate::session::{EventId, Outbound, Outgoing, Session, outbound};
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
///
/// Progress goes into `out` as a coalescing message (a newer one replaces
/// it while it waits), everything else as a kept one; when `out` is full
/// this loop waits, and so stops reading the log until the client reads
/// again (the log keeps everything meanwhile).
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
    let to = Delivery {
        out,
        log,
        run_id,
        id_prefix: &id_prefix,
        progress_key: Key::fresh(),
    };
    let fresh = |seq: Seq| resume_after.is_none_or(|after| seq > after);
    // The newest event projected, and when progress held back by the rate
    // limit goes out if no event comes first.
    let mut last_seq = None;
    let mut flush_at: Option<Instant> = None;
    loop {
        let asked = async {
            match questions.as_mut() {
                Some((receiver, _)) => receiver.recv().await,
                None => std::future::pending().await,
            }
        };
        let flush = async {
            match flush_at {
                Some(at) => tokio::time::sleep_until(at).await,
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
            () = flush => {
                flush_at = None;
                // Sent as of the newest event: every event up to it has
                // been projected, and this is the progress they came to.
                if let (Some(seq), Some(message)) = (last_seq, projector.flush())
                    && fresh(seq)
                {
                    deliver(to, &mut events, seq, message).await?;
                }
                continue;
            }
        };
        let Some(event) = event else { break };
        let event = event.map_err(|error| FollowError::Rpc(internal(error)))?;
        result.add(&event);
        last_seq = Some(event.seq);
        for message in projector.project(&event) {
            if fresh(event.seq) {
                deliver(to, &mut events, event.seq, message).await?;
            }
        }
        flush_at = match (projector.has_pending(), flush_at) {
            (false, _) => None,
            (true, Some(at)) => Some(at),
            (true, None) => Some(Instant::now() + Duration::from_millis(PROGRESS_INTERVAL_MS)),
        };
    }
    Ok(result.finish())
}

/// Queues one projected message of event `seq`: progress as a message a
/// newer one may replace, anything else to be delivered as it is.
///
/// When the queue is full the client is behind. The follower then lets go
/// of the run's live channel — a subscription left unread would pin up to
/// the hub's bound of batches for it, which for large items is far more
/// than the queue — waits until the client has read half the queue, and
/// picks the run up from the log where it left off.
async fn deliver(
    to: Delivery<'_>,
    events: &mut Subscription,
    seq: Seq,
    message: Projected,
) -> Result<(), FollowError> {
    let event_id = Some(EventId {
        run_id: to.id_prefix.clone(),
        seq,
    });
    let (message, key) = match message {
        Projected::Progress(message) => (message, Some(to.progress_key)),
        Projected::Kept(message) => (message, None),
    };
    let outgoing = Outgoing { event_id, message };
    let outgoing = match to.out.try_push(outgoing, key) {
        Ok(()) => return Ok(()),
        Err(TryPush::Closed) => return Err(FollowError::ClientGone),
        Err(TryPush::Full(outgoing)) => outgoing,
    };
    // A fresh subscription holds nothing until it is first read.
    *events = to.log.subscribe_from(to.run_id, events.position());
    to.out.drained().await;
    to.out
        .push(outgoing, key)
        .await
        .map_err(|_| FollowError::ClientGone)
}

/// Where [`deliver`] puts a call's messages.
#[derive(Clone, Copy)]
struct Delivery<'a> {
    out: &'a Outbound,
    log: &'a Arc<dyn EventLog>,
    run_id: &'a RunId,
    id_prefix: &'a Arc<str>,
    progress_key: Key,
}

/// The final result of a finished (or finishing) run, without notifications.
pub(crate) async fn final_result(state: &ServerState, run_id: &RunId) -> Result<Value, RpcError> {
    let (sink, _drain) = outbound(1);
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
