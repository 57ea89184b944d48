//! `--concurrent N`: N `tools/call stream` at once through one `weir serve
//! --http`, each on its own keep-alive connection, read by one thread
//! ([`Pool`]); then every run's log is read back over the runs API.
//!
//! Per call: every item in order with dense seqs (first and last in full),
//! and its final result (`structuredContent.count`). Per run, from
//! `GET /api/runs` and `GET /api/runs/{id}/events`: exactly one terminal
//! event, the last, `completed`; `started` first; the items in order with
//! their exact text. Figures: time to first item (p50, p99, max), total
//! time, items/s, and the server's peak RSS (`VmHWM`).

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Value, json};

use crate::call::{Call, item_text};
use crate::http::{Era, call_meta, post_bytes};
use crate::pool::{Done, Job, Pool, get_bytes};
use crate::server::Server;

pub struct Options {
    pub era: Era,
    pub calls: usize,
    pub count: u64,
    pub size: usize,
    pub interval_ms: u64,
}

/// What became of one call.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub items: u64,
    /// Seconds from the write of the `tools/call` to item 0.
    pub first_item_s: Option<f64>,
    /// Seconds from the write to the response.
    pub done_s: Option<f64>,
    pub run_id: Option<String>,
    pub error: Option<String>,
}

/// The calls, summed up.
#[derive(Debug, PartialEq)]
pub struct Tally {
    pub calls: usize,
    /// Every item in order and the final result.
    pub complete: usize,
    pub failed: usize,
    pub items: u64,
    /// Items a call should have had and did not (a failed call's missing
    /// ones included).
    pub lost: u64,
    pub first_item_ms: Percentiles,
    pub done_ms: Percentiles,
}

#[derive(Debug, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// How many values they are of.
    pub n: usize,
}

/// The nearest-rank percentile `p` (0-100) of sorted `values`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn percentiles(mut values: Vec<f64>) -> Percentiles {
    values.sort_by(f64::total_cmp);
    Percentiles {
        p50: percentile(&values, 50.0),
        p99: percentile(&values, 99.0),
        max: values.last().copied().unwrap_or(f64::NAN),
        n: values.len(),
    }
}

pub fn tally(outcomes: &[Outcome], count: u64) -> Tally {
    let complete = outcomes.iter().filter(|o| o.error.is_none()).count();
    Tally {
        calls: outcomes.len(),
        complete,
        failed: outcomes.len() - complete,
        items: outcomes.iter().map(|o| o.items).sum(),
        lost: outcomes.iter().map(|o| count.saturating_sub(o.items)).sum(),
        first_item_ms: percentiles(
            outcomes
                .iter()
                .filter_map(|o| o.first_item_s)
                .map(|s| s * 1e3)
                .collect(),
        ),
        done_ms: percentiles(
            outcomes
                .iter()
                .filter_map(|o| o.done_s)
                .map(|s| s * 1e3)
                .collect(),
        ),
    }
}

/// What one run's log says, read back from the runs API.
#[derive(Debug, Default, PartialEq)]
pub struct LogCheck {
    pub events: usize,
    pub items: u64,
    pub terminals: usize,
    pub terminal: Option<String>,
    pub problems: Vec<String>,
}

const TERMINAL: [&str; 3] = ["completed", "failed", "canceled"];

/// Checks a stream run's log: seqs dense from 0, `started` first, items
/// `0..count` in order with their exact text, exactly one terminal event,
/// last, and `completed`.
pub fn check_log(events: &[Value], count: u64, size: usize) -> LogCheck {
    let mut check = LogCheck {
        events: events.len(),
        ..LogCheck::default()
    };
    for (i, event) in events.iter().enumerate() {
        if event["seq"] != i as u64 {
            check
                .problems
                .push(format!("seq {} at position {i}", event["seq"]));
            break;
        }
    }
    if events.first().is_none_or(|e| e["type"] != "started") {
        check
            .problems
            .push("the log does not begin with started".into());
    }
    for event in events {
        let kind = event["type"].as_str().unwrap_or("");
        if TERMINAL.contains(&kind) {
            check.terminals += 1;
            check.terminal = Some(kind.to_owned());
        } else if kind == "partial" {
            let want = json!([{ "type": "text", "text": item_text(check.items, size) }]);
            if event["content"] != want && check.problems.len() < 5 {
                check
                    .problems
                    .push(format!("item {} is not as expected: {event}", check.items));
            }
            check.items += 1;
        }
    }
    if check.terminals != 1 {
        check
            .problems
            .push(format!("{} terminal events", check.terminals));
    }
    if events
        .last()
        .is_some_and(|e| !TERMINAL.contains(&e["type"].as_str().unwrap_or("")))
    {
        check.problems.push("the last event is not terminal".into());
    }
    if check.terminal.as_deref() != Some("completed") {
        check
            .problems
            .push(format!("ended {:?}, not completed", check.terminal));
    }
    if check.items != count {
        check.problems.push(format!(
            "{} items in the log, expected {count}",
            check.items
        ));
    }
    check
}

