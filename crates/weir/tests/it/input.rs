//! A run waiting on a client that is gone (issue 10, finding 7), through
//! `weir serve --fixtures`: a tool that asked its client a question
//! (`elicitation/create`, `sampling/createMessage`, 2025-11-25) can be
//! cancelled however the client goes about it, gives up when its question's
//! time is up, is asked again on a resumed stream, and is `input_required`
//! meanwhile — its log says so, and so does its task.
//!
//! HTTP goes over a plain TCP socket, read as it arrives, so a test can
//! leave a stream in the middle as a client that went away would. Every
//! wait is bounded: a server that hangs fails its test, never the suite.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// Everything a test waits for comes within this, or the test fails.
const PATIENCE: Duration = Duration::from_secs(15);

/// `weir serve --http 127.0.0.1:0 --fixtures` on a data directory of its
/// own, killed on drop.
struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(WEIR)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--http", "127.0.0.1:0", "--fixtures", "--no-exec"])
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let (found, addr) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                // "weir: serving MCP at http://127.0.0.1:PORT/mcp (…"
                if let Some(rest) = line.split("serving MCP at http://").nth(1) {
                    let _ = found.send(rest.split('/').next().unwrap().to_owned());
                }
            }
        });
        let addr = addr
            .recv_timeout(Duration::from_secs(30))
            .expect("weir serve says where it serves within 30 s");
        Server {
            child,
            addr,
            _dir: dir,
        }
    }

    /// A 2025-11-25 session whose client declares `capabilities`.
    fn session(&self, capabilities: Value) -> Session<'_> {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}});
        let mut answer = Exchange::send(&self.addr, "POST", "/mcp", &[], &initialize.to_string());
        let id = answer
            .header("mcp-session-id")
            .expect("initialize answers with a session id");
        let session = Session { server: self, id };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(session.post(&initialized).status(), 202);
        session
    }

    /// The event types of run `run_id`, from `GET /runs/{id}/events`, which
    /// ends after the run's terminal event.
    fn kinds(&self, run_id: &str) -> Vec<String> {
        let path = format!("/runs/{run_id}/events");
        let mut answer = Exchange::send(&self.addr, "GET", &path, &[], "");
        let mut kinds = Vec::new();
        while let Some((_, event)) = answer.next_message() {
            kinds.push(event["type"].as_str().unwrap().to_owned());
        }
        kinds
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client's session.
struct Session<'a> {
    server: &'a Server,
    id: String,
}

