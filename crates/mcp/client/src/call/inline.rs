//! A call on its own request: notifications as they come, then the result
//! — unless a 2026-07-28 server turns it into a task.

use serde_json::Value;
use serde_json::value::RawValue;
use weir_mcp_wire::jsonrpc::code;
use weir_mcp_wire::revision::TASKS_EXTENSION;

use super::relay::result_event_raw;
use super::request::{Answered, Call, Shape};
use super::stop::StopSignal;
use crate::error::ClientError;
use crate::events::CallEvent;

/// What an inline call turned into.
pub(super) enum Inline {
    Done(CallEvent),
    /// A 2026-07-28 server answered with a task.
    Task(Value),
    /// A 2026-07-28 server wants the call as a task.
    NeedsTask,
}

/// Runs the call inline.
pub(super) async fn run(call: &Call, signal: &mut StopSignal) -> Inline {
    let outcome = match call.request(signal, Shape::Inline).await {
        Ok(Answered { outcome, .. }) => outcome,
        Err(event) => return Inline::Done(event),
    };
    let server = &call.server;
    match outcome {
        Ok(result) if is_task(&result) => match serde_json::from_str(result.get()) {
            Ok(task) => Inline::Task(task),
            Err(error) => Inline::Done(CallEvent::Error(ClientError::Protocol(format!(
                "a tools/call answer: {error}"
            )))),
        },
        Ok(result) => Inline::Done(result_event_raw(&result)),
        Err(error)
            if server.is_stateless() && server.supports_tasks() && asks_for_tasks(&error) =>
        {
            Inline::NeedsTask
        }
        Err(error) => Inline::Done(CallEvent::Error(ClientError::rpc("tools/call", &error))),
    }
}

/// Whether a result is a 2026-07-28 task (`resultType: "task"`).
fn is_task(result: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "resultType", borrow)]
        kind: Option<&'a RawValue>,
    }
    serde_json::from_str::<Kind>(result.get())
        .ok()
        .and_then(|kind| kind.kind)
        .is_some_and(|kind| kind.get() == "\"task\"")
}

/// A 2026-07-28 "missing required client capability" error naming the
/// tasks extension.
fn asks_for_tasks(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(code::MISSING_CAPABILITY)
        && error
            .pointer("/data/requiredCapabilities/extensions")
            .and_then(|extensions| extensions.get(TASKS_EXTENSION))
            .is_some()
}
