//! The edges of what `weir serve` and `weir runs` accept, driven through the
//! real binary with the bytes an attacker or a broken client would send:
//! seq numbers near 2^64 (`?from=`, `Last-Event-ID`, `runs_events`,
//! `--from`), `Host`/`Origin`/`Content-Type`/`Authorization` values that
//! only start like good ones, and a stdio line far over the size limit.
//!
//! HTTP goes over a plain TCP socket, so a test can send what no HTTP
//! client library would (two `Host` headers, bytes that are not UTF-8).
//! Every wait is bounded: a server that hangs fails its test, never the
//! suite.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Progress, RunError};
use weir_runtime::{RunContext, RunHandle, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const MAX: &str = "18446744073709551615"; // 2^64 - 1
const HALF: &str = "9223372036854775808"; // 2^63
const BELOW_HALF: &str = "9223372036854775807"; // 2^63 - 1

/// Emits `steps` progress events; with `hold`, then waits to be released.
struct Steps {
    release: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Tool for Steps {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("steps", "emits progress", json!({"type": "object"}))
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        for i in 1..=args["steps"].as_u64().unwrap_or(3) {
            let _ = ctx
                .emit(Progress {
                    progress: i as f64,
                    ..Default::default()
                })
                .await;
        }
        let _ = ctx.flush().await;
        if args["hold"].as_bool() == Some(true) {
            self.release.notified().await;
        }
        Ok(Completed::default())
    }
}

/// Runs written to a data directory by this process, as a second `weir`
/// would: `weir serve` and `weir runs` read them from the same file.
struct Runs {
    runtime: tokio::runtime::Runtime,
    scheduler: Scheduler,
    release: Arc<tokio::sync::Notify>,
}

impl Runs {
    fn open(dir: &Path) -> Runs {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let release = Arc::new(tokio::sync::Notify::new());
        let tool = Arc::new(Steps {
            release: release.clone(),
        });
        let scheduler = runtime.block_on(async {
            let log = SqliteLog::open(dir.join("weir.db"), SqliteOptions::default()).unwrap();
            let config = SchedulerConfig {
                retention: None,
                ..SchedulerConfig::default()
            };
            Scheduler::start(Arc::new(log), vec![tool], config)
                .await
                .unwrap()
        });
        Runs {
            runtime,
            scheduler,
            release,
        }
    }

    fn start(&self, arguments: Value) -> RunHandle {
        self.runtime.block_on(async {
            self.scheduler
                .submit("steps", arguments, RunOptions::default())
                .await
                .unwrap()
        })
    }

    /// A run of five events (seq 0 to 4) that has completed.
    fn finished(&self) -> String {
        let run = self.start(json!({"steps": 3}));
        let id = run.run_id().to_string();
        self.runtime.block_on(run.finished()).unwrap();
        id
    }

    /// A run that has written seq 0 to 2 and waits for [`Runs::release`].
    fn held(&self) -> (String, RunHandle) {
        let run = self.start(json!({"steps": 2, "hold": true}));
        let id = run.run_id().to_string();
        let until = Instant::now() + Duration::from_secs(10);
        while self
            .runtime
            .block_on(self.scheduler.log().get_run(run.run_id()))
            .unwrap()
            .is_none_or(|summary| summary.events < 3)
        {
            assert!(Instant::now() < until, "the held run never wrote 3 events");
            std::thread::sleep(Duration::from_millis(10));
        }
        (id, run)
    }

    fn release(&self, run: RunHandle) {
        self.release.notify_one();
        self.runtime.block_on(run.finished()).unwrap();
    }
}

/// `weir serve --http 127.0.0.1:0` on a data directory, killed on drop.
struct HttpServer {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
}

impl HttpServer {
    fn start(dir: &Path, extra: &[&str]) -> HttpServer {
        let mut child = Command::new(WEIR)
            .arg("--data-dir")
            .arg(dir)
            .args(["serve", "--http", "127.0.0.1:0", "--no-exec"])
            .args(extra)
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
        HttpServer { child, addr }
    }

    /// Sends one raw request and reads the whole answer, within 10 s.
    fn send(&self, request: &[u8]) -> Answer {
        let mut connection = Connection::open(&self.addr, request);
        let ended = connection.wait(Instant::now() + Duration::from_secs(10));
        let answer = connection.answer();
        assert!(
            ended,
            "no complete answer within 10 s (a hang?); got so far: {answer:?}"
        );
        answer
    }

    /// `POST /mcp` of one stateless (2026-07-28) request, with `headers`.
    fn post(&self, headers: &[(&str, &[u8])], method: &str, params: Value) -> Answer {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.send(&request(
            "POST",
            "/mcp",
            headers,
            body.to_string().as_bytes(),
        ))
    }

    /// CPU time the server has used, in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after ")".
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.1 request with exactly these headers (plus `Content-Length`
/// and `Connection: close`).
fn request(method: &str, path: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Vec<u8> {
    let mut bytes = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    for (name, value) in headers {
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    bytes.extend_from_slice(b"Connection: close\r\n\r\n");
    bytes.extend_from_slice(body);
    bytes
}

const LOCAL: (&str, &[u8]) = ("Host", b"127.0.0.1");
const JSON: (&str, &[u8]) = ("Content-Type", b"application/json");

/// One request on its own connection, read as it arrives.
struct Connection {
    stream: TcpStream,
    received: Vec<u8>,
}

impl Connection {
    fn open(addr: &str, request: &[u8]) -> Connection {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(request).unwrap();
        Connection {
            stream,
            received: Vec::new(),
        }
    }

    /// Reads until the server closes the connection (`true`) or `deadline`
    /// passes (`false`).
    fn wait(&mut self, deadline: Instant) -> bool {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut buffer) {
                Ok(0) => return true,
                Ok(n) => self.received.extend_from_slice(&buffer[..n]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return false;
                }
                Err(_) => return true, // reset: the answer is what came
            }
        }
    }

    /// What has arrived so far.
    fn answer(&self) -> Answer {
        Answer::parse(&self.received)
    }
}

/// An HTTP response: status (0 when none came), head, body (de-chunked).
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn parse(bytes: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(bytes);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return Answer {
                status: 0,
                head: text.into_owned(),
                body: String::new(),
            };
        };
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        let body = if chunked {
            let mut rest = body;
            let mut out = String::new();
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
        Answer {
            status,
            head: head.to_owned(),
            body,
        }
    }

    /// The SSE events of the body (read with weir-core's parser): `(event
    /// name, last event id, data)`.
    fn events(&self) -> Vec<(String, Option<String>, String)> {
        crate::sse_body::events(&self.body)
            .into_iter()
            .map(|event| (event.event.unwrap_or_default(), event.id, event.data))
            .collect()
    }

    /// The JSON-RPC message of a JSON body, or of the last SSE event.
    fn message(&self) -> Value {
        let data = match self.events().last() {
            Some((_, _, data)) if self.head.contains("text/event-stream") => data.clone(),
            _ => self.body.clone(),
        };
        serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// `weir ARGS` over `dir`, which must exit within 20 s.
fn weir_within(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(WEIR)
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "weir {args:?} did not end within 20 s (a hang?); printed {:?}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

// Finding 5: seq numbers near 2^64.

/// `?from=` and `Last-Event-ID` past the end of a finished run: the stream
/// ends at once with `end` (no event, no replay from 0, no spinning), and a
/// `Last-Event-ID` that is not a seq is a 400.
#[test]
fn run_events_from_past_the_end_end_at_once_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::open(dir.path());
    let id = runs.finished();
    let server = HttpServer::start(dir.path(), &[]);
    let events = |query: &str, last: Option<&str>| {
        let mut headers = vec![LOCAL];
        if let Some(last) = last {
            headers.push(("Last-Event-ID", last.as_bytes()));
        }
        let path = format!("/runs/{id}/events{query}");
        server.send(&request("GET", &path, &headers, b""))
    };

    let cpu_before = server.cpu_ticks();
    for (query, last) in [
        (format!("?from={MAX}"), None),
        (format!("?from={HALF}"), None),
        (format!("?from={BELOW_HALF}"), None),
        ("?from=5".to_owned(), None),
        (String::new(), Some(MAX)),
        (String::new(), Some(BELOW_HALF)),
        ("?from=0".to_owned(), Some("4")),
    ] {
        let answer = events(&query, last);
        assert_eq!(answer.status, 200, "{query} {last:?}: {answer:?}");
        let sent = answer.events();
        let [(name, id, data)] = sent.as_slice() else {
            panic!("{query} {last:?}: expected one end event, got {sent:?}");
        };
        assert_eq!((name.as_str(), id), ("end", &None), "{query} {last:?}");
        let end: Value = serde_json::from_str(data).unwrap();
        assert_eq!(end["state"], "completed");
        assert_eq!(end["next_seq"], 5);
    }
    // Seven streams that each ended at once cost the server next to no CPU:
    // nothing spun.
    std::thread::sleep(Duration::from_millis(500));
    let spent = server.cpu_ticks() - cpu_before;
    assert!(spent < 100, "the server used {spent} ticks of CPU");

    // Within the run, resume is exact.
    let resumed = events("", Some("2"));
    let ids: Vec<_> = resumed.events().into_iter().map(|(_, id, _)| id).collect();
    assert_eq!(ids, [Some("3".to_owned()), Some("4".to_owned())]);

    for bad in ["abc", "-1", "+1", " 1x", "18446744073709551616", "4.0"] {
        let answer = events("", Some(bad));
        assert_eq!(answer.status, 400, "Last-Event-ID {bad:?}: {answer:?}");
        assert!(
            answer.body.contains("Last-Event-ID") && answer.body.contains("not a seq"),
            "{answer:?}"
        );
    }
}

/// Past the end of a run that is still going means "nothing yet": the
/// stream stays open and quiet, and ends with `end` when the run does.
#[test]
fn run_events_from_past_the_end_of_a_working_run_wait_for_its_end() {
    let dir = tempfile::tempdir().unwrap();
    // The server first: at start it closes runs left working as interrupted.
    let server = HttpServer::start(dir.path(), &[]);
    let runs = Runs::open(dir.path());
    let (id, run) = runs.held();
    let path = format!("/runs/{id}/events?from={MAX}");
    let mut stream = Connection::open(&server.addr, &request("GET", &path, &[LOCAL], b""));
    let ended = stream.wait(Instant::now() + Duration::from_secs(1));
    assert!(!ended, "the stream ended while the run was going");
    let answer = stream.answer();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.events(), [], "nothing yet");

    runs.release(run);
    let ended = stream.wait(Instant::now() + Duration::from_secs(10));
    let answer = stream.answer();
    assert!(ended, "the stream did not end with the run: {answer:?}");
    let sent = answer.events();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, "end");
    let end: Value = serde_json::from_str(&sent[0].2).unwrap();
    assert_eq!(
        (&end["state"], &end["next_seq"]),
        (&json!("completed"), &json!(4))
    );
}

/// `runs_events` with a `from` past the end returns no events and says the
/// run is done, however large the number and however JSON spells it.
#[test]
fn runs_events_from_past_the_end_returns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::open(dir.path());
    let id = runs.finished();
    let server = HttpServer::start(dir.path(), &[]);
    let page = |from: Value| {
        let arguments = json!({"run_id": id, "from": from});
        let answer = server.post(
            &[LOCAL, JSON],
            "tools/call",
            json!({"name": "runs_events", "arguments": arguments}),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.message()["result"]["structuredContent"].clone()
    };
    let max: u64 = MAX.parse().unwrap();
    for (from, next_seq) in [
        (json!(max), json!(max)),
        (json!(1u64 << 63), json!(1u64 << 63)),
        (json!(5), json!(5)),
        (json!(1e30), json!(max)),
    ] {
        let page = page(from.clone());
        assert_eq!(page["events"], json!([]), "from {from}: {page}");
        assert_eq!(page["next_seq"], next_seq, "from {from}");
        assert_eq!(page["done"], true, "from {from}");
    }
    // Within the run, a page is exact: `5.0` is 5, `2.0` is 2.
    let within = page(json!(2.0));
    let seqs: Vec<&Value> = within["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| &event["seq"])
        .collect();
    assert_eq!(seqs, [2, 3, 4]);
    assert_eq!(within["next_seq"], 5);
}

/// `weir runs events|tail --from` past the end print nothing and end at once
/// with the run's outcome, locally and over HTTP.
#[test]
fn runs_events_and_tail_from_past_the_end_print_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::open(dir.path());
    let id = runs.finished();
    let id = id.as_str();
    let server = HttpServer::start(dir.path(), &[]);
    let url = format!("http://{}/mcp", server.addr);
    for from in [MAX, HALF, BELOW_HALF, "5"] {
        let remote = ["--url", url.as_str()];
        for (args, extra) in [
            (["runs", "events", id, "--from", from], &[][..]),
            (["runs", "tail", id, "--from", from], &[][..]),
            (["runs", "tail", id, "--from", from], &remote[..]),
        ] {
            let mut args = args.to_vec();
            args.extend(extra);
            let output = weir_within(dir.path(), &args);
            assert_eq!(
                output.status.code(),
                Some(0),
                "{args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            assert_eq!(String::from_utf8_lossy(&output.stdout), "", "{args:?}");
        }
    }
    // Within the run, `--from` is exact.
    let tail = weir_within(
        dir.path(),
        &["runs", "tail", id, "--from", "3", "--url", &url, "--json"],
    );
    let seqs: Vec<u64> = String::from_utf8_lossy(&tail.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [3, 4]);
}

// Finding 6: headers parsed whole.

/// A stateless `tools/list` with these headers; its status.
fn status_with(server: &HttpServer, headers: &[(&str, &[u8])]) -> u16 {
    let answer = server.post(headers, "tools/list", json!({}));
    if answer.status == 200 {
        assert!(answer.message()["result"]["tools"].is_array(), "{answer:?}");
    }
    answer.status
}

/// Each value of header `name` in `cases`, sent with `others`, against the
/// status it must get; every mismatch is reported at once.
fn assert_statuses(
    server: &HttpServer,
    name: &str,
    others: &[(&str, &[u8])],
    cases: &[(&[u8], u16)],
) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(value, want)| {
            let mut headers = others.to_vec();
            headers.push((name, value));
            let got = status_with(server, &headers);
            (got != *want).then(|| {
                let value = String::from_utf8_lossy(value);
                format!("{name}: {value:?} got {got}, want {want}")
            })
        })
        .collect();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// DNS rebinding: only a `Host` that is loopback (or allowed) as a whole
/// is served; one that merely starts like one, or is not text, is refused.
#[test]
fn hosts_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(dir.path(), &["--memory", "--allow-host", "weir.internal"]);
    let cases: &[(&[u8], u16)] = &[
        (b"127.0.0.1", 200),
        (b"127.0.0.1:8765", 200),
        (b"localhost:8765", 200),
        (b"LOCALHOST", 200),
        (b"[::1]:8765", 200),
        (b"weir.internal", 200),
        (b"Weir.Internal:8765", 200),
        // Finding 6: a foreign name after a loopback prefix.
        (b"127.0.0.1:80.evil.com", 400),
        (b"[::1]evil.com", 400),
        (b"localhost:8765@evil.com", 400),
        (b"127.0.0.1\xff", 400),
        (b"localh\xc3\xb6st", 400),
        (b"localhost.evil.com", 403),
        (b"127.0.0.1.evil.com", 403),
        (b"weir.internal.evil.com", 403),
        (b"evil.com", 403),
    ];
    assert_statuses(&server, "Host", &[JSON], cases);
    // No Host, or two: a bad request (RFC 9112 §3.2).
    assert_eq!(status_with(&server, &[JSON]), 400);
    assert_eq!(
        status_with(&server, &[LOCAL, ("Host", b"evil.com"), JSON]),
        400
    );
    // The refusal says what to do.
    let refused = server.post(&[("Host", b"evil.com"), JSON], "tools/list", json!({}));
    assert!(
        refused.body.contains("--allow-host evil.com"),
        "{refused:?}"
    );
}

/// An `Origin` is `scheme://host[:port]`, loopback or allowed, as a whole.
#[test]
fn origins_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(
        dir.path(),
        &["--memory", "--allow-origin", "https://app.example"],
    );
    let cases: &[(&[u8], u16)] = &[
        (b"http://localhost:3000", 200),
        (b"https://127.0.0.1", 200),
        (b"http://[::1]:8080", 200),
        (b"https://app.example", 200),
        (b"https://APP.example:443", 200),
        (b"http://localhost:3000.evil.com", 403),
        (b"http://[::1]evil.com", 403),
        (b"http://localhost\xff", 403),
        (b"http://localhost:3000/path", 403),
        (b"https://app.example.evil", 403),
        (b"http://app.example", 403),
        (b"null", 403),
        (b"localhost", 403),
    ];
    assert_statuses(&server, "Origin", &[LOCAL, JSON], cases);
    let two = [
        LOCAL,
        ("Origin", &b"http://localhost"[..]),
        ("Origin", b"http://evil.com"),
        JSON,
    ];
    assert_eq!(status_with(&server, &two), 403);
}

