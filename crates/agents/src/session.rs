//! A running agent: the process, the task that reads and answers it, and
//! the handle the caller holds.

use std::os::unix::process::ExitStatusExt as _;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::command::{self, Mode};
use crate::control::{self, Incoming};
use crate::parse::Parser;
use crate::{
    AgentError, AgentEvent, AgentOptions, Decision, Ending, HomeMode, Hook, PermissionPolicy,
    PrivateHome, ProcessGroup, SdkMcpServer,
};

/// How long a terminated group has to exit before SIGKILL.
const GRACE: Duration = Duration::from_secs(2);
/// How long the pipes may stay open after the CLI exited (something it
/// started still holds them) before the group is killed.
const DRAIN: Duration = Duration::from_millis(500);
/// Events waiting for the caller; the CLI is read no further ahead.
const QUEUE: usize = 256;
/// The most of stderr kept for [`AgentEvent::Exited`].
const STDERR_TAIL: usize = 4096;

/// A running agent. Read its events with [`next`](Self::next) until it
/// returns `None` (after [`AgentEvent::Exited`]). Dropping it kills the
/// CLI's whole process group.
#[derive(Debug)]
pub struct AgentSession {
    events: mpsc::Receiver<AgentEvent>,
    commands: mpsc::UnboundedSender<Command>,
    mode: Mode,
    pgid: i32,
    /// The events passed on so far, folded.
    ending: Ending,
}

#[derive(Debug)]
enum Command {
    Interrupt,
    Send(String, oneshot::Sender<Result<(), AgentError>>),
    CloseInput,
    Terminate,
}

/// Starts the CLI `options` describe, in a process group of its own, and
/// returns at once: its output arrives through [`AgentSession::next`].
/// Claude Code runs in control mode when the options need it (the router:
/// see [`Transport`](crate::Transport)).
///
/// # Errors
///
/// [`AgentError::NotFound`] (naming the CLI and how to install it) when its
/// program is not there, [`AgentError::Unsupported`] when the options ask
/// what the CLI cannot do, [`AgentError::Spawn`] or [`AgentError::Setup`]
/// when it cannot be started. Everything after the start (an API error, a
/// crash) comes as events.
pub async fn start(options: AgentOptions) -> Result<AgentSession, AgentError> {
    let mode = command::route(&options)?;
    crate::argv::check(&options)?;
    let (private, temp) = match &options.home {
        HomeMode::User => (None, None),
        HomeMode::Private(private) => (Some(private.clone()), None),
        HomeMode::Temp => {
            let (private, temp) = temp_home()?;
            (Some(private), Some(temp))
        }
    };
    let path = options
        .env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.into())
        .or_else(|| std::env::var_os("PATH"));
    let program = crate::find::program(&options.cli, options.program.as_deref(), path.as_deref())?;
    if !options.cwd.is_dir() {
        return Err(AgentError::Setup {
            what: "working directory",
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is not a directory", options.cwd.display()),
            ),
        });
    }

    let mut command = command::base_command(&program, private.as_ref(), &options.cwd);
    command
        .envs(command::headless_env(&options.cli).iter().copied())
        .args(command::args(&options, mode))
        .envs(options.env.iter().map(|(k, v)| (k, v)));
    // Pipes read by threads (weir-proc): lines arrive as they are written.
    let setup = |source| AgentError::Setup {
        what: "output pipes",
        source,
    };
    let (stdout, stdout_writer) = std::io::pipe().map_err(setup)?;
    let (stderr, stderr_writer) = std::io::pipe().map_err(setup)?;
    command.stdout(stdout_writer).stderr(stderr_writer);
    let stdin_prompt = command::stdin_prompt(&options, mode);
    if mode == Mode::Control || stdin_prompt.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().map_err(|source| AgentError::Spawn {
        program: program.clone(),
        source,
    })?;
    // Its copies of the pipes' write ends: the reader sees the end only
    // when every one is closed.
    drop(command);
    let group = ProcessGroup::new(child.id().unwrap_or_default());
    let pgid = group.id();
    let (chunks_sender, chunks) = mpsc::channel(64);
    weir_proc::read_pipe(stdout, Pipe::Stdout, chunks_sender.clone()).map_err(setup)?;
    weir_proc::read_pipe(stderr, Pipe::Stderr, chunks_sender).map_err(setup)?;

    let (events_sender, events) = mpsc::channel(QUEUE);
    let (commands, commands_receiver) = mpsc::unbounded_channel();
    let (answers_sender, answers) = mpsc::unbounded_channel();
    let mut stdin = child.stdin.take();
    if let (Some(prompt), Some(mut input)) = (stdin_prompt, stdin.take_if(|_| mode == Mode::Light))
    {
        // Written by a task of its own (a prompt larger than the pipe waits
        // for the CLI to read it), then closed so the CLI sees its end. A
        // CLI that exits first makes the write fail, which ends the task.
        let prompt = prompt.to_owned();
        tokio::spawn(async move {
            let _ = input.write_all(prompt.as_bytes()).await;
            let _ = input.shutdown().await;
        });
    }
    let mut driver = Driver {
        parser: Parser::new(&options.cli, options.include_partial, mode == Mode::Control),
        events: events_sender,
        stdin,
        policy: options.permission.clone(),
        mcp_servers: options.mcp_servers.clone(),
        hooks: options.hooks.clone(),
        multi_turn: options.multi_turn,
        answers_sender,
        handlers: tokio::task::JoinSet::new(),
        group,
        next_request: 1,
        stdout_line: Vec::new(),
        stderr_tail: Vec::new(),
        _temp: temp,
    };
    if mode == Mode::Control {
        let servers = command::sdk_server_names(&options);
        driver
            .write(control::initialize("init", &options.hooks, &servers))
            .await;
        driver.write(control::user_message(&options.prompt)).await;
    }
    let deadline = options.timeout.map(|timeout| Instant::now() + timeout);
    tokio::spawn(driver.run(child, chunks, commands_receiver, answers, deadline));
    Ok(AgentSession {
        events,
        commands,
        mode,
        pgid,
        ending: Ending::default(),
    })
}

