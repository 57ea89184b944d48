//! Issue 26's host acceptance: Claude Code (pinned, run offline against
//! `weir-fake-model`, as in `hosts.rs`) as the MCP host of `weir wrap`
//! around a third-party server on the Python SDK (`mcp` 1.x,
//! tests/wrap/sdk_server.py, in the virtualenv scripts/wrap-tests makes),
//! whose tool `slow` takes 90 s and reports progress every 10 s. The model
//! calls it once; the `tool_result` Claude Code hands the model holds the
//! upstream's own result, and what passed between the host and weir shows
//! the progress weir sent during the call, before the result.
//!
//! The host is given nothing special: no timeout setting, no progress
//! option, the server as `claude mcp add` would write it (`weir wrap --
//! PYTHON sdk_server.py`, copied through `tee` on the way as in hosts.rs).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_fake_model::agent_clis::{self, of_type, run_to_end};
use weir_fake_model::{FakeModel, Script, Turn};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
/// The call the issue names: 90 s, progress every 10 s.
const DURATION_S: u64 = 90;
const INTERVAL_S: u64 = 10;

/// The Python SDK server and the Python it runs on (`WRAP_SDK_PYTHON`, else
/// scripts/wrap-tests' virtualenv).
fn sdk_server() -> (PathBuf, PathBuf) {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("WRAP_SDK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/clients/py-mcp1/bin/python"));
    assert!(
        python.exists(),
        "{} is missing: `scripts/wrap-tests install` makes it (scripts/test does)",
        python.display()
    );
    (python, repo.join("tests/wrap/sdk_server.py"))
}

/// The test's own directories (as hosts.rs's scene): the host's HOME, TMPDIR
/// and working directory, weir's data directory, and the copies of what
/// passed between the host and weir.
struct Scene {
    root: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    work: PathBuf,
    data: PathBuf,
    /// What the host wrote to weir's stdin.
    sent: PathBuf,
    /// What weir wrote to its stdout.
    received: PathBuf,
}

