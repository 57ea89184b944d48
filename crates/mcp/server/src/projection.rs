//! The log, projected onto MCP: each event becomes at most one message, and
//! the run as a whole becomes one `CallToolResult`. Pure functions of events;
//! the server decides where the messages go.
//!
//! Progress for clients that only send a progress token. Nearly every host
//! sends `_meta.progressToken` and none reads SEP-2998 partial results, so
//! for a call with a progress token and no partial results, the run's
//! partials are also counted as progress: `progress` = units so far (items,
//! lines or bytes, see [`Unit`]), `total` = what `meta` announced, `message`
//! = the newest item's text (one line, at most [`MESSAGE_CHARS`]
//! characters). Once the tool reports progress of its own, that is what the
//! client gets, and counting stops: a tool that reports progress knows best
//! what it means. Either way values only increase (MCP requires it; a value
//! that does not exceed the last one sent is not sent) and are rate-limited
//! by event time. A client that declared partial results gets the partials
//! and the tool's own progress only. The tool's progress shows as
//! `phase: message`, with the time left when the tool estimated it
//! (`RunContext::milestone` does).
//!
//! The final result ([`ResultBuilder`]) is what a model reads, often the
//! only thing: content blocks in the order the run produced them, where a
//! partial group's text (a program's stdout, say) is one stream — its
//! consecutive blocks are merged into one, since hosts join blocks with
//! blank lines; text without a group is an item per block, kept as it came
//! — and, when the run's text came in more than one group, each merged
//! block begins with its group's name on a line of its own, `[stderr]`
//! (plain text, since models read no annotations). A tool that
//! declares text fields (`ToolInfo::with_text_fields`) also gets its
//! groups' text in `structuredContent`, for hosts that hand the model only
//! that.

use serde_json::{Map, Value, json};
use weir_core::{
    Content, EventKind, LogLevel, Meta, Partial, Progress, ProgressUnit as Unit, RunEvent, RunId,
    human_duration,
};
use weir_runtime::with_streamed_fields;

use crate::protocol::Scope;
use crate::wire::{
    McpContent, TEXT_BLOCK_LEN, content_len, json_len, json_prefix, partial_result_notification,
    text_json_len, to_json,
};
use weir_mcp_wire::jsonrpc::notification;
use weir_mcp_wire::revision::meta_key;

/// MCP's JSON form of a content block, as a value.
pub(crate) fn content_json(content: &Content) -> Value {
    serde_json::to_value(McpContent(content)).expect("content blocks serialize")
}

/// Progress notifications closer together than this (by event time) are
/// coalesced: the newest waits and goes out with the next event that is due
/// (or when the follower's timer of the same length fires), and always
/// before the result. Never reordered, never dropped at the end.
pub(crate) const PROGRESS_INTERVAL_MS: u64 = 20;

/// Longest progress `message` made from a partial, in characters; a longer
/// line is cut and ends with `…`. A status line, not the output: the output
/// is in the result.
pub(crate) const MESSAGE_CHARS: usize = 100;

/// A projected message, as JSON text.
#[derive(Debug, PartialEq)]
pub(crate) enum Projected {
    /// `notifications/progress`: a newer one replaces it while it waits.
    Progress(String),
    /// Anything else: delivered once, in order.
    Kept(String),
}

/// One progress notification's values, serialized only when sent: most
/// are replaced by a newer one before they are due.
#[derive(Debug)]
struct Update {
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
}

/// Partials counted as progress (see the module's docs), in the unit the
/// run's `meta` named; without one, a partial with structured items counts
/// in items, any other in lines.
#[derive(Debug, Default)]
struct Counter {
    declared: Option<Unit>,
    total: Option<f64>,
    so_far: u64,
    /// Groups whose latest text ended inside a line.
    open_lines: Vec<String>,
}

impl Counter {
    fn meta(&mut self, meta: &Meta) {
        self.declared = meta.progress_unit.or(self.declared);
        if let Some(total) = meta.total {
            self.total = Some(total as f64);
        }
    }

    /// The progress `partial` brings the run to, if it adds anything.
    fn count(&mut self, partial: &Partial) -> Option<Update> {
        let unit = self.declared.unwrap_or(if partial.items.is_empty() {
            Unit::Lines
        } else {
            Unit::Items
        });
        let added = match unit {
            Unit::Items => (partial.items.len() + partial.content.len()) as u64,
            Unit::Bytes => {
                let blocks: usize = partial
                    .content
                    .iter()
                    .map(|block| match block {
                        Content::Text { text } => text.len(),
                        other => content_len(other),
                    })
                    .sum();
                let items: usize = partial.items.iter().map(json_len).sum();
                (blocks + items) as u64
            }
            Unit::Lines => {
                let mut lines = partial.items.len() as u64;
                for block in &partial.content {
                    lines += match block {
                        Content::Text { text } => self.lines(partial.group.as_deref(), text),
                        _ => 1,
                    };
                }
                lines
            }
        };
        if added == 0 {
            return None;
        }
        self.so_far += added;
        Some(Update {
            progress: self.so_far as f64,
            total: self.total,
            message: newest_text(partial, unit),
        })
    }

