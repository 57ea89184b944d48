//! A client's session, and the messages a request sends before its response.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use weir_core::{LogLevel, RunId};
use weir_runtime::Principal;
use weir_runtime::now_ms;

use crate::delivery;
use crate::protocol::{Era, Scope};

/// A message a request produces, as JSON text (serialized by the request's
/// task, not by the transport's single writer), with the SSE event id that
/// lets a client resume after it (HTTP, session era).
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) event_id: Option<EventId>,
    pub(crate) message: String,
}

impl Outgoing {
    /// A message with no SSE id (it cannot be resumed after).
    pub(crate) fn message(message: Value) -> Outgoing {
        Outgoing {
            event_id: None,
            message: crate::wire::to_json(&message),
        }
    }
}

/// The SSE id of a run's event, `{run_id}.{seq}`; formatted only by the
/// transports that send ids.
#[derive(Debug, Clone)]
pub(crate) struct EventId {
    pub(crate) run_id: Arc<str>,
    pub(crate) seq: weir_core::Seq,
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.run_id, self.seq)
    }
}

/// Where a request's messages go: the client's delivery queue.
pub(crate) type Outbound = delivery::Sender<Outgoing>;

/// What the client's writer reads: see [`delivery::channel`].
pub(crate) type Delivery = delivery::Receiver<Outgoing>;

/// A delivery queue for one client (stdio) or response stream (HTTP),
/// holding at most `bound` messages.
pub(crate) fn outbound(bound: usize) -> (Outbound, Delivery) {
    delivery::channel(bound)
}

/// A question a run asked this session's client, as it is sent: the same
/// request, same id, goes out on every stream that follows the run until
/// the question is answered or withdrawn, so the client's answer to any
/// delivery is the one answer.
#[derive(Debug, Clone)]
pub(crate) struct Question {
    /// The JSON-RPC id of the request.
    pub(crate) id: String,
    /// The request, as JSON text.
    pub(crate) request: String,
}

/// The questions of one run, as the streams that follow it see them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Questions {
    /// Asked and waiting for the client's answer, oldest first.
    pub(crate) open: Vec<Question>,
    /// The ids of the latest questions withdrawn unanswered (the run stopped
    /// waiting), newest last: a stream that sent one tells the client that
    /// no answer is wanted any more.
    pub(crate) withdrawn: VecDeque<String>,
    /// The client cancelled the call: it needs no word about its questions.
    pub(crate) quiet: bool,
}

/// How many withdrawn question ids [`Questions`] keeps: more than a run
/// asks while one stream lags behind.
const WITHDRAWN_KEPT: usize = 16;

impl Questions {
    /// Takes question `id` off the open list; `withdrawn` when it was not
    /// answered.
    pub(crate) fn close(&mut self, id: &str, withdrawn: bool) {
        self.open.retain(|question| question.id != id);
        if withdrawn {
            if self.withdrawn.len() == WITHDRAWN_KEPT {
                self.withdrawn.pop_front();
            }
            self.withdrawn.push_back(id.to_owned());
        }
    }
}

/// What a stream that follows a run watches for the run's questions.
pub(crate) type Asked = watch::Receiver<Questions>;

/// Where a 2025-11-25 call stream belongs, kept with its run
/// ([`NewRun::resume_record`](weir_runtime::log::NewRun::resume_record)) so
/// that every node sharing the store can resume the stream from
/// `Last-Event-ID`, not only the node that holds the session: the session
/// whose client may resume it, the call's request id (its response carries
/// it) and how the call is projected.
///
/// Only the node holding the session has the rest of it: the run's
/// questions (`input_required`) are asked, and answered, there alone, and
/// so are the session's further requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct StreamRecord {
    /// The id of the session that made the call.
    pub(crate) session: String,
    /// The JSON-RPC id of its `tools/call`.
    pub(crate) request_id: Value,
    /// How its messages are projected.
    pub(crate) scope: Scope,
}

impl StreamRecord {
    /// The record as the store keeps it.
    pub(crate) fn to_text(&self) -> String {
        serde_json::to_string(self).expect("stream records serialize")
    }

    /// A record read back from the store; `None` if it is not one (another
    /// front end's, or a newer weir's).
    pub(crate) fn parse(text: &str) -> Option<StreamRecord> {
        serde_json::from_str(text).ok()
    }
}