/// The runs, summed up.
#[derive(Debug, Default, PartialEq)]
pub struct RunsTally {
    /// Runs the runs API lists.
    pub listed: usize,
    /// Runs whose log was read and checked.
    pub checked: usize,
    pub one_terminal: usize,
    pub not_one_terminal: usize,
    /// Runs with any problem (not one terminal included).
    pub bad: usize,
    /// Calls whose run (named by their SSE event ids) is not in the list.
    pub calls_without_run: usize,
    pub problems: Vec<String>,
}

/// Everything the mode measured.
pub struct Report {
    pub era: Era,
    pub calls: usize,
    pub count: u64,
    pub size: usize,
    pub interval_ms: u64,
    pub fd_limit: u64,
    pub setup_s: f64,
    /// From the first `tools/call` written to the last response read.
    pub total_s: f64,
    /// Seconds to write all the `tools/call`s.
    pub send_s: f64,
    pub tally: Tally,
    pub runs: RunsTally,
    pub verify_s: f64,
    pub peak_rss_kib: u64,
    /// The most `VmRSS` sampled during the calls, and after them.
    pub rss_during_kib: u64,
    pub rss_after_kib: u64,
    pub rss_idle_kib: u64,
    pub server_cpu_s: f64,
    pub reader_cpu_s: f64,
    pub load: (f64, f64),
    /// The first errors of failed calls, for the report.
    pub errors: Vec<String>,
}

pub fn run(options: &Options, server: &Server, fd_limit: u64) -> Result<Report, String> {
    let port = server.port.ok_or("the concurrent mode needs HTTP")?;
    let load_start = crate::load_average();
    let rss_idle_kib = server.rss_kib();
    let setup = Instant::now();
    let mut pool = Pool::connect(port, options.calls)?;
    eprintln!(
        "    {} connections open in {:.1} s",
        pool.len(),
        setup.elapsed().as_secs_f64()
    );
    let sessions = open_sessions(&mut pool, options.era)?;
    let setup_s = setup.elapsed().as_secs_f64();
    if sessions.iter().any(Option::is_some) {
        eprintln!("    each initialized into its own session; set up in {setup_s:.1} s");
    }

    let mut outcomes = vec![Outcome::default(); options.calls];
    let (cpu0, own0) = (server.cpu_ns(), crate::server::own_cpu_ns());
    let started = Instant::now();
    for (i, session) in sessions.iter().enumerate() {
        // Ids unique over the whole run, so every token is too.
        let id = i as u64 + 1;
        let call = Call::new(id, options.count, options.size, false);
        let mut params = call.params(call_meta(options.era));
        params["arguments"]["interval_ms"] = json!(options.interval_ms);
        let request =
            json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
        let bytes = post_bytes(pool.host(), options.era, session.as_deref(), &request);
        pool.send(i, bytes, Job::call(call))?;
    }
    let send_s = started.elapsed().as_secs_f64();
    let mut rss_during_kib = 0;
    let mut finished = 0usize;
    pool.run(
        |done| {
            let conn = done.conn;
            outcomes[conn] = outcome(done);
            finished += 1;
            if finished.is_multiple_of(1000) {
                eprintln!(
                    "    {finished} calls done at {:.1} s",
                    started.elapsed().as_secs_f64()
                );
            }
            None
        },
        || rss_during_kib = rss_during_kib.max(server.rss_kib()),
    )?;
    let total_s = started.elapsed().as_secs_f64();
    let (cpu1, own1) = (server.cpu_ns(), crate::server::own_cpu_ns());
    let rss_after_kib = server.rss_kib();
    let tally = tally(&outcomes, options.count);
    eprintln!(
        "    {} of {} calls complete in {total_s:.1} s, {} items lost; first item p50 {:.0} ms, p99 {:.0} ms",
        tally.complete, tally.calls, tally.lost, tally.first_item_ms.p50, tally.first_item_ms.p99
    );

    let verify = Instant::now();
    let runs = verify_runs(&mut pool, &outcomes, options)?;
    let verify_s = verify.elapsed().as_secs_f64();
    eprintln!(
        "    runs: {} listed, {} checked, {} with exactly one terminal event, {} with a problem ({verify_s:.1} s)",
        runs.listed, runs.checked, runs.one_terminal, runs.bad
    );
    let errors = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.error.as_ref().map(|e| format!("call {}: {e}", i + 1)))
        .take(10)
        .collect();
    Ok(Report {
        era: options.era,
        calls: options.calls,
        count: options.count,
        size: options.size,
        interval_ms: options.interval_ms,
        fd_limit,
        setup_s,
        total_s,
        send_s,
        tally,
        runs,
        verify_s,
        peak_rss_kib: server.peak_rss_kib(),
        rss_during_kib,
        rss_after_kib,
        rss_idle_kib,
        server_cpu_s: (cpu1 - cpu0) as f64 / 1e9,
        reader_cpu_s: (own1 - own0) as f64 / 1e9,
        load: (load_start, crate::load_average()),
        errors,
    })
}

