//! The pack through the runtime, on a small repository in five languages
//! (tests/data/polyglot, copied so that tests may edit it): what the index
//! holds, the answers with their exact symbols and references, chunking,
//! paging, incremental re-indexing and cancellation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_core::{EventKind, RunEvent};
use weir_pack_codeintel::{CodeIntelConfig, CodeIntelPack};
use weir_runtime::{EventLog, MemoryLog, Pack, RunOptions, Scheduler, SchedulerConfig};

struct Fixture {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    scheduler: Scheduler,
    log: Arc<dyn EventLog>,
}

/// What a run wrote.
struct Outcome {
    events: Vec<RunEvent>,
}

impl Outcome {
    fn summary(&self) -> &Value {
        match &self.events.last().unwrap().kind {
            EventKind::Completed(completed) => completed.structured.as_ref().unwrap(),
            other => panic!("the run did not complete: {other:?}"),
        }
    }

    /// The final result's text content.
    fn text(&self) -> String {
        match &self.events.last().unwrap().kind {
            EventKind::Completed(completed) => completed
                .content
                .iter()
                .map(|block| {
                    serde_json::to_value(block).unwrap()["text"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect(),
            other => panic!("the run did not complete: {other:?}"),
        }
    }

    fn items(&self) -> Vec<(String, Value)> {
        self.partials()
            .into_iter()
            .flat_map(|(group, items)| items.into_iter().map(move |item| (group.clone(), item)))
            .collect()
    }

    fn partials(&self) -> Vec<(String, Vec<Value>)> {
        self.events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Partial(partial) => Some((
                    partial.group.clone().unwrap_or_default(),
                    partial.items.clone(),
                )),
                _ => None,
            })
            .collect()
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("polyglot");
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/polyglot"),
            &repo,
        );
        // Ignored by the fixture's .gitignore: never indexed.
        std::fs::create_dir_all(repo.join("build")).unwrap();
        std::fs::write(repo.join("build/generated.py"), "def area():\n    pass\n").unwrap();
        Fixture::at(dir, repo).await
    }

    async fn at(dir: tempfile::TempDir, repo: PathBuf) -> Fixture {
        Fixture::configured(dir, repo, |_| {}).await
    }

    async fn configured(
        dir: tempfile::TempDir,
        repo: PathBuf,
        configure: impl FnOnce(&mut CodeIntelConfig),
    ) -> Fixture {
        // The scratch directory is the one root: the repository is in it.
        let roots = weir_runtime::Roots::new([dir.path()]).unwrap();
        let mut config = CodeIntelConfig::new(dir.path().join("indexes"), roots);
        config.threads = 2;
        configure(&mut config);
        let pack = CodeIntelPack::new(config);
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default())
            .await
            .unwrap();
        Fixture {
            _dir: dir,
            repo,
            scheduler,
            log,
        }
    }

    fn repo(&self) -> String {
        self.repo.display().to_string()
    }

    async fn call(&self, tool: &str, args: Value) -> Outcome {
        let run = self
            .scheduler
            .submit(tool, args, RunOptions::default())
            .await
            .unwrap();
        let run_id = run.run_id().clone();
        run.finished().await.unwrap();
        Outcome {
            events: self.log.read(&run_id, 0, 100_000).await.unwrap(),
        }
    }

    async fn index(&self) -> Value {
        self.call("index_repo", json!({"path": self.repo()}))
            .await
            .summary()
            .clone()
    }
}

/// The groups of the partial chunks, in order, each once: how chunks are
/// cut depends on timing (a chunk goes out when the query pauses), which
/// groups come in which order does not.
fn groups(outcome: &Outcome) -> Vec<String> {
    let mut groups: Vec<String> = outcome.partials().into_iter().map(|(g, _)| g).collect();
    groups.dedup();
    groups
}

