//! The seam to other nodes sharing this node's store: where a cancel goes
//! when the run executes elsewhere, and where a call goes when this node has
//! no slot for it. A single node has no peers and the scheduler works as it
//! always has; a networked store's crate implements [`Peers`]
//! (weir-store-redis's `Node`) and hands it over with
//! [`Scheduler::join_peers`](super::Scheduler::join_peers).
//!
//! A run offered to the peers is registered here (pending, this node's),
//! and followed here: its [`RunHandle`] ends with its terminal event
//! whichever node writes it. The node that takes it ([`Scheduler::take`])
//! executes it as if it had been submitted there. A cancel asked here
//! before anyone took it ends it here (`started`, then `canceled`: the
//! taker's `started` is then refused); after, it goes to the taker.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use weir_core::{Canceled, EventKind, RunEvent, RunId, Started};

use super::slots::{Seat, try_take_slots};
use super::submit::new_run_id;
use super::{Cancel, Inner, Lineage, RunHandle, RunOptions, Scheduler, SubmitError, run};
use crate::context::now_ms;

/// The other nodes of a cluster, as the scheduler needs them.
pub trait Peers: Send + Sync + 'static {
    /// Asks the other nodes to cancel `run_id`; the one executing it does
    /// (through [`Scheduler::cancel_here`](super::Scheduler::cancel_here)).
    /// Returns at once: the cancel lands in the run's log when it lands.
    fn cancel_elsewhere(&self, run_id: &RunId, reason: &str);

    /// Whether the other nodes take the runs this one has no slot for
    /// ([`Peers::offer`]); when not, such a run waits in this node's queue.
    fn takes_offers(&self) -> bool {
        false
    }

    /// Hands a registered, pending run to the nodes; the first with a free
    /// slot (this one included) takes it with [`Scheduler::take`].
    fn offer(&self, offer: Offer) {
        let _ = offer;
    }
}

/// A run offered to the nodes: what the one that takes it needs to execute
/// it. `arguments` are as the caller gave them (secrets included: the tool
/// needs them); the log keeps only the redacted copy.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    /// The registered run.
    pub run_id: RunId,
    /// Its tool.
    pub tool: String,
    /// Its arguments, as given.
    pub arguments: Value,
    /// Its time limit, from when it starts executing.
    pub timeout: Duration,
    /// Who started it.
    pub owner: Option<String>,
    /// The program that asked for it ([`RunOptions::client`]).
    pub client: Option<String>,
    /// The tools its caller may run ([`RunOptions::allowed_tools`]),
    /// which its children inherit on the node that takes it.
    pub allowed_tools: Option<Arc<BTreeSet<String>>>,
}

impl Scheduler {
    /// Global slots free on this node now.
    pub fn free_slots(&self) -> usize {
        self.inner.all_slots.available_permits()
    }

    /// Whether a call this node has no slot for goes to the peers.
    pub(super) fn offers(&self) -> bool {
        self.inner
            .peers
            .get()
            .is_some_and(|peers| peers.takes_offers())
    }

