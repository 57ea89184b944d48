//! A node among several sharing one Redis: its lease, the sweep that closes
//! the runs of nodes that died, and cancellation between nodes.
//!
//! Each node holds a lease (a key with a time to live) under its name and
//! renews it three times per lease period. Every node sweeps the open runs
//! twice per period: a node that executes open runs and whose lease is gone
//! on two sweeps in a row (so it missed a renewal, not just a restart of
//! Redis that dropped every key) is dead, and its runs are closed `failed`
//! with code `interrupted`, as a restarting node closes its own. Closing is
//! an ordinary append, so two survivors racing to close one run store one
//! terminal event: the loser's append is refused.
//!
//! A cancel asked on a node that does not execute the run is stored as a
//! request with a time to live and published on the cancel channel; the
//! node executing it cancels it at once. Pub/sub delivers at most once (a
//! node whose subscription was down while Redis restarted misses the
//! message), so each sweep also looks for requests for the runs this node
//! executes: a cancel is late by at most half a lease period, never lost.
//!
//! A node with a free slot takes the calls busy nodes offer (`queue.rs`).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use tokio_util::sync::{CancellationToken, DropGuard};
use weir_core::RunId;
use weir_runtime::log::EventLog;
use weir_runtime::{Offer, Peers, Scheduler, recover_interrupted};

use crate::check::{Kind, optional_text};
use crate::codec::failed;
use crate::{RedisLog, queue, scripts, unique_name};

/// Settings of a [`Node`].
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The node's name: written into its runs, and the name of its lease.
    /// Unique among the live nodes.
    pub name: String,
    /// How long a lease lasts without renewal. A dead node's runs are closed
    /// within about two periods of its death.
    pub lease: Duration,
}

/// Why a node could not join.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A live node has this name.
    #[error("a live node is already named {0:?} on this Redis; give each node its own --node name")]
    NameTaken(String),
    /// Redis failed.
    #[error(transparent)]
    Log(#[from] weir_runtime::LogError),
}

/// This node's membership: the lease it holds while it lives. Dropping it
/// stops renewing (the lease then lapses); [`Node::leave`] gives it back at
/// once.
pub struct Node {
    shared: Arc<Shared>,
    _stop: DropGuard,
}

struct Shared {
    log: RedisLog,
    options: NodeOptions,
    /// Who holds the lease: this process, not just a node of this name.
    token: String,
    stop: CancellationToken,
}

impl Node {
    /// Takes the lease of `options.name`, or fails when a live node holds
    /// it, and keeps renewing it.
    pub async fn join(log: &RedisLog, options: NodeOptions) -> Result<Node, NodeError> {
        let shared = Arc::new(Shared {
            log: log.clone(),
            options,
            token: unique_name(),
            stop: CancellationToken::new(),
        });
        let first = shared.clone();
        let held = log
            .io(move |_| {
                let first = first.clone();
                async move { first.renew().await }
            })
            .await?;
        if !held {
            return Err(NodeError::NameTaken(shared.options.name.clone()));
        }
        log.io_handle().spawn(renew_lease(shared.clone()));
        Ok(Node {
            _stop: shared.stop.clone().drop_guard(),
            shared,
        })
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.shared.options.name
    }

    /// Starts the work this node shares: cancels asked elsewhere reach
    /// `scheduler`, dead nodes' runs get closed, and offers from busy nodes
    /// are taken whenever `scheduler` has a free slot. Hands the scheduler
    /// the way to reach the other nodes.
    pub fn serve(&self, scheduler: &Scheduler) {
        scheduler.join_peers(Arc::new(ToPeers(self.shared.clone())));
        let io = self.shared.log.io_handle();
        io.spawn(sweep(self.shared.clone(), scheduler.clone()));
        io.spawn(take_cancels(self.shared.clone(), scheduler.clone()));
        io.spawn(queue::take_offers(
            self.shared.log.clone(),
            self.shared.options.name.clone(),
            self.shared.options.lease,
            self.shared.stop.clone(),
            scheduler.clone(),
        ));
    }

    /// Gives the lease back now (a clean stop), so nobody waits for it to
    /// lapse. Runs still open are closed by the next start of this node or
    /// by a survivor.
    pub async fn leave(self) -> Result<(), NodeError> {
        self.shared.stop.cancel();
        let shared = self.shared.clone();
        self.shared
            .log
            .io(move |core| {
                let shared = shared.clone();
                async move {
                    let _: i64 = scripts::RELEASE
                        .key(core.keys.node(&shared.options.name))
                        .arg(&shared.token)
                        .invoke_async(&mut core.conn())
                        .await
                        .map_err(failed("giving a node's lease back"))?;
                    Ok(())
                }
            })
            .await?;
        Ok(())
    }
}

