//! Building and refreshing a repository's index: walk the tree as git sees
//! it, parse what changed on every core, write one file at a time.
//!
//! **Incremental.** A file whose modification time and size match the index
//! is skipped unread; one whose time changed but whose content hash did not
//! only gets its time stamp updated; files gone from the tree are dropped.
//! **Hostile repositories.** Files are read with `repo::read_beneath` (no
//! symlink out of the root); git's HEAD, history and dirty flag come from
//! `git.rs` and `gitindex.rs`, which let nothing the repository configures
//! run.
//! **Cancellable.** The flag is checked between files and handed to
//! tree-sitter, which stops mid-parse; what was written stays (each file is
//! whole), so the next run carries on from there.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tree_sitter_tags::TagsContext;

use crate::extract::{ExtractError, Extracted, extract};
use crate::git::{self, GitDir};
use crate::gitindex;
use crate::history::{self, History};
use crate::language::Language;
use crate::manifest;
use crate::repo;
use crate::scip;
use crate::scip_indexers::{self, LanguageBackend, ScipIndexers};
use crate::store::{FileRow, KnownFile, Store, StoreError};

/// Files larger than this are skipped: generated or vendored blobs, whose
/// symbols nobody navigates and whose parse would dominate the run.
const MAX_FILE_BYTES: u64 = 2 << 20;

/// How often the writer commits, so readers see the index grow.
const COMMIT_EVERY: Duration = Duration::from_millis(500);

/// How an index run goes.
#[derive(Clone, Debug, Default)]
pub struct IndexOptions {
    /// Parser threads; 0 means one per core.
    pub threads: usize,
    /// Re-parse every file, changed or not.
    pub force: bool,
    /// The highest directory git's data may be read from: the `.git` is
    /// looked for from the repository up to it, and one found above it, or
    /// named by a `.git` file, `commondir` or `objects/info/alternates`
    /// outside it, is not read (the report says so). For a caller, the operator's root the repository
    /// is in; `None`: the repository itself.
    pub git_boundary: Option<PathBuf>,
    /// The SCIP indexers run for the repository's languages (by default
    /// those on `PATH`; see [`ScipIndexers`]).
    pub scip_indexers: ScipIndexers,
}

/// Where an index run stands, as it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexProgress {
    /// Files handled so far (parsed, or found unchanged).
    pub done: u64,
    /// Source files in the tree; 0 while the tree is being walked.
    pub total: u64,
    /// The file handled last, relative to the root.
    pub current: String,
}

/// What an index run did.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct IndexReport {
    /// Source files in the index now.
    pub files: u64,
    /// Files parsed this run.
    pub parsed: u64,
    /// Files skipped because they had not changed.
    pub unchanged: u64,
    /// Files dropped from the index because they are gone.
    pub removed: u64,
    /// Files that could not be read or parsed, with why (the first few).
    pub failed: Vec<String>,
    /// Files skipped as too large.
    pub skipped_large: u64,
    /// Definitions and references in the index now.
    pub definitions: u64,
    /// References (call sites, type uses, implementations) in the index now.
    pub references: u64,
    /// Files per language in the index now.
    pub languages: BTreeMap<String, u64>,
    /// Wall time of the run.
    pub elapsed_ms: u64,
    /// The index's content, as one id: changes when any file's does.
    pub state_id: String,
    /// The repository's git commit, when it is a git work tree.
    pub git_head: Option<String>,
    /// Whether tracked files differ from that commit.
    pub dirty: bool,
    /// Documents of the repository's `index.scip` in the index (0 without
    /// one): their references are exact.
    pub scip_documents: u64,
    /// Occurrences read from `index.scip`.
    pub scip_occurrences: u64,
    /// Per language: where its references come from (a SCIP indexer, the
    /// repository's `index.scip`, or the tags) and why.
    pub backends: BTreeMap<String, LanguageBackend>,
    /// Packages the manifests declare (`Cargo.toml`, `package.json`,
    /// `pyproject.toml`, `go.mod`).
    pub packages: u64,
    /// Commits of git history read for churn and co-change (0 outside git).
    pub git_commits: u64,
    /// What was left out, and why: `index.scip` documents naming files
    /// outside the repository, a git directory outside the boundary, a git
    /// index that could not be read.
    pub warnings: Vec<String>,
}

