//! Where a repository comes from: a directory inside one of the server's
//! roots, or — only where the operator allows it — an `https://` URL of a
//! host the operator named, cloned shallowly into a directory of the run's
//! own, removed when the run ends (or when a cancel drops the run, since
//! the directory and the `git` process both go with their owner).
//!
//! The rule for URLs is small on purpose: the scheme is `https`, the host
//! is exactly one of `weir serve --llmstxt-clone-host HOST` (a DNS name,
//! never an IP address or `localhost`), no user info, no port but 443.
//! Anything else a caller sends — `file://`, `ssh://`, `git://`, `http://`,
//! `git@host:path`, another host — is refused before any process starts
//! or any connection is made. `git` runs with a fixed configuration: its
//! environment cleared (but `PATH`, an empty `HOME` and `LANG`), no system
//! or global config, only the https protocol, no redirects, no hooks, no
//! fsmonitor, no credential helper, no submodules, symlinks checked out as
//! plain files, a time limit and a size limit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::AsyncReadExt as _;
use weir_runtime::{Roots, RootsError};

/// Which URLs may be cloned, and how.
#[derive(Clone, Debug)]
pub struct CloneConfig {
    /// Hosts whose `https://` URLs may be cloned, lowercase. Empty: none.
    pub hosts: Vec<String>,
    /// The `git` program.
    pub git: PathBuf,
    /// Longest a clone may take.
    pub timeout: Duration,
    /// Most bytes a clone may write to disk.
    pub max_bytes: u64,
}

impl Default for CloneConfig {
    /// No host: nothing is cloned. `git` from `PATH`, 300 s, 512 MiB.
    fn default() -> CloneConfig {
        CloneConfig {
            hosts: Vec::new(),
            git: PathBuf::from("git"),
            timeout: Duration::from_secs(300),
            max_bytes: 512 << 20,
        }
    }
}

/// Why a clone host given by the operator cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "--llmstxt-clone-host {host:?}: {reason}; give a DNS host name such as github.com, exactly as it appears in https:// URLs"
)]
pub struct CloneHostError {
    host: String,
    reason: &'static str,
}

impl CloneConfig {
    /// Allows `https://` clones from each of `hosts` (DNS names; an IP
    /// address, `localhost`, a port or a scheme is refused).
    pub fn allow_hosts<S: AsRef<str>>(
        mut self,
        hosts: impl IntoIterator<Item = S>,
    ) -> Result<CloneConfig, CloneHostError> {
        for host in hosts {
            let host = host.as_ref().trim().to_ascii_lowercase();
            let bad = |reason| CloneHostError {
                host: host.clone(),
                reason,
            };
            if host.is_empty() {
                return Err(bad("it is empty"));
            }
            if !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
                || host.starts_with(['-', '.'])
                || host.ends_with(['-', '.'])
            {
                return Err(bad(
                    "a host name has only letters, digits, '-' and '.' (no scheme, port or path)",
                ));
            }
            if host.parse::<std::net::IpAddr>().is_ok()
                || host
                    .split('.')
                    .all(|label| label.chars().all(|c| c.is_ascii_digit()))
            {
                return Err(bad("an IP address is not accepted"));
            }
            if host == "localhost" || host.ends_with(".localhost") {
                return Err(bad("localhost is not accepted"));
            }
            if !self.hosts.contains(&host) {
                self.hosts.push(host);
            }
        }
        Ok(self)
    }
}

/// A repository to describe, ready to read.
pub(crate) struct Checkout {
    /// Its root, canonical: files are read beneath it.
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
    #[error("{0}")]
    Roots(#[from] RootsError),
    #[error(
        "{0} is not a directory (a local source is the root of a repository, inside the server's roots)"
    )]
    NotADirectory(PathBuf),
    #[error(
        "{url:?} is not cloned: {why}. This server clones only https:// URLs of the hosts its operator allows with `weir serve --llmstxt-clone-host HOST`{allowed}; otherwise give a directory inside the server's roots"
    )]
    NotAllowed {
        url: String,
        why: &'static str,
        allowed: String,
    },
    #[error("could not make a directory for the clone: {0}")]
    TempDir(std::io::Error),
    #[error("could not run git to clone {url}: {reason} (is git installed?)")]
    NoGit { url: String, reason: String },
    #[error("git clone of {url} failed: {stderr}")]
    CloneFailed { url: String, stderr: String },
    #[error("git clone of {url} took longer than {} s", limit.as_secs())]
    CloneTimedOut { url: String, limit: Duration },
    #[error("git clone of {url} wrote more than {limit} bytes; it was stopped")]
    CloneTooLarge { url: String, limit: u64 },
}

