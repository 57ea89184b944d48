//! In-process live fan-out of stored events: a bounded recent tail per run.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::watch;
use weir_core::{Content, EventKind, RunEvent, RunId, Seq};

/// Events stored by one append, shared by every live subscriber.
pub type Batch = Arc<[RunEvent]>;

/// Bytes of events the hub holds for one run, at most (by default). A
/// follower further behind reads the store: 1 MiB, under 1,000 items of
/// 1 KB, sent a client reading 2,000 of them over stdio back to SQLite for
/// half of them (0.7 µs of server CPU an item). Not more than 4 MiB: the
/// tail is held while the run writes whoever lags, and at 8 MiB a client
/// reading 100 MB at 10 items/s saw the server grow by 30 MiB, not 19. The
/// total below still bounds all runs together.
pub const LIVE_RUN_BYTES: usize = 4 << 20;

/// Bytes of events the hub holds for all runs together, at most (by
/// default): 10,000 runs streaming at once share it.
pub const LIVE_TOTAL_BYTES: usize = 64 << 20;

/// One event of a [`Batch`], shared with every other reader of the batch:
/// handing it to a subscriber copies nothing. Reads as a [`RunEvent`].
#[derive(Clone)]
pub struct SharedEvent {
    batch: Batch,
    index: usize,
}

impl SharedEvent {
    /// Every event of `batch`, in order.
    pub(crate) fn all(batch: Batch) -> impl Iterator<Item = SharedEvent> {
        (0..batch.len()).map(move |index| SharedEvent {
            batch: batch.clone(),
            index,
        })
    }

    /// A copy of the event that owns its data.
    pub fn to_event(&self) -> RunEvent {
        RunEvent::clone(self)
    }
}

impl std::ops::Deref for SharedEvent {
    type Target = RunEvent;

    fn deref(&self) -> &RunEvent {
        &self.batch[self.index]
    }
}

impl std::fmt::Debug for SharedEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        RunEvent::fmt(self, f)
    }
}

impl PartialEq for SharedEvent {
    fn eq(&self, other: &SharedEvent) -> bool {
        **self == **other
    }
}

/// The recent tail of each run stored through this process, for its live
/// subscribers.
///
/// A run's tail is the dense range of its events from some seq `start` to
/// its newest, as published (only after they are stored, in order). A
/// subscriber whose position lies in the tail takes its events from there
/// without reading the store; one behind `start` reads the store up to it.
/// The hub learns a run's tail from seq 0 when told the run is new
/// ([`LiveHub::expect`]) or when it publishes the run's `started` event; of
/// any other run it knows only what was published after somebody began to
/// listen.
///
/// Bounded, never waiting on a reader: a run's tail keeps at most
/// `capacity` batches and [`LIVE_RUN_BYTES`] bytes, all tails together at most
/// [`LIVE_TOTAL_BYTES`] bytes (both estimated), dropping their oldest batches
/// past that; and a batch every listener of the run has taken is dropped
/// at once. A subscriber left behind reads the store, so it loses nothing.
#[derive(Debug)]
pub struct LiveHub {
    capacity: usize,
    run_limit: usize,
    total_limit: usize,
    /// Bytes held by every tail together.
    held: Arc<AtomicUsize>,
    runs: Mutex<HashMap<RunId, Arc<RunTail>>>,
}

/// One run's tail and who listens to it.
#[derive(Debug)]
pub(crate) struct RunTail {
    state: Mutex<TailState>,
    /// Bumped after every publish: listeners wait on it.
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct TailState {
    /// Held batches, in order, each with its estimated bytes.
    batches: VecDeque<(Batch, usize)>,
    /// The seq of the first event the tail covers (the first held batch's
    /// may be lower: a batch that overlapped is kept whole); `None` until
    /// anything was published or expected.
    start: Option<Seq>,
    /// The seq after the newest event published.
    end: Seq,
    bytes: usize,
    /// The terminal event has been published.
    ended: bool,
    /// This process writes the run ([`LiveHub::expect`]): every event of it
    /// is published here, so a listener need not look in the store when
    /// the run is quiet.
    local: bool,
    /// Each listener's id and the seq before which it has taken everything.
    listeners: Vec<(u64, Seq)>,
    next_listener: u64,
}

/// What a listener found in its run's tail ([`LiveHub::take`]).
#[derive(Debug)]
pub(crate) enum Taken {
    /// Events at or past the position asked for, in order.
    Events(Vec<SharedEvent>),
    /// Nothing new yet: wait for [`Listener::changed`].
    UpToDate,
    /// The run has ended before the position asked for.
    Ended,
    /// The tail begins at this seq, past the position: the store has what
    /// lies before it.
    Behind,
    /// Nothing published since listening began: the store may have any of
    /// the run.
    Unknown,
}

/// A subscriber's place among a run's listeners; let go with
/// [`LiveHub::release`].
#[derive(Debug)]
pub(crate) struct Listener {
    tail: Arc<RunTail>,
    id: u64,
    changes: watch::Receiver<u64>,
}

impl Listener {
    /// Marks every publish so far as seen: [`Listener::changed`] waits for
    /// the next. Call before [`LiveHub::take`], so none falls between.
    pub(crate) fn mark_seen(&mut self) {
        self.changes.borrow_and_update();
    }

