//! Running the real SCIP indexers, so that answers are exact without anyone
//! supplying an `index.scip`: `scip-python` for Python, `scip-typescript`
//! for TypeScript and JavaScript, and `rust-analyzer scip` for Rust.
//!
//! **Which run.** An indexer runs when the repository has files of its
//! languages and its program is found: named by the operator
//! ([`ScipIndexers::programs`]), else on `PATH`. rust-analyzer only when
//! the operator allows it ([`ScipIndexers::rust_analyzer`]): it runs
//! `cargo`, and cargo runs what the repository's `.cargo/config.toml` and
//! `rust-toolchain.toml` name (a `rustc-wrapper`, a toolchain `path`), so
//! on a repository nobody vouches for it would run the repository's code.
//! The two others read the repository's `tsconfig.json` / `pyrightconfig.json`,
//! which name no program; pyright runs the `python3` on weir's `PATH` (never
//! one the repository names) to learn `sys.path`, and with the empty
//! environment file given here it runs no `pip`.
//!
//! **How they run** (issue 22's rules for any program weir starts): no
//! shell; an environment of `PATH` and `HOME` only (plus `TMPDIR`, and for
//! rust-analyzer `CARGO_HOME`/`RUSTUP_HOME`), `HOME` and `TMPDIR` a scratch
//! directory of weir's; cwd the repository; stdin closed; a process group
//! of its own, killed whole on time-out ([`ScipIndexers::timeout`]), on
//! cancellation or when its output passes [`MAX_OUTPUT_BYTES`]; at most
//! the last 8 KiB of what it prints kept, for the failure message. The
//! index goes to a file in weir's data directory, beside the repository's
//! index file, never into the repository: scip-typescript, which would
//! write an inferred `tsconfig.json` into a repository without one, is
//! given one in the scratch directory instead.
//!
//! **When they run.** Each indexer's last outcome is kept with a stamp of
//! what it saw (its program and the content hashes of its languages'
//! files): while those stay the same, its last output (or its last
//! failure) stands and it is not run again.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::store::{Store, StoreError};

/// The largest index an indexer may write (the reader's bound too).
pub(crate) const MAX_OUTPUT_BYTES: u64 = 2 << 30;
/// How much of what an indexer prints is kept for its failure message.
const KEPT_PRINTED: usize = 8 << 10;
/// How often a running indexer is checked on.
const POLL: Duration = Duration::from_millis(50);

/// Which SCIP indexers an index run starts, and how. Plain data.
#[derive(Clone, Debug)]
pub struct ScipIndexers {
    /// Run indexers at all; off: tags only (and a supplied `index.scip`).
    pub enabled: bool,
    /// Programs by indexer name (`scip-python`, `scip-typescript`,
    /// `rust-analyzer`), for those not on `PATH` or to pin one.
    pub programs: BTreeMap<String, PathBuf>,
    /// Whether rust-analyzer may run (off by default: it runs cargo, which
    /// runs what the repository configures; see the module docs).
    pub rust_analyzer: bool,
    /// The `PATH` programs are looked up in and run with; `None`: weir's.
    pub search_path: Option<OsString>,
    /// The longest one indexer may run.
    pub timeout: Duration,
}

impl Default for ScipIndexers {
    fn default() -> ScipIndexers {
        ScipIndexers {
            enabled: true,
            programs: BTreeMap::new(),
            rust_analyzer: false,
            search_path: None,
            timeout: Duration::from_secs(600),
        }
    }
}

/// One SCIP indexer weir knows how to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Indexer {
    Python,
    TypeScript,
    RustAnalyzer,
}

impl Indexer {
    pub(crate) const ALL: [Indexer; 3] =
        [Indexer::Python, Indexer::TypeScript, Indexer::RustAnalyzer];

