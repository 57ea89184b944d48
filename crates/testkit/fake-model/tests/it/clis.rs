//! The real coding-agent CLIs against the fake, fully offline: Claude Code,
//! Codex and the Gemini CLI, pinned in tests/agent-clis and installed by
//! scripts/agent-clis (from the npm registry, once per machine and
//! lockfile). Each test checks that the CLI's own streaming output carries
//! the scripted text, and that a tool call makes the round trip: the CLI
//! runs the tool and sends its result in the next request.
//!
//! What keeps them offline and independent of the machine
//! (`agent_clis::command` and `agent_clis::point_at`): no environment of the
//! host but PATH; a private HOME, TMPDIR (and CODEX_HOME,
//! CLAUDE_CODE_TMPDIR) per test; each CLI's base URL on the fake; explicit
//! models, so no CLI looks one up; retries off; update checks, telemetry and
//! plugin syncs off; stdin `/dev/null`, since a pipe left open makes Claude
//! Code wait 3 s and codex wait for EOF. Each CLI leads a process group of
//! its own, killed whole when the test ends, so nothing outlives a timeout.
//!
//! A CLI that cannot be installed fails its test, saying why: these tests
//! never skip.

use std::path::PathBuf;

use serde_json::{Value, json};
use weir_fake_model::agent_clis::{self, of_type, run_to_end};
use weir_fake_model::{FakeModel, Protocol, Turn};

use crate::support::{deltas, fake};

