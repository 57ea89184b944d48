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
    Serve(ServeArgs),
    /// Inspect and follow runs in the data directory.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Call a tool on an MCP server and stream what it sends: progress (a bar
    /// on a terminal), partial results, then the result. Ctrl-C cancels the
    /// call; exit code 0 completed, 1 failed, 3 canceled, 4 unreachable or
    /// refused.
    Call(CallArgs),
    /// List the tools of an MCP server, with their arguments.
    Tools(ToolsArgs),
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
    #[cfg(feature = "exec")]
    #[command(flatten)]
    pub(crate) exec: ExecArgs,
    /// Keep runs in memory only (nothing written to the data directory).
    #[arg(long)]
    pub(crate) memory: bool,
    /// Require `Authorization: Bearer TOKEN` on HTTP requests [env: WEIR_TOKEN].
    #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
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
}

/// `weir serve`'s options for the code execution pack.
#[cfg(feature = "exec")]
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// Do not register the code execution tools (execute_code, validate_code, list_languages).
    #[arg(long)]
    pub(crate) no_exec: bool,
    /// How execute_code isolates programs: auto (bubblewrap when it works
    /// here, else limits only, with a warning), require (refuse to start
    /// without it), off (limits only).
    #[arg(long, value_name = "MODE", default_value_t = weir_pack_exec::SandboxMode::Auto)]
    pub(crate) exec_sandbox: weir_pack_exec::SandboxMode,
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
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one run: its summary and how it ended.
    Show {
        /// The run's id.
        id: RunId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a run's events (a page of them).
    Events {
        /// The run's id.
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
    },
    /// Follow a run's events until it ends; the exit code tells how it ended
    /// (0 completed, 1 failed, 3 canceled).
    Tail {
        /// The run's id.
        id: RunId,
        /// First seq to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Print one JSON event per line.
        #[arg(long)]
        json: bool,
        /// Follow the run on a weir server over HTTP (its GET /runs/{id}/events)
        /// instead of in the data directory; URL is the server's MCP endpoint or root.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Bearer token for --url.
        #[arg(long, env = "WEIR_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
}
