//! A native MCP client that reads `weir serve`'s streaming fixture as fast
//! as it can, so that the figures are the server's: over stdio and
//! Streamable HTTP, items per second of wall time and, the figure that
//! holds on a busy machine, items per second of the server's CPU.
//!
//! For each transport × workload it starts a fresh `weir serve --memory
//! --fixtures` (or, `--sqlite`, on a fresh data directory), sets the session
//! up, makes one warm-up `tools/call stream` whose every item is checked in
//! full, then `--reps` measured calls, each checked for dense seqs from 0,
//! its first and last item in full, and its final result. Prints a markdown
//! table on stdout, progress on stderr; `--help` for the flags. See
//! bench/reader/README.md.

mod call;
mod concurrent;
mod http;
mod lines;
mod pool;
mod push;
mod server;
mod stdio;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use call::Call;
use http::{Era, HttpClient};
use server::{Server, own_cpu_ns, ticks_per_second};
use stdio::StdioClient;

const USAGE: &str = "usage: weir-bench-reader --weir PATH [--transports stdio,http,http-stateless]
           [--workloads 20000x100,2000x1000,200000x100] [--reps 5] [--json FILE] [--sqlite] [--perf DIR]

  stdio            weir serve --stdio, JSON-RPC lines (2025-11-25, initialize)
  http             weir serve --http, 2025-11-25 with initialize and a session
  http-stateless   weir serve --http, 2026-07-28: no initialize, revision and capabilities in _meta
  --sqlite         runs in SQLite (weir's default store, a fresh data directory per row), not --memory
  --perf DIR       perf record the server during the measured calls (figures then not for quoting)

  --concurrent N   instead of the table: N calls at once, one connection each, read by one thread
                   with epoll (HTTP transports only; default http,http-stateless), then every run's
                   log read back over the runs API. With:
  --count 200 --size 100 --interval-ms 10   the stream fixture's arguments for each call";

/// The revision of `initialize` over stdio and session HTTP.
pub const SESSION_VERSION: &str = "2025-11-25";

/// A way to reach the server.
pub trait Transport {
    /// Whatever comes before calls (`initialize`, in the session era).
    fn open(&mut self) -> Result<(), String>;
    /// A fresh request id.
    fn next_id(&mut self) -> u64;
    /// Sends `call`'s `tools/call` with id `id` (setting `call.sent_at`)
    /// and hands every message of its stream to `call` until the response
    /// (over HTTP: until the response stream ends).
    fn stream(&mut self, call: &mut Call, id: u64) -> Result<(), String>;
}

pub fn client_info() -> Value {
    json!({ "name": "weir-bench-reader", "version": "1" })
}

pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": SESSION_VERSION,
        "capabilities": { "partialResults": {} },
        "clientInfo": client_info(),
    })
}

