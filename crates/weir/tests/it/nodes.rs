//! Several nodes on one Redis (issue 15), through the real binaries: a real
//! `redis-server` (AOF `appendfsync always`, in a temporary directory, on a
//! free port) and two or three `weir serve --http --fixtures --redis …`
//! processes.
//!
//! A run started on node A is followed from B and C (`weir runs tail
//! --url`, resumed across nodes; plain SSE with `Last-Event-ID`), its task
//! read from B and cancelled from C; a node killed with SIGKILL has its runs
//! closed `interrupted` by a survivor within a bounded time; Redis killed
//! and restarted mid-run loses nothing; a call a busy node has no slot for
//! is executed by an idle one; a 2025-11-25 call stream left on one node
//! is resumed on another, by its session's caller only; a run of an
//! upstream's tool (issue 26) started on A is followed and cancelled from
//! B, the cancel reaching the upstream process. In every case the
//! events a client put together from its resumes are the run's log
//! exactly: dense from 0, none twice, one terminal event, last.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const SESSIONS: &str = "2025-11-25";
const STATELESS: &str = "2026-07-28";
/// Leases short enough that a dead node is noticed within seconds.
const LEASE_MS: &str = "1500";

/// A `redis-server` with its data in `dir`, killed on drop.
struct Redis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Redis::spawn(dir.path(), port);
        Redis { child, port, dir }
    }

    fn spawn(dir: &Path, port: u16) -> Child {
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "could not start redis-server ({error}): these tests need it on PATH; \
                     install it with `apt-get install redis-server` (scripts/test does when root)"
                )
            });
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        for line in stdout.lines() {
            let line = line.unwrap();
            if line.contains("Ready to accept connections") {
                return child;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server did not start: {seen}");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// SIGKILL, then start again on the same port and files.
    fn crash_and_restart(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.child = Redis::spawn(self.dir.path(), self.port);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `weir serve --http --fixtures --redis URL --node NAME`, killed on drop.
struct Node {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start(redis: &Redis, name: &str) -> Node {
        Node::start_with(redis, name, &[])
    }

    fn start_with(redis: &Redis, name: &str, extra: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(WEIR)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--http", "127.0.0.1:0", "--fixtures"])
            .args(["--redis", &redis.url(), "--node", name])
            .args(["--node-lease-ms", LEASE_MS])
            .args(extra)
            .env_remove("WEIR_TOKEN")
            .env_remove("WEIR_TOKENS_FILE")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (found, addr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut seen = String::new();
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
                if let Some(rest) = seen.split("serving MCP at http://").nth(1)
                    && rest.contains('/')
                {
                    let _ = found.send(Ok(rest.split('/').next().unwrap().to_owned()));
                    seen.clear();
                }
            }
            let _ = found.send(Err(seen));
        });
        let addr = addr
            .recv_timeout(Duration::from_secs(60))
            .expect("weir serve says where it serves within 60 s")
            .unwrap_or_else(|stderr| panic!("weir serve --node {name} did not start: {stderr}"));
        Node {
            child,
            addr,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// One HTTP request on its own connection: status, head and body
    /// (de-chunked), within 30 s.
    fn send(&self, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
        let method = if body.is_empty() { "GET" } else { "POST" };
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut received = Vec::new();
        stream
            .read_to_end(&mut received)
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"));
        let text = String::from_utf8_lossy(&received).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            let (mut rest, mut out) = (body, String::new());
            while let Some((size, after)) = rest.split_once("\r\n") {
                let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                if size == 0 || after.len() < size {
                    break;
                }
                out.push_str(&after[..size]);
                rest = after[size..].trim_start_matches("\r\n");
            }
            out
        } else {
            body.to_owned()
        };
        (status, head.to_owned(), body)
    }

    /// A JSON-RPC request (in `session`, else stateless): its message.
    fn rpc(&self, session: Option<&str>, method: &str, mut params: Value) -> Value {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        match session {
            Some(session) => {
                headers.push(("Mcp-Session-Id", session));
                headers.push(("MCP-Protocol-Version", SESSIONS));
            }
            None => {
                params["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": STATELESS,
                    "io.modelcontextprotocol/clientCapabilities": {},
                });
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, head, body) = self.send("/mcp", &headers, &body.to_string());
        assert_eq!(status, 200, "{method}: {head}\n{body}");
        let data = if head.contains("text/event-stream") {
            body.lines()
                .rev()
                .find_map(|line| line.strip_prefix("data:"))
                .unwrap_or_default()
                .trim()
                .to_owned()
        } else {
            body
        };
        serde_json::from_str(&data).unwrap_or_else(|error| panic!("{method}: {error}: {data}"))
    }

    /// A 2025-11-25 session: its id.
    fn session(&self) -> String {
        self.session_as(None, json!({"tasks": {}}))
    }

    /// A 2025-11-25 session whose client declares `capabilities`, with the
    /// bearer token `token` if any: its id.
    fn session_as(&self, token: Option<&str>, capabilities: Value) -> String {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": SESSIONS,
            "capabilities": capabilities,
            "clientInfo": {"name": "nodes-test", "version": "0"},
        }});
        let authorization = token.map(|token| format!("Bearer {token}"));
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(authorization) = &authorization {
            headers.push(("Authorization", authorization));
        }
        let (status, head, _) = self.send("/mcp", &headers, &body.to_string());
        assert_eq!(status, 200, "{head}");
        head.lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_owned())
            })
            .expect("a session id")
    }

    /// Starts the `stream` fixture as a task on this node: its run id.
    fn start_stream(&self, count: u64, interval_ms: u64) -> String {
        let session = self.session();
        let created = self.rpc(
            Some(&session),
            "tools/call",
            json!({
                "name": "stream",
                "arguments": {"count": count, "interval_ms": interval_ms, "size": 32},
                "task": {"ttl": 600_000},
            }),
        );
        created["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {created}"))
            .to_owned()
    }

    /// `GET /runs/{id}/events` from `Last-Event-ID: last` to the run's
    /// end: each event's (SSE id, JSON).
    fn sse_after(&self, run_id: &str, last: u64) -> Vec<(u64, Value)> {
        let last = last.to_string();
        let (status, head, body) = self.send(
            &format!("/runs/{run_id}/events"),
            &[("Last-Event-ID", last.as_str())],
            "",
        );
        assert_eq!(status, 200, "{head}\n{body}");
        // Run events carry their seq as the SSE id; `end` and `heartbeat`
        // carry none of their own (an id persists from the event before).
        crate::sse_body::events(&body)
            .into_iter()
            .filter(|event| !matches!(event.event.as_deref(), Some("end" | "heartbeat")))
            .map(|event| {
                let seq = event.id.as_deref().and_then(|id| id.parse().ok());
                let seq = seq.unwrap_or_else(|| panic!("an event without a seq id: {event:?}"));
                let value: Value = serde_json::from_str(&event.data).unwrap();
                // Its own id, not one persisting from before (a read failure's).
                assert_eq!(value["seq"], seq, "{event:?}");
                (seq, value)
            })
            .collect()
    }
}

