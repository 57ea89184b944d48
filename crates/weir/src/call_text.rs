//! `weir call --output text`: a call's events for a person.
//!
//! Each byte a tool streams is printed once, where it belongs: a program's
//! stdout (the `stdout` group of weir's exec tools) on stdout and its
//! stderr on stderr, byte for byte; other text streams (a model's or an
//! agent's tokens) joined on stdout as they come, with `[group] ` at each
//! change when more than one speaks; structured items one line each (code
//! locations as `path:line: context`, a blank line between files; an
//! agent's events on stderr). weir's own words — the run id, progress (a
//! bar, on a terminal), logs, errors — go to stderr. The result prints
//! only what the partials did not carry; after a program's output it goes
//! to stderr, so that stdout holds exactly what the program wrote.

use std::io::{IsTerminal, Write};

use serde_json::Value;
use weir_client::{CallEvent, CallResult};
use weir_core::Content;

use crate::progress_bar::ProgressBar;

/// The longest line an agent event prints.
const EVENT_LINE: usize = 120;

/// Where a piece of output goes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum To {
    Stdout,
    Stderr,
}

/// How a call ended, as the view saw it: the exit code's input.
pub(crate) struct TextView {
    tool: String,
    /// `weir runs tail` for this server, without the id.
    tail: String,
    /// `weir tools` for this server.
    tools: String,
    bar: Option<ProgressBar>,
    /// Whether each stream is a terminal.
    tty: [bool; 2],
    /// Whether each stream's last byte was something other than a newline.
    open: [bool; 2],
    /// Stdout is a closed pipe: nothing more is printed on it.
    pub(crate) stdout_closed: bool,
    /// A program's output (stdout or stderr group) was streamed.
    program_output: bool,
    /// Text streams seen (other than a program's), in order; the last one
    /// written.
    token_groups: Vec<String>,
    last_token_group: Option<String>,
    /// The group of the last item printed.
    last_item_group: Option<String>,
    /// weir's notices streamed in the `weir` group, to skip the warning
    /// log that repeats each.
    notices: Vec<String>,
    /// Blocks printed from partials: for a server that does not say how
    /// many result blocks its partials carried.
    streamed: Vec<Content>,
    /// Partials carried structured items and no text (code intelligence
    /// answers): the result's text then repeats them, after its headline.
    items_only: bool,
}

impl TextView {
    pub(crate) fn new(tool: &str, tail: String, tools: String) -> TextView {
        let tty = [
            std::io::stdout().is_terminal(),
            std::io::stderr().is_terminal(),
        ];
        // A dumb terminal cannot erase a line: no bar there.
        let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
        TextView {
            tool: tool.to_owned(),
            tail,
            tools,
            bar: (tty[1] && !dumb).then(ProgressBar::new),
            tty,
            open: [false, false],
            stdout_closed: false,
            program_output: false,
            token_groups: Vec::new(),
            last_token_group: None,
            last_item_group: None,
            notices: Vec::new(),
            streamed: Vec::new(),
            items_only: false,
        }
    }

    /// When the bar has a newer state to draw (its redraws are spaced);
    /// never while the terminal's line is taken.
    pub(crate) fn redraw_at(&self) -> Option<tokio::time::Instant> {
        if self.line_open() {
            return None;
        }
        self.bar
            .as_ref()
            .and_then(ProgressBar::due)
            .map(tokio::time::Instant::from_std)
    }

    /// Draws the bar's newest state, if the terminal's line is free.
    pub(crate) fn redraw(&mut self) {
        if !self.line_open()
            && let Some(bar) = &mut self.bar
        {
            bar.draw();
        }
    }

    pub(crate) fn clear(&mut self) {
        if let Some(bar) = &mut self.bar {
            bar.clear();
        }
    }

    /// A word in front of the bar, e.g. "cancelling…".
    pub(crate) fn status(&mut self, status: &str) {
        if let Some(bar) = &mut self.bar {
            bar.set_status(status);
        }
        self.redraw();
    }

    /// A line of weir's own on stderr, on a line of its own.
    pub(crate) fn say(&mut self, line: &str) {
        self.end_lines_for(To::Stderr);
        self.write(To::Stderr, format!("{line}\n").as_bytes());
    }

