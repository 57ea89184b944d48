//! How events sit in a run's stream (issue 27): an append stores its
//! batch as a few entries, not one per event, and reads by seq stay exact
//! from any seq, whatever the limit; a run stored one event per entry (as
//! before 2026-11-27) still reads back exactly, and is continued.

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Completed, EventKind, RunEvent, RunId, RunState};
use weir_runtime::EventLog;
use weir_runtime::store_contract::support::{body_event, events, run_id, started};
use weir_store_redis::{RedisLog, RedisOptions};

use crate::server::{fresh_store, shared};

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(shared().url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// How many entries the run's stream holds.
async fn stream_entries(log: &RedisLog, run: &RunId) -> usize {
    let key = format!("{}events:{run}", log.prefix());
    redis::cmd("XLEN")
        .arg(key)
        .query_async(&mut raw().await)
        .await
        .unwrap()
}

/// `count` body events from `from` on (`from` 0: a `started` first).
fn batch(run: &RunId, from: u64, count: usize) -> Vec<RunEvent> {
    let kinds = (0..count as u64)
        .map(|i| match from + i {
            0 => started("t"),
            seq => body_event(seq as u8, seq),
        })
        .collect();
    events(run, from, kinds)
}

/// Every read from every seq, with limits around the sizes of entries,
/// answers exactly the log's events from there.
async fn assert_reads_exactly(log: &RedisLog, run: &RunId, all: &[RunEvent]) {
    for from in 0..=all.len() + 1 {
        for limit in [1, 2, 63, 64, 65, 130, 512] {
            let read = log.read(run, from as u64, limit).await.unwrap();
            let expected = &all[from.min(all.len())..(from + limit).min(all.len())];
            assert_eq!(read, expected, "from {from}, limit {limit}");
        }
    }
}

#[tokio::test]
async fn a_batch_is_a_few_stream_entries_and_reads_from_any_seq_are_exact() {
    let log = fresh_store(64);
    let run = run_id("entries");
    let mut all = Vec::new();
    let sizes = [200, 1, 3, 64, 65, 130];
    for size in sizes {
        let appended = batch(&run, all.len() as u64, size);
        log.append(appended.clone().into()).await.unwrap();
        all.extend(appended);
    }
    let entries = stream_entries(&log, &run).await;
    // One event per entry would be 463 entries; a batch is a few.
    assert!(
        entries >= sizes.len() && entries <= 2 * sizes.len() + 4,
        "{} events in {entries} entries",
        all.len()
    );
    assert_reads_exactly(&log, &run, &all).await;
}

#[tokio::test]
async fn a_run_stored_one_event_per_entry_reads_back_exactly_and_is_continued() {
    let log = fresh_store(64);
    let run = run_id("old");
    let old = batch(&run, 0, 10);
    // As weir stored runs before 2026-11-27: entry `<seq + 1>-0` with the
    // event's ts and its kind as JSON.
    let prefix = log.prefix();
    let mut plant = redis::pipe();
    for event in &old {
        plant
            .cmd("XADD")
            .arg(format!("{prefix}events:{run}"))
            .arg(format!("{}-0", event.seq + 1))
            .arg("ts")
            .arg(event.ts)
            .arg("k")
            .arg(serde_json::to_string(&event.kind).unwrap());
    }
    plant
        .cmd("HSET")
        .arg(format!("{prefix}run:{run}"))
        .arg(&[
            ("tool", "t"),
            ("arguments", "{}"),
            ("node", "test"),
            ("created_ts", "1000"),
            ("updated_ts", "1009"),
            ("events", "10"),
            ("state", "working"),
        ])
        .cmd("ZADD")
        .arg(format!("{prefix}runs"))
        .arg(1000)
        .arg(run.as_str())
        .cmd("ZADD")
        .arg(format!("{prefix}open"))
        .arg(1000)
        .arg(run.as_str());
    let () = plant.query_async(&mut raw().await).await.unwrap();
    assert_reads_exactly(&log, &run, &old).await;

    // A node continues it: new events as batches after the old entries.
    let mut all = old;
    let more = batch(&run, 10, 100);
    log.append(more.clone().into()).await.unwrap();
    all.extend(more);
    let done = events(&run, 110, vec![EventKind::Completed(Completed::default())]);
    log.append(done.clone().into()).await.unwrap();
    all.extend(done);
    assert_eq!(stream_entries(&log, &run).await, 10 + 2 + 1);
    assert_reads_exactly(&log, &run, &all).await;
    let summary = log.get_run(&run).await.unwrap().unwrap();
    assert_eq!((summary.events, summary.state), (111, RunState::Completed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_reaches_a_follower_on_another_node_whole_and_in_order() {
    let a = fresh_store(64);
    let b = Arc::new(
        RedisLog::open(
            a.url(),
            RedisOptions {
                prefix: a.prefix().to_owned(),
                live_capacity: 64,
            },
        )
        .unwrap(),
    );
    let run = run_id("announced");
    a.append(batch(&run, 0, 1).into()).await.unwrap();
    let mut on_b = b.subscribe_from(&run, 0);
    assert_eq!(on_b.next().await.unwrap().unwrap().seq, 0);
    // Several entries in one append, one announcement.
    let big = batch(&run, 1, 300);
    a.append(big.clone().into()).await.unwrap();
    let mut got = Vec::new();
    while got.len() < big.len() {
        let event = tokio::time::timeout(Duration::from_secs(5), on_b.next())
            .await
            .expect("B gets the batch")
            .unwrap()
            .unwrap();
        got.push(event.to_event());
    }
    assert_eq!(got, big);
}
