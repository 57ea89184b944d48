//! The doorbell: every append is announced on a pub/sub channel with its
//! events; each node hands the announcements of other nodes' appends to its
//! own live hub, so a subscriber on node B follows a run that node A writes
//! as it is written.
//!
//! Pub/sub delivers at most once: a message lost while Redis restarts, or a
//! connection is down, is a gap that the subscription fills by reading the
//! stream (it re-reads on a gap and after 200 ms of silence). The doorbell
//! only makes following fast; the stream is what makes it complete.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use weir_runtime::log::LiveHub;

use crate::codec::parse_announcement;

/// Listens for as long as the IO runtime runs, reconnecting with backoff.
pub(crate) async fn listen_forever(
    client: redis::Client,
    channel: String,
    origin: String,
    hub: Arc<LiveHub>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match listen(&client, &channel, &origin, &hub).await {
            // Connected, then lost: start the backoff over.
            Ok(()) => backoff = Duration::from_millis(50),
            Err(error) => tracing::warn!(
                "redis: the append doorbell is down ({error}); retrying in {backoff:?}, followers poll meanwhile"
            ),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

async fn listen(
    client: &redis::Client,
    channel: &str,
    origin: &str,
    hub: &LiveHub,
) -> redis::RedisResult<()> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        // Nobody here follows a run: nothing to hand over.
        if hub.followed_runs() == 0 {
            continue;
        }
        let Ok(text) = std::str::from_utf8(message.get_payload_bytes()) else {
            continue;
        };
        match parse_announcement(text) {
            Some((from, events)) if from != origin => hub.publish(events.into()),
            _ => {}
        }
    }
    Ok(())
}
