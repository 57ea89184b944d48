//! weir's code intelligence pack: `index_repo`, `search_symbols`,
//! `find_references`, `get_architecture`, and the compound `explore`,
//! `understand` and `prepare_change`.
//!
//! **For:** indexing a repository on the server's machine and answering
//! questions about its code whose answers are often far larger than a
//! model's context (every use of `spawn` in tokio is about 50k tokens of
//! grep output): lazily, as streamed runs, in pages.
//! **Not for:** protocols, or resolving code itself. The pack reports
//! through its `RunContext`; it never knows whether its caller speaks MCP.
//! Its own answers are *syntactic* (what tree-sitter's tags queries and
//! the text show); they are *exact* only where a compiler-grade indexer
//! covered the files (one weir ran, see [`ScipIndexers`], or an
//! `index.scip` at the repository's root), and every answer says which in
//! its provenance (`completeness`: `exact`, `mixed`, `syntactic`).
//! It depends on `weir-core`, `weir-runtime` and `weir-proc` (to kill an
//! indexer's process group), never on an MCP crate, a
//! store or another pack; tree-sitter, its grammars, `ignore` and rusqlite
//! stay in this crate.
//!
//! **The index** ([`index_repository`], the `index_repo` tool, `weir index`):
//! the tree walked as git sees it (`.gitignore` and `.ignore` honoured,
//! hidden files skipped), files of Rust, Python, JavaScript, TypeScript/TSX,
//! Go, Java, C, C++ and Ruby parsed on every core with each grammar's tags
//! query (definitions with their docs and extent, references: call sites,
//! type uses, implementations), and each file's identifiers kept for the
//! text search. SCIP data is read too (occurrences with their exact
//! symbols): an `index.scip` at the root, and the indexes the real SCIP
//! indexers write when they are installed (`scip-python`,
//! `scip-typescript`; rust-analyzer when the operator allows it), run for
//! the repository's languages with a clean environment, bounded in time
//! and output, writing into weir's data directory ([`ScipIndexers`];
//! again only when their files changed). The report says which backend
//! each language got and why. So is git's
//! recent history (churn per file, files changed together; again only when
//! HEAD moved). One SQLite file (WAL, FTS5) per repository in the pack's
//! directory ([`index_file`]). Incremental by modification time, then
//! content hash; progress as files done of total with an ETA; cancellable
//! between files and inside tree-sitter's parse. A run with nothing new to
//! say for [`CodeIntelConfig::heartbeat`] (15 s) reports a heartbeat, so
//! proxies that drop quiet streams keep it.
//!
//! **What a repository can and cannot do.** A caller names repositories
//! only inside the operator's roots ([`CodeIntelConfig::roots`], `weir
//! serve --root`); `weir index PATH` is the operator and may name any. A
//! repository is hostile data: nothing it configures runs (no `git status`;
//! the git that remains runs with every program-valued setting overridden,
//! see `git.rs`), no file outside it is read (symlinks are not walked,
//! `index.scip` documents outside it are dropped with a warning in the
//! report, and every file read later is opened with
//! [`weir_runtime::open_beneath`], so one swapped for a symlink after
//! indexing is not followed out), and git data is read only from a git
//! directory inside the boundary the repository was named in.
//!
//! **The answers.** Each query runs on a blocking thread and streams: `meta`
//! (the total when known, the backends, the completeness), then
//! `partial` chunks of at most 50 items and 16 KB, grouped by file (or by
//! module, by match tier, by stage: a compound tool streams its definition,
//! then uses by file, then callers and callees), then the final result.
//! Most hosts show their model only that, so for `search_symbols`,
//! `find_references` and `get_architecture` it is the answer itself: the
//! page's items as lines grouped by file in `content` (after a first line
//! with the count, the total, the page and the precision) and as compact
//! items in `structuredContent`, beside the summary (counts by file and
//! kind, `truncated`, `total`, `nextCursor`, a `provenance` envelope with
//! the index's state id and git's dirty flag); the compound tools' final
//! result is their summary. A call streams one page
//! ([`CodeIntelConfig::page_items`], [`CodeIntelConfig::page_bytes`], and
//! for the list tools [`CodeIntelConfig::result_tokens`] in either form of
//! the result, or fewer with `limit`) and its `nextCursor` asks for the
//! next, so no result comes near the server's result limit or a host's. The first chunk goes out as soon as the
//! query has it; cancelling the run stops the query at its next item.
//!
//! **The compound tools** answer in one call what takes an agent several:
//! `explore {path}` (definitions by kind, key symbols, dependencies out and
//! in, entry points, git hot spots), `understand {symbol}` (definition with
//! docs and span, uses by file, exact where SCIP covers the definition,
//! callers and callees from the tags) and
//! `prepare_change {symbol}` (direct dependents, callers to a depth bound,
//! related tests, co-change files from git, a risk level with its factors).
//!
//! ```
//! use std::sync::atomic::AtomicUsize;
//! use weir_pack_codeintel::{IndexOptions, index_repository};
//!
//! let repo = tempfile::tempdir().unwrap();
//! std::fs::write(repo.path().join("lib.rs"), "/// Adds one.\npub fn inc(x: u32) -> u32 { add(x, 1) }\n").unwrap();
//! let db = repo.path().join("index.sqlite");
//! let report = index_repository(repo.path(), &db, &IndexOptions::default(), &AtomicUsize::new(0), &mut |_| {}).unwrap();
//! assert_eq!((report.files, report.definitions, report.references), (1, 1, 1));
//! ```
#![warn(missing_docs)]

