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

/// Claude Code, offline against `fake`, with `weir wrap WEIR_ARGS --
/// PYTHON sdk_server.py` as its MCP server `wrapped` (copied through `tee`
/// on the way, as `claude mcp add` would write it but for the copies), and
/// `tools` allowed.
fn claude(
    scene: &Scene,
    fake: &FakeModel,
    weir_args: &[&str],
    upstream_log: &std::path::Path,
    tools: &[&str],
) -> tokio::process::Command {
    let (python, script) = sdk_server();
    let claude_tmp = scene.tmp.join("claude");
    std::fs::create_dir(&claude_tmp).unwrap();
    let server = json!({
        "command": "sh",
        "args": [
            "-c",
            r#"tee "$1" | "$0" wrap --data-dir "$3" $6 -- "$4" "$5" | tee "$2""#,
            WEIR,
            scene.sent,
            scene.received,
            scene.data,
            python,
            script,
            weir_args.join(" "),
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
        .args(["--allowedTools", &tools.join(",")]);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_gets_the_result_of_a_90_s_upstream_call_through_weir_wrap() {
    let scene = Scene::new();
    let upstream_log = scene.root.path().join("upstream.jsonl");
    let tool = "mcp__wrapped__slow";
    let arguments = json!({"duration_s": DURATION_S, "interval_s": INTERVAL_S});
    let fake = FakeModel::start(Script::new([
        Turn::tool_call(tool, arguments),
        Turn::text("The slow tool finished."),
    ]))
    .expect("start the fake model");
    let command = claude(&scene, &fake, &[], &upstream_log, &[tool]);
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

/// The tool results Claude Code handed its model, in order: `(tool name,
/// input, result text)` of each `tool_use` and its `tool_result`.
fn tool_rounds(lines: &[Value]) -> Vec<(String, Value, String)> {
    let uses: Vec<&Value> = of_type(lines, "assistant")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .filter(|block| block["type"] == "tool_use")
        .collect();
    let results: Vec<&Value> = of_type(lines, "user")
        .into_iter()
        .flat_map(|line| line["message"]["content"].as_array().unwrap())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    uses.iter()
        .map(|tool_use| {
            let result = results
                .iter()
                .find(|result| result["tool_use_id"] == tool_use["id"])
                .unwrap_or_else(|| panic!("no tool_result for {tool_use}: {lines:#?}"));
            assert_eq!(result["is_error"], Value::Null, "{result}");
            (
                tool_use["name"].as_str().unwrap().to_owned(),
                tool_use["input"].clone(),
                text_of(&result["content"]),
            )
        })
        .collect()
}

/// `--defer-after` through Claude Code: the 20 s call answers at 3 s that
/// its run is still working, with the run's id; the model (whose next turn
/// takes that id from the tool result) calls `runs_wait` with it and reads
/// the upstream's own result, while the upstream ran the call once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_gets_a_deferred_call_s_result_by_runs_wait() {
    const DURATION_S: u64 = 20;
    const DEFER_S: u64 = 3;
    let scene = Scene::new();
    let upstream_log = scene.root.path().join("upstream.jsonl");
    let (slow, wait) = ("mcp__wrapped__slow", "mcp__wrapped__runs_wait");
    // Claude Code hands the model the result's structuredContent, as JSON.
    let run_id = json!({"$from_result": {"pointer": "/run_id"}});
    let fake = FakeModel::start(Script::new([
        Turn::tool_call(slow, json!({"duration_s": DURATION_S, "interval_s": 5})),
        Turn::tool_call(wait, json!({"run_id": run_id, "timeout_s": 60})),
        Turn::text("The slow tool finished."),
    ]))
    .expect("start the fake model");
    let defer = format!("--defer-after {DEFER_S}");
    let command = claude(&scene, &fake, &[&defer], &upstream_log, &[slow, wait]);
    let started = Instant::now();
    let run = run_to_end(command, "claude", &fake).await;
    let took = started.elapsed();
    scene.assert_nothing_left();

    let rounds = tool_rounds(&run.lines);
    assert_eq!(rounds.len(), 2, "{rounds:#?}\nstderr: {}", run.stderr);
    // The call answered early: the run is still working, and its id.
    let (name, _, deferred) = &rounds[0];
    assert_eq!(name, slow);
    let deferred: Value = serde_json::from_str(deferred)
        .unwrap_or_else(|_| panic!("not the structured deferral: {deferred}"));
    assert_eq!(deferred["still_working"], true, "{deferred}");
    let message = deferred["message"].as_str().unwrap_or_default();
    assert!(message.contains("call the runs_wait tool"), "{deferred}");
    let id = deferred["run_id"].as_str().expect("the run's id");
    // The model waited on that run and read the upstream's result.
    let (name, input, result) = &rounds[1];
    assert_eq!(name, wait);
    assert_eq!(input["run_id"], id, "{input}");
    assert_eq!(result, &format!("slept {DURATION_S} s"));

    // What weir answered the host, and when: the deferral before the tool
    // could have ended, so at about DEFER_S.
    let sent = Scene::messages(&scene.sent);
    let received = Scene::messages(&scene.received);
    let answer_to = |tool: &str| {
        let call = sent
            .iter()
            .find(|message| message["method"] == "tools/call" && message["params"]["name"] == tool)
            .unwrap_or_else(|| panic!("the host never called {tool}: {sent:#?}"));
        received
            .iter()
            .find(|message| message["id"] == call["id"] && message.get("method").is_none())
            .unwrap_or_else(|| panic!("weir never answered {call}"))
            .clone()
    };
    let early = answer_to("slow");
    assert_eq!(
        early["result"]["structuredContent"]["still_working"], true,
        "{early}"
    );
    assert_eq!(
        early["result"]["structuredContent"]["run_id"], id,
        "{early}"
    );
    assert_eq!(
        text_of(&answer_to("runs_wait")["result"]["content"]),
        format!("slept {DURATION_S} s")
    );

    // The upstream ran the call once, to its end.
    let recorded = Scene::messages(&upstream_log);
    let count = |kind: &str| {
        recorded
            .iter()
            .filter(|event| event["event"] == kind)
            .count()
    };
    assert_eq!((count("start"), count("done")), (1, 1), "{recorded:#?}");
    // The model's request after the deferral carried the id it then used.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "one request per model turn");
    assert!(requests[1].body.to_string().contains(id));
    let finished = of_type(&run.lines, "result");
    assert_eq!(finished[0]["result"], "The slow tool finished.");
    assert!(took >= Duration::from_secs(DURATION_S), "{took:?}");
    eprintln!(
        "claude through weir wrap --defer-after {DEFER_S}: {:.1} s, the model waited on {id} and read {result:?}",
        took.as_secs_f64()
    );
}
