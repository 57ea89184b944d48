//! The command line and environment of a CLI, and the router between
//! Claude Code's two modes.

use std::path::Path;
use std::process::Stdio;

use crate::{AgentError, AgentOptions, CliKind, PrivateHome, Transport};

/// How a session talks to its CLI, as the router chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The prompt on the command line, stdin `/dev/null`, one turn.
    Light,
    /// Claude Code's stream-json input: the control protocol on stdin.
    Control,
}

/// Turned off for every CLI: update checks and self-updates, which reach
/// out to the network and could replace the program mid-run.
const QUIET: &[(&str, &str)] = &[("NO_UPDATE_NOTIFIER", "1"), ("DISABLE_AUTOUPDATER", "1")];

/// Also turned off in a private home: telemetry, error reports and Claude
/// Code's non-essential traffic, so that a CLI pointed at a local endpoint
/// talks to nothing else.
const PRIVATE: &[(&str, &str)] = &[
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("CI", "1"),
    ("DO_NOT_TRACK", "1"),
];

/// `program` as every CLI is run: in `cwd`, leading a process group of its
/// own (see [`ProcessGroup`](crate::ProcessGroup)), stdin `/dev/null` (an
/// open pipe makes Claude Code wait 3 s and codex wait for its end),
/// stdout and stderr piped, update checks off. With a `private` home the
/// environment is cleared but `PATH`, `HOME` and `TMPDIR` (and Claude
/// Code's `CLAUDE_CODE_TMPDIR`, since it ignores `TMPDIR`) point into it,
/// and telemetry and non-essential traffic are off too.
pub fn base_command(
    program: &Path,
    private: Option<&PrivateHome>,
    cwd: &Path,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    if let Some(private) = private {
        command
            .env_clear()
            // The Gemini CLI is a Node script (`#!/usr/bin/env node`), and
            // the agents' shell tools need the usual commands.
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &private.home)
            .env("TMPDIR", &private.tmp)
            .env("CLAUDE_CODE_TMPDIR", &private.tmp)
            .envs(PRIVATE.iter().copied());
    }
    command
        .envs(QUIET.iter().copied())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command
}

/// What `cli` needs to run without a person at a terminal, set before
/// the caller's own variables (which may change it). The Gemini CLI
/// refuses to run headless in a folder it has not been told to trust
/// (exit 55, "not running in a trusted directory"); the folder an agent
/// works in is the caller's choice (weir's roots), so it is trusted.
pub(crate) fn headless_env(cli: &CliKind) -> &'static [(&'static str, &'static str)] {
    match cli {
        CliKind::Gemini => &[("GEMINI_CLI_TRUST_WORKSPACE", "true")],
        CliKind::Claude | CliKind::Codex | CliKind::Custom { .. } => &[],
    }
}

/// The router: control mode when the options need Claude Code's control
/// protocol (a permission policy, several turns, in-process MCP servers,
/// hooks) or ask for it, else light. Other CLIs have light mode only.
pub(crate) fn route(options: &AgentOptions) -> Result<Mode, AgentError> {
    let needs_control = options.permission.is_some()
        || options.multi_turn
        || !options.mcp_servers.is_empty()
        || !options.hooks.is_empty();
    let mode = match options.transport {
        Transport::Control => Mode::Control,
        Transport::Light if needs_control => {
            return Err(AgentError::Unsupported {
                cli: options.cli.name().to_owned(),
                what: "answer permission requests, serve in-process MCP servers or hooks, or take several turns in light mode",
                hint: "use Transport::Auto or Transport::Control",
            });
        }
        Transport::Light => Mode::Light,
        Transport::Auto if needs_control => Mode::Control,
        Transport::Auto => Mode::Light,
    };
    if mode == Mode::Control && !matches!(options.cli, CliKind::Claude) {
        return Err(AgentError::Unsupported {
            cli: options.cli.name().to_owned(),
            what: "run in control mode (permission policies, in-process MCP servers, hooks, several turns, interrupts by protocol)",
            hint: "only Claude Code has a control protocol; run it in light mode",
        });
    }
    if options.resume.is_some() && matches!(options.cli, CliKind::Gemini | CliKind::Custom { .. }) {
        return Err(AgentError::Unsupported {
            cli: options.cli.name().to_owned(),
            what: "resume a session",
            hint: "resuming is supported for claude and codex",
        });
    }
    let names = sdk_server_names(options);
    if names
        .iter()
        .enumerate()
        .any(|(index, name)| names[..index].contains(name))
    {
        return Err(AgentError::Unsupported {
            cli: options.cli.name().to_owned(),
            what: "serve two in-process MCP servers of one name",
            hint: "give each server its own name (the model sees its tools as mcp__NAME__TOOL)",
        });
    }
    Ok(mode)
}

/// The in-process MCP servers' names, in order.
pub(crate) fn sdk_server_names(options: &AgentOptions) -> Vec<String> {
    options
        .mcp_servers
        .iter()
        .map(|server| server.name().to_owned())
        .collect()
}

