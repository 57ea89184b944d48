//! The real coding-agent CLIs as MCP hosts of `weir serve --stdio` (issue
//! 11's acceptance): Claude Code and the Gemini CLI, pinned in
//! tests/agent-clis and installed by scripts/agent-clis, each run fully
//! offline against `weir-fake-model`, whose scripted model calls
//! `execute_code` on a program that prints five lines 200 ms apart and then
//! answers in text. Each test checks both sides of the host:
//!
//! - what weir sent it: the server's stdin and stdout pass through `tee`
//!   on their way (the host starts `sh -c 'tee IN | weir serve --stdio … |
//!   tee OUT'`), so the test reads, in order, the host's `tools/call` (with
//!   its progress token) and the progress notifications weir sent during
//!   the call, each naming a printed line, before the result;
//! - what the host made of the result: the tool result it handed its model,
//!   in the CLI's own stream-json output and in the model request the fake
//!   recorded, holds every printed line (Claude Code passes the model only
//!   `structuredContent`; the Gemini CLI joins text blocks with blank lines,
//!   so the output must come as one block to read as printed).
//!
//! What keeps them offline and independent of the machine is what the fake
//! model's own CLI tests do (crates/testkit/fake-model/tests/it/clis.rs): no
//! environment of the host but PATH; a private HOME, TMPDIR (and
//! CLAUDE_CODE_TMPDIR) and data directory per test; the base URL on the
//! fake; an explicit model; retries, updates and telemetry off; stdin
//! `/dev/null`. Each CLI leads a process group of its own, killed whole
//! when the test ends; whatever is left with the test's directory on its
//! command line is killed too, by pid, and fails the test.
//!
//! A CLI that cannot be installed fails its test, saying why: these tests
//! never skip. They run in nextest's `agent-clis` group, one at a time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_fake_model::agent_clis::{self, of_type, run_to_end};
use weir_fake_model::{FakeModel, RecordedRequest, Script, Turn};

/// The program the model runs: five lines, 200 ms apart.
const PROGRAM: &str = "import time\nfor i in range(5):\n    print(f'tick {i} of 5 from the program', flush=True)\n    time.sleep(0.2)";

/// The lines it prints.
fn printed() -> Vec<String> {
    (0..5)
        .map(|i| format!("tick {i} of 5 from the program"))
        .collect()
}

/// One host test's own directories, and the copies of what passed between
/// the host and weir (codex_host.rs uses it too).
pub(crate) struct Scene {
    pub(crate) root: tempfile::TempDir,
    pub(crate) home: PathBuf,
    pub(crate) tmp: PathBuf,
    pub(crate) work: PathBuf,
    pub(crate) data: PathBuf,
    /// What the host wrote to weir's stdin.
    pub(crate) sent: PathBuf,
    /// What weir wrote to its stdout.
    pub(crate) received: PathBuf,
}

