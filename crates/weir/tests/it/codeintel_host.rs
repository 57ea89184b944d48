//! Issue 23's real-host acceptance: Claude Code (pinned, run offline
//! against `weir-fake-model`, as in `hosts.rs`) as the MCP host of `weir
//! serve --stdio --result-tokens 1500`, its model asking `find_references`
//! for a symbol with more references than fit one page. The `tool_result`
//! the model gets holds the first page's items, the exact `total`,
//! `truncated` and a `nextCursor`; the model's second call, with that
//! cursor, gets the next page.
//!
//! The fake model's script is fixed before the host starts, so the test
//! first asks the same server (same data directory, same flags) once with
//! `weir call` for the first page: answers are deterministic for an
//! unchanged index, so its `nextCursor` is the one the model must then be
//! shown, which the test asserts, and the one the script passes back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use weir_fake_model::agent_clis::{self, of_type, run_to_end};
use weir_fake_model::{FakeModel, Script, Turn};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const RESULT_TOKENS: &str = "1500";
/// Files and calls per file of the generated repository: 240 uses.
const FILES: usize = 6;
const CALLS: usize = 40;

/// A Python repository where `target` is defined once and called
/// `FILES * CALLS` times.
fn generate(repo: &Path) {
    std::fs::create_dir_all(repo.join("pkg")).unwrap();
    std::fs::write(
        repo.join("pkg/core.py"),
        "def target(n):\n    \"\"\"The function everyone calls.\"\"\"\n    return n\n",
    )
    .unwrap();
    for file in 0..FILES {
        let mut text = String::from("from pkg.core import target\n\n\ndef run():\n");
        for call in 0..CALLS {
            text.push_str(&format!("    target({})\n", file * 1000 + call));
        }
        std::fs::write(repo.join(format!("pkg/user_{file}.py")), text).unwrap();
    }
}

/// `weir serve --stdio` as the host starts it (and as `weir call` does).
fn serve_args(data: &Path, root: &Path) -> Vec<String> {
    [
        "serve",
        "--stdio",
        "--data-dir",
        &data.display().to_string(),
        "--root",
        &root.display().to_string(),
        "--no-exec",
        "--no-critique",
        "--result-tokens",
        RESULT_TOKENS,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The final result's `structuredContent` of one `weir call`.
fn call(data: &Path, root: &Path, args: Value) -> Value {
    let server = std::iter::once(WEIR.to_owned())
        .chain(serve_args(data, root))
        .collect::<Vec<_>>()
        .join(" ");
    let output = std::process::Command::new(WEIR)
        .args(["call", "--stdio", &server, "find_references", "--json"])
        .arg(args.to_string())
        .args(["--output", "jsonl"])
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(last["type"], "result", "{last}");
    last["structured"].clone()
}

/// `file:line` of a page's items.
fn locations(items: &Value) -> BTreeSet<String> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| format!("{}:{}", i["file"].as_str().unwrap(), i["line"]))
        .collect()
}

/// The JSON object the model read in a `tool_result` block: Claude Code
/// hands it the text of `structuredContent`.
fn read_by_model(block: &Value) -> Value {
    let text = match &block["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => panic!("an unexpected tool_result content: {other}"),
    };
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the model's tool_result is not the JSON answer ({e}): {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_pages_find_references_with_the_cursor() {
    let scratch = tempfile::tempdir().unwrap();
    let [home, tmp, work, data] = ["home", "tmp", "work", "data"].map(|name| {
        let dir = scratch.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        dir.canonicalize().unwrap()
    });
    let repo: PathBuf = work.join("repo");
    generate(&repo);
    let ask = json!({"repo": repo, "symbol": "target"});

    // What the server answers: page 1 and its cursor, then page 2.
    let first = call(&data, &work, ask.clone());
    let total = first["total"].as_u64().unwrap();
    assert!(total > (FILES * CALLS) as u64, "{first}");
    assert_eq!(first["truncated"], true, "{first}");
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let page_one = locations(&first["items"]);
    assert!(page_one.len() < total as usize / 2, "{}", page_one.len());
    let mut next = ask.clone();
    next["cursor"] = json!(cursor);
    let second = call(&data, &work, next.clone());
    let page_two = locations(&second["items"]);
    assert!(!page_two.is_empty() && page_one.is_disjoint(&page_two));

    // The host.
    let tool = "mcp__weir__find_references";
    let fake = FakeModel::start(Script::new([
        Turn::tool_call(tool, ask),
        Turn::tool_call(tool, next),
        Turn::text("Two pages read."),
    ]))
    .unwrap();
    let claude_tmp = tmp.join("claude");
    std::fs::create_dir(&claude_tmp).unwrap();
    let server = json!({"command": WEIR, "args": serve_args(&data, &work)});
    let config = json!({"mcpServers": {"weir": server}});
    let mut command = agent_clis::command("claude", &home, &tmp, &work);
    command
        .env("ANTHROPIC_BASE_URL", fake.url())
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("CLAUDE_CODE_TMPDIR", &claude_tmp)
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .args(["-p", "where is target used?"])
        .args(["--output-format", "stream-json", "--verbose"])
        .args(["--model", "claude-opus-5-5"])
        .args(["--mcp-config", &config.to_string()])
        .args(["--allowedTools", tool]);
    let run = run_to_end(command, "claude", &fake).await;
    let result = of_type(&run.lines, "result");
    assert_eq!(result.len(), 1, "stderr: {}", run.stderr);
    assert_eq!(result[0]["result"], "Two pages read.");

    // What the model was handed, in the requests the fake recorded: the
    // second request carries the first call's result, the third both.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "one request per model turn");
    let results: Vec<Value> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{:#}", requests[2].body);
    for block in &results {
        assert_eq!(block["is_error"], Value::Null, "{block}");
    }
    let seen_first = read_by_model(&results[0]);
    assert_eq!(seen_first["total"], total, "{seen_first}");
    assert_eq!(seen_first["truncated"], true);
    assert_eq!(seen_first["nextCursor"], cursor.as_str());
    assert_eq!(locations(&seen_first["items"]), page_one);
    let headline = seen_first["headline"].as_str().unwrap();
    assert!(
        headline.contains(&format!("cursor=\"{cursor}\"")),
        "{headline}"
    );
    eprintln!(
        "claude's model saw page 1: {} of {total} items, {} bytes, cursor {cursor}; page 2: {} items",
        page_one.len(),
        results[0]["content"].to_string().len(),
        page_two.len()
    );
    let seen_second = read_by_model(&results[1]);
    assert_eq!(
        seen_second["offset"],
        page_one.len() as u64,
        "{seen_second}"
    );
    assert_eq!(locations(&seen_second["items"]), page_two);
    assert_eq!(seen_second["total"], total);
}
