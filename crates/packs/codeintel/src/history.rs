//! What git's history says about a repository's files: how often each
//! changed (churn) and which change together (co-change), from the last
//! commits only, read with the `git` command (safely: see `git.rs`).
//!
//! Churn and co-change are what `prepare_change` weighs a change's risk
//! with and names the files a change usually drags along; `explore` and
//! `get_architecture` show the hot spots.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::git::{self, GitDir};

/// Commits read at most: recent history is what predicts the next change,
/// and `git log` of a long history would dominate the index run.
pub(crate) const MAX_COMMITS: usize = 500;
/// A commit touching more files than this (a reformat, a vendoring, a
/// rename sweep) says nothing about which files belong together.
const MAX_FILES_PER_COMMIT: usize = 30;

/// One file's churn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Churn {
    /// Commits among the last [`MAX_COMMITS`] that changed it.
    pub(crate) commits: u64,
    /// The latest of them, in ms since the epoch.
    pub(crate) last_ms: i64,
}

/// The history the index keeps.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct History {
    /// Commits read.
    pub(crate) commits: u64,
    pub(crate) churn: BTreeMap<String, Churn>,
    /// Pairs of files (`a < b`) and the commits that changed both.
    pub(crate) cochange: BTreeMap<(String, String), u64>,
}

/// The last `max_commits` commits of the repository `git` (paths relative
/// to `root`, files outside it left out), or `None` when git fails or is
/// missing. git runs as [`crate::git`] runs it: nothing of the
/// repository's configuration gets to run.
pub(crate) fn read(git: &GitDir, root: &Path, max_commits: usize) -> Option<History> {
    git::log_names(git, root, max_commits).map(|log| parse(&log))
}

/// Parses `git log --name-only --format=%x1e%ct`: a record separator and
/// the commit time, then the commit's files, one a line.
pub(crate) fn parse(log: &str) -> History {
    let mut history = History::default();
    for record in log.split('\u{1e}').filter(|r| !r.trim().is_empty()) {
        let mut lines = record.lines();
        let time_ms = lines
            .next()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .unwrap_or(0)
            * 1000;
        let files: BTreeSet<&str> = lines.map(str::trim).filter(|l| !l.is_empty()).collect();
        history.commits += 1;
        for file in &files {
            let churn = history.churn.entry((*file).to_owned()).or_default();
            churn.commits += 1;
            churn.last_ms = churn.last_ms.max(time_ms);
        }
        if files.len() > MAX_FILES_PER_COMMIT {
            continue;
        }
        let files: Vec<&str> = files.into_iter().collect();
        for (i, a) in files.iter().enumerate() {
            for b in &files[i + 1..] {
                *history
                    .cochange
                    .entry(((*a).to_owned(), (*b).to_owned()))
                    .or_default() += 1;
            }
        }
    }
    history
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churn_and_pairs_from_a_log() {
        let log = "\u{1e}1700000300\n\na.rs\nb.rs\n\u{1e}1700000200\n\na.rs\nc.rs\nb.rs\n\u{1e}1700000100\n\nc.rs\n";
        let history = parse(log);
        assert_eq!(history.commits, 3);
        assert_eq!(
            history.churn["a.rs"],
            Churn {
                commits: 2,
                last_ms: 1_700_000_300_000
            }
        );
        assert_eq!(history.churn["c.rs"].commits, 2);
        let pairs: Vec<String> = history
            .cochange
            .iter()
            .map(|((a, b), n)| format!("{a}+{b}={n}"))
            .collect();
        assert_eq!(pairs, ["a.rs+b.rs=2", "a.rs+c.rs=1", "b.rs+c.rs=1"]);
    }
}