/// One HTTP request to `/mcp` on its own connection, its answer read as it
/// arrives: a test can leave an SSE stream in the middle, as a client that
/// went away would.
struct Sse {
    reader: BufReader<TcpStream>,
    status: u16,
    head: String,
    chunked: bool,
    /// Body text read and not yet parsed (all of it, for [`Sse::rest`]).
    body: String,
    /// weir-core's parser, and the events it gave not yet handed out.
    parser: weir_core::sse::SseParser,
    events: std::collections::VecDeque<weir_core::sse::SseEvent>,
    ended: bool,
}

impl Sse {
    fn open(node: &Node, method: &str, headers: &[(&str, &str)], body: &str) -> Sse {
        let mut request = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        let stream = TcpStream::connect(&node.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        (&stream).write_all(request.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim_end().is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        Sse {
            reader,
            status,
            head,
            chunked,
            body: String::new(),
            parser: weir_core::sse::SseParser::new(usize::MAX),
            events: std::collections::VecDeque::new(),
            ended: false,
        }
    }

    /// The next SSE message, as (its id, its JSON); `None` once the body
    /// ends.
    fn next(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Some((event.id, serde_json::from_str(&event.data).unwrap()));
            }
            if self.ended {
                return None;
            }
            self.read_more();
            let text = std::mem::take(&mut self.body);
            let events = self.parser.push(text.as_bytes()).expect("no bound");
            self.events.extend(events);
        }
    }

    /// The rest of the body, as text.
    fn rest(mut self) -> String {
        while !self.ended {
            self.read_more();
        }
        self.body
    }

    fn read_more(&mut self) {
        if !self.chunked {
            let mut buffer = [0u8; 8192];
            let n = self.reader.read(&mut buffer).unwrap();
            self.ended = n == 0;
            self.body.push_str(&String::from_utf8_lossy(&buffer[..n]));
            return;
        }
        let mut size = String::new();
        self.reader.read_line(&mut size).unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            self.ended = true;
            return;
        }
        let mut chunk = vec![0; size + 2];
        self.reader.read_exact(&mut chunk).unwrap();
        self.body
            .push_str(std::str::from_utf8(&chunk[..size]).unwrap());
    }
}

/// The headers of a request in 2025-11-25 session `session`, with the
/// bearer token `token` if any, resuming after `last` if given.
fn session_headers(
    session: &str,
    token: Option<&str>,
    last: Option<&str>,
) -> Vec<(String, String)> {
    let mut headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("MCP-Protocol-Version".to_owned(), SESSIONS.to_owned()),
    ];
    if let Some(token) = token {
        headers.push(("Authorization".to_owned(), format!("Bearer {token}")));
    }
    if let Some(last) = last {
        headers.push(("Last-Event-ID".to_owned(), last.to_owned()));
    }
    headers
}

