//! The doorbell: every append is announced, with its events, on a pub/sub
//! channel of its run's own. A node listens on a run's channel only while
//! somebody on it follows the run ([`Bell::follow`]) and another handle
//! writes it (its own appends reach its live hub directly), and hands what
//! it hears to its live hub, so a subscriber on node B follows a run that
//! node A writes as it is written. A node is sent, and decodes, only the
//! runs it follows; the append script announces only when a node listens.
//!
//! Pub/sub delivers at most once: a message lost while Redis restarts, or a
//! connection is down, or sent while a node was still subscribing, is a gap
//! that the subscription fills by reading the stream (it re-reads on a gap
//! and after 200 ms of silence). The doorbell only makes following fast;
//! the stream is what makes it complete.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::{mpsc, oneshot};
use weir_core::RunId;
use weir_runtime::log::LiveHub;

use crate::codec::{announced_run, parse_announcement};
use crate::keys::Keys;

/// How long a new follower waits for its node to listen on the run's
/// channel before it reads the stream anyway (then the 200 ms poll and
/// the gap check make up for a slow subscription).
const LISTEN_WAIT: Duration = Duration::from_secs(1);

/// Channels named per SUBSCRIBE when a reconnected node listens again.
const RESUBSCRIBE_CHUNK: usize = 500;

/// One handle's ears: which runs somebody on it follows and which it
/// writes, and the task that keeps its pub/sub connection listening on
/// exactly the channels of runs followed here and written elsewhere.
pub(crate) struct Bell {
    runs: Arc<Runs>,
    /// Asks the listener to match its channels to `runs` for one run.
    changes: mpsc::UnboundedSender<Change>,
}

/// What the listener needs to know about runs, shared with it.
#[derive(Default)]
struct Runs(Mutex<RunsState>);

#[derive(Default)]
struct RunsState {
    /// Followers per run on this handle.
    followers: HashMap<RunId, usize>,
    /// Open runs this handle appended to last.
    written: HashSet<RunId>,
}

impl Runs {
    fn state(&self) -> std::sync::MutexGuard<'_, RunsState> {
        self.0.lock().expect("bell lock")
    }

    fn followed(&self, run_id: &RunId) -> bool {
        self.state().followers.contains_key(run_id)
    }

    /// Whether to listen on the run's channel.
    fn wanted(&self, run_id: &RunId) -> bool {
        let state = self.state();
        state.followers.contains_key(run_id) && !state.written.contains(run_id)
    }

    fn all_wanted(&self) -> Vec<RunId> {
        let state = self.state();
        let followed = state.followers.keys();
        followed
            .filter(|run| !state.written.contains(*run))
            .cloned()
            .collect()
    }
}

/// A run whose followers or writer changed; `done` is answered once the
/// listener's channels match (or it is not connected).
struct Change {
    run_id: RunId,
    done: Option<oneshot::Sender<()>>,
}

/// While it lives, its handle follows the run.
pub(crate) struct Following {
    bell: Arc<Bell>,
    run_id: RunId,
}

impl Drop for Following {
    fn drop(&mut self) {
        let mut state = self.bell.runs.state();
        let Some(count) = state.followers.get_mut(&self.run_id) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            state.followers.remove(&self.run_id);
            drop(state);
            self.bell.changed(&self.run_id, None);
        }
    }
}

impl Bell {
    /// A bell, and its listener for the IO runtime
    /// ([`Listener::listen_forever`]), which ends once the bell and every
    /// [`Following`] are gone.
    pub(crate) fn new() -> (Arc<Bell>, Listener) {
        let (changes, requests) = mpsc::unbounded_channel();
        let runs = Arc::new(Runs::default());
        let listener = Listener {
            runs: runs.clone(),
            requests,
        };
        (Arc::new(Bell { runs, changes }), listener)
    }

    /// Follows `run_id` until the returned value is dropped; returns once
    /// the node listens on the run's channel (or after [`LISTEN_WAIT`]), so
    /// that a store read after it misses no announcement.
    pub(crate) async fn follow(self: &Arc<Bell>, run_id: &RunId) -> Following {
        let first = {
            let mut state = self.runs.state();
            let count = state.followers.entry(run_id.clone()).or_default();
            *count += 1;
            *count == 1
        };
        let following = Following {
            bell: self.clone(),
            run_id: run_id.clone(),
        };
        if first {
            let (done, listening) = oneshot::channel();
            self.changed(run_id, Some(done));
            let _ = tokio::time::timeout(LISTEN_WAIT, listening).await;
        }
        following
    }

