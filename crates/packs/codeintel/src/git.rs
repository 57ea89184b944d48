//! What the index asks of git (HEAD, whether the tree is dirty, recent
//! history), asked so that nothing the repository says gets to run.
//!
//! A repository is data its author controls, and git runs programs its
//! `.git/config` names: `core.fsmonitor` and hooks (`post-index-change`)
//! on `git status`, filter drivers when it hashes a file, `gpg.program`
//! under `log.showSignature`, pagers, external diffs, ssh on a lazy fetch.
//! So:
//!
//! - **No `git status`.** Whether tracked files changed is read from
//!   `.git/index` here ([`crate::gitindex`]), comparing each entry's stat
//!   data with the file's and hashing only the files whose stat moved.
//!   Nothing runs a filter: a file a filter would rewrite (LFS, eol
//!   conversion) whose time stamp moved counts as changed.
//! - **The git that remains** (`rev-parse`, `diff-index --cached`, `log
//!   --name-only`: each reads objects and refs, never the work tree's
//!   contents) runs with an empty environment, no system or global config,
//!   every program-valued setting overridden on the command line (which
//!   outranks the repository's config), no pager, no external diff, no
//!   textconv, no signature checks, no lazy fetch, no network protocol.
//! - **The git directory must lie inside the boundary** (for a caller, the
//!   operator's root the repository is in): a `.git` found above it, or a
//!   `.git` file (`gitdir:`) or `commondir` pointing out of it, is not
//!   read, so a repository cannot make weir read another one's history.
//!
//! - **Objects borrowed from elsewhere** (`objects/info/alternates`) must
//!   lie inside the boundary too: otherwise a HEAD naming a commit of
//!   another repository would list that repository's files.
//!
//! git's ownership check (`safe.directory`) does not apply: it guards
//! repository discovery, and the git directory is named here (`GIT_DIR`)
//! after the checks above. What it protects against, a configuration
//! someone else wrote running as you, is what the overrides above prevent;
//! so a repository owned by another user (root indexing a mounted
//! checkout) still has its history read.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one git command may run (reading 500 commits takes well
/// under a second on a large repository).
const GIT_TIMEOUT: Duration = Duration::from_secs(20);
/// The most output read of one git command.
const MAX_OUTPUT: u64 = 64 << 20;

/// Settings given on the command line, which outrank the repository's:
/// every one that names a program (or turns one on) it might run.
const SAFE_CONFIG: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.sshCommand=false",
    "core.askPass=false",
    "core.editor=false",
    "core.alternateRefsCommand=false",
    "core.untrackedCache=false",
    "core.quotepath=off",
    "credential.helper=",
    "diff.external=",
    "log.showSignature=false",
    "log.mailmap=false",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "protocol.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.recurseSubmodules=false",
];

/// Where a repository's git data is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GitDir {
    /// The work tree's top (where `.git` is).
    pub(crate) work_tree: PathBuf,
    /// The git directory (`.git`, or what a `.git` file names).
    pub(crate) git_dir: PathBuf,
}

/// Why the git data was not read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// No `.git` between `root` and the boundary: not a git work tree.
    None,
    /// A git directory outside the boundary: a warning, no history.
    Outside(String),
    /// The repository's git data, inside the boundary.
    Dir(GitDir),
}

/// The git directory of the work tree holding `root` (canonical), looked
/// for from `root` up to `boundary` (canonical; `root` lies inside it).
pub(crate) fn discover(root: &Path, boundary: &Path) -> Found {
    let mut at = Some(root);
    while let Some(dir) = at.filter(|dir| dir.starts_with(boundary)) {
        let dot_git = dir.join(".git");
        if let Ok(metadata) = std::fs::symlink_metadata(&dot_git) {
            return git_dir_of(dir, &dot_git, metadata.is_file(), boundary);
        }
        at = dir.parent();
    }
    Found::None
}

fn git_dir_of(work_tree: &Path, dot_git: &Path, is_file: bool, boundary: &Path) -> Found {
    let outside = |what: &Path| {
        Found::Outside(format!(
            "the git directory {} is outside {}: git's history and status are not read",
            what.display(),
            boundary.display()
        ))
    };
    let named = if is_file {
        // A worktree's or a submodule's `.git` file: `gitdir: PATH`.
        let Some(target) = read_small(dot_git)
            .and_then(|text| text.strip_prefix("gitdir:").map(|t| t.trim().to_owned()))
        else {
            return Found::None;
        };
        work_tree.join(target)
    } else {
        dot_git.to_owned()
    };
    let Ok(git_dir) = std::fs::canonicalize(&named) else {
        return Found::None;
    };
    if !git_dir.starts_with(boundary) {
        return outside(&git_dir);
    }
    // A linked worktree keeps its objects and refs in the common directory.
    let mut common = git_dir.clone();
    if let Some(named) = read_small(&git_dir.join("commondir")) {
        match std::fs::canonicalize(git_dir.join(named.trim())) {
            Ok(dir) if dir.starts_with(boundary) => common = dir,
            Ok(dir) => return outside(&dir),
            Err(_) => return Found::None,
        }
    }
    // Objects borrowed from another repository (`objects/info/alternates`):
    // a HEAD naming one of its commits would list its files.
    let objects = common.join("objects");
    if let Some(alternates) = read_small(&objects.join("info/alternates")) {
        for line in alternates.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match std::fs::canonicalize(objects.join(line)) {
                Ok(dir) if dir.starts_with(boundary) => {}
                Ok(dir) => return outside(&dir),
                Err(_) => {}
            }
        }
    }
    Found::Dir(GitDir {
        work_tree: work_tree.to_owned(),
        git_dir,
    })
}

