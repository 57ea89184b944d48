//! The tools: arguments in, a streamed answer and a summary out. The
//! compound ones are in `compound.rs`.

mod args;
mod compound;

pub(crate) use compound::{Explore, PrepareChange, Understand};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, FailureCode, Meta, Milestone, RunError};
use weir_runtime::kit::invalid;
use weir_runtime::{Hints, RunContext, Tool, ToolInfo};

use crate::Shared;
use crate::answer::{self, CancelOnDrop, Heartbeat, Page, Streamed, listing, parse_cursor};
use crate::indexer::{IndexError, IndexOptions, IndexProgress, IndexReport, index_repository};
use crate::query::IndexState;
use crate::query::architecture::get_architecture;
use crate::query::references::{ReferencesQuery, find_references};
use crate::query::symbols::{SymbolsQuery, search_symbols};
use crate::repo;
use crate::schemas;
use crate::store::Store;

/// The final result: a headline and the summary as JSON text, and the
/// summary as the structured result.
fn completed(headline: String, summary: Value) -> Completed {
    Completed {
        content: vec![Content::text(headline), Content::text(summary.to_string())],
        structured: Some(summary),
    }
}

/// Indexes `root`, reporting progress as milestones; one index run per
/// repository at a time.
async fn index(
    ctx: &RunContext,
    shared: &Shared,
    root: &Path,
    force: bool,
) -> Result<IndexReport, RunError> {
    let lock = shared.lock_for(root);
    let _held = lock.lock().await;
    let dir = &shared.config.index_dir;
    std::fs::create_dir_all(dir).map_err(|e| {
        RunError::new(
            FailureCode::ToolError,
            format!("cannot create the index directory {}: {e}", dir.display()),
        )
    })?;
    let db = repo::index_file(dir, root);
    let cancel = Arc::new(AtomicUsize::new(0));
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    let (progress, mut watched) = tokio::sync::watch::channel(IndexProgress {
        done: 0,
        total: 0,
        current: String::new(),
    });
    let options = IndexOptions {
        threads: shared.config.threads,
        force,
        // git's data is read only from inside the root the caller's
        // repository is in.
        git_boundary: shared.config.roots.root_of(root).map(Path::to_owned),
        scip_indexers: shared.config.scip_indexers.clone(),
    };
    let root_owned = root.to_owned();
    let mut worker = tokio::task::spawn_blocking(move || {
        index_repository(&root_owned, &db, &options, &cancel, &mut |p| {
            progress.send_replace(p.clone());
        })
    });
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut heartbeat = Heartbeat::new(shared.config.heartbeat);
    let result = loop {
        tokio::select! {
            result = &mut worker => break result,
            _ = tick.tick() => {
                if watched.has_changed().unwrap_or(false) {
                    let p = watched.borrow_and_update().clone();
                    let milestone = if p.total == 0 {
                        Milestone::new("walking").message("finding source files")
                    } else {
                        Milestone::new("indexing").progress(p.done, p.total).message(p.current)
                    };
                    ctx.milestone(milestone).await?;
                    heartbeat.emitted();
                } else if tokio::time::Instant::now() >= heartbeat.due() {
                    // One big file, or git and SCIP at the end: no count moves.
                    let phase = if watched.borrow().total == 0 { "walking" } else { "indexing" };
                    heartbeat.beat(ctx, phase).await?;
                }
            }
        }
    };
    let report = result
        .map_err(|e| RunError::new(FailureCode::Internal, format!("the index run failed: {e}")))?
        .map_err(|error| match error {
            IndexError::BadRoot { .. } => invalid(error.to_string()),
            other => RunError::new(FailureCode::ToolError, other.to_string()),
        })?;
    ctx.milestone(Milestone::new("indexed").progress(report.files, report.files.max(1)))
        .await?;
    Ok(report)
}

/// The repository of a query's `repo`, indexed (first, when it has no
/// index yet), opened for reading.
async fn open_repo(
    ctx: &RunContext,
    shared: &Shared,
    repo: &str,
) -> Result<(PathBuf, PathBuf), RunError> {
    let root = repo::resolve(&shared.config, repo)?;
    let db = repo::index_file(&shared.config.index_dir, &root);
    if !db.exists() {
        index(ctx, shared, &root, false).await?;
    }
    Ok((root, db))
}

fn open_store(db: &Path) -> Result<Store, RunError> {
    Store::open_read(db).map_err(|e| RunError::new(FailureCode::ToolError, e.to_string()))
}

