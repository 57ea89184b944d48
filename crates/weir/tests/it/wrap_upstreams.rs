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
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Waits (up to 30 s) until `server` listens on `port` of 127.0.0.1.
pub(crate) fn await_listening(port: u16, server: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "{server} never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
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
        await_listening(port, "FastMCP");
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

/// `weir serve --http` with an upstreams file and two named tokens, alice
/// and bob, each granted the upstream `counter` and weir's runs tools.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(dir: &Path, upstreams: &Path) -> Served {
        use std::io::BufRead;
        use std::os::unix::fs::PermissionsExt;
        let tokens = dir.join("tokens");
        let grant = "packs=upstream:counter,runs";
        std::fs::write(
            &tokens,
            format!("alice token:{ALICE} {grant}\nbob token:{BOB} {grant}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut child = Command::new(WEIR)
            .args(["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec"])
            .arg("--upstreams")
            .arg(upstreams)
            .arg("--tokens-file")
            .arg(&tokens)
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("weir serve says where it serves")
                .unwrap();
            if let Some(at) = line.find("serving MCP at ") {
                let rest = &line[at + "serving MCP at ".len()..];
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        // Keep reading, so that weir never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Served { child, url }
    }

    /// `weir call --url … --token TOKEN TOOL`: its stdout, trimmed.
    fn call(&self, token: &str, tool: &str) -> String {
        let output = Command::new(WEIR)
            .args(["call", "--url", &self.url, "--token", token, tool])
            .env_remove("WEIR_TOKEN")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        assert!(
            output.status.success(),
            "weir call {tool}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// `get_status`'s account of the upstream `counter`, as alice sees it.
    fn counter_status(&self) -> Value {
        let output = Command::new(WEIR)
            .args([
                "call",
                "--url",
                &self.url,
                "--token",
                ALICE,
                "--output",
                "jsonl",
                "get_status",
            ])
            .env_remove("WEIR_TOKEN")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find_map(|event| {
                let status = event.pointer("/structured/upstreams/counter")?;
                Some(status.clone())
            })
            .unwrap_or_else(|| panic!("no status of counter in {stdout}"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

/// An upstreams file declaring tests/wrap's FastMCP server (stdio) as
/// `counter`, with this `"weir"` object.
fn counter_upstreams(dir: &Path, log: &Path, weir: Value) -> PathBuf {
    let (python, wrap) = python_for("WRAP_FASTMCP_PYTHON", "py-fastmcp");
    let file = dir.join("upstreams.json");
    let declared = json!({"mcpServers": {"counter": {
        "command": python,
        "args": [wrap.join("fastmcp_server.py")],
        "env": {"WRAP_LOG": log},
        "weir": weir,
    }}});
    std::fs::write(&file, declared.to_string()).unwrap();
    file
}

/// The pid of the process that answered each `count` call, in order.
fn counted_by(log: &Path) -> Vec<u64> {
    recorded(log)
        .iter()
        .filter(|event| event["event"] == "count")
        .map(|event| event["pid"].as_u64().unwrap())
        .collect()
}

fn alive(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
}

#[test]
fn a_per_caller_upstream_keeps_each_tokens_state_in_its_own_process_until_idle() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("upstream.jsonl");
    let upstreams = counter_upstreams(
        dir.path(),
        &log,
        // Long enough that alice's process outlives bob's call, which
        // starts a Python process of its own: on a loaded machine (the
        // whole suite at once) that took over 3 s, and alice's third
        // call met a new process.
        json!({"isolation": "per-caller", "idleSeconds": 8}),
    );
    let weir = Served::start(dir.path(), &upstreams);
    // Each caller counts on its own.
    assert_eq!(weir.call(ALICE, "counter__count"), "count 1");
    assert_eq!(weir.call(ALICE, "counter__count"), "count 2");
    assert_eq!(weir.call(BOB, "counter__count"), "count 1");
    assert_eq!(weir.call(ALICE, "counter__count"), "count 3");
    let pids = counted_by(&log);
    let (alice, bob) = (pids[0], pids[2]);
    assert_eq!(pids, [alice, alice, bob, alice]);
    assert_ne!(alice, bob);
    // Neither is the process weir listed the tools with at start.
    let listed = recorded(&log)[0]["pid"].as_u64().unwrap();
    assert!(![alice, bob].contains(&listed), "{:#?}", recorded(&log));
    let status = weir.counter_status();
    assert_eq!(status["isolation"], "per-caller", "{status}");
    assert_eq!(status["idleSeconds"], 8.0, "{status}");
    let callers = &status["callers"];
    assert_eq!(callers["alice"]["state"], "up", "{status}");
    assert_eq!(callers["alice"]["calls"], 3, "{status}");
    assert_eq!(callers["bob"]["calls"], 1, "{status}");
    // Idle for its idleSeconds: both processes end, get_status drops them.
    let until = Instant::now() + Duration::from_secs(20);
    while alive(alice) || alive(bob) {
        assert!(Instant::now() < until, "still running after 20 s idle");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = weir.counter_status();
    assert_eq!(status["callers"], json!({}), "{status}");
    // The next call starts a new one, which counts from the start.
    assert_eq!(weir.call(ALICE, "counter__count"), "count 1");
    assert!(!counted_by(&log)[4..].contains(&alice));
}

#[test]
fn a_shared_upstream_keeps_one_state_for_every_caller() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("upstream.jsonl");
    let upstreams = counter_upstreams(dir.path(), &log, json!({}));
    let weir = Served::start(dir.path(), &upstreams);
    assert_eq!(weir.call(ALICE, "counter__count"), "count 1");
    assert_eq!(weir.call(BOB, "counter__count"), "count 2");
    assert_eq!(weir.call(ALICE, "counter__count"), "count 3");
    let pids = counted_by(&log);
    let listed = recorded(&log)[0]["pid"].as_u64().unwrap();
    assert_eq!(pids, [listed; 3]);
    let status = weir.counter_status();
    assert_eq!(status["callers"], Value::Null, "{status}");
    assert_eq!(status["calls"], 3, "{status}");
}