    /// Its name, which is also its program's.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Indexer::Python => "scip-python",
            Indexer::TypeScript => "scip-typescript",
            Indexer::RustAnalyzer => "rust-analyzer",
        }
    }

    /// The languages (as the index names them) it covers.
    pub(crate) fn languages(self) -> &'static [&'static str] {
        match self {
            Indexer::Python => &["python"],
            Indexer::TypeScript => &["typescript", "tsx", "javascript"],
            Indexer::RustAnalyzer => &["rust"],
        }
    }

    /// The indexer of `language`, if weir runs one for it.
    pub(crate) fn of(language: &str) -> Option<Indexer> {
        Indexer::ALL
            .into_iter()
            .find(|i| i.languages().contains(&language))
    }

    /// Its arguments, with the repository at `root`, the index going to
    /// `output`, scratch files in `scratch` and `files` the repository's
    /// files of its languages that weir indexed.
    fn args(
        self,
        root: &Path,
        output: &Path,
        scratch: &Path,
        files: &[String],
    ) -> std::io::Result<Vec<OsString>> {
        let mut args: Vec<OsString> = Vec::new();
        match self {
            Indexer::Python => {
                // An empty environment: pyright then runs no `pip` to list
                // installed packages (imports of them stay unresolved,
                // uses inside the repository do not).
                let environment = scratch.join("environment.json");
                std::fs::write(&environment, "[]")?;
                let name = root
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "repository".into());
                args.extend(["index".into(), ".".into(), "--quiet".into()]);
                // Without a version and a git HEAD, 0.6.6 crashes.
                args.extend(["--project-name".into(), name.into()]);
                args.extend(["--project-version".into(), "0".into()]);
                args.extend(["--environment".into(), environment.into()]);
                args.extend(["--output".into(), output.into()]);
            }
            Indexer::TypeScript => {
                args.extend(["index".into(), "--no-progress-bar".into()]);
                args.extend(["--cwd".into(), root.into()]);
                args.extend(["--output".into(), output.into()]);
                if !root.join("tsconfig.json").is_file() {
                    // What --infer-tsconfig would write into the repository,
                    // written here instead, naming the files weir indexed
                    // (so .gitignore'd and vendored trees stay out).
                    let config = scratch.join("tsconfig.json");
                    let files: Vec<PathBuf> = files.iter().map(|f| root.join(f)).collect();
                    let tsconfig = serde_json::json!({
                        "compilerOptions": {"allowJs": true, "noEmit": true},
                        "files": files,
                    });
                    std::fs::write(&config, tsconfig.to_string())?;
                    args.push(config.into());
                }
            }
            Indexer::RustAnalyzer => {
                // Neither build scripts nor proc macros: both are the
                // repository's code.
                let config = scratch.join("rust-analyzer.json");
                std::fs::write(
                    &config,
                    r#"{"cargo":{"buildScripts":{"enable":false}},"procMacro":{"enable":false}}"#,
                )?;
                args.extend(["scip".into(), ".".into()]);
                args.extend(["--output".into(), output.into()]);
                args.extend(["--config-path".into(), config.into()]);
            }
        }
        Ok(args)
    }
}

/// Which backend a language's references come from, and why.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct LanguageBackend {
    /// `scip-python`, `scip-typescript`, `rust-analyzer`, `index.scip`
    /// (the repository's own), or `tags` (tree-sitter, matched by name).
    pub backend: String,
    /// Why: how the indexer ran (`ran in 3.1 s`, `unchanged since its last
    /// run`), or why the tags answer (`scip-python is not installed`, its
    /// failure, a time-out).
    pub why: String,
    /// Files of the language the SCIP index covers.
    pub scip_files: u64,
}

/// One indexer's outcome in an index run.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub(crate) indexer: Indexer,
    /// The index it wrote (this run or an earlier one), else why none.
    pub(crate) result: Result<PathBuf, String>,
    /// How it went, in a few words (`ran in 3.1 s`).
    pub(crate) how: String,
    /// What it saw: changes when its program or its files do.
    pub(crate) stamp: String,
}

/// One indexer to run on one repository.
struct Job<'a> {
    root: &'a Path,
    config: &'a ScipIndexers,
    indexer: Indexer,
    program: &'a Path,
    cancel: &'a AtomicUsize,
}

/// What is kept of an indexer's last run.
#[derive(Serialize, Deserialize)]
struct LastRun {
    stamp: String,
    ok: bool,
    how: String,
}

