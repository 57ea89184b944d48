//! `weir plan run`: a plan as one `plan_run` run, in this process (a
//! scheduler with the tools `weir serve` would register, its options after
//! `--`) or on a weir server (`--url`, through weir's client). Each step is
//! printed as it starts and ends, then the summary of every step. Ctrl-C
//! cancels the plan, which cancels its running steps.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args as _, FromArgMatches as _};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};
use weir_client::{CallEvent, CallOptions, Client, ClientError, ClientOptions, Target};
use weir_core::{Content, EventKind, RunEvent};
use weir_pack_plan::{MAX_PLAN_BYTES, Plan};
use weir_runtime::RunOptions;

use crate::cli::{OutputFormat, PlanRunArgs, ServeArgs};
use crate::exit::Outcome;
use crate::node::{self, UpstreamTools};
use crate::upstreams::Upstreams;

pub(crate) async fn run(data_dir: &Path, args: PlanRunArgs) -> anyhow::Result<Outcome> {
    let plan = read_plan(&args.plan)?;
    // Registered before anything else, so a Ctrl-C is never the default kill.
    let interrupts = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    match &args.url {
        Some(url) => {
            let upstreams = &args.upstreams;
            if !args.serve.is_empty()
                || !upstreams.upstream.is_empty()
                || upstreams.upstreams_file.is_some()
                || !upstreams.upstream_token_env.is_empty()
            {
                bail!(
                    "options after `--` and --upstream… are for the in-process server; with --url the server has its own"
                );
            }
            remote(url, args.token.clone(), plan, args.output, interrupts).await
        }
        None => local(data_dir, &args, plan, interrupts).await,
    }
}

/// The plan, read and parsed here so that a file that is not a plan is
/// said to be one before anything starts; one over the size limit is
/// refused before it is parsed (or read past the limit).
fn read_plan(path: &Path) -> anyhow::Result<Value> {
    let limit = MAX_PLAN_BYTES as u64 + 1;
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin()
            .take(limit)
            .read_to_string(&mut text)
            .context("reading the plan from stdin")?;
    } else {
        std::fs::File::open(path)
            .and_then(|file| file.take(limit).read_to_string(&mut text))
            .with_context(|| format!("reading the plan {}", path.display()))?;
    }
    let plan =
        Plan::read(&Value::String(text)).with_context(|| format!("in {}", path.display()))?;
    Ok(serde_json::to_value(plan)?)
}

/// `weir serve`'s options, as given after `--`.
fn serve_args(options: &[String]) -> anyhow::Result<ServeArgs> {
    let command = ServeArgs::augment_args(clap::Command::new("weir plan run [PLAN] --"));
    let matches = command
        .try_get_matches_from(std::iter::once("serve").chain(options.iter().map(String::as_str)))
        .map_err(|error| anyhow::anyhow!("{error}"))
        .context("in the server options after `--` (see `weir serve --help`)")?;
    Ok(ServeArgs::from_arg_matches(&matches)?)
}

async fn local(
    data_dir: &Path,
    args: &PlanRunArgs,
    plan: Value,
    mut interrupts: tokio::signal::unix::Signal,
) -> anyhow::Result<Outcome> {
    let mut serve = serve_args(&args.serve)?;
    // Upstreams given before `--` join those given after it.
    let given = args.upstreams.clone();
    serve.upstreams.upstream.extend(given.upstream);
    serve
        .upstreams
        .upstream_token_env
        .extend(given.upstream_token_env);
    if given.upstreams_file.is_some() {
        if serve.upstreams.upstreams_file.is_some() {
            bail!("--upstreams is given twice (before and after `--`)");
        }
        serve.upstreams.upstreams_file = given.upstreams_file;
    }
    let upstreams = Upstreams::from_args(&serve.upstreams)?;
    let node = node::assemble(data_dir, &serve, upstreams, UpstreamTools::Reached).await?;
    let scheduler = node.scheduler.clone();
    let log = scheduler.log().clone();
    let run = scheduler
        .submit("plan_run", json!({ "plan": plan }), RunOptions::default())
        .await?;
    let run_id = run.run_id().clone();
    eprintln!("weir: plan run {run_id}");
    let mut events = log.subscribe_from(&run_id, 0);
    let mut interrupted = false;
    let terminal = loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => {
                    show_event(&event, args.output)?;
                    if event.kind.is_terminal() {
                        break event.to_event();
                    }
                }
                Some(Err(error)) => return Err(error).context("following the plan's run"),
                None => bail!("the plan's run {run_id} ended without a terminal event"),
            },
            _ = interrupts.recv() => {
                if interrupted {
                    eprintln!("weir: interrupted twice: exiting now");
                    return Ok(Outcome::Canceled);
                }
                interrupted = true;
                eprintln!("weir: cancelling the plan and its running steps… (Ctrl-C again to quit now)");
                scheduler.cancel(&run_id, "interrupted (Ctrl-C)");
            }
        }
    };
    drop(run);
    // Every step ended before the plan did; nothing is left to wait for.
    scheduler
        .shutdown("weir plan run is done", Duration::from_secs(2))
        .await;
    Ok(ended(&terminal.kind))
}