impl Session<'_> {
    fn headers(&self) -> [(&str, &str); 2] {
        [
            ("Mcp-Session-Id", &self.id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ]
    }

    /// POSTs `message`; the answer is read as it comes.
    fn post(&self, message: &Value) -> Exchange {
        let body = message.to_string();
        Exchange::send(&self.server.addr, "POST", "/mcp", &self.headers(), &body)
    }

    /// GET `/mcp` with `Last-Event-ID: last`: the call stream, resumed.
    fn resume(&self, last: &str) -> Exchange {
        let mut headers = self.headers().to_vec();
        headers.push(("Last-Event-ID", last));
        Exchange::send(&self.server.addr, "GET", "/mcp", &headers, "")
    }

    /// A request answered with one JSON message (`tasks/get`, …): its result.
    fn request(&self, method: &str, params: Value) -> Value {
        let message = json!({"jsonrpc": "2.0", "id": 100, "method": method, "params": params});
        let mut answer = self.post(&message);
        let reply = answer.next_message().expect("an answer").1;
        assert!(reply.get("result").is_some(), "{method}: {reply}");
        reply["result"].clone()
    }

    /// Sends a notification.
    fn notify(&self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        assert_eq!(self.post(&message).status(), 202);
    }

    /// Answers the client's question `question` (an elicitation or a
    /// sampling request), as a client would.
    fn answer(&self, question: &Value) -> u16 {
        let result = match question["method"].as_str() {
            Some("sampling/createMessage") => {
                json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m", "stopReason": "endTurn"})
            }
            _ => {
                json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}})
            }
        };
        let response = json!({"jsonrpc": "2.0", "id": question["id"], "result": result});
        self.post(&response).status()
    }

    /// The status `tasks/get` gives task `task_id`, polled until it is
    /// `wanted` (returned), or what it was when patience ran out.
    fn task_status(&self, task_id: &str, wanted: &str) -> String {
        let until = Instant::now() + PATIENCE;
        loop {
            let task = self.request("tasks/get", json!({"taskId": task_id}));
            let status = task["status"].as_str().unwrap().to_owned();
            if status == wanted || Instant::now() > until {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One HTTP/1.1 request on its own connection, its answer read as it
/// arrives: the head, then the body, de-chunked, as SSE messages or whole.
struct Exchange {
    stream: TcpStream,
    raw: Vec<u8>,
    /// The head, once it has come, and where the body starts in `raw`.
    head: Option<(String, usize)>,
    /// The body so far, de-chunked; how much of `raw` it has taken; how
    /// much of it has been handed out as messages (to weir-core's SSE
    /// parser, for a stream, whose events wait in `events`).
    body: String,
    taken: usize,
    handed: usize,
    parser: weir_core::sse::SseParser,
    events: std::collections::VecDeque<weir_core::sse::SseEvent>,
    ended: bool,
}

impl Exchange {
    fn send(
        addr: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Exchange {
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("Content-Type: application/json\r\n");
        request.push_str("Accept: application/json, text/event-stream\r\n");
        request.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        Exchange {
            stream,
            raw: Vec::new(),
            head: None,
            body: String::new(),
            taken: 0,
            handed: 0,
            parser: weir_core::sse::SseParser::new(usize::MAX),
            events: std::collections::VecDeque::new(),
            ended: false,
        }
    }

    /// Reads what comes next; `false` once the answer is over.
    fn fill(&mut self, deadline: Instant) -> bool {
        if self.ended {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "nothing more within {PATIENCE:?}: {self:?}"
        );
        self.stream.set_read_timeout(Some(left)).unwrap();
        let mut buffer = [0u8; 16 * 1024];
        match self.stream.read(&mut buffer) {
            Ok(0) => self.ended = true,
            Ok(n) => self.raw.extend_from_slice(&buffer[..n]),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("nothing more within {PATIENCE:?}: {self:?}")
            }
            Err(_) => self.ended = true, // reset: the answer is what came
        }
        self.parse();
        !self.ended
    }

    /// Takes the head and whatever whole chunks of the body have come.
    fn parse(&mut self) {
        if self.head.is_none()
            && let Some(end) = self.raw.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let head = String::from_utf8_lossy(&self.raw[..end]).into_owned();
            self.head = Some((head, end + 4));
            self.taken = end + 4;
        }
        let Some((head, _)) = &self.head else { return };
        if !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            let rest = &self.raw[self.taken..];
            self.body.push_str(&String::from_utf8_lossy(rest));
            self.taken = self.raw.len();
            return;
        }
        loop {
            let rest = &self.raw[self.taken..];
            let Some(line) = rest.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size = std::str::from_utf8(&rest[..line])
                .ok()
                .and_then(|size| usize::from_str_radix(size.trim(), 16).ok())
                .expect("a chunk size");
            if size == 0 {
                self.ended = true;
                return;
            }
            if rest.len() < line + 2 + size + 2 {
                return;
            }
            let chunk = &rest[line + 2..line + 2 + size];
            self.body.push_str(&String::from_utf8_lossy(chunk));
            self.taken += line + 2 + size + 2;
        }
    }

    /// The head of the answer, once it has come.
    fn head(&mut self) -> String {
        let deadline = Instant::now() + PATIENCE;
        while self.head.is_none() && self.fill(deadline) {}
        self.head.clone().expect("an answer").0
    }

    fn status(&mut self) -> u16 {
        let head = self.head();
        head.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn header(&mut self, name: &str) -> Option<String> {
        let head = self.head();
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    /// The next JSON-RPC message and its SSE id (a JSON answer is one
    /// message with none); `None` once the answer is over.
    fn next_message(&mut self) -> Option<(Option<String>, Value)> {
        let deadline = Instant::now() + PATIENCE;
        let sse = self.head().contains("text/event-stream");
        loop {
            if sse {
                let rest = &self.body[self.handed..];
                let events = self.parser.push(rest.as_bytes()).expect("no bound");
                self.handed = self.body.len();
                self.events.extend(events);
                // An event without data (a priming event) is no message.
                if let Some(event) = self.events.pop_front() {
                    if event.data.is_empty() {
                        continue;
                    }
                    return Some((event.id, serde_json::from_str(&event.data).unwrap()));
                }
            }
            if self.ended {
                let rest = self.body[self.handed..].trim().to_owned();
                self.handed = self.body.len();
                return (!sse && !rest.is_empty())
                    .then(|| (None, serde_json::from_str(&rest).unwrap()));
            }
            self.fill(deadline);
        }
    }

    /// The next message, which must come.
    fn next(&mut self) -> (Option<String>, Value) {
        self.next_message()
            .unwrap_or_else(|| panic!("the stream ended early: {self:?}"))
    }
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.raw))
    }
}

