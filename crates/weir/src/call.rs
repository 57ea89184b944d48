//! `weir call`: call a tool on an MCP server and show the call as it
//! happens. Text output puts partial results and the result on stdout and,
//! on a terminal, a progress bar on stderr; jsonl output puts every event on
//! stdout as one JSON line. Ctrl-C cancels the call on the server; a second
//! Ctrl-C exits at once.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use tokio::signal::unix::{SignalKind, signal};
use weir_client::{CallEvent, CallOptions, CallResult, ClientError, TaskMode};
use weir_core::Content;

use crate::cli::{CallArgs, OutputFormat};
use crate::exit::Outcome;
use crate::progress_bar::ProgressBar;
use crate::remote;

pub(crate) async fn run(args: CallArgs) -> anyhow::Result<Outcome> {
    let arguments = arguments(args.json.as_deref(), &args.args)?;
    let timeout = match args.timeout {
        Some(seconds) => Some(
            Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|t| !t.is_zero())
                .context("--timeout must be a positive number of seconds")?,
        ),
        None => None,
    };
    // Registered before anything else, so a Ctrl-C is never the default kill.
    let mut interrupts = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    let connected = tokio::select! {
        connected = remote::connect(&args.server) => connected,
        _ = interrupts.recv() => {
            eprintln!("weir: interrupted while connecting; nothing was called");
            return Ok(Outcome::Canceled);
        }
    };
    let client = match connected {
        Ok(client) => client,
        Err(error) => return Ok(remote::report(&error, &args.server)),
    };
    let options = CallOptions {
        task: if args.task {
            TaskMode::Always
        } else {
            TaskMode::WhenRequired
        },
        timeout,
    };
    let mut call = client.call_stream(&args.tool, arguments, options);
    let mut show = Show::new(args.output);
    let mut interrupted = false;
    let last = loop {
        tokio::select! {
            event = call.next() => match event {
                Some(event) if event.is_terminal() => break event,
                Some(event) => {
                    show.event(&event)?;
                    if show.stdout_closed && !interrupted {
                        // Nobody reads the output any more (`| head`): stop the call.
                        interrupted = true;
                        call.cancel("the output was closed");
                    }
                }
                None => break CallEvent::Error(ClientError::Closed),
            },
            _ = interrupts.recv() => {
                if interrupted {
                    show.clear();
                    eprintln!("weir: interrupted twice: exiting now; the call may still be running on the server");
                    // Dropping the client stops a spawned server too.
                    return Ok(Outcome::Canceled);
                }
                interrupted = true;
                call.cancel("interrupted (Ctrl-C)");
                show.status("cancelling… (Ctrl-C again to quit now)");
            }
        }
    };
    show.event(&last)?;
    show.clear();
    drop(call);
    client.close().await;
    Ok(match last {
        CallEvent::Result(result) if result.is_error => {
            eprintln!(
                "weir: {} reported an error{}; check its arguments with `{}`",
                args.tool,
                first_line(&result).map_or(String::new(), |line| format!(": {line}")),
                remote::tools_command(&args.server)
            );
            Outcome::Failed
        }
        CallEvent::Result(_) => Outcome::Completed,
        CallEvent::Error(error) => remote::report(&error, &args.server),
        _ => unreachable!("the loop ends on a terminal event"),
    })
}

/// The tool's arguments: `--json` as the base, `key=value` pairs over it.
fn arguments(json: Option<&str>, pairs: &[String]) -> anyhow::Result<Value> {
    let mut arguments = match json {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => object,
            Ok(_) => bail!("--json must be a JSON object, e.g. --json '{{\"count\": 3}}'"),
            Err(error) => bail!(
                "--json is not valid JSON ({error}); quote it for the shell, e.g. --json '{{\"count\": 3}}'"
            ),
        },
        None => Map::new(),
    };
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=').filter(|(key, _)| !key.is_empty()) else {
            bail!(
                "argument {pair:?} is not key=value; pass arguments as key=value pairs, e.g. count=3 name=demo"
            );
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        arguments.insert(key.to_owned(), value);
    }
    Ok(Value::Object(arguments))
}

fn first_line(result: &CallResult) -> Option<&str> {
    result.content.iter().find_map(|block| match block {
        Content::Text { text } => text.lines().next(),
        _ => None,
    })
}

