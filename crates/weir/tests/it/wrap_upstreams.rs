//! Upstreams beyond `weir wrap`'s one stdio server (issue 26), through the
//! real binary: an HTTP upstream declared by URL (`weir serve --upstream
//! NAME=URL`), the FastMCP server of tests/wrap in its Streamable HTTP
//! mode (progress, result, a cancel its process sees, a restart), and the
//! reference server's (a 2025-11-25 session server: the session it lost
//! in a restart made again, the call that found it lost sent again).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wrap::{Peer, progress, terminal, upstream_status};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// tests/wrap/, and the Python whose packages a server there needs
/// (`var` if set, else `target/clients/VENV`, which scripts/wrap-tests
/// makes).
fn python_for(var: &str, venv: &str) -> (PathBuf, PathBuf) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/clients").join(venv).join("bin/python"));
    assert!(
        python.exists(),
        "{} is missing: `scripts/wrap-tests install` makes it (scripts/test does)",
        python.display()
    );
    (python, repo.join("tests/wrap"))
}

/// A free port of 127.0.0.1 (free when asked; the server binds it next).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The FastMCP server of tests/wrap, serving Streamable HTTP on `port`,
/// recording what its process sees in `log`.
struct FastMcpHttp {
    child: Child,
}

impl FastMcpHttp {
    fn start(port: u16, log: &Path) -> FastMcpHttp {
        let (python, dir) = python_for("WRAP_FASTMCP_PYTHON", "py-fastmcp");
        let child = Command::new(python)
            .arg(dir.join("fastmcp_server.py"))
            .args(["http", &port.to_string()])
            .env("WRAP_LOG", log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "FastMCP never listened on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        FastMcpHttp { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for FastMcpHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the upstream processes recorded, one JSON object per line.
fn recorded(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Waits until the upstream has recorded an event `kind`; returns them all.
fn await_recorded(log: &Path, kind: &str) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let events = recorded(log);
        if events.iter().any(|event| event["event"] == kind) {
            return events;
        }
        assert!(Instant::now() < until, "no {kind} recorded: {events:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_http_upstream_declared_by_url_streams_cancels_and_serves_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("upstream.jsonl");
    let port = free_port();
    let server = FastMcpHttp::start(port, &log);
    let declared = format!("slow=http://127.0.0.1:{port}/mcp");
    let mut weir = Peer::start(
        WEIR,
        &[
            "serve",
            "--stdio",
            "--memory",
            "--no-exec",
            "--upstream",
            &declared,
        ],
    );
    let tools = weir.request("tools/list", json!({}))["result"]["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "slow__slow"),
        "{tools}"
    );

    // Progress as the upstream sent it, then its result.
    let id = weir.call("slow__slow", json!({"duration_s": 3, "interval_s": 1}));
    let (notes, answer) = weir.reply(id, Duration::from_secs(30));
    assert_eq!(
        answer["result"]["content"][0]["text"], "slept 3 s",
        "{answer}"
    );
    let seen = progress(&notes);
    let theirs: Vec<_> = seen
        .iter()
        .filter(|(_, total, _)| *total == Some(3.0))
        .map(|(_, _, message)| message.clone().unwrap_or_default())
        .collect();
    assert_eq!(theirs, ["1 of 3 s", "2 of 3 s", "3 of 3 s"], "{seen:?}");
    let run_id = weir.newest_run();
    let events = weir.events(&run_id);
    // Each log line too (FastMCP's data is an object, `{"msg": "tick 1", …}`).
    let ticks = events
        .iter()
        .filter(|event| {
            event["type"] == "log" && event["text"].as_str().is_some_and(|t| t.contains("tick "))
        })
        .count();
    assert_eq!(ticks, 3, "{events:#?}");
    assert_eq!(terminal(&events), ["completed"]);

    // A cancel reaches the upstream's process; the run ends canceled once.
    let id = weir.call("slow__slow", json!({"duration_s": 30, "interval_s": 1}));
    let first = weir.next(Duration::from_secs(20));
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let run_id = weir.newest_run();
    weir.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}),
    );
    weir.await_state(&run_id, "canceled");
    let seen = await_recorded(&log, "cancelled");
    let cancelled: Vec<&Value> = seen
        .iter()
        .filter(|event| event["event"] == "cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{seen:#?}");
    assert!(
        cancelled[0]["after_s"].as_f64().unwrap() < 10.0,
        "{seen:#?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(terminal(&weir.events(&run_id)), ["canceled"]);

    // The server restarts (a new process): weir's next call reaches it.
    // (No session was lost here: `restarts` stays 0. The session case is
    // the next test's.)
    let before = server.pid();
    drop(server);
    let server = FastMcpHttp::start(port, &log);
    let id = weir.call("slow__slow", json!({"duration_s": 1, "interval_s": 1}));
    let (_, answer) = weir.reply(id, Duration::from_secs(30));
    assert_eq!(
        answer["result"]["content"][0]["text"], "slept 1 s",
        "{answer}"
    );
    let starts: Vec<u64> = recorded(&log)
        .iter()
        .filter(|event| event["event"] == "start")
        .map(|event| event["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 3, "{starts:?}");
    assert_eq!(starts[2], u64::from(server.pid()), "{starts:?}");
    assert_ne!(starts[2], u64::from(before));
    let health = upstream_status(&mut weir, "slow");
    eprintln!("the HTTP upstream after its restart: {health}");
    assert_eq!(
        (health["transport"].clone(), health["state"].clone()),
        (json!("http"), json!("up")),
        "{health}"
    );
}

/// The reference server (`@modelcontextprotocol/server-everything`, pinned
/// in tests/third_party) in its Streamable HTTP mode on `port`: a 2025-11-25
/// session server, which forgets its sessions when it restarts.
struct EverythingHttp {
    child: Child,
}

impl EverythingHttp {
    fn start(port: u16) -> EverythingHttp {
        let entry = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/third_party/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        assert!(
            entry.exists(),
            "{} is missing: `npm ci` in tests/third_party",
            entry.display()
        );
        let child = Command::new("node")
            .arg(entry)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < until,
                "server-everything never listened on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        EverythingHttp { child }
    }
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_session_http_upstream_that_restarted_is_reconnected_by_the_next_call() {
    let port = free_port();
    let server = EverythingHttp::start(port);
    let declared = format!("everything=http://127.0.0.1:{port}/mcp");
    let mut weir = Peer::start(
        WEIR,
        &[
            "serve",
            "--stdio",
            "--memory",
            "--no-exec",
            "--upstream",
            &declared,
        ],
    );
    let echo = |weir: &mut Peer, text: &str| {
        let id = weir.call("everything__echo", json!({"message": text}));
        weir.reply(id, Duration::from_secs(30)).1
    };
    let answer = echo(&mut weir, "before");
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: before",
        "{answer}"
    );
    // Long-running operation: its progress, then its result.
    let id = weir.call(
        "everything__trigger-long-running-operation",
        json!({"duration": 2, "steps": 4}),
    );
    let (notes, answer) = weir.reply(id, Duration::from_secs(30));
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Long running operation completed"),
        "{answer}"
    );
    let theirs: Vec<f64> = progress(&notes)
        .iter()
        .filter(|(_, total, _)| *total == Some(4.0))
        .map(|(progress, _, _)| *progress)
        .collect();
    assert_eq!(theirs, [1.0, 2.0, 3.0, 4.0], "{notes:#?}");

    // A new process on the same port knows no session of the old one.
    drop(server);
    let _server = EverythingHttp::start(port);
    let answer = echo(&mut weir, "after");
    let health = upstream_status(&mut weir, "everything");
    eprintln!("the session upstream after its restart: {answer}\n{health}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: after",
        "{answer}\n{health}"
    );
}