fn tools_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// The run a question's SSE id (`RUN.SEQ`) names.
fn run_of(position: &str) -> String {
    position.rsplit_once('.').unwrap().0.to_owned()
}

/// A tool asks; the client's stream goes away (2025-11-25: that does not
/// cancel the call); `notifications/cancelled` for the call still reaches
/// the run.
#[test]
fn notifications_cancelled_reaches_a_call_whose_client_left() {
    let server = Server::start();
    let session = server.session(json!({"elicitation": {}}));
    let mut call = session.post(&tools_call(
        1,
        "test_elicitation",
        json!({"message": "who are you?"}),
    ));
    let (position, question) = call.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let run_id = run_of(&position.expect("the question has an SSE id"));
    drop(call);
    assert_eq!(
        session.task_status(&run_id, "input_required"),
        "input_required"
    );

    session.notify(
        "notifications/cancelled",
        json!({"requestId": 1, "reason": "user pressed stop"}),
    );
    assert_eq!(session.task_status(&run_id, "cancelled"), "cancelled");
    assert_eq!(
        server.kinds(&run_id),
        ["started", "input_required", "canceled"]
    );
}

/// `runs_cancel` reaches a run waiting for its client; the client is told
/// its question wants no answer any more, then gets the call's result.
#[test]
fn runs_cancel_reaches_a_run_waiting_for_input() {
    let server = Server::start();
    let session = server.session(json!({"sampling": {}}));
    let mut call = session.post(&tools_call(1, "test_sampling", json!({"prompt": "2+2?"})));
    let (position, question) = call.next();
    assert_eq!(question["method"], "sampling/createMessage", "{question}");
    let run_id = run_of(&position.expect("the question has an SSE id"));
    assert_eq!(
        session.task_status(&run_id, "input_required"),
        "input_required"
    );

    let mut cancel = session.post(&tools_call(2, "runs_cancel", json!({"run_id": run_id})));
    let (_, cancelled) = cancel.next();
    assert_eq!(
        cancelled["result"]["structuredContent"]["cancelled"], true,
        "{cancelled}"
    );
    let (_, withdrawn) = call.next();
    assert_eq!(
        withdrawn,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": question["id"], "reason": "the tool stopped waiting for this answer"}})
    );
    let (_, result) = call.next();
    assert_eq!(result["id"], 1, "{result}");
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert_eq!(
        server.kinds(&run_id),
        ["started", "input_required", "canceled"]
    );
}

/// A task (2025-11-25) whose run asks is `input_required` in `tasks/get`;
/// `tasks/cancel` reaches it.
#[test]
fn tasks_cancel_reaches_a_task_waiting_for_input() {
    let server = Server::start();
    let session = server.session(json!({"elicitation": {}}));
    let mut call = tools_call(1, "test_elicitation", json!({"message": "who are you?"}));
    call["params"]["task"] = json!({});
    let (_, created) = session.post(&call).next();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    assert_eq!(
        session.task_status(&task_id, "input_required"),
        "input_required"
    );
    let cancelled = session.request("tasks/cancel", json!({"taskId": task_id}));
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        server.kinds(&task_id),
        ["started", "input_required", "canceled"]
    );
}

/// A task whose run asks is `input_required`; its `tasks/result` stream
/// carries the question, naming the task, and the answer finishes the run.
#[test]
fn a_task_waiting_for_input_is_input_required_and_asks_on_tasks_result() {
    let server = Server::start();
    let session = server.session(json!({"elicitation": {}}));
    let mut call = tools_call(1, "test_elicitation", json!({"message": "who are you?"}));
    call["params"]["task"] = json!({});
    let (_, created) = session.post(&call).next();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    assert_eq!(
        session.task_status(&task_id, "input_required"),
        "input_required"
    );

    let result =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}});
    let mut result = session.post(&result);
    let (_, question) = result.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(
        question["params"]["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": task_id})
    );
    assert_eq!(session.answer(&question), 202);
    let (_, done) = result.next();
    assert_eq!(done["id"], 2, "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("User response: action=accept"), "{text}");
    assert_eq!(session.task_status(&task_id, "completed"), "completed");
    assert_eq!(
        server.kinds(&task_id),
        ["started", "input_required", "input_ended", "completed"]
    );
}

