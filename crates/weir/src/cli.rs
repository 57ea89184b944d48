//! Command-line arguments, as plain data.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use weir_core::{RunId, RunState};

/// weir: a streaming runtime for long-running tools.
#[derive(Debug, Parser)]
#[command(name = "weir", version)]
pub(crate) struct Args {
    /// Where runs are stored [default: $WEIR_DATA_DIR, else $XDG_DATA_HOME/weir, else ~/.local/share/weir].
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

impl Args {
    /// The data directory: the flag, else the environment's choice.
    pub(crate) fn data_dir(&self) -> PathBuf {
        if let Some(dir) = &self.data_dir {
            return dir.clone();
        }
        let env = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        env("WEIR_DATA_DIR")
            .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("weir")))
            .or_else(|| env("HOME").map(|h| h.join(".local/share/weir")))
            .unwrap_or_else(|| PathBuf::from(".weir"))
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve MCP: every tool call becomes a run in the data directory.
    Serve(Box<ServeArgs>),
    /// Serve an existing MCP server's tools as weir runs: `weir wrap --
    /// npx -y @modelcontextprotocol/server-everything`. weir serves MCP on
    /// stdio (or --http) with the server after `--` as its one upstream:
    /// its tools under their own names, each call a run (progress, a
    /// heartbeat while it is quiet, tasks, cancel, runs_* and runs_wait),
    /// stored in the data directory (--memory keeps none). weir's own
    /// packs are off. The server gets weir's environment, but for weir's
    /// own token.
    Wrap(Box<WrapArgs>),
    /// Inspect, follow and cancel runs and read the files they produced: in
    /// the data directory, on a weir server (--url) or in a Redis store
    /// (--redis). A run is named by its id or the unique start of it.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Call a tool on an MCP server and stream what it sends: progress (a bar
    /// on a terminal), partial results, then the result. Ctrl-C cancels the
    /// call; exit code 0 completed, 1 failed, 3 canceled, 4 unreachable or
    /// refused.
    Call(CallArgs),
    /// List the tools of an MCP server, with their arguments.
    Tools(ToolsArgs),
    /// Index a repository for the code intelligence tools (as index_repo
    /// does, into the data directory), with a progress bar on a terminal.
    /// Incremental: only files changed since the last run are parsed.
    /// Ctrl-C stops it, keeping the files done.
    #[cfg(feature = "codeintel")]
    Index(IndexArgs),
    /// Describe a repository for language models: llmstxt_generate on
    /// PATH in this process, llms.txt on stdout (with --write, llms.txt,
    /// llms-full.txt and llms-ctx.txt written into PATH). A model is asked
    /// where --llm-endpoint says, else the repository's own text is used.
    #[cfg(feature = "llmstxt")]
    Llmstxt(LlmstxtArgs),
    /// Run a coding agent (Claude Code, Codex or the Gemini CLI) on a
    /// prompt and stream what it does: its text on stdout as it is typed,
    /// tool calls as one line each on stderr. It runs with your environment
    /// (accounts, keys, base URLs). Ctrl-C interrupts it, a second kills it;
    /// exit code 0 done, 1 failed, 3 interrupted.
    Agent(AgentArgs),
    /// Run plans of tool calls (steps that start when the steps they
    /// follow have ended, with branches, retries and templated arguments).
    #[cfg(feature = "plan")]
    #[command(subcommand)]
    Plan(PlanCommand),
}

/// `weir plan`.
#[cfg(feature = "plan")]
#[derive(Debug, Subcommand)]
pub(crate) enum PlanCommand {
    /// Run a plan (YAML or JSON) as one run and stream each step as it
    /// starts and ends, then the summary of every step: in this process
    /// (with the tools `weir serve` would have; its options go after `--`),
    /// or on a weir server (--url). Ctrl-C cancels the plan and its running
    /// steps; exit code 0 completed, 1 failed, 3 canceled, 4 unreachable.
    Run(PlanRunArgs),
}