/// A small text file's content (a `.git` file, `commondir`): a regular
/// file only (a FIFO would make the open wait for a writer).
fn read_small(path: &Path) -> Option<String> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// git's `HOME`: a path that can never exist, since `/dev/null` is not a
/// directory, so git finds no user configuration, attributes or ignore
/// rules under it, and takes the error (`ENOTDIR`) as a missing file,
/// silently. Nothing is made for it, so nothing is left behind.
const NO_HOME: &str = "/dev/null/weir-git-home";

/// `git ARGS` on `repo`, run in `cwd` (inside its work tree), safely: its
/// output when it exits 0 (or, with `ok_codes`, another listed code).
fn run(repo: &GitDir, cwd: &Path, args: &[&str], ok_codes: &[i32]) -> Option<(i32, Vec<u8>)> {
    let mut command = Command::new("git");
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
        .env("HOME", NO_HOME)
        .env("LANG", "C")
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .env("GIT_DIR", &repo.git_dir)
        .env("GIT_WORK_TREE", &repo.work_tree)
        .current_dir(cwd)
        .arg("--no-pager");
    for setting in SAFE_CONFIG {
        command.args(["-c", setting]);
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = (&mut stdout).take(MAX_OUTPUT).read_to_end(&mut out);
        out
    });
    // Bounded: a FIFO where the repository's config includes a file, or
    // in place of HEAD, would make git wait forever; output past the cap
    // would make it wait on the pipe.
    let started = Instant::now();
    let mut output_done: Option<Instant> = None;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if reader.is_finished() {
            output_done.get_or_insert_with(Instant::now);
        }
        if started.elapsed() > GIT_TIMEOUT
            || output_done.is_some_and(|at| at.elapsed() > Duration::from_secs(2))
        {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = reader.join().ok()?;
    let code = status?.code()?;
    (code == 0 || ok_codes.contains(&code)).then_some((code, out))
}

/// HEAD's commit id, when there is one.
pub(crate) fn head(repo: &GitDir) -> Option<String> {
    let (_, out) = run(
        repo,
        &repo.work_tree,
        &["rev-parse", "--verify", "-q", "HEAD^{commit}"],
        &[],
    )?;
    let head = String::from_utf8_lossy(&out).trim().to_owned();
    (!head.is_empty() && head.bytes().all(|b| b.is_ascii_hexdigit())).then_some(head)
}

/// Whether the index (what is staged) differs from HEAD: objects only.
pub(crate) fn staged_changes(repo: &GitDir) -> Option<bool> {
    let (code, _) = run(
        repo,
        &repo.work_tree,
        &[
            "diff-index",
            "--cached",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
            "HEAD",
            "--",
        ],
        &[1],
    )?;
    Some(code == 1)
}

/// `git log --name-only` of the last `max_commits` commits, paths relative
/// to `cwd` (files outside it left out): commit times and file names only.
pub(crate) fn log_names(repo: &GitDir, cwd: &Path, max_commits: usize) -> Option<String> {
    let count = format!("--max-count={max_commits}");
    let (_, out) = run(
        repo,
        cwd,
        &[
            "log",
            "--relative",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--no-show-signature",
            "--no-mailmap",
            &count,
            "--name-only",
            "--format=%x1e%ct",
        ],
        &[],
    )?;
    Some(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_directory_outside_the_boundary_is_not_used() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(scratch.path()).unwrap();
        let (root, other) = (dir.join("root"), dir.join("other/.git"));
        std::fs::create_dir_all(root.join("repo/sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::create_dir_all(root.join("own/.git")).unwrap();
        // Not a work tree up to the boundary, though `dir` might be one.
        assert_eq!(discover(&root.join("repo/sub"), &root), Found::None);
        std::fs::write(
            root.join("repo/.git"),
            format!("gitdir: {}\n", other.display()),
        )
        .unwrap();
        assert!(matches!(
            discover(&root.join("repo/sub"), &root),
            Found::Outside(_)
        ));
        std::fs::write(root.join("repo/.git"), "gitdir: ../own/.git\n").unwrap();
        assert_eq!(
            discover(&root.join("repo/sub"), &root),
            Found::Dir(GitDir {
                work_tree: root.join("repo"),
                git_dir: root.join("own/.git"),
            })
        );
        std::fs::write(root.join("own/.git/commondir"), "../../../other/.git\n").unwrap();
        assert!(matches!(
            discover(&root.join("repo"), &root),
            Found::Outside(_)
        ));
        std::fs::remove_file(root.join("own/.git/commondir")).unwrap();
        // Borrowed objects from outside: not read either.
        std::fs::create_dir_all(root.join("own/.git/objects/info")).unwrap();
        std::fs::write(
            root.join("own/.git/objects/info/alternates"),
            format!("{}\n", other.display()),
        )
        .unwrap();
        assert!(matches!(
            discover(&root.join("own"), &root),
            Found::Outside(_)
        ));
        std::fs::remove_file(root.join("own/.git/objects/info/alternates")).unwrap();
        // A .git above the boundary is not looked for.
        assert_eq!(
            discover(&root.join("own"), &root.join("own")),
            Found::Dir(GitDir {
                work_tree: root.join("own"),
                git_dir: root.join("own/.git"),
            })
        );
        std::fs::create_dir_all(root.join("own/inner")).unwrap();
        assert_eq!(
            discover(&root.join("own/inner"), &root.join("own/inner")),
            Found::None
        );
    }
}