impl Shared {
    /// Takes or renews the lease; `false` when another process holds it.
    async fn renew(&self) -> Result<bool, weir_runtime::LogError> {
        const DOING: &str = "renewing a node's lease";
        let core = self.log.core();
        let key = core.keys.node(&self.options.name);
        let ttl = self.options.lease.as_millis().max(1) as u64;
        let held = scripts::LEASE
            .key(&key)
            .arg(&self.token)
            .arg(ttl)
            .invoke_async::<i64>(&mut core.conn())
            .await;
        match held {
            Ok(held) => Ok(held == 1),
            Err(error) => Err(core.explained(DOING, error, &[(key, Kind::Lease)]).await),
        }
    }

    async fn every(&self, period: Duration) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            () = tokio::time::sleep(period) => true,
        }
    }
}

async fn renew_lease(shared: Arc<Shared>) {
    while shared.every(shared.options.lease / 3).await {
        match shared.renew().await {
            Ok(true) => {}
            Ok(false) => tracing::error!(
                "redis: another process holds the lease of node {:?}; this node's runs may be closed by others",
                shared.options.name
            ),
            Err(error) => tracing::warn!("{error}"),
        }
    }
}

/// How long a cancellation request waits for the node executing its run.
const CANCEL_REQUEST_TTL_S: u64 = 3_600;

/// Closes the runs of nodes found without a lease on two sweeps in a row,
/// and cancels this node's runs whose cancel message was lost.
async fn sweep(shared: Arc<Shared>, scheduler: Scheduler) {
    let mut suspects: HashSet<String> = HashSet::new();
    while shared.every(shared.options.lease / 2).await {
        let open = match open_runs(&shared).await {
            Ok(open) => open,
            Err(error) => {
                tracing::warn!("{error}");
                continue;
            }
        };
        if let Err(error) = take_cancel_requests(&shared, &scheduler, &open).await {
            tracing::warn!("{error}");
        }
        let lapsed = match lapsed_nodes(&shared, &open).await {
            Ok(lapsed) => lapsed,
            Err(error) => {
                tracing::warn!("{error}");
                continue;
            }
        };
        for node in lapsed.intersection(&suspects) {
            match recover_interrupted(&shared.log as &dyn EventLog, node).await {
                Ok(0) => {}
                Ok(closed) => tracing::warn!(
                    "redis: node {node:?} lost its lease; closed {closed} of its runs as interrupted"
                ),
                // Another survivor closed one first, or Redis failed: the
                // next sweep looks again.
                Err(error) => tracing::warn!("closing the runs of node {node:?}: {error}"),
            }
        }
        suspects = lapsed;
    }
}

/// An open run and the node that executes it.
struct OpenRun {
    run_id: String,
    node: Option<String>,
}

/// Every open run, with its node.
async fn open_runs(shared: &Shared) -> Result<Vec<OpenRun>, weir_runtime::LogError> {
    const DOING: &str = "listing the open runs";
    let log = &shared.log;
    let keys = &log.core().keys;
    let mut conn = log.core().conn();
    let open: Vec<String> = conn
        .zrange(keys.open(), 0, -1)
        .await
        .map_err(failed(DOING))?;
    let mut pipe = redis::pipe();
    for run_id in &open {
        pipe.cmd("HGET")
            .arg(format!("{}run:{run_id}", keys.prefix()))
            .arg("node");
    }
    // A record that is not a hash has no node this sweep can act on: it
    // is passed over, not the sweep's failure (listings report it).
    let nodes: Vec<redis::Value> = pipe
        .ignore_errors()
        .query_async(&mut conn)
        .await
        .map_err(failed(DOING))?;
    Ok(open
        .into_iter()
        .zip(nodes)
        .map(|(run_id, node)| OpenRun {
            run_id,
            node: optional_text(node),
        })
        .collect())
}

/// Cancels this node's open runs that have a cancellation request waiting
/// (its message was lost), and drops the requests it served.
async fn take_cancel_requests(
    shared: &Shared,
    scheduler: &Scheduler,
    open: &[OpenRun],
) -> Result<(), weir_runtime::LogError> {
    const DOING: &str = "looking for cancellation requests";
    let keys = &shared.log.core().keys;
    let mine: Vec<&str> = open
        .iter()
        .filter(|run| run.node.as_deref() == Some(shared.options.name.as_str()))
        .map(|run| run.run_id.as_str())
        .collect();
    if mine.is_empty() {
        return Ok(());
    }
    let mut conn = shared.log.core().conn();
    let mut pipe = redis::pipe();
    for run_id in &mine {
        pipe.get(keys.cancel_request(run_id));
    }
    // A request key of another type is no request.
    let reasons: Vec<redis::Value> = pipe
        .ignore_errors()
        .query_async(&mut conn)
        .await
        .map_err(failed(DOING))?;
    let mut served = redis::pipe();
    for (run_id, reason) in mine.iter().zip(reasons) {
        let (Some(reason), Ok(parsed)) = (optional_text(reason), RunId::parse(run_id)) else {
            continue;
        };
        if scheduler.cancel_here(&parsed, &reason) {
            tracing::info!("redis: cancelled run {run_id}, whose cancel message was lost");
        }
        served.del(keys.cancel_request(run_id)).ignore();
    }
    let () = served.query_async(&mut conn).await.map_err(failed(DOING))?;
    Ok(())
}