/// A fresh private home: `home/` and `tmp/` side by side in a temporary
/// directory (so codex's home is not under the temporary directory).
fn temp_home() -> Result<(PrivateHome, tempfile::TempDir), AgentError> {
    let setup = |source| AgentError::Setup {
        what: "temporary home",
        source,
    };
    let temp = tempfile::Builder::new()
        .prefix("weir-agent-")
        .tempdir()
        .map_err(setup)?;
    let private = PrivateHome {
        home: temp.path().join("home"),
        tmp: temp.path().join("tmp"),
    };
    std::fs::create_dir(&private.home).map_err(setup)?;
    std::fs::create_dir(&private.tmp).map_err(setup)?;
    Ok((private, temp))
}

impl AgentSession {
    /// The next event, or `None` once the session has ended (after
    /// [`AgentEvent::Exited`]). Cancel-safe: a dropped call loses nothing.
    pub async fn next(&mut self) -> Option<AgentEvent> {
        let event = self.events.recv().await?;
        self.ending.observe(&event);
        Some(event)
    }

    /// How the session ended: reads (and drops) the events not read yet,
    /// to the last, and returns them all folded with those
    /// [`next`](Self::next) passed on.
    pub async fn finish(mut self) -> Ending {
        while self.next().await.is_some() {}
        std::mem::take(&mut self.ending)
    }

    /// How the session talks to its CLI.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The CLI's process group (its pid).
    pub fn process_group(&self) -> i32 {
        self.pgid
    }

    /// Stops the agent's work: in control mode Claude Code is asked to stop
    /// the turn (it ends with an error result, and the session stays
    /// usable for another turn with [`send`](Self::send)); otherwise the
    /// process group is terminated (SIGTERM, SIGKILL after a grace period)
    /// and the session ends. Returns at once; the events tell the rest.
    pub async fn interrupt(&mut self) {
        let _ = self.commands.send(Command::Interrupt);
    }

