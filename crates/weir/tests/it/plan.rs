//! `weir plan run`, driven as a user would: plans of the fixtures' and the
//! exec pack's tools run in the command's own process (and on a `weir
//! serve --http`, and with a step on a `weir serve --stdio`), streamed step
//! by step; Ctrl-C leaves no step running and no process behind.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A directory the exec pack's programs (which may run as another user)
/// can write to, for a step that behaves differently on its second try.
fn shared_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// `weir plan run PLAN --data-dir DATA [extra…] -- --fixtures --exec-sandbox off`.
fn plan_run(data: &Path, plan: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(WEIR);
    command
        .args(["plan", "run"])
        .arg(plan)
        .arg("--data-dir")
        .arg(data)
        .args(extra)
        .stdin(Stdio::null())
        .env_remove("WEIR_TOKEN");
    if !extra.contains(&"--url") {
        command.args(["--", "--fixtures", "--exec-sandbox", "off"]);
    }
    command
}

/// A running `weir plan run`: its stdout lines as they come, with when.
struct Running {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
    stderr: std::thread::JoinHandle<String>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let _ = send.send((Instant::now(), line.unwrap()));
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
            text
        });
        Running {
            child,
            lines,
            stderr,
        }
    }

    /// The next line starting with `prefix`, waiting up to `within`.
    fn line_starting(&self, prefix: &str, within: Duration) -> (Instant, String) {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) if line.starts_with(prefix) => return (at, line),
                Ok(_) => {}
                Err(_) => panic!("no line starting with {prefix:?} within {within:?}"),
            }
        }
    }

    /// Waits for the exit; returns its code, the remaining stdout lines and stderr.
    fn finish(mut self, within: Duration) -> (i32, Vec<String>, String) {
        let until = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("weir plan run did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = self.stderr.join().unwrap();
        let rest = self.lines.iter().map(|(_, line)| line).collect();
        (status.code().unwrap_or(-1), rest, stderr)
    }
}

/// The runs in `data`, as `weir runs list --json` shows them.
fn runs(data: &Path) -> Vec<Value> {
    let output = Command::new(WEIR)
        .args(["runs", "list", "--json", "--limit", "100", "--data-dir"])
        .arg(data)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn write_plan(dir: &Path, yaml: &str) -> std::path::PathBuf {
    let path = dir.join("plan.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// A plan of four steps with a retry (an attempt that times out, then one
/// that completes), a branch on a failure, a skipped branch, and arguments
/// from an earlier result runs in the command's own process: each step is
/// printed as it starts and ends, while the plan runs, then the summary;
/// each step's run is a child of the plan's run in the data directory.
#[test]
fn a_plan_with_a_branch_and_a_retry_streams_each_step_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared_dir();
    let marker = shared.path().join("tried");
    let plan = write_plan(
        dir.path(),
        &format!(
            r#"
name: demo
steps:
  - id: flaky
    tool: execute_code
    args: {{language: sh, code: "if [ -e {m} ]; then echo ok; else touch {m}; sleep 30; fi"}}
    timeout_ms: 1500
    retry: {{attempts: 3, backoff_ms: 100}}
  - id: broken
    tool: test_error_handling
    after: [flaky]
  - id: recover
    tool: stream
    after: [broken]
    if: {{step: broken, outcome: failed}}
    args: {{count: "${{steps.flaky.attempts}}"}}
  - id: celebrate
    tool: test_simple_text
    after: [broken]
    if: {{step: broken, outcome: completed}}
"#,
            m = marker.display()
        ),
    );
    let data = dir.path().join("data");
    let started = Instant::now();
    let running = Running::start(plan_run(&data, &plan, &[]));
    let (first_at, first) = running.line_starting(
        "step flaky: attempt 1 runs execute_code as run ",
        Duration::from_secs(30),
    );
    let (retry_at, retry) =
        running.line_starting("step flaky: attempt 1 failed", Duration::from_secs(10));
    assert_eq!(
        retry,
        "step flaky: attempt 1 failed (the run exceeded its time limit of 1.5s); attempt 2 of 3 in 100ms"
    );
    // Streamed: the first attempt was shown while it ran, before its time limit.
    assert!(
        retry_at - first_at >= Duration::from_millis(1_000),
        "{first:?} came with the retry"
    );
    running.line_starting(
        "step flaky: completed after 2 attempts (run ",
        Duration::from_secs(10),
    );
    running.line_starting("step broken: failed (run ", Duration::from_secs(10));
    let (code, rest, stderr) = running.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{stderr}\n{rest:?}");
    assert!(
        rest.iter()
            .any(|line| line.starts_with("step recover: completed (run ")),
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|line| line == "step celebrate: skipped: its condition does not hold: step broken failed (not completed)"),
        "{rest:?}"
    );
    let summary = rest
        .iter()
        .position(|line| {
            line == "plan \"demo\" completed: 4 steps, 2 completed, 1 failed, 0 canceled, 1 skipped"
        })
        .unwrap_or_else(|| panic!("no summary in {rest:?}"));
    assert_eq!(
        rest.len() - summary,
        5,
        "a line per step after the summary: {rest:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));

    // The plan's run and its five children (two attempts of flaky).
    let runs = runs(&data);
    let plan_run = runs.iter().find(|run| run["tool"] == "plan_run").unwrap();
    assert_eq!(plan_run["state"], "completed");
    let children: Vec<&Value> = runs
        .iter()
        .filter(|run| run["parent"] == plan_run["run_id"])
        .collect();
    let mut tools: Vec<&str> = children
        .iter()
        .map(|run| run["tool"].as_str().unwrap())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "execute_code",
            "execute_code",
            "stream",
            "test_error_handling"
        ]
    );
    assert!(children.iter().all(|run| run["state"] != "working"));
}