/// Runs (or reuses the last run of) every indexer for a language the index
/// has files of, each writing beside the index file `db`. Languages whose
/// indexer is off or missing are left out: they stay on the tags.
pub(crate) fn run_all(
    store: &Store,
    root: &Path,
    db: &Path,
    config: &ScipIndexers,
    force: bool,
    cancel: &AtomicUsize,
) -> Result<(Vec<Outcome>, BTreeMap<String, String>), StoreError> {
    let mut outcomes = Vec::new();
    let mut skipped = BTreeMap::new();
    let languages = languages_of(store)?;
    for indexer in Indexer::ALL {
        let present: Vec<&str> = indexer
            .languages()
            .iter()
            .copied()
            .filter(|l| languages.contains(*l))
            .collect();
        if present.is_empty() {
            continue;
        }
        let why_not = if !config.enabled {
            Some("SCIP indexers are off".to_owned())
        } else if indexer == Indexer::RustAnalyzer && !config.rust_analyzer {
            Some(
                "rust-analyzer is off unless the operator allows it: it runs cargo, which runs what the repository configures"
                    .to_owned(),
            )
        } else {
            None
        };
        let program = match why_not {
            Some(why) => Err(why),
            None => find_program(indexer, config),
        };
        let program = match program {
            Ok(program) => program,
            Err(why) => {
                for language in present {
                    skipped.insert(language.to_owned(), why.clone());
                }
                continue;
            }
        };
        if cancel.load(Ordering::Relaxed) != 0 {
            break;
        }
        let job = Job {
            root,
            config,
            indexer,
            program: &program,
            cancel,
        };
        outcomes.push(run_one(store, db, &job, &present, force)?);
    }
    Ok((outcomes, skipped))
}

/// The languages the index has files of.
fn languages_of(store: &Store) -> Result<BTreeSet<String>, StoreError> {
    let mut statement = store
        .conn
        .prepare("SELECT DISTINCT language FROM files")
        .map_err(|e| store.error(e))?;
    let rows = statement
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(|e| store.error(e))?;
    rows.collect::<Result<_, _>>().map_err(|e| store.error(e))
}

/// The indexer's program: the operator's, else the first on the search
/// path; rust-analyzer must also answer `--version` (rustup's proxy is on
/// `PATH` without the component).
fn find_program(indexer: Indexer, config: &ScipIndexers) -> Result<PathBuf, String> {
    let name = indexer.name();
    let program = match config.programs.get(name) {
        Some(path) if path.is_file() => path.clone(),
        Some(path) => {
            return Err(format!(
                "{name} is configured as {}, which is not a file",
                path.display()
            ));
        }
        None => {
            let path = search_path(config);
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| is_executable(candidate))
                .ok_or_else(|| format!("{name} is not installed (not on PATH)"))?
        }
    };
    if indexer == Indexer::RustAnalyzer {
        let answered = Command::new(&program)
            .arg("--version")
            .env_clear()
            .env("PATH", search_path(config))
            .envs(rust_homes())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("{name} cannot be run: {e}"))?;
        if !answered.status.success() {
            let said = String::from_utf8_lossy(&answered.stderr);
            return Err(format!(
                "{name} is not installed: {}",
                said.trim()
                    .lines()
                    .next()
                    .unwrap_or("it did not answer --version")
            ));
        }
    }
    Ok(program)
}