fn outcome(done: Done) -> Outcome {
    let Job::Call { call, sse, .. } = done.job else {
        return Outcome {
            error: Some("not a call".into()),
            ..Outcome::default()
        };
    };
    let sent = call.sent_at.expect("set by the pool");
    let error = done.error.or_else(|| call.check_end().err());
    Outcome {
        items: call.items,
        first_item_s: call
            .first_item_at
            .map(|at| at.duration_since(sent).as_secs_f64()),
        done_s: call
            .finished
            .as_ref()
            .map(|(at, _)| at.duration_since(sent).as_secs_f64()),
        run_id: sse
            .first_id
            .as_deref()
            .and_then(|id| id.rsplit_once('.'))
            .map(|(run, _)| run.to_owned()),
        error,
    }
}

/// In the session era, `initialize` and `notifications/initialized` on
/// every connection (not timed): each connection's session id.
fn open_sessions(pool: &mut Pool, era: Era) -> Result<Vec<Option<String>>, String> {
    let n = pool.len();
    if era == Era::Stateless {
        return Ok(vec![None; n]);
    }
    let mut sessions: Vec<Option<String>> = vec![None; n];
    let mut errors = Vec::new();
    for i in 0..n {
        let request = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": crate::initialize_params() });
        pool.send(
            i,
            post_bytes(pool.host(), era, None, &request),
            Job::reply(),
        )?;
    }
    pool.run(
        |done| {
            let session = match (&done.job, done.error) {
                (
                    Job::Reply {
                        head: Some(head), ..
                    },
                    None,
                ) if head.status == 200 => head.header("mcp-session-id").map(str::to_owned),
                (_, error) => {
                    errors.push(format!("initialize on connection {}: {error:?}", done.conn));
                    None
                }
            };
            sessions[done.conn] = session;
            None
        },
        || {},
    )?;
    if let Some(error) = errors.first() {
        return Err(format!(
            "{} of {n} initializes failed: {error}",
            errors.len()
        ));
    }
    let host = pool.host().to_owned();
    for (i, session) in sessions.iter().enumerate() {
        let session = session.as_deref().ok_or("initialize: no Mcp-Session-Id")?;
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        pool.send(
            i,
            post_bytes(&host, era, Some(session), &note),
            Job::reply(),
        )?;
    }
    pool.run(
        |done| {
            let accepted = matches!(&done.job, Job::Reply { head: Some(h), .. } if h.status == 202);
            if !accepted || done.error.is_some() {
                errors.push(format!(
                    "notifications/initialized on connection {}",
                    done.conn
                ));
            }
            None
        },
        || {},
    )?;
    match errors.first() {
        Some(error) => Err(format!("{} failed: {error}", errors.len())),
        None => Ok(sessions),
    }
}

