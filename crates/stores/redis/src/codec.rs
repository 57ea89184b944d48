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

/// The stream entry id of the entry whose last event is `seq`: ids start
/// at `1-0`, so seq 0 is `1-0`. `None` past the largest id there is.
///
/// An entry holds a batch's events in order (runs stored before
/// 2026-11-27 hold one each), and its id is its last event's, so
/// `XRANGE` from `entry_id(from)` starts with the entry that holds `from`.
pub(crate) fn entry_id(seq: Seq) -> Option<String> {
    seq.checked_add(1).map(|ms| format!("{ms}-0"))
}

/// The seq of stream entry id `<seq + 1>-0`.
fn entry_seq(id: &str) -> Option<Seq> {
    id.split_once('-')
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
        .and_then(|ms| ms.checked_sub(1))
}

/// The id of the first entry after entry `id`: every id weir writes is
/// `<n>-0`, so the next is at least `<n + 1>-0`.
pub(crate) fn next_entry_id(id: &str) -> Option<String> {
    entry_seq(id)
        .and_then(|seq| seq.checked_add(1))
        .and_then(entry_id)
}

/// Most events in one stream entry.
///
/// Each `XADD` costs Redis's one thread about a microsecond beyond its
/// bytes, so an append stores its batch as a few entries rather than one
/// per event; a few, not one, so that a read from the middle of a batch
/// (a resume) fetches little it does not need.
pub(crate) const ENTRY_EVENTS: usize = 64;

/// About the most bytes of events in one entry (one event may be larger:
/// then it is an entry of its own).
const ENTRY_BYTES: usize = 32 * 1024;

/// One stream entry of an append: its id (its last event's) and its
/// events, one line each, as announcements carry them.
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) lines: Vec<u8>,
}

/// A batch's stream entries: its events, encoded once, in entries of up
/// to [`ENTRY_EVENTS`] events and about [`ENTRY_BYTES`] bytes. The append
/// script stores each entry's lines as they are and announces them as
/// they are, so Redis does no work per event.
pub(crate) fn entries(events: &[RunEvent]) -> Vec<Entry> {
    use std::io::Write;
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    let mut in_entry = 0;
    for (i, event) in events.iter().enumerate() {
        let id = event.seq.saturating_add(1);
        let _ = write!(lines, "{id}-0 {} ", event.ts);
        serde_json::to_writer(&mut lines, &event.kind).expect("events serialize");
        lines.push(b'\n');
        in_entry += 1;
        let last = i + 1 == events.len();
        if last || in_entry == ENTRY_EVENTS || lines.len() >= ENTRY_BYTES {
            entries.push(Entry {
                id: format!("{id}-0"),
                lines: std::mem::take(&mut lines),
            });
            in_entry = 0;
        }
    }
    entries
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

/// The events of a stream entry from seq `from` on, at most `room` of
/// them, onto `found`; only those are decoded. An entry is either a batch
/// (field `e`: its events' lines) or, as runs stored before 2026-11-27
/// are, one event (fields `ts` and `k`, its seq in the entry id).
pub(crate) fn entry_events(
    run_id: &RunId,
    entry: &StreamId,
    from: Seq,
    room: usize,
    found: &mut Vec<RunEvent>,
) -> Result<(), LogError> {
    const DOING: &str = "reading events";
    let bad = |what: String| corrupt(DOING, format!("run {run_id} has {what}"));
    let Some(last) = entry_seq(&entry.id) else {
        return Err(bad(format!("an entry {:?}", entry.id)));
    };
    let Some(lines) = entry.get::<Vec<u8>>("e") else {
        if room > 0 && last >= from {
            found.push(single_event(run_id, last, entry)?);
        }
        return Ok(());
    };
    let wanted = found.len() + room;
    for line in lines.split(|byte| *byte == b'\n') {
        if found.len() == wanted {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let (id, rest) = split_once(line, b' ')
            .ok_or_else(|| bad(format!("a malformed event in entry {}", entry.id)))?;
        let seq = std::str::from_utf8(id)
            .ok()
            .and_then(entry_seq)
            .ok_or_else(|| bad(format!("a malformed event in entry {}", entry.id)))?;
        if seq < from {
            continue;
        }
        let event = event_line(run_id, seq, rest)
            .map_err(|problem| bad(format!("event {seq} {problem}")))?;
        found.push(event);
    }
    Ok(())
}

/// An event stored one per entry (runs stored before 2026-11-27).
fn single_event(run_id: &RunId, seq: Seq, entry: &StreamId) -> Result<RunEvent, LogError> {
    const DOING: &str = "reading events";
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

/// An event from the rest of its line, `<ts> <body>`; the error says what
/// is wrong with it.
fn event_line(run_id: &RunId, seq: Seq, rest: &[u8]) -> Result<RunEvent, String> {
    let (ts, body) = split_once(rest, b' ').ok_or("has no body")?;
    let ts = std::str::from_utf8(ts)
        .ok()
        .and_then(|ts| ts.parse().ok())
        .ok_or("has no valid ts")?;
    let kind =
        serde_json::from_slice(body).map_err(|error| format!("is not valid JSON: {error}"))?;
    Ok(RunEvent {
        run_id: run_id.clone(),
        seq,
        ts,
        kind,
    })
}

fn split_once(bytes: &[u8], at: u8) -> Option<(&[u8], &[u8])> {
    let i = bytes.iter().position(|byte| *byte == at)?;
    Some((&bytes[..i], &bytes[i + 1..]))
}

/// An announcement's writer and run, and the lines of its events, split
/// without decoding them: the listener skips its own and those of runs
/// nobody here follows. Bytes throughout: the events' JSON is checked as
/// it is decoded, so the whole payload is not checked for UTF-8 first.
pub(crate) fn announced_run(payload: &[u8]) -> Option<(&[u8], RunId, &[u8])> {
    let (origin, rest) = split_once(payload, b'\n')?;
    let (run, lines) = split_once(rest, b'\n')?;
    let run_id = RunId::parse(std::str::from_utf8(run).ok()?).ok()?;
    Some((origin, run_id, lines))
}

/// An announcement's events from its lines ([`announced_run`]); `None`
/// when they are not events (the channel is public to anyone who can
/// reach Redis).
pub(crate) fn parse_announcement(run_id: &RunId, lines: &[u8]) -> Option<Vec<RunEvent>> {
    let events = lines
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (id, rest) = split_once(line, b' ')?;
            let seq = entry_seq(std::str::from_utf8(id).ok()?)?;
            event_line(run_id, seq, rest).ok()
        })
        .collect::<Option<Vec<_>>>()?;
    (!events.is_empty()).then_some(events)
}
