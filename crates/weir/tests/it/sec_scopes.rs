//! Issue 22: per-token scopes, and the Redis store read defensively
//! (finding 12), through the real binary.
//!
//! Scopes: `weir serve --http --tokens-file` with a token held to
//! `find_references`, one held to `plan_run`, one with no grant (every
//! tool but the agent tools) and an admin. A token sees in `tools/list`
//! only what it may call; a call of anything else is answered exactly as a
//! call of a tool that does not exist; a plan started by a token held to
//! `plan_run` cannot run `execute_code` as a step (the plan fails, no
//! program runs); the admin sees every tool.
//!
//! Redis: a string where weir keeps its run index stops `weir serve
//! --redis` at start with an error naming the key; run records planted
//! under the index (missing fields, garbage, a string) leave `runs_list`
//! answering with the good runs; a key of the wrong type planted while
//! the server runs fails the next new run with an error naming the key.
//!
//! HTTP goes over a plain TCP socket, one request per connection, every
//! wait bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const STATELESS: &str = "2026-07-28";

/// `weir serve --http 127.0.0.1:0 …`, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

/// What `weir serve` wrote to stderr until it served, or until it exited.
fn start(dir: &Path, extra: &[&str]) -> Result<Server, String> {
    let mut child = Command::new(WEIR)
        .arg("--data-dir")
        .arg(dir)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(extra)
        .current_dir(dir)
        .env_remove("WEIR_TOKEN")
        .env_remove("WEIR_TOKENS_FILE")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (found, addr) = std::sync::mpsc::channel();
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
    let answer = addr
        .recv_timeout(Duration::from_secs(60))
        .expect("weir serve serves or exits within 60 s");
    match answer {
        Ok(addr) => Ok(Server { child, addr }),
        Err(stderr) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(stderr)
        }
    }
}

