//! Retention: finished runs (and their artifacts) older than the configured
//! period are deleted, by a sweep every tenth of it.

use std::sync::Weak;
use std::time::Duration;

use super::Inner;
use crate::context::now_ms;
use crate::log::LogError;

/// Deletes the finished runs older than the retention period; none when runs
/// are kept forever.
pub(super) async fn sweep(inner: &Inner) -> Result<usize, LogError> {
    let Some(retention) = inner.config.retention else {
        return Ok(0);
    };
    let cutoff = now_ms().saturating_sub(retention.as_millis() as u64);
    inner.log.delete_finished_before(cutoff).await
}

/// Sweeps every tenth of the retention period (between 1 s and 1 h) until
/// the scheduler is dropped.
pub(super) fn spawn(inner: Weak<Inner>, retention: Duration) {
    let every = (retention / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = inner.upgrade() else { break };
            if let Err(error) = sweep(&inner).await {
                tracing::warn!(%error, "retention sweep failed; will retry");
            }
        }
    });
}
