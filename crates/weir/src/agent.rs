//! `weir agent`: run a coding-agent CLI (Claude Code, Codex, the Gemini
//! CLI) on a prompt through weir-agents and show what it does as it does
//! it: its text on stdout as it is typed, tool calls and their outcomes as
//! one line each on stderr, a summary line at the end. Ctrl-C interrupts
//! the agent (Claude Code's turn, by its control protocol; any other CLI's
//! process group, by SIGTERM); a second Ctrl-C kills it.
//!
//! The CLI runs with the user's own environment, so it uses the accounts
//! and config the user has set up, or whatever endpoint its variables
//! point at (docs/critique.md, "Running a coding agent").

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use weir_agents::{AgentError, AgentEvent, AgentOptions, AgentResult, CliKind, Exit, Transport};

use crate::cli::{AgentArgs, AgentCli, OutputFormat};
use crate::exit::Outcome;

/// The longest tool line on stderr.
const LINE: usize = 120;

pub(crate) async fn run(args: AgentArgs) -> anyhow::Result<Outcome> {
    let cli = match args.cli {
        AgentCli::Claude => CliKind::Claude,
        AgentCli::Codex => CliKind::Codex,
        AgentCli::Gemini => CliKind::Gemini,
    };
    let mut options = AgentOptions::new(cli, args.prompt);
    options.model = args.model;
    options.program = args.program;
    options.resume = args.resume;
    if let Some(cwd) = args.cwd {
        options.cwd = cwd;
    }
    options.timeout = match args.timeout {
        Some(seconds) => Some(
            Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|t| !t.is_zero())
                .context("--timeout must be a positive number of seconds")?,
        ),
        None => None,
    };
    if matches!(options.cli, CliKind::Claude) {
        // So that Ctrl-C stops the turn by protocol, and the agent reports
        // how far it got, rather than dying mid-sentence.
        options.transport = Transport::Control;
    }
    let name = options.cli.name().to_owned();
    // Registered before the agent starts, so a Ctrl-C is never the default kill.
    let mut interrupts = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    let mut session = match weir_agents::start(options).await {
        Ok(session) => session,
        Err(error @ AgentError::NotFound { .. }) => anyhow::bail!("{error}"),
        Err(error) => return Err(error).with_context(|| format!("cannot start {name}")),
    };

    let mut show = Show {
        json: args.output == OutputFormat::Jsonl,
        at_line_start: true,
    };
    let mut interrupted = false;
    loop {
        tokio::select! {
            event = session.next() => match event {
                Some(event) => show.event(&event)?,
                None => break,
            },
            _ = interrupts.recv() => {
                show.end_line();
                if interrupted {
                    eprintln!("weir: interrupted twice: killing {name}");
                    session.kill().await;
                    return Ok(Outcome::Canceled);
                }
                interrupted = true;
                eprintln!("weir: interrupting {name}… (Ctrl-C again to kill it)");
                session.interrupt().await;
            }
        }
    }
    show.end_line();
    let ending = session.finish().await;
    Ok(outcome(
        &name,
        ending.result.as_ref(),
        ending.exit,
        interrupted,
    ))
}

/// How the command ends: the agent's result decides, else its exit.
fn outcome(
    name: &str,
    result: Option<&AgentResult>,
    exit: Option<Exit>,
    interrupted: bool,
) -> Outcome {
    if interrupted {
        return Outcome::Canceled;
    }
    match result {
        Some(result) if !result.is_error => return Outcome::Completed,
        Some(result) => {
            let why = result.text.as_deref().or(result.subtype.as_deref());
            eprintln!(
                "weir: {name} failed{}",
                why.map_or(String::new(), |why| format!(": {}", first_line(why)))
            );
            return Outcome::Failed;
        }
        None => {}
    }
    let Exit {
        code,
        signal,
        stderr_tail: stderr,
    } = exit.unwrap_or_default();
    let how = match (code, signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended".to_owned(),
    };
    let last = stderr.lines().rev().find(|line| !line.trim().is_empty());
    eprintln!(
        "weir: {name} {how} without a result{}",
        last.map_or(String::new(), |line| format!("; its last words: {line}"))
    );
    Outcome::Failed
}

/// Writes events for a person (text on stdout, the rest on stderr) or as
/// JSON lines on stdout.
struct Show {
    json: bool,
    /// Whether stdout ends with a newline, so a stderr line can follow.
    at_line_start: bool,
}

impl Show {
    fn event(&mut self, event: &AgentEvent) -> anyhow::Result<()> {
        if self.json {
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer(&mut stdout, event)?;
            stdout.write_all(b"\n")?;
            stdout.flush()?;
            return Ok(());
        }
        match event {
            AgentEvent::TextDelta { text } => {
                if text.is_empty() {
                    return Ok(());
                }
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(text.as_bytes())?;
                // Each delta as it comes: that is the point.
                stdout.flush()?;
                self.at_line_start = text.ends_with('\n');
            }
            AgentEvent::ToolUse { name, input, .. } => {
                self.end_line();
                let input = match input.as_object().and_then(|object| {
                    ["command", "cmd", "file_path", "path", "pattern", "url"]
                        .iter()
                        .find_map(|key| object.get(*key)?.as_str())
                }) {
                    Some(main) => main.to_owned(),
                    None => input.to_string(),
                };
                eprintln!("{}", clip(&format!("> {name} {input}")));
            }
            AgentEvent::ToolResult {
                is_error: true,
                content,
                ..
            } => {
                self.end_line();
                eprintln!("{}", clip(&format!("  ! {}", first_line(content))));
            }
            AgentEvent::PermissionRequest {
                tool_name,
                allowed: false,
                ..
            } => {
                self.end_line();
                eprintln!("  ! {tool_name} was not allowed");
            }
            AgentEvent::Error { message } => {
                self.end_line();
                eprintln!("{}", clip(&format!("  ! {}", first_line(message))));
            }
            AgentEvent::Result(result) => {
                self.end_line();
                eprintln!("{}", summary(result));
            }
            _ => {}
        }
        Ok(())
    }

    /// Ends stdout's line, so that what follows on stderr starts a line.
    fn end_line(&mut self) {
        if !self.json && !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }
}

/// `[done in 1.2 s, 11 tokens in, 7 out, $0.0002]`.
fn summary(result: &AgentResult) -> String {
    let mut parts = Vec::new();
    if let Some(ms) = result.duration_ms {
        parts.push(format!("{:.1} s", ms as f64 / 1000.0));
    }
    if let Some(usage) = result.usage {
        parts.push(format!(
            "{} tokens in, {} out",
            usage.input_tokens, usage.output_tokens
        ));
    }
    if let Some(cost) = result.cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    let word = if result.is_error { "failed" } else { "done" };
    if parts.is_empty() {
        format!("[{word}]")
    } else {
        format!("[{word}: {}]", parts.join(", "))
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
}

/// `line` cut to [`LINE`] characters.
fn clip(line: &str) -> String {
    match line.char_indices().nth(LINE) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