    /// Registers a call this node has no slot for and offers it to the
    /// peers; its handle follows the run wherever it executes.
    pub(super) async fn offer(
        &self,
        tool: &str,
        arguments: Value,
        options: RunOptions,
    ) -> Result<RunHandle, SubmitError> {
        let inner = &self.inner;
        // Admitted a moment ago: retired since (`replace_tools`), it is
        // as gone as a tool never served.
        let registered = inner.tool(tool).ok_or_else(|| SubmitError::UnknownTool {
            name: tool.to_owned(),
            available: inner
                .registry()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let stored = inner.redact_arguments(tool, &arguments);
        inner
            .log
            .create_run(inner.new_run(&run_id, tool, &stored, &options))
            .await?;
        let cancel = Cancel::default();
        inner
            .active
            .lock()
            .expect("active runs lock")
            .insert(run_id.clone(), cancel.clone());
        let timeout = options
            .timeout
            .or(registered.info.timeout)
            .unwrap_or(inner.config.default_timeout);
        let offered = Offer {
            run_id: run_id.clone(),
            tool: tool.to_owned(),
            arguments,
            timeout,
            owner: options.owner,
            client: options.client,
            allowed_tools: options.allowed_tools,
        };
        let started = Started {
            tool: tool.to_owned(),
            arguments: stored,
            node: inner.config.node.clone(),
        };
        inner.peers.get().expect("offers() said so").offer(offered);
        let finished = tokio::spawn(follow_offered(
            inner.clone(),
            run_id.clone(),
            started,
            cancel,
        ));
        Ok(RunHandle { run_id, finished })
    }

    /// Takes a run another node (or this one) offered, if this node has the
    /// tool and a free slot now, and executes it as if it had been
    /// submitted here; `None` otherwise, and the offer should go back to
    /// the queue. The caller has made this node the run's (`node` in its
    /// summary) before.
    pub fn take(&self, offer: Offer) -> Option<RunHandle> {
        let inner = &self.inner;
        let registered = inner.tool(&offer.tool)?;
        let slots = try_take_slots(&registered.slots, Seat::Root(&inner.all_slots))?;
        let cancel = Cancel::default();
        inner
            .active
            .lock()
            .expect("active runs lock")
            .insert(offer.run_id.clone(), cancel.clone());
        let lineage = Lineage {
            scheduler: Arc::downgrade(&self.inner),
            run_id: offer.run_id.clone(),
            cancel: cancel.clone(),
            owner: offer.owner,
            client: offer.client,
            allowed_tools: offer.allowed_tools,
            tools: Arc::new([offer.tool.clone()]),
            lane: Arc::new(tokio::sync::Semaphore::new(1)),
            parent_lane: None,
        };
        let arguments = run::Arguments {
            stored: inner.redact_arguments(&offer.tool, &offer.arguments),
            given: offer.arguments,
        };
        let inner = self.inner.clone();
        let id = offer.run_id.clone();
        let finished = tokio::spawn(async move {
            let terminal = run::execute(
                &inner,
                &offer.tool,
                &registered,
                arguments,
                offer.timeout,
                lineage,
                run::Admission {
                    slots: Some(slots),
                    // The node that offered it registered it.
                    registration: None,
                },
            )
            .await;
            inner.active.lock().expect("active runs lock").remove(&id);
            cancel.ended.cancel();
            terminal
        });
        Some(RunHandle {
            run_id: offer.run_id,
            finished,
        })
    }
}

/// Follows an offered run to its terminal event, whichever node writes it;
/// a cancel asked here meanwhile ends it here if nobody has started it, else
/// goes to the peers.
async fn follow_offered(
    inner: Arc<Inner>,
    run_id: RunId,
    started: Started,
    cancel: Cancel,
) -> Option<RunEvent> {
    let mut events = inner.log.subscribe_from(&run_id, 0);
    let mut asked = false;
    let terminal = loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) if event.kind.is_terminal() => break Some(event.to_event()),
                Some(Ok(_)) => {}
                _ => break None,
            },
            () = cancel.token.cancelled(), if !asked => {
                asked = true;
                let reason = cancel.reason();
                let ts = now_ms();
                let kinds: [EventKind; 2] = [started.clone().into(), Canceled { reason: reason.clone() }.into()];
                let closing: Vec<RunEvent> = kinds
                    .into_iter()
                    .enumerate()
                    .map(|(seq, kind)| RunEvent { run_id: run_id.clone(), seq: seq as u64, ts, kind })
                    .collect();
                // Refused once the taker has written `started`: then it is
                // the taker's to cancel.
                if inner.log.append(closing.into()).await.is_err()
                    && let Some(peers) = inner.peers.get()
                {
                    peers.cancel_elsewhere(&run_id, &reason);
                }
            }
        }
    };
    inner
        .active
        .lock()
        .expect("active runs lock")
        .remove(&run_id);
    cancel.ended.cancel();
    terminal
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::{MemoryLog, Scheduler, SchedulerConfig};

    /// Records the cancels sent to the other nodes.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<(String, String)>>);

    impl Peers for Recorded {
        fn cancel_elsewhere(&self, run_id: &RunId, reason: &str) {
            let mut sent = self.0.lock().unwrap();
            sent.push((run_id.to_string(), reason.to_owned()));
        }
    }

    #[tokio::test]
    async fn a_cancel_for_a_run_not_active_here_goes_to_the_peers_once() {
        let log = Arc::new(MemoryLog::new());
        let scheduler = Scheduler::start(log, Vec::new(), SchedulerConfig::default())
            .await
            .unwrap();
        let elsewhere = RunId::parse("elsewhere").unwrap();
        // A single node: nobody to ask.
        assert!(!scheduler.cancel(&elsewhere, "stop"));
        let peers = Arc::new(Recorded::default());
        scheduler.join_peers(peers.clone());
        assert!(scheduler.cancel(&elsewhere, "stop"));
        // A cancel received from a peer is never sent on.
        assert!(!scheduler.cancel_here(&elsewhere, "from a peer"));
        assert_eq!(
            *peers.0.lock().unwrap(),
            [("elsewhere".to_owned(), "stop".to_owned())]
        );
    }
}