/// Why an index run stopped.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The path is not a directory that can be read.
    #[error("cannot index {path}: {why}")]
    BadRoot {
        /// The path given.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The index file failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The cancellation flag was raised; the files done so far are kept.
    #[error("indexing cancelled after {done} of {total} files (those are kept)")]
    Cancelled {
        /// Files done.
        done: u64,
        /// Files in all.
        total: u64,
    },
}

/// A source file found by the walk.
struct Found {
    relative: String,
    language: Language,
    mtime_ns: i64,
    size: i64,
}

/// What a parser thread hands the writer.
enum Parsed {
    /// New content, and what is in it.
    Fresh {
        file: Found,
        hash: String,
        extracted: Extracted,
    },
    /// Same content as indexed, new time stamp.
    Touched { file: Found, id: i64 },
    /// Unreadable or unparsable.
    Failed { file: Found, why: String },
}

/// Indexes the repository at `root` into the index file `db`, reporting
/// progress to `progress` after every file; `cancel` non-zero stops it.
pub fn index_repository(
    root: &Path,
    db: &Path,
    options: &IndexOptions,
    cancel: &AtomicUsize,
    progress: &mut dyn FnMut(&IndexProgress),
) -> Result<IndexReport, IndexError> {
    let started = Instant::now();
    let bad_root = |why: String| IndexError::BadRoot {
        path: root.to_owned(),
        why,
    };
    if !root.is_dir() {
        return Err(bad_root("not a directory".into()));
    }
    let mut report = IndexReport::default();
    let store = Store::open(db)?;
    let mut known = store.known_files()?;
    progress(&IndexProgress {
        done: 0,
        total: 0,
        current: String::new(),
    });
    let mut manifests = Vec::new();
    let found = walk(root, &mut report, &mut manifests, cancel).map_err(bad_root)?;
    let total = found.len() as u64;
    let mut work = Vec::new();
    let mut unchanged = 0;
    let walked: std::collections::HashSet<&str> =
        found.iter().map(|f| f.relative.as_str()).collect();
    let gone: Vec<i64> = known
        .iter()
        .filter(|(path, _)| !walked.contains(path.as_str()))
        .map(|(_, file)| file.id)
        .collect();
    for file in found {
        match known.get(&file.relative) {
            Some(k) if !options.force && k.mtime_ns == file.mtime_ns && k.size == file.size => {
                unchanged += 1
            }
            _ => work.push(file),
        }
    }
    report.unchanged = unchanged;
    store
        .conn
        .execute_batch("BEGIN")
        .map_err(|e| store.error(e))?;
    for id in &gone {
        store.remove_file(*id)?;
    }
    report.removed = gone.len() as u64;
    let mut done = unchanged;
    progress(&IndexProgress {
        done,
        total,
        current: String::new(),
    });
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(work.len().max(1));
    let next = AtomicUsize::new(0);
    let (sender, received) = mpsc::sync_channel::<Parsed>(64);
    let jobs: Vec<std::sync::Mutex<Option<Found>>> = work
        .into_iter()
        .map(|f| std::sync::Mutex::new(Some(f)))
        .collect();
    let written = std::thread::scope(|scope| {
        for _ in 0..threads {
            let sender = sender.clone();
            let (jobs, next, known, force) = (&jobs, &next, &known, options.force);
            scope.spawn(move || {
                let mut context = TagsContext::new();
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    if at >= jobs.len() || cancel.load(Ordering::Relaxed) != 0 {
                        break;
                    }
                    let file = jobs[at]
                        .lock()
                        .expect("job lock")
                        .take()
                        .expect("taken once");
                    let parsed = parse(&mut context, root, file, known, force, cancel);
                    if sender.send(parsed).is_err() {
                        break;
                    }
                }
            });
        }
        drop(sender);
        write_all(
            &store,
            received,
            &mut report,
            &mut done,
            total,
            cancel,
            progress,
        )
    });
    let committed = store
        .conn
        .execute_batch("COMMIT")
        .map_err(|e| store.error(e));
    written?;
    committed?;
    if cancel.load(Ordering::Relaxed) != 0 {
        return Err(IndexError::Cancelled { done, total });
    }
    known.clear();
    ingest_manifests(&store, root, &manifests, &mut report)?;
    ingest_scip(&store, root, db, options, cancel, &mut report)?;
    if cancel.load(Ordering::Relaxed) != 0 {
        return Err(IndexError::Cancelled { done, total });
    }
    let boundary = options.git_boundary.as_deref().unwrap_or(root);
    let git = match git::discover(root, boundary) {
        git::Found::Dir(dir) => Some(dir),
        git::Found::Outside(warning) => {
            report.warnings.push(warning);
            None
        }
        git::Found::None => None,
    };
    summarize(&store, root, git.as_ref(), &mut report)?;
    ingest_history(&store, root, git.as_ref(), options.force, &mut report)?;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Writes what the parsers send until they are done, committing now and
