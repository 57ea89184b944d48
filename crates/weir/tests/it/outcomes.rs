//! Issue 24, finding 1: a program that fails is a failed call. Through the
//! real binary: `execute_code` on a program that exits non-zero, dies by a
//! signal or times out answers `isError: true` with all its output and
//! structured fields, its run is `failed` to `runs_get`, `weir call` exits
//! 1 on it, and the README's plan example (`make` with a retry and an
//! `alert` step on failure) retries the build and runs the alert, as
//! written.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A `weir serve --stdio --memory` and the client side of its session.
struct Server {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(WEIR)
            .args(["serve", "--stdio", "--memory"])
            .args(args)
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            messages,
            next_id: 1,
        };
        let initialized = server.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "weir-outcomes-test", "version": "0"}
            }),
        );
        assert!(initialized["result"].is_object(), "{initialized}");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its response, skipping notifications.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .messages
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answers in time");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// The result of `tools/call` of `tool` with `arguments`.
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(response["error"].is_null(), "{response}");
        response["result"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of each content block of a result.
fn texts(result: &Value) -> Vec<&str> {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect()
}

/// The run of a result of `execute_code`, by its `output_uri`.
fn run_of(result: &Value) -> String {
    let uri = result["structuredContent"]["output_uri"].as_str().unwrap();
    uri.strip_prefix("weir://runs/").unwrap().to_owned()
}

/// One program that fails in each way, and one that does not, in each
/// sandbox mode: a failure is `isError: true` with the program's output
/// in its content and in `structuredContent` beside exit code, signal and
/// timeout, a last block saying why, and a run that `runs_get` calls
/// `failed`; a success is none of that.
#[test]
fn a_program_that_fails_is_a_failed_result_with_all_its_output() {
    for mode in ["auto", "off"] {
        let mut server = Server::start(&["--exec-sandbox", mode]);
        let cases = [
            (
                "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)",
                json!({"exit_code": 3, "signal": null, "timed_out": false}),
                "the program exited with code 3",
                "[exit code 3 after",
            ),
            (
                "import os, signal\nprint('out', flush=True)\nprint('err', file=__import__('sys').stderr, flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)",
                json!({"exit_code": null, "signal": "SIGSEGV", "timed_out": false}),
                "the program was killed by SIGSEGV",
                "[killed by SIGSEGV after",
            ),
            (
                "import sys, time\nprint('out', flush=True)\nprint('err', file=sys.stderr, flush=True)\ntime.sleep(60)",
                json!({"exit_code": null, "signal": "SIGTERM", "timed_out": true, "signals_sent": ["SIGTERM"]}),
                "the program timed out after 1 s (sent SIGTERM)",
                "[killed by SIGTERM after",
            ),
        ];
        for (code, fields, why, summary) in cases {
            let result = server.call(
                "execute_code",
                json!({"language": "python", "code": code, "timeout_s": 1}),
            );
            assert_eq!(result["isError"], true, "{mode}: {result}");
            let structured = &result["structuredContent"];
            for (field, value) in fields.as_object().unwrap() {
                assert_eq!(&structured[field], value, "{mode}: {field}: {result}");
            }
            assert_eq!(structured["stdout"], "out\n", "{mode}: {result}");
            assert_eq!(structured["stderr"], "err\n", "{mode}: {result}");
            assert_eq!(structured["language"], "python", "{mode}: {result}");
            // The output first (the order across the two streams is the
            // order weir read them), then the summary, then why.
            let texts = texts(&result);
            let [output @ .., last_but_one, last] = texts.as_slice() else {
                panic!("{mode}: {result}")
            };
            // Each stream's blocks, joined, are that stream whole. (How the
            // two interleave depends on which pipe weir read first: Python
            // writes `print`'s text and its newline apart when unbuffered.)
            let stream = |label: &str| -> String {
                output
                    .iter()
                    .filter_map(|text| text.strip_prefix(label))
                    .collect()
            };
            assert_eq!(stream("[stdout]\n"), "out\n", "{mode}: {result}");
            assert_eq!(stream("[stderr]\n"), "err\n", "{mode}: {result}");
            assert!(last_but_one.starts_with(summary), "{mode}: {result}");
            assert_eq!(*last, why, "{mode}: {result}");
            let run = server.call("runs_get", json!({"run_id": run_of(&result)}));
            assert_eq!(run["structuredContent"]["run"]["state"], "failed", "{run}");
        }
        // A program that exits 0 is no error, and its run completed.
        let result = server.call(
            "execute_code",
            json!({"language": "sh", "code": "echo fine"}),
        );
        assert!(result.get("isError").is_none(), "{mode}: {result}");
        assert_eq!(
            result["structuredContent"]["exit_code"], 0,
            "{mode}: {result}"
        );
        let run = server.call("runs_get", json!({"run_id": run_of(&result)}));
        assert_eq!(
            run["structuredContent"]["run"]["state"], "completed",
            "{run}"
        );
    }
}

/// `weir call` on a program that exits 3 exits 1 (the tool failed), its
/// output still shown.
#[test]
fn weir_call_exits_1_when_the_program_fails() {
    let serve = format!("{WEIR} serve --stdio --memory");
    let called = Command::new(WEIR)
        .args(["call", "--stdio", &serve, "execute_code"])
        .args(["language=sh", "code=echo shown; exit 3"])
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&called.stdout),
        String::from_utf8_lossy(&called.stderr)
    );
    assert_eq!(called.status.code(), Some(1), "{all}");
    assert!(all.contains("shown"), "{all}");
    assert!(all.contains("the program exited with code 3"), "{all}");
}