impl Scene {
    pub(crate) fn new() -> Scene {
        let root = tempfile::tempdir().expect("a temporary directory");
        let [home, tmp, work, data] = ["home", "tmp", "work", "data"].map(|name| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).expect("create a directory of the test");
            dir
        });
        Scene {
            sent: root.path().join("host-to-weir.ndjson"),
            received: root.path().join("weir-to-host.ndjson"),
            root,
            home,
            tmp,
            work,
            data,
        }
    }

    /// How the host starts weir: `weir serve --stdio` on this scene's data
    /// directory, with what goes in and out copied on the way. The paths
    /// are the script's arguments, not part of it, so no quoting can go
    /// wrong.
    fn server(&self) -> Value {
        json!({
            "command": "sh",
            "args": [
                "-c",
                r#"tee "$1" | "$0" serve --stdio --data-dir "$3" | tee "$2""#,
                env!("CARGO_BIN_EXE_weir"),
                self.sent,
                self.received,
                self.data,
            ],
        })
    }

    /// `cli` with the environment every CLI gets, run in `work`, leading a
    /// process group of its own.
    pub(crate) fn command(&self, cli: &str) -> tokio::process::Command {
        agent_clis::command(cli, &self.home, &self.tmp, &self.work)
    }

    /// The processes with this scene's directory on their command line
    /// (the shell, `tee` and weir the host started) or in their
    /// environment (a server the host started with the scene's HOME),
    /// zombies aside.
    fn processes(&self) -> Vec<u32> {
        let marker = self.root.path().to_string_lossy().into_owned();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let zombie =
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                        stat.rsplit(')')
                            .next()
                            .unwrap_or("")
                            .trim_start()
                            .starts_with('Z')
                    });
                let names = |file: &str| {
                    std::fs::read(format!("/proc/{pid}/{file}"))
                        .is_ok_and(|text| String::from_utf8_lossy(&text).contains(&marker))
                };
                !zombie && (names("cmdline") || names("environ"))
            })
            .collect()
    }

    /// Once the host has exited, weir (whose stdin it closed) ends too:
    /// nothing of the scene is left after a moment.
    pub(crate) fn assert_nothing_left(&self) {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let left = self.processes();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < until,
                "processes the host started are still running 5 s after it exited: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JSON-RPC messages in `path`, in order.
    pub(crate) fn messages(path: &Path) -> Vec<Value> {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("{} was not written: {error}", path.display()));
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|error| panic!("not a JSON-RPC line ({error}): {line}"))
            })
            .collect()
    }

    /// The progress notifications weir sent for the host's `tools/call` of
    /// `execute_code`, in order, all of them before its result (which must
    /// come, without an error); the call must carry a progress token.
    fn progress_before_result(&self) -> Vec<Value> {
        let sent = Scene::messages(&self.sent);
        let call = sent
            .iter()
            .find(|message| {
                message["method"] == "tools/call" && message["params"]["name"] == "execute_code"
            })
            .unwrap_or_else(|| panic!("the host never called execute_code: {sent:#?}"));
        let token = &call["params"]["_meta"]["progressToken"];
        assert!(
            token.is_string() || token.is_number(),
            "the host sent no progress token: {call}"
        );
        let received = Scene::messages(&self.received);
        let result = received
            .iter()
            .position(|message| message["id"] == call["id"])
            .unwrap_or_else(|| panic!("weir never answered {call}: {received:#?}"));
        assert!(
            received[result]["error"].is_null() && received[result]["result"]["isError"].is_null(),
            "{}",
            received[result]
        );
        let progress: Vec<Value> = received[..result]
            .iter()
            .filter(|message| {
                message["method"] == "notifications/progress"
                    && message["params"]["progressToken"] == *token
            })
            .map(|message| message["params"].clone())
            .collect();
        // Nothing for the call after its result.
        assert!(
            !received[result..]
                .iter()
                .any(|message| message["params"]["progressToken"] == *token),
            "{received:#?}"
        );
        progress
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        // Whatever a failed test left: by pid, each one this test started.
        for pid in self.processes() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// A fake model that calls `tool` on [`PROGRAM`], then answers in text.
fn fake(tool: &str) -> FakeModel {
    FakeModel::start(Script::new([
        Turn::tool_call(tool, json!({"language": "python", "code": PROGRAM})),
        Turn::text("The program printed five ticks."),
    ]))
    .expect("start the fake model")
}

/// weir told the host about each line as it was printed: progress
/// notifications before the result, increasing, each naming a line.
fn assert_progress_named_the_lines(scene: &Scene) {
    let progress = scene.progress_before_result();
    let lines = printed();
    let named: Vec<usize> = progress
        .iter()
        .map(|params| {
            let message = params["message"].as_str().unwrap_or_default();
            lines
                .iter()
                .position(|line| message.contains(line.as_str()))
                .unwrap_or_else(|| panic!("a progress message names no printed line: {params}"))
        })
        .collect();
    assert!(
        named.len() >= 3,
        "lines printed 200 ms apart made only {} progress notifications: {progress:#?}",
        named.len()
    );
    assert!(named.windows(2).all(|w| w[0] < w[1]), "{progress:#?}");
    let values: Vec<f64> = progress
        .iter()
        .map(|params| params["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{progress:#?}");
}

/// Issue 11's acceptance with Claude Code 2.1.330 (MCP 2026-07-28, a
/// number as progress token): its model calls `mcp__weir__execute_code`,
/// weir sends progress during the call, and the tool result the CLI hands
/// the model — the JSON text of `structuredContent` — holds every line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_sees_progress_and_hands_its_model_every_line() {
    let fake = fake("mcp__weir__execute_code");
    let scene = Scene::new();
    let claude_tmp = scene.tmp.join("claude");
    std::fs::create_dir(&claude_tmp).unwrap();
    let config = json!({"mcpServers": {"weir": scene.server()}});
    let mut command = scene.command("claude");
    command
        .env("ANTHROPIC_BASE_URL", fake.url())
        .env("ANTHROPIC_API_KEY", "dummy")
        // Else it writes /tmp/claude-<uid>/ and /tmp/cc-socks/ (TMPDIR is ignored).
        .env("CLAUDE_CODE_TMPDIR", &claude_tmp)
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .args([
            "-p",
            "run the program",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(["--model", "claude-opus-5-5"])
        .args(["--mcp-config", &config.to_string()])
        .args(["--allowedTools", "mcp__weir__execute_code"]);
    let run = run_to_end(command, "claude", &fake).await;
    scene.assert_nothing_left();

    // (a) What weir sent the host during the call.
    assert_progress_named_the_lines(&scene);

    // (b) What the host handed its model.
    let tool_use = of_type(&run.lines, "assistant")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .find(|block| block["type"] == "tool_use")
        .expect("an assistant line with the tool_use");
    assert_eq!(tool_use["name"], "mcp__weir__execute_code");
    let tool_id = &tool_use["id"];
    let tool_result = of_type(&run.lines, "user")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == *tool_id)
        .unwrap_or_else(|| panic!("no tool_result in {:#?}\nstderr: {}", run.lines, run.stderr));
    assert_eq!(tool_result["is_error"], Value::Null, "{tool_result}");
    assert_sees_every_line("claude's stream-json tool_result", &tool_result["content"]);
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        2,
        "one request per model turn: {requests:#?}"
    );
    let sent_back = anthropic_tool_result(&requests[1], tool_id);
    assert_sees_every_line(
        "the tool_result claude sent the model",
        &sent_back["content"],
    );
    let result = of_type(&run.lines, "result");
    assert_eq!(result.len(), 1, "stderr: {}", run.stderr);
    assert_eq!(result[0]["result"], "The program printed five ticks.");
}

/// The `tool_result` block for `tool_id` in an Anthropic Messages request.
fn anthropic_tool_result(request: &RecordedRequest, tool_id: &Value) -> Value {
    request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == *tool_id)
        .unwrap_or_else(|| panic!("no tool_result for {tool_id} in {:#}", request.body))
}