pub fn check_initialized(reply: &Value) -> Result<(), String> {
    match reply["result"]["protocolVersion"].as_str() {
        Some(SESSION_VERSION) => Ok(()),
        _ => Err(format!("initialize: {reply}")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http(Era),
}

impl Kind {
    fn parse(name: &str) -> Result<Kind, String> {
        match name {
            "stdio" => Ok(Kind::Stdio),
            "http" => Ok(Kind::Http(Era::Session)),
            "http-stateless" => Ok(Kind::Http(Era::Stateless)),
            other => Err(format!(
                "unknown transport {other:?}: use stdio, http (2025-11-25, with a session) or http-stateless (2026-07-28)"
            )),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http(Era::Session) => "HTTP 2025-11-25",
            Kind::Http(Era::Stateless) => "HTTP 2026-07-28",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http(Era::Session) => "http",
            Kind::Http(Era::Stateless) => "http-stateless",
        }
    }
}

struct Args {
    weir: PathBuf,
    kinds: Vec<Kind>,
    workloads: Vec<(u64, usize)>,
    reps: usize,
    json: Option<PathBuf>,
    perf: Option<PathBuf>,
    /// Runs in SQLite (a fresh data directory per row), not `--memory`.
    sqlite: bool,
    /// `--concurrent N`: N calls at once instead of the table.
    concurrent: Option<usize>,
    count: u64,
    size: usize,
    interval_ms: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        weir: PathBuf::new(),
        kinds: vec![
            Kind::Stdio,
            Kind::Http(Era::Session),
            Kind::Http(Era::Stateless),
        ],
        workloads: vec![(20_000, 100), (2_000, 1_000), (200_000, 100)],
        reps: 5,
        json: None,
        perf: None,
        sqlite: false,
        concurrent: None,
        count: 200,
        size: 100,
        interval_ms: 10,
    };
    let mut kinds_given = false;
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = || given.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--weir" => args.weir = value()?.into(),
            "--transports" => {
                kinds_given = true;
                args.kinds = value()?
                    .split(',')
                    .map(Kind::parse)
                    .collect::<Result<_, _>>()?
            }
            "--workloads" => {
                args.workloads = value()?
                    .split(',')
                    .map(|w| {
                        let (count, size) = w.split_once('x').ok_or("")?;
                        Ok::<_, &str>((
                            count.replace('_', "").parse().map_err(|_| "")?,
                            size.replace('_', "").parse().map_err(|_| "")?,
                        ))
                    })
                    .collect::<Result<_, _>>()
                    .map_err(|_| "--workloads takes COUNTxSIZE,… e.g. 20000x100,2000x1000")?
            }
            "--reps" => args.reps = value()?.parse().map_err(|_| "--reps takes a number")?,
            "--json" => args.json = Some(value()?.into()),
            "--perf" => args.perf = Some(value()?.into()),
            "--sqlite" => args.sqlite = true,
            "--concurrent" => {
                args.concurrent = Some(
                    value()?
                        .replace('_', "")
                        .parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or("--concurrent takes a number of calls, at least 1")?,
                )
            }
            "--count" => {
                args.count = value()?
                    .replace('_', "")
                    .parse()
                    .map_err(|_| "--count takes a number")?
            }
            "--size" => args.size = value()?.parse().map_err(|_| "--size takes a number")?,
            "--interval-ms" => {
                args.interval_ms = value()?
                    .parse()
                    .map_err(|_| "--interval-ms takes a number")?
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}; see --help")),
        }
    }
    if args.weir.as_os_str().is_empty() {
        return Err("--weir PATH is required (a release build of weir)".into());
    }
    if args.concurrent.is_some() {
        if !kinds_given {
            args.kinds = vec![Kind::Http(Era::Session), Kind::Http(Era::Stateless)];
        }
        if args.kinds.contains(&Kind::Stdio) {
            return Err("--concurrent is over HTTP: use --transports http,http-stateless".into());
        }
    }
    if args.reps == 0 {
        return Err("--reps must be at least 1".into());
    }
    Ok(args)
}

/// One measured call.
struct Sample {
    items: u64,
    wall_s: f64,
    first_item_ms: f64,
    server_cpu_ns: u64,
    server_ticks: u64,
    reader_cpu_ns: u64,
    slow_items: u64,
    others: u64,
}

impl Sample {
    fn items_per_s(&self) -> f64 {
        self.items as f64 / self.wall_s
    }
    fn server_ns_per_item(&self) -> f64 {
        self.server_cpu_ns as f64 / self.items as f64
    }
    fn reader_ns_per_item(&self) -> f64 {
        self.reader_cpu_ns as f64 / self.items as f64
    }
}

