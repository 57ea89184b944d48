//! The delivery edge: a bounded queue per subscriber (a stdio client, an
//! HTTP response stream) between the loops that follow runs and the writer
//! that feeds the client.
//!
//! Two kinds of message share it (docs/design.md, "The event contract",
//! invariant 3):
//!
//! - **Kept** messages — partial results, logs, questions to the client,
//!   responses — are delivered exactly once, in the order they were pushed.
//!   When the queue is full, the pusher waits. A follower that waits stops
//!   reading its run's log; the log keeps everything, and the follower
//!   catches up from it once the client reads again, so nothing is lost and
//!   memory stays bounded.
//! - **Coalescing** messages — progress — carry a key (one per call). A new
//!   one replaces an older one of the same key that is still waiting: the
//!   older leaves its place and the newer joins the back of the queue, so
//!   the delivered messages keep the order they were pushed in (and SSE
//!   event ids only grow), and the newest progress pushed before a response
//!   is delivered before it. A replacement never waits for room, so a slow
//!   client holds at most one progress message per call.
//!
//! [`Queue`] is the pure part (property-tested below); [`channel`] wraps it
//! for tasks: [`Sender::push`] waits for room (or [`Sender::try_push`] says
//! there is none, and [`Sender::drained`] waits for the client to catch
//! up), [`Receiver::recv_many`] waits for messages.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Names the messages that replace one another: one key per call's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key(u64);

impl Key {
    /// A key no other call in this process has.
    pub(crate) fn fresh() -> Key {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Key(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A bounded queue in which messages with a [`Key`] replace older ones of
/// the same key, and all others are kept.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    entries: VecDeque<(Option<Key>, T)>,
    bound: usize,
}

impl<T> Queue<T> {
    /// A queue holding at most `bound` messages (at least one).
    pub(crate) fn new(bound: usize) -> Queue<T> {
        Queue {
            entries: VecDeque::new(),
            bound: bound.max(1),
        }
    }

    /// Adds `message`. With a key, it replaces a waiting message of that key
    /// (which then is never delivered) and joins the back. Hands the message
    /// back when there is no room for it: the caller waits for a pop.
    pub(crate) fn push(&mut self, message: T, key: Option<Key>) -> Result<(), T> {
        if let Some(key) = key
            && let Some(older) = self.entries.iter().rposition(|(k, _)| *k == Some(key))
        {
            // At most one message per key waits, so this frees one place,
            // and the new message takes it whatever the bound.
            self.entries.remove(older);
        } else if self.entries.len() >= self.bound {
            return Err(message);
        }
        self.entries.push_back((key, message));
        Ok(())
    }

    /// The oldest message still waiting.
    pub(crate) fn pop(&mut self) -> Option<T> {
        self.entries.pop_front().map(|(_, message)| message)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The receiver is gone: the client will read nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the client's stream is closed")]
pub(crate) struct Closed;

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Woken when a message arrives or the last sender leaves.
    arrived: Notify,
    /// Woken when room is made or the receiver leaves.
    room: Notify,
}

struct State<T> {
    queue: Queue<T>,
    senders: usize,
    receiver: bool,
}

impl<T> Shared<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().expect("delivery queue lock")
    }
}

/// A bounded delivery queue as a channel: many [`Sender`]s (the requests of
/// a stdio session, or one call's stream), one [`Receiver`] (the writer).
pub(crate) fn channel<T>(bound: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: Queue::new(bound),
            senders: 1,
            receiver: true,
        }),
        arrived: Notify::new(),
        room: Notify::new(),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// Pushes messages; see [`channel`].
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Sender<T> {
        self.shared.state().senders += 1;
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = {
            let mut state = self.shared.state();
            state.senders -= 1;
            state.senders == 0
        };
        if last {
            self.shared.arrived.notify_one();
        }
    }
}

