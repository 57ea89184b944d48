//! The code intelligence tools end to end: `weir index` with its report,
//! and `weir serve --stdio` driven by weir's own MCP client (`weir call`),
//! on the pack's polyglot fixture (copied, so the test may edit it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

struct Repo {
    dir: tempfile::TempDir,
    repo: PathBuf,
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

impl Repo {
    fn polyglot() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("polyglot");
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs/codeintel/tests/data/polyglot");
        copy_tree(&fixture, &repo);
        Repo { dir, repo }
    }

    fn data_dir(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn path(&self) -> String {
        self.repo.display().to_string()
    }

    fn weir(&self, args: &[&str]) -> Output {
        Command::new(WEIR)
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(args)
            .stdin(Stdio::null())
            .env_remove("WEIR_TOKEN")
            .output()
            .unwrap()
    }

    /// `weir call` of `tool` on a `weir serve --stdio` of this data
    /// directory, as JSON lines.
    fn call(&self, tool: &str, args: Value) -> (Option<i32>, Vec<Value>) {
        // The scratch directory is the server's one root: callers may
        // name the repository in it.
        let server = format!(
            "{WEIR} --data-dir {} serve --stdio --no-exec --no-critique --root {}",
            self.data_dir(),
            self.dir.path().display()
        );
        let output = self.weir(&[
            "call",
            "--stdio",
            &server,
            tool,
            "--json",
            &args.to_string(),
            "--output",
            "jsonl",
        ]);
        let lines = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect();
        (output.status.code(), lines)
    }
}

/// The items of the partial results, in order.
fn items(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|line| line["type"] == "partial")
        .flat_map(|line| {
            line["structured"]["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

fn result(lines: &[Value]) -> &Value {
    let last = lines.last().expect("a result");
    assert_eq!(last["type"], "result", "{last}");
    last
}

#[test]
fn weir_index_reports_and_reindexes_only_what_changed() {
    let repo = Repo::polyglot();
    let first = repo.weir(&["index", &repo.path(), "--json"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let report: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(report["files"], 6);
    assert_eq!(report["parsed"], 6);
    assert!(
        Path::new(report["index"].as_str().unwrap())
            .starts_with(repo.dir.path().join("data/codeintel"))
    );

    std::fs::write(
        repo.repo.join("py/extra.py"),
        "def perimeter(r):\n    return area(r) * 2\n",
    )
    .unwrap();
    let second = repo.weir(&["index", &repo.path()]);
    assert_eq!(second.status.code(), Some(0));
    let said = String::from_utf8_lossy(&second.stdout);
    assert!(
        said.contains("7 files") && said.contains("1 parsed, 6 unchanged"),
        "{said}"
    );

    let missing = repo.weir(&["index", "/nonexistent/repo"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("cannot open the repository /nonexistent/repo")
    );
}

#[test]
fn find_references_streams_grouped_chunks_then_a_summary() {
    let repo = Repo::polyglot();
    let (code, lines) = repo.call(
        "find_references",
        json!({"repo": repo.path(), "symbol": "area"}),
    );
    assert_eq!(code, Some(0), "{lines:?}");
    let places: Vec<String> = items(&lines)
        .iter()
        .map(|item| {
            format!(
                "{}:{} {}",
                item["location"]["fileId"].as_str().unwrap(),
                item["location"]["startLine"],
                item["kind"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        places,
        [
            "py/geometry.py:11 definition",
            "src/shapes.rs:8 definition",
            "web/app.js:10 definition",
            "web/types.ts:2 definition",
            "py/geometry.py:17 call",
            "src/shapes.rs:7 mention",
            "src/shapes.rs:18 call",
            "tests/test_geometry.py:5 call",
            "web/app.js:1 mention",
            "web/app.js:3 mention",
            "web/app.js:3 call",
        ]
    );
    let result = result(&lines);
    let summary = &result["structured"];
    assert_eq!(summary["total"], 11);
    assert_eq!(summary["nextCursor"], Value::Null);
    assert_eq!(summary["provenance"]["completeness"], "syntactic");
    // The answer itself is in the result too, for hosts that show their
    // model no partials: lines by file in the content, items in the
    // structured result, the same places in the same order.
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("find_references \"area\": 11 items") && text.contains("; all 11 here; "),
        "{text}"
    );
    let streamed: Vec<String> = places
        .iter()
        .map(|p| p.split(' ').next().unwrap().to_owned())
        .collect();
    let listed: Vec<String> = summary["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| format!("{}:{}", item["file"].as_str().unwrap(), item["line"]))
        .collect();
    assert_eq!(listed, streamed);
    let written: Vec<String> = text_places(&json!({"content": [{"text": text}]}))
        .into_iter()
        .map(|(file, line)| format!("{file}:{line}"))
        .collect();
    assert_eq!(written, streamed);
}

#[test]
fn search_and_architecture_answer_through_the_server() {
    let repo = Repo::polyglot();
    let (code, lines) = repo.call(
        "search_symbols",
        json!({"repo": repo.path(), "query": "Circle"}),
    );
    assert_eq!(code, Some(0), "{lines:?}");
    let found = items(&lines);
    assert_eq!(found[0]["stableId"], "src/shapes.rs:2:Circle");
    assert_eq!(found[0]["docs"], "A circle of radius `r`.");

    let (code, lines) = repo.call(
        "get_architecture",
        json!({"repo": repo.path(), "granularity": "file"}),
    );
    assert_eq!(code, Some(0), "{lines:?}");
    let summary = &result(&lines)["structured"];
    // types.ts calls app.js's `render` without importing it: a bare name
    // draws no edge (issue 23), and no file of the fixture imports another.
    assert_eq!(summary["dependencyGraph"], json!([]));
    assert!(!summary["mermaid"].as_str().unwrap().contains("-->"));
}

#[test]
fn a_call_that_runs_out_of_time_is_cancelled_on_the_server() {
    let repo = Repo::polyglot();
    // Enough files that indexing takes longer than the call allows.
    let body: String = (0..200)
        .map(|i| format!("fn f{i}() {{ g{i}() }}\n"))
        .collect();
    for i in 0..800 {
        std::fs::write(repo.repo.join(format!("src/m{i}.rs")), &body).unwrap();
    }
    let started = Instant::now();
    let server = format!(
        "{WEIR} --data-dir {} serve --stdio --no-exec --no-critique --root {}",
        repo.data_dir(),
        repo.dir.path().display()
    );
    let output = repo.weir(&[
        "call",
        "--stdio",
        &server,
        "index_repo",
        &format!("path={}", repo.path()),
        "--timeout",
        "1",
        "--output",
        "jsonl",
    ]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A Rust repository with two methods named `area`, and its `index.scip`
/// written with the scip crate's types (as rust-analyzer would write it).
fn scip_repo() -> Repo {
    use scip::types::{Document, Index, Occurrence};
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("shapes");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let shapes = "pub struct Circle;\npub struct Square;\n\nimpl Circle {\n    pub fn area(&self) -> f64 { 3.14 }\n}\n\nimpl Square {\n    pub fn area(&self) -> f64 { 1.0 }\n}\n";
    let main = "fn main() {\n    let (c, s) = (shapes::Circle, shapes::Square);\n    println!(\"{} {}\", c.area(), s.area());\n}\n";
    std::fs::write(repo.join("src/shapes.rs"), shapes).unwrap();
    std::fs::write(repo.join("src/main.rs"), main).unwrap();
    let circle = "rust-analyzer cargo shapes 0.1.0 Circle#area().";
    let square = "rust-analyzer cargo shapes 0.1.0 Square#area().";
    // (line, column, symbol, roles), 0-based, each an `area`.
    let document = |path: &str, occurrences: &[(i32, i32, &str, i32)]| {
        let mut document = Document::new();
        document.relative_path = path.into();
        for (line, column, symbol, roles) in occurrences {
            document.occurrences.push(Occurrence {
                range: vec![*line, *column, column + 4],
                symbol: (*symbol).into(),
                symbol_roles: *roles,
                ..Default::default()
            });
        }
        document
    };
    let mut index = Index::new();
    index.documents = vec![
        document("src/shapes.rs", &[(4, 11, circle, 1), (8, 11, square, 1)]),
        document("src/main.rs", &[(2, 24, circle, 8), (2, 34, square, 8)]),
    ];
    scip::write_message_to_file(repo.join("index.scip"), index).unwrap();
    Repo { dir, repo }
}

#[test]
fn with_an_index_scip_find_references_is_exact() {
    let repo = scip_repo();
    let (code, lines) = repo.call(
        "find_references",
        json!({"repo": repo.path(), "symbol": "src/shapes.rs:5:area"}),
    );
    assert_eq!(code, Some(0), "{lines:?}");
    let places: Vec<String> = items(&lines)
        .iter()
        .map(|item| {
            format!(
                "{}:{}:{} {} {}",
                item["location"]["fileId"].as_str().unwrap(),
                item["location"]["startLine"],
                item["location"]["startColumn"],
                item["kind"].as_str().unwrap(),
                item["backend"].as_str().unwrap(),
            )
        })
        .collect();
    // Circle's area and its one call: not `s.area()` on the same line,
    // which a search by name cannot tell from it.
    assert_eq!(
        places,
        [
            "src/shapes.rs:5:12 definition scip",
            "src/main.rs:3:25 reference scip",
        ]
    );
    let summary = &result(&lines)["structured"];
    assert_eq!(summary["provenance"]["completeness"], "exact");
    assert_eq!(summary["provenance"]["backends"], json!(["scip"]));
    assert_eq!(
        summary["symbols"][0]["symbolId"],
        "rust-analyzer cargo shapes 0.1.0 Circle#area()."
    );
}

#[test]
fn the_compound_tools_answer_through_the_server() {
    let repo = Repo::polyglot();
    let (code, lines) = repo.call(
        "understand",
        json!({"repo": repo.path(), "symbol": "py/geometry.py:16:total_area"}),
    );
    assert_eq!(code, Some(0), "{lines:?}");
    let summary = &result(&lines)["structured"];
    assert_eq!(
        summary["definition"]["signature"],
        "def total_area(shapes):"
    );
    assert_eq!(
        summary["callers"][0]["stableId"],
        "tests/test_geometry.py:4:test_area"
    );

    let (code, lines) = repo.call(
        "prepare_change",
        json!({"repo": repo.path(), "symbol": "src/shapes.rs:13:square", "depth": 2}),
    );
    assert_eq!(code, Some(0), "{lines:?}");
    let change = result(&lines);
    let summary = &change["structured"];
    // Rust's callers only (issue 23: the Python and JavaScript `area`s
    // are other symbols), and no Rust test uses `square`.
    assert_eq!(summary["transitiveImpact"]["totalCallers"], 2);
    assert_eq!(summary["transitiveImpact"]["maxDepth"], 2);
    assert_eq!(summary["relatedTests"], json!([]));
    // Not a git repository: no co-change, and the answer says so.
    assert_eq!(summary["coChangeFiles"], json!([]));
    assert!(
        summary["provenance"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("no git history")),
        "{summary}"
    );
    let headline = change["content"][0]["text"].as_str().unwrap();
    assert!(
        headline.starts_with("prepare_change src/shapes.rs:13:square, by name only"),
        "{headline}"
    );

    let (code, lines) = repo.call("explore", json!({"repo": repo.path(), "path": "web"}));
    assert_eq!(code, Some(0), "{lines:?}");
    let summary = &result(&lines)["structured"];
    assert_eq!(
        summary["symbolsByKind"],
        json!({"class": 1, "function": 2, "interface": 1, "method": 2}),
        "the constructor is no tag: JS tags leave it out"
    );
}

/// Issue 23: a plain MCP client over `weir serve --stdio` that declares no
/// partial results (as most hosts): all it sees is each call's final result.
struct PlainClient {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    messages: std::sync::mpsc::Receiver<Value>,
    next_id: u64,
}

impl PlainClient {
    fn start(repo: &Repo, extra: &[&str]) -> PlainClient {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new(WEIR)
            .arg("--data-dir")
            .arg(repo.data_dir())
            .args(["serve", "--stdio", "--no-exec", "--no-critique", "--root"])
            .arg(repo.dir.path())
            .args(extra)
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut client = PlainClient {
            child,
            stdin,
            messages,
            next_id: 1,
        };
        client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "weir-codeintel-plain-client", "version": "0"}
            }),
        );
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The result of request `method`; a partial result on the way fails.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .messages
                .recv_timeout(Duration::from_secs(120))
                .expect("the server answers in time");
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{message}");
                return message["result"].clone();
            }
            let method = message["method"].as_str().unwrap_or_default();
            assert!(
                !method.contains("partial"),
                "a partial result to a client that declared none: {message}"
            );
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert_ne!(result["isError"], true, "{result}");
        result
    }
}

impl Drop for PlainClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `(file, line)` of each item in a final result's text content (a file's
/// line, then `  line:column …` under it), checked against the first line.
fn text_places(result: &Value) -> Vec<(String, u64)> {
    let text = result["content"][0]["text"].as_str().unwrap();
    let mut places = Vec::new();
    let mut file = String::new();
    for line in text.lines().skip(1) {
        if let Some(item) = line.strip_prefix("  ") {
            let at = item.split(':').next().unwrap();
            places.push((file.clone(), at.parse().unwrap()));
        } else if !line.starts_with("warning: ") {
            file = line.to_owned();
        }
    }
    places
}

/// `(file, line)` of each item in a final result's `structuredContent`.
fn structured_places(result: &Value) -> Vec<(String, u64)> {
    result["structuredContent"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["file"].as_str().unwrap().to_owned(),
                item["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `result`'s structuredContent against `tool`'s output schema (checked as
/// weir checks arguments; `additionalProperties` schemas are not).
fn check_schema(tool: &Value, result: &Value) {
    weir_core::check_arguments(&tool["outputSchema"], &result["structuredContent"])
        .unwrap_or_else(|error| panic!("{error}: {}", result["structuredContent"]));
}

/// `grep -rnw WORD --include=*.rs` in `dir`, as `(file, line)` relative to it.
fn grep_places(dir: &Path, word: &str) -> Vec<(String, u64)> {
    let output = Command::new("grep")
        .args(["-rnw", word, "--include=*.rs", "."])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, ':');
            let file = parts.next().unwrap().trim_start_matches("./").to_owned();
            (file, parts.next().unwrap().parse().unwrap())
        })
        .collect()
}

/// A Rust crate of 300 files, each using `Widget` 10 times (one use a
/// line), and `Gadget` used three times.
fn widget_repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("widgets");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let mut lib = String::from(
        "/// A widget.\npub struct Widget(pub u32);\n\n/// A gadget.\npub struct Gadget;\n\npub fn gadget() -> Gadget {\n    Gadget\n}\n",
    );
    for i in 0..300 {
        lib.push_str(&format!("pub mod m{i};\n"));
        let body: String = (0..10)
            .map(|j| format!("pub fn f{i}_{j}(w: &Widget) -> u32 {{\n    w.0 + {j}\n}}\n"))
            .collect();
        std::fs::write(
            repo.join(format!("src/m{i}.rs")),
            format!("use crate::*;\n\n{body}"),
        )
        .unwrap();
    }
    std::fs::write(repo.join("src/lib.rs"), lib).unwrap();
    Repo { dir, repo }
}

/// Issue 23: a host that takes no partial results gets the answer in the
/// final result: complete when it fits the budget, else page 1 with
/// `truncated`, the exact total and a cursor that pages through every
/// reference exactly once; the text and the structured form hold the same
/// items, and the result matches the tool's output schema.
#[test]
fn a_client_without_partials_gets_every_reference_in_final_results() {
    let repo = widget_repo();
    let mut client = PlainClient::start(&repo, &["--result-tokens", "4000"]);
    let tools = client.request("tools/list", json!({}));
    let tool = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "find_references")
        .unwrap()
        .clone();

    let expected = grep_places(&repo.repo, "Widget");
    assert_eq!(expected.len(), 3_001, "the generator's own count");
    let mut seen: Vec<(String, u64)> = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let mut args = json!({"repo": repo.path(), "symbol": "Widget"});
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        let result = client.call("find_references", args);
        check_schema(&tool, &result);
        let structured = &result["structuredContent"];
        assert_eq!(structured["total"], expected.len() as u64, "an exact total");
        let places = structured_places(&result);
        assert!(!places.is_empty());
        assert_eq!(structured["returned"], places.len() as u64);
        assert_eq!(text_places(&result), places, "the same items in both forms");
        let headline = result["content"][0]["text"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap();
        assert_eq!(structured["headline"], headline);
        seen.extend(places);
        pages += 1;
        cursor = structured["nextCursor"].clone();
        // Each form of the page stays within 4,000 tokens (bytes / 4) of items.
        let items_bytes = structured["items"].to_string().len();
        assert!(
            items_bytes <= 4_000 * 4 + 4_096,
            "{items_bytes} bytes of items"
        );
        assert_eq!(structured["truncated"], true, "{headline}");
        if cursor.is_null() {
            assert!(headline.contains("the last page"), "{headline}");
            break;
        }
        assert!(
            headline.contains(&format!(
                "for the next page call find_references again with the same arguments and cursor=\"{}\"",
                cursor.as_str().unwrap()
            )),
            "{headline}"
        );
        assert!(pages < 100, "paging does not end");
    }
    assert!(pages > 2, "{pages} pages: the budget did not page");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "no reference twice");
    let mut expected = expected;
    expected.sort();
    assert_eq!(sorted, expected, "every line grep finds, and only those");

    // A small answer is whole in one result.
    let result = client.call(
        "find_references",
        json!({"repo": repo.path(), "symbol": "Gadget"}),
    );
    check_schema(&tool, &result);
    let structured = &result["structuredContent"];
    let mut expected = grep_places(&repo.repo, "Gadget");
    assert_eq!(expected.len(), 3);
    assert_eq!(structured["truncated"], false);
    assert_eq!(structured["nextCursor"], Value::Null);
    assert_eq!(structured["total"], 3);
    let mut places = structured_places(&result);
    assert_eq!(text_places(&result), places);
    places.sort();
    expected.sort();
    assert_eq!(places, expected);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("find_references \"Gadget\": 3 items (1 definition, 2 uses) in 1 file")
            && text
                .lines()
                .next()
                .unwrap()
                .contains("; all 3 here; precision: "),
        "{text}"
    );
}
