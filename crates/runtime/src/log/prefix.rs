//! A run named by the start of its id, as people type it (`01a2b3c4`):
//! the one rule the command line and the dashboard share.

use super::{EventLog, LogError, RunFilter, RunSummary};
use weir_core::RunId;

/// The fewest characters a prefix must have: fewer would match most runs
/// (ids begin with the time), and a typo would hit some run by chance.
pub const MIN_RUN_PREFIX: usize = 4;

/// Candidates an ambiguous prefix names in its error.
const SHOWN_CANDIDATES: usize = 10;

/// Why [`find_run`] found no one run.
#[derive(Debug, thiserror::Error)]
pub enum FindRunError {
    /// Not the characters of a run id.
    #[error(transparent)]
    Invalid(#[from] weir_core::InvalidRunId),
    /// No whole id, and too short to be taken as a prefix.
    #[error(
        "no run {0}, and {0:?} is too short for the start of a run id: give at least {MIN_RUN_PREFIX} characters"
    )]
    TooShort(String),
    /// No run the caller may see has this id or starts with it.
    #[error("no run {0}")]
    NotFound(String),
    /// Several runs the caller may see start with it.
    #[error("{}", ambiguous(.prefix, .candidates))]
    Ambiguous {
        /// What was given.
        prefix: String,
        /// The runs it matches, newest first.
        candidates: Vec<RunSummary>,
    },
    /// The store failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

fn ambiguous(prefix: &str, candidates: &[RunSummary]) -> String {
    let mut shown: Vec<String> = candidates
        .iter()
        .take(SHOWN_CANDIDATES)
        .map(|run| format!("{} ({}, {})", run.run_id, run.tool, run.state))
        .collect();
    if candidates.len() > SHOWN_CANDIDATES {
        shown.push(format!("and {} more", candidates.len() - SHOWN_CANDIDATES));
    }
    format!(
        "{prefix} is the start of {} runs' ids: {}; give more characters",
        candidates.len(),
        shown.join(", ")
    )
}

/// The run whose id is `text`, else the one run whose id starts with it
/// (at least [`MIN_RUN_PREFIX`] characters), among those `sees` lets the
/// caller see. A whole id wins over a prefix; runs the caller may not see
/// are never matched nor named.
pub async fn find_run(
    log: &dyn EventLog,
    text: &str,
    sees: impl Fn(&RunSummary) -> bool,
) -> Result<RunSummary, FindRunError> {
    let id = RunId::parse(text)?;
    if let Some(run) = log.get_run(&id).await?.filter(|run| sees(run)) {
        return Ok(run);
    }
    if text.chars().count() < MIN_RUN_PREFIX {
        return Err(FindRunError::TooShort(text.to_owned()));
    }
    // The log has no index by prefix: every run is looked at, which
    // retention keeps bounded.
    let mut candidates: Vec<RunSummary> = log
        .list_runs(&RunFilter::default())
        .await?
        .into_iter()
        .filter(|run| run.run_id.as_str().starts_with(text) && sees(run))
        .collect();
    match candidates.len() {
        0 => Err(FindRunError::NotFound(text.to_owned())),
        1 => Ok(candidates.remove(0)),
        _ => Err(FindRunError::Ambiguous {
            prefix: text.to_owned(),
            candidates,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{MemoryLog, NewRun};

    async fn log_with(ids: &[&str]) -> MemoryLog {
        let log = MemoryLog::new();
        for (n, id) in ids.iter().enumerate() {
            log.create_run(NewRun {
                run_id: RunId::parse(id).unwrap(),
                tool: "t".into(),
                arguments: serde_json::Value::Null,
                node: "n".into(),
                ts: n as u64,
                owner: (n == 0).then(|| "alice".to_owned()),
                client: None,
                parent: None,
                resume_record: None,
            })
            .await
            .unwrap();
        }
        log
    }

    #[tokio::test]
    async fn a_unique_prefix_names_its_run_and_others_say_why_not() {
        let log = log_with(&["abcd1", "abce2", "ab"]).await;
        let all = |_: &RunSummary| true;
        let found = find_run(&log, "abcd", all).await.unwrap();
        assert_eq!(found.run_id.as_str(), "abcd1");
        // A whole id wins, however short.
        assert_eq!(
            find_run(&log, "ab", all).await.unwrap().run_id.as_str(),
            "ab"
        );
        let short = find_run(&log, "abc", all).await.unwrap_err();
        assert!(matches!(short, FindRunError::TooShort(_)), "{short}");
        let log = log_with(&["abcd1", "abcd2"]).await;
        let error = find_run(&log, "abcd", all).await.unwrap_err().to_string();
        assert!(
            error.contains("abcd2 (t, pending), abcd1 (t, pending)"),
            "{error}"
        );
        // Another's run is neither matched nor named.
        let mine = |run: &RunSummary| run.owner.is_none();
        assert_eq!(
            find_run(&log, "abcd", mine).await.unwrap().run_id.as_str(),
            "abcd2"
        );
        assert!(matches!(
            find_run(&log, "abcd1", mine).await.unwrap_err(),
            FindRunError::NotFound(_)
        ));
    }
}
