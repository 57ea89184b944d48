//! One `execute_code` run: start the program, stream what it writes as it
//! writes it, report its progress, enforce the limits, and report how it
//! ended.

use std::process::ExitStatus;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use weir_core::{Completed, Content, FailureCode, Meta, ProgressUnit, RunError, Warning};
use weir_runtime::RunContext;

use super::Shared;
use super::args::Execute;
use super::jail::{Launch, MemoryReport, Running};
use super::output::{Encoding, Stream};
use weir_proc::{Chunk, signal_name};

mod pump;
use pump::Pump;

/// How long output may still arrive after the program ends, before what it
/// left running (and holding its output open) is killed.
const LINGER: Duration = Duration::from_millis(100);
/// How long to wait for the pipes to close after everything was killed,
/// before giving up on them (a process that escaped still holds them).
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long what is still alive when the program ends gets to go by itself
/// before it counts as left running (and is killed, and the result says
/// so). A process on its way out — exiting, or being reaped — goes within
/// it; so does everything in the sandbox, which bubblewrap ends with the
/// program (`--die-with-parent`: the sandbox's PID namespace is killed when
/// the bubblewrap that weir started exits, which it does as soon as the
/// program has). Counted at once instead, the sandbox's own first process,
/// still on its way out, made a five-line program that started nothing
/// "leave processes running" in a third of runs.
const SETTLE: Duration = Duration::from_millis(250);
/// How often, while what the program's end left settles, weir looks again.
const SETTLE_POLL: Duration = Duration::from_millis(10);

pub(crate) async fn execute(
    pack: &Shared,
    ctx: &RunContext,
    call: Execute,
) -> Result<Completed, RunError> {
    let language = pack.language(&call.language)?;
    let interpreter = language.found.as_ref().map_err(|reason| {
        RunError::new(
            FailureCode::ToolError,
            format!("{} is not available here: {reason}", language.spec.name),
        )
        .with_remediation("call list_languages to see what is installed")
    })?;
    let jail = &pack.jail;
    let mut cell = jail.cell(ctx.run_id().as_str()).map_err(setup_failed)?;
    cell.write(language.spec.file.as_ref(), call.code.as_bytes())
        .map_err(setup_failed)?;
    for (path, bytes) in &call.files {
        cell.write(path, bytes).map_err(setup_failed)?;
    }
    let config = &pack.config;
    let mut limits = jail.describe_limits();
    limits["timeout_s"] = call.timeout.as_secs_f64().into();
    limits["kill_grace_s"] = config.kill_grace.as_secs_f64().into();
    limits["output_bytes"] = config.max_output_bytes.into();
    let info = json!({
        "language": language.spec.name,
        "interpreter": interpreter.path.display().to_string(),
        "version": interpreter.version,
        "sandbox": jail.isolation().describe(),
        "run_as": jail.users().describe(),
        "workdir": cell.workdir().display().to_string(),
        "output_encoding": match call.encoding { Encoding::Utf8 => "utf8", Encoding::Base64 => "base64" },
        "limits": limits,
    });
    ctx.emit(Meta {
        total: None,
        backends: vec![jail.isolation().mode().to_owned()],
        info,
        progress_unit: Some(ProgressUnit::Lines),
    })
    .await?;

    let launch = Launch {
        program: interpreter.path.clone(),
        args: language.run_args(&call.args),
        env: call.env,
        stdin: call.stdin,
    };
    let started = Instant::now();
    let (running, chunks) = jail
        .spawn(cell, launch, call.timeout)
        .map_err(setup_failed)?;
    let mut pump = Pump::new(
        ctx,
        call.encoding,
        config.chunk_bytes,
        config.max_output_bytes,
    );
    let ended = supervise(pack, &mut pump, running, chunks, started, call.timeout).await?;
    pump.finish().await?;

    let report = pump.report();
    let signal = ended.signal.map(signal_name);
    let sandbox = jail.isolation().mode();
    let duration = ended.at - started;
    let mut summary = match (ended.exit_code, &signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by {signal}"),
        (None, None) => "ended".to_owned(),
    };
    summary.push_str(&format!(" after {:.2} s", duration.as_secs_f64()));
    if ended.timed_out {
        summary.push_str(&format!(
            "; timed out at {} s, sent {}",
            call.timeout.as_secs_f64(),
            ended.signals_sent.join(" then ")
        ));
    }
    if report.truncated {
        summary.push_str(&format!(
            "; output truncated: {} of {} bytes shown",
            report.shown,
            report.stdout + report.stderr
        ));
    }
    if let Some(kills @ 1..) = ended.memory.oom_kills {
        summary.push_str(&format!(
            "; the run reached its memory cap of {} MiB: the kernel killed {kills} of its processes",
            jail.limits().run_memory_bytes >> 20
        ));
    }
    if ended.leftovers_killed {
        summary.push_str("; processes it left running were killed");
    }
    summary.push_str(&format!("; sandbox: {sandbox}"));
    let result = Completed {
        content: vec![Content::text(format!("[{summary}]"))],
        structured: Some(json!({
            "language": language.spec.name,
            "exit_code": ended.exit_code,
            "signal": signal,
            "timed_out": ended.timed_out,
            "signals_sent": ended.signals_sent,
            "leftovers_killed": ended.leftovers_killed,
            "duration_ms": duration.as_millis() as u64,
            "stdout_bytes": report.stdout,
            "stderr_bytes": report.stderr,
            "shown_bytes": report.shown,
            "truncated": report.truncated,
            "output_limit_bytes": config.max_output_bytes,
            "invalid_utf8": report.invalid_utf8,
            "output_encoding": match call.encoding { Encoding::Utf8 => "utf8", Encoding::Base64 => "base64" },
            "sandbox": sandbox,
            "memory_peak_bytes": ended.memory.peak_bytes,
            "oom_kills": ended.memory.oom_kills,
        })),
    };
    match failure(&ended, signal.as_deref(), call.timeout) {
        Some(error) => Err(error.with_result(result)),
        None => Ok(result),
    }
}