    pub(crate) fn event(&mut self, event: &CallEvent) -> std::io::Result<()> {
        match event {
            CallEvent::Run { run_id } => {
                let line = format!("run {run_id}: {} {run_id}", self.tail);
                self.say(&line);
            }
            CallEvent::Progress {
                progress,
                total,
                message,
            } => {
                if let Some(bar) = &mut self.bar {
                    bar.record(*progress, *total, message.as_deref());
                }
                if self
                    .redraw_at()
                    .is_some_and(|at| at <= tokio::time::Instant::now())
                {
                    self.redraw();
                }
            }
            CallEvent::Partial {
                content,
                structured,
                ..
            } => self.partial(content, structured.as_ref()),
            CallEvent::Log {
                level,
                logger,
                data,
            } => {
                let level = serde_json::to_value(level).unwrap_or_default();
                self.log(level.as_str().unwrap_or("log"), logger.as_deref(), data);
            }
            CallEvent::Task {
                task_id, status, ..
            } => self.status(&format!("task {task_id} {}", status.as_str())),
            CallEvent::Result(result) => self.result(result),
            CallEvent::Error(_) => {}
        }
        Ok(())
    }

    fn partial(&mut self, content: &[Content], structured: Option<&Value>) {
        let group = structured
            .and_then(|s| s.get("group"))
            .and_then(Value::as_str);
        for block in content {
            match (block, group) {
                (Content::Text { text }, Some(group)) => self.stream(group, text),
                (block, _) => {
                    let text = block_text(block);
                    self.end_lines_for(To::Stdout);
                    self.write(To::Stdout, text.as_bytes());
                }
            }
        }
        self.streamed.extend(content.iter().cloned());
        let items = structured
            .and_then(|s| s.get("items"))
            .and_then(Value::as_array);
        if content.is_empty() && items.is_some_and(|items| !items.is_empty()) {
            self.items_only = true;
        }
        for item in items.into_iter().flatten() {
            self.item(group, item);
        }
        // Structured data is the output only when there is nothing else.
        if let (Some(structured), true, None, None) = (structured, content.is_empty(), items, group)
        {
            self.end_lines_for(To::Stdout);
            self.write(To::Stdout, format!("{}\n", one_line(structured)).as_bytes());
        }
    }

    /// Text written to a stream: a program's as it is, weir's notices on
    /// stderr, any other (tokens) joined on stdout.
    fn stream(&mut self, group: &str, text: &str) {
        match group {
            "stdout" | "stderr" => {
                self.program_output = true;
                let to = if group == "stdout" {
                    To::Stdout
                } else {
                    To::Stderr
                };
                self.write(to, text.as_bytes());
            }
            "weir" => {
                self.notices.push(notice_words(text).to_owned());
                self.end_lines_for(To::Stderr);
                self.write(To::Stderr, text.as_bytes());
            }
            _ => {
                if !self.token_groups.iter().any(|seen| seen == group) {
                    self.token_groups.push(group.to_owned());
                }
                let switched = self.last_token_group.as_deref() != Some(group);
                if switched && self.token_groups.len() > 1 {
                    self.end_line(To::Stdout);
                    self.write(To::Stdout, format!("[{group}] ").as_bytes());
                }
                self.last_token_group = Some(group.to_owned());
                self.write(To::Stdout, text.as_bytes());
            }
        }
    }

    /// One structured item: an agent's event on stderr, anything else on
    /// stdout, grouped as the tool grouped them.
    fn item(&mut self, group: Option<&str>, item: &Value) {
        if group == Some("events")
            && let Some(line) = agent_event(item)
        {
            self.say(&line);
            return;
        }
        if group == Some("events") && item.get("type").is_some() {
            return; // deltas and repeats: their text is streamed already
        }
        let location = location(item);
        let mut text = String::new();
        if group != self.last_item_group.as_deref() {
            if self.last_item_group.is_some() {
                text.push('\n');
            }
            // A group that is not the items' file is a heading.
            if let Some(group) = group
                && location.as_ref().is_none_or(|(path, _)| path != group)
            {
                text.push_str(&format!("{group}:\n"));
            }
            self.last_item_group = group.map(str::to_owned);
        }
        text.push_str(&item_line(item, location));
        text.push('\n');
        self.end_lines_for(To::Stdout);
        self.write(To::Stdout, text.as_bytes());
    }

