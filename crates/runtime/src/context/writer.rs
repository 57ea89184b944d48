//! The one writer of a run's log: a task that takes what a [`RunContext`]
//! sends, numbers it densely, passes it through the [`CompletionGuard`] and
//! appends it in batches.
//!
//! [`RunContext`]: crate::RunContext

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use weir_core::{CompletionGuard, EventKind, RunEvent, RunId, Seq};

use crate::context::now_ms;
use crate::log::{Batch, EventLog, LogError, NewRun};

/// Most events the writer appends in one batch.
const MAX_BATCH: usize = 512;

/// Most events in the writer's first batch; each batch after may hold eight
/// times as many as the one before, up to [`MAX_BATCH`]. A durable store makes
/// every event of a batch wait for the batch's commit, so a first batch of
/// 512 items of 1 KB held the run's first item back for the whole commit
/// (milliseconds on SQLite); starting small delivers it after a commit of
/// a few events. Growing eightfold (2, 16, 128, 512) rather than twofold
/// takes four commits to full size instead of nine: each commit costs the
/// SQLite store some 30-80 µs of CPU in thread hand-offs whatever it holds,
/// which a call of 30 small items paid 7 times.
const FIRST_BATCH: usize = 2;

/// How many times larger each batch may be than the one before.
const GROWTH: usize = 8;

/// What a [`RunContext`] sends its writer.
pub(crate) enum Command {
    /// An event the runtime writes (`started`, the terminal event, a wait).
    Emit(EventKind),
    /// An event a tool emitted, holding its place among the node's events
    /// emitted and not yet stored (see `BACKLOG` in the scheduler) until
    /// the writer has appended it.
    Emitted(EventKind, OwnedSemaphorePermit),
    Flush(oneshot::Sender<Result<(), LogError>>),
}

/// How a run's events reach its writer: the writer's channel, and the
/// node's places for events emitted and not yet stored (`None` outside a
/// scheduler), which a tool's emit takes one of.
pub(crate) struct Inlet {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) backlog: Option<Arc<Semaphore>>,
}

/// A run its writer registers with its first batch
/// ([`EventLog::start_run`]), and who waits to hear whether that worked.
pub(crate) struct Registration {
    pub(crate) run: NewRun,
    pub(crate) told: oneshot::Sender<Result<(), LogError>>,
}