/// `Content-Type` is JSON by its type and subtype, not by its first bytes.
#[test]
fn content_types_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(dir.path(), &["--memory"]);
    let cases: &[(&[u8], u16)] = &[
        (b"application/json", 200),
        (b"application/json; charset=utf-8", 200),
        (b"Application/JSON;charset=UTF-8", 200),
        (b"application/jsonx", 415),
        (b"application/json-seq", 415),
        (b"application/json; charset=latin1", 415),
        (b"application/json garbage", 415),
        (b"application/json\xff", 415),
        (b"text/plain", 415),
    ];
    assert_statuses(&server, "Content-Type", &[LOCAL], cases);
    assert_eq!(status_with(&server, &[LOCAL]), 415);
}

/// The bearer scheme in any case; the token exactly.
#[test]
fn bearer_tokens_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start(dir.path(), &["--memory", "--token", "s3cret"]);
    let cases: &[(&[u8], u16)] = &[
        (b"Bearer s3cret", 200),
        (b"bearer s3cret", 200),
        (b"BEARER s3cret", 200),
        (b"Bearer s3cre", 401),
        (b"Bearer s3cret2", 401),
        (b"Bearer S3CRET", 401),
        (b"Bearers3cret", 401),
        (b"Basic czNjcmV0", 401),
        (b"Bearer s3cret\xff", 401),
    ];
    assert_statuses(&server, "Authorization", &[LOCAL, JSON], cases);
    assert_eq!(status_with(&server, &[LOCAL, JSON]), 401);
    let two = [
        LOCAL,
        JSON,
        ("Authorization", &b"Bearer s3cret"[..]),
        ("Authorization", b"Bearer s3cret"),
    ];
    assert_eq!(status_with(&server, &two), 401);
}

