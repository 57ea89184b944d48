//! `weir llmstxt PATH`: `llmstxt_generate` on a directory, in this process
//! (the pack alone, on a scheduler with an in-memory log): llms.txt on
//! stdout, or with `--write` the files in the directory itself. The model's
//! tokens, warnings and what was left out go to stderr, so stdout is the
//! file. Ctrl-C cancels the run.
//!
//! The operator names the directory, so it is the one root: the source
//! and where the files go. A model is asked where `--llm-endpoint` (or
//! `WEIR_LLM_ENDPOINT`) says, as for `weir serve`.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use weir_core::{Content, EventKind};
use weir_runtime::{EventLog, MemoryLog, Pack, Roots, RunOptions, Scheduler, SchedulerConfig};

use crate::cli::LlmstxtArgs;
use crate::exit::Outcome;

pub(crate) async fn run(args: LlmstxtArgs) -> anyhow::Result<Outcome> {
    let mut interrupts = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    let root = std::fs::canonicalize(&args.path)
        .with_context(|| format!("cannot open the directory {}", args.path.display()))?;
    let roots =
        Roots::new([&root]).with_context(|| format!("{} cannot be a source", root.display()))?;
    let pack = crate::packs::llmstxt(&args.llm, &roots)?;
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default()).await?;
    let arguments = json!({
        "source": root,
        "write": args.write || args.overwrite,
        "overwrite": args.overwrite,
    });
    let run = scheduler
        .submit("llmstxt_generate", arguments, RunOptions::default())
        .await?;
    let run_id = run.run_id().clone();
    let mut events = log.subscribe_from(&run_id, 0);
    let outcome = loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => {
                    if let Some(outcome) = show(&event.kind)? {
                        break outcome;
                    }
                }
                Some(Err(error)) => return Err(error).context("following the run"),
                None => bail!("the run {run_id} ended without a terminal event"),
            },
            _ = interrupts.recv() => {
                scheduler.cancel(&run_id, "interrupted (Ctrl-C)");
            }
        }
    };
    drop(run);
    scheduler
        .shutdown("weir llmstxt is done", Duration::from_secs(2))
        .await;
    Ok(outcome)
}

/// Shows one event: the model's tokens and warnings on stderr; at the end
/// llms.txt on stdout (or what was written), the rest of the summary on
/// stderr. `Some` once the run has ended.
fn show(kind: &EventKind) -> anyhow::Result<Option<Outcome>> {
    let mut stderr = std::io::stderr().lock();
    match kind {
        EventKind::Partial(partial) => write!(stderr, "{}", Content::text_of(&partial.content))?,
        EventKind::Warning(warning) => writeln!(stderr, "weir: warning: {}", warning.message)?,
        EventKind::Completed(done) => {
            let structured = done.structured.clone().unwrap_or_default();
            let written: Vec<&str> = structured["written"]
                .as_array()
                .map(|paths| paths.iter().filter_map(|path| path.as_str()).collect())
                .unwrap_or_default();
            if written.is_empty() {
                let mut stdout = std::io::stdout().lock();
                write!(stdout, "{}", structured["llms_txt"].as_str().unwrap_or(""))?;
                stdout.flush()?;
            }
            // The summary after the file: mode, what was left out, written.
            let text = Content::text_of(&done.content);
            if let Some((_, summary)) = text.rsplit_once("\n---\n") {
                // The artifacts live in this process's memory only.
                let summary = summary.split(" Artifacts: ").next().unwrap_or(summary);
                writeln!(stderr, "{}", summary.trim_end())?;
            }
            return Ok(Some(Outcome::Completed));
        }
        EventKind::Failed(failed) => {
            writeln!(stderr, "weir: {}", failed.error)?;
            return Ok(Some(Outcome::Failed));
        }
        EventKind::Canceled(canceled) => {
            writeln!(stderr, "weir: canceled: {}", canceled.reason)?;
            return Ok(Some(Outcome::Canceled));
        }
        _ => {}
    }
    Ok(None)
}