/// Why a program that ran failed, if it did: it timed out, was killed by a
/// signal, or exited non-zero. Such a run ends `failed` with its whole
/// result (an MCP result marked `isError`, a plan step that failed and is
/// retried), so that neither a model nor a plan takes it for a success.
fn failure(ended: &Ended, signal: Option<&str>, timeout: Duration) -> Option<RunError> {
    if ended.timed_out {
        return Some(RunError::new(
            FailureCode::Timeout,
            format!(
                "the program timed out after {} s (sent {})",
                timeout.as_secs_f64(),
                ended.signals_sent.join(" then ")
            ),
        ));
    }
    let message = match (ended.exit_code, signal) {
        (Some(0), _) => return None,
        (Some(code), _) => format!("the program exited with code {code}"),
        (None, Some(signal)) => format!("the program was killed by {signal}"),
        (None, None) => return None,
    };
    Some(RunError::new(FailureCode::ToolError, message))
}

/// How the program ended, and what weir did to end it.
struct Ended {
    at: Instant,
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    signals_sent: Vec<&'static str>,
    leftovers_killed: bool,
    memory: MemoryReport,
}

/// Follows the program to its end: its output into `pump`, the deadline
/// (SIGTERM, then SIGKILL after the grace), and what it leaves running.
/// Returns once the program has ended and its output is read, with nothing
/// of it alive, and its directory removed.
async fn supervise(
    pack: &Shared,
    pump: &mut Pump<'_>,
    mut running: Running,
    mut chunks: mpsc::Receiver<Chunk<Stream>>,
    started: Instant,
    timeout: Duration,
) -> Result<Ended, RunError> {
    let config = &pack.config;
    let deadline = started + timeout;
    running.feed_stdin();
    let mut open = 2; // streams not yet at their end
    let mut stop = Stop::Running;
    let mut exit: Option<(ExitStatus, Instant)> = None;
    let mut timed_out = false;
    let mut leftovers_killed = false;
    let mut signals_sent = Vec::new();
    let mut last_read = Instant::now();
    loop {
        if open == 0 && exit.is_some() {
            break;
        }
        // When the next step of stopping is due, if any.
        let next_stop = match (stop, exit) {
            (Stop::Running, None) => Some(deadline),
            (Stop::Terminated { kill_at }, None) => Some(kill_at),
            (Stop::Running | Stop::Terminated { .. }, Some((_, at))) => Some(at + LINGER),
            (Stop::Settling { until }, _) => Some((Instant::now() + SETTLE_POLL).min(until)),
            (Stop::Draining, Some((_, at))) => {
                let quiet = last_read.max(at) + CLOSE_WAIT;
                Some(quiet.min(deadline.max(at + CLOSE_WAIT)))
            }
            (Stop::Killed { at }, _) => Some(at + CLOSE_WAIT),
            (Stop::Draining | Stop::Abandoned, _) => None,
        };
        tokio::select! {
            chunk = chunks.recv(), if open > 0 => match chunk {
                Some((stream, Some(bytes))) => {
                    last_read = Instant::now();
                    pump.bytes(stream, &bytes).await?;
                }
                Some((stream, None)) => {
                    open -= 1;
                    pump.end(stream).await?;
                }
                None => open = 0,
            },
            status = running.wait(), if exit.is_none() => {
                let status = status.map_err(|error| RunError::new(
                    FailureCode::Internal,
                    format!("could not wait for the program: {error}"),
                ))?;
                exit = Some((status, Instant::now()));
            }
            () = sleep_until(pump.idle_flush_at(config.idle_flush)) => {
                pump.flush_idle(config.idle_flush).await?;
            }
            () = sleep_until(pump.progress_due_at()) => {
                pump.report_progress().await?;
            }
            () = sleep_until(next_stop) => match (stop, exit) {
                (Stop::Running, None) => {
                    timed_out = true;
                    running.terminate();
                    signals_sent.push("SIGTERM");
                    stop = Stop::Terminated { kill_at: Instant::now() + config.kill_grace };
                    let why = format!("no end within {} s: sent SIGTERM", timeout.as_secs_f64());
                    pump.phase("timed out", why).await?;
                }
                (Stop::Terminated { .. }, None) => {
                    running.kill();
                    signals_sent.push("SIGKILL");
                    stop = Stop::Killed { at: Instant::now() };
                    let why = format!(
                        "still running {} s after SIGTERM: sent SIGKILL",
                        config.kill_grace.as_secs_f64()
                    );
                    pump.phase("killed", why).await?;
                }
                (Stop::Running | Stop::Terminated { .. }, Some(_)) => {
                    // The program ended and its output is still open: either
                    // weir is behind reading it, or something the program
                    // started holds it (or is on its way out: see SETTLE).
                    stop = if running.leftovers() {
                        Stop::Settling { until: Instant::now() + SETTLE }
                    } else {
                        Stop::Draining
                    };
                }
                (Stop::Settling { until }, _) => {
                    if !running.leftovers() {
                        stop = Stop::Draining;
                    } else if Instant::now() >= until {
                        running.kill();
                        leftovers_killed = true;
                        stop = Stop::Killed { at: Instant::now() };
                    }
                }
                (Stop::Draining | Stop::Killed { .. }, _) => {
                    // The output stays open, and quiet, with nothing of the
                    // run alive that weir can see: a process escaped it.
                    // Stop reading rather than wait for it.
                    stop = Stop::Abandoned;
                    if std::mem::take(&mut open) > 0 {
                        chunks.close();
                        pump.ctx.emit(Warning {
                            message: "a process outside the run's reach still held its output open after the program ended; the rest of its output is lost".into(),
                        }).await?;
                    }
                }
                (Stop::Abandoned, _) => {}
            }
        }
    }
    let (status, at) = exit.expect("the loop ends after the program");
    // What it left running with its output closed (or killed above): only
    // what is still there once the program's end has settled.
    if leftovers_killed || running.left_running(SETTLE, SETTLE_POLL).await {
        running.kill();
        leftovers_killed = true;
        let until = Instant::now() + CLOSE_WAIT;
        while running.leftovers() && Instant::now() < until {
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }
    let (exit_code, signal) = running.outcome(status);
    let memory = running.memory();
    drop(running); // kills anything left, removes the directory and the cgroup
    Ok(Ended {
        at,
        exit_code,
        signal,
        timed_out,
        signals_sent,
        leftovers_killed,
        memory,
    })
}

/// Where stopping the program stands.
#[derive(Clone, Copy, Debug)]
enum Stop {
    Running,
    /// SIGTERM sent; SIGKILL at `kill_at`.
    Terminated {
        kill_at: Instant,
    },
    /// The program ended, with processes of the run still alive: until
    /// `until`, they may yet go by themselves (see [`SETTLE`]).
    Settling {
        until: Instant,
    },
    /// The program ended, nothing of it is alive: reading what is left.
    Draining,
    /// SIGKILL sent at `at`.
    Killed {
        at: Instant,
    },
    /// Killed, and no longer reading pipes a process that escaped holds.
    Abandoned,
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn setup_failed(error: impl std::fmt::Display) -> RunError {
    RunError::new(
        FailureCode::ToolError,
        format!("the program could not be started: {error}"),
    )
    .with_remediation("check the server's log and the exec configuration; call again once fixed")
}
