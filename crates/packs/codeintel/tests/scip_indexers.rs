//! Running a SCIP indexer (scip_indexers.rs), with stand-in programs so
//! every outcome can be forced: its index read and the language labelled
//! with it; the clean environment, cwd and output place; no rerun while its
//! files are unchanged; a failure's message, a time-out that kills what it
//! started, and a missing program, each leaving the language on the tags.
//! The real indexers are tested in crates/weir/tests/it/codeintel_scip.rs.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use scip::types::{Document, Index, Occurrence};
use weir_pack_codeintel::{IndexOptions, IndexReport, ScipIndexers, index_repository};

struct Setup {
    dir: tempfile::TempDir,
    repo: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("pkg")).unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::write(repo.join("pkg/a.py"), "def f(x):\n    return x\n").unwrap();
        std::fs::write(repo.join("pkg/b.py"), "from pkg.a import f\nf(1)\n").unwrap();
        let repo = repo.canonicalize().unwrap();
        // The index the stand-in "writes": f's definition and two uses.
        let mut index = Index::new();
        for (path, ranges) in [
            ("pkg/a.py", vec![(0, 4, 5, 1)]),
            ("pkg/b.py", vec![(0, 18, 19, 2), (1, 0, 1, 8)]),
        ] {
            let mut document = Document::new();
            document.relative_path = path.into();
            for (line, start, end, roles) in ranges {
                document.occurrences.push(Occurrence {
                    range: vec![line, start, end],
                    symbol: "scip-python python repo 0 `pkg.a`/f().".into(),
                    symbol_roles: roles,
                    ..Default::default()
                });
            }
            index.documents.push(document);
        }
        scip::write_message_to_file(dir.path().join("made.scip"), index).unwrap();
        Setup { dir, repo }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A stand-in `scip-python`: `body` is shell run after it logs its
    /// environment, cwd and arguments and counts its runs.
    fn program(&self, body: &str) -> PathBuf {
        let program = self.path("scip-python");
        let log = self.path("log");
        let script = format!(
            "#!/bin/sh\nenv > {log}.env\npwd > {log}.cwd\necho \"$@\" > {log}.args\necho run >> {log}.runs\n\
             out=''\nprev=''\nfor a in \"$@\"; do [ \"$prev\" = --output ] && out=$a; prev=$a; done\n{body}\n",
            log = log.display()
        );
        std::fs::write(&program, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    fn index(&self, indexers: ScipIndexers) -> IndexReport {
        let options = IndexOptions {
            scip_indexers: indexers,
            ..IndexOptions::default()
        };
        index_repository(
            &self.repo,
            &self.path("data/index.sqlite"),
            &options,
            &AtomicUsize::new(0),
            &mut |_| {},
        )
        .unwrap()
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(self.path("log.runs"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

fn with_program(program: &Path, timeout: Duration) -> ScipIndexers {
    ScipIndexers {
        programs: [("scip-python".to_owned(), program.to_owned())].into(),
        // Nothing else is found: scip-typescript and friends are "missing".
        search_path: Some("/usr/bin:/bin".into()),
        timeout,
        ..ScipIndexers::default()
    }
}

#[test]
fn an_indexers_output_is_read_and_its_language_labelled() {
    let setup = Setup::new();
    let made = setup.path("made.scip");
    let program = setup.program(&format!("cp {} \"$out\"", made.display()));
    let report = setup.index(with_program(&program, Duration::from_secs(60)));
    let python = &report.backends["python"];
    assert_eq!(python.backend, "scip-python", "{report:?}");
    assert!(python.why.starts_with("ran in "), "{python:?}");
    assert_eq!(python.scip_files, 2);
    assert_eq!((report.scip_documents, report.scip_occurrences), (2, 3));

    // Run as issue 22 asks: an environment of PATH, HOME and TMPDIR only
    // (the shell adds PWD and the like), HOME a scratch directory in
    // weir's data directory, cwd the repository, the index written there
    // too, nothing left in the repository or the scratch directory.
    let env = std::fs::read_to_string(setup.path("log.env")).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split('=').next())
        .filter(|n| !matches!(*n, "PWD" | "SHLVL" | "_" | "OLDPWD"))
        .collect();
    assert_eq!(names.len(), 3, "{env}");
    let data = setup.path("data").canonicalize().unwrap();
    for name in ["PATH=/usr/bin:/bin", "HOME=", "TMPDIR="] {
        let line = env.lines().find(|l| l.starts_with(name)).expect(name);
        if name != "PATH=/usr/bin:/bin" {
            assert!(
                line[name.len()..].starts_with(&data.display().to_string()),
                "{line}"
            );
        }
    }
    let cwd = std::fs::read_to_string(setup.path("log.cwd")).unwrap();
    assert_eq!(cwd.trim(), setup.repo.display().to_string());
    let args = std::fs::read_to_string(setup.path("log.args")).unwrap();
    assert!(
        args.contains(&format!("--output {}", data.display())),
        "{args}"
    );
    let mut in_repo: Vec<_> = walk(&setup.repo);
    in_repo.sort();
    assert_eq!(in_repo, ["pkg/a.py", "pkg/b.py"]);
    let left: Vec<_> = walk(&data.join("index.scip.d"));
    assert_eq!(left, ["scip-python.scip"], "only the index is kept");

    // Nothing changed: not run again, its index still read.
    let again = setup.index(with_program(&program, Duration::from_secs(60)));
    assert_eq!(setup.runs(), 1);
    assert_eq!(again.backends["python"].backend, "scip-python");
    assert!(
        again.backends["python"].why.contains("not rerun"),
        "{again:?}"
    );
    assert_eq!(again.scip_documents, 2);

    // A file changed: run again.
    std::fs::write(setup.repo.join("pkg/b.py"), "from pkg.a import f\nf(2)\n").unwrap();
    setup.index(with_program(&program, Duration::from_secs(60)));
    assert_eq!(setup.runs(), 2);
}

#[test]
fn a_failure_says_why_and_the_language_stays_on_the_tags() {
    let setup = Setup::new();
    let program = setup.program("echo 'Error: the project cannot be analysed' >&2\nexit 3");
    let report = setup.index(with_program(&program, Duration::from_secs(60)));
    let python = &report.backends["python"];
    assert_eq!(python.backend, "tags");
    assert!(
        python.why.contains("scip-python failed") && python.why.contains("cannot be analysed"),
        "{python:?}"
    );
    assert_eq!(report.scip_documents, 0);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("cannot be analysed"))
    );
    // Its files unchanged: the failure stands, it is not run again.
    let again = setup.index(with_program(&program, Duration::from_secs(60)));
    assert_eq!(setup.runs(), 1);
    assert_eq!(again.backends["python"].backend, "tags");
}

#[test]
fn a_time_out_kills_the_indexer_and_what_it_started() {
    let setup = Setup::new();
    let pid = setup.path("child.pid");
    let program = setup.program(&format!("sleep 300 &\necho $! > {}\nwait", pid.display()));
    let started = Instant::now();
    let report = setup.index(with_program(&program, Duration::from_secs(1)));
    assert!(started.elapsed() < Duration::from_secs(20));
    let python = &report.backends["python"];
    assert_eq!(python.backend, "tags");
    assert!(python.why.contains("timed out after 1 s"), "{python:?}");
    let pid = std::fs::read_to_string(pid).unwrap();
    let alive = Path::new("/proc").join(pid.trim()).join("stat");
    let gone = std::fs::read_to_string(&alive)
        .map(|s| s.contains(") Z "))
        .unwrap_or(true);
    assert!(gone, "the indexer's child still runs");
}

#[test]
fn a_missing_indexer_is_named_and_other_languages_say_why() {
    let setup = Setup::new();
    std::fs::write(setup.repo.join("main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(setup.repo.join("main.go"), "package main\n").unwrap();
    let report = setup.index(ScipIndexers {
        search_path: Some(setup.path("empty").into()),
        ..ScipIndexers::default()
    });
    let why = |language: &str| {
        let backend = &report.backends[language];
        assert_eq!(backend.backend, "tags", "{language}: {backend:?}");
        backend.why.clone()
    };
    assert_eq!(why("python"), "scip-python is not installed (not on PATH)");
    assert!(why("rust").contains("operator allows it"));
    assert!(why("go").contains("no SCIP indexer"));
    let off = setup.index(ScipIndexers {
        enabled: false,
        ..ScipIndexers::default()
    });
    assert!(off.backends["python"].why.contains("off"));
}

/// The files under `dir`, relative, `/`-separated.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap();
                out.push(relative.display().to_string());
            }
        }
    }
    out
}

#[test]
fn cancelling_the_index_run_kills_a_running_indexer() {
    let setup = Setup::new();
    let program = setup.program("exec sleep 300");
    let cancel = std::sync::Arc::new(AtomicUsize::new(0));
    let raise = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            cancel.store(1, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let started = Instant::now();
    let options = IndexOptions {
        scip_indexers: with_program(&program, Duration::from_secs(600)),
        ..IndexOptions::default()
    };
    let result = index_repository(
        &setup.repo,
        &setup.path("data/index.sqlite"),
        &options,
        &cancel,
        &mut |_| {},
    );
    raise.join().unwrap();
    assert!(
        matches!(
            result,
            Err(weir_pack_codeintel::IndexError::Cancelled { .. })
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Cancelled is no outcome to keep: the next run runs it again.
    let made = setup.path("made.scip");
    let program = setup.program(&format!("cp {} \"$out\"", made.display()));
    let report = setup.index(with_program(&program, Duration::from_secs(60)));
    assert_eq!(report.backends["python"].backend, "scip-python");
}