/// Whether `source` names a remote repository (any URL, or git's
/// `user@host:path` form) rather than a directory.
pub(crate) fn is_git_url(source: &str) -> bool {
    if source.contains("://") {
        return true;
    }
    // git's scp-like form: `host:path` or `user@host:path`, with no slash
    // before the colon.
    match source.split_once(':') {
        Some((before, _)) => !before.is_empty() && !before.contains('/'),
        None => false,
    }
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

/// `url`, checked against the clone rule: `Err(why)` when it may not be
/// cloned.
fn allowed(url: &str, config: &CloneConfig) -> Result<(), &'static str> {
    if !url.contains("://") {
        return Err("git's host:path form is ssh, and ssh is never used");
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| "it is not a valid URL")?;
    if parsed.scheme() != "https" {
        return Err("only https:// URLs are cloned");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a URL with user info is not cloned");
    }
    if parsed.port().is_some() {
        return Err("a URL with a port is not cloned");
    }
    // `domain` is `None` for an IP address.
    let Some(host) = parsed.domain() else {
        return Err("its host is an IP address");
    };
    if config.hosts.iter().any(|allowed| allowed == host) {
        Ok(())
    } else if config.hosts.is_empty() {
        Err("this server allows no clone host")
    } else {
        Err("its host is not one the operator allows")
    }
}

/// Opens `source`: resolves a directory inside `roots`, or clones a URL
/// that `clone` allows.
pub(crate) async fn open(
    source: &str,
    roots: &Roots,
    clone: &CloneConfig,
) -> Result<Checkout, SourceError> {
    let source = source.trim();
    if source.is_empty() {
        return Err(SourceError::Empty);
    }
    if source.starts_with('-') {
        return Err(SourceError::Dash(source.into()));
    }
    if !is_git_url(source) {
        let root = roots.resolve(source)?;
        if !root.is_dir() {
            return Err(SourceError::NotADirectory(root));
        }
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
    allowed(source, clone).map_err(|why| SourceError::NotAllowed {
        url: source.into(),
        why,
        allowed: if clone.hosts.is_empty() {
            " (it allows none)".into()
        } else {
            format!(" (it allows {})", clone.hosts.join(", "))
        },
    })?;
    let dir = tempfile::Builder::new()
        .prefix("weir-llmstxt-")
        .tempdir()
        .map_err(SourceError::TempDir)?;
    let home = dir.path().join("home");
    std::fs::create_dir(&home).map_err(SourceError::TempDir)?;
    let root = dir.path().join("repo");
    clone_into(source, &root, &home, clone).await?;
    let root = root.canonicalize().map_err(SourceError::TempDir)?;
    Ok(Checkout {
        root,
        dir_name: last_segment(source),
        cloned: true,
        _clone: Some(dir),
    })
}

/// The fixed configuration every clone runs with: only https, no
/// redirects (a redirect could lead to an address the operator did not
/// name), nothing of the repository's or the user's run.
const GIT_CONFIG: &[&str] = &[
    "protocol.allow=never",
    "protocol.https.allow=always",
    "http.followRedirects=false",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.symlinks=false",
    "core.askPass=",
    "credential.helper=",
    "submodule.recurse=false",
    "transfer.fsckObjects=true",
];

/// The command that clones `url` into `root`.
fn clone_command(
    url: &str,
    root: &Path,
    home: &Path,
    config: &CloneConfig,
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(&config.git);
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
        .env("HOME", home)
        .env("LANG", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        // Never wait on a password prompt: there is nobody to answer it.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", "https");
    for setting in GIT_CONFIG {
        command.args(["-c", setting]);
    }
    command
        .args([
            "clone",
            "--depth",
            "1",
            "--single-branch",
            "--no-tags",
            "--no-recurse-submodules",
            "--quiet",
            "--",
        ])
        .arg(url)
        .arg(root)
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Clones `url` into `root` within the time and size limits.
async fn clone_into(
    url: &str,
    root: &Path,
    home: &Path,
    config: &CloneConfig,
) -> Result<(), SourceError> {
    let mut child = clone_command(url, root, home, config)
        .spawn()
        .map_err(|error| SourceError::NoGit {
            url: url.into(),
            reason: error.to_string(),
        })?;
    // git's message: its start only.
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let message = tokio::spawn(async move {
        let mut text = Vec::new();
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut text).await;
        text
    });
    let deadline = tokio::time::Instant::now() + config.timeout;
    let mut measure = tokio::time::interval(Duration::from_millis(500));
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.map_err(|error| SourceError::NoGit {
                url: url.into(),
                reason: error.to_string(),
            })?,
            _ = tokio::time::sleep_until(deadline) => {
                let _ = child.kill().await;
                return Err(SourceError::CloneTimedOut { url: url.into(), limit: config.timeout });
            }
            _ = measure.tick() => {
                let dir = root.to_owned();
                let used = tokio::task::spawn_blocking(move || disk_usage(&dir)).await.unwrap_or(0);
                if used > config.max_bytes {
                    let _ = child.kill().await;
                    return Err(SourceError::CloneTooLarge { url: url.into(), limit: config.max_bytes });
                }
            }
        }
    };
    if !status.success() {
        let stderr = message.await.unwrap_or_default();
        return Err(SourceError::CloneFailed {
            url: url.into(),
            stderr: String::from_utf8_lossy(&stderr)
                .trim()
                .chars()
                .take(500)
                .collect(),
        });
    }
    Ok(())
}