// Finding 8: an oversized stdio line.

/// The server's peak resident memory, from /proc.
fn peak_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// A line 16 times the 4 MiB limit is refused with the usual error while
/// memory stays flat, and the next request is served.
#[test]
fn an_oversized_stdio_line_is_skipped_in_bounded_memory() {
    const LINE: usize = 64 << 20;
    let mut child = Command::new(WEIR)
        .args(["serve", "--stdio", "--memory", "--no-exec"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Kill(child);
    let (sender, replies) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let next = || {
        let line = replies
            .recv_timeout(Duration::from_secs(30))
            .expect("the server answers within 30 s");
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let ping = |id: u64| {
        format!(
            "{}\n",
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
        )
    };

    stdin.write_all(ping(1).as_bytes()).unwrap();
    assert_eq!(next()["id"], 1);
    let before = peak_rss_bytes(child.0.id());

    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..LINE / chunk.len() {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\n").unwrap();
        stdin.write_all(ping(2).as_bytes()).unwrap();
        stdin
    });
    let refused = next();
    assert_eq!(refused["id"], Value::Null, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "message larger than 4194304 bytes; send smaller messages"
    );
    assert_eq!(next()["id"], 2, "served after the oversized line");
    let _stdin = writer.join().unwrap();

    let grown = peak_rss_bytes(child.0.id()).saturating_sub(before);
    assert!(
        grown < 24 << 20,
        "peak RSS grew by {} MiB for a {} MiB line",
        grown >> 20,
        LINE >> 20
    );
}
