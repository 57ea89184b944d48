//! A run that waits for its client (issue 10, finding 7): the questions a
//! tool asks (`elicitation/create`, `sampling/createMessage`) outlive the
//! stream they were sent on, have a time limit, end with the run, are
//! asked again on a resumed stream, and put the run (and its task) in
//! `input_required` meanwhile.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};
use weir_core::{RunId, RunState};
use weir_runtime::{EventLog, MemoryLog};
use weir_web::GuardOptions as HttpOptions;

use crate::support::{LineClient, server};

/// Everything here happens within this, or the test fails.
const PATIENCE: Duration = Duration::from_secs(10);

/// `tools/call` params of the elicitation fixture.
fn elicit(message: &str) -> Value {
    json!({"name": "test_elicitation", "arguments": {"message": message}})
}

/// The answer a client gives to `question`.
fn answer(question: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}})
}

/// Polls `log` until run `run_id` is in `state`.
async fn reaches(log: &Arc<dyn EventLog>, run_id: &RunId, state: RunState) {
    let polled = tokio::time::timeout(PATIENCE, async {
        loop {
            let run = log.get_run(run_id).await.unwrap();
            if run.as_ref().is_some_and(|run| run.state == state) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let now = log.get_run(run_id).await.unwrap().map(|run| run.state);
    polled
        .await
        .unwrap_or_else(|_| panic!("run {run_id} never became {state}; it is {now:?}"));
}

/// The one run `log` holds.
async fn only_run(log: &Arc<dyn EventLog>) -> RunId {
    let runs = log.list_runs(&Default::default()).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].run_id.clone()
}

/// The event types of run `run_id`.
async fn kinds(log: &Arc<dyn EventLog>, run_id: &RunId) -> Vec<&'static str> {
    let events = log.read(run_id, 0, 100).await.unwrap();
    events.iter().map(|event| event.kind.type_name()).collect()
}

/// The next message, within [`PATIENCE`].
async fn next(client: &mut LineClient) -> Value {
    tokio::time::timeout(PATIENCE, client.next())
        .await
        .expect("a message within 10 s")
}

/// A question nobody answers ends at its time limit: the client is told it
/// need not answer any more, and the call fails saying why. A late answer
/// changes nothing.
#[tokio::test]
async fn an_unanswered_question_is_withdrawn_and_fails_the_call_in_time() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let mut client = LineClient::start(log.clone()).await;
    client.initialize(json!({"elicitation": {}})).await;
    let mut call = elicit("who are you?");
    call["arguments"]["timeout_ms"] = 300.into();
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}))
        .await;
    let question = next(&mut client).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let run_id = only_run(&log).await;
    reaches(&log, &run_id, RunState::InputRequired).await;
    let withdrawn = next(&mut client).await;
    assert_eq!(
        withdrawn,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": question["id"], "reason": "the tool stopped waiting for this answer"}})
    );
    let response = next(&mut client).await;
    assert_eq!(response["id"], 1, "{response}");
    assert_eq!(response["result"]["isError"], true, "{response}");
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the client did not answer the Elicitation request within 300ms"),
        "{text}"
    );
    client.send(answer(&question)).await;
    let (_, pong) = client.call(2, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
    assert_eq!(
        kinds(&log, &run_id).await,
        ["started", "input_required", "input_ended", "failed"]
    );
}

/// A 2025-11-25 task whose run asks is `input_required`; `tasks/result`
/// carries the question, naming the task, and the answer goes to the run.
#[tokio::test]
async fn a_task_waiting_for_input_is_input_required_and_asks_on_tasks_result() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let mut client = LineClient::start(log.clone()).await;
    client.initialize(json!({"elicitation": {}})).await;
    let mut call = elicit("who are you?");
    call["task"] = json!({});
    let (_, created) = client.call(1, "tools/call", call).await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = RunId::parse(&task_id).unwrap();
    reaches(&log, &run_id, RunState::InputRequired).await;
    let (_, task) = client
        .call(2, "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(task["result"]["status"], "input_required", "{task}");

    client
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task_id}}))
        .await;
    let question = next(&mut client).await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(
        question["params"]["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": task_id})
    );
    client.send(answer(&question)).await;
    let result = next(&mut client).await;
    assert_eq!(result["id"], 3, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("User response: action=accept"), "{text}");
    let (_, task) = client
        .call(4, "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(task["result"]["status"], "completed", "{task}");
}

