//! `weir runs …`: inspect, follow and cancel runs and read the files they
//! produced, in the data directory, in a Redis store (`--redis`, read
//! directly), or on a weir server (`--url`, over its run API:
//! `runs_remote.rs`). A run is named by its id or the unique start of it.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use weir_core::{RunEvent, RunId, RunState, Seq};
use weir_runtime::EventLog;
use weir_runtime::log::{FindRunError, RunFilter, RunSummary, find_run};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

use crate::cli::{RunsCommand, RunsSource};
use crate::exit::Outcome;
use crate::output;
use crate::runs_remote::{self, Api, Unreachable};
use crate::store;

/// Bytes of an artifact read from a store at a time.
const ARTIFACT_CHUNK: u64 = 1 << 20;
/// How often `cancel` looks whether the run has ended.
const CANCEL_POLL: Duration = Duration::from_millis(100);

pub(crate) async fn run(data_dir: &Path, command: RunsCommand) -> anyhow::Result<Outcome> {
    match execute(data_dir, command).await {
        Err(error) => match error.downcast_ref::<Unreachable>() {
            Some(unreachable) => {
                eprintln!("weir: {unreachable}");
                Ok(Outcome::Unreachable)
            }
            None => Err(error),
        },
        done => done,
    }
}

async fn execute(data_dir: &Path, command: RunsCommand) -> anyhow::Result<Outcome> {
    let store = Store::open(data_dir, command.source()).await?;
    let mut out = std::io::stdout().lock();
    match command {
        RunsCommand::List {
            states,
            tool,
            limit,
            json,
            ..
        } => {
            let (runs, records) = store.list(states, tool, limit).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&records)?)?;
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
        RunsCommand::Show { id, json, .. } => {
            let run = store.find(&id).await?;
            let last = store.last_event(&run).await?;
            if json {
                let shown = serde_json::json!({ "run": run, "last_event": last });
                writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
            } else {
                write!(out, "{}", output::run_details(&run, last.as_ref()))?;
            }
            Ok(ended(&run))
        }
        RunsCommand::Events {
            id,
            from,
            limit,
            json,
            ..
        } => {
            let run = store.find(&id).await?;
            let events = store.events(&run.run_id, from, limit).await?;
            for event in &events {
                print_event(&mut out, event, json)?;
            }
            // A page is not the whole run: say so (on stderr, so that
            // `--json` stays one event per line) and where the next starts.
            let next = events.last().map_or(from, |event| event.seq + 1);
            if next < run.events {
                let left = run.events - next;
                let noun = if left == 1 { "event" } else { "events" };
                eprintln!(
                    "weir: {left} more {noun}: weir runs events {} --from {next}",
                    run.run_id
                );
            }
            Ok(Outcome::Completed)
        }
        RunsCommand::Tail { id, from, json, .. } => {
            let run = store.find(&id).await?;
            drop(out);
            store.tail(&run, from, json).await
        }
        RunsCommand::Cancel {
            id, reason, wait, ..
        } => {
            let run = store.find(&id).await?;
            drop(out);
            store.cancel(run, &reason, wait).await
        }
        RunsCommand::Artifact {
            id, name, output, ..
        } => {
            let run = store.find(&id).await?;
            drop(out);
            match &output {
                Some(path) => {
                    let mut file = std::fs::File::create(path)
                        .with_context(|| format!("creating {}", path.display()))?;
                    let written = store.artifact(&run.run_id, &name, &mut file).await?;
                    file.sync_all()?;
                    eprintln!("weir: wrote {written} bytes to {}", path.display());
                }
                None => {
                    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
                    store.artifact(&run.run_id, &name, &mut stdout).await?;
                    stdout.flush()?;
                }
            }
            Ok(Outcome::Completed)
        }
    }
}

