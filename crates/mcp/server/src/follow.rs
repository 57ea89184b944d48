//! Following a run's log: the one loop behind a `tools/call` stream, a
//! `Last-Event-ID` resume, and every task result; and the relay that
//! carries a run's questions to its client and the answers back.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use weir_core::{EventKind, RunId, Seq};
use weir_mcp_wire::jsonrpc::RpcError;
use weir_mcp_wire::revision::meta_key;
use weir_runtime::log::Subscription;
use weir_runtime::{AskError, EventLog, InputKind, InputRequest};

use crate::delivery::{Key, TryPush};
use crate::errors::internal;
use crate::projection::{PROGRESS_INTERVAL_MS, Projected, Projector, ResultBuilder};
use crate::protocol::{Era, Scope};
use crate::session::{Asked, EventId, Outbound, Outgoing, Question, Questions, Session, outbound};
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
pub(crate) type Relayed = (mpsc::Receiver<InputRequest>, Arc<Session>);

/// [`follow_asking`] for a call that starts here: with `questions`, the
/// session takes over the run's questions ([`relay_questions`]) and this
/// stream delivers them.
pub(crate) async fn follow(
    state: &ServerState,
    run_id: &RunId,
    resume_after: Option<Seq>,
    scope: Scope,
    out: &Outbound,
    questions: Option<Relayed>,
) -> Result<Value, FollowError> {
    let asked = questions.map(|(questions, session)| {
        relay_questions(
            &session,
            run_id,
            questions,
            &scope.client_capabilities,
            None,
        )
    });
    follow_asking(state, run_id, resume_after, scope, out, asked).await
}

