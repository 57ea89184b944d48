//! Issue 22, plans: only declared upstreams, no forwarded credential, nesting and size bounded, secrets redacted (findings 1, 4, 7, 8, 10).
//!
//! Each test drives `weir serve --http` as a hostile client would, over a
//! plain TCP socket (one request per connection, every wait bounded), with
//! weir's own credentials in its environment (`WEIR_TOKEN`, which the
//! clients must send, and `WEIR_REMOTE_TOKEN`) so that a test can look for
//! them where they must not be.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
/// weir's own bearer token (its `WEIR_TOKEN`): clients send it to weir.
const OWN_TOKEN: &str = "weirs-own-token-7c1e";
/// What weir once sent to any URL a plan named.
const REMOTE_TOKEN: &str = "weirs-remote-token-5d2a";
const STATELESS: &str = "2026-07-28";

/// `weir serve --http 127.0.0.1:0 [extra…]`, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    /// In memory unless `extra` names a data directory.
    fn start(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = Command::new(WEIR);
        command.args(["serve", "--http", "127.0.0.1:0", "--fixtures"]);
        if !extra.contains(&"--data-dir") {
            command.arg("--memory");
        }
        let mut child = command
            .args(extra)
            .env("WEIR_TOKEN", OWN_TOKEN)
            .env("WEIR_REMOTE_TOKEN", REMOTE_TOKEN)
            .env_remove("WEIR_TOKENS_FILE")
            .envs(env.iter().copied())
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
        let addr = addr
            .recv_timeout(Duration::from_secs(60))
            .expect("weir serve says where it serves within 60 s")
            .unwrap_or_else(|stderr| panic!("weir serve did not start: {stderr}"));
        Server { child, addr }
    }

    /// A stateless `tools/call`: the JSON-RPC answer.
    fn call(&self, tool: &str, arguments: Value) -> Value {
        call(&self.addr, tool, arguments)
    }

    /// `plan_run {plan}`: the result, which must be there.
    fn plan(&self, plan: Value) -> Value {
        let answer = self.call("plan_run", json!({ "plan": plan }));
        answer["result"].clone()
    }

    /// The runs of `tool` (weir's own runs_list; the client is an admin).
    fn runs(&self, tool: &str) -> Vec<Value> {
        // runs_list's largest page; a test that starts more fails loudly
        // here rather than counting a short page.
        let answer = self.call("runs_list", json!({"tool": tool, "limit": 1000}));
        let runs = answer["result"]["structuredContent"]["runs"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .clone();
        assert!(runs.len() < 1000, "more {tool} runs than one page holds");
        runs
    }

    /// `GET /runs/{id}/events`, the run's SSE stream (it ends with the run).
    fn run_events(&self, run_id: &str) -> String {
        let bearer = format!("Bearer {OWN_TOKEN}");
        send(
            &self.addr,
            "GET",
            &format!("/runs/{run_id}/events"),
            &[("Authorization", &bearer)],
            "",
        )
    }

    /// The most memory the server has held (VmHWM), in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stateless `tools/call` to the server at `addr`, as weir's own token.
fn call(addr: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let bearer = format!("Bearer {OWN_TOKEN}");
    let text = send(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", &bearer),
        ],
        &body.to_string(),
    );
    // The body, or the last `data:` of an SSE body.
    let data = crate::sse_body::last_data(&text).unwrap_or_else(|| text.clone());
    serde_json::from_str(data.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// One request on its own connection; the body of the whole answer
/// (de-chunked) within 60 s.
fn send(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no complete answer to {method} {path} within 60 s: {}",
            String::from_utf8_lossy(&received)
        );
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
        }
    }
    let text = String::from_utf8_lossy(&received).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_owned();
    }
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
}

/// A tool result's text.
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A result that is a tool error whose text contains `wanted`.
fn assert_refused(result: &Value, wanted: &str) {
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(result).contains(wanted), "{wanted:?} not in {result}");
}