/// The page a query call streams: from its `cursor`, of the configured
/// size or `page_size`.
fn page_of(
    shared: &Shared,
    page_size: Option<u64>,
    cursor: Option<&str>,
    db: &Path,
) -> Result<(Page, Option<String>), RunError> {
    let mut page = Page {
        offset: 0,
        max_items: shared.config.page_items,
        max_bytes: shared.config.page_bytes,
        budget_bytes: None,
    };
    if let Some(size) = page_size {
        page.max_items = size.clamp(1, shared.config.page_items);
    }
    let mut warning = None;
    if let Some(cursor) = cursor {
        let state = IndexState::of(&open_store(db)?).state_id;
        let (offset, moved) = parse_cursor(cursor, &state)?;
        page.offset = offset;
        if moved {
            warning = Some(
                "the index changed since this cursor was made: this page may repeat or skip items"
                    .to_owned(),
            );
        }
    }
    Ok((page, warning))
}

/// The page of a list tool: as [`page_of`], and within the server's token
/// budget in the final result; `items` (its `limit`) asks for fewer items
/// too.
fn list_page_of(
    shared: &Shared,
    page_size: Option<u64>,
    cursor: Option<&str>,
    items: Option<u64>,
    db: &Path,
) -> Result<(Page, Option<String>), RunError> {
    let (mut page, warning) = page_of(shared, page_size, cursor, db)?;
    if let Some(items) = items {
        page.max_items = items.clamp(1, shared.config.page_items);
    }
    page.budget_bytes = Some(shared.config.result_tokens.saturating_mul(4));
    Ok((page, warning))
}

/// Streams a query's answer: its summary, and the page's items when the
/// page has a budget (a list tool's).
async fn stream_answer<F>(
    ctx: &RunContext,
    shared: &Shared,
    page: Page,
    warning: Option<String>,
    query: F,
) -> Result<Streamed, RunError>
where
    F: FnOnce(&mut answer::Sink) -> Result<Value, RunError> + Send + 'static,
{
    if let Some(message) = warning {
        ctx.emit(weir_core::Warning { message }).await?;
    }
    let mut streamed = answer::stream(ctx, page, shared.config.heartbeat, query).await?;
    streamed.summary["firstChunkMs"] = json!(streamed.first_chunk_ms);
    Ok(streamed)
}

/// Streams a query's answer and returns its summary (the compound tools,
/// whose summary is the answer).
async fn answer<F>(
    ctx: &RunContext,
    shared: &Shared,
    page: Page,
    warning: Option<String>,
    query: F,
) -> Result<Value, RunError>
where
    F: FnOnce(&mut answer::Sink) -> Result<Value, RunError> + Send + 'static,
{
    Ok(stream_answer(ctx, shared, page, warning, query)
        .await?
        .summary)
}

/// `1 file`, `2 files`.
fn counted(count: u64, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// `(kinds: call 3, mention 140)` from a `byKind` object.
fn by_kind(counts: &Value) -> String {
    let counts: Vec<String> = counts
        .as_object()
        .map(|all| {
            all.iter()
                .map(|(kind, count)| format!("{kind} {count}"))
                .collect()
        })
        .unwrap_or_default();
    if counts.is_empty() {
        String::new()
    } else {
        format!(" (kinds: {})", counts.join(", "))
    }
}

/// `index_repo`.
pub(crate) struct IndexRepo(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for IndexRepo {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "index_repo",
            "Index a repository (Rust, Python, JavaScript, TypeScript, Go, Java, C, C++, Ruby; .gitignore respected) for the code intelligence tools, incrementally. The query tools index a repository that has no index themselves.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The repository's directory."},
                    "force": {"type": "boolean", "description": "Parse unchanged files too.", "default": false}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        );
        info.output_schema = Some(weir_core::output_contract(&schemas::index_report()));
        info.streams = true;
        info.timeout = Some(Duration::from_secs(3600));
        info.max_concurrent = Some(2);
        // It writes weir's own index of the repository, never the
        // repository; again, it finds nothing changed.
        info.with_hints(Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        })
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: args::IndexArgs = args::parse(args)?;
        let root = repo::resolve(&self.0.config, &args.path)?;
        let force = args.force;
        let db = repo::index_file(&self.0.config.index_dir, &root);
        let mut backends = vec!["tags".to_owned()];
        if root.join(crate::scip::FILE_NAME).is_file() {
            backends.push("scip".into());
        }
        if root.join(".git").exists() {
            backends.push("git".into());
        }
        ctx.emit(Meta {
            total: None,
            backends,
            info: json!({"root": root, "index": db, "force": force}),
            progress_unit: None,
        })
        .await?;
        let report = index(&ctx, &self.0, &root, force).await?;
        // What was left out (index.scip documents outside the repository, a
        // git directory outside the root) goes out as it is known too.
        for message in &report.warnings {
            ctx.emit(weir_core::Warning {
                message: message.clone(),
            })
            .await?;
        }
        let mut headline = format!(
            "indexed {}: {} files ({} parsed, {} unchanged, {} removed, {} failed), {} definitions, {} references{} in {} ms; state {}{}{}",
            root.display(),
            report.files,
            report.parsed,
            report.unchanged,
            report.removed,
            report.failed.len(),
            report.definitions,
            report.references,
            match report.git_commits {
                0 => String::new(),
                n => format!(", history of {n} commits"),
            },
            report.elapsed_ms,
            report.state_id,
            if report.dirty { " (dirty)" } else { "" },
            backends_phrase(&report),
        );
        if let Some(first) = report.warnings.first() {
            headline.push_str(&format!(
                "; {} warnings, the first: {first}",
                report.warnings.len()
            ));
        }
        let mut summary = serde_json::to_value(&report).expect("a report serializes");
        summary["root"] = json!(root);
        summary["index"] = json!(db);
        Ok(completed(headline, summary))
    }
}

