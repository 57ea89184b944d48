//! `weir index PATH`: index a repository for the code intelligence tools,
//! into the same place `weir serve` keeps its indexes, with a progress bar
//! on a terminal's stderr. Ctrl-C stops it between files (the files done
//! are kept, so the next run carries on).
//!
//! The operator names the repository, so any directory may be indexed
//! (`weir serve`'s callers name only ones inside its `--root`s); what the
//! repository holds is still untrusted: see weir-pack-codeintel's docs.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use weir_pack_codeintel::{IndexError, IndexOptions, IndexProgress, index_file, index_repository};

use crate::cli::IndexArgs;
use crate::exit::Outcome;
use crate::progress_bar::ProgressBar;

pub(crate) async fn run(data_dir: &std::path::Path, args: IndexArgs) -> anyhow::Result<Outcome> {
    let root = std::fs::canonicalize(&args.path)
        .with_context(|| format!("cannot open the repository {}", args.path.display()))?;
    let dir = crate::packs::codeintel_dir(data_dir);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the index directory {}", dir.display()))?;
    let db = index_file(&dir, &root);
    let mut interrupts = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    let cancel = Arc::new(AtomicUsize::new(0));
    let latest: Arc<Mutex<Option<IndexProgress>>> = Arc::default();
    let options = IndexOptions {
        threads: args.threads,
        force: args.force,
        // The operator names the repository here, so git's data may come
        // from any directory above it (a subdirectory of a work tree has
        // its history). What the repository itself configures still runs
        // nothing, and its index.scip still reads nothing outside it.
        git_boundary: Some(std::path::PathBuf::from("/")),
        // The SCIP indexers on PATH (scip-python, scip-typescript).
        scip_indexers: Default::default(),
    };
    let mut worker = tokio::task::spawn_blocking({
        let (cancel, latest, root, db) = (cancel.clone(), latest.clone(), root.clone(), db.clone());
        move || {
            index_repository(&root, &db, &options, &cancel, &mut |progress| {
                *latest.lock().expect("progress lock") = Some(progress.clone());
            })
        }
    });
    let mut bar = std::io::stderr().is_terminal().then(ProgressBar::new);
    let mut tick = tokio::time::interval(Duration::from_millis(80));
    let result = loop {
        tokio::select! {
            result = &mut worker => break result.context("the index run panicked")?,
            _ = tick.tick() => {
                if let (Some(bar), Some(progress)) = (bar.as_mut(), latest.lock().expect("progress lock").take()) {
                    let total = (progress.total > 0).then_some(progress.total as f64);
                    bar.update(progress.done as f64, total, Some(&progress.current));
                }
            }
            _ = interrupts.recv() => {
                cancel.store(1, Ordering::SeqCst);
                if let Some(bar) = bar.as_mut() {
                    bar.status("stopping…");
                }
            }
        }
    };
    if let Some(bar) = bar.as_mut() {
        bar.clear();
    }
    match result {
        Ok(report) => {
            if args.json {
                let mut json = serde_json::to_value(&report)?;
                json["root"] = serde_json::json!(root);
                json["index"] = serde_json::json!(db);
                println!("{json}");
            } else {
                let languages: Vec<String> = report
                    .languages
                    .iter()
                    .map(|(l, n)| format!("{l} {n}"))
                    .collect();
                println!(
                    "indexed {} in {}: {} files ({}), {} parsed, {} unchanged, {} removed; {} definitions, {} references",
                    root.display(),
                    crate::output::duration(report.elapsed_ms),
                    report.files,
                    languages.join(", "),
                    report.parsed,
                    report.unchanged,
                    report.removed,
                    report.definitions,
                    report.references,
                );
                for (language, backend) in &report.backends {
                    println!("{language}: {} ({})", backend.backend, backend.why);
                }
                for failed in &report.failed {
                    eprintln!("weir: could not index {failed}");
                }
                for warning in &report.warnings {
                    eprintln!("weir: {warning}");
                }
                println!("index: {}", db.display());
            }
            Ok(Outcome::Completed)
        }
        Err(IndexError::Cancelled { done, total }) => {
            eprintln!(
                "weir: indexing stopped after {done} of {total} files; those are kept, run weir index again to go on"
            );
            Ok(Outcome::Canceled)
        }
        Err(error) => Err(error.into()),
    }
}
