//! Issue 23, on generated repositories with known answers: search ranks the
//! best name first, a Rust symbol's uses come only from Rust files and are
//! labelled by what they are, the compound tools count find_references'
//! set, and get_architecture draws package edges from the manifests and
//! module edges from resolved imports only, in a Mermaid graph of at most
//! 30 nodes.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use weir_core::{EventKind, RunEvent};
use weir_pack_codeintel::{CodeIntelConfig, CodeIntelPack};
use weir_runtime::{EventLog, MemoryLog, Pack, RunOptions, Scheduler, SchedulerConfig};

struct Repo {
    dir: tempfile::TempDir,
    scheduler: Scheduler,
    log: Arc<dyn EventLog>,
}

impl Repo {
    /// A repository of `files` (path, content), with the pack over it.
    async fn new(files: &[(&str, String)]) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = dir.path().join("repo").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let roots = weir_runtime::Roots::new([dir.path()]).unwrap();
        let mut config = CodeIntelConfig::new(dir.path().join("indexes"), roots);
        config.threads = 2;
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let scheduler = Scheduler::start(
            log.clone(),
            CodeIntelPack::new(config).tools(),
            SchedulerConfig::default(),
        )
        .await
        .unwrap();
        Repo {
            dir,
            scheduler,
            log,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// The final result's structured content.
    async fn call(&self, tool: &str, mut args: Value) -> Value {
        args["repo"] = json!(self.path().display().to_string());
        let run = self
            .scheduler
            .submit(tool, args, RunOptions::default())
            .await
            .unwrap();
        let id = run.run_id().clone();
        run.finished().await.unwrap();
        let events: Vec<RunEvent> = self.log.read(&id, 0, 100_000).await.unwrap();
        match &events.last().unwrap().kind {
            EventKind::Completed(done) => done.structured.clone().unwrap(),
            other => panic!("{tool} did not complete: {other:?}"),
        }
    }

    /// Every streamed item of a call, in order.
    async fn items(&self, tool: &str, mut args: Value) -> Vec<Value> {
        args["repo"] = json!(self.path().display().to_string());
        let run = self
            .scheduler
            .submit(tool, args, RunOptions::default())
            .await
            .unwrap();
        let id = run.run_id().clone();
        run.finished().await.unwrap();
        let events: Vec<RunEvent> = self.log.read(&id, 0, 100_000).await.unwrap();
        events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Partial(p) => Some(p.items.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }
}

fn file_of(item: &Value) -> &str {
    item["location"]["fileId"].as_str().unwrap_or_default()
}

/// A module of URL helpers, with docs that all say "parse" and "URL": the
/// names must decide.
fn url_corpus() -> Vec<(&'static str, String)> {
    let functions = [
        ("urlunparse", "Put a parsed URL back together again."),
        ("urlsplit", "Parse a URL into five components."),
        ("unquote", "Replace %xx escapes in a parsed URL part."),
        (
            "parse_qs",
            "Parse a query string given as a string argument of a URL.",
        ),
        ("urlparse", "Parse a URL into six components."),
        (
            "urljoin",
            "Join a base URL and a possibly relative URL, parsing both.",
        ),
        ("_splitnetloc", "Parse the network location of a URL."),
    ];
    let mut text = String::new();
    for (name, doc) in functions {
        text.push_str(&format!(
            "def {name}(url):\n    \"\"\"{doc}\"\"\"\n    return url\n\n"
        ));
    }
    let helpers = "def parse_url(text):\n    \"\"\"Split text.\"\"\"\n    return text\n\nclass JoinHandle:\n    \"\"\"Waits for a task.\"\"\"\n\ndef join_all(handles):\n    \"\"\"Join every handle.\"\"\"\n    return handles\n\ndef spawn(f):\n    \"\"\"Start f; see spawn_blocking for blocking work.\"\"\"\n    return f\n\ndef spawn_blocking(f):\n    \"\"\"Run blocking work.\"\"\"\n    return f\n";
    vec![("lib/urls.py", text), ("lib/tasks.py", helpers.to_owned())]
}

async fn ranked(repo: &Repo, query: &str) -> Vec<String> {
    let summary = repo
        .call("search_symbols", json!({"query": query, "limit": 20}))
        .await;
    let items = summary["items"]
        .as_array()
        .or(summary["topItems"].as_array())
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .map(|i| {
            let id = i["stableId"].as_str().unwrap();
            id.rsplit(':').next().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_puts_the_best_name_first() {
    let repo = Repo::new(&url_corpus()).await;
    let found = ranked(&repo, "parse url").await;
    let at = |name: &str| found.iter().position(|n| n == name).unwrap_or(usize::MAX);
    assert!(
        at("parse_url") < at("urlunparse") && at("urlparse") < at("urlunparse"),
        "{found:?}"
    );
    assert_eq!(
        found[..2]
            .iter()
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>(),
        ["parse_url", "urlparse"].into()
    );
    for (query, best) in [
        ("join handle", "JoinHandle"),
        ("JoinHandle", "JoinHandle"),
        ("spawn blocking", "spawn_blocking"),
        ("spawn", "spawn"),
        ("url join", "urljoin"),
    ] {
        let found = ranked(&repo, query).await;
        assert_eq!(
            found.first().map(String::as_str),
            Some(best),
            "{query}: {found:?}"
        );
    }
}

/// A Rust crate and a JavaScript file that both define `Config`.
fn two_languages() -> Vec<(&'static str, String)> {
    vec![
        (
            "src/config.rs",
            "/// Settings.\npub struct Config {\n    pub port: u16,\n}\n\nimpl Config {\n    pub fn new() -> Config {\n        Config { port: 80 }\n    }\n}\n".into(),
        ),
        (
            "src/main.rs",
            "mod config;\nuse crate::config::Config;\n\nfn serve(c: &Config) -> Option<Config> {\n    let copy = Config::new();\n    println!(\"{}\", Config::new().port);\n    // Config is read once.\n    Some(copy)\n}\n\nfn main() {\n    serve(&Config::new());\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn reads() {\n        let _ = super::Config::new();\n    }\n}\n".into(),
        ),
        (
            "web/config.js",
            "class Config {\n  constructor() { this.port = 80; }\n}\nconst c = new Config();\nexport { Config };\n".into(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_symbols_uses_are_rusts_and_labelled() {
    let repo = Repo::new(&two_languages()).await;
    let items = repo
        .items(
            "find_references",
            json!({"symbol": "src/config.rs:2:Config"}),
        )
        .await;
    assert!(
        items.iter().all(|i| file_of(i).ends_with(".rs")),
        "{items:#?}"
    );
    let kinds: Vec<(u64, &str)> = items
        .iter()
        .filter(|i| file_of(i) == "src/main.rs")
        .map(|i| {
            (
                i["location"]["startLine"].as_u64().unwrap(),
                i["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (2, "import"),
            (4, "type"),
            (4, "type"),
            (5, "type"),
            (6, "type"),
            (7, "mention"),
            (12, "type"),
            (19, "type"),
        ]
    );
    // understand and prepare_change count the same set, and find the test
    // module in main.rs.
    let references = repo
        .call(
            "find_references",
            json!({"symbol": "src/config.rs:2:Config"}),
        )
        .await;
    for tool in ["understand", "prepare_change"] {
        let summary = repo
            .call(tool, json!({"symbol": "src/config.rs:2:Config"}))
            .await;
        assert_eq!(
            summary["references"]["fileCount"], references["fileCount"],
            "{tool}"
        );
        assert_eq!(
            summary["references"]["totalCount"], references["total"],
            "{tool}"
        );
        assert_eq!(summary["relatedTests"], json!(["src/main.rs"]), "{tool}");
        assert!(
            summary["precision"]
                .as_str()
                .unwrap()
                .starts_with("by name only")
        );
    }
}

/// A Cargo workspace of `n` crates in a chain (each depends on the next,
/// the first also on the last for its tests), each crate's lib importing
/// the next's `Item`, plus a crate that names `Item` without importing it.
fn workspace(n: usize) -> Vec<(String, String)> {
    let mut files = vec![(
        "Cargo.toml".to_owned(),
        format!(
            "[workspace]\nmembers = [\"crates/*\"]\n\n[workspace.dependencies]\n{}",
            (0..n)
                .map(|i| format!("c{i} = {{ path = \"crates/c{i}\" }}\n"))
                .collect::<String>()
        ),
    )];
    for i in 0..n {
        let mut manifest = format!("[package]\nname = \"c{i}\"\n\n[dependencies]\n");
        let mut lib = format!("pub struct Item{i};\n");
        if i + 1 < n {
            manifest.push_str(&format!("c{}.workspace = true\n", i + 1));
            lib.push_str(&format!(
                "use c{}::Item{};\npub fn f{i}(_: Item{}) {{}}\n",
                i + 1,
                i + 1,
                i + 1
            ));
        }
        if i == 0 {
            manifest.push_str(&format!(
                "\n[dev-dependencies]\nc{} = {{ path = \"../c{}\" }}\n",
                n - 1,
                n - 1
            ));
        }
        files.push((format!("crates/c{i}/Cargo.toml"), manifest));
        files.push((format!("crates/c{i}/src/lib.rs"), lib));
    }
    // No manifest dependency, no import: a bare name draws nothing.
    files.push((
        "tools/lonely/Cargo.toml".to_owned(),
        "[package]\nname = \"lonely\"\n".to_owned(),
    ));
    files.push((
        "tools/lonely/src/lib.rs".to_owned(),
        "pub fn g(_: Item0) -> Item1 { todo!() }\n".to_owned(),
    ));
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn architecture_from_manifests_and_imports_only() {
    let files = workspace(4);
    let files: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let repo = Repo::new(&files).await;
    let items = repo
        .items("get_architecture", json!({"granularity": "package"}))
        .await;
    let mut edges: Vec<String> = items
        .iter()
        .filter(|i| i["from"].is_string())
        .map(|i| {
            format!(
                "{} -> {} {} {}",
                i["from"].as_str().unwrap(),
                i["to"].as_str().unwrap(),
                i["kind"].as_str().unwrap(),
                i["strength"]
            )
        })
        .collect();
    edges.sort();
    assert_eq!(
        edges,
        [
            "c0 -> c1 normal 1",
            "c0 -> c3 dev 0",
            "c1 -> c2 normal 1",
            "c2 -> c3 normal 1",
        ]
    );
    let modules = repo
        .items(
            "get_architecture",
            json!({"granularity": "module", "depth": 2}),
        )
        .await;
    let mut edges: Vec<String> = modules
        .iter()
        .filter(|i| i["from"].is_string())
        .map(|i| {
            format!(
                "{} -> {}",
                i["from"].as_str().unwrap(),
                i["to"].as_str().unwrap()
            )
        })
        .collect();
    edges.sort();
    edges.dedup();
    assert_eq!(
        edges,
        [
            "crates/c0 -> crates/c1",
            "crates/c0 -> crates/c3",
            "crates/c1 -> crates/c2",
            "crates/c2 -> crates/c3",
        ],
        "tools/lonely names Item0 and Item1 without importing them: no edge"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mermaid_graph_keeps_to_thirty_nodes() {
    let files = workspace(40);
    let files: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let repo = Repo::new(&files).await;
    let summary = repo
        .call("get_architecture", json!({"granularity": "package"}))
        .await;
    assert_eq!(summary["moduleCount"], 41);
    let mermaid = summary["mermaid"].as_str().unwrap();
    let nodes = mermaid.lines().filter(|l| l.contains("[\"")).count();
    assert_eq!(nodes, 30, "{mermaid}");
    assert!(mermaid.contains("not drawn: 11 more modules"), "{mermaid}");
    assert_eq!(summary["notShown"]["modules"], 11);
}