/// Streams run `run_id`'s notifications to `out` (those after seq
/// `resume_after`, when resuming) and returns its final `CallToolResult`.
/// With `asked`, the run's open questions go to the client as requests on
/// `out` too: those open now at once (a resumed stream asks again what the
/// lost one asked), later ones as they come. When a question this stream
/// sent is withdrawn unanswered (its time is up, the run ended), the
/// client gets `notifications/cancelled` for it.
///
/// Progress goes into `out` as a coalescing message (a newer one replaces
/// it while it waits), everything else as a kept one; when `out` is full
/// this loop waits, and so stops reading the log until the client reads
/// again (the log keeps everything meanwhile).
pub(crate) async fn follow_asking(
    state: &ServerState,
    run_id: &RunId,
    resume_after: Option<Seq>,
    scope: Scope,
    out: &Outbound,
    mut asked: Option<Asked>,
) -> Result<Value, FollowError> {
    let log = state.scheduler.log();
    let mut result = ResultBuilder::new(run_id.clone(), state.config.result_limit);
    if scope.run_notices {
        result.run_notices();
    }
    let mut projector = Projector::new(scope);
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
    // The questions this stream sent that are still open, by request id,
    // and whether the run's questions changed since it last looked.
    let mut sent = Vec::new();
    let mut questions_due = asked.is_some();
    // Made once, not per event (a stream of partials is thousands of
    // events a second): waiting for the client to leave registers a
    // waiter, and a timer registers an entry with the runtime's timers.
    let closed = out.closed();
    tokio::pin!(closed);
    let flush = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(flush);
    let mut flush_set: Option<Instant> = None;
    let mut delivered_any = false;
    loop {
        // Tagged as of the newest event this client has: resuming from
        // there loses nothing, and asks again whatever is still open. A
        // question never comes before `started`, so a stream that has
        // read nothing yet has it soon.
        if questions_due && let (Some(asked), Some(seq)) = (&asked, last_seq.max(resume_after)) {
            questions_due = false;
            let position = EventId {
                run_id: id_prefix.clone(),
                seq,
            };
            let questions = asked.borrow().clone();
            ask_again(&questions, &mut sent, position, out).await?;
        }
        let changed = async {
            match asked.as_mut() {
                Some(asked) => asked.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        if let Some(at) = flush_at
            && flush_set != Some(at)
        {
            flush.as_mut().reset(at);
            flush_set = Some(at);
        }
        let event = tokio::select! {
            event = events.next() => event,
            // The client left (2026-07-28: that cancels the call) even
            // if this call has nothing to send it.
            () = &mut closed => return Err(FollowError::ClientGone),
            open = changed => {
                match asked.as_mut() {
                    Some(asked) if open => {
                        asked.borrow_and_update();
                        questions_due = true;
                    }
                    // The run asks no more, and nothing it asked is open.
                    _ => asked = None,
                }
                continue;
            }
            () = &mut flush, if flush_at.is_some() => {
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
        if let EventKind::Started(started) = &event.kind
            && let Some(fields) = state.scheduler.text_fields(&started.tool)
        {
            result.text_fields(&fields);
        }
        result.add(&event);
        last_seq = Some(event.seq);
        for message in projector.project(&event) {
            if fresh(event.seq) {
                deliver(to, &mut events, event.seq, message).await?;
                // Delivering woke the client's writer, which tokio runs
                // only once this task yields: a task woken by another
                // waits in its worker's LIFO slot, which the other worker
                // does not steal. With the run's events already there (a
                // tool emitting flat out) this loop yielded only once the
                // client's queue was full: over stdio, one first item in
                // four reached the writer 2-3 ms late (`bench/e2e`). Once
                // per stream: yielding every 128 messages as well gained
                // nothing measurable and cut the writer's batches short.
                if !delivered_any {
                    delivered_any = true;
                    tokio::task::yield_now().await;
                }
            }
        }
        if !fresh(event.seq) {
            projector.discard_pending();
        }
        flush_at = match (projector.has_pending(), flush_at) {
            (false, _) => None,
            (true, Some(at)) => Some(at),
            (true, None) => Some(Instant::now() + Duration::from_millis(PROGRESS_INTERVAL_MS)),
        };
    }
    // The run has ended, and with it every wait for an answer: a question
    // this stream sent that is not known to be answered is void. (An
    // answer is taken off the open list before the tool gets it, so one
    // that the run used is never among these.)
    if let Some(asked) = &asked {
        let questions = asked.borrow().clone();
        if !questions.quiet {
            for id in sent {
                if questions.open.iter().any(|question| question.id == id)
                    || questions.withdrawn.contains(&id)
                {
                    withdraw(&id, out).await?;
                }
            }
        }
    }
    Ok(result.finish())
}

/// Sends the client the open `questions` that this stream has not sent
/// (`sent`), tagged with SSE id `position`, and `notifications/cancelled`
/// for those it sent that were withdrawn since.
async fn ask_again(
    questions: &Questions,
    sent: &mut Vec<String>,
    position: EventId,
    out: &Outbound,
) -> Result<(), FollowError> {
    let mut withdrawn = Vec::new();
    sent.retain(|id| {
        let open = questions.open.iter().any(|question| &question.id == id);
        if !open && questions.withdrawn.contains(id) {
            withdrawn.push(id.clone());
        }
        open
    });
    if !questions.quiet {
        for id in withdrawn {
            withdraw(&id, out).await?;
        }
    }
    for Question { id, request } in &questions.open {
        if !sent.contains(id) {
            let outgoing = Outgoing {
                event_id: Some(position.clone()),
                message: request.clone(),
            };
            out.send(outgoing)
                .await
                .map_err(|_| FollowError::ClientGone)?;
            sent.push(id.clone());
        }
    }
    Ok(())
}

/// Tells the client that request `id` (a question) wants no answer any more.
async fn withdraw(id: &str, out: &Outbound) -> Result<(), FollowError> {
    let notice = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "the tool stopped waiting for this answer" },
    });
    out.send(Outgoing::message(notice))
        .await
        .map_err(|_| FollowError::ClientGone)
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
    // A client that reads as fast as the run writes frees room within
    // moments: wait with the live subscription kept, so the run's events
    // keep coming from the shared channel rather than being read back from
    // the store. Only a client that stays behind makes the follower let go
    // of the run (its live channel would otherwise hold batches for it up
    // to its capacity) and catch up from the log once the client has read
    // half its queue. A fresh subscription holds nothing until first read.
    if tokio::time::timeout(HOLD_ON_FOR_A_FAST_CLIENT, to.out.drained())
        .await
        .is_err()
    {
        *events = to.log.subscribe_from(to.run_id, events.position());
        to.out.drained().await;
    }
    to.out
        .push(outgoing, key)
        .await
        .map_err(|_| FollowError::ClientGone)
}

/// How long [`deliver`] waits for room in a full queue before it lets go of
/// the run's live channel.
const HOLD_ON_FOR_A_FAST_CLIENT: Duration = Duration::from_millis(250);

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
        run_notices: false,
    };
    match follow(state, run_id, None, quiet, &sink, None).await {
        Ok(result) => Ok(result),
        Err(FollowError::Rpc(error)) => Err(error),
        Err(FollowError::ClientGone) => Err(RpcError::internal("lost the result stream")),
    }
}