/// `weir plan run`.
#[cfg(feature = "plan")]
#[derive(Debug, clap::Args)]
pub(crate) struct PlanRunArgs {
    /// The plan file; `-` reads it from stdin.
    #[arg(value_name = "PLAN")]
    pub(crate) plan: PathBuf,
    /// Run it on this weir server (its MCP endpoint, e.g. http://127.0.0.1:8765/mcp) instead of in this process.
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Bearer token for --url.
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// text: step lines and the summary on stdout; jsonl: every event of the plan's run as one JSON line.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub(crate) output: OutputFormat,
    /// Upstream servers the plan's steps may call (as `weir serve` takes them; also accepted after `--`).
    #[command(flatten)]
    pub(crate) upstreams: UpstreamArgs,
    /// Options of the in-process server, as `weir serve` takes them, e.g. `-- --fixtures --memory`.
    #[arg(last = true, value_name = "SERVE-OPTIONS")]
    pub(crate) serve: Vec<String>,
}

/// `weir agent`.
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// Which agent CLI.
    #[arg(long, value_enum, default_value_t = AgentCli::Claude)]
    pub(crate) cli: AgentCli,
    /// The model, else the CLI's default.
    #[arg(long, value_name = "MODEL")]
    pub(crate) model: Option<String>,
    /// The CLI's program, else its name looked up on PATH.
    #[arg(long, value_name = "PATH")]
    pub(crate) program: Option<PathBuf>,
    /// Where the agent works [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Continue this session (claude) or thread (codex).
    #[arg(long, value_name = "ID")]
    pub(crate) resume: Option<String>,
    /// Kill the agent after this many seconds.
    #[arg(long, value_name = "S")]
    pub(crate) timeout: Option<f64>,
    /// text: for people; jsonl: every normalized event as one JSON line on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub(crate) output: OutputFormat,
    /// The prompt.
    pub(crate) prompt: String,
}

/// `weir agent --cli`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AgentCli {
    /// Claude Code (`claude`).
    Claude,
    /// Codex (`codex`).
    Codex,
    /// The Gemini CLI (`gemini`).
    Gemini,
}

/// Which MCP server to talk to, and how.
#[derive(Debug, clap::Args)]
pub(crate) struct ServerArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    /// Bearer token for --url.
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Protocol revision: auto (2026-07-28 when an HTTP server offers it, else 2025-11-25).
    #[arg(long, value_enum, value_name = "REVISION", default_value_t = ProtocolArg::Auto)]
    pub(crate) protocol: ProtocolArg,
}

/// The server: exactly one of --stdio and --url.
#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub(crate) struct TargetArgs {
    /// Spawn this server command (run by `sh -c`) and speak MCP on its stdin/stdout.
    #[arg(long, value_name = "CMD")]
    pub(crate) stdio: Option<String>,
    /// The server's Streamable HTTP endpoint, e.g. http://127.0.0.1:8765/mcp.
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
}

/// `--protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProtocolArg {
    /// Negotiate.
    Auto,
    /// Sessions: initialize, Last-Event-ID resume.
    #[value(name = "2025-11-25")]
    Sessions,
    /// Stateless.
    #[value(name = "2026-07-28")]
    Stateless,
}

/// `weir call`.
#[derive(Debug, clap::Args)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// The tool to call.
    pub(crate) tool: String,
    /// Arguments, as key=value: a value that parses as JSON is that JSON
    /// (count=3, flag=true, list=[1,2]), anything else a string.
    #[arg(value_name = "KEY=VALUE")]
    pub(crate) args: Vec<String>,
    /// Arguments as one JSON object; key=value pairs are set over it.
    #[arg(long = "json", value_name = "ARGS")]
    pub(crate) json: Option<String>,
    /// Run the call as a task: the server answers at once, weir polls it.
    #[arg(long)]
    pub(crate) task: bool,
    /// Give up after this many seconds (the call is cancelled on the server).
    #[arg(long, value_name = "S")]
    pub(crate) timeout: Option<f64>,
    /// text: results on stdout, a progress bar on a terminal's stderr;
    /// jsonl: every event as one JSON line on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub(crate) output: OutputFormat,
}

/// `weir call --output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// For people.
    Text,
    /// One JSON event per line.
    Jsonl,
}

