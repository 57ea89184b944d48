//! Starting a session without the agent CLIs: a missing program, options a
//! CLI cannot honour, where each CLI's prompt goes (a stand-in program
//! records its arguments and stdin), models and session ids that read like
//! flags, and custom commands with a line parser (here `sh`), their time
//! limit and their process group.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weir_agents::{
    AgentError, AgentEvent, AgentOptions, CliKind, Decision, HomeMode, Hook, HookCall, Mode,
    SdkMcpServer, ToolPermission, Transport,
};

/// `sh -c SCRIPT`, each stdout line a text delta.
fn shell(script: &str) -> AgentOptions {
    let cli = CliKind::Custom {
        name: "sh".into(),
        parser: Arc::new(|line: &str| {
            vec![AgentEvent::TextDelta {
                text: line.to_owned(),
            }]
        }),
    };
    let mut options = AgentOptions::new(cli, "");
    options.args = vec!["-c".into(), script.into()];
    options
}

async fn all(options: AgentOptions) -> Vec<AgentEvent> {
    let mut session = weir_agents::start(options).await.expect("start");
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = session.next().await {
            events.push(event);
        }
    })
    .await
    .expect("the session ends");
    events
}

#[tokio::test]
async fn a_cli_missing_from_path_names_itself_and_how_to_install_it() {
    let empty = tempfile::tempdir().unwrap();
    let mut options = AgentOptions::new(CliKind::Claude, "hi");
    options.env = vec![("PATH".into(), empty.path().to_string_lossy().into_owned())];
    let error = weir_agents::start(options).await.unwrap_err();
    assert!(matches!(&error, AgentError::NotFound { cli, .. } if cli == "claude"));
    assert_eq!(
        error.to_string(),
        format!(
            "claude was not found (looked in: {}); install Claude Code from the npm registry \
             (`npm install -g @anthropic-ai/claude-code`) so that `claude` is on PATH, or give \
             the program's path",
            empty.path().display()
        )
    );
}

/// An in-process MCP server that answers nothing (the CLI never runs here).
struct Silent(&'static str);

#[async_trait::async_trait]
impl SdkMcpServer for Silent {
    fn name(&self) -> &str {
        self.0
    }
    async fn handle(&self, _message: Value) -> Option<Value> {
        None
    }
}

#[tokio::test]
async fn in_process_servers_and_hooks_need_claude_in_control_mode() {
    let hook = || {
        Hook::new(
            "PreToolUse",
            Some("Bash"),
            Arc::new(|_: &HookCall| json!({})),
        )
    };
    // The router picks control mode for either.
    let mut options = AgentOptions::new(CliKind::Claude, "hi");
    options.program = Some("/bin/true".into());
    options.hooks = vec![hook()];
    let session = weir_agents::start(options).await.unwrap();
    assert_eq!(session.mode(), Mode::Control);
    let mut options = AgentOptions::new(CliKind::Claude, "hi");
    options.program = Some("/bin/true".into());
    options.mcp_servers = vec![Arc::new(Silent("weir"))];
    let session = weir_agents::start(options).await.unwrap();
    assert_eq!(session.mode(), Mode::Control);

    let mut options = AgentOptions::new(CliKind::Claude, "hi");
    options.program = Some("/bin/true".into());
    options.hooks = vec![hook()];
    options.transport = Transport::Light;
    let error = weir_agents::start(options).await.unwrap_err();
    assert!(error.to_string().contains("hooks"), "{error}");

    let mut options = AgentOptions::new(CliKind::Gemini, "hi");
    options.program = Some("/bin/true".into());
    options.mcp_servers = vec![Arc::new(Silent("weir"))];
    let error = weir_agents::start(options).await.unwrap_err();
    assert!(
        matches!(error, AgentError::Unsupported { ref cli, .. } if cli == "gemini"),
        "{error}"
    );

    let mut options = AgentOptions::new(CliKind::Claude, "hi");
    options.program = Some("/bin/true".into());
    options.mcp_servers = vec![Arc::new(Silent("weir")), Arc::new(Silent("weir"))];
    let error = weir_agents::start(options).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("two in-process MCP servers of one name"),
        "{error}"
    );
}

#[tokio::test]
async fn a_permission_policy_needs_claude() {
    let mut options = AgentOptions::new(CliKind::Codex, "hi");
    options.program = Some("/bin/true".into());
    options.permission = Some(Arc::new(|_: &ToolPermission| Decision::Allow {
        updated_input: None,
    }));
    let error = weir_agents::start(options).await.unwrap_err();
    assert!(
        matches!(error, AgentError::Unsupported { ref cli, .. } if cli == "codex"),
        "{error}"
    );

    let mut options = AgentOptions::new(CliKind::Claude, "hi");
    options.program = Some("/bin/true".into());
    options.multi_turn = true;
    options.transport = Transport::Light;
    assert!(matches!(
        weir_agents::start(options).await.unwrap_err(),
        AgentError::Unsupported { .. }
    ));
}

#[tokio::test]
async fn a_custom_command_streams_its_lines_and_exits() {
    let mut options = shell("echo one; echo two >&2; printf 'two\\nthree'; exit 7");
    options.home = HomeMode::Temp;
    let events = all(options).await;
    assert_eq!(
        events,
        [
            AgentEvent::TextDelta { text: "one".into() },
            AgentEvent::TextDelta { text: "two".into() },
            AgentEvent::TextDelta {
                text: "three".into()
            },
            AgentEvent::Exited {
                code: Some(7),
                signal: None,
                stderr_tail: "two\n".into()
            },
        ]
    );
}