/// Connections the read-back uses (of the pool's, already open).
const VERIFY_CONNS: usize = 32;

/// Lists every run (`GET /api/runs`, pages of 500), reads every run's log
/// (`GET /api/runs/{id}/events`) and checks it; also that each call's run
/// is among them.
fn verify_runs(
    pool: &mut Pool,
    outcomes: &[Outcome],
    options: &Options,
) -> Result<RunsTally, String> {
    let mut tally = RunsTally::default();
    let runs = list_runs(pool)?;
    tally.listed = runs.len();
    let listed: HashMap<&str, u64> = runs
        .iter()
        .map(|(id, events)| (id.as_str(), *events))
        .collect();
    tally.calls_without_run = outcomes
        .iter()
        .filter(|o| {
            o.run_id
                .as_deref()
                .is_none_or(|id| !listed.contains_key(id))
        })
        .count();

    let host = pool.host().to_owned();
    let mut queue = runs.iter().map(|(id, events)| (id.clone(), *events));
    let request_for = |queue: &mut dyn Iterator<Item = (String, u64)>| {
        queue.next().map(|(id, events)| {
            let limit = events.clamp(1, 1000);
            (
                get_bytes(&host, &format!("/api/runs/{id}/events?limit={limit}")),
                Job::reply(),
                id,
                events,
            )
        })
    };
    // Which run each connection is reading.
    let mut reading: HashMap<usize, (String, u64)> = HashMap::new();
    let usable = (0..pool.len()).take(VERIFY_CONNS).collect::<Vec<_>>();
    for i in usable {
        let Some((request, job, id, events)) = request_for(&mut queue) else {
            break;
        };
        if pool.send(i, request, job).is_ok() {
            reading.insert(i, (id, events));
        }
    }
    let mut failures = Vec::new();
    pool.run(
        |done| {
            let (id, events) = reading.remove(&done.conn).expect("a run per connection");
            let check = match (&done.job, &done.error) {
                (
                    Job::Reply {
                        head: Some(head),
                        body,
                    },
                    None,
                ) if head.status == 200 => read_events(body, events, options),
                (Job::Reply { head, body }, error) => LogCheck {
                    problems: vec![format!(
                        "GET events: HTTP {:?} {error:?}: {}",
                        head.as_ref().map(|h| h.status),
                        String::from_utf8_lossy(&body[..body.len().min(200)])
                    )],
                    ..LogCheck::default()
                },
                _ => unreachable!("only replies"),
            };
            tally.checked += 1;
            if check.terminals == 1 {
                tally.one_terminal += 1;
            } else {
                tally.not_one_terminal += 1;
            }
            if !check.problems.is_empty() {
                tally.bad += 1;
                if tally.problems.len() < 10 {
                    tally
                        .problems
                        .push(format!("run {id}: {}", check.problems.join("; ")));
                }
            }
            if done.error.is_some() {
                failures.push(done.conn);
                return None;
            }
            let (request, job, id, events) = request_for(&mut queue)?;
            reading.insert(done.conn, (id, events));
            Some((request, job))
        },
        || {},
    )?;
    if !failures.is_empty() {
        return Err(format!(
            "{} connections failed while reading the logs back",
            failures.len()
        ));
    }
    let left = queue.count();
    if left > 0 {
        return Err(format!("{left} runs' logs were not read"));
    }
    Ok(tally)
}

fn read_events(body: &[u8], events: u64, options: &Options) -> LogCheck {
    let page: Value = match serde_json::from_slice(body) {
        Ok(page) => page,
        Err(error) => {
            return LogCheck {
                problems: vec![format!("events page is not JSON: {error}")],
                ..LogCheck::default()
            };
        }
    };
    let list = page["events"].as_array().map_or(&[][..], Vec::as_slice);
    let mut check = check_log(list, options.count, options.size);
    if list.len() as u64 != events {
        check.problems.push(format!(
            "{} events read, the run list says {events}",
            list.len()
        ));
    }
    check
}