/// A stand-in for a chat server's MCP endpoint: a `notify` tool that
/// appends each call's arguments to `log`, as a JSON line.
#[cfg(feature = "plan")]
const CHAT: &str = r#"
import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "chat", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "notify", "description": "Posts to the team's channel.",
                             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif method == "tools/call":
        log.write(json.dumps(message["params"]["arguments"]) + "\n")
        log.flush()
        result = {"content": [{"type": "text", "text": "posted"}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

/// The README's plan example through `weir plan run`.
#[cfg(feature = "plan")]
mod readme {
    use std::path::{Path, PathBuf};
    use std::process::Output;

    use super::*;

    /// The README's plan example, found in the README (or the docs it moved
    /// to) and run as written.
    fn readme_plan() -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut pages = vec![root.join("README.md")];
        let mut folders = vec![root.join("docs")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|ext| ext == "md") {
                    pages.push(path);
                }
            }
        }
        for page in pages {
            let Ok(text) = std::fs::read_to_string(&page) else {
                continue;
            };
            if let Some(start) = text.find("```yaml\nname: build and report\n") {
                let plan = &text[start + "```yaml\n".len()..];
                return plan[..plan.find("```").unwrap()].to_owned();
            }
        }
        panic!("no plan `build and report` in README.md or docs/");
    }

    /// This machine's Python interpreter itself (not a shim that needs more of
    /// the environment than an upstream gets).
    fn python() -> PathBuf {
        let found = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .unwrap();
        assert!(found.status.success(), "{found:?}");
        PathBuf::from(String::from_utf8(found.stdout).unwrap().trim())
    }

    fn runs(data: &Path) -> Vec<Value> {
        let output = Command::new(WEIR)
            .args(["runs", "list", "--json", "--limit", "100", "--data-dir"])
            .arg(data)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn text(output: &Output) -> (String, String) {
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The README's plan, verbatim, with `chat` declared as the operator
    /// would: `make` finds no makefile in the run's empty directory and exits
    /// 2, so `build` fails three times, `report` is skipped, `alert` posts
    /// the failure to the chat server, and the plan completes.
    #[test]
    fn the_readme_plan_retries_the_failed_build_and_runs_the_alert() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan.yaml");
        std::fs::write(&plan, readme_plan()).unwrap();
        let chat = dir.path().join("chat.py");
        std::fs::write(&chat, super::CHAT).unwrap();
        let posted = dir.path().join("posted.jsonl");
        let upstream = format!(
            "chat=-- {} {} {}",
            python().display(),
            chat.display(),
            posted.display()
        );
        let data = dir.path().join("data");
        let output = Command::new(WEIR)
            .args(["plan", "run"])
            .arg(&plan)
            .arg("--data-dir")
            .arg(&data)
            .args(["--upstream", &upstream])
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let (stdout, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
        let lines: Vec<&str> = stdout.lines().collect();
        let has = |prefix: &str| lines.iter().any(|line| line.starts_with(prefix));
        for expected in [
            "step build: attempt 1 failed (the program exited with code 2); attempt 2 of 3 in 500ms",
            "step build: attempt 2 failed (the program exited with code 2); attempt 3 of 3 in ",
            "step build: failed after 3 attempts (run ",
            "step report: skipped: its condition does not hold: ${steps.build.result.exit_code} is 2",
            "step alert: attempt 1 calls notify on chat",
            "step alert: completed",
            "plan \"build and report\" completed: 3 steps, 1 completed, 1 failed, 0 canceled, 1 skipped",
        ] {
            assert!(
                has(expected),
                "no line {expected:?} in:\n{stdout}\n{stderr}"
            );
        }
        let posted = std::fs::read_to_string(&posted).unwrap();
        assert_eq!(
            posted
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect::<Vec<Value>>(),
            [json!({"text": "build failed after 3 attempts: the program exited with code 2"})]
        );
        // Three attempts, each a failed run of the plan's; no `report` run.
        let runs = runs(&data);
        let plan_run = runs.iter().find(|run| run["tool"] == "plan_run").unwrap();
        assert_eq!(plan_run["state"], "completed");
        let states: Vec<(&str, &str)> = runs
            .iter()
            .filter(|run| run["parent"] == plan_run["run_id"])
            .map(|run| {
                (
                    run["tool"].as_str().unwrap(),
                    run["state"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(states, [("execute_code", "failed"); 3], "{runs:?}");
    }
}
