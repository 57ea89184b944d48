//! Who can see a run (issue 10, finding 10), through the real binary:
//! `weir serve --http --tokens-file` with three named credentials — alice,
//! bob and root, an admin — and `execute_code` running a real program with
//! a secret in its `env`.
//!
//! A caller sees, reads and cancels only its own runs; another's run is
//! answered exactly as a run that does not exist, on every path
//! (`runs_*` tools, both task designs, resources, `GET /runs/{id}/events`,
//! a session's resume); an admin sees every run. The secret reaches the
//! program and nothing else: no read path (alice's own included), no
//! `weir runs` output and no byte of the data directory holds it. With one
//! `--token`, every client is that one credential and sees every run, as
//! before credentials had names.
//!
//! HTTP goes over a plain TCP socket, one request per connection, every
//! wait bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const SECRET: &str = "s3cret-4f9c";
const STATELESS: &str = "2026-07-28";
const SESSIONS: &str = "2025-11-25";

/// A program that proves it got the secret (its length, never the value)
/// and stays alive long enough for others to try to reach its run.
const PROGRAM: &str =
    "import os, time\nprint(len(os.environ['API_KEY']))\ntime.sleep(3)\nprint('done')";

/// `weir serve --http 127.0.0.1:0` on `dir`, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(WEIR)
            .arg("--data-dir")
            .arg(dir)
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(extra)
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
        let addr = addr
            .recv_timeout(Duration::from_secs(60))
            .expect("weir serve says where it serves within 60 s")
            .unwrap_or_else(|stderr| panic!("weir serve did not start: {stderr}"));
        Server { child, addr }
    }

    /// One request on its own connection; the whole answer within 30 s.
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
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
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut received = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no complete answer to {method} {path} within 30 s: {}",
                String::from_utf8_lossy(&received)
            );
            stream.set_read_timeout(Some(left)).unwrap();
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
        Answer::parse(&received)
    }

    /// `POST /mcp` of a JSON-RPC request as `token` (and `session`).
    fn post(&self, token: &str, session: Option<&str>, method: &str, params: Value) -> Answer {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let bearer = format!("Bearer {token}");
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", bearer.as_str()),
        ];
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", SESSIONS));
        }
        self.send("POST", "/mcp", &headers, &body.to_string())
    }

    /// A stateless (2026-07-28) request as `token`: its JSON-RPC answer.
    fn stateless(&self, token: &str, method: &str, params: Value) -> Answer {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        self.post(token, None, method, params)
    }

    /// A call of one of weir's own tools, stateless, as `token`: the
    /// tool's result.
    fn tool(&self, token: &str, name: &str, arguments: Value) -> Answer {
        self.stateless(
            token,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
    }

    /// A 2025-11-25 session of `token`: its id.
    fn session(&self, token: &str) -> String {
        let answer = self.post(
            token,
            None,
            "initialize",
            json!({
                "protocolVersion": SESSIONS,
                "capabilities": {"tasks": {}},
                "clientInfo": {"name": "ownership-test", "version": "0"},
            }),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
        answer
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no session id: {answer:?}"))
    }

    /// `GET /runs/{id}/events` as `token`.
    fn run_events(&self, token: &str, run_id: &str) -> Answer {
        let bearer = format!("Bearer {token}");
        self.send(
            "GET",
            &format!("/runs/{run_id}/events"),
            &[("Authorization", bearer.as_str())],
            "",
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: status, head, body (de-chunked).
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn parse(bytes: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(bytes);
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

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    /// The JSON-RPC message: the body, or the last `data:` of an SSE body.
    fn message(&self) -> Value {
        let data = if self.head.contains("text/event-stream") {
            crate::sse_body::last_data(&self.body).unwrap_or_default()
        } else {
            self.body.clone()
        };
        serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// A tool result's `structuredContent`, which must be there.
    fn structured(&self) -> Value {
        let message = self.message();
        let result = &message["result"];
        assert!(
            result["isError"] != true && result["structuredContent"].is_object(),
            "{message}"
        );
        result["structuredContent"].clone()
    }

    /// A tool error's text, which must be one.
    fn tool_error(&self) -> String {
        let message = self.message();
        assert_eq!(message["result"]["isError"], true, "{message}");
        message["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A JSON-RPC error's `(code, message)`, which must be one.
    fn rpc_error(&self) -> (i64, String) {
        let message = self.message();
        let error = &message["error"];
        assert!(error.is_object(), "{message}");
        (
            error["code"].as_i64().unwrap(),
            error["message"].as_str().unwrap().to_owned(),
        )
    }
}

fn sha256_hex(text: &str) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    String::from_utf8(output.stdout).unwrap()[..64].to_owned()
}

/// A tokens file of alice (by digest), bob and root (an admin), mode 0600.
fn tokens_file(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("tokens");
    let text = format!(
        "# who may call this server\nalice sha256:{}\nbob   token:bob-token\nroot  token:root-token admin\n",
        sha256_hex("alice-token")
    );
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

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

/// The arguments of alice's call.
fn execute_arguments() -> Value {
    json!({
        "language": "python",
        "code": PROGRAM,
        "env": {"API_KEY": SECRET, "MODE": "test"},
    })
}

/// What a reader may see of those arguments: the variables' names only.
fn redacted_env() -> Value {
    json!({"API_KEY": "[redacted]", "MODE": "[redacted]"})
}

#[test]
fn a_caller_sees_only_its_own_runs_and_nobody_reads_a_secret_back() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = tokens_file(dir.path());
    let server = Server::start(&data, &["--tokens-file", tokens.to_str().unwrap()]);
    let (alice, bob, root) = ("alice-token", "bob-token", "root-token");
    // Every answer anyone got, to look for the secret in at the end.
    let mut seen = String::new();

    // Alice starts execute_code as a task (2025-11-25), in her session.
    let alices_session = server.session(alice);
    let created = server.post(
        alice,
        Some(&alices_session),
        "tools/call",
        json!({"name": "execute_code", "arguments": execute_arguments(), "task": {"ttl": 60000}}),
    );
    seen.push_str(&created.body);
    let run_id = created.message()["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {created:?}"))
        .to_owned();
    // A run id that exists nowhere, to compare bob's answers with.
    let unknown = "0190f0e0a0b07c0d8e0f101112131415";

    // Bob: alice's run is not listed, and answers as an unknown run does.
    let listed = server.tool(bob, "runs_list", json!({}));
    seen.push_str(&listed.body);
    assert!(!listed.body.contains(&run_id), "{listed:?}");
    assert_eq!(listed.structured()["runs"], json!([]));
    for tool in ["runs_get", "runs_events", "runs_cancel"] {
        let answer = |id: &str| server.tool(bob, tool, json!({"run_id": id})).tool_error();
        assert_eq!(
            answer(&run_id).replace(&run_id, "ID"),
            answer(unknown).replace(unknown, "ID"),
            "{tool}"
        );
        assert!(answer(&run_id).starts_with("no run"), "{tool}");
    }
    let artifact = |id: &str| {
        server
            .tool(bob, "runs_artifact", json!({"run_id": id, "name": "out"}))
            .tool_error()
            .replace(id, "ID")
    };
    assert_eq!(artifact(&run_id), artifact(unknown));
    let resource = |id: &str| {
        let answer = server.stateless(
            bob,
            "resources/read",
            json!({"uri": format!("weir://runs/{id}")}),
        );
        let (code, message) = answer.rpc_error();
        (code, message.replace(id, "ID"))
    };
    assert_eq!(resource(&run_id), resource(unknown));
    let sse = |id: &str| {
        let answer = server.run_events(bob, id);
        (answer.status, answer.body)
    };
    assert_eq!(sse(&run_id), sse(unknown));
    assert_eq!(sse(&run_id).0, 404);
    // The tasks extension (stateless) and 2025-11-25 tasks, in bob's session.
    let stateless_task = |method: &str, id: &str| {
        let (code, message) = server
            .stateless(bob, method, json!({"taskId": id}))
            .rpc_error();
        (code, message.replace(id, "ID"))
    };
    for method in ["tasks/get", "tasks/cancel"] {
        assert_eq!(
            stateless_task(method, &run_id),
            stateless_task(method, unknown),
            "{method}"
        );
    }
    let bobs_session = server.session(bob);
    let session_task = |method: &str, id: &str| {
        let answer = server.post(bob, Some(&bobs_session), method, json!({"taskId": id}));
        let (code, message) = answer.rpc_error();
        (code, message.replace(id, "ID"))
    };
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        assert_eq!(
            session_task(method, &run_id),
            session_task(method, unknown),
            "{method}"
        );
    }
    let tasks = server.post(bob, Some(&bobs_session), "tasks/list", json!({}));
    seen.push_str(&tasks.body);
    assert_eq!(tasks.message()["result"]["tasks"], json!([]), "{tasks:?}");
    // Alice's session is not bob's to use: not to resume her call's
    // stream, not to ask for her task's result.
    let borrowed = server.post(
        bob,
        Some(&alices_session),
        "tasks/get",
        json!({"taskId": run_id}),
    );
    assert_eq!(borrowed.status, 404, "{borrowed:?}");
    let resumed = server.send(
        "GET",
        "/mcp",
        &[
            ("Authorization", "Bearer bob-token"),
            ("Mcp-Session-Id", &alices_session),
            ("Last-Event-ID", &format!("{run_id}.0")),
        ],
        "",
    );
    assert_eq!(resumed.status, 404, "{resumed:?}");

    // Root, an admin, sees it, owned by alice, its secret redacted.
    let listed = server.tool(root, "runs_list", json!({}));
    seen.push_str(&listed.body);
    let runs = listed.structured()["runs"].clone();
    let found = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|run| run["run_id"] == run_id)
        .unwrap_or_else(|| panic!("root does not see alice's run: {runs}"));
    assert_eq!(found["owner"], "alice");
    assert_eq!(found["arguments"]["env"], redacted_env());

    // Alice's task ends as the program meant it to: bob's cancels did not
    // reach it, and the program had the secret (its length, 11).
    let result = server.post(
        alice,
        Some(&alices_session),
        "tasks/result",
        json!({"taskId": run_id}),
    );
    seen.push_str(&result.body);
    let result = result.message()["result"].clone();
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["stdout"],
        format!("{}\ndone\n", SECRET.len()),
        "{result}"
    );

    // Every read path shows alice (and root) the names, never the values.
    let got = server.tool(alice, "runs_get", json!({"run_id": run_id}));
    seen.push_str(&got.body);
    let run = got.structured()["run"].clone();
    assert_eq!(
        (&run["owner"], &run["state"], &run["arguments"]["env"]),
        (&json!("alice"), &json!("completed"), &redacted_env())
    );
    for token in [alice, root] {
        let events = server.tool(token, "runs_events", json!({"run_id": run_id}));
        seen.push_str(&events.body);
        let started = events.structured()["events"][0].clone();
        assert_eq!(started["type"], "started");
        assert_eq!(started["arguments"]["env"], redacted_env());
        let sse = server.run_events(token, &run_id);
        seen.push_str(&sse.body);
        assert_eq!(sse.status, 200, "{sse:?}");
        assert!(sse.body.contains(r#""API_KEY":"[redacted]""#), "{sse:?}");
        let resource = server.stateless(
            token,
            "resources/read",
            json!({"uri": format!("weir://runs/{run_id}")}),
        );
        seen.push_str(&resource.body);
        assert!(
            resource.message()["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .contains("[redacted]"),
            "{resource:?}"
        );
    }
    let task = server.stateless(alice, "tasks/get", json!({"taskId": run_id}));
    seen.push_str(&task.body);
    assert_eq!(task.message()["result"]["status"], "completed", "{task:?}");
    let tasks = server.post(alice, Some(&alices_session), "tasks/list", json!({}));
    assert_eq!(
        tasks.message()["result"]["tasks"][0]["taskId"],
        run_id.as_str(),
        "{tasks:?}"
    );
    // Bob's own runs are his: alice does not see them.
    let bobs = server.stateless(
        bob,
        "tools/call",
        json!({"name": "execute_code", "arguments": {"language": "python", "code": "print(1)"}}),
    );
    assert_ne!(bobs.message()["result"]["isError"], true, "{bobs:?}");
    let ids = |token: &str| {
        let runs = server.tool(token, "runs_list", json!({})).structured()["runs"].clone();
        runs.as_array()
            .unwrap()
            .iter()
            .map(|run| run["owner"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(alice), ["alice"]);
    assert_eq!(ids(bob), ["bob"]);
    assert_eq!(ids(root), ["bob", "alice"]);

    // `weir runs`, on the same data directory, shows the redacted form.
    for args in [
        vec!["runs", "show", run_id.as_str(), "--json"],
        vec!["runs", "events", run_id.as_str(), "--json"],
        vec!["runs", "list", "--json"],
    ] {
        let output = Command::new(WEIR)
            .arg("--data-dir")
            .arg(&data)
            .args(&args)
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "weir {args:?}: {output:?}");
        assert!(printed.contains("[redacted]"), "weir {args:?}: {printed}");
        seen.push_str(&printed);
    }

    assert!(!seen.contains(SECRET), "the secret was read back: {seen}");
    drop(server);
    let stored = all_bytes(&data);
    assert!(!stored.is_empty());
    assert!(
        !contains(&stored, SECRET),
        "the secret is in the data directory"
    );
    assert!(contains(&stored, "[redacted]"));
}

/// With `--token` alone there is one credential, `default`, an admin:
/// every client holding it sees every run (two stateless clients share
/// the runs), and the secret is still never read back.
#[test]
fn one_token_is_one_caller_that_sees_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--token", "the-token"]);
    let arguments = json!({"language": "python", "code": "import os\nprint(len(os.environ['API_KEY']))", "env": {"API_KEY": SECRET}});
    let call = server.stateless(
        "the-token",
        "tools/call",
        json!({"name": "execute_code", "arguments": arguments}),
    );
    let result = call.message()["result"].clone();
    assert_eq!(
        result["structuredContent"]["stdout"],
        format!("{}\n", SECRET.len()),
        "{result}"
    );
    let listed = server.tool("the-token", "runs_list", json!({}));
    let runs = listed.structured()["runs"].clone();
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["owner"], "default");
    assert_eq!(
        runs[0]["arguments"]["env"],
        json!({"API_KEY": "[redacted]"})
    );
    let run_id = runs[0]["run_id"].as_str().unwrap();
    let events = server.run_events("the-token", run_id);
    assert_eq!(events.status, 200);
    assert!(!events.body.contains(SECRET) && !listed.body.contains(SECRET));
    assert_eq!(server.run_events("another-token", run_id).status, 401);
    drop(server);
    assert!(!contains(&all_bytes(dir.path()), SECRET));
}

/// A tokens file that is not one is refused at start, naming the line; a
/// file that others may read while it holds tokens is refused too.
#[test]
fn a_bad_tokens_file_stops_the_server_naming_the_line() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    let serve = |text: &str, mode: u32| {
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let output = Command::new(WEIR)
            .arg("--data-dir")
            .arg(dir.path())
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--no-exec",
                "--tokens-file",
            ])
            .arg(&path)
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let duplicate = serve("alice token:one\nbob token:two\nalice token:three\n", 0o600);
    assert!(
        duplicate.contains("line 3") && duplicate.contains("\"alice\" is given twice"),
        "{duplicate}"
    );
    let malformed = serve("alice\n", 0o600);
    assert!(
        malformed.contains("line 1") && malformed.contains("NAME SECRET [admin]"),
        "{malformed}"
    );
    let readable = serve("alice token:one\n", 0o644);
    assert!(
        readable.contains("may be read by other users") && readable.contains("chmod 600"),
        "{readable}"
    );
    let writable = serve(&format!("alice sha256:{}\n", "a".repeat(64)), 0o622);
    assert!(
        writable.contains("may be written by other users"),
        "{writable}"
    );
}