/// Every printed line is in `content` (a string, or blocks of text): as it
/// is, or inside the JSON text of `structuredContent`.
fn assert_sees_every_line(what: &str, content: &Value) {
    let text = match content {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    for line in printed() {
        assert!(text.contains(&line), "{what} lacks {line:?}: {text}");
    }
}

/// The same with the Gemini CLI 0.61.0 (MCP 2025-06-18, a UUID as progress
/// token): its model calls `mcp_weir_execute_code`, weir sends progress
/// during the call, and the tool result it hands the model holds every
/// line as printed — one line after another, not double-spaced, though
/// this CLI joins a result's text blocks with blank lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_sees_progress_and_hands_its_model_the_output_as_printed() {
    let fake = fake("mcp_weir_execute_code");
    let scene = Scene::new();
    let settings = scene.home.join(".gemini");
    std::fs::create_dir(&settings).unwrap();
    let mut server = scene.server();
    // Trusted: its tools run without asking (headless, there is no one to ask).
    server["trust"] = true.into();
    std::fs::write(
        settings.join("settings.json"),
        json!({
            // The API-key auth type keeps GOOGLE_GEMINI_BASE_URL in force.
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
            "privacy": {"usageStatisticsEnabled": false},
            "telemetry": {"enabled": false},
            "mcpServers": {"weir": server},
        })
        .to_string(),
    )
    .unwrap();
    let mut command = scene.command("gemini");
    command
        .env("GOOGLE_GEMINI_BASE_URL", fake.url())
        .env("GEMINI_API_KEY", "dummy")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .args(["-p", "run the program", "-m", "gemini-2.5-flash", "--yolo"])
        .args(["--output-format", "stream-json"]);
    let run = run_to_end(command, "gemini", &fake).await;
    scene.assert_nothing_left();

    // (a) What weir sent the host during the call.
    assert_progress_named_the_lines(&scene);

    // (b) What the host handed its model: the lines one after another.
    let as_printed = printed().join("\n") + "\n";
    let tool_use = of_type(&run.lines, "tool_use");
    assert_eq!(tool_use.len(), 1, "{:#?}", run.lines);
    assert_eq!(tool_use[0]["tool_name"], "mcp_weir_execute_code");
    let tool_result = of_type(&run.lines, "tool_result");
    assert_eq!(
        tool_result.len(),
        1,
        "{:#?}\nstderr: {}",
        run.lines,
        run.stderr
    );
    assert_eq!(tool_result[0]["status"], "success", "{}", tool_result[0]);
    let output = tool_result[0]["output"].as_str().unwrap_or_default();
    assert!(
        output.starts_with(&as_printed),
        "the gemini CLI's tool_result does not read as printed: {output:?}"
    );
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        2,
        "one request per model turn: {requests:#?}"
    );
    let response = requests[1].body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|content| content["parts"].as_array().cloned().unwrap_or_default())
        .find_map(|part| part.get("functionResponse").cloned())
        .unwrap_or_else(|| panic!("no functionResponse in {:#}", requests[1].body));
    assert_eq!(response["name"], "mcp_weir_execute_code");
    // As the model reads it, in JSON: the lines, each right after the last.
    let escaped = Value::String(as_printed).to_string();
    let escaped = &escaped[1..escaped.len() - 1];
    assert!(
        response["response"].to_string().contains(escaped),
        "the functionResponse the gemini CLI sent the model does not read as printed: {response}"
    );
}