/// One transport × workload.
struct Row {
    kind: Kind,
    count: u64,
    size: usize,
    samples: Vec<Sample>,
    peak_rss_kib: u64,
    load: (f64, f64),
    error: Option<String>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

impl Row {
    fn median(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        median(self.samples.iter().map(f).collect())
    }
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn measure(args: &Args, kind: Kind, count: u64, size: usize) -> Row {
    let row = Row {
        kind,
        count,
        size,
        samples: Vec::new(),
        peak_rss_kib: 0,
        load: (load_average(), f64::NAN),
        error: None,
    };
    let data_dir = args.sqlite.then(|| {
        let dir = std::env::temp_dir().join(format!(
            "weir-reader-{}-{}-{count}x{size}",
            std::process::id(),
            kind.key()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    });
    let started = Server::start(&args.weir, kind == Kind::Stdio, data_dir.as_deref(), &[]);
    let row = measure_on(args, kind, count, size, started, row);
    if let Some(dir) = data_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    row
}

fn measure_on(
    args: &Args,
    kind: Kind,
    count: u64,
    size: usize,
    started: Result<Server, String>,
    mut row: Row,
) -> Row {
    let mut server = match started {
        Ok(server) => server,
        Err(error) => {
            row.error = Some(error);
            return row;
        }
    };
    if let Err(error) = run_calls(args, kind, count, size, &mut server, &mut row) {
        row.error = Some(format!("{error}\nserver stderr:\n{}", server.stderr_tail()));
    }
    row.peak_rss_kib = server.peak_rss_kib();
    row.load.1 = load_average();
    row
}

fn run_calls(
    args: &Args,
    kind: Kind,
    count: u64,
    size: usize,
    server: &mut Server,
    row: &mut Row,
) -> Result<(), String> {
    let mut client: Box<dyn Transport> = match kind {
        Kind::Stdio => {
            let (input, output) = server.pipes();
            Box::new(StdioClient::new(input, output))
        }
        Kind::Http(era) => Box::new(HttpClient::connect(server.port.expect("HTTP"), era)?),
    };
    client.open()?;
    // The warm-up: every item parsed and checked in full, not timed.
    let id = client.next_id();
    let mut warm = Call::new(id, count, size, true);
    client.stream(&mut warm, id)?;
    warm.check_end()?;
    let perf = match &args.perf {
        Some(dir) => Some(start_perf(dir, server.pid, kind, count, size)?),
        None => None,
    };
    for _ in 0..args.reps {
        let id = client.next_id();
        let mut call = Call::new(id, count, size, false);
        let (cpu0, ticks0, own0) = (server.cpu_ns(), server.stat_ticks(), own_cpu_ns());
        client.stream(&mut call, id)?;
        let (cpu1, ticks1, own1) = (server.cpu_ns(), server.stat_ticks(), own_cpu_ns());
        call.check_end()?;
        let sent = call.sent_at.expect("set by the transport");
        let (finished, _) = call.finished.as_ref().expect("checked");
        let first = call.first_item_at.unwrap_or(*finished);
        row.samples.push(Sample {
            items: call.items,
            wall_s: finished.duration_since(sent).as_secs_f64(),
            first_item_ms: first.duration_since(sent).as_secs_f64() * 1e3,
            server_cpu_ns: cpu1 - cpu0,
            server_ticks: ticks1 - ticks0,
            reader_cpu_ns: own1 - own0,
            slow_items: call.slow_items,
            others: call.others,
        });
    }
    if let Some(perf) = perf {
        stop_perf(perf);
    }
    Ok(())
}

/// `perf record` on the server for the measured calls (a profiled row's
/// figures are perf's as much as weir's: not for quoting).
fn start_perf(
    dir: &std::path::Path,
    pid: u32,
    kind: Kind,
    count: u64,
    size: usize,
) -> Result<std::process::Child, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let file = dir.join(format!("{}-{count}x{size}.perf.data", kind.key()));
    let child = Command::new("perf")
        .args(["record", "-F", "999", "--call-graph", "dwarf,32768", "-o"])
        .arg(&file)
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("perf record: {e}"))?;
    // perf prints nothing once attached; give it time to.
    std::thread::sleep(Duration::from_millis(500));
    eprintln!("    perf record → {}", file.display());
    Ok(child)
}

fn stop_perf(mut perf: std::process::Child) {
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    unsafe { libc::kill(perf.id() as libc::pid_t, libc::SIGINT) };
    let _ = perf.wait();
}

fn workload_name(count: u64, size: usize) -> String {
    format!("{} × {} B", thousands(count as f64), thousands(size as f64))
}

fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("weir-bench-reader: {error}");
            std::process::exit(2);
        }
    };
    if let Some(calls) = args.concurrent {
        main_concurrent(&args, calls);
        return;
    }
    let mut rows = Vec::new();
    for &(count, size) in &args.workloads {
        for &kind in &args.kinds {
            eprintln!("  {} {} …", kind.label(), workload_name(count, size));
            let row = measure(&args, kind, count, size);
            match &row.error {
                Some(error) => eprintln!("    ERROR {error}"),
                None => eprintln!(
                    "    {} items/s, {:.2} µs server CPU per item (calls: {})",
                    thousands(row.median(Sample::items_per_s)),
                    row.median(Sample::server_ns_per_item) / 1e3,
                    row.samples
                        .iter()
                        .map(|s| format!(
                            "{} /s {:.2} µs",
                            thousands(s.items_per_s()),
                            s.server_ns_per_item() / 1e3
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
            rows.push(row);
        }
    }
    print!("{}", markdown(&args, &rows));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&to_json(&args, &rows)).expect("serializes");
        if let Err(error) = std::fs::write(path, json + "\n") {
            eprintln!("weir-bench-reader: writing {}: {error}", path.display());
            std::process::exit(1);
        }
    }
    if rows.iter().any(|r| r.error.is_some()) {
        std::process::exit(1);
    }
}

/// `--concurrent N`: for each HTTP era, a fresh server, N calls at once.
fn main_concurrent(args: &Args, calls: usize) {
    let fd_limit = pool::raise_fd_limit();
    // A connection each on both ends, and the server's own files besides.
    if fd_limit < calls as u64 + 64 {
        eprintln!(
            "weir-bench-reader: {calls} connections need an open-file limit above {calls}; it is {fd_limit} \
             (raise the hard limit: ulimit -Hn, or /etc/security/limits.conf)"
        );
        std::process::exit(2);
    }
    let store = if args.sqlite { "sqlite" } else { "memory" };
    let mut reports = Vec::new();
    let mut failed = false;
    for &kind in &args.kinds {
        let Kind::Http(era) = kind else { continue };
        eprintln!(
            "  {calls} concurrent calls, {}, store {store} …",
            kind.label()
        );
        match concurrent_row(args, calls, era, fd_limit) {
            Ok(report) => {
                failed |= report.tally.failed > 0
                    || report.tally.lost > 0
                    || report.runs.bad > 0
                    || report.runs.listed != calls
                    || report.runs.checked != calls
                    || report.runs.calls_without_run > 0;
                print!("\n{}", concurrent::markdown(&report));
                for error in &report.errors {
                    println!("- {error}");
                }
                for problem in &report.runs.problems {
                    println!("- {problem}");
                }
                reports.push(concurrent::to_json(&report, store));
            }
            Err(error) => {
                eprintln!("    ERROR {error}");
                println!("\nError, {}: {error}", kind.label());
                reports.push(json!({ "transport": kind.key(), "store": store, "error": error }));
                failed = true;
            }
        }
    }
    if let Some(path) = &args.json {
        let json = json!({ "weir": args.weir.display().to_string(), "concurrent": reports });
        let text = serde_json::to_string_pretty(&json).expect("serializes");
        if let Err(error) = std::fs::write(path, text + "\n") {
            eprintln!("weir-bench-reader: writing {}: {error}", path.display());
            std::process::exit(1);
        }
    }
    if failed {
        std::process::exit(1);
    }
}

fn concurrent_row(
    args: &Args,
    calls: usize,
    era: Era,
    fd_limit: u64,
) -> Result<concurrent::Report, String> {
    let data_dir = args.sqlite.then(|| {
        let dir =
            std::env::temp_dir().join(format!("weir-reader-{}-concurrent", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    });
    // Every call runs at once: no slot to wait for, no queue to refuse from.
    let limits = [
        "--max-concurrent".to_owned(),
        calls.to_string(),
        "--max-queue".to_owned(),
        calls.to_string(),
    ];
    let server = Server::start(&args.weir, false, data_dir.as_deref(), &limits)?;
    let options = concurrent::Options {
        era,
        calls,
        count: args.count,
        size: args.size,
        interval_ms: args.interval_ms,
    };
    let report = concurrent::run(&options, &server, fd_limit)
        .map_err(|error| format!("{error}\nserver stderr:\n{}", server.stderr_tail()));
    drop(server);
    if let Some(dir) = data_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    report
}

fn markdown(args: &Args, rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "Medians of {} calls after a checked warm-up, a fresh server per row; store: {}.\n\n",
        args.reps,
        if args.sqlite { "SQLite" } else { "memory" }
    ));
    out.push_str(
        "| workload | transport | items/s (wall) | server CPU µs/item | items per server CPU-second | reader CPU µs/item | first item ms |\n\
         |---|---|--:|--:|--:|--:|--:|\n",
    );
    for row in rows {
        if row.error.is_some() {
            out.push_str(&format!(
                "| {} | {} | error | | | | |\n",
                workload_name(row.count, row.size),
                row.kind.label()
            ));
            continue;
        }
        let server_ns = row.median(Sample::server_ns_per_item);
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {} | {:.2} | {:.2} |\n",
            workload_name(row.count, row.size),
            row.kind.label(),
            thousands(row.median(Sample::items_per_s)),
            server_ns / 1e3,
            thousands(1e9 / server_ns),
            row.median(Sample::reader_ns_per_item) / 1e3,
            row.median(|s| s.first_item_ms),
        ));
    }
    let slow: u64 = rows
        .iter()
        .flat_map(|r| &r.samples)
        .map(|s| s.slow_items)
        .sum();
    let others: u64 = rows.iter().flat_map(|r| &r.samples).map(|s| s.others).sum();
    let (cpu_ns, ticks) = rows
        .iter()
        .flat_map(|r| &r.samples)
        .fold((0u64, 0u64), |(c, t), s| {
            (c + s.server_cpu_ns, t + s.server_ticks)
        });
    out.push_str(&format!(
        "\nServer CPU over all measured calls: {:.3} s by its CPU clock, {:.2} s by /proc/PID/stat \
         utime+stime. Items off the fast path: {slow}; other messages: {others}.\n",
        cpu_ns as f64 / 1e9,
        ticks as f64 / ticks_per_second() as f64,
    ));
    for row in rows {
        if let Some(error) = &row.error {
            out.push_str(&format!(
                "\nError, {} {}: {error}\n",
                row.kind.label(),
                workload_name(row.count, row.size)
            ));
        }
    }
    out
}