/// Bytes of the files under `dir` (symlinks not followed).
fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> CloneConfig {
        CloneConfig::default().allow_hosts(names).unwrap()
    }

    #[test]
    fn urls_and_paths_are_told_apart() {
        for url in [
            "https://example.invalid/a/b.git",
            "file:///tmp/x",
            "git@host:me/repo.git",
            "host:repo",
            "ssh://h/r",
            "ext::sh -c x",
        ] {
            assert!(is_git_url(url), "{url}");
        }
        for path in [".", "/srv/repo", "repo.git", "a/b:c"] {
            assert!(!is_git_url(path), "{path}");
        }
        assert_eq!(last_segment("https://example.invalid/me/tool.git/"), "tool");
        assert_eq!(last_segment("git@host:tool.git"), "tool");
    }

    #[test]
    fn only_https_urls_of_a_named_host_are_allowed() {
        let config = hosts(&["Example.org"]);
        assert!(allowed("https://example.org/me/repo.git", &config).is_ok());
        assert!(allowed("https://EXAMPLE.org/me/repo", &config).is_ok());
        assert!(allowed("https://example.org:443/me/repo", &config).is_ok());
        for url in [
            "http://example.org/me/repo.git",
            "ssh://example.org/me/repo.git",
            "git://example.org/me/repo.git",
            "file:///example.org/repo",
            "git@example.org:me/repo.git",
            "https://example.org.evil.invalid/x",
            "https://evil.invalid/example.org",
            "https://example.org@127.0.0.1/x",
            "https://user:pw@example.org/x",
            "https://example.org:8443/x",
            "https://127.0.0.1/x",
            "https://[::1]/x",
            "ext::sh -c touch% /tmp/x",
        ] {
            assert!(allowed(url, &config).is_err(), "{url}");
        }
        assert_eq!(
            allowed("https://example.org/x", &CloneConfig::default()),
            Err("this server allows no clone host")
        );
    }

    #[test]
    fn clone_hosts_are_dns_names() {
        for bad in [
            "",
            "127.0.0.1",
            "::1",
            "localhost",
            "a.localhost",
            "https://x.org",
            "x.org:443",
            "x.org/path",
            "10.1",
        ] {
            assert!(CloneConfig::default().allow_hosts([bad]).is_err(), "{bad}");
        }
        assert_eq!(hosts(&["GitHub.com", "github.com"]).hosts, ["github.com"]);
    }

    #[test]
    fn the_clone_runs_with_a_fixed_safe_configuration() {
        let command = clone_command(
            "https://example.org/r.git",
            Path::new("/tmp/r"),
            Path::new("/tmp/h"),
            &CloneConfig::default(),
        );
        let command = command.as_std();
        let args: Vec<String> = command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        for setting in [
            "-c protocol.allow=never",
            "-c protocol.https.allow=always",
            "-c core.hooksPath=/dev/null",
            "-c core.fsmonitor=false",
            "-c http.followRedirects=false",
            "--depth 1",
            "--no-recurse-submodules",
            "-- https://example.org/r.git /tmp/r",
        ] {
            assert!(joined.contains(setting), "{setting} in {joined}");
        }
        let env: Vec<(String, Option<String>)> = command
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        for (name, value) in [
            ("HOME", "/tmp/h"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_TERMINAL_PROMPT", "0"),
        ] {
            assert!(
                env.contains(&(name.into(), Some(value.into()))),
                "{name} in {env:?}"
            );
        }
    }

    #[tokio::test]
    async fn bad_sources_say_what_to_give() {
        let here = std::env::temp_dir();
        let roots = Roots::new([&here]).unwrap();
        let none = CloneConfig::default();
        let missing = open("/nonexistent/weir-llmstxt", &roots, &none)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(missing.contains("cannot open"), "{missing}");
        let outside = open("/", &roots, &none).await.err().unwrap().to_string();
        assert!(outside.contains("outside"), "{outside}");
        assert!(matches!(
            open("--upload-pack=x", &roots, &none).await,
            Err(SourceError::Dash(_))
        ));
        let refused = open("file:///nonexistent/weir-llmstxt.git", &roots, &none)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(refused.contains("--llmstxt-clone-host"), "{refused}");
    }
}