/// then; stops early (after committing) when cancelled.
fn write_all(
    store: &Store,
    received: mpsc::Receiver<Parsed>,
    report: &mut IndexReport,
    done: &mut u64,
    total: u64,
    cancel: &AtomicUsize,
    progress: &mut dyn FnMut(&IndexProgress),
) -> Result<(), StoreError> {
    let mut last_commit = Instant::now();
    for parsed in received {
        let current = match parsed {
            Parsed::Fresh {
                file,
                hash,
                extracted,
            } => {
                if let Ok(id) = store.conn.query_row(
                    "SELECT id FROM files WHERE path = ?1",
                    [&file.relative],
                    |row| row.get::<_, i64>(0),
                ) {
                    store.remove_file(id)?;
                }
                store.put_file(
                    &FileRow {
                        path: &file.relative,
                        language: file.language.name(),
                        mtime_ns: file.mtime_ns,
                        size: file.size,
                        hash: &hash,
                        is_test: is_test_path(&file.relative),
                    },
                    &extracted,
                )?;
                report.parsed += 1;
                file.relative
            }
            Parsed::Touched { file, id } => {
                store.touch_file(id, file.mtime_ns, file.size)?;
                report.unchanged += 1;
                file.relative
            }
            Parsed::Failed { file, why } => {
                if report.failed.len() < 20 {
                    report.failed.push(format!("{}: {why}", file.relative));
                }
                file.relative
            }
        };
        *done += 1;
        progress(&IndexProgress {
            done: *done,
            total,
            current,
        });
        if cancel.load(Ordering::Relaxed) != 0 {
            break; // the parsers stop at their next file
        }
        if last_commit.elapsed() >= COMMIT_EVERY {
            store
                .conn
                .execute_batch("COMMIT; BEGIN")
                .map_err(|e| store.error(e))?;
            last_commit = Instant::now();
        }
    }
    Ok(())
}

/// One file, on a parser thread.
fn parse(
    context: &mut TagsContext,
    root: &Path,
    file: Found,
    known: &HashMap<String, KnownFile>,
    force: bool,
    cancel: &AtomicUsize,
) -> Parsed {
    // The walk saw a regular file; opened beneath the root all the same,
    // in case it became a symlink out since.
    let source = match repo::read_beneath(root, &file.relative, MAX_FILE_BYTES) {
        Ok(source) => source,
        Err(error) => {
            return Parsed::Failed {
                file,
                why: error.to_string(),
            };
        }
    };
    let hash = content_hash(&source);
    if let Some(k) = known.get(&file.relative)
        && k.hash == hash
        && !force
    {
        let id = k.id;
        return Parsed::Touched { file, id };
    }
    match extract(context, file.language, &source, Some(cancel)) {
        Ok(extracted) => Parsed::Fresh {
            file,
            hash,
            extracted,
        },
        Err(ExtractError::Cancelled) => Parsed::Failed {
            file,
            why: "cancelled".into(),
        },
        Err(ExtractError::Tags(why)) => Parsed::Failed { file, why },
    }
}

