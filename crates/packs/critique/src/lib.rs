//! weir's critique pack: `roast`, which fans one request out to several
//! coding-agent CLIs at once on a `brief` (`general`, the default;
//! `codebase`, `architecture`, `security`, `idea`), and `critique_status`,
//! the agents' circuit breakers. (One agent on one prompt, `agent_run`, is
//! the agents pack's: `weir-pack-agents`.)
//!
//! **For:** critique by real coding agents (Claude Code, Codex, the Gemini
//! CLI, driven by `weir-agents`) as ordinary weir runs: streamed, cancellable,
//! readable later. **Not for:** protocols (the pack reports through its
//! `RunContext` only), installing the CLIs, or their accounts: each agent
//! runs with weir's environment (the user's HOME and credentials, or what
//! [`CritiqueConfig::env`] sets), so it uses whatever the user has set up,
//! or a local endpoint the environment points it at.
//!
//! **A roast.** The agents named by `clis` (the configured set when absent)
//! run in parallel, at most `max_parallel` at once, on the same prompt: the
//! brief, the `context`, then `content` or, for a `target`, the
//! path they run in. Each agent's text streams as `partial` events whose
//! `group` is the agent (`claude`, `codex`, `gemini`), as it is typed.
//! Progress milestones count steps — per agent *spawned*, *first output*,
//! *done k/n*, then *synthesizing* — with an estimate of the time left. The
//! result has each agent's outcome (`ok`, `failed`, `missing`,
//! `timed_out`, `breaker_open`, with the error), the findings extracted
//! from their text (severity, category, file, line, text; worst first) and
//! a page of the whole report. An agent that fails never fails the run: the
//! others' results stand. A roast where no agent answered fails, keeping
//! its result (`RunError::with_result`: an MCP result marked `isError`),
//! and each agent's outcome says what to set up (`setup`: the install
//! command, the login or key, the variable or file its error points at).
//!
//! **Breakers.** Each CLI has a [`weir_core::CircuitBreaker`]: after
//! [`CritiqueConfig::breaker`]`.failure_threshold` failures in a row its
//! agent is skipped (outcome `breaker_open`) until the cooldown has passed,
//! then one run probes it. States are in each roast's `meta` and outcomes,
//! and in `critique_status`.
//!
//! **Cache, reports, paging.** A finished critique is cached for
//! [`CritiqueConfig::cache_ttl`] under a hash of its canonical arguments
//! (the same call again returns it, `cached: true`, unless `refresh`), and
//! kept as long under its `context_id`: `context_id` (with `offset` and
//! `limit`) or the result's `next_cursor` page it without running anything;
//! `context_id` with `resume: true` and new `content` runs the agents again
//! with the earlier report in their prompt and appends the new round. Both
//! live in this server's memory only.
//!
//! **Where agents work, and what reaches their command line.** A roast's
//! `target` is resolved — made absolute
//! against the first root, every symlink followed — and refused unless it
//! lies inside one of [`CritiqueConfig::roots`] (`weir serve --root`); a
//! call that names none runs in [`CritiqueConfig::work_dir`], itself inside
//! the roots. An agent's own tools may still reach past its working
//! directory as far as its CLI allows (its permission rules, its sandbox):
//! the roots choose where it starts, they are no sandbox. A working
//! directory that is, lies inside or holds one of
//! [`CritiqueConfig::private`] (weir's data directory and tokens file) is
//! refused too, even inside a root. Prompts never
//! stand where a CLI reads flags, and a model must pass
//! [`weir_agents::check_name`] (refused otherwise, naming the field).
//!
//! **Cancellation.** Cancelling a run drops its future, which drops every
//! agent session, which kills each agent's whole process group.
//!
//! ```
//! use weir_pack_critique::{CritiqueConfig, CritiquePack};
//! use weir_runtime::Pack;
//! let pack = CritiquePack::new(CritiqueConfig {
//!     clis: vec!["claude".into(), "gemini".into()],
//!     models: [("gemini".to_owned(), "gemini-2.5-flash".to_owned())].into(),
//!     ..CritiqueConfig::default()
//! })
//! .unwrap();
//! let names: Vec<String> = pack.tools().iter().map(|tool| tool.info().name).collect();
//! assert_eq!(names, ["roast", "critique_status"]);
//! assert!(CritiquePack::new(CritiqueConfig { clis: vec!["vim".into()], ..CritiqueConfig::default() }).is_err());
//! ```
#![warn(missing_docs)]

