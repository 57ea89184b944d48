//! What every store shares, so that stores in other crates keep the same
//! rules to the letter: artifact names, digests, which run an append is
//! for, and byte ranges.

use std::ops::Range;

use weir_core::{EventKind, RunEvent, RunId};

use super::{LogError, NewRun};

/// Checks an artifact name: it becomes part of a URI and maybe a file name.
pub fn check_artifact_name(name: &str) -> Result<(), LogError> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(LogError::InvalidArtifactName(name.to_owned()))
    }
}

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(data))
}

/// The run an append is for (the store's `LogTail` checks the rest agree).
pub fn append_target(events: &[RunEvent]) -> Option<&RunId> {
    events.first().map(|event| &event.run_id)
}

/// The run that appending `events` to an unknown run creates: only a log
/// that starts with `started` may create its run. It has no owner and no
/// parent, and nothing to resume: a run gets those only when it is registered
/// ([`EventLog::create_run`]).
///
/// [`EventLog::create_run`]: super::EventLog::create_run
pub fn run_started_by(events: &[RunEvent]) -> Result<NewRun, LogError> {
    let first = &events[0];
    let EventKind::Started(started) = &first.kind else {
        return Err(LogError::NotStarted(first.run_id.clone()));
    };
    Ok(NewRun {
        run_id: first.run_id.clone(),
        tool: started.tool.clone(),
        arguments: started.arguments.clone(),
        node: started.node.clone(),
        ts: first.ts,
        owner: None,
        client: None,
        parent: None,
        resume_record: None,
    })
}

/// Checks that `events` may begin `run` ([`EventLog::start_run`]): they
/// are its events, and the first is `started` at seq 0.
///
/// [`EventLog::start_run`]: super::EventLog::start_run
pub fn check_start(run: &NewRun, events: &[RunEvent]) -> Result<(), LogError> {
    let starts = events.first().is_some_and(|first| {
        first.run_id == run.run_id && first.seq == 0 && matches!(first.kind, EventKind::Started(_))
    });
    if starts {
        Ok(())
    } else {
        Err(LogError::NotStarted(run.run_id.clone()))
    }
}

/// Clamps a byte range to a length of `len`.
pub fn clamp_range(range: Range<u64>, len: u64) -> Range<usize> {
    let start = range.start.min(len) as usize;
    let end = range.end.clamp(range.start.min(len), len) as usize;
    start..end
}