/// Prints one event of the plan's run.
fn show_event(event: &RunEvent, format: OutputFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        OutputFormat::Jsonl => writeln!(out, "{}", serde_json::to_string(event)?)?,
        OutputFormat::Text => match &event.kind {
            EventKind::Partial(partial) => write!(out, "{}", Content::text_of(&partial.content))?,
            EventKind::Completed(done) => write!(out, "{}", Content::text_of(&done.content))?,
            EventKind::Failed(failed) => eprintln!("weir: {}", failed.error),
            EventKind::Canceled(canceled) => {
                eprintln!("weir: the plan was canceled: {}", canceled.reason)
            }
            _ => {}
        },
    }
    out.flush()?;
    Ok(())
}

fn ended(kind: &EventKind) -> Outcome {
    match kind {
        EventKind::Completed(_) => Outcome::Completed,
        EventKind::Canceled(_) => Outcome::Canceled,
        _ => Outcome::Failed,
    }
}

async fn remote(
    url: &str,
    token: Option<String>,
    plan: Value,
    format: OutputFormat,
    mut interrupts: tokio::signal::unix::Signal,
) -> anyhow::Result<Outcome> {
    let target = Target::Http {
        url: url.to_owned(),
        token,
    };
    let options = ClientOptions {
        name: "weir-plan".into(),
        ..ClientOptions::default()
    };
    let client = match Client::connect(target, options).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("weir: {error}");
            return Ok(Outcome::Unreachable);
        }
    };
    let mut call = client.call_stream("plan_run", json!({ "plan": plan }), CallOptions::default());
    let mut interrupted = false;
    let last = loop {
        tokio::select! {
            event = call.next() => match event {
                Some(event) if event.is_terminal() => break event,
                Some(CallEvent::Partial { content, structured, seq }) => {
                    let mut out = std::io::stdout().lock();
                    match format {
                        OutputFormat::Text => write!(out, "{}", Content::text_of(&content))?,
                        OutputFormat::Jsonl => writeln!(out, "{}", json!({"type": "partial", "seq": seq, "content": content, "structured": structured}))?,
                    }
                    out.flush()?;
                }
                Some(_) => {}
                None => break CallEvent::Error(ClientError::Closed),
            },
            _ = interrupts.recv() => {
                if interrupted {
                    eprintln!("weir: interrupted twice: exiting now; the plan may still be running on the server");
                    return Ok(Outcome::Canceled);
                }
                interrupted = true;
                eprintln!("weir: cancelling the plan and its running steps… (Ctrl-C again to quit now)");
                call.cancel("interrupted (Ctrl-C)");
            }
        }
    };
    drop(call);
    client.close().await;
    Ok(match last {
        CallEvent::Result(result) => {
            let mut out = std::io::stdout().lock();
            match format {
                OutputFormat::Text if result.is_error => {
                    eprintln!("weir: {}", Content::text_of(&result.content))
                }
                OutputFormat::Text => write!(out, "{}", Content::text_of(&result.content))?,
                OutputFormat::Jsonl => {
                    writeln!(out, "{}", json!({"type": "result", "result": result}))?
                }
            }
            if result.is_error {
                Outcome::Failed
            } else {
                Outcome::Completed
            }
        }
        CallEvent::Error(ClientError::Canceled { .. }) => {
            eprintln!("weir: the plan was canceled");
            Outcome::Canceled
        }
        CallEvent::Error(error) => {
            eprintln!("weir: {error}");
            Outcome::Unreachable
        }
        _ => unreachable!("the loop ends on a terminal event"),
    })
}