mod args;
mod cache;
mod findings;
mod paging;
mod report;
mod roast;
mod setup;
mod status;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::{BreakerConfig, BreakerSnapshot, CircuitBreaker, RunError};
use weir_runtime::{Pack, PrivatePaths, Roots, RootsError, Tool};

use crate::cache::TtlCache;
use crate::report::Report;

/// How messages name the directory an agent works in when its call names
/// none.
pub(crate) const DEFAULT_DIR: &str = "the agents' default working directory (the first --root)";

/// How the pack runs agents. [`CritiqueConfig::default`] runs all three
/// CLIs with their default models and the user's environment.
#[derive(Clone, Debug)]
pub struct CritiqueConfig {
    /// The agents a roast runs when the call names none: `claude`, `codex`,
    /// `gemini`.
    pub clis: Vec<String>,
    /// A model per CLI, where the call names none; else the CLI's default.
    pub models: BTreeMap<String, String>,
    /// Environment variables every agent gets on top of weir's own (e.g. a
    /// `HOME`, a base URL, an API key).
    pub env: Vec<(String, String)>,
    /// The working directory of agents whose call names none (no `cwd`,
    /// no `target`); it must lie inside `roots`.
    pub work_dir: PathBuf,
    /// The directories a call may name as an agent's `cwd` or a roast's
    /// `target` (`weir serve --root`); `None`: `work_dir` alone.
    pub roots: Option<Roots>,
    /// Paths no agent may work in or above (weir's data directory, its
    /// tokens file): a working directory that is one of them, lies inside
    /// one or holds one is refused, since the agent reads what is under
    /// its working directory without asking.
    pub private: Vec<PathBuf>,
    /// Most agents running at once in one roast (a call may ask fewer).
    pub max_parallel: usize,
    /// Killed (the whole process group) after this long.
    pub agent_timeout: Duration,
    /// When a CLI's breaker opens, and for how long.
    pub breaker: BreakerConfig,
    /// How long a critique is cached and its report kept.
    pub cache_ttl: Duration,
    /// Most critiques cached, and most reports kept.
    pub cache_entries: usize,
    /// Bytes of report per page when the call sets no `limit`.
    pub page_bytes: usize,
}

impl Default for CritiqueConfig {
    fn default() -> CritiqueConfig {
        CritiqueConfig {
            clis: args::KNOWN_CLIS
                .iter()
                .map(|cli| (*cli).to_owned())
                .collect(),
            models: BTreeMap::new(),
            env: Vec::new(),
            work_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            roots: None,
            private: Vec::new(),
            max_parallel: 3,
            agent_timeout: Duration::from_secs(15 * 60),
            breaker: BreakerConfig::default(),
            cache_ttl: Duration::from_secs(30 * 60),
            cache_entries: 64,
            page_bytes: 32 * 1024,
        }
    }
}

/// The critique pack: its tools share the breakers, the cache and the
/// reports.
pub struct CritiquePack {
    shared: Arc<Shared>,
}

/// What the pack's tools share.
pub(crate) struct Shared {
    pub(crate) config: CritiqueConfig,
    /// Where agents may work.
    pub(crate) roots: Roots,
    /// Where an agent whose call names no directory works: `work_dir`,
    /// resolved inside `roots`.
    pub(crate) work_dir: PathBuf,
    /// `private`, each resolved where it exists.
    pub(crate) private: PrivatePaths,
    /// Per CLI: its breaker and the last failure, for the breaker's message.
    pub(crate) breakers: Mutex<HashMap<String, (CircuitBreaker, Option<String>)>>,
    /// Finished critiques by the hash of their arguments.
    pub(crate) cache: Mutex<TtlCache<Arc<Report>>>,
    /// Reports by context id.
    pub(crate) reports: Mutex<TtlCache<Arc<Report>>>,
    /// The breakers' and caches' clock (tokio's, so tests can pause it).
    began: tokio::time::Instant,
}