    /// New lines in `text`, written to `group`.
    fn lines(&mut self, group: Option<&str>, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        let lines = text.lines().count() as u64;
        let Some(group) = group else { return lines };
        let open = self.open_lines.iter().position(|g| g == group);
        let ends_open = !text.ends_with('\n');
        match (open, ends_open) {
            (Some(index), false) => {
                self.open_lines.swap_remove(index);
            }
            (None, true) => self.open_lines.push(group.to_owned()),
            _ => {}
        }
        // Its first piece finishes the line that was open.
        lines - u64::from(open.is_some())
    }
}

/// The newest item's text as a one-line status: in lines (or bytes), the
/// last line of the last text block that has one; in items, the first line
/// of the last item (a string, or else the item as JSON) or block.
fn newest_text(partial: &Partial, unit: Unit) -> Option<String> {
    fn last_line(text: &str) -> Option<&str> {
        text.lines().rev().find(|line| !line.trim().is_empty())
    }
    fn first_line(text: &str) -> Option<&str> {
        text.lines().find(|line| !line.trim().is_empty())
    }
    match (unit, partial.items.last()) {
        (Unit::Items, Some(Value::String(text))) => first_line(text).map(headline),
        (Unit::Items, Some(item)) => {
            first_line(&json_prefix(item, 4 * (MESSAGE_CHARS + 1))).map(headline)
        }
        (Unit::Items, None) => partial.content.iter().rev().find_map(|block| match block {
            Content::Text { text } => first_line(text).map(headline),
            _ => None,
        }),
        (Unit::Lines | Unit::Bytes, _) => {
            partial.content.iter().rev().find_map(|block| match block {
                Content::Text { text } => last_line(text).map(headline),
                _ => None,
            })
        }
    }
}

/// `line` cut to [`MESSAGE_CHARS`] characters, with `…` when cut.
fn headline(line: &str) -> String {
    let line = line.trim_end();
    match line.char_indices().nth(MESSAGE_CHARS) {
        None => line.to_owned(),
        Some(_) => {
            let (cut, _) = line
                .char_indices()
                .nth(MESSAGE_CHARS - 1)
                .expect("longer than MESSAGE_CHARS");
            format!("{}…", &line[..cut])
        }
    }
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
    /// The time of the newest event seen.
    last_ts: u64,
    /// A progress notification held back by the rate limit.
    pending: Option<Update>,
    /// Partials counted as progress: for a call with a progress token and
    /// no partial results, until the tool reports progress of its own.
    counter: Option<Counter>,
}

impl Projector {
    pub(crate) fn new(scope: Scope) -> Projector {
        let counter = (scope.progress_token.is_some() && scope.partial_token.is_none())
            .then(Counter::default);
        Projector {
            scope,
            last_progress: None,
            next_partial: 0,
            last_progress_ts: None,
            last_ts: 0,
            pending: None,
            counter,
        }
    }

    /// The notifications `event` becomes for this call: at most one of its
    /// own, after a coalesced progress notification that is now due. Must
    /// see every event of the run in order (also those not sent, on resume)
    /// so that partial seqs and counted progress stay right.
    pub(crate) fn project(&mut self, event: &RunEvent) -> impl Iterator<Item = Projected> + use<> {
        self.last_ts = self.last_ts.max(event.ts);
        let due = event.kind.is_terminal()
            || self
                .last_progress_ts
                .is_none_or(|last| event.ts.saturating_sub(last) >= PROGRESS_INTERVAL_MS);
        // The progress this event reports (the tool's, or counted from a
        // partial), and the message it is itself.
        let (update, own) = match &event.kind {
            EventKind::Started(_) => (None, self.run_notice(&event.run_id)),
            EventKind::Meta(meta) => {
                if let Some(counter) = &mut self.counter {
                    counter.meta(meta);
                }
                (None, None)
            }
            EventKind::Progress(progress) => {
                self.counter = None;
                (self.own_progress(progress), None)
            }
            EventKind::Partial(partial) => match &self.scope.partial_token {
                Some(token) => {
                    let seq = self.next_partial;
                    self.next_partial += 1;
                    (None, Some(partial_result_notification(token, seq, partial)))
                }
                None => {
                    let update = self.counter.as_mut().and_then(|c| c.count(partial));
                    (update.filter(|u| self.increases(u.progress)), None)
                }
            },
            EventKind::Log(log) => (None, self.log(log.level, &log.text, Some(log.stream))),
            EventKind::Warning(warning) => {
                (None, self.log(LogLevel::Warning, &warning.message, None))
            }
            _ => (None, None),
        };
        let progress = match update {
            // Newer than anything held back: it replaces that.
            Some(update) if due => {
                self.pending = None;
                Some(update)
            }
            Some(update) => {
                self.pending = Some(update);
                None
            }
            None if due => self.pending.take(),
            None => None,
        };
        if progress.is_some() {
            self.last_progress_ts = Some(event.ts);
        }
        let progress = progress.and_then(|update| self.notification(update));
        // The event's own message first: both go out tagged with this
        // event's seq, and a client cut off between them resumes after it.
        // Cut after the progress, it would never get the partial; cut after
        // the partial, it misses only a progress that the next one replaces.
        own.map(Projected::Kept)
            .into_iter()
            .chain(progress.map(Projected::Progress))
    }