/// The nodes, other than this one, that execute open runs and hold no lease.
async fn lapsed_nodes(
    shared: &Shared,
    open: &[OpenRun],
) -> Result<HashSet<String>, weir_runtime::LogError> {
    const DOING: &str = "looking for nodes that died";
    let log = &shared.log;
    let keys = &log.core().keys;
    let mut conn = log.core().conn();
    let nodes: BTreeSet<String> = open
        .iter()
        .filter_map(|run| run.node.clone())
        .filter(|node| *node != shared.options.name)
        .collect();
    let mut pipe = redis::pipe();
    for node in &nodes {
        pipe.exists(keys.node(node));
    }
    let alive: Vec<bool> = pipe.query_async(&mut conn).await.map_err(failed(DOING))?;
    Ok(nodes
        .into_iter()
        .zip(alive)
        .filter_map(|(node, alive)| (!alive).then_some(node))
        .collect())
}

/// Cancels, on this node, the runs other nodes were asked to cancel.
async fn take_cancels(shared: Arc<Shared>, scheduler: Scheduler) {
    let channel = shared.log.core().keys.cancel_channel();
    let mut backoff = Duration::from_millis(50);
    loop {
        let listened = tokio::select! {
            () = shared.stop.cancelled() => return,
            listened = listen_for_cancels(&shared.log, &channel, &scheduler) => listened,
        };
        match listened {
            Ok(()) => backoff = Duration::from_millis(50),
            Err(error) => tracing::warn!(
                "redis: the cancel channel is down ({error}); retrying in {backoff:?}"
            ),
        }
        if !shared.every(backoff).await {
            return;
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

async fn listen_for_cancels(
    log: &RedisLog,
    channel: &str,
    scheduler: &Scheduler,
) -> redis::RedisResult<()> {
    let mut pubsub = log.core().client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        let Ok(text) = std::str::from_utf8(message.get_payload_bytes()) else {
            continue;
        };
        let (run_id, reason) = text.split_once('\n').unwrap_or((text, "canceled"));
        if let Ok(parsed) = RunId::parse(run_id)
            && scheduler.cancel_here(&parsed, reason)
        {
            // Served: the sweep need not find it (it expires anyway).
            let _: Result<(), _> = log
                .core()
                .conn()
                .del(log.core().keys.cancel_request(run_id))
                .await;
        }
    }
    Ok(())
}

/// The scheduler's way to the other nodes.
struct ToPeers(Arc<Shared>);

impl Peers for ToPeers {
    fn takes_offers(&self) -> bool {
        true
    }

    fn offer(&self, offer: Offer) {
        queue::offer(&self.0.log, offer);
    }

    fn cancel_elsewhere(&self, run_id: &RunId, reason: &str) {
        let core = self.0.log.core().clone();
        let (run_id, reason) = (run_id.clone(), reason.to_owned());
        self.0.log.io_handle().spawn(async move {
            if let Err(error) = send_cancel(&core, &run_id, &reason).await {
                tracing::warn!("redis: a cancel for another node was not sent: {error}");
            }
        });
    }
}

/// Asks whichever node executes `run_id` to cancel it. The request first:
/// a message that gets lost leaves it for the executing node's next sweep.
async fn send_cancel(core: &crate::Core, run_id: &RunId, reason: &str) -> redis::RedisResult<()> {
    redis::pipe()
        .set_ex(
            core.keys.cancel_request(run_id.as_str()),
            reason,
            CANCEL_REQUEST_TTL_S,
        )
        .ignore()
        .publish(core.keys.cancel_channel(), format!("{run_id}\n{reason}"))
        .ignore()
        .query_async(&mut core.conn())
        .await
}

impl RedisLog {
    /// Asks the node executing `run_id` to cancel it, as a node does for a
    /// run another node executes: for a client that is no node (`weir runs
    /// cancel --redis`). The run ends `canceled` once that node acts,
    /// within half a lease period even if the message is lost; a run that
    /// has ended, or whose node is gone, is left as it is (a survivor closes
    /// a dead node's runs `interrupted`).
    pub async fn request_cancel(
        &self,
        run_id: &RunId,
        reason: &str,
    ) -> Result<(), weir_runtime::LogError> {
        let (run_id, reason) = (run_id.clone(), reason.to_owned());
        self.io(move |core| {
            let (run_id, reason) = (run_id.clone(), reason.clone());
            async move {
                send_cancel(&core, &run_id, &reason)
                    .await
                    .map_err(failed("sending a cancel request"))
            }
        })
        .await
    }
}