fn borrowed(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

/// The `tools/call` of the `stream` fixture, `count` items 50 ms apart,
/// whose partial results come as notifications.
fn streaming_call(request_id: &str, count: u64) -> String {
    json!({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "stream",
        "arguments": {"count": count, "interval_ms": 50, "size": 16},
        "_meta": {"partialResultToken": "p"},
    }})
    .to_string()
}

/// Starts `streaming_call` in `session` on `node` and reads its stream
/// until `partials` partial results came, then leaves it: the messages it
/// read, and the SSE id of the last one that had one.
fn call_and_leave(
    node: &Node,
    session: &str,
    token: Option<&str>,
    request_id: &str,
    count: u64,
    partials: usize,
) -> (Vec<(Option<String>, Value)>, String) {
    let headers = session_headers(session, token, None);
    let mut stream = Sse::open(
        node,
        "POST",
        &borrowed(&headers),
        &streaming_call(request_id, count),
    );
    assert_eq!(stream.status, 200, "{}", stream.head);
    let mut messages = Vec::new();
    while messages.iter().filter(|(_, m)| is_partial(m)).count() < partials {
        let message = stream
            .next()
            .unwrap_or_else(|| panic!("the call stream ended early: {messages:?}"));
        messages.push(message);
    }
    // The client goes away: the connection closes here.
    drop(stream);
    let last = messages
        .iter()
        .rev()
        .find_map(|(id, _)| id.clone())
        .expect("events with SSE ids");
    (messages, last)
}

fn is_partial(message: &Value) -> bool {
    message["method"] == "notifications/tools/partial_result"
}

/// The log seq in SSE id `{run_id}.{seq}`, checked to be of run `run_id`.
fn seq_of(id: &str, run_id: &str) -> u64 {
    let (run, seq) = id.rsplit_once('.').unwrap();
    assert_eq!(run, run_id, "SSE id {id}");
    seq.parse().unwrap()
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `weir runs tail ID --url URL --from N --json`: the events it prints, as
/// they come.
struct Tail {
    child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Tail {
    fn start(node: &Node, run_id: &str, from: u64) -> Tail {
        let mut child = Command::new(WEIR)
            .args(["runs", "tail", run_id, "--json", "--url", &node.url()])
            .args(["--from", &from.to_string()])
            .env_remove("WEIR_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if sender.send(serde_json::from_str(&line).unwrap()).is_err() {
                    break;
                }
            }
        });
        Tail { child, lines }
    }

    /// The next `n` events, each within `wait`.
    fn take(&self, n: usize, wait: Duration) -> Vec<Value> {
        (0..n)
            .map(|i| {
                self.lines
                    .recv_timeout(wait)
                    .unwrap_or_else(|_| panic!("event {i} of {n} did not come within {wait:?}"))
            })
            .collect()
    }

    /// Every event up to the terminal one, within `wait` in all.
    fn to_end(&self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "the run did not end within {wait:?}; got {} events, last {:?}",
                    events.len(),
                    events.last()
                )
            });
            let terminal = is_terminal(&event);
            events.push(event);
            if terminal {
                return events;
            }
        }
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_terminal(event: &Value) -> bool {
    matches!(
        event["type"].as_str(),
        Some("completed" | "failed" | "canceled")
    )
}

/// The invariants of a log put together from resumes: seqs dense from 0,
/// none twice, exactly one terminal event, last. Returns the terminal one.
fn assert_whole_log(events: &[Value]) -> Value {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], i as u64, "event {i} is out of place: {event}");
    }
    let terminals = events.iter().filter(|event| is_terminal(event)).count();
    assert_eq!(terminals, 1, "{terminals} terminal events");
    let last = events.last().unwrap().clone();
    assert!(is_terminal(&last), "the terminal event is not last: {last}");
    assert_eq!(events[0]["type"], "started");
    last
}

