//! Anthropic Messages, as Claude Code reads it.

use serde_json::{Value, json};
use weir_fake_model::{Protocol, Turn};

use crate::support::{deltas, fake, post, stream, types};

fn request(stream: bool) -> Value {
    json!({
        "model": "claude-test", "max_tokens": 100, "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    })
}

#[tokio::test]
async fn text_streams_every_event_in_order() {
    let fake = fake([Turn::text("Hello there, world").streamed(deltas(3))]);
    let events = stream(&fake, "/v1/messages?beta=true", request(true)).await;

    assert_eq!(
        types(&events),
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    // Each event is named after its type, as the API does.
    for event in &events {
        assert_eq!(event.name.as_deref(), event.json()["type"].as_str());
    }
    let start = events[0].json();
    assert_eq!(start["message"]["model"], "claude-test");
    assert_eq!(start["message"]["role"], "assistant");
    assert_eq!(start["message"]["content"], json!([]));
    assert_eq!(
        events[1].json()["content_block"],
        json!({"type": "text", "text": ""})
    );
    let pieces: Vec<Value> = events[3..6]
        .iter()
        .map(|event| event.json()["delta"].clone())
        .collect();
    assert_eq!(
        pieces,
        [
            json!({"type": "text_delta", "text": "Hello "}),
            json!({"type": "text_delta", "text": "there,"}),
            json!({"type": "text_delta", "text": " world"}),
        ]
    );
    let end = events[7].json();
    assert_eq!(
        end["delta"],
        json!({"stop_reason": "end_turn", "stop_sequence": null})
    );
    assert!(end["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].protocol, Some(Protocol::Anthropic));
    assert_eq!(requests[0].path, "/v1/messages?beta=true");
    assert_eq!(requests[0].turn, Some(0));
}

#[tokio::test]
async fn a_tool_call_streams_its_input_as_json_pieces_and_stops_for_tool_use() {
    let fake = fake([Turn::ToolCall {
        text: Some("Let me run it.".into()),
        name: "Bash".into(),
        input: json!({"command": "echo hi", "description": "Say hi"}),
        stream: deltas(2),
    }]);
    let events = stream(&fake, "/v1/messages", request(true)).await;

    assert_eq!(
        types(&events),
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let tool = events[6].json();
    assert_eq!(tool["index"], 1);
    assert_eq!(tool["content_block"]["type"], "tool_use");
    assert_eq!(tool["content_block"]["name"], "Bash");
    assert_eq!(tool["content_block"]["input"], json!({}));
    assert!(
        tool["content_block"]["id"]
            .as_str()
            .unwrap()
            .starts_with("toolu_")
    );
    let json_text: String = events[8..10]
        .iter()
        .map(|event| {
            let delta = event.json()["delta"].clone();
            assert_eq!(delta["type"], "input_json_delta");
            delta["partial_json"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json_text).unwrap(),
        json!({"command": "echo hi", "description": "Say hi"})
    );
    assert_eq!(events[11].json()["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn thinking_streams_its_deltas_then_a_signature_then_the_text() {
    let fake = fake([Turn::thinking("Keep it short.", "Hi.").streamed(deltas(2))]);
    let events = stream(&fake, "/v1/messages", request(true)).await;
    let json: Vec<Value> = events.iter().map(|event| event.json()).collect();

    assert_eq!(
        json[1]["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(json[3]["delta"]["type"], "thinking_delta");
    assert_eq!(json[4]["delta"]["type"], "thinking_delta");
    let thinking = format!(
        "{}{}",
        json[3]["delta"]["thinking"].as_str().unwrap(),
        json[4]["delta"]["thinking"].as_str().unwrap()
    );
    assert_eq!(thinking, "Keep it short.");
    assert_eq!(json[5]["delta"]["type"], "signature_delta");
    assert!(!json[5]["delta"]["signature"].as_str().unwrap().is_empty());
    assert_eq!(json[6]["type"], "content_block_stop");
    assert_eq!(
        json[7]["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(json[7]["index"], 1);
}

#[tokio::test]
async fn without_stream_the_message_is_one_json_object_and_count_tokens_takes_no_turn() {
    let fake = fake([Turn::ToolCall {
        text: Some("Running.".into()),
        name: "Read".into(),
        input: json!({"file_path": "a.txt"}),
        stream: deltas(4),
    }]);
    let counted = post(&fake, "/v1/messages/count_tokens", request(false)).await;
    assert_eq!(counted.status(), 200);
    let counted: Value = counted.json().await.unwrap();
    assert!(counted["input_tokens"].as_u64().unwrap() > 0);

    let message: Value = post(&fake, "/v1/messages", request(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "Running."})
    );
    assert_eq!(message["content"][1]["type"], "tool_use");
    assert_eq!(
        message["content"][1]["input"],
        json!({"file_path": "a.txt"})
    );

    let turns: Vec<Option<usize>> = fake.requests().iter().map(|request| request.turn).collect();
    assert_eq!(turns, [None, Some(0)]);
}

#[tokio::test]
async fn an_error_turn_answers_the_api_error_shape_or_the_given_body() {
    let fake = fake([
        Turn::error(529, "too busy"),
        Turn::Error {
            status: 400,
            message: String::new(),
            body: Some(json!({"custom": true})),
        },
    ]);
    let first = post(&fake, "/v1/messages", request(true)).await;
    assert_eq!(first.status(), 529);
    assert_eq!(
        first.json::<Value>().await.unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "too busy"}})
    );
    let second = post(&fake, "/v1/messages", request(true)).await;
    assert_eq!(second.status(), 400);
    assert_eq!(
        second.json::<Value>().await.unwrap(),
        json!({"custom": true})
    );
}
