//! Gemini, as the Gemini CLI reads it.

use serde_json::{Value, json};
use weir_fake_model::{Protocol, Turn};

use crate::support::{deltas, fake, post, stream};

const STREAM: &str = "/v1beta/models/gemini-test:streamGenerateContent?alt=sse";

fn request() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
}

/// The parts of each chunk's first candidate.
fn parts(chunks: &[Value]) -> Vec<Value> {
    chunks
        .iter()
        .map(|chunk| chunk["candidates"][0]["content"]["parts"].clone())
        .collect()
}

#[tokio::test]
async fn text_streams_one_part_per_chunk_then_the_finish_and_usage() {
    let fake = fake([Turn::text("Hi! (scripted)").streamed(deltas(2))]);
    let events = stream(&fake, STREAM, request()).await;
    assert!(events.iter().all(|event| event.name.is_none()));
    let chunks: Vec<Value> = events.iter().map(|event| event.json()).collect();

    assert_eq!(chunks.len(), 3);
    assert_eq!(
        parts(&chunks),
        [
            json!([{"text": "Hi! (sc"}]),
            json!([{"text": "ripted)"}]),
            json!([])
        ]
    );
    for chunk in &chunks[..2] {
        assert_eq!(chunk["candidates"][0]["content"]["role"], "model");
        assert!(chunk["candidates"][0].get("finishReason").is_none());
        assert_eq!(chunk["modelVersion"], "gemini-test");
    }
    assert_eq!(chunks[2]["candidates"][0]["finishReason"], "STOP");
    let usage = &chunks[2]["usageMetadata"];
    assert!(usage["promptTokenCount"].as_u64().unwrap() > 0);
    assert!(usage["candidatesTokenCount"].as_u64().unwrap() > 0);

    let request = &fake.requests()[0];
    assert_eq!(request.protocol, Some(Protocol::Gemini));
    assert_eq!(request.turn, Some(0));
}

#[tokio::test]
async fn a_function_call_is_one_whole_part_after_the_text_and_thoughts_are_marked() {
    let fake = fake([
        Turn::ToolCall {
            text: Some("Reading.".into()),
            name: "read_file".into(),
            input: json!({"file_path": "notes.txt"}),
            stream: deltas(2),
        },
        Turn::thinking("Think.", "Answer."),
    ]);
    let chunks: Vec<Value> = stream(&fake, STREAM, request())
        .await
        .iter()
        .map(|event| event.json())
        .collect();
    let first = parts(&chunks);
    assert_eq!(first.len(), 4);
    assert_eq!(first[0], json!([{"text": "Read"}]));
    assert_eq!(first[1], json!([{"text": "ing."}]));
    let call = &first[2][0]["functionCall"];
    assert_eq!(call["name"], "read_file");
    assert_eq!(call["args"], json!({"file_path": "notes.txt"}));
    // Function calls end with STOP too, as the API does.
    assert_eq!(chunks[3]["candidates"][0]["finishReason"], "STOP");

    let chunks: Vec<Value> = stream(&fake, STREAM, request())
        .await
        .iter()
        .map(|event| event.json())
        .collect();
    assert_eq!(
        parts(&chunks)[..2],
        [
            json!([{"text": "Think.", "thought": true}]),
            json!([{"text": "Answer."}])
        ]
    );
}

#[tokio::test]
async fn the_model_router_gets_json_for_its_schema_and_takes_no_turn() {
    let fake = fake([Turn::text("Routed.")]);
    // The Gemini CLI's router request (`auto` model).
    let router = json!({
        "contents": [{"role": "user", "parts": [{"text": "say hi"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "OBJECT", "properties": {
                "complexity_reasoning": {"type": "STRING"},
                "complexity_score": {"type": "INTEGER"},
            }, "required": ["complexity_reasoning", "complexity_score"]},
        },
    });
    let answer: Value = post(&fake, "/v1beta/models/gemini-lite:generateContent", router)
        .await
        .json()
        .await
        .unwrap();
    let text = answer["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    let routed: Value = serde_json::from_str(text).unwrap();
    assert!(routed["complexity_reasoning"].is_string());
    assert!(routed["complexity_score"].is_i64());

    // The scripted turn is still there for the real request.
    let chunks = stream(&fake, STREAM, request()).await;
    assert_eq!(
        chunks[0].json()["candidates"][0]["content"]["parts"][0]["text"],
        "Routed."
    );
    let turns: Vec<Option<usize>> = fake.requests().iter().map(|request| request.turn).collect();
    assert_eq!(turns, [None, Some(0)]);
}

#[tokio::test]
async fn generate_content_and_a_stream_without_sse_answer_json_and_count_tokens_takes_no_turn() {
    let fake = fake([
        Turn::text("Whole answer.").streamed(deltas(2)),
        Turn::text("As an array.").streamed(deltas(2)),
    ]);
    let count: Value = post(&fake, "/v1beta/models/m:countTokens", request())
        .await
        .json()
        .await
        .unwrap();
    assert!(count["totalTokens"].as_u64().unwrap() > 0);

    let whole: Value = post(&fake, "/v1beta/models/m:generateContent", request())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        whole["candidates"][0]["content"]["parts"],
        json!([{"text": "Whole answer."}])
    );
    assert_eq!(whole["candidates"][0]["finishReason"], "STOP");

    let array: Value = post(&fake, "/v1beta/models/m:streamGenerateContent", request())
        .await
        .json()
        .await
        .unwrap();
    let chunks = array.as_array().unwrap();
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[2]["candidates"][0]["finishReason"], "STOP");
}

#[tokio::test]
async fn an_error_turn_answers_the_gemini_error_shape() {
    let fake = fake([Turn::error(400, "scripted bad request")]);
    let response = post(&fake, STREAM, request()).await;
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"error": {"code": 400, "message": "scripted bad request", "status": "INVALID_ARGUMENT"}})
    );
}