/// A run started on A is followed from B, resumed from C where B's stream
/// broke off, replayed from A by `Last-Event-ID`, its task read on B and
/// cancelled from C: one log, whichever node a client asks.
#[test]
fn a_run_started_on_one_node_is_followed_and_cancelled_from_the_others() {
    let redis = Redis::start();
    let (a, b, c) = (
        Node::start(&redis, "a"),
        Node::start(&redis, "b"),
        Node::start(&redis, "c"),
    );
    let run_id = a.start_stream(2_000, 10);

    // B follows from the start; its stream breaks off after 30 events.
    let from_b = Tail::start(&b, &run_id, 0).take(30, Duration::from_secs(20));
    let next = from_b.len() as u64;
    // C picks up where B left off, and cancels the run meanwhile.
    let on_c = Tail::start(&c, &run_id, next);
    let more = on_c.take(5, Duration::from_secs(20));
    let task = b.rpc(None, "tasks/get", json!({"taskId": run_id}));
    assert_eq!(
        task["result"]["status"], "working",
        "task read on B: {task}"
    );
    let cancelled = c.rpc(
        None,
        "tools/call",
        json!({"name": "runs_cancel", "arguments": {"run_id": run_id, "reason": "asked on C"}}),
    );
    assert_eq!(
        cancelled["result"]["structuredContent"]["cancelled"], true,
        "{cancelled}"
    );
    let mut whole = from_b.clone();
    whole.extend(more);
    whole.extend(on_c.to_end(Duration::from_secs(20)));
    let terminal = assert_whole_log(&whole);
    assert_eq!(terminal["type"], "canceled", "{terminal}");
    assert_eq!(terminal["reason"], "asked on C", "{terminal}");

    // Plain SSE on A, resumed with Last-Event-ID after B's part: C's part.
    let last = next - 1;
    let replayed = a.sse_after(&run_id, last);
    let seqs: Vec<u64> = replayed.iter().map(|(seq, _)| *seq).collect();
    let expected: Vec<u64> = (next..whole.len() as u64).collect();
    assert_eq!(seqs, expected, "SSE ids after Last-Event-ID {last}");
    for (seq, event) in &replayed {
        assert_eq!(
            event, &whole[*seq as usize],
            "event {seq} read on A and on C"
        );
    }
    let task = b.rpc(None, "tasks/get", json!({"taskId": run_id}));
    assert_eq!(task["result"]["status"], "cancelled", "{task}");
    let listed = c.rpc(
        None,
        "tools/call",
        json!({"name": "runs_get", "arguments": {"run_id": run_id}}),
    );
    assert_eq!(
        listed["result"]["structuredContent"]["run"]["node"], "a",
        "runs_get on C names the node that executed it: {listed}"
    );
}

/// Node A dies by SIGKILL mid-run: a survivor closes its run `failed`
/// (`interrupted`) within a bounded time, and the follower on B sees the
/// whole log once.
#[test]
fn a_killed_node_s_runs_are_closed_by_a_survivor() {
    let redis = Redis::start();
    let mut a = Node::start(&redis, "a");
    let b = Node::start(&redis, "b");
    let run_id = a.start_stream(100_000, 10);
    let other_on_a = a.start_stream(100_000, 10);
    // B's own run goes on through it all.
    let on_b = b.start_stream(300, 10);
    let tail = Tail::start(&b, &run_id, 0);
    let mut whole = tail.take(20, Duration::from_secs(20));
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = Instant::now();
    whole.extend(tail.to_end(Duration::from_secs(15)));
    let closed_after = killed.elapsed();
    let terminal = assert_whole_log(&whole);
    assert_eq!(terminal["type"], "failed", "{terminal}");
    assert_eq!(terminal["error"]["code"], "interrupted", "{terminal}");
    let other = Tail::start(&b, &other_on_a, 0).to_end(Duration::from_secs(15));
    assert_eq!(assert_whole_log(&other)["error"]["code"], "interrupted");
    let own = Tail::start(&b, &on_b, 0).to_end(Duration::from_secs(30));
    assert_eq!(assert_whole_log(&own)["type"], "completed");
    // Two lease periods and two sweeps, with room for a slow machine.
    assert!(
        closed_after < Duration::from_secs(8),
        "closed {closed_after:?} after the kill"
    );
    eprintln!("a dead node's run was closed {closed_after:?} after SIGKILL");
    // In the 2026 task design a tool's failure is a completed task whose
    // result is an error.
    let task = b.rpc(None, "tasks/get", json!({"taskId": run_id}));
    assert_eq!(task["result"]["result"]["isError"], true, "{task}");
}

