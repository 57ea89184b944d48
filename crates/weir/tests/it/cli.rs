//! The `weir` binary, driven as a user would, over a data directory that a
//! real scheduler wrote.

use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, FailureCode, Progress, RunError};
use weir_runtime::{EventLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

/// Counts to `n`, a progress event every `pause_ms`; fails when `fail` is set.
struct Count;

#[async_trait]
impl Tool for Count {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("count", "counts", json!({"type": "object"}))
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let n = args["n"].as_u64().unwrap_or(3);
        for i in 1..=n {
            tokio::time::sleep(Duration::from_millis(
                args["pause_ms"].as_u64().unwrap_or(0),
            ))
            .await;
            let _ = ctx
                .emit(Progress {
                    progress: i as f64,
                    total: Some(n as f64),
                    message: Some(format!("step {i}")),
                    ..Default::default()
                })
                .await;
        }
        if args["fail"].as_bool() == Some(true) {
            return Err(RunError::new(FailureCode::ToolError, "asked to fail")
                .with_remediation("do not ask"));
        }
        Ok(Completed {
            content: vec![Content::text(format!("counted to {n}"))],
            structured: None,
        })
    }
}

fn weir(data_dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

async fn scheduler(dir: &std::path::Path) -> Scheduler {
    let log = SqliteLog::open(dir.join("weir.db"), SqliteOptions::default()).unwrap();
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    Scheduler::start(Arc::new(log), vec![Arc::new(Count)], config)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_events_describe_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = scheduler(dir.path()).await;
    let ok = scheduler
        .submit("count", json!({"n": 2}), RunOptions::default())
        .await
        .unwrap();
    let ok_id = ok.run_id().to_string();
    ok.finished().await.unwrap();
    let bad = scheduler
        .submit(
            "count",
            json!({"n": 1, "fail": true}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let bad_id = bad.run_id().to_string();
    bad.finished().await.unwrap();

    let list = weir(dir.path(), &["runs", "list"]);
    assert!(list.status.success());
    let table = stdout(&list);
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].starts_with("ID"), "{table}");
    assert!(
        rows[1].starts_with(&bad_id) && rows[1].contains("failed"),
        "{table}"
    );
    assert!(
        rows[2].starts_with(&ok_id) && rows[2].contains("completed"),
        "{table}"
    );

    let json: Value = serde_json::from_str(&stdout(&weir(
        dir.path(),
        &["runs", "list", "--state", "completed", "--json"],
    )))
    .unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["run_id"], ok_id.as_str());
    assert_eq!(json[0]["events"], 4);

    let show = stdout(&weir(dir.path(), &["runs", "show", &bad_id]));
    assert!(show.contains("state     failed"), "{show}");
    assert!(
        show.contains("outcome   tool_error: asked to fail (do not ask)"),
        "{show}"
    );

    let events = stdout(&weir(dir.path(), &["runs", "events", &ok_id]));
    let types: Vec<&str> = events
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    assert_eq!(
        types,
        ["started", "progress", "progress", "completed"],
        "{events}"
    );
    assert!(events.contains("1/2 step 1"), "{events}");

    assert_eq!(
        String::from_utf8_lossy(&weir(dir.path(), &["runs", "events", &ok_id]).stderr),
        ""
    );
    let paged = weir(
        dir.path(),
        &[
            "runs", "events", &ok_id, "--from", "1", "--limit", "2", "--json",
        ],
    );
    // The page is not the whole run: stderr says what is left and where.
    assert_eq!(
        String::from_utf8_lossy(&paged.stderr),
        format!("weir: 1 more event: weir runs events {ok_id} --from 3\n")
    );
    let page = stdout(&paged);
    let seqs: Vec<u64> = page
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_follows_a_live_run_from_another_process_and_exits_with_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = scheduler(dir.path()).await;
    let run = scheduler
        .submit(
            "count",
            json!({"n": 10, "pause_ms": 50}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let id = run.run_id().to_string();
    let path = dir.path().to_path_buf();
    let tail = tokio::task::spawn_blocking(move || weir(&path, &["runs", "tail", &id, "--json"]));
    run.finished().await.unwrap();
    let output = tail.await.unwrap();
    assert_eq!(output.status.code(), Some(0));
    let seqs: Vec<u64> = stdout(&output)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (0..12).collect::<Vec<_>>());

    let failing = scheduler
        .submit(
            "count",
            json!({"n": 1, "fail": true}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let id = failing.run_id().to_string();
    failing.finished().await.unwrap();
    assert_eq!(
        weir(dir.path(), &["runs", "tail", &id]).status.code(),
        Some(1)
    );
}

#[test]
fn mistakes_get_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = weir(dir.path(), &["runs", "list"]);
    assert_eq!(missing.status.code(), Some(1));
    let message = String::from_utf8(missing.stderr).unwrap();
    assert!(
        message.starts_with("weir: no runs stored in") && message.contains("--data-dir"),
        "{message}"
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let log = SqliteLog::open(dir.path().join("weir.db"), SqliteOptions::default()).unwrap();
        log.list_runs(&Default::default()).await.unwrap();
    });
    let unknown = weir(dir.path(), &["runs", "show", "nope"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        String::from_utf8(unknown.stderr)
            .unwrap()
            .contains("no run nope: list runs with `weir runs list`")
    );
    let bad_id = weir(dir.path(), &["runs", "show", "../etc"]);
    assert_eq!(
        bad_id.status.code(),
        Some(2),
        "clap rejects it as a usage error"
    );
    assert!(
        String::from_utf8(bad_id.stderr)
            .unwrap()
            .contains("invalid run id")
    );
}

/// `weir serve --stdio` answers the same whether its stdout is a pipe (put
/// on the runtime, non-blocking) or a file (written through the blocking
/// pool). Requests sent at once are answered as each is done, so the
/// answers are compared by id, not by order (JSON-RPC promises none).
#[test]
fn serve_stdio_answers_into_a_pipe_and_into_a_file_alike() {
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("requests.jsonl");
    std::fs::write(
        &requests,
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            "\n",
        ),
    )
    .unwrap();
    let serve = |stdout: Stdio| {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--stdio", "--memory", "--no-exec"])
            .stdin(std::fs::File::open(&requests).unwrap())
            .stdout(stdout)
            .stderr(Stdio::null())
            .output()
            .unwrap()
    };
    let answers = |text: &str| -> Vec<(i64, bool)> {
        let mut answers: Vec<_> = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .map(|reply| (reply["id"].as_i64().unwrap(), reply["result"].is_object()))
            .collect();
        answers.sort();
        answers
    };
    let piped = serve(Stdio::piped());
    assert!(piped.status.success());
    let into_file = dir.path().join("out.jsonl");
    let filed = serve(std::fs::File::create(&into_file).unwrap().into());
    assert!(filed.status.success());
    let expected = vec![(1, true), (2, true)];
    assert_eq!(answers(&stdout(&piped)), expected);
    assert_eq!(
        answers(&std::fs::read_to_string(&into_file).unwrap()),
        expected
    );
}