/// `weir serve --http` with the fixtures and the exec pack (no sandbox),
/// in memory, with `extra` options; its URL.
fn serve_http(extra: &[&str]) -> (Child, String) {
    let mut server = Command::new(WEIR)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--fixtures",
            "--memory",
            "--exec-sandbox",
            "off",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("weir serve said where it serves")
            .unwrap();
        if let Some(url) = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
        {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (server, url)
}

/// With --url the plan runs on a weir server, streamed the same way; a
/// step may call a tool of an upstream server the operator declared
/// (here a `weir serve --stdio`), by name, whose text feeds a later step.
#[test]
fn a_plan_runs_on_a_server_and_a_step_on_an_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("elsewhere=-- {WEIR} serve --stdio --fixtures --memory --no-exec");
    let (mut server, url) = serve_http(&["--upstream", &upstream]);
    let plan = write_plan(
        dir.path(),
        r#"
steps:
  - id: elsewhere
    tool: test_simple_text
    server: elsewhere
  - id: here
    tool: execute_code
    after: [elsewhere]
    args: {language: sh, code: "echo 'got: ${steps.elsewhere.text}'"}
"#,
    );
    let running = Running::start(plan_run(&dir.path().join("data"), &plan, &["--url", &url]));
    running.line_starting(
        "step elsewhere: attempt 1 calls test_simple_text on elsewhere",
        Duration::from_secs(30),
    );
    running.line_starting("step elsewhere: completed", Duration::from_secs(30));
    running.line_starting(
        "step here: attempt 1 runs execute_code as run ",
        Duration::from_secs(30),
    );
    let (code, rest, stderr) = running.finish(Duration::from_secs(30));
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{stderr}\n{rest:?}");
    let output = rest.join("\n");
    assert!(
        output.contains("plan completed: 2 steps, 2 completed"),
        "{output}"
    );
    assert!(
        output.contains("got: This is a simple text response for testing."),
        "{output}"
    );
}

/// Pids whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            !zombie
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
        })
        .collect()
}

