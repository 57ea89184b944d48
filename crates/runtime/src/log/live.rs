//! In-process live fan-out of stored events, bounded per run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use weir_core::{RunEvent, RunId};

/// Events stored by one append, shared by every live subscriber.
pub type Batch = Arc<[RunEvent]>;

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

/// Per-run broadcast channels of stored batches.
///
/// Bounded: each channel keeps at most `capacity` batches. A subscriber that
/// falls further behind gets `Lagged` and re-reads the store, so the producer
/// never waits for a slow reader and the reader never loses an event.
/// Channels exist only while somebody listens; publishing to a run nobody
/// follows costs one map lookup.
#[derive(Debug)]
pub struct LiveHub {
    capacity: usize,
    channels: Mutex<HashMap<RunId, broadcast::Sender<Batch>>>,
}

impl LiveHub {
    /// A hub keeping at most `capacity` (at least 1) unread batches per run.
    pub fn new(capacity: usize) -> LiveHub {
        LiveHub {
            capacity: capacity.max(1),
            channels: Mutex::default(),
        }
    }

    /// A receiver of batches of `run_id` stored from now on.
    pub fn subscribe(&self, run_id: &RunId) -> broadcast::Receiver<Batch> {
        let mut channels = self.channels.lock().expect("live hub lock");
        match channels.get(run_id) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = broadcast::channel(self.capacity);
                channels.insert(run_id.clone(), sender);
                receiver
            }
        }
    }

    /// Drops the channel of `run_id` if nobody listens any more.
    pub fn release(&self, run_id: &RunId) {
        let mut channels = self.channels.lock().expect("live hub lock");
        if channels
            .get(run_id)
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            channels.remove(run_id);
        }
    }

    /// Hands `batch` to the run's subscribers. Call only after the batch is
    /// stored. After the terminal event the channel closes, which tells the
    /// subscribers to look in the store for the rest.
    pub fn publish(&self, batch: Batch) {
        let Some(last) = batch.last() else { return };
        let mut channels = self.channels.lock().expect("live hub lock");
        if last.kind.is_terminal() {
            if let Some(sender) = channels.remove(&last.run_id) {
                let _ = sender.send(batch);
            }
        } else if let Some(sender) = channels.get(&last.run_id) {
            // No receiver left is fine: `release` will drop the channel.
            let _ = sender.send(batch);
        }
    }

    /// How many runs have live listeners (for tests and status).
    pub fn followed_runs(&self) -> usize {
        self.channels.lock().expect("live hub lock").len()
    }
}