/// A test's own directories: HOME, TMPDIR, and the working directory.
struct Sandbox {
    _root: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    work: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("a temporary directory");
        let [home, tmp, work] = ["home", "tmp", "work"].map(|name| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).expect("create a sandbox directory");
            dir
        });
        Sandbox {
            _root: root,
            home,
            tmp,
            work,
        }
    }

    /// `cli` with the environment every CLI gets, run in `work`.
    fn command(&self, cli: &str) -> tokio::process::Command {
        agent_clis::command(cli, &self.home, &self.tmp, &self.work)
    }

    /// What points `cli` at `fake` (config files written into `home`).
    fn point_at(&self, cli: &str, fake: &FakeModel) -> Vec<(String, String)> {
        agent_clis::point_at(cli, fake, &self.home, &self.tmp)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_streams_the_deltas_and_runs_a_bash_tool() {
    let fake = fake([
        Turn::ToolCall {
            text: Some("I'll run a command.".into()),
            name: "Bash".into(),
            input: json!({"command": "echo hello-from-tool", "description": "Print a greeting"}),
            stream: deltas(2),
        },
        Turn::text("Done: the command printed hello-from-tool.").streamed(deltas(3)),
    ]);
    let sandbox = Sandbox::new();
    let mut command = sandbox.command("claude");
    command.envs(sandbox.point_at("claude", &fake)).args([
        "-p",
        "run the greeting",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--model",
        "claude-opus-5-5",
    ]);
    let run = run_to_end(command, "claude", &fake).await;

    // Its own stream: the raw SSE deltas, wrapped in `stream_event` lines.
    let text_deltas: Vec<&str> = of_type(&run.lines, "stream_event")
        .iter()
        .filter(|line| line["event"]["delta"]["type"] == "text_delta")
        .map(|line| line["event"]["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        text_deltas,
        [
            "I'll run a",
            " command.",
            "Done: the comm",
            "and printed he",
            "llo-from-tool."
        ]
    );
    // The tool call, and the result it sent back.
    let tool_use = of_type(&run.lines, "assistant")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .find(|block| block["type"] == "tool_use")
        .expect("an assistant line with the tool_use");
    assert_eq!(tool_use["name"], "Bash");
    let tool_id = tool_use["id"].as_str().unwrap();
    let tool_result = of_type(&run.lines, "user")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .find(|block| block["type"] == "tool_result")
        .expect("a user line with the tool_result");
    assert_eq!(tool_result["tool_use_id"], tool_id);
    assert_eq!(tool_result["content"], "hello-from-tool");
    assert_eq!(tool_result["is_error"], false);
    let result = of_type(&run.lines, "result");
    assert_eq!(result.len(), 1, "stderr: {}", run.stderr);
    assert_eq!(result[0]["subtype"], "success");
    assert_eq!(result[0]["is_error"], false);
    assert_eq!(
        result[0]["result"],
        "Done: the command printed hello-from-tool."
    );

    // Exactly one request per model turn, nothing else; the second carries
    // the tool's result.
    let requests = fake.requests();
    let paths: Vec<(&str, Option<usize>)> = requests
        .iter()
        .map(|request| (request.path.as_str(), request.turn))
        .collect();
    assert_eq!(
        paths,
        [
            ("/v1/messages?beta=true", Some(0)),
            ("/v1/messages?beta=true", Some(1))
        ]
    );
    assert!(
        requests
            .iter()
            .all(|request| request.protocol == Some(Protocol::Anthropic))
    );
    assert_eq!(requests[0].header("x-api-key"), Some("dummy"));
    assert_eq!(requests[0].body["stream"], true);
    let sent_back = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_result")
        .expect("the second request carries a tool_result");
    assert_eq!(sent_back["tool_use_id"], tool_id);
    assert_eq!(sent_back["content"], "hello-from-tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_streams_the_answer_and_runs_exec_command() {
    let fake = fake([
        Turn::ToolCall {
            text: Some("I'll run a command.".into()),
            name: "exec_command".into(),
            input: json!({"cmd": "echo hello-from-tool > out.txt && cat out.txt"}),
            stream: deltas(2),
        },
        Turn::text("Done: wrote out.txt.").streamed(deltas(3)),
    ]);
    let sandbox = Sandbox::new();
    let mut command = sandbox.command("codex");
    command.envs(sandbox.point_at("codex", &fake)).args([
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-m",
        "gpt-5.5",
        "write a file",
    ]);
    let run = run_to_end(command, "codex", &fake).await;

    // `codex exec --json` prints items whole, not deltas: the scripted
    // deltas, joined, are each message's text.
    let items: Vec<&Value> = of_type(&run.lines, "item.completed")
        .iter()
        .map(|line| &line["item"])
        .collect();
    let messages: Vec<&str> = items
        .iter()
        .filter(|item| item["type"] == "agent_message")
        .map(|item| item["text"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["I'll run a command.", "Done: wrote out.txt."]);
    let command = items
        .iter()
        .find(|item| item["type"] == "command_execution")
        .expect("a command_execution item");
    assert_eq!(command["aggregated_output"], "hello-from-tool\n");
    assert_eq!(command["exit_code"], 0);
    assert_eq!(
        std::fs::read_to_string(sandbox.work.join("out.txt")).unwrap(),
        "hello-from-tool\n"
    );
    assert_eq!(of_type(&run.lines, "turn.completed").len(), 1);

    let requests = fake.requests();
    let paths: Vec<(&str, Option<usize>)> = requests
        .iter()
        .map(|request| (request.path.as_str(), request.turn))
        .collect();
    assert_eq!(
        paths,
        [("/v1/responses", Some(0)), ("/v1/responses", Some(1))]
    );
    assert_eq!(requests[0].header("authorization"), Some("Bearer dummy"));
    assert_eq!(requests[0].body["model"], "gpt-5.5");
    let output = requests[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call_output")
        .expect("the second request carries the function_call_output");
    assert_eq!(output["call_id"], "call_fake0000_1");
    assert!(
        output["output"]
            .as_str()
            .unwrap()
            .contains("hello-from-tool"),
        "{output}"
    );
}

fn gemini_command(sandbox: &Sandbox, fake: &FakeModel, args: &[&str]) -> tokio::process::Command {
    let mut command = sandbox.command("gemini");
    command
        .envs(sandbox.point_at("gemini", fake))
        .args(args)
        .args(["--output-format", "stream-json"]);
    command
}

/// The assistant's `delta` messages.
fn gemini_deltas(lines: &[Value]) -> Vec<&str> {
    of_type(lines, "message")
        .iter()
        .filter(|line| line["role"] == "assistant" && line["delta"] == true)
        .map(|line| line["content"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_streams_the_deltas_and_reads_a_file() {
    let fake = fake([
        Turn::ToolCall {
            text: Some("Let me read the file.".into()),
            name: "read_file".into(),
            input: json!({"file_path": "notes.txt"}),
            stream: deltas(2),
        },
        Turn::text("All done.").streamed(deltas(2)),
    ]);
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.work.join("notes.txt"), "hello from file\n").unwrap();
    // read_file is one of the read-only tools a headless run has without
    // `--yolo`.
    let command = gemini_command(
        &sandbox,
        &fake,
        &["-p", "read notes", "-m", "gemini-2.5-flash"],
    );
    let run = run_to_end(command, "gemini", &fake).await;

    assert_eq!(
        gemini_deltas(&run.lines),
        ["Let me read", " the file.", "All d", "one."]
    );
    let tool_use = of_type(&run.lines, "tool_use");
    assert_eq!(tool_use.len(), 1);
    assert_eq!(tool_use[0]["tool_name"], "read_file");
    assert_eq!(tool_use[0]["parameters"], json!({"file_path": "notes.txt"}));
    let tool_result = of_type(&run.lines, "tool_result");
    assert_eq!(tool_result[0]["tool_id"], tool_use[0]["tool_id"]);
    assert_eq!(tool_result[0]["status"], "success");
    let result = of_type(&run.lines, "result");
    assert_eq!(result[0]["status"], "success", "stderr: {}", run.stderr);

    let requests = fake.requests();
    let paths: Vec<(&str, Option<usize>)> = requests
        .iter()
        .map(|request| (request.path.as_str(), request.turn))
        .collect();
    let stream = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
    assert_eq!(paths, [(stream, Some(0)), (stream, Some(1))]);
    assert_eq!(requests[0].header("x-goog-api-key"), Some("dummy"));
    let response = requests[1].body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|content| content["parts"].as_array().cloned().unwrap_or_default())
        .find_map(|part| part.get("functionResponse").cloned())
        .expect("the second request carries the functionResponse");
    assert_eq!(response["name"], "read_file");
    assert_eq!(response["response"]["output"], "hello from file\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_auto_model_routes_through_the_schema_answer_without_taking_a_turn() {
    let fake = fake([Turn::text("Hi! (scripted reply from the fake)").streamed(deltas(2))]);
    let sandbox = Sandbox::new();
    // No `-m`: the `auto` model asks the router first.
    let command = gemini_command(&sandbox, &fake, &["-p", "say hi"]);
    let run = run_to_end(command, "gemini (auto model)", &fake).await;

    assert_eq!(
        gemini_deltas(&run.lines),
        ["Hi! (scripted rep", "ly from the fake)"]
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(
        requests[0].path.ends_with(":generateContent"),
        "{}",
        requests[0].path
    );
    assert_eq!(
        requests[0].body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(requests[0].turn, None);
    assert!(requests[1].path.ends_with(":streamGenerateContent?alt=sse"));
    assert_eq!(requests[1].turn, Some(0));
}