/// `; backends: python scip-python (ran in 3.1 s; 66 of 66 files), rust
/// tags (rust-analyzer is not installed)`: where each language's
/// references come from, and why.
fn backends_phrase(report: &IndexReport) -> String {
    let each: Vec<String> = report
        .backends
        .iter()
        .map(|(language, b)| format!("{language} {} ({})", b.backend, b.why))
        .collect();
    if each.is_empty() {
        String::new()
    } else {
        format!("; backends: {}", each.join(", "))
    }
}

/// `search_symbols`.
pub(crate) struct SearchSymbols(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for SearchSymbols {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "search_symbols",
            "Search a repository's definitions by name: exact, then ignoring case, then prefix, then full text over name parts and docs. Returns the matches (stableId, kind, docs); past the token budget, a page with the total and a nextCursor to pass as `cursor`.",
            json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "The repository's directory (indexed first if it has no index)."},
                    "query": {"type": "string", "description": "A name, a prefix, or words."},
                    "kind": {"type": "string", "description": "function, method, class, interface, module, macro, constant or type."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50, "description": "Most matches in all."},
                    "cursor": {"type": "string", "description": "A previous answer's nextCursor."},
                    "page_size": {"type": "integer", "minimum": 1, "description": "Most matches per page."}
                },
                "required": ["repo", "query"],
                "additionalProperties": false
            }),
        );
        info.output_schema = Some(weir_core::output_contract(&schemas::search_summary()));
        info.streams = true;
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: args::SymbolsArgs = args::parse(args)?;
        let query = SymbolsQuery {
            query: args.query,
            kind: args.kind,
            limit: args.limit.unwrap_or(50).clamp(1, 1000),
        };
        let limit = query.limit;
        let (_, db) = open_repo(&ctx, &self.0, &args.repo).await?;
        let cursor = args.cursor.as_deref();
        let (page, warning) = list_page_of(&self.0, args.page_size, cursor, args.page_size, &db)?;
        let Streamed {
            summary, listed, ..
        } = stream_answer(&ctx, &self.0, page, warning, move |sink| {
            search_symbols(&open_store(&db)?, &query, sink)
        })
        .await?;
        let total = summary["total"].as_u64().unwrap_or(0);
        let what = format!(
            "search_symbols {:?}: {total} matches (exact {}, prefix {}, text {}){}",
            summary["query"].as_str().unwrap_or_default(),
            summary["byTier"]["exact"].as_u64().unwrap_or(0)
                + summary["byTier"]["exact_ignoring_case"]
                    .as_u64()
                    .unwrap_or(0),
            summary["byTier"]["prefix"],
            summary["byTier"]["text"],
            if total >= limit {
                format!(", stopped at limit={limit}: more may match")
            } else {
                String::new()
            },
        );
        Ok(listing("search_symbols", &what, summary, listed))
    }
}