mod answer;
mod extract;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod git;
mod gitindex;
mod history;
mod indexer;
mod language;
mod manifest;
mod query;
mod repo;
mod schemas;
mod scip;
mod scip_indexers;
mod store;
mod tools;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_runtime::{Pack, Roots, Tool};

pub use indexer::{IndexError, IndexOptions, IndexProgress, IndexReport, index_repository};
pub use repo::index_file;
pub use scip_indexers::{LanguageBackend, ScipIndexers};
pub use store::StoreError;

/// The default of [`CodeIntelConfig::result_tokens`].
pub const DEFAULT_RESULT_TOKENS: usize = 20_000;

/// How the pack works. Plain data.
#[derive(Clone, Debug)]
pub struct CodeIntelConfig {
    /// Where the indexes live: one SQLite file per repository.
    pub index_dir: PathBuf,
    /// The directories a caller's `repo`/`path` must resolve inside (the
    /// operator's `--root`s); relative paths start at the first.
    pub roots: Roots,
    /// Most items one call streams; the rest is paged with the cursor.
    pub page_items: u64,
    /// Most bytes of items one call streams: keep it well under the
    /// server's result limit, which counts streamed items too.
    pub page_bytes: usize,
    /// Most tokens (estimated as bytes / 4) a page's items take in each
    /// form of a list tool's final result (the line form in `content`, the
    /// items in `structuredContent`): past it the answer is paged. The
    /// default stays under Claude Code's 25,000-token cut with room for
    /// the summary.
    pub result_tokens: usize,
    /// Parser threads; 0 means one per core.
    pub threads: usize,
    /// The SCIP indexers `index_repo` runs (by default those on `PATH`).
    pub scip_indexers: ScipIndexers,
    /// The longest a run stays silent: after this long without an event
    /// (a long parse, a slow query), it reports a `progress` heartbeat, so
    /// clients and proxies that drop quiet streams keep it open.
    pub heartbeat: Duration,
}

impl CodeIntelConfig {
    /// The defaults, with indexes under `index_dir`, for repositories
    /// inside `roots`.
    pub fn new(index_dir: impl Into<PathBuf>, roots: Roots) -> CodeIntelConfig {
        CodeIntelConfig {
            index_dir: index_dir.into(),
            roots,
            page_items: 2_000,
            page_bytes: 256 * 1024,
            result_tokens: DEFAULT_RESULT_TOKENS,
            threads: 0,
            scip_indexers: ScipIndexers::default(),
            heartbeat: Duration::from_secs(15),
        }
    }
}

/// The pack. Cheap to clone.
#[derive(Clone)]
pub struct CodeIntelPack {
    shared: Arc<Shared>,
}

/// What the tools share.
struct Shared {
    config: CodeIntelConfig,
    /// One index run per repository at a time.
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

impl Shared {
    fn lock_for(&self, root: &Path) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .expect("locks")
            .entry(root.to_owned())
            .or_default()
            .clone()
    }
}

impl CodeIntelPack {
    /// The pack with `config`.
    pub fn new(config: CodeIntelConfig) -> CodeIntelPack {
        CodeIntelPack {
            shared: Arc::new(Shared {
                config,
                locks: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl Pack for CodeIntelPack {
    fn name(&self) -> &'static str {
        "codeintel"
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let shared = &self.shared;
        vec![
            Arc::new(tools::IndexRepo(shared.clone())),
            Arc::new(tools::SearchSymbols(shared.clone())),
            Arc::new(tools::FindReferences(shared.clone())),
            Arc::new(tools::GetArchitecture(shared.clone())),
            Arc::new(tools::Explore(shared.clone())),
            Arc::new(tools::Understand(shared.clone())),
            Arc::new(tools::PrepareChange(shared.clone())),
        ]
    }
}
