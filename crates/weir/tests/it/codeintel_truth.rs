//! Issue 23's acceptance on this very repository, through the real binary
//! (`weir index`, then `weir call` against `weir serve --stdio`): the
//! compound tools count the references `find_references` finds, name the
//! test files among them and do not call a change to `RunContext` low
//! risk; `get_architecture granularity=package` draws exactly `cargo
//! metadata`'s dependencies between weir's crates.
//!
//! The index goes to a scratch data directory; the repository is only read.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// This repository, indexed into a scratch data directory.
struct Indexed {
    data: tempfile::TempDir,
    root: PathBuf,
}

impl Indexed {
    fn new() -> Indexed {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .canonicalize()
            .unwrap();
        let data = tempfile::tempdir().unwrap();
        let indexed = Indexed { data, root };
        let output = indexed
            .weir()
            .args(["index", &indexed.root.display().to_string(), "--json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        indexed
    }

    fn weir(&self) -> Command {
        let mut command = Command::new(WEIR);
        command
            .arg("--data-dir")
            .arg(self.data.path())
            .stdin(Stdio::null())
            .env_remove("WEIR_TOKEN");
        command
    }

    /// The final result of `tool` called with `args` (and `repo`).
    fn call(&self, tool: &str, mut args: Value) -> Value {
        args["repo"] = json!(self.root.display().to_string());
        let server = format!(
            "{WEIR} --data-dir {} serve --stdio --no-exec --no-critique --root {}",
            self.data.path().display(),
            self.root.display()
        );
        let output = self
            .weir()
            .args(["call", "--stdio", &server, tool, "--json"])
            .arg(args.to_string())
            .args(["--output", "jsonl"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let result: Value = serde_json::from_str(last).unwrap_or_else(|e| {
            panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr))
        });
        assert_eq!(result["type"], "result", "{result}");
        result
    }
}

fn headline(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn understand_and_prepare_change_count_what_find_references_finds() {
    let repo = Indexed::new();
    let found = repo.call("find_references", json!({"symbol": "RunContext"}));
    let found = &found["structured"];
    let files = found["fileCount"].as_u64().unwrap();
    let total = found["total"].as_u64().unwrap();
    assert!(files >= 40, "RunContext is used in {files} files");

    let understood = repo.call("understand", json!({"symbol": "RunContext"}));
    let summary = &understood["structured"];
    assert_eq!(summary["references"]["fileCount"], files, "{summary}");
    assert_eq!(summary["references"]["totalCount"], total);
    // No SCIP index here: the first sentence says the match is by name.
    let first = headline(&understood).split(". ").next().unwrap();
    assert!(first.contains("by name only"), "{first}");

    let prepared = repo.call("prepare_change", json!({"symbol": "RunContext"}));
    let summary = &prepared["structured"];
    assert_eq!(summary["references"]["fileCount"], files, "{summary}");
    assert_eq!(summary["references"]["totalCount"], total);
    assert_ne!(summary["riskAssessment"]["level"], "low", "{summary}");
    let text = headline(&prepared).to_lowercase();
    assert!(
        !text.contains("risk low") && !text.contains("low risk"),
        "{text}"
    );
    assert!(
        text.split(". ").next().unwrap().contains("by name only"),
        "{text}"
    );

    // The related tests: test files (or files with their own tests) that
    // reference RunContext, and the same in both answers.
    for answer in [&understood, &prepared] {
        let tests: Vec<&str> = answer["structured"]["relatedTests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(
            tests.iter().any(|t| t.contains("/tests/")),
            "no test file among {tests:?}"
        );
        for test in &tests {
            let source = std::fs::read_to_string(repo.root.join(test)).unwrap();
            assert!(
                source.contains("RunContext"),
                "{test} never names RunContext"
            );
            assert!(
                test.contains("/tests/")
                    || source.contains("#[cfg(test)]")
                    || source.contains("#[test]"),
                "{test} is no test"
            );
        }
    }
}

#[test]
fn find_references_labels_rust_uses_and_stays_in_rust() {
    let repo = Indexed::new();
    let found = repo.call(
        "find_references",
        json!({"symbol": "RunContext", "limit": 1000}),
    );
    let items = found["structured"]["items"].as_array().unwrap();
    assert!(!items.is_empty());
    let path = |i: &Value| {
        i["location"]["fileId"]
            .as_str()
            .or(i["path"].as_str())
            .or(i["file"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    // Only Rust files: the dashboard's JavaScript is another language.
    for item in items {
        assert!(path(item).ends_with(".rs"), "{item}");
    }
    // Signatures, `use` items and `impl` blocks are uses, not mentions:
    // what remains a mention is in comments and strings.
    let mentions = items.iter().filter(|i| i["kind"] == "mention").count();
    let typed = items
        .iter()
        .filter(|i| {
            matches!(
                i["kind"].as_str(),
                Some("type" | "import" | "implementation")
            )
        })
        .count();
    assert!(typed > 100, "{typed} type/import/impl uses");
    assert!(
        mentions * 2 < items.len(),
        "{mentions} of {} are mentions",
        items.len()
    );
}

#[test]
fn package_edges_are_cargo_metadatas() {
    let repo = Indexed::new();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(&repo.root)
        .output()
        .unwrap();
    assert!(output.status.success());
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    // Every dependency of a weir crate on a weir crate, by kind (normal,
    // dev, build: a crate may depend on another in several ways, and on
    // itself for its tests' features).
    let mut expected = BTreeSet::new();
    for package in packages {
        for dependency in package["dependencies"].as_array().unwrap() {
            let to = dependency["name"].as_str().unwrap();
            if names.contains(to) && dependency["path"].is_string() {
                let kind = dependency["kind"].as_str().unwrap_or("normal");
                expected.insert((
                    package["name"].as_str().unwrap().to_owned(),
                    to.to_owned(),
                    kind.to_owned(),
                ));
            }
        }
    }
    assert!(expected.len() > 30, "{expected:?}");

    let architecture = repo.call(
        "get_architecture",
        json!({"granularity": "package", "limit": 1000}),
    );
    let summary = &architecture["structured"];
    assert_eq!(summary["truncated"], false, "{summary}");
    let drawn: BTreeSet<(String, String, String)> = summary["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["source"] == "manifest")
        .filter(|i| {
            names.contains(i["from"].as_str().unwrap()) && names.contains(i["to"].as_str().unwrap())
        })
        .map(|i| {
            (
                i["from"].as_str().unwrap().to_owned(),
                i["to"].as_str().unwrap().to_owned(),
                i["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        drawn.symmetric_difference(&expected).collect::<Vec<_>>(),
        Vec::<&(String, String, String)>::new(),
        "package edges differ from cargo metadata's"
    );
    // weir-core depends on no weir crate; no edge is guessed from names.
    assert!(!drawn.iter().any(|(from, _, _)| from == "weir-core"));
    let mermaid = summary["mermaid"].as_str().unwrap();
    let nodes = mermaid.lines().filter(|l| l.contains("[\"")).count();
    assert!(nodes <= 30, "{nodes} nodes");
}