    /// Forgets the progress held back by the rate limit. A resumed stream
    /// replays the events its client already had without sending them; the
    /// progress held back among those was sent by the stream that client
    /// left (on its timer) or is stale, so it must not go out again.
    pub(crate) fn discard_pending(&mut self) {
        self.pending = None;
    }

    /// Whether a progress notification is held back by the rate limit.
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The progress notification held back, now: the follower calls this
    /// [`PROGRESS_INTERVAL_MS`] after progress was first held back, so that
    /// the newest progress of a burst followed by silence does not wait for
    /// the next event.
    pub(crate) fn flush(&mut self) -> Option<Projected> {
        let update = self.pending.take()?;
        self.last_progress_ts = Some(self.last_ts);
        self.notification(update).map(Projected::Progress)
    }

    /// Records `value` as the last progress sent, if it is a valid next one.
    fn increases(&mut self, value: f64) -> bool {
        if !value.is_finite() || self.last_progress.is_some_and(|last| value <= last) {
            return false;
        }
        self.last_progress = Some(value);
        true
    }

    fn own_progress(&mut self, progress: &Progress) -> Option<Update> {
        self.scope.progress_token.as_ref()?;
        if !self.increases(progress.progress) {
            return None;
        }
        let message = match (&progress.phase, &progress.message) {
            (Some(phase), Some(message)) => Some(format!("{phase}: {message}")),
            (phase, message) => message.clone().or_else(|| phase.clone()),
        };
        // MCP's progress has no field for the time left: it is said in
        // the message, to the second (under a second left says nothing).
        let left = progress
            .eta_ms
            .filter(|eta| *eta >= 1_000)
            .map(|eta| format!("about {} left", human_duration((eta + 500) / 1_000 * 1_000)));
        let message = match (message, left) {
            (Some(message), Some(left)) => Some(format!("{message} ({left})")),
            (message, left) => message.or(left),
        };
        Some(Update {
            progress: progress.progress,
            total: progress.total,
            message,
        })
    }

    /// `notifications/weir/run`: the run behind this call, for a client
    /// that asked (`Scope::run_notices`), under the call's token.
    fn run_notice(&self, run_id: &RunId) -> Option<String> {
        if !self.scope.run_notices {
            return None;
        }
        let (key, token) = match (&self.scope.progress_token, &self.scope.partial_token) {
            (Some(token), _) => ("progressToken", token),
            (None, Some(token)) => ("partialResultToken", token),
            (None, None) => return None,
        };
        let params = json!({ key: token, "runId": run_id.as_str() });
        Some(to_json(&notification("notifications/weir/run", params)))
    }

    fn notification(&self, update: Update) -> Option<String> {
        let token = self.scope.progress_token.clone()?;
        let mut params = json!({ "progressToken": token, "progress": update.progress });
        if let Some(total) = update.total {
            params["total"] = total.into();
        }
        if let Some(message) = update.message {
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
/// `limit` bytes, then truncated with a link to the whole run.
///
/// The limit counts what grows with the output: content blocks as JSON,
/// structured items, and text carried in text fields; once something does
/// not fit, nothing after it is kept (whole stream chunks, whole blocks),
/// and a note and a `resource_link` end the content. A group's stream is
/// counted as the one block it becomes, with room for its `[group]` line
/// whether or not it gets one, so the limit holds either way.
pub(crate) struct ResultBuilder {
    run_id: RunId,
    limit: usize,
    used: usize,
    truncated: bool,
    content: Vec<Piece>,
    items: Vec<Value>,
    structured: Option<Value>,
    error: Option<String>,
    /// Whether the run handed back a result: it completed, or it failed
    /// with one (`RunError::result`). A failed run's text fields are
    /// filled in only then.
    has_result: bool,
    /// Every group a text partial came in, kept or not, in order of first
    /// appearance: with more than one, each stream's block is labelled.
    groups: Vec<String>,
    /// The tool's text fields: each group, and its text so far.
    fields: Vec<(String, String)>,
    /// How many blocks of `content` came from partials: those before the
    /// terminal event's.
    streamed: Option<usize>,
    /// The run's terminal event, by its type name.
    ended: Option<&'static str>,
    /// Say on the result how the run ended (`Scope::run_notices`).
    run_notices: bool,
}

/// A block of the final content, before it is written.
enum Piece {
    /// The text of consecutive partial blocks of one group.
    Stream { group: String, text: String },
    /// Any other block, as MCP writes it.
    Block(Value),
}

/// The first line of a group's block when a run has several: `[stderr]`.
fn group_label(group: &str) -> String {
    format!("[{group}]\n")
}

/// A text content block, with `text` moved in (not copied by `json!`).
fn text_block(text: String) -> Value {
    Value::Object(Map::from_iter([
        ("type".into(), "text".into()),
        ("text".into(), Value::String(text)),
    ]))
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
            has_result: false,
            groups: Vec::new(),
            fields: Vec::new(),
            streamed: None,
            ended: None,
            run_notices: false,
        }
    }

    /// The result will say, in `_meta["io.weir/run"]`, which run it is,
    /// how it ended, how many of its first content blocks the partials
    /// carried (a client that showed them need not show them again) and
    /// whether the content was cut.
    pub(crate) fn run_notices(&mut self) {
        self.run_notices = true;
    }

    /// The run's tool declared these text fields (`ToolInfo::text_fields`):
    /// the text of each group goes into `structuredContent` too. Must come
    /// before the run's partials (the follower calls it on `started`).
    pub(crate) fn text_fields(&mut self, groups: &[String]) {
        self.fields = groups
            .iter()
            .map(|group| (group.clone(), String::new()))
            .collect();
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
            self.content.push(Piece::Block(content_json(block)));
        }
    }