/// Shows events as they come.
struct Show {
    format: OutputFormat,
    started: Instant,
    /// The progress bar, when stderr is a terminal (text output).
    bar: Option<ProgressBar>,
    /// Content blocks already printed from partial results.
    streamed: Vec<Content>,
    /// Stdout is a closed pipe: nothing more is printed.
    stdout_closed: bool,
}

impl Show {
    fn new(format: OutputFormat) -> Show {
        let bar = (format == OutputFormat::Text && std::io::stderr().is_terminal())
            .then(ProgressBar::new);
        Show {
            format,
            started: Instant::now(),
            bar,
            streamed: Vec::new(),
            stdout_closed: false,
        }
    }

    fn clear(&mut self) {
        if let Some(bar) = &mut self.bar {
            bar.clear();
        }
    }

    fn status(&mut self, status: &str) {
        if let Some(bar) = &mut self.bar {
            bar.status(status);
        }
    }

    fn event(&mut self, event: &CallEvent) -> anyhow::Result<()> {
        match self.format {
            OutputFormat::Jsonl => {
                let line = JsonLine {
                    kind: event_kind(event),
                    elapsed_ms: self.started.elapsed().as_millis() as u64,
                    fields: event_json(event),
                };
                let text = serde_json::to_string(&line)?;
                self.print(|out| Ok(writeln!(out, "{text}")?))
            }
            OutputFormat::Text => self.text(event),
        }
    }

    fn text(&mut self, event: &CallEvent) -> anyhow::Result<()> {
        match event {
            CallEvent::Progress {
                progress,
                total,
                message,
            } => {
                if let Some(bar) = &mut self.bar {
                    bar.update(*progress, *total, message.as_deref());
                }
            }
            CallEvent::Partial {
                content,
                structured,
                ..
            } => {
                // A program's stderr (weir's exec tools group it so) goes to
                // stderr.
                let group = structured.as_ref().and_then(|s| s.get("group"));
                if group.and_then(Value::as_str) == Some("stderr") {
                    self.clear();
                    let mut stderr = std::io::stderr().lock();
                    for block in content {
                        write_block(&mut stderr, block)?;
                    }
                    drop(stderr);
                    if let Some(bar) = &mut self.bar {
                        bar.draw();
                    }
                } else {
                    self.print(|out| {
                        for block in content {
                            write_block(out, block)?;
                        }
                        // Structured data is the output only when there is
                        // no content (else it describes the content).
                        if let (Some(structured), true) = (structured, content.is_empty()) {
                            writeln!(out, "{structured}")?;
                        }
                        Ok(())
                    })?;
                }
                self.streamed.extend(content.iter().cloned());
            }
            CallEvent::Log {
                level,
                logger,
                data,
            } => {
                self.clear();
                let data = match data {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let level = serde_json::to_value(level)?;
                let level = level.as_str().unwrap_or("log");
                match logger {
                    Some(logger) => eprintln!("[{level}] {logger}: {data}"),
                    None => eprintln!("[{level}] {data}"),
                }
                if let Some(bar) = &mut self.bar {
                    bar.draw();
                }
            }
            CallEvent::Task {
                task_id, status, ..
            } => {
                let status = format!("task {task_id} {}", status.as_str());
                if let Some(bar) = &mut self.bar {
                    bar.status(&status);
                }
            }
            CallEvent::Result(result) => {
                // The result repeats what partials showed: print only the rest.
                let already = result
                    .content
                    .iter()
                    .zip(&self.streamed)
                    .take_while(|(a, b)| a == b)
                    .count();
                let any_text = result
                    .content
                    .iter()
                    .any(|block| matches!(block, Content::Text { .. }));
                self.print(|out| {
                    for block in &result.content[already..] {
                        write_block(out, block)?;
                    }
                    if let (Some(structured), false) = (&result.structured, any_text) {
                        writeln!(out, "{}", serde_json::to_string_pretty(structured)?)?;
                    }
                    Ok(())
                })?;
            }
            CallEvent::Error(_) => {}
        }
        Ok(())
    }

    /// Writes to stdout with the bar out of the way. A closed pipe is not
    /// an error: it ends the output.
    fn print(
        &mut self,
        write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        if self.stdout_closed {
            return Ok(());
        }
        self.clear();
        let mut stdout = std::io::stdout().lock();
        let written = write(&mut stdout).and_then(|()| Ok(stdout.flush()?));
        if let Err(error) = written {
            let broken_pipe = error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe);
            if !broken_pipe {
                return Err(error);
            }
            self.stdout_closed = true;
        }
        if let Some(bar) = &mut self.bar {
            bar.draw();
        }
        Ok(())
    }
}

