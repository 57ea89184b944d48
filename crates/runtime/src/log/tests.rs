//! The live hub's tail and a subscription's use of it: a run written here
//! is followed without store reads, and a stalled subscriber holds nothing
//! in the hub, then catches up from the store losing and repeating nothing.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use proptest::prelude::*;
use serde_json::json;
use weir_core::{
    ArtifactRef, Canceled, Content, EventKind, Partial, RunEvent, RunId, Seq, Started,
};

use super::{
    Batch, EventLog, LiveHub, LogError, MemoryLog, NewRun, RunFilter, RunSummary, Subscription,
};

/// A [`MemoryLog`] that counts the store reads its subscriptions make.
#[derive(Clone)]
struct Counting {
    inner: MemoryLog,
    reads: Arc<AtomicUsize>,
}

impl Counting {
    fn new(inner: MemoryLog) -> Counting {
        Counting {
            inner,
            reads: Arc::default(),
        }
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl EventLog for Counting {
    async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
        self.inner.create_run(run).await
    }

    async fn append(&self, events: Batch) -> Result<(), LogError> {
        self.inner.append(events).await
    }

    async fn start_run(&self, run: NewRun, events: Batch) -> Result<(), LogError> {
        self.inner.start_run(run, events).await
    }

    async fn read(
        &self,
        run_id: &RunId,
        from: Seq,
        limit: usize,
    ) -> Result<Vec<RunEvent>, LogError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(run_id, from, limit).await
    }

    fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
        Subscription::new(Arc::new(self.clone()), run_id.clone(), from)
    }

    async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
        self.inner.resume_record(run_id).await
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get_run(run_id).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, LogError> {
        self.inner.list_runs(filter).await
    }

    async fn put_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        mime: &str,
        data: Vec<u8>,
    ) -> Result<ArtifactRef, LogError> {
        self.inner.put_artifact(run_id, name, mime, data).await
    }

    async fn artifact(&self, run_id: &RunId, name: &str) -> Result<ArtifactRef, LogError> {
        self.inner.artifact(run_id, name).await
    }

    async fn read_artifact(
        &self,
        run_id: &RunId,
        name: &str,
        range: Range<u64>,
    ) -> Result<Vec<u8>, LogError> {
        self.inner.read_artifact(run_id, name, range).await
    }

    async fn delete_finished_before(&self, ts: u64) -> Result<usize, LogError> {
        self.inner.delete_finished_before(ts).await
    }

    fn live(&self) -> &LiveHub {
        self.inner.live()
    }
}

fn run(name: &str) -> RunId {
    RunId::parse(name).unwrap()
}

fn event(run: &RunId, seq: Seq, kind: EventKind) -> RunEvent {
    RunEvent {
        run_id: run.clone(),
        seq,
        ts: 1_000 + seq,
        kind,
    }
}

fn started() -> EventKind {
    EventKind::Started(Started {
        tool: "stream".into(),
        arguments: json!({}),
        node: "test".into(),
    })
}

/// An item of about 100 bytes, as the `stream` fixture's.
fn item(seq: Seq) -> EventKind {
    Partial {
        content: vec![Content::text(format!("{seq:0100}"))],
        ..Partial::default()
    }
    .into()
}

fn end() -> EventKind {
    EventKind::Canceled(Canceled {
        reason: "end".into(),
    })
}

/// Batches of `sizes` events after `started`, then the terminal event.
fn batches(run: &RunId, sizes: &[usize]) -> Vec<Batch> {
    let mut all: Vec<Batch> = vec![vec![event(run, 0, started())].into()];
    let mut seq = 1;
    for size in sizes {
        all.push(
            (seq..seq + *size as Seq)
                .map(|seq| event(run, seq, item(seq)))
                .collect(),
        );
        seq += *size as Seq;
    }
    all.push(vec![event(run, seq, end())].into());
    all
}

async fn next(subscription: &mut Subscription) -> RunEvent {
    tokio::time::timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("an event stored is delivered")
        .expect("the run has not ended yet")
        .expect("no error")
        .to_event()
}

async fn read_all(log: &dyn EventLog, run: &RunId) -> Vec<RunEvent> {
    log.read(run, 0, usize::MAX).await.unwrap()
}

