//! Issue 25, item 1: the in-process server a tool offers the client it
//! runs (`agent_run`'s `weir_tools`) answers with this crate's own
//! handlers. Its `tools/list` is the real server's for the offered tools,
//! entry for entry (names, descriptions, input and output schemas, and
//! the rest), and a call of one is a child run of the offering run whose
//! result is the one `/mcp` gives for the same call (streamed text
//! merged, text fields, a resource in MCP's form).

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, RunError};
use weir_mcp::catalog::EmptyCatalog;
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{
    InProcessSession, MemoryLog, RunContext, Scheduler, SchedulerConfig, Tool, ToolInfo,
};

use crate::support::{LineClient, LinesTool, ProgramTool};

/// Offers `tools` (by name) to an in-process client and hands it
/// `messages`; its result is the answers, in order (`null` for none).
struct Offer(Arc<OnceLock<McpServer>>);

#[async_trait]
impl Tool for Offer {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            "offer",
            "offers tools in process",
            json!({"type": "object"}),
        )
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let names: Vec<&str> = args["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|name| name.as_str().unwrap())
            .collect();
        let offered = ctx
            .callable_tools()
            .into_iter()
            .filter(|tool| names.contains(&tool.name.as_str()))
            .collect();
        let server = self
            .0
            .get()
            .expect("the server is set")
            .in_process(ctx, offered);
        let mut answers = Vec::new();
        for message in args["messages"].as_array().unwrap() {
            answers.push(server.handle(message.clone()).await.unwrap_or(Value::Null));
        }
        Ok(Completed {
            content: Vec::new(),
            structured: Some(json!({ "answers": answers })),
        })
    }
}

/// A server with `offer`, `lines`, `program` and the conformance tools,
/// and a client of it, initialized.
async fn client() -> LineClient {
    let slot = Arc::new(OnceLock::new());
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(Offer(slot.clone())),
        Arc::new(LinesTool),
        Arc::new(ProgramTool),
    ];
    tools.extend(weir_fixtures::conformance_tools());
    let log = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log, tools, SchedulerConfig::default())
        .await
        .unwrap();
    let server = McpServer::new(scheduler, Arc::new(EmptyCatalog), ServerConfig::default());
    slot.set(server.clone()).ok().unwrap();
    let mut client = LineClient::over(server);
    client.initialize(json!({})).await;
    client
}

/// The in-process answers to `messages`, with `tools` offered.
async fn offer(client: &mut LineClient, id: i64, tools: &[&str], messages: Value) -> Vec<Value> {
    let params = json!({"name": "offer", "arguments": {"tools": tools, "messages": messages}});
    let (_, response) = client.call(id, "tools/call", params).await;
    let answers = &response["result"]["structuredContent"]["answers"];
    answers
        .as_array()
        .unwrap_or_else(|| panic!("{response:#}"))
        .clone()
}

/// `value` with each run's id in a `weir://runs/ID` URI left out: two
/// runs of one call differ in nothing else.
fn without_run_ids(value: &Value) -> String {
    let text = value.to_string();
    let mut parts = text.split("weir://runs/");
    let mut out = parts.next().unwrap_or_default().to_owned();
    for part in parts {
        out.push_str("weir://runs/RUN");
        out.push_str(part.trim_start_matches(|c: char| c.is_ascii_hexdigit()));
    }
    out
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn the_in_process_tools_list_is_the_real_servers_for_the_offered_tools() {
    let mut client = client().await;
    let (_, real) = client.call(1, "tools/list", json!({})).await;
    let real = real["result"]["tools"].as_array().unwrap().clone();
    let offered = ["program", "lines", "test_embedded_resource"];
    let answers = offer(
        &mut client,
        2,
        &offered,
        json!([
            request(1, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2"}})),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            request(2, "tools/list", json!({})),
            request(3, "resources/list", json!({})),
        ]),
    )
    .await;
    let initialized = &answers[0]["result"];
    assert_eq!(
        initialized["protocolVersion"], "2025-06-18",
        "{initialized:#}"
    );
    assert_eq!(
        initialized["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    assert_eq!(initialized["serverInfo"]["name"], "weir");
    assert_eq!(answers[1], Value::Null, "a notification has no answer");
    let listed = answers[2]["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = listed
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = real
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .filter(|name| offered.contains(name))
        .collect();
    expected.sort_unstable();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected);
    for tool in listed {
        let same = real
            .iter()
            .find(|real| real["name"] == tool["name"])
            .unwrap();
        // Name, description, inputSchema, outputSchema and the rest.
        assert_eq!(tool, same);
    }
    assert!(listed.iter().any(|tool| tool.get("outputSchema").is_some()));
    assert_eq!(answers[3]["error"]["code"], -32601, "{:#}", answers[3]);
}

#[tokio::test]
async fn an_in_process_call_is_a_child_run_answered_as_mcp_answers_it() {
    let mut client = client().await;
    let calls = [
        json!({"name": "program", "arguments": {"writes": [["stdout", "one\n"], ["stderr", "oops\n"], ["stdout", "two\n"]]}}),
        json!({"name": "test_embedded_resource", "arguments": {}}),
        json!({"name": "lines", "arguments": {"count": 3}}),
    ];
    let mut messages: Vec<Value> = calls
        .iter()
        .zip(1..)
        .map(|(call, id)| request(id, "tools/call", call.clone()))
        .collect();
    messages.push(request(
        9,
        "tools/call",
        json!({"name": "offer", "arguments": {}}),
    ));
    messages.push(request(
        10,
        "tools/call",
        json!({"name": "lines", "arguments": {"count": "x"}}),
    ));
    let answers = offer(
        &mut client,
        1,
        &["program", "test_embedded_resource", "lines"],
        json!(messages),
    )
    .await;
    for (call, (answer, id)) in calls.iter().zip(answers.iter().zip(10..)) {
        let (_, real) = client.call(id, "tools/call", call.clone()).await;
        assert_eq!(
            without_run_ids(&answer["result"]),
            without_run_ids(&real["result"]),
            "{call}"
        );
    }
    let unknown = &answers[3]["error"];
    assert_eq!(unknown["code"], -32602, "{unknown:#}");
    let message = unknown["message"].as_str().unwrap();
    assert!(
        message.contains("offer") && message.contains("lines"),
        "{message}"
    );
    let invalid = &answers[4]["result"];
    assert_eq!(invalid["isError"], true, "{invalid:#}");
    // Each call was a child run of the offering run.
    let (_, runs) = client
        .call(
            20,
            "tools/call",
            json!({"name": "runs_list", "arguments": {"limit": 20}}),
        )
        .await;
    let runs = runs["result"]["structuredContent"]["runs"]
        .as_array()
        .unwrap()
        .clone();
    let parent = runs.iter().find(|run| run["tool"] == "offer").unwrap();
    let children: Vec<&str> = runs
        .iter()
        .filter(|run| run["parent"] == parent["run_id"])
        .map(|run| run["tool"].as_str().unwrap())
        .collect();
    assert_eq!(children.len(), 3, "{runs:#?}");
    for tool in ["program", "test_embedded_resource", "lines"] {
        assert!(children.contains(&tool), "{children:?}");
    }
}
