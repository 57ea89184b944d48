//! The final `CallToolResult` as hosts read it: every tool's
//! `structuredContent` validates against its `outputSchema` (the official
//! SDK clients refuse it otherwise), a host that hands its model only
//! `structuredContent` finds the payload there, and a program's output
//! reads as one block per stream, labelled when there are several.

use std::sync::Arc;

use serde_json::{Value, json};
use weir_fixtures::host::{
    assert_structured_first_host_sees, check_output_schema, content_view, structured_first_view,
};
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{MemoryLog, Scheduler, SchedulerConfig, Tool};

use crate::support::{LineClient, LinesTool, ProgramTool};

/// The fixtures, `lines` and `program`, with a result limit of `limit`.
async fn client(limit: usize) -> LineClient {
    let mut tools: Vec<Arc<dyn Tool>> = weir_fixtures::fixture_tools();
    tools.push(Arc::new(LinesTool));
    tools.push(Arc::new(ProgramTool));
    let scheduler = Scheduler::start(
        Arc::new(MemoryLog::new()),
        tools,
        SchedulerConfig::default(),
    )
    .await
    .unwrap();
    let server = McpServer::new(
        scheduler,
        Arc::new(weir_fixtures::FixtureCatalog),
        ServerConfig {
            result_limit: limit,
            ..ServerConfig::default()
        },
    );
    let mut client = LineClient::over(server);
    client.initialize(json!({})).await;
    client
}

/// Calls `name` and returns its `CallToolResult`.
async fn call(client: &mut LineClient, id: i64, name: &str, arguments: Value) -> Value {
    let (_, response) = client
        .call(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await;
    assert!(response.get("error").is_none(), "{name}: {response}");
    response["result"].clone()
}

/// What a small program prints: three lines to stdout around one to stderr,
/// one of them with what JSON escapes.
fn program_writes() -> Value {
    json!([
        ["stdout", "first line\n"],
        ["stdout", "second \"quoted\" line\n"],
        ["stderr", "a warning\n"],
        ["stdout", "last line\n"],
    ])
}

const PRINTED: [&str; 4] = [
    "first line",
    "second \"quoted\" line",
    "a warning",
    "last line",
];

/// Arguments that make tool `name` succeed (or, for the ones that need a
/// client's model or user, fail as tools do); every listed tool needs one.
fn example(name: &str, program_run: &str, working_run: &str) -> Value {
    match name {
        "stream" => json!({"count": 3, "size": 12}),
        "lines" => json!({"count": 2}),
        "program" => json!({"writes": program_writes()}),
        "test_sampling" => json!({"prompt": "2+2?"}),
        "test_elicitation" => json!({"message": "who?"}),
        "json_schema_2020_12_tool" => json!({"name": "a", "email": "a@example.org"}),
        "runs_list" => json!({}),
        "runs_get" | "runs_events" | "runs_wait" => json!({"run_id": program_run}),
        "runs_cancel" => json!({"run_id": working_run, "reason": "test"}),
        "runs_artifact" => json!({"run_id": program_run, "name": "stdout.txt"}),
        "get_status" => json!({}),
        name if name.starts_with("test_") => json!({}),
        other => panic!("add an example call of the new tool {other} here"),
    }
}

/// Every tool the server lists, weir's own and the fixtures: what it
/// returns validates against the `outputSchema` it declares, checked as
/// the SDK clients check it; a tool that declares one answers without
/// error here, so each schema is really checked.
#[tokio::test]
async fn every_tools_structured_content_validates_against_its_output_schema() {
    let mut client = client(512 * 1024).await;
    let program = call(
        &mut client,
        1,
        "program",
        json!({"writes": program_writes()}),
    )
    .await;
    let program_run = program["structuredContent"]["output_uri"]
        .as_str()
        .unwrap()
        .trim_start_matches("weir://runs/")
        .to_owned();
    // A run still working when runs_cancel comes; its answer arrives
    // later, among the other calls' messages.
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "lines", "arguments": {"count": 1000, "pause_ms": 50}}}))
        .await;
    let working_run = loop {
        let result = call(
            &mut client,
            4,
            "runs_list",
            json!({"tool": "lines", "state": "working"}),
        )
        .await;
        if let Some(run_id) = result["structuredContent"]["runs"][0]["run_id"].as_str() {
            break run_id.to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };

    let (_, tools) = client.call(5, "tools/list", json!({})).await;
    let tools = tools["result"]["tools"].as_array().unwrap().clone();
    let mut checked = Vec::new();
    for (id, tool) in (10..).zip(&tools) {
        let name = tool["name"].as_str().unwrap();
        let result = call(
            &mut client,
            id,
            name,
            example(name, &program_run, &working_run),
        )
        .await;
        check_output_schema(tool, &result).unwrap();
        if tool.get("outputSchema").is_some() {
            assert_ne!(result["isError"], true, "{name}: {result}");
            checked.push(name.to_owned());
        }
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "get_status",
            "program",
            "runs_artifact",
            "runs_cancel",
            "runs_events",
            "runs_get",
            "runs_list",
            "stream"
        ]
    );
}

