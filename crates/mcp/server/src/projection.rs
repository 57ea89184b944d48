//! The log, projected onto MCP: each event becomes at most one message, and
//! the run as a whole becomes one `CallToolResult`. Pure functions of events;
//! the server decides where the messages go.

use serde_json::{Map, Value, json};
use weir_core::{Content, EventKind, LogLevel, Partial, Progress, RunEvent, RunId};

use crate::protocol::Scope;
use crate::wire::{McpContent, content_len, json_len, partial_result_notification, to_json};
use weir_mcp_wire::jsonrpc::notification;

/// MCP's JSON form of a content block, as a value.
pub(crate) fn content_json(content: &Content) -> Value {
    serde_json::to_value(McpContent(content)).expect("content blocks serialize")
}

/// Turns events into notifications for one call, per the call's scope.
pub(crate) struct Projector {
    scope: Scope,
    /// Last progress sent: MCP wants it strictly increasing.
    last_progress: Option<f64>,
    /// Next SEP-2998 `seq`: dense from 0 over the call's partials.
    next_partial: u64,
    /// When (event time) the last progress notification went out.
    last_progress_ts: Option<u64>,
    /// A progress notification held back by the rate limit.
    pending_progress: Option<String>,
}

/// Progress notifications closer together than this (by event time) are
/// coalesced: the newest waits and goes out with the next event that is due,
/// and always before the result. Never reordered, never dropped at the end.
const PROGRESS_INTERVAL_MS: u64 = 20;

impl Projector {
    pub(crate) fn new(scope: Scope) -> Projector {
        Projector {
            scope,
            last_progress: None,
            next_partial: 0,
            last_progress_ts: None,
            pending_progress: None,
        }
    }

    /// The notifications `event` becomes for this call, as JSON text: at
    /// most one of its own, after a coalesced progress notification that is
    /// now due. Must see every event of the run in order (also those not
    /// sent, on resume) so that partial seqs stay dense.
    pub(crate) fn project(&mut self, event: &RunEvent) -> impl Iterator<Item = String> + use<> {
        let due = event.kind.is_terminal()
            || self
                .last_progress_ts
                .is_none_or(|last| event.ts.saturating_sub(last) >= PROGRESS_INTERVAL_MS);
        let mut flushed = None;
        let own = match &event.kind {
            EventKind::Progress(progress) => match self.progress(progress) {
                Some(message) if due => {
                    self.last_progress_ts = Some(event.ts);
                    self.pending_progress = None;
                    Some(message)
                }
                // Too soon after the last one: the newest waits its turn.
                Some(message) => {
                    self.pending_progress = Some(message);
                    None
                }
                None => None,
            },
            kind => {
                if due && self.pending_progress.is_some() {
                    self.last_progress_ts = Some(event.ts);
                    flushed = self.pending_progress.take();
                }
                match kind {
                    EventKind::Partial(partial) => self.partial(partial),
                    EventKind::Log(log) => self.log(log.level, &log.text, Some(log.stream)),
                    EventKind::Warning(warning) => {
                        self.log(LogLevel::Warning, &warning.message, None)
                    }
                    _ => None,
                }
            }
        };
        flushed.into_iter().chain(own)
    }

    fn partial(&mut self, partial: &Partial) -> Option<String> {
        let token = self.scope.partial_token.as_ref()?;
        let seq = self.next_partial;
        self.next_partial += 1;
        Some(partial_result_notification(token, seq, partial))
    }

    fn progress(&mut self, progress: &Progress) -> Option<String> {
        let token = self.scope.progress_token.clone()?;
        if !progress.progress.is_finite()
            || self
                .last_progress
                .is_some_and(|last| progress.progress <= last)
        {
            return None;
        }
        self.last_progress = Some(progress.progress);
        let mut params = json!({ "progressToken": token, "progress": progress.progress });
        if let Some(total) = progress.total {
            params["total"] = total.into();
        }
        let message = match (&progress.phase, &progress.message) {
            (Some(phase), Some(message)) => Some(format!("{phase}: {message}")),
            (phase, message) => message.clone().or_else(|| phase.clone()),
        };
        if let Some(message) = message {
            params["message"] = message.into();
        }
        Some(to_json(&notification("notifications/progress", params)))
    }

    fn log(
        &self,
        level: LogLevel,
        text: &str,
        stream: Option<weir_core::LogStream>,
    ) -> Option<String> {
        let threshold = self.scope.log_level?;
        if level < threshold {
            return None;
        }
        let logger = match stream {
            Some(weir_core::LogStream::Stdout) => "stdout",
            Some(weir_core::LogStream::Stderr) => "stderr",
            _ => "weir",
        };
        Some(to_json(&notification(
            "notifications/message",
            json!({ "level": level, "logger": logger, "data": text }),
        )))
    }
}

/// Builds the final `CallToolResult` from a run's events: complete up to
/// `limit` bytes of content, then truncated with a link to the whole run.
pub(crate) struct ResultBuilder {
    run_id: RunId,
    limit: usize,
    used: usize,
    truncated: bool,
    content: Vec<Value>,
    items: Vec<Value>,
    structured: Option<Value>,
    error: Option<String>,
}

