//! weir's agents pack: `agent_run`, which drives one coding-agent CLI
//! (Claude Code, Codex, the Gemini CLI, through `weir-agents`) on one
//! prompt as an ordinary weir run: streamed, cancellable, readable later.
//!
//! **For:** one agent, one prompt: each normalized event a `partial` (text
//! deltas as text, group `text`; the others as structured items, group
//! `events`), the result the last message with usage, cost and session
//! id. With `weir_tools` (Claude Code only) it offers those tools of this
//! server to the agent as the in-process MCP server `weir`
//! (`mcp__weir__TOOL`), served by the binary's own MCP server through
//! weir-runtime's [`InProcessServer`] seam, each call a child run of the
//! agent's run; the agent may call them without asking, and any other tool
//! that needs permission is refused. **Not for:** protocols (the pack reports through
//! its `RunContext` only), several agents on one request (the critique
//! pack's `roast`), installing the CLIs, or their accounts: the agent runs
//! with weir's environment (the user's HOME and credentials, or what
//! [`AgentsConfig::env`] sets).
//!
//! **Where the agent works, and what reaches its command line.** A call's
//! `cwd` is resolved — made absolute against the first root, every
//! symlink followed — and refused unless it lies inside one of
//! [`AgentsConfig::roots`] (`weir serve --root`); a call that names none
//! runs in [`AgentsConfig::work_dir`], itself inside the roots. The
//! agent's own tools may still reach past its working directory as far as
//! its CLI allows: the roots choose where it starts, they are no sandbox.
//! A working directory that is, lies inside or holds one of
//! [`AgentsConfig::private`] (weir's data directory and tokens file) is
//! refused too. The prompt never stands where a CLI reads flags, and a
//! model must pass [`weir_agents::check_name`].
//!
//! **Cancellation.** Cancelling a run drops its future, which drops the
//! agent session, which kills the agent's whole process group.
//!
//! ```
//! use weir_pack_agents::{AgentsConfig, AgentsPack};
//! use weir_runtime::Pack;
//! let pack = AgentsPack::new(AgentsConfig::default(), None).unwrap();
//! let names: Vec<String> = pack.tools().iter().map(|tool| tool.info().name).collect();
//! assert_eq!(names, ["agent_run"]);
//! ```
#![warn(missing_docs)]

mod agent_run;
mod args;
mod weir_tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use weir_core::RunError;
use weir_runtime::{InProcessServer, Pack, PrivatePaths, Roots, RootsError, Tool};

/// How messages name the directory the agent works in when its call names
/// none.
pub(crate) const DEFAULT_DIR: &str = "the agents' default working directory (the first --root)";

/// How the pack runs agents. [`AgentsConfig::default`] runs them with
/// their default models and the user's environment.
#[derive(Clone, Debug)]
pub struct AgentsConfig {
    /// A model per CLI (`claude`, `codex`, `gemini`), where the call names
    /// none; else the CLI's default.
    pub models: BTreeMap<String, String>,
    /// Environment variables the agent gets on top of weir's own (e.g. a
    /// `HOME`, a base URL, an API key).
    pub env: Vec<(String, String)>,
    /// The working directory of an agent whose call names no `cwd`; it
    /// must lie inside `roots`.
    pub work_dir: PathBuf,
    /// The directories a call may name as the agent's `cwd` (`weir serve
    /// --root`); `None`: `work_dir` alone.
    pub roots: Option<Roots>,
    /// Paths no agent may work in or above (weir's data directory, its
    /// tokens file): a working directory that is one of them, lies inside
    /// one or holds one is refused, since the agent reads what is under
    /// its working directory without asking.
    pub private: Vec<PathBuf>,
    /// Killed (the whole process group) after this long.
    pub agent_timeout: Duration,
}

impl Default for AgentsConfig {
    fn default() -> AgentsConfig {
        AgentsConfig {
            models: BTreeMap::new(),
            env: Vec::new(),
            work_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            roots: None,
            private: Vec::new(),
            agent_timeout: Duration::from_secs(15 * 60),
        }
    }
}

/// The agents pack.
pub struct AgentsPack {
    shared: Arc<Shared>,
}