    fn keep_item(&mut self, item: &Value) {
        if !self.truncated && self.fits(json_len(item)) {
            self.items.push(item.clone());
        }
    }

    /// `text`, written to `group`: appended to the group's block when it is
    /// the last one, else the start of a new one; and to its field.
    fn keep_stream(&mut self, group: &str, text: &str) {
        if !self.groups.iter().any(|seen| seen == group) {
            self.groups.push(group.to_owned());
        }
        if self.truncated {
            return;
        }
        let field = self.fields.iter().position(|(name, _)| name == group);
        let continues =
            matches!(self.content.last(), Some(Piece::Stream { group: last, .. }) if last == group);
        let text_len = text_json_len(text);
        let block_len = if continues {
            0
        } else {
            TEXT_BLOCK_LEN + text_json_len(&group_label(group))
        };
        let field_len = if field.is_some() { text_len } else { 0 };
        if !self.fits(block_len + text_len + field_len) {
            return;
        }
        match self.content.last_mut() {
            Some(Piece::Stream { text: stream, .. }) if continues => stream.push_str(text),
            _ => self.content.push(Piece::Stream {
                group: group.to_owned(),
                text: text.to_owned(),
            }),
        }
        if let Some(index) = field {
            self.fields[index].1.push_str(text);
        }
    }