impl ResultBuilder {
    pub(crate) fn new(run_id: RunId, limit: usize) -> ResultBuilder {
        ResultBuilder {
            run_id,
            limit,
            used: 0,
            truncated: false,
            content: Vec::new(),
            items: Vec::new(),
            structured: None,
            error: None,
        }
    }

    /// Whether `size` more bytes fit; once something did not, nothing does.
    fn fits(&mut self, size: usize) -> bool {
        if self.truncated || self.used + size > self.limit {
            self.truncated = true;
            return false;
        }
        self.used += size;
        true
    }

    fn keep_content(&mut self, block: &Content) {
        if !self.truncated && self.fits(content_len(block)) {
            self.content.push(content_json(block));
        }
    }

    fn keep_item(&mut self, item: &Value) {
        if !self.truncated && self.fits(json_len(item)) {
            self.items.push(item.clone());
        }
    }

    pub(crate) fn add(&mut self, event: &RunEvent) {
        match &event.kind {
            EventKind::Partial(partial) => {
                for block in &partial.content {
                    self.keep_content(block);
                }
                for item in &partial.items {
                    self.keep_item(item);
                }
            }
            EventKind::Completed(completed) => {
                for block in &completed.content {
                    self.keep_content(block);
                }
                self.structured = completed.structured.clone();
            }
            EventKind::Failed(failed) => self.error = Some(failed.error.to_string()),
            EventKind::Canceled(canceled) => {
                self.error = Some(format!("canceled: {}", canceled.reason))
            }
            _ => {}
        }
    }

    pub(crate) fn finish(mut self) -> Value {
        let is_error = self.error.is_some();
        if let Some(error) = self.error.take() {
            self.content.push(json!({ "type": "text", "text": error }));
        }
        if self.truncated {
            let uri = format!("weir://runs/{}", self.run_id);
            self.content.push(json!({
                "type": "text",
                "text": format!(
                    "[output truncated at {} bytes; the whole output is in run {}: page through it with the runs_events tool, or read the resource {uri}]",
                    self.limit, self.run_id
                ),
            }));
            self.content.push(json!({
                "type": "resource_link",
                "uri": uri,
                "name": format!("run {}", self.run_id),
                "mimeType": "application/json",
            }));
        }
        // Moved in, not written with `json!`: that macro serializes its
        // arguments into a new value, a copy of up to `limit` bytes.
        let mut result = Map::new();
        result.insert("content".into(), Value::Array(self.content));
        let structured = self.structured.or_else(|| {
            (!self.items.is_empty()).then(|| {
                Value::Object(Map::from_iter([("items".into(), Value::Array(self.items))]))
            })
        });
        if let Some(structured) = structured {
            result.insert("structuredContent".into(), structured);
        }
        if is_error {
            result.insert("isError".into(), true.into());
        }
        Value::Object(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Era;
    use weir_core::{Completed, RunId};

    fn scope() -> Scope {
        Scope {
            era: Era::Session,
            client_capabilities: json!({}),
            progress_token: Some(json!("t")),
            partial_token: None,
            log_level: None,
        }
    }

    fn event(seq: u64, ts: u64, kind: EventKind) -> RunEvent {
        RunEvent {
            run_id: RunId::parse("r").unwrap(),
            seq,
            ts,
            kind,
        }
    }

    fn progress(value: f64) -> EventKind {
        EventKind::Progress(Progress {
            progress: value,
            ..Progress::default()
        })
    }

    fn sent_progress(message: &str) -> f64 {
        let message: Value = serde_json::from_str(message).unwrap();
        message["params"]["progress"].as_f64().unwrap()
    }

    /// 100 progress reports within 10 ms become a few notifications; the
    /// newest always goes out before the result, and values only increase.
    #[test]
    fn progress_is_coalesced_in_order_and_the_last_one_is_never_lost() {
        let mut projector = Projector::new(scope());
        let mut sent: Vec<f64> = Vec::new();
        for i in 0..100u64 {
            let messages = projector.project(&event(i, 1_000 + i / 10, progress(i as f64)));
            sent.extend(messages.map(|m| sent_progress(&m)));
        }
        let done = projector.project(&event(
            100,
            1_010,
            EventKind::Completed(Completed::default()),
        ));
        sent.extend(done.map(|m| sent_progress(&m)));
        assert!(
            sent.len() < 10,
            "not coalesced: {} notifications",
            sent.len()
        );
        assert!(sent.windows(2).all(|w| w[0] < w[1]), "{sent:?}");
        assert_eq!(sent.first(), Some(&0.0));
        assert_eq!(sent.last(), Some(&99.0));
    }

    #[test]
    fn spaced_progress_passes_untouched() {
        let mut projector = Projector::new(scope());
        let sent: usize = (0..5u64)
            .map(|i| {
                projector
                    .project(&event(i, i * PROGRESS_INTERVAL_MS, progress(i as f64)))
                    .count()
            })
            .sum();
        assert_eq!(sent, 5);
    }
}
