//! The drivers against the real CLIs (Claude Code, Codex, the Gemini CLI,
//! pinned in tests/agent-clis and installed by scripts/agent-clis), each
//! run fully offline against weir-fake-model in a private home
//! (`weir_fake_model::agent_clis::point_at` has what points each CLI at
//! the fake). They run in nextest's `agent-clis` group, one at a time; a
//! CLI that cannot be installed fails its test, saying why.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weir_agents::{
    AgentEvent, AgentOptions, AgentResult, AgentSession, CliKind, Decision, HomeMode, Hook,
    HookCall, Mode, PrivateHome, SdkMcpServer, ToolPermission,
};
use weir_fake_model::agent_clis::{installed, point_at};
use weir_fake_model::{FakeModel, Script, Streaming, Turn};

/// A test's fake model and private directories.
struct Scene {
    fake: FakeModel,
    _root: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    work: PathBuf,
}

impl Scene {
    fn new(turns: impl IntoIterator<Item = Turn>) -> Scene {
        let root = tempfile::tempdir().expect("a temporary directory");
        let [home, tmp, work] = ["home", "tmp", "work"].map(|name| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).expect("create a directory of the test");
            dir
        });
        Scene {
            fake: FakeModel::start(Script::new(turns)).expect("start the fake"),
            _root: root,
            home,
            tmp,
            work,
        }
    }

    /// `cli` on `prompt`, pointed at the fake, with an explicit model (so
    /// no CLI looks one up).
    fn options(&self, cli: CliKind, prompt: &str) -> AgentOptions {
        let name = cli.name().to_owned();
        let mut options = AgentOptions::new(cli, prompt);
        options.program = Some(installed().join(&name));
        options.cwd = self.work.clone();
        options.home = HomeMode::Private(PrivateHome {
            home: self.home.clone(),
            tmp: self.tmp.clone(),
        });
        options.env = point_at(&name, &self.fake, &self.home, &self.tmp);
        options.model = Some(
            match name.as_str() {
                "claude" => "claude-opus-5-5",
                "codex" => "gpt-5.5",
                _ => "gemini-2.5-flash",
            }
            .into(),
        );
        options.timeout = Some(Duration::from_secs(90));
        options
    }
}

fn slow(deltas: usize, delay_ms: u64) -> Streaming {
    Streaming {
        deltas,
        delay_ms,
        ..Streaming::default()
    }
}

