//! Running the real coding-agent CLIs against a [`FakeModel`] in a test:
//! where the pinned CLIs are, the environment every one of them gets, and
//! running one to its end with its whole process group killed afterwards.
//! Shared by this crate's own CLI tests and by weir's tests of the CLIs as
//! MCP hosts, so that both run them the same way.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

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

/// `cli` (`claude`, `codex` or `gemini`) with the environment every CLI
/// gets — nothing of the test's but `PATH`; a private `HOME` and `TMPDIR`;
/// updates, telemetry and non-essential traffic off — run in `work` with
/// stdin `/dev/null`, leading a process group of its own.
pub fn command(cli: &str, home: &Path, tmp: &Path, work: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(installed().join(cli));
    command
        .env_clear()
        // The Gemini CLI is a Node script (`#!/usr/bin/env node`), and the
        // agents' shell tools (or an MCP server they start) need the usual
        // commands.
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", tmp)
        .envs([
            ("NO_UPDATE_NOTIFIER", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("CI", "1"),
            ("DO_NOT_TRACK", "1"),
        ])
        .current_dir(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command
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

/// Kills a whole process group when dropped: whatever a CLI started dies
/// with it, on success, failure or timeout alike.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        // Usually gone already (ESRCH): that is fine.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0)])
            .stderr(Stdio::null())
            .status();
    }
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
    let _group = Group(child.id().expect("a running child"));
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
