//! Drivers for coding-agent CLIs: Claude Code, Codex, the Gemini CLI, or any
//! command given a line parser. A session spawns the CLI in a process group
//! of its own, reads its stream line by line into one normalized
//! [`AgentEvent`] type, answers its permission requests from a caller's
//! [`PermissionPolicy`], and interrupts it (where its protocol can) or kills
//! the whole group, so nothing it started outlives it.
//!
//! **For:** weir's `weir agent` command and the tool packs that run agents
//! (critique). **Not for:** MCP (nothing here knows a run, a tool or a
//! client: callers map events to theirs; an in-process MCP server's
//! messages pass through as JSON), installing the CLIs, or choosing models
//! and prompts.
//!
//! | item | what it is |
//! |---|---|
//! | [`start`], [`AgentOptions`], [`CliKind`], [`HomeMode`], [`Transport`] | what to run, and starting it |
//! | [`check_name`] | whether a model or session id may stand alone on a command line |
//! | [`AgentSession`]: [`next`](AgentSession::next), [`interrupt`](AgentSession::interrupt), [`send`](AgentSession::send), [`kill`](AgentSession::kill) | a running agent |
//! | [`AgentEvent`], [`AgentResult`], [`Usage`] | what it did |
//! | [`PermissionPolicy`], [`ToolPermission`], [`Decision`] | Claude Code's `can_use_tool`, answered |
//! | [`SdkMcpServer`] | an MCP server in the caller's process, offered to Claude Code (its `mcp_message` requests) |
//! | [`Hook`], [`HookCallback`], [`HookCall`] | Claude Code's hooks (`PreToolUse`, …), answered in process (its `hook_callback` requests) |
//! | [`LineParser`] | a custom command's lines to events |
//! | [`parse`] | the CLIs' parsers, for their recorded output |
//! | [`base_command`], [`ProcessGroup`] | the environment every CLI gets, and its group killed on drop |
//!
//! **Claude Code's two modes** (the router, [`Transport::Auto`]): light mode
//! is `claude -p --output-format stream-json --verbose
//! [--include-partial-messages] -- PROMPT` with stdin `/dev/null`; control mode adds
//! `--input-format stream-json`, sends the `initialize` handshake and the
//! prompt as a `user` message on stdin, answers `can_use_tool` requests
//! (with `--permission-prompt-tool stdio`), `mcp_message` requests for the
//! in-process MCP servers (declared with `--mcp-config` as `sdk` servers
//! and named in `initialize`'s `sdkMcpServers`) and `hook_callback`
//! requests for the hooks (`initialize`'s `hooks`), and can `interrupt` a
//! turn or take another. Each answer is computed in a task of its own
//! while the session goes on reading; an unknown server or callback gets
//! an error answer naming it. The router picks control mode when the
//! options ask for a permission policy, in-process MCP servers, hooks or
//! several turns. Codex runs as `codex exec --json
//! [resume ID] -` with the prompt written to its stdin, which is then
//! closed; the Gemini CLI as `gemini --prompt=PROMPT --output-format
//! stream-json` with stdin `/dev/null` (an open pipe makes it wait).
//!
//! **No caller text becomes a flag.** The prompt never stands where a
//! CLI's parser reads flags (after `--`, on stdin, or glued to
//! `--prompt=`); a model or session id must pass [`check_name`] (no
//! leading `-`, a short set of characters), else [`start`] refuses it with
//! [`AgentError::Invalid`]. [`AgentOptions::args`] is the embedder's own
//! and passes as it is: never put a caller's text there.
//!
//! **Ending.** [`AgentSession::interrupt`] asks Claude Code's control mode
//! to stop the turn (it then ends with an error result); any other session
//! is terminated: SIGTERM to its group, SIGKILL after a grace period.
//! Dropping a session kills its group.
//!
//! ```no_run
//! use weir_agents::{AgentEvent, AgentOptions, CliKind};
//!
//! # async fn example() -> Result<(), weir_agents::AgentError> {
//! let mut session = weir_agents::start(AgentOptions::new(CliKind::Claude, "say hi")).await?;
//! while let Some(event) = session.next().await {
//!     match event {
//!         AgentEvent::TextDelta { text } => print!("{text}"),
//!         AgentEvent::Result(result) => println!("\n(error: {})", result.is_error),
//!         _ => {}
//!     }
//! }
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod argv;
mod callbacks;
mod command;
mod control;
mod error;
mod event;
mod find;
mod group;
mod options;
pub mod parse;
mod session;

pub use argv::{NAME_PATTERN, check_name};
pub use callbacks::{Hook, HookCall, HookCallback, SdkMcpServer};
pub use command::{Mode, base_command};
pub use error::AgentError;
pub use event::{AgentEvent, AgentResult, Ending, Exit, Usage};
pub use group::ProcessGroup;
pub use options::{
    AgentOptions, BUILT_IN_CLIS, CliKind, Decision, HomeMode, LineParser, PermissionPolicy,
    PrivateHome, ToolPermission, Transport,
};
pub use session::{AgentSession, start};