    fn log(&mut self, level: &str, logger: Option<&str>, data: &Value) {
        let text = match data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        // A warning that repeats a notice the stream showed.
        if logger == Some("weir") && self.notices.contains(&text) {
            return;
        }
        let line = match logger {
            // weir's notices begin "weir: " already.
            Some("weir") if text.starts_with("weir: ") => format!("[{level}] {text}"),
            Some(logger) => format!("[{level}] {logger}: {text}"),
            None => format!("[{level}] {text}"),
        };
        self.say(&line);
    }

    /// The result: what the partials did not carry. An error ends with a
    /// line saying how the run ended.
    fn result(&mut self, result: &CallResult) {
        let (rest, error) = self.unshown(result);
        let to = if result.is_error || self.program_output {
            To::Stderr
        } else {
            To::Stdout
        };
        let any_text = result
            .content
            .iter()
            .any(|block| matches!(block, Content::Text { .. }));
        let mut text: String = match (rest.first(), &result.run) {
            // A weir tool that streamed its answer as items ends with a
            // headline, then the same items (for hosts that show only the
            // result) or its structured result as JSON: the headline is
            // what the terminal has not shown yet (`--output jsonl` keeps
            // the rest).
            (Some(Content::Text { text }), Some(_)) if self.items_only && !result.is_error => {
                format!("{}\n", first_line(text))
            }
            _ => rest.iter().map(block_text).collect(),
        };
        if let (Some(structured), false) = (&result.structured, any_text) {
            text.push_str(&pretty(structured));
        }
        if !text.is_empty() {
            self.end_lines_for(to);
            self.write(to, text.as_bytes());
        }
        let line = match (error, &result.run) {
            (Some(error), _) => match error.strip_prefix("canceled: ") {
                Some(reason) => format!("weir: {} was canceled: {reason}", self.tool),
                None => format!("weir: {} failed: {error}", self.tool),
            },
            // A tool error without a weir run: another server's, or a weir
            // tool that reports on a run (`runs_wait` of a failed run). The
            // arguments may be why, or not: say where they are described.
            (None, None) if result.is_error => format!(
                "weir: {} returned an error (its arguments: `{}`)",
                self.tool, self.tools
            ),
            (None, _) => return,
        };
        self.say(&line);
    }

    /// The blocks of `result` not shown yet, and, for a weir server's
    /// failed run, its error (the last block) apart.
    fn unshown<'r>(&self, result: &'r CallResult) -> (&'r [Content], Option<String>) {
        let content = &result.content[..];
        let Some(run) = &result.run else {
            // Another server: skip what repeats the partials block for block.
            let already = content
                .iter()
                .zip(&self.streamed)
                .take_while(|(a, b)| a == b)
                .count();
            return (&content[already..], None);
        };
        let start = run.streamed.min(content.len());
        // The note that the content was cut, and its link: the partials
        // showed everything.
        let end = if run.truncated {
            content.len().saturating_sub(2).max(start)
        } else {
            content.len()
        };
        let rest = &content[start..end];
        match (result.is_error, rest.split_last()) {
            (true, Some((Content::Text { text }, before))) => (before, Some(text.clone())),
            _ => (rest, None),
        }
    }

    /// Writes to one stream with the bar out of the way, and draws the
    /// bar again when the terminal's line is free. A closed stdout ends
    /// stdout's output.
    fn write(&mut self, to: To, bytes: &[u8]) {
        if bytes.is_empty() || (to == To::Stdout && self.stdout_closed) {
            return;
        }
        self.clear();
        let written = match to {
            To::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }
            To::Stderr => {
                let mut out = std::io::stderr().lock();
                out.write_all(bytes).and_then(|()| out.flush())
            }
        };
        match written {
            Err(error) if to == To::Stdout && error.kind() == std::io::ErrorKind::BrokenPipe => {
                self.stdout_closed = true;
            }
            // Nothing to tell it on: stderr is where weir speaks.
            _ => {}
        }
        self.open[to as usize] = !bytes.ends_with(b"\n");
        self.redraw();
    }

    /// Ends `to`'s line if it is open.
    fn end_line(&mut self, to: To) {
        if self.open[to as usize] {
            self.write(to, b"\n");
        }
    }

    /// Before a line of its own on `to`: `to`'s open line ends, and so
    /// does the other stream's when both are the terminal (else the line
    /// would land in the middle of it). A program's stream is left as it
    /// is, but for the terminal.
    fn end_lines_for(&mut self, to: To) {
        self.end_line(to);
        let other = match to {
            To::Stdout => To::Stderr,
            To::Stderr => To::Stdout,
        };
        if self.tty[0] && self.tty[1] {
            self.end_line(other);
        }
    }

    /// Whether the terminal's cursor is inside a line.
    fn line_open(&self) -> bool {
        (self.tty[0] && self.open[0]) || (self.tty[1] && self.open[1])
    }
}