    /// Another turn's prompt (control mode with
    /// [`multi_turn`](AgentOptions::multi_turn)): send it after the
    /// previous turn's [`AgentEvent::Result`].
    ///
    /// # Errors
    ///
    /// [`AgentError::Unsupported`] in light mode, [`AgentError::Ended`] when
    /// the session's input is closed.
    pub async fn send(&mut self, prompt: impl Into<String>) -> Result<(), AgentError> {
        if self.mode == Mode::Light {
            return Err(AgentError::Unsupported {
                cli: "this session".into(),
                what: "take another turn in light mode",
                hint: "start it with multi_turn (control mode, Claude Code)",
            });
        }
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Send(prompt.into(), reply))
            .map_err(|_| AgentError::Ended)?;
        answer.await.unwrap_or(Err(AgentError::Ended))
    }

    /// Closes the CLI's input (control mode): it finishes the turn in
    /// progress and exits.
    pub async fn close(&mut self) {
        let _ = self.commands.send(Command::CloseInput);
    }

    /// Ends the CLI: SIGTERM to its group, SIGKILL to what is left after a
    /// grace period; returns once the process has exited and nothing of
    /// its group is left.
    pub async fn kill(mut self) {
        let _ = self.commands.send(Command::Terminate);
        while self.events.recv().await.is_some() {}
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pipe {
    Stdout,
    Stderr,
}

/// The task that owns the process: reads its pipes, parses, answers the
/// control protocol, and ends the group.
struct Driver {
    parser: Parser,
    events: mpsc::Sender<AgentEvent>,
    stdin: Option<ChildStdin>,
    policy: Option<Arc<dyn PermissionPolicy>>,
    mcp_servers: Vec<Arc<dyn SdkMcpServer>>,
    hooks: Vec<Hook>,
    multi_turn: bool,
    answers_sender: mpsc::UnboundedSender<Answer>,
    /// The handlers still running: dropped with the driver, which aborts
    /// them, so no tool call outlives its session.
    handlers: tokio::task::JoinSet<()>,
    group: ProcessGroup,
    next_request: u64,
    stdout_line: Vec<u8>,
    stderr_tail: Vec<u8>,
    _temp: Option<tempfile::TempDir>,
}

/// Why the driver stops early.
struct CallerGone;

/// A control request answered by a task of its own (a policy, a server or
/// a hook may take long): the line to write, then the event to report.
struct Answer {
    line: String,
    event: Option<AgentEvent>,
}

impl Driver {
    async fn run(
        mut self,
        mut child: Child,
        mut chunks: mpsc::Receiver<weir_proc::Chunk<Pipe>>,
        mut commands: mpsc::UnboundedReceiver<Command>,
        mut answers: mpsc::UnboundedReceiver<Answer>,
        deadline: Option<Instant>,
    ) {
        let mut status: Option<ExitStatus> = None;
        let mut open_pipes = 2;
        // When the group gets SIGKILL: after a terminate's grace, or once
        // the CLI exited and its pipes did not close.
        let mut kill_at: Option<Instant> = None;
        let mut timed_out = false;
        let far = Instant::now() + Duration::from_secs(86_400 * 365);
        while open_pipes > 0 || status.is_none() {
            tokio::select! {
                chunk = chunks.recv(), if open_pipes > 0 => match chunk {
                    Some((pipe, Some(bytes))) => {
                        if self.output(pipe, &bytes).await.is_err() {
                            return;
                        }
                    }
                    Some((pipe, None)) => {
                        open_pipes -= 1;
                        if pipe == Pipe::Stdout && !self.stdout_line.is_empty() {
                            let rest = std::mem::take(&mut self.stdout_line);
                            if self.line(&rest).await.is_err() {
                                return;
                            }
                        }
                    }
                    None => open_pipes = 0,
                },
                exit = child.wait(), if status.is_none() => {
                    status = Some(exit.unwrap_or_else(|_| ExitStatus::from_raw(0)));
                    self.stdin = None;
                    if open_pipes > 0 {
                        kill_at = Some(kill_at.map_or(Instant::now() + DRAIN, |at| at.min(Instant::now() + DRAIN)));
                    }
                }
                command = commands.recv() => match command {
                    Some(Command::Interrupt) => {
                        if self.stdin.is_some() {
                            let id = self.request_id();
                            self.write(control::interrupt(&id)).await;
                        } else {
                            self.terminate(&mut kill_at);
                        }
                    }
                    Some(Command::Send(prompt, reply)) => {
                        let sent = if self.stdin.is_some() {
                            self.write(control::user_message(&prompt)).await;
                            Ok(())
                        } else {
                            Err(AgentError::Ended)
                        };
                        let _ = reply.send(sent);
                    }
                    Some(Command::CloseInput) => self.stdin = None,
                    // The caller dropped the session.
                    Some(Command::Terminate) | None => self.terminate(&mut kill_at),
                },
                Some(answer) = answers.recv() => {
                    self.write(answer.line).await;
                    if let Some(event) = answer.event
                        && self.send(event).await.is_err()
                    {
                        return;
                    }
                }
                () = tokio::time::sleep_until(kill_at.unwrap_or(far)), if kill_at.is_some() => {
                    self.group.kill();
                    kill_at = None;
                }
                () = tokio::time::sleep_until(deadline.unwrap_or(far)), if deadline.is_some() && !timed_out => {
                    timed_out = true;
                    let message = "the agent ran past its time limit and was stopped".to_owned();
                    if self.send(AgentEvent::Error { message }).await.is_err() {
                        return;
                    }
                    self.terminate(&mut kill_at);
                }
                () = self.events.closed() => return,
            }
        }
        // Whatever the CLI left running in its group goes with it, before
        // the caller hears that the session ended.
        self.group.kill_and_wait(GRACE).await;
        let status = status.unwrap_or_else(|| ExitStatus::from_raw(0));
        let _ = self
            .events
            .send(AgentEvent::Exited {
                code: status.code(),
                signal: status.signal(),
                stderr_tail: crate::event::plain_text(&String::from_utf8_lossy(&self.stderr_tail)),
            })
            .await;
    }

    /// SIGTERM to the group now, SIGKILL after the grace period.
    fn terminate(&mut self, kill_at: &mut Option<Instant>) {
        self.stdin = None;
        if kill_at.is_none() {
            weir_proc::signal_group(self.group.id(), weir_proc::Signal::TERM);
            *kill_at = Some(Instant::now() + GRACE);
        }
    }

    async fn output(&mut self, pipe: Pipe, bytes: &[u8]) -> Result<(), CallerGone> {
        if pipe == Pipe::Stderr {
            self.stderr_tail.extend_from_slice(bytes);
            let excess = self.stderr_tail.len().saturating_sub(STDERR_TAIL);
            self.stderr_tail.drain(..excess);
            return Ok(());
        }
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let line = if self.stdout_line.is_empty() {
                rest[..end].to_vec()
            } else {
                let mut line = std::mem::take(&mut self.stdout_line);
                line.extend_from_slice(&rest[..end]);
                line
            };
            self.line(&line).await?;
            rest = &rest[end + 1..];
        }
        self.stdout_line.extend_from_slice(rest);
        Ok(())
    }

    async fn line(&mut self, line: &[u8]) -> Result<(), CallerGone> {
        let line = String::from_utf8_lossy(line);
        if self.stdin.is_some()
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
            && let Some(incoming) = control::incoming(&value)
        {
            return self.control(incoming).await;
        }
        for event in self.parser.line(&line) {
            let ends_turn = matches!(event, AgentEvent::Result(_));
            self.send(event).await?;
            if ends_turn && !self.multi_turn {
                // One turn asked for: closing its input lets the CLI exit.
                self.stdin = None;
            }
        }
        Ok(())
    }

    async fn control(&mut self, incoming: Incoming) -> Result<(), CallerGone> {
        match incoming {
            Incoming::CanUseTool {
                request_id,
                permission,
            } => {
                let policy = self.policy.clone();
                // Each handler may wait (a policy asking a person, a tool
                // call, a hook): the driver goes on reading meanwhile.
                self.answer(async move {
                    let decision = match policy {
                        Some(policy) => policy.decide(&permission).await,
                        None => Decision::Deny {
                            message: "no permission policy was given".into(),
                        },
                    };
                    Answer {
                        line: control::permission(&request_id, &decision, &permission),
                        event: Some(AgentEvent::PermissionRequest {
                            allowed: matches!(decision, Decision::Allow { .. }),
                            tool_name: permission.tool_name,
                            input: permission.input,
                            tool_use_id: permission.tool_use_id,
                        }),
                    }
                });
            }
            Incoming::McpMessage {
                request_id,
                server_name,
                message,
            } => {
                let server = self
                    .mcp_servers
                    .iter()
                    .find(|server| server.name() == server_name)
                    .cloned();
                let Some(server) = server else {
                    let known: Vec<&str> = self.mcp_servers.iter().map(|s| s.name()).collect();
                    let error = format!(
                        "no in-process MCP server named {server_name:?} (this session has: {})",
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    );
                    self.write(control::refuse(&request_id, &error)).await;
                    return Ok(());
                };
                self.answer(async move {
                    let response = server.handle(message).await;
                    Answer {
                        line: control::mcp_response(&request_id, response),
                        event: None,
                    }
                });
            }
            Incoming::HookCallback {
                request_id,
                callback_id,
                call,
            } => {
                let hook = (0..self.hooks.len())
                    .find(|&index| control::hook_id(index) == callback_id)
                    .map(|index| self.hooks[index].callback.clone());
                let Some(callback) = hook else {
                    let error = format!(
                        "no hook callback {callback_id:?} (this session registered {})",
                        self.hooks.len()
                    );
                    self.write(control::refuse(&request_id, &error)).await;
                    return Ok(());
                };
                self.answer(async move {
                    let output = callback.call(&call).await;
                    Answer {
                        line: control::hook_output(&request_id, output.clone()),
                        event: Some(AgentEvent::HookCalled {
                            event: call.event,
                            input: call.input,
                            tool_use_id: call.tool_use_id,
                            output,
                        }),
                    }
                });
            }
            Incoming::Other {
                request_id,
                subtype,
            } => {
                let error = format!("weir-agents does not serve `{subtype}` requests");
                self.write(control::refuse(&request_id, &error)).await;
            }
            Incoming::Response {
                request_id,
                error: Some(error),
            } => {
                let message = format!("the CLI refused request {request_id}: {error}");
                self.send(AgentEvent::Error { message }).await?;
            }
            Incoming::Response { error: None, .. } | Incoming::Cancel => {}
        }
        Ok(())
    }

    /// Runs a handler in a task of its own; its answer comes back to the
    /// driver's loop, which writes it.
    fn answer(&mut self, handler: impl Future<Output = Answer> + Send + 'static) {
        while self.handlers.try_join_next().is_some() {}
        let answers = self.answers_sender.clone();
        self.handlers.spawn(async move {
            let _ = answers.send(handler.await);
        });
    }

    async fn send(&self, event: AgentEvent) -> Result<(), CallerGone> {
        let event = match event {
            AgentEvent::Error { message } => AgentEvent::Error {
                message: crate::event::plain_text(&message),
            },
            event => event,
        };
        self.events.send(event).await.map_err(|_| CallerGone)
    }

    /// Writes one control line; a CLI that stopped reading has exited, and
    /// its input is then closed.
    async fn write(&mut self, line: String) {
        let Some(stdin) = &mut self.stdin else {
            return;
        };
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            self.stdin = None;
        }
    }

    fn request_id(&mut self) -> String {
        self.next_request += 1;
        format!("req_{}", self.next_request)
    }
}