/// How a command that reports a run's end exits: by how it ended, and 0
/// while it is still going.
fn ended(run: &RunSummary) -> Outcome {
    if run.state.is_terminal() {
        Outcome::from(run.state)
    } else {
        Outcome::Completed
    }
}

/// Where the runs are.
enum Store {
    /// A store read directly: the data directory's SQLite file, or a Redis
    /// (which also carries cancel requests to the node executing a run).
    Log {
        log: Arc<dyn EventLog>,
        redis: Option<store::Redis>,
    },
    /// A weir server's run API.
    Server { api: Api, token: Option<String> },
}

impl Store {
    async fn open(data_dir: &Path, source: &RunsSource) -> anyhow::Result<Store> {
        if let Some(url) = &source.url {
            let api = Api::new(url, source.token.clone())?;
            return Ok(Store::Server {
                api,
                token: source.token.clone(),
            });
        }
        if let Some(url) = &source.redis {
            let redis = store::redis(url).await?;
            return Ok(Store::Log {
                log: store::redis_log(&redis),
                redis: Some(redis),
            });
        }
        let path = store::db_path(data_dir);
        if !path.exists() {
            bail!(
                "no runs stored in {}: {} does not exist yet (pass --data-dir to look elsewhere, --url for a server's runs, --redis for a Redis store's)",
                data_dir.display(),
                path.display()
            );
        }
        // Not `store::sqlite`, which would create a missing file.
        let log = SqliteLog::open(&path, SqliteOptions::default())
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Store::Log {
            log: Arc::new(log),
            redis: None,
        })
    }

    /// How `weir runs list` is spelled for this store, for hints.
    fn list_command(&self) -> String {
        match self {
            Store::Server { api, .. } => format!("weir runs list --url {}", api.url()),
            Store::Log {
                redis: Some(redis), ..
            } => format!("weir runs list --redis {}", redis_url(redis)),
            Store::Log { .. } => "weir runs list".to_owned(),
        }
    }

    /// The runs `list` shows, and their records for `--json`.
    async fn list(
        &self,
        states: Vec<RunState>,
        tool: Option<String>,
        limit: usize,
    ) -> anyhow::Result<(Vec<RunSummary>, serde_json::Value)> {
        match self {
            Store::Server { api, .. } => {
                let (runs, records) = api.list(&states, tool.as_deref(), limit).await?;
                Ok((runs, records.into()))
            }
            Store::Log { log, .. } => {
                let filter = RunFilter {
                    states,
                    tool,
                    limit: Some(limit),
                    ..RunFilter::default()
                };
                let runs = log.list_runs(&filter).await?;
                let records = serde_json::to_value(&runs)?;
                Ok((runs, records))
            }
        }
    }

    /// The run whose id is `id`, or the one run whose id starts with it.
    async fn find(&self, id: &RunId) -> anyhow::Result<RunSummary> {
        let log = match self {
            Store::Server { api, .. } => return api.run(id).await,
            Store::Log { log, .. } => log,
        };
        match find_run(log.as_ref(), id.as_str(), |_| true).await {
            Ok(run) => Ok(run),
            Err(FindRunError::NotFound(_)) => bail!(
                "no run {id}: list runs with `{}` to find its id",
                self.list_command()
            ),
            Err(error) => Err(error.into()),
        }
    }

    async fn events(&self, id: &RunId, from: Seq, limit: usize) -> anyhow::Result<Vec<RunEvent>> {
        match self {
            Store::Server { api, .. } => api.events(id, from, limit).await,
            Store::Log { log, .. } => Ok(log.read(id, from, limit).await?),
        }
    }

    /// The run's latest event.
    async fn last_event(&self, run: &RunSummary) -> anyhow::Result<Option<RunEvent>> {
        match run.events {
            0 => Ok(None),
            n => Ok(self.events(&run.run_id, n - 1, 1).await?.pop()),
        }
    }

    async fn tail(&self, run: &RunSummary, from: Seq, json: bool) -> anyhow::Result<Outcome> {
        let log = match self {
            Store::Server { api, token } => {
                return runs_remote::tail(api.url(), token.clone(), &run.run_id, from, json).await;
            }
            Store::Log { log, .. } => log,
        };
        let mut out = std::io::stdout().lock();
        let mut events = log.subscribe_from(&run.run_id, from);
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
            None => self.find(&run.run_id).await?.state,
        };
        Ok(Outcome::from(state))
    }

    /// Asks whoever executes `run` to cancel it, waits up to `wait` seconds
    /// for it to end, and says how it did.
    async fn cancel(&self, run: RunSummary, reason: &str, wait: f64) -> anyhow::Result<Outcome> {
        let id = run.run_id.clone();
        if run.state.is_terminal() {
            eprintln!("weir: run {id} had already ended; nothing was cancelled");
            return self.report_end(&run).await;
        }
        match self {
            Store::Server { api, .. } => {
                api.cancel(&id, reason).await?;
            }
            Store::Log {
                redis: Some(redis), ..
            } => store::request_cancel(redis, &id, reason).await?,
            Store::Log { redis: None, .. } => bail!(
                "run {id} is {} on node {}, and a data directory takes no cancel requests: the server executing the run cancels it; give its address (`weir runs cancel {id} --url http://HOST:PORT/mcp`), or, for a server on stdio, cancel the call in its client (Ctrl-C in `weir call`)",
                run.state,
                run.node
            ),
        }
        let deadline = Instant::now() + Duration::from_secs_f64(wait.max(0.0));
        loop {
            let now = self.find(&id).await?;
            if now.state.is_terminal() {
                return self.report_end(&now).await;
            }
            if Instant::now() >= deadline {
                bail!(
                    "asked run {id} to cancel, but it is still {} after {wait}s; its node ({}) may be busy or gone: see `weir runs show {id}`",
                    now.state,
                    now.node
                );
            }
            tokio::time::sleep(CANCEL_POLL).await;
        }
    }

    /// `run 01a2… canceled: why` on stdout; the exit code by how it ended.
    async fn report_end(&self, run: &RunSummary) -> anyhow::Result<Outcome> {
        let last = self.last_event(run).await?;
        let how = last
            .filter(|event| event.kind.is_terminal())
            .map(|event| format!(": {}", output::describe(&event.kind)))
            .unwrap_or_default();
        println!("run {} {}{how}", run.run_id, run.state);
        Ok(Outcome::from(run.state))
    }

    /// Writes artifact `name` of run `id`, its raw bytes, to `out`.
    async fn artifact(&self, id: &RunId, name: &str, out: &mut dyn Write) -> anyhow::Result<u64> {
        let log = match self {
            Store::Server { api, .. } => return api.artifact(id, name, out).await,
            Store::Log { log, .. } => log,
        };
        let found = log.artifact(id, name).await.map_err(|error| {
            anyhow::anyhow!("{error}: its artifact events name its files (`weir runs events {id}`)")
        })?;
        let mut offset = 0;
        while offset < found.bytes {
            let end = (offset + ARTIFACT_CHUNK).min(found.bytes);
            let chunk = log.read_artifact(id, name, offset..end).await?;
            if chunk.is_empty() {
                bail!(
                    "artifact {name:?} of run {id} ended at {offset} of its {} bytes",
                    found.bytes
                );
            }
            out.write_all(&chunk)?;
            offset += chunk.len() as u64;
        }
        Ok(offset)
    }
}

#[cfg(feature = "redis")]
fn redis_url(redis: &store::Redis) -> &str {
    redis.url()
}

#[cfg(not(feature = "redis"))]
fn redis_url(redis: &store::Redis) -> &str {
    match *redis {}
}

fn print_event(out: &mut impl Write, event: &RunEvent, json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(event)?)?;
    } else {
        writeln!(out, "{}", output::event_line(event))?;
    }
    Ok(())
}
