//! The critique pack through the real binary and the real coding-agent
//! CLIs: `weir serve --http` runs Claude Code, Codex and the Gemini CLI
//! (pinned in tests/agent-clis, installed by scripts/agent-clis), each
//! against a `weir-fake-model` of its own — so each CLI's script is its
//! own, whatever order their requests come in — and `weir call` drives
//! the tools as a user would.
//!
//! The agents get weir's environment (the pack's default: the user's HOME
//! and settings), so the test gives `weir serve` the environment a user
//! pointing the CLIs at a local endpoint would have: a private HOME (with
//! the Gemini CLI's settings file and Codex's config, which names the fake
//! as its provider), TMPDIR, the base URLs and dummy keys, retries and
//! telemetry off (and nothing to make the Gemini CLI trust its folder:
//! weir does that), and a PATH whose only agent CLIs are the ones a test
//! links into its own `bin` directory (so a test can leave one out). A
//! marker variable in that environment finds every process the scene
//! started, and none may be left when a test ends.
//!
//! A CLI that cannot be installed fails its test, saying why: these tests
//! never skip. They run in nextest's `agent-clis` group, one at a time.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_fake_model::{FakeModel, Script, Streaming, Turn};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A slow stream: `deltas` pieces, `delay_ms` apart.
fn slow(deltas: usize, delay_ms: u64) -> Streaming {
    Streaming {
        deltas,
        delay_ms,
        ..Streaming::default()
    }
}

/// What each agent "finds": one finding in the format the prompt asks for.
fn critique_text(cli: &str, severity: &str, file: &str, line: u32) -> String {
    format!(
        "## Review by {cli}\n\nThe code has problems worth fixing before anyone relies on it.\n\n- [{severity}] (security) {file}:{line} — {cli} found untrusted input reaching a shell command\n- [LOW] (style) naming is inconsistent across modules\n"
    )
}

/// One test's directories, fakes and server environment.
struct Scene {
    root: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    bin: PathBuf,
    work: PathBuf,
    marker: String,
}