/// `weir tools`.
#[derive(Debug, clap::Args)]
pub(crate) struct ToolsArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// Print the tools (with their full schemas) as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve MCP on stdin/stdout (for clients that spawn weir).
    #[arg(long, conflicts_with = "http")]
    pub(crate) stdio: bool,
    /// Serve Streamable HTTP at ADDR/mcp (and SSE at /runs/{id}/events).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_HTTP_ADDR)]
    pub(crate) http: Option<std::net::SocketAddr>,
    /// Register the conformance and streaming fixtures (tools, resources, prompts).
    #[arg(long)]
    pub(crate) fixtures: bool,
    /// Serve only these tools: tool names, pack names (exec, codeintel,
    /// critique, agents, llmstxt, plan, runs; fixtures, upstream:NAME) or
    /// patterns with `*` (runs_*), comma-separated [default: every tool].
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    pub(crate) tools: Vec<String>,
    /// Leave these tools out: names as for --tools (--no-exec is
    /// --no-tools exec).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    pub(crate) no_tools: Vec<String>,
    /// A directory callers may name (repeatable; in the variable, several separated by `:`): every path a
    /// tool argument names (a repository to index, an llms.txt source, an agent's working directory)
    /// must resolve inside one. Default: the directory weir serve starts in.
    #[arg(
        long = "root",
        alias = "codeintel-root",
        value_name = "DIR",
        env = "WEIR_ROOTS",
        value_delimiter = ':'
    )]
    pub(crate) roots: Vec<PathBuf>,
    #[cfg(feature = "exec")]
    #[command(flatten)]
    pub(crate) exec: ExecArgs,
    #[cfg(any(feature = "critique", feature = "agents"))]
    #[command(flatten)]
    pub(crate) critique: CritiqueArgs,
    #[cfg(feature = "llmstxt")]
    #[command(flatten)]
    pub(crate) llm: LlmArgs,
    #[cfg(feature = "codeintel")]
    #[command(flatten)]
    pub(crate) codeintel: CodeIntelArgs,
    /// Keep runs in memory only (nothing written to the data directory).
    #[arg(long)]
    pub(crate) memory: bool,
    /// Keep runs in Redis, shared by every node serving from it
    /// (docs/operations.md, "Several nodes on Redis"): redis://HOST:PORT/DB.
    #[arg(
        long,
        env = "WEIR_REDIS",
        value_name = "URL",
        conflicts_with = "memory"
    )]
    pub(crate) redis: Option<String>,
    /// This node's name among the nodes sharing a Redis [default: the host
    /// name and the process id].
    #[arg(long, env = "WEIR_NODE", value_name = "NAME", requires = "redis")]
    pub(crate) node: Option<String>,
    /// How long a node's lease on its runs lasts unrenewed, in ms: a dead
    /// node's runs are closed `interrupted` by a survivor within about two.
    #[arg(
        long,
        env = "WEIR_NODE_LEASE_MS",
        value_name = "MS",
        default_value_t = 10_000
    )]
    pub(crate) node_lease_ms: u64,
    /// Require `Authorization: Bearer TOKEN` on HTTP requests.
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Accept the named bearer tokens of this file on HTTP (one per line:
    /// NAME sha256:HEX [admin | tools=A,B packs=C,D]); a caller sees and
    /// cancels only its own runs unless its token is marked admin, and calls
    /// only the tools its line grants. See SECURITY.md.
    #[arg(
        long,
        env = "WEIR_TOKENS_FILE",
        value_name = "PATH",
        conflicts_with = "token"
    )]
    pub(crate) tokens_file: Option<PathBuf>,
    /// Also accept requests from this Origin (repeatable); loopback origins always are.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub(crate) allowed_origins: Vec<String>,
    /// Also accept this Host header (repeatable), e.g. when binding beyond loopback.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allowed_hosts: Vec<String>,
    /// Most runs executing at once.
    #[arg(long, default_value_t = 16)]
    pub(crate) max_concurrent: usize,
    /// Most runs waiting for a slot before calls are refused as busy.
    #[arg(long, default_value_t = 256)]
    pub(crate) max_queue: usize,
    /// Most bytes of content in a final tool result before it is truncated
    /// with a link to the full run.
    #[arg(long, default_value_t = 512 * 1024)]
    pub(crate) result_limit: usize,
    /// Days to keep finished runs (0 keeps them forever).
    #[arg(long, default_value_t = 7)]
    pub(crate) retention_days: u64,
    #[command(flatten)]
    pub(crate) upstreams: UpstreamArgs,
    /// Answer a tools/call that has run this many seconds, and that the
    /// client did not ask to run as a task, with a result saying the run
    /// is still working, its id, and to call runs_wait for the outcome;
    /// the run goes on [default: off].
    #[arg(long, value_name = "S")]
    pub(crate) defer_after: Option<u64>,
    /// Seconds an upstream tool's call may report no progress before its
    /// run sends a progress heartbeat (so a host whose timeout resets on
    /// progress keeps waiting).
    #[arg(long, value_name = "S", default_value_t = 15)]
    pub(crate) upstream_heartbeat: u64,
    /// Set by `weir wrap`: the one upstream's tools under their own names,
    /// and no pack of weir's.
    #[arg(skip)]
    pub(crate) wrap: bool,
}