fn to_json(args: &Args, rows: &[Row]) -> Value {
    json!({
        "reps": args.reps,
        "weir": args.weir.display().to_string(),
        "profiled": args.perf.is_some(),
        "store": if args.sqlite { "sqlite" } else { "memory" },
        "rows": rows.iter().map(|row| json!({
            "transport": row.kind.key(),
            "count": row.count,
            "size": row.size,
            "error": row.error,
            "peak_rss_kib": row.peak_rss_kib,
            "loadavg_start": row.load.0,
            "loadavg_end": row.load.1,
            "median": if row.samples.is_empty() { Value::Null } else { json!({
                "items_per_s": row.median(Sample::items_per_s),
                "server_ns_per_item": row.median(Sample::server_ns_per_item),
                "items_per_server_cpu_s": 1e9 / row.median(Sample::server_ns_per_item),
                "reader_ns_per_item": row.median(Sample::reader_ns_per_item),
                "first_item_ms": row.median(|s| s.first_item_ms),
            })},
            "calls": row.samples.iter().map(|s| json!({
                "items": s.items,
                "wall_s": s.wall_s,
                "items_per_s": s.items_per_s(),
                "first_item_ms": s.first_item_ms,
                "server_cpu_ns": s.server_cpu_ns,
                "server_stat_ticks": s.server_ticks,
                "reader_cpu_ns": s.reader_cpu_ns,
                "slow_items": s.slow_items,
                "other_messages": s.others,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
