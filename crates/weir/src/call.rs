//! `weir call`: call a tool on an MCP server and show the call as it
//! happens. Text output ([`crate::call_text`]) puts what the tool streams
//! where it belongs, each byte once, and weir's own words (the run id, a
//! progress bar on a terminal, errors) on stderr; jsonl output puts every
//! event on stdout as one JSON line. Ctrl-C cancels the call on the server;
//! a second Ctrl-C exits at once.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use tokio::signal::unix::{SignalKind, signal};
use weir_client::{CallEvent, CallOptions, CallResult, ClientError, TaskMode};
use weir_core::Content;

use crate::call_text::TextView;
use crate::cli::{CallArgs, OutputFormat, ServerArgs};
use crate::exit::Outcome;
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
    let mut show = Show::new(args.output, &args.tool, &args.server);
    let mut interrupted = false;
    let last = loop {
        let redraw_at = show.redraw_at();
        let redraw = async {
            match redraw_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = call.next() => match event {
                Some(event) if event.is_terminal() => break event,
                Some(event) => {
                    show.event(&event)?;
                    if show.stdout_closed() && !interrupted {
                        // Nobody reads the output any more (`| head`): stop the call.
                        interrupted = true;
                        call.cancel("the output was closed");
                    }
                }
                None => break CallEvent::Error(ClientError::Closed),
            },
            () = redraw => show.redraw(),
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
        CallEvent::Result(result) => outcome(&result, &args, show.is_text()),
        CallEvent::Error(error) => remote::report(&error, &args.server),
        _ => unreachable!("the loop ends on a terminal event"),
    })
}

/// How a result ends the command: canceled when a weir server says the run
/// was (whoever cancelled it), failed when it is a tool error. The text
/// view said why; with JSON lines, one line on stderr does.
fn outcome(result: &CallResult, args: &CallArgs, text: bool) -> Outcome {
    let canceled = result
        .run
        .as_ref()
        .is_some_and(|run| run.state == "canceled");
    if canceled {
        return Outcome::Canceled;
    }
    if !result.is_error {
        return Outcome::Completed;
    }
    if !text {
        let why = first_line(result).map_or(String::new(), |line| format!(": {line}"));
        match &result.run {
            Some(_) => eprintln!("weir: {} failed{why}", args.tool),
            None => eprintln!(
                "weir: {} returned an error{why} (its arguments: `{}`)",
                args.tool,
                remote::tools_command(&args.server)
            ),
        }
    }
    Outcome::Failed
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

/// Shows events as they come: for a person, or as JSON lines.
enum Show {
    Text(Box<TextView>),
    Jsonl {
        started: Instant,
        stdout_closed: bool,
    },
}

impl Show {
    fn new(format: OutputFormat, tool: &str, server: &ServerArgs) -> Show {
        match format {
            OutputFormat::Text => Show::Text(Box::new(TextView::new(
                tool,
                tail_command(server),
                remote::tools_command(server),
            ))),
            OutputFormat::Jsonl => Show::Jsonl {
                started: Instant::now(),
                stdout_closed: false,
            },
        }
    }

    fn is_text(&self) -> bool {
        matches!(self, Show::Text(_))
    }

    fn stdout_closed(&self) -> bool {
        match self {
            Show::Text(view) => view.stdout_closed,
            Show::Jsonl { stdout_closed, .. } => *stdout_closed,
        }
    }

    fn redraw_at(&self) -> Option<tokio::time::Instant> {
        match self {
            Show::Text(view) => view.redraw_at(),
            Show::Jsonl { .. } => None,
        }
    }

    fn redraw(&mut self) {
        if let Show::Text(view) = self {
            view.redraw();
        }
    }

    fn clear(&mut self) {
        if let Show::Text(view) = self {
            view.clear();
        }
    }

    fn status(&mut self, status: &str) {
        if let Show::Text(view) = self {
            view.status(status);
        }
    }

    fn event(&mut self, event: &CallEvent) -> anyhow::Result<()> {
        match self {
            Show::Text(view) => Ok(view.event(event)?),
            Show::Jsonl {
                started,
                stdout_closed,
            } => {
                if *stdout_closed {
                    return Ok(());
                }
                let line = JsonLine {
                    kind: event_kind(event),
                    elapsed_ms: started.elapsed().as_millis() as u64,
                    fields: event_json(event),
                };
                let text = serde_json::to_string(&line)? + "\n";
                let mut stdout = std::io::stdout().lock();
                match stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush())
                {
                    Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                        *stdout_closed = true;
                        Ok(())
                    }
                    written => Ok(written?),
                }
            }
        }
    }
}

/// How `weir runs tail` reaches this server's runs, without the id.
fn tail_command(server: &ServerArgs) -> String {
    match &server.target.url {
        Some(url) => format!("weir runs tail --url {url}"),
        // A server spawned over stdio keeps its runs in the data directory.
        None => "weir runs tail".to_owned(),
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
        CallEvent::Run { .. } => "run",
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
        CallEvent::Run { run_id } => json!({ "run_id": run_id }),
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
            "run": result.run,
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
