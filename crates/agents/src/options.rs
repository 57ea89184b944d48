//! What to run and how: the CLI, its prompt and environment, and the
//! callbacks a session answers with.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::{AgentEvent, Hook, SdkMcpServer};

/// The names of the CLIs built in ([`CliKind::from_name`] knows them).
pub const BUILT_IN_CLIS: &[&str] = &["claude", "codex", "gemini"];

/// Which agent CLI to drive.
#[derive(Clone)]
pub enum CliKind {
    /// Claude Code (`claude`): stream-json, light or control mode.
    Claude,
    /// Codex (`codex exec --json -`, the prompt on stdin).
    Codex,
    /// Gemini CLI (`gemini --prompt=… --output-format stream-json`).
    Gemini,
    /// Any command: run as `program args…` (the prompt is not added: put it
    /// in `args`), each stdout line given to `parser`.
    Custom {
        /// Its name, for messages and for looking it up on `PATH` when
        /// [`AgentOptions::program`] is not set.
        name: String,
        /// Turns each line into events.
        parser: Arc<dyn LineParser>,
    },
}

impl CliKind {
    /// The CLI's name, which is also its program's name on `PATH`.
    pub fn name(&self) -> &str {
        match self {
            CliKind::Claude => "claude",
            CliKind::Codex => "codex",
            CliKind::Gemini => "gemini",
            CliKind::Custom { name, .. } => name,
        }
    }

    /// The CLI named `name` (`claude`, `codex` or `gemini`).
    pub fn from_name(name: &str) -> Option<CliKind> {
        match name {
            "claude" => Some(CliKind::Claude),
            "codex" => Some(CliKind::Codex),
            "gemini" => Some(CliKind::Gemini),
            _ => None,
        }
    }
}

impl fmt::Debug for CliKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Turns one line of a custom command's stdout into events. Any
/// `Fn(&str) -> Vec<AgentEvent>` is one.
pub trait LineParser: Send + Sync {
    /// The events of `line` (without its newline); none is fine.
    fn parse(&self, line: &str) -> Vec<AgentEvent>;
}

impl<F: Fn(&str) -> Vec<AgentEvent> + Send + Sync> LineParser for F {
    fn parse(&self, line: &str) -> Vec<AgentEvent> {
        self(line)
    }
}

/// Whose home directory, environment and credentials the CLI gets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HomeMode {
    /// The user's: this process's whole environment, so the CLI uses the
    /// accounts, keys and config the user has set up.
    #[default]
    User,
    /// A private one: the environment cleared but `PATH`, then `HOME`
    /// and `TMPDIR` from [`PrivateHome`], plus [`AgentOptions::env`]. For
    /// tests and for runs that must not see the user's files.
    Private(PrivateHome),
    /// Like [`Private`](Self::Private), in a fresh temporary directory
    /// removed when the session ends.
    Temp,
}

/// A private home directory and temporary directory, both existing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateHome {
    /// `HOME`.
    pub home: PathBuf,
    /// `TMPDIR` (and Claude Code's `CLAUDE_CODE_TMPDIR`). Not under
    /// `home/.codex`: codex refuses to put its sandbox helper under the
    /// temporary directory.
    pub tmp: PathBuf,
}

/// Which of Claude Code's two ways to talk the session uses. Other CLIs
/// have only the light one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// Control mode when the options need it (a permission policy,
    /// multi-turn, in-process MCP servers, hooks), else light: the router
    /// of [`start`](crate::start).
    #[default]
    Auto,
    /// `-p --output-format stream-json -- PROMPT`: one turn, stdin closed.
    Light,
    /// `--input-format stream-json`: the `initialize` handshake,
    /// `can_use_tool` answered by the policy, `mcp_message` by the
    /// in-process MCP servers, `hook_callback` by the hooks, `interrupt`,
    /// several turns on one process.
    Control,
}

/// A tool the CLI asks permission to run.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolPermission {
    /// The tool, e.g. `Bash`.
    pub tool_name: String,
    /// Its arguments.
    pub input: Value,
    /// The tool call's id.
    pub tool_use_id: Option<String>,
    /// The CLI's description of the call, if any.
    pub description: Option<String>,
}

