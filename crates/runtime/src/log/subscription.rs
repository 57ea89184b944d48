//! Replay from the store, then follow live: one ordered stream per run.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use weir_core::{RunId, Seq};

use super::live::{Listener, Taken};
use super::{EventLog, LogError, SharedEvent};

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
/// It registers with the live hub *before* reading the store, so whatever is
/// stored after the read reaches it live; overlap at the seam is dropped by
/// seq. A run this process writes from its start is live at once: the
/// hub's tail of it begins at seq 0, and a subscriber whose position is in
/// the tail reads no store at all. When it falls behind the tail (or sees a
/// gap) it reads the store from its position up to the tail, so a slow
/// subscriber loses nothing, never holds up the producer, and holds no
/// event in the hub.
pub struct Subscription {
    log: Arc<dyn EventLog>,
    run_id: RunId,
    next_seq: Seq,
    live: Option<Listener>,
    pending: VecDeque<SharedEvent>,
    /// Where the next events are looked for.
    step: Step,
    finished: bool,
}

/// Where a [`Subscription`] looks next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The hub's tail of the run.
    Tail,
    /// Nothing new in the tail: wait for a publish (or a while, then read
    /// the store).
    Wait,
    /// The store: the tail begins past our position, or knows nothing yet.
    Store,
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
            step: Step::Tail,
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
                    self.step = Step::Store;
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
        let hub = self.log.live();
        let live = self
            .live
            .get_or_insert_with(|| hub.listen(&self.run_id, self.next_seq));
        // Every publish from here on wakes `changed`: none falls between
        // looking (in the tail or the store) and waiting after it.
        if self.step != Step::Wait {
            live.mark_seen();
        }
        match self.step {
            Step::Tail => match hub.take(live, self.next_seq) {
                Taken::Events(events) => {
                    // Whatever is pending lies past these: a gap's far
                    // side is only ever past the tail's start.
                    let ahead = std::mem::take(&mut self.pending);
                    self.pending.extend(events);
                    self.pending.extend(ahead);
                }
                Taken::Ended => self.finished = true,
                Taken::UpToDate => self.step = Step::Wait,
                Taken::Behind | Taken::Unknown => self.step = Step::Store,
            },
            // A run this process writes is published here whole: no need
            // to look in the store while it is quiet. Doing so anyway sent
            // 10,000 followers of runs slow to commit into the store's
            // queue of reads (8 at once), where they sat while their runs'
            // events came live (first item 10 s at the median; issue 27).
            Step::Wait if live.is_local() => {
                live.changed().await;
                self.step = Step::Tail;
            }
            Step::Wait => {
                // Quiet for a while: someone else may be writing the store
                // (another process, another node).
                self.step = match tokio::time::timeout(POLL, live.changed()).await {
                    Ok(()) => Step::Tail,
                    Err(_elapsed) => Step::Store,
                };
            }
            Step::Store => self.read_store().await?,
        }
        Ok(())
    }

    /// Reads the store at our position: up to what is pending or what the
    /// tail holds, which need not be read back.
    async fn read_store(&mut self) -> Result<(), LogError> {
        let tail_start = self
            .live
            .as_ref()
            .and_then(Listener::tail_start)
            .filter(|start| *start > self.next_seq);
        let ahead = self.pending.front().map(|event| event.seq);
        let limit = ahead
            .into_iter()
            .chain(tail_start)
            .map(|seq| seq.saturating_sub(self.next_seq).max(1) as usize)
            .fold(PAGE, usize::min);
        let page = self.log.read(&self.run_id, self.next_seq, limit).await?;
        // Only events at or past our position count: a store that ever
        // answered a `from` with earlier events (a seq bound that wrapped)
        // would otherwise be asked the same question forever.
        if page.last().is_some_and(|event| event.seq >= self.next_seq) {
            // Before whatever is pending; then back to the tail, which has
            // every batch stored since we listened (or begins past here:
            // then the store again). Staying on the store until it had
            // nothing more made a follower that started behind a fast
            // writer chase it page by page. A full page with nothing ahead
            // of it: the store may hold more (a run that ended before we
            // came), so read on.
            let (read, ahead) = (page.len(), std::mem::take(&mut self.pending));
            if read < limit || !ahead.is_empty() || tail_start.is_some() {
                self.step = Step::Tail;
            }
            self.pending.extend(SharedEvent::all(page.into()));
            self.pending.extend(ahead);
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
            // Whatever is stored from now on is published after.
            Some(_) => self.step = Step::Wait,
        }
        Ok(())
    }

    fn drop_live(&mut self) {
        if let Some(live) = self.live.take() {
            self.log.live().release(&self.run_id, live);
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.drop_live();
    }
}
