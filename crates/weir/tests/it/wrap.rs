//! `weir wrap` and upstream tools served as runs (issue 26), through the
//! real binary, around the real reference server
//! (`@modelcontextprotocol/server-everything`, pinned in
//! tests/third_party): its tools listed as its own, its long-running
//! operation's progress, a heartbeat while it is quiet, cancel reaching
//! it, its death ending the run once, `runs_wait` and `--defer-after`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wrap_upstreams::{await_listening, free_port};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// The reference server's entry point (run with `node ENTRY stdio`).
fn everything_entry() -> PathBuf {
    let entry = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../../tests/third_party/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        entry.exists(),
        "{} is missing: install it with `npm ci` in tests/third_party (scripts/test does)",
        entry.display()
    );
    entry
}

/// An MCP server on the other end of a pipe, and this test as its client.
pub(crate) struct Peer {
    pub(crate) child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl Peer {
    /// Starts `program args…` and initializes a 2025-11-25 session.
    pub(crate) fn start(program: &str, args: &[&str]) -> Peer {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let kept = Arc::new(Mutex::new(String::new()));
        let keep = kept.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut kept = keep.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        let mut peer = Peer {
            child,
            stdin,
            messages,
            stderr: kept,
            next_id: 1,
        };
        let initialized = peer.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "weir-wrap-test", "version": "0"}
            }),
        );
        assert!(
            initialized["result"]["serverInfo"].is_object(),
            "{initialized}"
        );
        peer.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        peer
    }

    /// `weir wrap OPTIONS -- node ENTRY stdio` (or another command).
    pub(crate) fn wrap(options: &[&str], command: &[&str]) -> Peer {
        let mut args = vec!["wrap"];
        args.extend(options);
        args.push("--");
        args.extend(command);
        Peer::start(WEIR, &args)
    }

    pub(crate) fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    pub(crate) fn next(&self, within: Duration) -> Value {
        self.messages.recv_timeout(within).unwrap_or_else(|_| {
            panic!(
                "no message within {within:?}; stderr: {}",
                self.stderr.lock().unwrap()
            )
        })
    }

    /// The next message but `notifications/tools/list_changed` (weir
    /// forwards server-everything's, which adds tools after its handshake).
    fn next_about_calls(&self, within: Duration) -> Value {
        let until = Instant::now() + within;
        loop {
            let message = self.next(until.saturating_duration_since(Instant::now()));
            if message["method"] != "notifications/tools/list_changed" {
                return message;
            }
        }
    }

    /// Sends a request; returns its id.
    pub(crate) fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// A request and its response (notifications meanwhile dropped).
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.reply(id, Duration::from_secs(60)).1
    }

    /// Reads until the response to `id`: the notifications before it, then
    /// the response.
    pub(crate) fn reply(&mut self, id: u64, within: Duration) -> (Vec<Value>, Value) {
        let until = Instant::now() + within;
        let mut notes = Vec::new();
        loop {
            let message = self.next(until.saturating_duration_since(Instant::now()));
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return (notes, message);
            }
            notes.push(message);
        }
    }

    /// Starts a `tools/call` with a progress token `p{id}`; returns its id.
    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> u64 {
        let id = self.next_id;
        self.send_request(
            "tools/call",
            json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": format!("p{id}")}}),
        )
    }

    /// A call of one of weir's own runs tools: its structured answer.
    pub(crate) fn runs_tool(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer["result"].clone()
    }

    /// Every event of `run_id`, by `runs_events`.
    pub(crate) fn events(&mut self, run_id: &str) -> Vec<Value> {
        let page = self.runs_tool("runs_events", json!({"run_id": run_id, "limit": 1000}));
        page["structuredContent"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"))
            .clone()
    }

    /// The newest run's id, by `runs_list`.
    pub(crate) fn newest_run(&mut self) -> String {
        let list = self.runs_tool("runs_list", json!({"limit": 1}));
        list["structuredContent"]["runs"][0]["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{list}"))
            .to_owned()
    }

    /// Waits for `run_id`'s state to be `wanted`.
    pub(crate) fn await_state(&mut self, run_id: &str, wanted: &str) -> Value {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let run =
                self.runs_tool("runs_get", json!({"run_id": run_id}))["structuredContent"]["run"]
                    .clone();
            if run["state"] == wanted {
                return run;
            }
            assert!(Instant::now() < until, "never {wanted}: {run}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the server wrote on stderr once it holds every one of
    /// `needles` (its reader thread may not have read a line the server
    /// wrote before it answered), or after 10 s, whatever it holds then.
    pub(crate) fn stderr_with(&self, needles: &[&str]) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let stderr = self.stderr.lock().unwrap().clone();
            if needles.iter().all(|needle| stderr.contains(needle)) || Instant::now() > until {
                return stderr;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The terminal events of a run's log.
pub(crate) fn terminal(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap().to_owned())
        .filter(|kind| matches!(kind.as_str(), "completed" | "failed" | "canceled"))
        .collect()
}

/// The progress notifications among `notes`: (progress, total, message).
pub(crate) fn progress(notes: &[Value]) -> Vec<(f64, Option<f64>, Option<String>)> {
    notes
        .iter()
        .filter(|note| note["method"] == "notifications/progress")
        .map(|note| {
            let params = &note["params"];
            (
                params["progress"].as_f64().unwrap(),
                params["total"].as_f64(),
                params["message"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The processes whose parent is `pid`.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces, so read after ')'.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid = after.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            found.push(child);
        }
    }
    found
}

#[test]
fn tools_list_through_weir_wrap_is_the_upstreams_with_weirs_runs_tools() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let mut direct = Peer::start("node", &[entry, "stdio"]);
    let mut wrapped = Peer::wrap(&["--memory"], &["node", entry, "stdio"]);
    let theirs = direct.request("tools/list", json!({}))["result"]["tools"].clone();
    let ours = wrapped.request("tools/list", json!({}))["result"]["tools"].clone();
    let (theirs, ours) = (theirs.as_array().unwrap(), ours.as_array().unwrap());
    assert!(theirs.len() >= 10, "{theirs:?}");
    for tool in theirs {
        let name = &tool["name"];
        let served = ours
            .iter()
            .find(|ours| &ours["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not served: {ours:?}"));
        for field in [
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
        ] {
            assert_eq!(served.get(field), tool.get(field), "{name}: {field}");
        }
    }
    // Beside them only weir's runs tools: none of its packs.
    let mut extra: Vec<&str> = ours
        .iter()
        .filter(|ours| !theirs.iter().any(|tool| tool["name"] == ours["name"]))
        .map(|ours| ours["name"].as_str().unwrap())
        .collect();
    extra.sort_unstable();
    assert_eq!(
        extra,
        [
            "get_status",
            "runs_artifact",
            "runs_cancel",
            "runs_events",
            "runs_get",
            "runs_list",
            "runs_wait"
        ]
    );
}

#[test]
fn a_long_running_call_through_weir_wrap_streams_progress_and_its_run_keeps_it() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap();
    let mut wrapped = Peer::wrap(&["--data-dir", dir], &["node", entry, "stdio"]);
    let id = wrapped.call(
        "trigger-long-running-operation",
        json!({"duration": 2, "steps": 4}),
    );
    let (notes, answer) = wrapped.reply(id, Duration::from_secs(30));
    let result = &answer["result"];
    assert_eq!(
        progress(&notes),
        [1.0, 2.0, 3.0, 4.0].map(|step| (step, Some(4.0), None))
    );
    assert_eq!(result["isError"], Value::Null, "{result}");
    assert_eq!(
        result["content"][0]["text"],
        "Long running operation completed. Duration: 2 seconds, Steps: 4."
    );
    // The run is weir's: completed, with the upstream's progress in its log.
    let run_id = wrapped.newest_run();
    let run = wrapped.await_state(&run_id, "completed");
    assert_eq!(run["tool"], "trigger-long-running-operation");
    let events = wrapped.events(&run_id);
    let logged: Vec<f64> = events
        .iter()
        .filter(|event| event["type"] == "progress")
        .map(|event| event["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(logged, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(terminal(&events), ["completed"]);
    drop(wrapped);
    // Kept in the data directory, for `weir runs` after weir has gone.
    let shown = Command::new(WEIR)
        .args(["--data-dir", dir, "runs", "show", &run_id])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("completed"), "{shown}");
}

#[test]
fn a_quiet_upstream_call_gets_progress_heartbeats_that_a_progress_only_client_sees() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let mut wrapped = Peer::wrap(
        &["--memory", "--upstream-heartbeat", "1"],
        &["node", entry, "stdio"],
    );
    // One step of 3.5 s: the upstream says nothing until the end.
    let id = wrapped.call(
        "trigger-long-running-operation",
        json!({"duration": 3.5, "steps": 1}),
    );
    let (notes, answer) = wrapped.reply(id, Duration::from_secs(30));
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Long running operation completed")
    );
    let seen = progress(&notes);
    let beats: Vec<_> = seen
        .iter()
        .filter(|(_, _, message)| {
            message
                .as_deref()
                .is_some_and(|message| message.starts_with("still working"))
        })
        .collect();
    assert!(beats.len() >= 2, "{seen:?}");
    // Each above the last, as MCP wants, and the upstream's own last.
    assert!(
        seen.windows(2).all(|pair| pair[1].0 > pair[0].0),
        "{seen:?}"
    );
    assert_eq!(seen.last().unwrap().0, 1.0, "{seen:?}");
}

#[test]
fn cancel_from_the_client_reaches_the_upstream_and_ends_the_run_once() {
    let entry = everything_entry();
    let dir = tempfile::tempdir().unwrap();
    let heard = dir.path().join("upstream-stdin.jsonl");
    // What the upstream reads on its stdin, copied to a file on the way.
    let command = format!(
        "tee {} | exec node {} stdio",
        heard.display(),
        entry.display()
    );
    let mut wrapped = Peer::wrap(&["--memory"], &["sh", "-c", &command]);
    let id = wrapped.call(
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
    );
    // Its first progress: the call is running on the upstream.
    let first = wrapped.next_about_calls(Duration::from_secs(20));
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let run_id = wrapped.newest_run();
    wrapped.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "the user pressed stop"}}));
    wrapped.await_state(&run_id, "canceled");
    let events = wrapped.events(&run_id);
    assert_eq!(terminal(&events), ["canceled"]);
    // The upstream was told, naming the request weir made of it.
    let until = Instant::now() + Duration::from_secs(10);
    let cancelled = loop {
        let lines = std::fs::read_to_string(&heard).unwrap_or_default();
        let cancelled: Vec<Value> = lines
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|message| message["method"] == "notifications/cancelled")
            .collect();
        if !cancelled.is_empty() || Instant::now() > until {
            break (cancelled, lines);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (cancelled, lines) = cancelled;
    assert_eq!(cancelled.len(), 1, "{lines}");
    let asked: Vec<Value> = lines
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| {
            message["method"] == "tools/call"
                && message["params"]["name"] == "trigger-long-running-operation"
        })
        .map(|message| message["id"].clone())
        .collect();
    assert_eq!(
        asked,
        [cancelled[0]["params"]["requestId"].clone()],
        "{lines}"
    );
    // The run stays canceled: one terminal event, however long we wait.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(terminal(&wrapped.events(&run_id)), ["canceled"]);
}