/// Takes over the questions run `run_id` asks, for as long as it can ask:
/// each goes to `session`'s client as a JSON-RPC request on every stream
/// that follows the run (see [`follow_asking`]) until it is answered, and
/// the answer goes back to the tool. A question outlives the stream it was
/// first sent on: a client that left and resumes gets it again, and one
/// that never comes back leaves it to its time limit. With `task`, each
/// request names the task it is for (2025-11-25: `related-task`).
/// Returns what a stream that follows the run watches.
pub(crate) fn relay_questions(
    session: &Arc<Session>,
    run_id: &RunId,
    mut questions: mpsc::Receiver<InputRequest>,
    capabilities: &Value,
    task: Option<&RunId>,
) -> Asked {
    let board = session.open_questions(run_id);
    let asked = board.subscribe();
    let session = session.clone();
    let run_id = run_id.clone();
    let capabilities = capabilities.clone();
    let task = task.cloned();
    tokio::spawn(async move {
        while let Some(question) = questions.recv().await {
            let (session, board) = (session.clone(), board.clone());
            let (capabilities, task) = (capabilities.clone(), task.clone());
            tokio::spawn(async move {
                relay_question(&session, &board, &capabilities, task.as_ref(), question).await;
            });
        }
        // The run has ended: no more questions.
        session.close_questions(&run_id);
    });
    asked
}

/// Posts one question on `board` as a request to the client, and hands the
/// client's response to the tool when it comes; withdraws it when the tool
/// stops waiting first.
async fn relay_question(
    session: &Session,
    board: &tokio::sync::watch::Sender<Questions>,
    capabilities: &Value,
    task: Option<&RunId>,
    asked: InputRequest,
) {
    let (method, capability) = match asked.kind {
        InputKind::Sampling => ("sampling/createMessage", "sampling"),
        InputKind::Elicitation => ("elicitation/create", "elicitation"),
    };
    if capabilities.get(capability).is_none() {
        let _ = asked.reply.send(Err(AskError::NoResponder(asked.kind)));
        return;
    }
    let (id, answer) = session.expect_response();
    let mut params = asked.params;
    if let Some(task) = task {
        params["_meta"][meta_key::RELATED_TASK] = json!({ "taskId": task });
    }
    let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    board.send_modify(|questions| {
        questions.open.push(Question {
            id: id.clone(),
            request: crate::wire::to_json(&request),
        });
    });
    let mut reply = asked.reply;
    let answer = tokio::select! {
        answer = answer => Some(match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(AskError::Refused(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_owned(),
            )),
            Err(_) => Err(AskError::Gone),
        }),
        // Its time is up, or the run ended.
        () = reply.closed() => None,
    };
    // Off the open list before the tool has the answer, so that a stream
    // that sees the run end after it knows the question was answered.
    board.send_modify(|questions| questions.close(&id, answer.is_none()));
    match answer {
        Some(answer) => {
            let _ = reply.send(answer);
        }
        None => session.withdraw_request(&id),
    }
}