/// Redis is killed and restarted (AOF `always`) while a run streams. The
/// outage lasts as long as Redis takes to start again: milliseconds, far
/// inside the 10 s a store operation is retried and the nodes' lease
/// (1.5 s here), so the run goes on and completes with every item once, in
/// order (docs/operations.md, "When Redis restarts"). Only if the outage
/// itself outlasted the lease (a machine stalled for seconds) may the run
/// end the documented other way: `failed`, `interrupted` (its node's lease
/// lapsed) or `internal` naming Redis as unreachable — with the items it
/// did stream, in order, once. Either way the follower's log, resumed
/// across the outage, has every event once, and the log read afterwards
/// on the executing node is the same, event for event: nothing already
/// seen is lost or rewritten.
#[test]
fn a_redis_restart_mid_run_loses_nothing() {
    const ITEMS: u64 = 300;
    let mut redis = Redis::start();
    let a = Node::start(&redis, "a");
    let b = Node::start(&redis, "b");
    let run_id = a.start_stream(ITEMS, 10);
    let tail = Tail::start(&b, &run_id, 0);
    let mut whole = tail.take(20, Duration::from_secs(20));
    let down = Instant::now();
    redis.crash_and_restart();
    let outage = down.elapsed();
    whole.extend(tail.to_end(Duration::from_secs(60)));
    let terminal = assert_whole_log(&whole);
    let items = item_indexes(&whole);
    let lease = Duration::from_millis(LEASE_MS.parse().unwrap());
    match terminal["type"].as_str() {
        Some("completed") => {
            assert_eq!(
                items,
                (0..ITEMS).collect::<Vec<_>>(),
                "every item, once, in order"
            );
            assert_eq!(terminal["structured"]["count"], ITEMS, "{terminal}");
        }
        Some("failed") if outage >= lease => {
            let error = &terminal["error"];
            let message = error["message"].as_str().unwrap_or_default();
            assert!(
                error["code"] == "interrupted"
                    || (error["code"] == "internal" && message.contains("Redis is unreachable")),
                "Redis was down {outage:?}; not a documented failure: {terminal}"
            );
            let streamed = items.len() as u64;
            assert_eq!(
                items,
                (0..streamed).collect::<Vec<_>>(),
                "the items it streamed, once, in order"
            );
        }
        _ => panic!(
            "Redis was down {outage:?} (under the {lease:?} lease): the run must complete, not {terminal}"
        ),
    }
    // Read again from the executing node, after the fact: the same log,
    // event for event, the events B saw before the crash included.
    let replayed = a.sse_after(&run_id, 0);
    let seqs: Vec<u64> = replayed.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..whole.len() as u64).collect::<Vec<_>>(),
        "SSE ids after Last-Event-ID 0"
    );
    for (seq, event) in &replayed {
        assert_eq!(
            event, &whole[*seq as usize],
            "event {seq} as B followed it and as A replays it"
        );
    }
    eprintln!(
        "after a Redis restart mid-run (down {outage:?}): {} events, ended {}",
        whole.len(),
        terminal["type"]
    );
}

/// The index of each item the `stream` fixture's `partial` events carry
/// (text mode: the index, zero-padded to 8 digits, then `:`), in log order.
fn item_indexes(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter(|event| event["type"] == "partial")
        .flat_map(|event| event["content"].as_array().cloned().unwrap_or_default())
        .map(|block| {
            let text = block["text"].as_str().unwrap_or_default();
            text.get(..8)
                .and_then(|digits| digits.parse().ok())
                .unwrap_or_else(|| panic!("not a stream item: {block}"))
        })
        .collect()
}