/// A TCP listener that records every request it gets and answers 404.
struct Listener {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Listener {
    fn start() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut received = Vec::new();
                let mut buffer = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    received.extend_from_slice(&buffer[..n]);
                    if received.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&received).into_owned());
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Listener { url, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Finding 1 (critical): a plan step could start any host command
/// (`server: {command}`) with weir's whole environment. Now a step names
/// a server the operator declared, and nothing else: a command, as an
/// object or as YAML, or as a name nobody declared, is refused before
/// anything runs, and the command never ran.
#[test]
fn finding_1_a_plan_cannot_start_a_host_command() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let touch = format!("touch {}", marker.display());
    let server = Server::start(&[], &[]);
    let as_object =
        json!({"steps": [{"id": "x", "tool": "test_simple_text", "server": {"command": touch}}]});
    assert_refused(
        &server.plan(as_object),
        "a plan cannot give a URL or a command",
    );
    let as_yaml = format!(
        "steps:\n  - id: x\n    tool: test_simple_text\n    server: {{command: \"{touch}\"}}\n"
    );
    assert_refused(
        &server.plan(json!(as_yaml)),
        "a plan cannot give a URL or a command",
    );
    let as_name = json!({"steps": [{"id": "x", "tool": "test_simple_text", "server": touch}]});
    assert_refused(
        &server.plan(as_name),
        "no upstream servers are declared (the operator declares them with weir serve --upstream NAME=URL)",
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "the plan ran a host command");
}

/// Finding 4 (high): a plan step could reach any URL (`server: {url}`)
/// and sent weir's own token there. Now an undeclared URL is refused and
/// never connected to; a declared HTTP upstream gets the credential of its
/// declaration and never weir's (neither WEIR_TOKEN nor
/// WEIR_REMOTE_TOKEN), and weir refuses to start when told to send its own.
#[test]
fn finding_4_a_plan_reaches_only_declared_urls_and_never_with_weirs_token() {
    let listener = Listener::start();
    let server = Server::start(&[], &[]);
    let plan = json!({"steps": [{"id": "x", "tool": "anything", "server": {"url": listener.url}}]});
    assert_refused(&server.plan(plan), "a plan cannot give a URL or a command");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(listener.requests(), Vec::<String>::new());
    drop(server);

    let upstream = format!("up={}", listener.url);
    let server = Server::start(
        &[
            "--upstream",
            &upstream,
            "--upstream-token-env",
            "up=UP_TOKEN",
        ],
        &[("UP_TOKEN", "the-upstreams-own-token")],
    );
    let plan = json!({"steps": [{"id": "x", "tool": "anything", "server": "up"}]});
    let result = server.plan(plan);
    // The listener is no MCP server: the step fails, naming the upstream.
    assert_refused(&result, "the upstream up");
    let requests = listener.requests();
    assert!(!requests.is_empty(), "the declared upstream was not called");
    for request in &requests {
        assert!(
            request
                .to_ascii_lowercase()
                .contains("authorization: bearer the-upstreams-own-token"),
            "{request}"
        );
        assert!(
            !request.contains(OWN_TOKEN) && !request.contains(REMOTE_TOKEN),
            "weir sent its own credential: {request}"
        );
    }
    drop(server);

    for own in ["WEIR_REMOTE_TOKEN", "WEIR_TOKEN"] {
        let output = Command::new(WEIR)
            .args(["serve", "--memory", "--http", "127.0.0.1:0", "--upstream"])
            .arg(&upstream)
            .args(["--upstream-token-env", &format!("up={own}")])
            .env("WEIR_TOKEN", OWN_TOKEN)
            .env("WEIR_REMOTE_TOKEN", REMOTE_TOKEN)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains("weir's own credential"), "{stderr}");
    }
}

/// A declared stdio upstream (here another weir) is called by name, is
/// started without a shell from the declaration's words, and sees none of
/// weir's environment but PATH and HOME.
#[test]
fn a_declared_stdio_upstream_is_called_by_name_with_a_clean_environment() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("upstream-env");
    let upstream = format!(
        "other=-- sh -c \"env > '{}'; exec '{WEIR}' serve --memory --stdio --fixtures --no-exec\"",
        seen.display()
    );
    let server = Server::start(
        &["--upstream", &upstream],
        &[("CANARY_IN_WEIRS_ENV", "canary-8e1f")],
    );
    let plan = json!({"steps": [
        {"id": "there", "tool": "test_simple_text", "server": "other"},
        {"id": "here", "tool": "test_simple_text", "after": ["there"]},
    ]});
    let result = server.plan(plan);
    assert_ne!(result["isError"], true, "{result}");
    let steps = &result["structuredContent"]["steps"];
    assert_eq!(steps[0]["server"], "other", "{result}");
    assert_eq!(steps[0]["outcome"], "completed", "{result}");
    assert!(
        steps[0]["text"]
            .as_str()
            .unwrap()
            .contains("This is a simple text response for testing."),
        "{result}"
    );
    let env = std::fs::read_to_string(&seen).unwrap();
    assert!(env.lines().any(|line| line.starts_with("PATH=")), "{env}");
    for secret in ["canary-8e1f", OWN_TOKEN, REMOTE_TOKEN] {
        assert!(!env.contains(secret), "the upstream saw {secret}: {env}");
    }
}