/// What to write to the CLI's stdin, then close it, in light mode: codex's
/// prompt (its argument `-`). `None`: stdin is `/dev/null` (or, in
/// control mode, the protocol).
pub(crate) fn stdin_prompt(options: &AgentOptions, mode: Mode) -> Option<&str> {
    match (&options.cli, mode) {
        (CliKind::Codex, Mode::Light) => Some(&options.prompt),
        _ => None,
    }
}

/// The CLI's arguments for `mode`. No caller text stands where the CLI
/// reads flags: the prompt goes after `--`, on stdin or glued to its flag
/// (see [`crate::argv`]), and a model or session id has been checked by
/// [`crate::argv::check`].
pub(crate) fn args(options: &AgentOptions, mode: Mode) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(|item| (*item).to_owned()));
    match &options.cli {
        CliKind::Claude => {
            push(&["-p"]);
            if mode == Mode::Control {
                push(&["--input-format", "stream-json"]);
            }
            push(&["--output-format", "stream-json", "--verbose"]);
            if options.include_partial {
                push(&["--include-partial-messages"]);
            }
            if options.permission.is_some() {
                push(&["--permission-prompt-tool", "stdio"]);
            }
            if let Some(model) = &options.model {
                push(&["--model", model]);
            }
            if !options.mcp_servers.is_empty() {
                let config = crate::control::mcp_config(&sdk_server_names(options));
                push(&["--mcp-config", &config]);
            }
            if let Some(session) = &options.resume {
                push(&["--resume", session]);
            }
            args.extend(options.args.iter().cloned());
            if mode == Mode::Light {
                // After `--`, the prompt is text even when it reads
                // `--version`; in control mode it goes on stdin.
                args.extend(["--".to_owned(), options.prompt.clone()]);
            }
        }
        CliKind::Codex => {
            // Outside a git repository codex refuses to run without it.
            push(&["exec", "--json", "--skip-git-repo-check"]);
            if let Some(model) = &options.model {
                push(&["-m", model]);
            }
            args.extend(options.args.iter().cloned());
            if let Some(thread) = &options.resume {
                args.extend(["resume".to_owned(), thread.clone()]);
            }
            // The prompt on stdin (see `stdin_prompt`): after `--` codex
            // would still read a prompt `-` as "read stdin".
            args.push("-".to_owned());
        }
        CliKind::Gemini => {
            // One argument: its parser cannot take the text for a flag,
            // and ignores a prompt after `--`.
            let prompt = format!("--prompt={}", options.prompt);
            push(&[&prompt, "--output-format", "stream-json"]);
            if let Some(model) = &options.model {
                push(&["-m", model]);
            }
            args.extend(options.args.iter().cloned());
        }
        CliKind::Custom { .. } => args.extend(options.args.iter().cloned()),
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(cli: CliKind, prompt: &str) -> AgentOptions {
        let mut options = AgentOptions::new(cli, prompt);
        options.model = Some("m-1".into());
        options
    }

    /// The prompt stands after `--`, on stdin, or glued to `--prompt=`:
    /// nowhere a parser reads flags.
    #[test]
    fn a_prompt_never_stands_where_flags_are_read() {
        let flag = "--dangerously-bypass-approvals-and-sandbox";
        let claude = args(&options(CliKind::Claude, flag), Mode::Light);
        assert_eq!(claude[claude.len() - 2..], ["--", flag]);
        assert_eq!(claude.iter().filter(|arg| *arg == flag).count(), 1);
        let control = args(&options(CliKind::Claude, flag), Mode::Control);
        assert!(!control.iter().any(|arg| arg.contains(flag)), "{control:?}");

        let codex = options(CliKind::Codex, flag);
        let codex_args = args(&codex, Mode::Light);
        assert_eq!(codex_args.last().map(String::as_str), Some("-"));
        assert!(
            !codex_args.iter().any(|arg| arg.contains(flag)),
            "{codex_args:?}"
        );
        assert_eq!(stdin_prompt(&codex, Mode::Light), Some(flag));

        let gemini = args(&options(CliKind::Gemini, flag), Mode::Light);
        assert_eq!(gemini[0], format!("--prompt={flag}"));
        assert!(!gemini.iter().any(|arg| arg == flag), "{gemini:?}");
        assert_eq!(
            stdin_prompt(&options(CliKind::Gemini, flag), Mode::Light),
            None
        );
    }

    #[test]
    fn a_flag_shaped_model_or_session_is_refused() {
        let mut bad = options(CliKind::Gemini, "hi");
        bad.model = Some("--yolo".into());
        let error = crate::argv::check(&bad).unwrap_err().to_string();
        assert!(
            error.contains("model \"--yolo\" is not accepted"),
            "{error}"
        );
        let mut bad = options(CliKind::Claude, "hi");
        bad.resume = Some("-x".into());
        assert!(crate::argv::check(&bad).is_err());
        let nul = options(CliKind::Claude, "a\0b");
        assert!(crate::argv::check(&nul).is_err());
        let mut fine = options(CliKind::Codex, "--version");
        fine.resume = Some("0199a213-81c0-7800-8aa1-bbab2a035a53".into());
        assert!(crate::argv::check(&fine).is_ok());
    }
}