    /// The seq the tail of this listener's run begins at, if known.
    pub(crate) fn tail_start(&self) -> Option<Seq> {
        self.tail.lock().start
    }

    /// Whether this process writes the listener's run, so that all of it is
    /// published here ([`LiveHub::expect`]).
    pub(crate) fn is_local(&self) -> bool {
        self.tail.lock().local
    }

    /// Waits for a publish not yet marked seen.
    pub(crate) async fn changed(&mut self) {
        if self.changes.changed().await.is_err() {
            // The sender lives in the tail, which this listener holds.
            std::future::pending::<()>().await;
        }
    }
}

impl LiveHub {
    /// A hub keeping at most `capacity` (at least 1) batches per run, and
    /// the default byte limits.
    pub fn new(capacity: usize) -> LiveHub {
        LiveHub::with_limits(capacity, LIVE_RUN_BYTES, LIVE_TOTAL_BYTES)
    }

    /// A hub keeping at most `capacity` (at least 1) batches and
    /// `run_limit` estimated bytes per run, `total_limit` for all runs.
    pub fn with_limits(capacity: usize, run_limit: usize, total_limit: usize) -> LiveHub {
        LiveHub {
            capacity: capacity.max(1),
            run_limit,
            total_limit,
            held: Arc::default(),
            runs: Mutex::default(),
        }
    }

    fn runs(&self) -> MutexGuard<'_, HashMap<RunId, Arc<RunTail>>> {
        self.runs.lock().expect("live hub lock")
    }

    fn entry(&self, run_id: &RunId) -> Arc<RunTail> {
        self.runs()
            .entry(run_id.clone())
            .or_insert_with(RunTail::new)
            .clone()
    }

    /// Tells the hub that `run_id` is new and this process will store (and
    /// so publish) every event of it from seq 0: its subscribers need not
    /// read the store before its first event. Call before anybody can
    /// append to it.
    pub fn expect(&self, run_id: &RunId) {
        let tail = self.entry(run_id);
        let mut state = tail.lock();
        if state.start.is_none() {
            state.start = Some(0);
            state.local = true;
        }
    }

    /// Takes back [`LiveHub::expect`] for a run that was never stored (the
    /// store refused to register it), so its tail does not stay for good.
    pub fn forget(&self, run_id: &RunId) {
        let mut runs = self.runs();
        let Some(tail) = runs.get(run_id).cloned() else {
            return;
        };
        let mut state = tail.lock();
        state.start = None;
        state.local = false;
        if state.listeners.is_empty() {
            runs.remove(run_id);
        }
    }

    /// Registers a listener of `run_id` taking events from seq `from` on.
    /// Register *before* reading the store: whatever is stored after the
    /// read is then in the tail (or the tail begins past it, see
    /// [`Taken::Behind`]).
    pub(crate) fn listen(&self, run_id: &RunId, from: Seq) -> Listener {
        // Under the map's lock, so that `release` never drops a tail
        // somebody is joining.
        let mut runs = self.runs();
        let tail = runs
            .entry(run_id.clone())
            .or_insert_with(RunTail::new)
            .clone();
        let mut state = tail.lock();
        let id = state.next_listener;
        state.next_listener += 1;
        state.listeners.push((id, from));
        drop(state);
        drop(runs);
        let changes = tail.changed.subscribe();
        Listener { tail, id, changes }
    }