/// A question has a time limit: nobody answers, the client is told the
/// question is void, and the tool (which does not handle it) fails the run
/// saying the client did not answer in time. A late answer changes nothing.
#[test]
fn an_unanswered_question_fails_the_run_when_its_time_is_up() {
    let server = Server::start();
    let session = server.session(json!({"elicitation": {}}));
    let arguments = json!({"message": "who are you?", "timeout_ms": 1000});
    let mut call = session.post(&tools_call(1, "test_elicitation", arguments));
    let (position, question) = call.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let run_id = run_of(&position.expect("the question has an SSE id"));
    let (_, withdrawn) = call.next();
    assert_eq!(
        withdrawn["method"], "notifications/cancelled",
        "{withdrawn}"
    );
    assert_eq!(withdrawn["params"]["requestId"], question["id"]);
    let (_, result) = call.next();
    assert_eq!(result["id"], 1, "{result}");
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the client did not answer the Elicitation request within 1s"),
        "{text}"
    );
    assert_eq!(session.answer(&question), 202);
    assert_eq!(session.task_status(&run_id, "failed"), "failed");
    assert_eq!(
        server.kinds(&run_id),
        ["started", "input_required", "input_ended", "failed"]
    );
}

/// A client whose call stream broke while the tool waited for it resumes
/// with `Last-Event-ID` and is asked again — the same request, so its answer
/// to either delivery is the answer, taken once.
#[test]
fn a_resumed_stream_asks_the_pending_question_again() {
    let server = Server::start();
    let session = server.session(json!({"elicitation": {}}));
    let mut call = session.post(&tools_call(
        1,
        "test_elicitation",
        json!({"message": "who are you?"}),
    ));
    let (position, question) = call.next();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let position = position.expect("the question has an SSE id to resume after");
    drop(call);

    let mut resumed = session.resume(&position);
    assert_eq!(resumed.status(), 200);
    let (_, again) = resumed.next();
    assert_eq!(again, question, "the resumed stream asks the same question");
    assert_eq!(session.answer(&again), 202);
    assert_eq!(session.answer(&question), 202);
    let (_, result) = resumed.next();
    assert_eq!(result["id"], 1, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("User response: action=accept"), "{text}");
    assert_eq!(
        server.kinds(&run_of(&position)),
        ["started", "input_required", "input_ended", "completed"]
    );
}

/// `weir serve --stdio` on `dir`, with the fixtures.
fn stdio_server(dir: &Path) -> Child {
    Command::new(WEIR)
        .arg("--data-dir")
        .arg(dir)
        .args(["serve", "--stdio", "--fixtures", "--no-exec"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Over stdio, the client closing its end cancels its runs, also one that
/// waits for the client's answer; the log shows the wait, then the cancel.
#[test]
fn closing_stdin_cancels_a_run_waiting_for_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = stdio_server(dir.path());
    let mut stdin = server.stdin.take().unwrap();
    let (lines, received) = mpsc::channel();
    let stdout = BufReader::new(server.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = lines.send(serde_json::from_str::<Value>(&line).unwrap());
        }
    });
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    let initialized = received.recv_timeout(PATIENCE).expect("initialized");
    assert_eq!(initialized["id"], 0, "{initialized}");
    let call = tools_call(1, "test_elicitation", json!({"message": "who are you?"}));
    for message in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let question = loop {
        let message = received.recv_timeout(PATIENCE).expect("the question");
        if message["method"] == "elicitation/create" {
            break message;
        }
    };
    assert!(question["id"].is_string(), "{question}");
    drop(stdin);
    let until = Instant::now() + PATIENCE;
    while server.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "weir serve --stdio did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }

    let runs = Command::new(WEIR)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap();
    let run = &runs.as_array().expect("a list of runs")[0];
    assert_eq!(run["state"], "canceled", "{run}");
    let run_id = run["run_id"].as_str().unwrap();
    let events = Command::new(WEIR)
        .arg("--data-dir")
        .arg(dir.path())
        .args(["runs", "events", run_id, "--json"])
        .output()
        .unwrap();
    let kinds: Vec<Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["type"].clone())
        .collect();
    assert_eq!(kinds, ["started", "input_required", "canceled"]);
}
