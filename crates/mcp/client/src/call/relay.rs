//! What the server sends about a call, as the call's [`CallEvent`]s: its
//! notifications (checked against the call's tokens, partial results in
//! order) and its result.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::events::{
    CallEvent, log_from_wire, partial_from_wire, progress_from_wire, result_from_raw,
    result_from_wire, run_from_wire, task_from_wire,
};

/// The tokens of one call's notifications.
pub(super) struct Tokens {
    pub(super) progress: String,
    pub(super) partial: String,
}

impl Tokens {
    /// Tokens for request `id`, unique to this process too: a stdio
    /// server's notifications are routed to calls by token alone.
    pub(super) fn new(id: u64) -> Tokens {
        let process = std::process::id();
        Tokens {
            progress: format!("weir-{process}-{id}-progress"),
            partial: format!("weir-{process}-{id}-partial"),
        }
    }

    /// Both tokens, for the connection to route by.
    pub(super) fn routes(&self) -> Vec<String> {
        vec![self.progress.clone(), self.partial.clone()]
    }
}

/// Turns a call's notifications into events: checks their tokens, and
/// keeps partial results in `seq` order, each once.
pub(super) struct Relay {
    tokens: Tokens,
    /// The newest partial's `seq` (none yet: `None`, so a seq of
    /// `u64::MAX` is taken once and never wraps).
    last_partial: Option<u64>,
}

impl Relay {
    pub(super) fn new(tokens: Tokens) -> Relay {
        Relay {
            tokens,
            last_partial: None,
        }
    }

    /// The event for notification `method`, if it is one of this call's.
    /// Its params are read as the server wrote them: only the fields an
    /// event holds are taken out.
    pub(super) fn event(&mut self, method: &str, params: &RawValue) -> Option<CallEvent> {
        match method {
            "notifications/progress" => {
                let (token, event) = progress_from_wire(params)?;
                (token == self.tokens.progress).then_some(event)
            }
            "notifications/tools/partial_result" => {
                let (token, event) = partial_from_wire(params)?;
                let CallEvent::Partial { seq, .. } = &event else {
                    unreachable!("partial_from_wire makes partial events")
                };
                // Seen already (a replay): skip. A gap is tolerated:
                // delivery is best effort, the result is complete.
                if token != self.tokens.partial
                    || self.last_partial.is_some_and(|last| *seq <= last)
                {
                    return None;
                }
                self.last_partial = Some(*seq);
                Some(event)
            }
            "notifications/weir/run" => {
                let params: Value = serde_json::from_str(params.get()).ok()?;
                let token = |key: &str| params.get(key).and_then(Value::as_str);
                let mine = token("progressToken") == Some(&self.tokens.progress)
                    || token("partialResultToken") == Some(&self.tokens.partial);
                mine.then(|| run_from_wire(&params)).flatten()
            }
            "notifications/message" => log_from_wire(params),
            "notifications/tasks/status" => {
                task_from_wire(&serde_json::from_str(params.get()).ok()?)
            }
            _ => None,
        }
    }
}

/// The terminal event for a `CallToolResult`.
pub(super) fn result_event(result: Value) -> CallEvent {
    match result_from_wire(result) {
        Ok(result) => CallEvent::Result(result),
        Err(error) => CallEvent::Error(error),
    }
}

/// The terminal event for a `CallToolResult` as the server wrote it.
pub(super) fn result_event_raw(result: &RawValue) -> CallEvent {
    match result_from_raw(result) {
        Ok(result) => CallEvent::Result(result),
        Err(error) => CallEvent::Error(error),
    }
}
