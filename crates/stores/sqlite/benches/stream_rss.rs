//! Peak memory while one run streams N events to a live subscriber.
//!
//! A real tool emits N `partial` events (~100 bytes of JSON each) through
//! `RunContext` as fast as it can; the scheduler's writer appends them to a
//! `SqliteLog`; one `Subscription` reads every one of them live. Each N runs
//! in a fresh child process so its peak RSS (VmHWM) is its own.
//!
//! Run: `cargo bench -p weir-store-sqlite --bench stream_rss` (default N: 1M, 3M,
//! 10M), or name counts: `cargo bench -p weir-store-sqlite --bench stream_rss -- 100000`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, Partial, RunError};
use weir_runtime::{EventLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

struct Firehose;

#[async_trait]
impl Tool for Firehose {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            "firehose",
            "emits n partial events",
            json!({"type": "object"}),
        )
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let n = args["n"].as_u64().unwrap_or(0);
        for i in 0..n {
            let line = format!("{i:>12} the quick brown fox jumps over the lazy dog 0123456789");
            let _ = ctx
                .emit(Partial {
                    content: vec![Content::text(line)],
                    ..Partial::default()
                })
                .await;
        }
        Ok(Completed::default())
    }
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

fn child(n: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let log: Arc<dyn EventLog> = Arc::new(
            SqliteLog::open(dir.path().join("weir.db"), SqliteOptions::default()).unwrap(),
        );
        let config = SchedulerConfig {
            retention: None,
            ..SchedulerConfig::default()
        };
        let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Firehose)], config)
            .await
            .unwrap();
        let baseline = peak_rss_kib();
        let start = Instant::now();
        let run = scheduler
            .submit("firehose", json!({ "n": n }), RunOptions::default())
            .await
            .unwrap();
        let mut subscription = log.subscribe_from(run.run_id(), 0);
        let mut received = 0u64;
        while let Some(event) = subscription.next().await {
            event.unwrap();
            received += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        assert_eq!(received, n + 2, "started + n partials + completed");
        println!(
            "{}",
            json!({
                "events": n,
                "seconds": seconds,
                "events_per_s": n as f64 / seconds,
                "baseline_rss_mib": baseline as f64 / 1024.0,
                "peak_rss_mib": peak_rss_kib() as f64 / 1024.0,
            })
        );
    });
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if let Some(n) = std::env::var("WEIR_RSS_CHILD")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        return child(n);
    }
    let counts: Vec<u64> = if args.is_empty() {
        vec![1_000_000, 3_000_000, 10_000_000]
    } else {
        args.iter().filter_map(|a| a.parse().ok()).collect()
    };
    println!(
        "{:>12}  {:>9}  {:>12}  {:>13}",
        "events", "seconds", "events/s", "peak RSS MiB"
    );
    for n in counts {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .env("WEIR_RSS_CHILD", n.to_string())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        println!(
            "{:>12}  {:>9.1}  {:>12.0}  {:>13.1}",
            n,
            report["seconds"].as_f64().unwrap(),
            report["events_per_s"].as_f64().unwrap(),
            report["peak_rss_mib"].as_f64().unwrap()
        );
    }
}