/// `find_references`.
pub(crate) struct FindReferences(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for FindReferences {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "find_references",
            "Find a symbol's definitions and uses in a repository, grouped by file (`line:column kind [backend]: context`), with counts and precision. Exact where an index.scip covers a file; elsewhere tree-sitter tags (calls, type uses, impls) and whole-word text matches. Past the token budget or `limit`, a page with the total and a nextCursor to pass as `cursor`.",
            json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "The repository's directory (indexed first if it has no index)."},
                    "symbol": {"type": "string", "description": "A name, a stableId from search_symbols (path:line:name), or a SCIP symbol."},
                    "include_tests": {"type": "boolean", "default": true, "description": "Include uses in test files."},
                    "text": {"type": "boolean", "default": true, "description": "Include whole-word text matches no tag covers (comments, field reads)."},
                    "cursor": {"type": "string", "description": "A previous answer's nextCursor."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most items per page."},
                    "page_size": {"type": "integer", "minimum": 1, "description": "Old name of limit."}
                },
                "required": ["repo", "symbol"],
                "additionalProperties": false
            }),
        );
        info.output_schema = Some(weir_core::output_contract(&schemas::references_summary()));
        info.streams = true;
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: args::ReferencesArgs = args::parse(args)?;
        let query = ReferencesQuery {
            symbol: args.symbol.trim().to_owned(),
            include_tests: args.include_tests.unwrap_or(true),
            text: args.text.unwrap_or(true),
        };
        let (root, db) = open_repo(&ctx, &self.0, &args.repo).await?;
        let cursor = args.cursor.as_deref();
        let (page, warning) = list_page_of(&self.0, args.page_size, cursor, args.limit, &db)?;
        let Streamed {
            mut summary,
            listed,
            ..
        } = stream_answer(&ctx, &self.0, page, warning, move |sink| {
            find_references(&open_store(&db)?, &root, &query, sink)
        })
        .await?;
        // A SCIP symbol's docs can be pages long: their first line says which.
        for symbol in summary["symbols"].as_array_mut().into_iter().flatten() {
            if let Some(docs) = symbol["docs"].as_str() {
                symbol["docs"] = json!(docs.lines().next().unwrap_or_default());
            }
        }
        let total = summary["total"].as_u64().unwrap_or(0);
        let definitions = summary["definitions"].as_u64().unwrap_or(0);
        let what = format!(
            "find_references {:?}: {} ({}, {}) in {}{}",
            summary["symbol"].as_str().unwrap_or_default(),
            counted(total, "item"),
            counted(definitions, "definition"),
            counted(total.saturating_sub(definitions), "use"),
            counted(summary["fileCount"].as_u64().unwrap_or(0), "file"),
            by_kind(&summary["byKind"]),
        );
        Ok(listing("find_references", &what, summary, listed))
    }
}

/// `get_architecture`.
pub(crate) struct GetArchitecture(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for GetArchitecture {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "get_architecture",
            "A repository's architecture: its packages, modules, directories or files with sizes, the dependency edges between them with strength, entry points and a Mermaid graph. Past the token budget, a page with the total and a nextCursor to pass as `cursor`.",
            json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "The repository's directory (indexed first if it has no index)."},
                    "granularity": {"type": "string", "enum": ["package", "crate", "module", "directory", "file"], "default": "module", "description": "package (crate): manifests' dependencies; the others: resolved imports."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2, "description": "Directory levels that make a module."},
                    "cursor": {"type": "string", "description": "A previous answer's nextCursor."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most modules and edges per page."}
                },
                "required": ["repo"],
                "additionalProperties": false
            }),
        );
        info.output_schema = Some(weir_core::output_contract(&schemas::architecture_summary()));
        info.streams = true;
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let args: args::ArchitectureArgs = args::parse(args)?;
        let granularity = args.granularity()?;
        let (_, db) = open_repo(&ctx, &self.0, &args.repo).await?;
        let cursor = args.cursor.as_deref();
        let (page, warning) = list_page_of(&self.0, None, cursor, args.limit, &db)?;
        let Streamed {
            summary, listed, ..
        } = stream_answer(&ctx, &self.0, page, warning, move |sink| {
            get_architecture(&open_store(&db)?, granularity, sink)
        })
        .await?;
        let what = format!(
            "get_architecture: {} {}s, {} edges, entry points {}",
            summary["moduleCount"],
            summary["granularity"].as_str().unwrap_or_default(),
            summary["edgeCount"],
            summary["entrypoints"],
        );
        Ok(listing("get_architecture", &what, summary, listed))
    }
}