/// A cancel whose pub/sub message the executing node missed (its
/// subscription was down, as while Redis restarts) still reaches it: the
/// request waits in Redis for the node's next sweep.
#[test]
fn a_cancel_whose_message_was_lost_still_reaches_the_executing_node() {
    let redis = Redis::start();
    let a = Node::start(&redis, "a");
    let b = Node::start(&redis, "b");
    let run_id = a.start_stream(3_000, 10);
    let tail = Tail::start(&b, &run_id, 0);
    let mut whole = tail.take(5, Duration::from_secs(20));

    // Keep every subscription down (each node reconnects with backoff)
    // while B asks for the cancel, so A cannot hear the message.
    let (stop, stopped) = mpsc::channel::<()>();
    let killer = {
        let port = redis.port;
        std::thread::spawn(move || {
            while stopped.try_recv().is_err() {
                redis_command(port, "CLIENT KILL TYPE pubsub");
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let cancelled = b.rpc(
        None,
        "tools/call",
        json!({"name": "runs_cancel", "arguments": {"run_id": run_id, "reason": "asked on B"}}),
    );
    assert_eq!(
        cancelled["result"]["structuredContent"]["cancelled"], true,
        "{cancelled}"
    );
    std::thread::sleep(Duration::from_millis(700));
    stop.send(()).unwrap();
    killer.join().unwrap();

    whole.extend(tail.to_end(Duration::from_secs(20)));
    let terminal = assert_whole_log(&whole);
    assert_eq!(terminal["type"], "canceled", "{terminal}");
    assert_eq!(terminal["reason"], "asked on B", "{terminal}");
    // The stream alone would take 30 s; a sweep comes every 0.75 s.
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "cancelled {:?} after it was asked",
        asked.elapsed()
    );
}

/// Sends Redis one command (inline form) and returns its first reply line.
fn redis_command(port: u16, command: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(format!("{command}\r\n").as_bytes())
        .unwrap();
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).unwrap();
    reply
}

/// `weir serve --redis` with no Redis there stops at once and says so; two
/// live nodes may not share a name.
#[test]
fn a_node_refuses_to_start_without_redis_or_under_a_live_node_s_name() {
    let dir = tempfile::tempdir().unwrap();
    let closed_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serve = |url: &str, name: &str| {
        Command::new(WEIR)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--http", "127.0.0.1:0", "--fixtures"])
            .args(["--redis", url, "--node", name])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let unreachable = serve(&format!("redis://127.0.0.1:{closed_port}/0"), "x");
    let stderr = String::from_utf8_lossy(&unreachable.stderr);
    assert!(!unreachable.status.success());
    assert!(
        stderr.contains("does not answer") && stderr.contains("--redis"),
        "{stderr}"
    );
    let redis = Redis::start();
    let _a = Node::start(&redis, "a");
    let twin = serve(&redis.url(), "a");
    let stderr = String::from_utf8_lossy(&twin.stderr);
    assert!(!twin.status.success());
    assert!(
        stderr.contains("a live node is already named \"a\""),
        "{stderr}"
    );
}

/// A call that node A has no slot for (`--max-concurrent 1`, busy) is taken
/// from the shared queue and executed by idle node B; A's client follows it
/// on A all the same, and A's own run goes on there.
#[test]
fn a_busy_node_s_call_is_executed_by_an_idle_node() {
    let redis = Redis::start();
    let a = Node::start_with(&redis, "a", &["--max-concurrent", "1"]);
    let _b = Node::start(&redis, "b");
    let first = a.start_stream(300, 10);
    // A's one slot is taken once its run has started.
    let _ = Tail::start(&a, &first, 0).take(2, Duration::from_secs(20));
    let second = a.start_stream(50, 10);
    let whole = Tail::start(&a, &second, 0).to_end(Duration::from_secs(30));
    assert_eq!(assert_whole_log(&whole)["type"], "completed");
    assert_eq!(
        whole[0]["node"], "b",
        "started on the idle node: {}",
        whole[0]
    );
    let summary = a.rpc(
        None,
        "tools/call",
        json!({"name": "runs_get", "arguments": {"run_id": second}}),
    );
    assert_eq!(
        summary["result"]["structuredContent"]["run"]["node"], "b",
        "{summary}"
    );
    let own = Tail::start(&a, &first, 0).to_end(Duration::from_secs(30));
    assert_eq!(assert_whole_log(&own)["type"], "completed");
    assert_eq!(own[0]["node"], "a");
}

/// Cancels of offered runs: one still waiting in the shared queue (every
/// node busy) ends `canceled` where it was asked, and is never executed
/// afterwards; one an idle node took is cancelled on that node when asked
/// on the busy one.
#[test]
fn offered_runs_are_cancelled_whether_waiting_or_taken() {
    let redis = Redis::start();
    let a = Node::start_with(&redis, "a", &["--max-concurrent", "1"]);
    let b = Node::start_with(&redis, "b", &["--max-concurrent", "1"]);
    let on_a = a.start_stream(400, 10);
    let _ = Tail::start(&a, &on_a, 0).take(2, Duration::from_secs(20));
    let on_b = b.start_stream(400, 10);
    let _ = Tail::start(&b, &on_b, 0).take(2, Duration::from_secs(20));
    // Both busy: this one waits in the queue.
    let waiting = a.start_stream(10, 10);
    let cancel = |node: &Node, run_id: &str, reason: &str| {
        let answer = node.rpc(
            None,
            "tools/call",
            json!({"name": "runs_cancel", "arguments": {"run_id": run_id, "reason": reason}}),
        );
        assert_eq!(
            answer["result"]["structuredContent"]["cancelled"], true,
            "{answer}"
        );
    };
    cancel(&a, &waiting, "while queued");
    let log = Tail::start(&b, &waiting, 0).to_end(Duration::from_secs(20));
    let terminal = assert_whole_log(&log);
    assert_eq!(
        (terminal["type"].as_str(), terminal["reason"].as_str()),
        (Some("canceled"), Some("while queued"))
    );
    assert_eq!(log.len(), 2, "never executed: {log:?}");

    // B frees up and takes the next offer; A's client cancels it on A.
    cancel(&b, &on_b, "make room");
    let taken = a.start_stream(100_000, 10);
    let tail = Tail::start(&a, &taken, 0);
    let mut log = tail.take(3, Duration::from_secs(20));
    assert_eq!(log[0]["node"], "b", "{}", log[0]);
    cancel(&a, &taken, "asked on the busy node");
    log.extend(tail.to_end(Duration::from_secs(20)));
    let terminal = assert_whole_log(&log);
    assert_eq!(terminal["reason"], "asked on the busy node", "{terminal}");
    // The queued one never ran later either.
    let again = a.sse_after(&waiting, 0);
    assert_eq!(again.len(), 1, "{again:?}");
}

/// A 2025-11-25 call stream started on node A and left after a few events
/// is resumed on node B, which does not hold the session, with the
/// session's id and `Last-Event-ID`: B sends the rest, no partial result
/// missing and none twice, then the call's response, with its request id,
/// once. On B, a session id that is not the call's (made up, or another
/// session's) gets 404.
#[test]
fn a_call_stream_is_resumed_on_a_node_that_does_not_hold_the_session() {
    let redis = Redis::start();
    let (a, b) = (Node::start(&redis, "a"), Node::start(&redis, "b"));
    let session = a.session_as(None, json!({"partialResults": {}}));
    let count = 40;
    let (on_a, last) = call_and_leave(&a, &session, None, "call-7", count, 5);
    let run_id = last.rsplit_once('.').unwrap().0.to_owned();

    for (other, why) in [
        ("0123456789abcdef0123456789abcdef".to_owned(), "made up"),
        (b.session_as(None, json!({})), "another session, on B"),
        (a.session_as(None, json!({})), "another session, on A"),
    ] {
        let headers = session_headers(&other, None, Some(&last));
        let refused = Sse::open(&b, "GET", &borrowed(&headers), "");
        let status = refused.status;
        let body = refused.rest();
        assert_eq!(status, 404, "{why}: {body}");
        assert!(!body.contains("partial_result"), "{why}: {body}");
    }

    let headers = session_headers(&session, None, Some(&last));
    let mut on_b = Sse::open(&b, "GET", &borrowed(&headers), "");
    assert_eq!(on_b.status, 200, "{}", on_b.head);
    let mut resumed = Vec::new();
    while let Some(message) = on_b.next() {
        resumed.push(message);
    }

    // SSE ids: of the call's run, on B all after the one A sent last, and
    // never going back.
    let last_seq = seq_of(&last, &run_id);
    let seqs: Vec<u64> = on_a
        .iter()
        .chain(&resumed)
        .filter_map(|(id, _)| id.as_deref().map(|id| seq_of(id, &run_id)))
        .collect();
    assert!(seqs.is_sorted(), "SSE ids go back: {seqs:?}");
    for (id, message) in &resumed {
        if let Some(id) = id {
            assert!(seq_of(id, &run_id) > last_seq, "{id} again on B: {message}");
        }
    }
    // Every partial result once, in order, whichever node sent it.
    let partials: Vec<u64> = on_a
        .iter()
        .chain(&resumed)
        .filter(|(_, message)| is_partial(message))
        .map(|(_, message)| message["params"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(partials, (0..count).collect::<Vec<_>>());
    assert!(
        resumed.iter().filter(|(_, m)| is_partial(m)).count() > 0,
        "B sent no partial result"
    );
    // The response, once, last, with the call's request id.
    let responses: Vec<&Value> = on_a
        .iter()
        .chain(&resumed)
        .map(|(_, message)| message)
        .filter(|message| message.get("method").is_none())
        .collect();
    assert_eq!(responses.len(), 1, "{responses:?}");
    let response = responses[0];
    assert_eq!(Some(response), resumed.last().map(|(_, m)| m));
    assert_eq!(response["id"], "call-7", "{response}");
    assert_eq!(
        response["result"]["structuredContent"]["count"], count,
        "{response}"
    );
}

/// With credentials, a call stream resumed on another node is its caller's
/// only: another caller naming the same session gets 404, and so does an
/// admin, who may see the run but not use another's session.
#[test]
fn only_the_session_s_caller_resumes_its_call_stream_on_another_node() {
    use std::os::unix::fs::PermissionsExt;
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "alice token:alice-token\nbob token:bob-token\nroot token:root-token admin\n",
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let tokens = ["--tokens-file", tokens.to_str().unwrap()];
    let a = Node::start_with(&redis, "a", &tokens);
    let b = Node::start_with(&redis, "b", &tokens);
    let session = a.session_as(Some("alice-token"), json!({"partialResults": {}}));
    let (_, last) = call_and_leave(&a, &session, Some("alice-token"), "mine", 40, 2);
    for token in ["bob-token", "root-token"] {
        let headers = session_headers(&session, Some(token), Some(&last));
        let refused = Sse::open(&b, "GET", &borrowed(&headers), "");
        let status = refused.status;
        let body = refused.rest();
        assert_eq!(status, 404, "{token}: {body}");
        assert!(!body.contains("partial_result"), "{token}: {body}");
    }
    let headers = session_headers(&session, Some("alice-token"), Some(&last));
    let mut resumed = Sse::open(&b, "GET", &borrowed(&headers), "");
    assert_eq!(resumed.status, 200, "{}", resumed.head);
    let (_, first) = resumed.next().expect("alice's stream, resumed");
    assert!(is_partial(&first), "{first}");
}

/// Issue 26: two nodes wrapping the same upstream (the Python SDK server of
/// tests/wrap/, `--upstream slow=-- PYTHON sdk_server.py`, each node its own
/// process of it): a run of its tool started through A as a task is
/// followed from B and cancelled from B. The upstream process that ran the
/// call records the cancel (`notifications/cancelled` reached it through
/// A), it never finishes the call, and the run's log, as B's follower put
/// it together, ends with exactly one terminal event, `canceled`.
#[test]
fn an_upstream_run_started_on_one_node_is_followed_and_cancelled_from_another() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("WRAP_SDK_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo.join("target/clients/py-mcp1/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: `scripts/wrap-tests install` makes it (scripts/test does)",
        python.display()
    );
    let scratch = tempfile::tempdir().unwrap();
    let recorded = scratch.path().join("upstream.jsonl");
    let upstream = format!(
        "slow=-- env WRAP_LOG={} {} {}",
        recorded.display(),
        python.display(),
        repo.join("tests/wrap/sdk_server.py").display()
    );
    let events = |kind: &str| -> Vec<Value> {
        std::fs::read_to_string(&recorded)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|event| event["event"] == kind)
            .collect()
    };
    let redis = Redis::start();
    let a = Node::start_with(&redis, "a", &["--upstream", &upstream]);
    let b = Node::start_with(&redis, "b", &["--upstream", &upstream]);
    // Both nodes listed the upstream's tools: two processes of it, listening.
    let until = Instant::now() + Duration::from_secs(20);
    while events("listening").len() < 2 {
        assert!(Instant::now() < until, "{:?}", events("listening"));
        std::thread::sleep(Duration::from_millis(50));
    }

    let session = a.session();
    let created = a.rpc(
        Some(&session),
        "tools/call",
        json!({
            "name": "slow__slow",
            "arguments": {"duration_s": 60, "interval_s": 0.2},
            "task": {"ttl": 600_000},
        }),
    );
    let run_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created}"))
        .to_owned();

    // B follows it from the start: the upstream's progress, as it comes.
    let on_b = Tail::start(&b, &run_id, 0);
    let first = on_b.take(6, Duration::from_secs(20));
    assert!(
        first
            .iter()
            .filter(|event| event["type"] == "progress")
            .count()
            >= 2,
        "{first:#?}"
    );
    let start = events("start");
    assert_eq!(start.len(), 1, "{start:?}");
    let cancelled = b.rpc(
        None,
        "tools/call",
        json!({"name": "runs_cancel", "arguments": {"run_id": run_id, "reason": "asked on B"}}),
    );
    assert_eq!(
        cancelled["result"]["structuredContent"]["cancelled"], true,
        "{cancelled}"
    );
    let mut whole = first;
    whole.extend(on_b.to_end(Duration::from_secs(20)));
    let terminal = assert_whole_log(&whole);
    assert_eq!(terminal["type"], "canceled", "{terminal}");
    assert_eq!(terminal["reason"], "asked on B", "{terminal}");

    // The process that ran the call saw the cancel, and stopped.
    let until = Instant::now() + Duration::from_secs(10);
    while events("cancelled").is_empty() {
        assert!(Instant::now() < until, "the upstream never saw the cancel");
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = events("cancelled");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["pid"], start[0]["pid"], "{seen:?} {start:?}");
    let ticks = events("progress").len();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        events("progress").len(),
        ticks,
        "it went on after the cancel"
    );
    assert!(events("done").is_empty());

    // A and B read the same log: one terminal event, canceled, by A.
    let got = a.rpc(
        None,
        "tools/call",
        json!({"name": "runs_events", "arguments": {"run_id": run_id, "limit": 1000}}),
    );
    let logged = got["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap_or_else(|| panic!("{got}"))
        .clone();
    assert_eq!(logged, whole);
    let run = b.rpc(
        None,
        "tools/call",
        json!({"name": "runs_get", "arguments": {"run_id": run_id}}),
    );
    assert_eq!(
        run["result"]["structuredContent"]["run"]["node"], "a",
        "{run}"
    );
    assert_eq!(
        run["result"]["structuredContent"]["run"]["tool"], "slow__slow",
        "{run}"
    );
}

/// `weir runs list --json` of the Redis at `url`.
#[cfg(feature = "plan")]
fn listed_runs(url: &str) -> Vec<Value> {
    let output = Command::new(WEIR)
        .args(["runs", "list", "--json", "--limit", "100", "--redis", url])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `weir plan run -- --redis URL` (issue 25) is a node like `weir serve
/// --redis URL`: its plan's run and its step's are in that Redis, the
/// step a child of the plan, and the data directory holds none of them.
#[cfg(feature = "plan")]
#[test]
fn plan_run_with_redis_keeps_its_runs_in_redis() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yaml");
    std::fs::write(
        &plan,
        "name: on-redis\nsteps:\n  - id: hello\n    tool: test_simple_text\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let output = Command::new(WEIR)
        .args(["plan", "run"])
        .arg(&plan)
        .arg("--data-dir")
        .arg(&data)
        .args(["--", "--fixtures", "--no-exec", "--redis", &redis.url()])
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let runs = listed_runs(&redis.url());
    let plan_run = runs
        .iter()
        .find(|run| run["tool"] == "plan_run")
        .unwrap_or_else(|| panic!("no plan_run in the Redis: {runs:?}"));
    assert_eq!(plan_run["state"], "completed", "{plan_run}");
    let steps: Vec<_> = runs
        .iter()
        .filter(|run| run["parent"] == plan_run["run_id"])
        .map(|run| {
            (
                run["tool"].as_str().unwrap(),
                run["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(steps, [("test_simple_text", "completed")]);
    // Nothing went to the data directory's store: it was never made.
    assert!(!data.join("weir.db").exists());
}