impl Server {
    /// A stateless JSON-RPC request as `token` (none: no header): the
    /// answer's message.
    fn rpc(&self, token: Option<&str>, method: &str, params: Value) -> Value {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let body = body.to_string();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            body.len()
        );
        if let Some(token) = token {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut received = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no complete answer to {method} within 60 s: {}",
                String::from_utf8_lossy(&received)
            );
            stream.set_read_timeout(Some(left)).unwrap();
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
        message(&String::from_utf8_lossy(&received))
    }

    /// The names `tools/list` shows `token`.
    fn tool_names(&self, token: Option<&str>) -> Vec<String> {
        let answer = self.rpc(token, "tools/list", json!({}));
        answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools: {answer}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn call(&self, token: Option<&str>, name: &str, arguments: Value) -> Value {
        self.rpc(
            token,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON-RPC message of an HTTP answer: its body (de-chunked), or the
/// last `data:` of an SSE body.
fn message(answer: &str) -> Value {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
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
    let data = if head.contains("text/event-stream") {
        crate::sse_body::last_data(&body).unwrap_or_default()
    } else {
        body
    };
    serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

/// A JSON-RPC error's `(code, message)`, which must be one.
fn rpc_error(answer: &Value) -> (i64, String) {
    let error = &answer["error"];
    assert!(error.is_object(), "not an error: {answer}");
    (
        error["code"].as_i64().unwrap(),
        error["message"].as_str().unwrap().to_owned(),
    )
}

/// A tokens file (mode 0600) of these lines.
fn tokens_file(dir: &Path, lines: &[&str]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("tokens");
    std::fs::write(&path, lines.join("\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A server whose tokens file holds `finder` (only `find_references`),
/// `planner` (only `plan_run`), `plain` (no grant) and `root` (admin).
fn scoped_server(dir: &Path) -> Server {
    let tokens = tokens_file(
        dir,
        &[
            "finder  token:finder-token tools=find_references",
            "planner token:planner-token tools=plan_run",
            "plain   token:plain-token",
            "root    token:root-token admin",
        ],
    );
    start(dir, &["--tokens-file", tokens.to_str().unwrap()])
        .unwrap_or_else(|stderr| panic!("weir serve did not start: {stderr}"))
}

const AGENT_TOOLS: [&str; 2] = ["agent_run", "roast"];

#[cfg(feature = "codeintel")]
#[test]
fn a_token_held_to_find_references_sees_and_calls_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = scoped_server(dir.path());
    let finder = Some("finder-token");
    assert_eq!(server.tool_names(finder), ["find_references"]);
    // Refused exactly as a tool that does not exist: same code, same
    // words, naming only what the token may call.
    let refused = rpc_error(&server.call(
        finder,
        "execute_code",
        json!({"language": "python", "code": "print(1)"}),
    ));
    let unknown = rpc_error(&server.call(finder, "no_such_tool", json!({})));
    assert_eq!(
        refused.1,
        "unknown tool \"execute_code\"; available tools: find_references"
    );
    assert_eq!(
        (refused.0, refused.1.replace("execute_code", "no_such_tool")),
        unknown
    );
    // weir's own tools are a pack too (`runs`), not granted here.
    let runs = rpc_error(&server.call(finder, "runs_list", json!({})));
    assert_eq!(
        runs.1,
        "unknown tool \"runs_list\"; available tools: find_references"
    );
    // Nothing ran: the admin sees no run at all.
    let listed = server.call(Some("root-token"), "runs_list", json!({}));
    assert_eq!(
        listed["result"]["structuredContent"]["runs"],
        json!([]),
        "{listed}"
    );
}

#[cfg(feature = "critique")]
#[test]
fn a_token_without_a_grant_gets_every_tool_but_the_agent_tools_and_the_admin_all() {
    let dir = tempfile::tempdir().unwrap();
    let server = scoped_server(dir.path());
    let plain = server.tool_names(Some("plain-token"));
    let all = server.tool_names(Some("root-token"));
    for agent in AGENT_TOOLS {
        assert!(!plain.contains(&agent.to_owned()), "{agent} in {plain:?}");
        assert!(all.contains(&agent.to_owned()), "{agent} not in {all:?}");
        let (code, refused) =
            rpc_error(&server.call(Some("plain-token"), agent, json!({"prompt": "hi"})));
        assert_eq!(code, -32602, "{refused}");
        assert!(
            refused.starts_with(&format!("unknown tool \"{agent}\"; available tools: ")),
            "{refused}"
        );
    }
    // Everything else, weir's own tools included, as before scopes.
    let expected: Vec<String> = all
        .iter()
        .filter(|tool| !AGENT_TOOLS.contains(&tool.as_str()))
        .cloned()
        .collect();
    assert_eq!(plain, expected);
    for tool in ["critique_status", "runs_list", "get_status", "plan_run"] {
        assert!(plain.contains(&tool.to_owned()), "{tool} not in {plain:?}");
    }
}

#[cfg(all(feature = "plan", feature = "exec"))]
#[test]
fn a_plan_started_by_a_token_held_to_plan_run_cannot_run_execute_code_as_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let server = scoped_server(dir.path());
    let planner = Some("planner-token");
    assert_eq!(server.tool_names(planner), ["plan_run"]);
    let plan = json!({"steps": [
        {"id": "escape", "tool": "execute_code", "args": {"language": "sh", "code": "echo ran"}},
    ]});
    let answer = server.call(planner, "plan_run", json!({"plan": plan}));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "the plan fails: {answer}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("execute_code"),
        "names the step's tool: {answer}"
    );
    // No program ran: the plan's run has no child, and no execute_code
    // run exists at all.
    let root = Some("root-token");
    let runs = server.call(root, "runs_list", json!({}));
    let runs = runs["result"]["structuredContent"]["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("{runs}"))
        .clone();
    let tools: Vec<&str> = runs
        .iter()
        .map(|run| run["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["plan_run"], "{runs:?}");
    assert_eq!(runs[0]["state"], "failed");
    // The same plan, started by the admin, does run its step: the refusal
    // above is the scope's, not the plan's.
    let answer = server.call(root, "plan_run", json!({"plan": plan}));
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let runs = server.call(root, "runs_list", json!({"tool": "execute_code"}));
    assert_eq!(
        runs["result"]["structuredContent"]["runs"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{runs}"
    );
}

/// A plan step on an upstream (`server: NAME`) is held to the caller's
/// grant of that upstream, as a direct call of its tools is: a token held
/// to `plan_run` cannot reach it through a plan (refused as an undeclared
/// server would be: the upstream never answers), one also granted
/// `packs=upstream:other` can, as can one with no grant.
#[test]
fn a_plan_step_reaches_an_upstream_only_for_a_caller_granted_it() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("other=-- {WEIR} serve --memory --stdio --fixtures --no-exec");
    let tokens = tokens_file(
        dir.path(),
        &[
            "planner token:planner-token tools=plan_run",
            "reacher token:reacher-token tools=plan_run packs=upstream:other",
            "plain   token:plain-token",
        ],
    );
    let server = start(
        dir.path(),
        &[
            "--tokens-file",
            tokens.to_str().unwrap(),
            "--upstream",
            &upstream,
        ],
    )
    .unwrap_or_else(|stderr| panic!("weir serve did not start: {stderr}"));
    let plan = json!({"steps": [
        {"id": "there", "tool": "test_simple_text", "server": "other"},
    ]});

    let answer = server.call(Some("planner-token"), "plan_run", json!({"plan": plan}));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "refused: {answer}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("other"), "names the server: {answer}");
    assert!(
        !text.contains("This is a simple text response"),
        "the upstream answered: {answer}"
    );

    for token in ["reacher-token", "plain-token"] {
        let answer = server.call(Some(token), "plan_run", json!({"plan": plan}));
        let result = &answer["result"];
        assert_ne!(result["isError"], true, "{token}: {answer}");
        assert_eq!(
            result["structuredContent"]["steps"][0]["outcome"], "completed",
            "{token}: {answer}"
        );
    }
}

#[test]
fn a_grant_of_a_tool_the_server_does_not_serve_stops_it_at_start_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(
        dir.path(),
        &[
            "root token:root-token admin",
            "typo token:typo-token tools=exceute_code",
        ],
    );
    let Err(stderr) = start(dir.path(), &["--tokens-file", tokens.to_str().unwrap()]) else {
        panic!("weir serve started with a grant of a tool it does not serve");
    };
    assert!(
        stderr.contains("line 2: tools=exceute_code: this server serves no tool \"exceute_code\""),
        "{stderr}"
    );
    let tokens = tokens_file(dir.path(), &["ci token:ci-token packs=exec,nope"]);
    let Err(stderr) = start(dir.path(), &["--tokens-file", tokens.to_str().unwrap()]) else {
        panic!("weir serve started with a grant of a pack it does not serve");
    };
    assert!(
        stderr.contains("line 1: packs=nope: this server serves no pack \"nope\""),
        "{stderr}"
    );
}

/// A `redis-server` on a free port, its data in a temporary directory,
/// killed on drop; commands go over RESP on a plain socket.
#[cfg(feature = "redis")]
struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

#[cfg(feature = "redis")]
impl Redis {
    fn start() -> Redis {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
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
        let ready = stdout
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("Ready to accept connections"));
        assert!(ready, "redis-server did not start");
        Redis {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// One command; its reply's first line.
    fn command(&self, args: &[&str]) -> String {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while !reply.ends_with(b"\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1, "redis closed");
            reply.push(byte[0]);
        }
        let reply = String::from_utf8(reply).unwrap();
        assert!(!reply.starts_with('-'), "{args:?}: {reply}");
        reply.trim_end().to_owned()
    }
}

#[cfg(feature = "redis")]
impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(feature = "redis")]
#[test]
fn hostile_redis_keys_are_named_at_start_and_skipped_by_runs_list() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let url = redis.url();
    let serve = ["--fixtures", "--redis", url.as_str(), "--node", "n1"];
    // A string where the run index belongs: the server does not start, and
    // says which key and what belongs there.
    redis.command(&["SET", "weir:runs", "planted"]);
    let Err(stderr) = start(dir.path(), &serve) else {
        panic!("weir serve --redis started on a string where its run index belongs");
    };
    assert!(
        stderr.contains("the Redis key \"weir:runs\" holds a string, where weir keeps its index of every run (a sorted set)"),
        "{stderr}"
    );
    redis.command(&["DEL", "weir:runs"]);
    let server = start(dir.path(), &serve)
        .unwrap_or_else(|stderr| panic!("weir serve --redis did not start: {stderr}"));
    let stream = json!({"count": 2, "interval_ms": 1, "size": 8});
    for _ in 0..2 {
        let done = server.call(None, "stream", stream.clone());
        assert!(done["result"].is_object(), "{done}");
    }
    // Run records planted under the index: fields missing, garbage, a
    // string, a set, and an entry that is no run id.
    redis.command(&["HSET", "weir:run:bad1", "tool", "x"]);
    redis.command(&[
        "HSET",
        "weir:run:bad2",
        "tool",
        "x",
        "arguments",
        "{not json",
        "node",
        "n1",
        "state",
        "exploded",
        "events",
        "-1",
        "created_ts",
        "soon",
        "updated_ts",
        "x",
    ]);
    redis.command(&["SET", "weir:run:bad3", "a string"]);
    redis.command(&["SADD", "weir:run:bad4", "member"]);
    let later = "99999999999999";
    for id in ["bad1", "bad2", "bad3", "bad4", "not a run id!"] {
        redis.command(&["ZADD", "weir:runs", later, id]);
    }
    let listed = server.call(None, "runs_list", json!({}));
    let runs = listed["result"]["structuredContent"]["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("runs_list fails: {listed}"))
        .clone();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|run| run["tool"] == "stream"), "{runs:?}");
    // Asked for by id, the string names its key.
    let got = server.call(None, "runs_get", json!({"run_id": "bad3"}));
    assert!(
        got.to_string()
            .contains("the Redis key \\\"weir:run:bad3\\\" holds a string"),
        "{got}"
    );
    // A key of the wrong type planted while it serves: the next new run
    // fails naming it, not with a bare WRONGTYPE.
    redis.command(&["DEL", "weir:open"]);
    redis.command(&["SET", "weir:open", "planted"]);
    let refused = server.call(None, "stream", stream);
    let refused = refused.to_string();
    assert!(
        refused.contains("the Redis key \\\"weir:open\\\" holds a string, where weir keeps its index of open runs"),
        "{refused}"
    );
}