#[test]
fn kill_9_of_the_upstream_mid_call_fails_the_run_once_and_the_next_call_starts_it_again() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let mut wrapped = Peer::wrap(&["--memory"], &["node", entry, "stdio"]);
    let id = wrapped.call(
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
    );
    let first = wrapped.next_about_calls(Duration::from_secs(20));
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let upstream = children(wrapped.child.id());
    assert_eq!(upstream.len(), 1, "{upstream:?}");
    let killed = Command::new("kill")
        .args(["-9", &upstream[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (_, answer) = wrapped.reply(id, Duration::from_secs(20));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"].to_string();
    assert!(
        text.contains("the upstream wrapped") && text.contains("exited"),
        "{text}"
    );
    let run_id = wrapped.newest_run();
    let events = wrapped.events(&run_id);
    assert_eq!(terminal(&events), ["failed"]);
    // The next call starts the server again.
    let id = wrapped.call("echo", json!({"message": "again"}));
    let (_, answer) = wrapped.reply(id, Duration::from_secs(30));
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: again",
        "{answer}"
    );
    assert_eq!(terminal(&wrapped.events(&run_id)), ["failed"]);
}

#[test]
fn runs_wait_returns_the_result_and_defer_after_answers_a_long_call_early() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let mut wrapped = Peer::wrap(
        &["--memory", "--defer-after", "1"],
        &["node", entry, "stdio"],
    );
    let sent = Instant::now();
    let id = wrapped.call(
        "trigger-long-running-operation",
        json!({"duration": 4, "steps": 2}),
    );
    let (_, answer) = wrapped.reply(id, Duration::from_secs(20));
    let early = sent.elapsed();
    assert!(early < Duration::from_secs(3), "{early:?}");
    let deferred = &answer["result"];
    assert_eq!(
        deferred["structuredContent"]["still_working"], true,
        "{answer}"
    );
    let run_id = deferred["structuredContent"]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        deferred["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("runs_wait")
    );
    // A short wait: still working, said again.
    let waited = wrapped.runs_tool("runs_wait", json!({"run_id": run_id, "timeout_s": 0.2}));
    assert_eq!(
        waited["structuredContent"]["still_working"], true,
        "{waited}"
    );
    assert_eq!(waited["structuredContent"]["state"], "working", "{waited}");
    // Long enough: the run's own result, as the tool gave it.
    let waited = wrapped.runs_tool("runs_wait", json!({"run_id": run_id, "timeout_s": 30}));
    assert_eq!(
        waited["content"][0]["text"],
        "Long running operation completed. Duration: 4 seconds, Steps: 2.",
        "{waited}"
    );
    assert_eq!(waited["isError"], Value::Null);
    assert_eq!(terminal(&wrapped.events(&run_id)), ["completed"]);
    // An unknown run is a tool error.
    let unknown = wrapped.runs_tool(
        "runs_wait",
        json!({"run_id": "01a21a4f11e4745bba7e5d2e5f9286a7"}),
    );
    assert_eq!(unknown["isError"], true, "{unknown}");
}