/// Ctrl-C during a plan whose two steps run programs cancels the plan and
/// both steps: the command exits as canceled, no run is left working, the
/// step after them never starts, and no program is left running.
#[test]
fn ctrl_c_cancels_the_plan_and_leaves_no_step_or_process_running() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("weir-plan-test-{}", std::process::id());
    let plan = write_plan(
        dir.path(),
        &format!(
            r#"
steps:
  - {{id: a, tool: execute_code, args: {{language: bash, code: "exec -a {marker}-a sleep 60"}}}}
  - {{id: b, tool: execute_code, args: {{language: bash, code: "exec -a {marker}-b sleep 60"}}}}
  - {{id: c, tool: test_simple_text, after: [a, b]}}
"#
        ),
    );
    let data = dir.path().join("data");
    let running = Running::start(plan_run(&data, &plan, &[]));
    running.line_starting("step ", Duration::from_secs(30));
    running.line_starting("step ", Duration::from_secs(30));
    let until = Instant::now() + Duration::from_secs(10);
    while processes_with(&marker).len() < 2 {
        assert!(Instant::now() < until, "the steps' programs never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let interrupted = Instant::now();
    let sent = Command::new("kill")
        .args(["-INT", &running.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let (code, _rest, stderr) = running.finish(Duration::from_secs(15));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("the plan was canceled: interrupted (Ctrl-C)"),
        "{stderr}"
    );
    assert!(interrupted.elapsed() < Duration::from_secs(10));
    let left = processes_with(&marker);
    assert!(left.is_empty(), "programs left running: {left:?}");
    let runs = runs(&data);
    let states: Vec<(&str, &str)> = runs
        .iter()
        .map(|run| {
            (
                run["tool"].as_str().unwrap(),
                run["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("execute_code", "canceled"),
            ("execute_code", "canceled"),
            ("plan_run", "canceled")
        ],
        "newest first: the steps, then the plan; step c never started"
    );
}

/// Ctrl-C of a plan running on a server (--url) cancels it there: the
/// server's runs of the plan and its steps end canceled, and their
/// programs are gone.
#[test]
fn ctrl_c_cancels_a_plan_on_a_server_and_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, url) = serve_http(&[]);
    let marker = format!("weir-plan-url-test-{}", std::process::id());
    let plan = write_plan(
        dir.path(),
        &format!(
            r#"
steps:
  - {{id: a, tool: execute_code, args: {{language: bash, code: "exec -a {marker}-a sleep 60"}}}}
  - {{id: b, tool: execute_code, args: {{language: bash, code: "exec -a {marker}-b sleep 60"}}}}
"#
        ),
    );
    let running = Running::start(plan_run(&dir.path().join("data"), &plan, &["--url", &url]));
    running.line_starting("step ", Duration::from_secs(30));
    running.line_starting("step ", Duration::from_secs(30));
    let until = Instant::now() + Duration::from_secs(10);
    while processes_with(&marker).len() < 2 {
        assert!(Instant::now() < until, "the steps' programs never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Command::new("kill")
        .args(["-INT", &running.child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let (code, _rest, stderr) = running.finish(Duration::from_secs(15));
    assert_eq!(code, 3, "{stderr}");
    let until = Instant::now() + Duration::from_secs(5);
    let states = loop {
        let output = Command::new(WEIR)
            .args([
                "call",
                "--url",
                &url,
                "runs_list",
                "limit=10",
                "--output",
                "jsonl",
            ])
            .output()
            .unwrap();
        let last = String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap_or("{}")
            .to_owned();
        let listed: Value = serde_json::from_str(&last).unwrap();
        let mut states: Vec<(String, String)> = listed["structured"]["runs"]
            .as_array()
            .map(|runs| {
                runs.iter()
                    .map(|run| {
                        (
                            run["tool"].as_str().unwrap_or("").to_owned(),
                            run["state"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .filter(|(tool, _)| tool != "runs_list")
                    .collect()
            })
            .unwrap_or_default();
        states.sort();
        if states.iter().all(|(_, state)| state == "canceled") || Instant::now() > until {
            break states;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let left = processes_with(&marker);
    let _ = server.kill();
    let _ = server.wait();
    let canceled = |tool: &str| (tool.to_owned(), "canceled".to_owned());
    assert_eq!(
        states,
        [
            canceled("execute_code"),
            canceled("execute_code"),
            canceled("plan_run")
        ]
    );
    assert!(left.is_empty(), "programs left running: {left:?}");
}

/// A plan that cannot run is refused before anything starts, with every
/// problem on its own line.
#[test]
fn a_plan_that_cannot_run_is_refused_with_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(
        dir.path(),
        "steps:\n  - {id: a, tool: no_such_tool, after: [b]}\n  - {id: b, tool: stream, after: [a], args: {count: \"${steps.z.result}\"}}\n",
    );
    let data = dir.path().join("data");
    let (code, rest, stderr) =
        Running::start(plan_run(&data, &plan, &[])).finish(Duration::from_secs(30));
    assert_eq!(code, 1, "{rest:?}");
    for expected in [
        "weir: the plan is not valid:",
        "- step \"a\" calls tool \"no_such_tool\", which this server does not have",
        "- steps wait for each other in a cycle: a -> b -> a",
        "- step \"b\" uses ${steps.z.result} but does not run after step \"z\"",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
    let runs = runs(&data);
    assert_eq!(runs.len(), 1, "only the plan's own run: {runs:?}");
    let garbled = write_plan(dir.path(), "steps: [{id: a, tool: stream, afterr: []}]");
    let (code, _, stderr) =
        Running::start(plan_run(&data, &garbled, &[])).finish(Duration::from_secs(30));
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown field `afterr`"), "{stderr}");
}

/// `weir plan run` in its own process takes the same `--upstream`
/// declarations as `weir serve`; a step names one, and a step naming one
/// that is not declared is refused before anything runs, listing those
/// that are.
#[test]
fn a_local_plan_calls_a_declared_upstream_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("elsewhere=-- {WEIR} serve --stdio --fixtures --memory --no-exec");
    let plan = write_plan(
        dir.path(),
        "steps:\n  - {id: there, tool: test_simple_text, server: elsewhere}\n",
    );
    let data = dir.path().join("data");
    let (code, rest, stderr) = Running::start(plan_run(&data, &plan, &["--upstream", &upstream]))
        .finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{stderr}\n{rest:?}");
    assert!(
        rest.join("\n")
            .contains("plan completed: 1 steps, 1 completed"),
        "{rest:?}"
    );
    let unknown = write_plan(
        dir.path(),
        "steps:\n  - {id: there, tool: test_simple_text, server: nowhere}\n",
    );
    let (code, _, stderr) = Running::start(plan_run(&data, &unknown, &["--upstream", &upstream]))
        .finish(Duration::from_secs(60));
    assert_eq!(code, 1);
    assert!(
        stderr.contains(
            "step \"there\" calls server \"nowhere\", which is not declared; the declared servers are: elsewhere"
        ),
        "{stderr}"
    );
}