    /// The events of the listener's run at or past seq `from`, if the tail
    /// has them. Counts them as taken: a batch every listener has taken is
    /// dropped.
    pub(crate) fn take(&self, listener: &Listener, from: Seq) -> Taken {
        let mut state = listener.tail.lock();
        let Some(start) = state.start else {
            return Taken::Unknown;
        };
        if from < start {
            return Taken::Behind;
        }
        if from >= state.end {
            return if state.ended {
                Taken::Ended
            } else {
                Taken::UpToDate
            };
        }
        let first = state
            .batches
            .partition_point(|(batch, _)| batch.last().is_some_and(|last| last.seq < from));
        let events: Vec<SharedEvent> = state
            .batches
            .range(first..)
            .flat_map(|(batch, _)| SharedEvent::all(batch.clone()))
            .filter(|event| event.seq >= from)
            .collect();
        let end = state.end;
        if let Some((_, taken)) = state
            .listeners
            .iter_mut()
            .find(|(id, _)| *id == listener.id)
        {
            *taken = (*taken).max(end);
        }
        let freed = state.drop_taken();
        drop(state);
        self.held.fetch_sub(freed, Ordering::Relaxed);
        Taken::Events(events)
    }

    /// Lets go of a listener. When it was the last, the run's tail keeps
    /// nothing (what is held was for listeners that took it or went back
    /// to the store; a later subscriber reads the store), and a run that
    /// ended, or of which nothing was published, leaves the hub.
    pub(crate) fn release(&self, run_id: &RunId, listener: Listener) {
        let mut runs = self.runs();
        let mut state = listener.tail.lock();
        state.listeners.retain(|(id, _)| *id != listener.id);
        if !state.listeners.is_empty() {
            return;
        }
        let freed = state.drop_all();
        self.held.fetch_sub(freed, Ordering::Relaxed);
        if (state.ended || state.start.is_none())
            && runs
                .get(run_id)
                .is_some_and(|tail| Arc::ptr_eq(tail, &listener.tail))
        {
            runs.remove(run_id);
        }
    }

    /// Adds `batch` to its run's tail and wakes the run's listeners. Call
    /// only after the batch is stored, and for each run in seq order.
    pub fn publish(&self, batch: Batch) {
        let Some(last) = batch.last() else { return };
        let run_id = &last.run_id;
        let tail = {
            let mut runs = self.runs();
            match runs.get(run_id) {
                Some(tail) => tail.clone(),
                // A run nobody listens to: worth a tail only from its start.
                None if batch[0].seq == 0 && !last.kind.is_terminal() => runs
                    .entry(run_id.clone())
                    .or_insert_with(RunTail::new)
                    .clone(),
                None => return,
            }
        };
        let bytes = batch_bytes(&batch);
        let mut state = tail.lock();
        let (added, freed) = state.push(batch.clone(), bytes, self.capacity, self.run_limit);
        self.held.fetch_add(added, Ordering::Relaxed);
        self.held.fetch_sub(freed, Ordering::Relaxed);
        // Over the limit for all runs: this run gives up its oldest batches
        // (its listeners behind read the store).
        let held = self.held.load(Ordering::Relaxed);
        if held > self.total_limit {
            let freed = state.drop_oldest(0, held - self.total_limit);
            self.held.fetch_sub(freed, Ordering::Relaxed);
        }
        let gone = state.ended && state.listeners.is_empty();
        if gone {
            let freed = state.drop_all();
            self.held.fetch_sub(freed, Ordering::Relaxed);
        }
        drop(state);
        tail.changed.send_modify(|version| *version += 1);
        if gone {
            let mut runs = self.runs();
            if runs
                .get(run_id)
                .is_some_and(|held| Arc::ptr_eq(held, &tail))
            {
                runs.remove(run_id);
            }
        }
    }

    /// How many runs the hub keeps a tail or listeners for (for tests and
    /// status).
    pub fn followed_runs(&self) -> usize {
        self.runs().len()
    }