/// Every run, by `GET /api/runs?limit=500&cursor=…` on connection 0: ids
/// and event counts; each must be terminal.
fn list_runs(pool: &mut Pool) -> Result<Vec<(String, u64)>, String> {
    let host = pool.host().to_owned();
    let mut runs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/api/runs?limit=500&cursor={cursor}"),
            None => "/api/runs?limit=500".to_owned(),
        };
        pool.send(0, get_bytes(&host, &path), Job::reply())?;
        let mut page = Err("no answer".to_owned());
        pool.run(
            |done| {
                page = match (done.job, done.error) {
                    (
                        Job::Reply {
                            head: Some(head),
                            body,
                        },
                        None,
                    ) if head.status == 200 => {
                        serde_json::from_slice::<Value>(&body).map_err(|e| e.to_string())
                    }
                    (_, error) => Err(format!("GET {path}: {error:?}")),
                };
                None
            },
            || {},
        )?;
        let page = page?;
        for run in page["runs"].as_array().into_iter().flatten() {
            let id = run["run_id"].as_str().ok_or("a run without run_id")?;
            runs.push((id.to_owned(), run["events"].as_u64().unwrap_or(0)));
        }
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            return Ok(runs);
        }
    }
}

pub fn markdown(report: &Report) -> String {
    let t = &report.tally;
    let r = &report.runs;
    let mib = |kib: u64| kib as f64 / 1024.0;
    format!(
        "{calls} concurrent `tools/call stream` ({count} × {size} B, interval {interval} ms), {era}, one connection each \
         (open-file limit {fds}); set up in {setup:.1} s (not timed), all sent in {send:.2} s.\n\n\
         | calls complete | failed | items received | lost | runs listed | exactly one terminal event | runs with a problem | \
         first item p50 / p99 / max ms | call done p50 / max ms | total s | items/s | server peak RSS (VmHWM) | \
         server CPU s | reader CPU s |\n\
         |--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n\
         | {complete} | {failed} | {items} | {lost} | {listed} | {one} | {bad} | {f50:.0} / {f99:.0} / {fmax:.0} | \
         {d50:.0} / {dmax:.0} | {total:.2} | {rate:.0} | {peak:.0} MiB | {scpu:.1} | {rcpu:.1} |\n\n\
         Server RSS: idle {idle:.0} MiB, most sampled during the calls {during:.0} MiB, after them {after:.0} MiB. \
         Calls whose run was not listed: {orphans}. Logs read back in {verify:.1} s. \
         Load average {l0:.2} at the start, {l1:.2} at the end.\n",
        calls = report.calls,
        count = report.count,
        size = report.size,
        interval = report.interval_ms,
        era = match report.era {
            Era::Session => "MCP 2025-11-25 (a session per connection)",
            Era::Stateless => "MCP 2026-07-28 (stateless)",
        },
        fds = report.fd_limit,
        setup = report.setup_s,
        send = report.send_s,
        complete = t.complete,
        failed = t.failed,
        items = t.items,
        lost = t.lost,
        listed = r.listed,
        one = r.one_terminal,
        bad = r.bad,
        f50 = t.first_item_ms.p50,
        f99 = t.first_item_ms.p99,
        fmax = t.first_item_ms.max,
        d50 = t.done_ms.p50,
        dmax = t.done_ms.max,
        total = report.total_s,
        rate = t.items as f64 / report.total_s,
        peak = mib(report.peak_rss_kib),
        scpu = report.server_cpu_s,
        rcpu = report.reader_cpu_s,
        idle = mib(report.rss_idle_kib),
        during = mib(report.rss_during_kib),
        after = mib(report.rss_after_kib),
        orphans = r.calls_without_run,
        verify = report.verify_s,
        l0 = report.load.0,
        l1 = report.load.1,
    )
}