/// Why [`Sender::try_push`] did not queue a message.
#[derive(Debug)]
pub(crate) enum TryPush<T> {
    /// No room: the message, handed back.
    Full(T),
    /// The receiver is gone.
    Closed,
}

impl<T> Sender<T> {
    /// Queues a message that must arrive, waiting while the queue is full.
    pub(crate) async fn send(&self, message: T) -> Result<(), Closed> {
        self.push(message, None).await
    }

    /// Queues `message`, waiting while the queue is full. With a `key`, a
    /// newer message of the same key may replace it while it waits.
    pub(crate) async fn push(&self, mut message: T, key: Option<Key>) -> Result<(), Closed> {
        loop {
            // Registered before the check, so a pop in between is not missed.
            let room = self.shared.room.notified();
            match self.try_push(message, key) {
                Ok(()) => return Ok(()),
                Err(TryPush::Closed) => return Err(Closed),
                Err(TryPush::Full(back)) => message = back,
            }
            room.await;
        }
    }

    /// Queues `message` if there is room now.
    pub(crate) fn try_push(&self, message: T, key: Option<Key>) -> Result<(), TryPush<T>> {
        let mut state = self.shared.state();
        if !state.receiver {
            return Err(TryPush::Closed);
        }
        state.queue.push(message, key).map_err(TryPush::Full)?;
        drop(state);
        self.shared.arrived.notify_one();
        Ok(())
    }

    /// Resolves once at most half the bound waits, or the receiver is gone:
    /// a follower that found the queue full resumes then, with room for a
    /// page of messages rather than one.
    pub(crate) async fn drained(&self) {
        loop {
            let room = self.shared.room.notified();
            {
                let state = self.shared.state();
                if !state.receiver || state.queue.len() <= state.queue.bound / 2 {
                    return;
                }
            }
            room.await;
        }
    }

    /// Resolves once the receiver is gone (the client left).
    pub(crate) async fn closed(&self) {
        loop {
            let room = self.shared.room.notified();
            if !self.shared.state().receiver {
                return;
            }
            room.await;
        }
    }
}