/// A plan `depth` deep: each level streams for about 3 s beside the
/// level below it; the deepest runs one quick step.
fn nested(depth: usize) -> Value {
    let mut plan = json!({"steps": [{"id": "leaf", "tool": "test_simple_text"}]});
    for _ in 0..depth {
        plan = json!({"steps": [
            {"id": "deeper", "tool": "plan_run", "args": {"plan": plan}},
            {"id": "slow", "tool": "stream", "args": {"count": 4, "interval_ms": 1000}},
        ]});
    }
    plan
}

/// Finding 7 (medium): 16 nested plans held every plan_run slot and the
/// 17th waited forever, as did another client's plan. Now 20 nested plans
/// end by themselves (the 9th is refused: plans nest at most 8 deep), and
/// meanwhile another client's one-step plan is answered within 1 s.
#[test]
fn finding_7_twenty_nested_plans_end_and_another_client_is_served() {
    let server = Server::start(&[], &[]);
    let addr = server.addr.clone();
    let began = Instant::now();
    let deep = std::thread::spawn(move || call(&addr, "plan_run", json!({ "plan": nested(20) })));
    // Let the nesting build up: the deepest levels start within a second.
    std::thread::sleep(Duration::from_millis(1000));
    let asked = Instant::now();
    let other = server.plan(json!({"steps": [{"id": "one", "tool": "test_simple_text"}]}));
    let waited = asked.elapsed();
    assert_ne!(other["isError"], true, "{other}");
    assert!(
        waited < Duration::from_secs(1),
        "another client's plan waited {waited:?}"
    );
    assert!(
        !deep.is_finished(),
        "the nested plans ended too soon to test anything"
    );
    let answer = deep.join().unwrap();
    assert!(began.elapsed() < Duration::from_secs(30));
    assert_refused(&answer["result"], "plans nest at most 8 deep");
    let plans = server.runs("plan_run");
    // The client's two plans, and 8 nested plans under the first.
    assert_eq!(plans.len(), 10, "{plans:?}");
    assert!(
        plans.iter().all(|run| run["state"] != "working"),
        "{plans:?}"
    );
}

/// The same nesting past a tool's limit: with 4 slots per tool, 7 nested
/// plans (and their streams) all complete: a child runs in its parent's
/// lane when its tool's slots are held (scheduler/slots.rs).
#[test]
fn nested_plans_past_the_per_tool_limit_complete() {
    let server = Server::start(&["--max-concurrent", "4"], &[]);
    let result = server.plan(nested(7));
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["outcome"], "completed");
}

/// The finding-8 secret.
const SECRET: &str = "s3cret-plan-91b4";