/// A content block as text: text as it is, anything else described on a
/// line; ends with a newline unless it is text that does not.
fn block_text(block: &Content) -> String {
    let text = match block {
        Content::Text { text } => return text_block(text),
        Content::Image { data, mime_type } => {
            format!("[image {mime_type}, {} bytes base64]", data.len())
        }
        Content::Audio { data, mime_type } => {
            format!("[audio {mime_type}, {} bytes base64]", data.len())
        }
        Content::Resource {
            uri,
            text: Some(text),
            ..
        } => format!("[resource {uri}]\n{}", text_block(text)),
        Content::Resource { uri, .. } => format!("[resource {uri}]"),
        Content::ResourceLink { uri, name, .. } => format!("[link {name}] {uri}"),
    };
    if text.ends_with('\n') {
        text
    } else {
        text + "\n"
    }
}

/// A text block on its own line(s); a JSON object indented.
fn text_block(text: &str) -> String {
    let object = text.trim_start().starts_with('{');
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) if object => pretty(&value),
        _ if text.ends_with('\n') => text.to_owned(),
        _ => format!("{text}\n"),
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()) + "\n"
}

/// A notice's words, without the brackets and newline it streams with.
fn notice_words(text: &str) -> &str {
    text.trim().trim_matches(['[', ']'])
}

/// Where an item is, when it names a file and a line: code intelligence's
/// `location` (`fileId`, `startLine`).
fn location(item: &Value) -> Option<(String, u64)> {
    let location = item.get("location")?;
    Some((
        location.get("fileId")?.as_str()?.to_owned(),
        location.get("startLine")?.as_u64()?,
    ))
}

/// One item on one line: `path:line: context` when it has a place, a
/// string as it is, anything else as `key: value` pairs.
fn item_line(item: &Value, location: Option<(String, u64)>) -> String {
    if let Some((path, line)) = location {
        let what = ["context", "signature", "name"]
            .iter()
            .find_map(|key| item.get(*key)?.as_str().filter(|s| !s.trim().is_empty()))
            .unwrap_or_default();
        return format!("{path}:{line}: {}", what.trim());
    }
    one_line(item)
}

