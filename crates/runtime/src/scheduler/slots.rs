//! A run's slots, held for as long as it executes, and the rule that
//! keeps nested runs from deadlocking.
//!
//! **The rule.** A run a client started (a *root*) takes a slot of its
//! tool and one of the global slots. A child run (`RunContext::call`)
//! takes no global slot (its root holds one for the whole tree), and
//! takes its parent's **lane** when it is free, else a slot of its tool,
//! else waits for whichever of the two frees first. Every run has one
//! lane, which it lends to one child at a time. The lane comes first so
//! that a chain of nested calls (a plan running a plan running a plan)
//! runs in its root's slots and leaves its tools' slots to other clients.
//!
//! **Why no nesting can deadlock.** A run waiting for its children holds
//! slots others may wait for; that is the danger (16 nested plans once
//! held every `plan_run` slot while the 17th waited for one). But a
//! waiting child never needs a slot another run holds: its parent's lane
//! will do, and the lane is held only by a sibling that is running. That
//! sibling either ends (giving the lane back) or waits for children of
//! its own, one of which can take *its* lane, and so on down: nesting is
//! finite (every run has a time limit; plans nest at most 8 deep), so at
//! the bottom of every tree some run is executing, not waiting. Every
//! tree therefore makes progress, and every slot, lane and global slot
//! comes back when its run ends. A root waiting for a global slot holds
//! its tool's slot meanwhile, but the global slots are held by trees that
//! make progress, so it gets one.
//!
//! **What it costs.** A tool's limit can be passed only through lanes: at
//! most one run per run that has children (its lane), so never more than
//! the runs the limits admit, times the depth of their nesting.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a run holds while it executes: a slot of its tool (or, for a
/// child, its parent's lane) and, for a root, one of the global slots.
pub(super) struct Slots {
    _tool: OwnedSemaphorePermit,
    _global: Option<OwnedSemaphorePermit>,
}

/// Where a run sits besides its tool's slots: a root in a global slot, a
/// child in its tree's (it may take its parent's lane instead of a slot).
#[derive(Clone, Copy)]
pub(super) enum Seat<'a> {
    /// A run a client started: it needs one of the global slots.
    Root(&'a Arc<Semaphore>),
    /// A child run: its parent's lane.
    Child(&'a Arc<Semaphore>),
}

/// The slots, if they are free now.
pub(super) fn try_take_slots(tool: &Arc<Semaphore>, seat: Seat<'_>) -> Option<Slots> {
    match seat {
        Seat::Root(global) => {
            let tool = tool.clone().try_acquire_owned().ok()?;
            let global = global.clone().try_acquire_owned().ok()?;
            Some(Slots {
                _tool: tool,
                _global: Some(global),
            })
        }
        Seat::Child(lane) => {
            let tool = lane
                .clone()
                .try_acquire_owned()
                .or_else(|_| tool.clone().try_acquire_owned())
                .ok()?;
            Some(Slots {
                _tool: tool,
                _global: None,
            })
        }
    }
}

/// Waits for the slots. A root waits for a slot of its tool first, then a
/// global one, so a run blocked on its own tool's limit does not hold a
/// global slot others could use; a child for its parent's lane or a slot
/// of its tool, whichever frees first.
pub(super) async fn take_slots(tool: &Arc<Semaphore>, seat: Seat<'_>) -> Slots {
    match seat {
        Seat::Root(global) => {
            let tool = tool.clone().acquire_owned().await.expect("never closed");
            let global = global.clone().acquire_owned().await.expect("never closed");
            Slots {
                _tool: tool,
                _global: Some(global),
            }
        }
        Seat::Child(lane) => {
            let tool = tokio::select! {
                biased;
                lane = lane.clone().acquire_owned() => lane,
                slot = tool.clone().acquire_owned() => slot,
            };
            Slots {
                _tool: tool.expect("never closed"),
                _global: None,
            }
        }
    }
}