/// What a client set up with `initialize` (session era), or a stand-in for
/// one request (stateless era). Holds the calls that `notifications/cancelled`
/// can reach and the parameters a resumed stream needs.
pub(crate) struct Session {
    /// Random (a UUIDv4: 122 bits from the OS's generator): over HTTP it is
    /// what lets a client resume its call streams on any node
    /// ([`StreamRecord`]), so it must not be guessable. (A UUIDv7 would
    /// not do: within one millisecond its 42-bit counter runs on from the
    /// previous id, leaving 32 random bits.)
    pub(crate) id: String,
    /// Whether its call streams are recorded with their runs
    /// ([`StreamRecord`]): an HTTP session's, which a client may resume on
    /// another node; not stdio's, whose one client cannot go elsewhere.
    records_streams: bool,
    /// Who the client is: the runs it starts are its own, and it sees only
    /// the runs it may ([`Principal::sees`]).
    pub(crate) caller: Principal,
    state: Mutex<SessionState>,
    /// When the client last used this session (Unix ms), for idle expiry.
    last_seen: AtomicU64,
}

#[derive(Default)]
struct SessionState {
    capabilities: Value,
    /// What the client called itself in `initialize` ([`client_name`]).
    client: Option<String>,
    log_level: Option<LogLevel>,
    /// Request id (as JSON text) → the run it started.
    calls: HashMap<String, RunId>,
    /// Calls the client cancelled: they are owed no response.
    cancelled: HashSet<String>,
    /// Run → how its call is projected, for `Last-Event-ID` resumes.
    streams: HashMap<RunId, (Value, Scope)>,
    /// Requests weir sent the client, by id, waiting for its response.
    pending: HashMap<String, oneshot::Sender<Result<Value, Value>>>,
    /// Run → the questions it asked this client, while it can ask more.
    asked: HashMap<RunId, watch::Sender<Questions>>,
    next_request: u64,
}

impl Session {
    /// A session whose call streams only this process serves: stdio's, or
    /// the stand-in for one stateless request.
    pub(crate) fn new(caller: Principal) -> Arc<Session> {
        Session::create(caller, false)
    }

    /// A 2025-11-25 HTTP session: its call streams are recorded with their
    /// runs, so that any node sharing the store can resume them.
    pub(crate) fn over_http(caller: Principal) -> Arc<Session> {
        Session::create(caller, true)
    }

    fn create(caller: Principal, records_streams: bool) -> Arc<Session> {
        Arc::new(Session {
            id: uuid::Uuid::new_v4().simple().to_string(),
            records_streams,
            caller,
            state: Mutex::default(),
            last_seen: AtomicU64::new(now_ms()),
        })
    }

    /// What to store with the run of a call that this session follows on
    /// its stream (request `request_id`, projected as `scope`), for
    /// [`NewRun::resume_record`](weir_runtime::log::NewRun::resume_record);
    /// `None` when no other node could serve this session's client.
    pub(crate) fn stream_record(&self, request_id: &Value, scope: &Scope) -> Option<String> {
        if !self.records_streams || scope.era != Era::Session {
            return None;
        }
        let record = StreamRecord {
            session: self.id.clone(),
            request_id: request_id.clone(),
            scope: scope.clone(),
        };
        Some(record.to_text())
    }

    /// Marks the session used now.
    pub(crate) fn touch(&self) {
        self.last_seen.store(now_ms(), Ordering::Relaxed);
    }

    /// Milliseconds since the client last used the session.
    pub(crate) fn idle_ms(&self) -> u64 {
        now_ms().saturating_sub(self.last_seen.load(Ordering::Relaxed))
    }

    fn state(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().expect("session lock")
    }

    pub(crate) fn scope(&self, era: Era, params: &Value) -> Scope {
        let state = self.state();
        Scope::resolve(era, params, &state.capabilities, state.log_level)
    }

    /// Records the capabilities the client declared in `initialize`.
    pub(crate) fn set_capabilities(&self, capabilities: Value) {
        self.state().capabilities = capabilities;
    }

    /// Records what the client called itself in `initialize`
    /// (`clientInfo`).
    pub(crate) fn set_client(&self, info: Option<&Value>) {
        self.state().client = info.and_then(client_name);
    }

