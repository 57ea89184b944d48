//! The log, projected onto MCP: each event becomes at most one message, and
//! the run as a whole becomes one `CallToolResult`. Pure functions of events;
//! the server decides where the messages go.

use serde_json::{Map, Value, json};
use weir_core::{Content, EventKind, LogLevel, Partial, Progress, RunEvent, RunId};

use crate::jsonrpc::notification;
use crate::protocol::Scope;

/// MCP's JSON form of a content block.
pub(crate) fn content_json(content: &Content) -> Value {
    match content {
        Content::Text { text } => json!({ "type": "text", "text": text }),
        Content::Image { data, mime_type } => {
            json!({ "type": "image", "data": data, "mimeType": mime_type })
        }
        Content::Audio { data, mime_type } => {
            json!({ "type": "audio", "data": data, "mimeType": mime_type })
        }
        Content::Resource {
            uri,
            mime_type,
            text,
            blob,
        } => {
            let mut resource = Map::new();
            resource.insert("uri".into(), uri.clone().into());
            if let Some(mime) = mime_type {
                resource.insert("mimeType".into(), mime.clone().into());
            }
            match (text, blob) {
                (_, Some(blob)) => resource.insert("blob".into(), blob.clone().into()),
                (text, None) => {
                    resource.insert("text".into(), text.clone().unwrap_or_default().into())
                }
            };
            json!({ "type": "resource", "resource": resource })
        }
        Content::ResourceLink {
            uri,
            name,
            mime_type,
        } => {
            let mut link = json!({ "type": "resource_link", "uri": uri, "name": name });
            if let Some(mime) = mime_type {
                link["mimeType"] = mime.clone().into();
            }
            link
        }
    }
}

/// The structured part of a partial: its items and its group. The group
/// goes out also without items, so that a client can tell, say, a program's
/// stderr from its stdout.
fn partial_structured(partial: &Partial) -> Option<Value> {
    let mut structured = Map::new();
    if !partial.items.is_empty() {
        structured.insert("items".into(), partial.items.clone().into());
    }
    if let Some(group) = &partial.group {
        structured.insert("group".into(), group.clone().into());
    }
    (!structured.is_empty()).then_some(Value::Object(structured))
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
    pending_progress: Option<Value>,
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

    /// The notifications `event` becomes for this call: at most one of its
    /// own, after a coalesced progress notification that is now due. Must see
    /// every event of the run in order (also those not sent, on resume) so
    /// that partial seqs stay dense.
    pub(crate) fn project(&mut self, event: &RunEvent) -> impl Iterator<Item = Value> + use<> {
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

    fn partial(&mut self, partial: &Partial) -> Option<Value> {
        let token = self.scope.partial_token.clone()?;
        let seq = self.next_partial;
        self.next_partial += 1;
        let mut params = json!({
            "partialResultToken": token,
            "seq": seq,
            "content": partial.content.iter().map(content_json).collect::<Vec<_>>(),
        });
        if let Some(structured) = partial_structured(partial) {
            params["structuredContent"] = structured;
        }
        Some(notification("notifications/tools/partial_result", params))
    }

    fn progress(&mut self, progress: &Progress) -> Option<Value> {
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
        Some(notification("notifications/progress", params))
    }

    fn log(
        &self,
        level: LogLevel,
        text: &str,
        stream: Option<weir_core::LogStream>,
    ) -> Option<Value> {
        let threshold = self.scope.log_level?;
        if level < threshold {
            return None;
        }
        let logger = match stream {
            Some(weir_core::LogStream::Stdout) => "stdout",
            Some(weir_core::LogStream::Stderr) => "stderr",
            _ => "weir",
        };
        Some(notification(
            "notifications/message",
            json!({ "level": level, "logger": logger, "data": text }),
        ))
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

    fn keep(&mut self, value: Value, into_items: bool) {
        if self.truncated {
            return;
        }
        let size = value.to_string().len();
        if self.used + size > self.limit {
            self.truncated = true;
            return;
        }
        self.used += size;
        if into_items {
            self.items.push(value);
        } else {
            self.content.push(value);
        }
    }

    pub(crate) fn add(&mut self, event: &RunEvent) {
        match &event.kind {
            EventKind::Partial(partial) => {
                for block in &partial.content {
                    self.keep(content_json(block), false);
                }
                for item in &partial.items {
                    self.keep(item.clone(), true);
                }
            }
            EventKind::Completed(completed) => {
                for block in &completed.content {
                    self.keep(content_json(block), false);
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
        let mut result = json!({ "content": self.content });
        let structured = self
            .structured
            .or_else(|| (!self.items.is_empty()).then(|| json!({ "items": self.items })));
        if let Some(structured) = structured {
            result["structuredContent"] = structured;
        }
        if is_error {
            result["isError"] = true.into();
        }
        result
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

    /// 100 progress reports within 10 ms become a few notifications; the
    /// newest always goes out before the result, and values only increase.
    #[test]
    fn progress_is_coalesced_in_order_and_the_last_one_is_never_lost() {
        let mut projector = Projector::new(scope());
        let mut sent: Vec<f64> = Vec::new();
        for i in 0..100u64 {
            let messages = projector.project(&event(i, 1_000 + i / 10, progress(i as f64)));
            sent.extend(messages.map(|m| m["params"]["progress"].as_f64().unwrap()));
        }
        let done = projector.project(&event(
            100,
            1_010,
            EventKind::Completed(Completed::default()),
        ));
        sent.extend(done.map(|m| m["params"]["progress"].as_f64().unwrap()));
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