/// An answer to a [`ToolPermission`].
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Run it, with these arguments instead when given.
    Allow {
        /// Changed arguments, or `None` to keep the model's.
        updated_input: Option<Value>,
    },
    /// Do not run it; the model is told `message`.
    Deny {
        /// Why, for the model.
        message: String,
    },
}

/// Answers Claude Code's `can_use_tool` requests (control mode). Any
/// `Fn(&ToolPermission) -> Decision` is one; implement the trait for a
/// policy that must wait (e.g. ask a person).
#[async_trait::async_trait]
pub trait PermissionPolicy: Send + Sync {
    /// Whether the tool may run.
    async fn decide(&self, request: &ToolPermission) -> Decision;
}

#[async_trait::async_trait]
impl<F: Fn(&ToolPermission) -> Decision + Send + Sync> PermissionPolicy for F {
    async fn decide(&self, request: &ToolPermission) -> Decision {
        self(request)
    }
}

/// What to run and how. [`AgentOptions::new`] fills in the defaults.
#[derive(Clone)]
pub struct AgentOptions {
    /// The CLI.
    pub cli: CliKind,
    /// The prompt (the first turn's, in control mode).
    pub prompt: String,
    /// The model, else the CLI's default. It must pass
    /// [`check_name`](crate::check_name).
    pub model: Option<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The program to run, else the CLI's name looked up on `PATH`.
    pub program: Option<PathBuf>,
    /// More arguments, after the driver's own (before the prompt and
    /// codex's `resume`), passed as they are: flags of the embedder's
    /// choosing, never a caller's text (see [`check_name`](crate::check_name)).
    pub args: Vec<String>,
    /// More environment variables, set last.
    pub env: Vec<(String, String)>,
    /// Whose home and environment.
    pub home: HomeMode,
    /// Claude Code: `--include-partial-messages`, so text, thinking and tool
    /// input come as deltas while they are typed, not per content block.
    pub include_partial: bool,
    /// A session (Claude Code) or thread (codex) to continue. It must pass
    /// [`check_name`](crate::check_name).
    pub resume: Option<String>,
    /// Claude Code: answers its `can_use_tool` requests (control mode).
    pub permission: Option<Arc<dyn PermissionPolicy>>,
    /// Claude Code: MCP servers in this process, offered to the model as
    /// `mcp__NAME__TOOL` (control mode). Their tools still need the
    /// permission policy's allow, as any tool that is not read-only.
    pub mcp_servers: Vec<Arc<dyn SdkMcpServer>>,
    /// Claude Code: hooks answered in this process (control mode).
    pub hooks: Vec<Hook>,
    /// Claude Code: keep the session open after a turn's result for
    /// [`AgentSession::send`](crate::AgentSession::send) (control mode).
    pub multi_turn: bool,
    /// Claude Code: light or control mode, or let the router choose.
    pub transport: Transport,
    /// Killed (the whole group) when it runs longer.
    pub timeout: Option<Duration>,
}

impl AgentOptions {
    /// `cli` on `prompt` in the current directory, everything else default:
    /// the user's environment, partial messages on, one turn.
    pub fn new(cli: CliKind, prompt: impl Into<String>) -> AgentOptions {
        AgentOptions {
            cli,
            prompt: prompt.into(),
            model: None,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            program: None,
            args: Vec::new(),
            env: Vec::new(),
            home: HomeMode::User,
            include_partial: true,
            resume: None,
            permission: None,
            mcp_servers: Vec::new(),
            hooks: Vec::new(),
            multi_turn: false,
            transport: Transport::Auto,
            timeout: None,
        }
    }
}

impl fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentOptions")
            .field("cli", &self.cli)
            .field("prompt", &self.prompt)
            .field("model", &self.model)
            .field("cwd", &self.cwd)
            .field("program", &self.program)
            .field("args", &self.args)
            .field("home", &self.home)
            .field("include_partial", &self.include_partial)
            .field("resume", &self.resume)
            .field("permission", &self.permission.is_some())
            .field(
                "mcp_servers",
                &self
                    .mcp_servers
                    .iter()
                    .map(|server| server.name())
                    .collect::<Vec<_>>(),
            )
            .field("hooks", &self.hooks)
            .field("multi_turn", &self.multi_turn)
            .field("transport", &self.transport)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