/// `weir wrap`.
#[derive(Debug, clap::Args)]
pub(crate) struct WrapArgs {
    /// `weir serve`'s options (stdio unless --http).
    #[command(flatten)]
    pub(crate) serve: ServeArgs,
    /// The MCP server to wrap: a command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// The upstream MCP servers plan steps may call (`server: NAME`): the only
/// other servers a caller can reach through weir. weir's own credential is
/// never sent to them; each has its own, in its declaration.
#[derive(Clone, Debug, Default, clap::Args)]
pub(crate) struct UpstreamArgs {
    /// Declare an upstream MCP server plan steps may call as `server: NAME`
    /// (repeatable): NAME=URL (Streamable HTTP), or 'NAME=-- COMMAND ARGS…'
    /// (stdio: the words are split as a shell would, but no shell runs;
    /// the server starts with only PATH and HOME of weir's environment).
    #[arg(long = "upstream", value_name = "NAME=URL|NAME=-- CMD…")]
    pub(crate) upstream: Vec<String>,
    /// Read upstream declarations from this JSON file, in the mcpServers
    /// form of Claude Code, Claude Desktop and Cursor: {"mcpServers":
    /// {NAME: {"command", "args"?, "env"?} | {"url", "type"?: "http",
    /// "headers"?}}}. ${VAR} and ${VAR:-default} in its strings are read
    /// from weir's environment; a stdio server gets its "env", PATH and
    /// HOME, nothing else.
    #[arg(long = "upstreams", value_name = "FILE")]
    pub(crate) upstreams_file: Option<PathBuf>,
    /// Send `Authorization: Bearer $VAR` to the HTTP upstream NAME
    /// (repeatable): NAME=VAR, VAR read at start. weir's own token
    /// (WEIR_TOKEN, WEIR_REMOTE_TOKEN) cannot be given.
    #[arg(long = "upstream-token-env", value_name = "NAME=VAR")]
    pub(crate) upstream_token_env: Vec<String>,
}

/// `weir serve`'s options for the llms.txt pack's model.
#[cfg(feature = "llmstxt")]
#[derive(Debug, clap::Args)]
pub(crate) struct LlmArgs {
    /// An OpenAI-compatible API for llmstxt_generate, e.g.
    /// http://127.0.0.1:8080/v1 (chat completions, streamed); without it
    /// llmstxt_generate writes its deterministic fallback.
    #[arg(
        long,
        env = "WEIR_LLM_ENDPOINT",
        value_name = "URL",
        requires = "llm_model"
    )]
    pub(crate) llm_endpoint: Option<String>,
    /// The model to ask at --llm-endpoint.
    #[arg(long, env = "WEIR_LLM_MODEL", value_name = "M")]
    pub(crate) llm_model: Option<String>,
    /// Sent as a bearer token to --llm-endpoint.
    #[arg(
        long,
        env = "WEIR_LLM_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub(crate) llm_api_key: Option<String>,
    /// Most seconds one answer of the model may take in all, retries included; past it the call
    /// ends and llmstxt_generate uses the repository's own text. Each answer is also bounded in
    /// size: 1 MiB a line, 8 MiB a body, 64 KiB of an error body, about max_tokens tokens.
    #[arg(
        long,
        env = "WEIR_LLM_TIMEOUT",
        value_name = "SECS",
        default_value_t = 120,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub(crate) llm_timeout: u64,
    /// Most seconds between two pieces of the model's answer.
    #[arg(
        long,
        env = "WEIR_LLM_IDLE_TIMEOUT",
        value_name = "SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub(crate) llm_idle_timeout: u64,
    /// A host whose https:// git URLs llmstxt_generate may clone (repeatable; exact DNS name,
    /// e.g. github.com). Without it no URL is cloned: sources are directories inside --root.
    /// Only https on port 443, no user info, never file://, ssh, git://, http://, an IP address
    /// or localhost; git runs with no system or user config, no hooks, no redirects, no
    /// submodules, within 300 s and 512 MiB.
    #[arg(
        long = "llmstxt-clone-host",
        env = "WEIR_LLMSTXT_CLONE_HOSTS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub(crate) llmstxt_clone_hosts: Vec<String>,
}