/// Every byte of every file under `dir`.
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            bytes.extend(all_bytes(&path));
        } else if let Ok(data) = std::fs::read(&path) {
            bytes.extend(data);
        }
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Finding 8 (medium): a secret in a plan step's `env` was stored in plain
/// text (the plan's arguments, its events, weir.db-wal), though
/// `execute_code` called directly redacts it. Now the plan's arguments are
/// redacted by each step's tool's schema, as YAML and as an object: the
/// program gets the secret, and no read path, SSE stream or byte of the
/// data directory (weir.db and weir.db-wal included) holds it.
#[test]
fn finding_8_a_secret_in_a_plan_step_is_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let server = Server::start(&["--data-dir", data_arg, "--exec-sandbox", "off"], &[]);
    let step = json!({
        "id": "key", "tool": "execute_code",
        "args": {"language": "sh", "code": "printenv API_KEY | tr -d '\\n' | wc -c", "env": {"API_KEY": SECRET, "MODE": "plain"}},
    });
    let as_object = json!({"steps": [step]});
    let as_yaml = format!(
        "steps:\n  - id: key\n    tool: execute_code\n    args:\n      language: sh\n      code: \"printenv API_KEY | tr -d '\\\\n' | wc -c\"\n      env: {{API_KEY: {SECRET}, MODE: plain}}\n"
    );
    let mut seen = String::new();
    for plan in [as_object, json!(as_yaml)] {
        let result = server.plan(plan);
        assert_ne!(result["isError"], true, "{result}");
        let length = result["structuredContent"]["steps"][0]["text"].clone();
        assert!(
            length.as_str().unwrap().contains(&SECRET.len().to_string()),
            "the program did not get the secret: {result}"
        );
        seen.push_str(&result.to_string());
    }
    let plans = server.runs("plan_run");
    assert_eq!(plans.len(), 2, "{plans:?}");
    let mut ids: Vec<String> = Vec::new();
    for run in &plans {
        assert_eq!(
            run["arguments"]["plan"]["steps"][0]["args"]["env"],
            json!({"API_KEY": "[redacted]", "MODE": "[redacted]"}),
            "{run}"
        );
        ids.push(run["run_id"].as_str().unwrap().to_owned());
    }
    for run in server.runs("execute_code") {
        ids.push(run["run_id"].as_str().unwrap().to_owned());
    }
    seen.push_str(&format!("{plans:?}"));
    for id in &ids {
        for tool in ["runs_get", "runs_events"] {
            seen.push_str(&server.call(tool, json!({"run_id": id})).to_string());
        }
        let sse = server.run_events(id);
        assert!(sse.contains("\"started\""), "{sse}");
        seen.push_str(&sse);
    }
    assert!(seen.contains("[redacted]"));
    assert!(!seen.contains(SECRET), "the secret was read back: {seen}");
    let stored = all_bytes(&data);
    assert!(
        std::fs::read_dir(&data)
            .unwrap()
            .any(|entry| entry.unwrap().file_name() == "weir.db-wal"),
        "the server is running: its WAL is there"
    );
    assert!(
        !contains(&stored, SECRET),
        "the secret is in the data directory"
    );
    drop(server);
    assert!(!contains(&all_bytes(&data), SECRET));
}

/// Finding 10 (medium): a 10,000-step plan (1.2 MiB of JSON) took the
/// server from 40 MiB to 1.9 GiB. Now a plan over 1,000 steps or 1 MiB is
/// refused before it is parsed, as an object or as text; the server's
/// peak stays under 256 MiB and another client is answered within 1 s
/// meanwhile.
#[test]
fn finding_10_a_huge_plan_is_refused_cheaply() {
    let server = Server::start(&[], &[]);
    let steps: Vec<Value> = (0..10_000)
        .map(|i| json!({"id": format!("s{i:05}"), "tool": "test_simple_text", "args": {"note": "x".repeat(80)}}))
        .collect();
    let plan = json!({ "steps": steps });
    let text = plan.to_string();
    assert!(text.len() > 1_200_000, "{}", text.len());
    let addr = server.addr.clone();
    let huge = std::thread::spawn(move || {
        let as_object = call(&addr, "plan_run", json!({ "plan": plan }));
        let as_text = call(&addr, "plan_run", json!({ "plan": text }));
        (as_object, as_text)
    });
    // Another client, again and again while the huge plans are handled.
    let mut served = 0;
    while served == 0 || !huge.is_finished() {
        let asked = Instant::now();
        let other = server.plan(json!({"steps": [{"id": "one", "tool": "test_simple_text"}]}));
        let waited = asked.elapsed();
        assert_ne!(other["isError"], true, "{other}");
        assert!(
            waited < Duration::from_secs(1),
            "another client waited {waited:?}"
        );
        served += 1;
    }
    let (as_object, as_text) = huge.join().unwrap();
    assert_refused(&as_object["result"], "at most 1000 items");
    assert_refused(&as_text["result"], "at most 1048576 characters");
    let peak = server.peak_kib();
    assert!(peak < 256 * 1024, "the server's peak was {peak} KiB");
    // Nothing of either plan ran: the only steps are the other client's.
    assert_eq!(server.runs("test_simple_text").len(), served);
}
