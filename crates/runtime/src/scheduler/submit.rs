//! Admitting a call: its arguments, a slot now or a place in the bounded
//! queue, and the run's task.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use weir_core::RunId;

use super::slots::{Seat, try_take_slots};
use super::{Cancel, Lineage, RunHandle, RunOptions, Scheduler, SubmitError, run};
use crate::ToolInfo;
use crate::context::now_ms;
use crate::handle::Spawn;
use crate::log::NewRun;

impl Scheduler {
    /// Accepts a call as a run: checks its arguments against the tool's input
    /// schema, registers it (pending), then executes it as soon as a slot is
    /// free. Fails at once, never hangs, when the queue is
    /// full.
    pub async fn submit(
        &self,
        tool: &str,
        arguments: Value,
        options: RunOptions,
    ) -> Result<RunHandle, SubmitError> {
        self.admit(tool, arguments, options, None).await
    }

    /// [`Scheduler::submit`], for a client's run (`parent: None`) or a
    /// child of the run `parent` describes: that one records its parent,
    /// takes its owner, and is stopped with it.
    pub(super) async fn admit(
        &self,
        tool: &str,
        arguments: Value,
        mut options: RunOptions,
        parent: Option<&Lineage>,
    ) -> Result<RunHandle, SubmitError> {
        if let Some(parent) = parent {
            options.owner = parent.owner.clone();
            options.client = parent.client.clone();
            options.allowed_tools = parent.allowed_tools.clone();
        }
        let inner = &self.inner;
        let allowed = options.allowed_tools.as_deref();
        // A tool the caller may not run is refused exactly as one that does
        // not exist: the caller learns nothing about tools outside its scope.
        let registered = inner
            .tool(tool)
            .filter(|_| allowed.is_none_or(|allowed| allowed.contains(tool)))
            .ok_or_else(|| SubmitError::UnknownTool {
                name: tool.to_owned(),
                available: inner
                    .registry()
                    .keys()
                    .filter(|name| allowed.is_none_or(|allowed| allowed.contains(*name)))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        weir_core::check_arguments(&registered.info.input_schema, &arguments).map_err(
            |message| SubmitError::InvalidArguments {
                tool: tool.to_owned(),
                message,
            },
        )?;
        // A child runs in its parent's global slot, and may take its
        // parent's lane instead of a slot of its tool (see slots.rs).
        let seat = match parent {
            Some(parent) => Seat::Child(&parent.lane),
            None => Seat::Root(&inner.all_slots),
        };
        let slots = match try_take_slots(&registered.slots, seat) {
            Some(slots) => Some(slots),
            // No slot here: with peers that take offers, another node may
            // have one (peers.rs).
            None if parent.is_none() && self.offers() => {
                return self.offer(tool, arguments, options).await;
            }
            None => {
                let max = inner.config.max_queue;
                inner
                    .queued
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |queued| {
                        (queued < max).then_some(queued + 1)
                    })
                    .map_err(|queued| SubmitError::Busy {
                        queued,
                        retry_after: Duration::from_secs(1),
                    })?;
                None
            }
        };
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        // The tool gets `arguments`; the log, and so every reader, only
        // this copy, its secrets redacted.
        let stored = inner.redact_arguments(tool, &arguments);
        let created = inner
            .log
            .create_run(NewRun {
                run_id: run_id.clone(),
                tool: tool.to_owned(),
                arguments: stored.clone(),
                node: inner.config.node.clone(),
                ts: now_ms(),
                owner: options.owner.clone(),
                client: options.client.clone(),
                parent: parent.map(|parent| parent.run_id.clone()),
                resume_record: options.resume_record.take().filter(|_| parent.is_none()),
            })
            .await;
        if let Err(error) = created {
            if slots.is_none() {
                inner.queued.fetch_sub(1, Ordering::SeqCst);
            }
            return Err(error.into());
        }
        // This process writes it from its `started` event on: whoever
        // follows it here takes its events live, with no store read first.
        inner.log.live().expect(&run_id);
        let cancel = match parent {
            // A child asks its questions where its parent does.
            Some(parent) => parent.cancel.child(&parent.run_id),
            None => Cancel::default(),
        };
        if parent.is_none() {
            *cancel.inputs.lock().expect("input slot lock") = options.input_requests;
        }
        if let Some(parent) = parent {
            let mut children = parent.cancel.children.lock().expect("children lock");
            children.retain(|child| !child.ended.is_cancelled());
            children.push(cancel.clone());
        }
        inner
            .active
            .lock()
            .expect("active runs lock")
            .insert(run_id.clone(), cancel.clone());
        let lineage = Lineage {
            scheduler: Arc::downgrade(&self.inner),
            run_id: run_id.clone(),
            cancel: cancel.clone(),
            owner: options.owner,
            client: options.client,
            allowed_tools: options.allowed_tools,
            tools: std::iter::once(tool.to_owned())
                .chain(
                    parent
                        .iter()
                        .flat_map(|parent| parent.tools.iter().cloned()),
                )
                .collect(),
            lane: Arc::new(tokio::sync::Semaphore::new(1)),
            parent_lane: parent.map(|parent| parent.lane.clone()),
        };
        let timeout = options
            .timeout
            .or(registered.info.timeout)
            .unwrap_or(inner.config.default_timeout);
        let inner = self.inner.clone();
        let id = run_id.clone();
        let tool = tool.to_owned();
        let finished = tokio::spawn(async move {
            let arguments = run::Arguments {
                given: arguments,
                stored,
            };
            let terminal = run::execute(
                &inner,
                &tool,
                &registered,
                arguments,
                timeout,
                lineage,
                slots,
            )
            .await;
            inner.active.lock().expect("active runs lock").remove(&id);
            cancel.ended.cancel();
            terminal
        });
        Ok(RunHandle { run_id, finished })
    }
}

fn new_run_id() -> RunId {
    RunId::parse(&uuid::Uuid::now_v7().simple().to_string()).expect("a uuid is a valid run id")
}

#[async_trait::async_trait]
impl Spawn for Lineage {
    async fn spawn(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Option<Result<RunHandle, SubmitError>> {
        let scheduler = Scheduler {
            inner: self.scheduler.upgrade()?,
        };
        let options = RunOptions {
            timeout,
            ..RunOptions::default()
        };
        Some(scheduler.admit(tool, arguments, options, Some(self)).await)
    }

    fn ancestors(&self) -> Vec<String> {
        self.tools.iter().skip(1).cloned().collect()
    }

    fn grants(&self, entry: &str) -> bool {
        let allowed = self.allowed_tools.as_deref();
        allowed.is_none_or(|allowed| allowed.contains(entry))
    }

    fn tools(&self) -> Vec<ToolInfo> {
        let allowed = self.allowed_tools.as_deref();
        self.scheduler
            .upgrade()
            .map(|inner| {
                inner
                    .registry()
                    .values()
                    .filter(|registered| {
                        allowed.is_none_or(|allowed| allowed.contains(&registered.info.name))
                    })
                    .map(|registered| registered.info.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}
