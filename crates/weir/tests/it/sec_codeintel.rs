//! Issue 22, the code intelligence tools: roots, a hostile repository, SCIP
//! paths (findings 2, 9, 11).
//!
//! A repository is data a caller (or whoever wrote it) controls: its
//! `.git/config` must run nothing when weir indexes it, its `index.scip`
//! and its symlinks must not make weir read a file outside it, and a
//! caller names only repositories inside the operator's `--root`s.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// What the secret file holds: it must never show in an answer.
const SECRET: &str = "TOPSECRET-c0ffee";

/// Every hook git knows of: each one, run, leaves a marker.
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
];

/// A scratch directory: `root/` (the operator's root) holding the hostile
/// `root/repo`, `outside/secret.rs` (out of every root), `markers/`
/// (where anything the repository makes run leaves a file) and `data/`.
struct Hostile {
    _dir: tempfile::TempDir,
    base: PathBuf,
}

impl Hostile {
    fn root(&self) -> PathBuf {
        self.base.join("root")
    }

    fn repo(&self) -> PathBuf {
        self.base.join("root/repo")
    }

    fn outside(&self) -> PathBuf {
        self.base.join("outside")
    }

    fn markers(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.base.join("markers"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn weir(&self, args: &[&str]) -> Output {
        Command::new(WEIR)
            .arg("--data-dir")
            .arg(self.base.join("data"))
            .args(args)
            .stdin(Stdio::null())
            .env_remove("WEIR_TOKEN")
            .env_remove("WEIR_ROOTS")
            .env("TMPDIR", self.tmp())
            .output()
            .unwrap()
    }

    /// weir's temporary directory (`TMPDIR`), empty at the start.
    fn tmp(&self) -> PathBuf {
        self.base.join("tmp")
    }

    /// What weir left in its temporary directory.
    fn left_in_tmp(&self) -> Vec<String> {
        std::fs::read_dir(self.tmp())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// `weir call` of `tool` on `weir serve --stdio --root ROOT`: its exit
    /// code and its output (stdout then stderr) as text.
    fn call(&self, tool: &str, args: Value) -> (Option<i32>, String) {
        let server = format!(
            "{WEIR} --data-dir {} serve --stdio --no-exec --no-critique --root {}",
            self.base.join("data").display(),
            self.root().display()
        );
        let output = self.weir(&[
            "call",
            "--stdio",
            &server,
            tool,
            "--json",
            &args.to_string(),
            "--output",
            "jsonl",
        ]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.code(), text)
    }
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// git, as the repository's owner runs it while making it (no config of
/// the machine's, so the test means the same everywhere).
fn git(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The SCIP index the hostile repository ships: its documents name the
/// secret by `../..`, by its absolute path and through the in-tree symlink,
/// next to one honest document.
fn hostile_scip(h: &Hostile) {
    use scip::types::{Document, Index, Occurrence};
    let symbol = "rust-analyzer cargo evil 0.1.0 area().";
    let local = "local 1";
    let document = |path: String| {
        let mut document = Document::new();
        document.relative_path = path;
        for (sym, roles) in [(symbol, 1), (local, 1)] {
            document.occurrences.push(Occurrence {
                // `area` on the first line: `pub fn area`.
                range: vec![0, 7, 11],
                symbol: sym.into(),
                symbol_roles: roles,
                ..Default::default()
            });
        }
        document
    };
    let mut index = Index::new();
    index.documents = vec![
        document("lib.rs".into()),
        document("../../outside/secret.rs".into()),
        document(h.outside().join("secret.rs").display().to_string()),
        document("leak.rs".into()),
        document("linked/secret.rs".into()),
    ];
    scip::write_message_to_file(h.repo().join("index.scip"), index).unwrap();
}

/// The hostile repository: committed (one commit signed), then a
/// `.git/config` that would run a marker script from every place git runs
/// one, a dirty tree that makes `git status` read file contents, symlinks
/// out of the tree and the hostile `index.scip`.
fn hostile() -> Hostile {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let h = Hostile { _dir: dir, base };
    let (repo, bin, markers) = (h.repo(), h.base.join("bin"), h.base.join("markers"));
    for d in [
        &repo,
        &bin,
        &markers,
        &h.outside(),
        &h.base.join("hooks"),
        &h.tmp(),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        h.outside().join("secret.rs"),
        format!("pub fn area() -> u32 {{ 7 }} // {SECRET}\n"),
    )
    .unwrap();
    let marker = |name: &str| format!("touch {}/{name}", markers.display());
    for name in [
        "fsmonitor",
        "pager",
        "gpg",
        "clean",
        "smudge",
        "process",
        "diff",
        "ssh",
        "textconv",
        "askpass",
        "editor",
    ] {
        // A filter must hand the content back, or git would fail first.
        script(&bin.join(name), &format!("{}\ncat", marker(name)));
    }
    for hook in HOOKS {
        script(
            &h.base.join("hooks").join(hook),
            &marker(&format!("hook-{hook}")),
        );
    }

    std::fs::write(
        repo.join("lib.rs"),
        "pub fn area() -> u32 { 1 }\npub fn uses() -> u32 { area() }\n",
    )
    .unwrap();
    std::fs::write(repo.join("other.rs"), "pub fn other() -> u32 { area() }\n").unwrap();
    std::fs::write(repo.join("swap.rs"), "pub fn swapped() -> u32 { area() }\n").unwrap();
    std::fs::write(repo.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    // A signed commit on top (made by hand: no gpg needed to write one),
    // so `log.showSignature` has a signature to check.
    let tree = git(&repo, &["rev-parse", "HEAD^{tree}"]);
    let parent = git(&repo, &["rev-parse", "HEAD"]);
    let commit = format!(
        "tree {tree}\nparent {parent}\nauthor t <t@t> 1700000000 +0000\ncommitter t <t@t> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n"
    );
    let object = repo.join("commit.txt");
    std::fs::write(&object, commit).unwrap();
    let signed = git(&repo, &["hash-object", "-t", "commit", "-w", "commit.txt"]);
    std::fs::remove_file(&object).unwrap();
    git(&repo, &["update-ref", "HEAD", &signed]);

    let b = |name: &str| bin.join(name).display().to_string();
    let config = [
        ("core.fsmonitor", b("fsmonitor")),
        ("core.hooksPath", h.base.join("hooks").display().to_string()),
        ("core.pager", b("pager")),
        ("core.sshCommand", b("ssh")),
        ("core.askPass", b("askpass")),
        ("core.editor", b("editor")),
        ("gpg.program", b("gpg")),
        ("gpg.openpgp.program", b("gpg")),
        ("log.showSignature", "true".into()),
        ("filter.evil.clean", b("clean")),
        ("filter.evil.smudge", b("smudge")),
        ("filter.evil.process", b("process")),
        ("diff.external", b("diff")),
        ("diff.evil.textconv", b("textconv")),
        ("diff.evil.command", b("diff")),
    ];
    for (key, value) in config {
        git(&repo, &["config", key, &value]);
    }

    // Dirty: one file changed, one rewritten with the same bytes (a stat
    // change only git's content check, through the clean filter, can
    // settle).
    std::fs::write(
        repo.join("lib.rs"),
        "pub fn area() -> u32 { 2 }\npub fn uses() -> u32 { area() }\n// changed\n",
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(repo.join("other.rs"), "pub fn other() -> u32 { area() }\n").unwrap();
    // Symlinks out of the tree, to the file and to its directory.
    symlink(h.outside().join("secret.rs"), repo.join("leak.rs")).unwrap();
    symlink(h.outside(), repo.join("linked")).unwrap();
    hostile_scip(&h);
    // Making it ran the hooks of commit and the like: start clean.
    for name in h.markers() {
        std::fs::remove_file(markers.join(name)).unwrap();
    }
    h
}

/// Every query tool on the hostile repository, through the server: each
/// answers, and no answer holds the secret.
fn query_everything(h: &Hostile) {
    let repo = h.repo().display().to_string();
    for (tool, args) in [
        ("find_references", json!({"repo": repo, "symbol": "area"})),
        (
            "find_references",
            json!({"repo": repo, "symbol": "rust-analyzer cargo evil 0.1.0 area()."}),
        ),
        ("search_symbols", json!({"repo": repo, "query": "area"})),
        ("explore", json!({"repo": repo, "path": "."})),
        ("understand", json!({"repo": repo, "symbol": "area"})),
        ("prepare_change", json!({"repo": repo, "symbol": "area"})),
        ("get_architecture", json!({"repo": repo})),
    ] {
        let (code, text) = h.call(tool, args.clone());
        assert_eq!(code, Some(0), "{tool} {args}: {text}");
        assert!(
            !text.contains(SECRET),
            "{tool} {args} read outside the repository: {text}"
        );
        assert!(!text.contains("outside/secret.rs"), "{tool} {args}: {text}");
    }
}

#[test]
fn weir_index_of_a_hostile_repository_runs_nothing_and_reads_nothing_outside() {
    let h = hostile();
    let output = h.weir(&["index", &h.repo().display().to_string(), "--json"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        h.markers(),
        Vec::<String>::new(),
        "the repository's config ran"
    );
    assert!(!stdout.contains(SECRET), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    // The honest document only; the others are dropped, and said so.
    assert_eq!(report["scip_documents"], 1, "{report}");
    let warnings = report["warnings"].to_string();
    for dropped in ["../../outside/secret.rs", "leak.rs", "linked/secret.rs"] {
        assert!(
            warnings.contains(dropped),
            "{dropped} not reported: {warnings}"
        );
    }
    // The history is still read (the signed commit and the first), safely.
    assert_eq!(report["git_commits"], 2, "{report}");
    assert_eq!(report["dirty"], true, "{report}");
    // The symlinks are not indexed.
    assert_eq!(report["files"], 3, "{report}");

    query_everything(&h);
    assert_eq!(
        h.markers(),
        Vec::<String>::new(),
        "the repository's config ran"
    );
    // git ran with a HOME of its own, made nowhere: nothing is left behind.
    assert_eq!(h.left_in_tmp(), Vec::<String>::new());
}

#[test]
fn index_repo_of_a_hostile_repository_runs_nothing_and_reads_nothing_outside() {
    let h = hostile();
    // Named relative to the first root.
    let (code, text) = h.call("index_repo", json!({"path": "repo"}));
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        h.markers(),
        Vec::<String>::new(),
        "the repository's config ran: {text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        text.contains("../../outside/secret.rs"),
        "the dropped document is not reported: {text}"
    );
    query_everything(&h);
    assert_eq!(
        h.markers(),
        Vec::<String>::new(),
        "the repository's config ran"
    );

    // A file swapped for a symlink out of the tree after indexing is not
    // followed: its uses come from the index, never from the secret.
    std::fs::remove_file(h.repo().join("swap.rs")).unwrap();
    symlink(h.outside().join("secret.rs"), h.repo().join("swap.rs")).unwrap();
    let (code, text) = h.call(
        "find_references",
        json!({"repo": h.repo().display().to_string(), "symbol": "area"}),
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        !text.contains(SECRET),
        "a swapped-in symlink was followed: {text}"
    );
    assert_eq!(h.markers(), Vec::<String>::new());
}

#[test]
fn index_repo_names_only_directories_inside_the_roots() {
    let h = hostile();
    let outside = h.outside().display().to_string();
    for tool in ["index_repo", "search_symbols"] {
        let args = match tool {
            "index_repo" => json!({"path": outside}),
            _ => json!({"repo": outside, "query": "area"}),
        };
        let (code, text) = h.call(tool, args);
        assert_ne!(code, Some(0), "{tool}: {text}");
        assert!(text.contains("outside the directories"), "{tool}: {text}");
        assert!(text.contains("--root"), "{tool}: {text}");
        assert!(!text.contains(SECRET), "{tool}: {text}");
    }
    // `..` out of the root, and a symlink in the root to a directory out
    // of it, are outside too.
    symlink(h.outside(), h.root().join("door")).unwrap();
    for named in ["repo/../../outside", "door"] {
        let (code, text) = h.call("index_repo", json!({"path": named}));
        assert_ne!(code, Some(0), "{named}: {text}");
        assert!(text.contains("--root"), "{named}: {text}");
    }
    // Nothing was indexed on the way: no index file of the outside.
    let indexes: Vec<_> = std::fs::read_dir(h.base.join("data/codeintel"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(
        indexes
            .iter()
            .all(|n| !n.to_string_lossy().starts_with("outside")),
        "{indexes:?}"
    );
    // A directory inside the root is indexed.
    let (code, text) = h.call(
        "index_repo",
        json!({"path": h.repo().display().to_string()}),
    );
    assert_eq!(code, Some(0), "{text}");
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// `weir ARGS`, killed (and failed) if it runs 30 s: a FIFO opened for
/// reading waits for a writer that never comes.
fn weir_within_30s(h: &Hostile, args: &[&str]) -> Output {
    let mut child = Command::new(WEIR)
        .arg("--data-dir")
        .arg(h.base.join("data"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("WEIR_ROOTS")
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!(
                "weir {args:?} hung on a FIFO: {:?}",
                child.wait_with_output()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn fifos_in_a_repository_do_not_hang_indexing() {
    use scip::types::{Document, Index, Occurrence};
    let h = hostile();
    let repo = h.repo();
    for dir in ["sub", "other"] {
        std::fs::create_dir_all(repo.join(dir)).unwrap();
        std::fs::write(repo.join(dir).join("x.rs"), "pub fn x() {}\n").unwrap();
    }
    mkfifo(&repo.join("sub/.gitignore"));
    mkfifo(&repo.join("other/.ignore"));
    mkfifo(&repo.join("fifo.rs"));
    // index.scip names the FIFO too (its columns would be read from it).
    let mut index = Index::new();
    let mut document = Document::new();
    document.relative_path = "fifo.rs".into();
    document.occurrences.push(Occurrence {
        range: vec![0, 7, 11],
        symbol: "local 1".into(),
        ..Default::default()
    });
    index.documents.push(document);
    scip::write_message_to_file(repo.join("index.scip"), index).unwrap();

    let output = weir_within_30s(&h, &["index", &repo.display().to_string(), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        report["warnings"].to_string().contains("fifo.rs"),
        "{report}"
    );
    let (code, text) = h.call(
        "find_references",
        json!({"repo": repo.display().to_string(), "symbol": "area"}),
    );
    assert_eq!(code, Some(0), "{text}");

    // The repository's own ignore file a FIFO, or one of a directory above
    // it (whose rules the walk reads too): refused, at once.
    for fifo in [repo.join(".ignore"), h.root().join(".gitignore")] {
        mkfifo(&fifo);
        let output = weir_within_30s(&h, &["index", &repo.display().to_string()]);
        assert_ne!(output.status.code(), Some(0));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("not a regular file"),
            "{output:?}"
        );
        std::fs::remove_file(fifo).unwrap();
    }
    assert_eq!(h.markers(), Vec::<String>::new());
}
