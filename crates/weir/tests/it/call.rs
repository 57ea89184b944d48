//! `weir call`, `weir tools` and `weir runs tail --url`, driven as a user
//! would: the real binary against real servers — `weir serve` over stdio
//! and HTTP (both revisions), the official reference server from npm, and
//! a terminal (a pty, through `script`) for the progress bar and Ctrl-C.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

fn weir() -> Command {
    let mut command = Command::new(WEIR);
    command.stdin(Stdio::null()).env_remove("WEIR_TOKEN");
    command
}

fn run(args: &[&str]) -> Output {
    weir().args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `weir serve --stdio` as a `--stdio` command line.
fn stdio_server(extra: &str) -> String {
    format!("{WEIR} serve --stdio --fixtures {extra}")
}

/// `weir serve --http 127.0.0.1:0 --fixtures --memory`, killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> HttpServer {
        let mut child = weir()
            .args(["serve", "--http", "127.0.0.1:0", "--fixtures", "--memory"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        // "weir: serving MCP at http://127.0.0.1:PORT/mcp (…"
        let url = loop {
            let line = lines
                .next()
                .expect("weir serve printed where it serves")
                .unwrap();
            if line.contains("serving MCP at") {
                let url = line
                    .split_whitespace()
                    .find(|word| word.starts_with("http://"));
                break url
                    .unwrap_or_else(|| panic!("no URL in {line:?}"))
                    .to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || lines.for_each(drop));
        HttpServer { child, url }
    }

    /// The state of the newest run, asked of the server with `weir call`.
    /// The newest run, after waiting up to 2.5 s for it to leave `working`
    /// (a cancel reaches the server a moment after the client exits).
    fn newest_run_once_ended(&self) -> Value {
        let mut run = self.newest_run();
        for _ in 0..50 {
            if run["state"] != "working" {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            run = self.newest_run();
        }
        run
    }

    fn newest_run(&self) -> Value {
        let output = run(&[
            "call",
            "--url",
            &self.url,
            "runs_list",
            "limit=1",
            "--output",
            "jsonl",
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let lines = jsonl(&output.stdout);
        lines.last().unwrap()["structured"]["runs"][0].clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn jsonl(stdout: &[u8]) -> Vec<Value> {
    text(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A `weir call` running in the background; its stdout lines arrive on a
/// channel with the time each was read.
struct Running {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = weir()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    fn next_line(&self) -> (Instant, Value) {
        let (at, line) = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("a line within 30 s");
        (at, serde_json::from_str(&line).unwrap())
    }

    /// Every remaining line, the exit code and stderr.
    fn finish(mut self) -> (Vec<(Instant, Value)>, Option<i32>, String) {
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let lines = self
            .lines
            .iter()
            .map(|(at, line)| (at, serde_json::from_str(&line).unwrap()))
            .collect();
        (lines, status.code(), stderr)
    }

    fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }
}

/// Checks one streamed `stream` call (jsonl, read live): partials dense
/// from 0 and progress, all before the result, the first of them well
/// before it; returns the result line.
fn check_streamed(lines: &[(Instant, Value)], count: u64, spread: Duration) -> Value {
    let (last_at, result) = lines.last().unwrap().clone();
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["structured"]["count"], count);
    let seqs: Vec<u64> = lines
        .iter()
        .filter(|(_, line)| line["type"] == "partial")
        .map(|(_, line)| line["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (0..count).collect::<Vec<_>>(),
        "partials in order, each once"
    );
    let progress = lines
        .iter()
        .filter(|(_, line)| line["type"] == "progress")
        .count();
    assert!(progress >= 2, "{progress} progress lines");
    // A weir server names the run first.
    assert_eq!(lines[0].1["type"], "run", "{}", lines[0].1);
    assert!(
        lines[0].1["run_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    assert_eq!(result["run"]["run_id"], lines[0].1["run_id"]);
    assert_eq!(result["run"]["state"], "completed");
    let (first_at, first) = &lines[1];
    assert!(first["type"] == "partial" || first["type"] == "progress");
    assert!(
        last_at.duration_since(*first_at) >= spread,
        "the first event came {:?} before the result: not streamed",
        last_at.duration_since(*first_at)
    );
    result
}

fn streamed_call(server: &[&str], extra: &[&str]) {
    let mut args = vec!["call"];
    args.extend(server);
    args.extend(["stream", "count=10", "interval_ms=100", "--output", "jsonl"]);
    args.extend(extra);
    let running = Running::start(&args);
    let (lines, code, stderr) = running.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "", "nothing on stderr when it is not a terminal");
    let result = check_streamed(&lines, 10, Duration::from_millis(600));
    assert_eq!(result["content"].as_array().unwrap().len(), 11);
    assert_eq!(result["content"][10]["text"], "streamed 10 items");
}

#[test]
fn over_stdio_progress_and_partials_arrive_before_the_result() {
    let server = stdio_server("--memory");
    streamed_call(&["--stdio", &server], &[]);
}

#[test]
fn over_http_progress_and_partials_arrive_before_the_result_in_both_revisions() {
    let server = HttpServer::start();
    streamed_call(&["--url", &server.url], &[]);
    streamed_call(&["--url", &server.url], &["--protocol", "2026-07-28"]);
    streamed_call(&["--url", &server.url], &["--protocol", "2025-11-25"]);
}

#[test]
fn piped_text_output_is_the_items_then_the_rest_of_the_result() {
    let server = stdio_server("--memory");
    let output = run(&[
        "call",
        "--stdio",
        &server,
        "stream",
        "count=3",
        "size=12",
        "interval_ms=10",
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        text(&output.stdout),
        "00000000:xxx\n00000001:xxx\n00000002:xxx\nstreamed 3 items\n"
    );
    // Only the run, on stderr: where to follow it.
    let stderr = text(&output.stderr);
    let id = stderr
        .strip_prefix("run ")
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("{stderr:?}"));
    assert_eq!(stderr, format!("run {id}: weir runs tail {id}\n"));
    let json_args = run(&[
        "call",
        "--stdio",
        &server,
        "stream",
        "--json",
        r#"{"count": 2, "size": 9}"#,
        "count=1",
    ]);
    assert_eq!(text(&json_args.stdout), "00000000:\nstreamed 1 items\n");
}

/// Starts a long call, interrupts it once it streams, and returns how it
/// ended.
fn interrupted_call(args: &[&str]) -> (Vec<(Instant, Value)>, Option<i32>, String) {
    let running = Running::start(args);
    let (_, mut first) = running.next_line();
    if first["type"] == "run" {
        first = running.next_line().1;
    }
    assert!(
        ["partial", "progress", "task"].contains(&first["type"].as_str().unwrap()),
        "{first}"
    );
    running.interrupt();
    running.finish()
}

fn check_interrupted((lines, code, stderr): (Vec<(Instant, Value)>, Option<i32>, String)) {
    assert_eq!(code, Some(3), "{stderr}");
    let last = &lines.last().unwrap().1;
    assert_eq!(last["type"], "error");
    assert_eq!(last["message"], "canceled: interrupted (Ctrl-C)");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("weir: canceled: interrupted (Ctrl-C);"),
        "{stderr}"
    );
}

const LONG: [&str; 5] = [
    "stream",
    "count=1000",
    "interval_ms=20",
    "--output",
    "jsonl",
];

#[test]
fn ctrl_c_cancels_the_remote_run_over_http_in_both_revisions_and_as_a_task() {
    let server = HttpServer::start();
    for extra in [
        &["--protocol", "2026-07-28"][..],
        &["--protocol", "2025-11-25"],
        &["--task"],
        &["--task", "--protocol", "2025-11-25"],
    ] {
        let mut args = vec!["call", "--url", &server.url];
        args.extend(LONG);
        args.extend(extra);
        check_interrupted(interrupted_call(&args));
        // The server saw it: the run ended canceled, not completed.
        let run = server.newest_run_once_ended();
        assert_eq!(run["state"], "canceled", "{extra:?}: {run}");
    }
}

#[test]
fn ctrl_c_cancels_the_remote_run_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let server = stdio_server(&format!("--data-dir {}", dir.path().display()));
    let mut args = vec!["call", "--stdio", &server];
    args.extend(LONG);
    check_interrupted(interrupted_call(&args));
    let listed = run(&[
        "runs",
        "list",
        "--json",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    let runs: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs[0]["state"], "canceled", "{runs}");
    assert_eq!(runs[0]["tool"], "stream");
}

fn task_round_trip(server: &[&str], extra: &[&str]) {
    let mut args = vec!["call"];
    args.extend(server);
    args.extend([
        "--task",
        "stream",
        "count=5",
        "interval_ms=100",
        "--output",
        "jsonl",
    ]);
    args.extend(extra);
    let (lines, code, stderr) = Running::start(&args).finish();
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<Value> = lines.into_iter().map(|(_, line)| line).collect();
    let statuses: Vec<&str> = lines
        .iter()
        .filter(|line| line["type"] == "task")
        .map(|line| line["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.first(), Some(&"working"), "{lines:?}");
    assert_eq!(statuses.last(), Some(&"completed"), "{lines:?}");
    let task_ids: std::collections::HashSet<&str> = lines
        .iter()
        .filter_map(|line| line["task_id"].as_str())
        .collect();
    assert_eq!(task_ids.len(), 1);
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["structured"]["count"], 5);
    assert_eq!(result["content"].as_array().unwrap().len(), 6);
}

#[test]
fn a_task_round_trip_over_http_in_both_revisions_and_over_stdio() {
    let server = HttpServer::start();
    task_round_trip(&["--url", &server.url], &[]);
    task_round_trip(&["--url", &server.url], &["--protocol", "2025-11-25"]);
    let stdio = stdio_server("--memory");
    task_round_trip(&["--stdio", &stdio], &[]);
}

#[test]
fn failures_exit_with_their_code_and_say_what_to_do_next_in_one_line() {
    let server = HttpServer::start();
    let url = server.url.as_str();
    let check = |args: &[&str], code: i32, starts: &str, contains: &str| {
        let output = run(args);
        let stderr = text(&output.stderr);
        // A call that started a run names it first.
        let stderr = match stderr.split_once('\n') {
            Some((first, rest)) if first.starts_with("run ") => rest.to_owned(),
            _ => stderr,
        };
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with(starts), "{args:?}: {stderr}");
        assert!(stderr.contains(contains), "{args:?}: {stderr}");
    };
    check(
        &["call", "--url", url, "test_error_handling"],
        1,
        "weir: test_error_handling failed: ",
        "intentionally returns an error",
    );
    check(
        &["call", "--url", url, "no_such_tool"],
        4,
        "weir: the server refused tools/call: unknown tool",
        &format!("see what the server offers with `weir tools --url {url}`"),
    );
    check(
        &["call", "--url", "http://127.0.0.1:9/mcp", "stream"],
        4,
        "weir: could not reach http://127.0.0.1:9/mcp: ",
        "check that the server is running and the URL is right",
    );
    check(
        &["call", "--stdio", "no-such-server-command --flag", "stream"],
        4,
        "weir: the server process exited (exit status: 127); its stderr ended with:",
        "not found",
    );
    check(
        &[
            "call",
            "--url",
            url,
            "stream",
            "count=100",
            "interval_ms=50",
            "--timeout",
            "0.5",
        ],
        3,
        "weir: no result within 0.5s; the call was cancelled on the server",
        "run it as a task",
    );
    check(
        &["call", "--url", url, "stream", "count"],
        1,
        "weir: argument \"count\" is not key=value",
        "e.g. count=3",
    );
    // The timed-out run was cancelled on the server.
    let run = server.newest_run_once_ended();
    assert_eq!(run["state"], "canceled", "{run}");
}

#[test]
fn tools_lists_each_tool_with_its_arguments() {
    let server = HttpServer::start();
    let output = run(&["tools", "--url", &server.url]);
    assert_eq!(output.status.code(), Some(0));
    let listing = text(&output.stdout);
    assert!(
        listing.contains("stream — Streams `count` partial results")
            && listing.contains("[streams, task optional]"),
        "{listing}"
    );
    assert!(
        listing.contains("    count        integer   How many items to stream. (default 10)"),
        "{listing}"
    );
    let output = run(&["tools", "--stdio", &stdio_server("--memory"), "--json"]);
    let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
    let stream = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "stream")
        .unwrap();
    assert_eq!(
        stream["input_schema"]["properties"]["mode"]["enum"][1],
        "items"
    );
    assert_eq!(stream["task_support"], "optional");
    assert_eq!(stream["streams"], true);
}

#[test]
fn runs_tail_url_follows_a_live_run_over_sse_and_exits_with_its_outcome() {
    let server = HttpServer::start();
    let running = Running::start(&[
        "call",
        "--url",
        &server.url,
        "stream",
        "count=20",
        "interval_ms=50",
        "--output",
        "jsonl",
    ]);
    let named = running.next_line().1;
    let run_id = server.newest_run()["run_id"].as_str().unwrap().to_owned();
    assert_eq!(named["run_id"], run_id.as_str(), "{named}");
    let tail = run(&["runs", "tail", &run_id, "--url", &server.url, "--json"]);
    assert_eq!(tail.status.code(), Some(0), "{}", text(&tail.stderr));
    let events = jsonl(&tail.stdout);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(events[0]["type"], "started");
    assert_eq!(events.last().unwrap()["type"], "completed");
    let (_, code, _) = running.finish();
    assert_eq!(code, Some(0));
    // Text, from a seq on.
    let tail = run(&["runs", "tail", &run_id, "--url", &server.url, "--from", "5"]);
    let lines = text(&tail.stdout);
    assert!(
        lines
            .lines()
            .next()
            .unwrap()
            .trim_start()
            .starts_with("5  "),
        "{lines}"
    );
    assert!(
        lines.lines().last().unwrap().contains("completed"),
        "{lines}"
    );
    // A canceled run exits 3.
    check_interrupted(interrupted_call(&{
        let mut args = vec!["call", "--url", &server.url];
        args.extend(LONG);
        args
    }));
    let canceled = server.newest_run()["run_id"].as_str().unwrap().to_owned();
    let tail = run(&["runs", "tail", &canceled, "--url", &server.url]);
    assert_eq!(tail.status.code(), Some(3));
    // A run the server does not have is the command's failure, not an
    // unreachable server (4).
    let missing = run(&["runs", "tail", "nope", "--url", &server.url]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("no run nope on"));
}

/// The official reference server (`@modelcontextprotocol/server-everything`,
/// pinned in tests/third_party), which streams only progress.
fn everything_server() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/third_party");
    let entry: PathBuf =
        root.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: install it with `npm ci` in tests/third_party (scripts/test does)",
        entry.display()
    );
    format!("node {} stdio", entry.display())
}

#[test]
fn the_reference_server_from_npm_streams_progress_and_runs_required_tasks() {
    let server = everything_server();
    let running = Running::start(&[
        "call",
        "--stdio",
        &server,
        "trigger-long-running-operation",
        "duration=2",
        "steps=4",
        "--output",
        "jsonl",
    ]);
    let (lines, code, stderr) = running.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let kinds: Vec<&str> = lines
        .iter()
        .map(|(_, line)| line["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["progress", "progress", "progress", "progress", "result"]
    );
    let progress: Vec<f64> = lines[..4]
        .iter()
        .map(|(_, line)| line["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(lines[0].1["total"], 4.0);
    // Each arrived as it was sent, about half a second apart.
    let gap = lines[3].0.duration_since(lines[0].0);
    assert!(gap >= Duration::from_millis(1200), "{gap:?}");
    assert!(
        lines[4].1["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Long running operation completed")
    );
    // Its research tool requires a task: weir call runs it as one unasked.
    let output = run(&[
        "call",
        "--stdio",
        &server,
        "simulate-research-query",
        "topic=rivers",
        "--output",
        "jsonl",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let lines = jsonl(&output.stdout);
    let messages: Vec<&str> = lines
        .iter()
        .filter(|line| line["type"] == "task")
        .filter_map(|line| line["message"].as_str())
        .collect();
    assert!(messages.contains(&"Gathering sources..."), "{messages:?}");
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("# Research Report: rivers")
    );
}

/// On a terminal (a pty from `script`): the progress bar with percent and
/// ETA is drawn on stderr, and a Ctrl-C typed at it cancels the run on the
/// server.
#[test]
fn on_a_terminal_a_progress_bar_is_drawn_and_ctrl_c_cancels_the_remote_run() {
    let server = HttpServer::start();
    // `exec`: `script` runs the command with `$SHELL -c`, and dash (unlike
    // bash) stays as weir's parent; the Ctrl-C would then kill the shell too,
    // and `script` would report the shell's 130 instead of weir's exit code.
    let command = format!(
        "exec {WEIR} call --url {} stream count=400 interval_ms=25",
        server.url
    );
    let mut script = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("COLUMNS", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs the command on a pty");
    let mut screen = script.stdout.take().unwrap();
    let (sender, output) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = screen.read(&mut buffer) {
            if read == 0 || sender.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(seen.contains("% ") && seen.contains("ETA")) {
        assert!(Instant::now() < deadline, "no progress bar: {seen:?}");
        if let Ok(chunk) = output.recv_timeout(Duration::from_millis(100)) {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
    assert!(seen.contains('░') && seen.contains("/400"), "{seen:?}");
    // Ctrl-C, typed at the terminal.
    let mut keyboard = script.stdin.take().unwrap();
    keyboard.write_all(b"\x03").unwrap();
    keyboard.flush().unwrap();
    let status = script.wait().unwrap();
    while let Ok(chunk) = output.recv_timeout(Duration::from_millis(500)) {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(keyboard);
    assert_eq!(status.code(), Some(3), "{seen:?}");
    assert!(
        seen.contains("weir: canceled: interrupted (Ctrl-C)"),
        "{seen:?}"
    );
    assert_eq!(server.newest_run_once_ended()["state"], "canceled");
}

/// A run cancelled by another client (here `runs_cancel` from a second
/// `weir call`): the first says so and exits 3, as for its own Ctrl-C.
/// The run line it printed at the start names the command that follows
/// the run, and that command works.
#[test]
fn a_run_cancelled_by_another_client_exits_3() {
    let server = HttpServer::start();
    let url = server.url.as_str();
    let mut child = weir()
        .args([
            "call",
            "--url",
            url,
            "stream",
            "count=1000",
            "interval_ms=20",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let id = first
        .strip_prefix("run ")
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("no run line: {first:?}"));
    assert_eq!(
        first,
        format!("run {id}: weir runs tail --url {url} {id}\n")
    );
    let cancel = run(&[
        "call",
        "--url",
        url,
        "runs_cancel",
        "--json",
        &serde_json::json!({"run_id": id, "reason": "stopped from elsewhere"}).to_string(),
    ]);
    assert_eq!(cancel.status.code(), Some(0), "{}", text(&cancel.stderr));
    let status = child.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(3), "{rest}");
    assert!(
        rest.ends_with("weir: stream was canceled: stopped from elsewhere\n"),
        "{rest:?}"
    );
    let tail = run(&["runs", "tail", "--url", url, &id]);
    assert_eq!(tail.status.code(), Some(3), "{}", text(&tail.stderr));
}

/// `weir tools` shows what a list holds (a list of objects: their
/// fields), and `--help` names an option's variable once.
#[test]
fn tools_show_array_items_and_help_names_each_variable_once() {
    let server = format!("{WEIR} serve --stdio --memory --no-critique");
    let tools = run(&["tools", "--stdio", &server]);
    assert_eq!(tools.status.code(), Some(0), "{}", text(&tools.stderr));
    let listing = text(&tools.stdout);
    let execute = listing
        .split_once("execute_code — ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("{listing}"));
    let line = |name: &str| {
        execute
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name}: {execute}"))
            .to_owned()
    };
    assert!(line("args").contains(" string[] "), "{}", line("args"));
    assert!(line("files").contains(" object[] "), "{}", line("files"));
    let each = execute
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("files "))
        .nth(1)
        .unwrap();
    assert_eq!(
        each.trim(),
        "each: {content: string, encoding?: string, path: string}"
    );
    for command in [&["serve", "--help"][..], &["call", "--help"]] {
        let help = text(&run(command).stdout);
        assert_eq!(
            help.matches("[env: WEIR_TOKEN]").count(),
            1,
            "{command:?}: {help}"
        );
    }
    // Every option of every command that reads a variable names it once,
    // in clap's `[env: …]`.
    for command in [
        &["serve", "--help"][..],
        &["wrap", "--help"],
        &["call", "--help"],
        &["tools", "--help"],
        &["runs", "list", "--help"],
        &["runs", "cancel", "--help"],
        &["plan", "run", "--help"],
        &["llmstxt", "--help"],
    ] {
        let help = text(&run(command).stdout);
        for option in help
            .split("\n      -")
            .filter(|option| option.contains("[env: "))
        {
            let name: String = option
                .split("[env: ")
                .nth(1)
                .unwrap()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert_eq!(
                option.matches(name.as_str()).count(),
                1,
                "{command:?} names {name} more than once: {option}"
            );
        }
    }
}