/// `file:line:column kind` of each item.
fn places(items: &[(String, Value)]) -> Vec<String> {
    items
        .iter()
        .map(|(_, item)| {
            let at = &item["location"];
            format!(
                "{}:{}:{} {}",
                at["fileId"].as_str().unwrap(),
                at["startLine"],
                at["startColumn"],
                item["kind"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_holds_every_language_and_skips_ignored_files() {
    let fixture = Fixture::new().await;
    let report = fixture.index().await;
    assert_eq!(report["files"], 6, "{report}");
    assert_eq!(report["parsed"], 6);
    assert_eq!(
        report["languages"],
        json!({"go": 1, "javascript": 1, "python": 2, "rust": 1, "typescript": 1})
    );
    assert_eq!(report["failed"], json!([]));
    let search = fixture
        .call(
            "search_symbols",
            json!({"repo": fixture.repo(), "query": "generated"}),
        )
        .await;
    assert_eq!(search.summary()["total"], 0, "build/ is ignored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_ranks_exact_then_case_then_prefix_then_text() {
    let fixture = Fixture::new().await;
    fixture.index().await;
    let search = fixture
        .call(
            "search_symbols",
            json!({"repo": fixture.repo(), "query": "area"}),
        )
        .await;
    let found: Vec<String> = search
        .items()
        .iter()
        .map(|(tier, item)| {
            format!(
                "{tier} {} {} {}:{}",
                item["name"].as_str().unwrap(),
                item["kind"].as_str().unwrap(),
                item["location"]["fileId"].as_str().unwrap(),
                item["location"]["startLine"]
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            "exact area function py/geometry.py:11",
            "exact area method src/shapes.rs:8",
            "exact area method web/app.js:10",
            "exact area method web/types.ts:2",
            "exact_ignoring_case Area method go/server.go:7",
            "text total_area function py/geometry.py:16",
            "text total_area function src/shapes.rs:17",
            "text test_area function tests/test_geometry.py:4",
            // By their docs: "Handler serves areas.", "Renders a shape's area."
            "text Handler type go/server.go:4",
            "text render function web/app.js:2",
        ]
    );
    let docs: Vec<Value> = search
        .items()
        .into_iter()
        .map(|(_, item)| item["docs"].clone())
        .collect();
    assert_eq!(docs[0], "Width times height.");
    assert_eq!(docs[1], "The area of the circle.");
    assert_eq!(docs[4], "Area answers one request.");
    let summary = search.summary();
    assert_eq!(summary["total"], 10);
    assert_eq!(summary["provenance"]["completeness"], "syntactic");
    assert_eq!(summary["nextCursor"], Value::Null);

    let classes = fixture
        .call(
            "search_symbols",
            json!({"repo": fixture.repo(), "query": "c", "kind": "class"}),
        )
        .await;
    let names: Vec<String> = classes
        .items()
        .into_iter()
        .map(|(_, i)| i["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["Circle"], "prefix, classes only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_come_definitions_first_then_by_file() {
    let fixture = Fixture::new().await;
    fixture.index().await;
    let refs = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "area"}),
        )
        .await;
    assert_eq!(
        places(&refs.items()),
        [
            "py/geometry.py:11:9 definition",
            "src/shapes.rs:8:12 definition",
            "web/app.js:10:3 definition",
            "web/types.ts:2:3 definition",
            "py/geometry.py:17:22 call",
            "src/shapes.rs:7:13 mention",
            "src/shapes.rs:18:30 call",
            "tests/test_geometry.py:5:23 call",
            "web/app.js:1:22 mention",
            "web/app.js:3:11 mention",
            "web/app.js:3:25 call",
        ]
    );
    let summary = refs.summary();
    assert_eq!(summary["total"], 11);
    assert_eq!(summary["definitions"], 4);
    assert_eq!(
        summary["byKind"],
        json!({"call": 4, "definition": 4, "mention": 3})
    );
    assert_eq!(
        summary["byFile"][0],
        json!({"file": "web/app.js", "count": 4})
    );
    assert_eq!(summary["provenance"]["backends"], json!(["tags", "text"]));
    // Each chunk holds one file's items, and says which.
    for (group, items) in refs.partials() {
        assert!(items.len() <= 50);
        for item in items {
            assert_eq!(item["location"]["fileId"], group);
        }
    }
    // meta comes before the first chunk, the summary after the last.
    let kinds: Vec<&str> = refs.events.iter().map(|e| e.kind.type_name()).collect();
    let meta = kinds.iter().position(|k| *k == "meta").unwrap();
    let first = kinds.iter().position(|k| *k == "partial").unwrap();
    assert!(meta < first, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"completed"));

    let without_tests = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "area", "include_tests": false, "text": false}),
        )
        .await;
    assert_eq!(
        places(&without_tests.items()),
        [
            "py/geometry.py:11:9 definition",
            "src/shapes.rs:8:12 definition",
            "web/app.js:10:3 definition",
            "web/types.ts:2:3 definition",
            "py/geometry.py:17:22 call",
            "src/shapes.rs:18:30 call",
            "web/app.js:3:25 call",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_the_cursor_to_the_end() {
    let fixture = Fixture::new().await;
    fixture.index().await;
    let whole = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "area"}),
        )
        .await
        .items();
    let mut paged = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let mut args = json!({"repo": fixture.repo(), "symbol": "area", "page_size": 4});
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        let page = fixture.call("find_references", args).await;
        let summary = page.summary().clone();
        assert_eq!(summary["total"], 11, "every page counts the whole answer");
        paged.extend(page.items());
        pages += 1;
        cursor = summary["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
        assert_eq!(summary["truncated"], true);
    }
    assert_eq!(pages, 3);
    assert_eq!(places(&paged), places(&whole));
    let bad = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "area", "cursor": "nonsense"}),
        )
        .await;
    let EventKind::Failed(failed) = &bad.events.last().unwrap().kind else {
        panic!("a bad cursor fails the call")
    };
    assert!(
        failed.error.message.contains("not a cursor"),
        "{}",
        failed.error.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn architecture_has_modules_edges_and_mermaid() {
    let fixture = Fixture::new().await;
    fixture.index().await;
    let arch = fixture
        .call(
            "get_architecture",
            json!({"repo": fixture.repo(), "granularity": "directory"}),
        )
        .await;
    let summary = arch.summary();
    let modules: Vec<&str> = summary["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["moduleId"].as_str().unwrap())
        .collect();
    let mut sorted = modules.clone();
    sorted.sort();
    assert_eq!(sorted, ["go", "py", "src", "web"], "tests/ is left out");
    // types.ts calls render, defined in app.js: same directory, no edge.
    // Nothing crosses directories in this fixture but `area`, which is
    // defined in four places.
    assert_eq!(summary["edgeCount"], 0, "{summary}");
    assert!(
        summary["mermaid"]
            .as_str()
            .unwrap()
            .starts_with("graph LR\n")
    );
    let files = fixture
        .call(
            "get_architecture",
            json!({"repo": fixture.repo(), "granularity": "file"}),
        )
        .await;
    let edges: Vec<String> = files.summary()["dependencyGraph"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} -> {} ({})",
                e["from"].as_str().unwrap(),
                e["to"].as_str().unwrap(),
                e["strength"]
            )
        })
        .collect();
    // types.ts calls app.js's `render` without importing it: a bare name
    // draws no edge (issue 23), and no file here imports another.
    assert!(edges.is_empty(), "{edges:?}");
    assert!(!files.summary()["mermaid"].as_str().unwrap().contains("-->"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_reindexes_only_that_file() {
    let fixture = Fixture::new().await;
    fixture.index().await;
    let again = fixture.index().await;
    assert_eq!(
        (again["parsed"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(6))
    );
    let state = again["state_id"].clone();

    // A new function in one file; another file touched but not changed.
    let shapes = fixture.repo.join("src/shapes.rs");
    let mut text = std::fs::read_to_string(&shapes).unwrap();
    text.push_str("\npub fn perimeter(c: &Circle) -> f64 {\n    c.r * 6.28\n}\n");
    std::fs::write(&shapes, text).unwrap();
    let go = fixture.repo.join("go/server.go");
    std::fs::write(&go, std::fs::read(&go).unwrap()).unwrap();
    std::fs::remove_file(fixture.repo.join("web/types.ts")).unwrap();
    let edited = fixture.index().await;
    assert_eq!(edited["parsed"], 1, "{edited}");
    assert_eq!(edited["unchanged"], 4, "{edited}");
    assert_eq!(edited["removed"], 1, "{edited}");
    assert_eq!(edited["files"], 5);
    assert_ne!(edited["state_id"], state);

    let found = fixture
        .call(
            "search_symbols",
            json!({"repo": fixture.repo(), "query": "perimeter"}),
        )
        .await;
    assert_eq!(places(&found.items()), ["src/shapes.rs:21:8 function"]);
    let gone = fixture
        .call(
            "search_symbols",
            json!({"repo": fixture.repo(), "query": "describe"}),
        )
        .await;
    assert_eq!(gone.summary()["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_on_an_unindexed_repository_indexes_it_first() {
    let fixture = Fixture::new().await;
    let refs = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "Square"}),
        )
        .await;
    let phases: Vec<String> = refs
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Progress(p) => p.phase.clone(),
            _ => None,
        })
        .collect();
    assert!(phases.contains(&"indexed".to_owned()), "{phases:?}");
    assert_eq!(
        places(&refs.items()),
        [
            "go/server.go:11:6 definition",
            "web/app.js:6:7 definition",
            "go/server.go:8:9 call",
            "web/app.js:15:24 class",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_get_clear_errors() {
    let fixture = Fixture::new().await;
    let file = fixture.repo.join("src/shapes.rs").display().to_string();
    for (tool, args, says) in [
        (
            "index_repo",
            json!({"path": "/nonexistent/repo"}),
            "cannot open \"/nonexistent/repo\"",
        ),
        // Outside the roots (the fixture's scratch directory): refused,
        // naming the roots and how the operator adds one.
        (
            "index_repo",
            json!({"path": "/"}),
            "`weir serve --root DIR`",
        ),
        (
            "search_symbols",
            json!({"repo": "..", "query": "x"}),
            "is outside the directories this server lets callers name",
        ),
        ("index_repo", json!({"path": file}), "is not a directory"),
        (
            "find_references",
            json!({"repo": fixture.repo(), "symbol": " "}),
            "`symbol` must be a non-empty string",
        ),
        (
            "get_architecture",
            json!({"repo": fixture.repo(), "depth": 0}),
            "depth",
        ),
    ] {
        let message = match fixture
            .scheduler
            .submit(tool, args, RunOptions::default())
            .await
        {
            // Refused by the input schema before the run starts.
            Err(refused) => refused.to_string(),
            Ok(run) => match run.finished().await.unwrap().kind {
                EventKind::Failed(failed) => failed.error.message,
                other => panic!("{tool} should fail: {other:?}"),
            },
        };
        assert!(message.contains(says), "{tool}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_index_run_or_a_query_ends_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("big");
    std::fs::create_dir_all(&repo).unwrap();
    let body: String = (0..200)
        .map(|i| format!("fn f{i}(x: u32) -> u32 {{ g{i}(x) + 1 }}\n"))
        .collect();
    for i in 0..300 {
        std::fs::write(repo.join(format!("m{i}.rs")), &body).unwrap();
    }
    let fixture = Fixture::at(dir, repo).await;
    let run = fixture
        .scheduler
        .submit(
            "index_repo",
            json!({"path": fixture.repo()}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let run_id = run.run_id().clone();
    // Wait for files to be parsed, then cancel.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = fixture.log.read(&run_id, 0, 10_000).await.unwrap();
        let indexing = events.iter().any(|e| matches!(&e.kind, EventKind::Progress(p) if p.phase.as_deref() == Some("indexing") && p.progress > 10.0));
        if indexing {
            break;
        }
        assert!(Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled_at = Instant::now();
    assert!(fixture.scheduler.cancel(&run_id, "test"));
    let last = run.finished().await.unwrap();
    assert!(cancelled_at.elapsed() < Duration::from_secs(1));
    assert!(matches!(last.kind, EventKind::Canceled(_)), "{last:?}");
    // The next run goes on from where this one stopped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = fixture.index().await;
    assert_eq!(report["files"], 300);
    assert!(report["unchanged"].as_u64().unwrap() > 0, "{report}");
    assert!(report["parsed"].as_u64().unwrap() < 300, "{report}");

    // A query over all of it (60,000 uses of `x`), cancelled after its
    // first chunk, stops as promptly.
    let run = fixture
        .scheduler
        .submit(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "x"}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let run_id = run.run_id().clone();
    loop {
        let events = fixture.log.read(&run_id, 0, 10_000).await.unwrap();
        if events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Partial(_)))
        {
            assert!(
                !events.iter().any(|e| e.kind.is_terminal()),
                "the first chunk came before the end"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no chunk");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let cancelled_at = Instant::now();
    assert!(fixture.scheduler.cancel(&run_id, "test"));
    let last = run.finished().await.unwrap();
    assert!(cancelled_at.elapsed() < Duration::from_secs(1));
    assert!(matches!(last.kind, EventKind::Canceled(_)), "{last:?}");
}

/// A Rust repository with two methods named `area` (and a local variable
/// of that name), its `index.scip` written here with the scip crate's
/// types as rust-analyzer would write it, and a Python file the SCIP index
/// does not cover.
mod scip_fixture {
    use std::path::Path;

    use scip::types::{Document, Index, Occurrence, SymbolInformation, symbol_information::Kind};

    pub(super) const SHAPES: &str = "pub struct Circle { pub r: f64 }
pub struct Square { pub side: f64 }

impl Circle {
    pub fn area(&self) -> f64 { self.r * self.r * 3.14 }
}

impl Square {
    pub fn area(&self) -> f64 { self.side * self.side }
}
";
    pub(super) const MAIN: &str = "use shapes::{Circle, Square};

fn main() {
    let c = Circle { r: 1.0 };
    let s = Square { side: 2.0 };
    println!(\"{} {}\", c.area(), s.area());
    let area = c.area();
}
";
    pub(super) const PLOT: &str = "def area(r):\n    return r * r\n\nprint(area(2))\n";

    pub(super) const CIRCLE_AREA: &str = "rust-analyzer cargo shapes 0.1.0 Circle#area().";
    pub(super) const SQUARE_AREA: &str = "rust-analyzer cargo shapes 0.1.0 Square#area().";
    const CIRCLE: &str = "rust-analyzer cargo shapes 0.1.0 Circle#";
    const SQUARE: &str = "rust-analyzer cargo shapes 0.1.0 Square#";

    /// The 0-based range of the `nth` whole `word` on 1-based `line`.
    fn range(text: &str, line: usize, word: &str, nth: usize) -> Vec<i32> {
        let source = text.lines().nth(line - 1).unwrap();
        let at = source
            .match_indices(word)
            .filter(|(at, _)| {
                let before = source[..*at].chars().last();
                let after = source[at + word.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
            .nth(nth)
            .unwrap()
            .0;
        vec![line as i32 - 1, at as i32, (at + word.len()) as i32]
    }

    fn document(
        path: &str,
        text: &str,
        occurrences: &[(usize, &str, usize, &str, i32)],
    ) -> Document {
        let mut document = Document::new();
        document.relative_path = path.into();
        document.language = "rust".into();
        for (line, word, nth, symbol, roles) in occurrences {
            document.occurrences.push(Occurrence {
                range: range(text, *line, word, *nth),
                symbol: (*symbol).into(),
                symbol_roles: *roles,
                ..Default::default()
            });
        }
        document
    }

    pub(super) fn write(repo: &Path) {
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::create_dir_all(repo.join("scripts")).unwrap();
        std::fs::write(repo.join("src/shapes.rs"), SHAPES).unwrap();
        std::fs::write(repo.join("src/main.rs"), MAIN).unwrap();
        std::fs::write(repo.join("scripts/plot.py"), PLOT).unwrap();
        let (def, import, read) = (1, 2, 8);
        let mut shapes = document(
            "src/shapes.rs",
            SHAPES,
            &[
                (1, "Circle", 0, CIRCLE, def),
                (2, "Square", 0, SQUARE, def),
                (4, "Circle", 0, CIRCLE, 0),
                (5, "area", 0, CIRCLE_AREA, def),
                (8, "Square", 0, SQUARE, 0),
                (9, "area", 0, SQUARE_AREA, def),
            ],
        );
        let mut info = SymbolInformation::new();
        info.symbol = CIRCLE_AREA.into();
        info.documentation = vec!["The area of the circle.".into()];
        info.kind = Kind::Method.into();
        shapes.symbols.push(info);
        let main = document(
            "src/main.rs",
            MAIN,
            &[
                (1, "Circle", 0, CIRCLE, import),
                (1, "Square", 0, SQUARE, import),
                (4, "Circle", 0, CIRCLE, 0),
                (5, "Square", 0, SQUARE, 0),
                (6, "area", 0, CIRCLE_AREA, read),
                (6, "area", 1, SQUARE_AREA, read),
                (7, "area", 0, "local 0", def),
                (7, "area", 1, CIRCLE_AREA, read),
            ],
        );
        let mut index = Index::new();
        index.documents = vec![shapes, main];
        scip::write_message_to_file(repo.join("index.scip"), index).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_index_scip_references_are_exact_and_tell_same_named_symbols_apart() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("shapes");
    scip_fixture::write(&repo);
    let fixture = Fixture::at(dir, repo).await;
    let report = fixture.index().await;
    assert_eq!(
        (
            report["files"].as_u64(),
            report["scip_documents"].as_u64(),
            report["scip_occurrences"].as_u64()
        ),
        (Some(3), Some(2), Some(14)),
        "{report}"
    );

    // Circle's area, by the stableId search_symbols gives its definition:
    // its two calls, not Square's `s.area()` nor the local `area`, which
    // any search by name counts.
    let found = fixture
        .call(
            "search_symbols",
            json!({"repo": fixture.repo(), "query": "area", "kind": "method"}),
        )
        .await;
    let ids: Vec<&str> = found.summary()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["stableId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["src/shapes.rs:5:area", "src/shapes.rs:9:area"]);
    let circle = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "src/shapes.rs:5:area"}),
        )
        .await;
    assert_eq!(
        places(&circle.items()),
        [
            "src/shapes.rs:5:12 definition",
            "src/main.rs:6:25 reference",
            "src/main.rs:7:18 reference",
        ]
    );
    for (_, item) in circle.items() {
        assert_eq!(item["backend"], "scip");
        assert_eq!(item["symbolId"], scip_fixture::CIRCLE_AREA);
    }
    assert_eq!(
        circle.items()[1].1["context"],
        "println!(\"{} {}\", c.area(), s.area());"
    );
    let summary = circle.summary();
    assert_eq!(summary["total"], 3);
    assert_eq!(summary["provenance"]["completeness"], "exact");
    assert_eq!(summary["provenance"]["backends"], json!(["scip"]));
    assert_eq!(
        summary["symbols"],
        json!([{"symbolId": scip_fixture::CIRCLE_AREA, "name": "area", "kind": "Method",
                "docs": "The area of the circle.", "definitions": 1, "references": 2}])
    );
    // The SCIP symbol itself names it as well.
    let square = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": scip_fixture::SQUARE_AREA}),
        )
        .await;
    assert_eq!(
        places(&square.items()),
        [
            "src/shapes.rs:9:12 definition",
            "src/main.rs:6:35 reference"
        ]
    );

    // By name: every symbol of that name, each use saying which; the
    // Python file SCIP does not cover answers from tags and text.
    let by_name = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "area"}),
        )
        .await;
    let described: Vec<String> = by_name
        .items()
        .iter()
        .map(|(_, item)| {
            let at = &item["location"];
            format!(
                "{}:{}:{} {} {} {}",
                at["fileId"].as_str().unwrap(),
                at["startLine"],
                at["startColumn"],
                item["kind"].as_str().unwrap(),
                item["backend"].as_str().unwrap(),
                item["symbolId"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            "scripts/plot.py:1:5 definition tags -",
            "src/main.rs:7:9 definition scip local 0 @ src/main.rs",
            format!(
                "src/shapes.rs:5:12 definition scip {}",
                scip_fixture::CIRCLE_AREA
            )
            .as_str(),
            format!(
                "src/shapes.rs:9:12 definition scip {}",
                scip_fixture::SQUARE_AREA
            )
            .as_str(),
            "scripts/plot.py:4:7 call tags -",
            format!(
                "src/main.rs:6:25 reference scip {}",
                scip_fixture::CIRCLE_AREA
            )
            .as_str(),
            format!(
                "src/main.rs:6:35 reference scip {}",
                scip_fixture::SQUARE_AREA
            )
            .as_str(),
            format!(
                "src/main.rs:7:18 reference scip {}",
                scip_fixture::CIRCLE_AREA
            )
            .as_str(),
        ]
    );
    let summary = by_name.summary();
    assert_eq!(summary["provenance"]["completeness"], "mixed");
    assert_eq!(
        summary["provenance"]["backends"],
        json!(["scip", "tags", "text"])
    );
    let counts: Vec<(String, u64, u64)> = summary["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["symbolId"].as_str().unwrap().to_owned(),
                s["definitions"].as_u64().unwrap(),
                s["references"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("local 0 @ src/main.rs".to_owned(), 1, 0),
            (scip_fixture::CIRCLE_AREA.to_owned(), 1, 2),
            (scip_fixture::SQUARE_AREA.to_owned(), 1, 1),
        ]
    );

    // understand takes its uses from SCIP too, and their callers from tags.
    let understood = fixture
        .call(
            "understand",
            json!({"repo": fixture.repo(), "symbol": "src/shapes.rs:5:area"}),
        )
        .await;
    let summary = understood.summary();
    assert_eq!(
        summary["references"]["byFile"],
        // find_references' set for the same symbol: its definition too.
        json!([{"file": "src/main.rs", "count": 2, "references": [
            {"line": 6, "kind": "reference", "context": "println!(\"{} {}\", c.area(), s.area());"},
            {"line": 7, "kind": "reference", "context": "let area = c.area();"},
        ]}, {"file": "src/shapes.rs", "count": 1, "references": [
            {"line": 5, "kind": "definition", "context": "pub fn area(&self) -> f64 { self.r * self.r * 3.14 }"},
        ]}])
    );
    assert_eq!(summary["callers"][0]["stableId"], "src/main.rs:3:main");
    assert_eq!(summary["callers"][0]["calls"], 2);
    assert_eq!(summary["provenance"]["completeness"], "exact");
    assert_eq!(summary["provenance"]["backends"], json!(["scip"]));

    // Without the index.scip, the answers are syntactic again.
    std::fs::remove_file(fixture.repo.join("index.scip")).unwrap();
    let report = fixture.index().await;
    assert_eq!(report["scip_documents"], 0);
    let again = fixture
        .call(
            "find_references",
            json!({"repo": fixture.repo(), "symbol": "src/shapes.rs:5:area"}),
        )
        .await;
    assert_eq!(again.summary()["provenance"]["completeness"], "syntactic");
    // By name, Square's call and the local variable are counted too, in
    // Rust only (the pinned definition's language: Python's `area` is
    // another symbol); calls inside a macro's arguments are calls.
    assert_eq!(
        places(&again.items()),
        [
            "src/shapes.rs:5:12 definition",
            "src/shapes.rs:9:12 definition",
            "src/main.rs:6:25 call",
            "src/main.rs:6:35 call",
            "src/main.rs:7:9 mention",
            "src/main.rs:7:18 call",
        ]
    );
    assert_eq!(
        again.events.iter().find_map(|e| match &e.kind {
            EventKind::Warning(w) => Some(w.message.clone()),
            _ => None,
        }),
        Some(
            "the repository has no SCIP index: answering for every symbol named \"area\""
                .to_owned()
        )
    );
}

/// The polyglot fixture as a git repository of three commits: all of it,
/// then py/geometry.py with its test, then py/geometry.py with
/// src/shapes.rs (each edit a comment at the end, so lines stay put).
async fn git_fixture() -> Fixture {
    let fixture = Fixture::new().await;
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .arg("-C")
            .arg(&fixture.repo)
            .args([
                "-c",
                "user.name=weir",
                "-c",
                "user.email=weir@example.invalid",
            ])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {output:?}");
    };
    let append = |path: &str, text: &str| {
        let path = fixture.repo.join(path);
        let mut body = std::fs::read_to_string(&path).unwrap();
        body.push_str(text);
        std::fs::write(path, body).unwrap();
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "all of it"]);
    append("py/geometry.py", "# with its test\n");
    append("tests/test_geometry.py", "# with geometry\n");
    git(&["commit", "-q", "-am", "geometry and its test"]);
    append("py/geometry.py", "# with shapes\n");
    append("src/shapes.rs", "// with geometry\n");
    git(&["commit", "-q", "-am", "geometry and shapes"]);
    fixture
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn understand_gives_definition_uses_callers_and_callees() {
    let fixture = Fixture::new().await;
    fixture.index().await;
    let run = fixture
        .call(
            "understand",
            json!({"repo": fixture.repo(), "symbol": "total_area"}),
        )
        .await;
    let summary = run.summary();
    assert_eq!(
        summary["definition"]["stableId"],
        "py/geometry.py:16:total_area"
    );
    assert_eq!(
        summary["definition"]["location"]["endLine"], 17,
        "the body's span"
    );
    assert_eq!(
        summary["definition"]["signature"],
        "def total_area(shapes):"
    );
    assert_eq!(summary["ambiguity"]["matchCount"], 2);
    assert_eq!(
        summary["ambiguity"]["topMatches"],
        json!([
            "py/geometry.py:16:total_area",
            "src/shapes.rs:17:total_area"
        ])
    );
    assert_eq!(
        summary["references"]["byFile"],
        // find_references' set for the name: both definitions, and the
        // test's import and call.
        json!([{"file": "tests/test_geometry.py", "count": 2, "references": [
            {"line": 1, "kind": "import", "context": "from py.geometry import Rect, total_area"},
            {"line": 6, "kind": "call", "context": "assert total_area([Rect(1, 1)]) == 1"}
        ]}, {"file": "py/geometry.py", "count": 1, "references": [
            {"line": 16, "kind": "definition", "context": "def total_area(shapes):"}
        ]}, {"file": "src/shapes.rs", "count": 1, "references": [
            {"line": 17, "kind": "definition", "context": "pub fn total_area(circles: &[Circle]) -> f64 {"}
        ]}])
    );
    assert_eq!(summary["references"]["totalCount"], 4);
    assert_eq!(summary["references"]["fileCount"], 3);
    let callers: Vec<(&str, u64)> = summary["callers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["stableId"].as_str().unwrap(),
                c["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(callers, [("tests/test_geometry.py:4:test_area", 1)]);
    assert_eq!(
        summary["callees"],
        json!([
            {"name": "sum", "kind": "call", "calls": 1, "definedAt": []},
            // In Python only: names never match across languages.
            {"name": "area", "kind": "call", "calls": 1, "definedAt": ["py/geometry.py:11:area"]},
        ])
    );
    assert_eq!(summary["relatedTests"], json!(["tests/test_geometry.py"]));
    // Streamed in stages: the definition, the uses by file, the call graph.
    let groups = groups(&run);
    assert_eq!(
        groups,
        [
            "definition",
            "py/geometry.py",
            "src/shapes.rs",
            "tests/test_geometry.py",
            "callers",
            "callees"
        ]
    );

    // A stableId picks one definition; an unknown name is a clear error.
    let rust = fixture
        .call(
            "understand",
            json!({"repo": fixture.repo(), "symbol": "src/shapes.rs:17:total_area"}),
        )
        .await;
    assert_eq!(rust.summary()["definition"]["docs"], Value::Null);
    assert_eq!(rust.summary()["ambiguity"], Value::Null);
    assert_eq!(
        rust.summary()["callees"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["Circle", "iter", "map", "area", "sum"]
    );
    let missing = fixture
        .call(
            "understand",
            json!({"repo": fixture.repo(), "symbol": "no_such_thing"}),
        )
        .await;
    let EventKind::Failed(failed) = &missing.events.last().unwrap().kind else {
        panic!("an unknown symbol fails the call")
    };
    assert_eq!(
        failed.error.message,
        "no definition of \"no_such_thing\" in the index"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_change_weighs_callers_tests_and_git_history() {
    let fixture = git_fixture().await;
    let report = fixture.index().await;
    assert_eq!(report["git_commits"], 3, "{report}");
    let run = fixture
        .call(
            "prepare_change",
            json!({"repo": fixture.repo(), "symbol": "py/geometry.py:16:total_area"}),
        )
        .await;
    let summary = run.summary();
    assert_eq!(
        summary["target"]["stableId"],
        "py/geometry.py:16:total_area"
    );
    let direct: Vec<&str> = summary["directDependents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["stableId"].as_str().unwrap())
        .collect();
    assert_eq!(direct, ["tests/test_geometry.py:4:test_area"]);
    assert_eq!(
        summary["transitiveImpact"],
        json!({"totalCallers": 1, "moduleSpread": 2, "maxDepth": 1, "depthBound": 3,
               "byDepth": [{"depth": 1, "callers": 1}], "truncated": false})
    );
    assert_eq!(summary["relatedTests"], json!(["tests/test_geometry.py"]));
    assert_eq!(
        summary["coChangeFiles"],
        json!([
            {"file": "src/shapes.rs", "commits": 2, "ratio": 0.67},
            {"file": "tests/test_geometry.py", "commits": 2, "ratio": 0.67},
            {"file": ".gitignore", "commits": 1, "ratio": 0.33},
            {"file": "go/server.go", "commits": 1, "ratio": 0.33},
            {"file": "web/app.js", "commits": 1, "ratio": 0.33},
            {"file": "web/types.ts", "commits": 1, "ratio": 0.33},
        ])
    );
    let risk = &summary["riskAssessment"];
    assert_eq!(risk["level"], "low");
    assert_eq!(risk["score"], 0.08);
    let factors: Vec<(&str, f64)> = risk["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["factor"].as_str().unwrap(), f["value"].as_f64().unwrap()))
        .collect();
    assert_eq!(
        factors,
        [
            ("referenceFiles", 1.0),
            ("directDependents", 1.0),
            ("transitiveCallers", 1.0),
            ("moduleSpread", 2.0),
            ("noRelatedTests", 0.0),
            ("churn", 3.0),
        ]
    );
    assert_eq!(
        summary["provenance"]["backends"],
        json!(["tags", "text", "git"])
    );
    let groups = groups(&run);
    assert_eq!(groups, ["target", "impact depth 1", "tests", "cochange"]);

    // Deeper: `square` in Rust is called by Circle::area, which
    // total_area calls.
    let square = fixture
        .call(
            "prepare_change",
            json!({"repo": fixture.repo(), "symbol": "src/shapes.rs:13:square", "depth": 2}),
        )
        .await;
    let impact: Vec<String> = square
        .items()
        .into_iter()
        .filter(|(group, _)| group.starts_with("impact"))
        .map(|(_, i)| {
            format!(
                "{} {} via {}",
                i["depth"],
                i["stableId"].as_str().unwrap(),
                i["via"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        impact,
        // Rust's callers only: the Python and JavaScript `area`s are
        // other symbols (issue 23: no name matches across languages).
        [
            "1 src/shapes.rs:8:area via square",
            "2 src/shapes.rs:17:total_area via area",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explore_shows_a_directory_its_dependencies_and_hot_spots() {
    let fixture = git_fixture().await;
    fixture.index().await;
    let run = fixture
        .call("explore", json!({"repo": fixture.repo(), "path": "py/"}))
        .await;
    let summary = run.summary();
    assert_eq!(summary["path"], "py");
    assert_eq!(
        summary["overview"],
        json!({"fileCount": 1, "testFileCount": 0, "symbolCount": 5, "languages": {"python": 1}})
    );
    assert_eq!(summary["symbolsByKind"], json!({"class": 1, "function": 4}));
    let key: Vec<(&str, u64)> = summary["keySymbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap(),
                k["usedFromOutside"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        key,
        [
            // find_references' set: the import and the uses.
            ("Rect", 3),
            ("total_area", 2),
            ("__init__", 0),
            ("area", 0),
            ("hypot", 0)
        ]
    );
    assert_eq!(
        summary["dependencies"],
        // Resolved imports: `from py.geometry import Rect, total_area`, two names.
        json!({"outgoing": [], "incoming": [{"file": "tests/test_geometry.py", "strength": 2}]})
    );
    assert_eq!(summary["hotspots"][0]["file"], "py/geometry.py");
    assert_eq!(summary["hotspots"][0]["commits"], 3);
    assert_eq!(
        summary["health"],
        json!({"scipAvailable": false, "gitAvailable": true})
    );
    // get_architecture weighs modules by the same history.
    let arch = fixture
        .call(
            "get_architecture",
            json!({"repo": fixture.repo(), "granularity": "directory"}),
        )
        .await;
    let mut churn: Vec<(String, u64)> = arch.summary()["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["moduleId"].as_str().unwrap().to_owned(),
                m["churn"].as_u64().unwrap(),
            )
        })
        .collect();
    churn.sort();
    assert_eq!(
        churn,
        [
            ("go".into(), 1),
            ("py".into(), 3),
            ("src".into(), 2),
            ("web".into(), 2)
        ]
    );
    assert_eq!(
        arch.summary()["hotspots"][0],
        json!({"file": "py/geometry.py", "commits": 3, "lastChangeMs": arch.summary()["hotspots"][0]["lastChangeMs"]})
    );
    let groups = groups(&run);
    assert_eq!(groups, ["py/geometry.py", "dependencies incoming"]);

    let whole = fixture
        .call("explore", json!({"repo": fixture.repo(), "path": "."}))
        .await;
    assert_eq!(whole.summary()["overview"]["fileCount"], 6);
    let nowhere = fixture
        .call(
            "explore",
            json!({"repo": fixture.repo(), "path": "nowhere"}),
        )
        .await;
    let EventKind::Failed(failed) = &nowhere.events.last().unwrap().kind else {
        panic!("a path with no files fails the call")
    };
    assert!(
        failed.error.message.contains("no indexed source file"),
        "{}",
        failed.error.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_parse_keeps_the_run_talking_with_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("one-big-file");
    std::fs::create_dir_all(&repo).unwrap();
    // One file near the size limit: its parse is one long silence.
    let body: String = (0..30_000)
        .map(|i| format!("fn f{i}(x: u32) -> u32 {{ g{i}(x) + 1 }}\n"))
        .collect();
    std::fs::write(repo.join("big.rs"), body).unwrap();
    let every = Duration::from_millis(100);
    let fixture = Fixture::configured(dir, repo, |config| config.heartbeat = every).await;
    let started = Instant::now();
    let run = fixture
        .call("index_repo", json!({"path": fixture.repo()}))
        .await;
    let took = started.elapsed();
    assert_eq!(run.summary()["definitions"], 30_000);
    let beats: Vec<&weir_core::Progress> = run
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Progress(p)
                if p.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("heartbeat")) =>
            {
                Some(p)
            }
            _ => None,
        })
        .collect();
    assert!(
        took > every * 5 && beats.len() >= 2,
        "{} heartbeats in {took:?}",
        beats.len()
    );
    assert_eq!(beats[0].phase.as_deref(), Some("indexing"));
    // No silence much longer than the heartbeat (the check runs every 100 ms).
    let gaps = run
        .events
        .windows(2)
        .map(|w| w[1].ts.saturating_sub(w[0].ts))
        .max()
        .unwrap();
    assert!(gaps <= 700, "a silence of {gaps} ms");
}

/// Issue 23: the final result holds the page's items themselves, and a
/// page stops at the token budget: with a budget of a few items, the
/// pages hold every reference once, in order, in both forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_result_holds_the_page_within_the_token_budget() {
    let whole = Fixture::new().await;
    let args = json!({"repo": whole.repo(), "symbol": "area"});
    let all = whole.call("find_references", args.clone()).await;
    let summary = all.summary();
    assert_eq!(summary["truncated"], false);
    assert_eq!(summary["items"].as_array().unwrap().len(), 11);
    let listed = |outcome: &Outcome| -> Vec<String> {
        outcome.summary()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                format!(
                    "{}:{}:{} {}",
                    item["file"].as_str().unwrap(),
                    item["line"],
                    item["column"],
                    item["kind"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        listed(&all),
        places(&all.items()),
        "the streamed items, compact"
    );
    assert!(summary.get("topItems").is_none() && summary.get("totalCount").is_none());

    // About two items a page in either form.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("polyglot");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/polyglot"),
        &repo,
    );
    let small = Fixture::configured(dir, repo, |config| config.result_tokens = 60).await;
    let mut cursor = Value::Null;
    let mut paged = Vec::new();
    let mut pages = 0;
    loop {
        let mut args = json!({"repo": small.repo(), "symbol": "area"});
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        let page = small.call("find_references", args).await;
        let summary = page.summary().clone();
        assert_eq!(summary["total"], 11);
        assert_eq!(summary["truncated"], true);
        let items = listed(&page);
        assert!(!items.is_empty() && items.len() <= 3, "{items:?}");
        assert_eq!(
            items,
            places(&page.items()),
            "what streamed is what the result holds"
        );
        // One line a file, then one an item; the first line says which page.
        let text = page.text();
        let item_lines = text.lines().filter(|l| l.starts_with("  ")).count();
        assert_eq!(item_lines, items.len(), "{text}");
        assert!(
            summary["items"].to_string().len() <= 60 * 4 + 2,
            "{summary}"
        );
        paged.extend(items);
        pages += 1;
        cursor = summary["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
        assert!(text.lines().next().unwrap().contains("cursor="), "{text}");
    }
    assert!(pages >= 4, "{pages}");
    assert_eq!(paged, listed(&all));
}