impl Shared {
    /// Milliseconds since the pack was made, on the monotonic clock.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// `cli`'s breaker, made on first use, under the lock.
    pub(crate) fn with_breaker<T>(
        &self,
        cli: &str,
        f: impl FnOnce(&mut CircuitBreaker, &mut Option<String>) -> T,
    ) -> T {
        let mut breakers = self.breakers.lock().expect("breakers lock");
        let (breaker, last_error) = breakers
            .entry(cli.to_owned())
            .or_insert_with(|| (CircuitBreaker::new(self.config.breaker), None));
        f(breaker, last_error)
    }

    /// Refuses `dir` (an agent's working directory, named in messages by
    /// `what`: its argument, or [`DEFAULT_DIR`]) when it is, lies inside,
    /// or holds one of the private paths.
    pub(crate) fn check_work_dir(&self, what: &str, dir: &Path) -> Result<(), RunError> {
        self.private.check(what, dir)
    }

    pub(crate) fn breaker_snapshot(&self, cli: &str) -> BreakerSnapshot {
        let now = self.now_ms();
        self.with_breaker(cli, |breaker, _| breaker.snapshot(now))
    }
}

/// A configuration the pack cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A CLI the pack does not drive.
    #[error("unknown coding-agent CLI {0:?}; known: claude, codex, gemini")]
    UnknownCli(String),
    /// No default agents.
    #[error("no default agents: name at least one of claude, codex, gemini")]
    NoClis,
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

impl CritiquePack {
    /// The pack, with `config`. Nothing is probed: a CLI that is not
    /// installed shows as `missing` in the roasts that name it.
    ///
    /// # Errors
    ///
    /// When `config` names a CLI (in `clis` or `models`) the pack does not
    /// drive, no default agent, a model that could be read as a flag
    /// ([`weir_agents::check_name`]), or a `work_dir` outside `roots`.
    pub fn new(config: CritiqueConfig) -> Result<CritiquePack, ConfigError> {
        if config.clis.is_empty() {
            return Err(ConfigError::NoClis);
        }
        if let Some(unknown) = config
            .clis
            .iter()
            .chain(config.models.keys())
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
        let ttl = u64::try_from(config.cache_ttl.as_millis()).unwrap_or(u64::MAX);
        let entries = config.cache_entries;
        Ok(CritiquePack {
            shared: Arc::new(Shared {
                config,
                roots,
                work_dir,
                private,
                breakers: Mutex::new(HashMap::new()),
                cache: Mutex::new(TtlCache::new(ttl, entries)),
                reports: Mutex::new(TtlCache::new(ttl, entries)),
                began: tokio::time::Instant::now(),
            }),
        })
    }
}

impl Pack for CritiquePack {
    fn name(&self) -> &'static str {
        "critique"
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(roast::Roast(self.shared.clone())),
            Arc::new(status::CritiqueStatus(self.shared.clone())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `roast` (one tool for every brief) costs a model well under 1,000
    /// tokens in a tools/list: its entry's JSON under 3,200 bytes (about
    /// four bytes a token).
    #[test]
    fn roast_is_one_lean_tool() {
        let pack = CritiquePack::new(CritiqueConfig::default()).unwrap();
        let tools = pack.tools();
        let roasts: Vec<ToolInfoJson> = tools
            .iter()
            .map(|tool| tool.info())
            .filter(|info| info.name.starts_with("roast"))
            .map(|info| ToolInfoJson {
                bytes: serde_json::json!({
                    "name": info.name,
                    "title": info.title,
                    "description": info.description,
                    "inputSchema": info.input_schema,
                    "outputSchema": info.output_schema,
                    "annotations": info.annotations,
                })
                .to_string()
                .len(),
                name: info.name,
            })
            .collect();
        assert_eq!(roasts.len(), 1, "{roasts:?}");
        eprintln!("roast's tools/list entry: {} bytes", roasts[0].bytes);
        assert!(roasts[0].bytes < 3200, "{roasts:?}");
    }

    #[derive(Debug)]
    #[allow(dead_code)] // read by Debug, in the failure message
    struct ToolInfoJson {
        name: String,
        bytes: usize,
    }
}