    /// Whether this handle is the one appending to `run_id` now: while it
    /// is, its followers here get its appends from the hub, not the channel.
    pub(crate) fn set_writing(&self, run_id: &RunId, writing: Writing) {
        let mut state = self.runs.state();
        let changed = match writing {
            Writing::Started => state.written.insert(run_id.clone()),
            Writing::Stopped => state.written.remove(run_id),
            // Nothing more to hear: no need to listen.
            Writing::Ended => {
                state.written.remove(run_id);
                false
            }
        };
        let followed = state.followers.contains_key(run_id);
        drop(state);
        if changed && followed {
            self.changed(run_id, None);
        }
    }

    fn changed(&self, run_id: &RunId, done: Option<oneshot::Sender<()>>) {
        // Fails only when the IO runtime is gone: nobody listens anyway.
        let _ = self.changes.send(Change {
            run_id: run_id.clone(),
            done,
        });
    }
}

/// What a handle's writing of a run did ([`Bell::set_writing`]).
pub(crate) enum Writing {
    /// It appended first, or again after another writer.
    Started,
    /// Another writer moved the log: listen again.
    Stopped,
    /// It appended the terminal event.
    Ended,
}

/// The listening half, run by [`Listener::listen_forever`].
pub(crate) struct Listener {
    runs: Arc<Runs>,
    requests: mpsc::UnboundedReceiver<Change>,
}

impl Listener {
    /// Listens for as long as the bell lives, reconnecting with backoff;
    /// while disconnected, followers are answered at once (they poll the
    /// stream meanwhile).
    pub(crate) async fn listen_forever(
        mut self,
        client: redis::Client,
        keys: Keys,
        origin: String,
        hub: Arc<LiveHub>,
    ) {
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.listen(&client, &keys, &origin, &hub).await {
                Ok(Ended::BellGone) => return,
                // Connected, then lost: start the backoff over.
                Ok(Ended::ConnectionLost) => backoff = Duration::from_millis(50),
                Err(error) => tracing::warn!(
                    "redis: the append doorbell is down ({error}); retrying in {backoff:?}, followers poll meanwhile"
                ),
            }
            if !self.wait_answering(backoff).await {
                return;
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Sleeps for `delay`, answering followers at once meanwhile; `false`
    /// when the bell is gone.
    async fn wait_answering(&mut self, delay: Duration) -> bool {
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return true,
                change = self.requests.recv() => match change {
                    Some(change) => drop(change.done),
                    None => return false,
                },
            }
        }
    }

    async fn listen(
        &mut self,
        client: &redis::Client,
        keys: &Keys,
        origin: &str,
        hub: &LiveHub,
    ) -> redis::RedisResult<Ended> {
        let (mut sink, mut messages) = client.get_async_pubsub().await?.split();
        let mut listening = HashSet::new();
        // Runs followed before (re)connecting: listen again.
        for chunk in self.runs.all_wanted().chunks(RESUBSCRIBE_CHUNK) {
            let channels: Vec<String> = chunk.iter().map(|run| keys.run_channel(run)).collect();
            sink.subscribe(&channels).await?;
            listening.extend(chunk.iter().cloned());
        }
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(message) => self.hear(message.get_payload_bytes(), origin, hub),
                    None => return Ok(Ended::ConnectionLost),
                },
                change = self.requests.recv() => match change {
                    Some(change) => self.apply(change, &mut sink, &mut listening, keys).await?,
                    None => return Ok(Ended::BellGone),
                },
            }
        }
    }

    /// Listens on the run's channel if it is wanted, else stops.
    async fn apply(
        &self,
        change: Change,
        sink: &mut PubSubSink,
        listening: &mut HashSet<RunId>,
        keys: &Keys,
    ) -> redis::RedisResult<()> {
        let Change { run_id, done } = change;
        let wanted = self.runs.wanted(&run_id);
        if wanted && !listening.contains(&run_id) {
            sink.subscribe(keys.run_channel(&run_id)).await?;
            listening.insert(run_id);
        } else if !wanted && listening.remove(&run_id) {
            sink.unsubscribe(keys.run_channel(&run_id)).await?;
        }
        if let Some(done) = done {
            let _ = done.send(());
        }
        Ok(())
    }

    /// Hands another handle's announced events to the hub: only for runs
    /// followed here, and decoded only then.
    fn hear(&self, payload: &[u8], origin: &str, hub: &LiveHub) {
        let Some((from, run_id, lines)) = announced_run(payload) else {
            return;
        };
        if from == origin.as_bytes() || !self.runs.followed(&run_id) {
            return;
        }
        if let Some(events) = parse_announcement(&run_id, lines) {
            hub.publish(events.into());
        }
    }
}

/// Why listening on one connection stopped without an error.
enum Ended {
    ConnectionLost,
    BellGone,
}