fn search_path(config: &ScipIndexers) -> OsString {
    config
        .search_path
        .clone()
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where rustup and cargo keep their toolchains, for rust-analyzer (whose
/// rustup proxy and cargo look there, not under the scratch `HOME`).
fn rust_homes() -> Vec<(&'static str, OsString)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    ["CARGO_HOME", "RUSTUP_HOME"]
        .into_iter()
        .filter_map(|key| {
            let default = home.as_ref().map(|h| {
                h.join(if key == "CARGO_HOME" {
                    ".cargo"
                } else {
                    ".rustup"
                })
                .into_os_string()
            });
            std::env::var_os(key).or(default).map(|v| (key, v))
        })
        .collect()
}

/// The directory beside the index file `db` that keeps the indexers'
/// outputs and their scratch directories.
pub(crate) fn work_dir(db: &Path) -> PathBuf {
    db.with_extension("scip.d")
}

/// Runs the job's indexer, unless what it sees is what it saw last time.
fn run_one(
    store: &Store,
    db: &Path,
    job: &Job,
    languages: &[&str],
    force: bool,
) -> Result<Outcome, StoreError> {
    let (indexer, root, cancel) = (job.indexer, job.root, job.cancel);
    let name = indexer.name();
    let (stamp, files) = stamp(store, job.program, languages)?;
    let work = work_dir(db);
    let output = work.join(format!("{name}.scip"));
    let key = format!("scip_indexer:{name}");
    let last: Option<LastRun> = store.meta(&key).and_then(|s| serde_json::from_str(&s).ok());
    if let Some(last) = last.filter(|l| !force && l.stamp == stamp)
        && (!last.ok || output.is_file())
    {
        let result = if last.ok {
            Ok(output)
        } else {
            Err(last.how.clone())
        };
        let how = if last.ok {
            format!("not rerun, its files unchanged (last {})", last.how)
        } else {
            "its files are unchanged since it failed".to_owned()
        };
        return Ok(Outcome {
            indexer,
            result,
            how,
            stamp,
        });
    }
    let started = Instant::now();
    let ran = run(job, &files, &work, &output);
    let seconds = started.elapsed().as_secs_f64();
    let (result, how) = match ran {
        Ok(()) => (Ok(output), format!("ran in {seconds:.1} s")),
        Err(why) => {
            let _ = std::fs::remove_file(&output);
            (Err(why.clone()), why)
        }
    };
    let cancelled = cancel.load(Ordering::Relaxed) != 0;
    if !cancelled {
        let last = LastRun {
            stamp: stamp.clone(),
            ok: result.is_ok(),
            how: match &result {
                Ok(_) => how.clone(),
                Err(why) => why.clone(),
            },
        };
        let last = serde_json::to_string(&last).expect("serializes");
        store.set_meta(&key, &last)?;
    }
    tracing::info!(indexer = name, root = %root.display(), "{how}");
    Ok(Outcome {
        indexer,
        result,
        how,
        stamp,
    })
}

/// What `indexer` sees: its program (path, size, time) and the content of
/// its languages' files; and those files.
fn stamp(
    store: &Store,
    program: &Path,
    languages: &[&str],
) -> Result<(String, Vec<String>), StoreError> {
    let mut files = Vec::new();
    let mut hasher = Sha256::new();
    hasher.update(program.as_os_str().as_encoded_bytes());
    if let Ok(m) = std::fs::metadata(program) {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        hasher.update(format!("\0{}\0{mtime}\0", m.len()));
    }
    let marks = vec!["?"; languages.len()].join(",");
    let mut statement = store
        .conn
        .prepare(&format!(
            "SELECT path, hash FROM files WHERE language IN ({marks}) ORDER BY path"
        ))
        .map_err(|e| store.error(e))?;
    let mut rows = statement
        .query(rusqlite::params_from_iter(languages))
        .map_err(|e| store.error(e))?;
    while let Some(row) = rows.next().map_err(|e| store.error(e))? {
        files.push(row.get::<_, String>(0).map_err(|e| store.error(e))?);
        for column in 0..2 {
            let value = row.get_ref(column).map_err(|e| store.error(e))?;
            hasher.update(value.as_bytes().unwrap_or_default());
            hasher.update([0]);
        }
    }
    let stamp = hasher.finalize()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((stamp, files))
}

/// Runs the indexer once: its index to `output` (through a temporary file
/// renamed when it succeeded), its scratch directory removed after.
fn run(job: &Job, files: &[String], work: &Path, output: &Path) -> Result<(), String> {
    let name = job.indexer.name();
    let scratch = work.join(format!("{name}.run"));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let partial = work.join(format!("{name}.scip.partial"));
    let _ = std::fs::remove_file(&partial);
    let result = job
        .indexer
        .args(job.root, &partial, &scratch, files)
        .map_err(|e| format!("cannot write its configuration: {e}"))
        .and_then(|args| supervise(job, &args, &scratch, &partial))
        .and_then(|()| {
            std::fs::rename(&partial, output).map_err(|e| format!("wrote no index ({e})"))
        });
    let _ = std::fs::remove_file(&partial);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Starts the program and waits for it within the bounds; Ok when it
/// exited 0.
fn supervise(job: &Job, args: &[OsString], scratch: &Path, partial: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let Job {
        root,
        config,
        indexer,
        program,
        cancel,
    } = *job;
    let name = indexer.name();
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", search_path(config))
        .env("HOME", scratch)
        .env("TMPDIR", scratch)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a kill reaches whatever it started.
        .process_group(0);
    if indexer == Indexer::RustAnalyzer {
        command.envs(rust_homes());
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("{name} could not start: {e}"))?;
    let printed = Arc::new(Mutex::new(Tail::default()));
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|pipe| {
        let printed = printed.clone();
        std::thread::spawn(move || drain(pipe, &printed))
    })
    .collect();
    let started = Instant::now();
    let pgid = child.id() as i32;
    let stopped = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(format!("{name}: waiting for it failed: {e}")),
        }
        let why = if cancel.load(Ordering::Relaxed) != 0 {
            Some("cancelled".to_owned())
        } else if started.elapsed() >= config.timeout {
            Some(format!(
                "{name} timed out after {} s",
                config.timeout.as_secs()
            ))
        } else if std::fs::metadata(partial).is_ok_and(|m| m.len() > MAX_OUTPUT_BYTES) {
            Some(format!(
                "{name} wrote more than {} MiB",
                MAX_OUTPUT_BYTES >> 20
            ))
        } else {
            None
        };
        if let Some(why) = why {
            weir_proc::signal_group(pgid, weir_proc::Signal::KILL);
            let _ = child.kill();
            let _ = child.wait();
            break Err(why);
        }
        std::thread::sleep(POLL);
    };
    // What it started may hold the pipes open after it exits.
    weir_proc::signal_group(pgid, weir_proc::Signal::KILL);
    for reader in readers {
        let _ = reader.join();
    }
    let status = stopped?;
    if status.success() {
        return Ok(());
    }
    let said = printed.lock().expect("printed").text();
    Err(format!(
        "{name} failed ({status}){}",
        match last_lines(&said) {
            s if s.is_empty() => String::new(),
            s => format!(": {s}"),
        }
    ))
}