/// What the pack's tool reads.
pub(crate) struct Shared {
    pub(crate) config: AgentsConfig,
    /// Where agents may work.
    pub(crate) roots: Roots,
    /// Where an agent whose call names no directory works: `work_dir`,
    /// resolved inside `roots`.
    pub(crate) work_dir: PathBuf,
    /// `private`, each resolved where it exists.
    private: PrivatePaths,
    /// What serves `weir_tools` to the agent; `None`: nothing does.
    pub(crate) in_process: Option<Arc<dyn InProcessServer>>,
}

impl Shared {
    /// Refuses `dir` (an agent's working directory, named in messages by
    /// `what`: its argument, or [`DEFAULT_DIR`]) when it is, lies inside,
    /// or holds one of the private paths.
    pub(crate) fn check_work_dir(&self, what: &str, dir: &Path) -> Result<(), RunError> {
        self.private.check(what, dir)
    }
}

/// A configuration the pack cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A CLI the pack does not drive.
    #[error("unknown coding-agent CLI {0:?}; known: claude, codex, gemini")]
    UnknownCli(String),
    /// A configured model that cannot be passed to its CLI.
    #[error("the model for {cli}: {error}")]
    BadModel {
        /// The CLI.
        cli: String,
        /// Why.
        error: weir_agents::AgentError,
    },
    /// The roots, or the default working directory, cannot be used.
    #[error("the agents' default working directory {}: {error}", work_dir.display())]
    WorkDir {
        /// The directory.
        work_dir: PathBuf,
        /// Why.
        error: RootsError,
    },
}

impl AgentsPack {
    /// The pack, with `config`, offering the agent tools of this server
    /// (`weir_tools`) through `in_process`, which the binary fills with
    /// its MCP server (without it, a call with `weir_tools` is refused).
    /// Nothing is probed: a CLI that is not installed fails the call that
    /// names it, saying how to install it.
    ///
    /// # Errors
    ///
    /// When `config` names a model for a CLI the pack does not drive, a
    /// model that could be read as a flag ([`weir_agents::check_name`]),
    /// or a `work_dir` outside `roots`.
    pub fn new(
        config: AgentsConfig,
        in_process: Option<Arc<dyn InProcessServer>>,
    ) -> Result<AgentsPack, ConfigError> {
        if let Some(unknown) = config
            .models
            .keys()
            .find(|cli| !args::KNOWN_CLIS.contains(&cli.as_str()))
        {
            return Err(ConfigError::UnknownCli(unknown.clone()));
        }
        for (cli, model) in &config.models {
            weir_agents::check_name("model", model).map_err(|error| ConfigError::BadModel {
                cli: cli.clone(),
                error,
            })?;
        }
        let work_dir_error = |error| ConfigError::WorkDir {
            work_dir: config.work_dir.clone(),
            error,
        };
        let roots = match &config.roots {
            Some(roots) => roots.clone(),
            None => Roots::new([&config.work_dir]).map_err(work_dir_error)?,
        };
        let work_dir = roots
            .resolve(&config.work_dir.to_string_lossy())
            .map_err(work_dir_error)?;
        let private = PrivatePaths::new(&config.private);
        Ok(AgentsPack {
            shared: Arc::new(Shared {
                config,
                roots,
                work_dir,
                private,
                in_process,
            }),
        })
    }
}

impl Pack for AgentsPack {
    fn name(&self) -> &'static str {
        "agents"
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(agent_run::AgentRun(self.shared.clone()))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_path_is_refused_as_a_working_directory_and_above_it() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().to_owned();
        std::fs::create_dir_all(dir.join("data/runs")).unwrap();
        let pack = AgentsPack::new(
            AgentsConfig {
                work_dir: dir.clone(),
                private: vec![dir.join("data")],
                ..AgentsConfig::default()
            },
            None,
        )
        .unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        let refused = |path: &Path| pack.shared.check_work_dir("cwd", path).is_err();
        assert!(refused(&dir.join("data/runs")));
        assert!(refused(&dir.join("data")));
        assert!(refused(&dir), "a directory holding it");
        assert!(!refused(&dir.join("elsewhere")));
        assert!(matches!(
            AgentsPack::new(
                AgentsConfig {
                    models: [("vim".to_owned(), "x".to_owned())].into(),
                    ..AgentsConfig::default()
                },
                None
            ),
            Err(ConfigError::UnknownCli(_))
        ));
    }
}
