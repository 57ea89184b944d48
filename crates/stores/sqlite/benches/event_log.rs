//! Hot paths of the event log (criterion).
//!
//! - `fanout/memory/{1,16}`: append 100,000 events in batches of 256 to a
//!   `MemoryLog` while 1 or 16 live subscribers read every event through
//!   `Subscription`; time until the last subscriber has the terminal event.
//! - `sqlite_append/batch=N`: durable appends to a fresh `SqliteLog` file.
//!
//! Events are built before the clock starts: this measures the log, not
//! `format!`. Run: `cargo bench -p weir-store-sqlite --bench event_log`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use weir_core::{Canceled, Content, EventKind, Partial, RunEvent, RunId, Started};
use weir_runtime::log::NewRun;
use weir_runtime::{EventLog, MemoryLog};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

const EVENTS: u64 = 100_000;

fn run_events(run_id: &RunId, count: u64) -> Vec<RunEvent> {
    (0..count)
        .map(|seq| RunEvent {
            run_id: run_id.clone(),
            seq,
            ts: 1_700_000_000_000 + seq,
            kind: match seq {
                0 => EventKind::Started(Started {
                    tool: "bench".into(),
                    arguments: json!({}),
                    node: "bench".into(),
                }),
                _ if seq == count - 1 => EventKind::Canceled(Canceled {
                    reason: "end".into(),
                }),
                // ~100 bytes of JSON, like a line of output.
                _ => EventKind::Partial(Partial {
                    content: vec![Content::text(format!(
                        "{seq:>12} the quick brown fox jumps over the lazy dog 0123456789"
                    ))],
                    ..Partial::default()
                }),
            },
        })
        .collect()
}

fn batches(events: Vec<RunEvent>, size: usize) -> Vec<Arc<[RunEvent]>> {
    events
        .chunks(size)
        .map(|chunk| Arc::from(chunk.to_vec()))
        .collect()
}

fn fanout(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("fanout/memory");
    group.throughput(Throughput::Elements(EVENTS));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for subscribers in [1usize, 16] {
        group.bench_with_input(
            BenchmarkId::from_parameter(subscribers),
            &subscribers,
            |b, &subscribers| {
                b.to_async(&runtime).iter_custom(|iterations| async move {
                    let mut total = Duration::ZERO;
                    for i in 0..iterations {
                        let run_id = RunId::parse(&format!("r{i}")).unwrap();
                        let prepared = batches(run_events(&run_id, EVENTS), 256);
                        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::with_live_capacity(1024));
                        // Registered first, so subscribers can start before `started`.
                        log.create_run(NewRun {
                            run_id: run_id.clone(),
                            tool: "bench".into(),
                            arguments: json!({}),
                            node: "bench".into(),
                            ts: 0,
                            owner: None,
                            client: None,
                            parent: None,
                            resume_record: None,
                        })
                        .await
                        .unwrap();
                        let start = Instant::now();
                        let readers: Vec<_> = (0..subscribers)
                            .map(|_| {
                                let mut subscription = log.subscribe_from(&run_id, 0);
                                tokio::spawn(async move {
                                    let mut count = 0u64;
                                    while let Some(event) = subscription.next().await {
                                        event.unwrap();
                                        count += 1;
                                    }
                                    count
                                })
                            })
                            .collect();
                        for batch in prepared {
                            log.append(batch).await.unwrap();
                        }
                        for reader in readers {
                            assert_eq!(reader.await.unwrap(), EVENTS);
                        }
                        total += start.elapsed();
                    }
                    total
                });
            },
        );
    }
    group.finish();
}

fn sqlite_append(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("sqlite_append");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (batch_size, count) in [(1000usize, EVENTS), (100, EVENTS), (1, 10_000)] {
        group.throughput(Throughput::Elements(count));
        group.bench_with_input(
            BenchmarkId::new("batch", batch_size),
            &batch_size,
            |b, &batch_size| {
                b.to_async(&runtime).iter_custom(|iterations| async move {
                    let mut total = Duration::ZERO;
                    for i in 0..iterations {
                        let dir = tempfile::tempdir().unwrap();
                        let log =
                            SqliteLog::open(dir.path().join("weir.db"), SqliteOptions::default())
                                .unwrap();
                        let run_id = RunId::parse(&format!("r{i}")).unwrap();
                        let prepared = batches(run_events(&run_id, count), batch_size);
                        let start = Instant::now();
                        for batch in prepared {
                            log.append(batch).await.unwrap();
                        }
                        total += start.elapsed();
                    }
                    total
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, fanout, sqlite_append);
criterion_main!(benches);