impl Scene {
    fn new() -> Scene {
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

    /// The processes with this scene's directory on their command line or
    /// in their environment (the shell, `tee`, weir, the upstream),
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

    /// Once the host has exited, weir and its upstream end too.
    fn assert_nothing_left(&self) {
        let until = Instant::now() + Duration::from_secs(5);
        while !self.processes().is_empty() {
            assert!(
                Instant::now() < until,
                "processes the host started are still running 5 s after it exited: {:?}",
                self.processes()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JSON lines in `path`, in order.
    fn messages(path: &std::path::Path) -> Vec<Value> {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("{} was not written: {error}", path.display()));
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|error| panic!("not a JSON line ({error}): {line}"))
            })
            .collect()
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

/// The text of a `tool_result` block's content (a string or text blocks).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_gets_the_result_of_a_90_s_upstream_call_through_weir_wrap() {
    let (python, script) = sdk_server();
    let scene = Scene::new();
    let upstream_log = scene.root.path().join("upstream.jsonl");
    let tool = "mcp__wrapped__slow";
    let arguments = json!({"duration_s": DURATION_S, "interval_s": INTERVAL_S});
    let fake = FakeModel::start(Script::new([
        Turn::tool_call(tool, arguments),
        Turn::text("The slow tool finished."),
    ]))
    .expect("start the fake model");
    let claude_tmp = scene.tmp.join("claude");
    std::fs::create_dir(&claude_tmp).unwrap();
    let server = json!({
        "command": "sh",
        "args": [
            "-c",
            r#"tee "$1" | "$0" wrap --data-dir "$3" -- "$4" "$5" | tee "$2""#,
            WEIR,
            scene.sent,
            scene.received,
            scene.data,
            python,
            script,
        ],
        "env": {"WRAP_LOG": upstream_log},
    });
    let config = json!({"mcpServers": {"wrapped": server}});
    let mut command = agent_clis::command("claude", &scene.home, &scene.tmp, &scene.work);
    command
        .env("ANTHROPIC_BASE_URL", fake.url())
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_TMPDIR", &claude_tmp)
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .args(["-p", "run the slow tool", "--output-format", "stream-json"])
        .args(["--verbose", "--model", "claude-opus-5-5"])
        .args(["--mcp-config", &config.to_string()])
        .args(["--allowedTools", tool]);
    let started = Instant::now();
    let run = run_to_end(command, "claude", &fake).await;
    let took = started.elapsed();
    scene.assert_nothing_left();

    // The upstream really ran the 90 s call, once, to its end.
    let recorded: Vec<Value> = Scene::messages(&upstream_log);
    let events = |kind: &str| -> Vec<&Value> {
        recorded
            .iter()
            .filter(|event| event["event"] == kind)
            .collect()
    };
    assert_eq!(events("start").len(), 1, "{recorded:#?}");
    assert_eq!(events("done").len(), 1, "{recorded:#?}");
    assert_eq!(
        events("progress").len() as u64,
        DURATION_S / INTERVAL_S,
        "{recorded:#?}"
    );
    let expected = format!("slept {DURATION_S} s");

    // What weir sent the host: the call's progress, then its result.
    let sent = Scene::messages(&scene.sent);
    let call = sent
        .iter()
        .find(|message| message["method"] == "tools/call" && message["params"]["name"] == "slow")
        .unwrap_or_else(|| panic!("the host never called slow: {sent:#?}"));
    let token = call["params"]["_meta"]["progressToken"].clone();
    let received = Scene::messages(&scene.received);
    let answer = received
        .iter()
        .position(|message| message["id"] == call["id"] && message.get("method").is_none())
        .unwrap_or_else(|| panic!("weir never answered {call}: {received:#?}"));
    let result = &received[answer]["result"];
    assert_eq!(result["isError"], Value::Null, "{result}");
    assert_eq!(text_of(&result["content"]), expected, "{result}");
    let progress: Vec<f64> = received[..answer]
        .iter()
        .filter(|message| {
            message["method"] == "notifications/progress"
                && message["params"]["progressToken"] == token
        })
        .map(|message| message["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        progress.len() as u64 >= DURATION_S / INTERVAL_S - 1,
        "progress token {token}: {progress:?}"
    );
    assert!(progress.windows(2).all(|pair| pair[0] < pair[1]));

    // What the host handed its model: the upstream's result, not an error,
    // not "still running" — in its stream-json and in the model's request.
    let tool_use = of_type(&run.lines, "assistant")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .find(|block| block["type"] == "tool_use")
        .expect("an assistant line with the tool_use");
    let tool_id = tool_use["id"].clone();
    let tool_result = of_type(&run.lines, "user")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == tool_id)
        .unwrap_or_else(|| panic!("no tool_result in {:#?}\nstderr: {}", run.lines, run.stderr));
    assert_eq!(tool_result["is_error"], Value::Null, "{tool_result}");
    assert_eq!(text_of(&tool_result["content"]), expected, "{tool_result}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "one request per model turn");
    let sent_back = requests[1].body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["type"] == "tool_result" && block["tool_use_id"] == tool_id)
        .unwrap_or_else(|| panic!("no tool_result in {:#}", requests[1].body));
    assert_eq!(sent_back["is_error"], Value::Null, "{sent_back}");
    assert_eq!(text_of(&sent_back["content"]), expected, "{sent_back}");
    let finished = of_type(&run.lines, "result");
    assert_eq!(finished.len(), 1, "stderr: {}", run.stderr);
    assert_eq!(finished[0]["result"], "The slow tool finished.");
    assert!(took >= Duration::from_secs(DURATION_S), "{took:?}");
    eprintln!(
        "claude through weir wrap: {:.1} s, {} progress notifications to the host, the model read {expected:?}",
        took.as_secs_f64(),
        progress.len()
    );
}
