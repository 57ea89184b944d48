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
        let mut config = CodeIntelConfig::new(dir.path().join("indexes"));
        config.threads = 2;
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
    assert_eq!(search.summary()["totalCount"], 0, "build/ is ignored");
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
    assert_eq!(summary["totalCount"], 10);
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
    assert_eq!(summary["totalCount"], 11);
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
    assert_eq!(edges, ["web/types.ts -> web/app.js (1)"]);
    assert!(
        files.summary()["mermaid"]
            .as_str()
            .unwrap()
            .contains("-->|1|")
    );
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
    assert_eq!(gone.summary()["totalCount"], 0);
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
            "cannot open the repository \"/nonexistent/repo\"",
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