/// A JSON value on one line for a person: strings bare, objects as
/// `key: value` pairs, nulls left out.
fn one_line(value: &Value) -> String {
    match value {
        Value::String(text) => text.replace('\n', " "),
        Value::Object(fields) => fields
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| match value {
                Value::String(text) => format!("{key}: {}", text.replace('\n', " ")),
                other => format!("{key}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// An agent's event (weir-agents' normalized JSON) as one line, or `None`
/// for those whose text streams on its own (deltas, whole messages).
fn agent_event(event: &Value) -> Option<String> {
    let str_of = |key: &str| event.get(key).and_then(Value::as_str);
    let line = match event.get("type")?.as_str()? {
        "session_started" => {
            let mut parts = vec![format!("session {}", str_of("session_id").unwrap_or("?"))];
            if let Some(model) = str_of("model") {
                parts.push(format!("model {model}"));
            }
            format!("[{}]", parts.join(", "))
        }
        "tool_use" => format!(
            "> {} {}",
            str_of("name").unwrap_or("?"),
            main_input(event.get("input")?)
        ),
        "tool_result" if event["is_error"] == true => {
            format!("  ! {}", first_line(str_of("content").unwrap_or("")))
        }
        "tool_result" => format!("  = {}", first_line(str_of("content").unwrap_or(""))),
        "permission_request" => {
            let tool = str_of("tool_name").unwrap_or("?");
            if event["allowed"] == true {
                format!("  {tool} allowed")
            } else {
                format!("  ! {tool} was not allowed")
            }
        }
        "hook_called" => format!("  hook {}", str_of("event").unwrap_or("?")),
        "error" => format!("  ! {}", first_line(str_of("message").unwrap_or(""))),
        "result" => agent_result(event),
        "exited" => match (event["code"].as_i64(), event["signal"].as_i64()) {
            (Some(code), _) => format!("[exited with code {code}]"),
            (None, Some(signal)) => format!("[killed by signal {signal}]"),
            _ => "[exited]".to_owned(),
        },
        _ => return None,
    };
    Some(clip(&line, EVENT_LINE))
}

/// The argument that says what a tool call does (a command, a path), else
/// all of them.
fn main_input(input: &Value) -> String {
    let main = input.as_object().and_then(|object| {
        ["command", "cmd", "file_path", "path", "pattern", "url"]
            .iter()
            .find_map(|key| object.get(*key)?.as_str())
    });
    main.map_or_else(|| input.to_string(), str::to_owned)
}

/// `[done: 1.2 s, 11 tokens in, 7 out, $0.0002]`.
fn agent_result(result: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(ms) = result["duration_ms"].as_u64() {
        parts.push(format!("{:.1} s", ms as f64 / 1000.0));
    }
    let usage = &result["usage"];
    if let (Some(input), Some(output)) = (
        usage["input_tokens"].as_u64(),
        usage["output_tokens"].as_u64(),
    ) {
        parts.push(format!("{input} tokens in, {output} out"));
    }
    if let Some(cost) = result["cost_usd"].as_f64() {
        parts.push(format!("${cost:.4}"));
    }
    let word = if result["is_error"] == true {
        "failed"
    } else {
        "done"
    };
    if parts.is_empty() {
        format!("[{word}]")
    } else {
        format!("[{word}: {}]", parts.join(", "))
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
}

/// `line` cut to `max` characters, with `…` when cut.
fn clip(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn code_locations_read_as_path_line_context() {
        let item = json!({
            "location": {"fileId": "src/lib.rs", "startLine": 12, "startColumn": 4},
            "kind": "reference",
            "context": "    let x = parse(input);",
        });
        assert_eq!(
            item_line(&item, location(&item)),
            "src/lib.rs:12: let x = parse(input);"
        );
        let plain = json!({"docs": null, "files": 3, "name": "core"});
        assert_eq!(item_line(&plain, location(&plain)), "files: 3, name: core");
    }

    #[test]
    fn agent_events_are_one_line_each_and_deltas_none() {
        let tool =
            json!({"type": "tool_use", "id": "1", "name": "Bash", "input": {"command": "ls -la"}});
        assert_eq!(agent_event(&tool).unwrap(), "> Bash ls -la");
        let failed = json!({"type": "tool_result", "id": "1", "content": "\nno such file\nmore", "is_error": true});
        assert_eq!(agent_event(&failed).unwrap(), "  ! no such file");
        let done = json!({"type": "result", "is_error": false, "duration_ms": 1200,
            "usage": {"input_tokens": 11, "output_tokens": 7}, "cost_usd": null});
        assert_eq!(
            agent_event(&done).unwrap(),
            "[done: 1.2 s, 11 tokens in, 7 out]"
        );
        assert!(agent_event(&json!({"type": "text_delta", "text": "hi"})).is_none());
    }

    #[test]
    fn a_json_text_block_is_indented_and_other_text_ends_its_line() {
        assert_eq!(text_block(r#"{"a":1}"#), "{\n  \"a\": 1\n}\n");
        assert_eq!(text_block("[exit code 0]"), "[exit code 0]\n");
        assert_eq!(text_block("two\nlines\n"), "two\nlines\n");
    }
}