/// Every event to the end, each with whether the CLI's group was still
/// alive when it arrived.
async fn drain(session: &mut AgentSession) -> Vec<(AgentEvent, bool)> {
    let group = session.process_group();
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(event) = session.next().await {
            events.push((event, weir_proc::group_alive(group)));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the session did not end in 120 s; so far: {events:#?}"));
    events
}

fn text_deltas(events: &[(AgentEvent, bool)]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|(event, _)| match event {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn results(events: &[(AgentEvent, bool)]) -> Vec<&AgentResult> {
    events
        .iter()
        .filter_map(|(event, _)| match event {
            AgentEvent::Result(result) => Some(result),
            _ => None,
        })
        .collect()
}

/// The last event, which must be `Exited`: its code.
fn exit_code(events: &[(AgentEvent, bool)]) -> Option<i32> {
    match events.last() {
        Some((AgentEvent::Exited { code, .. }, _)) => *code,
        other => panic!("the last event is not Exited: {other:?}"),
    }
}

/// The first text delta arrived while the CLI was still running, and the
/// deltas came in the scripted order: the stream is live, not replayed at
/// the end.
fn assert_live(events: &[(AgentEvent, bool)], expected: &[&str]) {
    assert_eq!(text_deltas(events), expected, "{events:#?}");
    let first = events
        .iter()
        .find(|(event, _)| matches!(event, AgentEvent::TextDelta { .. }))
        .expect("a text delta");
    assert!(first.1, "the first text delta came after the CLI exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_light_mode_streams_deltas_live_and_in_order() {
    let scene = Scene::new([Turn::text("one two three four").streamed(slow(4, 150))]);
    let mut session = weir_agents::start(scene.options(CliKind::Claude, "count"))
        .await
        .unwrap();
    assert_eq!(session.mode(), Mode::Light);
    let events = drain(&mut session).await;
    assert_live(&events, &["one t", "wo th", "ree ", "four"]);
    assert!(matches!(
        &events[0].0,
        AgentEvent::SessionStarted { session_id: Some(_), model: Some(model) } if model == "claude-opus-5-5"
    ));
    let result = results(&events);
    assert_eq!(result.len(), 1);
    assert!(!result[0].is_error);
    assert_eq!(result[0].text.as_deref(), Some("one two three four"));
    assert!(result[0].usage.is_some_and(|usage| usage.output_tokens > 0));
    assert_eq!(exit_code(&events), Some(0));
}

fn touch_marker() -> [Turn; 2] {
    [
        Turn::ToolCall {
            text: Some("I'll create a file.".into()),
            name: "Bash".into(),
            input: json!({"command": "touch marker.txt && echo created", "description": "Create marker file"}),
            stream: Streaming::default(),
        },
        Turn::text("Done."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_control_mode_asks_the_policy_and_runs_an_allowed_tool() {
    let scene = Scene::new(touch_marker());
    let mut options = scene.options(CliKind::Claude, "create marker");
    options.permission = Some(Arc::new(|asked: &ToolPermission| {
        assert_eq!(asked.tool_name, "Bash");
        Decision::Allow {
            updated_input: None,
        }
    }));
    let mut session = weir_agents::start(options).await.unwrap();
    assert_eq!(session.mode(), Mode::Control, "the router picks control");
    let events = drain(&mut session).await;

    let asked: Vec<_> = events
        .iter()
        .filter_map(|(event, _)| match event {
            AgentEvent::PermissionRequest {
                tool_name, allowed, ..
            } => Some((tool_name.as_str(), *allowed)),
            _ => None,
        })
        .collect();
    assert_eq!(asked, [("Bash", true)]);
    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::ToolResult { content, is_error: false, .. } if content == "created")),
        "{events:#?}"
    );
    assert!(scene.work.join("marker.txt").exists());
    assert_eq!(results(&events)[0].text.as_deref(), Some("Done."));
    assert_eq!(exit_code(&events), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_control_mode_denies_a_tool_the_policy_refuses() {
    let scene = Scene::new(touch_marker());
    let mut options = scene.options(CliKind::Claude, "create marker");
    options.permission = Some(Arc::new(|_: &ToolPermission| Decision::Deny {
        message: "not in this test".into(),
    }));
    let mut session = weir_agents::start(options).await.unwrap();
    let events = drain(&mut session).await;

    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::PermissionRequest { allowed: false, tool_name, .. } if tool_name == "Bash")),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::ToolResult { content, is_error: true, .. } if content.contains("not in this test"))),
        "{events:#?}"
    );
    assert!(!scene.work.join("marker.txt").exists());
    assert_eq!(exit_code(&events), Some(0));
}

/// An in-process MCP server with one tool, `shout`, that upper-cases its
/// `text`; it records every JSON-RPC message it was given.
#[derive(Default)]
struct Shouter {
    messages: std::sync::Mutex<Vec<Value>>,
}

#[async_trait::async_trait]
impl SdkMcpServer for Shouter {
    fn name(&self) -> &str {
        "weir"
    }

    async fn handle(&self, message: Value) -> Option<Value> {
        self.messages.lock().unwrap().push(message.clone());
        let id = message.get("id")?.clone();
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "weir", "version": "0"},
            }),
            Some("tools/list") => json!({"tools": [{
                "name": "shout",
                "description": "Upper-cases its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            }]}),
            Some("tools/call") => {
                let text = message["params"]["arguments"]["text"]
                    .as_str()
                    .unwrap_or_default();
                json!({"content": [{"type": "text", "text": text.to_uppercase()}]})
            }
            _ => {
                return Some(
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}}),
                );
            }
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
}

fn allow_all() -> Arc<dyn weir_agents::PermissionPolicy> {
    Arc::new(|_: &ToolPermission| Decision::Allow {
        updated_input: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_calls_a_tool_of_an_in_process_mcp_server() {
    let scene = Scene::new([
        Turn::tool_call("mcp__weir__shout", json!({"text": "quiet words"})),
        Turn::text("Done."),
    ]);
    let server = Arc::new(Shouter::default());
    let mut options = scene.options(CliKind::Claude, "shout it");
    options.mcp_servers = vec![server.clone()];
    options.permission = Some(allow_all());
    let mut session = weir_agents::start(options).await.unwrap();
    assert_eq!(session.mode(), Mode::Control);
    let events = drain(&mut session).await;

    let messages = server.messages.lock().unwrap().clone();
    let methods: Vec<&str> = messages
        .iter()
        .filter_map(|message| message["method"].as_str())
        .collect();
    for method in [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ] {
        assert!(methods.contains(&method), "{method} missing: {methods:?}");
    }
    let call = messages
        .iter()
        .find(|message| message["method"] == "tools/call")
        .unwrap();
    assert_eq!(call["params"]["name"], "shout");
    assert_eq!(call["params"]["arguments"], json!({"text": "quiet words"}));
    // The model was told of the server's tool (by name: the CLI defers
    // MCP tools' schemas to its tool search), and got its answer back.
    let requests = scene.fake.requests();
    assert!(
        requests[0].body.to_string().contains("mcp__weir__shout"),
        "{:#}",
        requests[0].body
    );
    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::ToolResult { content, is_error: false, .. } if content == "QUIET WORDS")),
        "{events:#?}"
    );
    assert!(
        requests[1].body["messages"]
            .to_string()
            .contains("QUIET WORDS"),
        "{:#}",
        requests[1].body["messages"]
    );
    assert_eq!(results(&events)[0].text.as_deref(), Some("Done."));
    assert_eq!(exit_code(&events), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_pre_tool_use_hook_blocks_a_command() {
    let scene = Scene::new(touch_marker());
    let calls = Arc::new(std::sync::Mutex::new(Vec::<HookCall>::new()));
    let seen = calls.clone();
    let mut options = scene.options(CliKind::Claude, "create marker");
    // The policy allows everything: only the hook stands in the way.
    options.permission = Some(allow_all());
    options.hooks = vec![Hook::new(
        "PreToolUse",
        Some("Bash"),
        Arc::new(move |call: &HookCall| {
            seen.lock().unwrap().push(call.clone());
            json!({"hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no files in this test",
            }})
        }),
    )];
    let mut session = weir_agents::start(options).await.unwrap();
    assert_eq!(session.mode(), Mode::Control);
    let events = drain(&mut session).await;

    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0].event, "PreToolUse");
    assert_eq!(calls[0].input["tool_name"], "Bash");
    assert_eq!(
        calls[0].input["tool_input"]["command"],
        "touch marker.txt && echo created"
    );
    assert!(calls[0].tool_use_id.is_some());
    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::HookCalled { event, tool_use_id, .. }
                if event == "PreToolUse" && *tool_use_id == calls[0].tool_use_id)),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::ToolResult { content, is_error: true, .. } if content.contains("no files in this test"))),
        "{events:#?}"
    );
    assert!(!scene.work.join("marker.txt").exists());
    assert_eq!(results(&events)[0].text.as_deref(), Some("Done."));
    assert_eq!(exit_code(&events), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_control_mode_interrupts_a_slow_stream() {
    let scene = Scene::new([
        Turn::text("one two three four five six seven eight nine ten").streamed(slow(10, 400)),
    ]);
    let mut options = scene.options(CliKind::Claude, "count");
    options.transport = weir_agents::Transport::Control;
    let mut session = weir_agents::start(options).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = session.next().await {
        let first_delta = matches!(event, AgentEvent::TextDelta { .. })
            && !events
                .iter()
                .any(|(event, _)| matches!(event, AgentEvent::TextDelta { .. }));
        events.push((event, true));
        if first_delta {
            session.interrupt().await;
        }
    }
    let deltas = text_deltas(&events);
    assert!(
        !deltas.is_empty() && deltas.len() < 10,
        "interrupted after the first delta: {deltas:?}"
    );
    let result = results(&events);
    assert_eq!(result.len(), 1, "{events:#?}");
    assert!(result[0].is_error);
    assert_eq!(result[0].subtype.as_deref(), Some("error_during_execution"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_control_mode_takes_a_second_turn_on_the_same_process() {
    let scene = Scene::new([Turn::text("First answer."), Turn::text("Second answer.")]);
    let mut options = scene.options(CliKind::Claude, "first");
    options.multi_turn = true;
    let mut session = weir_agents::start(options).await.unwrap();
    let mut answers = Vec::new();
    while let Some(event) = session.next().await {
        if let AgentEvent::Result(result) = event {
            answers.push(result.text.unwrap_or_default());
            if answers.len() == 1 {
                session.send("second").await.unwrap();
            } else {
                session.close().await;
            }
        }
    }
    assert_eq!(answers, ["First answer.", "Second answer."]);
    assert_eq!(scene.fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_model_error_500_ends_in_an_error_result() {
    let scene = Scene::new([Turn::error(500, "scripted server error")]);
    let mut session = weir_agents::start(scene.options(CliKind::Claude, "hi"))
        .await
        .unwrap();
    let events = drain(&mut session).await;
    let result = results(&events);
    assert_eq!(result.len(), 1, "{events:#?}");
    assert!(result[0].is_error);
    assert!(
        result[0]
            .text
            .as_deref()
            .is_some_and(|text| text.contains("500")),
        "{:?}",
        result[0]
    );
    assert_eq!(exit_code(&events), Some(1));
}

/// The process after `kill` has returned: nothing of its group is left,
/// not even the command its tool was running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_leaves_no_process_of_the_group() {
    let scene = Scene::new([
        Turn::tool_call(
            "Bash",
            json!({"command": "timeout 41.5 tail -f /dev/null", "description": "Wait"}),
        ),
        Turn::text("Done."),
    ]);
    let mut options = scene.options(CliKind::Claude, "wait");
    options.permission = Some(Arc::new(|_: &ToolPermission| Decision::Allow {
        updated_input: None,
    }));
    let mut session = weir_agents::start(options).await.unwrap();
    let group = session.process_group();
    while let Some(event) = session.next().await {
        if matches!(event, AgentEvent::PermissionRequest { .. }) {
            break;
        }
    }
    // The tool's command starts.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while sleepers().is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "the tool never ran; the group: {:?}",
            std::process::Command::new("ps")
                .args(["-o", "pid,pgid,sid,args", "-g", &group.to_string()])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    session.kill().await;
    assert!(!weir_proc::group_alive(group), "the group is still alive");
    assert_eq!(sleepers(), Vec::<u32>::new(), "the tool's command was left");
}

/// Processes running this test's `timeout 41.5 …`, zombies aside.
fn sleepers() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let running = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            running
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| cmdline.split(|&b| b == 0).any(|arg| arg == b"41.5"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_gives_each_message_whole_then_the_result() {
    let scene = Scene::new([
        Turn::ToolCall {
            text: Some("I'll run a command.".into()),
            name: "exec_command".into(),
            input: json!({"cmd": "echo hello-from-tool"}),
            stream: slow(2, 0),
        },
        Turn::text("Done.").streamed(slow(2, 100)),
    ]);
    let mut session = weir_agents::start(scene.options(CliKind::Codex, "run it"))
        .await
        .unwrap();
    let events = drain(&mut session).await;
    assert_live(&events, &["I'll run a command.", "Done."]);
    assert!(
        events.iter().any(|(event, _)| matches!(event,
            AgentEvent::ToolResult { content, is_error: false, .. } if content.contains("hello-from-tool"))),
        "{events:#?}"
    );
    let result = results(&events);
    assert!(!result[0].is_error);
    assert_eq!(result[0].text.as_deref(), Some("Done."));
    assert_eq!(exit_code(&events), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_model_error_is_an_error_result() {
    let scene = Scene::new([Turn::error(400, "scripted bad request")]);
    let mut session = weir_agents::start(scene.options(CliKind::Codex, "hi"))
        .await
        .unwrap();
    let events = drain(&mut session).await;
    let result = results(&events);
    assert!(result[0].is_error, "{events:#?}");
    assert!(
        result[0]
            .text
            .as_deref()
            .is_some_and(|text| text.contains("scripted bad request"))
    );
    assert_eq!(exit_code(&events), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_streams_deltas_live_and_in_order() {
    let scene = Scene::new([Turn::text("alpha beta gamma").streamed(slow(3, 200))]);
    let mut session = weir_agents::start(scene.options(CliKind::Gemini, "greek"))
        .await
        .unwrap();
    let events = drain(&mut session).await;
    assert_live(&events, &["alpha ", "beta ", "gamma"]);
    let result = results(&events);
    assert!(!result[0].is_error);
    assert_eq!(result[0].text.as_deref(), Some("alpha beta gamma"));
    assert_eq!(exit_code(&events), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_model_error_is_an_error_result() {
    let scene = Scene::new([Turn::error(400, "scripted bad request")]);
    let mut session = weir_agents::start(scene.options(CliKind::Gemini, "hi"))
        .await
        .unwrap();
    let events = drain(&mut session).await;
    let result = results(&events);
    assert!(result[0].is_error, "{events:#?}");
    // The Gemini CLI exits with the HTTP status mod 256.
    assert_eq!(exit_code(&events), Some(400 % 256));
}