/// The last bytes of what a program printed.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
        if self.0.len() > 2 * KEPT_PRINTED {
            self.0.drain(..self.0.len() - KEPT_PRINTED);
        }
    }

    fn text(&self) -> String {
        let start = self.0.len().saturating_sub(KEPT_PRINTED);
        String::from_utf8_lossy(&self.0[start..]).into_owned()
    }
}

/// Reads a pipe to its end, keeping the tail.
fn drain(mut pipe: Box<dyn Read + Send>, printed: &Mutex<Tail>) {
    let mut buffer = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buffer) {
        if n == 0 {
            break;
        }
        printed.lock().expect("printed").push(&buffer[..n]);
    }
}

/// The last few non-empty lines, joined: what a failure message needs.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    let joined = tail.join(" | ");
    if joined.chars().count() > 600 {
        let skip = joined.chars().count() - 600;
        format!("…{}", joined.chars().skip(skip).collect::<String>())
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut tail = Tail::default();
        for _ in 0..10_000 {
            tail.push(b"noise\n");
        }
        tail.push(b"Error: the real cause\n");
        assert!(tail.text().len() <= KEPT_PRINTED);
        assert!(last_lines(&tail.text()).ends_with("Error: the real cause"));
    }

    #[test]
    fn languages_map_to_their_indexer() {
        assert_eq!(Indexer::of("python"), Some(Indexer::Python));
        assert_eq!(Indexer::of("tsx"), Some(Indexer::TypeScript));
        assert_eq!(Indexer::of("javascript"), Some(Indexer::TypeScript));
        assert_eq!(Indexer::of("rust"), Some(Indexer::RustAnalyzer));
        assert_eq!(Indexer::of("go"), None);
    }
}
