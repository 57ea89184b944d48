//! Progress for clients that send only a progress token: a run's output,
//! counted, as `notifications/progress` (lib docs of `projection`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, Partial};
use weir_mcp::catalog::EmptyCatalog;
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{MemoryLog, RunContext, Scheduler, SchedulerConfig, Tool, ToolInfo};

use crate::support::LineClient;

/// Prints `lines` to "stdout", `pause_ms` apart, then sleeps `linger_ms`
/// before completing; reports no progress of its own, as `execute_code`
/// did not.
struct Printer;

#[async_trait]
impl Tool for Printer {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            "printer",
            "prints lines",
            json!({"type": "object", "properties": {
                "lines": {"type": "array", "items": {"type": "string"}},
                "pause_ms": {"type": "integer"},
                "linger_ms": {"type": "integer"}
            }}),
        )
    }

    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, weir_core::RunError> {
        let pause = Duration::from_millis(args["pause_ms"].as_u64().unwrap_or(0));
        for line in args["lines"].as_array().into_iter().flatten() {
            let _ = ctx
                .emit(Partial {
                    content: vec![Content::text(format!("{}\n", line.as_str().unwrap()))],
                    group: Some("stdout".into()),
                    ..Partial::default()
                })
                .await;
            tokio::time::sleep(pause).await;
        }
        tokio::time::sleep(Duration::from_millis(
            args["linger_ms"].as_u64().unwrap_or(0),
        ))
        .await;
        Ok(Completed::default())
    }
}

async fn client() -> LineClient {
    let scheduler = Scheduler::start(
        Arc::new(MemoryLog::new()),
        vec![Arc::new(Printer)],
        SchedulerConfig::default(),
    )
    .await
    .unwrap();
    let server = McpServer::new(scheduler, Arc::new(EmptyCatalog), ServerConfig::default());
    LineClient::over(server)
}

fn progress_params(notifications: &[Value]) -> Vec<Value> {
    notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"].clone())
        .collect()
}

#[tokio::test]
async fn a_progress_only_client_sees_each_line_as_progress() {
    let mut client = client().await;
    client.initialize(json!({})).await;
    let arguments = json!({"lines": ["compiling", "testing", "done"], "pause_ms": 30});
    let (notifications, response) = client
        .call(
            1,
            "tools/call",
            json!({"name": "printer", "arguments": arguments, "_meta": {"progressToken": "p"}}),
        )
        .await;
    assert!(response["result"].is_object(), "{response}");
    assert_eq!(
        progress_params(&notifications),
        [
            json!({"progressToken": "p", "progress": 1.0, "message": "compiling"}),
            json!({"progressToken": "p", "progress": 2.0, "message": "testing"}),
            json!({"progressToken": "p", "progress": 3.0, "message": "done"}),
        ]
    );

    // Partial results declared: the partials, and no counted progress.
    let mut client = self::client().await;
    client.initialize(json!({"partialResults": {}})).await;
    let meta = json!({"progressToken": "p", "partialResultToken": "r"});
    let (notifications, _) = client
        .call(
            1,
            "tools/call",
            json!({"name": "printer", "arguments": arguments, "_meta": meta}),
        )
        .await;
    let methods: Vec<&Value> = notifications.iter().map(|n| &n["method"]).collect();
    assert_eq!(methods, ["notifications/tools/partial_result"; 3]);
}

/// A burst of lines and then silence: the newest line goes out within the
/// rate limit's interval, not with the next event (here, the result a
/// second later).
#[tokio::test]
async fn the_newest_line_of_a_burst_does_not_wait_for_the_next_event() {
    let mut client = client().await;
    client.initialize(json!({})).await;
    let lines: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
    let started = Instant::now();
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "printer",
                "arguments": {"lines": lines, "linger_ms": 1_000},
                "_meta": {"progressToken": "p"}
            }}),
        )
        .await;
    loop {
        let message = client.next().await;
        assert_eq!(
            message["method"], "notifications/progress",
            "the burst's last line came no sooner than {message}"
        );
        if message["params"]["progress"] == 50.0 {
            assert_eq!(message["params"]["message"], "line 49");
            break;
        }
    }
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_millis(500),
        "the newest progress took {waited:?}"
    );
    assert_eq!(client.next().await["id"], 1);
}
