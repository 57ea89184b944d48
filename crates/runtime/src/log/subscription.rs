//! Replay from the store, then follow live: one ordered stream per run.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use weir_core::{RunId, Seq};

use super::{Batch, EventLog, LogError, SharedEvent};

/// Events read from the store per round trip while catching up.
const PAGE: usize = 512;

/// How long to wait for a live batch before looking in the store anyway. The
/// store may be written by another process (a second `weir`, another node),
/// whose appends never reach this process's hub.
const POLL: Duration = Duration::from_millis(200);

/// The events of one run from a given seq on, each exactly once, in order,
/// ending after the terminal event. Events come as [`SharedEvent`]s: live
/// ones are the very events the store holds, not copies.
///
/// It subscribes to the live hub *before* reading the store, so whatever is
/// stored after the read reaches it live; overlap at the seam is dropped by
/// seq. When it falls behind the live channel's bound (or sees a gap) it goes
/// back to reading the store from its position, so a slow subscriber loses
/// nothing and never holds up the producer.
pub struct Subscription {
    log: Arc<dyn EventLog>,
    run_id: RunId,
    next_seq: Seq,
    live: Option<broadcast::Receiver<Batch>>,
    pending: VecDeque<SharedEvent>,
    source: Source,
    finished: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Store,
    Live,
}

impl Subscription {
    /// Follows `run_id` in `log` from seq `from`.
    pub fn new(log: Arc<dyn EventLog>, run_id: RunId, from: Seq) -> Subscription {
        Subscription {
            log,
            run_id,
            next_seq: from,
            live: None,
            pending: VecDeque::new(),
            source: Source::Store,
            finished: false,
        }
    }

    /// The seq the next event will have.
    pub fn position(&self) -> Seq {
        self.next_seq
    }

    /// The next event; `None` after the terminal event (or after an error,
    /// or at once when the run has ended before the starting seq).
    pub async fn next(&mut self) -> Option<Result<SharedEvent, LogError>> {
        loop {
            if self.finished {
                return None;
            }
            while let Some(event) = self.pending.pop_front() {
                if event.seq < self.next_seq {
                    continue; // already delivered: overlap at the seam
                }
                if event.seq > self.next_seq {
                    // A gap: the store has what comes before this event;
                    // what is pending from here on stays (see `refill`).
                    self.pending.push_front(event);
                    self.source = Source::Store;
                    break;
                }
                // No event can follow seq `u64::MAX`: end rather than wrap.
                match event.seq.checked_add(1) {
                    Some(next) => self.next_seq = next,
                    None => self.finished = true,
                }
                self.finished |= event.kind.is_terminal();
                return Some(Ok(event));
            }
            if let Err(error) = self.refill().await {
                self.finished = true;
                return Some(Err(error));
            }
        }
    }

    /// This subscription as a `Stream`.
    pub fn into_stream(self) -> impl Stream<Item = Result<SharedEvent, LogError>> + Send {
        futures_util::stream::unfold(self, |mut subscription| async move {
            let item = subscription.next().await?;
            Some((item, subscription))
        })
    }

    async fn refill(&mut self) -> Result<(), LogError> {
        if self.live.is_none() {
            // Subscribe first, read the store second: nothing falls between.
            self.live = Some(self.log.live().subscribe(&self.run_id));
            self.source = Source::Store;
        }
        if self.source == Source::Store {
            // Only what lies before the live events already pending: those
            // need not be read back.
            let limit = match self.pending.front() {
                Some(ahead) => PAGE.min(ahead.seq.saturating_sub(self.next_seq).max(1) as usize),
                None => PAGE,
            };
            let page = self.log.read(&self.run_id, self.next_seq, limit).await?;
            // Only events at or past our position count: a store that ever
            // answered a `from` with earlier events (a seq bound that wrapped)
            // would otherwise be asked the same question forever.
            if page.last().is_some_and(|event| event.seq >= self.next_seq) {
                // Before whatever is pending; then back to the live channel,
                // which has every batch stored since we subscribed. Staying
                // on the store until it had nothing more made a follower
                // that started behind a fast writer chase it page by page,
                // reading the whole run back (15% of the server's CPU
                // streaming 1 KB items on SQLite); a gap sends it back here
                // for just the missing events.
                let (read, live) = (page.len(), std::mem::take(&mut self.pending));
                // A full page with nothing live waiting: the store may hold
                // more (a run that ended before we came), so read on.
                let more_stored = read == limit
                    && live.is_empty()
                    && self.live.as_ref().is_none_or(|live| live.is_empty());
                self.pending.extend(SharedEvent::all(page.into()));
                self.pending.extend(live);
                if !more_stored {
                    self.source = Source::Live;
                }
                return Ok(());
            }
            // Nothing stored at our position: the run may be over (we asked
            // for seqs past its end) or still going.
            let run = self.log.get_run(&self.run_id).await?;
            match run {
                None => return Err(LogError::UnknownRun(self.run_id.clone())),
                Some(run) if run.state.is_terminal() && run.events <= self.next_seq => {
                    self.finished = true;
                }
                Some(run) if run.events > self.next_seq => {} // appended meanwhile: read again
                Some(_) => self.source = Source::Live,
            }
            return Ok(());
        }
        let live = self.live.as_mut().expect("subscribed above");
        match tokio::time::timeout(POLL, live.recv()).await {
            Ok(Ok(batch)) => {
                let next_seq = self.next_seq;
                self.pending
                    .extend(SharedEvent::all(batch).filter(|event| event.seq >= next_seq));
            }
            // Fell behind the bound: catch up from the store.
            Ok(Err(RecvError::Lagged(_))) => self.source = Source::Store,
            // The run ended (or the hub let go): the store has the rest.
            Ok(Err(RecvError::Closed)) => self.drop_live(),
            // Quiet for a while: someone else may be writing the store.
            Err(_elapsed) => self.source = Source::Store,
        }
        Ok(())
    }

    fn drop_live(&mut self) {
        if self.live.take().is_some() {
            self.log.live().release(&self.run_id);
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.drop_live();
    }
}
