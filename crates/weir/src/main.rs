//! The `weir` command. Parses arguments into plain data ([`cli`]), then runs
//! one subcommand; `anyhow` lives here and nowhere else.

mod agent;
mod call;
mod call_text;
mod cli;
mod exit;
mod http;
mod in_process;
#[cfg(feature = "codeintel")]
mod index;
#[cfg(feature = "llmstxt")]
mod llmstxt;
mod node;
mod output;
mod packs;
#[cfg(feature = "plan")]
mod plan;
mod progress_bar;
mod remote;
mod remote_caller;
mod runs;
mod runs_remote;
mod serve;
mod store;
mod streamed_blocks;
mod tools;
mod upstream_catalog;
mod upstream_tools;
mod upstreams;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::Outcome;

/// A streaming server allocates and frees small buffers on several threads
/// at once; mimalloc's per-thread heaps keep that off a shared lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    // `weir wrap` relays one host's calls to its upstream, a stream of
    // small messages through a chain of tasks: on one worker thread each
    // is passed on without waking a second thread (about 10% less CPU per
    // notification, bench/wrap). `TOKIO_WORKER_THREADS` still decides
    // when set. Blocking work (the stores) has threads of its own.
    if matches!(args.command, cli::Command::Wrap(_))
        && std::env::var_os("TOKIO_WORKER_THREADS").is_none()
    {
        runtime.worker_threads(1);
    }
    let runtime = match runtime.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("weir: could not start the async runtime: {error}");
            return ExitCode::from(Outcome::Failed.code());
        }
    };
    match runtime.block_on(run(args)) {
        Ok(outcome) => ExitCode::from(outcome.code()),
        Err(error) => {
            // One line: what happened, and (in the error's own words) what to do.
            eprintln!("weir: {error:#}");
            ExitCode::from(Outcome::Failed.code())
        }
    }
}

async fn run(args: cli::Args) -> anyhow::Result<Outcome> {
    let data_dir = args.data_dir();
    match args.command {
        cli::Command::Runs(runs) => runs::run(&data_dir, runs).await,
        cli::Command::Call(call) => call::run(call).await,
        cli::Command::Tools(tools) => tools::run(tools).await,
        #[cfg(feature = "codeintel")]
        cli::Command::Index(index) => index::run(&data_dir, index).await,
        #[cfg(feature = "llmstxt")]
        cli::Command::Llmstxt(llmstxt) => llmstxt::run(llmstxt).await,
        cli::Command::Agent(agent) => agent::run(agent).await,
        #[cfg(feature = "plan")]
        cli::Command::Plan(cli::PlanCommand::Run(plan)) => plan::run(&data_dir, plan).await,
        cli::Command::Serve(serve) => serve::run(&data_dir, *serve).await,
        cli::Command::Wrap(wrap) => serve::wrap(&data_dir, *wrap).await,
    }
}
