//! OpenAI Responses, as codex reads it.

use serde_json::{Value, json};
use weir_fake_model::{Protocol, Turn};

use crate::support::{deltas, fake, post, stream, types};

fn request(stream: bool) -> Value {
    json!({"model": "gpt-test", "stream": stream, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]})
}

#[tokio::test]
async fn text_streams_every_event_in_order_with_sequence_numbers() {
    let fake = fake([Turn::text("Hi! From the fake").streamed(deltas(2))]);
    let events = stream(&fake, "/v1/responses", request(true)).await;

    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (number, event) in events.iter().enumerate() {
        let json = event.json();
        assert_eq!(event.name.as_deref(), json["type"].as_str());
        assert_eq!(json["sequence_number"], number);
    }
    let json: Vec<Value> = events.iter().map(|event| event.json()).collect();
    assert_eq!(json[0]["response"]["status"], "in_progress");
    assert_eq!(json[2]["item"]["type"], "message");
    assert_eq!(json[2]["item"]["content"], json!([]));
    let item_id = json[2]["item"]["id"].clone();
    assert_eq!(json[4]["delta"], "Hi! From ");
    assert_eq!(json[5]["delta"], "the fake");
    assert_eq!(json[4]["item_id"], item_id);
    assert_eq!(json[6]["text"], "Hi! From the fake");
    assert_eq!(
        json[8]["item"]["content"],
        json!([{"type": "output_text", "text": "Hi! From the fake", "annotations": []}])
    );
    let completed = &json[9]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["model"], "gpt-test");
    assert_eq!(completed["output"][0], json[8]["item"]);
    let usage = &completed["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap())
    );
    assert_eq!(fake.requests()[0].protocol, Some(Protocol::OpenAiResponses));
}

#[tokio::test]
async fn a_function_call_streams_its_arguments_and_a_string_input_is_a_custom_tool_call() {
    let fake = fake([
        Turn::tool_call("exec_command", json!({"cmd": "ls -la"})).streamed(deltas(3)),
        Turn::tool_call("apply_patch", json!("*** Begin Patch\n*** End Patch\n")),
    ]);
    let events = stream(&fake, "/v1/responses", request(true)).await;
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let json: Vec<Value> = events.iter().map(|event| event.json()).collect();
    let added = &json[2]["item"];
    assert_eq!(added["type"], "function_call");
    assert_eq!(added["name"], "exec_command");
    assert_eq!(added["arguments"], "");
    let arguments: String = json[3..6]
        .iter()
        .map(|event| event["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({"cmd": "ls -la"})
    );
    assert_eq!(json[6]["arguments"], arguments);
    let done = &json[7]["item"];
    assert_eq!(done["call_id"], added["call_id"]);
    assert!(done["call_id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(done["arguments"], arguments);
    assert_eq!(done["status"], "completed");

    let events = stream(&fake, "/v1/responses", request(true)).await;
    let done: Vec<Value> = events
        .iter()
        .map(|event| event.json())
        .filter(|json| json["type"] == "response.output_item.done")
        .collect();
    assert_eq!(done[0]["item"]["type"], "custom_tool_call");
    assert_eq!(done[0]["item"]["name"], "apply_patch");
    assert_eq!(done[0]["item"]["input"], "*** Begin Patch\n*** End Patch\n");
    assert!(types(&events).contains(&"response.custom_tool_call_input.delta".to_owned()));
}

#[tokio::test]
async fn thinking_is_a_reasoning_item_with_a_summary() {
    let fake = fake([Turn::thinking("Plan: greet.", "Hello!")]);
    let events = stream(&fake, "/v1/responses", request(true)).await;
    assert_eq!(
        types(&events)[2..9],
        [
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
        ]
    );
    let completed = events.last().unwrap().json();
    assert_eq!(
        completed["response"]["output"][0]["summary"],
        json!([{"type": "summary_text", "text": "Plan: greet."}])
    );
    assert_eq!(completed["response"]["output"][1]["type"], "message");
}

#[tokio::test]
async fn without_stream_the_response_is_one_object_and_errors_use_the_openai_shape() {
    let fake = fake([Turn::text("Whole."), Turn::error(400, "bad request")]);
    let response: Value = post(&fake, "/v1/responses", request(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["content"][0]["text"], "Whole.");

    let error = post(&fake, "/v1/responses", request(true)).await;
    assert_eq!(error.status(), 400);
    assert_eq!(
        error.json::<Value>().await.unwrap(),
        json!({"error": {"message": "bad request", "type": "invalid_request_error", "code": null}})
    );
}

/// Codex's deferred MCP tools: the model first calls codex's own tool
/// search (a `tool_search_call` codex runs, `execution: "client"`), then a
/// tool of the namespace it loaded (`function_call` with `namespace`).
#[tokio::test]
async fn a_tool_search_is_a_client_tool_search_call_and_a_namespaced_call_names_its_namespace() {
    let fake = fake([
        Turn::ToolSearch {
            query: "run a program".into(),
            limit: Some(5),
        },
        Turn::namespaced_call(
            "mcp__weir",
            "execute_code",
            json!({"language": "python", "code": "print(1)"}),
        )
        .streamed(deltas(2)),
    ]);
    let events = stream(&fake, "/v1/responses", request(true)).await;
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let json: Vec<Value> = events.iter().map(|event| event.json()).collect();
    assert_eq!(json[2]["item"]["status"], "in_progress");
    let search = &json[3]["item"];
    assert_eq!(search["type"], "tool_search_call");
    assert_eq!(search["execution"], "client");
    assert_eq!(search["status"], "completed");
    assert!(search["call_id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(
        search["arguments"],
        json!({"query": "run a program", "limit": 5})
    );
    assert_eq!(json[4]["response"]["output"][0], *search);

    let events = stream(&fake, "/v1/responses", request(true)).await;
    let json: Vec<Value> = events.iter().map(|event| event.json()).collect();
    assert_eq!(
        json.iter()
            .filter(|event| event["type"] == "response.function_call_arguments.delta")
            .count(),
        2
    );
    let done = json
        .iter()
        .find(|event| event["type"] == "response.output_item.done")
        .unwrap();
    let call = &done["item"];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["namespace"], "mcp__weir");
    assert_eq!(call["name"], "execute_code");
    assert_eq!(
        serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(),
        json!({"language": "python", "code": "print(1)"})
    );
}

/// The protocols without namespaces get the flat name, and a tool search as
/// a call of a tool named `tool_search`.
#[tokio::test]
async fn elsewhere_a_namespaced_call_is_flat_and_a_tool_search_is_a_plain_call() {
    let fake = fake([
        Turn::namespaced_call("mcp__weir", "list_languages", json!({})),
        Turn::tool_search("languages"),
    ]);
    let chat = json!({"model": "m", "stream": false, "messages": []});
    let first: Value = post(&fake, "/v1/chat/completions", chat.clone())
        .await
        .json()
        .await
        .unwrap();
    let call = &first["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "mcp__weir__list_languages", "{first}");
    let second: Value = post(&fake, "/v1/chat/completions", chat)
        .await
        .json()
        .await
        .unwrap();
    let call = &second["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "tool_search", "{second}");
    assert_eq!(
        serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(),
        json!({"query": "languages"})
    );
}
