//! The server over a line transport, as a stdio client sees it.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn initialize_then_list_shows_streaming_and_run_tools() {
    let mut client = LineClient::memory().await;
    let init = client.initialize(json!({})).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object());
    let (_, listed) = client.call(1, "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().unwrap();
    let lines = tools.iter().find(|t| t["name"] == "lines").unwrap();
    assert_eq!(lines["annotations"]["streamingHint"], true);
    assert_eq!(lines["execution"]["taskSupport"], "optional");
    for name in [
        "runs_list",
        "runs_get",
        "runs_events",
        "runs_cancel",
        "runs_artifact",
        "get_status",
    ] {
        assert!(tools.iter().any(|t| t["name"] == name), "{name} missing");
    }
}

#[tokio::test]
async fn a_streaming_call_delivers_progress_partials_and_a_complete_result() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({"partialResults": {}})).await;
    let params = json!({"name": "lines", "arguments": {"count": 50}, "_meta": {"progressToken": "p1", "partialResultToken": "r1"}});
    let (notifications, response) = client.call(1, "tools/call", params).await;
    let (progress, partials) = check_stream(&notifications, 50);
    assert!(
        progress >= 1 && partials == 50,
        "progress {progress}, partials {partials}"
    );
    assert!(
        notifications
            .iter()
            .all(|n| n["params"]["progressToken"] == "p1"
                || n["params"]["partialResultToken"] == "r1")
    );
    let content = response["result"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 51, "every item and the summary");
    assert_eq!(content[49]["text"], "item 49");
    assert_eq!(content[50]["text"], "50 lines");
    assert_eq!(
        response["result"]["structuredContent"],
        json!({"count": 50})
    );
    assert!(response["result"].get("isError").is_none());
}

#[tokio::test]
async fn partials_go_only_to_clients_that_declared_them() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({})).await;
    let params =
        json!({"name": "lines", "arguments": {"count": 5}, "_meta": {"partialResultToken": "r1"}});
    let (notifications, response) = client.call(1, "tools/call", params).await;
    assert!(notifications.is_empty(), "{notifications:?}");
    assert_eq!(response["result"]["content"].as_array().unwrap().len(), 6);
}

#[tokio::test]
async fn a_result_over_the_limit_is_truncated_with_a_link_to_the_run() {
    let log: std::sync::Arc<dyn weir_runtime::EventLog> =
        std::sync::Arc::new(weir_runtime::MemoryLog::new());
    let server = server(log, 200).await;
    let (client_out, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_in) = tokio::io::duplex(1 << 16);
    tokio::spawn(weir_mcp::transport::stdio::serve_lines(
        server, server_in, server_out,
    ));
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut writer = client_out;
    let mut lines = tokio::io::BufReader::new(client_in).lines();
    writer
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"lines\",\"arguments\":{\"count\":100}}}\n")
        .await
        .unwrap();
    let response: serde_json::Value =
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let content = response["result"]["content"].as_array().unwrap();
    let link = content.last().unwrap();
    assert_eq!(link["type"], "resource_link");
    assert!(link["uri"].as_str().unwrap().starts_with("weir://runs/"));
    let note = &content[content.len() - 2]["text"];
    assert!(
        note.as_str().unwrap().contains("truncated at 200 bytes"),
        "{note}"
    );
    assert!(content.len() < 20);
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_the_server_keeps_serving() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({})).await;
    client.send_raw("{this is not json").await;
    let parse_error = client.next().await;
    assert_eq!(parse_error["error"]["code"], -32700);
    assert_eq!(parse_error["id"], serde_json::Value::Null);
    let (_, unknown_method) = client.call(2, "tools/frobnicate", json!({})).await;
    assert_eq!(unknown_method["error"]["code"], -32601);
    let (_, unknown_tool) = client.call(3, "tools/call", json!({"name": "nope"})).await;
    assert_eq!(unknown_tool["error"]["code"], -32602);
    assert!(
        unknown_tool["error"]["message"]
            .as_str()
            .unwrap()
            .contains("available tools: json_schema_2020_12_tool, lines, test_audio_content")
    );
    let (_, wrong_type) = client
        .call(
            4,
            "tools/call",
            json!({"name": "lines", "arguments": {"count": "many"}}),
        )
        .await;
    assert_eq!(wrong_type["result"]["isError"], true);
    assert_eq!(
        wrong_type["result"]["content"][0]["text"],
        "invalid arguments: arguments.count must be an integer, got a string"
    );
    let (_, bad_params) = client
        .call(5, "tools/call", json!({"name": "lines", "arguments": [1]}))
        .await;
    assert_eq!(bad_params["error"]["code"], -32602);
    let (_, pong) = client.call(6, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
}

#[tokio::test]
async fn an_oversized_message_is_refused_and_the_next_one_served() {
    let mut client = LineClient::memory().await;
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(5 * 1024 * 1024)
    );
    client.send_raw(&huge).await;
    let refused = client.next().await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("larger than"),
        "{refused}"
    );
    let (_, pong) = client.call(2, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
}

