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
//! The final result ([`ResultBuilder`]) is built in [`result`].

use serde_json::{Value, json};
use weir_core::{
    Content, EventKind, LogLevel, Meta, Partial, Progress, ProgressUnit as Unit, RunEvent, RunId,
    human_duration,
};

use crate::protocol::Scope;
use crate::wire::{content_len, json_len, json_prefix, partial_result_notification, to_json};
use weir_mcp_wire::jsonrpc::notification;

mod result;
pub(crate) use result::ResultBuilder;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Era;
    use weir_core::{Completed, RunId};

    pub(super) fn scope() -> Scope {
        Scope {
            era: Era::Session,
            client_capabilities: json!({}),
            progress_token: Some(json!("t")),
            partial_token: None,
            log_level: None,
            run_notices: false,
        }
    }

    pub(super) fn event(seq: u64, ts: u64, kind: EventKind) -> RunEvent {
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

    pub(super) fn partial(text: &str) -> EventKind {
        EventKind::Partial(Partial {
            content: vec![Content::text(text)],
            ..Partial::default()
        })
    }

    pub(super) fn output(group: &str, text: &str) -> EventKind {
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
}