/// Appends a batch, retrying a failing store a few times before giving up.
async fn append_patiently(log: &dyn EventLog, events: Batch) -> Result<(), LogError> {
    let mut delay = Duration::from_millis(10);
    loop {
        match log.append(events.clone()).await {
            Err(LogError::Storage { .. }) if delay < Duration::from_secs(1) => {
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
            other => return other,
        }
    }
}

/// A store's answer to one append, still to come.
type Answer = Pin<Box<dyn Future<Output = Result<(), LogError>> + Send>>;

/// A batch handed to the store and not yet answered, with what waits on it.
struct InFlight {
    events: Batch,
    answer: Answer,
    /// Answered, and given back all at once, when the batch is stored.
    flushes: Vec<oneshot::Sender<Result<(), LogError>>>,
    places: Option<OwnedSemaphorePermit>,
}

impl InFlight {
    /// Numbers what was `received` (draining it) from `seq` into a batch,
    /// passing each event through the `guard`, and hands the batch to the
    /// store. The append is polled once here, so a store that queues
    /// appends in order ([`EventLog::queues_appends_in_order`]) has queued
    /// this one before the writer issues the next.
    async fn issue(
        log: &Arc<dyn EventLog>,
        run_id: &RunId,
        seq: Seq,
        guard: &mut CompletionGuard,
        received: &mut Vec<Command>,
        starting: Option<NewRun>,
    ) -> InFlight {
        let mut batch = Vec::with_capacity(received.len());
        let mut flushes = Vec::new();
        let mut places: Option<OwnedSemaphorePermit> = None;
        for command in received.drain(..) {
            let kind = match command {
                Command::Emit(kind) => kind,
                Command::Emitted(kind, place) => {
                    match &mut places {
                        Some(places) => places.merge(place),
                        None => places = Some(place),
                    }
                    kind
                }
                Command::Flush(ack) => {
                    flushes.push(ack);
                    continue;
                }
            };
            // Refused only after the terminal event; such stragglers are dropped.
            if guard.admit(&kind).is_ok() {
                batch.push(RunEvent {
                    run_id: run_id.clone(),
                    seq: seq + batch.len() as Seq,
                    ts: now_ms(),
                    kind,
                });
            }
        }
        let events: Batch = batch.into();
        let store = Arc::clone(log);
        let appended = events.clone();
        let mut answer: Answer = Box::pin(async move {
            match starting {
                Some(run) => store.start_run(run, appended).await,
                None => store.append(appended).await,
            }
        });
        if let Poll::Ready(result) =
            std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await
        {
            answer = Box::pin(std::future::ready(result));
        }
        InFlight {
            events,
            answer,
            flushes,
            places,
        }
    }

    /// Tells everyone waiting on this batch how its append went.
    fn settle(self, failure: Option<&str>) {
        drop(self.places);
        for ack in self.flushes {
            let _ = ack.send(match failure {
                None => Ok(()),
                Some(message) => Err(LogError::Storage {
                    doing: "appending events",
                    message: message.to_owned(),
                }),
            });
        }
    }
}

/// What the writer waited for.
enum Step {
    /// Commands taken from the channel (0: every sender is gone).
    Received(usize),
    /// The oldest batch in flight was answered.
    Answered(Result<(), LogError>),
}

/// The one writer of a run's log. Numbers events densely from `next_seq`,
/// passes each through the [`CompletionGuard`], appends in batches, and
/// stops after the terminal event. If every sender goes away first, it writes
/// the `failed` event the guard says is owed. Returns the terminal event it
/// wrote, or `None` if the store would not take it (start-up recovery closes
/// such a run later).
///
/// A store that queues appends in order gets the next batch while the last
/// is still committing (two in flight) once a whole batch is waiting, so
/// the commits of a tool emitting flat out follow one another without
/// waiting for this task to be woken, told and scheduled between them; a
/// batch's flushes are answered, and its places given back, only when it
/// and every batch before it are stored.
///
/// With a [`Registration`], the first batch registers the run too. The next
/// may be issued behind it as behind any other: if the registration is
/// refused, the run does not exist, and an append of a later seq to an
/// unknown run is refused too. (The scheduler registers so only runs under
/// ids it has just made, which no run has: see `Scheduler::submit`.) Then
/// nothing of the run is stored and there is no run to end: the tool is
/// stopped, and the one waiting hears why.
pub(crate) async fn write_run(
    log: Arc<dyn EventLog>,
    run_id: RunId,
    next_seq: Seq,
    mut commands: mpsc::Receiver<Command>,
    cancel: CancellationToken,
    registration: Option<Registration>,
) -> Option<RunEvent> {
    let depth = if log.queues_appends_in_order() { 2 } else { 1 };
    let (mut starting, mut told) = match registration {
        Some(Registration { run, told }) => (Some(run), Some(told)),
        None => (None, None),
    };
    let mut guard = CompletionGuard::new();
    let mut received = Vec::with_capacity(MAX_BATCH);
    let mut limit = FIRST_BATCH;
    let mut in_flight: VecDeque<InFlight> = VecDeque::with_capacity(depth);
    // The seq of the next event issued, and of the next one stored.
    let mut issued_seq = next_seq;
    let mut stored_seq = next_seq;
    // Whether the tool may still send, and whether a terminal event is issued.
    let mut open = true;
    let mut ended = false;
    loop {
        let room = !ended && in_flight.len() < depth;
        // What was received goes to the store at once when nothing is in
        // flight; behind a batch in flight only once it fills a batch (a
        // tool emitting flat out) or the tool is done. A trickle gathers
        // during the commit instead, so it is not split into more commits.
        if room
            && !received.is_empty()
            && (in_flight.is_empty() || received.len() >= limit || !open)
        {
            limit = (limit * GROWTH).min(MAX_BATCH);
            let batch = InFlight::issue(
                &log,
                &run_id,
                issued_seq,
                &mut guard,
                &mut received,
                starting.take(),
            )
            .await;
            issued_seq += batch.events.len() as Seq;
            ended = batch
                .events
                .last()
                .is_some_and(|event| event.kind.is_terminal());
            in_flight.push_back(batch);
            continue;
        }
        let wanted = limit.saturating_sub(received.len());
        let receiving = open && room && wanted > 0;
        let step = match (in_flight.front_mut(), receiving) {
            (Some(oldest), true) => tokio::select! {
                biased;
                result = &mut oldest.answer => Step::Answered(result),
                taken = commands.recv_many(&mut received, wanted) => Step::Received(taken),
            },
            (Some(oldest), false) => Step::Answered((&mut oldest.answer).await),
            (None, true) => Step::Received(commands.recv_many(&mut received, wanted).await),
            // The tool is done, and everything it sent is stored.
            (None, false) => break,
        };
        match step {
            Step::Received(taken) => open = taken > 0,
            Step::Answered(result) => {
                let oldest = in_flight.pop_front().expect("answered batch is in flight");
                let result = match (told.take(), result) {
                    (Some(told), Ok(())) => {
                        let _ = told.send(Ok(()));
                        Ok(())
                    }
                    (Some(told), Err(error)) => {
                        oldest.settle(Some(&error.to_string()));
                        cancel.cancel();
                        commands.close();
                        let _ = told.send(Err(error));
                        return None;
                    }
                    (None, result) => result,
                };
                let result = match result {
                    // Those issued after it were refused (they do not follow
                    // the stored log) or failed with it; once they have been
                    // answered, all are appended again, one at a time. If it
                    // fails for good, the run fails, and they are settled
                    // with its error below.
                    Err(LogError::Storage { .. }) => {
                        for later in &mut in_flight {
                            let _ = (&mut later.answer).await;
                        }
                        let retried = append_patiently(&*log, oldest.events.clone()).await;
                        if retried.is_ok() {
                            for later in &mut in_flight {
                                let result = append_patiently(&*log, later.events.clone()).await;
                                later.answer = Box::pin(std::future::ready(result));
                            }
                        }
                        retried
                    }
                    other => other,
                };
                match result {
                    Ok(()) => {
                        stored_seq += oldest.events.len() as Seq;
                        let terminal = oldest
                            .events
                            .last()
                            .filter(|event| event.kind.is_terminal())
                            .cloned();
                        oldest.settle(None);
                        if terminal.is_some() {
                            return terminal;
                        }
                        // The append woke the run's live subscribers, and
                        // tokio runs a task woken this way only once the
                        // waker's task yields (its LIFO slot cannot be
                        // stolen). Without this, a tool that emits flat out
                        // kept its first item from the client until the
                        // writer had drained its buffer (5-8 ms at 20,000
                        // items); once per batch, the yield costs nothing
                        // measurable.
                        tokio::task::yield_now().await;
                    }
                    Err(error) => {
                        let message = error.to_string();
                        oldest.settle(Some(&message));
                        for later in in_flight.drain(..) {
                            later.settle(Some(&message));
                        }
                        return fail_run(&*log, &cancel, &mut commands, run_id, stored_seq, &error)
                            .await;
                    }
                }
            }
        }
    }
    // Every sender went away before a terminal event, and all that was
    // issued is stored.
    commands.close();
    let owed = guard.on_writer_exit()?;
    let event = RunEvent {
        run_id,
        seq: stored_seq,
        ts: now_ms(),
        kind: owed,
    };
    append_patiently(&*log, Arc::new([event.clone()]))
        .await
        .ok()
        .map(|()| event)
}

/// The store is failing: stops the tool and tries to close the run with a
/// `failed` event at `seq`, the first not stored.
async fn fail_run(
    log: &dyn EventLog,
    cancel: &CancellationToken,
    commands: &mut mpsc::Receiver<Command>,
    run_id: RunId,
    seq: Seq,
    error: &LogError,
) -> Option<RunEvent> {
    cancel.cancel();
    commands.close();
    let failed = weir_core::RunError::new(
        weir_core::FailureCode::Internal,
        format!("the event log could not be written: {error}"),
    )
    .with_remediation(
        "check the data directory's disk space and permissions, then call the tool again",
    );
    let event = RunEvent {
        run_id,
        seq,
        ts: now_ms(),
        kind: weir_core::Failed { error: failed }.into(),
    };
    log.append(Arc::new([event.clone()]))
        .await
        .ok()
        .map(|()| event)
}

#[cfg(test)]
mod tests {
    use std::ops::Range;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use async_trait::async_trait;
    use tokio::sync::Semaphore;
    use tokio_util::sync::CancellationToken;
    use weir_core::{ArtifactRef, EventKind, RunEvent, RunId, Seq, Warning};

    use crate::context::tests::{spawn_writer, started_run, started_run_in};
    use crate::log::{
        Batch, EventLog, LiveHub, LogError, MemoryLog, NewRun, RunFilter, RunSummary, Subscription,
    };

    /// A memory log whose appends behave as the SQLite store's: applied in
    /// the order issued, as soon as issued, but answered only as the test
    /// lets them (one permit of `answers` each). The attempt numbered
    /// `fail` (from 0) is answered with a storage failure and not applied.
    struct Queued {
        inner: MemoryLog,
        answers: Semaphore,
        fail: Option<usize>,
        attempts: AtomicUsize,
        /// Appends the memory log refused for not following the stored log.
        refused: AtomicUsize,
        pending: AtomicUsize,
        most_pending: AtomicUsize,
    }

    impl Queued {
        fn new(fail: Option<usize>) -> Arc<Queued> {
            Arc::new(Queued {
                inner: MemoryLog::new(),
                answers: Semaphore::new(0),
                fail,
                attempts: AtomicUsize::new(0),
                refused: AtomicUsize::new(0),
                pending: AtomicUsize::new(0),
                most_pending: AtomicUsize::new(0),
            })
        }

        /// Waits until `count` appends have been issued, and `pending` of
        /// them are unanswered.
        async fn until_issued(&self, count: usize, pending: usize) {
            tokio::time::timeout(Duration::from_secs(5), async {
                while self.attempts.load(Ordering::SeqCst) < count
                    || self.pending.load(Ordering::SeqCst) != pending
                {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("appends were issued");
        }
    }

    #[async_trait]
    impl EventLog for Queued {
        async fn create_run(&self, run: NewRun) -> Result<(), LogError> {
            self.inner.create_run(run).await
        }

        async fn append(&self, events: Batch) -> Result<(), LogError> {
            let attempt = self.attempts.fetch_add(1, Ordering::SeqCst);
            let applied = if self.fail == Some(attempt) {
                Err(LogError::Storage {
                    doing: "appending events",
                    message: "disk I/O error".into(),
                })
            } else {
                self.inner.append(events).await
            };
            if let Err(LogError::Invalid { .. }) = applied {
                self.refused.fetch_add(1, Ordering::SeqCst);
            }
            let pending = self.pending.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_pending.fetch_max(pending, Ordering::SeqCst);
            self.answers.acquire().await.expect("open").forget();
            self.pending.fetch_sub(1, Ordering::SeqCst);
            applied
        }

        fn queues_appends_in_order(&self) -> bool {
            true
        }

        async fn read(
            &self,
            run_id: &RunId,
            from: Seq,
            limit: usize,
        ) -> Result<Vec<RunEvent>, LogError> {
            self.inner.read(run_id, from, limit).await
        }

        fn subscribe_from(&self, run_id: &RunId, from: Seq) -> Subscription {
            self.inner.subscribe_from(run_id, from)
        }

        async fn resume_record(&self, run_id: &RunId) -> Result<Option<String>, LogError> {
            self.inner.resume_record(run_id).await
        }

        async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, LogError> {
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

    /// The run's whole log: each event's seq and, for a warning, its text.
    async fn stored(log: &Queued, run_id: &RunId) -> Vec<(Seq, String)> {
        let events = log.inner.read(run_id, 0, 10_000).await.unwrap();
        events
            .into_iter()
            .map(|event| match &event.kind {
                EventKind::Warning(warning) => (event.seq, warning.message.clone()),
                other => (event.seq, other.type_name().to_owned()),
            })
            .collect()
    }

    /// The log the writer should leave for `items` warnings: `started`,
    /// the items in order, then the `failed` event owed when the tool's
    /// context went away.
    fn expected(items: usize) -> Vec<(Seq, String)> {
        let mut events = vec![(0, "started".to_owned())];
        events.extend((0..items).map(|index| (index as Seq + 1, format!("item {index}"))));
        events.push((items as Seq + 1, "failed".to_owned()));
        events
    }

    /// A store that queues appends in order gets the next batch while the
    /// last is unanswered, and a flush is answered only once everything
    /// before it is stored.
    #[tokio::test]
    async fn a_store_that_queues_in_order_gets_the_next_batch_before_answering_the_last() {
        let log = Queued::new(None);
        let (_, run_id, ctx, receiver) = started_run_in(log.clone(), "pipelined", 1024, None).await;
        for index in 0..200 {
            let message = format!("item {index}");
            ctx.emit(Warning { message }).await.unwrap();
        }
        let as_log: Arc<dyn EventLog> = log.clone();
        let writer = spawn_writer(&as_log, &run_id, receiver);
        log.until_issued(2, 2).await;
        let flushed = tokio::spawn({
            let ctx = ctx.clone();
            async move { ctx.flush().await }
        });
        tokio::task::yield_now().await;
        assert!(
            !flushed.is_finished(),
            "a flush was answered before its events were"
        );
        assert_eq!(
            log.most_pending.load(Ordering::SeqCst),
            2,
            "at most two in flight"
        );
        log.answers.add_permits(1_000);
        flushed.await.unwrap().unwrap();
        assert_eq!(
            stored(&log, &run_id).await.len(),
            201,
            "flushed items are stored"
        );
        drop(ctx);
        let terminal = writer.await.unwrap().expect("the run is closed");
        assert_eq!(terminal.seq, 201);
        assert_eq!(stored(&log, &run_id).await, expected(200));
        assert_eq!(log.most_pending.load(Ordering::SeqCst), 2);
    }

    /// A registration for run `run_id` owned by alice, and where its answer goes.
    fn registration(
        run_id: &RunId,
    ) -> (
        super::Registration,
        tokio::sync::oneshot::Receiver<Result<(), LogError>>,
    ) {
        let (told, answer) = tokio::sync::oneshot::channel();
        let run = NewRun {
            run_id: run_id.clone(),
            tool: "t".into(),
            arguments: serde_json::Value::Null,
            node: "n".into(),
            ts: 1,
            owner: Some("alice".into()),
            client: None,
            parent: None,
            resume_record: None,
        };
        (super::Registration { run, told }, answer)
    }

    /// The first batch registers the run, the next is issued behind it, and
    /// the one waiting hears that the run is registered once the first is
    /// stored, not before.
    #[tokio::test]
    async fn a_run_is_registered_by_its_first_batch_and_told_once_it_is_stored() {
        let log = Queued::new(None);
        let (_, run_id, ctx, receiver) =
            started_run_in(log.clone(), "registered", 1024, None).await;
        for index in 0..200 {
            let message = format!("item {index}");
            ctx.emit(Warning { message }).await.unwrap();
        }
        drop(ctx);
        let (registration, mut answer) = registration(&run_id);
        let as_log: Arc<dyn EventLog> = log.clone();
        let writer = tokio::spawn(super::write_run(
            as_log,
            run_id.clone(),
            0,
            receiver,
            CancellationToken::new(),
            Some(registration),
        ));
        log.until_issued(2, 2).await;
        assert!(answer.try_recv().is_err(), "told before it was stored");
        log.answers.add_permits(1);
        answer.await.unwrap().unwrap();
        log.answers.add_permits(1_000);
        let terminal = writer.await.unwrap().expect("the run is closed");
        assert_eq!(terminal.seq, 201);
        assert_eq!(stored(&log, &run_id).await, expected(200));
        let summary = log.get_run(&run_id).await.unwrap().unwrap();
        assert_eq!(summary.owner.as_deref(), Some("alice"));
        assert_eq!(log.most_pending.load(Ordering::SeqCst), 2);
    }

    /// The store refuses the batch that registers a run: the one waiting
    /// hears why, the tool is stopped (its context sends no more), and no
    /// event is stored (there is no run to end).
    #[tokio::test]
    async fn a_refused_registration_stops_the_tool_and_stores_no_event() {
        let log = Queued::new(Some(0));
        let (_, run_id, ctx, receiver) = started_run_in(log.clone(), "refused", 1024, None).await;
        for index in 0..20 {
            let message = format!("item {index}");
            ctx.emit(Warning { message }).await.unwrap();
        }
        let (registration, answer) = registration(&run_id);
        let cancel = CancellationToken::new();
        let as_log: Arc<dyn EventLog> = log.clone();
        let writer = tokio::spawn(super::write_run(
            as_log,
            run_id.clone(),
            0,
            receiver,
            cancel.clone(),
            Some(registration),
        ));
        // The next batch is in flight behind the refused one.
        log.until_issued(2, 2).await;
        log.answers.add_permits(1_000);
        let refused = answer.await.unwrap();
        assert!(
            matches!(refused, Err(LogError::Storage { .. })),
            "{refused:?}"
        );
        assert!(writer.await.unwrap().is_none(), "no terminal event");
        assert!(cancel.is_cancelled(), "the tool is stopped");
        let more = ctx.emit(Warning {
            message: "item 20".into(),
        });
        assert!(more.await.is_err(), "the writer takes no more");
        assert_eq!(stored(&log, &run_id).await, Vec::new());
    }

    /// A batch whose append fails for storage while the next is in flight:
    /// the next is refused (it does not follow the stored log), both are
    /// appended again in order, and the log loses and repeats nothing.
    #[tokio::test]
    async fn a_storage_failure_with_a_batch_in_flight_loses_and_repeats_nothing() {
        let log = Queued::new(Some(1));
        let (_, run_id, ctx, receiver) = started_run_in(log.clone(), "retried", 1024, None).await;
        for index in 0..200 {
            let message = format!("item {index}");
            ctx.emit(Warning { message }).await.unwrap();
        }
        drop(ctx);
        let as_log: Arc<dyn EventLog> = log.clone();
        let writer = spawn_writer(&as_log, &run_id, receiver);
        // The first batch and the failing second are in flight; answering
        // the first lets the writer issue a third behind the failed one.
        log.until_issued(2, 2).await;
        log.answers.add_permits(1);
        log.until_issued(3, 2).await;
        log.answers.add_permits(1_000);
        let terminal = writer.await.unwrap().expect("the run is closed");
        assert_eq!(terminal.seq, 201);
        assert_eq!(stored(&log, &run_id).await, expected(200));
        assert_eq!(
            log.refused.load(Ordering::SeqCst),
            1,
            "the batch issued behind the failed one was refused, then appended again"
        );
    }

    /// A tool emitting flat out, its writer and a live subscriber on one
    /// thread: the subscriber gets the run's first events after the
    /// writer's first append, not after the writer drained the buffer.
    #[tokio::test(flavor = "current_thread")]
    async fn a_live_subscriber_is_not_kept_waiting_while_the_writer_drains_a_flat_out_tool() {
        let (log, run_id, ctx, receiver) = started_run("flat-out", 1024, None).await;
        let writer = spawn_writer(&log, &run_id, receiver);
        tokio::task::yield_now().await; // the writer has stored `started`
        let mut subscription = log.subscribe_from(&run_id, 0);
        let producer = tokio::spawn(async move {
            for index in 0..2_000 {
                let warning = Warning {
                    message: format!("item {index}"),
                };
                ctx.emit(warning).await.unwrap();
            }
        });
        let started = subscription.next().await.unwrap().unwrap();
        assert_eq!(started.seq, 0);
        let first_item = subscription.next().await.unwrap().unwrap();
        assert_eq!(first_item.seq, 1);
        let stored = log.read(&run_id, 0, 10_000).await.unwrap().len();
        assert!(
            stored < 32,
            "the subscriber got the first item only after {stored} events were stored"
        );
        producer.await.unwrap();
        drop(subscription);
        writer.abort();
    }
}
