//! `weir agent` through the real binary, driving the real Claude Code,
//! Codex and Gemini CLIs (pinned, installed by scripts/agent-clis) fully
//! offline against weir-fake-model. weir runs each CLI with its own
//! environment, as it would a user's: the test gives weir a private HOME
//! and TMPDIR, the variables that point the CLI at the fake
//! (`agent_clis::point_at`), and a PATH that starts with the pinned CLIs.
//! stdout and stderr share one pipe, so the test reads them in the order
//! weir wrote them. The test's own thread blocks on weir; the fake serves
//! from the runtime's workers. In nextest's `agent-clis` group (one at a time).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir_fake_model::agent_clis::{installed, point_at};
use weir_fake_model::{FakeModel, Script, Streaming, Turn};

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

    /// `weir agent --cli CLI --model M ARGS…` with the environment a user
    /// who set up the CLI for the fake would have.
    fn weir_agent(&self, cli: &str, path: &str, args: &[&str]) -> Command {
        let model = match cli {
            "claude" => "claude-opus-5-5",
            "codex" => "gpt-5.5",
            _ => "gemini-2.5-flash",
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .envs([
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                ("CI", "1"),
                ("DO_NOT_TRACK", "1"),
            ])
            .envs(point_at(cli, &self.fake, &self.home, &self.tmp))
            .current_dir(&self.work)
            .args(["agent", "--cli", cli, "--model", model])
            .args(args)
            .stdin(Stdio::null());
        command
    }
}

/// PATH with the pinned CLIs first.
fn path_with_clis() -> String {
    format!(
        "{}:{}",
        installed().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// What a `weir agent` printed (stdout and stderr interleaved as written),
/// when its first byte came, and its exit code.
struct Printed {
    text: String,
    first_output_before_exit: Duration,
    code: Option<i32>,
}

fn run(mut command: Command) -> Printed {
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    command
        .stdout(writer.try_clone().expect("clone the pipe"))
        .stderr(writer);
    let mut child = command.spawn().expect("start weir");
    drop(command);
    let mut first = [0u8; 1];
    let got_first = reader.read(&mut first).expect("read weir's output");
    let first_at = Instant::now();
    let mut text = first[..got_first].to_vec();
    reader.read_to_end(&mut text).expect("read weir's output");
    let status = child.wait().expect("wait for weir");
    Printed {
        text: String::from_utf8_lossy(&text).into_owned(),
        first_output_before_exit: first_at.elapsed(),
        code: status.code(),
    }
}

fn slow(deltas: usize) -> Streaming {
    Streaming {
        deltas,
        delay_ms: 300,
        ..Streaming::default()
    }
}

/// The text comes first, live (well before weir exits), then the summary.
fn assert_streamed(printed: &Printed, text: &str) {
    assert_eq!(printed.code, Some(0), "{}", printed.text);
    let at = printed
        .text
        .find(text)
        .unwrap_or_else(|| panic!("no {text:?} in:\n{}", printed.text));
    let done = printed
        .text
        .find("[done")
        .unwrap_or_else(|| panic!("no summary in:\n{}", printed.text));
    assert!(at < done, "the text after the result:\n{}", printed.text);
    assert!(
        printed.first_output_before_exit >= Duration::from_millis(500),
        "the first output came {:?} before the end: not live\n{}",
        printed.first_output_before_exit,
        printed.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_prints_text_deltas_before_the_result() {
    let scene = Scene::new([Turn::text("one two three four").streamed(slow(4))]);
    let printed = run(scene.weir_agent("claude", &path_with_clis(), &["count"]));
    assert_streamed(&printed, "one two three four\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_prints_each_message_before_the_result() {
    let scene = Scene::new([
        Turn::ToolCall {
            text: Some("Let me look.".into()),
            name: "exec_command".into(),
            input: serde_json::json!({"cmd": "sleep 1; echo looked"}),
            stream: Streaming::default(),
        },
        Turn::text("It is fine."),
    ]);
    let printed = run(scene.weir_agent("codex", &path_with_clis(), &["look"]));
    assert_streamed(&printed, "Let me look.");
    assert!(
        printed.text.contains("> command_execution"),
        "{}",
        printed.text
    );
    assert!(printed.text.contains("It is fine."), "{}", printed.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_prints_text_deltas_before_the_result() {
    let scene = Scene::new([Turn::text("alpha beta gamma").streamed(slow(3))]);
    let printed = run(scene.weir_agent("gemini", &path_with_clis(), &["greek"]));
    assert_streamed(&printed, "alpha beta gamma\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_fails_the_command() {
    let scene = Scene::new([Turn::error(500, "scripted server error")]);
    let printed = run(scene.weir_agent("claude", &path_with_clis(), &["hi"]));
    assert_eq!(printed.code, Some(1), "{}", printed.text);
    assert!(
        printed.text.contains("weir: claude failed: API Error: 500"),
        "{}",
        printed.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_missing_from_path_is_a_clear_error() {
    let scene = Scene::new([]);
    let empty = scene.tmp.join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    let printed = run(scene.weir_agent("codex", &empty.to_string_lossy(), &["hi"]));
    assert_eq!(printed.code, Some(1), "{}", printed.text);
    assert!(
        printed.text.contains("weir: codex was not found")
            && printed.text.contains("npm install -g @openai/codex"),
        "{}",
        printed.text
    );
    assert!(scene.fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_the_agent() {
    let scene = Scene::new([Turn::text("a b c d e f g h i j").streamed(slow(10))]);
    let mut command = scene.weir_agent("claude", &path_with_clis(), &["letters"]);
    let (mut reader, writer) = std::io::pipe().unwrap();
    command.stdout(writer.try_clone().unwrap()).stderr(writer);
    let mut child = command.spawn().unwrap();
    drop(command);
    let mut first = [0u8; 1];
    reader.read_exact(&mut first).unwrap();
    // The first delta is out: Ctrl-C.
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let mut text = first.to_vec();
    reader.read_to_end(&mut text).unwrap();
    let text = String::from_utf8_lossy(&text);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{text}");
    assert!(text.contains("weir: interrupting claude"), "{text}");
    assert!(
        !text.contains("a b c d e f g h i j"),
        "not interrupted: {text}"
    );
}
