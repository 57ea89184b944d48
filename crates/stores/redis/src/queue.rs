//! The shared run queue: a stream read by one consumer group, `workers`.
//! A node with no free slot offers a registered run (`Peers::offer`); every
//! node with a free slot reads the group, makes itself the run's node (the
//! `CLAIM` script: only while the run is still pending) and executes it
//! (`Scheduler::take`). Each offer goes to one consumer; an offer read by a
//! node that died before claiming it is claimed again by another after two
//! lease periods (XAUTOCLAIM); a run claimed by a node that died before
//! starting it is pending under a dead node, and the sweep closes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::streams::{StreamAutoClaimOptions, StreamId, StreamReadOptions, StreamReadReply};
use tokio_util::sync::CancellationToken;
use weir_core::RunId;
use weir_runtime::{Offer, Scheduler};

use crate::{RedisLog, scripts};

const GROUP: &str = "workers";

/// Puts `offer` on the queue (on the IO runtime; returns at once).
pub(crate) fn offer(log: &RedisLog, offer: Offer) {
    let core = log.core().clone();
    log.io_handle().spawn(async move {
        let arguments = serde_json::to_string(&offer.arguments).expect("JSON values serialize");
        let timeout_ms = offer.timeout.as_millis().min(u64::MAX as u128) as u64;
        let owner = offer.owner.unwrap_or_default();
        let client = offer.client.unwrap_or_default();
        let timeout_ms = timeout_ms.to_string();
        let mut fields = vec![
            ("run", offer.run_id.as_str()),
            ("tool", offer.tool.as_str()),
            ("arguments", arguments.as_str()),
            ("timeout_ms", timeout_ms.as_str()),
            ("owner", owner.as_str()),
            ("client", client.as_str()),
        ];
        // Absent: every tool. An empty list is a scope too (no tool), so
        // the field is written whenever there is a scope.
        let allowed = offer
            .allowed_tools
            .as_ref()
            .map(|tools| serde_json::to_string(&**tools).expect("names serialize"));
        if let Some(allowed) = &allowed {
            fields.push(("allowed_tools", allowed.as_str()));
        }
        let added: Result<String, _> = core.conn().xadd(core.keys.queue(), "*", &fields).await;
        if let Err(error) = added {
            // The run stays pending under this node: closed `interrupted`
            // at its next start, like a run the store would not take.
            tracing::warn!("redis: run {} could not be queued: {error}", offer.run_id);
        }
    });
}

/// Takes offers whenever `scheduler` has a free slot, until `stop`.
pub(crate) async fn take_offers(
    log: RedisLog,
    node: String,
    lease: Duration,
    stop: CancellationToken,
    scheduler: Scheduler,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let served = tokio::select! {
            () = stop.cancelled() => return,
            served = serve(&log, &node, lease, &scheduler) => served,
        };
        if let Err(error) = served {
            tracing::warn!(
                "redis: the run queue is unreachable ({error}); retrying in {backoff:?}"
            );
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// Reads the queue on a connection of its own: a blocking read holds up
/// every other command on its connection.
async fn serve(
    log: &RedisLog,
    node: &str,
    lease: Duration,
    scheduler: &Scheduler,
) -> redis::RedisResult<()> {
    let core = log.core();
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    let mut conn = core
        .client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let queue = core.keys.queue();
    let created: redis::RedisResult<()> = conn.xgroup_create_mkstream(&queue, GROUP, "0").await;
    if let Err(error) = created
        && error.code() != Some("BUSYGROUP")
    {
        return Err(error);
    }
    let mut reclaimed = Instant::now();
    loop {
        if scheduler.free_slots() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let mut entries = Vec::new();
        if reclaimed.elapsed() > lease {
            reclaimed = Instant::now();
            let stale: redis::streams::StreamAutoClaimReply = conn
                .xautoclaim_options(
                    &queue,
                    GROUP,
                    node,
                    (lease * 2).as_millis() as u64,
                    "0-0",
                    StreamAutoClaimOptions::default().count(1),
                )
                .await?;
            entries = stale.claimed;
        }
        if entries.is_empty() {
            let options = StreamReadOptions::default()
                .group(GROUP, node)
                .count(1)
                .block(500);
            let read: Option<StreamReadReply> =
                conn.xread_options(&[&queue], &[">"], &options).await?;
            entries = read
                .into_iter()
                .flat_map(|reply| reply.keys)
                .flat_map(|key| key.ids)
                .collect();
        }
        for entry in entries {
            if let Some(offer) = parse(&entry) {
                let claimed: i64 = scripts::CLAIM
                    .key(core.keys.run(&offer.run_id))
                    .arg(node)
                    .invoke_async(&mut conn)
                    .await?;
                if claimed == 1 && scheduler.take(offer.clone()).is_none() {
                    // The slot went to a local call meanwhile, or this node
                    // lacks the tool: back on the queue for another.
                    self::offer(log, offer);
                }
            }
            let _: i64 = conn.xack(&queue, GROUP, &[&entry.id]).await?;
            let _: i64 = conn.xdel(&queue, &[&entry.id]).await?;
        }
    }
}

/// An offer from its queue entry; `None` for an entry that is not one.
fn parse(entry: &StreamId) -> Option<Offer> {
    let text = |field: &str| entry.get::<String>(field);
    Some(Offer {
        run_id: RunId::parse(&text("run")?).ok()?,
        tool: text("tool")?,
        arguments: serde_json::from_str(&text("arguments")?).ok()?,
        timeout: Duration::from_millis(text("timeout_ms")?.parse().ok()?),
        owner: text("owner").filter(|owner| !owner.is_empty()),
        client: text("client").filter(|client| !client.is_empty()),
        allowed_tools: match text("allowed_tools") {
            Some(tools) => Some(Arc::new(serde_json::from_str(&tools).ok()?)),
            None => None,
        },
    })
}
