//! What only a shared store promises: several handles (as on several
//! nodes) on one Redis — concurrent writers store exactly one terminal
//! event, a subscriber on one follows another's appends live, a retried
//! append whose answer was lost is not stored twice — and the nodes' leases:
//! a name is held once, and a dead node's runs are closed by a survivor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::{Canceled, Completed, EventKind, RunState};
use weir_runtime::store_contract::support::{body_event, events, run_id, started};
use weir_runtime::{EventLog, Scheduler, SchedulerConfig};
use weir_store_redis::{Node, NodeError, NodeOptions, RedisLog, RedisOptions};

use crate::server::shared;

/// Two handles on one fresh prefix: two nodes' views of one store.
fn two_nodes() -> (Arc<RedisLog>, Arc<RedisLog>) {
    let a = crate::server::fresh_store(64);
    let b = RedisLog::open(
        a.url(),
        RedisOptions {
            prefix: a.prefix().to_owned(),
            live_capacity: 64,
        },
    )
    .unwrap();
    (a, Arc::new(b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_on_two_nodes_store_exactly_one_terminal_event() {
    let _ = shared();
    for round in 0..20 {
        let (a, b) = two_nodes();
        let run = run_id(&format!("race{round}"));
        a.append(events(&run, 0, vec![started("t"), body_event(1, 1)]).into())
            .await
            .unwrap();
        let done = EventKind::Completed(Completed::default());
        let cancel = EventKind::Canceled(Canceled {
            reason: "other node".into(),
        });
        let (first, second) = tokio::join!(
            a.append(events(&run, 2, vec![done]).into()),
            b.append(events(&run, 2, vec![cancel]).into()),
        );
        assert!(
            first.is_ok() != second.is_ok(),
            "exactly one wins: {first:?} / {second:?}"
        );
        let log = a.read(&run, 0, 100).await.unwrap();
        assert_eq!(log.len(), 3);
        let terminals = log.iter().filter(|event| event.kind.is_terminal()).count();
        assert_eq!(terminals, 1);
        let summary = b.get_run(&run).await.unwrap().unwrap();
        assert!(summary.state.is_terminal());
        assert_eq!(summary.events, 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_node_follows_another_node_s_appends_live() {
    let (a, b) = two_nodes();
    let run = run_id("live");
    a.append(events(&run, 0, vec![started("t")]).into())
        .await
        .unwrap();
    let mut subscription = b.subscribe_from(&run, 0);
    assert_eq!(subscription.next().await.unwrap().unwrap().seq, 0);
    // Each append reaches B through the doorbell, well under the 200 ms
    // the subscription would otherwise wait before polling the stream.
    let mut slowest = Duration::ZERO;
    for seq in 1..=20 {
        let sent = Instant::now();
        a.append(events(&run, seq, vec![body_event(seq as u8, seq)]).into())
            .await
            .unwrap();
        let event = subscription.next().await.unwrap().unwrap();
        assert_eq!(event.seq, seq);
        slowest = slowest.max(sent.elapsed());
    }
    assert!(
        slowest < Duration::from_millis(150),
        "slowest cross-node delivery {slowest:?}"
    );
    a.append(events(&run, 21, vec![EventKind::Completed(Completed::default())]).into())
        .await
        .unwrap();
    assert!(
        subscription
            .next()
            .await
            .unwrap()
            .unwrap()
            .kind
            .is_terminal()
    );
    assert!(subscription.next().await.is_none());
}

/// How many connections listen on `run`'s announcement channel.
async fn listeners(log: &RedisLog, run: &weir_core::RunId) -> u64 {
    let mut conn = redis::Client::open(log.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let channel = format!("{}appends:{run}", log.prefix());
    let (_, count): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&channel)
        .query_async(&mut conn)
        .await
        .unwrap();
    count
}

/// Waits up to a second for `run`'s channel to have `expected` listeners.
async fn await_listeners(log: &RedisLog, run: &weir_core::RunId, expected: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let count = listeners(log, run).await;
        if count == expected || Instant::now() > deadline {
            return count;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_sent_the_appends_of_only_the_runs_it_follows_and_another_writes() {
    let (a, b) = two_nodes();
    let followed = run_id("followed");
    let unfollowed = run_id("unfollowed");
    for run in [&followed, &unfollowed] {
        a.append(events(run, 0, vec![started("t")]).into())
            .await
            .unwrap();
    }
    // B follows one run: once caught up, it listens on that run's channel
    // only, before it waits for live events.
    let mut on_b = b.subscribe_from(&followed, 0);
    assert_eq!(on_b.next().await.unwrap().unwrap().seq, 0);
    let on_b = tokio::spawn(async move {
        let seq = on_b.next().await.unwrap().unwrap().seq;
        (seq, on_b)
    });
    assert_eq!(await_listeners(&b, &followed, 1).await, 1);
    assert_eq!(listeners(&b, &unfollowed).await, 0);
    // A writes the run: its own follower gets A's appends from its hub,
    // so A does not listen.
    let mut on_a = a.subscribe_from(&followed, 0);
    assert_eq!(on_a.next().await.unwrap().unwrap().seq, 0);
    let on_a = tokio::spawn(async move { on_a.next().await.unwrap().unwrap().seq });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(listeners(&a, &followed).await, 1, "only B listens");
    a.append(events(&followed, 1, vec![body_event(1, 1)]).into())
        .await
        .unwrap();
    let (seq, on_b) = on_b.await.unwrap();
    assert_eq!(seq, 1);
    assert_eq!(on_a.await.unwrap(), 1);
    // B stops following: nobody listens, and A's appends announce nothing.
    drop(on_b);
    assert_eq!(await_listeners(&b, &followed, 0).await, 0);
}

#[tokio::test]
async fn a_retried_append_whose_answer_was_lost_is_stored_once() {
    let (a, _) = two_nodes();
    let run = run_id("retry");
    let batch: weir_runtime::log::Batch =
        events(&run, 0, vec![started("t"), body_event(0, 1)]).into();
    a.append(batch.clone()).await.unwrap();
    // The writer never saw the answer and sends the same events again.
    a.append(batch).await.unwrap();
    assert_eq!(a.read(&run, 0, 100).await.unwrap().len(), 2);
    // Different events at those seqs are still refused.
    let other = a
        .append(events(&run, 1, vec![body_event(3, 9)]).into())
        .await;
    assert!(other.is_err(), "{other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_name_is_held_once_and_a_dead_node_s_runs_are_closed_by_a_survivor() {
    let (a, b) = two_nodes();
    let lease = Duration::from_millis(400);
    let options = |name: &str| NodeOptions {
        name: name.into(),
        lease,
    };
    let node_a = Node::join(&a, options("a")).await.unwrap();
    assert!(matches!(
        Node::join(&b, options("a")).await,
        Err(NodeError::NameTaken(_))
    ));
    let node_b = Node::join(&b, options("b")).await.unwrap();
    let scheduler = Scheduler::start(
        b.clone(),
        Vec::new(),
        SchedulerConfig {
            node: "b".into(),
            ..SchedulerConfig::default()
        },
    )
    .await
    .unwrap();
    node_b.serve(&scheduler);

    // A run executing on a, with a started event naming it.
    let run = run_id("orphan");
    let started_on_a = EventKind::Started(weir_core::Started {
        tool: "t".into(),
        arguments: serde_json::json!({}),
        node: "a".into(),
    });
    a.append(events(&run, 0, vec![started_on_a, body_event(1, 1)]).into())
        .await
        .unwrap();
    // While a renews its lease, its run stays open.
    tokio::time::sleep(lease * 3).await;
    assert_eq!(
        b.get_run(&run).await.unwrap().unwrap().state,
        RunState::Working
    );
    // a dies: no more renewals.
    let died = Instant::now();
    drop(node_a);
    let closed = loop {
        let summary = b.get_run(&run).await.unwrap().unwrap();
        if summary.state.is_terminal() {
            break summary;
        }
        assert!(
            died.elapsed() < lease * 8,
            "the dead node's run is still open after {:?}",
            died.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(closed.state, RunState::Failed);
    let log = b.read(&run, 0, 100).await.unwrap();
    assert_eq!(log.len(), 3);
    let EventKind::Failed(failed) = &log[2].kind else {
        panic!("{:?}", log[2]);
    };
    assert_eq!(failed.error.code, weir_core::FailureCode::Interrupted);
    node_b.leave().await.unwrap();
}
