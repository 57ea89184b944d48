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

/// The structured part of a partial: its items (and group).
fn partial_structured(partial: &Partial) -> Option<Value> {
    (!partial.items.is_empty()).then(|| {
        let mut structured = json!({ "items": partial.items });
        if let Some(group) = &partial.group {
            structured["group"] = group.clone().into();
        }
        structured
    })
}

/// Turns events into notifications for one call, per the call's scope.
pub(crate) struct Projector {
    scope: Scope,
    /// Last progress sent: MCP wants it strictly increasing.
    last_progress: Option<f64>,
    /// Next SEP-2998 `seq`: dense from 0 over the call's partials.
    next_partial: u64,
    /// `_meta` to attach to every notification (task mode).
    meta: Option<Value>,
}

impl Projector {
    pub(crate) fn new(scope: Scope, meta: Option<Value>) -> Projector {
        Projector {
            scope,
            last_progress: None,
            next_partial: 0,
            meta,
        }
    }

    /// The notification `event` becomes for this call, if any. Must see every
    /// event of the run in order (also those not sent, on resume) so that
    /// partial seqs stay dense.
    pub(crate) fn project(&mut self, event: &RunEvent) -> Option<Value> {
        let mut message = match &event.kind {
            EventKind::Progress(progress) => self.progress(progress)?,
            EventKind::Partial(partial) => {
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
                notification("notifications/tools/partial_result", params)
            }
            EventKind::Log(log) => self.log(log.level, &log.text, Some(log.stream))?,
            EventKind::Warning(warning) => self.log(LogLevel::Warning, &warning.message, None)?,
            _ => return None,
        };
        if let Some(meta) = &self.meta {
            message["params"]["_meta"] = meta.clone();
        }
        Some(message)
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
        let size = value.to_string().len();
        if self.truncated || self.used + size > self.limit {
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
