//! Admitting a call: its arguments, a slot now or a place in the bounded
//! queue, and the run's task.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use weir_core::RunId;

use super::slots::try_take_slots;
use super::{Cancel, RunHandle, RunOptions, Scheduler, SubmitError, run};
use crate::context::now_ms;
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
        let inner = &self.inner;
        let registered = inner
            .tools
            .get(tool)
            .ok_or_else(|| SubmitError::UnknownTool {
                name: tool.to_owned(),
                available: inner.tools.keys().cloned().collect::<Vec<_>>().join(", "),
            })?;
        weir_core::check_arguments(&registered.info.input_schema, &arguments).map_err(
            |message| SubmitError::InvalidArguments {
                tool: tool.to_owned(),
                message,
            },
        )?;
        let slots = match try_take_slots(&registered.slots, &inner.all_slots) {
            Some(slots) => Some(slots),
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
        let stored = registered.info.redact(&arguments);
        let created = inner
            .log
            .create_run(NewRun {
                run_id: run_id.clone(),
                tool: tool.to_owned(),
                arguments: stored.clone(),
                node: inner.config.node.clone(),
                ts: now_ms(),
                owner: options.owner,
            })
            .await;
        if let Err(error) = created {
            if slots.is_none() {
                inner.queued.fetch_sub(1, Ordering::SeqCst);
            }
            return Err(error.into());
        }
        let cancel = Cancel::default();
        *cancel.inputs.lock().expect("input slot lock") = options.input_requests;
        inner
            .active
            .lock()
            .expect("active runs lock")
            .insert(run_id.clone(), cancel.clone());
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
            let terminal =
                run::execute(&inner, &id, &tool, arguments, timeout, &cancel, slots).await;
            inner.active.lock().expect("active runs lock").remove(&id);
            terminal
        });
        Ok(RunHandle { run_id, finished })
    }
}

fn new_run_id() -> RunId {
    RunId::parse(&uuid::Uuid::now_v7().simple().to_string()).expect("a uuid is a valid run id")
}
