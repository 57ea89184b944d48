//! A run's slots: one of its tool's and one of the global ones, held for
//! as long as it executes.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A slot for the run's tool and one of the global slots.
pub(super) struct Slots {
    _tool: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

pub(super) fn try_take_slots(tool: &Arc<Semaphore>, global: &Arc<Semaphore>) -> Option<Slots> {
    let tool = tool.clone().try_acquire_owned().ok()?;
    let global = global.clone().try_acquire_owned().ok()?;
    Some(Slots {
        _tool: tool,
        _global: global,
    })
}

/// Waits for a slot of the tool first, then a global one, so a run blocked
/// on its own tool's limit does not hold a global slot others could use.
pub(super) async fn take_slots(tool: &Arc<Semaphore>, global: &Arc<Semaphore>) -> Slots {
    let tool = tool.clone().acquire_owned().await.expect("never closed");
    let global = global.clone().acquire_owned().await.expect("never closed");
    Slots {
        _tool: tool,
        _global: global,
    }
}