    /// What the client of a request calls itself, for its runs' summaries:
    /// a stateless request's `clientInfo` (in its `_meta`), else the one
    /// `initialize` gave.
    pub(crate) fn client(&self, era: Era, params: &Value) -> Option<String> {
        match era {
            Era::Stateless => params
                .get("_meta")
                .and_then(|meta| meta.get(weir_mcp_wire::revision::meta_key::CLIENT_INFO))
                .and_then(client_name),
            Era::Session => self.state().client.clone(),
        }
    }

    /// Records the level `logging/setLevel` asked for.
    pub(crate) fn set_log_level(&self, level: LogLevel) {
        self.state().log_level = Some(level);
    }

    pub(crate) fn track_call(&self, request_id: &Value, run_id: &RunId, scope: &Scope) {
        let mut state = self.state();
        state.calls.insert(request_id.to_string(), run_id.clone());
        state
            .streams
            .insert(run_id.clone(), (request_id.clone(), scope.clone()));
    }

    /// Marks the call of `request_id` cancelled by the client (it is owed no
    /// response then) and returns its run; `None` if no call of that id was
    /// made in this session.
    ///
    /// A call whose stream the client left (2025-11-25: that does not
    /// cancel it) goes on without a follower, perhaps waiting for the
    /// client's answer; the client can still cancel it by its request id.
    /// Ids may be reused once a call is over, so of several such calls the
    /// newest is taken (run ids are time-ordered); cancelling a run that
    /// has ended does nothing.
    pub(crate) fn cancel_call(&self, request_id: &Value) -> Option<RunId> {
        let mut state = self.state();
        let key = request_id.to_string();
        let run = match state.calls.get(&key) {
            Some(run) => {
                let run = run.clone();
                state.cancelled.insert(key);
                run
            }
            None => state
                .streams
                .iter()
                .filter(|(_, (id, _))| id == request_id)
                .map(|(run, _)| run)
                .max()?
                .clone(),
        };
        if let Some(questions) = state.asked.get(&run) {
            questions.send_modify(|questions| questions.quiet = true);
        }
        Some(run)
    }

    /// Forgets a finished call; returns whether the client had cancelled it.
    pub(crate) fn finish_call(&self, request_id: &Value) -> bool {
        let key = request_id.to_string();
        let mut state = self.state();
        state.calls.remove(&key);
        state.cancelled.remove(&key)
    }

    /// Registers a request to the client; returns its id and the answer.
    pub(crate) fn expect_response(&self) -> (String, oneshot::Receiver<Result<Value, Value>>) {
        let mut state = self.state();
        state.next_request += 1;
        let id = format!("weir-{}", state.next_request);
        let (sender, answer) = oneshot::channel();
        state.pending.insert(id.clone(), sender);
        (id, answer)
    }

    /// Drops request `id` to the client: nothing waits for its response any
    /// more, and a late one is ignored.
    pub(crate) fn withdraw_request(&self, id: &str) {
        self.state().pending.remove(id);
    }

    /// Starts keeping the questions run `run_id` asks this client, for the
    /// streams that follow it; returns where to post them.
    pub(crate) fn open_questions(&self, run_id: &RunId) -> watch::Sender<Questions> {
        self.state()
            .asked
            .entry(run_id.clone())
            .or_insert_with(|| watch::Sender::new(Questions::default()))
            .clone()
    }

    /// The questions of run `run_id` to watch, while it can ask this client.
    pub(crate) fn questions(&self, run_id: &RunId) -> Option<Asked> {
        self.state().asked.get(run_id).map(watch::Sender::subscribe)
    }

    /// Forgets run `run_id`'s questions: it will ask no more.
    pub(crate) fn close_questions(&self, run_id: &RunId) {
        self.state().asked.remove(run_id);
    }

    /// The client ended the session: its runs' questions will get no
    /// answer, so they fail now (the tool is told the client is gone)
    /// rather than when their time is up.
    pub(crate) fn end(&self) {
        self.state().pending.clear();
    }

    /// Delivers the client's response to a request weir sent.
    pub(crate) fn resolve(&self, id: &Value, outcome: Result<Value, Value>) {
        let Some(id) = id.as_str() else { return };
        if let Some(waiting) = self.state().pending.remove(id) {
            let _ = waiting.send(outcome);
        }
    }

