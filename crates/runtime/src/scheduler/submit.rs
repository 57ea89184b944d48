//! Admitting a call: its arguments, a slot now or a place in the bounded
//! queue, and the run's task.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use weir_core::RunId;

use super::slots::{Seat, try_take_slots};
use super::{Cancel, Lineage, Registered, RunHandle, RunOptions, Scheduler, SubmitError, run};
use crate::ToolInfo;
use crate::context::{Registration, now_ms};
use crate::handle::Spawn;
use crate::log::{LogError, NewRun};

impl Scheduler {
    /// Accepts a call as a run: checks its arguments against the tool's input
    /// schema, then executes it as soon as a slot is free. Returns once the
    /// log has the run: pending, when it waits for a slot; with its
    /// `started` event, when it starts at once. Fails at once, never hangs,
    /// when the queue is full.
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
        let registered = self.callable(tool, &arguments, options.allowed_tools.as_deref())?;
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
        let new_run = NewRun {
            parent: parent.map(|parent| parent.run_id.clone()),
            resume_record: options.resume_record.take().filter(|_| parent.is_none()),
            ..inner.new_run(&run_id, tool, &stored, &options)
        };
        // A run that starts now, under the id just made, is registered by
        // its writer's first append (`EventLog::start_run`): with `started`
        // and the tool's first events, in one commit, not a registration
        // and then an append. Its tool starts meanwhile; if the store
        // refuses, the tool is stopped and the call fails as it would have.
        // A queued run is registered first, to be listed as pending
        // meanwhile, and so is one under the caller's id: that one must be
        // refused before its tool runs if taken, and only a new id lets the
        // writer issue appends behind the registering one.
        let registration = if slots.is_some() && options.run_id.is_none() {
            let (told, answer) = oneshot::channel();
            Some((Registration { run: new_run, told }, answer))
        } else {
            if let Err(error) = inner.log.create_run(new_run).await {
                if slots.is_none() {
                    inner.queued.fetch_sub(1, Ordering::SeqCst);
                }
                return Err(error.into());
            }
            None
        };
        let (registration, registration_answer) = registration.unzip();
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
                run::Admission {
                    slots,
                    registration,
                },
            )
            .await;
            inner.active.lock().expect("active runs lock").remove(&id);
            cancel.ended.cancel();
            terminal
        });
        if let Some(answer) = registration_answer {
            self.registered(&run_id, answer).await?;
        }
        Ok(RunHandle { run_id, finished })
    }

    /// Waits for the store's answer to registering run `run_id` with its
    /// first events; on a refusal (its tool has been stopped), the live hub
    /// forgets the run it was told to expect.
    async fn registered(
        &self,
        run_id: &RunId,
        answer: oneshot::Receiver<Result<(), LogError>>,
    ) -> Result<(), SubmitError> {
        // Dropped unanswered only if the run's task panicked.
        let answer = answer.await.unwrap_or_else(|_| {
            Err(LogError::Storage {
                doing: "registering a run",
                message: "the run's writer stopped".into(),
            })
        });
        answer.map_err(|error| {
            self.inner.log.live().forget(run_id);
            error.into()
        })
    }

    /// The tool `name` as this caller may run it, `arguments` checked
    /// against its input schema. A tool the caller may not run is refused
    /// exactly as one that does not exist: the caller learns nothing about
    /// tools outside its scope.
    fn callable(
        &self,
        name: &str,
        arguments: &Value,
        allowed: Option<&BTreeSet<String>>,
    ) -> Result<Arc<Registered>, SubmitError> {
        let inner = &self.inner;
        let registered = inner
            .tool(name)
            .filter(|_| allowed.is_none_or(|allowed| allowed.contains(name)))
            .ok_or_else(|| SubmitError::UnknownTool {
                name: name.to_owned(),
                available: inner
                    .registry()
                    .keys()
                    .filter(|name| allowed.is_none_or(|allowed| allowed.contains(*name)))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        weir_core::check_arguments(&registered.info.input_schema, arguments).map_err(
            |message| SubmitError::InvalidArguments {
                tool: name.to_owned(),
                message,
            },
        )?;
        Ok(registered)
    }
}

impl super::Inner {
    /// The registration of a client's run `run_id` of `tool` on this node,
    /// with its `arguments` as the log keeps them.
    pub(super) fn new_run(
        &self,
        run_id: &RunId,
        tool: &str,
        arguments: &Value,
        options: &RunOptions,
    ) -> NewRun {
        NewRun {
            run_id: run_id.clone(),
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            node: self.config.node.clone(),
            ts: now_ms(),
            owner: options.owner.clone(),
            client: options.client.clone(),
            parent: None,
            resume_record: options.resume_record.clone(),
        }
    }
}

pub(super) fn new_run_id() -> RunId {
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

    fn owner(&self) -> Option<String> {
        self.owner.clone()
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
