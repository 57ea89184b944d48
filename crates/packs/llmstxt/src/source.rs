//! Where a repository comes from: a directory on this machine, or a git URL
//! cloned shallowly (`git clone --depth 1`) into a directory of the run's
//! own, removed when the run ends — or when a cancel drops the run, since
//! the directory and the `git` process both go with their owner.

use std::path::PathBuf;
use std::time::Duration;

use tempfile::TempDir;

/// Longest a clone may take.
const CLONE_TIMEOUT: Duration = Duration::from_secs(300);

/// A repository to describe, ready to read.
pub(crate) struct Checkout {
    /// Its root.
    pub(crate) root: PathBuf,
    /// A name to fall back on: the directory's or the repository's.
    pub(crate) dir_name: String,
    /// Whether it was cloned.
    pub(crate) cloned: bool,
    /// The clone's directory, removed on drop.
    _clone: Option<TempDir>,
}

/// Why a source could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error("source is empty: give a directory or a git URL")]
    Empty,
    #[error("source {0:?} starts with '-': give a directory or a git URL")]
    Dash(String),
    #[error(
        "{0} does not exist or is not a directory (a local source is the root of a repository; a remote one a git URL such as https://…/repo.git)"
    )]
    NotADirectory(PathBuf),
    #[error("could not make a directory for the clone: {0}")]
    TempDir(std::io::Error),
    #[error("could not run git to clone {url}: {reason} (is git installed?)")]
    NoGit { url: String, reason: String },
    #[error("git clone of {url} failed: {stderr}")]
    CloneFailed { url: String, stderr: String },
    #[error("git clone of {url} took longer than {} s", CLONE_TIMEOUT.as_secs())]
    CloneTimedOut { url: String },
}

/// Whether `source` names a remote repository rather than a directory.
pub(crate) fn is_git_url(source: &str) -> bool {
    ["https://", "http://", "ssh://", "git://", "file://"]
        .iter()
        .any(|scheme| source.starts_with(scheme))
        || (source.starts_with("git@") && source.contains(':'))
}

/// The last path segment of a URL or path, without `.git`.
fn last_segment(source: &str) -> String {
    let trimmed = source.trim_end_matches('/');
    let last = trimmed.rsplit(['/', ':']).next().unwrap_or(trimmed);
    let last = last.strip_suffix(".git").unwrap_or(last);
    if last.is_empty() {
        "project".into()
    } else {
        last.into()
    }
}

/// Opens `source`: checks a directory, or clones a URL.
pub(crate) async fn open(source: &str) -> Result<Checkout, SourceError> {
    let source = source.trim();
    if source.is_empty() {
        return Err(SourceError::Empty);
    }
    if source.starts_with('-') {
        return Err(SourceError::Dash(source.into()));
    }
    if !is_git_url(source) {
        let root = PathBuf::from(source);
        if !root.is_dir() {
            return Err(SourceError::NotADirectory(root));
        }
        let root = root.canonicalize().unwrap_or(root);
        let dir_name = root.file_name().map_or_else(
            || "project".into(),
            |name| name.to_string_lossy().into_owned(),
        );
        return Ok(Checkout {
            root,
            dir_name,
            cloned: false,
            _clone: None,
        });
    }
    let dir = tempfile::Builder::new()
        .prefix("weir-llmstxt-")
        .tempdir()
        .map_err(SourceError::TempDir)?;
    let root = dir.path().join("repo");
    let child = tokio::process::Command::new("git")
        .args([
            "clone",
            "--depth",
            "1",
            "--single-branch",
            "--no-tags",
            "--quiet",
            "--",
        ])
        .arg(source)
        .arg(&root)
        // Never wait on a password prompt: there is nobody to answer it.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| SourceError::NoGit {
            url: source.into(),
            reason: error.to_string(),
        })?;
    let output = tokio::time::timeout(CLONE_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| SourceError::CloneTimedOut { url: source.into() })?
        .map_err(|error| SourceError::NoGit {
            url: source.into(),
            reason: error.to_string(),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(SourceError::CloneFailed {
            url: source.into(),
            stderr: stderr.trim().chars().take(500).collect(),
        });
    }
    Ok(Checkout {
        root,
        dir_name: last_segment(source),
        cloned: true,
        _clone: Some(dir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart() {
        for url in [
            "https://example.invalid/a/b.git",
            "file:///tmp/x",
            "git@host:me/repo.git",
            "ssh://h/r",
        ] {
            assert!(is_git_url(url), "{url}");
        }
        for path in [".", "/srv/repo", "repo.git", "C:/x"] {
            assert!(!is_git_url(path), "{path}");
        }
        assert_eq!(last_segment("https://example.invalid/me/tool.git/"), "tool");
        assert_eq!(last_segment("git@host:tool.git"), "tool");
    }

    #[tokio::test]
    async fn bad_sources_say_what_to_give() {
        let missing = open("/nonexistent/weir-llmstxt")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(missing.contains("not a directory"), "{missing}");
        assert!(matches!(
            open("--upload-pack=x").await,
            Err(SourceError::Dash(_))
        ));
        let failed = open("file:///nonexistent/weir-llmstxt.git")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            failed.contains("git clone of file:///nonexistent"),
            "{failed}"
        );
    }
}
