//! What the server sends about a call, as the call's [`CallEvent`]s: its
//! notifications (checked against the call's tokens, partial results in
//! order) and its result.

use serde_json::Value;

use crate::events::{
    CallEvent, log_from_wire, partial_from_wire, progress_from_wire, result_from_wire,
    run_from_wire, task_from_wire,
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
    pub(super) fn event(&mut self, method: &str, params: Value) -> Option<CallEvent> {
        let token = |key: &str| params.get(key).and_then(Value::as_str);
        match method {
            "notifications/progress" if token("progressToken") == Some(&self.tokens.progress) => {
                progress_from_wire(&params)
            }
            "notifications/tools/partial_result"
                if token("partialResultToken") == Some(&self.tokens.partial) =>
            {
                let event = partial_from_wire(params)?;
                if let CallEvent::Partial { seq, .. } = &event {
                    // Seen already (a replay): skip. A gap is tolerated:
                    // delivery is best effort, the result is complete.
                    if self.last_partial.is_some_and(|last| *seq <= last) {
                        return None;
                    }
                    self.last_partial = Some(*seq);
                }
                Some(event)
            }
            "notifications/weir/run"
                if [
                    ("progressToken", &self.tokens.progress),
                    ("partialResultToken", &self.tokens.partial),
                ]
                .iter()
                .any(|(key, mine)| token(key) == Some(mine.as_str())) =>
            {
                run_from_wire(&params)
            }
            "notifications/message" => Some(log_from_wire(&params)),
            "notifications/tasks/status" => task_from_wire(&params),
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