    /// How to resume the stream of `run_id`: its request id and scope.
    pub(crate) fn stream(&self, run_id: &RunId) -> Option<(Value, Scope)> {
        self.state().streams.get(run_id).cloned()
    }
}

/// Most characters of a client's name kept with its runs.
const CLIENT_NAME_MAX: usize = 100;

/// `name/version` from an MCP `clientInfo` (`name` alone without a
/// version), on one line and at most [`CLIENT_NAME_MAX`] characters: a
/// client names itself, so what it says is only shown, and kept short.
fn client_name(info: &Value) -> Option<String> {
    let clean = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let name = clean(info.get("name")?.as_str()?);
    if name.is_empty() {
        return None;
    }
    let named = match info.get("version").and_then(Value::as_str).map(clean) {
        Some(version) if !version.is_empty() => format!("{name}/{version}"),
        _ => name,
    };
    Some(named.chars().take(CLIENT_NAME_MAX).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weir_core::LogLevel;
    use weir_runtime::Principal;

    use super::{Session, StreamRecord, client_name};
    use crate::protocol::{Era, Scope};

    /// A client is named by its `clientInfo` as `name/version`, on one
    /// line and short; a stateless request by its own `_meta`, a session by
    /// what `initialize` said.
    #[test]
    fn a_client_is_named_by_its_client_info() {
        assert_eq!(
            client_name(&json!({"name": "claude-code", "version": "2.1.3"})).as_deref(),
            Some("claude-code/2.1.3")
        );
        assert_eq!(client_name(&json!({"name": "t"})).as_deref(), Some("t"));
        assert_eq!(client_name(&json!({"name": " "})), None);
        assert_eq!(client_name(&json!({"version": "1"})), None);
        assert_eq!(
            client_name(&json!({"name": "a\nb", "version": "1\u{1b}[31m"})).as_deref(),
            Some("a b/1 [31m")
        );
        assert_eq!(
            client_name(&json!({"name": "x".repeat(500)})).map(|name| name.len()),
            Some(100)
        );
        let session = Session::new(Principal::local());
        session.set_client(Some(&json!({"name": "host", "version": "9"})));
        assert_eq!(
            session.client(Era::Session, &json!({})).as_deref(),
            Some("host/9")
        );
        let stateless = json!({"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "cli", "version": "0.1"}}});
        assert_eq!(
            session.client(Era::Stateless, &stateless).as_deref(),
            Some("cli/0.1")
        );
        assert_eq!(session.client(Era::Stateless, &json!({})), None);
    }

    /// An HTTP session's call records its session, request id and scope,
    /// and the record reads back as written; stdio's sessions and stateless
    /// calls record nothing; what is not a record is none.
    #[test]
    fn only_http_session_calls_are_recorded_and_records_read_back() {
        let params = json!({"_meta": {"progressToken": 3, "partialResultToken": "p"}});
        let capabilities = json!({"partialResults": {}});
        let scope = Scope::resolve(Era::Session, &params, &capabilities, Some(LogLevel::Info));
        let http = Session::over_http(Principal::named("alice", false));
        let text = http
            .stream_record(&json!("call-1"), &scope)
            .expect("an HTTP session's call is recorded");
        let expected = StreamRecord {
            session: http.id.clone(),
            request_id: json!("call-1"),
            scope: scope.clone(),
        };
        assert_eq!(StreamRecord::parse(&text), Some(expected));
        let stdio = Session::new(Principal::local());
        assert_eq!(stdio.stream_record(&json!(1), &scope), None);
        let stateless = Scope::resolve(Era::Stateless, &json!({}), &json!({}), None);
        assert_eq!(http.stream_record(&json!(1), &stateless), None);
        assert_eq!(StreamRecord::parse(r#"{"run": "r"}"#), None);
    }

    /// Session ids are random (version 4), not time-ordered: over HTTP they
    /// are what a client resumes its streams with on any node.
    #[test]
    fn session_ids_are_random() {
        let ids: Vec<String> = (0..64)
            .map(|_| Session::over_http(Principal::local()).id.clone())
            .collect();
        for id in &ids {
            let uuid = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(uuid.get_version_num(), 4, "{id}");
        }
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), ids.len());
    }
}
