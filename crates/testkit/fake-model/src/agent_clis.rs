//! Running the real coding-agent CLIs against a [`FakeModel`] in a test:
//! where the pinned CLIs are, pointing each at the fake ([`point_at`]), and
//! running one to its end with its whole process group killed afterwards.
//! The environment and the process group are weir-agents' (the drivers
//! weir runs the CLIs with), so tests run them as weir does.
//! Shared by this crate's own CLI tests and by weir's tests of the CLIs as
//! MCP hosts, so that both run them the same way.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use weir_agents::{PrivateHome, ProcessGroup};

use crate::FakeModel;

/// The directory holding `claude`, `codex` and `gemini`: what
/// `scripts/agent-clis` prints, which installs the pinned CLIs once per
/// machine. Panics, saying why, when they cannot be installed: tests that
/// need them fail rather than skip.
pub fn installed() -> &'static Path {
    static CLIS: OnceLock<PathBuf> = OnceLock::new();
    CLIS.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../scripts/agent-clis");
        let output = std::process::Command::new(&script)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", script.display()));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "scripts/agent-clis could not install the pinned coding-agent CLIs ({}); these tests \
             need them (npm and the npm registry). Its output:\n{stderr}",
            output.status
        );
        let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        for cli in ["claude", "codex", "gemini"] {
            assert!(
                dir.join(cli).is_file(),
                "scripts/agent-clis printed {}, which holds no {cli}:\n{stderr}",
                dir.display()
            );
        }
        dir
    })
}

/// `cli` (`claude`, `codex` or `gemini`) as weir-agents runs every CLI
/// in a private home ([`weir_agents::base_command`]): nothing of the
/// test's environment but `PATH`; `HOME` and `TMPDIR` private; updates,
/// telemetry and non-essential traffic off; run in `work` with stdin
/// `/dev/null`, leading a process group of its own.
pub fn command(cli: &str, home: &Path, tmp: &Path, work: &Path) -> tokio::process::Command {
    let private = PrivateHome {
        home: home.to_owned(),
        tmp: tmp.to_owned(),
    };
    weir_agents::base_command(&installed().join(cli), Some(&private), work)
}

/// Points `cli` (`claude`, `codex` or `gemini`) at `fake`, fully offline:
/// writes the config files it needs into `home` and returns the
/// environment variables to add. What each needs:
///
/// - claude: the base URL and a dummy key; retries off (a failed request
///   would take the next scripted turn); non-essential traffic off (else
///   it looks up its own API host); `CLAUDE_CODE_TMPDIR` (it ignores
///   `TMPDIR`).
/// - codex: a `config.toml` in `CODEX_HOME` (`home/.codex`) naming a
///   provider on the fake with the Responses wire API, a model of codex's
///   own catalog, retries, plugins and analytics off (else it reaches out
///   to the network), approvals never asked.
/// - gemini: the base URL, a dummy key, the workspace trusted, and
///   `~/.gemini/settings.json` selecting API-key auth (with only the
///   variable set, the auth type would be "gateway", which headless runs
///   reject: exit 41).
///
/// # Panics
///
/// When a config file cannot be written, or `cli` is none of the three.
pub fn point_at(cli: &str, fake: &FakeModel, home: &Path, tmp: &Path) -> Vec<(String, String)> {
    let pairs = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect::<Vec<_>>()
    };
    let write = |path: PathBuf, text: String| {
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))
            .and_then(|()| std::fs::write(&path, text))
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
    };
    let url = fake.url();
    match cli {
        "claude" => pairs(&[
            ("ANTHROPIC_BASE_URL", url),
            ("ANTHROPIC_API_KEY", "dummy"),
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("CLAUDE_CODE_TMPDIR", &tmp.to_string_lossy()),
        ]),
        "codex" => {
            // Not under TMPDIR: codex refuses to put its sandbox helper
            // under the temporary directory, and every sandboxed command
            // then fails.
            let codex_home = home.join(".codex");
            write(codex_home.join("config.toml"), codex_config(url));
            pairs(&[
                ("CODEX_HOME", &codex_home.to_string_lossy()),
                ("FAKE_API_KEY", "dummy"),
            ])
        }
        "gemini" => {
            write(
                home.join(".gemini/settings.json"),
                serde_json::json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                })
                .to_string(),
            );
            pairs(&[
                ("GOOGLE_GEMINI_BASE_URL", url),
                ("GEMINI_API_KEY", "dummy"),
                ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ])
        }
        other => panic!("no offline recipe for the CLI {other:?}: claude, codex or gemini"),
    }
}

/// Codex's config for a provider on the fake at `url`.
fn codex_config(url: &str) -> String {
    format!(
        r#"model = "gpt-5.5"                # a slug of codex's own catalog, else it warns
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.fake]
name = "weir-fake-model"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000

[features]
plugins = false                  # else a plugin sync reaches out to the network

[analytics]
enabled = false
"#
    )
}

/// What a CLI printed: stdout's lines, each parsed as JSON, and stderr.
#[derive(Debug)]
pub struct CliRun {
    /// stdout, one JSON value per non-empty line.
    pub lines: Vec<Value>,
    /// stderr, as text.
    pub stderr: String,
}

/// The lines whose `type` is `kind`.
pub fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|line| line["type"] == kind).collect()
}

/// Runs `command` (made by [`command`]) to its end, at most two minutes,
/// asserts it succeeded and parses its stdout as NDJSON; `what` names it in
/// failures, which also list the requests `fake` saw.
pub async fn run_to_end(
    mut command: tokio::process::Command,
    what: &str,
    fake: &FakeModel,
) -> CliRun {
    let started = Instant::now();
    let child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {what}: {error}"));
    let _group = ProcessGroup::new(child.id().expect("a running child"));
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{what} did not finish in 120 s; the fake had these requests: {:#?}",
                fake.requests()
            )
        })
        .unwrap_or_else(|error| panic!("cannot wait for {what}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    eprintln!("{what}: {:?} wall time", started.elapsed());
    assert!(
        output.status.success(),
        "{what} failed ({}).\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let lines = stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!(
                    "{what} printed a line that is not JSON ({error}): {line}\nstderr:\n{stderr}"
                )
            })
        })
        .collect();
    CliRun { lines, stderr }
}