/// One content block for people, on its own line(s).
fn write_block(out: &mut impl Write, block: &Content) -> std::io::Result<()> {
    let text = match block {
        Content::Text { text } => text.clone(),
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
        } => format!("[resource {uri}]\n{text}"),
        Content::Resource { uri, .. } => format!("[resource {uri}]"),
        Content::ResourceLink { uri, name, .. } => format!("[link {name}] {uri}"),
    };
    if text.ends_with('\n') {
        write!(out, "{text}")
    } else {
        writeln!(out, "{text}")
    }
}

/// One line of `--output jsonl`: `type` and `elapsed_ms` first, then the
/// event's fields.
#[derive(serde::Serialize)]
struct JsonLine {
    #[serde(rename = "type")]
    kind: &'static str,
    elapsed_ms: u64,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

fn event_kind(event: &CallEvent) -> &'static str {
    match event {
        CallEvent::Progress { .. } => "progress",
        CallEvent::Partial { .. } => "partial",
        CallEvent::Log { .. } => "log",
        CallEvent::Task { .. } => "task",
        CallEvent::Result(_) => "result",
        CallEvent::Error(_) => "error",
    }
}

/// An event's fields (those present), for `--output jsonl`.
fn event_json(event: &CallEvent) -> Map<String, Value> {
    let fields = match event {
        CallEvent::Progress {
            progress,
            total,
            message,
        } => json!({ "progress": progress, "total": total, "message": message }),
        CallEvent::Partial {
            seq,
            content,
            structured,
        } => json!({ "seq": seq, "content": content, "structured": structured }),
        CallEvent::Log {
            level,
            logger,
            data,
        } => json!({ "level": level, "logger": logger, "data": data }),
        CallEvent::Task {
            task_id,
            status,
            message,
        } => json!({ "task_id": task_id, "status": status, "message": message }),
        CallEvent::Result(result) => json!({
            "is_error": result.is_error,
            "content": result.content,
            "structured": result.structured,
        }),
        CallEvent::Error(error) => json!({ "message": error.to_string() }),
    };
    let Value::Object(mut fields) = fields else {
        unreachable!("json! of an object literal")
    };
    fields.retain(|_, value| !value.is_null());
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_are_json_when_they_parse_else_strings() {
        let pairs: Vec<String> = [
            "count=3",
            "flag=true",
            "list=[1,2]",
            "name=demo",
            "quoted=\"7\"",
            "eq=a=b",
            "empty=",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            arguments(Some(r#"{"count": 1, "keep": null}"#), &pairs).unwrap(),
            json!({"count": 3, "keep": null, "flag": true, "list": [1, 2], "name": "demo", "quoted": "7", "eq": "a=b", "empty": ""})
        );
        let not_a_pair = arguments(None, &["count".into()]).unwrap_err().to_string();
        assert!(not_a_pair.contains("key=value"), "{not_a_pair}");
        assert!(arguments(Some("[1]"), &[]).is_err());
        assert!(
            arguments(Some("{oops"), &[])
                .unwrap_err()
                .to_string()
                .contains("quote it")
        );
    }

    #[test]
    fn jsonl_events_leave_out_what_is_absent() {
        let progress = CallEvent::Progress {
            progress: 1.0,
            total: None,
            message: None,
        };
        assert_eq!(
            Value::Object(event_json(&progress)),
            json!({"progress": 1.0})
        );
        let error = CallEvent::Error(ClientError::Canceled {
            reason: "Ctrl-C".into(),
        });
        let line = JsonLine {
            kind: event_kind(&error),
            elapsed_ms: 7,
            fields: event_json(&error),
        };
        assert_eq!(
            serde_json::to_string(&line).unwrap(),
            r#"{"type":"error","elapsed_ms":7,"message":"canceled: Ctrl-C"}"#
        );
    }
}