pub fn to_json(report: &Report, store: &str) -> Value {
    let t = &report.tally;
    let r = &report.runs;
    let p = |p: &Percentiles| json!({ "p50": p.p50, "p99": p.p99, "max": p.max, "n": p.n });
    json!({
        "mode": "concurrent",
        "store": store,
        "transport": match report.era { Era::Session => "http", Era::Stateless => "http-stateless" },
        "calls": report.calls,
        "count": report.count,
        "size": report.size,
        "interval_ms": report.interval_ms,
        "fd_limit": report.fd_limit,
        "setup_s": report.setup_s,
        "send_s": report.send_s,
        "total_s": report.total_s,
        "items_per_s": t.items as f64 / report.total_s,
        "complete": t.complete,
        "failed": t.failed,
        "items": t.items,
        "lost": t.lost,
        "first_item_ms": p(&t.first_item_ms),
        "done_ms": p(&t.done_ms),
        "runs": {
            "listed": r.listed,
            "checked": r.checked,
            "exactly_one_terminal": r.one_terminal,
            "not_one_terminal": r.not_one_terminal,
            "with_a_problem": r.bad,
            "calls_without_run": r.calls_without_run,
            "problems": r.problems,
        },
        "verify_s": report.verify_s,
        "peak_rss_kib": report.peak_rss_kib,
        "rss_idle_kib": report.rss_idle_kib,
        "rss_during_max_kib": report.rss_during_kib,
        "rss_after_kib": report.rss_after_kib,
        "server_cpu_s": report.server_cpu_s,
        "reader_cpu_s": report.reader_cpu_s,
        "loadavg_start": report.load.0,
        "loadavg_end": report.load.1,
        "errors": report.errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(count: u64, size: usize) -> Vec<Value> {
        let mut events = vec![json!({"seq": 0, "type": "started", "tool": "stream"})];
        for i in 0..count {
            events.push(json!({
                "seq": i + 1, "type": "partial",
                "content": [{"type": "text", "text": item_text(i, size)}],
            }));
        }
        events.push(json!({"seq": count + 1, "type": "completed", "result": {}}));
        events
    }

    #[test]
    fn a_whole_log_passes() {
        let check = check_log(&log(3, 12), 3, 12);
        assert_eq!(check.problems, Vec::<String>::new());
        assert_eq!((check.events, check.items, check.terminals), (5, 3, 1));
    }

    #[test]
    fn two_terminal_events_none_a_gap_or_a_wrong_item_are_problems() {
        let mut two = log(3, 12);
        two.push(json!({"seq": 5, "type": "failed", "error": {"code": "interrupted"}}));
        let check = check_log(&two, 3, 12);
        assert_eq!(check.terminals, 2);
        assert!(!check.problems.is_empty());

        let mut none = log(3, 12);
        none.pop();
        let check = check_log(&none, 3, 12);
        assert_eq!(check.terminals, 0);
        assert!(check.problems.iter().any(|p| p.contains("not terminal")));

        let mut gap = log(3, 12);
        gap.remove(2);
        assert!(!check_log(&gap, 3, 12).problems.is_empty());

        let mut wrong = log(3, 12);
        wrong[2]["content"][0]["text"] = json!("00000009:xxx");
        assert!(!check_log(&wrong, 3, 12).problems.is_empty());

        let mut failed = log(3, 12);
        failed[4] = json!({"seq": 4, "type": "failed", "error": {"code": "x"}});
        let check = check_log(&failed, 3, 12);
        assert_eq!(check.terminals, 1);
        assert!(check.problems.iter().any(|p| p.contains("not completed")));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&values, 100.0), 100.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    /// A call that failed short counts its missing items as lost, and its
    /// times only if it had them.
    #[test]
    fn the_tally_counts_lost_items_and_failures() {
        let ok = Outcome {
            items: 200,
            first_item_s: Some(0.010),
            done_s: Some(1.0),
            ..Outcome::default()
        };
        let short = Outcome {
            items: 150,
            first_item_s: Some(0.030),
            done_s: None,
            error: Some("the server closed the connection mid-response".into()),
            ..Outcome::default()
        };
        let refused = Outcome {
            error: Some("tools/call: HTTP 503".into()),
            ..Outcome::default()
        };
        let t = tally(&[ok.clone(), short, refused, ok], 200);
        assert_eq!((t.calls, t.complete, t.failed), (4, 2, 2));
        assert_eq!((t.items, t.lost), (550, 250));
        assert_eq!(t.first_item_ms.n, 3);
        assert_eq!(t.first_item_ms.p50, 10.0);
        assert_eq!(t.first_item_ms.max, 30.0);
        assert_eq!((t.done_ms.n, t.done_ms.max), (2, 1000.0));
    }
}