#[tokio::test]
async fn notifications_cancelled_ends_the_run_as_canceled_without_a_response() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lines", "arguments": {"count": 1000, "pause_ms": 20}, "_meta": {"progressToken": 1}}}))
        .await;
    // Wait until it is running, then cancel it.
    let first = client.next().await;
    assert_eq!(first["method"], "notifications/progress");
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}})).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (_, listed) = client
        .call(
            2,
            "tools/call",
            json!({"name": "runs_list", "arguments": {}}),
        )
        .await;
    let run = &listed["result"]["structuredContent"]["runs"][0];
    assert_eq!(run["state"], "canceled", "{listed}");
    let (_, events) = client
        .call(3, "tools/call", json!({"name": "runs_events", "arguments": {"run_id": run["run_id"], "from": 0, "limit": 1000}}))
        .await;
    let events = events["result"]["structuredContent"]["events"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(events.last().unwrap()["reason"], "user pressed stop");
    // Request 1 got no response; everything after it did, in order.
    let (_, pong) = client.call(4, "ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));
}

#[tokio::test]
async fn a_task_is_created_polled_and_its_result_fetched() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({"tasks": {}})).await;
    let (_, created) = client
        .call(1, "tools/call", json!({"name": "lines", "arguments": {"count": 20, "pause_ms": 5}, "task": {"ttl": 60000}}))
        .await;
    let task = &created["result"]["task"];
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(task["status"], "working");
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    let (_, got) = client
        .call(2, "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(got["result"]["taskId"], task_id.as_str());
    let (_, result) = client
        .call(3, "tasks/result", json!({"taskId": task_id}))
        .await;
    assert_eq!(result["result"]["content"].as_array().unwrap().len(), 21);
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let (_, done) = client
        .call(4, "tasks/get", json!({"taskId": task_id}))
        .await;
    assert_eq!(done["result"]["status"], "completed");
    let (_, listed) = client.call(5, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["taskId"], task_id.as_str());
    let (_, late_cancel) = client
        .call(6, "tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_eq!(late_cancel["error"]["code"], -32602);
    let (_, unknown) = client.call(7, "tasks/get", json!({"taskId": "nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602);
}

#[tokio::test]
async fn stateless_requests_are_served_beside_the_session() {
    let mut client = LineClient::memory().await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let (_, discovered) = client
        .call(1, "server/discover", json!({"_meta": meta}))
        .await;
    let result = &discovered["result"];
    assert_eq!(result["supportedVersions"][0], "2026-07-28");
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string());
    let (_, listed) = client.call(2, "tools/list", json!({"_meta": meta})).await;
    assert_eq!(listed["result"]["resultType"], "complete");
    let (_, called) = client
        .call(
            3,
            "tools/call",
            json!({"name": "lines", "arguments": {"count": 2}, "_meta": meta}),
        )
        .await;
    assert_eq!(called["result"]["resultType"], "complete");
    let unsupported = json!({"io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}});
    let (_, refused) = client
        .call(4, "tools/list", json!({"_meta": unsupported}))
        .await;
    assert_eq!(refused["error"]["code"], -32022);
    assert_eq!(refused["error"]["data"]["requested"], "2099-01-01");
}

#[tokio::test]
async fn stateless_clients_with_the_tasks_extension_get_a_task_with_the_outcome_inlined() {
    let mut client = LineClient::memory().await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    let (_, created) = client
        .call(
            1,
            "tools/call",
            json!({"name": "lines", "arguments": {"count": 3}, "_meta": meta}),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut status = String::new();
    for attempt in 0..100 {
        let (_, got) = client
            .call(
                10 + attempt,
                "tasks/get",
                json!({"taskId": task_id, "_meta": meta}),
            )
            .await;
        status = got["result"]["status"].as_str().unwrap().to_owned();
        if status == "completed" {
            assert_eq!(
                got["result"]["result"]["content"].as_array().unwrap().len(),
                4
            );
            assert!(got["result"]["ttlMs"].is_u64() || got["result"]["ttlMs"].is_null());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, "completed");
    let (_, gone) = client
        .call(
            200,
            "tasks/result",
            json!({"taskId": task_id, "_meta": meta}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32601);
}

#[tokio::test]
async fn a_tool_can_ask_the_client_and_use_the_answer() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({"sampling": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "test_sampling", "arguments": {"prompt": "2+2?"}}}))
        .await;
    let question = client.next().await;
    assert_eq!(question["method"], "sampling/createMessage", "{question}");
    assert_eq!(question["params"]["messages"][0]["content"]["text"], "2+2?");
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m", "stopReason": "endTurn"});
    client
        .send(json!({"jsonrpc": "2.0", "id": question["id"], "result": answer}))
        .await;
    let response = client.next().await;
    assert_eq!(response["id"], 1);
    assert_eq!(response["result"]["content"][0]["text"], "LLM response: 4");
}

#[tokio::test]
async fn asking_a_client_without_the_capability_fails_the_call_with_the_reason() {
    let mut client = LineClient::memory().await;
    client.initialize(json!({})).await;
    let (notifications, response) = client
        .call(
            1,
            "tools/call",
            json!({"name": "test_elicitation", "arguments": {"message": "who are you?"}}),
        )
        .await;
    assert!(notifications.is_empty());
    assert_eq!(response["result"]["isError"], true);
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("no client can answer") && text.contains("Elicitation"),
        "{text}"
    );
}