#[tokio::test]
async fn a_private_home_gets_only_path_and_its_own_directories() {
    let mut options = shell("echo \"$HOME|$TMPDIR|${CARGO_MANIFEST_DIR:-unset}|$ONLY_THIS\"");
    options.home = HomeMode::Temp;
    // Whatever the test's own environment holds (a key, say) stays out.
    options.env = vec![("ONLY_THIS".into(), "1".into())];
    let events = all(options).await;
    let AgentEvent::TextDelta { text } = &events[0] else {
        panic!("{events:?}");
    };
    let [home, tmp, inherited, given] = text.split('|').collect::<Vec<_>>()[..] else {
        panic!("{text}");
    };
    assert!(home.ends_with("/home") && tmp.ends_with("/tmp"), "{text}");
    assert_eq!((inherited, given), ("unset", "1"));
    // The temporary home is removed with the session.
    assert!(!std::path::Path::new(home).exists());
}

#[tokio::test]
async fn a_time_limit_ends_the_whole_group() {
    let mut options = shell("sleep 30 & echo started; wait");
    options.timeout = Some(Duration::from_millis(300));
    let mut session = weir_agents::start(options).await.unwrap();
    let group = session.process_group();
    let mut events = Vec::new();
    while let Some(event) = session.next().await {
        events.push(event);
    }
    assert!(
        matches!(&events[1], AgentEvent::Error { message } if message.contains("time limit")),
        "{events:?}"
    );
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::Exited {
                signal: Some(15),
                ..
            })
        ),
        "{events:?}"
    );
    assert!(!weir_proc::group_alive(group));
}

#[tokio::test]
async fn dropping_a_session_kills_its_group() {
    let mut session = weir_agents::start(shell("sleep 30 & echo started; wait"))
        .await
        .unwrap();
    let group = session.process_group();
    assert_eq!(
        session.next().await,
        Some(AgentEvent::TextDelta {
            text: "started".into()
        })
    );
    drop(session);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while weir_proc::group_alive(group) {
        assert!(
            std::time::Instant::now() < until,
            "the group outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a CLI's arguments (one a line) hold the prompt where expected.
type Placed<'a> = dyn Fn(&str) -> bool + 'a;

/// Each CLI's stand-in records its arguments and stdin: the prompt never
/// stands where a CLI reads flags (claude: after `--`; codex: on stdin,
/// behind `-`; gemini: glued to `--prompt=`).
#[tokio::test]
async fn a_prompt_that_reads_like_a_flag_never_stands_where_flags_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("record");
    std::fs::write(
        &program,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$0.args\"\ncat > \"$0.stdin\"\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let prompt = "--dangerously-bypass-approvals-and-sandbox";
    let flag_then_prompt = format!("--\n{prompt}\n");
    let glued = format!("--prompt={prompt}\n");
    let cases: [(CliKind, &Placed, &str); 3] = [
        // Last, after `--`.
        (
            CliKind::Claude,
            &|args| args.ends_with(&flag_then_prompt),
            "",
        ),
        // Not in the arguments at all: `-`, last, and the prompt on stdin.
        (CliKind::Codex, &|args| args.ends_with("\n-\n"), prompt),
        // One argument, first.
        (CliKind::Gemini, &|args| args.starts_with(&glued), ""),
    ];
    for (cli, placed, expected_stdin) in cases {
        let name = cli.name().to_owned();
        let mut options = AgentOptions::new(cli, prompt);
        options.program = Some(program.clone());
        options.model = Some("a-model".into());
        options.transport = Transport::Light;
        all(options).await;
        let args = std::fs::read_to_string(dir.path().join("record.args")).unwrap();
        let stdin = std::fs::read_to_string(dir.path().join("record.stdin")).unwrap();
        assert!(placed(&args), "{name}: {args}");
        // Before any `--`, where flags are read, it never stands alone.
        assert!(
            !args
                .lines()
                .take_while(|arg| *arg != "--")
                .any(|arg| arg == prompt),
            "{name}: the prompt stands where flags are read: {args}"
        );
        assert_eq!(stdin, expected_stdin, "{name}");
    }
}

#[tokio::test]
async fn a_model_or_session_that_reads_like_a_flag_is_refused_before_the_start() {
    let marker = tempfile::tempdir().unwrap();
    let touch = marker.path().join("started");
    for (model, resume) in [(Some("--yolo"), None), (None, Some("-x"))] {
        let mut options = AgentOptions::new(CliKind::Gemini, "hi");
        // A program that would leave a mark, were it started.
        options.program = Some("/bin/touch".into());
        options.args = vec![touch.to_string_lossy().into_owned()];
        options.model = model.map(str::to_owned);
        options.resume = resume.map(str::to_owned);
        if resume.is_some() {
            options.cli = CliKind::Codex;
        }
        let error = weir_agents::start(options).await.unwrap_err();
        assert!(matches!(error, AgentError::Invalid { .. }), "{error}");
        assert!(error.to_string().contains("is not accepted"), "{error}");
    }
    assert!(!touch.exists());
}