/// `weir serve`'s options for the code intelligence pack.
#[cfg(feature = "codeintel")]
#[derive(Debug, clap::Args)]
pub(crate) struct CodeIntelArgs {
    /// Do not register the code intelligence tools (index_repo, search_symbols, find_references, get_architecture, explore, understand, prepare_change): --no-tools codeintel.
    #[arg(long)]
    pub(crate) no_codeintel: bool,
    /// Most tokens (bytes / 4) of items in a code intelligence answer's
    /// final result; past it the answer is paged (`cursor=`). Capped so a
    /// page fits --result-limit.
    #[arg(long, value_name = "N", default_value_t = weir_pack_codeintel::DEFAULT_RESULT_TOKENS)]
    pub(crate) result_tokens: usize,
}

/// `weir index`.
#[cfg(feature = "codeintel")]
#[derive(Debug, clap::Args)]
pub(crate) struct IndexArgs {
    /// The repository's directory.
    pub(crate) path: PathBuf,
    /// Parse every file again, changed or not.
    #[arg(long)]
    pub(crate) force: bool,
    /// Parser threads [default: one per core].
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `weir llmstxt`.
#[cfg(feature = "llmstxt")]
#[derive(Debug, clap::Args)]
pub(crate) struct LlmstxtArgs {
    /// The repository's directory.
    pub(crate) path: PathBuf,
    /// Write llms.txt, llms-full.txt and llms-ctx.txt into PATH instead of
    /// printing llms.txt; a file already there stops it.
    #[arg(long)]
    pub(crate) write: bool,
    /// Write, replacing files already there.
    #[arg(long)]
    pub(crate) overwrite: bool,
    #[command(flatten)]
    pub(crate) llm: LlmArgs,
}

/// `weir serve`'s options for the code execution pack.
#[cfg(feature = "exec")]
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// Do not register the code execution tools (execute_code, validate_code, list_languages): --no-tools exec.
    #[arg(long)]
    pub(crate) no_exec: bool,
    /// How execute_code isolates programs: auto (bubblewrap when it works
    /// here, else limits only, with a warning), require (refuse to start
    /// without it), off (limits only).
    #[arg(long, value_name = "MODE", default_value_t = weir_pack_exec::SandboxMode::Auto)]
    pub(crate) exec_sandbox: weir_pack_exec::SandboxMode,
}

/// `weir serve`'s options for the coding agents: the critique pack's
/// roasts and the agents pack's `agent_run` (its model, home, environment
/// and time limit). The agents run with weir's own environment (the
/// user's HOME, accounts and keys) unless these change it.
#[cfg(any(feature = "critique", feature = "agents"))]
#[derive(Debug, clap::Args)]
pub(crate) struct CritiqueArgs {
    /// Do not register the critique tools (roast, critique_status): --no-tools critique (agent_run is --no-tools agents).
    #[arg(long)]
    pub(crate) no_critique: bool,
    /// The agents a roast runs when the call names none.
    #[arg(long, value_name = "CLI,…", value_delimiter = ',', default_values_t = ["claude".to_owned(), "codex".to_owned(), "gemini".to_owned()])]
    pub(crate) critique_clis: Vec<String>,
    /// A model per CLI, where a call names none (e.g. gemini=gemini-2.5-flash).
    #[arg(long, value_name = "CLI=MODEL,…", value_delimiter = ',', value_parser = key_value)]
    pub(crate) critique_models: Vec<(String, String)>,
    /// The agents' HOME (their config and credentials), instead of the user's.
    #[arg(long, value_name = "DIR")]
    pub(crate) critique_home: Option<PathBuf>,
    /// An environment variable for the agents (repeatable), e.g. a base URL.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub(crate) critique_env: Vec<(String, String)>,
    /// Most agents of one roast running at once.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) critique_max_parallel: usize,
    /// Seconds an agent may run before its process group is killed.
    #[arg(long, value_name = "S", default_value_t = 900)]
    pub(crate) critique_timeout: u64,
    /// Failures in a row that open a CLI's circuit breaker.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) critique_breaker_failures: u32,
    /// Seconds an open breaker waits before one probe.
    #[arg(long, value_name = "S", default_value_t = 60)]
    pub(crate) critique_breaker_cooldown: u64,
    /// Seconds a critique stays cached (and its report pageable).
    #[arg(long, value_name = "S", default_value_t = 1800)]
    pub(crate) critique_cache_ttl: u64,
}