/// Takes messages in order; see [`channel`]. Dropping it closes the channel.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// Waits for messages and moves up to `limit` of them into `buffer`;
    /// returns how many. `0` means every sender is gone and nothing is left.
    pub(crate) async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        loop {
            let arrived = self.shared.arrived.notified();
            {
                let mut state = self.shared.state();
                if !state.queue.is_empty() {
                    let mut taken = 0;
                    while taken < limit.max(1)
                        && let Some(message) = state.queue.pop()
                    {
                        buffer.push(message);
                        taken += 1;
                    }
                    drop(state);
                    self.shared.room.notify_waiters();
                    return taken;
                }
                if state.senders == 0 {
                    return 0;
                }
            }
            arrived.await;
        }
    }

    /// How many messages wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shared.state().queue.len()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.state().receiver = false;
        self.shared.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    /// A message of the model: kept ones are numbered in push order,
    /// progress carries its call and value, the final response ends a call.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Message {
        Kept { call: u8, n: u32 },
        Progress { call: u8, value: u32 },
        Final { call: u8 },
    }

    impl Message {
        fn call(self) -> u8 {
            match self {
                Message::Kept { call, .. }
                | Message::Progress { call, .. }
                | Message::Final { call } => call,
            }
        }
    }

    /// One step of a script: a call (of three) pushes its next message, of
    /// a kind chosen by `what`, or the client pops up to `n` messages.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Push { call: u8, what: u8 },
        Pop { n: u8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3u8, 0..10u8).prop_map(|(call, what)| Op::Push { call, what }),
            1 => (0..6u8).prop_map(|n| Op::Pop { n }),
        ]
    }

    /// Plays a script against a queue of `bound` messages; a call whose push
    /// finds the queue full waits (keeps its message and pushes nothing
    /// else) until a pop makes room, as a follower does. After the script,
    /// every call finishes with its final response and the client reads
    /// everything. Returns what was pushed and what was delivered.
    fn play(bound: usize, ops: &[Op]) -> (Vec<Message>, Vec<Message>) {
        let mut queue = Queue::new(bound);
        let mut pushed = Vec::new();
        let mut delivered = Vec::new();
        let mut waiting: [Option<Message>; 3] = [None; 3];
        let mut counters = [(0u32, 0u32); 3];
        let keys = [Key::fresh(), Key::fresh(), Key::fresh()];
        let key_of = |message: Message| match message {
            Message::Progress { call, .. } => Some(keys[call as usize]),
            _ => None,
        };
        let offer = |queue: &mut Queue<Message>, message: Message, pushed: &mut Vec<_>| {
            let result = queue.push(message, key_of(message));
            assert!(
                queue.len() <= bound,
                "{} messages in a queue of {bound}",
                queue.len()
            );
            if result.is_ok() {
                pushed.push(message);
            }
            result.is_ok()
        };
        for &op in ops {
            match op {
                Op::Push { call, what } => {
                    let slot = call as usize;
                    let message = waiting[slot].take().unwrap_or_else(|| {
                        let (kept, progress) = &mut counters[slot];
                        if what < 4 {
                            *progress += 1;
                            Message::Progress {
                                call,
                                value: *progress,
                            }
                        } else {
                            *kept += 1;
                            Message::Kept { call, n: *kept }
                        }
                    });
                    if !offer(&mut queue, message, &mut pushed) {
                        waiting[slot] = Some(message);
                    }
                }
                Op::Pop { n } => {
                    for _ in 0..n {
                        delivered.extend(queue.pop());
                    }
                }
            }
        }
        for call in 0..3u8 {
            let finish = waiting[call as usize]
                .take()
                .into_iter()
                .chain([Message::Final { call }]);
            for message in finish {
                while !offer(&mut queue, message, &mut pushed) {
                    delivered.extend(queue.pop());
                }
            }
        }
        while let Some(message) = queue.pop() {
            delivered.push(message);
        }
        (pushed, delivered)
    }

    // Cases: proptest's default (256), or `PROPTEST_CASES` (CI: 1,000).
    proptest! {
        /// Kept messages arrive exactly once and in order; progress only
        /// increases; the newest progress pushed before a call's final
        /// response arrives before it; everything delivered was pushed, in
        /// push order.
        #[test]
        fn kept_messages_arrive_once_in_order_and_progress_coalesces(
            bound in 1usize..8,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let (pushed, delivered) = play(bound, &ops);
            let kept = |messages: &[Message]| -> Vec<Message> {
                messages.iter().copied().filter(|m| !matches!(m, Message::Progress { .. })).collect()
            };
            prop_assert_eq!(kept(&delivered), kept(&pushed));
            // Delivered is a subsequence of pushed: nothing reordered.
            let mut rest = pushed.iter();
            for message in &delivered {
                prop_assert!(rest.any(|p| p == message), "{:?} out of order", message);
            }
            for call in 0..3u8 {
                let progress: Vec<u32> = delivered.iter().filter_map(|m| match m {
                    Message::Progress { call: c, value } if *c == call => Some(*value),
                    _ => None,
                }).collect();
                prop_assert!(progress.windows(2).all(|w| w[0] < w[1]), "{:?}", progress);
                let newest = pushed.iter().rev().find_map(|m| match m {
                    Message::Progress { call: c, value } if *c == call => Some(*value),
                    _ => None,
                });
                let before_final: Vec<&Message> = delivered
                    .iter()
                    .filter(|m| m.call() == call)
                    .take_while(|m| !matches!(m, Message::Final { .. }))
                    .collect();
                if let Some(newest) = newest {
                    prop_assert_eq!(
                        before_final.iter().rev().find_map(|m| match m {
                            Message::Progress { value, .. } => Some(*value),
                            _ => None,
                        }),
                        Some(newest)
                    );
                }
            }
        }
    }

    /// A client that never reads: progress keeps one place per call, and a
    /// kept message waits for room rather than growing the queue.
    #[tokio::test]
    async fn progress_never_waits_behind_a_stalled_client() {
        let (sender, mut receiver) = channel::<u32>(2);
        let key = Key::fresh();
        for value in 0..1000 {
            sender.push(value, Some(key)).await.unwrap();
        }
        sender.send(5000).await.unwrap();
        assert_eq!(receiver.len(), 2);
        let blocked = tokio::time::timeout(Duration::from_millis(50), sender.send(5001)).await;
        assert!(blocked.is_err(), "a kept message went past the bound");
        let mut got = Vec::new();
        receiver.recv_many(&mut got, 10).await;
        assert_eq!(got, [999, 5000]);
    }

    /// Several tasks push while a slow reader pops: each task's kept
    /// messages arrive in order, progress only grows, and the queue stays
    /// within its bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_reader_with_concurrent_senders() {
        let bound = 8;
        let (sender, mut receiver) = channel::<(u8, bool, u32)>(bound);
        let mut tasks = Vec::new();
        for call in 0..4u8 {
            let sender = sender.clone();
            tasks.push(tokio::spawn(async move {
                let key = Key::fresh();
                for n in 0..200u32 {
                    if n % 3 == 0 {
                        sender.send((call, false, n)).await.unwrap();
                    } else {
                        sender.push((call, true, n), Some(key)).await.unwrap();
                    }
                }
                sender.send((call, false, u32::MAX)).await.unwrap();
            }));
        }
        drop(sender);
        let mut got = Vec::new();
        let mut batch = Vec::new();
        loop {
            assert!(receiver.len() <= bound);
            batch.clear();
            if receiver.recv_many(&mut batch, 3).await == 0 {
                break;
            }
            got.extend(batch.iter().copied());
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        for task in tasks {
            task.await.unwrap();
        }
        for call in 0..4u8 {
            let kept: Vec<u32> = got
                .iter()
                .filter(|(c, progress, _)| *c == call && !progress)
                .map(|m| m.2)
                .collect();
            let expected: Vec<u32> = (0..200).step_by(3).chain([u32::MAX]).collect();
            assert_eq!(kept, expected);
            let all: Vec<u32> = got.iter().filter(|m| m.0 == call).map(|m| m.2).collect();
            assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
            // The last progress (199) arrives before the final response.
            assert_eq!(all[all.len() - 2], 199);
        }
    }

    /// A follower that found the queue full resumes once half of it has
    /// been read, not at the first free place.
    #[tokio::test]
    async fn drained_waits_for_half_the_queue() {
        let (sender, mut receiver) = channel::<u32>(4);
        for n in 0..4 {
            sender.send(n).await.unwrap();
        }
        assert!(matches!(sender.try_push(4, None), Err(TryPush::Full(4))));
        let drained = tokio::spawn({
            let sender = sender.clone();
            async move { sender.drained().await }
        });
        let mut got = Vec::new();
        receiver.recv_many(&mut got, 1).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!drained.is_finished(), "resumed with 3 of 4 places taken");
        receiver.recv_many(&mut got, 1).await;
        tokio::time::timeout(Duration::from_secs(1), drained)
            .await
            .expect("resumed at half")
            .unwrap();
        assert_eq!(got, [0, 1]);
    }

    #[tokio::test]
    async fn a_closed_receiver_fails_senders_and_wakes_waiters() {
        let (sender, receiver) = channel::<u32>(1);
        sender.send(1).await.unwrap();
        let waiting = {
            let sender = sender.clone();
            tokio::spawn(async move { sender.send(2).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(receiver);
        assert_eq!(waiting.await.unwrap(), Err(Closed));
        assert_eq!(sender.send(3).await, Err(Closed));
        sender.closed().await;
    }
}