#[test]
fn weir_serve_prefixes_upstream_tools_and_serves_on_when_one_does_not_start() {
    let entry = everything_entry();
    let everything = format!("everything=-- node {} stdio", entry.display());
    let mut served = Peer::start(
        WEIR,
        &[
            "serve",
            "--stdio",
            "--memory",
            "--no-exec",
            "--upstream",
            &everything,
            "--upstream",
            "broken=-- /nonexistent/mcp-server",
        ],
    );
    let tools = served.request("tools/list", json!({}))["result"]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"everything__get-sum"), "{names:?}");
    assert!(!names.contains(&"get-sum"), "{names:?}");
    assert!(!names.iter().any(|name| name.starts_with("broken__")));
    let needles = ["the upstream broken is left out", "/nonexistent/mcp-server"];
    let stderr = served.stderr_with(&needles);
    assert!(
        needles.iter().all(|needle| stderr.contains(needle)),
        "{stderr}"
    );
    let answer = served.request(
        "tools/call",
        json!({"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}}),
    );
    assert_eq!(
        answer["result"]["content"][0]["text"], "The sum of 2 and 3 is 5.",
        "{answer}"
    );
}

#[test]
fn a_tokens_file_grants_an_upstreams_tools_as_the_pack_upstream_name() {
    use std::os::unix::fs::PermissionsExt;
    let entry = everything_entry();
    let everything = format!("everything=-- node {} stdio", entry.display());
    let dir = tempfile::tempdir().unwrap();
    let start = |grant: &str| {
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, format!("ci token:a-long-enough-token {grant}\n")).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
        Command::new(WEIR)
            .args(["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec"])
            .args(["--upstream", &everything, "--tokens-file"])
            .arg(&tokens)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // A pack of an upstream that is not declared stops weir at start.
    let refused = start("packs=upstream:nowhere").wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        said.contains("upstream:nowhere") && said.contains("upstream:everything"),
        "{said}"
    );
    // The declared one's is served.
    let mut served = start("packs=upstream:everything,runs");
    let mut lines = BufReader::new(served.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let _ = served.kill();
    let _ = served.wait();
    assert!(first.contains("serving MCP at"), "{first}");
}

/// `get_status`'s account of the upstream `name`.
pub(crate) fn upstream_status(peer: &mut Peer, name: &str) -> Value {
    let status = peer.runs_tool("get_status", json!({}));
    status["structuredContent"]["upstreams"][name].clone()
}

#[test]
fn an_upstream_that_dies_idle_is_started_again_after_a_backoff_and_get_status_tells_it() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let mut wrapped = Peer::wrap(&["--memory"], &["node", entry, "stdio"]);
    let health = upstream_status(&mut wrapped, "wrapped");
    assert_eq!(health["state"], "up", "{health}");
    assert_eq!(health["restarts"], 0, "{health}");
    let first = children(wrapped.child.id());
    assert_eq!(first.len(), 1, "{first:?}");
    let killed = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-9", &first[0].to_string()])
            .status()
            .unwrap()
            .success()
    );
    // No call asks for it: weir starts it again by itself, after 1 s.
    let until = Instant::now() + Duration::from_secs(15);
    let again = loop {
        let now = children(wrapped.child.id());
        if now.len() == 1 && now != first {
            break now;
        }
        assert!(Instant::now() < until, "not started again: {now:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let after = killed.elapsed();
    assert!(after >= Duration::from_millis(900), "{after:?}");
    let health = loop {
        let health = upstream_status(&mut wrapped, "wrapped");
        if health["state"] == "up" || Instant::now() > until {
            break health;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(health["state"], "up", "{health}");
    assert_eq!(health["restarts"], 1, "{health}");
    assert!(
        health["lastError"].as_str().unwrap().contains("SIGKILL"),
        "{health}"
    );
    let id = wrapped.call("echo", json!({"message": "back"}));
    let (_, answer) = wrapped.reply(id, Duration::from_secs(30));
    assert_eq!(
        answer["result"]["content"][0]["text"], "Echo: back",
        "{answer}"
    );
    assert_eq!(children(wrapped.child.id()), again);
    let health = upstream_status(&mut wrapped, "wrapped");
    assert_eq!(
        (health["calls"].clone(), health["failed"].clone()),
        (json!(1), json!(0))
    );
    eprintln!("restarted {} ms after kill -9", after.as_millis());
}

#[test]
fn an_upstreams_file_limits_its_calls_at_once_and_their_time() {
    let entry = everything_entry();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("upstreams.json");
    let declared = json!({"mcpServers": {"everything": {
        "command": "node",
        "args": [entry.to_str().unwrap(), "stdio"],
        "weir": {"maxConcurrent": 1, "timeoutSeconds": 2}
    }}});
    std::fs::write(&file, declared.to_string()).unwrap();
    let mut served = Peer::start(
        WEIR,
        &[
            "serve",
            "--stdio",
            "--memory",
            "--no-exec",
            "--upstreams",
            file.to_str().unwrap(),
        ],
    );
    let health = upstream_status(&mut served, "everything");
    assert_eq!(
        (
            health["maxConcurrent"].clone(),
            health["timeoutSeconds"].clone()
        ),
        (json!(1), json!(2.0)),
        "{health}"
    );
    // Past its time limit: failed as timed out.
    let started = Instant::now();
    let id = served.call(
        "everything__trigger-long-running-operation",
        json!({"duration": 6, "steps": 6}),
    );
    let (_, answer) = served.reply(id, Duration::from_secs(20));
    let took = started.elapsed();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"].to_string();
    assert!(text.contains("did not end within 2s"), "{text}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Two calls at once: the second waits its turn, and its run says so.
    let started = Instant::now();
    let first = served.call(
        "everything__trigger-long-running-operation",
        json!({"duration": 1.5, "steps": 1}),
    );
    let second = served.call(
        "everything__trigger-long-running-operation",
        json!({"duration": 1.5, "steps": 1}),
    );
    let mut answers = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while answers.len() < 2 {
        let message = served.next(until.saturating_duration_since(Instant::now()));
        if message.get("method").is_none() && [json!(first), json!(second)].contains(&message["id"])
        {
            answers.push(message);
        }
    }
    let took = started.elapsed();
    for answer in &answers {
        assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
    }
    assert!(
        took >= Duration::from_secs(3),
        "both in {took:?}: not one at a time"
    );
    let runs = served.runs_tool("runs_list", json!({"limit": 2}));
    let waited: Vec<bool> = runs["structuredContent"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["run_id"].as_str().unwrap().to_owned())
        .map(|run_id| {
            served.events(&run_id).iter().any(|event| {
                event["type"] == "log"
                    && event["text"]
                        .as_str()
                        .is_some_and(|text| text.contains("waiting for a turn"))
            })
        })
        .collect();
    assert_eq!(
        waited.iter().filter(|waited| **waited).count(),
        1,
        "{waited:?}"
    );
}

/// The `key` list of `method`'s answer, sorted by `field`.
fn listed(peer: &mut Peer, method: &str, key: &str, field: &str) -> Vec<Value> {
    let answer = peer.request(method, json!({}));
    let mut list = answer["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{method}: {answer}"))
        .clone();
    list.sort_by_key(|item| item[field].as_str().unwrap_or_default().to_owned());
    list
}

#[test]
fn weir_wrap_passes_the_upstreams_resources_and_prompts_through_as_they_are() {
    let entry = everything_entry();
    let entry = entry.to_str().unwrap();
    let mut direct = Peer::start("node", &[entry, "stdio"]);
    let mut wrapped = Peer::wrap(&["--memory"], &["node", entry, "stdio"]);
    // Lists: the upstream's, entry for entry; the templates also weir's own.
    let resources = listed(&mut direct, "resources/list", "resources", "uri");
    assert!(!resources.is_empty());
    assert_eq!(
        listed(&mut wrapped, "resources/list", "resources", "uri"),
        resources
    );
    let prompts = listed(&mut direct, "prompts/list", "prompts", "name");
    assert!(prompts.iter().any(|prompt| prompt["name"] == "args-prompt"));
    assert_eq!(
        listed(&mut wrapped, "prompts/list", "prompts", "name"),
        prompts
    );
    let templates = listed(
        &mut direct,
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    );
    let served = listed(
        &mut wrapped,
        "resources/templates/list",
        "resourceTemplates",
        "uriTemplate",
    );
    for template in &templates {
        assert!(served.contains(template), "{template} not in {served:?}");
    }
    assert!(
        served.iter().any(|template| template["uriTemplate"]
            .as_str()
            .unwrap()
            .starts_with("weir://runs/")),
        "{served:?}"
    );
    // Reads: a listed resource and one made from a template, as the
    // upstream answers them.
    for uri in [
        resources[0]["uri"].as_str().unwrap(),
        "demo://resource/dynamic/text/7",
    ] {
        let read = |peer: &mut Peer| {
            peer.request("resources/read", json!({"uri": uri}))["result"]["contents"].clone()
        };
        // A dynamic resource says when it was made, to the second: weir's
        // answer is the upstream's of a read just before or just after.
        let before = read(&mut direct);
        assert!(before[0]["uri"] == uri, "{before}");
        let through = read(&mut wrapped);
        let after = read(&mut direct);
        assert!(
            through == before || through == after,
            "{uri}: {through} is neither {before} nor {after}"
        );
    }
    // A prompt with arguments, rendered by the upstream.
    let get = json!({"name": "args-prompt", "arguments": {"city": "Lisbon", "state": "Lx"}});
    let rendered = direct.request("prompts/get", get.clone())["result"].clone();
    assert!(rendered.to_string().contains("Lisbon"), "{rendered}");
    assert_eq!(wrapped.request("prompts/get", get)["result"], rendered);
    // What the upstream refuses, weir refuses alike; weir's own run
    // resources are still weir's.
    let missing = json!({"name": "no-such-prompt"});
    let refused = wrapped.request("prompts/get", missing.clone());
    assert_eq!(
        refused["error"]["code"],
        direct.request("prompts/get", missing)["error"]["code"]
    );
    assert!(refused["error"]["message"].is_string(), "{refused}");
    wrapped.request(
        "tools/call",
        json!({"name": "get-sum", "arguments": {"a": 1, "b": 2}}),
    );
    let run = wrapped.newest_run();
    let own = wrapped.request(
        "resources/read",
        json!({"uri": format!("weir://runs/{run}")}),
    );
    assert!(
        own["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("get-sum"),
        "{own}"
    );
}

/// A stateless (2026-07-28) request to weir at `addr` as `token`: the
/// JSON-RPC answer (HTTP/1.0, so the body ends with the connection).
fn http_request(addr: &str, token: &str, method: &str, params: Value) -> Value {
    use std::io::Read;
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let request = format!(
        "POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let data = crate::sse_body::last_data(body).unwrap_or_else(|| body.to_owned());
    serde_json::from_str(data.trim()).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[test]
fn weir_serve_prefixes_upstream_prompts_and_shows_each_upstreams_to_callers_granted_it() {
    use std::os::unix::fs::PermissionsExt;
    let entry = everything_entry();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "one token:token-of-caller-one packs=upstream:one\nboth token:token-of-caller-both packs=upstream:one,upstream:two\nnone token:token-of-caller-none packs=runs\n",
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut served = Command::new(WEIR)
        .args(["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec"])
        .args([
            "--upstream",
            &format!("one=-- node {} stdio", entry.display()),
        ])
        .args([
            "--upstream",
            &format!("two=-- node {} stdio", entry.display()),
        ])
        .arg("--tokens-file")
        .arg(&tokens)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(served.stderr.take().unwrap()).lines();
    let said = lines.next().unwrap().unwrap();
    let addr = said
        .split("serving MCP at http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    let names = |token: &str| -> Vec<String> {
        let answer = http_request(&addr, token, "prompts/list", json!({}));
        answer["result"]["prompts"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|prompt| prompt["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // Each upstream's prompts, prefixed as its tools are; a caller sees
    // those of the upstreams it is granted, and nothing of the others.
    let both = names("token-of-caller-both");
    assert!(both.contains(&"one__args-prompt".to_owned()), "{both:?}");
    assert!(both.contains(&"two__args-prompt".to_owned()), "{both:?}");
    assert!(!both.contains(&"args-prompt".to_owned()), "{both:?}");
    let one = names("token-of-caller-one");
    assert!(one.contains(&"one__simple-prompt".to_owned()), "{one:?}");
    assert!(!one.iter().any(|name| name.starts_with("two__")), "{one:?}");
    assert!(names("token-of-caller-none").is_empty());
    let resources = |token: &str| {
        http_request(&addr, token, "resources/list", json!({}))["result"]["resources"]
            .as_array()
            .unwrap()
            .len()
    };
    assert!(resources("token-of-caller-one") > 0);
    assert_eq!(resources("token-of-caller-none"), 0);
    // A prompt renders by its served name; another's is refused as absent.
    let get = |token: &str, name: &str| {
        http_request(
            &addr,
            token,
            "prompts/get",
            json!({"name": name, "arguments": {"city": "Lisbon"}}),
        )
    };
    let rendered = get("token-of-caller-one", "one__args-prompt");
    assert!(
        rendered["result"]["messages"]
            .to_string()
            .contains("Lisbon"),
        "{rendered}"
    );
    let refused = get("token-of-caller-one", "two__args-prompt");
    assert!(refused["error"].is_object(), "{refused}");
    let uri = "demo://resource/dynamic/text/3";
    let read = |token: &str| http_request(&addr, token, "resources/read", json!({"uri": uri}));
    assert_eq!(
        read("token-of-caller-one")["result"]["contents"][0]["uri"],
        uri
    );
    assert!(read("token-of-caller-none")["error"].is_object());
    let _ = served.kill();
    let _ = served.wait();
}

/// The Python SDK server of tests/wrap/ (`mcp` 1.x), as a command line:
/// its tool `add_tool` adds a tool `echo_N` and says the list changed.
fn sdk_server() -> Vec<String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("WRAP_SDK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/clients/py-mcp1/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: `scripts/wrap-tests install` makes it (scripts/test does)",
        python.display()
    );
    let server = repo.join("tests/wrap/sdk_server.py");
    vec![python.display().to_string(), server.display().to_string()]
}

/// The names `tools/list` gives.
fn tool_names(peer: &mut Peer) -> Vec<String> {
    let answer = peer.request("tools/list", json!({}));
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Calls `tool` and waits for a `notifications/tools/list_changed`, before
/// its answer or after it (within 10 s); returns the answer.
fn call_until_list_changed(peer: &mut Peer, tool: &str) -> Value {
    let id = peer.call(tool, json!({}));
    let (notes, answer) = peer.reply(id, Duration::from_secs(30));
    let changed = |note: &Value| note["method"] == "notifications/tools/list_changed";
    if notes.iter().any(changed) {
        return answer;
    }
    let until = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no tools/list_changed within 10 s: {seen:?}"
        );
        let message = peer.next(left);
        if message["method"] == "notifications/tools/list_changed" {
            return answer;
        }
        seen.push(message);
    }
}

/// Calls the SDK server's `add_tool` through weir (its tools named with
/// `prefix`) until weir says its list changed, then finds the new tool
/// `echo_1` listed and calls it as a run of weir's, like the others.
fn adds_a_tool_and_calls_it(peer: &mut Peer, prefix: &str) {
    let answer = call_until_list_changed(peer, &format!("{prefix}add_tool"));
    assert_eq!(
        answer["result"]["content"][0]["text"], "added echo_1",
        "{answer}"
    );
    let names = tool_names(peer);
    assert!(names.contains(&format!("{prefix}echo_1")), "{names:?}");
    assert!(names.contains(&"runs_wait".to_owned()), "{names:?}");
    let answer = peer.request(
        "tools/call",
        json!({"name": format!("{prefix}echo_1"), "arguments": {"text": "hi"}}),
    );
    assert_eq!(
        answer["result"]["content"][0]["text"], "echo_1: hi",
        "{answer}"
    );
}

#[test]
fn an_upstreams_tools_list_changed_is_followed_and_forwarded() {
    let command = sdk_server();
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    // weir wrap: the upstream's names; its server says the list may change.
    let mut wrapped = Peer::start(
        WEIR,
        &[&["wrap", "--memory", "--"], command.as_slice()].concat(),
    );
    let init = wrapped.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    assert!(!tool_names(&mut wrapped).contains(&"echo_1".to_owned()));
    adds_a_tool_and_calls_it(&mut wrapped, "");
    let runs = wrapped.runs_tool("runs_list", json!({"tool": "echo_1"}));
    assert_eq!(
        runs["structuredContent"]["runs"][0]["state"], "completed",
        "{runs}"
    );
    // weir serve: NAME__tool, and the server's resources and prompts too.
    let upstream = format!("sdk=-- {}", command.join(" "));
    let mut served = Peer::start(
        WEIR,
        &[
            "serve",
            "--stdio",
            "--memory",
            "--no-exec",
            "--upstream",
            &upstream,
        ],
    );
    call_until_list_changed(&mut served, "sdk__add_tool");
    call_until_list_changed(&mut served, "sdk__add_tool");
    let names = tool_names(&mut served);
    for name in ["sdk__slow", "sdk__echo_1", "sdk__echo_2"] {
        assert!(names.contains(&name.to_owned()), "{name} not in {names:?}");
    }
    let answer = served.request(
        "tools/call",
        json!({"name": "sdk__echo_2", "arguments": {"text": "yo"}}),
    );
    assert_eq!(
        answer["result"]["content"][0]["text"], "echo_2: yo",
        "{answer}"
    );
    let greeting = served.request(
        "prompts/get",
        json!({"name": "sdk__greet", "arguments": {"name": "Ana"}}),
    );
    assert_eq!(
        greeting["result"]["messages"][0]["content"]["text"], "Hello, Ana!",
        "{greeting}"
    );
    let note = served.request("resources/read", json!({"uri": "notes://note/4"}));
    assert_eq!(note["result"]["contents"][0]["text"], "note 4", "{note}");
}

/// An HTTP upstream in a 2025-11-25 session says its tools changed outside
/// any request, on the session's own stream (the Python SDK server of
/// tests/wrap in its Streamable HTTP mode sends `add_tool`'s
/// `notifications/tools/list_changed` there): weir lists them again, serves
/// the new tool and tells its own client.
#[test]
fn an_http_upstreams_tools_list_changed_on_its_session_stream_is_followed() {
    let command = sdk_server();
    let port = free_port();
    let mut upstream = Command::new(&command[0])
        .args([&command[1], "http", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    await_listening(port, "the SDK server");
    let upstream_url = format!("sdk=http://127.0.0.1:{port}/mcp/");
    let mut served = Peer::start(
        WEIR,
        &[
            "serve",
            "--stdio",
            "--memory",
            "--no-exec",
            "--upstream",
            &upstream_url,
        ],
    );
    assert!(!tool_names(&mut served).contains(&"sdk__echo_1".to_owned()));
    // weir looks for an upstream's open connection once a second and
    // listens on its session's stream from then on; a change said before
    // that is one no stream was open for.
    std::thread::sleep(Duration::from_secs(2));
    adds_a_tool_and_calls_it(&mut served, "sdk__");
    let _ = upstream.kill();
    let _ = upstream.wait();
}

/// A 2025-11-25 request over HTTP/1.0 to weir at `addr` in `session` (or
/// none): the response's head and its JSON-RPC answer.
fn session_request(
    addr: &str,
    session: Option<&str>,
    method: &str,
    params: Value,
) -> (String, Value) {
    use std::io::Read;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(session) = session {
        head.push_str(&format!(
            "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        ));
    }
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let data = crate::sse_body::last_data(body).unwrap_or_else(|| body.to_owned());
    let message = serde_json::from_str(data.trim()).unwrap_or_else(|e| panic!("{e}: {answer}"));
    (head.to_owned(), message)
}

#[test]
fn an_http_session_hears_an_upstreams_list_change_on_its_standalone_stream() {
    let command = sdk_server();
    let mut served = Command::new(WEIR)
        .args(["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec"])
        .args(["--upstream", &format!("sdk=-- {}", command.join(" "))])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(served.stderr.take().unwrap()).lines();
    let said = lines.next().unwrap().unwrap();
    let addr = said
        .split("serving MCP at http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("{said}"))
        .to_owned();
    let (head, init) = session_request(
        &addr,
        None,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    let session = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {head}"));
    // The session's standalone stream, read on a thread of its own.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    .unwrap();
    let (heard, hearing) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if heard.send(line).is_err() {
                break;
            }
        }
    });
    let status = hearing.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let (_, answer) = session_request(
        &addr,
        Some(&session),
        "tools/call",
        json!({"name": "sdk__add_tool", "arguments": {}}),
    );
    assert_eq!(
        answer["result"]["content"][0]["text"], "added echo_1",
        "{answer}"
    );
    let until = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(line) = hearing.recv_timeout(left) else {
            panic!("no tools/list_changed on the standalone stream within 10 s: {seen:?}");
        };
        if line.contains("notifications/tools/list_changed") {
            break;
        }
        seen.push(line);
    }
    let (_, tools) = session_request(&addr, Some(&session), "tools/list", json!({}));
    assert!(tools.to_string().contains("\"sdk__echo_1\""), "{tools}");
    let _ = served.kill();
    let _ = served.wait();
}

/// A stdio MCP server in a few lines of Python, writing its messages by
/// hand: its tool `raw` sends one partial result whose blocks are written
/// as a server may write them (an unknown block, its keys not in order,
/// an escaped character), then its result.
const RAW_SERVER: &str = r#"
import json, sys
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    id_, method = message["id"], message.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": [{"name": "raw", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        token = json.dumps(message["params"]["_meta"]["partialResultToken"])
        sys.stdout.write('{"jsonrpc": "2.0", "method": "notifications/tools/partial_result", "params": {"partialResultToken": %s, "seq": 0, "content": [{"type": "hologram", "depth": 3, "label": "caf\\u00e9"}, {"type": "text", "text": "plain"}]}}\n' % token)
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "done"}]}})
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no " + str(method)}})
"#;

/// What an upstream sends is relayed as it wrote it: a content block weir
/// does not know reaches the run's partial event as the upstream's own
/// text (its key order, its escapes), not a re-encoding of it.
#[test]
fn an_upstreams_partial_reaches_the_runs_event_as_the_upstream_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("raw_server.py");
    std::fs::write(&script, RAW_SERVER).unwrap();
    let mut wrapped = Peer::wrap(&["--memory"], &["python3", script.to_str().unwrap()]);
    let id = wrapped.call("raw", json!({}));
    let (_, answer) = wrapped.reply(id, Duration::from_secs(30));
    assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
    // Its result does not repeat the partial: the run's result is the
    // partial's blocks, then the result's own.
    assert_eq!(
        result_texts(&answer),
        [
            r#"{"type": "hologram", "depth": 3, "label": "caf\u00e9"}"#,
            "plain",
            "done"
        ],
        "{answer}"
    );
    let run_id = wrapped.newest_run();
    let events = wrapped.events(&run_id);
    let partials: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "partial")
        .collect();
    assert_eq!(partials.len(), 1, "{events:?}");
    assert_eq!(
        partials[0]["content"],
        json!([
            {"type": "text", "text": r#"{"type": "hologram", "depth": 3, "label": "caf\u00e9"}"#},
            {"type": "text", "text": "plain"}
        ]),
        "{events:?}"
    );
}

/// The text of each content block of a `tools/call` answer's result.
fn result_texts(answer: &Value) -> Vec<&str> {
    answer["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|block| block["text"].as_str().unwrap())
        .collect()
}

/// An upstream that streams partial results and answers with a result
/// complete by itself (weir's own stream fixture: the items, then
/// `streamed 3 items`) reaches the model once: the wrapped run's result
/// is its partials, then only what the upstream's result adds to them.
/// (One that sends only the rest at the end keeps it all: the raw server's
/// test above.)
#[test]
fn a_result_that_repeats_its_partials_reaches_the_client_once() {
    let mut wrapped = Peer::wrap(
        &["--memory"],
        &[WEIR, "serve", "--memory", "--fixtures", "--stdio"],
    );
    let id = wrapped.call("stream", json!({"count": 3, "size": 16}));
    let (_, answer) = wrapped.reply(id, Duration::from_secs(30));
    assert_eq!(
        result_texts(&answer),
        [
            "00000000:xxxxxxx",
            "00000001:xxxxxxx",
            "00000002:xxxxxxx",
            "streamed 3 items"
        ],
        "{answer}"
    );
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"count": 3}),
        "{answer}"
    );
    // The run's log still holds the three partials, as the upstream sent them.
    let run_id = wrapped.newest_run();
    let partials = wrapped
        .events(&run_id)
        .into_iter()
        .filter(|event| event["type"] == "partial")
        .count();
    assert_eq!(partials, 3);
}

const FLOODING_SERVER: &str = r#"
import json, sys, time
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    id_, method = message["id"], message.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "flood", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": [{"name": "flood", "inputSchema": {"type": "object"}}, {"name": "echo", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and message["params"]["name"] == "flood":
        # A line that never ends: 65 MiB and counting, then silence.
        chunk = "x" * (1 << 20)
        for _ in range(65):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        time.sleep(600)
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "still here"}]}})
"#;

/// An upstream that writes a line past the client's bound (64 MiB) does
/// not take weir's memory: the call fails once with a clear error, the
/// upstream is stopped, and the next call starts it again.
#[test]
fn an_upstream_line_past_the_bound_fails_the_call_and_the_upstream_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("flooding_server.py");
    std::fs::write(&script, FLOODING_SERVER).unwrap();
    let mut wrapped = Peer::wrap(&["--memory"], &["python3", script.to_str().unwrap()]);
    let id = wrapped.call("flood", json!({}));
    let (_, answer) = wrapped.reply(id, Duration::from_secs(60));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"].to_string();
    assert!(text.contains("more than 64 MiB"), "{text}");
    let run_id = wrapped.newest_run();
    assert_eq!(terminal(&wrapped.events(&run_id)), ["failed"]);
    let id = wrapped.call("echo", json!({}));
    let (_, answer) = wrapped.reply(id, Duration::from_secs(30));
    assert_eq!(
        answer["result"]["content"][0]["text"], "still here",
        "{answer}"
    );
}