impl Scene {
    /// A scene whose PATH has these agent CLIs (and no others).
    fn new(clis: &[&str]) -> Scene {
        let installed = weir_fake_model::agent_clis::installed();
        let root = tempfile::tempdir().expect("a temporary directory");
        let [home, tmp, bin, work] = ["home", "tmp", "bin", "work"].map(|name| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).expect("create a directory of the test");
            dir
        });
        for cli in clis {
            std::os::unix::fs::symlink(installed.join(cli), bin.join(cli)).expect("link a CLI");
        }
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::write(
            home.join(".gemini/settings.json"),
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(home.join("codex-home")).unwrap();
        std::fs::create_dir_all(tmp.join("claude")).unwrap();
        let marker = format!("WEIR_CRITIQUE_SCENE={}", root.path().display());
        Scene {
            root,
            home,
            tmp,
            bin,
            work,
            marker,
        }
    }

    /// Codex's config: the fake at `url` as its provider, retries off.
    fn codex_config(&self, url: &str) {
        let config = format!(
            r#"model = "gpt-5.5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "weir-fake-model"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
"#
        );
        std::fs::write(self.home.join("codex-home/config.toml"), config).unwrap();
    }

    /// `weir serve --http 127.0.0.1:0 --memory` with the agents' environment
    /// pointing each CLI at its fake, and `extra` options.
    fn serve(&self, fakes: &Fakes, extra: &[&str]) -> Server {
        if let Some(codex) = &fakes.codex {
            self.codex_config(codex.url());
        }
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let (marker_key, marker_value) = self.marker.split_once('=').unwrap();
        let mut command = Command::new(WEIR);
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env(marker_key, marker_value)
            .envs([
                ("NO_UPDATE_NOTIFIER", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ("CI", "1"),
                ("DO_NOT_TRACK", "1"),
                ("ANTHROPIC_API_KEY", "dummy"),
                ("CLAUDE_CODE_MAX_RETRIES", "0"),
                ("FAKE_API_KEY", "dummy"),
                ("GEMINI_API_KEY", "dummy"),
            ])
            .env("CLAUDE_CODE_TMPDIR", self.tmp.join("claude"))
            .env("CODEX_HOME", self.home.join("codex-home"))
            .current_dir(&self.work)
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--memory",
                "--no-exec",
                "--data-dir",
            ])
            .arg(self.root.path().join("data"))
            .args([
                "--critique-models",
                "claude=claude-opus-5-5,gemini=gemini-2.5-flash",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(claude) = &fakes.claude {
            command.env("ANTHROPIC_BASE_URL", claude.url());
        }
        if let Some(gemini) = &fakes.gemini {
            command.env("GOOGLE_GEMINI_BASE_URL", gemini.url());
        }
        let mut child = command.spawn().expect("start weir serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("weir serve printed where it serves")
                .unwrap();
            if line.contains("serving MCP at") {
                break line
                    .split_whitespace()
                    .find(|word| word.starts_with("http://"))
                    .unwrap_or_else(|| panic!("no URL in {line:?}"))
                    .to_owned();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        Server { child, url }
    }

    /// The processes started with this scene's environment, besides `except`.
    fn processes(&self, except: u32) -> Vec<(u32, String)> {
        processes_with(&self.marker, except)
    }

    /// Nothing the scene's server started is running, within `within`.
    fn assert_no_agent_left(&self, server: &Server, within: Duration) {
        let until = Instant::now() + within;
        loop {
            let left = self.processes(server.child.id());
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < until,
                "agent processes still running {within:?} later: {left:#?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A fake model per CLI (none for a CLI a test leaves out).
#[derive(Default)]
struct Fakes {
    claude: Option<FakeModel>,
    codex: Option<FakeModel>,
    gemini: Option<FakeModel>,
}

fn fake(turns: Vec<Turn>) -> Option<FakeModel> {
    Some(FakeModel::start(Script::new(turns)).expect("start a fake model"))
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `weir call --url … TOOL --json ARGS --output jsonl`: every event,
    /// and the exit code.
    async fn call(&self, tool: &str, arguments: Value, extra: &[&str]) -> (Vec<Value>, i32) {
        let output = tokio::process::Command::new(WEIR)
            .env_remove("WEIR_TOKEN")
            .args(["call", "--url", &self.url, tool, "--json"])
            .arg(arguments.to_string())
            .args(["--output", "jsonl"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run weir call");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let lines = stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect();
        (lines, output.status.code().unwrap_or(-1))
    }

    /// The events of the newest run, from the server's log.
    async fn events_of_newest_run(&self) -> Vec<Value> {
        let (runs, _) = self.call("runs_list", json!({"limit": 1}), &[]).await;
        let run_id = runs.last().unwrap()["structured"]["runs"][0]["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no run: {runs:#?}"))
            .to_owned();
        let (_, events) = self
            .result("runs_events", json!({"run_id": run_id, "limit": 1000}))
            .await;
        events["structured"]["events"].as_array().unwrap().clone()
    }

    /// The final result of a call that completed.
    async fn result(&self, tool: &str, arguments: Value) -> (Vec<Value>, Value) {
        let (lines, code) = self.call(tool, arguments.clone(), &[]).await;
        let result = lines
            .iter()
            .find(|line| line["type"] == "result")
            .unwrap_or_else(|| panic!("{tool} {arguments} gave no result: {lines:#?}"))
            .clone();
        assert_eq!(code, 0, "{tool} {arguments}: {lines:#?}");
        assert!(result["is_error"] != true, "{result:#}");
        (lines, result)
    }
}

fn agent<'a>(result: &'a Value, cli: &str) -> &'a Value {
    result["structured"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|agent| agent["cli"] == cli)
        .unwrap_or_else(|| panic!("no outcome for {cli}: {result:#}"))
}

fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roast_with_three_clis_streams_them_interleaved_and_ends_with_findings() {
    let stream = slow(8, 400);
    let fakes = Fakes {
        claude: fake(vec![
            Turn::text(critique_text("claude", "CRITICAL", "src/auth.rs", 42))
                .streamed(stream.clone()),
        ]),
        codex: fake(vec![
            Turn::text(critique_text("codex", "HIGH", "src/db.rs", 7)).streamed(stream.clone()),
        ]),
        gemini: fake(vec![
            Turn::text(critique_text("gemini", "MEDIUM", "web/app.ts", 99)).streamed(stream),
        ]),
    };
    let scene = Scene::new(&["claude", "codex", "gemini"]);
    let server = scene.serve(&fakes, &[]);
    let started = Instant::now();
    let (lines, result) = server
        .result(
            "roast",
            json!({"content": "fn main() { std::process::Command::new(\"sh\").arg(input) }", "clis": ["claude", "codex", "gemini"]}),
        )
        .await;
    eprintln!("roast of three agents: {:?}", started.elapsed());

    // Partials from all three, each tagged with its agent, interleaved:
    // some agent streams again after another has.
    let groups: Vec<&str> = lines
        .iter()
        .filter(|line| line["type"] == "partial")
        .map(|line| {
            line["structured"]["group"]
                .as_str()
                .expect("a partial tagged with its agent")
        })
        .collect();
    for cli in ["claude", "codex", "gemini"] {
        assert!(groups.contains(&cli), "no partial from {cli}: {groups:?}");
    }
    let mut runs: Vec<&str> = groups.clone();
    runs.dedup();
    let distinct = {
        let mut seen = runs.clone();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    };
    assert!(
        runs.len() > distinct,
        "the agents' partials came one agent after another, not interleaved: {groups:?}"
    );
    // Each agent's streamed text is its answer.
    for cli in ["claude", "codex", "gemini"] {
        let streamed: String = lines
            .iter()
            .filter(|line| line["type"] == "partial" && line["structured"]["group"] == cli)
            .flat_map(|line| line["content"].as_array().unwrap().iter())
            .filter_map(|block| block["text"].as_str())
            .collect();
        assert!(
            streamed.contains(&format!("{cli} found untrusted input")),
            "{cli}: {streamed:?}"
        );
    }

    // Progress reached the client, strictly increasing, out of 3 steps per
    // agent and one for the synthesis.
    let progress: Vec<&Value> = lines
        .iter()
        .filter(|line| line["type"] == "progress")
        .collect();
    assert!(progress.len() >= 3, "{progress:#?}");
    assert!(
        progress
            .windows(2)
            .all(|w| w[0]["progress"].as_f64() < w[1]["progress"].as_f64()),
        "{progress:#?}"
    );
    assert_eq!(progress.last().unwrap()["total"], 10.0);
    // The run's log has every milestone (the wire coalesces progress that
    // comes faster than it is sent): spawned, first output, done k/n,
    // synthesizing, each with its count.
    let milestones: Vec<(u64, String)> = server
        .events_of_newest_run()
        .await
        .iter()
        .filter(|event| event["type"] == "progress")
        .map(|event| {
            (
                event["progress"].as_f64().unwrap() as u64,
                format!(
                    "{}: {}",
                    event["phase"].as_str().unwrap(),
                    event["message"].as_str().unwrap()
                ),
            )
        })
        .collect();
    assert_eq!(milestones.len(), 10, "{milestones:#?}");
    assert_eq!(
        milestones
            .iter()
            .map(|(count, _)| *count)
            .collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    for expected in [
        "agents: claude spawned",
        "agents: codex spawned",
        "agents: gemini spawned",
        "agents: claude: first output",
        "agents: codex: first output",
        "agents: gemini: first output",
        "done (1/3 agents): 2 findings",
        "done (3/3 agents): 2 findings",
    ] {
        assert!(
            milestones
                .iter()
                .any(|(_, message)| message.contains(expected)),
            "no milestone {expected:?}: {milestones:#?}"
        );
    }
    assert_eq!(milestones[9].1, "synthesizing: extracting findings");

    // The findings, worst first, with their agent, file and line.
    let structured = &result["structured"];
    let findings = structured["findings"].as_array().unwrap();
    let security: Vec<(&str, &str, &str, u64)> = findings
        .iter()
        .filter(|f| f["category"] == "security")
        .map(|f| {
            (
                f["agent"].as_str().unwrap(),
                f["severity"].as_str().unwrap(),
                f["file"].as_str().unwrap(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        security,
        [
            ("claude", "critical", "src/auth.rs", 42),
            ("codex", "high", "src/db.rs", 7),
            ("gemini", "medium", "web/app.ts", 99)
        ]
    );
    assert_eq!(findings.len(), 6, "{findings:#?}");
    assert_eq!(structured["findings_by_severity"]["low"], 3);
    for cli in ["claude", "codex", "gemini"] {
        assert_eq!(agent(&result, cli)["status"], "ok", "{result:#}");
        assert_eq!(agent(&result, cli)["findings"], 2);
        assert_eq!(agent(&result, cli)["breaker"]["state"], "closed");
    }
    // The same in the text.
    let text = result_text(&result);
    assert!(
        text.contains("3 of 3 agents answered; 6 findings"),
        "{text}"
    );
    assert!(
        text.contains("- [CRITICAL] (security) src/auth.rs:42"),
        "{text}"
    );
    assert!(
        structured["report"]["text"]
            .as_str()
            .unwrap()
            .contains("## codex")
    );

    // The same call again is cached: no agent runs (each fake saw one request).
    let (_, again) = server
        .result(
            "roast",
            json!({"clis": ["claude", "codex", "gemini"], "content": "fn main() { std::process::Command::new(\"sh\").arg(input) }"}),
        )
        .await;
    assert_eq!(again["structured"]["cached"], true);
    assert_eq!(again["structured"]["context_id"], structured["context_id"]);
    for fake in [&fakes.claude, &fakes.codex, &fakes.gemini] {
        let turns = fake
            .as_ref()
            .unwrap()
            .requests()
            .iter()
            .filter(|r| r.turn.is_some())
            .count();
        assert_eq!(turns, 1);
    }
    scene.assert_no_agent_left(&server, Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_model_opens_its_breaker_and_the_others_finish() {
    let fakes = Fakes {
        claude: fake(vec![Turn::error(500, "the model is down")]),
        codex: fake(vec![
            Turn::text(critique_text("codex", "HIGH", "a.py", 1)),
            Turn::text(critique_text("codex", "HIGH", "b.py", 2)),
        ]),
        gemini: fake(vec![
            Turn::text(critique_text("gemini", "LOW", "c.go", 3)),
            Turn::text(critique_text("gemini", "LOW", "d.go", 4)),
        ]),
    };
    let scene = Scene::new(&["claude", "codex", "gemini"]);
    let server = scene.serve(
        &fakes,
        &[
            "--critique-breaker-failures",
            "1",
            "--critique-breaker-cooldown",
            "600",
        ],
    );

    let (_, first) = server
        .result(
            "roast",
            json!({"brief": "idea", "content": "an idea", "clis": ["claude", "codex", "gemini"]}),
        )
        .await;
    let claude = agent(&first, "claude");
    assert_eq!(claude["status"], "failed", "{first:#}");
    assert!(
        claude["error"].as_str().unwrap().contains("500"),
        "{claude:#}"
    );
    assert_eq!(claude["breaker"]["state"], "open");
    for cli in ["codex", "gemini"] {
        assert_eq!(agent(&first, cli)["status"], "ok", "{first:#}");
    }
    assert_eq!(first["structured"]["findings"].as_array().unwrap().len(), 4);
    assert!(result_text(&first).contains("2 of 3 agents answered"));

    // The breaker is open: claude is skipped, its model not asked again.
    let (_, second) = server
        .result(
            "roast",
            json!({"brief": "idea", "content": "another idea", "clis": ["claude", "codex", "gemini"]}),
        )
        .await;
    let claude = agent(&second, "claude");
    assert_eq!(claude["status"], "breaker_open", "{second:#}");
    let error = claude["error"].as_str().unwrap();
    assert!(
        error.contains("circuit breaker open after 1 failures in a row") && error.contains("500"),
        "{error}"
    );
    assert_eq!(fakes.claude.as_ref().unwrap().requests().len(), 1);
    for cli in ["codex", "gemini"] {
        assert_eq!(agent(&second, cli)["status"], "ok", "{second:#}");
    }

    // critique_status shows it.
    let (_, status) = server.result("critique_status", json!({})).await;
    let claude = status["structured"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|agent| agent["cli"] == "claude")
        .unwrap()
        .clone();
    assert_eq!(claude["breaker"]["state"], "open", "{status:#}");
    assert!(claude["breaker"]["retry_in_ms"].as_u64().unwrap() > 500_000);
    assert!(result_text(&status).contains("claude: breaker open"));
    scene.assert_no_agent_left(&server, Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_missing_from_path_is_a_clear_per_agent_error() {
    let fakes = Fakes {
        claude: fake(vec![Turn::text(critique_text("claude", "HIGH", "x.rs", 5))]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    let target = scene.work.join("project");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("main.rs"), "fn main() {}\n").unwrap();
    let server = scene.serve(&fakes, &[]);
    let (_, result) = server
        .result(
            "roast",
            json!({"brief": "codebase", "target": target, "clis": ["claude", "codex"]}),
        )
        .await;
    let codex = agent(&result, "codex");
    assert_eq!(codex["status"], "missing", "{result:#}");
    let error = codex["error"].as_str().unwrap();
    assert!(
        error.contains("codex was not found")
            && error.contains(&scene.bin.display().to_string())
            && error.contains("@openai/codex"),
        "{error}"
    );
    assert_eq!(agent(&result, "claude")["status"], "ok");
    assert!(result_text(&result).contains("codex: not installed: codex was not found"));
    // claude ran in the target, and was asked to review it.
    let request = &fakes.claude.as_ref().unwrap().requests()[0];
    assert!(
        request.body.to_string().contains("Review the directory"),
        "{}",
        request.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_roast_leaves_no_agent_running() {
    // Long answers, so every agent is mid-stream when the call is cancelled.
    let stream = slow(40, 500);
    let text = critique_text("any", "HIGH", "a.rs", 1);
    let fakes = Fakes {
        claude: fake(vec![Turn::text(text.clone()).streamed(stream.clone())]),
        codex: fake(vec![Turn::text(text.clone()).streamed(stream.clone())]),
        gemini: fake(vec![Turn::text(text).streamed(stream)]),
    };
    let scene = Scene::new(&["claude", "codex", "gemini"]);
    let server = scene.serve(&fakes, &[]);
    let watcher = {
        // Counts the agent processes while the call runs.
        let marker = scene.marker.clone();
        let server_pid = server.child.id();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(5);
            let mut most = 0;
            while Instant::now() < until {
                most = most.max(processes_with(&marker, server_pid).len());
                std::thread::sleep(Duration::from_millis(100));
            }
            most
        })
    };
    let (lines, code) = server
        .call(
            "roast",
            json!({"content": "slow", "clis": ["claude", "codex", "gemini"]}),
            &["--timeout", "6"],
        )
        .await;
    assert_ne!(code, 0, "{lines:#?}");
    let most = watcher.join().unwrap();
    assert!(most >= 3, "only {most} agent processes were seen running");
    assert!(
        lines.iter().any(|line| line["type"] == "partial"),
        "the agents were not streaming yet: {lines:#?}"
    );
    // The run is cancelled on the server, and every agent's group is gone.
    scene.assert_no_agent_left(&server, Duration::from_secs(8));
    let (runs, _) = server.call("runs_list", json!({"limit": 1}), &[]).await;
    let run = &runs.last().unwrap()["structured"]["runs"][0];
    assert_eq!(run["tool"], "roast");
    assert_eq!(run["state"], "canceled", "{run:#}");
}

/// The processes (zombies aside) whose environment holds `marker`,
/// besides `except`, with their command lines.
fn processes_with(marker: &str, except: u32) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != except)
        .filter(|pid| {
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            !zombie
                && std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                    environ
                        .split(|byte| *byte == 0)
                        .any(|entry| entry == marker.as_bytes())
                })
        })
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (pid, String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_past_the_result_limit_pages_and_resumes_by_context_id() {
    // 120 findings: a report of about 9 KB, against a result limit of 3 KB.
    let long: String = (0..120)
        .map(|i| {
            format!(
                "- [MEDIUM] (design) src/mod{i}.rs:{} — finding number {i} of a long report\n",
                i + 1
            )
        })
        .collect();
    let fakes = Fakes {
        claude: fake(vec![
            Turn::text(long.clone()).streamed(slow(4, 0)),
            Turn::text("- [CRITICAL] (security) src/follow.rs:5 — the follow-up found this\n"),
        ]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    let server = scene.serve(&fakes, &["--result-limit", "3000"]);
    let (_, first) = server
        .result(
            "roast",
            json!({"content": "the work", "clis": ["claude"], "limit": 2000}),
        )
        .await;
    let structured = &first["structured"];
    let context_id = structured["context_id"].as_str().unwrap().to_owned();
    let total = structured["report"]["total_bytes"].as_u64().unwrap();
    assert!(total > 8000, "{total}");
    // The streamed text was cut at the limit; the findings are all there.
    assert!(result_text(&first).contains("[output truncated at 3000 bytes"));
    assert_eq!(structured["findings"].as_array().unwrap().len(), 120);

    // Page through the report with the cursor: it comes back whole.
    let mut report = structured["report"]["text"].as_str().unwrap().to_owned();
    assert_eq!(report.len(), 2000);
    let mut cursor = structured["report"]["next_cursor"].clone();
    let mut pages = 1;
    while let Some(next) = cursor.as_str() {
        let (_, page) = server
            .result("roast", json!({"cursor": next, "limit": 2000}))
            .await;
        let text = page["structured"]["report"]["text"].as_str().unwrap();
        // A page's text is in its content too.
        assert!(result_text(&page).contains(text));
        report.push_str(text);
        cursor = page["structured"]["report"]["next_cursor"].clone();
        pages += 1;
        assert!(pages < 10);
    }
    assert_eq!(report.len() as u64, total);
    assert_eq!(pages, total.div_ceil(2000));
    assert!(report.starts_with("## claude (claude-opus-5-5)"));
    for i in 0..120 {
        assert!(report.contains(&format!("finding number {i} of")), "{i}");
    }
    // Or by context_id and offset.
    let (_, middle) = server
        .result(
            "roast",
            json!({"context_id": context_id, "offset": 4000, "limit": 100}),
        )
        .await;
    assert_eq!(middle["structured"]["report"]["text"], report[4000..4100]);

    // Resume: the follow-up runs with the earlier report in the prompt, and
    // its round is appended to the same report.
    let (_, resumed) = server
        .result(
            "roast",
            json!({"context_id": context_id, "resume": true, "content": "what about security?", "clis": ["claude"]}),
        )
        .await;
    let structured = &resumed["structured"];
    assert_eq!(structured["context_id"], context_id.as_str());
    assert_eq!(structured["rounds"], 2);
    assert_eq!(structured["findings"][0]["file"], "src/follow.rs");
    assert_eq!(structured["findings"].as_array().unwrap().len(), 121);
    let prompt = fakes.claude.as_ref().unwrap().requests()[1]
        .body
        .to_string();
    assert!(
        prompt.contains("finding number 3 of a long report")
            && prompt.contains("what about security?")
    );
    let (_, tail) = server
        .result(
            "roast",
            json!({"context_id": context_id, "offset": total, "limit": 5000}),
        )
        .await;
    let tail = tail["structured"]["report"]["text"].as_str().unwrap();
    assert!(
        tail.contains("# Follow-up 2: what about security?")
            && tail.contains("the follow-up found this"),
        "{tail}"
    );

    // A context id the server does not have is a clear error.
    let (lines, code) = server
        .call("roast", json!({"context_id": "nope"}), &[])
        .await;
    assert_ne!(code, 0);
    let error = lines.iter().find(|line| line["type"] == "result").unwrap();
    assert!(
        result_text(error).contains("no report with context_id \"nope\""),
        "{error:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_run_streams_the_normalized_events_and_ends_with_the_last_message() {
    let fakes = Fakes {
        gemini: fake(vec![
            Turn::text("Hello from the agent, streamed.").streamed(slow(3, 100)),
        ]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["gemini"]);
    let server = scene.serve(&fakes, &[]);
    let (lines, result) = server
        .result("agent_run", json!({"cli": "gemini", "prompt": "say hello"}))
        .await;
    let partials: Vec<&Value> = lines
        .iter()
        .filter(|line| line["type"] == "partial")
        .collect();
    let text: String = partials
        .iter()
        .filter(|line| line["structured"]["group"] == "text")
        .flat_map(|line| line["content"].as_array().unwrap().iter())
        .filter_map(|block| block["text"].as_str())
        .collect();
    assert_eq!(text, "Hello from the agent, streamed.");
    let events: Vec<&str> = partials
        .iter()
        .filter(|line| line["structured"]["group"] == "events")
        .flat_map(|line| line["structured"]["items"].as_array().unwrap().iter())
        .filter_map(|item| item["type"].as_str())
        .collect();
    assert_eq!(events.first(), Some(&"session_started"), "{events:?}");
    assert!(
        events.contains(&"result") && events.last() == Some(&"exited"),
        "{events:?}"
    );
    let structured = &result["structured"];
    assert_eq!(structured["cli"], "gemini");
    assert_eq!(structured["model"], "gemini-2.5-flash");
    assert_eq!(structured["text"], "Hello from the agent, streamed.");
    assert!(
        structured["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{structured:#}"
    );
    assert!(result_text(&result).contains("[gemini (gemini-2.5-flash):"));
}

/// `agent_run` with `weir_tools`: Claude Code gets the in-process MCP
/// server `weir`, the model calls `mcp__weir__critique_status`, and the
/// call is a child run of the agent's run whose result reaches the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_run_offers_weir_tools_and_each_call_is_a_child_run() {
    let claude = fake(vec![
        Turn::tool_call("mcp__weir__critique_status", json!({})),
        Turn::text("The breakers are closed."),
    ]);
    let fakes = Fakes {
        claude,
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    let server = scene.serve(&fakes, &[]);
    let (lines, result) = server
        .result(
            "agent_run",
            json!({"cli": "claude", "prompt": "check the breakers", "weir_tools": ["critique_status"]}),
        )
        .await;
    assert_eq!(result["structured"]["text"], "The breakers are closed.");
    let events: Vec<&Value> = lines
        .iter()
        .filter(|line| line["type"] == "partial" && line["structured"]["group"] == "events")
        .flat_map(|line| line["structured"]["items"].as_array().unwrap().iter())
        .collect();
    assert!(
        events
            .iter()
            .any(|event| event["type"] == "permission_request"
                && event["tool_name"] == "mcp__weir__critique_status"
                && event["allowed"] == true),
        "{events:#?}"
    );
    // The child's result went back to the model (Claude Code gives it the
    // structured content when there is one).
    assert!(
        events.iter().any(|event| event["type"] == "tool_result"
            && event["is_error"] == false
            && event["content"]
                .as_str()
                .is_some_and(|text| text.contains("\"cached_critiques\":0"))),
        "{events:#?}"
    );
    let requests = fakes.claude.as_ref().unwrap().requests();
    assert!(
        requests[1].body["messages"]
            .to_string()
            .contains("cached_critiques"),
        "{:#}",
        requests[1].body["messages"]
    );

    let (_, runs) = server.result("runs_list", json!({"limit": 10})).await;
    let runs = runs["structured"]["runs"].as_array().unwrap();
    let parent = runs
        .iter()
        .find(|run| run["tool"] == "agent_run")
        .unwrap_or_else(|| panic!("no agent_run run: {runs:#?}"));
    let children: Vec<&Value> = runs
        .iter()
        .filter(|run| run["parent"] == parent["run_id"])
        .collect();
    assert_eq!(children.len(), 1, "{runs:#?}");
    assert_eq!(children[0]["tool"], "critique_status");
    assert_eq!(children[0]["state"], "completed");
    scene.assert_no_agent_left(&server, Duration::from_secs(5));
}

/// Issue 25, item 1: the tools Claude Code hands its model from the
/// in-process server `weir` are this server's, as its tools/list lists
/// them (`weir tools`): the same description and input schema for each
/// offered tool, and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_run_s_agent_gets_the_offered_tools_as_tools_list_lists_them() {
    let claude = fake(vec![Turn::text("Seen.")]);
    let fakes = Fakes {
        claude,
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    // Claude Code defers MCP tools behind its tool search unless told not
    // to; told so, it hands the model every tool in the first request.
    let server = scene.serve(&fakes, &["--critique-env", "ENABLE_TOOL_SEARCH=false"]);
    let offered = ["critique_status", "roast"];
    server
        .result(
            "agent_run",
            json!({"cli": "claude", "prompt": "look", "weir_tools": offered}),
        )
        .await;
    let listed = Command::new(WEIR)
        .args(["tools", "--url", &server.url, "--json"])
        .output()
        .expect("run weir tools");
    let listed: Vec<Value> = serde_json::from_slice(&listed.stdout).expect("weir tools --json");
    let requests = fakes.claude.as_ref().unwrap().requests();
    let handed = requests[0].body["tools"]
        .as_array()
        .expect("tools in the request");
    let ours: Vec<&Value> = handed
        .iter()
        .filter(|tool| {
            tool["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("mcp__weir__"))
        })
        .collect();
    let names: Vec<&Value> = handed.iter().map(|tool| &tool["name"]).collect();
    assert_eq!(ours.len(), offered.len(), "the model got {names:?}");
    for name in offered {
        let model = ours
            .iter()
            .find(|tool| tool["name"] == format!("mcp__weir__{name}"))
            .unwrap_or_else(|| panic!("{name} not handed to the model: {ours:#?}"));
        let real = listed.iter().find(|tool| tool["name"] == name).unwrap();
        assert_eq!(model["description"], real["description"], "{name}");
        assert_eq!(model["input_schema"], real["input_schema"], "{name}");
    }
    scene.assert_no_agent_left(&server, Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_run_refuses_weir_tools_the_server_does_not_have() {
    let scene = Scene::new(&["claude"]);
    let server = scene.serve(&Fakes::default(), &[]);
    let (lines, code) = server
        .call(
            "agent_run",
            json!({"cli": "claude", "prompt": "hi", "weir_tools": ["no_such_tool"]}),
            &[],
        )
        .await;
    assert_ne!(code, 0);
    let error = lines.iter().find(|line| line["type"] == "result").unwrap();
    assert!(
        result_text(error).contains("weir_tools: this server has no tool \"no_such_tool\""),
        "{error:#}"
    );
}

/// The shell lines of the documented critique example: the one `sh` block
/// of docs/critique.md that runs `roast`.
fn readme_critique_example() -> String {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/critique.md"
    ))
    .expect("read docs/critique.md");
    let blocks: Vec<&str> = page
        .split("```sh\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap())
        .filter(|block| block.contains(" roast "))
        .collect();
    assert_eq!(
        blocks.len(),
        1,
        "one sh example of roast in docs/critique.md: {blocks:#?}"
    );
    blocks[0].to_owned()
}

/// A shell running `script` as a user would, with nothing set but `PATH`
/// (weir, node, and the agent CLIs `clis` linked into a directory of
/// the scene), `HOME` and the scene's marker; in the scene's `work`.
fn user_shell(scene: &Scene, clis_path: &std::path::Path, script: &str) -> std::process::Output {
    let weir_dir = std::path::Path::new(WEIR).parent().unwrap();
    let (marker_key, marker_value) = scene.marker.split_once('=').unwrap();
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}:/usr/local/bin:/usr/bin:/bin",
                weir_dir.display(),
                clis_path.display()
            ),
        )
        .env("HOME", &scene.home)
        .env(marker_key, marker_value)
        .current_dir(&scene.work)
        .stdin(Stdio::null())
        .output()
        .expect("run sh")
}

/// Issue 24 finding 4: the README's critique example, run as written
/// (its model endpoint and agents' home moved to the test's own), with
/// only what it sets: both agents answer, the call exits 0 and prints
/// their findings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_critique_example_runs_as_written() {
    let fake = FakeModel::start(Script::new(vec![
        Turn::text(critique_text("the first agent", "HIGH", "cats.md", 3)),
        Turn::text(critique_text("the second agent", "MEDIUM", "cats.md", 9)),
    ]))
    .expect("start a fake model");
    let scene = Scene::new(&["claude", "gemini"]);
    let agents_home = scene.root.path().join("agents-home");
    let example = readme_critique_example();
    assert!(
        example.contains("http://127.0.0.1:8080") && example.contains("/tmp/agents-home"),
        "{example}"
    );
    let script = example
        .replace("http://127.0.0.1:8080", fake.url())
        .replace("/tmp/agents-home", &agents_home.display().to_string());
    // Blocking this worker; the fake answers on the other.
    let output = user_shell(&scene, &scene.bin, &script);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{script}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("2 of 2 agents answered; 4 findings"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("[HIGH] (security) cats.md:3") && stdout.contains("cats.md:9"),
        "{stdout}"
    );
    // Each agent asked the model once, with the idea in its prompt.
    let asked: Vec<String> = fake
        .requests()
        .iter()
        .filter(|request| request.turn.is_some())
        .map(|request| request.body.to_string())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked
            .iter()
            .all(|body| body.contains("a social network for cats"))
    );
    let left = scene.processes(std::process::id());
    assert!(left.is_empty(), "{left:#?}");
}

/// Issue 24 finding 4: a roast where no agent answered — claude and
/// gemini installed but not logged in, codex not installed — is a failed
/// call (isError, exit 1) whose result still has every agent's outcome,
/// each with what to set up, as plain text.
#[test]
fn a_roast_no_agent_answered_fails_and_says_what_to_set_up() {
    let scene = Scene::new(&["claude", "gemini"]);
    let agents_home = scene.root.path().join("agents-home");
    std::fs::create_dir(&agents_home).unwrap();
    let script = format!(
        "weir call --stdio 'weir serve --stdio --memory --critique-home {}' roast brief=idea content='an idea' 'clis=[\"claude\",\"codex\",\"gemini\"]' --output jsonl",
        agents_home.display()
    );
    let output = user_shell(&scene, &scene.bin, &script);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    let result: Value = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {stdout}\n{stderr}"));
    assert_eq!(result["is_error"], true, "{result:#}");
    let setup = |cli: &str| {
        let outcome = agent(&result, cli);
        assert_ne!(outcome["status"], "ok", "{outcome:#}");
        outcome["setup"]
            .as_str()
            .unwrap_or_else(|| panic!("no setup for {cli}: {outcome:#}"))
            .to_owned()
    };
    assert!(setup("claude").contains("ANTHROPIC_API_KEY"), "{result:#}");
    assert!(setup("gemini").contains("GEMINI_API_KEY"), "{result:#}");
    assert!(
        setup("codex").contains("npm install -g @openai/codex"),
        "{result:#}"
    );
    assert_eq!(agent(&result, "codex")["status"], "missing");
    let text = result_text(&result);
    assert!(
        text.contains("0 of 3 agents answered") && text.contains("to set up: "),
        "{text}"
    );
    let left = scene.processes(std::process::id());
    assert!(left.is_empty(), "{left:#?}");

    // A Gemini CLI told not to trust its folder says so in red; the
    // outcome has it as plain text, and what to set.
    let script = format!(
        "weir call --stdio 'weir serve --stdio --memory --critique-home {} --critique-env GEMINI_API_KEY=dummy --critique-env GEMINI_CLI_TRUST_WORKSPACE=false' roast content='an idea' 'clis=[\"gemini\"]' --output jsonl",
        agents_home.display()
    );
    let output = user_shell(&scene, &scene.bin, &script);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let result: Value = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {stdout}"));
    let gemini = agent(&result, "gemini");
    let error = gemini["error"].as_str().unwrap();
    assert!(
        error.contains("Gemini CLI is not running in a trusted directory.")
            && !error.contains('\u{1b}'),
        "{error:?}"
    );
    assert!(
        gemini["setup"]
            .as_str()
            .unwrap()
            .contains("GEMINI_CLI_TRUST_WORKSPACE"),
        "{gemini:#}"
    );
    assert!(!stdout.contains("\\u001b"), "{stdout}");
}
