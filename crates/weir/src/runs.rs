//! `weir runs …`: inspect and follow runs in a data directory.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use weir_core::{RunId, RunState};
use weir_runtime::EventLog;
use weir_runtime::log::RunFilter;
use weir_store_sqlite::{SqliteLog, SqliteOptions};

use crate::cli::RunsCommand;
use crate::exit::Outcome;
use crate::output;

pub(crate) async fn run(data_dir: &Path, command: RunsCommand) -> anyhow::Result<Outcome> {
    let path = crate::store::db_path(data_dir);
    if !path.exists() {
        bail!(
            "no runs stored in {}: {} does not exist yet (pass --data-dir to look elsewhere)",
            data_dir.display(),
            path.display()
        );
    }
    let log = SqliteLog::open(&path, SqliteOptions::default())
        .with_context(|| format!("opening {}", path.display()))?;
    let mut out = std::io::stdout().lock();
    match command {
        RunsCommand::List {
            states,
            tool,
            limit,
            json,
        } => {
            let filter = RunFilter {
                states,
                tool,
                node: None,
                owner: None,
                limit: Some(limit),
            };
            let runs = log.list_runs(&filter).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&runs)?)?;
            } else if runs.is_empty() {
                writeln!(out, "no runs match")?;
            } else {
                writeln!(out, "{}", output::RUN_HEADER)?;
                for run in &runs {
                    writeln!(out, "{}", output::run_row(run))?;
                }
            }
            Ok(Outcome::Completed)
        }
        RunsCommand::Show { id, json } => {
            let run = log.get_run(&id).await?.with_context(|| not_found(&id))?;
            let last = match run.events {
                0 => None,
                n => log.read(&id, n - 1, 1).await?.pop(),
            };
            if json {
                let shown = serde_json::json!({ "run": run, "last_event": last });
                writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
            } else {
                writeln!(out, "run       {}", run.run_id)?;
                writeln!(out, "tool      {}", run.tool)?;
                writeln!(out, "arguments {}", run.arguments)?;
                writeln!(out, "node      {}", run.node)?;
                writeln!(out, "state     {}", run.state)?;
                writeln!(out, "events    {}", run.events)?;
                writeln!(out, "created   {} UTC", output::utc(run.created_ts))?;
                if let Some(finished) = run.finished_ts {
                    let took = output::duration(finished.saturating_sub(run.created_ts));
                    writeln!(out, "finished  {} UTC ({took})", output::utc(finished))?;
                }
                if let Some(last) = last.filter(|event| event.kind.is_terminal()) {
                    writeln!(out, "outcome   {}", output::describe(&last.kind))?;
                }
            }
            Ok(Outcome::Completed)
        }
        RunsCommand::Events {
            id,
            from,
            limit,
            json,
        } => {
            let events = log.read(&id, from, limit).await?;
            for event in &events {
                print_event(&mut out, event, json)?;
            }
            Ok(Outcome::Completed)
        }
        RunsCommand::Tail { id, from, json, .. } => {
            let log: std::sync::Arc<dyn EventLog> = std::sync::Arc::new(log);
            let mut events = log.subscribe_from(&id, from);
            let mut ended = None;
            while let Some(event) = events.next().await {
                let event = event?;
                print_event(&mut out, &event, json)?;
                out.flush()?;
                // Applied to a working run, only a terminal event changes the state.
                ended = RunState::Working
                    .apply(&event.kind)
                    .ok()
                    .filter(|s| s.is_terminal())
                    .or(ended);
            }
            // Started past the end: the stored state tells how it ended.
            let state = match ended {
                Some(state) => state,
                None => {
                    log.get_run(&id)
                        .await?
                        .with_context(|| not_found(&id))?
                        .state
                }
            };
            Ok(Outcome::from(state))
        }
    }
}

fn print_event(
    out: &mut impl Write,
    event: &weir_core::RunEvent,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(event)?)?;
    } else {
        writeln!(out, "{}", output::event_line(event))?;
    }
    Ok(())
}

fn not_found(id: &RunId) -> String {
    format!("no run {id}: list runs with `weir runs list` to find its id")
}