/// `KEY=VALUE`, split at the first `=`.
#[cfg(any(feature = "critique", feature = "agents"))]
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// Where `weir serve --http` listens by default.
pub(crate) const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8765";

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only runs in this state (repeatable): pending, working, input_required, completed, failed, canceled.
        #[arg(long = "state", value_name = "STATE")]
        states: Vec<RunState>,
        /// Only runs of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of a table (with --url, the server's records: no arguments, the latest progress).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: RunsSource,
    },
    /// Show one run: its summary and how it ended; the exit code tells how
    /// it ended (0 completed or still going, 1 failed, 3 canceled).
    Show {
        /// The run's id, or its start (at least 4 characters, one run's only).
        id: RunId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: RunsSource,
    },
    /// Print a run's events (a page of them).
    Events {
        /// The run's id, or its start (at least 4 characters, one run's only).
        id: RunId,
        /// First seq to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// At most this many events.
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// Print one JSON event per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: RunsSource,
    },
    /// Follow a run's events until it ends; the exit code tells how it ended
    /// (0 completed, 1 failed, 3 canceled).
    Tail {
        /// The run's id, or its start (at least 4 characters, one run's only).
        id: RunId,
        /// First seq to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Print one JSON event per line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        source: RunsSource,
    },
    /// Cancel a run that is still going and wait for it to end; the exit
    /// code tells how it ended (3 canceled; 0 or 1 when it completed or
    /// failed first). The server executing the run cancels it: give its
    /// --url, or --redis for nodes sharing a Redis; a data directory
    /// alone cannot.
    Cancel {
        /// The run's id, or its start (at least 4 characters, one run's only).
        id: RunId,
        /// Why, as the run's canceled event will say.
        #[arg(long, default_value = "cancelled with weir runs cancel")]
        reason: String,
        /// Seconds to wait for the run to end.
        #[arg(long, value_name = "S", default_value_t = 10.0)]
        wait: f64,
        #[command(flatten)]
        source: RunsSource,
    },
    /// Write a file a run produced (an artifact event names it), its raw
    /// bytes, to stdout or to FILE.
    Artifact {
        /// The run's id, or its start (at least 4 characters, one run's only).
        id: RunId,
        /// The artifact's name.
        name: String,
        /// Write it to FILE instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        source: RunsSource,
    },
}

impl RunsCommand {
    /// Where the command reads runs.
    pub(crate) fn source(&self) -> &RunsSource {
        match self {
            RunsCommand::List { source, .. }
            | RunsCommand::Show { source, .. }
            | RunsCommand::Events { source, .. }
            | RunsCommand::Tail { source, .. }
            | RunsCommand::Cancel { source, .. }
            | RunsCommand::Artifact { source, .. } => source,
        }
    }
}

/// Where `weir runs` finds runs: the data directory, unless one of these.
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct RunsSource {
    /// A weir server's runs instead, over its HTTP run API (the
    /// dashboard's, `/api/runs`): URL is its MCP endpoint or its root, e.g.
    /// http://127.0.0.1:8765/mcp.
    #[arg(long, value_name = "URL", conflicts_with = "redis")]
    pub(crate) url: Option<String>,
    /// Bearer token for --url.
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// The runs of a Redis store that `weir serve --redis` nodes share,
    /// read directly: redis://HOST:PORT/DB.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Option<String>,
}