/// `tasks/cancel` reaches a task that waits for its client.
#[tokio::test]
async fn tasks_cancel_reaches_a_task_waiting_for_input() {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let mut client = LineClient::start(log.clone()).await;
    client.initialize(json!({"sampling": {}})).await;
    let call = json!({"name": "test_sampling", "arguments": {"prompt": "2+2?"}, "task": {}});
    let (_, created) = client.call(1, "tools/call", call).await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    reaches(
        &log,
        &RunId::parse(&task_id).unwrap(),
        RunState::InputRequired,
    )
    .await;
    let (_, cancelled) = client
        .call(2, "tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
}

async fn start_http() -> (String, Arc<dyn EventLog>) {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let server = server(log.clone(), 512 * 1024).await;
    let (bound, address) = tokio::sync::oneshot::channel::<SocketAddr>();
    tokio::spawn(crate::support::serve_http(
        server,
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions::default(),
        |addr| {
            bound.send(addr).unwrap();
        },
    ));
    (format!("http://{}/mcp", address.await.unwrap()), log)
}

/// A 2025-11-25 session over HTTP.
struct Session {
    url: String,
    http: reqwest::Client,
    id: String,
}

impl Session {
    async fn open(url: &str, capabilities: Value) -> Session {
        let http = reqwest::Client::new();
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}});
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .unwrap();
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let session = Session {
            url: url.to_owned(),
            http,
            id,
        };
        session
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        session
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        self.http
            .request(method, &self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25")
    }

    /// POSTs `message`, returning the response.
    async fn send(&self, message: Value) -> reqwest::Response {
        self.request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .json(&message)
            .send()
            .await
            .unwrap()
    }

    /// POSTs a streaming request (`tools/call`) and reads its SSE stream.
    async fn stream(&self, message: Value) -> Sse {
        Sse::new(self.send(message).await)
    }

    /// Resumes a call stream after SSE id `last`.
    async fn resume(&self, last: &str) -> Sse {
        let response = self
            .request(reqwest::Method::GET)
            .header("last-event-id", last)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Sse::new(response)
    }
}

/// A response's SSE stream: `(id, message)` at a time.
struct Sse {
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    /// weir-core's parser, and the events it gave not yet handed out.
    parser: weir_core::sse::SseParser,
    events: std::collections::VecDeque<weir_core::sse::SseEvent>,
}

impl Sse {
    fn new(response: reqwest::Response) -> Sse {
        assert_eq!(response.status(), 200);
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.map(|bytes| bytes.to_vec()))
            .boxed();
        Sse {
            body,
            parser: weir_core::sse::SseParser::new(usize::MAX),
            events: std::collections::VecDeque::new(),
        }
    }

    /// The next message and its SSE id, within [`PATIENCE`].
    async fn next(&mut self) -> (Option<String>, Value) {
        let read = async {
            loop {
                if let Some(event) = self.events.pop_front() {
                    return (event.id, serde_json::from_str(&event.data).unwrap());
                }
                let chunk = self.body.next().await.expect("the stream ended").unwrap();
                let events = self.parser.push(&chunk).expect("no bound");
                self.events.extend(events);
            }
        };
        tokio::time::timeout(PATIENCE, read)
            .await
            .expect("a message within 10 s")
    }
}

/// A client that lost its call stream while the tool waited for it
/// resumes with `Last-Event-ID` and is asked again, the same request; its
/// answer is taken once, and a second answer to the same question is
/// ignored.
#[tokio::test]
async fn a_resumed_stream_asks_again_and_takes_one_answer() {
    let (url, log) = start_http().await;
    let session = Session::open(&url, json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": elicit("who are you?")});
    let mut stream = session.stream(call).await;
    let (position, question) = stream.next().await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let position = position.expect("the question carries an SSE id to resume after");
    drop(stream);
    let run_id = only_run(&log).await;
    assert!(position.starts_with(&format!("{run_id}.")), "{position}");

    let mut resumed = session.resume(&position).await;
    let (_, again) = resumed.next().await;
    assert_eq!(again, question);
    assert_eq!(session.send(answer(&again)).await.status(), 202);
    let (_, response) = resumed.next().await;
    assert_eq!(response["id"], 1, "{response}");
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("User response: action=accept"), "{text}");
    assert_eq!(session.send(answer(&question)).await.status(), 202);
    assert_eq!(
        kinds(&log, &run_id).await,
        ["started", "input_required", "input_ended", "completed"]
    );
}

/// A client that left its call stream (2025-11-25: that does not cancel)
/// can still cancel the call by its request id while the tool waits for it.
#[tokio::test]
async fn a_call_left_behind_is_cancelled_by_its_request_id() {
    let (url, log) = start_http().await;
    let session = Session::open(&url, json!({"sampling": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "test_sampling", "arguments": {"prompt": "2+2?"}}});
    let mut stream = session.stream(call).await;
    let (_, question) = stream.next().await;
    assert_eq!(question["method"], "sampling/createMessage", "{question}");
    drop(stream);
    let run_id = only_run(&log).await;
    reaches(&log, &run_id, RunState::InputRequired).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user pressed stop"}});
    assert_eq!(session.send(cancel).await.status(), 202);
    reaches(&log, &run_id, RunState::Canceled).await;
    assert_eq!(
        kinds(&log, &run_id).await,
        ["started", "input_required", "canceled"]
    );
}

/// A client that ends its session will answer nothing: its runs' questions
/// fail at once, not at their time limit.
#[tokio::test]
async fn ending_the_session_fails_its_questions_at_once() {
    let (url, log) = start_http().await;
    let session = Session::open(&url, json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": elicit("who are you?")});
    let mut stream = session.stream(call).await;
    let (_, question) = stream.next().await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    drop(stream);
    let ended = session
        .request(reqwest::Method::DELETE)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    let run_id = only_run(&log).await;
    reaches(&log, &run_id, RunState::Failed).await;
    let events = log.read(&run_id, 0, 10).await.unwrap();
    let failed = serde_json::to_value(&events[3]).unwrap();
    assert_eq!(
        failed["error"]["message"],
        "the client went away before answering"
    );
    assert_eq!(
        kinds(&log, &run_id).await,
        ["started", "input_required", "input_ended", "failed"]
    );
}