/// weir's own tools, read as a host that hands its model only
/// `structuredContent` (as JSON text): the payload is there, and it is
/// what the text block says too.
#[tokio::test]
async fn a_structured_first_host_finds_the_payload_of_weirs_own_tools() {
    let mut client = client(512 * 1024).await;
    let program = call(
        &mut client,
        1,
        "program",
        json!({"writes": program_writes()}),
    )
    .await;
    let uri = program["structuredContent"]["output_uri"].as_str().unwrap();
    let run = uri.trim_start_matches("weir://runs/").to_owned();

    let cases: [(&str, Value, Vec<&str>); 5] = [
        (
            "runs_list",
            json!({}),
            vec![run.as_str(), "program", "completed"],
        ),
        (
            "runs_get",
            json!({"run_id": run}),
            vec![run.as_str(), "program", "second \"quoted\" line"],
        ),
        ("runs_events", json!({"run_id": run}), PRINTED.to_vec()),
        (
            "runs_artifact",
            json!({"run_id": run, "name": "stdout.txt"}),
            vec![
                "first line\nsecond \"quoted\" line\nlast line\n",
                "stdout.txt",
            ],
        ),
        (
            "get_status",
            json!({}),
            vec!["weir", env!("CARGO_PKG_VERSION"), "program", "2025-11-25"],
        ),
    ];
    for (id, (name, arguments, payload)) in (10..).zip(cases) {
        let result = call(&mut client, id, name, arguments).await;
        assert_structured_first_host_sees(&result, &payload);
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap())
            .unwrap_or_else(|error| panic!("{name}: text is not JSON: {error}"));
        assert_eq!(
            text, result["structuredContent"],
            "{name}: text and structuredContent differ"
        );
    }
    // runs_cancel says which run it cancelled; an ended run is an error the
    // model reads in the text.
    let cancelled = call(&mut client, 20, "runs_cancel", json!({"run_id": run})).await;
    assert_eq!(cancelled["isError"], true);
    assert!(
        content_view(&cancelled).contains("has already ended"),
        "{cancelled}"
    );
}

/// A program's output, as both kinds of host read it: every printed line
/// is in the structured result (stdout and stderr apart) and in the
/// content, where each stream is one block, labelled since there are two,
/// in the order the program wrote them.
#[tokio::test]
async fn every_line_a_program_printed_reaches_the_model() {
    let mut client = client(512 * 1024).await;
    let result = call(
        &mut client,
        1,
        "program",
        json!({"writes": program_writes()}),
    )
    .await;
    assert_structured_first_host_sees(&result, &PRINTED);
    let structured = &result["structuredContent"];
    assert_eq!(
        structured["stdout"],
        "first line\nsecond \"quoted\" line\nlast line\n"
    );
    assert_eq!(structured["stderr"], "a warning\n");
    assert_eq!(structured["output_truncated"], false);
    assert_eq!(structured["exit_code"], 0);
    let texts: Vec<&str> = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "[stdout]\nfirst line\nsecond \"quoted\" line\n",
            "[stderr]\na warning\n",
            "[stdout]\nlast line\n",
            "[exit code 0]"
        ]
    );
    let view = content_view(&result);
    assert!(PRINTED.iter().all(|line| view.contains(line)), "{view}");
    assert!(!structured_first_view(&result).contains("[stdout]"));
}

/// Past the result limit, the output stops at a whole chunk in both forms,
/// and both say where the rest is.
#[tokio::test]
async fn a_cut_output_says_where_the_rest_is() {
    let mut client = client(300).await;
    let line = |i: usize| format!("{i:02} {}\n", "x".repeat(46));
    let writes: Vec<Value> = (0..10).map(|i| json!(["stdout", line(i)])).collect();
    let result = call(&mut client, 1, "program", json!({"writes": writes})).await;
    let structured = &result["structuredContent"];
    assert_eq!(structured["output_truncated"], true);
    let stdout = structured["stdout"].as_str().unwrap();
    assert!(!stdout.is_empty() && (0..10).map(line).collect::<String>().starts_with(stdout));
    assert!(stdout.len() < 300 / 2, "counted once: {}", stdout.len());
    let run = structured["output_uri"].as_str().unwrap();
    let content = result["content"].as_array().unwrap();
    assert_eq!(content[0]["text"], stdout);
    assert!(content[1]["text"].as_str().unwrap().contains(run));
    assert_eq!(content[2]["uri"], run);
    check_output_schema(
        &json!({"name": "program", "outputSchema": ProgramTool.info().output_schema}),
        &result,
    )
    .unwrap();
}
