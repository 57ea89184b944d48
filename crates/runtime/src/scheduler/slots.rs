//! A run's slots: one of its tool's and one of the global ones, held for
//! as long as it executes. A child run takes no global slot: its parent
//! holds one for the whole tree while it waits, and a child that needed
//! one too could wait forever for slots its waiting ancestors hold.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A slot for the run's tool and one of the global slots (`None` for a
/// child run).
pub(super) struct Slots {
    _tool: OwnedSemaphorePermit,
    _global: Option<OwnedSemaphorePermit>,
}

pub(super) fn try_take_slots(
    tool: &Arc<Semaphore>,
    global: Option<&Arc<Semaphore>>,
) -> Option<Slots> {
    let tool = tool.clone().try_acquire_owned().ok()?;
    let global = match global {
        Some(global) => Some(global.clone().try_acquire_owned().ok()?),
        None => None,
    };
    Some(Slots {
        _tool: tool,
        _global: global,
    })
}

/// Waits for a slot of the tool first, then a global one, so a run blocked
/// on its own tool's limit does not hold a global slot others could use.
pub(super) async fn take_slots(tool: &Arc<Semaphore>, global: Option<&Arc<Semaphore>>) -> Slots {
    let tool = tool.clone().acquire_owned().await.expect("never closed");
    let global = match global {
        Some(global) => Some(global.clone().acquire_owned().await.expect("never closed")),
        None => None,
    };
    Slots {
        _tool: tool,
        _global: global,
    }
}
