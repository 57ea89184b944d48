//! `execute_code` end to end (run with `cargo bench -p weir-pack-exec --bench exec`):
//!
//! 1. a Python program printing 1,000,000 short lines: the time until a
//!    reader has every line, against the same program writing to /dev/null
//!    (target: within 2×). The reader is the runtime's own subscriber and,
//!    when a release `weir` binary exists (`cargo build --release -p weir`),
//!    an MCP client of `weir serve --stdio` parsing every
//!    `notifications/tools/partial_result`;
//! 2. time to first line of a trivial program, with and without the sandbox.
//!
//! Medians of a few runs; wall-clock time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_core::{Content, EventKind};
use weir_pack_exec::{ExecConfig, ExecPack, SandboxMode};
use weir_runtime::{EventLog, MemoryLog, Pack, RunOptions, Scheduler, SchedulerConfig};

const LINES: u64 = 1_000_000;
const PRINT_LINES: &str = "for i in range(1000000):\n    print(i)";

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

async fn start(sandbox: SandboxMode) -> (Arc<dyn EventLog>, Scheduler, ExecPack) {
    let pack = ExecPack::detect(ExecConfig {
        sandbox,
        ..ExecConfig::default()
    })
    .await
    .expect("the exec pack starts");
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default())
        .await
        .unwrap();
    (log, scheduler, pack)
}

/// The interpreter `execute_code` uses for python.
async fn python(log: &Arc<dyn EventLog>, scheduler: &Scheduler) -> String {
    let run = scheduler
        .submit("list_languages", json!({}), RunOptions::default())
        .await
        .unwrap();
    let id = run.run_id().clone();
    run.finished().await;
    let events = log.read(&id, 0, 10).await.unwrap();
    let EventKind::Completed(completed) = &events.last().unwrap().kind else {
        panic!("list_languages failed")
    };
    completed.structured.as_ref().unwrap()["languages"][0]["interpreter"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Runs `code` and returns the times to the first line and to the last.
async fn through_runtime(
    log: &Arc<dyn EventLog>,
    scheduler: &Scheduler,
    code: &str,
    lines: u64,
) -> (Duration, Duration) {
    let started = Instant::now();
    let run = scheduler
        .submit(
            "execute_code",
            json!({"language": "python", "code": code}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let mut events = log.subscribe_from(run.run_id(), 0);
    let (mut seen, mut first) = (0, None);
    while let Some(event) = events.next().await {
        if let EventKind::Partial(partial) = &event.unwrap().kind {
            first.get_or_insert_with(|| started.elapsed());
            for block in &partial.content {
                if let Content::Text { text } = block {
                    seen += text.bytes().filter(|&b| b == b'\n').count() as u64;
                }
            }
            if seen >= lines {
                break;
            }
        }
    }
    let last = started.elapsed();
    run.finished().await;
    assert_eq!(seen, lines);
    (first.unwrap(), last)
}

/// `weir serve --stdio` and a client reading its partial results.
struct Served {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    id: u64,
}

impl Served {
    fn start(weir: &std::path::Path, sandbox: &str) -> Served {
        let mut child = Command::new(weir)
            .args(["serve", "--stdio", "--memory", "--exec-sandbox", sandbox])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut served = Served {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            id: 0,
        };
        served.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"partialResults": {}},
            "clientInfo": {"name": "bench", "version": "0"}}}),
        );
        served.read();
        served
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// Times to the first and the last line of `code`'s output.
    fn run(&mut self, code: &str, lines: u64) -> (Duration, Duration) {
        self.id += 1;
        let id = self.id;
        let started = Instant::now();
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "execute_code", "arguments": {"language": "python", "code": code},
            "_meta": {"partialResultToken": "bench"}}}),
        );
        let (mut seen, mut first, mut last) = (0, None, Duration::ZERO);
        loop {
            let message = self.read();
            if message["method"] == "notifications/tools/partial_result" {
                first.get_or_insert_with(|| started.elapsed());
                let text = message["params"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("");
                seen += text.bytes().filter(|&b| b == b'\n').count() as u64;
                if seen == lines {
                    last = started.elapsed();
                }
            } else if message["id"] == id {
                break;
            }
        }
        assert_eq!(seen, lines);
        (first.unwrap(), last)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (log, scheduler, pack) = start(SandboxMode::Auto).await;
        let (plain_log, plain_scheduler, _) = start(SandboxMode::Off).await;
        println!("exec: {}", pack.summary());
        let python = python(&log, &scheduler).await;

        // 1. One million lines.
        let dir = std::env::temp_dir().join(format!("weir-exec-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("lines.py");
        std::fs::write(&program, PRINT_LINES).unwrap();
        let devnull = median(
            (0..3)
                .map(|_| {
                    let started = Instant::now();
                    let status = Command::new(&python)
                        .arg("-u")
                        .arg(&program)
                        .env_clear()
                        .stdout(std::fs::File::create("/dev/null").unwrap())
                        .status()
                        .unwrap();
                    assert!(status.success());
                    started.elapsed()
                })
                .collect(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        println!("1M lines, {python} -u > /dev/null: {}", ms(devnull));
        for (name, log, scheduler) in [("sandbox", &log, &scheduler), ("no sandbox", &plain_log, &plain_scheduler)] {
            let mut samples = Vec::new();
            for _ in 0..3 {
                samples.push(through_runtime(log, scheduler, PRINT_LINES, LINES).await.1);
            }
            let took = median(samples);
            println!(
                "1M lines through the runtime ({name}): every line read after {} = {:.2}x /dev/null",
                ms(took),
                took.as_secs_f64() / devnull.as_secs_f64()
            );
        }
        let weir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/weir");
        if weir.exists() {
            for sandbox in ["auto", "off"] {
                let mut served = Served::start(&weir, sandbox);
                let took = median((0..3).map(|_| served.run(PRINT_LINES, LINES).1).collect());
                println!(
                    "1M lines through weir serve --stdio --exec-sandbox {sandbox}, MCP client: every line after {} = {:.2}x /dev/null",
                    ms(took),
                    took.as_secs_f64() / devnull.as_secs_f64()
                );
            }
        } else {
            println!("(no {}: `cargo build --release -p weir` for the MCP client numbers)", weir.display());
        }

        // 2. Time to first line.
        let trivial = "print('hi')";
        for (name, log, scheduler) in [("sandbox", &log, &scheduler), ("no sandbox", &plain_log, &plain_scheduler)] {
            let mut samples = Vec::new();
            for _ in 0..20 {
                samples.push(through_runtime(log, scheduler, trivial, 1).await.0);
            }
            println!("first line of print('hi') through the runtime ({name}): {}", ms(median(samples)));
        }
        if weir.exists() {
            for sandbox in ["auto", "off"] {
                let mut served = Served::start(&weir, sandbox);
                let took = median((0..20).map(|_| served.run(trivial, 1).0).collect());
                println!("first line of print('hi') through weir serve, MCP client (--exec-sandbox {sandbox}): {}", ms(took));
            }
        }
        let started = Instant::now();
        for _ in 0..20 {
            let output = Command::new(&python).args(["-u", "-c", trivial]).env_clear().output().unwrap();
            assert!(output.status.success());
        }
        println!("(for scale: {python} -c \"{trivial}\" alone, start to exit: {})", ms(started.elapsed() / 20));
    });
}