    pub(crate) fn add(&mut self, event: &RunEvent) {
        if event.kind.is_terminal() {
            self.streamed.get_or_insert(self.content.len());
            self.ended = Some(event.kind.type_name());
        }
        match &event.kind {
            EventKind::Partial(partial) => {
                for block in &partial.content {
                    match (block, &partial.group) {
                        (Content::Text { text }, Some(group)) => self.keep_stream(group, text),
                        (block, _) => self.keep_content(block),
                    }
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
                self.has_result = true;
            }
            EventKind::Failed(failed) => {
                // A failed run may still hand back what it produced (a
                // program that exited non-zero: its exit code, its output).
                if let Some(result) = &failed.error.result {
                    for block in &result.content {
                        self.keep_content(block);
                    }
                    self.structured = result.structured.clone();
                    self.has_result = true;
                }
                self.error = Some(failed.error.to_string());
            }
            EventKind::Canceled(canceled) => {
                self.error = Some(format!("canceled: {}", canceled.reason))
            }
            _ => {}
        }
    }

    pub(crate) fn finish(mut self) -> Value {
        let is_error = self.error.is_some();
        let labelled = self.groups.len() > 1;
        let run = self.run_notices.then(|| {
            json!({
                "id": self.run_id.as_str(),
                "state": self.ended,
                "streamed": self.streamed.unwrap_or(self.content.len()),
                "truncated": self.truncated,
            })
        });
        let mut content: Vec<Value> = self
            .content
            .into_iter()
            .map(|piece| match piece {
                Piece::Stream { group, mut text } => {
                    if labelled {
                        text.insert_str(0, &group_label(&group));
                    }
                    text_block(text)
                }
                Piece::Block(block) => block,
            })
            .collect();
        if let Some(error) = self.error.take() {
            content.push(json!({ "type": "text", "text": error }));
        }
        let uri = format!("weir://runs/{}", self.run_id);
        if self.truncated {
            content.push(json!({
                "type": "text",
                "text": format!(
                    "[output truncated at {} bytes; the whole output is in run {}: page through it with the runs_events tool, or read the resource {uri}]",
                    self.limit, self.run_id
                ),
            }));
            content.push(json!({
                "type": "resource_link",
                "uri": uri,
                "name": format!("run {}", self.run_id),
                "mimeType": "application/json",
            }));
        }
        // Moved in, not written with `json!`: that macro serializes its
        // arguments into a new value, a copy of up to `limit` bytes.
        let mut result = Map::new();
        result.insert("content".into(), Value::Array(content));
        let mut structured = self.structured.or_else(|| {
            (!self.items.is_empty()).then(|| {
                Value::Object(Map::from_iter([("items".into(), Value::Array(self.items))]))
            })
        });
        if !is_error || self.has_result {
            structured =
                with_streamed_fields(structured, self.fields, self.truncated, &self.run_id);
        }
        if let Some(structured) = structured {
            result.insert("structuredContent".into(), structured);
        }
        if is_error {
            result.insert("isError".into(), true.into());
        }
        if let Some(run) = run {
            result.insert("_meta".into(), json!({ meta_key::WEIR_RUN: run }));
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
            run_notices: false,
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

    fn partial(text: &str) -> EventKind {
        EventKind::Partial(Partial {
            content: vec![Content::text(text)],
            ..Partial::default()
        })
    }

    fn output(group: &str, text: &str) -> EventKind {
        EventKind::Partial(Partial {
            content: vec![Content::text(text)],
            group: Some(group.into()),
            ..Partial::default()
        })
    }

    fn meta(total: Option<u64>, info: Value) -> EventKind {
        EventKind::Meta(Meta {
            total,
            info,
            ..Meta::default()
        })
    }

    /// The params of a progress notification; panics on anything else.
    fn params(projected: &Projected) -> Value {
        let Projected::Progress(message) = projected else {
            panic!("not progress: {projected:?}")
        };
        let message: Value = serde_json::from_str(message).unwrap();
        assert_eq!(message["method"], "notifications/progress");
        message["params"].clone()
    }

    fn sent_progress(projected: &Projected) -> f64 {
        params(projected)["progress"].as_f64().unwrap()
    }

    /// Plays `kinds`, one event every `gap_ms`, and returns what each became.
    fn play(scope: Scope, gap_ms: u64, kinds: Vec<EventKind>) -> Vec<Vec<Projected>> {
        let mut projector = Projector::new(scope);
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| {
                let ts = 1_000 + i as u64 * gap_ms;
                projector.project(&event(i as u64, ts, kind)).collect()
            })
            .collect()
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

    /// A progress-only client gets a program's output as progress: lines
    /// so far, the total `meta` announced, the newest line as the message.
    #[test]
    fn partials_become_progress_for_a_client_with_only_a_progress_token() {
        let sent = play(
            scope(),
            200,
            vec![
                meta(Some(10), json!({})),
                output("stdout", "line 0\n"),
                output("stdout", "line 1\nline 2\n"),
                output("stderr", "oops\n"),
                EventKind::Completed(Completed::default()),
            ],
        );
        let progress: Vec<Value> = sent.iter().flatten().map(params).collect();
        assert_eq!(
            progress,
            [
                json!({"progressToken": "t", "progress": 1.0, "total": 10.0, "message": "line 0"}),
                json!({"progressToken": "t", "progress": 3.0, "total": 10.0, "message": "line 2"}),
                json!({"progressToken": "t", "progress": 4.0, "total": 10.0, "message": "oops"}),
            ]
        );
    }

    /// A line a pause cut in two (a program printing without a newline,
    /// then the rest) is one line in its group; items without a group are
    /// one line each, newline or not.
    #[test]
    fn a_line_continued_in_its_group_counts_once() {
        let sent = play(
            scope(),
            100,
            vec![
                output("stdout", "wor"),
                output("stderr", "err\n"),
                output("stdout", "king\ndone\n"),
                partial("item a"),
                partial("item b"),
            ],
        );
        let values: Vec<f64> = sent.iter().flatten().map(sent_progress).collect();
        assert_eq!(values, [1.0, 2.0, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn the_message_is_one_line_cut_to_a_status_length() {
        let long = "é".repeat(150);
        let sent = play(scope(), 100, vec![partial(&format!("{long}\n"))]);
        let message = params(&sent[0][0])["message"].as_str().unwrap().to_owned();
        assert_eq!(message.chars().count(), MESSAGE_CHARS);
        assert!(message.ends_with('…'), "{message}");
        assert_eq!(headline("short  "), "short");
    }

    /// Structured items count one each, with the first line of the newest
    /// as the message; a tool may say its partials count in bytes.
    #[test]
    fn items_count_as_items_and_a_tool_may_choose_bytes() {
        let items = |values: Vec<Value>| {
            EventKind::Partial(Partial {
                items: values,
                ..Partial::default()
            })
        };
        let sent = play(
            scope(),
            100,
            vec![
                items(vec![
                    json!("first\nsecond"),
                    json!({"file": "a.rs", "line": 3}),
                ]),
                items(vec![json!("third")]),
            ],
        );
        let progress: Vec<Value> = sent.iter().flatten().map(params).collect();
        assert_eq!(progress[0]["progress"], 2.0);
        assert_eq!(progress[0]["message"], r#"{"file":"a.rs","line":3}"#);
        assert_eq!(progress[1]["progress"], 3.0);
        assert_eq!(progress[1]["message"], "third");

        let sent = play(
            scope(),
            100,
            vec![
                EventKind::Meta(Meta {
                    progress_unit: Some(Unit::Bytes),
                    ..Meta::default()
                }),
                partial("12345\n"),
                partial("67"),
            ],
        );
        let values: Vec<f64> = sent.iter().flatten().map(sent_progress).collect();
        assert_eq!(values, [6.0, 8.0]);
    }

    /// Once the tool reports progress of its own, that is what the client
    /// gets: counting stops, and the tool's values go out while they
    /// increase.
    #[test]
    fn the_tools_own_progress_takes_over() {
        let own = |value: f64, message: &str| {
            EventKind::Progress(Progress {
                progress: value,
                message: Some(message.into()),
                ..Progress::default()
            })
        };
        let sent = play(
            scope(),
            100,
            vec![
                partial("a\n"),
                partial("b\n"),
                own(2.0, "not more than what was sent"),
                partial("c\n"),
                own(3.0, "lines: 3"),
                partial("d\n"),
                own(4.0, "lines: 4"),
            ],
        );
        let progress: Vec<(f64, String)> = sent
            .iter()
            .flatten()
            .map(|m| {
                let p = params(m);
                (
                    p["progress"].as_f64().unwrap(),
                    p["message"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            progress,
            [
                (1.0, "a".to_owned()),
                (2.0, "b".to_owned()),
                (3.0, "lines: 3".to_owned()),
                (4.0, "lines: 4".to_owned()),
            ]
        );
    }

    /// A client that declared partial results gets them, and no counted
    /// progress; a client without a progress token gets no progress.
    #[test]
    fn partials_are_counted_only_for_progress_only_clients() {
        let with_partials = Scope {
            partial_token: Some(json!("r")),
            ..scope()
        };
        let sent = play(with_partials, 100, vec![partial("a\n"), partial("b\n")]);
        assert!(
            sent.iter()
                .flatten()
                .all(|m| matches!(m, Projected::Kept(_)))
        );
        assert_eq!(sent.iter().flatten().count(), 2);

        let quiet = Scope {
            progress_token: None,
            ..scope()
        };
        let sent = play(quiet, 100, vec![partial("a\n"), progress(1.0)]);
        assert_eq!(sent.iter().flatten().count(), 0);
    }

    /// A burst of lines within the rate limit: the first goes out at once,
    /// the newest is held back until the follower flushes it or the result
    /// comes, whichever is first.
    #[test]
    fn the_newest_of_a_burst_is_held_then_flushed() {
        let mut projector = Projector::new(scope());
        let first: Vec<Projected> = projector
            .project(&event(0, 1_000, partial("0\n")))
            .collect();
        assert_eq!(first.len(), 1);
        for i in 1..10u64 {
            assert_eq!(
                projector
                    .project(&event(i, 1_001, partial(&format!("{i}\n"))))
                    .count(),
                0
            );
        }
        assert!(projector.has_pending());
        let flushed = projector.flush().expect("the newest");
        assert_eq!(params(&flushed)["message"], "9");
        assert!(!projector.has_pending() && projector.flush().is_none());
    }

    /// A milestone's phase, message and estimate make one status line.
    #[test]
    fn the_time_left_is_said_in_the_message() {
        let milestone = |progress: f64, eta_ms: Option<u64>| {
            EventKind::Progress(Progress {
                progress,
                total: Some(5.0),
                message: Some(format!("{progress} of 5 agents done")),
                phase: Some("agents".into()),
                eta_ms,
            })
        };
        let sent = play(
            scope(),
            100,
            vec![
                milestone(1.0, Some(8_400)),
                milestone(2.0, Some(125_000)),
                milestone(4.0, Some(400)),
            ],
        );
        let messages: Vec<Value> = sent
            .iter()
            .flatten()
            .map(|m| params(m)["message"].clone())
            .collect();
        assert_eq!(
            messages,
            [
                "agents: 1 of 5 agents done (about 8s left)",
                "agents: 2 of 5 agents done (about 2m05s left)",
                "agents: 4 of 5 agents done",
            ]
        );
    }

    // ----- the final result -------------------------------------------------

    /// The final result of `kinds` (after `started`), for a tool with
    /// text fields `fields`, with a result limit of `limit` bytes.
    fn result_of(limit: usize, fields: &[&str], kinds: Vec<EventKind>) -> Value {
        let mut builder = ResultBuilder::new(RunId::parse("r").unwrap(), limit);
        builder.text_fields(&fields.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>());
        for (i, kind) in kinds.into_iter().enumerate() {
            builder.add(&event(i as u64 + 1, 1_000, kind));
        }
        builder.finish()
    }

    fn texts(result: &Value) -> Vec<&str> {
        result["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect()
    }

    fn completed(structured: Option<Value>) -> EventKind {
        EventKind::Completed(Completed {
            content: vec![Content::text("[exit code 0]")],
            structured,
        })
    }

    /// A call that asked (`_meta["io.weir/run"]`) is told its run when it
    /// starts, under its token; one that did not is told nothing new.
    #[test]
    fn the_run_is_named_at_start_only_to_a_call_that_asked() {
        let started = || {
            EventKind::Started(weir_core::Started {
                tool: "t".into(),
                arguments: json!({}),
                node: "n".into(),
            })
        };
        let asked = Scope {
            run_notices: true,
            ..scope()
        };
        let sent = play(asked, 100, vec![started()]);
        let [Projected::Kept(notice)] = &sent[0][..] else {
            panic!("one notice: {sent:?}")
        };
        let notice: Value = serde_json::from_str(notice).unwrap();
        assert_eq!(notice["method"], "notifications/weir/run");
        assert_eq!(
            notice["params"],
            json!({"progressToken": "t", "runId": "r"})
        );
        assert!(play(scope(), 100, vec![started()])[0].is_empty());
    }

    /// Asked, the result says which run it is, how it ended and how many
    /// of its first blocks the partials carried; else it says nothing.
    #[test]
    fn the_result_says_how_the_run_ended_when_asked() {
        let kinds = || {
            vec![
                output("stdout", "a\n"),
                output("stderr", "b\n"),
                partial("item"),
                EventKind::Canceled(weir_core::Canceled {
                    reason: "by another client".into(),
                }),
            ]
        };
        let mut builder = ResultBuilder::new(RunId::parse("r").unwrap(), 4096);
        builder.run_notices();
        for (i, kind) in kinds().into_iter().enumerate() {
            builder.add(&event(i as u64 + 1, 1_000, kind));
        }
        let result = builder.finish();
        assert_eq!(
            result["_meta"]["io.weir/run"],
            json!({"id": "r", "state": "canceled", "streamed": 3, "truncated": false})
        );
        assert_eq!(texts(&result).len(), 4, "{result}");
        assert!(result_of(4096, &[], kinds()).get("_meta").is_none());
    }

    /// A group's text is one stream: its consecutive blocks become one
    /// block, joined as written (the text has its own newlines, and a line
    /// cut by a pause is whole again). Text without a group is an item per
    /// block, and the tool's own final blocks stay as they are.
    #[test]
    fn a_groups_consecutive_text_is_one_block() {
        let result = result_of(
            4096,
            &[],
            vec![
                output("stdout", "line 1\n"),
                output("stdout", "line 2\nhalf a "),
                output("stdout", "line\n"),
                partial("item a"),
                partial("item b"),
                output("stdout", "line 4\n"),
                completed(None),
            ],
        );
        assert_eq!(
            texts(&result),
            [
                "line 1\nline 2\nhalf a line\n",
                "item a",
                "item b",
                "line 4\n",
                "[exit code 0]"
            ]
        );
        assert!(result.get("structuredContent").is_none());
    }

    /// With more than one group, each block says which it is; the lines of
    /// a stream keep their order across the other group's.
    #[test]
    fn blocks_say_their_group_when_there_are_several() {
        let result = result_of(
            4096,
            &[],
            vec![
                output("stdout", "a\n"),
                output("stdout", "b\n"),
                output("stderr", "warning: x\n"),
                output("stdout", "c\n"),
                completed(None),
            ],
        );
        assert_eq!(
            texts(&result),
            [
                "[stdout]\na\nb\n",
                "[stderr]\nwarning: x\n",
                "[stdout]\nc\n",
                "[exit code 0]"
            ]
        );
    }

    /// A tool with text fields gets each group's text in its structured
    /// result, beside its own fields (a value it set under those names is
    /// replaced), with whether it was cut and where the run is.
    #[test]
    fn text_fields_carry_each_groups_text() {
        let result = result_of(
            4096,
            &["stdout", "stderr"],
            vec![
                output("stdout", "1\n"),
                output("stderr", "oops\n"),
                output("stdout", "2\n"),
                output("weir", "[a notice]\n"),
                completed(Some(json!({"exit_code": 0, "stdout": "the tool's own"}))),
            ],
        );
        assert_eq!(
            result["structuredContent"],
            json!({
                "exit_code": 0,
                "stdout": "1\n2\n",
                "stderr": "oops\n",
                "output_truncated": false,
                "output_uri": "weir://runs/r",
            })
        );
        // Without a structured result of its own, the fields alone; a
        // failed run has no structured result.
        let alone = result_of(4096, &["stdout"], vec![completed(None)]);
        assert_eq!(
            alone["structuredContent"],
            json!({"stdout": "", "output_truncated": false, "output_uri": "weir://runs/r"})
        );
        let failed = result_of(
            4096,
            &["stdout"],
            vec![
                output("stdout", "1\n"),
                EventKind::Failed(weir_core::Failed {
                    error: weir_core::RunError::new(weir_core::FailureCode::Timeout, "too slow"),
                }),
            ],
        );
        assert!(failed.get("structuredContent").is_none(), "{failed}");
        assert_eq!(failed["isError"], true);
        assert_eq!(texts(&failed), ["1\n", "too slow"]);
    }

    /// A run that failed with a result (a program that exited non-zero) is
    /// an error that still carries everything: its streams, its own
    /// content, its structured result with the text fields, then why.
    #[test]
    fn a_failed_run_with_a_result_keeps_it() {
        let result = result_of(
            4096,
            &["stdout", "stderr"],
            vec![
                output("stdout", "1\n"),
                output("stderr", "oops\n"),
                EventKind::Failed(weir_core::Failed {
                    error: weir_core::RunError::new(
                        weir_core::FailureCode::ToolError,
                        "the program exited with code 3",
                    )
                    .with_result(Completed {
                        content: vec![Content::text("[exit code 3]")],
                        structured: Some(json!({"exit_code": 3})),
                    }),
                }),
            ],
        );
        assert_eq!(result["isError"], true);
        assert_eq!(
            texts(&result),
            [
                "[stdout]\n1\n",
                "[stderr]\noops\n",
                "[exit code 3]",
                "the program exited with code 3"
            ]
        );
        assert_eq!(
            result["structuredContent"],
            json!({
                "exit_code": 3,
                "stdout": "1\n",
                "stderr": "oops\n",
                "output_truncated": false,
                "output_uri": "weir://runs/r",
            })
        );
    }

    /// Past the limit, content and text fields stop at the same chunk,
    /// the fields say so and point at the run, and the content ends with
    /// the note and the link.
    #[test]
    fn a_cut_stream_says_so_in_content_and_fields() {
        let chunk = "x".repeat(99) + "\n";
        let result = result_of(
            // Room for one block of two chunks, each counted twice.
            TEXT_BLOCK_LEN + text_json_len(&group_label("stdout")) + 4 * text_json_len(&chunk),
            &["stdout"],
            vec![
                output("stdout", &chunk),
                output("stdout", &chunk),
                output("stdout", &chunk),
                completed(Some(json!({"exit_code": 0}))),
            ],
        );
        let structured = &result["structuredContent"];
        assert_eq!(structured["stdout"], chunk.repeat(2));
        assert_eq!(structured["output_truncated"], true);
        assert_eq!(structured["output_uri"], "weir://runs/r");
        let content = result["content"].as_array().unwrap();
        assert_eq!(content[0]["text"], chunk.repeat(2));
        assert!(
            content[1]["text"]
                .as_str()
                .unwrap()
                .starts_with("[output truncated at")
        );
        assert_eq!(content[2]["type"], "resource_link");
        assert_eq!(content.len(), 3, "the summary came after the cut: {result}");
    }

    /// A chunk of a stream: its group (none, or one of three), and text
    /// with what needs escaping.
    fn chunk() -> impl proptest::strategy::Strategy<Value = (Option<&'static str>, String)> {
        use proptest::prelude::*;
        (
            prop::sample::select(vec![None, Some("stdout"), Some("stderr"), Some("weir")]),
            "(\\PC|[\n\t\"\\\\]){0,40}",
        )
    }

    proptest::proptest! {
        /// Whatever the chunks and the limit: what the content holds (and
        /// the fields carry) fits in the limit, labels included; each
        /// group's text is a prefix of what it streamed, whole when
        /// nothing was cut; no two blocks in a row are of one group.
        #[test]
        fn the_limit_holds_and_streams_stay_whole(
            chunks in proptest::collection::vec(chunk(), 0..30),
            limit in 0usize..3_000,
        ) {
            let kinds: Vec<EventKind> = chunks
                .iter()
                .map(|(group, text)| match group {
                    Some(group) => output(group, text),
                    None => partial(text),
                })
                .collect();
            let result = result_of(limit, &["stdout"], kinds.clone());
            let content = result["content"].as_array().unwrap();
            let truncated = result["structuredContent"]["output_truncated"] == true;
            let kept = if truncated { &content[..content.len() - 2] } else { &content[..] };
            let carried = result["structuredContent"]["stdout"].as_str().unwrap();
            let used: usize = kept.iter().map(|block| to_json(block).len()).sum::<usize>()
                + text_json_len(carried);
            proptest::prop_assert!(used <= limit, "{used} > {limit}: {result}");
            let streamed = |group: &str| -> String {
                chunks.iter().filter(|(g, _)| *g == Some(group)).map(|(_, t)| t.as_str()).collect()
            };
            proptest::prop_assert!(streamed("stdout").starts_with(carried));
            if !truncated {
                proptest::prop_assert_eq!(carried, streamed("stdout"));
                proptest::prop_assert_eq!(kept.len(), {
                    let mut blocks = 0;
                    let mut last: Option<Option<&str>> = None;
                    for (group, _) in &chunks {
                        if group.is_none() || last != Some(*group) {
                            blocks += 1;
                        }
                        last = Some(*group);
                    }
                    blocks
                });
            }
        }
    }
}
