//! How runs and events are written as Redis values, and read back: summary
//! hashes, stream entries and the announcements of appends (which the
//! append script writes). Redis entries stay inside this crate (one
//! function per direction).

use std::collections::HashMap;

use redis::streams::StreamId;
use weir_core::{EventKind, RunEvent, RunId, RunState, Seq};
use weir_runtime::LogError;
use weir_runtime::log::RunSummary;

/// How the message of an error that the connection, not the request,
/// caused begins: such an operation is tried again until Redis is back
/// (within [`crate::OUTAGE`]).
pub(crate) const UNREACHABLE: &str = "Redis is unreachable";

/// A storage error while `doing`.
pub(crate) fn failed(doing: &'static str) -> impl Fn(redis::RedisError) -> LogError {
    move |error| {
        let message = if transient(&error) {
            format!("{UNREACHABLE} ({error}); weir reconnects with backoff")
        } else {
            error.to_string()
        };
        LogError::Storage { doing, message }
    }
}

/// Whether `error` says the connection failed (dropped, refused, timed
/// out, Redis still loading its data after a restart) rather than that
/// the request was wrong: the request may succeed once Redis is back.
fn transient(error: &redis::RedisError) -> bool {
    use redis::RetryMethod;
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || matches!(
            error.retry_method(),
            RetryMethod::Reconnect
                | RetryMethod::ReconnectFromInitialConnections
                | RetryMethod::WaitAndRetry
        )
}

/// Whether `error` is one [`failed`] marked as the connection's.
pub(crate) fn is_unreachable(error: &LogError) -> bool {
    matches!(error, LogError::Storage { message, .. } if message.starts_with(UNREACHABLE))
}

fn corrupt(doing: &'static str, what: String) -> LogError {
    LogError::Storage {
        doing,
        message: what,
    }
}

/// A run state's stored name.
pub(crate) fn state_name(state: RunState) -> &'static str {
    state.as_str()
}

/// A run state from its stored name.
pub(crate) fn parse_state(name: &str) -> Option<RunState> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// The stream entry id of `seq`: ids start at `1-0`, so seq 0 is `1-0`.
/// `None` past the largest id there is.
pub(crate) fn entry_id(seq: Seq) -> Option<String> {
    seq.checked_add(1).map(|ms| format!("{ms}-0"))
}

/// The seq of stream entry id `<seq + 1>-0`.
fn entry_seq(id: &str) -> Option<Seq> {
    id.split_once('-')
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
        .and_then(|ms| ms.checked_sub(1))
}

/// A run's summary from its hash (`None` when the hash is empty: no run).
pub(crate) fn summary(
    run_id: &RunId,
    hash: HashMap<String, String>,
) -> Result<Option<RunSummary>, LogError> {
    const DOING: &str = "reading a run";
    if hash.is_empty() {
        return Ok(None);
    }
    let bad = |field: &str| corrupt(DOING, format!("run {run_id} has no valid `{field}`"));
    let text = |field: &str| hash.get(field).cloned().ok_or_else(|| bad(field));
    let number = |field: &str| {
        hash.get(field)
            .and_then(|value| value.parse::<u64>().ok())
            .ok_or_else(|| bad(field))
    };
    let arguments = serde_json::from_str(&text("arguments")?).map_err(|_| bad("arguments"))?;
    Ok(Some(RunSummary {
        run_id: run_id.clone(),
        tool: text("tool")?,
        arguments,
        node: text("node")?,
        state: parse_state(&text("state")?).ok_or_else(|| bad("state"))?,
        events: number("events")?,
        created_ts: number("created_ts")?,
        updated_ts: number("updated_ts")?,
        finished_ts: hash
            .contains_key("finished_ts")
            .then(|| number("finished_ts"))
            .transpose()?,
        owner: hash.get("owner").cloned(),
        client: hash.get("client").cloned(),
        parent: hash
            .get("parent")
            .map(|parent| RunId::parse(parent).map_err(|_| bad("parent")))
            .transpose()?,
    }))
}

/// An event from its stream entry.
pub(crate) fn event(run_id: &RunId, entry: &StreamId) -> Result<RunEvent, LogError> {
    const DOING: &str = "reading events";
    let seq = entry_seq(&entry.id)
        .ok_or_else(|| corrupt(DOING, format!("run {run_id} has an entry {:?}", entry.id)))?;
    let ts: u64 = entry
        .get("ts")
        .ok_or_else(|| corrupt(DOING, format!("event {seq} of run {run_id} has no ts")))?;
    let body: String = entry
        .get("k")
        .ok_or_else(|| corrupt(DOING, format!("event {seq} of run {run_id} has no body")))?;
    let kind: EventKind = serde_json::from_str(&body).map_err(|error| {
        corrupt(
            DOING,
            format!("event {seq} of run {run_id} is not valid JSON: {error}"),
        )
    })?;
    Ok(RunEvent {
        run_id: run_id.clone(),
        seq,
        ts,
        kind,
    })
}

/// An event's stored body: its kind as JSON (one line: JSON escapes
/// newlines).
pub(crate) fn body(event: &RunEvent) -> String {
    serde_json::to_string(&event.kind).expect("events serialize")
}

/// The announcement of an append (the append script writes the same when
/// the writer sends none): the writing handle's name, the run, then one
/// line per event, `<entry id> <ts> <body>`.
pub(crate) fn announcement(origin: &str, events: &[RunEvent], bodies: &[String]) -> String {
    use std::fmt::Write;
    let size = bodies.iter().map(|body| body.len() + 44).sum::<usize>();
    let mut text = String::with_capacity(origin.len() + 40 + size);
    let _ = writeln!(text, "{origin}\n{}", events[0].run_id);
    for (event, body) in events.iter().zip(bodies) {
        let id = event.seq.saturating_add(1);
        let _ = writeln!(text, "{id}-0 {} {body}", event.ts);
    }
    text
}

/// An announcement's writer and run, read without decoding its events:
/// the listener skips its own and those of runs nobody here follows.
pub(crate) fn announced_run(text: &str) -> Option<(&str, RunId)> {
    let mut lines = text.lines();
    let origin = lines.next()?;
    let run_id = RunId::parse(lines.next()?).ok()?;
    Some((origin, run_id))
}

/// An announcement's events; `None` when it is not one (the channel is
/// public to anyone who can reach Redis).
pub(crate) fn parse_announcement(text: &str) -> Option<Vec<RunEvent>> {
    let mut lines = text.lines();
    let _origin = lines.next()?;
    let run_id = RunId::parse(lines.next()?).ok()?;
    let events = lines
        .map(|line| {
            let (id, rest) = line.split_once(' ')?;
            let (ts, body) = rest.split_once(' ')?;
            Some(RunEvent {
                run_id: run_id.clone(),
                seq: entry_seq(id)?,
                ts: ts.parse().ok()?,
                kind: serde_json::from_str(body).ok()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    (!events.is_empty()).then_some(events)
}