/// A subscriber from seq 0 of a run this process writes (the hub told so
/// before anything was appended, as the scheduler does) gets every event
/// in order, and the run's end, without one store read.
#[tokio::test]
async fn a_subscriber_to_a_run_written_here_reads_no_store() {
    let log = Counting::new(MemoryLog::new());
    let id = run("written-here");
    log.live().expect(&id);
    let mut subscription = log.subscribe_from(&id, 0);
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(event) = subscription.next().await {
            got.push(event.unwrap().to_event());
        }
        got
    });
    for batch in batches(&id, &[1; 200]) {
        log.append(batch).await.unwrap();
        tokio::task::yield_now().await;
    }
    let got = reader.await.unwrap();
    assert_eq!(got.len(), 202);
    assert_eq!(got, read_all(&log, &id).await);
    assert_eq!(log.reads(), 1, "only this test's own read_all");
    assert_eq!(log.live().followed_runs(), 0, "an ended run leaves the hub");
    assert_eq!(log.live().held_bytes(), 0);
}

/// A run this process writes that goes quiet for a while (a slow commit, a
/// tool thinking) is waited for live: its subscriber reads no store.
#[tokio::test(start_paused = true)]
async fn a_quiet_run_written_here_is_waited_for_without_store_reads() {
    let log = Counting::new(MemoryLog::new());
    let id = run("quiet-here");
    log.live().expect(&id);
    let mut subscription = log.subscribe_from(&id, 0);
    let all = batches(&id, &[1; 3]);
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        while let Some(event) = subscription.next().await {
            got.push(event.unwrap().to_event());
        }
        got
    });
    for batch in all {
        tokio::time::sleep(Duration::from_secs(2)).await;
        log.append(batch).await.unwrap();
    }
    let got = reader.await.unwrap();
    assert_eq!(got, read_all(&log, &id).await);
    assert_eq!(log.reads(), 1, "only this test's own read_all");
}

/// The same when the subscriber comes after the run's first events: the
/// hub's tail of a run it saw start is enough.
#[tokio::test]
async fn a_subscriber_that_comes_after_the_start_reads_no_store() {
    let log = Counting::new(MemoryLog::new());
    let id = run("started-here");
    let all = batches(&id, &[3; 20]);
    for batch in &all[..5] {
        log.append(batch.clone()).await.unwrap();
    }
    let mut subscription = log.subscribe_from(&id, 0);
    let mut got = Vec::new();
    for _ in 0..13 {
        got.push(next(&mut subscription).await);
    }
    for batch in &all[5..] {
        log.append(batch.clone()).await.unwrap();
    }
    while let Some(event) = subscription.next().await {
        got.push(event.unwrap().to_event());
    }
    assert_eq!(got, read_all(&log, &id).await);
    assert_eq!(log.reads(), 1, "only this test's own read_all");
}

/// A subscriber that stalls holds nothing in the hub beyond its limits
/// while the run goes on; when it reads again it catches up from the store
/// and then live, losing and repeating nothing.
#[tokio::test]
async fn a_stalled_subscriber_keeps_the_hub_within_its_limits_and_catches_up() {
    let (run_limit, total_limit) = (4 << 10, 6 << 10);
    let log = Counting::new(MemoryLog::with_live_hub(LiveHub::with_limits(
        1024,
        run_limit,
        total_limit,
    )));
    let (slow, other) = (run("slow"), run("other"));
    log.live().expect(&slow);
    log.live().expect(&other);
    let mut stalled = log.subscribe_from(&slow, 0);
    let (slow_batches, other_batches) = (batches(&slow, &[2; 300]), batches(&other, &[2; 300]));
    log.append(slow_batches[0].clone()).await.unwrap();
    let mut got = vec![next(&mut stalled).await];
    let mut most = 0;
    for (a, b) in slow_batches[1..].iter().zip(&other_batches) {
        log.append(a.clone()).await.unwrap();
        log.append(b.clone()).await.unwrap();
        most = most.max(log.live().held_bytes());
    }
    assert!(
        most <= total_limit,
        "held {most} bytes, limit {total_limit}"
    );
    assert!(most > 0);
    while let Some(event) = stalled.next().await {
        got.push(event.unwrap().to_event());
    }
    assert!(log.reads() > 0, "caught up from the store");
    assert_eq!(got.len(), 602);
    assert_eq!(got, read_all(&log, &slow).await);
}