fn content_hash(source: &[u8]) -> String {
    let digest = Sha256::digest(source);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The source files under `root`, as git would see them (.gitignore,
/// .ignore, hidden files left out), sorted by path.
fn walk(
    root: &Path,
    report: &mut IndexReport,
    manifests: &mut Vec<String>,
    cancel: &AtomicUsize,
) -> Result<Vec<Found>, String> {
    let mut found = Vec::new();
    // The walker reads the ignore files of the root and of every directory
    // above it (a subdirectory of a work tree keeps its parents' rules):
    // patterns only, but one that is a FIFO would block it forever.
    if let Some(path) = root.ancestors().find_map(odd_ignore_file) {
        return Err(format!(
            "{} is not a regular file: the ignore rules cannot be read",
            path.display()
        ));
    }
    let walker = ignore::WalkBuilder::new(root)
        // .gitignore counts even outside a git work tree (an unpacked
        // archive, a copied tree).
        .require_git(false)
        // Runs before the walker reads a directory's ignore files: one that
        // is a FIFO (which would block the open forever) leaves its
        // directory out.
        .filter_entry(|entry| {
            !entry.file_type().is_some_and(|t| t.is_dir())
                || odd_ignore_file(entry.path()).is_none()
        })
        .build();
    for entry in walker {
        if cancel.load(Ordering::Relaxed) != 0 {
            break;
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(language) = Language::of(entry.path()) else {
            if let Some(name) = entry.file_name().to_str()
                && manifest::is_manifest(name)
                && let Ok(relative) = entry.path().strip_prefix(root)
                && let Some(relative) = relative.to_str()
            {
                manifests.push(relative.replace(std::path::MAIN_SEPARATOR, "/"));
            }
            continue;
        };
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        if metadata.len() > MAX_FILE_BYTES {
            report.skipped_large += 1;
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(relative) = relative.to_str() else {
            continue; // a name that is not UTF-8 cannot be answered about
        };
        let mtime_ns = metadata
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        found.push(Found {
            relative: relative.replace(std::path::MAIN_SEPARATOR, "/"),
            language,
            mtime_ns,
            size: metadata.len() as i64,
        });
    }
    if found.is_empty() && cancel.load(Ordering::Relaxed) == 0 {
        std::fs::read_dir(root).map_err(|e| e.to_string())?;
    }
    found.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(found)
}

/// The first ignore file the walker would read in `dir` that exists but is
/// not a regular file (a FIFO, a device, a directory).
fn odd_ignore_file(dir: &Path) -> Option<PathBuf> {
    [".gitignore", ".ignore", ".git", ".git/info/exclude"]
        .iter()
        .map(|name| dir.join(name))
        .find(|path| {
            // A dangling symlink is fine: its open fails at once.
            std::fs::metadata(path)
                .is_ok_and(|m| !(m.is_file() || m.is_dir() && path.ends_with(".git")))
        })
}

/// Whether the work tree of `git` differs from its HEAD (whose id is
/// `head_len` hex digits long): staged changes (git, reading objects only),
/// or tracked files that differ from git's index (read here, so no
/// fsmonitor, hook or filter of the repository's runs). When that cannot
/// be told, dirty, with a warning.
fn dirty(git: &GitDir, head_len: usize, warnings: &mut Vec<String>) -> bool {
    if git::staged_changes(git).unwrap_or(false) {
        return true;
    }
    let oid_len = if head_len == 64 { 32 } else { 20 };
    match gitindex::work_tree_changed(&git.work_tree, &git.git_dir, oid_len) {
        Ok(changed) => changed,
        Err(why) => {
            warnings.push(format!("{why}: the work tree is taken to be dirty"));
            true
        }
    }
}

/// Whether a path looks like a test by the conventions of its language.
pub(crate) fn is_test_path(path: &str) -> bool {
    let mut parts = path.split('/');
    let name = parts.next_back().unwrap_or_default();
    if parts.any(|dir| {
        matches!(
            dir,
            "test" | "tests" | "__tests__" | "spec" | "specs" | "testdata"
        )
    }) {
        return true;
    }
    let stem = name.split('.').next().unwrap_or_default();
    name.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || name.contains(".test.")
        || name.contains(".spec.")
        || name == "conftest.py"
        || (name.ends_with(".java") && (stem.ends_with("Test") || stem.ends_with("Tests")))
}

/// Largest manifest read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Reads the manifests the walk found (every run: they are few and small)
/// into the packages and their edges.
fn ingest_manifests(
    store: &Store,
    root: &Path,
    paths: &[String],
    report: &mut IndexReport,
) -> Result<(), StoreError> {
    let mut files = Vec::new();
    for path in paths {
        match repo::read_beneath(root, path, MAX_MANIFEST_BYTES) {
            Ok(content) => files.push((path.clone(), content)),
            Err(error) => report.warnings.push(format!("{path}: {error}")),
        }
    }
    let packages = manifest::resolve(&files);
    report
        .warnings
        .extend(packages.warnings.iter().take(20).cloned());
    report.packages = packages.packages.len() as u64;
    store
        .conn
        .execute_batch("BEGIN")
        .map_err(|e| store.error(e))?;
    store.replace_packages(&packages)?;
    store
        .conn
        .execute_batch("COMMIT")
        .map_err(|e| store.error(e))
}

/// Reads the SCIP data into the index: the repository's own `index.scip`
/// and what the SCIP indexers wrote (run now if their files changed; see
/// `scip_indexers.rs`), merged, the repository's first. Re-read only when
/// one of them changed; what a part that is gone left is dropped. A part
/// that does not decode is reported, not fatal: the tags still answer.
fn ingest_scip(
    store: &Store,
    root: &Path,
    db: &Path,
    options: &IndexOptions,
    cancel: &AtomicUsize,
    report: &mut IndexReport,
) -> Result<(), StoreError> {
    let path = root.join(scip::FILE_NAME);
    let supplied = std::fs::symlink_metadata(&path).ok().map(|m| {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        format!("{mtime}:{}", m.len())
    });
    let (mut outcomes, skipped) = scip_indexers::run_all(
        store,
        root,
        db,
        &options.scip_indexers,
        options.force,
        cancel,
    )?;
    let stamp_of = |outcomes: &[scip_indexers::Outcome]| {
        let mut stamp = supplied.clone().unwrap_or_default();
        for outcome in outcomes.iter().filter(|o| o.result.is_ok()) {
            stamp.push_str(&format!("|{}:{}", outcome.indexer.name(), outcome.stamp));
        }
        (!stamp.is_empty()).then_some(stamp)
    };
    let known = store.meta("scip_stamp").filter(|s| !s.is_empty());
    if options.force || stamp_of(&outcomes) != known {
        let mut parts = Vec::new();
        if supplied.is_some() {
            match scip::read(scip::FILE_NAME, root) {
                Ok(index) => parts.push((scip::FILE_NAME.to_owned(), index)),
                Err(error) => report.failed.push(error.to_string()),
            }
        }
        for outcome in &mut outcomes {
            let Ok(file) = &outcome.result else { continue };
            let name = outcome.indexer.name();
            let read = std::fs::read(file)
                .map_err(|e| format!("{name}'s index cannot be read: {e}"))
                .and_then(|bytes| {
                    scip::parse(&bytes)
                        .map_err(|e| format!("{name} wrote an index that does not decode: {e}"))
                });
            match read {
                Ok(index) => parts.push((name.to_owned(), index)),
                Err(why) => outcome.result = Err(why),
            }
        }
        let merged = (!parts.is_empty()).then(|| scip::merge(parts, root));
        let mut covered: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for (path, source) in merged.iter().flat_map(|(_, sources)| sources) {
            if let Some(language) = Language::of(Path::new(path)) {
                *covered
                    .entry(source.clone())
                    .or_default()
                    .entry(language.name().to_owned())
                    .or_default() += 1;
            }
        }
        let index = merged.map(|(index, _)| index);
        store
            .conn
            .execute_batch("BEGIN")
            .map_err(|e| store.error(e))?;
        store.replace_scip(index.as_ref())?;
        let stamp = if index.is_some() {
            stamp_of(&outcomes)
        } else {
            None
        };
        store.set_meta("scip_stamp", stamp.as_deref().unwrap_or(""))?;
        // Kept, so every later run (which reads the file only when it
        // changed) still reports what was dropped.
        let dropped = index.as_ref().map(|i| i.dropped.join("\n"));
        store.set_meta("scip_dropped", dropped.as_deref().unwrap_or(""))?;
        let covered = serde_json::to_string(&covered).expect("serializes");
        store.set_meta("scip_covered", &covered)?;
        store
            .conn
            .execute_batch("COMMIT")
            .map_err(|e| store.error(e))?;
    }
    let count = |sql: &str| {
        store
            .conn
            .query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| store.error(e))
    };
    report.scip_documents = count("SELECT COUNT(*) FROM scip_documents")?;
    let dropped = store.meta("scip_dropped").unwrap_or_default();
    let dropped: Vec<&str> = dropped.lines().filter(|l| !l.is_empty()).collect();
    const SHOWN: usize = 20;
    report
        .warnings
        .extend(dropped.iter().take(SHOWN).map(|l| (*l).to_owned()));
    if dropped.len() > SHOWN {
        report.warnings.push(format!(
            "index.scip: {} more documents dropped",
            dropped.len() - SHOWN
        ));
    }
    report.scip_occurrences = count("SELECT COUNT(*) FROM scip_occurrences")?;
    report.backends = backends(store, &outcomes, &skipped)?;
    for outcome in &outcomes {
        if let Err(why) = &outcome.result {
            report.warnings.push(format!(
                "{why}; {} answer from the tags",
                outcome.indexer.languages().join("/")
            ));
        }
    }
    Ok(())
}

/// Where each language's references come from: its indexer when that
/// covered some of its files, else the repository's `index.scip` when that
/// did, else the tags; with why.
fn backends(
    store: &Store,
    outcomes: &[scip_indexers::Outcome],
    skipped: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, LanguageBackend>, StoreError> {
    let covered: BTreeMap<String, BTreeMap<String, u64>> = store
        .meta("scip_covered")
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let covered_by = |source: &str, language: &str| {
        covered
            .get(source)
            .and_then(|by| by.get(language))
            .copied()
            .unwrap_or(0)
    };
    let mut statement = store
        .conn
        .prepare("SELECT language, COUNT(*) FROM files GROUP BY language")
        .map_err(|e| store.error(e))?;
    let languages: Vec<(String, u64)> = statement
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
        .map_err(|e| store.error(e))?
        .collect::<Result<_, _>>()
        .map_err(|e| store.error(e))?;
    let mut out = BTreeMap::new();
    for (language, files) in languages {
        let indexer = scip_indexers::Indexer::of(&language);
        let outcome = outcomes.iter().find(|o| Some(o.indexer) == indexer);
        let supplied = covered_by(scip::FILE_NAME, &language);
        let backend = match outcome {
            Some(o) if o.result.is_ok() && covered_by(o.indexer.name(), &language) > 0 => {
                let n = covered_by(o.indexer.name(), &language);
                LanguageBackend {
                    backend: o.indexer.name().into(),
                    why: format!("{}; {n} of {files} files", o.how),
                    scip_files: n + supplied,
                }
            }
            _ if supplied > 0 => LanguageBackend {
                backend: scip::FILE_NAME.into(),
                why: format!("the repository's index.scip covers {supplied} of {files} files"),
                scip_files: supplied,
            },
            _ => LanguageBackend {
                backend: "tags".into(),
                why: match (outcome, indexer) {
                    (Some(o), _) => match &o.result {
                        Err(why) => why.clone(),
                        Ok(_) => format!("{} indexed none of its files", o.indexer.name()),
                    },
                    (None, Some(_)) => skipped
                        .get(&language)
                        .cloned()
                        .unwrap_or_else(|| "its indexer did not run".into()),
                    (None, None) => "weir runs no SCIP indexer for it".into(),
                },
                scip_files: 0,
            },
        };
        out.insert(language, backend);
    }
    Ok(out)
}

/// Reads git history for churn and co-change when HEAD moved since it was
/// last read (or when forced).
fn ingest_history(
    store: &Store,
    root: &Path,
    git: Option<&GitDir>,
    force: bool,
    report: &mut IndexReport,
) -> Result<(), StoreError> {
    let head = report.git_head.clone().unwrap_or_default();
    if force || store.meta("history_head").unwrap_or_default() != head {
        let history = match git.filter(|_| !head.is_empty()) {
            Some(git) => history::read(git, root, history::MAX_COMMITS).unwrap_or_default(),
            None => History::default(),
        };
        store
            .conn
            .execute_batch("BEGIN")
            .map_err(|e| store.error(e))?;
        store.replace_history(&history)?;
        store.set_meta("history_head", &head)?;
        store.set_meta("history_commits", &history.commits.to_string())?;
        store
            .conn
            .execute_batch("COMMIT")
            .map_err(|e| store.error(e))?;
    }
    report.git_commits = store
        .meta("history_commits")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Ok(())
}

/// Counts, the state id and git's view, into the report and the index.
fn summarize(
    store: &Store,
    root: &Path,
    git: Option<&GitDir>,
    report: &mut IndexReport,
) -> Result<(), StoreError> {
    let conn = &store.conn;
    let fail = |e| store.error(e);
    let count = |sql: &str| {
        conn.query_row(sql, [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
    };
    report.files = count("SELECT COUNT(*) FROM files").map_err(fail)?;
    report.definitions = count("SELECT COUNT(*) FROM symbols WHERE is_def = 1").map_err(fail)?;
    report.references = count("SELECT COUNT(*) FROM symbols WHERE is_def = 0").map_err(fail)?;
    let mut statement = conn
        .prepare("SELECT language, COUNT(*) FROM files GROUP BY language")
        .map_err(fail)?;
    report.languages = statement
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
        .map_err(fail)?
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    let mut hasher = Sha256::new();
    let mut statement = conn
        .prepare("SELECT path, hash FROM files ORDER BY path")
        .map_err(fail)?;
    let mut rows = statement.query([]).map_err(fail)?;
    while let Some(row) = rows.next().map_err(fail)? {
        hasher.update(row.get_ref(0).map_err(fail)?.as_bytes().unwrap_or_default());
        hasher.update([0]);
        hasher.update(row.get_ref(1).map_err(fail)?.as_bytes().unwrap_or_default());
        hasher.update([0]);
    }
    // A new index.scip changes answers as much as a changed file does.
    hasher.update(store.meta("scip_stamp").unwrap_or_default());
    report.state_id = hasher.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    report.git_head = git.and_then(git::head);
    if let (Some(git), Some(head)) = (git, &report.git_head) {
        report.dirty = dirty(git, head.len(), &mut report.warnings);
    }
    store.set_meta("root", &root.display().to_string())?;
    store.set_meta("state_id", &report.state_id)?;
    store.set_meta("indexed_at_ms", &weir_runtime::now_ms().to_string())?;
    store.set_meta("git_head", report.git_head.as_deref().unwrap_or(""))?;
    store.set_meta("dirty", if report.dirty { "1" } else { "0" })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_are_told_by_path() {
        for path in [
            "tests/it.rs",
            "src/__tests__/a.js",
            "pkg/x_test.go",
            "lib/test_shapes.py",
            "web/a.test.ts",
            "spec/a_spec.rb",
            "src/FooTest.java",
        ] {
            assert!(is_test_path(path), "{path}");
        }
        for path in ["src/lib.rs", "latest.py", "contest.go", "src/Testing.java"] {
            assert!(!is_test_path(path), "{path}");
        }
    }
}