    /// Estimated bytes of events held for all runs (for tests and status).
    pub fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

impl RunTail {
    fn new() -> Arc<RunTail> {
        Arc::new(RunTail {
            state: Mutex::default(),
            changed: watch::Sender::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, TailState> {
        self.state.lock().expect("live tail lock")
    }
}

impl TailState {
    /// Appends a stored batch of `bytes`; returns the bytes added and those
    /// freed to keep within `capacity` batches and `limit` bytes.
    fn push(
        &mut self,
        batch: Batch,
        bytes: usize,
        capacity: usize,
        limit: usize,
    ) -> (usize, usize) {
        let first = batch[0].seq;
        let last = batch.last().expect("not empty");
        let (next, terminal) = (last.seq.saturating_add(1), last.kind.is_terminal());
        let mut freed = 0;
        // A batch that overlaps the tail continues it (the overlap is
        // skipped when taken). Before anything was published, or after a
        // gap (events stored but published elsewhere, or not at all), the
        // tail begins here.
        if self.start.is_none() || first > self.end {
            freed = self.drop_all();
            self.start = Some(first);
            self.end = first;
        }
        if next <= self.end {
            return (0, freed); // nothing new
        }
        self.end = next;
        self.ended |= terminal;
        self.batches.push_back((batch, bytes));
        self.bytes += bytes;
        freed += self.drop_taken();
        freed += self.drop_oldest(self.batches.len().saturating_sub(capacity), 0);
        freed += self.drop_oldest(0, self.bytes.saturating_sub(limit));
        (bytes, freed)
    }

    /// Drops batches every listener has taken (none when nobody listens:
    /// the run's first follower may not have come yet).
    fn drop_taken(&mut self) -> usize {
        let Some(taken) = self.listeners.iter().map(|(_, seq)| *seq).min() else {
            return 0;
        };
        let count = self
            .batches
            .iter()
            .take_while(|(batch, _)| batch.last().is_some_and(|last| last.seq < taken))
            .count();
        self.drop_oldest(count, 0)
    }

    /// Drops the oldest batches: at least `count` of them, and at least
    /// `bytes` bytes' worth. Returns the bytes freed.
    fn drop_oldest(&mut self, count: usize, bytes: usize) -> usize {
        let (mut dropped, mut freed) = (0, 0);
        while dropped < count || freed < bytes {
            let Some((_, size)) = self.batches.pop_front() else {
                break;
            };
            dropped += 1;
            freed += size;
        }
        self.bytes -= freed;
        self.advance_start();
        freed
    }

    fn drop_all(&mut self) -> usize {
        self.drop_oldest(usize::MAX, 0)
    }

    /// The tail now begins at its first held batch (or its end when it
    /// holds none).
    fn advance_start(&mut self) {
        if let Some(start) = self.start.as_mut() {
            let first = self
                .batches
                .front()
                .map_or(self.end, |(batch, _)| batch[0].seq);
            *start = (*start).max(first);
        }
    }
}

/// What a batch costs in memory, roughly: its events and what they own.
fn batch_bytes(batch: &[RunEvent]) -> usize {
    16 + batch.iter().map(event_bytes).sum::<usize>()
}

fn event_bytes(event: &RunEvent) -> usize {
    let owned = match &event.kind {
        EventKind::Started(started) => {
            started.tool.len() + started.node.len() + value_bytes(&started.arguments)
        }
        EventKind::Partial(partial) => {
            partial.content.iter().map(content_bytes).sum::<usize>()
                + partial.items.iter().map(value_bytes).sum::<usize>()
                + partial.group.as_ref().map_or(0, String::len)
        }
        EventKind::Log(log) => log.text.len(),
        EventKind::Completed(completed) => {
            completed.content.iter().map(content_bytes).sum::<usize>()
                + completed.structured.as_ref().map_or(0, value_bytes)
        }
        // Small, or rare: a fair guess.
        _ => 256,
    };
    size_of::<RunEvent>() + event.run_id.as_str().len() + owned
}

fn content_bytes(content: &Content) -> usize {
    let strings: &[&str] = match content {
        Content::Text { text } => &[text],
        Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
            &[data, mime_type]
        }
        Content::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            return size_of::<Content>()
                + uri.len()
                + [mime_type, text, blob]
                    .iter()
                    .map(|s| s.as_ref().map_or(0, String::len))
                    .sum::<usize>();
        }
        Content::ResourceLink {
            uri,
            name,
            mime_type,
        } => {
            return size_of::<Content>()
                + uri.len()
                + name.len()
                + mime_type.as_ref().map_or(0, String::len);
        }
    };
    size_of::<Content>() + strings.iter().map(|s| s.len()).sum::<usize>()
}

fn value_bytes(value: &Value) -> usize {
    size_of::<Value>()
        + match value {
            Value::String(text) => text.len(),
            Value::Array(values) => values.iter().map(value_bytes).sum(),
            Value::Object(map) => map
                .iter()
                .map(|(key, value)| 32 + key.len() + value_bytes(value))
                .sum(),
            _ => 0,
        }
}