/// What a property case does, step by step.
#[derive(Clone, Debug)]
enum Step {
    /// Appends the next batch of this many events (the last ends the run).
    Append(usize),
    /// Subscriber `0` or `1` takes up to this many events.
    Take(usize, usize),
    /// Subscriber `0` or `1` starts over from where it is (as a follower
    /// whose client lags does).
    Resubscribe(usize),
    /// Subscriber `0` or `1` waits a moment for an event when it has all
    /// there is: it gets none, and is not over (the wait is dropped, as
    /// `select!` drops it).
    Wait(usize),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (1..6usize).prop_map(Step::Append),
            (0..2usize, 0..12usize).prop_map(|(who, n)| Step::Take(who, n)),
            (0..2usize).prop_map(Step::Resubscribe),
            (0..2usize).prop_map(Step::Wait),
        ],
        1..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the interleaving of appends, reads and new subscriptions,
    /// and however small the hub's limits, each subscriber gets the run's
    /// events in order, each once, and the hub never holds more than its
    /// limit for all runs.
    #[test]
    fn subscribers_get_every_event_once_in_order_within_the_hub_s_limits(
        steps in steps(),
        capacity in 1..6usize,
        run_limit in 100..3_000usize,
        total_limit in 100..3_000usize,
        expected in any::<bool>(),
        from in 0..4 as Seq,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let log = MemoryLog::with_live_hub(LiveHub::with_limits(capacity, run_limit, total_limit));
            let id = run("prop");
            if expected {
                log.live().expect(&id);
            }
            log.append(vec![event(&id, 0, started())].into()).await.unwrap();
            let mut written: Seq = 1;
            let mut subscribers = [log.subscribe_from(&id, from), log.subscribe_from(&id, from)];
            let mut got: [Vec<RunEvent>; 2] = [Vec::new(), Vec::new()];
            for step in steps.into_iter().chain([Step::Take(0, usize::MAX), Step::Take(1, usize::MAX)]) {
                match step {
                    Step::Append(n) => {
                        let batch: Batch = (written..written + n as Seq)
                            .map(|seq| event(&id, seq, item(seq)))
                            .collect();
                        written += n as Seq;
                        log.append(batch).await.unwrap();
                    }
                    Step::Take(who, n) => {
                        // Only what is stored, so that no take waits; the
                        // final ones end the run first.
                        if n == usize::MAX {
                            let ended = log.get_run(&id).await.unwrap().unwrap().state.is_terminal();
                            if !ended {
                                log.append(vec![event(&id, written, end())].into()).await.unwrap();
                                written += 1;
                            }
                            while let Some(event) = subscribers[who].next().await {
                                got[who].push(event.unwrap().to_event());
                            }
                        } else {
                            for _ in 0..n {
                                if subscribers[who].position() >= written {
                                    break;
                                }
                                got[who].push(next(&mut subscribers[who]).await);
                            }
                        }
                    }
                    Step::Wait(who) => {
                        let ended = log.get_run(&id).await.unwrap().unwrap().state.is_terminal();
                        if !ended && subscribers[who].position() >= written {
                            let waited = tokio::time::timeout(
                                Duration::from_millis(1),
                                subscribers[who].next(),
                            )
                            .await;
                            prop_assert!(waited.is_err(), "nothing to give, yet: {waited:?}");
                        }
                    }
                    Step::Resubscribe(who) => {
                        let position = subscribers[who].position();
                        subscribers[who] = log.subscribe_from(&id, position);
                    }
                }
                prop_assert!(log.live().held_bytes() <= total_limit);
            }
            drop(subscribers);
            let all = log.read(&id, from, usize::MAX).await.unwrap();
            prop_assert_eq!(&got[0], &all);
            prop_assert_eq!(&got[1], &all);
            prop_assert_eq!(log.live().held_bytes(), 0);
            Ok(())
        })?;
    }
}
