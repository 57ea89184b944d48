//! Keys planted by anyone who can write to the Redis (issue 22, finding
//! 12): a run record that is not one under the run index is skipped by
//! listings and reported, never their failure; a key of another type
//! where weir keeps its indexes fails `ping` (so `weir serve --redis`
//! does not start) and every write on it with an error naming the key,
//! not a bare `WRONGTYPE`.

use std::sync::Arc;

use serde_json::json;
use weir_core::RunState;
use weir_runtime::log::{NewRun, RunFilter};
use weir_runtime::store_contract::support::{events, run_id, started};
use weir_runtime::{EventLog, LogError};
use weir_store_redis::RedisLog;

use crate::server::{fresh_store, shared};

/// A raw connection to the tests' server, to plant keys with.
async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(shared().url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn plant(args: &[&str]) {
    let mut conn = raw().await;
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    let _: redis::Value = command.query_async(&mut conn).await.unwrap();
}

fn new_run(id: &str, ts: u64) -> NewRun {
    NewRun {
        run_id: run_id(id),
        tool: "t".into(),
        arguments: json!({"n": 1}),
        node: "n1".into(),
        ts,
        owner: None,
        client: None,
        parent: None,
        resume_record: None,
    }
}

async fn store_with_two_runs() -> Arc<RedisLog> {
    let log = fresh_store(64);
    log.create_run(new_run("good1", 10)).await.unwrap();
    log.create_run(new_run("good2", 20)).await.unwrap();
    log.append(events(&run_id("good2"), 0, vec![started("t")]).into())
        .await
        .unwrap();
    log
}

fn listed(runs: &[weir_runtime::log::RunSummary]) -> Vec<String> {
    runs.iter().map(|run| run.run_id.to_string()).collect()
}

fn message(error: &LogError) -> String {
    error.to_string()
}

#[tokio::test]
async fn malformed_run_records_under_the_index_are_skipped_by_listings() {
    let log = store_with_two_runs().await;
    let p = log.prefix().to_owned();
    // Fields missing, garbage in every field, a string and a set where a
    // run's hash belongs, and an index entry that is no run id at all.
    plant(&["HSET", &format!("{p}run:bad1"), "tool", "x"]).await;
    plant(&[
        "HSET",
        &format!("{p}run:bad2"),
        "tool",
        "x",
        "arguments",
        "{not json",
        "node",
        "n",
        "state",
        "exploded",
        "events",
        "-1",
        "created_ts",
        "soon",
        "updated_ts",
        "x",
    ])
    .await;
    plant(&["SET", &format!("{p}run:bad3"), "a string"]).await;
    plant(&["SADD", &format!("{p}run:bad4"), "a set member"]).await;
    plant(&["HSET", &format!("{p}run:bad5"), "tool", "\u{0}\u{ff}"]).await;
    for (score, id) in [
        ("15", "bad1"),
        ("16", "bad2"),
        ("17", "bad3"),
        ("18", "bad4"),
        ("19", "bad5"),
        ("21", "not a run id!"),
    ] {
        plant(&["ZADD", &format!("{p}runs"), score, id]).await;
        plant(&["ZADD", &format!("{p}open"), score, id]).await;
    }
    let runs = log.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(listed(&runs), ["good2", "good1"]);
    let open = RunFilter {
        states: vec![RunState::Pending, RunState::Working],
        node: Some("n1".into()),
        ..RunFilter::default()
    };
    assert_eq!(
        listed(&log.list_runs(&open).await.unwrap()),
        ["good2", "good1"]
    );
    let limited = RunFilter {
        limit: Some(1),
        ..RunFilter::default()
    };
    assert_eq!(listed(&log.list_runs(&limited).await.unwrap()), ["good2"]);
    // Asked for by id, a malformed record is an error naming it; one of
    // the wrong type names its key and what belongs there.
    let bad = log.get_run(&run_id("bad2")).await.unwrap_err();
    assert!(message(&bad).contains("run bad2 has no valid"), "{bad}");
    let wrong = log.get_run(&run_id("bad3")).await.unwrap_err();
    assert!(
        message(&wrong).contains(&format!("the Redis key \"{p}run:bad3\" holds a string"))
            && message(&wrong).contains("a run's summary (a hash)"),
        "{wrong}"
    );
    // The good runs still take events; the store still answers ping.
    log.append(events(&run_id("good1"), 0, vec![started("t")]).into())
        .await
        .unwrap();
    log.ping().await.unwrap();
}

#[tokio::test]
async fn a_key_of_another_type_where_an_index_belongs_is_named_at_ping_and_on_writes() {
    for (key, kind) in [
        ("runs", "its index of every run (a sorted set)"),
        ("open", "its index of open runs (a sorted set)"),
        ("finished", "its index of ended runs (a sorted set)"),
        ("queue", "the queue of offered runs (a stream)"),
    ] {
        let log = fresh_store(64);
        let full = format!("{}{key}", log.prefix());
        log.ping().await.unwrap();
        plant(&["SET", &full, "planted"]).await;
        let error = log.ping().await.unwrap_err();
        let expected = format!("the Redis key \"{full}\" holds a string, where weir keeps {kind}");
        assert!(message(&error).contains(&expected), "{key}: {error}");
        assert!(message(&error).contains(&format!("DEL {full}")), "{error}");
        if key == "runs" || key == "open" {
            // A write that touches it says which key, not a bare WRONGTYPE.
            let created = log.create_run(new_run("r1", 1)).await.unwrap_err();
            assert!(message(&created).contains(&expected), "{key}: {created}");
            let listed = log.list_runs(&RunFilter::default()).await;
            if key == "runs" {
                let error = listed.unwrap_err();
                assert!(message(&error).contains(&expected), "{error}");
            } else {
                // The listing reads only the run index: it still answers.
                // (Redis keeps a script's writes before the failing one, so
                // the refused run may be listed, pending.)
                listed.unwrap();
            }
        }
        if key == "finished" {
            // Only a run's end touches it: the first append that ends one.
            log.create_run(new_run("r2", 1)).await.unwrap();
            let done = weir_core::EventKind::Completed(Default::default());
            let ended = log
                .append(events(&run_id("r2"), 0, vec![started("t"), done]).into())
                .await
                .unwrap_err();
            assert!(message(&ended).contains(&expected), "{ended}");
        }
        plant(&["DEL", &full]).await;
        log.ping().await.unwrap();
    }
}
